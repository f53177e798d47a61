// ROCm gfx942 planner (host-only): the tile and split-K of each call, chosen by the MI300X time
// model from the figures of the kernel instance the call runs (its storage order, B scale format and
// fold), which benchmarks/rocm_model.py reads from the compiled gfx942 assembly (rocm_loop_costs.h,
// generated). estimate_seconds is the model's only formula: the model script calls it through a
// small g++ program, for our kernel and for RadeonFlow's (whose measured MI300X times fit its two
// constants), so the calibration and the plans share it. Plain C++ with no HIP
// include: the launcher, the CPU emulator and that program all read the same choice from here.
#pragma once

#include <cstdint>

#include "gemm_contract.h"
#include "rocm_loop_costs.h"
#include "rocm_tile_configs.h"

namespace gemm::rocm {

constexpr int kMaxSplitK = 16;
constexpr int kDefaultGroupM = 8;  // tiles along M that share one sweep over N (L2 reuse of B)

// MI300X figures (AMD MI300X data sheet) and the model's fixed assumptions.
constexpr int kMi300xCuCount = 304;
constexpr double kClockHz = 2.1e9;             // peak engine clock
constexpr double kHbmBytesPerSecond = 5.3e12;
constexpr double kHbmEfficiency = 0.80;        // fraction of HBM peak a streaming kernel reaches (assumed)
constexpr double kIssueClocks = 4;             // a wave64 instruction other than an MFMA issues in 4 clocks
constexpr int kPartialBytes = 4;               // fp32 split-K partials
constexpr int kOutBytes = 2;                   // bf16 C
constexpr int kScaleBytes = 4;                 // fp32 scales

// What picks a call's dense kernel instance besides its tile; the launcher derives it from the call
// (plan_dense in gemm_launcher.hip) before it asks for a config, since each instance's main loop
// costs differently (a K-major loop issues far fewer instructions than an M/N-major one).
struct InstanceVariant {
  OperandMajor major = OperandMajor::kK;
  ScaleFormat b_scale = ScaleFormat::kF32;
  bool fold = false;  // some operand is e4m3fn
};

constexpr const InstanceCost& loop_costs(const InstanceVariant& variant, int tile) {
  return kLoopCosts[static_cast<int>(variant.major)][static_cast<int>(variant.b_scale)][variant.fold ? 1 : 0][tile];
}

// Every row of rocm_loop_costs.h is filled, with its tile's shape.
constexpr bool loop_costs_match_tiles() {
  for (const auto& by_major : kLoopCosts)
    for (const auto& by_scale : by_major)
      for (const auto& by_fold : by_scale)
        for (int tile = 0; tile < kNumTiles; ++tile)
          if (by_fold[tile].block_m != kTiles[tile].block_m || by_fold[tile].block_n != kTiles[tile].block_n) return false;
  return true;
}
static_assert(loop_costs_match_tiles(), "rocm_loop_costs.h is stale: python3 benchmarks/rocm_model.py --write-costs");

// A launch configuration: which tile, how many K splits (reduced in fixed order), block swizzle.
struct RocmConfig {
  int tile = 0;
  int split_k = 1;
  int group_m = kDefaultGroupM;
};

// Work a call does besides its GEMM kernel that the estimate charges: operand bytes copied first
// (each read and written once) and the launches doing it. Our launcher reads the challenge layouts
// in place; RadeonFlow's timed call transposes A and B first.
struct Staging {
  double bytes = 0;
  int launches = 0;
};

constexpr double max2(double a, double b) { return a > b ? a : b; }

// Clocks of one K step of 128 of a workgroup on a SIMD holding `waves` waves of the instance: the
// MFMA pipe, the issue of everything else, or one wave's llvm-mca time plus the latency llvm-mca
// cannot see, whichever is longest.
constexpr double step_clocks(const LoopCost& loop, int waves, const ModelConstants& c) {
  const double mfma = double(waves) * loop.mfma_cycles;
  const double issue = waves * kIssueClocks * loop.other_instructions;
  const double alone = loop.mca_clocks + loop.k_steps * c.latency_clocks;
  return max2(max2(mfma, issue), alone) / loop.k_steps;
}

// Estimated seconds of an m x n x k GEMM run by `inst` (main loop `loop`) with `split` K splits on a
// device of `cu_count` CUs: the slower of the compute rounds (every round of resident blocks runs its
// K steps; one extra step of latency for the first stage, which nothing hides) and the HBM floor over
// unique bytes, plus the launch, the split-K reduce (partials written, read back, C written, one
// more launch) and any staging.
constexpr double estimate_seconds(const InstanceCost& inst, const LoopCost& loop, int64_t m, int64_t n, int64_t k,
                                  int split, int cu_count, const ModelConstants& c, const Staging& staging = {}) {
  const double hbm = kHbmBytesPerSecond * kHbmEfficiency;
  const int64_t k_blocks = ceil_div(k, kBlockK);
  const int64_t per_split = ceil_div(k_blocks, split);
  const int64_t splits = ceil_div(k_blocks, per_split);  // no empty split, as the launcher does
  const int64_t blocks = ceil_div(m, inst.block_m) * ceil_div(n, inst.block_n) * splits;
  const int64_t rounds = ceil_div(blocks, int64_t{cu_count} * inst.blocks_per_cu);
  const double compute = rounds * (per_split * step_clocks(loop, inst.waves_per_simd, c) + c.latency_clocks) / kClockHz;
  const double scales = double(kScaleBytes) * (m + ceil_div(n, kScaleBlockN)) * k_blocks;
  const double out = splits > 1 ? double(kPartialBytes) * splits * m * n : double(kOutBytes) * m * n;
  const double memory = (double(m) * k + double(n) * k + scales + out) / hbm;
  const double reduce =
      splits > 1 ? (2.0 * kPartialBytes * splits * m * n + double(kOutBytes) * m * n) / hbm + c.launch_seconds : 0.0;
  const double staged = 2 * staging.bytes / hbm + staging.launches * c.launch_seconds;
  return max2(compute, memory) + c.launch_seconds + reduce + staged;
}

// Estimated seconds of `config` for our kernel's `variant` instance (the loop path the planner plans
// with: the fast one).
constexpr double estimate_config_seconds(int64_t m, int64_t n, int64_t k, const RocmConfig& config,
                                         const InstanceVariant& variant, int cu_count) {
  const InstanceCost& inst = loop_costs(variant, config.tile);
  return estimate_seconds(inst, inst.fast, m, n, k, config.split_k, cu_count, kModelConstants);
}

// The config with the least estimated time over every tile and split 1..16 (ties keep the larger tile
// and fewer splits), each tile costed by its `variant` instance. Every shape gets one; none is refused.
constexpr RocmConfig select_config(int64_t m, int64_t n, int64_t k, const InstanceVariant& variant, int cu_count) {
  const int64_t k_blocks = ceil_div(k, kBlockK);
  RocmConfig best{};
  double best_seconds = -1.0;
  for (int tile = 0; tile < kNumTiles; ++tile) {
    for (int split = 1; split <= kMaxSplitK && split <= k_blocks; ++split) {
      const RocmConfig candidate{tile, split, kDefaultGroupM};
      const double seconds = estimate_config_seconds(m, n, k, candidate, variant, cu_count);
      if (best_seconds < 0 || seconds < best_seconds) {
        best = candidate;
        best_seconds = seconds;
      }
    }
  }
  return best;
}

// The shapes the package is tuned for, each in the layout its suite uses (benchmarks/shapes.py): the 18
// AMD-challenge shapes M/N-major, the DeepSeek-V3 suite K-major; e4m3fnuz operands and fp32 scales. Each
// with the config select_config gives it on an MI300X, evaluated at compile time: nothing is pinned by
// hand. The emulator runs every distinct config here on scaled-down shapes.
struct TunedShape {
  int64_t m, n, k;
  InstanceVariant variant;
  RocmConfig config;
};
constexpr InstanceVariant kChallengeLayout{OperandMajor::kMN, ScaleFormat::kF32, false};
constexpr InstanceVariant kKMajorLayout{OperandMajor::kK, ScaleFormat::kF32, false};
constexpr TunedShape tuned(int64_t m, int64_t n, int64_t k, const InstanceVariant& variant) {
  return {m, n, k, variant, select_config(m, n, k, variant, kMi300xCuCount)};
}
constexpr TunedShape challenge(int64_t m, int64_t n, int64_t k) { return tuned(m, n, k, kChallengeLayout); }
constexpr TunedShape k_major(int64_t m, int64_t n, int64_t k) { return tuned(m, n, k, kKMajorLayout); }
inline constexpr TunedShape kTuned[] = {
    // AMD Developer Challenge 2025 fp8-mm benchmark shapes, in the challenge layout
    challenge(1024, 1536, 7168), challenge(1024, 3072, 1536), challenge(1024, 576, 7168), challenge(1024, 7168, 256),
    challenge(1024, 7168, 2048), challenge(1024, 4608, 7168), challenge(1024, 7168, 2304), challenge(1024, 512, 7168),
    challenge(1024, 4096, 512), challenge(6144, 1536, 7168), challenge(6144, 3072, 1536), challenge(6144, 576, 7168),
    challenge(6144, 7168, 256), challenge(6144, 7168, 2048), challenge(6144, 4608, 7168), challenge(6144, 7168, 2304),
    challenge(6144, 512, 7168), challenge(6144, 4096, 512),
    // DeepSeek-V3 suite, M in {64, 128, 4096}, K-major
    k_major(64, 2112, 7168), k_major(64, 576, 7168), k_major(64, 24576, 1536), k_major(64, 32768, 512),
    k_major(64, 7168, 16384), k_major(64, 4096, 7168), k_major(64, 7168, 2048), k_major(128, 2112, 7168),
    k_major(128, 576, 7168), k_major(128, 24576, 1536), k_major(128, 32768, 512), k_major(128, 7168, 16384),
    k_major(128, 4096, 7168), k_major(128, 7168, 2048), k_major(4096, 2112, 7168), k_major(4096, 576, 7168),
    k_major(4096, 24576, 1536), k_major(4096, 32768, 512), k_major(4096, 7168, 16384), k_major(4096, 4096, 7168),
    k_major(4096, 7168, 2048),
};

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
