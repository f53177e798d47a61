// The sm_90a FP8 block-scaled GEMM kernel: C = (A * As) @ (B * Bs)^T, A [M,K] and B [N,K] K-major e4m3fn.
// One template, instantiated per row of kTileConfigs (tile_configs.h); docs/cuda.md says why each part
// is as it is.
//  - a persistent grid walks the work units of tile_scheduler.h: whole tiles in grouped order (kGroupM,
//    so that CTAs running at the same time share A and B tiles in L2), then stream-K pieces of the
//    partial last wave: later pieces hand their fp32 partial sums to the tile's head through a
//    workspace slot and a flag, and the head adds them before its epilogue;
//  - with kSplitK, a plan may instead split every tile's K blocks over a cluster of k_split CTAs (a
//    runtime value; configs where splits_k()): the ranks after 0 leave their fp32 partials in their own
//    idle stage ring, and rank 0 adds them through distributed shared memory, in rank (K) order;
//  - with kClusterN = 2, two CTAs of a thread-block cluster run tiles of the same M block side by side
//    along N; each loads half of the shared A tile and multicasts it into both CTAs' stages, so a CTA
//    pulls (BLOCK_M / 2 + BLOCK_N) * 128 bytes from L2 per K block instead of (BLOCK_M + BLOCK_N) * 128.
//    A stage is refilled only when the math warps of both CTAs have freed it (they arrive on both
//    CTAs' empty barriers);
//  - one producer warpgroup (registers given away with setmaxnreg.dec) fills a kStages-deep ring
//    guarded by full/empty mbarriers: one thread issues the TMA loads of 128B-swizzled A/B tiles
//    (B under an L2 evict-first policy where the plan streams it) and, for 128+-row tiles whose plan
//    says so, of the K block's M-major A-scale column - in long units on deep rings two K blocks into
//    two stages per instruction (pairs_loads()) - while one warp copies the remaining scales (any
//    strides) into the stage with cp.async, whose completion arrives on the same full barrier: scale
//    latency is hidden kStages blocks ahead. Either way a stage holds one M-major A-scale column, the
//    math warpgroups' only scale layout;
//  - 1 to 3 math warpgroups (64 rows each, or kSlabs 64-row slabs each run in turn) run wgmma
//    m64nNk32 steps into a temporary accumulator and promote `acc += tmp * As[row, kb] * Bs[col / 128,
//    kb]` in fp32 registers (two-level accumulation: FP8 tensor-core sums lose bits over long K). With
//    1 or 2 one-slab warpgroups two temporaries alternate: the wgmma of step t+1 runs on the tensor
//    cores while step t is promoted (which caps BLOCK_N at 128: three 64 x BLOCK_N fragments must fit
//    in a thread's registers). Three warpgroups, and warpgroups of two slabs (an accumulator per slab),
//    have registers for one temporary (ping_pong()); there the other warpgroups' wgmmas keep the tensor
//    cores busy during a promotion;
//  - the epilogue (epilogue.cuh) converts (bf16/fp16 round-to-nearest-even, or fp32) and stores through
//    a TMA-stored staging tile or from registers. Ragged K is zero-filled by TMA, ragged M and N clipped.
// Raw PTX (hopper_ptx.h) rather than CUTLASS/CuTe: a dozen instructions, fast CI compiles, and full
// control over where the promotion sits relative to the asynchronous wgmma window.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <type_traits>

#include "../gemm_contract.h"
#include "epilogue.cuh"
#include "grouped_scheduler.h"
#include "hopper_layout.h"
#include "hopper_ptx.h"
#include "kernel_params.h"
#include "scale_formats.h"
#include "tile_configs.h"
#include "tile_scheduler.h"
#include "wgmma_fp8.h"

namespace gemm::cuda {

// A position in the kStages-deep stage ring: the stage and the parity of the mbarrier phase it is in.
// Advanced once per K block (no division by a stage count that is rarely a power of two).
template <int kStages>
struct RingPos {
  int stage = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
};

// A walker's place in a grouped schedule of claimed tiles (grouped_scheduler.h): its position in the
// claim ring, and the tile claimed for its next unit (the claiming thread only).
struct ClaimWalk {
  RingPos<kClaimSlots> pos;
  int32_t next = 0;
};

// The scales one promotion multiplies by: this thread's two A rows and up to 3 B scale blocks.
template <int kMaxScaleBlocks>
struct StepScales {
  float a0, a1;
  float b[kMaxScaleBlocks];
};

// acc += tmp * (As[row] * Bs[block of col]) for a tile whose first B scale block boundary is at
// tile-local column kBoundary (>= the tile width: none): quads left of it take b[0], the next
// kScaleBlockN columns b[1], the rest b[2]. A quad's 8 columns never straddle a boundary (tile starts
// and block boundaries are multiples of 8), so its block is a compile-time fact, the same for every
// thread: no per-column select, and one product per (row, block).
template <int kBoundary, int kAcc, int kMaxScaleBlocks>
__device__ __forceinline__ void promote_at(float (&acc)[kAcc], const float (&tmp)[kAcc],
                                           const StepScales<kMaxScaleBlocks>& s) {
  float s0[kMaxScaleBlocks], s1[kMaxScaleBlocks];
#pragma unroll
  for (int j = 0; j < kMaxScaleBlocks; ++j) {
    s0[j] = s.a0 * s.b[j];
    s1[j] = s.a1 * s.b[j];
  }
#pragma unroll
  for (int q = 0; q < kAcc; q += hopper::kFragRegsPerQuad) {
    const int col = (q / hopper::kFragRegsPerQuad) * hopper::kFragColStride;
    const int j = col < kBoundary ? 0 : col < kBoundary + kScaleBlockN ? 1 : kMaxScaleBlocks - 1;
    acc[q] = fmaf(tmp[q], s0[j], acc[q]);
    acc[q + 1] = fmaf(tmp[q + 1], s0[j], acc[q + 1]);
    acc[q + 2] = fmaf(tmp[q + 2], s1[j], acc[q + 2]);
    acc[q + 3] = fmaf(tmp[q + 3], s1[j], acc[q + 3]);
  }
}

// The promotion of a kBlockN-wide tile whose first B scale block boundary is at column `boundary`.
// Tile starts are multiples of kBlockN, so the boundary is a multiple of gcd(kBlockN, 128): each
// possible value inside the tile gets its own promote_at, picked by a warp-uniform branch (none for
// widths dividing 128).
template <int kBlockN, int kBoundary = boundary_step(kBlockN), int kAcc, int kMaxScaleBlocks>
__device__ __forceinline__ void promote(float (&acc)[kAcc], const float (&tmp)[kAcc],
                                        const StepScales<kMaxScaleBlocks>& s, int boundary) {
  if constexpr (kBoundary >= kBlockN) {
    promote_at<kBlockN>(acc, tmp, s);
  } else if (boundary == kBoundary) {
    promote_at<kBoundary>(acc, tmp, s);
  } else {
    promote<kBlockN, kBoundary + boundary_step(kBlockN)>(acc, tmp, s, boundary);
  }
}

// What the kernel reads of a work unit beyond its tile, for dense (WorkUnit) and grouped units: the
// first B row of its group in the [groups * n, k] map and its group's B scales; and whether a group's
// 64-row slab from `row0` lies inside its rows (TMA stores clip only at the tensor's edge: a slab
// reaching past them is stored from registers, which stop at the group's last row).
__device__ __forceinline__ int64_t unit_b_row0(const WorkUnit&, const KernelParams&) { return 0; }
__device__ __forceinline__ int64_t unit_b_row0(const GroupedUnit& w, const KernelParams& p) { return w.group * p.n; }
// The B scales of the unit's group (T: the scale format's element type).
template <class T>
__device__ __forceinline__ const T* unit_b_scale(const WorkUnit&, const T* b_scale, const KernelParams&) {
  return b_scale;
}
template <class T>
__device__ __forceinline__ const T* unit_b_scale(const GroupedUnit& w, const T* b_scale, const KernelParams& p) {
  return b_scale + w.group * p.group.b_scale_stride_group;
}
__device__ __forceinline__ bool slab_inside_group(const GroupedUnit& w, int64_t row0) {
  return row0 + hopper::kWgmmaM <= w.row_end;
}

// kGrouped: the grouped GEMM (MoE experts, grouped_scheduler.h): whole tiles of each group's rows, B and
// its scales offset to the tile's group, stores clipped to the group's rows (or, with p.group.out_rows,
// sent to the rows it names).
// kStreamK: plans with a stream-K region (p.sched.sk_tiles > 0). Whole-tile and K-split plans run an
// instantiation without the pieces' hand-off and fix-up code: decode grids run one short unit a CTA,
// each code path once on a cold instruction cache, so every instruction left out is fetched by no one.
template <int kBlockM, int kBlockN, int kClusterN, int kSlabs, bool kPairs, bool kSplitK, bool kGrouped, bool kStreamK>
__global__ void __launch_bounds__(num_threads(TileConfig{kBlockM, kBlockN, kClusterN, kSlabs, kPairs}), 1)
    fp8_gemm_kernel(const __grid_constant__ TensorMaps maps, const KernelParams p) {
  constexpr TileConfig kCfg{kBlockM, kBlockN, kClusterN, kSlabs, kPairs, kGrouped};
  static_assert(registers_fit(kCfg), "accumulators do not fit the math warpgroups' register budget");
  static_assert(!kSplitK || splits_k(kCfg), "K split on a config without one");
  static_assert(!kGrouped || !kSplitK, "grouped schedules run whole tiles");
  static_assert(!kStreamK || (!kSplitK && !kGrouped), "stream-K regions are dense, without K splits");
  constexpr int kStages = num_stages(kCfg);
  constexpr int kMathWG = num_math_warpgroups(kCfg);
  constexpr int kWgRows = kSlabs * hopper::kWgmmaM;  // a math warpgroup's rows of the tile: its slabs
  constexpr int kABytes = kBlockM * kBlockK;
  constexpr int kBBytes = kBlockN * kBlockK;
  // One MMA step covers kPromoteK of K (kWgmmaK each wgmma); a K block is kStepsPerBlock steps.
  constexpr int kStepsPerBlock = kBlockK / kPromoteK;
  constexpr int kWgmmasPerStep = kPromoteK / hopper::kWgmmaK;
  constexpr int kMaxScaleBlocks = max_scale_blocks(kBlockN);
  constexpr bool kTmaScales = scales_by_tma(kCfg);
  constexpr int kScaleWarp = 1;  // producer warp gathering scales with cp.async (warp 0 issues TMA)
  constexpr int kAScaleFloats = a_scale_stage_floats(kCfg);
  static_assert(!kTmaScales || kAScaleFloats <= hopper::kTmaMaxBox, "a stage's A-scale column is one TMA box");
  constexpr int kBScaleFloats = kMaxScaleBlocksPerTile;
  constexpr bool kPairLoads = pairs_loads(kCfg);
  static_assert(!kPairLoads || (kClusterN == 1 && kStages >= kMinPairStages),
                "paired loads need one CTA (no A slices) and a deep ring");
  using Mma = WgmmaFp8<kBlockN>;
  constexpr int kAcc = Mma::kAccRegs;
  static_assert(kBlockM % kWgRows == 0 && kBlockN % hopper::kWgmmaNAlign == 0 &&
                    kBlockN <= hopper::kTmaMaxBox && kBlockM <= hopper::kTmaMaxBox,
                "tile shape outside what wgmma/TMA take");
  static_assert(kABytes % hopper::kSwizzleAtomBytes == 0 && kBBytes % hopper::kSwizzleAtomBytes == 0,
                "stage buffers must stay 1024-byte aligned for the 128B swizzle");
  static_assert(kBlockK % kPromoteK == 0 && kPromoteK % hopper::kWgmmaK == 0, "promotion interval");
  static_assert(kMaxScaleBlocks <= kMaxScaleBlocksPerTile, "B scale blocks per tile");
  // Each cluster CTA multicasts kARowsPerCta rows of the A tile; slices stay swizzle-atom aligned.
  constexpr int kARowsPerCta = kBlockM / kClusterN;
  static_assert(kClusterN >= 1 && kClusterN <= kMaxClusterN && kBlockM % kClusterN == 0 &&
                    kARowsPerCta * kBlockK % hopper::kSwizzleAtomBytes == 0,
                "cluster A slices");
  constexpr uint16_t kClusterMask = (1u << kClusterN) - 1;

  extern __shared__ uint8_t smem_raw[];
  // The 128B swizzle pattern is a function of address bits [4,10): tiles start 1024-aligned.
  const uint32_t raw_addr = ptx::smem_addr(smem_raw);
  uint8_t* smem = smem_raw + ((hopper::kSwizzleAtomBytes - raw_addr % hopper::kSwizzleAtomBytes) %
                              hopper::kSwizzleAtomBytes);
  constexpr int kStagingBytesPerWG = staging_bytes(kCfg) / kMathWG;
  // A K split's partials (the whole tile in fp32) go to the start of the idle A/B ring.
  static_assert(kBlockM * kBlockN * static_cast<int>(sizeof(float)) <= kStages * (kABytes + kBBytes),
                "a K split's partial tile must fit in the stage ring");
  static_assert(kStages >= kMinStages, "too few pipeline stages fit beside the epilogue staging");
  static_assert(kBlockN % kMinStoreChunkCols == 0, "staging is written in whole chunks");
  uint8_t* smem_a = smem;
  uint8_t* smem_b = smem_a + kStages * kABytes;
  uint8_t* smem_out = smem_b + kStages * kBBytes;  // 1024-aligned: every tile buffer is a 1 KB multiple
  float* smem_a_scales = reinterpret_cast<float*>(smem_out + staging_bytes(kCfg));
  float* smem_b_scales = smem_a_scales + kStages * kAScaleFloats;
  uint64_t* full_bar = reinterpret_cast<uint64_t*>(smem_b_scales + kStages * kBScaleFloats);
  uint64_t* empty_bar = full_bar + kStages;
  using Unit = std::conditional_t<kGrouped, GroupedUnit, WorkUnit>;
  // Grouped kernels only (the launcher asks for grouped_smem_bytes()): the claim ring and the groups'
  // table after the barriers.
  uint64_t* claim_full = empty_bar + kStages;
  uint64_t* claim_empty = claim_full + kClaimSlots;
  int32_t* claim_tile = reinterpret_cast<int32_t*>(claim_empty + kClaimSlots);
  int32_t* group_words = claim_tile + kClaimSlots;
  const GroupTable groups{group_words, group_words + kMaxGroups, group_words + 2 * kMaxGroups, p.group.rows.num_groups};

  // Broadcast from lane 0 so that ptxas sees a warp-uniform value: the shared-memory descriptors built
  // from it then live in uniform registers instead of being rebuilt per wgmma in vector registers.
  const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / hopper::kWarpgroupThreads), 0);
  const int tid = threadIdx.x % hopper::kWarpgroupThreads;
  const int lane = tid % hopper::kWarpSize;
  // A 1-D grid of clusters of consecutive CTAs: the schedule walks clusters. In an A-multicast cluster
  // CTA rank r takes N block (cluster tile's N block) * kClusterN + r; in a K split, the r-th share of
  // the tile's K blocks.
  const int k_split = kSplitK ? p.sched.k_split : 1;
  const int cluster_ctas = kClusterN * k_split;
  const int cta_rank = static_cast<int>(blockIdx.x % kClusterN);
  const int k_rank = static_cast<int>(blockIdx.x % k_split);
  const int sched_cta = static_cast<int>(blockIdx.x / cluster_ctas);
  const int sched_grid = static_cast<int>(gridDim.x / cluster_ctas);

  if (threadIdx.x == 0) {
    ptx::tma_prefetch_desc(&maps.a);
    ptx::tma_prefetch_desc(&maps.b);
    if (kTmaScales && p.a_scale_tma) ptx::tma_prefetch_desc(&maps.a_scale);
    if (kPairLoads && p.pair_kblocks > 0) {
      ptx::tma_prefetch_desc(&maps.a_pair);
      ptx::tma_prefetch_desc(&maps.b_pair);
      if (kTmaScales && p.a_scale_tma) ptx::tma_prefetch_desc(&maps.a_scale_pair);
    }
    if (p.out_tma) ptx::tma_prefetch_desc(&maps.out);
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      ptx::mbar_init(&full_bar[s], 1 + hopper::kWarpSize);  // TMA expect_tx + scale-warp lanes
      // One arrive per math warp of every cluster CTA: each of them reads what this CTA multicasts.
      ptx::mbar_init(&empty_bar[s], kMathWG * hopper::kWarpgroupWarps * kClusterN);
    }
    if constexpr (kGrouped) {
#pragma unroll
      for (int s = 0; s < kClaimSlots; ++s) {
        ptx::mbar_init(&claim_full[s], 1);                                          // the claiming thread
        ptx::mbar_init(&claim_empty[s], kMathWG * hopper::kWarpgroupWarps + 1);  // math warps, scale warp
      }
    }
    ptx::fence_barrier_init();
  }
  // The peers' barriers must be initialized before the first multicast or remote arrive reaches them.
  if constexpr (kClusterN > 1) {
    ptx::cluster_sync();
  } else {
    __syncthreads();
  }
  // The kernel launches as a programmatic dependent of the kernel before it in the stream (the A-scale
  // transpose, or the caller's): the launch and the prologue above overlap that kernel's end, and
  // nothing below reads or writes global memory before it has completed.
  ptx::wait_prior_grid();
  if constexpr (kGrouped) build_group_table<kBlockM>(p.group.rows, p.m, p.sched.n_blocks, groups);
  // Grouped tiles claimed from a counter (grouped_scheduler.h), by single CTAs: a cluster's CTAs walk
  // the static schedule, which gives them the same units.
  const bool claims = kGrouped && kClusterN == 1 && p.tile_claims != nullptr;
  // The tile of unit `unit` of a claimed walk: the CTA's own first, then the tiles the producer's TMA
  // thread (the publisher) claims a unit ahead, so that the atomic's round trip overlaps a unit's loads,
  // and publishes in the claim ring, where the other walkers read them.
  auto claimed_tile = [&](int unit, ClaimWalk& c, bool publisher) -> int32_t {
    if (unit == 0) {
      if (publisher) c.next = sched_grid + atomicAdd(p.tile_claims, 1);
      return sched_cta;
    }
    const int slot = c.pos.stage;
    int32_t t;
    if (publisher) {
      t = c.next;
      ptx::mbar_wait(&claim_empty[slot], c.pos.phase ^ 1);
      claim_tile[slot] = t;
      ptx::mbar_arrive(&claim_full[slot]);
      if (t < grouped_tiles(groups)) c.next = sched_grid + atomicAdd(p.tile_claims, 1);
    } else {
      ptx::mbar_wait(&claim_full[slot], c.pos.phase);
      t = claim_tile[slot];
      __syncwarp();
      if (lane == 0) ptx::mbar_arrive(&claim_empty[slot]);
    }
    c.pos.advance();
    return t;
  };
  // Unit `unit` of this CTA's walk into `w` (which holds the previous one); false past the last.
  auto next_unit = [&](int unit, Unit& w, ClaimWalk& c, bool publisher = false) {
    if constexpr (kGrouped) {
      if (claims) return grouped_tile_unit(groups, p.sched, kBlockM, claimed_tile(unit, c, publisher), w);
      return grouped_work_unit(groups, p.sched, kBlockM, sched_cta, sched_grid, unit, w);
    } else {
      return cta_work_unit<kStreamK>(p.sched, sched_cta, sched_grid, k_rank, k_split, unit, w);
    }
  };

  if (warpgroup == kMathWG) {
    // ---------------- producer ----------------
    ptx::setmaxnreg_dec<kProducerRegs>();
    const int warp = tid / hopper::kWarpSize;
    // Every producer thread passes the two cluster barriers that the math warps of a K split pass after
    // each unit (below): the ring stays untouched until rank 0 has read the partials left in it.
    auto split_barriers = [&] {
      if (k_split > 1) {
        ptx::cluster_arrive();
        ptx::cluster_wait();
        ptx::cluster_arrive();
        ptx::cluster_wait();
      }
    };
    Unit w;
    if (warp == 0 && lane == 0) {
      const bool tma_a_scales = kTmaScales && p.a_scale_tma;
      // A short A box (p.a_box_rows) brings only the problem's rows; the stage's other A rows feed only
      // output rows past M, which are never stored.
      const uint32_t a_tx_bytes = p.a_box_rows > 0 ? p.a_box_rows * kBlockK : kABytes;
      const uint32_t stage_tx_bytes =
          a_tx_bytes + kBBytes + (tma_a_scales ? kAScaleFloats * static_cast<int>(sizeof(float)) : 0);
      const uint64_t b_policy = ptx::l2_policy_evict_first();
      RingPos<kStages> pos;
      ClaimWalk claim;
      for (int unit = 0; next_unit(unit, w, claim, true); ++unit) {
        const int32_t a_row = static_cast<int32_t>(unit_row0<kBlockM>(w));
        const int32_t a_scale_row = a_scale_box_row(kCfg, a_row);
        const int32_t b_row = static_cast<int32_t>((w.n_blk * kClusterN + cta_rank) * kBlockN + unit_b_row0(w, p));
        // K block kb into the stage at `pos`.
        auto load_one = [&](int kb) {
          const int s = pos.stage;
          ptx::mbar_wait(&empty_bar[s], pos.phase ^ 1);  // fresh barriers pass parity 1 at once
          ptx::mbar_arrive_expect_tx(&full_bar[s], stage_tx_bytes);
          if constexpr (kClusterN > 1) {
            // This CTA's slice of the shared A tile, into every cluster CTA's stage (their full
            // barriers expect the whole tile; their empty barriers, freed by all, allow the write).
            const int slice_row = cta_rank * kARowsPerCta;
            ptx::tma_load_2d_multicast(smem_a + s * kABytes + slice_row * kBlockK, &maps.a, &full_bar[s],
                                       kb * kBlockK, a_row + slice_row, kClusterMask);
          } else {
            ptx::tma_load_2d(smem_a + s * kABytes, &maps.a, &full_bar[s], kb * kBlockK, a_row);
          }
          if (p.b_evict_first) {
            ptx::tma_load_2d_hint(smem_b + s * kBBytes, &maps.b, &full_bar[s], kb * kBlockK, b_row, b_policy);
          } else {
            ptx::tma_load_2d(smem_b + s * kBBytes, &maps.b, &full_bar[s], kb * kBlockK, b_row);
          }
          if (tma_a_scales) {
            // The tile's rows of K block kb (rows past M read 0): a row of the [K/128, M] array.
            ptx::tma_load_2d(smem_a_scales + s * kAScaleFloats, &maps.a_scale, &full_bar[s], a_scale_row, kb);
          }
          pos.advance();
        };
        // K blocks kb and kb + 1 into the stages at `pos` and after it, one instruction per operand.
        // Their bytes all complete on the first stage's barrier, which the math warps wait on first;
        // the second stage's barrier only counts the arrivals (this one and the scale warp's).
        auto load_pair = [&](int kb) {
          const int s = pos.stage;
          ptx::mbar_wait(&empty_bar[s], pos.phase ^ 1);
          ptx::mbar_wait(&empty_bar[s + 1], pos.phase ^ 1);
          ptx::mbar_arrive_expect_tx(&full_bar[s], kKBlocksPerPair * stage_tx_bytes);
          ptx::mbar_arrive(&full_bar[s + 1]);
          if (p.a_box_rows > 0) {
            // Short A boxes one K block each: a paired box would land its second K block box rows on, not a
            // stage on.
            ptx::tma_load_2d(smem_a + s * kABytes, &maps.a, &full_bar[s], kb * kBlockK, a_row);
            ptx::tma_load_2d(smem_a + (s + 1) * kABytes, &maps.a, &full_bar[s], (kb + 1) * kBlockK, a_row);
          } else {
            ptx::tma_load_3d(smem_a + s * kABytes, &maps.a_pair, &full_bar[s], 0, a_row, kb);
          }
          if (p.b_evict_first) {
            ptx::tma_load_3d_hint(smem_b + s * kBBytes, &maps.b_pair, &full_bar[s], 0, b_row, kb, b_policy);
          } else {
            ptx::tma_load_3d(smem_b + s * kBBytes, &maps.b_pair, &full_bar[s], 0, b_row, kb);
          }
          if (tma_a_scales) {
            ptx::tma_load_2d(smem_a_scales + s * kAScaleFloats, &maps.a_scale_pair, &full_bar[s], a_scale_row, kb);
          }
          pos.advance();
          pos.advance();
        };
        if (kPairLoads && w.kb_end - w.kb_begin >= kMinPairUnitKBlocks) {
          // A long unit: pairs wherever two whole K blocks of it go to two stages before the ring wraps.
          // Its first K block loads alone, so that the math starts after one K block's transfer, not two.
          load_one(w.kb_begin);
          for (int kb = w.kb_begin + 1; kb < w.kb_end;) {
            if (kb + 1 < w.kb_end && kb + 1 < p.pair_kblocks && pos.stage + 1 < kStages) {
              load_pair(kb);
              kb += kKBlocksPerPair;
            } else {
              load_one(kb++);
            }
          }
        } else {
          for (int kb = w.kb_begin; kb < w.kb_end; ++kb) load_one(kb);
        }
        split_barriers();
      }
    } else if (warp == kScaleWarp) {
      const int64_t num_scale_n = (p.n + kScaleBlockN - 1) / kScaleBlockN;
      // One copy of the loop per B-scale format, chosen once: the fp32 loop stays as it was, and UE8M0
      // bytes are decoded here, on the producer, so that the math warps read fp32 scales either way.
      auto gather_scales = [&](auto ue8m0_tag) {
        constexpr bool kUe8m0 = decltype(ue8m0_tag)::value;
        using BScale = std::conditional_t<kUe8m0, uint8_t, float>;
        const auto* b_scale = static_cast<const BScale*>(p.b_scale);
        RingPos<kStages> pos;
        ClaimWalk claim;
        for (int unit = 0; next_unit(unit, w, claim); ++unit) {
          const int64_t nb = (w.n_blk * kClusterN + cta_rank) * kBlockN / kScaleBlockN + lane;
          const bool b_lane = lane < kMaxScaleBlocks;
          const bool b_ok = b_lane && nb < num_scale_n;
          // This lane's scale pointers walk along K (the warp's latency per K block is on the path to each
          // stage's full barrier): A rows lane, lane + 32, ... of the tile, and B scale block nb (or, past
          // N, a fixed address read as zero bytes).
          const int64_t row0 = unit_row0<kBlockM>(w) + lane;
          // Rows of the tile this lane copies that exist (lane, lane + 32, ... below M): a small count, so
          // the per-row checks stay 32-bit.
          const int a_rows = static_cast<int>(p.m - row0 < kBlockM ? p.m - row0 : kBlockM);
          const float* a_src = p.a_scale + row0 * p.a_scale_stride_m + w.kb_begin * p.a_scale_stride_k;
          const BScale* b_src =
              b_ok ? unit_b_scale(w, b_scale, p) + nb * p.b_scale_stride_n + w.kb_begin * p.b_scale_stride_k : b_scale;
          const int64_t b_step = b_ok ? p.b_scale_stride_k : 0;
          const int64_t a_row_step = hopper::kWarpSize * p.a_scale_stride_m;
          // 32-bit shared addresses of this lane's first A and B scale slots (the warp runs on the
          // producer's register budget).
          const uint32_t a_dst0 = ptx::smem_addr(smem_a_scales + lane);
          const uint32_t b_dst0 = ptx::smem_addr(smem_b_scales + lane);
          constexpr uint32_t kFloat = sizeof(float);
          for (int kb = w.kb_begin; kb < w.kb_end;
               ++kb, pos.advance(), a_src += p.a_scale_stride_k, b_src += b_step) {
            const int s = pos.stage;
            // UE8M0: the byte is loaded before the wait for the stage, which then covers its latency.
            const uint8_t b_byte = kUe8m0 && b_ok ? __ldg(reinterpret_cast<const uint8_t*>(b_src)) : 0;
            ptx::mbar_wait(&empty_bar[s], pos.phase ^ 1);
            if (!kTmaScales || !p.a_scale_tma) {
              const uint32_t dst = a_dst0 + s * kAScaleFloats * kFloat;
              const float* src = a_src;
              // Rolled for 128+-row tiles (this gather is their rare path): unrolled, its hoisted per-row
              // offsets overflow the producer's registers.
              constexpr int kRows = kBlockM / hopper::kWarpSize;
#pragma unroll(kRows <= 2 ? kRows : 1)
              for (int i = 0; i < kRows; ++i, src += a_row_step) {
                const bool ok = i * hopper::kWarpSize < a_rows;
                ptx::cp_async_4(dst + i * hopper::kWarpSize * kFloat, ok ? src : p.a_scale, ok ? kFloat : 0);
              }
            }
            if constexpr (kUe8m0) {
              // A plain store, published by this lane's own (release) arrive; the cp.async arrive before it
              // only holds the phase open until the lane's A-scale copies have landed.
              if (b_lane) {
                ptx::st_shared_f32(b_dst0 + s * kBScaleFloats * kFloat, b_ok ? ue8m0_to_float(b_byte) : 0.f);
              }
              ptx::cp_async_mbar_arrive(&full_bar[s]);
              ptx::mbar_arrive(&full_bar[s]);
            } else {
              if (b_lane) ptx::cp_async_4(b_dst0 + s * kBScaleFloats * kFloat, b_src, b_ok ? kFloat : 0);
              ptx::cp_async_mbar_arrive_noinc(&full_bar[s]);
            }
          }
          split_barriers();
        }
      };
      if (p.b_scale_format == ScaleFormat::kUE8M0) {
        gather_scales(std::true_type{});
      } else {
        gather_scales(std::false_type{});
      }
    } else {
      ClaimWalk claim;  // unused: only grouped kernels claim
      for (int unit = 0; k_split > 1 && next_unit(unit, w, claim); ++unit) {
        split_barriers();
      }
    }
  } else {
    // ---------------- math warpgroups ----------------
    ptx::setmaxnreg_inc<math_registers(kCfg)>();
    const int frag_row0 = hopper::frag_row(tid, 0);
    const int frag_col0 = hopper::frag_col(tid, 0);
    constexpr bool kPingPong = ping_pong(kCfg);
    static_assert(kSlabs == 1 || !kPingPong, "slabs share one temporary");
    float acc[kSlabs][kAcc];
    float tmp[kPingPong ? 2 : 1][kAcc];
    StepScales<kMaxScaleBlocks> scales[kPingPong ? 2 : 1];
    // Stage ring positions of the next K block to wait for (issue) and to hand back (retire): the
    // ping-pong issues one step ahead of the retirement.
    RingPos<kStages> load_pos, free_pos;
    // This thread's two A-scale rows in a stage's M-major [BLOCK_M] column.
    const int a_scale_idx0 = warpgroup * kWgRows + frag_row0;
    const int a_scale_idx1 = a_scale_idx0 + hopper::kFragRowHalf;
    constexpr int kAScaleSlabStep = hopper::kWgmmaM;
    // Descriptors of stage 0 (this warpgroup's first 64 A rows, all of B); a stage or a slab further is
    // a constant step of the start-address field, which cannot carry out of it (shared memory < 2^18
    // bytes).
    const uint64_t desc_a0 = hopper::make_smem_desc_k_major_sw128(ptx::smem_addr(smem_a + warpgroup * kWgRows * kBlockK));
    const uint64_t desc_b0 = hopper::make_smem_desc_k_major_sw128(ptx::smem_addr(smem_b));
    constexpr uint64_t kADescSlabStep = static_cast<uint64_t>(hopper::kWgmmaM * kBlockK) >> hopper::kDescAddrShift;
    constexpr uint64_t kADescStageStep = static_cast<uint64_t>(kABytes) >> hopper::kDescAddrShift;
    constexpr uint64_t kBDescStageStep = static_cast<uint64_t>(kBBytes) >> hopper::kDescAddrShift;
    Unit w;
    ClaimWalk claim;
    for (int unit = 0; next_unit(unit, w, claim); ++unit) {
      const int64_t tile_row0 = unit_row0<kBlockM>(w);
      const int64_t slab_row0 = tile_row0 + warpgroup * kWgRows;  // this warpgroup's first slab
      // This unit's A scales in a stage: TMA put the tile's first row at its offset from the box start.
      const float* unit_a_scales =
          smem_a_scales + (kTmaScales && p.a_scale_tma ? tile_row0 - a_scale_box_row(kCfg, tile_row0) : 0);
      // The tile's B scale blocks: nb0, and from tile-local column `boundary` on (kBlockN: none) the next
      // ones (past N the scale warp zero-fills their scales).
      const int64_t n0 = (w.n_blk * kClusterN + cta_rank) * kBlockN;
      const int boundary = static_cast<int>(kScaleBlockN - n0 % kScaleBlockN) < kBlockN
                               ? static_cast<int>(kScaleBlockN - n0 % kScaleBlockN)
                               : kBlockN;
      const int steps = (w.kb_end - w.kb_begin) * kStepsPerBlock;
      if constexpr (kGrouped) {
        // A warpgroup whose rows all lie past its group's end (in a segment's last M tile) has nothing to
        // compute or store: it passes the stages on, in step with the ring, and its CTA claims its next
        // tile sooner. (In the static walk, faster tiles made CTAs drift apart: docs/cuda.md.)
        if (claims && slab_row0 >= w.row_end) {
          for (int kb = w.kb_begin; kb < w.kb_end; ++kb) {
            ptx::mbar_wait(&full_bar[load_pos.stage], load_pos.phase);
            load_pos.advance();
            if (lane == 0) ptx::mbar_arrive(&empty_bar[free_pos.stage]);
            free_pos.advance();
          }
          continue;
        }
      }

      // Step t of a slab: wgmma over K [t * kPromoteK, (t + 1) * kPromoteK) of this unit into tmp[buf].
      auto issue = [&](int t, auto buf_tag, int slab) {
        constexpr int kBuf = decltype(buf_tag)::value;
        const int s = load_pos.stage;
        const int sub = t % kStepsPerBlock;
        if (sub == 0 && slab == 0) ptx::mbar_wait(&full_bar[s], load_pos.phase);
        // Scales of this K block (TMA / the scale warp put them in the stage); read now, used after the MMAs.
        const float* stage_scales = unit_a_scales + s * kAScaleFloats + slab * kAScaleSlabStep;
        scales[kBuf].a0 = stage_scales[a_scale_idx0];
        scales[kBuf].a1 = stage_scales[a_scale_idx1];
#pragma unroll
        for (int j = 0; j < kMaxScaleBlocks; ++j) {
          scales[kBuf].b[j] = smem_b_scales[s * kBScaleFloats + j];
        }
        const uint64_t k_offset = sub * kWgmmasPerStep * hopper::kDescKStep;
        const uint64_t desc_a = desc_a0 + s * kADescStageStep + slab * kADescSlabStep + k_offset;
        const uint64_t desc_b = desc_b0 + s * kBDescStageStep + k_offset;
        if (sub == kStepsPerBlock - 1 && slab == kSlabs - 1) load_pos.advance();
        ptx::fence_regs(tmp[kBuf]);
        ptx::wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < kWgmmasPerStep; ++ks) {
          Mma::mma(tmp[kBuf], desc_a + ks * hopper::kDescKStep, desc_b + ks * hopper::kDescKStep, ks > 0);
        }
        ptx::wgmma_commit();
      };
      // Waits for step t of a slab (leaving kPending later groups in flight), frees its stage after the
      // last step of a K block's last slab, and promotes it.
      auto retire = [&](int t, auto buf_tag, auto pending_tag, int slab) {
        constexpr int kBuf = decltype(buf_tag)::value;
        ptx::wgmma_wait<decltype(pending_tag)::value>();
        ptx::fence_regs(tmp[kBuf]);
        if (t % kStepsPerBlock == kStepsPerBlock - 1 && slab == kSlabs - 1) {
          if (lane == 0) {
            if constexpr (kClusterN > 1) {
#pragma unroll
              for (int r = 0; r < kClusterN; ++r) ptx::mbar_arrive_cluster(&empty_bar[free_pos.stage], r);
            } else {
              ptx::mbar_arrive(&empty_bar[free_pos.stage]);
            }
          }
          free_pos.advance();
        }
        promote<kBlockN>(acc[slab], tmp[kBuf], scales[kBuf], boundary);
      };
      using B0 = std::integral_constant<int, 0>;
      using B1 = std::integral_constant<int, 1>;
      using Wait0 = std::integral_constant<int, 0>;
      using Wait1 = std::integral_constant<int, 1>;

#pragma unroll
      for (int sl = 0; sl < kSlabs; ++sl) {
#pragma unroll
        for (int i = 0; i < kAcc; ++i) acc[sl][i] = 0.f;
      }
      // One temporary: wgmma, wait, promote, slab after slab. Ping-pong (one slab): issue t+1 into the
      // other buffer before retiring t. Every exit retires with wait<0> (a unit has >= 1 step), so no
      // wgmma is in flight past the loop (ptxas serializes the wgmma otherwise).
      if constexpr (!kPingPong) {
#pragma unroll 1
        for (int t = 0; t < steps; ++t) {
#pragma unroll
          for (int sl = 0; sl < kSlabs; ++sl) {
            issue(t, B0{}, sl);
            retire(t, B0{}, Wait0{}, sl);
          }
        }
      } else {
        issue(0, B0{}, 0);
        for (int t = 0;; t += 2) {
          if (t + 1 >= steps) {
            retire(t, B0{}, Wait0{}, 0);
            break;
          }
          issue(t + 1, B1{}, 0);
          retire(t, B0{}, Wait1{}, 0);
          if (t + 2 >= steps) {
            retire(t + 1, B1{}, Wait0{}, 0);
            break;
          }
          issue(t + 2, B0{}, 0);
          retire(t + 1, B1{}, Wait1{}, 0);
        }
      }

      // Named barrier 1 + warpgroup syncs this warpgroup alone (0 is __syncthreads).
      const uint32_t wg_barrier = 1 + warpgroup;
      // A slot holds a cluster tile: kClusterN CTA tiles of kMathWG warpgroups' slabs, a flag per
      // warpgroup.
      const int64_t wg_slot_offset = (static_cast<int64_t>(cta_rank) * kBlockM + warpgroup * kWgRows) * kBlockN;
      constexpr int64_t kSlabFloats = static_cast<int64_t>(hopper::kWgmmaM) * kBlockN;
      constexpr int64_t kSlotFloats = static_cast<int64_t>(kClusterN) * kBlockM * kBlockN;
      const int flag_offset = cta_rank * kMathWG + warpgroup;
      constexpr int kFlagsPerSlot = kClusterN * kMathWG;
      if (kStreamK && w.slot >= 0) {
        // A later stream-K piece: hand the partial to the tile's head.
#pragma unroll
        for (int sl = 0; sl < kSlabs; ++sl) {
          store_partial(acc[sl], p.partial + w.slot * kSlotFloats + wg_slot_offset + sl * kSlabFloats, tid);
        }
        ptx::named_barrier_sync(wg_barrier, hopper::kWarpgroupThreads);
        if (tid == 0) ptx::flag_raise(p.sk_flags + w.slot * kFlagsPerSlot + flag_offset);
        continue;
      }
      if (k_split > 1) {
        // A K split. Ranks after 0 write their partials to their own ring, idle now: this unit's stages
        // are consumed (every math warpgroup has retired its last wgmma: the barrier) and the producer
        // holds the next unit's loads at the cluster barriers. Rank 0 reads them through DSMEM between
        // the two barriers, and the second one keeps them alive until it has.
        constexpr uint32_t kAllMathBarrier = 1 + kMathWG;
        const uint32_t partial_slab = ptx::smem_addr(smem) +
                                      static_cast<uint32_t>(warpgroup * kWgRows * kBlockN * sizeof(float));
        constexpr uint32_t kSlabBytes = hopper::kWgmmaM * kBlockN * sizeof(float);
        if (k_rank > 0) {
          ptx::named_barrier_sync(kAllMathBarrier, kMathWG * hopper::kWarpgroupThreads);
#pragma unroll
          for (int sl = 0; sl < kSlabs; ++sl) {
            store_partial(acc[sl], reinterpret_cast<float*>(smem) + (warpgroup * kSlabs + sl) * kSlabFloats, tid);
          }
          ptx::fence_proxy_async_smem();  // generic writes before the next unit's TMA writes here
          ptx::cluster_arrive();
          ptx::cluster_wait();
          ptx::cluster_arrive();
          ptx::cluster_wait();
          continue;
        }
        ptx::cluster_arrive();
        ptx::cluster_wait();
#pragma unroll
        for (int sl = 0; sl < kSlabs; ++sl) {
          add_cluster_partials<fixup_batch(kCfg)>(acc[sl], partial_slab + sl * kSlabBytes, k_split, tid);
        }
        ptx::cluster_arrive();
      }
      if (kStreamK && w.fix_begin < w.fix_end) {
        // A stream-K head: add the later pieces in K order (fixed, so the result is deterministic).
        // Thread i waits for piece i's flag, so the polls' L2 round trips overlap instead of adding up;
        // the barrier then makes every piece visible to the whole warpgroup. Unrolled over the planner's
        // bound with predicates: a loop with a runtime trip count here made ptxas keep thread-index state
        // live through the main loop (more instructions per K block, S2R re-reads).
        if (tid < kMaxLaterPieces && w.fix_begin + tid < w.fix_end) {
          ptx::flag_wait(p.sk_flags + (w.fix_begin + tid) * kFlagsPerSlot + flag_offset);
        }
        ptx::named_barrier_sync(wg_barrier, hopper::kWarpgroupThreads);
#pragma unroll
        for (int sl = 0; sl < kSlabs; ++sl) {
          add_partials<fixup_batch(kCfg), kSlotFloats>(
              acc[sl], p.partial + w.fix_begin * kSlotFloats + wg_slot_offset + sl * kSlabFloats,
              w.fix_end - w.fix_begin, tid);
        }
      }
#pragma unroll
      for (int sl = 0; sl < kSlabs; ++sl) {
        const int64_t row0 = slab_row0 + sl * hopper::kWgmmaM;
        bool by_tma = p.out_tma;
        if constexpr (kGrouped) by_tma = by_tma && slab_inside_group(w, row0);
        if (by_tma) {
          store_tile_by_tma<staging_col_parts(kCfg), store_span_bytes(kCfg)>(acc[sl], p, &maps.out, smem_out + warpgroup * kStagingBytesPerWG,
                                                     wg_barrier, tid, row0, n0);
        } else {
          if constexpr (kGrouped) {
            store_tile_direct(acc[sl], p, row0 + frag_row0, n0 + frag_col0, w.row_end, p.group.out_rows);
          } else {
            store_tile_direct(acc[sl], p, row0 + frag_row0, n0 + frag_col0, p.m, nullptr);
          }
        }
      }
      if (k_split > 1) ptx::cluster_wait();  // rank 0: the peers have passed the second barrier
    }
    // Shared memory must outlive the reads of the last TMA stores (not their global writes, which
    // complete after the CTA exits, as in CUTLASS's and DeepGEMM's epilogues).
    if (p.out_tma && lane == 0) ptx::bulk_wait_read<0>();
  }
  // ... and the peers' last remote arrivals on this CTA's empty barriers.
  if constexpr (kClusterN > 1) ptx::cluster_sync();
}

}  // namespace gemm::cuda
