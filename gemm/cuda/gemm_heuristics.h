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

#include "../gemm_launcher.h"
#include "hopper_layout.h"

namespace gemm::cuda {

constexpr int kBlockK = 128;  // = kScaleBlockK = one 128-byte swizzle row of FP8

struct TileConfig {
  int block_m;  // 64 * number of math warpgroups
  int block_n;  // wgmma N, % 16 == 0 (the epilogue's store chunk), <= 128 (see fp8_gemm_kernel.cuh)
};

// BLOCK_M 64: decode / small M (one math warpgroup). BLOCK_M 128 / 192: two / three math warpgroups
// sharing B. Measured on the H200 (tune.py --sweep, benchmarks/results/cuda_notes.md): 192x128 is the
// fastest tile on most M >= 1024 shapes with K >= 1536 (up to 1.4x 128x128), 128x128 where 192-row
// tiles leave a partial wave; 64x112, 64x192, 128x112 and 128x144..192 (one temporary accumulator, or
// two over N halves) never won and are not built.
inline constexpr TileConfig kTileConfigs[] = {
    {64, 64}, {64, 96}, {64, 128}, {128, 128}, {192, 128},
};
inline constexpr int kNumTileConfigs = sizeof(kTileConfigs) / sizeof(kTileConfigs[0]);

// K covered by the wgmma steps between two promotions into the fp32 accumulator (a divisor of
// kBlockK). 64 halves the error of the tensor cores' reduced-precision FP8 accumulation at ~10 %
// of the large-shape throughput (H200, cuda_notes.md); 128 is the DeepSeek-V3 recipe.
constexpr int kPromoteK = 128;

constexpr int kMaxStages = 8;
constexpr int kSmemAlignSlack = hopper::kSwizzleAtomBytes;  // dynamic smem rounded up to 1024 B
constexpr int kBarrierBytesPerStage = 2 * 8;                // full + empty mbarrier

// Register budgets after setmaxnreg (multiples of 8; 128 * (producer + math WGs * math) <= 64K).
// A 40/232 split for two-warpgroup tiles (room for more accumulators) ran 8-10 % slower than 56/224
// on every large shape measured (H200, cuda_notes.md).
constexpr int kProducerRegs = 56;
constexpr int kMaxMathWarpgroups = 3;
constexpr int kMathRegs[kMaxMathWarpgroups] = {240, 224, 152};  // per thread, for 1, 2, 3 math warpgroups
constexpr int kRegisterFile = 64 * 1024;
// setmaxnreg.inc blocks until the registers exist: an over-budget split would hang the math warps.
constexpr bool register_splits_fit() {
  for (int wg = 1; wg <= kMaxMathWarpgroups; ++wg) {
    if (hopper::kWarpgroupThreads * (kProducerRegs + wg * kMathRegs[wg - 1]) > kRegisterFile) return false;
  }
  return true;
}
static_assert(register_splits_fit(), "register budgets exceed the register file");
constexpr int kMathRegsBesideAcc = 32;  // addresses, scales, loop state next to the accumulators

GEMM_HOST_DEVICE constexpr int num_math_warpgroups(const TileConfig& c) { return c.block_m / hopper::kWgmmaM; }
GEMM_HOST_DEVICE constexpr int num_threads(const TileConfig& c) {
  return (num_math_warpgroups(c) + 1) * hopper::kWarpgroupThreads;  // + one producer warpgroup
}
GEMM_HOST_DEVICE constexpr int math_registers(const TileConfig& c) {
  return kMathRegs[num_math_warpgroups(c) - 1];
}
// Accumulator registers per thread for one 64 x block_n fragment.
GEMM_HOST_DEVICE constexpr int acc_registers(const TileConfig& c) {
  return hopper::kWgmmaM * c.block_n / hopper::kWarpgroupThreads;
}
// The math warpgroups keep the fp32 accumulator and two temporaries (ping-pong: the wgmma of one K
// block runs while the previous one is promoted) in registers where they fit; three-warpgroup tiles
// keep one temporary, the other warpgroups' wgmmas covering each promotion.
GEMM_HOST_DEVICE constexpr bool ping_pong(const TileConfig& c) {
  return 3 * acc_registers(c) + kMathRegsBesideAcc <= math_registers(c);
}
constexpr int kMathRegsBesideAccOneTmp = 24;  // measured: no spills at 152 registers
GEMM_HOST_DEVICE constexpr bool registers_fit(const TileConfig& c) {
  return ping_pong(c) || 2 * acc_registers(c) + kMathRegsBesideAccOneTmp <= math_registers(c);
}
// A tile never spans more than this many 128-wide B scale blocks.
GEMM_HOST_DEVICE constexpr int max_scale_blocks(int block_n) {
  return static_cast<int>((block_n + kScaleBlockN - 1) / kScaleBlockN) + 1;
}

GEMM_HOST_DEVICE constexpr int stage_bytes(const TileConfig& c) { return (c.block_m + c.block_n) * kBlockK; }
// Where a stage's A scales come from. Two-warpgroup tiles consume K blocks fast enough that the
// cp.async path (a producer warp gathering 4-byte scales) held them to 887 TFLOP/s at
// 4096x7168x16384 against 1104 with no scale traffic at all (H200, cuda_notes.md): they load their
// A scales with TMA, in place from the caller's array when TMA can address it (see kAScaleBoxKBlocks),
// else from a K-block-major copy. B scales (<= 3 floats) and the A scales of one-warpgroup tiles are
// gathered by cp.async from any layout.
GEMM_HOST_DEVICE constexpr bool scales_by_tma(const TileConfig& c) { return c.block_m > hopper::kWgmmaM; }
// TMA reads A scales from an M-major [K/128, M] array as one K block's BLOCK_M floats, and from the
// usual row-major [M, K/128] array as a box of kAScaleBoxKBlocks K blocks x BLOCK_M rows: 16 bytes,
// TMA's smallest inner box, at a K-block coordinate rounded down to a multiple of 4 (16-byte aligned);
// the stage uses one column of it.
constexpr int kAScaleBoxKBlocks = 4;
// Such a box is BLOCK_M rows of 16 bytes: as many TMA row requests as the A tile itself, every stage.
// That beats the copy kernel's extra launch only on small grids (H200, one run of each: 1024-row
// shapes 3-14 % faster, 4096x32768x512 31 % and 4096x7168x16384 11 % slower), so K-major A scales
// are read in place only by plans of at most this many waves of work units, and of more than one M
// block (with one, every CTA reads the same box: 128x32768x512 16.4 -> 22.6 µs).
constexpr int64_t kMaxWavesForInPlaceKMajorScales = 2;
GEMM_HOST_DEVICE constexpr int a_scale_stage_floats(const TileConfig& c) {
  return scales_by_tma(c) ? c.block_m * kAScaleBoxKBlocks : c.block_m;
}
// Per stage, the scales the math warpgroups need for that K block: the A scales above and up to
// kMaxScaleBlocksPerTile B scales (a BLOCK_N not dividing 128 can straddle up to 3 scale blocks).
constexpr int kMaxScaleBlocksPerTile = 4;  // 3 used, padded to 16 bytes
constexpr int kTmaSmemAlign = 128;         // TMA destinations in shared memory
GEMM_HOST_DEVICE constexpr int scale_stage_floats(const TileConfig& c) {
  constexpr int kAlignFloats = kTmaSmemAlign / static_cast<int>(sizeof(float));
  return (a_scale_stage_floats(c) + kMaxScaleBlocksPerTile + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
}
// Epilogue staging: the BLOCK_M x BLOCK_N tile of a 16-bit output, written by the math warpgroups and
// stored by TMA while the next tile's K blocks already run (fp32 outputs and split-K partials are
// stored from registers instead). A multiple of 1024 bytes for every config (BLOCK_N % 16 == 0).
constexpr int kStagedOutBytes = 2;
GEMM_HOST_DEVICE constexpr int staging_bytes(const TileConfig& c) { return c.block_m * c.block_n * kStagedOutBytes; }
GEMM_HOST_DEVICE constexpr int ring_stage_bytes(const TileConfig& c) {
  return stage_bytes(c) + scale_stage_floats(c) * static_cast<int>(sizeof(float)) + kBarrierBytesPerStage;
}
GEMM_HOST_DEVICE constexpr int num_stages(const TileConfig& c) {
  const int fit = (hopper::kMaxSmemPerBlock - kSmemAlignSlack - staging_bytes(c)) / ring_stage_bytes(c);
  return fit < kMaxStages ? fit : kMaxStages;
}
GEMM_HOST_DEVICE constexpr int smem_bytes(const TileConfig& c) {
  return num_stages(c) * ring_stage_bytes(c) + staging_bytes(c) + kSmemAlignSlack;
}
constexpr int kMinStages = 4;  // fewer cannot cover the TMA latency of a K block

// Rows of M blocks walked together by the persistent scheduler so that concurrently running CTAs
// share A and B tiles in L2.
constexpr int kGroupM = 8;
constexpr int kMaxSplits = 16;
constexpr int kMinKBlocksPerSplit = 2;

// H200 per-SM model constants, fitted to tune.py --sweep runs of this kernel (every config and the
// split counts that fill the GPU, on the DeepSeek-V3 + challenge shapes; benchmarks/results/cuda_notes.md,
// benchmarks/results/h200/sweep_192.jsonl): the chosen plans run within 1.3 % (geomean over 41 shapes)
// of the fastest measured one. Tensor rate per SM under the power cap: 6e6 FLOP/us for one math
// warpgroup, 9.5e6 for two, 10.5e6 for three (their wgmmas cover each other's promotions);
// kSmBytesPerUs bounds the rate a CTA takes in its (BM+BN)*128 bytes per K block; kDramBytesPerUs the
// whole-GPU streaming rate of decode shapes.
constexpr double kSmFlopsPerUs[kMaxMathWarpgroups] = {6.0e6, 9.5e6, 10.5e6};
constexpr double sm_flops_per_us(const TileConfig& c) {
  return kSmFlopsPerUs[num_math_warpgroups(c) - 1];
}
GEMM_HOST_DEVICE constexpr double unit_overhead_us(const TileConfig& c) {  // drain + epilogue per unit
  return num_math_warpgroups(c) == 1 ? 0.1 : 0.2;
}
constexpr double kSmBytesPerUs = 70.0e3;
constexpr double kDramBytesPerUs = 3.0e6;
constexpr double kReduceLaunchUs = 0.5;  // extra kernel for the fixed-order split-K reduction

struct Plan {
  int config = 0;        // index into kTileConfigs
  int splits = 1;        // K split count (1: no split-K)
  int kblocks_per_split = 0;
  int64_t m_blocks = 0, n_blocks = 0;
  int64_t units = 0;     // m_blocks * n_blocks * splits
  int grid = 0;          // persistent CTAs = min(units, SMs)
  double cost_us = 0;
};

GEMM_HOST_DEVICE constexpr int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline Plan make_plan(int config, int splits, int64_t m, int64_t n, int64_t k, int num_sms,
                      int out_bytes) {
  const TileConfig& c = kTileConfigs[config];
  Plan p;
  p.config = config;
  const int64_t kblocks = cdiv(k, kBlockK);
  p.kblocks_per_split = static_cast<int>(cdiv(kblocks, splits));
  p.splits = static_cast<int>(cdiv(kblocks, p.kblocks_per_split));  // no empty splits
  p.m_blocks = cdiv(m, c.block_m);
  p.n_blocks = cdiv(n, c.block_n);
  p.units = p.m_blocks * p.n_blocks * p.splits;
  p.grid = static_cast<int>(std::min<int64_t>(p.units, num_sms));
  const double waves = static_cast<double>(cdiv(p.units, num_sms));
  const double kb = p.kblocks_per_split;
  const double compute = waves * kb * 2.0 * c.block_m * c.block_n * kBlockK / sm_flops_per_us(c) *
                         (1.0 + 16.0 / c.block_n);  // narrow wgmma re-reads A more per FLOP
  const double stream = waves * kb * stage_bytes(c) / kSmBytesPerUs;
  const double unique = static_cast<double>(m * k + n * k + m * n * out_bytes);
  const double partials = p.splits > 1 ? 2.0 * p.splits * m * n * 4 : 0.0;
  const double dram = (unique + partials) / kDramBytesPerUs;
  p.cost_us = std::max({compute, stream, dram}) + waves * unit_overhead_us(c) +
              (p.splits > 1 ? kReduceLaunchUs : 0.0);
  return p;
}

// Whether a plan's 128+-row tiles read K-major A scales in place (see kMaxWavesForInPlaceKMajorScales)
// instead of from the launcher's K-block-major copy.
inline bool k_major_scales_in_place(const Plan& p) {
  return cdiv(p.units, p.grid) <= kMaxWavesForInPlaceKMajorScales && p.m_blocks > 1;
}

// The cheapest plan under the model; ties keep the earlier (smaller) config and fewer splits.
inline Plan choose_plan(int64_t m, int64_t n, int64_t k, int num_sms, int out_bytes) {
  const int64_t kblocks = cdiv(k, kBlockK);
  Plan best;
  bool have = false;
  for (int cfg = 0; cfg < kNumTileConfigs; ++cfg) {
    const int64_t tiles = cdiv(m, kTileConfigs[cfg].block_m) * cdiv(n, kTileConfigs[cfg].block_n);
    for (int s = 1; s <= kMaxSplits; ++s) {
      if (s > 1 && (kblocks < s * kMinKBlocksPerSplit || tiles * s > num_sms)) break;
      const Plan p = make_plan(cfg, s, m, n, k, num_sms, out_bytes);
      if (!have || p.cost_us < best.cost_us * 0.999) {
        best = p;
        have = true;
      }
    }
  }
  return best;
}

}  // namespace gemm::cuda
