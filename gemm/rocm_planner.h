// ROCm gfx942 planner (host-only): which tile and split-K each shape gets, from a pinned table or
// an MI300X time estimate. Plain C++ with no HIP include: the launcher, the CPU emulator and
// benchmarks/rocm_model.py's small g++ program all read the same choice from here.
#pragma once

#include <cstdint>

#include "gemm_contract.h"
#include "rocm_tile_configs.h"

namespace gemm::rocm {

constexpr int kMaxSplitK = 16;
constexpr int kDefaultGroupM = 8;  // tiles along M that share one sweep over N (L2 reuse of B)

// MI300X figures for the time estimate (AMD MI300X data sheet).
constexpr double kPeakFp8FlopsPerSecond = 2615e12;
constexpr double kHbmBytesPerSecond = 5.3e12;
constexpr double kLlcBytesPerSecond = 17.2e12;  // Infinity Cache peak: serves the tiles' re-reads of A and B
constexpr int kMi300xCuCount = 304;
constexpr double kLaunchSeconds = 3e-6;  // one extra kernel (split-K reduce): launch + tail gap, assumed

// Assumed fraction of the CU's FP8 MFMA peak each entry of kTiles sustains (a paper model, not measured:
// one wave per SIMD, no cross-wave latency hiding; smaller tiles do more LDS and load work per MFMA).
inline constexpr double kTileEfficiency[] = {0.50, 0.40, 0.30, 0.20};
static_assert(sizeof(kTileEfficiency) / sizeof(kTileEfficiency[0]) == kNumTiles, "one efficiency per tile");

// A launch configuration: which tile, how many K splits (reduced in fixed order), block swizzle.
struct RocmConfig {
  int tile = 0;
  int split_k = 1;
  int group_m = kDefaultGroupM;
};

// Shapes whose choice is pinned rather than left to the estimate below: the 18 AMD-challenge shapes
// and the DeepSeek-V3 suite. Chosen ON PAPER by an earlier roofline model (HBM efficiency, cache
// re-reads, launch and reduce costs), NOT measured on an MI300X: replace these rows with measured
// winners when one is available. Matching is exact.
struct TunedShape {
  int64_t m, n, k;
  RocmConfig config;
};
inline constexpr TunedShape kTuned[] = {
    // AMD Developer Challenge 2025 fp8-mm benchmark shapes
    {1024, 1536, 7168, {0, 2, kDefaultGroupM}},  // 35.0 us on paper
    {1024, 3072, 1536, {0, 1, kDefaultGroupM}},  // 13.7 us on paper
    {1024, 576, 7168, {2, 4, kDefaultGroupM}},  // 17.9 us on paper
    {1024, 7168, 256, {0, 1, kDefaultGroupM}},  // 6.0 us on paper
    {1024, 7168, 2048, {1, 1, kDefaultGroupM}},  // 31.3 us on paper
    {1024, 4608, 7168, {0, 1, kDefaultGroupM}},  // 56.6 us on paper
    {1024, 7168, 2304, {1, 1, kDefaultGroupM}},  // 34.9 us on paper
    {1024, 512, 7168, {1, 4, kDefaultGroupM}},  // 14.8 us on paper
    {1024, 4096, 512, {0, 1, kDefaultGroupM}},  // 5.9 us on paper
    {6144, 1536, 7168, {0, 1, kDefaultGroupM}},  // 111.2 us on paper
    {6144, 3072, 1536, {0, 1, kDefaultGroupM}},  // 48.8 us on paper
    {6144, 576, 7168, {0, 1, kDefaultGroupM}},  // 56.6 us on paper
    {6144, 7168, 256, {0, 1, kDefaultGroupM}},  // 23.6 us on paper
    {6144, 7168, 2048, {0, 1, kDefaultGroupM}},  // 142.4 us on paper
    {6144, 4608, 7168, {0, 1, kDefaultGroupM}},  // 329.7 us on paper
    {6144, 7168, 2304, {0, 1, kDefaultGroupM}},  // 160.0 us on paper
    {6144, 512, 7168, {0, 1, kDefaultGroupM}},  // 56.6 us on paper
    {6144, 4096, 512, {0, 1, kDefaultGroupM}},  // 25.4 us on paper
    // DeepSeek-V3 suite, M in {64, 128, 4096}
    {64, 2112, 7168, {1, 8, kDefaultGroupM}},  // 9.8 us on paper
    {64, 576, 7168, {1, 16, kDefaultGroupM}},  // 6.9 us on paper
    {64, 24576, 1536, {1, 1, kDefaultGroupM}},  // 11.7 us on paper
    {64, 32768, 512, {0, 1, kDefaultGroupM}},  // 7.0 us on paper
    {64, 7168, 16384, {1, 4, kDefaultGroupM}},  // 35.6 us on paper
    {64, 4096, 7168, {1, 4, kDefaultGroupM}},  // 13.6 us on paper
    {64, 7168, 2048, {1, 2, kDefaultGroupM}},  // 10.0 us on paper
    {128, 2112, 7168, {1, 8, kDefaultGroupM}},  // 12.0 us on paper
    {128, 576, 7168, {1, 16, kDefaultGroupM}},  // 7.4 us on paper
    {128, 24576, 1536, {0, 1, kDefaultGroupM}},  // 13.7 us on paper
    {128, 32768, 512, {0, 1, kDefaultGroupM}},  // 8.0 us on paper
    {128, 7168, 16384, {0, 4, kDefaultGroupM}},  // 39.6 us on paper
    {128, 4096, 7168, {1, 4, kDefaultGroupM}},  // 15.4 us on paper
    {128, 7168, 2048, {1, 2, kDefaultGroupM}},  // 11.4 us on paper
    {4096, 2112, 7168, {0, 1, kDefaultGroupM}},  // 111.2 us on paper
    {4096, 576, 7168, {2, 1, kDefaultGroupM}},  // 47.5 us on paper
    {4096, 24576, 1536, {0, 1, kDefaultGroupM}},  // 247.8 us on paper
    {4096, 32768, 512, {0, 1, kDefaultGroupM}},  // 107.3 us on paper
    {4096, 7168, 16384, {0, 1, kDefaultGroupM}},  // 751.0 us on paper
    {4096, 4096, 7168, {0, 1, kDefaultGroupM}},  // 220.5 us on paper
    {4096, 7168, 2048, {0, 1, kDefaultGroupM}},  // 95.6 us on paper
};

// Estimated seconds of one config on an MI300X-like device with `cu_count` CUs: the slowest of the
// compute waves (tail included), the HBM floor and the cache traffic of all tiles' operand reads, plus
// the split-K workspace round trip.
constexpr double estimate_seconds(int64_t m, int64_t n, int64_t k, const RocmConfig& config, int cu_count) {
  const TileShape& tile = kTiles[config.tile];
  const int64_t k_blocks = ceil_div(k, kBlockK);
  const int64_t blocks_per_split = ceil_div(k_blocks, config.split_k);
  const int64_t units = ceil_div(m, tile.block_m) * ceil_div(n, tile.block_n) * config.split_k;
  const int64_t slots = static_cast<int64_t>(cu_count) * tile.blocks_per_cu();
  const int64_t waves = ceil_div(units, slots);
  const double cu_flops = kPeakFp8FlopsPerSecond / kMi300xCuCount;
  const double unit_flops = 2.0 * tile.block_m * tile.block_n * blocks_per_split * kBlockK;
  const double compute =
      waves * tile.blocks_per_cu() * unit_flops / (cu_flops * kTileEfficiency[config.tile]);
  const double memory = double(m * k + n * k + 2 * m * n) / kHbmBytesPerSecond;
  const int64_t tiles = ceil_div(m, tile.block_m) * ceil_div(n, tile.block_n);
  const double reread = double(tiles * (tile.block_m + tile.block_n) * k) / kLlcBytesPerSecond;
  const double split = config.split_k > 1
                           ? double(2 * config.split_k * m * n * 4) / kHbmBytesPerSecond + kLaunchSeconds
                           : 0.0;
  const double slowest = compute > memory ? compute : memory;
  return (slowest > reread ? slowest : reread) + split;
}

// The generic choice: the config with the least estimated time (ties keep the larger tile and fewer
// splits). Every shape gets one; no shape is refused.
constexpr RocmConfig estimate_config(int64_t m, int64_t n, int64_t k, int cu_count) {
  const int64_t k_blocks = ceil_div(k, kBlockK);
  RocmConfig best{};
  double best_seconds = -1.0;
  for (int tile = 0; tile < kNumTiles; ++tile) {
    for (int split = 1; split <= kMaxSplitK && split <= k_blocks; split *= 2) {
      const RocmConfig candidate{tile, split, kDefaultGroupM};
      const double seconds = estimate_seconds(m, n, k, candidate, cu_count);
      if (best_seconds < 0 || seconds < best_seconds) {
        best = candidate;
        best_seconds = seconds;
      }
    }
  }
  return best;
}

// The choice for (m, n, k): the pinned entry if the shape is tuned and the device is the one the
// table was made for (an MI300X's CU count), else the estimate for this device.
constexpr RocmConfig select_config(int64_t m, int64_t n, int64_t k, int cu_count) {
  if (cu_count == kMi300xCuCount)
    for (const TunedShape& tuned : kTuned)
      if (tuned.m == m && tuned.n == n && tuned.k == k) return tuned.config;
  return estimate_config(m, n, k, cu_count);
}

// Grouped GEMMs run unsplit (docs/rocm.md says why); the tile is the tallest that the average group
// fills, since most groups' row tiles then carry no masked rows. Chosen on paper, not measured.
constexpr RocmConfig select_grouped_config(int64_t m, int64_t groups) {
  const int64_t rows_per_group = ceil_div(m, groups);
  for (int tile = 0; tile < kNumTiles; ++tile)
    if (kTiles[tile].block_m <= rows_per_group) return {tile, 1, kDefaultGroupM};
  return {kNumTiles - 1, 1, kDefaultGroupM};
}

// Every config the emulator must execute: each tile unsplit and split (split-K reaches the reduce).
inline constexpr RocmConfig kTestConfigs[] = {
    {0, 1, kDefaultGroupM}, {1, 1, kDefaultGroupM}, {2, 1, kDefaultGroupM}, {3, 1, kDefaultGroupM},
    {0, 2, 2},              {1, 3, kDefaultGroupM}, {2, 2, 1},              {3, 4, kDefaultGroupM},
};

}  // namespace gemm::rocm
