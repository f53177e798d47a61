// The LDS layout of one operand stage and the per-lane address of every LDS access the GEMM kernel
// makes (fragment reads, K-major and M/N-major stage writes): the kernel computes its addresses with
// these functions only, so tests/rocm/test_lds_banks.py can compute the banks each access of a
// wavefront touches. Plain C++ (no HIP), like rocm_tile_configs.h.
//
// A stage holds kStageK bytes of K for each row of the tile, K-major, in 16-byte chunks. LDS has 32
// banks of 4 bytes: a 128-byte line covers every bank once and holds 8 chunk slots ("units"). A
// stage row is one line (kStageK = 128) or half of one (64: two rows share a line). Chunk c of row r
// lies in unit ((r % rows_per_line) * chunks_per_row + c) ^ swizzle(line). No padding.
#pragma once

#include "cdna3_mfma_layout.h"

namespace gemm::rocm {

constexpr int kChunkBytes = 16;      // one ds_read_b128 / ds_write_b128, one global 16-byte load
constexpr int kLdsLineBytes = 128;   // 32 banks x 4 bytes
constexpr int kLdsUnits = kLdsLineBytes / kChunkBytes;

template <int kStageK>
struct StageLayout {
  static constexpr int kChunksPerRow = kStageK / kChunkBytes;
  static constexpr int kRowsPerLine = kLdsLineBytes / kStageK;
  static_assert(kRowsPerLine * kStageK == kLdsLineBytes && kChunksPerRow * kChunkBytes == kStageK,
                "a stage row is half a line or a whole line");
  // Lines holding 8 consecutive rows: the rows an MFMA fragment read serves in one LDS cycle.
  static constexpr int kLinesPer8Rows = 8 / kRowsPerLine;

  // XOR applied to the units of line `line`. Fragment reads (8 aligned consecutive rows, one logical
  // chunk) need it to differ in its low bits between the lines of those rows: line % kLinesPer8Rows.
  // M/N-major writes (one row of each of 8 row groups, one logical chunk) need it to differ between
  // the row groups' lines: the high term line / kLinesPer8Rows. With half-line rows and 4-row groups,
  // group lines are 2 apart and already differ in bit 1 of the low term, so the high term's bit 1
  // moves to bit 2 (spread) to keep the 8 groups apart.
  static constexpr int swizzle(int line) {
    const int low = line % kLinesPer8Rows, high = line / kLinesPer8Rows % kLdsUnits;
    const int spread = kRowsPerLine == 1 ? high : (high & 1) | (high >> 1 & 1) << 2 | (high >> 2 & 1) << 1;
    return low ^ spread;
  }

  // Byte offset of chunk `chunk` (16 bytes of K) of stage row `row`.
  static constexpr int chunk_offset(int row, int chunk) {
    const int line = row / kRowsPerLine;
    const int unit = ((row % kRowsPerLine) * kChunksPerRow + chunk) ^ swizzle(line);
    return line * kLdsLineBytes + unit * kChunkBytes;
  }
  // Byte offset of byte `k` (< kStageK) of stage row `row`.
  static constexpr int byte_offset(int row, int k) { return chunk_offset(row, k / kChunkBytes) + k % kChunkBytes; }
};

// Which part of a [kRows, kStageK] stage thread `tid` of kThreads stages.
//  K-major: kChunks 16-byte chunks, chunk i is number tid + i * kThreads in row-major chunk order.
//  M/N-major: kPieceK K-consecutive columns of kMnRows consecutive rows (one global load of kMnRows
//  bytes per column: 8 when a thread stages 64 bytes, else 4); the register transpose turns them into
//  kMnRows row pieces of kPieceK bytes (one ds_write_b64 or ds_write_b32 each). The threads of a
//  chunk's pieces are consecutive, then the row groups follow: a 16- or 32-lane LDS cycle writes one
//  chunk column of 8 row groups.
template <int kRows, int kStageK, int kThreads>
struct StageAccess {
  using Layout = StageLayout<kStageK>;
  static constexpr int kChunks = kRows * kStageK / kChunkBytes / kThreads;
  static constexpr int kThreadBytes = kRows * kStageK / kThreads;
  static constexpr int kMnRows = kThreadBytes >= 64 ? 8 : 4;
  static constexpr int kPieceK = kThreadBytes / kMnRows;
  static constexpr int kPiecesPerChunk = kChunkBytes / kPieceK;
  static constexpr int kRowGroups = kRows / kMnRows;
  static_assert(kChunks >= 1 && kChunks * kChunkBytes * kThreads == kRows * kStageK, "K-major: whole chunks per thread");
  static_assert(kPieceK == 4 || kPieceK == 8, "M/N-major: row pieces of 4 or 8 bytes");

  struct Pos {
    int row, k;
  };
  static constexpr Pos k_major_chunk(int tid, int i) {
    const int c = tid + i * kThreads;
    return {c / Layout::kChunksPerRow, c % Layout::kChunksPerRow * kChunkBytes};
  }
  // First row and first K column of thread `tid`'s M/N-major block.
  static constexpr Pos mn_major_block(int tid) {
    const int piece = tid % kPiecesPerChunk, group = tid / kPiecesPerChunk % kRowGroups;
    const int chunk = tid / (kPiecesPerChunk * kRowGroups);
    return {group * kMnRows, chunk * kChunkBytes + piece * kPieceK};
  }
  static constexpr int k_major_write(int tid, int i) {
    const Pos p = k_major_chunk(tid, i);
    return Layout::byte_offset(p.row, p.k);
  }
  static constexpr int mn_major_write(int tid, int r) {
    const Pos p = mn_major_block(tid);
    return Layout::byte_offset(p.row + r, p.k);
  }
};

// The 16 bytes lane `lane` reads for MFMA step pair `pair` of the sub-tile whose first row (A) or
// column (B) in the stage is `row0`: its row (A: a_of, B: b_of give the same lane structure) and the
// chunk of its lane group. One ds_read_b128 feeds two MFMA steps (low and high 8 bytes).
template <class Mfma, int kStageK>
struct FragmentAccess {
  static constexpr int kChunkGroups = Mfma::kK / cdna3::kFp8PerOperand;  // lane groups along K
  static constexpr int kPairs = kStageK / (kChunkGroups * kChunkBytes);  // ds_read_b128 per fragment per stage
  static_assert(kPairs >= 1 && kPairs * kChunkGroups * kChunkBytes == kStageK, "whole step pairs per stage");
  static constexpr int a_read(int lane, int row0, int pair) {
    const cdna3::MatPos a = Mfma::a_of(lane, 0);
    return StageLayout<kStageK>::chunk_offset(row0 + a.row, pair * kChunkGroups + a.col / cdna3::kFp8PerOperand);
  }
  static constexpr int b_read(int lane, int col0, int pair) {
    const cdna3::MatPos b = Mfma::b_of(lane, 0);
    return StageLayout<kStageK>::chunk_offset(col0 + b.col, pair * kChunkGroups + b.row / cdna3::kFp8PerOperand);
  }
};

}  // namespace gemm::rocm
