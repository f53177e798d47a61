// The pre-pass of the grouped GEMM batched by group id (row_group): rows sorted by group on the device,
// so that the grouped kernel runs them as contiguous segments and stores each output row back at its
// own position (KernelParams::group.out_rows). No host synchronization: the counts never leave the GPU.
//  - sort_rows_by_group_kernel (one CTA): per-group counts, their inclusive cumsum (the segments' ends)
//    and the permutation, sorted position -> original row; rows whose id is outside [0, groups) are left
//    out (never stored);
//  - gather_group_rows_kernel: the sorted copy of A (K-major, rows `a_ld` bytes apart, as TMA reads it)
//    and of its scales (M-major [K/128][scale_ld], as TMA reads 128+-row tiles' scales in place).
// Rows of one group keep no particular order (shared-memory atomics): each output row depends only on its
// own A row and its group's B, so the result is the same whatever the order.
#pragma once

#include <cstdint>

#include "grouped_scheduler.h"
#include "hopper_layout.h"

namespace gemm::cuda {

constexpr int kSortThreads = 1024;  // one group a thread in the scan: kMaxGroups at most
static_assert(kMaxGroups <= kSortThreads, "the sort scans one group a thread");
constexpr int kGatherThreads = 128;
constexpr int kGatherVecBytes = 16;
constexpr int kMaxGatherBlocks = 4096;

struct SortRows {
  const int64_t* row_group = nullptr;  // [m]
  int64_t m = 0;
  int32_t num_groups = 0;
  int32_t* ends = nullptr;  // [num_groups], inclusive cumsum of the counts
  int32_t* perm = nullptr;  // [m]: the original row of sorted position i (i < ends[num_groups - 1])
};

__global__ void __launch_bounds__(kSortThreads) sort_rows_by_group_kernel(const SortRows s) {
  __shared__ int32_t cursor[kMaxGroups];
  __shared__ int32_t warp_sums[kSortThreads / hopper::kWarpSize];
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % hopper::kWarpSize, warp = tid / hopper::kWarpSize;
  if (tid < s.num_groups) cursor[tid] = 0;
  __syncthreads();
  for (int64_t r = tid; r < s.m; r += kSortThreads) {
    const int64_t g = s.row_group[r];
    if (g >= 0 && g < s.num_groups) atomicAdd(&cursor[g], 1);
  }
  __syncthreads();
  // Exclusive scan of the counts, one group a thread: within warps, then over the warps' totals.
  const int32_t count = tid < s.num_groups ? cursor[tid] : 0;
  int32_t incl = count;
  for (int d = 1; d < hopper::kWarpSize; d *= 2) {
    const int32_t v = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += v;
  }
  if (lane == hopper::kWarpSize - 1) warp_sums[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    int32_t w = warp_sums[lane];
    for (int d = 1; d < hopper::kWarpSize; d *= 2) {
      const int32_t v = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += v;
    }
    warp_sums[lane] = w - warp_sums[lane];  // exclusive: the rows of the warps before
  }
  __syncthreads();
  if (tid < s.num_groups) {
    const int32_t end = warp_sums[warp] + incl;
    s.ends[tid] = end;
    cursor[tid] = end - count;
  }
  __syncthreads();
  for (int64_t r = tid; r < s.m; r += kSortThreads) {
    const int64_t g = s.row_group[r];
    if (g >= 0 && g < s.num_groups) s.perm[atomicAdd(&cursor[g], 1)] = static_cast<int32_t>(r);
  }
}

struct GatherRows {
  const uint8_t* a = nullptr;  // [m, k] FP8, any strides
  int64_t a_stride_m = 0, a_stride_k = 0;
  const float* a_scale = nullptr;  // [m, kblocks], any strides
  int64_t a_scale_stride_m = 0, a_scale_stride_k = 0;
  int64_t k = 0, kblocks = 0;
  const int32_t* total = nullptr;  // sorted rows: ends[num_groups - 1]
  const int32_t* perm = nullptr;
  uint8_t* dst = nullptr;  // [m, a_ld] K-major
  int64_t a_ld = 0;
  float* dst_scale = nullptr;  // [kblocks, scale_ld] M-major
  int64_t scale_ld = 0;
};

// One sorted row a CTA at a time: 16-byte chunks where the source row is contiguous and aligned, bytes
// otherwise; then its scales.
__global__ void __launch_bounds__(kGatherThreads) gather_group_rows_kernel(const GatherRows g) {
  const int32_t total = *g.total;
  const int tid = static_cast<int>(threadIdx.x);
  for (int32_t i = blockIdx.x; i < total; i += gridDim.x) {
    const int64_t r = g.perm[i];
    const uint8_t* src = g.a + r * g.a_stride_m;
    uint8_t* dst = g.dst + i * g.a_ld;
    const bool vector = g.a_stride_k == 1 && reinterpret_cast<uintptr_t>(src) % kGatherVecBytes == 0;
    const int64_t vec_end = vector ? g.k / kGatherVecBytes * kGatherVecBytes : 0;
    for (int64_t c = tid * kGatherVecBytes; c < vec_end; c += kGatherThreads * kGatherVecBytes) {
      *reinterpret_cast<uint4*>(dst + c) = __ldg(reinterpret_cast<const uint4*>(src + c));
    }
    for (int64_t c = vec_end + tid; c < g.k; c += kGatherThreads) dst[c] = src[c * g.a_stride_k];
    for (int64_t kb = tid; kb < g.kblocks; kb += kGatherThreads) {
      g.dst_scale[kb * g.scale_ld + i] = g.a_scale[r * g.a_scale_stride_m + kb * g.a_scale_stride_k];
    }
  }
}

}  // namespace gemm::cuda
