// Block sizes of the CPU kernel: the column tile a task owns and the register tile (kMR x kNR)
// of the micro-kernel, derived per vector ISA from its register file (x86_vector_isa.h).
#pragma once

#include <cstdint>

#include "../gemm_contract.h"

namespace gemm::cpu {

// Columns per task. Dividing kScaleBlockN keeps one B scale per (task, K block).
constexpr int64_t kTileN = 64;
static_assert(kScaleBlockN % kTileN == 0, "a column tile must not straddle a B scale block");

// Most rows the dot kernel takes (gemm_kernel.h, dot_tile), measured: past them (one column at a
// time), decoding B once into a panel shared by the rows costs less. The arithmetic decoder (no
// hardware binary16 conversion) holds more registers: fewer rows.
constexpr int kDotRowsCap = 8;
constexpr int kDotRowsCapArithmeticDecode = 2;

// Vectors per micro-tile row: two independent B loads per k step.
constexpr int kVectorsPerRow = 2;
// One register for the broadcast A value.
constexpr int kBroadcastRegisters = 1;
// Left to the compiler: with all 31 (AVX-512: 14 rows) GCC 12 spills accumulators in the k loop
// (measured 512x2112x7168: 12 rows 15 % faster than 14; AVX2 equal at 4 and 6 rows).
constexpr int kCompilerRegisters = 4;

template <class Isa>
struct VectorTypes {
  static constexpr int kLanes = Isa::kVectorBytes / static_cast<int>(sizeof(float));
  typedef float Float __attribute__((vector_size(Isa::kVectorBytes)));
  typedef int32_t Int __attribute__((vector_size(Isa::kVectorBytes)));
};

template <class Isa>
struct TileConfig {
  static constexpr int kLanes = VectorTypes<Isa>::kLanes;
  static constexpr int kNR = kLanes * kVectorsPerRow;
  // Rows of the register tile: what is left of the register file after the B vectors, the A
  // broadcast and the compiler's share, kVectorsPerRow accumulators per row.
  static constexpr int kMR =
      (Isa::kVectorRegisters - kVectorsPerRow - kBroadcastRegisters - kCompilerRegisters) /
      kVectorsPerRow;
  static_assert(kTileN % kNR == 0, "a column tile is a whole number of micro-tile strips");
  // Rows the dot kernel takes; at most kMR, so that such a group is a single row tile.
  static constexpr int kDotMaxRows =
      Isa::kConvertsFp16 ? (kMR < kDotRowsCap ? kMR : kDotRowsCap) : kDotRowsCapArithmeticDecode;
};

// Columns the dot kernel runs side by side for `rows` rows: at most kLanes accumulators, so that
// one reduction of kLanes vectors closes a K block.
template <class Isa>
constexpr int dot_columns(int rows) {
  int rows_pow2 = 1;
  while (rows_pow2 < rows) rows_pow2 *= 2;
  return VectorTypes<Isa>::kLanes / rows_pow2;
}

// The schedule of one chunk (built by planner.h, read by the kernel). A row tile is at most kMR
// consecutive positions of one group; positions are rows, or index a row list sorted by group.
struct RowTile {
  int64_t position;
  int64_t rows;
  // Computed by dot products along K (gemm_kernel.h, dot_tile), its packed A row-major; the
  // planner marks only the single tile of a group of at most kDotMaxRows rows, B K-major.
  bool dot;
};

// Row tiles of one chunk that belong to one group, and the tasks over them.
struct Piece {
  int64_t group;
  int64_t tile_begin, tile_end;  // tiles of the chunk
  int64_t tiles_per_split;       // row tiles per task
  int64_t task_begin;            // tasks: (column tile, run of tiles_per_split row tiles), n-fastest
};

}  // namespace gemm::cpu
