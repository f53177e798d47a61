// Split-K reduction: C[m, n] = sum over splits s = 0, 1, ..., S-1 (always this order, so the result is
// bitwise repeatable) of the fp32 partial tiles the GEMM kernel wrote to workspace [S][m][n].
#pragma once

#include <hip/hip_runtime.h>

#include <cstdint>

#include "rocm_gemm_kernel.h"

namespace gemm::rocm {

constexpr int kReduceThreads = 256;

struct ReduceParams {
  const float* partials;  // [splits][m][n], dense
  int32_t splits;
  int64_t m, n;
  void* c;
  int64_t c_stride_m;
  OutFormat c_format;
};

// Grid-stride over the m*n outputs (the grid is capped by the launcher).
__global__ __launch_bounds__(kReduceThreads) void splitk_reduce_kernel(ReduceParams p) {
  const int64_t total = p.m * p.n;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kReduceThreads;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * kReduceThreads + threadIdx.x; idx < total; idx += step) {
    float sum = 0.0f;
    for (int s = 0; s < p.splits; ++s) sum += p.partials[s * total + idx];
    store_output(p.c, (idx / p.n) * p.c_stride_m + idx % p.n, sum, p.c_format);
  }
}

}  // namespace gemm::rocm
