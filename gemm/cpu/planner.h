// Host-side planning of a CPU GEMM: how many rows to decode at once, how to split the work into
// tasks and over how many threads. Only the launcher includes this; the kernel reads the result
// from its ChunkPlan.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../gemm_contract.h"
#include "tile_configs.h"

namespace gemm::cpu {

// Rows whose decoded A is held at once: bounds the workspace for long prefills while decoding
// each B panel only once per this many rows (B decode cost / FMA cost ~ vector lanes / rows).
constexpr int64_t kMaxChunkRows = 1024;
// ... and fewer rows when K is so long that the decoded A of kMaxChunkRows would exceed this.
constexpr int64_t kMaxPackedABytes = int64_t{256} << 20;

// Most row splits considered when balancing tasks over threads.
constexpr int64_t kMaxRowSplits = 8;

// Work below which another thread costs more (fork/join, and a wait when cores are shared) than it
// saves, in decoded FP8 elements; a decode costs about as much as this many multiply-adds.
constexpr int64_t kMinElementsPerThread = int64_t{1} << 18;
constexpr int64_t kMultiplyAddsPerDecode = 16;

// Rows of one chunk: a whole number of row tiles, at most kMaxChunkRows and kMaxPackedABytes of
// decoded A.
inline int64_t plan_chunk_rows(int64_t k_blocks, int64_t row_tile) {
  const int64_t padded_k = k_blocks * kScaleBlockK;
  const int64_t max_chunk_rows =
      std::min(kMaxChunkRows, kMaxPackedABytes / (padded_k * static_cast<int64_t>(sizeof(float))));
  return std::max<int64_t>(1, max_chunk_rows / row_tile) * row_tile;
}

// Decoded A panels (row_tile x kScaleBlockK each) per thread, at least.
inline int64_t plan_a_decode_grain(int64_t row_tile) {
  return ceil_div(kMinElementsPerThread, row_tile * kScaleBlockK);
}

struct TaskSplit {
  int64_t tiles_per_split;  // row tiles per task
  int64_t tasks;            // column tiles x row splits
  int64_t slots;            // scratch slots = threads that run tasks
};

// Tasks are (column tile, run of row tiles). Splitting the rows balances few column tiles over the
// threads but decodes each B panel once more per split: take the split count with the shortest
// estimated makespan. A task decodes kTileN x K of B (each decode costs about
// kMultiplyAddsPerDecode multiply-adds) and does rows x kTileN x K multiply-adds.
inline TaskSplit plan_tasks(int64_t k, int64_t row_tiles, int64_t tile_rows, int64_t n_tiles,
                            int64_t threads) {
  const auto task_cost = [&](int64_t tiles_per_split) {
    return kTileN * k * (kMultiplyAddsPerDecode + tiles_per_split * tile_rows);
  };
  const auto makespan = [&](int64_t splits) {
    const int64_t tiles_per_split = ceil_div(row_tiles, splits);
    const int64_t tasks = n_tiles * ceil_div(row_tiles, tiles_per_split);
    return ceil_div(tasks, threads) * task_cost(tiles_per_split);
  };
  int64_t splits = 1;
  for (int64_t s = 2; s <= std::min(row_tiles, kMaxRowSplits); ++s)
    if (makespan(s) < makespan(splits)) splits = s;
  TaskSplit split;
  split.tiles_per_split = ceil_div(row_tiles, splits);
  split.tasks = n_tiles * ceil_div(row_tiles, split.tiles_per_split);
  const int64_t task_elements = task_cost(split.tiles_per_split) / kMultiplyAddsPerDecode;
  split.slots =
      std::min({threads, split.tasks, ceil_div(split.tasks * task_elements, kMinElementsPerThread)});
  return split;
}

}  // namespace gemm::cpu
