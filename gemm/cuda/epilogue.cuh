// The epilogue of the sm_90a FP8 GEMM kernel (gemm_kernel.cuh): a math warpgroup's fp32 accumulator
// fragment of a 64-row slab leaves as 16-bit rows through a swizzled staging tile and TMA stores, or
// from registers (fp32, rows TMA cannot address), or as an fp32 partial for a stream-K head or a
// K-split rank 0, which adds the partials of the other pieces in K order before its own store.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../gemm_contract.h"
#include "hopper_layout.h"
#include "hopper_ptx.h"
#include "kernel_params.h"
#include "tile_configs.h"
#include "tile_scheduler.h"

namespace gemm::cuda {

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

// Stores one thread's accumulator fragment's rows below m (to the rows row_map names, where given);
// 64-bit offsets (M*N may exceed 2^31).
template <typename T, int kAcc>
__device__ __forceinline__ void store_fragment(const float (&acc)[kAcc], T* out, int64_t ld,
                                               int64_t row0, int64_t col0, int64_t m, int64_t n,
                                               bool pairs, const int32_t* row_map) {
  using P = OutPair<T>;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t row = row0 + h * hopper::kFragRowHalf;
    if (row >= m) continue;
    T* out_row = out + (row_map != nullptr ? row_map[row] : row) * ld;
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

// Writes register quads [q0, q0 + kQuads) of one thread's fragment of a 64-row slab (its columns from
// 8 * q0 on) into its staging area: column chunk c (kSpan bytes of a row) is 64 rows x kSpan bytes at
// c * 64 * kSpan, swizzled as the output tensor map expects (hopper_layout.h).
template <typename T, int kSpan, int kQuads, int kAcc>
__device__ __forceinline__ void stage_fragment(const float (&acc)[kAcc], int q0, uint32_t staging, int tid) {
  using P = OutPair<T>;
  constexpr int kChunkCols = kSpan / static_cast<int>(sizeof(T));
  constexpr uint32_t kChunkBytes = hopper::kWgmmaM * kSpan;
  const int row0 = hopper::frag_row(tid, 0);
  const int col0 = hopper::frag_col(tid, 0);
#pragma unroll
  for (int q = 0; q < kQuads; ++q) {
    const int col = col0 + q * hopper::kFragColStride;
    const uint32_t chunk = staging + (col / kChunkCols) * kChunkBytes;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + h * hopper::kFragRowHalf;
      const uint32_t offset =
          hopper::swizzle_span(row * kSpan + (col % kChunkCols) * static_cast<int>(sizeof(T)), kSpan);
      const typename P::Vec v = P::pack(acc[(q0 + q) * hopper::kFragRegsPerQuad + 2 * h],
                                        acc[(q0 + q) * hopper::kFragRegsPerQuad + 2 * h + 1]);
      ptx::st_shared_b32(chunk + offset, *reinterpret_cast<const uint32_t*>(&v));
    }
  }
}

// Epilogue of a 64-row slab through shared memory, in kParts rounds of columns: every thread writes its
// part of the fragment into the staging area, and lane 0 of each warp stores every kWarpgroupWarps-th
// chunk by TMA (a TMA store holds its issuing thread for a while, so the warps issue in parallel). Each issuing lane tracks its own bulk groups: the staging area is free again once they
// have read it. The stores drain while the next round, or the next tile, runs.
template <int kParts, int kSpan, int kAcc>
__device__ __forceinline__ void store_tile_by_tma(const float (&acc)[kAcc], const KernelParams& p,
                                                  const CUtensorMap* tmap_out, uint8_t* staging,
                                                  uint32_t wg_barrier, int tid, int64_t row0, int64_t col0) {
  constexpr int kChunkCols = kSpan / kStagedOutBytes;
  constexpr int kChunkBytes = hopper::kWgmmaM * kSpan;
  constexpr int kQuads = kAcc / hopper::kFragRegsPerQuad / kParts;
  constexpr int kPartCols = kQuads * hopper::kFragColStride;
  static_assert(kPartCols % kChunkCols == 0, "a round stores whole chunks");
  const int warp = tid / hopper::kWarpSize;
  const bool issuer = tid % hopper::kWarpSize == 0;
#pragma unroll
  for (int part = 0; part < kParts; ++part) {
    if (issuer) ptx::bulk_wait_read<0>();
    ptx::named_barrier_sync(wg_barrier, hopper::kWarpgroupThreads);
    if (p.out_format == OutFormat::kBF16) {
      stage_fragment<__nv_bfloat16, kSpan, kQuads>(acc, part * kQuads, ptx::smem_addr(staging), tid);
    } else {
      stage_fragment<__half, kSpan, kQuads>(acc, part * kQuads, ptx::smem_addr(staging), tid);
    }
    ptx::fence_proxy_async_smem();
    ptx::named_barrier_sync(wg_barrier, hopper::kWarpgroupThreads);
    if (issuer && row0 < p.m) {
#pragma unroll 1
      for (int c = warp; c < kPartCols / kChunkCols; c += hopper::kWarpgroupWarps) {
        const int64_t col = col0 + part * kPartCols + c * kChunkCols;
        if (col >= p.n) break;
        ptx::tma_store_2d(tmap_out, staging + c * kChunkBytes, static_cast<int32_t>(col), static_cast<int32_t>(row0));
      }
      ptx::bulk_commit();
    }
  }
}

// Epilogue from registers (fp32, rows TMA cannot address, the rows of a group below m_end, rows sent
// where row_map says).
template <int kAcc>
__device__ __forceinline__ void store_tile_direct(const float (&acc)[kAcc], const KernelParams& p, int64_t row0,
                                                  int64_t col0, int64_t m_end, const int32_t* row_map) {
  switch (p.out_format) {
    case OutFormat::kBF16:
      store_fragment(acc, static_cast<__nv_bfloat16*>(p.out), p.out_ld, row0, col0, m_end, p.n, p.out_pairs, row_map);
      break;
    case OutFormat::kFP16:
      store_fragment(acc, static_cast<__half*>(p.out), p.out_ld, row0, col0, m_end, p.n, p.out_pairs, row_map);
      break;
    case OutFormat::kFP32:
      store_fragment(acc, static_cast<float*>(p.out), p.out_ld, row0, col0, m_end, p.n, p.out_pairs, row_map);
      break;
  }
}

// A stream-K piece's fp32 partial of a warpgroup's 64 x kBlockN slab, in the accumulator's own order:
// register quad i of thread t at float4 i * 128 + t of the slab. A warp stores and loads 512 contiguous
// bytes per instruction, and the head (same tile, warpgroup and thread) reads back exactly its own
// registers, with no index math.
template <int kAcc>
__device__ __forceinline__ void store_partial(const float (&acc)[kAcc], float* slab, int tid) {
  float4* dst = reinterpret_cast<float4*>(slab) + tid;
#pragma unroll
  for (int i = 0; i < kAcc / 4; ++i) {
    dst[i * hopper::kWarpgroupThreads] = make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]);
  }
}

// acc += `count` partials (at most kMaxPieces), each kAcc / 4 float4s that load(piece, i) reads, added
// in piece order: deterministic. The loads of kBatch pieces are issued before their adds: one round trip
// per batch, not per piece. A batch past `count` re-reads the last piece instead of skipping the load:
// buffers defined on every path keep ptxas from spilling (predicated loads spilled up to 2.5 KB a
// thread). Unrolled over kMaxPieces with predicates (see the call sites).
template <int kBatch, int kMaxPieces, int kAcc, typename Load>
__device__ __forceinline__ void add_pieces(float (&acc)[kAcc], int count, Load load) {
#pragma unroll
  for (int b = 0; b < kMaxPieces; b += kBatch) {
    if (b < count) {
      float4 v[kBatch][kAcc / 4];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int piece = b + j < count ? b + j : count - 1;
#pragma unroll
        for (int i = 0; i < kAcc / 4; ++i) v[j][i] = load(piece, i);
      }
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if (b + j < count) {
#pragma unroll
          for (int i = 0; i < kAcc / 4; ++i) {
            acc[4 * i] += v[j][i].x;
            acc[4 * i + 1] += v[j][i].y;
            acc[4 * i + 2] += v[j][i].z;
            acc[4 * i + 3] += v[j][i].w;
          }
        }
      }
    }
  }
}

// acc += the partials of a head's `count` later stream-K pieces, whose slots start at `slab0`,
// kSlotFloats apart (written by store_partial on other SMs: read from L2, never from this SM's L1).
template <int kBatch, int64_t kSlotFloats, int kAcc>
__device__ __forceinline__ void add_partials(float (&acc)[kAcc], const float* slab0, int count, int tid) {
  add_pieces<kBatch, kMaxLaterPieces>(acc, count, [&](int piece, int i) {
    return __ldcg(reinterpret_cast<const float4*>(slab0 + piece * kSlotFloats) + tid + i * hopper::kWarpgroupThreads);
  });
}

// acc += the fp32 partials that cluster ranks 1 .. k_split - 1 left at local shared address `slab` of
// their own shared memory (store_partial's layout), read through DSMEM in rank (K) order.
template <int kBatch, int kAcc>
__device__ __forceinline__ void add_cluster_partials(float (&acc)[kAcc], uint32_t slab, int k_split, int tid) {
  const uint32_t mine = slab + tid * static_cast<uint32_t>(sizeof(float4));
  add_pieces<kBatch, kMaxKSplit - 1>(acc, k_split - 1, [&](int piece, int i) {
    return ptx::ld_shared_cluster_v4(ptx::map_shared_to_cta(mine, piece + 1) +
                                     i * hopper::kWarpgroupThreads * static_cast<uint32_t>(sizeof(float4)));
  });
}

}  // namespace gemm::cuda
