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
constexpr int kRepackPad = 4;     // breaks bank conflicts of the column walk
constexpr int kRepackVecBytes = 16;  // one uint4 per thread covers a 64 x 64 byte tile exactly
static_assert(kRepackTile * kRepackTile == kRepackThreads * kRepackVecBytes, "one vector per thread");

__global__ void __launch_bounds__(kRepackThreads)
    repack_k_major_kernel(const uint8_t* __restrict__ src, int64_t rows, int64_t cols,
                          int64_t stride_r, int64_t stride_c, uint8_t* __restrict__ dst, int64_t ld) {
  __shared__ uint8_t tile[kRepackTile][kRepackTile + kRepackPad];
  const bool rows_contiguous = stride_r == 1 && stride_c != 1;
  // 16-byte loads along the unit-stride dimension when every vector of the tile is aligned.
  const bool vec_src = (rows_contiguous ? stride_c : stride_r) % kRepackVecBytes == 0 &&
                       reinterpret_cast<uintptr_t>(src) % kRepackVecBytes == 0;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kRepackTile;
  constexpr int kVecsPerLine = kRepackTile / kRepackVecBytes;
  const int line = threadIdx.x / kVecsPerLine;                         // tile row/column walked
  const int offset = (threadIdx.x % kVecsPerLine) * kRepackVecBytes;   // bytes into that line
  for (int64_t r0 = static_cast<int64_t>(blockIdx.y) * kRepackTile; r0 < rows;
       r0 += static_cast<int64_t>(gridDim.y) * kRepackTile) {
    const bool full = r0 + kRepackTile <= rows && c0 + kRepackTile <= cols;
    if (full && vec_src) {
      uint4 vec;
      const uint8_t* bytes = reinterpret_cast<const uint8_t*>(&vec);
      if (rows_contiguous) {  // line = column c0 + line, rows r0 + offset ...
        vec = *reinterpret_cast<const uint4*>(src + (r0 + offset) + (c0 + line) * stride_c);
#pragma unroll
        for (int i = 0; i < kRepackVecBytes; ++i) tile[offset + i][line] = bytes[i];
      } else {  // line = row r0 + line, columns c0 + offset ...
        vec = *reinterpret_cast<const uint4*>(src + (r0 + line) * stride_r + (c0 + offset));
#pragma unroll
        for (int i = 0; i < kRepackVecBytes; ++i) tile[line][offset + i] = bytes[i];
      }
    } else {
      for (int i = threadIdx.x; i < kRepackTile * kRepackTile; i += kRepackThreads) {
        const int fast = i % kRepackTile, slow = i / kRepackTile;
        const int rr = rows_contiguous ? fast : slow;
        const int cc = rows_contiguous ? slow : fast;
        const int64_t r = r0 + rr, c = c0 + cc;
        tile[rr][cc] = (r < rows && c < cols) ? src[r * stride_r + c * stride_c] : uint8_t{0};
      }
    }
    __syncthreads();
    if (full) {  // dst rows are 16-byte aligned (ld % 16 == 0, c0 % 64 == 0)
      uint4 vec;
      uint8_t* bytes = reinterpret_cast<uint8_t*>(&vec);
#pragma unroll
      for (int i = 0; i < kRepackVecBytes; ++i) bytes[i] = tile[line][offset + i];
      *reinterpret_cast<uint4*>(dst + (r0 + line) * ld + c0 + offset) = vec;
    } else {
      for (int i = threadIdx.x; i < kRepackTile * kRepackTile; i += kRepackThreads) {
        const int cc = i % kRepackTile, rr = i / kRepackTile;
        const int64_t r = r0 + rr, c = c0 + cc;
        if (r < rows && c < cols) dst[r * ld + c] = tile[rr][cc];
      }
    }
    __syncthreads();
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
