// The CPU GEMM kernel: one task computes a kTileN-column strip of C for a run of row tiles of a
// chunk, over all K blocks (gemm_launcher.cpp describes the blocking).
//
// Numerics (the recipe, in this order): for every 128-wide K block kb,
//   partial[m, n] = sum_k decode(A[m, k]) * decode(B[n, k])       (fp32)
//   acc[m, n]     = acc[m, n] + partial[m, n] * (As[m, kb] * Bs[n / 128, kb])    (fp32)
// then acc is rounded once to the output format (bf16/fp16: round to nearest even, NaN kept).
// The micro-kernel sums a partial with k ascending; the dot kernel (groups of a few rows) sums
// each residue class of k mod the vector width ascending, then the classes in a fixed tree.
// As and Bs are read as they are stored (fp32, or UE8M0 bytes decoded to the same fp32 value), so
// UE8M0 and fp32 powers of two give identical results. A and B are decoded scaled by 2^s and 2^-s
// (fp8_formats.h), which leaves every product, and so every partial, exactly as written.
// The AVX-512 and AVX2 paths fuse each multiply-add (FMA); SSE2 and the portable path (other
// architectures) may round twice.
//
// Generic over the vector ISA (x86_vector_isa.h): the launcher instantiates run_task once per ISA
// inside a function compiled for that target.
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "../gemm_contract.h"
#include "fp8_formats.h"
#include "tile_configs.h"
#include "x86_vector_isa.h"

namespace gemm::cpu {

// How far ahead (in k) the decoder of an N-major B prefetches (measured: 8 to 128 all help, 32
// best).
constexpr int64_t kPrefetchKRows = 32;

// Rows are addressed by position: positions are rows themselves (dense GEMM, contiguous groups, the
// masked layout) or index a row list sorted by group (groups by row id). A segment is the positions
// of one group.
inline int64_t row_at(const int64_t* row_index, int64_t position) {
  return row_index != nullptr ? row_index[position] : position;
}

// What every task of one chunk shares. The packed A layout depends on the selected ISA's kMR.
struct ChunkPlan {
  const GemmArgs* args;
  const Fp8Decoder* b_decoder;
  ScaleView a_scale, b_scale;
  const int64_t* row_index;  // position -> row, or nullptr when they are the same
  int64_t k_blocks;
  int64_t n_tiles;           // ceil(n / kTileN)
  const RowTile* tiles;      // the chunk's row tiles, ordered by position
  int64_t num_tiles;
  const Piece* pieces;       // ordered by task_begin
  int64_t num_pieces;
  // [k_blocks][tiles][kScaleBlockK][kMR]: one K block of all rows is contiguous.
  const float* a_pack;
};

// The piece a task belongs to.
inline const Piece& find_piece(const ChunkPlan& plan, int64_t task) {
  const Piece* after = std::upper_bound(plan.pieces, plan.pieces + plan.num_pieces, task,
                                        [](int64_t t, const Piece& p) { return t < p.task_begin; });
  return after[-1];
}

// Decodes fp8 src[row_at(row_index, r) * stride_row + k * stride_k] (r < valid_rows, k < k_len)
// into dst[k * padded_rows + r]; rows valid_rows..padded_rows are zero so padded lanes add nothing
// (and a NaN in one row never reaches another row). `vector_rows` x `vector_k` leading rows and
// columns were already written by decode_panel_vector.
inline void decode_panel(const uint8_t* src, int64_t stride_row, int64_t stride_k,
                         int64_t valid_rows, int64_t padded_rows, int64_t k_len,
                         const float* table, float* dst, int64_t vector_rows = 0,
                         int64_t vector_k = 0, const int64_t* row_index = nullptr) {
  for (int64_t r = 0; r < valid_rows; ++r) {
    const uint8_t* row = src + row_at(row_index, r) * stride_row;
    for (int64_t k = r < vector_rows ? vector_k : 0; k < k_len; ++k)
      dst[k * padded_rows + r] = table[row[k * stride_k]];
  }
  for (int64_t r = valid_rows; r < padded_rows; ++r)
    for (int64_t k = 0; k < k_len; ++k) dst[k * padded_rows + r] = 0.0f;
}

// Decodes fp8 src[row_at(row_index, r) * stride_row + k * stride_k] (r < rows, k < k_len) into
// dst[r * kScaleBlockK + k] (a dot tile's packed A), and zeros k_len..kScaleBlockK: whole vectors
// past a ragged K end add nothing.
inline void decode_rows(const uint8_t* src, int64_t stride_row, int64_t stride_k, int64_t rows,
                        int64_t k_len, const float* table, float* dst, const int64_t* row_index) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = src + row_at(row_index, r) * stride_row;
    float* out = dst + r * kScaleBlockK;
    for (int64_t k = 0; k < k_len; ++k) out[k] = table[row[k * stride_k]];
    std::fill(out + k_len, out + kScaleBlockK, 0.0f);
  }
}

// One stage of an in-register square transpose: swaps the off-diagonal kBlock x kBlock blocks of
// every 2*kBlock x 2*kBlock block (lane j of row i with j & kBlock set <-> lane j - kBlock of row
// i + kBlock). All stages for kBlock = 1, 2, ..., kLanes / 2 transpose the matrix.
template <class Float, int kLanes, int kBlock, int... kLane>
inline void transpose_stage(Float* rows, std::integer_sequence<int, kLane...>) {
#pragma GCC unroll 16
  for (int i = 0; i < kLanes; ++i) {
    if (i & kBlock) continue;
    const Float low = rows[i], high = rows[i + kBlock];
    rows[i] =
        __builtin_shufflevector(low, high, ((kLane & kBlock) ? kLane - kBlock + kLanes : kLane)...);
    rows[i + kBlock] =
        __builtin_shufflevector(low, high, ((kLane & kBlock) ? kLane + kLanes : kLane + kBlock)...);
  }
}

template <class Float, int kLanes, int kBlock = 1>
inline void transpose_square(Float* rows) {
  if constexpr (kBlock < kLanes) {
    transpose_stage<Float, kLanes, kBlock>(rows, std::make_integer_sequence<int, kLanes>{});
    transpose_square<Float, kLanes, 2 * kBlock>(rows);
  }
}

// kLanes contiguous codes of B as B operand values (fp8_formats.h, operand scaling): read as
// binary16 and converted in hardware where the ISA has the conversion, else decoded arithmetically.
template <class Isa>
inline typename VectorTypes<Isa>::Float decode_operand_vector(const uint8_t* src,
                                                              const Fp8Decoder& decoder) {
  using V = VectorTypes<Isa>;
  if constexpr (Isa::kConvertsFp16) {
    const auto halves = e4m3_fp16_fields(Isa::widen_bytes_to_halves(src), decoder.encoding);
    return (typename V::Float)Isa::halves_to_floats(halves);
  } else {
    return decode_e4m3_vector<typename V::Float>((typename V::Int)Isa::widen_bytes(src), decoder);
  }
}

// decode_panel for rows contiguous in K (stride_k == 1): decodes kLanes x kLanes blocks, one row's
// kLanes codes per vector, and transposes them in registers into the [k][row] panel layout. For rows
// adjacent in memory (stride_row == 1, an N-major B) the kLanes codes of one k are already a panel
// row: no transpose. The ragged remainder goes through the table.
template <class Isa>
inline void decode_panel_vector(const uint8_t* src, int64_t stride_row, int64_t stride_k,
                                int64_t valid_rows, int64_t padded_rows, int64_t k_len,
                                int64_t k_remaining, const Fp8Decoder& decoder, float* dst) {
  using V = VectorTypes<Isa>;
  constexpr int kLanes = V::kLanes;
  const int64_t vector_rows = valid_rows / kLanes * kLanes;
  if (stride_row == 1) {
    for (int64_t k = 0; k < k_len; ++k) {
      // Each k is another page of B: without a prefetch every row is a dependent TLB + cache miss.
      if (k + kPrefetchKRows < k_remaining)
        __builtin_prefetch(src + (k + kPrefetchKRows) * stride_k);
      for (int64_t r0 = 0; r0 < vector_rows; r0 += kLanes) {
        const typename V::Float values = decode_operand_vector<Isa>(src + k * stride_k + r0, decoder);
        std::memcpy(dst + k * padded_rows + r0, &values, sizeof(values));
      }
    }
    decode_panel(src, stride_row, stride_k, valid_rows, padded_rows, k_len, decoder.operand_table,
                 dst, vector_rows, k_len);
    return;
  }
  const int64_t vector_k = k_len / kLanes * kLanes;
  for (int64_t r0 = 0; r0 < vector_rows; r0 += kLanes) {
    for (int64_t k0 = 0; k0 < vector_k; k0 += kLanes) {
      typename V::Float block[kLanes];
#pragma GCC unroll 16
      for (int i = 0; i < kLanes; ++i) {
        block[i] = decode_operand_vector<Isa>(src + (r0 + i) * stride_row + k0, decoder);
      }
      transpose_square<typename V::Float, kLanes>(block);
#pragma GCC unroll 16
      for (int t = 0; t < kLanes; ++t)
        std::memcpy(dst + (k0 + t) * padded_rows + r0, &block[t], sizeof(block[t]));
    }
  }
  decode_panel(src, stride_row, stride_k, valid_rows, padded_rows, k_len, decoder.operand_table,
               dst, vector_rows, vector_k);
}

// One round of sum_each_vector: a and b become one vector whose lanes with bit kWidth clear hold
// a's lanes pairwise summed (lane j + lane j + kWidth), and whose other lanes hold b's.
template <class Float, int kLanes, int kWidth, int... kLane>
inline Float fold_pair(Float a, Float b, std::integer_sequence<int, kLane...>) {
  const Float low =
      __builtin_shufflevector(a, b, ((kLane & kWidth) ? kLane - kWidth + kLanes : kLane)...);
  const Float high =
      __builtin_shufflevector(a, b, ((kLane & kWidth) ? kLane + kLanes : kLane + kWidth)...);
  return low + high;
}

// Lane j of the result is the sum of the lanes of v[j], for kCount = kLanes vectors (v is
// overwritten): log2(kLanes) rounds of fold_pair, halving the vectors each round.
template <class Float, int kLanes, int kCount = kLanes>
inline Float sum_each_vector(Float* v) {
  if constexpr (kCount == 1) {
    return v[0];
  } else {
    constexpr int kWidth = kCount / 2;
#pragma GCC unroll 16
    for (int i = 0; i < kWidth; ++i)
      v[i] = fold_pair<Float, kLanes, kWidth>(v[i], v[i + kWidth],
                                              std::make_integer_sequence<int, kLanes>{});
    return sum_each_vector<Float, kLanes, kWidth>(v);
  }
}

// Prefetches rows of B a few cache lines a step, spread over the steps of the work before their
// use: a dot group reads its columns' rows as short interleaved streams (K bytes each, 1 KB for
// small experts), which the hardware prefetcher picks up too late.
class RowPrefetch {
 public:
  RowPrefetch(const uint8_t* first_row, int64_t stride, int64_t rows, int64_t row_bytes, int64_t steps)
      : row_(first_row), stride_(stride), rows_left_(rows), row_bytes_(row_bytes),
        per_step_(ceil_div(rows * ceil_div(row_bytes, static_cast<int64_t>(kCacheLineBytes)),
                           std::max<int64_t>(steps, 1))) {}
  void step() {
    for (int64_t i = 0; i < per_step_ && rows_left_ > 0; ++i) {
      __builtin_prefetch(row_ + offset_);
      offset_ += kCacheLineBytes;
      if (offset_ >= row_bytes_) {
        offset_ = 0;
        row_ += stride_;
        --rows_left_;
      }
    }
  }

 private:
  const uint8_t* row_;
  int64_t stride_, rows_left_, row_bytes_, per_step_;
  int64_t offset_ = 0;
};

// A dot tile (kRows rows, packed A row-major) against `cols` >= kCols columns of B read in place
// (K-major, b_stride_n apart), all K blocks, kCols columns at a time, so that each column is one
// sequential stream: each (row, column) vector sums the products of one residue class of k mod
// kLanes, sum_each_vector closes the K block, and acc[i][n] += partial * (As * Bs) as in the
// micro-kernel. `b_columns` columns from b on are B's (a task's strip and those after it): each
// group prefetches the next group's.
template <class Isa, int kRows, int kCols>
inline void dot_tile(const ChunkPlan& plan, int64_t tile_index, const uint8_t* b,
                     int64_t b_columns, const ScaleView& b_scale, int64_t n_begin, int64_t cols,
                     float* scales, int64_t scales_capacity, float* acc) {
  using Cfg = TileConfig<Isa>;
  using Vec = typename VectorTypes<Isa>::Float;
  constexpr int kLanes = VectorTypes<Isa>::kLanes;
  static_assert(kCols >= 1 && kRows * kCols <= kLanes, "one reduction closes a K block");
  const GemmArgs& g = *plan.args;
  const RowTile& tile = plan.tiles[tile_index];
  // K blocks in windows whose promotion factors (As * Bs per row) `scales` holds, formed once for
  // every column group.
  const int64_t window = std::max<int64_t>(1, scales_capacity / kRows);
  for (int64_t kb0 = 0; kb0 < plan.k_blocks; kb0 += window) {
    const int64_t kb1 = std::min(plan.k_blocks, kb0 + window);
    for (int64_t kb = kb0; kb < kb1; ++kb) {
      const float b_scale_value = b_scale.at(n_begin / kScaleBlockN, kb);
      for (int i = 0; i < kRows; ++i)
        scales[(kb - kb0) * kRows + i] =
            plan.a_scale.at(row_at(plan.row_index, tile.position + i), kb) * b_scale_value;
    }
    const int64_t window_bytes = std::min(g.k, kb1 * kScaleBlockK) - kb0 * kScaleBlockK;
    for (int64_t next = 0; next < cols; next += kCols) {
      // The last group overlaps the one before instead of running past the last column; only its
      // new columns are written.
      const int64_t c0 = std::min(next, cols - kCols);
      const uint8_t* first_column = b + c0 * g.b_stride_n;
      const int64_t next_group = c0 + kCols;
      RowPrefetch prefetch(b + next_group * g.b_stride_n + kb0 * kScaleBlockK, g.b_stride_n,
                           std::clamp<int64_t>(b_columns - next_group, 0, kCols), window_bytes,
                           ceil_div(window_bytes, static_cast<int64_t>(kLanes)));
      for (int64_t kb = kb0; kb < kb1; ++kb) {
        const int64_t k_begin = kb * kScaleBlockK;
        const int64_t k_len = std::min(kScaleBlockK, g.k - k_begin);
        const float* a = plan.a_pack + (kb * plan.num_tiles + tile_index) * kScaleBlockK * Cfg::kMR;
        Vec sum[kLanes] = {};
        const auto accumulate = [&](int64_t k, auto&& b_vector) {
          prefetch.step();
          Vec a_vector[kRows];
  #pragma GCC unroll 16
          for (int i = 0; i < kRows; ++i)
            std::memcpy(&a_vector[i], a + i * kScaleBlockK + k, sizeof(Vec));
  #pragma GCC unroll 16
          for (int c = 0; c < kCols; ++c) {
            const Vec b_value = b_vector(c);
  #pragma GCC unroll 16
            for (int i = 0; i < kRows; ++i) sum[i * kCols + c] += b_value * a_vector[i];
          }
        };
        const int64_t vector_k = k_len / kLanes * kLanes;
        for (int64_t k = 0; k < vector_k; k += kLanes)
          accumulate(k, [&](int c) {
            return decode_operand_vector<Isa>(first_column + c * g.b_stride_n + k_begin + k,
                                              *plan.b_decoder);
          });
        if (vector_k < k_len) {
          // The ragged K end: B's last bytes in a zeroed vector's worth (A is zero past k_len).
          accumulate(vector_k, [&](int c) {
            uint8_t tail[kLanes] = {};
            std::memcpy(tail, first_column + c * g.b_stride_n + k_begin + vector_k,
                        k_len - vector_k);
            return decode_operand_vector<Isa>(tail, *plan.b_decoder);
          });
        }
        float partial[kLanes];
        const Vec sums = sum_each_vector<Vec, kLanes>(sum);
        std::memcpy(partial, &sums, sizeof(partial));
        for (int i = 0; i < kRows; ++i) {
          const float scale = scales[(kb - kb0) * kRows + i];
          for (int64_t c = next - c0; c < kCols; ++c)
            acc[i * kTileN + c0 + c] += partial[i * kCols + c] * scale;
        }
      }
    }
  }
}

// dot_tile for the tile's row count, dot_columns(rows) columns at a time (one at a time for a
// strip narrower than that, N's ragged end).
template <class Isa, int kRows = TileConfig<Isa>::kDotMaxRows>
inline void dot_tile_rows(int64_t rows, const ChunkPlan& plan, int64_t tile_index, const uint8_t* b,
                          int64_t b_columns, const ScaleView& b_scale, int64_t n_begin,
                          int64_t cols, float* scales, int64_t scales_capacity, float* acc) {
  if constexpr (kRows > 1) {
    if (rows < kRows) {
      dot_tile_rows<Isa, kRows - 1>(rows, plan, tile_index, b, b_columns, b_scale, n_begin, cols,
                                    scales, scales_capacity, acc);
      return;
    }
  }
  constexpr int kCols = dot_columns<Isa>(kRows);
  if (cols >= kCols)
    dot_tile<Isa, kRows, kCols>(plan, tile_index, b, b_columns, b_scale, n_begin, cols, scales,
                                scales_capacity, acc);
  else
    dot_tile<Isa, kRows, 1>(plan, tile_index, b, b_columns, b_scale, n_begin, cols, scales,
                            scales_capacity, acc);
}

// Strips of kNR columns one micro-kernel call covers: a row's partials are chains of dependent FMAs
// (k ascending), so a tile of few rows runs several strips side by side to keep as many chains in
// flight as a full tile has, in the accumulator registers its missing rows leave free.
template <class Isa>
constexpr int strips_side_by_side(int rows) {
  constexpr int kStripsPerTask = static_cast<int>(kTileN / TileConfig<Isa>::kNR);
  const int fit = TileConfig<Isa>::kMR / rows;
  return fit < 1 ? 1 : fit > kStripsPerTask ? kStripsPerTask : fit;
}

// For each of kStrips strips (B panels kNR * kScaleBlockK floats apart, acc columns kNR apart):
// partial = A_panel[k_len x kRows] * B_panel[k_len x kNR] in registers, then
// acc[i][:] += partial[i][:] * row_scale[i].
template <class Isa, int kRows, int kStrips>
inline void micro_kernel(const float* a_panel, const float* b_panel, int64_t k_len, float* acc,
                         int64_t acc_stride, const float* row_scale) {
  using Cfg = TileConfig<Isa>;
  using Vec = typename VectorTypes<Isa>::Float;
  constexpr int64_t kStripFloats = Cfg::kNR * kScaleBlockK;
  Vec partial[kStrips][kRows][kVectorsPerRow] = {};
  for (int64_t k = 0; k < k_len; ++k) {
#pragma GCC unroll 4
    for (int s = 0; s < kStrips; ++s) {
      Vec b[kVectorsPerRow];
#pragma GCC unroll 4
      for (int v = 0; v < kVectorsPerRow; ++v)
        std::memcpy(&b[v], b_panel + s * kStripFloats + k * Cfg::kNR + v * Cfg::kLanes, sizeof(Vec));
#pragma GCC unroll 16
      for (int i = 0; i < kRows; ++i) {
        const float a = a_panel[k * Cfg::kMR + i];
#pragma GCC unroll 4
        for (int v = 0; v < kVectorsPerRow; ++v) partial[s][i][v] += b[v] * a;
      }
    }
  }
#pragma GCC unroll 4
  for (int s = 0; s < kStrips; ++s) {
#pragma GCC unroll 16
    for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 4
      for (int v = 0; v < kVectorsPerRow; ++v) {
        float* dst = acc + i * acc_stride + s * Cfg::kNR + v * Cfg::kLanes;
        Vec c;
        std::memcpy(&c, dst, sizeof(Vec));
        c += partial[s][i][v] * row_scale[i];
        std::memcpy(dst, &c, sizeof(Vec));
      }
    }
  }
}

// One row tile (possibly partial) against `strips` strips: the micro-kernel instantiation for its
// rows, strips_side_by_side of them per call while that many are left.
template <class Isa, int kRows = TileConfig<Isa>::kMR>
inline void micro_kernel_rows(int64_t rows, int64_t strips, const float* a_panel, const float* b_panel,
                              int64_t k_len, float* acc, int64_t acc_stride,
                              const float* row_scale) {
  if constexpr (kRows > 1) {
    if (rows < kRows) {
      micro_kernel_rows<Isa, kRows - 1>(rows, strips, a_panel, b_panel, k_len, acc, acc_stride, row_scale);
      return;
    }
  }
  using Cfg = TileConfig<Isa>;
  constexpr int kStrips = strips_side_by_side<Isa>(kRows);
  int64_t s = 0;
  if constexpr (kStrips > 1) {
    for (; s + kStrips <= strips; s += kStrips)
      micro_kernel<Isa, kRows, kStrips>(a_panel, b_panel + s * Cfg::kNR * kScaleBlockK, k_len,
                                        acc + s * Cfg::kNR, acc_stride, row_scale);
  }
  for (; s < strips; ++s)
    micro_kernel<Isa, kRows, 1>(a_panel, b_panel + s * Cfg::kNR * kScaleBlockK, k_len, acc + s * Cfg::kNR,
                                acc_stride, row_scale);
}

// Row i of acc goes to row row_at(row_index, i) of c.
template <class T>
inline void store_tile(const float* acc, int64_t rows, int64_t cols, T* c, int64_t c_stride_m,
                       int64_t c_stride_n, const int64_t* row_index) {
  for (int64_t i = 0; i < rows; ++i) {
    T* c_row = c + row_at(row_index, i) * c_stride_m;
    for (int64_t j = 0; j < cols; ++j) c_row[j * c_stride_n] = static_cast<T>(acc[i * kTileN + j]);
  }
}

// Row tiles [tile_begin, tile_end) against the kTileN-column strip at n_begin (`cols` wide), all
// K blocks: each K block of B is decoded into b_pack once and reused by every tile.
template <class Isa>
inline void panel_tiles(const ChunkPlan& plan, int64_t tile_begin, int64_t tile_end,
                        const uint8_t* b_bytes, const ScaleView& b_scale, int64_t n_begin,
                        int64_t cols, float* b_pack, float* acc) {
  using Cfg = TileConfig<Isa>;
  const GemmArgs& g = *plan.args;
  const int64_t strips = ceil_div(cols, Cfg::kNR);
  const int64_t position_begin = plan.tiles[tile_begin].position;
  for (int64_t kb = 0; kb < plan.k_blocks; ++kb) {
    const int64_t k_begin = kb * kScaleBlockK;
    const int64_t k_len = std::min(kScaleBlockK, g.k - k_begin);
    for (int64_t s = 0; s < strips; ++s) {
      const int64_t n = n_begin + s * Cfg::kNR;
      const uint8_t* src = b_bytes + n * g.b_stride_n + k_begin * g.b_stride_k;
      const int64_t valid = std::min<int64_t>(Cfg::kNR, g.n - n);
      float* dst = b_pack + s * Cfg::kNR * kScaleBlockK;
      if (g.b_stride_k == 1) {
        // This strip's next K block: a task walks kTileN rows at once, more streams than the
        // hardware prefetcher follows, so each row would otherwise miss on every block.
        const int64_t next_len = std::min(kScaleBlockK, g.k - k_begin - kScaleBlockK);
        for (int64_t r = 0; r < valid; ++r)
          for (int64_t line = 0; line < next_len; line += kCacheLineBytes)
            __builtin_prefetch(src + r * g.b_stride_n + kScaleBlockK + line);
      }
      if (g.b_stride_k == 1 || g.b_stride_n == 1)
        decode_panel_vector<Isa>(src, g.b_stride_n, g.b_stride_k, valid, Cfg::kNR, k_len,
                                 g.k - k_begin, *plan.b_decoder, dst);
      else
        decode_panel(src, g.b_stride_n, g.b_stride_k, valid, Cfg::kNR, k_len, plan.b_decoder->operand_table,
                     dst);
    }
    const float b_scale_value = b_scale.at(n_begin / kScaleBlockN, kb);
    for (int64_t tile = tile_begin; tile < tile_end; ++tile) {
      const RowTile& row_tile = plan.tiles[tile];
      float row_scale[Cfg::kMR];
      for (int64_t i = 0; i < row_tile.rows; ++i)
        row_scale[i] =
            plan.a_scale.at(row_at(plan.row_index, row_tile.position + i), kb) * b_scale_value;
      const float* a_panel = plan.a_pack + (kb * plan.num_tiles + tile) * kScaleBlockK * Cfg::kMR;
      float* acc_tile = acc + (row_tile.position - position_begin) * kTileN;
      micro_kernel_rows<Isa>(row_tile.rows, strips, a_panel, b_pack, k_len, acc_tile, kTileN, row_scale);
    }
  }
}

// One task: a kTileN-column strip times a run of row tiles of one piece, all K blocks, with the
// piece's group of B. `scratch` holds the decoded B panel then the fp32 accumulator tile.
template <class Isa>
inline void run_task(const ChunkPlan& plan, int64_t task, float* scratch) {
  const GemmArgs& g = *plan.args;
  const Piece& piece = find_piece(plan, task);
  const int64_t local_task = task - piece.task_begin;
  const int64_t n_tile = local_task % plan.n_tiles;
  const int64_t tile_begin = piece.tile_begin + local_task / plan.n_tiles * piece.tiles_per_split;
  const int64_t tile_end = std::min(piece.tile_end, tile_begin + piece.tiles_per_split);
  const int64_t position_begin = plan.tiles[tile_begin].position;
  const RowTile& last = plan.tiles[tile_end - 1];
  const int64_t rows = last.position + last.rows - position_begin;
  const int64_t n_begin = n_tile * kTileN;
  const int64_t cols = std::min(kTileN, g.n - n_begin);

  float* b_pack = scratch;
  float* acc = scratch + kTileN * kScaleBlockK;
  std::fill(acc, acc + rows * kTileN, 0.0f);

  const auto* b_bytes = static_cast<const uint8_t*>(g.b) + piece.group * g.b_stride_group;
  const ScaleView b_scale = plan.b_scale.offset(piece.group * g.b_scale_stride_group);
  if (plan.tiles[tile_begin].dot)
    dot_tile_rows<Isa>(rows, plan, tile_begin, b_bytes + n_begin * g.b_stride_n, g.n - n_begin,
                       b_scale, n_begin, cols, b_pack, kTileN * kScaleBlockK, acc);
  else
    panel_tiles<Isa>(plan, tile_begin, tile_end, b_bytes, b_scale, n_begin, cols, b_pack, acc);

  // Rows of the task by position: c is indexed through the row list, if any.
  const bool identity = plan.row_index == nullptr;
  const int64_t* row_index = identity ? nullptr : plan.row_index + position_begin;
  const int64_t c_offset = (identity ? position_begin : 0) * g.c_stride_m + n_begin * g.c_stride_n;
  switch (g.c_format) {
    case OutFormat::kBF16:
      store_tile(acc, rows, cols, static_cast<c10::BFloat16*>(g.c) + c_offset, g.c_stride_m,
                 g.c_stride_n, row_index);
      break;
    case OutFormat::kFP16:
      store_tile(acc, rows, cols, static_cast<c10::Half*>(g.c) + c_offset, g.c_stride_m,
                 g.c_stride_n, row_index);
      break;
    case OutFormat::kFP32:
      store_tile(acc, rows, cols, static_cast<float*>(g.c) + c_offset, g.c_stride_m, g.c_stride_n,
                 row_index);
      break;
  }
}

}  // namespace gemm::cpu
