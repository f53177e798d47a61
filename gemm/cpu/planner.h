// Host-side planning of a CPU GEMM: which rows each group owns, how many row tiles to decode at
// once, how to split the work into tasks and over how many threads. Only the launcher includes
// this; the kernel reads the result from its ChunkPlan.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

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

// Row tiles of one chunk: at most kMaxChunkRows rows and kMaxPackedABytes of decoded A.
inline int64_t plan_chunk_tiles(int64_t k_blocks, int64_t row_tile) {
  const int64_t padded_k = k_blocks * kScaleBlockK;
  const int64_t max_chunk_rows =
      std::min(kMaxChunkRows, kMaxPackedABytes / (padded_k * static_cast<int64_t>(sizeof(float))));
  return std::max<int64_t>(1, max_chunk_rows / row_tile);
}

// Rows per thread of the activation quantizer.
inline int64_t plan_quantize_grain(int64_t k) {
  return std::max<int64_t>(1, kMinElementsPerThread / k);
}

// Decoded A panels (row_tile x kScaleBlockK each) per thread, at least.
inline int64_t plan_a_decode_grain(int64_t row_tile) {
  return ceil_div(kMinElementsPerThread, row_tile * kScaleBlockK);
}

struct TaskSplit {
  int64_t tiles_per_split;  // row tiles per task
  int64_t tasks;            // column tiles x row splits
  int64_t elements;         // decode-equivalent work of all tasks
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
  split.elements = split.tasks * (task_cost(split.tiles_per_split) / kMultiplyAddsPerDecode);
  return split;
}

// Scratch slots (= threads that run tasks) for tasks worth `elements` in all.
inline int64_t plan_slots(int64_t tasks, int64_t elements, int64_t threads) {
  return std::min({threads, tasks, ceil_div(elements, kMinElementsPerThread)});
}

// A group's positions [begin, begin + rows).
struct Segment {
  int64_t group, begin, rows;
};

// Group g of contiguous groups owns rows [ends[g - 1], ends[g]) (the caller checked that ends
// never decrease); empty groups get no segment.
inline std::vector<Segment> segments_from_ends(const int32_t* ends, int64_t groups) {
  std::vector<Segment> segments;
  for (int64_t g = 0, begin = 0; g < groups; begin = ends[g++])
    if (ends[g] > begin) segments.push_back({g, begin, ends[g] - begin});
  return segments;
}

// The masked layout: group g owns rows [g * stride, g * stride + rows[g]), its count clamped into
// [0, stride] (the contract's min(rows[g], stride); a negative count is an empty group).
inline std::vector<Segment> segments_from_group_rows(const int32_t* rows, int64_t groups, int64_t stride) {
  std::vector<Segment> segments;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t count = std::clamp<int64_t>(rows[g], 0, stride);
    if (count > 0) segments.push_back({g, g * stride, count});
  }
  return segments;
}

// Groups by row id: `row_index` becomes the rows sorted by group (stable, rows whose id is outside
// [0, groups) left out) and each group's segment indexes into it.
inline std::vector<Segment> segments_from_row_groups(const int64_t* row_group, int64_t m,
                                                     int64_t groups,
                                                     std::vector<int64_t>& row_index) {
  std::vector<int64_t> begin(groups + 1, 0);
  for (int64_t r = 0; r < m; ++r)
    if (row_group[r] >= 0 && row_group[r] < groups) ++begin[row_group[r] + 1];
  for (int64_t g = 0; g < groups; ++g) begin[g + 1] += begin[g];
  row_index.resize(begin[groups]);
  std::vector<int64_t> next(begin.begin(), begin.end() - 1);
  for (int64_t r = 0; r < m; ++r)
    if (row_group[r] >= 0 && row_group[r] < groups) row_index[next[row_group[r]]++] = r;
  std::vector<Segment> segments;
  for (int64_t g = 0; g < groups; ++g)
    if (begin[g + 1] > begin[g]) segments.push_back({g, begin[g], begin[g + 1] - begin[g]});
  return segments;
}

// What the kernel's ChunkPlan points at for one chunk.
struct ChunkSchedule {
  std::vector<RowTile> tiles;
  std::vector<Piece> pieces;
  int64_t tasks = 0;
  int64_t slots = 0;
};

// Every segment becomes row tiles of at most row_tile rows (spread evenly: 16 rows as 8 + 8 rather
// than 12 + 4, a thin tile is load-bound in the micro-kernel); a segment of at most dot_max_rows
// rows is one tile for the dot kernel (0: none, as when B is not K-major). The tiles, in segment
// order, are cut into chunks of at most chunk_tiles. Within a chunk each segment's tiles are a
// piece whose row splits are planned with the piece's share of the threads.
inline std::vector<ChunkSchedule> plan_chunks(const std::vector<Segment>& segments, int64_t k,
                                              int64_t n_tiles, int64_t row_tile,
                                              int64_t chunk_tiles, int64_t threads,
                                              int64_t dot_max_rows) {
  std::vector<ChunkSchedule> chunks;
  for (const Segment& segment : segments) {
    const int64_t tiles = ceil_div(segment.rows, row_tile);
    const int64_t tile_rows = ceil_div(segment.rows, tiles);
    for (int64_t i = 0; i < tiles; ++i) {
      if (chunks.empty() || static_cast<int64_t>(chunks.back().tiles.size()) == chunk_tiles)
        chunks.emplace_back();
      ChunkSchedule& chunk = chunks.back();
      const int64_t tile = static_cast<int64_t>(chunk.tiles.size());
      if (i == 0 || tile == 0) chunk.pieces.push_back({segment.group, tile, tile, 1, 0});
      chunk.tiles.push_back({segment.begin + i * tile_rows,
                             std::min(tile_rows, segment.rows - i * tile_rows),
                             segment.rows <= dot_max_rows});
      chunk.pieces.back().tile_end = tile + 1;
    }
  }
  for (ChunkSchedule& chunk : chunks) {
    const int64_t chunk_tile_count = static_cast<int64_t>(chunk.tiles.size());
    int64_t elements = 0;
    for (Piece& piece : chunk.pieces) {
      const int64_t tiles = piece.tile_end - piece.tile_begin;
      const RowTile& last = chunk.tiles[piece.tile_end - 1];
      const int64_t rows = last.position + last.rows - chunk.tiles[piece.tile_begin].position;
      const int64_t share = ceil_div(threads * tiles, chunk_tile_count);
      const TaskSplit split = plan_tasks(k, tiles, ceil_div(rows, tiles), n_tiles, share);
      piece.tiles_per_split = split.tiles_per_split;
      piece.task_begin = chunk.tasks;
      chunk.tasks += split.tasks;
      elements += split.elements;
    }
    chunk.slots = plan_slots(chunk.tasks, elements, threads);
  }
  return chunks;
}

}  // namespace gemm::cpu
