// Which tiles and K ranges each CTA of the persistent grid runs, and where stream-K partial sums go.
// Plain C++ (host and device): the kernel's producer and math warps, the stream-K reduction and a CPU
// test (tests/cuda/plan_probe.cpp) all walk the same schedule.
//
// A problem of T output tiles of K/128 K blocks ("iterations") each runs on a persistent grid of G CTAs:
//  - data-parallel (DP) tiles [0, dp_tiles) run whole: CTA b takes tiles b, b + G, b + 2G, ... and
//    stores them directly; dp_tiles is a multiple of G (full waves only);
//  - the stream-K (SK) region, tiles [dp_tiles, T), is the partial last wave. Its sk_tiles * K/128
//    iterations, tile-major, are cut into sk_ctas contiguous ranges of nearly equal length, one per CTA
//    [0, sk_ctas), run after that CTA's DP tiles. A range can start and end inside tiles; each tile it
//    touches is a "piece" whose fp32 partial sum goes to its own workspace slot. stream_k_reduce_kernel
//    then adds a region tile's pieces in K order (deterministic, no CTA ever waits for another) and
//    stores the result.
// So no SM idles through a partial wave (6144x576x7168 is 1.8 waves of 128x128 tiles), and decode shapes
// with fewer tiles than SMs spread their long K over every SM (what split-K did, with exact balance).
#pragma once

#include <cstdint>

#include "hopper_layout.h"  // GEMM_HOST_DEVICE

namespace gemm::cuda {

// Rows of M blocks walked together so that CTAs running at the same time share A and B tiles in L2.
constexpr int kGroupM = 8;

// Tile and iteration indices are 32-bit (64-bit divisions are subroutine calls on the GPU): the
// planner only makes schedules with fewer than 2^31 tiles and sk_iters() * sk_ctas < 2^31
// (schedule_fits_int32), so every product below stays in range.
struct TileSchedule {
  int32_t m_blocks = 0, n_blocks = 0;
  int32_t kblocks = 0;        // K blocks (iterations) per tile
  int32_t dp_tiles = 0;       // whole tiles, a multiple of the grid
  int32_t sk_tiles = 0;       // tiles of the stream-K region (0: none)
  int32_t sk_ctas = 0;        // CTAs [0, sk_ctas) share the region; <= sk_iters()
  int32_t sk_max_pieces = 0;  // workspace slots per SK CTA: the most tiles one range can touch
  GEMM_HOST_DEVICE constexpr int32_t sk_iters() const { return sk_tiles * kblocks; }
};

GEMM_HOST_DEVICE constexpr int32_t sched_min(int32_t a, int32_t b) { return a < b ? a : b; }

struct TileCoord {
  int32_t m_blk, n_blk;
};

// Tile t in grouped order: kGroupM M blocks side by side, then the next N block.
GEMM_HOST_DEVICE constexpr TileCoord tile_coord(int32_t t, int32_t m_blocks, int32_t n_blocks) {
  const int32_t group_span = kGroupM * n_blocks;
  const int32_t first_m = (t / group_span) * kGroupM;
  const int32_t group_rows = sched_min(kGroupM, m_blocks - first_m);
  const int32_t r = t % group_span;
  return TileCoord{first_m + r % group_rows, r / group_rows};
}

// First iteration of SK CTA `cta`'s range (cta in [0, ctas]; ranges are non-empty while ctas <= iters).
GEMM_HOST_DEVICE constexpr int32_t sk_range_begin(int32_t cta, int32_t iters, int32_t ctas) {
  return cta * iters / ctas;
}
// The SK CTA whose range holds iteration `iter`: the largest c with sk_range_begin(c) <= iter.
GEMM_HOST_DEVICE constexpr int32_t sk_range_owner(int32_t iter, int32_t iters, int32_t ctas) {
  return ((iter + 1) * ctas - 1) / iters;
}
// The workspace slot of SK CTA `cta`'s piece of region tile `region_tile`.
GEMM_HOST_DEVICE constexpr int32_t sk_slot(const TileSchedule& s, int32_t cta, int32_t region_tile) {
  return cta * s.sk_max_pieces + region_tile - sk_range_begin(cta, s.sk_iters(), s.sk_ctas) / s.kblocks;
}

// Whether a schedule's index arithmetic stays in 32 bits (see TileSchedule).
constexpr bool schedule_fits_int32(int64_t tiles, int64_t sk_iters, int64_t sk_ctas) {
  constexpr int64_t kMax = 0x7fffffff;
  return tiles <= kMax / 2 && sk_iters * (sk_ctas + 1) <= kMax;  // /2: room for tile + grid
}

// One unit of a CTA's work: K blocks [kb_begin, kb_end) of one tile. slot < 0: the whole K range, stored
// to the output; otherwise an SK piece whose fp32 partial goes to workspace slot `slot`.
struct WorkUnit {
  int64_t m_blk = 0, n_blk = 0;  // 64-bit: they are multiplied by the tile size into rows and columns
  int32_t kb_begin = 0, kb_end = 0;
  int32_t slot = -1;
};

// Unit `idx` of CTA `cta` (its DP tiles first, then the pieces of its SK range); false past the last.
// A pure function of the index, so the walking warps keep one counter in registers and read the
// schedule from the kernel parameters.
GEMM_HOST_DEVICE inline bool work_unit(const TileSchedule& s, int32_t cta, int32_t grid, int32_t idx, WorkUnit& w) {
  const int32_t dp_units = s.dp_tiles > cta ? (s.dp_tiles - cta + grid - 1) / grid : 0;
  if (idx < dp_units) {
    const TileCoord c = tile_coord(cta + idx * grid, s.m_blocks, s.n_blocks);
    w = WorkUnit{c.m_blk, c.n_blk, 0, s.kblocks, -1};
    return true;
  }
  if (cta >= s.sk_ctas) return false;
  const int32_t piece = idx - dp_units;
  const int32_t begin = sk_range_begin(cta, s.sk_iters(), s.sk_ctas);
  const int32_t end = sk_range_begin(cta + 1, s.sk_iters(), s.sk_ctas);
  const int32_t region_tile = begin / s.kblocks + piece;
  const int32_t tile_iter0 = region_tile * s.kblocks;
  const int32_t start = begin > tile_iter0 ? begin : tile_iter0;
  const int32_t stop = sched_min(end, tile_iter0 + s.kblocks);
  if (start >= stop) return false;
  const TileCoord c = tile_coord(s.dp_tiles + region_tile, s.m_blocks, s.n_blocks);
  w = WorkUnit{c.m_blk, c.n_blk, start - tile_iter0, stop - tile_iter0, cta * s.sk_max_pieces + piece};
  return true;
}

}  // namespace gemm::cuda
