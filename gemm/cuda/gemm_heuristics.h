// Tile-shape and stream-K choice for the sm_90a FP8 GEMM. Pure C++ (no CUDA include) so that a CPU
// test can compile it and check that the test shapes reach every configuration.
//
// The tile table is data: the kernel is ONE template instantiated once per row of kTileConfigs.
// For a problem the planner scores every config, with whole tiles only and with a stream-K region for
// the partial last wave (tile_scheduler.h), with a small per-SM roofline model (persistent grid: each
// SM runs its share of K blocks back to back) and keeps the cheapest.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../gemm_contract.h"
#include "hopper_layout.h"
#include "tile_scheduler.h"

namespace gemm::cuda {

constexpr int kBlockK = 128;  // = kScaleBlockK = one 128-byte swizzle row of FP8

struct TileConfig {
  int block_m;  // 64 * slabs * number of math warpgroups
  int block_n;  // wgmma N, % 16 == 0 (the epilogue's store chunk), <= 128 (see fp8_gemm_kernel.cuh)
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
};
constexpr int kMaxClusterN = 2;

// BLOCK_M 64: decode / small M (one math warpgroup). BLOCK_M 128 / 192: two / three math warpgroups
// sharing B. Measured on the H200 (tune.py --sweep, benchmarks/results/cuda_notes.md): 192x128 is the
// fastest tile on most M >= 1024 shapes with K >= 1536 (up to 1.4x 128x128), 128x128 where 192-row
// tiles leave a partial wave; 64x112, 64x192, 128x112 and 128x144..192 (one temporary accumulator, or
// two over N halves) never won and are not built (decode shapes again in h200/ab_decode_fill.jsonl;
// 128x192 again with the current main loop in h200/ab_wide192.jsonl: 4096x7168x16384 1003 against 870
// us for 192x128 - two warpgroups with one temporary each leave the tensor cores idle while both promote).
// 256x128 (two math warpgroups of two slabs each) wins where its tile count fits the SMs better
// (6144x576x7168: one wave, 61.6 -> 50.1 us against 128x128) and loses to 192x128 per K block on large
// shapes (h200/ab_slabs.jsonl); in 2-CTA clusters it never won (h200/ab_slabs_cluster.jsonl).
// The last row is 128x128 with paired loads: the planner runs it in place of 128x128 where the units are
// long (choose_plan): its sixth stage costs a two-round epilogue, which short-K shapes pay for
// (paired_twin()). 128x96 with paired loads was no better (h200/ab_n96.jsonl).
inline constexpr TileConfig kTileConfigs[] = {
    {64, 64, 1, 1, true}, {64, 96, 1, 1, true}, {64, 128, 1, 1, true}, {128, 128}, {192, 128}, {128, 128, 2},
    {256, 128, 1, 2},     {128, 128, 1, 1, true},
};
inline constexpr int kNumTileConfigs = sizeof(kTileConfigs) / sizeof(kTileConfigs[0]);

// K covered by the wgmma steps between two promotions into the fp32 accumulator (a divisor of
// kBlockK). 64 halves the error of the tensor cores' reduced-precision FP8 accumulation at ~10 %
// of the large-shape throughput (H200, cuda_notes.md); 128 is the DeepSeek-V3 recipe.
constexpr int kPromoteK = 128;

// As deep a ring as fits: the 64-row decode tiles take 13 (64x64) and 10 (64x96) stages. A decode CTA's
// K-block rate is set by the stage round trip (release, TMA issue, load, wake-up), not by its math, so
// more stages in flight stream more of B: 64x4096x7168 and 128x4096x7168 ran 11 % faster with 13 stages
// than with 8 (H200, h200/ab_stages16.jsonl). Larger tiles are bound by shared memory at 4-5 stages.
constexpr int kMaxStages = 16;
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
// Later stream-K pieces whose partials a head loads at once before adding them (in K order): as many
// accumulator-sized buffers as fit beside the accumulator once the temporaries are dead. One piece at a
// time costs an L2 round trip per piece (H200 A/B, benchmarks/results/h200/ab_skfix3.jsonl: 128x576x7168
// 12.5 -> 11.7 us).
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
// What one CTA loads from L2 per K block: its share of the multicast A tile, and its B tile.
GEMM_HOST_DEVICE constexpr int cta_stage_load_bytes(const TileConfig& c) {
  return (c.block_m / c.cluster_n + c.block_n) * kBlockK;
}
// Where a stage's A scales come from. Two-warpgroup tiles consume K blocks fast enough that the
// cp.async path (a producer warp gathering 4-byte scales) held them to 887 TFLOP/s at
// 4096x7168x16384 against 1104 with no scale traffic at all (H200, cuda_notes.md): they load their
// A scales with TMA, except where a CTA runs few K blocks (gather_a_scales). B scales (<= 3 floats) and
// the A scales of one-warpgroup tiles are gathered by cp.async from any layout.
GEMM_HOST_DEVICE constexpr bool scales_by_tma(const TileConfig& c) { return c.block_m > hopper::kWgmmaM; }
// A stage holds its K block's A scales as one M-major [BLOCK_M] column, which TMA loads from an M-major
// [K/128, M] array: the caller's, or the launcher's transposed copy of the usual row-major [M, K/128]
// one. Row-major scales read in place cost more than that copy (H200, interleaved A/B):
//  - a 16-byte box of 4 K blocks x BLOCK_M rows with every stage, the math warpgroups reading one
//    column: 4096x7168x16384 11 % slower (cuda_notes.md);
//  - a ring of such boxes, each loaded once: +13 instructions a K block in every main loop, 3 % slower
//    (h200/ab_scale_ring.jsonl, branch `scalering`);
//  - the scale warp copying each K block's column from such a ring into the stage: 4-27 % slower on the
//    192x128 and 128x128 tiles; the copy sits on the path of a stage's full barrier, whose 4-5 stage
//    rings have no latency to spare (h200/ab_scale_warp.jsonl, diag_scalewarp.jsonl, branch
//    `scalewarp`).
GEMM_HOST_DEVICE constexpr int a_scale_stage_floats(const TileConfig& c) { return c.block_m; }
// Per stage, the scales the math warpgroups need for that K block: the A scales above and up to
// kMaxScaleBlocksPerTile B scales (a BLOCK_N not dividing 128 can straddle up to 3 scale blocks).
// The ring keeps them in two arrays, [stage][BLOCK_M] and [stage][kMaxScaleBlocksPerTile], so that the
// A scales of consecutive stages are contiguous: one TMA box fills two (paired loads, below).
constexpr int kMaxScaleBlocksPerTile = 4;  // 3 used, padded to 16 bytes
constexpr int kTmaSmemAlign = 128;         // TMA destinations in shared memory
static_assert(hopper::kWgmmaM * sizeof(float) % kTmaSmemAlign == 0, "every stage's A scales start TMA-aligned");
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
// where it can (a 3-D view of the operand, [K/128][rows][128 bytes]). An SM's TMA unit takes in lines
// at a rate set by its instructions more than by its bytes: a 128x128 tile's A and B at 1024x1536x7168
// land in 708 cycles a K block one K block an instruction, in 424 two at a time (H200, data path alone,
// scripts/cuda/diag_ingest.cu, h200/diag_ingest.jsonl). But a pair's first stage waits for its second,
// and the producer refills a stage only once the next one is free too, so pairs pay only in deep rings:
// on the 4-stage 192x128 and 256x128 rings the GEMM ran 5-17 % slower with them (h200/ab_pairs.jsonl).
// Nor do they in short units (a tile's K blocks, or a K split's or stream-K range's share of them): with
// 6+ stages, units of 56 and more K blocks ran 4-8 % faster (1024x1536x7168 27.4 -> 25.5 us,
// 128x4096x7168 16.9 -> 15.9, 1024x512x7168 15.8 -> 14.6), units of 28 and fewer up to 6 % slower
// (64x576x7168 split 4 ways 10.6 -> 11.2) (h200/ab_pf.jsonl, ab_pf5.jsonl). So the configs that pair are
// the 64-row ones (8-13 stages) and a 128x128 twin whose epilogue is staged in two column rounds to make
// room for a sixth stage; the producer pairs only units of kMinPairUnitKBlocks and more.
// A-multicast clusters keep one K block an instruction: a CTA's slice of the A tile is not one box of
// the paired layout.
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
// a round's row. TMA works through a box a row at a time (a 64-row store held its issuing thread
// ~70 ns whatever the row length, H200 trace in cuda_notes.md), so wide rows mean fewer, fuller
// requests on the SM's one TMA unit, which the next K blocks' loads queue behind.
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

// K blocks per stream-K range at least: a piece costs an fp32 tile store, its read by the head and
// a pipeline fill. Measured on the H200 (heuristic plans, 2 vs 8): 64x576x7168 13.7 -> 11.3 us,
// 7x192x7168 13.1 -> 9.6 us, the same plans and times where ranges are longer anyway.
constexpr int kMinStreamKIters = 8;

// H200 per-SM model constants, fitted to tune.py --sweep runs of this kernel (every config, whole
// tiles and stream-K, on the DeepSeek-V3 + challenge shapes; benchmarks/results/cuda_notes.md,
// benchmarks/results/h200/sweep_*.jsonl). Tensor rate per SM under the power cap: 6e6 FLOP/us for one
// math warpgroup, 9.5e6 for two, 10.5e6 for three (their wgmmas cover each other's promotions);
// kSmBytesPerUs bounds the rate a CTA takes in its (BM+BN)*128 bytes per K block; kDramBytesPerUs the
// whole-GPU streaming rate of decode shapes. Stream-K adds to its share of K blocks a fixed cost (the
// flag reset before the launch, the head's wait) and, on the critical path, one partial written by a
// later piece and those its head reads back at kFixupBytesPerUs per SM. Fitted to
// benchmarks/results/h200/sweep_fixup.jsonl with the whole-tile constants held: the rate is low because
// it also absorbs what ncu shows stream-K CTAs paying per K block (1.5x the cycles of whole tiles at
// 1024x1536x7168, with equal DRAM bytes), so stream-K is planned only where whole tiles leave most SMs
// idle. Refitted on the kernel of 2026-12-04 with scripts/cuda/fit_planner.py (h200/sweep_planner.jsonl:
// every config, whole tiles and stream-K, 46 shapes, M-major A scales; h200/ab_shortk.jsonl; the CPU test
// test_plans_within_measured_best holds the planner to that data): two warpgroups run at 10e6, not 9.5e6 -
// 128x128 beat 192x128 and 256x128 on every K <= 2304 shape with M <= 4096 (1024x7168x2304: 38.5
// against 44.1 us for the old plan), while 192x128 keeps M = 6144 and the long-K shapes.
constexpr double kSmFlopsPerUs[kMaxMathWarpgroups] = {6.0e6, 10.0e6, 10.5e6};
// Two warpgroups of two slabs (256x128), fitted to benchmarks/results/h200/ab_slabs.jsonl (22 M >= 1024
// shapes, every 128+-row config, interleaved): their K blocks run at about the two-warpgroup rate, and a
// unit ends with four staged stores a warpgroup, so small-K shapes keep 128x128 tiles.
constexpr double kSmFlopsPerUsTwoSlabs = 9.75e6;
constexpr double kTwoSlabUnitOverheadUs = 0.6;
constexpr double sm_flops_per_us(const TileConfig& c) {
  return c.slabs > 1 ? kSmFlopsPerUsTwoSlabs : kSmFlopsPerUs[num_math_warpgroups(c) - 1];
}
// Drain + epilogue per unit.
GEMM_HOST_DEVICE constexpr double unit_overhead_us(const TileConfig& c) {
  return c.slabs > 1 ? kTwoSlabUnitOverheadUs : num_math_warpgroups(c) == 1 ? 0.1 : 0.2;
}
constexpr double kSmBytesPerUs = 70.0e3;
// 2-CTA clusters (A multicast): K blocks of 128x128 tiles ran 3 % faster on K >= 7168 shapes, about
// even elsewhere (benchmarks/results/h200/ab_cluster.jsonl: geomean 0.985 over 15 M >= 4096 shapes;
// 192x128 pairs were even, 0.99, and are not built). Re-measured on 2026-12-04 (sweep_planner.jsonl,
// ab_shortk.jsonl): 0-3 % faster than 128x128 at K = 7168, 1-10 % slower at K <= 2304, hence 0.99.
// They also cost a fixed few us (the package benchmark: 1024x4096x512 12.8 -> 15.9 us, 1024x3072x1536
// 17.6 -> 21.3), so they are planned only for long runs.
constexpr double kClusterKBlockTime = 0.99;
constexpr double kClusterFixedUs = 3.0;
// A CTA streams what no other CTA reads (the B tiles of a one-M-block decode shape) from DRAM at this
// rate: 64x2112x7168 (33 CTAs of 64x64) and 64x7168x16384 (112) both ran 0.33-0.36 us a K block.
constexpr double kSmDramBytesPerUs = 46.0e3;
constexpr double kL2Bytes = 50.0 * 1024 * 1024;  // H200
constexpr double kDramBytesPerUs = 3.0e6;
constexpr double kStreamKFixedUs = 2.4;
constexpr double kFixupBytesPerUs = 21.0e3;
// A stream-K region that follows whole waves (its pieces are the last unit of every CTA) is cheaper than
// the all-stream-K plans those constants were fitted to. Measured on 2026-12-04: its K blocks take 1.16x
// the cycles of whole-tile ones (ncu, 1024x4608x7168, 192x128: 1120 against 967 a K block), and its heads
// read later pieces at about 64 KB/us (trace of 6144x576x7168: four 96 KB partials in ~6 us). With them
// the tail plans win where measured (h200/ab_planner_sk.jsonl: 1024x4608x7168 68.1 -> 64.1 us,
// 3072x1536x7168 71.7 -> 63.5, 1536x4608x7168 100.0 -> 91.2); all-stream-K plans stay as fitted (they
// lost wherever whole tiles or a K split could run: 4096x576x7168 192x128 49.5 against 36.4 us).
constexpr double kTailSkKBlockTime = 1.16;
constexpr double kTailFixupBytesPerUs = 64.0e3;

// Cluster split-K (tile_scheduler.h): up to the portable cluster size, and a share of at least
// kMinSplitKBlocks K blocks per CTA (a share is a pipeline fill, a partial and two cluster barriers).
constexpr int kMaxKSplit = 8;
constexpr int kMinSplitKBlocks = 4;
// Forced plans on the H200 (h200/cal_ksplit.jsonl: 12 decode and M <= 1024 shapes, every one-CTA
// config split 2-8 ways) won only on problems of at most a quarter of the SMs' worth of 64x64 tiles
// (64x576x7168, 9 tiles: split 4 10.4 us against 11.7 with stream-K; 128x576x7168, 18: 10.9 against
// 11.7; 64x2112x7168, 33: 13.7 against 14.1). With more, the un-split plans already stream B at the
// rate HBM gives (64x4096x7168, 64 tiles: 18.5 against 17.2), and so did splits over more than about
// half the SMs (64x2112x7168 split 3, 99 CTAs: 14.6 against 13.7 split 2 on 66). Each rank past the
// first costs about kKSplitRankUs beyond its share of the K blocks (the clustered launch, the rank's
// pipeline fill, its partial read through DSMEM, the cluster barriers).
constexpr int kKSplitSmsPerTile = 4;            // a split needs at most SMs / 4 64x64 tiles of output
constexpr double kKSplitMaxSmFraction = 0.55;  // and runs on at most this share of the SMs
constexpr double kKSplitRankUs = 1.2;

// What the planner knows of the GPU: SMs, and how many clusters of each size fit at once
// (cudaOccupancyMaxActiveClusters: fewer than SMs / size where GPCs do not divide evenly).
constexpr int kMaxClusterCtas = kMaxKSplit > kMaxClusterN ? kMaxKSplit : kMaxClusterN;
struct GpuSlots {
  int sms = 0;
  int clusters[kMaxClusterCtas + 1] = {};  // [s]: clusters of s CTAs (s >= 2)
  constexpr int units(int cluster_ctas) const { return cluster_ctas == 1 ? sms : clusters[cluster_ctas]; }
};

struct Plan {
  int config = 0;  // index into kTileConfigs
  bool fits = true;  // false: beyond the 32-bit schedule (> 2^30 tiles or K blocks: a > 8 TB output)
  // The schedule counts clusters and cluster tiles (BLOCK_M x cluster_n * BLOCK_N); without a
  // cluster those are CTAs and tiles.
  TileSchedule sched;
  int grid = 0;    // persistent clusters
  double cost_us = 0;
  // What breaks a tie in cost_us (decode and short-K shapes whose cost is all DRAM): the share of the
  // last wave's CTAs that have a tile, then the CTAs pulling (ctas()), then the bytes they load from L2.
  double wave_fill = 1;
  double loaded_bytes = 0;
  constexpr int cluster_n() const { return kTileConfigs[config].cluster_n; }
  constexpr int cluster_ctas() const { return cluster_n() * sched.k_split; }
  constexpr int ctas() const { return grid * cluster_ctas(); }
  constexpr bool stream_k() const { return sched.sk_tiles > 0; }
  // Workspace of the stream-K hand-off: one BLOCK_M x BLOCK_N fp32 slot per range, and one flag per
  // (range, math warpgroup), zeroed before the launch.
  constexpr int64_t partial_floats() const {
    return static_cast<int64_t>(sched.sk_ctas) * cluster_n() * kTileConfigs[config].block_m *
           kTileConfigs[config].block_n;
  }
  constexpr int64_t num_flags() const {
    return static_cast<int64_t>(sched.sk_ctas) * cluster_n() * num_math_warpgroups(kTileConfigs[config]);
  }
};

GEMM_HOST_DEVICE constexpr int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Whether a plan's whole tiles (or K-split shares) are long enough to load in pairs: only then does the
// launcher encode the paired tensor maps and the kernel prefetch them (a config that pairs_loads()).
// Its stream-K ranges pair only where they are as long (the kernel checks each unit).
constexpr bool long_units(const Plan& p) { return p.sched.kblocks / p.sched.k_split >= kMinPairUnitKBlocks; }
constexpr bool pairs_planned(const Plan& p) { return pairs_loads(kTileConfigs[p.config]) && long_units(p); }

// The config with the same tiles and cluster that loads in pairs, for one that does not (-1: none).
constexpr bool same_tiles(const TileConfig& a, const TileConfig& b) {
  return a.block_m == b.block_m && a.block_n == b.block_n && a.cluster_n == b.cluster_n && a.slabs == b.slabs;
}
constexpr int paired_twin(int config) {
  for (int i = 0; i < kNumTileConfigs; ++i) {
    if (!kTileConfigs[config].pairs && kTileConfigs[i].pairs && same_tiles(kTileConfigs[i], kTileConfigs[config])) {
      return i;
    }
  }
  return -1;
}
// The config whose plans the planner scores for `config`: the one a paired twin stands in for (choose_plan
// swaps the twin in), else `config` itself.
constexpr int scored_config(int config) {
  for (int i = 0; i < kNumTileConfigs; ++i) {
    if (paired_twin(i) == config) return i;
  }
  return config;
}
constexpr bool is_paired_twin(int config) { return scored_config(config) != config; }

// Configs with a K-splitting kernel: the 64-row one-CTA tiles, the only ones the calibration found
// splits paying for. Each has a second instantiation for split plans (fp8_gemm_kernel's kSplitK), so
// that whole-tile and stream-K plans run the kernels they ran before (the same instructions) rather than
// ones carrying the cluster barriers and DSMEM reads. (With those compiled in, whole-tile decode plans
// measured 2-8 % slower in h200/ab_ksplit.jsonl, but that harness then showed up to 5 % between the same
// instructions too (ab_ksplit_gated.jsonl): not a measured cost.)
GEMM_HOST_DEVICE constexpr bool splits_k(const TileConfig& c) {
  return c.block_m == hopper::kWgmmaM && c.cluster_n == 1 && c.slabs == 1;
}
// Whether a config can split K over a cluster of k_split CTAs at this K (k_split 1: always).
inline bool k_split_ok(const TileConfig& c, int k_split, int64_t k) {
  return k_split == 1 ||
         (splits_k(c) && k_split <= kMaxKSplit && cdiv(k, kBlockK) >= int64_t{kMinSplitKBlocks} * k_split);
}

// The plan of one tile config: whole tiles only, or (`stream_k`) full waves of whole tiles and the
// rest as a stream-K region over up to all the GPU's clusters, or (`k_split` > 1) whole tiles each
// split over a cluster of k_split CTAs. A stream-K plan of a problem whose tiles fill whole waves is
// the whole-tile plan; stream-K and a K split do not combine (fits = false).
inline Plan make_plan(int config, bool stream_k, int k_split, int64_t m, int64_t n, int64_t k, const GpuSlots& gpu,
                      int out_bytes) {
  const TileConfig& c = kTileConfigs[config];
  Plan p;
  p.config = config;
  const int slots = k_split_ok(c, k_split, k) && !(stream_k && k_split > 1)
                        ? gpu.units(c.cluster_n * k_split)  // clusters that run at once
                        : 0;
  if (slots < 1) {
    p.fits = false;
    return p;
  }
  const int64_t kblocks = cdiv(k, kBlockK), m_blocks = cdiv(m, c.block_m);
  const int64_t n_blocks = cdiv(n, static_cast<int64_t>(c.block_n) * c.cluster_n);
  const int64_t tiles = m_blocks * n_blocks;
  int64_t sk_tiles = stream_k ? tiles % slots : 0;
  // Ranges of at least min_range K blocks (sk_ctas <= iters / min_range): range starts are that far
  // apart, so fewer than kblocks / min_range + 1 <= kMaxLaterPieces + 1 ranges meet one tile.
  const int64_t min_range = std::max<int64_t>(kMinStreamKIters, cdiv(kblocks, kMaxLaterPieces));
  int64_t sk_ctas = std::min<int64_t>(slots, std::max<int64_t>(1, sk_tiles * kblocks / min_range));
  if (!schedule_fits_int32(tiles, sk_tiles * kblocks, sk_ctas)) sk_tiles = 0;  // whole tiles only
  p.fits = schedule_fits_int32(tiles, 0, 0) && schedule_fits_int32(kblocks, 0, 0);
  TileSchedule& s = p.sched;
  s.kblocks = static_cast<int32_t>(kblocks);
  s.k_split = k_split;
  s.m_blocks = static_cast<int32_t>(m_blocks);
  s.n_blocks = static_cast<int32_t>(n_blocks);
  s.sk_tiles = static_cast<int32_t>(sk_tiles);
  s.dp_tiles = static_cast<int32_t>(tiles - sk_tiles);
  int64_t range = 0;  // K blocks of the longest SK range
  if (s.sk_tiles > 0) {
    s.sk_ctas = static_cast<int32_t>(sk_ctas);
    range = cdiv(s.sk_iters(), s.sk_ctas);
    s.sk_max_pieces = static_cast<int32_t>(cdiv(range, s.kblocks) + 1);
  }
  p.grid = static_cast<int>(s.dp_tiles > 0 ? std::min<int64_t>(s.dp_tiles, slots) : s.sk_ctas);
  const double waves = static_cast<double>(cdiv(s.dp_tiles, p.grid));
  const bool sk_tail = p.stream_k() && s.dp_tiles > 0;  // a stream-K region after whole waves
  const double kb_per_cta = waves * static_cast<double>(cdiv(s.kblocks, k_split)) +
                            static_cast<double>(range) * (sk_tail ? kTailSkKBlockTime : 1.0);
  const double units_per_cta = waves + (p.stream_k() ? std::min<double>(s.sk_max_pieces, 2.0) : 0.0);
  const double cluster_factor = c.cluster_n > 1 ? kClusterKBlockTime : 1.0;
  const double compute = kb_per_cta * 2.0 * c.block_m * c.block_n * kBlockK / sm_flops_per_us(c) *
                         (1.0 + 16.0 / c.block_n) * cluster_factor;  // narrow wgmma re-reads A more per FLOP
  const double unique = static_cast<double>(m * k + n * k + m * n * out_bytes);
  // The share of the loaded bytes that comes from DRAM (read by one CTA only) streams slower.
  const double loaded = static_cast<double>(tiles) * c.cluster_n * s.kblocks * cta_stage_load_bytes(c);  // any split
  p.loaded_bytes = loaded;
  if (!p.stream_k()) p.wave_fill = static_cast<double>(s.dp_tiles) / (waves * p.grid);
  const double from_dram = std::min(1.0, static_cast<double>(m * k + n * k) / loaded);
  const double stream = kb_per_cta * cta_stage_load_bytes(c) * cluster_factor *
                        (from_dram / kSmDramBytesPerUs + (1.0 - from_dram) / kSmBytesPerUs);
  // At most one later piece per range: an fp32 tile written to L2 and read back by its head.
  const double tile_partial_bytes = static_cast<double>(c.block_m) * c.block_n * sizeof(float);  // per CTA
  const double partials =
      p.stream_k() ? static_cast<double>(s.sk_ctas) * c.cluster_n * tile_partial_bytes : 0.0;
  // Stream-K pieces of tiles that share an A or B block run at different times on different SMs; when
  // the operands do not fit in L2 the region's loads are all DRAM reads (128x7168x16384, B 117 MB:
  // 64x128 stream-K 66.7 us against 49.3 with whole tiles; 128x2112x7168, 15 MB: stream-K faster).
  const bool operands_fit_l2 = static_cast<double>(m * k + n * k) <= kL2Bytes;
  const double sk_dram =
      operands_fit_l2 ? 0.0 : static_cast<double>(s.sk_tiles) * c.cluster_n * s.kblocks * cta_stage_load_bytes(c);
  const double dram = (unique + sk_dram + 2.0 * partials) / kDramBytesPerUs;
  const double reads_per_head = p.stream_k() ? static_cast<double>(cdiv(s.sk_ctas, s.sk_tiles)) : 0.0;
  const double k_split_cost = (k_split - 1) * kKSplitRankUs;
  p.cost_us = std::max({compute, stream, dram}) + units_per_cta * unit_overhead_us(c) +
              (c.cluster_n > 1 ? kClusterFixedUs : 0.0) + k_split_cost +
              (p.stream_k() ? kStreamKFixedUs + (1.0 + reads_per_head) * tile_partial_bytes /
                                                    (sk_tail ? kTailFixupBytesPerUs : kFixupBytesPerUs)
                            : 0.0);
  return p;
}

// Row-major A scales of 128+-row tiles skip the transpose kernel when a CTA runs few K blocks: the scale
// warp gathers them with cp.async, as it does for one-warpgroup tiles. The transpose costs ~2 µs once
// (launch and latency, partly hidden by the programmatic launch); the gathers ~75 ns a K block on the
// scale warp's path to each stage (H200, h200/ab_scale_gather.jsonl: gathering won at 6-12 K blocks a
// CTA, e.g. 1024x4096x512 12.1 -> 10.7 µs, was even at 32 and lost at 56+, e.g. 1024x1536x7168
// 28.4 -> 32.7 µs).
constexpr int64_t kMaxKBlocksForGatheredAScales = 16;
inline bool gather_a_scales(const Plan& p) {
  const TileSchedule& s = p.sched;
  const int64_t kb_per_cta =
      cdiv(s.dp_tiles, p.grid) * s.kblocks + (p.stream_k() ? cdiv(s.sk_iters(), s.sk_ctas) : 0);
  return kb_per_cta <= kMaxKBlocksForGatheredAScales;
}

// Decode plans (one-warpgroup tiles, B read by at most kMaxMBlocksBEvictFirst CTAs) load B under an L2
// evict-first policy: the weights stream through the L2 once, and their lines, not older ones (another
// kernel's data, dirty lines that would have to be written back first), are the ones evicted to make
// room. H200, cold L2 left dirty by a 256 MB write (h200/ab_evict.jsonl, 9 shuffled rounds): 64x7168x16384
// 42.4 -> 39.2 us, 128x7168x16384 43.0 -> 40.5, 64 / 128 x 24576x1536 5 % faster, 128x4096x7168 and
// 128x7168x2048 3 %, the rest of the decode shapes even; the same policy on the 128+-row tiles of M >= 1024
// shapes, whose B tiles other CTAs read again, was up to 7 % slower (4096x7168x2048).
constexpr int64_t kMaxMBlocksBEvictFirst = 2;
inline bool b_evict_first(const Plan& p) {
  return kTileConfigs[p.config].block_m == hopper::kWgmmaM && p.sched.m_blocks <= kMaxMBlocksBEvictFirst;
}

// Whether the planner considers K splits of a problem (the kernel runs any): few enough 64x64 tiles of
// output (see kKSplitSmsPerTile); and of a split plan: one wave of clusters (a split's producer idles
// from a unit's last load to the end of its reduction, so a next unit would start from an empty ring)
// on few enough SMs.
inline bool k_splits_planned(int64_t m, int64_t n, const GpuSlots& gpu) {
  return cdiv(m, hopper::kWgmmaM) * cdiv(n, hopper::kWgmmaM) * kKSplitSmsPerTile <= gpu.sms;
}
inline bool k_split_planned(const Plan& p, const GpuSlots& gpu) {
  return static_cast<int64_t>(p.sched.m_blocks) * p.sched.n_blocks <= p.grid &&
         static_cast<double>(p.ctas()) <= kKSplitMaxSmFraction * gpu.sms;
}

// The cheapest plan under the model; ties keep the earlier (smaller) config, whole tiles before stream-K
// before a K split, smaller splits first. Paired twins are not scored themselves (see kTileConfigs).
inline Plan choose_plan(int64_t m, int64_t n, int64_t k, const GpuSlots& gpu, int out_bytes) {
  Plan best;
  best.fits = false;
  bool have = false;
  // Measured where the cost ties (H200, h200/sweep_planner.jsonl): 128x32768x512 128x128 (256 tiles on
  // 132 CTAs, 1.94 waves) 12.9 us against 13.4 for 64x128 (512 tiles, 3.88 waves; B read by both M
  // blocks), while 128x24576x1536 keeps 64x128 (2.9 waves, 19.3 us) over 128x128 (1.45 waves, 21.4 us).
  auto wins_tie = [](const Plan& p, const Plan& q) {
    if (p.wave_fill > q.wave_fill * 1.01 || q.wave_fill > p.wave_fill * 1.01) return p.wave_fill > q.wave_fill;
    if (p.ctas() != q.ctas()) return p.ctas() > q.ctas();
    return p.loaded_bytes < q.loaded_bytes * 0.99;
  };
  auto consider = [&](const Plan& p) {
    const bool tie = have && p.cost_us <= best.cost_us * 1.001 && best.cost_us <= p.cost_us * 1.001;
    if (p.fits && (!have || (tie ? wins_tie(p, best) : p.cost_us < best.cost_us))) {
      best = p;
      have = true;
    }
  };
  const bool splits = k_splits_planned(m, n, gpu);
  for (int cfg = 0; cfg < kNumTileConfigs; ++cfg) {
    if (is_paired_twin(cfg)) continue;
    consider(make_plan(cfg, false, 1, m, n, k, gpu, out_bytes));
    const Plan sk = make_plan(cfg, true, 1, m, n, k, gpu, out_bytes);
    if (sk.stream_k()) consider(sk);  // whole waves: the same as the whole-tile plan
    for (int split = 2; splits && splits_k(kTileConfigs[cfg]) && split <= kMaxKSplit; ++split) {
      const Plan p = make_plan(cfg, false, split, m, n, k, gpu, out_bytes);
      if (p.fits && k_split_planned(p, gpu)) consider(p);
    }
  }
  // The same schedule on the twin that loads in pairs, where the units are long enough for pairs to pay.
  if (const int twin = paired_twin(best.config); twin >= 0 && long_units(best)) best.config = twin;
  return best;
}

}  // namespace gemm::cuda
