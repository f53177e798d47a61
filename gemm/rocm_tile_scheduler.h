// ROCm gfx942 tile scheduler: which output tile and which K blocks a GEMM workgroup computes.
// Plain constexpr C++ with no HIP include (HIP compiles constexpr functions for host and device), so
// the kernel, the launcher and the host test tests/rocm/test_tile_scheduler.py share one definition.
//
// Hardware fact: an MI300X is 8 XCDs (38 CUs each), each with its own L2, and a dispatch deals its
// workgroups to the XCDs round-robin in linear block order: block 0 to XCD 0, block 1 to XCD 1, ...,
// block 8 to XCD 0 again. Sources: AMD, "Deep dive into the MI300 compute and memory partition modes"
// (rocm.blogs.amd.com/software-tools-optimization/compute-memory-modes) for the XCDs and their L2s;
// AMD's aiter `remap_xcd` (aiter/ops/triton/utils/pid_preprocessing.py) and ROCm/composable_kernel
// PR #3652 for the round-robin dispatch. So consecutive block ids do not share an L2; blocks x and
// x + 8 do.
#pragma once

#include <cstdint>

namespace gemm::rocm {

constexpr int kMi300xXcds = 8;  // XCDs of an MI300X (see above)

// The grid's tile order, set by the launcher: tiles_m x tiles_n output tiles per split, grid.x =
// tiles_m * tiles_n, grid.z = the number of K splits of k_blocks_per_split blocks each.
struct TileSchedule {
  int32_t tiles_m, tiles_n;
  int32_t group_m;             // tile rows that sweep N together (their B tiles are reused from L2)
  int32_t xcds;                // L2 domains the dispatch deals blocks over, round-robin
  int32_t k_blocks_per_split;  // K blocks (of 128) of one split; the last split may have fewer
};

// What one workgroup computes: output tile (m, n) over K blocks [kb_begin, kb_end).
struct TileWork {
  int32_t m, n;
  int64_t kb_begin, kb_end;
};

// Block x of a grid of `tiles` blocks (one split) runs on XCD x % xcds. Renumber the blocks so that
// each XCD's blocks get consecutive ids: XCD c takes ids [c * q + min(c, r), ...) where q = tiles /
// xcds and r = tiles % xcds (the first r XCDs hold one block more). A bijection on [0, tiles) for
// any tiles and xcds >= 1. Every split has the same count, so a split's blocks whose x agree modulo
// xcds share an XCD whatever the split index: the split stays blockIdx.z.
constexpr int64_t xcd_contiguous_id(int64_t x, int64_t tiles, int64_t xcds) {
  const int64_t q = tiles / xcds, r = tiles % xcds;
  const int64_t xcd = x % xcds, local = x / xcds;
  return xcd * q + (xcd < r ? xcd : r) + local;
}

// Grouped order over the renumbered ids: group_m tile rows sweep N together, so the blocks an XCD
// runs at once read a few A row tiles and a few B column tiles, from its own L2.
constexpr TileWork schedule_tile(const TileSchedule& s, int block_x, int block_z, int64_t k_blocks) {
  const int64_t tiles = static_cast<int64_t>(s.tiles_m) * s.tiles_n;
  const int64_t id = xcd_contiguous_id(block_x, tiles, s.xcds);
  const int64_t per_group = static_cast<int64_t>(s.group_m) * s.tiles_n;
  const int64_t first_m = id / per_group * s.group_m;
  const int64_t rows = s.tiles_m - first_m < s.group_m ? s.tiles_m - first_m : s.group_m;
  const int64_t in_group = id % per_group;
  const int64_t kb_begin = static_cast<int64_t>(block_z) * s.k_blocks_per_split;
  const int64_t kb_end = kb_begin + s.k_blocks_per_split < k_blocks ? kb_begin + s.k_blocks_per_split : k_blocks;
  return {static_cast<int32_t>(first_m + in_group % rows), static_cast<int32_t>(in_group / rows), kb_begin, kb_end};
}

}  // namespace gemm::rocm
