// UE8M0 A scales -> fp32, M-contiguous, in workspace: the GEMM kernel reads A scales as fp32 only.
// Reading UE8M0 A bytes in the kernel is exact too, but with clang-19 the per-row byte loads (a 64-bit
// address each) push the one-wave tiles' registers until the MFMAs wait for the scale loads; this pass
// reads m * ceil(k / 128) bytes once per call and writes the layout of the kernel's 4-row loads.
// B (weight) scales are read as UE8M0 bytes by the kernel itself.
#pragma once

#include <hip/hip_runtime.h>

#include <cstdint>

#include "rocm_gemm_kernel.h"

namespace gemm::rocm {

constexpr int kScaleExpandThreads = 256;

struct ScaleExpandParams {
  const uint8_t* src;  // [m, k_blocks] UE8M0, any strides
  int64_t stride_m, stride_k;
  float* dst;  // [k_blocks][ld] fp32: row r of K block kb at kb * ld + r
  int64_t ld;  // a multiple of kScalesPerLoad
  int64_t m, k_blocks;
};

// Grid-stride over the m * k_blocks scales, M fastest (coalesced writes).
__global__ __launch_bounds__(kScaleExpandThreads) void expand_ue8m0_scales_kernel(ScaleExpandParams p) {
  const int64_t total = p.m * p.k_blocks;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kScaleExpandThreads;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * kScaleExpandThreads + threadIdx.x; idx < total; idx += step) {
    const int64_t row = idx % p.m, kb = idx / p.m;
    p.dst[kb * p.ld + row] = ue8m0_to_float(p.src[row * p.stride_m + kb * p.stride_k]);
  }
}

}  // namespace gemm::rocm
