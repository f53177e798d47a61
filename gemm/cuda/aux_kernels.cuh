// Helper kernels around the FP8 GEMM: the K-major repack for operands TMA cannot read directly,
// and the A-scale transpose (which also decodes UE8M0 A scales to fp32).
#pragma once

#include <cstdint>

#include "../gemm_contract.h"
#include "hopper_layout.h"
#include "hopper_ptx.h"
#include "scale_formats.h"

namespace gemm::cuda {

// ---- repack: dst[r, c] = src[r * stride_r + c * stride_c], dst rows `ld` bytes apart ----
// TMA needs K contiguous with 16-byte aligned base and row stride. M/N-major operands (the AMD
// challenge layout, strides (1, rows)), K % 16 != 0 row strides and misaligned views are copied
// through a shared-memory tile of kRepackTile x kRepackTile bytes. Each thread loads a block of
// kRepackBlockRows rows x kRepackBlockCols columns, turns it into one 4-byte word per row (a byte
// transpose when the source is M/N-major) and writes the words to the tile; the tile is then
// stored row by row in 16-byte chunks.
constexpr int kRepackTile = 128;
constexpr int kRepackThreads = 256;
// Caps registers at 64 (the byte path keeps 64 loads in flight) so that 4 tiles, 64 KB of loads,
// are in flight per SM.
constexpr int kRepackMinBlocksPerSm = 4;
constexpr int kRepackVecBytes = 16;                    // one uint4: a column of a block, a chunk of a row
constexpr int kRepackBlockRows = kRepackVecBytes;      // one vector load per block column
constexpr int kRepackBlockCols = sizeof(uint32_t);     // one word per block row
constexpr int kRepackRowBlocks = kRepackTile / kRepackBlockRows;
constexpr int kRepackColBlocks = kRepackTile / kRepackBlockCols;
constexpr int kRepackChunksPerRow = kRepackTile / kRepackVecBytes;
constexpr int kRepackStoresPerThread = kRepackTile * kRepackChunksPerRow / kRepackThreads;
static_assert(kRepackRowBlocks * kRepackColBlocks == kRepackThreads, "one block per thread");
static_assert(kRepackRowBlocks == kRepackChunksPerRow, "the row-block XOR permutes a row's chunks");
static_assert(kRepackStoresPerThread * kRepackThreads == kRepackTile * kRepackChunksPerRow, "whole stores");

// Chunk index of (row, chunk) in the tile. XOR-ing the chunk with the row block makes both the
// load phase (a warp writes one word of 32 different blocks) and the store phase (a quarter-warp
// reads one row) hit all 32 banks once.
__device__ __forceinline__ int repack_tile_chunk(int row, int chunk) {
  return row * kRepackChunksPerRow + (chunk ^ (row / kRepackBlockRows));
}

// words[i] = bytes (r + i, c .. c + 3) of the source, little-endian, zero outside rows x cols.
// kLoadBytes == kRepackVecBytes: the source is M/N-major (stride_r == 1) with a 16-byte aligned
// base and stride_c, so an interior block is four uint4 column loads and a 4 x 4 byte transpose
// (two prmt levels) per 4 rows; edge blocks and every other layout read byte by byte.
template <int kLoadBytes>
__device__ __forceinline__ void repack_load_block(const uint8_t* __restrict__ src, int64_t rows, int64_t cols,
                                                  int64_t stride_r, int64_t stride_c, int64_t r, int64_t c,
                                                  uint32_t (&words)[kRepackBlockRows]) {
  static_assert(kLoadBytes == 1 || kLoadBytes == kRepackVecBytes, "byte or uint4 loads");
  if constexpr (kLoadBytes == kRepackVecBytes) {
    if (r + kRepackBlockRows <= rows && c + kRepackBlockCols <= cols) {
      uint4 col[kRepackBlockCols];
#pragma unroll
      for (int j = 0; j < kRepackBlockCols; ++j) {
        col[j] = __ldg(reinterpret_cast<const uint4*>(src + r + (c + j) * stride_c));
      }
      const auto transpose4 = [&](int i, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3) {
        // a_j holds rows i .. i + 3 of column j; interleave bytes, then 16-bit halves.
        const uint32_t lo01 = __byte_perm(a0, a1, 0x5140), hi01 = __byte_perm(a0, a1, 0x7362);
        const uint32_t lo23 = __byte_perm(a2, a3, 0x5140), hi23 = __byte_perm(a2, a3, 0x7362);
        words[i + 0] = __byte_perm(lo01, lo23, 0x5410);
        words[i + 1] = __byte_perm(lo01, lo23, 0x7632);
        words[i + 2] = __byte_perm(hi01, hi23, 0x5410);
        words[i + 3] = __byte_perm(hi01, hi23, 0x7632);
      };
      transpose4(0, col[0].x, col[1].x, col[2].x, col[3].x);
      transpose4(4, col[0].y, col[1].y, col[2].y, col[3].y);
      transpose4(8, col[0].z, col[1].z, col[2].z, col[3].z);
      transpose4(12, col[0].w, col[1].w, col[2].w, col[3].w);
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < kRepackBlockRows; ++i) {
    words[i] = 0;
#pragma unroll
    for (int j = 0; j < kRepackBlockCols; ++j) {
      if (r + i < rows && c + j < cols) {
        words[i] |= static_cast<uint32_t>(src[(r + i) * stride_r + (c + j) * stride_c]) << (8 * j);
      }
    }
  }
}

// One operand's repack: dst[r, c] = src[r * stride_r + c * stride_c] for r < rows, c < cols.
struct RepackJob {
  const uint8_t* src = nullptr;
  int64_t rows = 0, cols = 0, stride_r = 0, stride_c = 0;
  uint8_t* dst = nullptr;
  int64_t ld = 0;
};
// The operands of one GEMM call that need a repack (A, B or both) and share a loader, in one launch: one
// kernel boundary instead of two before the GEMM, and the two copies share the SMs instead of each leaving a
// partial last wave. Both have K columns, so they share the grid's x (column tiles); y walks the first
// job's row tiles, then the second's. (One kernel with both loaders spilled at the 64-register cap.)
constexpr int kMaxRepackJobs = 2;
struct RepackJobs {
  RepackJob job[kMaxRepackJobs];
  int count = 0;
  int64_t row_tiles[kMaxRepackJobs] = {};
};

// Grid: x over column tiles, y (capped) strides over the jobs' row tiles.
template <int kLoadBytes>
__global__ void __launch_bounds__(kRepackThreads, kRepackMinBlocksPerSm)
    repack_k_major_kernel(const __grid_constant__ RepackJobs jobs) {
  // The GEMM behind it is its programmatic dependent: let it start its prologue now (it waits for this
  // grid to complete before it reads an operand).
  ptx::launch_dependents();
  __shared__ uint4 tile[kRepackTile * kRepackChunksPerRow];
  auto* tile_words = reinterpret_cast<uint32_t*>(tile);
  const int t = threadIdx.x;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kRepackTile;
  const int64_t total = jobs.row_tiles[0] + jobs.row_tiles[1];
  for (int64_t y = blockIdx.y; y < total; y += gridDim.y) {
    const int which = y < jobs.row_tiles[0] ? 0 : 1;
    const RepackJob& j = jobs.job[which];
    const int64_t r0 = (y - (which == 0 ? 0 : jobs.row_tiles[0])) * kRepackTile;
    // Consecutive threads walk the source's unit-stride dimension, so a warp's loads touch few lines.
    const bool rows_contiguous = j.stride_r == 1 && j.stride_c != 1;
    const int row_block = rows_contiguous ? t % kRepackRowBlocks : t / kRepackColBlocks;
    const int col_block = rows_contiguous ? t / kRepackRowBlocks : t % kRepackColBlocks;
    const int block_row0 = row_block * kRepackBlockRows;
    const int block_col0 = col_block * kRepackBlockCols;
    uint32_t words[kRepackBlockRows];
    repack_load_block<kLoadBytes>(j.src, j.rows, j.cols, j.stride_r, j.stride_c, r0 + block_row0,
                                  c0 + block_col0, words);
#pragma unroll
    for (int i = 0; i < kRepackBlockRows; ++i) {
      const int chunk = repack_tile_chunk(block_row0 + i, block_col0 / kRepackVecBytes);
      tile_words[chunk * kRepackBlockCols + block_col0 % kRepackVecBytes / kRepackBlockCols] = words[i];
    }
    __syncthreads();
#pragma unroll
    for (int s = 0; s < kRepackStoresPerThread; ++s) {
      const int i = t + s * kRepackThreads;
      const int row = i / kRepackChunksPerRow, chunk = i % kRepackChunksPerRow;
      const int64_t r = r0 + row, c = c0 + chunk * kRepackVecBytes;
      // c < cols <= ld with c and ld multiples of 16: the whole chunk lies inside the row's ld bytes
      // (the bytes past cols are the zeros of the load phase).
      if (r < j.rows && c < j.cols) {
        *reinterpret_cast<uint4*>(j.dst + r * j.ld + c) = tile[repack_tile_chunk(row, chunk)];
      }
    }
    __syncthreads();
  }
}

// ---- A scales -> K-block-major fp32: dst[c * ld + r] = src[r * stride_r + c * stride_c] ----
// TMA loads a tile's A scales of one K block as one row of a [K/128, M] array; scales in any other
// layout (the quantizers' row-major [M, K/128] among them) or format (UE8M0, decoded here) are copied
// into that form first, through a shared-memory tile: a warp reads 32 consecutive K blocks of a row and
// writes 32 consecutive rows.
struct ScaleCopy {
  const void* src = nullptr;  // in `format`
  int64_t rows = 0, cols = 0, stride_r = 0, stride_c = 0;
  float* dst = nullptr;
  int64_t ld = 0;
  ScaleFormat format = ScaleFormat::kF32;
};
constexpr int kScaleCopyTile = hopper::kWarpSize;  // rows x cols of a block's tile
constexpr int kScaleCopyThreads = 256;
constexpr int kScaleCopyRowsPerPass = kScaleCopyThreads / kScaleCopyTile;

// Grid: x over row tiles, y (capped) strides over column tiles. kFormat is j.format.
template <ScaleFormat kFormat>
__global__ void __launch_bounds__(kScaleCopyThreads) transpose_scales_kernel(const ScaleCopy j) {
  // The GEMM behind it is its programmatic dependent: let it start its prologue now (it waits for this
  // grid to complete before it reads a scale).
  ptx::launch_dependents();
  __shared__ float tile[kScaleCopyTile][kScaleCopyTile + 1];  // +1: the column reads hit 32 banks
  const int tx = threadIdx.x % kScaleCopyTile, ty = threadIdx.x / kScaleCopyTile;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kScaleCopyTile;
  for (int64_t c0 = static_cast<int64_t>(blockIdx.y) * kScaleCopyTile; c0 < j.cols;
       c0 += static_cast<int64_t>(gridDim.y) * kScaleCopyTile) {
    for (int i = ty; i < kScaleCopyTile; i += kScaleCopyRowsPerPass) {
      const int64_t r = r0 + i, c = c0 + tx;
      if (r < j.rows && c < j.cols) tile[i][tx] = load_scale<kFormat>(j.src, r * j.stride_r + c * j.stride_c);
    }
    __syncthreads();
    for (int i = ty; i < kScaleCopyTile; i += kScaleCopyRowsPerPass) {
      const int64_t r = r0 + tx, c = c0 + i;
      if (r < j.rows && c < j.cols) j.dst[c * j.ld + r] = tile[tx][i];
    }
    __syncthreads();
  }
}

}  // namespace gemm::cuda
