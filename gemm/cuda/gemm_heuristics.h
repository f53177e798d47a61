// Tile-shape and split-K choice for the sm_90a FP8 GEMM. Pure C++ (no CUDA include) so that a CPU
// test can compile it and check that the test shapes reach every configuration.
//
// The tile table is data: the kernel is ONE template instantiated once per row of kTileConfigs.
// For a problem the planner scores every (config, split count) pair with a small per-SM roofline
// model (persistent grid: each SM runs ceil(units / SMs) work units back to back) and keeps the
// cheapest. Split-K is chosen only when it fills otherwise idle SMs (decode shapes with long K).
#pragma once

#include <algorithm>
#include <cstdint>

#include "hopper_layout.h"

namespace gemm::cuda {

constexpr int kBlockK = 128;  // = kScaleBlockK = one 128-byte swizzle row of FP8

struct TileConfig {
  int block_m;    // 64 * number of math warpgroups
  int block_n;    // wgmma N, % 8 == 0, <= 256 (a value not dividing 128 straddles B scale blocks)
  int cluster_m;  // CTAs of one cluster on adjacent M blocks; each loads 1/cluster_m of the shared
                  // B tile and TMA-multicasts it, cutting L2->SM traffic
  int n_sub;      // wgmma sub-tiles per K block along N (one temporary accumulator reused): lets a
                  // 256-wide tile fit the register file; fewer L2->SM bytes per FLOP
};

// BLOCK_M 64: decode / small M (one math warpgroup). BLOCK_M 128: two math warpgroups sharing B.
// Non-power-of-two widths cut waves: 112 tiles N=7168 into 64 blocks, 192 tiles 24576 into 128.
inline constexpr TileConfig kTileConfigs[] = {
    {64, 64, 1, 1}, {64, 96, 1, 1}, {64, 112, 1, 1}, {64, 128, 1, 1}, {64, 192, 1, 1},
    {128, 112, 1, 1}, {128, 128, 1, 1}, {128, 256, 1, 2},
    {128, 112, 2, 1}, {128, 128, 2, 1}, {128, 160, 2, 1}, {128, 256, 2, 2},
};
constexpr int kMaxClusterM = 2;
// First row with a cluster: the launcher asks the driver how many such clusters fit at once.
constexpr int first_cluster_config() {
  for (int i = 0; i < static_cast<int>(sizeof(kTileConfigs) / sizeof(kTileConfigs[0])); ++i) {
    if (kTileConfigs[i].cluster_m > 1) return i;
  }
  return -1;
}
inline constexpr int kNumTileConfigs = sizeof(kTileConfigs) / sizeof(kTileConfigs[0]);

constexpr int kMaxStages = 8;
constexpr int kSmemAlignSlack = hopper::kSwizzleAtomBytes;  // dynamic smem rounded up to 1024 B
constexpr int kBarrierBytesPerStage = 2 * 8;                // full + empty mbarrier

GEMM_HOST_DEVICE constexpr int stage_bytes(const TileConfig& c) { return (c.block_m + c.block_n) * kBlockK; }
// Per stage, the scales the math warpgroups need for that K block: BLOCK_M A scales and up to
// kMaxScaleBlocksPerTile B scales (a BLOCK_N not dividing 128 can straddle up to 3 scale blocks).
constexpr int kMaxScaleBlocksPerTile = 4;  // 3 used, padded so each stage stays 16-byte aligned
GEMM_HOST_DEVICE constexpr int scale_stage_floats(const TileConfig& c) {
  return c.block_m + kMaxScaleBlocksPerTile;
}
// 16-bit outputs leave through shared memory and TMA stores (asynchronous: the next tile's main
// loop overlaps them) in chunks of kStoreChunkCols columns = one 64-byte swizzled row; BLOCK_N not
// a multiple of it stores straight from registers.
constexpr int kStoreChunkCols = 32;
constexpr int kStoreElemBytes = 2;
constexpr int kMaxCSmemBytes = 32 * 1024;  // more would cost a pipeline stage of a wide tile
GEMM_HOST_DEVICE constexpr bool tma_store_tile(const TileConfig& c) {
  return c.block_n % kStoreChunkCols == 0 && c.block_m * c.block_n * kStoreElemBytes <= kMaxCSmemBytes;
}
GEMM_HOST_DEVICE constexpr int c_smem_bytes(const TileConfig& c) {
  return tma_store_tile(c) ? c.block_m * c.block_n * kStoreElemBytes : 0;
}
GEMM_HOST_DEVICE constexpr int num_stages(const TileConfig& c) {
  const int fit = (hopper::kMaxSmemPerBlock - kSmemAlignSlack - c_smem_bytes(c)) /
                  (stage_bytes(c) + scale_stage_floats(c) * static_cast<int>(sizeof(float)) + kBarrierBytesPerStage);
  return fit < kMaxStages ? fit : kMaxStages;
}
GEMM_HOST_DEVICE constexpr int smem_bytes(const TileConfig& c) {
  return num_stages(c) * (stage_bytes(c) + scale_stage_floats(c) * static_cast<int>(sizeof(float)) +
                          kBarrierBytesPerStage) +
         c_smem_bytes(c) + kSmemAlignSlack;
}
// Bytes one CTA pulls from L2 per K block (its share of a multicast B tile).
constexpr int loaded_bytes(const TileConfig& c) {
  return (c.block_m + c.block_n / c.cluster_m) * kBlockK;
}
GEMM_HOST_DEVICE constexpr int num_math_warpgroups(const TileConfig& c) { return c.block_m / hopper::kWgmmaM; }
GEMM_HOST_DEVICE constexpr int num_threads(const TileConfig& c) {
  return (num_math_warpgroups(c) + 1) * hopper::kWarpgroupThreads;  // + one producer warpgroup
}

// Rows of M blocks walked together by the persistent scheduler so that concurrently running CTAs
// share A and B tiles in L2.
constexpr int kGroupM = 8;
constexpr int kMaxSplits = 16;
constexpr int kMinKBlocksPerSplit = 2;

// H200 per-SM model constants (measured peers in /work/shared/reference/performance.md):
// FP8 dense ~1979 TFLOP/s over 132 SMs at ~80 % achievable; HBM ~4.3 TB/s copy; L2->SM ~70 GB/s/SM.
constexpr double kSmFlopsPerUs = 12.0e6;
constexpr double kSmBytesPerUs = 70.0e3;
constexpr double kDramBytesPerUs = 4.0e6;
constexpr double kUnitOverheadUs = 0.3;    // pipeline drain + epilogue issue per work unit
constexpr double kReduceLaunchUs = 2.0;    // extra kernel for the fixed-order split-K reduction

struct Plan {
  int config = 0;        // index into kTileConfigs
  int splits = 1;        // K split count (1: no split-K)
  int kblocks_per_split = 0;
  int64_t m_blocks = 0;  // in cluster rows: cluster_m adjacent BLOCK_M blocks
  int64_t n_blocks = 0;
  int64_t units = 0;     // m_blocks * n_blocks * splits, one unit per cluster
  int grid = 0;          // persistent CTAs = min(units, SMs)
  double cost_us = 0;
};

GEMM_HOST_DEVICE constexpr int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// What the persistent grid can keep resident at once on the current device.
struct GpuSlots {
  int num_sms = 0;
  int max_clusters = 0;  // co-resident kMaxClusterM-CTA clusters (GPC-limited, can be < SMs / 2)
};

inline Plan make_plan(int config, int splits, int64_t m, int64_t n, int64_t k, const GpuSlots& gpu,
                      int out_bytes) {
  const TileConfig& c = kTileConfigs[config];
  Plan p;
  p.config = config;
  const int64_t kblocks = cdiv(k, kBlockK);
  p.kblocks_per_split = static_cast<int>(cdiv(kblocks, splits));
  p.splits = static_cast<int>(cdiv(kblocks, p.kblocks_per_split));  // no empty splits
  p.m_blocks = cdiv(m, static_cast<int64_t>(c.block_m) * c.cluster_m);
  p.n_blocks = cdiv(n, c.block_n);
  p.units = p.m_blocks * p.n_blocks * p.splits;
  const int64_t clusters = c.cluster_m > 1 ? gpu.max_clusters : gpu.num_sms;
  p.grid = static_cast<int>(std::min<int64_t>(p.units, clusters) * c.cluster_m);
  const double waves = static_cast<double>(cdiv(p.units, clusters));
  const double kb = p.kblocks_per_split;
  const double compute = waves * kb * 2.0 * c.block_m * c.block_n * kBlockK / kSmFlopsPerUs *
                         (1.0 + 16.0 / c.block_n);  // narrow wgmma re-reads A more per FLOP
  const double stream = waves * kb * loaded_bytes(c) / kSmBytesPerUs;
  const double unique = static_cast<double>(m * k + n * k + m * n * out_bytes);
  const double partials = p.splits > 1 ? 2.0 * p.splits * m * n * 4 : 0.0;
  const double dram = (unique + partials) / kDramBytesPerUs;
  p.cost_us = std::max({compute, stream, dram}) + waves * kUnitOverheadUs +
              (p.splits > 1 ? kReduceLaunchUs : 0.0);
  return p;
}

// The cheapest plan under the model; ties keep the earlier (smaller) config and fewer splits.
inline Plan choose_plan(int64_t m, int64_t n, int64_t k, const GpuSlots& gpu, int out_bytes) {
  const int64_t kblocks = cdiv(k, kBlockK);
  Plan best;
  bool have = false;
  for (int cfg = 0; cfg < kNumTileConfigs; ++cfg) {
    const TileConfig& c = kTileConfigs[cfg];
    const int64_t m_blocks = cdiv(m, c.block_m);
    // A cluster needs >= 2 real M blocks, else its second CTA only multiplies padding.
    if (c.cluster_m > 1 && m_blocks < c.cluster_m) continue;
    const int64_t tiles = m_blocks * cdiv(n, c.block_n);
    for (int s = 1; s <= kMaxSplits; ++s) {
      if (s > 1 && (kblocks < s * kMinKBlocksPerSplit || tiles * s > gpu.num_sms)) break;
      const Plan p = make_plan(cfg, s, m, n, k, gpu, out_bytes);
      if (!have || p.cost_us < best.cost_us * 0.999) {
        best = p;
        have = true;
      }
    }
  }
  return best;
}

}  // namespace gemm::cuda
