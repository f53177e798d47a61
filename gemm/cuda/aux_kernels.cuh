// Helper kernels around the FP8 GEMM: the K-major repack for operands TMA cannot read directly,
// and the fixed-order split-K reduction.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../gemm_launcher.h"

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

// ---- split-K: out[m, n] = sum over s = 0..S-1 (in that order) of partial[s][m][n] ----
constexpr int kReduceThreads = 256;

template <typename T> __device__ __forceinline__ T convert_out(float v);
template <> __device__ __forceinline__ __nv_bfloat16 convert_out(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half convert_out(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ float convert_out(float v) { return v; }

template <typename T>
__global__ void __launch_bounds__(kReduceThreads)
    splitk_reduce_kernel(const float* __restrict__ partial, int splits, int64_t m, int64_t n,
                         T* __restrict__ out, int64_t out_ld) {
  const int64_t total = m * n;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    float sum = partial[i];
    for (int s = 1; s < splits; ++s) sum += partial[s * total + i];
    out[(i / n) * out_ld + i % n] = convert_out<T>(sum);
  }
}

}  // namespace gemm::cuda
