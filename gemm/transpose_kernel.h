// Staging copy: any-strided FP8 operand [rows, k] -> K-major rows of `ld` bytes (ld a multiple of 16)
// in workspace, so the GEMM kernel always sees 16-byte aligned K-major rows. Used for M/N-major
// inputs (the AMD challenge layout: strides (1, M)) and for K-major inputs whose rows are not
// 16-byte aligned. Bytes are copied unchanged; e4m3fn folding happens in the GEMM's staging.
#pragma once

#include <hip/hip_runtime.h>

#include <cstdint>

namespace gemm::rocm {

constexpr int kTransposeTile = 64;      // a 64 x 64 byte tile per workgroup, through LDS
constexpr int kTransposeThreads = 256;
constexpr int kTransposeRowsPerPass = kTransposeThreads / kTransposeTile;
constexpr int kTransposePad = 4;        // odd-ish row pitch: column reads of the tile spread over banks

struct TransposeParams {
  const uint8_t* src;
  int64_t stride_row, stride_k;  // elements (bytes) of the source view
  uint8_t* dst;                  // [rows, ld], K contiguous
  int64_t ld;
  int64_t rows, k;
  int64_t tiles_k;               // tiles along K; the grid is 1-D over tiles_rows * tiles_k
};

// Reads with consecutive threads on consecutive rows (coalesced for M-major sources), writes with
// consecutive threads on consecutive K (coalesced K-major destination).
__global__ __launch_bounds__(kTransposeThreads) void stage_k_major_kernel(TransposeParams p) {
  __shared__ uint8_t tile[kTransposeTile][kTransposeTile + kTransposePad];  // [k][row]
  const int64_t row0 = static_cast<int64_t>(blockIdx.x / p.tiles_k) * kTransposeTile;
  const int64_t k0 = static_cast<int64_t>(blockIdx.x % p.tiles_k) * kTransposeTile;
  const int tid = static_cast<int>(threadIdx.x);

  for (int pass = 0; pass < kTransposeTile / kTransposeRowsPerPass; ++pass) {
    const int r = tid % kTransposeTile, kk = tid / kTransposeTile + pass * kTransposeRowsPerPass;
    const int64_t row = row0 + r, k = k0 + kk;
    tile[kk][r] = row < p.rows && k < p.k ? p.src[row * p.stride_row + k * p.stride_k] : uint8_t{0};
  }
  __syncthreads();
  for (int pass = 0; pass < kTransposeTile / kTransposeRowsPerPass; ++pass) {
    const int kk = tid % kTransposeTile, r = tid / kTransposeTile + pass * kTransposeRowsPerPass;
    const int64_t row = row0 + r, k = k0 + kk;
    if (row < p.rows && k < p.k) p.dst[row * p.ld + k] = tile[kk][r];
  }
}

}  // namespace gemm::rocm
