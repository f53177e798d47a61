// Staging copy: any-strided FP8 operand [rows, k] -> K-major rows of `ld` bytes (ld a multiple of 16)
// in workspace, so the GEMM kernel always sees 16-byte aligned K-major rows. Used for M/N-major
// inputs (the AMD challenge layout: strides (1, M)) and for K-major inputs whose rows are not
// 16-byte aligned. Bytes are copied unchanged; e4m3fn folding happens in the GEMM's staging.
#pragma once

#include <hip/hip_runtime.h>

#include <cstdint>

#include "rocm_gemm_kernel.h"

namespace gemm::rocm {

constexpr int kTransposeTile = 64;  // 64 rows x 64 K bytes per workgroup, transposed through LDS
constexpr int kTransposeThreads = kTransposeTile * kTransposeTile / kChunkBytes;  // one 16-byte chunk each
constexpr int kTransposeChunks = kTransposeTile / kChunkBytes;                   // chunks along a tile edge
constexpr int kTransposePitch = kTransposeTile + kChunkBytes;  // keeps 16-byte rows aligned, shifts banks

struct TransposeParams {
  const uint8_t* src;
  int64_t stride_row, stride_k;  // elements (bytes) of the source view
  uint8_t* dst;                  // [rows, ld], K contiguous
  int64_t ld;
  int64_t rows, k;
  int64_t tiles_k;               // tiles along K; the grid is 1-D over tiles_rows * tiles_k
  int32_t rows_contiguous;       // stride_row == 1, stride_k and src 16-byte aligned: vector reads
  const int32_t* src_rows;       // row r of dst is row src_rows[r] of src (rows_contiguous == 0); null: row r
};

// Phase 1 reads 16 row-consecutive bytes at one k per thread (one vector load when the source is
// row-contiguous, the challenge layout; byte loads otherwise) into tile[k][row]; phase 2 gathers 16
// K-consecutive bytes of one row and writes them as one aligned vector store. Bytes past K are
// written as zero up to the 16-byte row padding, so the GEMM never reads uninitialized memory.
__global__ __launch_bounds__(kTransposeThreads) void stage_k_major_kernel(TransposeParams p) {
  __shared__ u32x4 tile_storage[kTransposeTile * kTransposePitch / kChunkBytes];
  uint8_t* tile = reinterpret_cast<uint8_t*>(tile_storage);  // [k][row], row pitch kTransposePitch
  const int64_t row0 = static_cast<int64_t>(blockIdx.x / p.tiles_k) * kTransposeTile;
  const int64_t k0 = static_cast<int64_t>(blockIdx.x % p.tiles_k) * kTransposeTile;
  const int tid = static_cast<int>(threadIdx.x);

  {
    const int kk = tid / kTransposeChunks, r = (tid % kTransposeChunks) * kChunkBytes;
    const int64_t row = row0 + r, k = k0 + kk;
    u32x4 v = {0u, 0u, 0u, 0u};
    if (p.rows_contiguous && k < p.k && row + kChunkBytes <= p.rows) {
      v = *reinterpret_cast<const u32x4*>(p.src + row + k * p.stride_k);
    } else {
      for (int byte = 0; byte < kChunkBytes; ++byte)
        if (k < p.k && row + byte < p.rows) {
          const int64_t src_row = p.src_rows != nullptr ? p.src_rows[row + byte] : row + byte;
          v[byte / 4] |= uint32_t(p.src[src_row * p.stride_row + k * p.stride_k]) << (8 * (byte % 4));
        }
    }
    *reinterpret_cast<u32x4*>(tile + kk * kTransposePitch + r) = v;
  }
  __syncthreads();
  {
    const int r = tid / kTransposeChunks, kk = (tid % kTransposeChunks) * kChunkBytes;
    const int64_t row = row0 + r, k = k0 + kk;
    if (row < p.rows && k < p.ld) {
      u32x4 v = {0u, 0u, 0u, 0u};
      for (int byte = 0; byte < kChunkBytes; ++byte)
        v[byte / 4] |= uint32_t(tile[(kk + byte) * kTransposePitch + r]) << (8 * (byte % 4));
      *reinterpret_cast<u32x4*>(p.dst + row * p.ld + k) = v;
    }
  }
}

}  // namespace gemm::rocm
