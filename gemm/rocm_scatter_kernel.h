// Grouped GEMM by row id: the output rows computed in sorted order (workspace, [m][n]) copied back to
// their rows of C through the permutation of rocm_group_sort_kernel.h. Only the first
// group_ends[E - 1] sorted rows (the non-sentinel ones) are copied: sentinel rows of C are untouched.
#pragma once

#include <hip/hip_runtime.h>

#include <cstdint>

#include "gemm_contract.h"

namespace gemm::rocm {

constexpr int kScatterThreads = 256;

struct ScatterParams {
  const uint8_t* src;  // [m][n] elements of element_bytes, sorted row order
  uint8_t* dst;        // C
  int64_t dst_stride_m;  // elements
  const int32_t* perm;   // sorted position -> row of C
  const int32_t* rows;   // device count of rows to copy (group_ends[E - 1])
  int64_t m, n;
  int32_t element_bytes;  // 2 or 4
};

// Grid-stride over the m * n elements, N fastest (coalesced along a row).
__global__ __launch_bounds__(kScatterThreads) void scatter_rows_kernel(ScatterParams p) {
  const int64_t total = p.m * p.n;
  const int64_t rows = *p.rows < p.m ? *p.rows : p.m;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kScatterThreads;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * kScatterThreads + threadIdx.x; idx < total; idx += step) {
    const int64_t row = idx / p.n, col = idx % p.n;
    if (row >= rows) break;  // idx only grows
    const int64_t dst = p.perm[row] * p.dst_stride_m + col;
    if (p.element_bytes == 4)
      reinterpret_cast<float*>(p.dst)[dst] = reinterpret_cast<const float*>(p.src)[idx];
    else
      reinterpret_cast<uint16_t*>(p.dst)[dst] = reinterpret_cast<const uint16_t*>(p.src)[idx];
  }
}

}  // namespace gemm::rocm
