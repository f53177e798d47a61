// Host-only plan choice for the grouped GEMM (MoE experts): the tile config from the rows a group gets on
// average (the host knows the total rows and the group count, never the routing), and the persistent
// grid. Plain C++ (no CUDA include), so that a CPU test compiles it; the kernel never includes it.
#pragma once

#include <algorithm>
#include <cstdint>

#include "grouped_scheduler.h"
#include "planner.h"
#include "tile_configs.h"
#include "tile_scheduler.h"

namespace gemm::cuda {

// The configs with a grouped instantiation (whole tiles): 64x128 for the few rows a group gets in decode
// (a 128-row tile would multiply mostly other groups' rows), 128x128 (and its twin that loads in pairs,
// for long K), 192x128 for prefill-sized groups, and 192x128 in 2-CTA clusters (A multicast) for
// groups of many M tiles.
inline constexpr int kGroupedConfigs[] = {2, 3, 4, 6, 8};
inline constexpr int kNumGroupedConfigs = sizeof(kGroupedConfigs) / sizeof(kGroupedConfigs[0]);
constexpr int kGroupedSmallConfig = 2, kGroupedMidConfig = 3, kGroupedLargeConfig = 4, kGroupedClusterConfig = 8;
// Average rows a group up to which the 64-row tiles run (128x128 was faster from 32, docs/cuda.md), and
// from which 192x128 does (the dense GEMM's 192x128 wins from M = 1024 at K >= 1536): in 2-CTA clusters
// from K = 4096 (sharing A, they took 0.97x the time of claimed single-CTA tiles over four such shapes;
// at K <= 2048 the claimed tiles were 1-8 % faster).
constexpr int64_t kGroupedSmallRows = 16;
constexpr int64_t kGroupedLargeRows = 1024;
constexpr int64_t kGroupedLargeMinK = 1536;
constexpr int64_t kGroupedClusterMinK = 4096;

// The grouped instantiation of table row `config`: its tiles start at any row (with_any_row_start()).
constexpr TileConfig grouped_tile_config(int config) { return with_any_row_start(kTileConfigs[config]); }

constexpr bool is_grouped_config(int config) {
  for (int c : kGroupedConfigs) {
    if (c == config) return true;
  }
  return false;
}

struct GroupedPlan {
  int config = 0;
  TileSchedule sched;  // n_blocks (of cluster tiles) and kblocks; the M tiles come from the groups' rows
  int grid = 0;        // persistent clusters
  bool pairs = false;          // units long enough to load two K blocks an instruction
  bool b_evict_first = false;  // decode tiles: B streams through the L2 once
  bool claims = false;         // tiles claimed from a counter (grouped_scheduler.h)
  constexpr int cluster_n() const { return kTileConfigs[config].cluster_n; }
  constexpr int ctas() const { return grid * cluster_n(); }
};

// The most tiles any routing of m rows over `groups` groups makes: g non-empty groups of r_i rows take
// sum cdiv(r_i, BLOCK_M) <= g + (m - g) / BLOCK_M M tiles, most with every group non-empty.
constexpr int64_t max_grouped_tiles(int64_t m, int64_t groups, int block_m, int64_t n_blocks) {
  const int64_t g = std::min(groups, m);
  return (g + (m - g) / block_m) * n_blocks;
}

// Whether the schedule's indices fit the kernel's 32-bit arithmetic (rows, tiles, B rows of all groups).
constexpr bool grouped_fits_int32(int64_t m, int64_t n, int64_t groups, int block_m, int64_t n_blocks) {
  constexpr int64_t kMax = 0x7fffffff;
  return m < kMax && groups * n < kMax && max_grouped_tiles(m, groups, block_m, n_blocks) < kMax / 2;
}

inline GroupedPlan grouped_plan(int config, int64_t m, int64_t n, int64_t k, int64_t groups, const GpuSlots& gpu) {
  const TileConfig& c = kTileConfigs[config];
  GroupedPlan p;
  p.config = config;
  p.sched.kblocks = static_cast<int32_t>(cdiv(k, kBlockK));
  p.sched.n_blocks = static_cast<int32_t>(cdiv(n, static_cast<int64_t>(c.block_n) * c.cluster_n));
  p.sched.m_blocks = static_cast<int32_t>(cdiv(m, c.block_m));  // an upper bound; the kernel does not read it
  const int64_t tiles = max_grouped_tiles(m, groups, c.block_m, p.sched.n_blocks);
  p.grid = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(gpu.units(c.cluster_n), tiles)));
  p.pairs = pairs_loads(c) && p.sched.kblocks >= kMinPairUnitKBlocks;
  p.b_evict_first = c.block_m == hopper::kWgmmaM;
  p.claims = config == kGroupedLargeConfig;
  return p;
}

// expected_rows: the caller's hint of a group's rows (GemmArgs::expected_group_rows; 0: m / groups).
inline GroupedPlan choose_grouped_plan(int64_t m, int64_t n, int64_t k, int64_t groups, const GpuSlots& gpu,
                                       int64_t expected_rows = 0) {
  const int64_t rows_per_group = expected_rows > 0 ? expected_rows : cdiv(m, groups);
  int config = rows_per_group <= kGroupedSmallRows                               ? kGroupedSmallConfig
               : rows_per_group >= kGroupedLargeRows && k >= kGroupedClusterMinK ? kGroupedClusterConfig
               : rows_per_group >= kGroupedLargeRows && k >= kGroupedLargeMinK   ? kGroupedLargeConfig
                                                                                 : kGroupedMidConfig;
  // Long K on 128x128: the twin that loads in pairs, as choose_plan() swaps it in.
  if (const int twin = paired_twin(config); twin >= 0 && cdiv(k, kBlockK) >= kMinPairUnitKBlocks) config = twin;
  return grouped_plan(config, m, n, k, groups, gpu);
}

}  // namespace gemm::cuda
