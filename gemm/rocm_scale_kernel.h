// A scales -> fp32, M-contiguous, in workspace, optionally gathered through a row map: the GEMM
// kernel reads A scales as fp32 only. Dense calls use it for UE8M0 A scales: reading UE8M0 A bytes
// in the kernel is exact too, but with clang-19 the per-row byte loads (a 64-bit address each) push
// the one-wave tiles' registers until the MFMAs wait for the scale loads; this pass reads
// m * ceil(k / 128) scales once per call and writes the layout of the kernel's 4-row loads.
// Grouped calls by row id use it (either format) to put the scales in the rows' sorted order.
// B (weight) scales are read as UE8M0 bytes by the kernel itself.
#pragma once

#include <hip/hip_runtime.h>

#include <cstdint>

#include "rocm_gemm_kernel.h"

namespace gemm::rocm {

constexpr int kScaleExpandThreads = 256;

struct ScaleExpandParams {
  const void* src;  // [m, k_blocks] fp32 or UE8M0, any strides
  int64_t stride_m, stride_k;
  int32_t src_ue8m0;
  const int32_t* src_rows;  // row r of dst is row src_rows[r] of src; null: row r
  float* dst;  // [k_blocks][ld] fp32: row r of K block kb at kb * ld + r
  int64_t ld;  // a multiple of kScalesPerLoad
  int64_t m, k_blocks;
};

// Grid-stride over the m * k_blocks scales, M fastest (coalesced writes).
__global__ __launch_bounds__(kScaleExpandThreads) void expand_a_scales_kernel(ScaleExpandParams p) {
  const int64_t total = p.m * p.k_blocks;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kScaleExpandThreads;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * kScaleExpandThreads + threadIdx.x; idx < total; idx += step) {
    const int64_t row = idx % p.m, kb = idx / p.m;
    const int64_t offset = (p.src_rows != nullptr ? p.src_rows[row] : row) * p.stride_m + kb * p.stride_k;
    p.dst[kb * p.ld + row] = p.src_ue8m0 ? ue8m0_to_float(static_cast<const uint8_t*>(p.src)[offset])
                                         : static_cast<const float*>(p.src)[offset];
  }
}

}  // namespace gemm::rocm
