// The tile configurations of the sm_90a FP8 GEMM and everything the kernel derives from one: stages,
// shared-memory layout, register budgets, epilogue staging, load pairing. Plain C++ (host and device):
// the kernel, the launcher and the host-only planner (planner.h) read the same facts. docs/cuda.md
// gives the measurements behind each choice.
#pragma once

#include <cstdint>

#include "../gemm_contract.h"
#include "hopper_layout.h"

namespace gemm::cuda {

constexpr int kBlockK = 128;  // = kScaleBlockK = one 128-byte swizzle row of FP8

struct TileConfig {
  int block_m;  // 64 * slabs * number of math warpgroups
  int block_n;  // wgmma N, % 16 == 0 (the epilogue's store chunk), <= 128 (see gemm_kernel.cuh)
  // CTAs of a thread-block cluster side by side along N: they run tiles of the same M block and
  // each loads 1/cluster_n of the shared A tile's rows, multicast to all (less L2->SM traffic).
  int cluster_n = 1;
  // 64-row slabs each math warpgroup runs in turn, each with its own fp32 accumulator and sharing one
  // temporary: a 256-row tile from two warpgroups whose registers could not hold four 64 x 128
  // fragments each.
  int slabs = 1;
  // Long units load two K blocks per TMA instruction (pairs_loads() below), on a ring of at least
  // kMinPairStages stages.
  bool pairs = false;
  // Tiles start at any row (the grouped GEMM's unpadded segments), not at multiples of block_m: set on
  // a row's grouped instantiation (with_any_row_start()), never in the table.
  bool any_row_start = false;
};
constexpr int kMaxClusterN = 2;

// The kernel is one template instantiated once per row. BLOCK_M 64: decode / small M (one math
// warpgroup); 128 / 192: two / three math warpgroups sharing B; 256x128: two warpgroups of two slabs,
// for tile counts that fit the SMs better. Wider tiles never won. Row 6 is 128x128 with paired loads,
// which the planner runs in place of 128x128 where units are long (planner.h, paired_twin()). 128x64
// (two warpgroups, paired loads) fills the SMs in one wave where 128x128 tiles are half as many
// (512x2112x7168: 132 tiles against 68). 192x128 also runs in 2-CTA clusters sharing A (multicast) on
// long runs. 128x96 (and its paired twin) fills the SMs where 128x128 tiles leave a quarter of them idle
// (1024x1536: 128 tiles against 96). 64x32 puts twice the CTAs of 64x64 on decode shapes with few N
// blocks, each streaming its B rows without a K split's reduction (64x2112x7168: 66 CTAs). Plans, and
// the planner's timing data (tests/cuda/planner_timings.jsonl), name rows by index.
inline constexpr TileConfig kTileConfigs[] = {
    {64, 64, 1, 1, true}, {64, 96, 1, 1, true},  {64, 128, 1, 1, true}, {128, 128}, {192, 128},
    {256, 128, 1, 2},     {128, 128, 1, 1, true}, {128, 64, 1, 1, true}, {192, 128, 2},
    {128, 96},            {128, 96, 1, 1, true},  {64, 32, 1, 1, true},
};
inline constexpr int kNumTileConfigs = sizeof(kTileConfigs) / sizeof(kTileConfigs[0]);

// K covered by the wgmma steps between two promotions into the fp32 accumulator (a divisor of
// kBlockK). 128 is the DeepSeek-V3 recipe; 64 halves the FP8 accumulation error at a throughput cost.
constexpr int kPromoteK = 128;

// As deep a ring as fits: a decode CTA's K-block rate is set by the stage round trip, not its math, so
// more stages in flight stream more of B. Larger tiles are bound by shared memory at 4-5 stages.
constexpr int kMaxStages = 16;
constexpr int kSmemAlignSlack = hopper::kSwizzleAtomBytes;  // dynamic smem rounded up to 1024 B
constexpr int kBarrierBytesPerStage = 2 * 8;                // full + empty mbarrier

// Register budgets after setmaxnreg (multiples of 8; 128 * (producer + math WGs * math) <= 64K).
// A 40/232 split for two-warpgroup tiles ran slower than 56/224 on every large shape measured.
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

GEMM_HOST_DEVICE constexpr int num_math_warpgroups(const TileConfig& c) {
  return c.block_m / (hopper::kWgmmaM * c.slabs);
}
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
// The math warpgroups keep the fp32 accumulators (one per slab) and two temporaries (ping-pong: the
// wgmma of one K block runs while the previous one is promoted) in registers where they fit; three-
// warpgroup and two-slab tiles keep one temporary, the other warpgroups' wgmmas covering each promotion.
GEMM_HOST_DEVICE constexpr bool ping_pong(const TileConfig& c) {
  return (c.slabs + 2) * acc_registers(c) + kMathRegsBesideAcc <= math_registers(c);
}
constexpr int kMathRegsBesideAccOneTmp = 24;  // measured: no spills at 152 registers
GEMM_HOST_DEVICE constexpr bool registers_fit(const TileConfig& c) {
  return ping_pong(c) || (c.slabs + 1) * acc_registers(c) + kMathRegsBesideAccOneTmp <= math_registers(c);
}
// Later stream-K pieces (or K-split ranks) whose partials a head loads at once before adding them (in
// K order): as many accumulator-sized buffers as fit beside the accumulator once the temporaries are
// dead. One piece at a time would cost an L2 round trip per piece.
GEMM_HOST_DEVICE constexpr int fixup_batch(const TileConfig& c) {
  const int fit = (math_registers(c) - c.slabs * acc_registers(c) - kMathRegsBesideAcc) / acc_registers(c);
  return fit < 1 ? 1 : fit;
}
// Tile-local columns of B scale block boundaries are multiples of this (tile starts are multiples of
// block_n, block boundaries of 128).
GEMM_HOST_DEVICE constexpr int boundary_step(int block_n) {
  int a = block_n, b = static_cast<int>(kScaleBlockN);
  while (b != 0) {
    const int r = a % b;
    a = b;
    b = r;
  }
  return a;
}
// A tile never spans more than this many 128-wide B scale blocks.
GEMM_HOST_DEVICE constexpr int max_scale_blocks(int block_n) {
  return static_cast<int>((block_n + kScaleBlockN - 1) / kScaleBlockN) + 1;
}

GEMM_HOST_DEVICE constexpr int stage_bytes(const TileConfig& c) { return (c.block_m + c.block_n) * kBlockK; }
// Where a stage's A scales come from. Two-warpgroup tiles consume K blocks too fast for a producer
// warp gathering 4-byte scales: 128+-row tiles load their A scales with TMA, except where a CTA runs
// few K blocks (gather_a_scales() in planner.h). B scales (<= 3 floats) and the A scales of
// one-warpgroup tiles are gathered by cp.async from any layout.
GEMM_HOST_DEVICE constexpr bool scales_by_tma(const TileConfig& c) { return c.block_m > hopper::kWgmmaM; }
// A stage holds its K block's A scales as one M-major [BLOCK_M] column, which TMA loads from an M-major
// [K/128, M] array: the caller's, or the launcher's transposed copy of the usual row-major [M, K/128]
// one. Every way of reading row-major scales in place measured slower than that copy.
// A TMA box must start 16-byte aligned along its innermost dimension (an unaligned start is an illegal
// instruction), so a tile starting at any row loads the column from its first row aligned down to
// kAScaleBoxAlignRows, kAScaleSlackFloats longer (which keeps every stage's column TMA-aligned).
constexpr int kAScaleBoxAlignRows = hopper::kTmaAlignBytes / static_cast<int>(sizeof(float));
constexpr int kAScaleSlackFloats = 32;
GEMM_HOST_DEVICE constexpr int a_scale_stage_floats(const TileConfig& c) {
  return c.block_m + (c.any_row_start ? kAScaleSlackFloats : 0);
}
GEMM_HOST_DEVICE constexpr TileConfig with_any_row_start(TileConfig c) {
  c.any_row_start = true;
  return c;
}
// The first row of the A-scale box of a tile whose first row is row0.
GEMM_HOST_DEVICE constexpr int64_t a_scale_box_row(const TileConfig& c, int64_t row0) {
  return c.any_row_start ? row0 / kAScaleBoxAlignRows * kAScaleBoxAlignRows : row0;
}
// Per stage, the scales the math warpgroups need for that K block: the A scales above and up to
// kMaxScaleBlocksPerTile B scales (a BLOCK_N not dividing 128 can straddle up to 3 scale blocks).
// The ring keeps them in two arrays, [stage][BLOCK_M] and [stage][kMaxScaleBlocksPerTile], so that the
// A scales of consecutive stages are contiguous: one TMA box fills two (paired loads, below).
constexpr int kMaxScaleBlocksPerTile = 4;  // 3 used, padded to 16 bytes
constexpr int kTmaSmemAlign = 128;         // TMA destinations in shared memory
static_assert(hopper::kWgmmaM * sizeof(float) % kTmaSmemAlign == 0, "every stage's A scales start TMA-aligned");
static_assert(kAScaleSlackFloats * sizeof(float) % kTmaSmemAlign == 0 && kAScaleSlackFloats >= kAScaleBoxAlignRows,
              "the slack keeps columns TMA-aligned and holds the rows below an aligned-down box start");
GEMM_HOST_DEVICE constexpr int scale_stage_floats(const TileConfig& c) {
  return a_scale_stage_floats(c) + kMaxScaleBlocksPerTile;
}
GEMM_HOST_DEVICE constexpr int ring_stage_bytes(const TileConfig& c) {
  return stage_bytes(c) + scale_stage_floats(c) * static_cast<int>(sizeof(float)) + kBarrierBytesPerStage;
}
constexpr int kMinStages = 4;  // fewer cannot cover the TMA latency of a K block
// Epilogue staging: per math warpgroup, one 64-row slab of a 16-bit output, written by the warpgroup
// and stored by TMA while the next tile's K blocks already run (fp32 outputs and stream-K partials are
// stored from registers instead). A slab leaves in staging_col_parts() rounds of BLOCK_N / parts
// columns, more than one only where whole slabs would leave fewer than kMinStages stages (256x128:
// 16 KB of staging instead of 32), or fewer than kMinPairStages in a config that pairs its loads (the
// 128x128 twin). A multiple of 1024 bytes for every config (BLOCK_N % 16 == 0).
constexpr int kStagedOutBytes = 2;
constexpr int kMinStoreChunkCols = hopper::kMinStoreSpanBytes / kStagedOutBytes;
GEMM_HOST_DEVICE constexpr int staging_bytes(const TileConfig& c, int parts) {
  return num_math_warpgroups(c) * hopper::kWgmmaM * (c.block_n / parts) * kStagedOutBytes;
}
// The producer loads two K blocks into two consecutive stages with one TMA instruction per operand
// where it can (a 3-D view of the operand, [K/128][rows][128 bytes]): an SM's TMA unit takes in lines
// at a rate set by its instructions more than by its bytes. A pair's first stage waits for its second,
// so pairs pay only on deep rings (6+ stages) and in long units (kMinPairUnitKBlocks and more K blocks
// of a tile, K split share or stream-K range): the 64-row configs and a 128x128 twin whose epilogue
// is staged in two column rounds to make room for a sixth stage. A-multicast clusters keep one K block
// an instruction: a CTA's slice of the A tile is not one box of the paired layout.
constexpr int kKBlocksPerPair = 2;
constexpr int kMinPairStages = 6;
constexpr int kMinPairUnitKBlocks = 48;
static_assert(kMinPairUnitKBlocks > kKBlocksPerPair, "a paired plan has whole K blocks to pair");
GEMM_HOST_DEVICE constexpr bool pairs_loads(const TileConfig& c) { return c.pairs; }
GEMM_HOST_DEVICE constexpr int staging_col_parts(const TileConfig& c) {
  const int chunks = c.block_n / kMinStoreChunkCols;
  const int min_stages = pairs_loads(c) ? kMinPairStages : kMinStages;
  int parts = 1;
  while (chunks % (2 * parts) == 0 &&
         min_stages * ring_stage_bytes(c) + staging_bytes(c, parts) + kSmemAlignSlack > hopper::kMaxSmemPerBlock) {
    parts *= 2;
  }
  return parts;
}
GEMM_HOST_DEVICE constexpr int staging_bytes(const TileConfig& c) { return staging_bytes(c, staging_col_parts(c)); }
// Bytes of a staged output row per TMA store box: the widest swizzle span (128, 64 or 32) that divides
// a round's row. TMA works through a box a row at a time, so wide rows mean fewer, fuller requests on
// the SM's one TMA unit, which the next K blocks' loads queue behind.
GEMM_HOST_DEVICE constexpr int store_span_bytes(const TileConfig& c) {
  const int row_bytes = c.block_n / staging_col_parts(c) * kStagedOutBytes;
  int span = hopper::kMaxStoreSpanBytes;
  while (row_bytes % span != 0) span /= 2;
  return span;
}
GEMM_HOST_DEVICE constexpr int num_stages(const TileConfig& c) {
  const int fit = (hopper::kMaxSmemPerBlock - kSmemAlignSlack - staging_bytes(c)) / ring_stage_bytes(c);
  return fit < kMaxStages ? fit : kMaxStages;
}
GEMM_HOST_DEVICE constexpr int smem_bytes(const TileConfig& c) {
  return num_stages(c) * ring_stage_bytes(c) + staging_bytes(c) + kSmemAlignSlack;
}

// Cluster split-K (tile_scheduler.h): up to the portable cluster size, on the 64-row one-CTA tiles at
// least kMinSplitTileCols wide, the only ones where splits paid (32- and 48-wide splits lost to 64-wide
// ones at N = 576). Each has a second instantiation for split plans (the kernel's kSplitK), so that
// whole-tile and stream-K plans run kernels free of the cluster barriers and DSMEM reads.
constexpr int kMaxKSplit = 8;
constexpr int kMinSplitTileCols = 64;
GEMM_HOST_DEVICE constexpr bool splits_k(const TileConfig& c) {
  return c.block_m == hopper::kWgmmaM && c.block_n >= kMinSplitTileCols && c.cluster_n == 1 && c.slabs == 1;
}

}  // namespace gemm::cuda
