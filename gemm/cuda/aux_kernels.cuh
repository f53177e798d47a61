// Helper kernels around the FP8 GEMM: the K-major repack for operands TMA cannot read directly,
// the A-scale transpose, and the fixed-order stream-K reduction.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../gemm_launcher.h"
#include "hopper_ptx.h"
#include "tile_scheduler.h"

namespace gemm::cuda {

// ---- repack: dst[r, c] = src[r * stride_r + c * stride_c], dst rows `ld` bytes apart ----
// TMA needs K contiguous with 16-byte aligned base and row stride. M/N-major operands (the AMD
// challenge layout, strides (1, rows)), K % 16 != 0 row strides and misaligned views are copied
// through a shared-memory tile so that both the read and the write walk their unit-stride dim.
constexpr int kRepackTile = 64;
constexpr int kRepackThreads = 256;
constexpr int kRepackPad = 4;  // breaks bank conflicts of the column walk

__global__ void __launch_bounds__(kRepackThreads)
    repack_k_major_kernel(const uint8_t* __restrict__ src, int64_t rows, int64_t cols,
                          int64_t stride_r, int64_t stride_c, uint8_t* __restrict__ dst, int64_t ld) {
  __shared__ uint8_t tile[kRepackTile][kRepackTile + kRepackPad];
  const bool rows_contiguous = stride_r == 1 && stride_c != 1;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kRepackTile;
  for (int64_t r0 = static_cast<int64_t>(blockIdx.y) * kRepackTile; r0 < rows;
       r0 += static_cast<int64_t>(gridDim.y) * kRepackTile) {
    for (int i = threadIdx.x; i < kRepackTile * kRepackTile; i += kRepackThreads) {
      const int fast = i % kRepackTile, slow = i / kRepackTile;
      const int rr = rows_contiguous ? fast : slow;
      const int cc = rows_contiguous ? slow : fast;
      const int64_t r = r0 + rr, c = c0 + cc;
      tile[rr][cc] = (r < rows && c < cols) ? src[r * stride_r + c * stride_c] : uint8_t{0};
    }
    __syncthreads();
    for (int i = threadIdx.x; i < kRepackTile * kRepackTile; i += kRepackThreads) {
      const int cc = i % kRepackTile, rr = i / kRepackTile;
      const int64_t r = r0 + rr, c = c0 + cc;
      if (r < rows && c < cols) dst[r * ld + c] = tile[rr][cc];
    }
    __syncthreads();
  }
}

// ---- A scales -> K-block-major: dst[c * ld + r] = src[r * stride_r + c * stride_c] ----
// TMA loads a tile's A scales of one K block as one row of a [K/128, M] array; scales in any other
// layout are copied into that form first.
struct ScaleCopy {
  const float* src = nullptr;
  int64_t rows = 0, cols = 0, stride_r = 0, stride_c = 0;
  float* dst = nullptr;
  int64_t ld = 0;
};
constexpr int kScaleCopyThreads = 256;

__global__ void __launch_bounds__(kScaleCopyThreads) transpose_scales_kernel(const ScaleCopy j) {
  const int64_t total = j.rows * j.cols;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  // Consecutive threads walk r, the destination's unit-stride dimension.
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t r = i % j.rows, c = i / j.rows;
    j.dst[c * j.ld + r] = j.src[r * j.stride_r + c * j.stride_c];
  }
}

// ---- stream-K: out tile = sum of its pieces' fp32 partials in K order (tile_scheduler.h) ----
struct StreamKReduce {
  TileSchedule sched;
  int block_m = 0, block_n = 0;
  const float* partial = nullptr;
  int64_t m = 0, n = 0;
  void* out = nullptr;
  int64_t out_ld = 0;
  bool out_vec = false;  // base and row stride allow kReduceVec-element stores
};
constexpr int kReduceThreads = 256;
constexpr int kReduceRows = 8;  // tile rows per block: grid = region tiles x BLOCK_M / kReduceRows
constexpr int kReduceVec = 4;   // floats per load (slots are 16-byte aligned, BLOCK_N % 16 == 0)
constexpr int kReduceVecsPerThread = kReduceRows * hopper::kWgmmaMaxN / kReduceVec / kReduceThreads;

template <typename T> __device__ __forceinline__ T convert_out(float v);
template <> __device__ __forceinline__ __nv_bfloat16 convert_out(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half convert_out(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ float convert_out(float v) { return v; }

// Four converted values stored as vectors (the caller checked the alignment).
template <typename T> __device__ __forceinline__ void store_vec4(T* dst, float4 v);
template <> __device__ __forceinline__ void store_vec4(__nv_bfloat16* dst, float4 v) {
  reinterpret_cast<__nv_bfloat162*>(dst)[0] = __floats2bfloat162_rn(v.x, v.y);
  reinterpret_cast<__nv_bfloat162*>(dst)[1] = __floats2bfloat162_rn(v.z, v.w);
}
template <> __device__ __forceinline__ void store_vec4(__half* dst, float4 v) {
  reinterpret_cast<__half2*>(dst)[0] = __floats2half2_rn(v.x, v.y);
  reinterpret_cast<__half2*>(dst)[1] = __floats2half2_rn(v.z, v.w);
}
template <> __device__ __forceinline__ void store_vec4(float* dst, float4 v) { *reinterpret_cast<float4*>(dst) = v; }

template <typename T>
__global__ void __launch_bounds__(kReduceThreads) stream_k_reduce_kernel(const StreamKReduce r) {
  // Scheduled while the GEMM may still run: the partials are complete and visible after this.
  ptx::griddep_wait();
  const TileSchedule& s = r.sched;
  const int64_t region_tile = blockIdx.x;
  const int64_t iters = s.sk_iters();
  const int64_t first_cta = sk_range_owner(region_tile * s.kblocks, iters, s.sk_ctas);
  const int64_t last_cta = sk_range_owner((region_tile + 1) * s.kblocks - 1, iters, s.sk_ctas);
  const TileCoord tc = tile_coord(s.dp_tiles + region_tile, s.m_blocks, s.n_blocks);
  const int vecs_per_row = r.block_n / kReduceVec;
  const int vecs = kReduceRows * vecs_per_row;
  const int64_t slot_floats = static_cast<int64_t>(r.block_m) * r.block_n;
  const int64_t block_offset = static_cast<int64_t>(blockIdx.y) * kReduceRows * r.block_n;
  // Whole rows of the slots are summed (every piece writes its full tile); only the store is clipped.
  float4 sum[kReduceVecsPerThread] = {};
  for (int64_t c = first_cta; c <= last_cta; ++c) {
    const float* slot = r.partial + sk_slot(s, c, region_tile) * slot_floats + block_offset;
#pragma unroll
    for (int j = 0; j < kReduceVecsPerThread; ++j) {
      const int i = threadIdx.x + j * kReduceThreads;
      if (i >= vecs) break;
      const float4 v = *reinterpret_cast<const float4*>(slot + i * kReduceVec);
      sum[j].x += v.x;
      sum[j].y += v.y;
      sum[j].z += v.z;
      sum[j].w += v.w;
    }
  }
#pragma unroll
  for (int j = 0; j < kReduceVecsPerThread; ++j) {
    const int i = threadIdx.x + j * kReduceThreads;
    if (i >= vecs) break;
    const int64_t row = tc.m_blk * r.block_m + blockIdx.y * kReduceRows + i / vecs_per_row;
    const int64_t col = tc.n_blk * r.block_n + (i % vecs_per_row) * kReduceVec;
    if (row >= r.m || col >= r.n) continue;
    T* dst = static_cast<T*>(r.out) + row * r.out_ld + col;
    if (r.out_vec && col + kReduceVec <= r.n) {
      store_vec4(dst, sum[j]);
    } else {
      if (col < r.n) dst[0] = convert_out<T>(sum[j].x);
      if (col + 1 < r.n) dst[1] = convert_out<T>(sum[j].y);
      if (col + 2 < r.n) dst[2] = convert_out<T>(sum[j].z);
      if (col + 3 < r.n) dst[3] = convert_out<T>(sum[j].w);
    }
  }
}

}  // namespace gemm::cuda
