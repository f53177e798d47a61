// Which tiles and K ranges each CTA of the persistent grid runs, and how stream-K pieces meet.
// Plain C++ (host and device): the kernel's producer and math warps and a CPU test
// (tests/cuda/plan_probe.cpp) walk the same schedule.
//
// A problem of T output tiles of K/128 K blocks ("iterations") each runs on a persistent grid of G CTAs:
//  - data-parallel (DP) tiles [0, dp_tiles) run whole: CTA b takes tiles b, b + G, b + 2G, ... and
//    stores them directly; dp_tiles is a multiple of G (full waves only);
//  - the stream-K (SK) region, tiles [dp_tiles, T), is the partial last wave. Its sk_tiles * K/128
//    iterations, tile-major, are cut into sk_ctas contiguous ranges of nearly equal length, run after
//    the DP tiles. A range can start and end inside tiles. The piece of a tile that holds its K block 0
//    (the "head", the last unit of its range) adds the tile's later pieces to its accumulators and
//    stores the tile; a later piece always opens its range, so each range has at most one: it writes
//    its fp32 partial to the range's workspace slot and raises the range's flag. The head waits for
//    the flags and adds the slots in K order: deterministic, and no second kernel.
//  - Range j runs on CTA sk_ctas - 1 - j, so a head waits only for CTAs of lower index. CTAs are
//    dispatched in index order, so the CTAs it waits for are already resident (or done): no deadlock
//    even when another kernel holds some SMs. Later pieces open their ranges and heads close theirs,
//    so with ranges of equal length the flags are up long before a head looks.
// So no SM idles through a partial wave (6144x576x7168 is 1.8 waves of 128x128 tiles), and decode shapes
// with fewer tiles than SMs spread their long K over every SM (what split-K did, with exact balance).
//
// Cluster split-K (k_split > 1, whole tiles only): each tile runs on a thread-block cluster of k_split
// CTAs, rank r taking the r-th of k_split contiguous shares of its K blocks. The ranks after 0 leave
// their fp32 partials in their own shared memory and rank 0 adds them, in rank (K) order, through
// distributed shared memory before it stores the tile: split-K without a workspace, flags or a memset,
// synchronized by two cluster barriers. The schedule then counts clusters, as for A multicast.
#pragma once

#include <cstdint>

#include "hopper_layout.h"  // GEMM_HOST_DEVICE

namespace gemm::cuda {

// Rows of M blocks walked together so that CTAs running at the same time share A and B tiles in L2.
constexpr int kGroupM = 8;

// The most later pieces one tile's head adds (the planner keeps SK ranges at least
// kblocks / kMaxLaterPieces long): the head's fix-up is unrolled over this bound, see the kernel.
constexpr int kMaxLaterPieces = 8;

// Tile and iteration indices are 32-bit (64-bit divisions are subroutine calls on the GPU): the
// planner only makes schedules with fewer than 2^31 tiles and sk_iters() * sk_ctas < 2^31
// (schedule_fits_int32), so every product below stays in range.
struct TileSchedule {
  int32_t m_blocks = 0, n_blocks = 0;
  int32_t kblocks = 0;        // K blocks (iterations) per tile
  int32_t dp_tiles = 0;       // whole tiles, a multiple of the grid
  int32_t sk_tiles = 0;       // tiles of the stream-K region (0: none)
  int32_t sk_ctas = 0;        // CTAs [0, sk_ctas) share the region; <= sk_iters()
  int32_t sk_max_pieces = 0;  // the most tiles one range can touch
  int32_t k_split = 1;        // CTAs of a cluster sharing each tile's K blocks (1: none; then sk_tiles = 0)
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

// First iteration of SK range `j` (j in [0, ranges]; ranges are non-empty while ranges <= iters).
GEMM_HOST_DEVICE constexpr int32_t sk_range_begin(int32_t j, int32_t iters, int32_t ranges) {
  return j * iters / ranges;
}
// The SK range that holds iteration `iter`: the largest j with sk_range_begin(j) <= iter.
GEMM_HOST_DEVICE constexpr int32_t sk_range_owner(int32_t iter, int32_t iters, int32_t ranges) {
  return ((iter + 1) * ranges - 1) / iters;
}
// The CTA that runs SK range `j` (and the range CTA `j` runs): reversed, see above.
GEMM_HOST_DEVICE constexpr int32_t sk_range_cta(int32_t j, int32_t ranges) { return ranges - 1 - j; }

// Whether a schedule's index arithmetic stays in 32 bits (see TileSchedule).
constexpr bool schedule_fits_int32(int64_t tiles, int64_t sk_iters, int64_t sk_ctas) {
  constexpr int64_t kMax = 0x7fffffff;
  return tiles <= kMax / 2 && sk_iters * (sk_ctas + 1) <= kMax;  // /2: room for tile + grid
}

// One unit of a CTA's work: K blocks [kb_begin, kb_end) of one tile.
//  - slot >= 0: a later piece of an SK tile; its fp32 partial goes to workspace slot `slot` (its range),
//    then flag `slot` is raised.
//  - slot < 0: the unit stores the tile. A head (fix_begin < fix_end) first waits for the flags of
//    slots [fix_begin, fix_end) and adds those partials in that (K) order.
struct WorkUnit {
  int64_t m_blk = 0, n_blk = 0;  // 64-bit: they are multiplied by the tile size into rows and columns
  int32_t kb_begin = 0, kb_end = 0;
  int32_t slot = -1;
  int32_t fix_begin = 0, fix_end = 0;
};

// The DP tiles CTA `cta` of `grid` runs (tiles cta, cta + grid, ...): the index of its first SK unit.
GEMM_HOST_DEVICE inline int32_t cta_dp_units(const TileSchedule& s, int32_t cta, int32_t grid) {
  return s.dp_tiles > cta ? (s.dp_tiles - cta + grid - 1) / grid : 0;
}

// Unit `idx` of CTA `cta` (its DP tiles first, then the pieces of its SK range); false past the last.
// A pure function of the index, so the walking warps keep one counter in registers and read the
// schedule from the kernel parameters. kStreamK = false: a schedule without an SK region (sk_tiles = 0),
// walked by kernels that carry no stream-K code.
template <bool kStreamK = true>
GEMM_HOST_DEVICE inline bool work_unit(const TileSchedule& s, int32_t cta, int32_t grid, int32_t idx, WorkUnit& w) {
  const int32_t dp_units = cta_dp_units(s, cta, grid);
  if (idx < dp_units) {
    const TileCoord c = tile_coord(cta + idx * grid, s.m_blocks, s.n_blocks);
    w = WorkUnit{c.m_blk, c.n_blk, 0, s.kblocks, -1, 0, 0};
    return true;
  }
  if (!kStreamK || cta >= s.sk_ctas) return false;
  const int32_t iters = s.sk_iters();
  const int32_t j = sk_range_cta(cta, s.sk_ctas);
  const int32_t begin = sk_range_begin(j, iters, s.sk_ctas);
  const int32_t end = sk_range_begin(j + 1, iters, s.sk_ctas);
  const int32_t region_tile = begin / s.kblocks + (idx - dp_units);
  const int32_t tile_iter0 = region_tile * s.kblocks;
  const int32_t start = begin > tile_iter0 ? begin : tile_iter0;
  const int32_t stop = sched_min(end, tile_iter0 + s.kblocks);
  if (start >= stop) return false;
  const TileCoord c = tile_coord(s.dp_tiles + region_tile, s.m_blocks, s.n_blocks);
  w = WorkUnit{c.m_blk, c.n_blk, start - tile_iter0, stop - tile_iter0, -1, 0, 0};
  if (start > tile_iter0) {
    w.slot = j;  // a later piece: it opens range j
  } else {
    // The head: the ranges after j up to the one holding the tile's last K block hold its later pieces.
    w.fix_begin = j + 1;
    w.fix_end = sk_range_owner(tile_iter0 + s.kblocks - 1, iters, s.sk_ctas) + 1;
  }
  return true;
}

// The unit as rank `k_rank` of a K split over `k_split` (= s.k_split; a compile-time 1 in kernels
// without splits) CTAs runs it: its share of the unit's K blocks. Shares differ by at most one K block;
// the planner keeps them non-empty (k_split <= kblocks).
template <bool kStreamK = true>
GEMM_HOST_DEVICE inline bool cta_work_unit(const TileSchedule& s, int32_t cluster, int32_t clusters, int32_t k_rank,
                                           int32_t k_split, int32_t idx, WorkUnit& w) {
  if (!work_unit<kStreamK>(s, cluster, clusters, idx, w)) return false;
  if (k_split > 1) {
    const int32_t span = w.kb_end - w.kb_begin;
    w.kb_end = w.kb_begin + (k_rank + 1) * span / k_split;
    w.kb_begin += k_rank * span / k_split;
  }
  return true;
}

}  // namespace gemm::cuda
