// The work schedule of the grouped GEMM (MoE experts): which (group, M tile, N tile) each CTA of the
// persistent grid runs, read from the groups' row ranges on the device. Plain C++ (host and device): the
// kernel's producer and math warps and a CPU test (tests/cuda/grouped_probe.cpp) walk the same schedule.
//
// At its start every CTA turns the caller's row description (group_ends or the masked layout's
// group_rows) into a table in shared memory: per group its rows [row_begin, row_end) and the running
// total of its tiles, cdiv(rows, BLOCK_M) * n_blocks (an empty group has none). Global tile t then runs
// on CTA t % grid (2-CTA configs: cluster tile t on cluster t % grid), as whole tiles do in the dense
// schedule; a CTA's tiles only increase, so each walker finds a tile's group by a binary search that
// starts at its previous unit's group. Inside a group the tiles go in the dense grouped order
// (tile_coord: kGroupM M tiles side by side, then the next N block), so CTAs running at the same time
// read the same B tiles of one expert, and an expert's B tiles are read from DRAM once while its M tiles
// run.
//
// Segments are not padded: a group's M tiles start at its row_begin, so its last tile may reach into the
// next group's rows (loaded and multiplied, never stored: the kernel stores rows below row_end only) or
// past the last row (zero-filled by TMA).
#pragma once

#include <cstdint>

#include "hopper_layout.h"  // GEMM_HOST_DEVICE
#include "tile_configs.h"
#include "tile_scheduler.h"

namespace gemm::cuda {

// Groups a CTA's shared-memory table holds (3 int32 a group: 12 KB, within the shared memory every
// grouped config leaves beside its stage ring; the kernel checks).
constexpr int kMaxGroups = 1024;
constexpr int kGroupTableWords = 3;
constexpr int group_table_bytes(int groups) {
  return groups * kGroupTableWords * static_cast<int>(sizeof(int32_t));
}

// Claimed tiles (GroupedPlan::claims, on 192x128 tiles): instead of tiles cta, cta + G, ... a CTA runs
// tile cta first and then the next unclaimed one, from an atomic counter (zero at launch, claims counted
// from G). The L2 reuse of an expert's B tiles rests on co-running CTAs reaching them together, and a
// static walk lets CTAs drift apart over hundreds of tiles that differ in cost (a segment's last tile);
// claimed tiles keep the tiles in flight a window of about G consecutive tiles of the walk order.
// The producer's TMA thread claims and publishes each tile in a ring of kClaimSlots slots (a full and
// an empty mbarrier and a tile index each) that the scale warp and the math warps read.
constexpr int kClaimSlots = 4;
constexpr int kClaimRingBytes = kClaimSlots * (kBarrierBytesPerStage + static_cast<int>(sizeof(int32_t)));

// A grouped kernel's shared memory: the dense kernel's (same ring), then the claim ring and the table.
constexpr int grouped_smem_bytes(const TileConfig& c) {
  return smem_bytes(c) + kClaimRingBytes + group_table_bytes(kMaxGroups);
}
constexpr bool grouped_smem_fits(const TileConfig& c) { return grouped_smem_bytes(c) <= hopper::kMaxSmemPerBlock; }

// The groups' rows as the caller describes them (GemmArgs): contiguous segments by their inclusive ends
// (`ends`), or the masked layout, `counts[g]` valid rows from row g * stride.
struct GroupRows {
  const int32_t* ends = nullptr;
  const int32_t* counts = nullptr;
  int64_t stride = 0;
  int32_t num_groups = 0;
};

// A CTA's view of the groups: rows [row_begin[g], row_end[g]) and tiles [tile_end[g - 1], tile_end[g]).
struct GroupTable {
  int32_t* row_begin = nullptr;
  int32_t* row_end = nullptr;
  int32_t* tile_end = nullptr;
  int32_t num_groups = 0;
};

GEMM_HOST_DEVICE constexpr int32_t clamp_rows(int64_t v, int64_t hi) {
  return static_cast<int32_t>(v < 0 ? 0 : v > hi ? hi : v);
}
// Group g's segment from its raw value `raw` (ends[g] or counts[g]), given the end of group g - 1
// (`prev_end`, 0 for g = 0). Clamped into [0, m) and, for ends, made monotone, so that no input, however
// wrong, makes the kernel write outside its output.
GEMM_HOST_DEVICE constexpr void group_segment(const GroupRows& g, int32_t group, int32_t raw, int32_t prev_end,
                                              int64_t m, int32_t& begin, int32_t& end) {
  if (g.counts != nullptr) {
    begin = clamp_rows(group * g.stride, m);
    end = begin + clamp_rows(raw, g.stride < m - begin ? g.stride : m - begin);
  } else {
    begin = prev_end;
    end = raw > prev_end ? clamp_rows(raw, m) : prev_end;
  }
}
GEMM_HOST_DEVICE constexpr int32_t group_tiles(int32_t begin, int32_t end, int block_m, int32_t n_blocks) {
  return (end - begin + block_m - 1) / block_m * n_blocks;
}

// The table from the raw values (ends or counts, copied into t.row_end), one thread: the reference the
// CPU test checks the kernel's build (below) against.
GEMM_HOST_DEVICE inline void build_group_table_serial(const GroupRows& g, int64_t m, int block_m, int32_t n_blocks,
                                                      GroupTable& t) {
  int32_t prev_end = 0, tiles = 0;
  for (int32_t i = 0; i < g.num_groups; ++i) {
    group_segment(g, i, t.row_end[i], prev_end, m, t.row_begin[i], t.row_end[i]);
    prev_end = t.row_end[i];
    tiles += group_tiles(t.row_begin[i], t.row_end[i], block_m, n_blocks);
    t.tile_end[i] = tiles;
  }
}

// A unit of the grouped schedule: a whole tile of group `group` whose rows start at row0; only rows
// below row_end are stored.
struct GroupedUnit : WorkUnit {
  int32_t group = 0;
  int64_t row0 = 0, row_end = 0;
};

// The tiles of all groups.
GEMM_HOST_DEVICE inline int32_t grouped_tiles(const GroupTable& t) { return t.tile_end[t.num_groups - 1]; }

// Global tile `tile` as a unit; false past the last tile. `w` holds the walker's previous unit (or a
// fresh one): a walker's tiles only increase, so its group is where the search starts.
GEMM_HOST_DEVICE inline bool grouped_tile_unit(const GroupTable& t, const TileSchedule& s, int block_m, int64_t tile64,
                                               GroupedUnit& w) {
  if (tile64 >= grouped_tiles(t)) return false;
  const int32_t tile = static_cast<int32_t>(tile64);
  int32_t lo = w.group, hi = t.num_groups - 1;  // the first group whose tiles end after `tile`
  while (lo < hi) {
    const int32_t mid = (lo + hi) / 2;
    if (t.tile_end[mid] > tile) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  const int32_t first_tile = lo > 0 ? t.tile_end[lo - 1] : 0;
  const int32_t row_begin = t.row_begin[lo], row_end = t.row_end[lo];
  const TileCoord c = tile_coord(tile - first_tile, (row_end - row_begin + block_m - 1) / block_m, s.n_blocks);
  w.m_blk = c.m_blk;
  w.n_blk = c.n_blk;
  w.kb_begin = 0;
  w.kb_end = s.kblocks;
  w.slot = -1;
  w.fix_begin = w.fix_end = 0;
  w.group = lo;
  w.row0 = row_begin + static_cast<int64_t>(c.m_blk) * block_m;
  w.row_end = row_end;
  return true;
}

// Unit `idx` of CTA `cta` of `grid` in the static walk (tiles cta, cta + grid, ...).
GEMM_HOST_DEVICE inline bool grouped_work_unit(const GroupTable& t, const TileSchedule& s, int block_m, int32_t cta,
                                               int32_t grid, int32_t idx, GroupedUnit& w) {
  return grouped_tile_unit(t, s, block_m, static_cast<int64_t>(idx) * grid + cta, w);
}

// What the kernel reads of a unit, the same words for dense and grouped units: the tile's first A row,
// its group (dense: 0), the end of the rows it may store.
template <int kBlockM>
GEMM_HOST_DEVICE constexpr int64_t unit_row0(const WorkUnit& w) { return w.m_blk * kBlockM; }
template <int kBlockM>
GEMM_HOST_DEVICE constexpr int64_t unit_row0(const GroupedUnit& w) { return w.row0; }

// The kernel builds the table with one warp: lane l takes a contiguous run of groups (lane_groups), and
// three passes over the runs meet in two warp scans: the largest end before each run (contiguous ends
// fall back at most to it), then the tiles before it. The passes are plain functions so that the CPU
// test runs them lane by lane (build_group_table_lanes) against the serial build.
constexpr int kTableLanes = 32;
GEMM_HOST_DEVICE constexpr void lane_groups(int32_t groups, int lane, int& first, int& last) {
  const int per = (groups + kTableLanes - 1) / kTableLanes;
  first = lane * per < groups ? lane * per : groups;
  last = first + per < groups ? first + per : groups;
}
// Pass 1: the largest clamped raw end of the run (raw values in t.row_end).
GEMM_HOST_DEVICE inline int32_t lane_max_end(const GroupTable& t, int first, int last, int64_t m) {
  int32_t hi = 0;
  for (int i = first; i < last; ++i) {
    const int32_t v = clamp_rows(t.row_end[i], m);
    hi = v > hi ? v : hi;
  }
  return hi;
}
// Pass 2: the run's segments after the groups before it end at prev_end; returns the run's tiles.
GEMM_HOST_DEVICE inline int32_t lane_segments(const GroupRows& g, const GroupTable& t, int first, int last,
                                              int32_t prev_end, int64_t m, int block_m, int32_t n_blocks) {
  int32_t tiles = 0;
  for (int i = first; i < last; ++i) {
    group_segment(g, i, t.row_end[i], prev_end, m, t.row_begin[i], t.row_end[i]);
    prev_end = t.row_end[i];
    tiles += group_tiles(t.row_begin[i], t.row_end[i], block_m, n_blocks);
  }
  return tiles;
}
// Pass 3: the run's running tile totals after `tiles` tiles of the groups before it.
GEMM_HOST_DEVICE inline void lane_tile_ends(const GroupTable& t, int first, int last, int32_t tiles, int block_m,
                                            int32_t n_blocks) {
  for (int i = first; i < last; ++i) {
    tiles += group_tiles(t.row_begin[i], t.row_end[i], block_m, n_blocks);
    t.tile_end[i] = tiles;
  }
}

// The three passes lane after lane, the scans as loops: what the kernel's warp computes (CPU test).
inline void build_group_table_lanes(const GroupRows& g, int64_t m, int block_m, int32_t n_blocks, const GroupTable& t) {
  int first[kTableLanes], last[kTableLanes];
  int32_t prev_end = 0, tiles_before = 0, tiles[kTableLanes];
  for (int lane = 0; lane < kTableLanes; ++lane) lane_groups(g.num_groups, lane, first[lane], last[lane]);
  int32_t max_before[kTableLanes];
  for (int lane = 0; lane < kTableLanes; ++lane) {
    max_before[lane] = prev_end;
    const int32_t hi = lane_max_end(t, first[lane], last[lane], m);
    prev_end = hi > prev_end ? hi : prev_end;
  }
  for (int lane = 0; lane < kTableLanes; ++lane) {
    tiles[lane] = lane_segments(g, t, first[lane], last[lane], max_before[lane], m, block_m, n_blocks);
  }
  for (int lane = 0; lane < kTableLanes; ++lane) {
    lane_tile_ends(t, first[lane], last[lane], tiles_before, block_m, n_blocks);
    tiles_before += tiles[lane];
  }
}

#ifdef __CUDACC__
// Builds the CTA's table in shared memory: every thread copies raw values (one L2 round trip), warp 0
// runs the passes above, and the CTA barrier publishes the table. All threads of the CTA call it.
template <int kBlockM>
__device__ __forceinline__ void build_group_table(const GroupRows& g, int64_t m, int32_t n_blocks, const GroupTable& t) {
  static_assert(kTableLanes == hopper::kWarpSize, "one warp builds the table");
  const int32_t* raw = g.counts != nullptr ? g.counts : g.ends;
  for (int i = static_cast<int>(threadIdx.x); i < g.num_groups; i += static_cast<int>(blockDim.x)) {
    t.row_end[i] = raw[i];
  }
  __syncthreads();
  if (threadIdx.x < kTableLanes) {
    const int lane = static_cast<int>(threadIdx.x);
    int first, last;
    lane_groups(g.num_groups, lane, first, last);
    int32_t run_max = lane_max_end(t, first, last, m);
    for (int d = 1; d < kTableLanes; d *= 2) {
      const int32_t v = __shfl_up_sync(0xffffffffu, run_max, d);
      if (lane >= d) run_max = max(run_max, v);
    }
    int32_t max_before = __shfl_up_sync(0xffffffffu, run_max, 1);
    if (lane == 0) max_before = 0;
    const int32_t tiles = lane_segments(g, t, first, last, max_before, m, kBlockM, n_blocks);
    int32_t tile_sum = tiles;
    for (int d = 1; d < kTableLanes; d *= 2) {
      const int32_t v = __shfl_up_sync(0xffffffffu, tile_sum, d);
      if (lane >= d) tile_sum += v;
    }
    lane_tile_ends(t, first, last, tile_sum - tiles, kBlockM, n_blocks);
  }
  __syncthreads();
}
#endif

}  // namespace gemm::cuda
