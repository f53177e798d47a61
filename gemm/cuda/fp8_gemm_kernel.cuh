// The sm_90a FP8 block-scaled GEMM kernel: C = (A * As) @ (B * Bs)^T, A [M,K] and B [N,K] K-major e4m3fn.
//
// One template, instantiated per row of kTileConfigs (gemm_heuristics.h):
//  - a persistent grid walks work units (tile x K split) with grouped rasterization (kGroupM) so
//    that CTAs running at the same time share A and B tiles in L2; with kClusterM == 2 a unit is a
//    pair of M-adjacent tiles on a 2-CTA cluster that share B: each CTA loads half of the B tile
//    and multicasts it to both (halves B's L2->SM traffic, the limit for large M);
//  - one producer warpgroup (registers given away with setmaxnreg.dec) fills a kStages-deep ring
//    guarded by full/empty mbarriers: one thread issues the TMA loads of 128B-swizzled A/B tiles,
//    one warp copies that K block's A and B scales (any strides) into the stage with cp.async, whose
//    completion arrives on the same full barrier - so scale latency is hidden kStages blocks ahead;
//  - 1 or 2 math warpgroups (64 rows each) run 4 wgmma m64nNk32 steps per 128-K block into a
//    temporary accumulator, wait, then promote `acc += tmp * As[row, kb] * Bs[col / 128, kb]` in fp32
//    registers (two-level accumulation: FP8 tensor-core sums lose bits over long K);
//  - the epilogue converts (bf16/fp16 round-to-nearest-even, or fp32). 16-bit tiles with BLOCK_N a
//    multiple of kStoreChunkCols go through 64B-swizzled shared memory and TMA stores, which clip at
//    M/N and run asynchronously under the next tile's main loop; other tiles (fp32, split-K
//    partials, unaligned outputs) store from registers with row/column guards. Ragged K is
//    zero-filled by the TMA loads.
// Raw PTX (hopper_ptx.h) rather than CUTLASS/CuTe: a dozen instructions, fast CI compiles, and full
// control over where the promotion sits relative to the asynchronous wgmma window.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../gemm_launcher.h"
#include "gemm_heuristics.h"
#include "hopper_layout.h"
#include "hopper_ptx.h"
#include "wgmma_fp8.h"

namespace gemm::cuda {

// Register budgets after setmaxnreg: the producer needs few; math warpgroups hold 2 accumulators.
constexpr int kProducerRegs = 56;
constexpr int kMathRegs1WG = 240;   // 128*56 + 128*240 <= 64K registers
constexpr int kMathRegs2WG = 224;   // 128*56 + 256*224 <= 64K registers

struct KernelParams {
  int64_t m = 0, n = 0;
  int num_kblocks = 0, kblocks_per_split = 0;
  int64_t m_blocks = 0;  // in cluster rows (kClusterM adjacent BLOCK_M blocks)
  int64_t n_blocks = 0, units = 0;
  const float* a_scale = nullptr;
  int64_t a_scale_stride_m = 0, a_scale_stride_k = 0;
  const float* b_scale = nullptr;
  int64_t b_scale_stride_n = 0, b_scale_stride_k = 0;
  void* out = nullptr;
  int64_t out_ld = 0;
  int64_t split_plane = 0;  // elements between the fp32 partial planes of consecutive K splits
  OutFormat out_format = OutFormat::kBF16;
  bool out_pairs = false;   // base and row stride allow 2-element vector stores
  bool tma_store = false;   // tmap_c describes `out` (16-bit, 16-byte aligned rows, no split-K)
};

struct WorkUnit {
  int64_t m_blk, n_blk;
  int split, kb_begin, kb_end;
};

// Split is the slowest index: CTAs running together work on one K range of neighbouring tiles.
// `rank` picks this CTA's M block inside the unit's cluster row.
template <int kClusterM>
__device__ __forceinline__ WorkUnit decode_unit(const KernelParams& p, int64_t u, uint32_t rank) {
  const int64_t tiles = p.m_blocks * p.n_blocks;
  WorkUnit w;
  w.split = static_cast<int>(u / tiles);
  const int64_t t = u % tiles;
  const int64_t group_span = kGroupM * p.n_blocks;
  const int64_t first_m = (t / group_span) * kGroupM;
  const int64_t group_rows = min(static_cast<int64_t>(kGroupM), p.m_blocks - first_m);
  const int64_t r = t % group_span;
  w.m_blk = (first_m + r % group_rows) * kClusterM + rank;
  w.n_blk = r / group_rows;
  w.kb_begin = w.split * p.kblocks_per_split;
  w.kb_end = min(w.kb_begin + p.kblocks_per_split, p.num_kblocks);
  return w;
}

template <typename T> struct OutPair;
template <> struct OutPair<__nv_bfloat16> {
  using Vec = __nv_bfloat162;
  __device__ static Vec pack(float a, float b) { return __floats2bfloat162_rn(a, b); }
  __device__ static __nv_bfloat16 one(float a) { return __float2bfloat16_rn(a); }
};
template <> struct OutPair<__half> {
  using Vec = __half2;
  __device__ static Vec pack(float a, float b) { return __floats2half2_rn(a, b); }
  __device__ static __half one(float a) { return __float2half_rn(a); }
};
template <> struct OutPair<float> {
  using Vec = float2;
  __device__ static Vec pack(float a, float b) { return make_float2(a, b); }
  __device__ static float one(float a) { return a; }
};

// Stores one thread's accumulator fragment; 64-bit offsets (M*N may exceed 2^31).
template <typename T, int kAcc>
__device__ __forceinline__ void store_fragment(const float (&acc)[kAcc], T* out, int64_t ld,
                                               int64_t row0, int64_t col0, int64_t m, int64_t n,
                                               bool pairs) {
  using P = OutPair<T>;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t row = row0 + h * hopper::kFragRowHalf;
    if (row >= m) continue;
    T* out_row = out + row * ld;
#pragma unroll
    for (int q = 0; q < kAcc / hopper::kFragRegsPerQuad; ++q) {
      const int64_t col = col0 + q * hopper::kFragColStride;
      const float v0 = acc[q * hopper::kFragRegsPerQuad + 2 * h];
      const float v1 = acc[q * hopper::kFragRegsPerQuad + 2 * h + 1];
      if (pairs && col + 1 < n) {
        *reinterpret_cast<typename P::Vec*>(out_row + col) = P::pack(v0, v1);
      } else {
        if (col < n) out_row[col] = P::one(v0);
        if (col + 1 < n) out_row[col + 1] = P::one(v1);
      }
    }
  }
}

// Writes a thread's fragment, converted to T, into the warpgroup's 64-row slice of the output tile
// laid out as kStoreChunkCols-column chunks of 64B-swizzled rows (the TMA store box).
template <typename T, int kAcc>
__device__ __forceinline__ void stage_fragment(const float (&acc)[kAcc], uint32_t slice_addr,
                                               int frag_row0, int frag_col0) {
  using P = OutPair<T>;
  constexpr int kChunkBytes = hopper::kWgmmaM * hopper::kSwizzle64Bytes;
  static_assert(kStoreChunkCols * sizeof(T) == hopper::kSwizzle64Bytes, "one chunk row = 64 bytes");
#pragma unroll
  for (int q = 0; q < kAcc / hopper::kFragRegsPerQuad; ++q) {
    const int col = frag_col0 + q * hopper::kFragColStride;
    const uint32_t chunk_addr = slice_addr + (col / kStoreChunkCols) * kChunkBytes;
    const int col_bytes = (col % kStoreChunkCols) * static_cast<int>(sizeof(T));
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = frag_row0 + h * hopper::kFragRowHalf;
      const typename P::Vec v = P::pack(acc[q * hopper::kFragRegsPerQuad + 2 * h],
                                        acc[q * hopper::kFragRegsPerQuad + 2 * h + 1]);
      ptx::st_shared_b32(chunk_addr + hopper::swizzle64(row * hopper::kSwizzle64Bytes + col_bytes),
                         *reinterpret_cast<const uint32_t*>(&v));
    }
  }
}

template <int kBlockM, int kBlockN, int kClusterM, int kNSub>
__global__ void __launch_bounds__(num_threads(TileConfig{kBlockM, kBlockN, kClusterM, kNSub}), 1)
    fp8_gemm_kernel(const __grid_constant__ CUtensorMap tmap_a,
                    const __grid_constant__ CUtensorMap tmap_b,
                    const __grid_constant__ CUtensorMap tmap_c, const KernelParams p) {
  constexpr TileConfig kCfg{kBlockM, kBlockN, kClusterM, kNSub};
  constexpr int kStages = num_stages(kCfg);
  constexpr int kMathWG = num_math_warpgroups(kCfg);
  constexpr int kABytes = kBlockM * kBlockK;
  constexpr int kBBytes = kBlockN * kBlockK;
  constexpr int kBSliceRows = kBlockN / kClusterM;  // rows of the B tile each cluster CTA loads
  constexpr int kBSliceBytes = kBSliceRows * kBlockK;
  constexpr uint16_t kClusterMask = (1u << kClusterM) - 1;
  constexpr int kKSteps = kBlockK / hopper::kWgmmaK;
  // A tile never spans more than this many 128-wide B scale blocks.
  constexpr int kMaxScaleBlocks = (kBlockN + kScaleBlockN - 1) / kScaleBlockN + 1;
  constexpr int kScaleFloats = scale_stage_floats(kCfg);
  constexpr int kScaleWarp = 1;  // producer warp copying scales (warp 0 issues TMA)
  constexpr int kScaleThreadsPerRow = hopper::kWarpSize;
  constexpr int kWgmmaN = kBlockN / kNSub;
  using Mma = WgmmaFp8<kWgmmaN>;
  constexpr int kTmpAcc = Mma::kAccRegs;
  constexpr int kAcc = kTmpAcc * kNSub;
  static_assert(kBlockM % hopper::kWgmmaM == 0 && kWgmmaN % hopper::kWgmmaNAlign == 0 &&
                    kWgmmaN * kNSub == kBlockN &&
                    kBlockN <= hopper::kTmaMaxBox && kBlockM <= hopper::kTmaMaxBox,
                "tile shape outside what wgmma/TMA take");
  static_assert(kABytes % hopper::kSwizzleAtomBytes == 0 && kBSliceBytes % hopper::kSwizzleAtomBytes == 0,
                "stage buffers must stay 1024-byte aligned for the 128B swizzle");
  static_assert(kMaxScaleBlocks <= 3 && kMaxScaleBlocks <= kMaxScaleBlocksPerTile,
                "promotion selects among at most 3 B scale blocks");

  extern __shared__ uint8_t smem_raw[];
  // The 128B swizzle pattern is a function of address bits [4,10): tiles start 1024-aligned.
  const uint32_t raw_addr = ptx::smem_addr(smem_raw);
  uint8_t* smem = smem_raw + ((hopper::kSwizzleAtomBytes - raw_addr % hopper::kSwizzleAtomBytes) %
                              hopper::kSwizzleAtomBytes);
  constexpr bool kTmaStore = tma_store_tile(kCfg);
  constexpr int kCSliceBytes = hopper::kWgmmaM * kBlockN * kStoreElemBytes;  // per math warpgroup
  uint8_t* smem_c = smem;  // c_smem_bytes: a multiple of 4 KB, so A/B stay 1024-aligned
  uint8_t* smem_a = smem + c_smem_bytes(kCfg);
  uint8_t* smem_b = smem + kStages * kABytes;
  float* smem_scales = reinterpret_cast<float*>(smem_b + kStages * kBBytes);
  uint64_t* full_bar = reinterpret_cast<uint64_t*>(smem_scales + kStages * kScaleFloats);
  uint64_t* empty_bar = full_bar + kStages;

  const int warpgroup = threadIdx.x / hopper::kWarpgroupThreads;
  const int tid = threadIdx.x % hopper::kWarpgroupThreads;
  const int lane = tid % hopper::kWarpSize;
  const uint32_t rank = kClusterM > 1 ? ptx::cluster_ctarank() : 0;
  const int64_t cluster_id = blockIdx.x / kClusterM;
  const int64_t num_clusters = gridDim.x / kClusterM;

  if (threadIdx.x == 0) {
    ptx::tma_prefetch_desc(&tmap_a);
    ptx::tma_prefetch_desc(&tmap_b);
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      ptx::mbar_init(&full_bar[s], 1 + hopper::kWarpSize);  // TMA expect_tx + scale-warp lanes
      // One arrive per math warp of every CTA whose stage the multicast B slices write.
      ptx::mbar_init(&empty_bar[s], kClusterM * kMathWG * hopper::kWarpgroupWarps);
    }
    ptx::fence_barrier_init();
  }
  if constexpr (kClusterM > 1) {
    ptx::cluster_sync();
  } else {
    __syncthreads();
  }

  if (warpgroup == kMathWG) {
    // ---------------- producer ----------------
    ptx::setmaxnreg_dec<kProducerRegs>();
    const int warp = tid / hopper::kWarpSize;
    if (warp == 0 && lane == 0) {
      int iter = 0;
      for (int64_t u = cluster_id; u < p.units; u += num_clusters) {
        const WorkUnit w = decode_unit<kClusterM>(p, u, rank);
        for (int kb = w.kb_begin; kb < w.kb_end; ++kb, ++iter) {
          const int s = iter % kStages;
          const uint32_t phase = (iter / kStages) & 1;
          ptx::mbar_wait(&empty_bar[s], phase ^ 1);  // fresh barriers pass parity 1 at once
          ptx::mbar_arrive_expect_tx(&full_bar[s], kABytes + kBBytes);
          ptx::tma_load_2d(smem_a + s * kABytes, &tmap_a, &full_bar[s], kb * kBlockK,
                           static_cast<int32_t>(w.m_blk * kBlockM));
          const int32_t b_row = static_cast<int32_t>(w.n_blk * kBlockN + rank * kBSliceRows);
          if constexpr (kClusterM > 1) {
            ptx::tma_load_2d_multicast(smem_b + s * kBBytes + rank * kBSliceBytes, &tmap_b,
                                       &full_bar[s], kb * kBlockK, b_row, kClusterMask);
          } else {
            ptx::tma_load_2d(smem_b + s * kBBytes, &tmap_b, &full_bar[s], kb * kBlockK, b_row);
          }
        }
      }
    } else if (warp == kScaleWarp) {
      const int64_t num_scale_n = (p.n + kScaleBlockN - 1) / kScaleBlockN;
      int iter = 0;
      for (int64_t u = cluster_id; u < p.units; u += num_clusters) {
        const WorkUnit w = decode_unit<kClusterM>(p, u, rank);
        const int64_t nb = w.n_blk * kBlockN / kScaleBlockN + lane;
        const bool b_lane = lane < kMaxScaleBlocks;
        const bool b_ok = b_lane && nb < num_scale_n;
        for (int kb = w.kb_begin; kb < w.kb_end; ++kb, ++iter) {
          const int s = iter % kStages;
          const uint32_t phase = (iter / kStages) & 1;
          ptx::mbar_wait(&empty_bar[s], phase ^ 1);
          float* dst = smem_scales + s * kScaleFloats;
#pragma unroll
          for (int i = lane; i < kBlockM; i += kScaleThreadsPerRow) {
            const int64_t row = w.m_blk * kBlockM + i;
            const bool ok = row < p.m;
            ptx::cp_async_4(dst + i,
                            ok ? p.a_scale + row * p.a_scale_stride_m + kb * p.a_scale_stride_k
                               : p.a_scale,
                            ok ? sizeof(float) : 0);
          }
          if (b_lane) {
            ptx::cp_async_4(dst + kBlockM + lane,
                            b_ok ? p.b_scale + nb * p.b_scale_stride_n + kb * p.b_scale_stride_k
                                 : p.b_scale,
                            b_ok ? sizeof(float) : 0);
          }
          ptx::cp_async_mbar_arrive_noinc(&full_bar[s]);
        }
      }
    }
  } else {
    // ---------------- math warpgroups ----------------
    ptx::setmaxnreg_inc<kMathWG == 1 ? kMathRegs1WG : kMathRegs2WG>();
    const int64_t num_scale_n = (p.n + kScaleBlockN - 1) / kScaleBlockN;
    const int frag_row0 = hopper::frag_row(tid, 0);
    const int frag_col0 = hopper::frag_col(tid, 0);
    float acc[kAcc];
    float tmp[kTmpAcc];
    int iter = 0;
    for (int64_t u = cluster_id; u < p.units; u += num_clusters) {
      const WorkUnit w = decode_unit<kClusterM>(p, u, rank);
      const int64_t row0 = w.m_blk * kBlockM + warpgroup * hopper::kWgmmaM + frag_row0;
      // B scale blocks touched by this tile: nb0, and from tile-local column `next_block_col` on nb0+1.
      const int64_t n0 = w.n_blk * kBlockN;
      const int64_t nb0 = n0 / kScaleBlockN;
      const int next_block_col = static_cast<int>((nb0 + 1) * kScaleBlockN - n0);
      const bool one_scale_block = next_block_col >= kBlockN || nb0 + 1 >= num_scale_n;

#pragma unroll
      for (int i = 0; i < kAcc; ++i) acc[i] = 0.f;

      for (int kb = w.kb_begin; kb < w.kb_end; ++kb, ++iter) {
        const int s = iter % kStages;
        const uint32_t phase = (iter / kStages) & 1;
        ptx::mbar_wait(&full_bar[s], phase);
        // Scales of this K block (copied by the scale warp); read now, used after the MMAs.
        const float* stage_scales = smem_scales + s * kScaleFloats;
        const float sa0 = stage_scales[warpgroup * hopper::kWgmmaM + frag_row0];
        const float sa1 = stage_scales[warpgroup * hopper::kWgmmaM + frag_row0 + hopper::kFragRowHalf];
        float sb[kMaxScaleBlocks];
#pragma unroll
        for (int j = 0; j < kMaxScaleBlocks; ++j) sb[j] = stage_scales[kBlockM + j];
        const uint64_t desc_a = hopper::make_smem_desc_k_major_sw128(
            ptx::smem_addr(smem_a + s * kABytes + warpgroup * hopper::kWgmmaM * kBlockK));
        // BLOCK_N runs as kNSub sequential wgmma sub-tiles through one temporary accumulator, so a
        // wide tile costs acc + tmp = BLOCK_N/2 + BLOCK_N/(2 kNSub) registers, not BLOCK_N.
#pragma unroll
        for (int j = 0; j < kNSub; ++j) {
          const uint64_t desc_b = hopper::make_smem_desc_k_major_sw128(
              ptx::smem_addr(smem_b + s * kBBytes + j * kWgmmaN * kBlockK));
          ptx::fence_regs(tmp);
          ptx::wgmma_fence();
#pragma unroll
          for (int ks = 0; ks < kKSteps; ++ks) {
            Mma::mma(tmp, desc_a + ks * hopper::kDescKStep, desc_b + ks * hopper::kDescKStep, ks > 0);
          }
          ptx::wgmma_commit();
          ptx::wgmma_wait<0>();
          ptx::fence_regs(tmp);
          if (j == kNSub - 1 && lane == 0) {
            // Stage free: the next TMA may land (in every CTA the multicast B slices reach).
            if constexpr (kClusterM > 1) {
#pragma unroll
              for (int c = 0; c < kClusterM; ++c) ptx::mbar_arrive_cluster(&empty_bar[s], c);
            } else {
              ptx::mbar_arrive(&empty_bar[s]);
            }
          }

          float* acc_j = acc + j * kTmpAcc;
          if (one_scale_block) {
            const float s0 = sa0 * sb[0], s1 = sa1 * sb[0];
#pragma unroll
            for (int q = 0; q < kTmpAcc; q += hopper::kFragRegsPerQuad) {
              acc_j[q] = fmaf(tmp[q], s0, acc_j[q]);
              acc_j[q + 1] = fmaf(tmp[q + 1], s0, acc_j[q + 1]);
              acc_j[q + 2] = fmaf(tmp[q + 2], s1, acc_j[q + 2]);
              acc_j[q + 3] = fmaf(tmp[q + 3], s1, acc_j[q + 3]);
            }
          } else {
            // Column pairs never straddle a block boundary (boundaries and pairs are 8/2-aligned).
#pragma unroll
            for (int q = 0; q < kTmpAcc; q += hopper::kFragRegsPerQuad) {
              const int col = j * kWgmmaN + frag_col0 +
                              (q / hopper::kFragRegsPerQuad) * hopper::kFragColStride;
              float sbc = col < next_block_col ? sb[0] : sb[1];
              if (kMaxScaleBlocks > 2 && col >= next_block_col + kScaleBlockN) sbc = sb[2];
              const float s0 = sa0 * sbc, s1 = sa1 * sbc;
              acc_j[q] = fmaf(tmp[q], s0, acc_j[q]);
              acc_j[q + 1] = fmaf(tmp[q + 1], s0, acc_j[q + 1]);
              acc_j[q + 2] = fmaf(tmp[q + 2], s1, acc_j[q + 2]);
              acc_j[q + 3] = fmaf(tmp[q + 3], s1, acc_j[q + 3]);
            }
          }
        }
      }

      if (kTmaStore && p.tma_store) {
        const uint32_t slice = ptx::smem_addr(smem_c + warpgroup * kCSliceBytes);
        const uint32_t wg_barrier = 1 + warpgroup;  // hardware barrier 0 is __syncthreads
        if (tid == 0) ptx::bulk_wait_read();  // the previous tile's store has left the buffer
        ptx::named_barrier(wg_barrier, hopper::kWarpgroupThreads);
        if (p.out_format == OutFormat::kBF16) {
          stage_fragment<__nv_bfloat16>(acc, slice, frag_row0, frag_col0);
        } else {
          stage_fragment<__half>(acc, slice, frag_row0, frag_col0);
        }
        ptx::fence_proxy_async_smem();
        ptx::named_barrier(wg_barrier, hopper::kWarpgroupThreads);
        if (tid == 0) {
          const int32_t row = static_cast<int32_t>(w.m_blk * kBlockM + warpgroup * hopper::kWgmmaM);
#pragma unroll
          for (int c = 0; c < kBlockN / kStoreChunkCols; ++c) {
            const uint8_t* chunk = smem_c + warpgroup * kCSliceBytes +
                                   c * hopper::kWgmmaM * hopper::kSwizzle64Bytes;
            ptx::tma_store_2d(&tmap_c, chunk, static_cast<int32_t>(n0 + c * kStoreChunkCols), row);
          }
          ptx::bulk_commit();
        }
        continue;
      }
      const int64_t col0 = n0 + frag_col0;
      switch (p.out_format) {
        case OutFormat::kBF16:
          store_fragment(acc, static_cast<__nv_bfloat16*>(p.out), p.out_ld, row0, col0, p.m, p.n,
                         p.out_pairs);
          break;
        case OutFormat::kFP16:
          store_fragment(acc, static_cast<__half*>(p.out), p.out_ld, row0, col0, p.m, p.n,
                         p.out_pairs);
          break;
        case OutFormat::kFP32:
          store_fragment(acc, static_cast<float*>(p.out) + w.split * p.split_plane, p.out_ld, row0,
                         col0, p.m, p.n, p.out_pairs);
          break;
      }
    }
    if (kTmaStore && tid == 0) ptx::bulk_wait();  // output stores done before the CTA retires
  }
  if constexpr (kClusterM > 1) ptx::cluster_sync();  // peers may still multicast / arrive here
}

}  // namespace gemm::cuda
