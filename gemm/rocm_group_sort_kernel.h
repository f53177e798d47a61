// Grouped GEMM by row id (row_group): a stable counting sort of the rows by group, on the device, so
// that the contiguous grouped kernel can run on the sorted rows. Bins 0..E-1 are the groups, bin E
// collects the sentinel rows (ids outside [0, E)); the permutation covers every row, the group ends
// cover the first E bins. Three launches, no atomics, hence the same permutation on every run:
//   group_rows_kernel (count):   per chunk of kSortChunk rows, rows per bin -> counts[chunk][bin]
//   group_offsets_kernel:         one block: counts -> each (chunk, bin)'s first sorted position, group ends
//   group_rows_kernel (scatter): per chunk, rows in order to their positions -> perm[position] = row
#pragma once

#include <hip/hip_runtime.h>

#include <cstdint>

namespace gemm::rocm {

constexpr int kSortThreads = 256;
constexpr int kSortChunk = kSortThreads;  // rows per block of the row passes: one id per thread

struct GroupSortParams {
  const int64_t* row_group;  // [m] group id per row
  int64_t m;
  int32_t num_groups;        // bins: num_groups + 1 (the last one holds the sentinels)
  int32_t chunks;            // ceil(m / kSortChunk)
  int32_t* counts;           // [chunks][num_groups + 1]: rows per bin, then (in place) first positions
  int32_t* bin_starts;       // [num_groups + 1] workspace of group_offsets_kernel
  int32_t* group_ends;       // [num_groups] inclusive ends of the groups in sorted order
  int32_t* perm;             // [m] sorted position -> row
};

// One block per chunk. Thread t owns bins t, t + kSortThreads, ... and walks the chunk's rows in
// order: counting (scatter == 0) or writing each row to the next position of its bin (scatter == 1).
__global__ __launch_bounds__(kSortThreads) void group_rows_kernel(GroupSortParams p, int32_t scatter) {
  __shared__ int32_t bins[kSortChunk];
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kSortChunk;
  const int rows = p.m - row0 < kSortChunk ? static_cast<int>(p.m - row0) : kSortChunk;
  if (tid < rows) {
    const int64_t id = p.row_group[row0 + tid];
    bins[tid] = id >= 0 && id < p.num_groups ? static_cast<int32_t>(id) : p.num_groups;
  }
  __syncthreads();
  int32_t* chunk_counts = p.counts + static_cast<int64_t>(blockIdx.x) * (p.num_groups + 1);
  for (int32_t bin = tid; bin <= p.num_groups; bin += kSortThreads) {
    int32_t next = scatter ? chunk_counts[bin] : 0;
    for (int r = 0; r < rows; ++r)
      if (bins[r] == bin) {
        if (scatter) p.perm[next] = static_cast<int32_t>(row0 + r);
        ++next;
      }
    if (!scatter) chunk_counts[bin] = next;
  }
}

// One block: bin totals over the chunks, their exclusive prefix (one thread: bins are few), then each
// chunk's first position per bin, chunks in order (which makes the sort stable).
__global__ __launch_bounds__(kSortThreads) void group_offsets_kernel(GroupSortParams p) {
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t bins = p.num_groups + 1;
  for (int32_t bin = tid; bin < bins; bin += kSortThreads) {
    int32_t total = 0;
    for (int32_t c = 0; c < p.chunks; ++c) total += p.counts[c * bins + bin];
    p.bin_starts[bin] = total;
  }
  __syncthreads();
  if (tid == 0) {
    int32_t running = 0;
    for (int32_t bin = 0; bin < bins; ++bin) {
      const int32_t total = p.bin_starts[bin];
      p.bin_starts[bin] = running;
      running += total;
      if (bin < p.num_groups) p.group_ends[bin] = running;
    }
  }
  __syncthreads();
  for (int32_t bin = tid; bin < bins; bin += kSortThreads) {
    int32_t position = p.bin_starts[bin];
    for (int32_t c = 0; c < p.chunks; ++c) {
      const int32_t count = p.counts[c * bins + bin];
      p.counts[c * bins + bin] = position;
      position += count;
    }
  }
}

}  // namespace gemm::rocm
