// Helper kernels around the FP8 GEMM: the K-major repack for operands TMA cannot read directly,
// the A-scale transpose, and the fixed-order stream-K reduction.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../gemm_launcher.h"
#include "hopper_ptx.h"
#include "tile_scheduler.h"

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

template <int kLoadBytes>
__global__ void __launch_bounds__(kRepackThreads, kRepackMinBlocksPerSm)
    repack_k_major_kernel(const uint8_t* __restrict__ src, int64_t rows, int64_t cols,
                          int64_t stride_r, int64_t stride_c, uint8_t* __restrict__ dst, int64_t ld) {
  __shared__ uint4 tile[kRepackTile * kRepackChunksPerRow];
  auto* tile_words = reinterpret_cast<uint32_t*>(tile);
  // Consecutive threads walk the source's unit-stride dimension, so a warp's loads touch few lines.
  const bool rows_contiguous = stride_r == 1 && stride_c != 1;
  const int t = threadIdx.x;
  const int row_block = rows_contiguous ? t % kRepackRowBlocks : t / kRepackColBlocks;
  const int col_block = rows_contiguous ? t / kRepackRowBlocks : t % kRepackColBlocks;
  const int block_row0 = row_block * kRepackBlockRows;
  const int block_col0 = col_block * kRepackBlockCols;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kRepackTile;
  for (int64_t r0 = static_cast<int64_t>(blockIdx.y) * kRepackTile; r0 < rows;
       r0 += static_cast<int64_t>(gridDim.y) * kRepackTile) {
    uint32_t words[kRepackBlockRows];
    repack_load_block<kLoadBytes>(src, rows, cols, stride_r, stride_c, r0 + block_row0, c0 + block_col0, words);
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
      if (r < rows && c < cols) {
        *reinterpret_cast<uint4*>(dst + r * ld + c) = tile[repack_tile_chunk(row, chunk)];
      }
    }
    __syncthreads();
  }
}

// ---- A scales -> K-block-major: dst[c * ld + r] = src[r * stride_r + c * stride_c] ----
// TMA loads a tile's A scales of one K block as one row of a [K/128, M] array; scales in any other
// layout are copied into that form first.
struct ScaleCopy {
  const float* src = nullptr;
  int64_t rows = 0, cols = 0, stride_r = 0, stride_c = 0;
  float* dst = nullptr;
  int64_t ld = 0;
};
constexpr int kScaleCopyThreads = 256;

__global__ void __launch_bounds__(kScaleCopyThreads) transpose_scales_kernel(const ScaleCopy j) {
  const int64_t total = j.rows * j.cols;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  // Consecutive threads walk r, the destination's unit-stride dimension.
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t r = i % j.rows, c = i / j.rows;
    j.dst[c * j.ld + r] = j.src[r * j.stride_r + c * j.stride_c];
  }
}

// ---- stream-K: out tile = sum of its pieces' fp32 partials in K order (tile_scheduler.h) ----
struct StreamKReduce {
  TileSchedule sched;
  int block_m = 0, block_n = 0;
  const float* partial = nullptr;
  int64_t m = 0, n = 0;
  void* out = nullptr;
  int64_t out_ld = 0;
  bool out_vec = false;  // base and row stride allow kReduceVec-element stores
};
constexpr int kReduceThreads = 256;
constexpr int kReduceRows = 8;  // tile rows per block: grid = region tiles x BLOCK_M / kReduceRows
constexpr int kReduceVec = 4;   // floats per load (slots are 16-byte aligned, BLOCK_N % 16 == 0)
constexpr int kReduceVecsPerThread = kReduceRows * hopper::kWgmmaMaxN / kReduceVec / kReduceThreads;
constexpr int kReducePiecesInFlight = 8;  // loads in flight per thread and vector

template <typename T> __device__ __forceinline__ T convert_out(float v);
template <> __device__ __forceinline__ __nv_bfloat16 convert_out(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half convert_out(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ float convert_out(float v) { return v; }

// Four converted values stored as vectors (the caller checked the alignment).
template <typename T> __device__ __forceinline__ void store_vec4(T* dst, float4 v);
template <> __device__ __forceinline__ void store_vec4(__nv_bfloat16* dst, float4 v) {
  reinterpret_cast<__nv_bfloat162*>(dst)[0] = __floats2bfloat162_rn(v.x, v.y);
  reinterpret_cast<__nv_bfloat162*>(dst)[1] = __floats2bfloat162_rn(v.z, v.w);
}
template <> __device__ __forceinline__ void store_vec4(__half* dst, float4 v) {
  reinterpret_cast<__half2*>(dst)[0] = __floats2half2_rn(v.x, v.y);
  reinterpret_cast<__half2*>(dst)[1] = __floats2half2_rn(v.z, v.w);
}
template <> __device__ __forceinline__ void store_vec4(float* dst, float4 v) { *reinterpret_cast<float4*>(dst) = v; }

template <typename T>
__global__ void __launch_bounds__(kReduceThreads) stream_k_reduce_kernel(const StreamKReduce r) {
  // Scheduled while the GEMM may still run: the partials are complete and visible after this.
  ptx::griddep_wait();
  const TileSchedule& s = r.sched;
  const int64_t region_tile = blockIdx.x;
  const int64_t iters = s.sk_iters();
  const int64_t first_cta = sk_range_owner(region_tile * s.kblocks, iters, s.sk_ctas);
  const int64_t last_cta = sk_range_owner((region_tile + 1) * s.kblocks - 1, iters, s.sk_ctas);
  const TileCoord tc = tile_coord(s.dp_tiles + region_tile, s.m_blocks, s.n_blocks);
  const int vecs_per_row = r.block_n / kReduceVec;
  const int vecs = kReduceRows * vecs_per_row;
  const int64_t slot_floats = static_cast<int64_t>(r.block_m) * r.block_n;
  const int64_t block_offset = static_cast<int64_t>(blockIdx.y) * kReduceRows * r.block_n;
  // Whole rows of the slots are summed (every piece writes its full tile); only the store is clipped.
  // kReducePiecesInFlight pieces are loaded before any is added (a region tile can have dozens of
  // pieces; one load at a time left the kernel latency-bound), then added in K order.
  float4 sum[kReduceVecsPerThread] = {};
  for (int64_t c0 = first_cta; c0 <= last_cta; c0 += kReducePiecesInFlight) {
    float4 v[kReducePiecesInFlight][kReduceVecsPerThread];
#pragma unroll
    for (int u = 0; u < kReducePiecesInFlight; ++u) {
      if (c0 + u > last_cta) break;
      const float* slot = r.partial + sk_slot(s, c0 + u, region_tile) * slot_floats + block_offset;
#pragma unroll
      for (int j = 0; j < kReduceVecsPerThread; ++j) {
        const int i = threadIdx.x + j * kReduceThreads;
        if (i < vecs) v[u][j] = *reinterpret_cast<const float4*>(slot + i * kReduceVec);
      }
    }
#pragma unroll
    for (int u = 0; u < kReducePiecesInFlight; ++u) {
      if (c0 + u > last_cta) break;
#pragma unroll
      for (int j = 0; j < kReduceVecsPerThread; ++j) {
        if (threadIdx.x + j * kReduceThreads >= vecs) break;
        sum[j].x += v[u][j].x;
        sum[j].y += v[u][j].y;
        sum[j].z += v[u][j].z;
        sum[j].w += v[u][j].w;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kReduceVecsPerThread; ++j) {
    const int i = threadIdx.x + j * kReduceThreads;
    if (i >= vecs) break;
    const int64_t row = tc.m_blk * r.block_m + blockIdx.y * kReduceRows + i / vecs_per_row;
    const int64_t col = tc.n_blk * r.block_n + (i % vecs_per_row) * kReduceVec;
    if (row >= r.m || col >= r.n) continue;
    T* dst = static_cast<T*>(r.out) + row * r.out_ld + col;
    if (r.out_vec && col + kReduceVec <= r.n) {
      store_vec4(dst, sum[j]);
    } else {
      if (col < r.n) dst[0] = convert_out<T>(sum[j].x);
      if (col + 1 < r.n) dst[1] = convert_out<T>(sum[j].y);
      if (col + 2 < r.n) dst[2] = convert_out<T>(sum[j].z);
      if (col + 3 < r.n) dst[3] = convert_out<T>(sum[j].w);
    }
  }
}

}  // namespace gemm::cuda
