// Hopper (sm_90a) layout facts the FP8 GEMM relies on, in one place.
//
// Sources: PTX ISA 8.x,
//   [wgmma-frag]  "Matrix fragments for wgmma.mma_async .m64nNk32" (register fragment D of f32 results)
//   [wgmma-desc]  "Matrix Descriptor Format" (shared-memory matrix descriptor bit fields)
//   [wgmma-swz]   "Shared Memory Matrix Layout" (128-byte swizzle: 8 rows x 128 bytes per atom)
//   [cp-async-bulk-tensor] + CUDA driver API cuTensorMapEncodeTiled (box <= 256 per dimension,
//                 global strides multiple of 16 bytes, 16-byte aligned base address).
// Plain C++ (usable from host code and the CPU-side tests).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define GEMM_HOST_DEVICE __host__ __device__
#else
#define GEMM_HOST_DEVICE
#endif

namespace gemm::cuda::hopper {

// --- wgmma (FP8 e4m3 x e4m3 -> f32) [wgmma-frag] ---
constexpr int kWarpSize = 32;
constexpr int kWarpgroupWarps = 4;                           // wgmma is issued by 4 consecutive warps
constexpr int kWarpgroupThreads = kWarpSize * kWarpgroupWarps;
constexpr int kWgmmaM = 64;                                  // rows per warpgroup instruction
constexpr int kWgmmaK = 32;                                  // K per FP8 instruction (32 bytes)
constexpr int kWgmmaNAlign = 8;                              // N % 8 == 0 for FP8 wgmma
constexpr int kWgmmaMaxN = 256;

// Register fragment D: register i of thread t (in its warpgroup) holds
//   row = 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2)
//   col = 8 * (i / 4) + 2 * (t % 4) + (i % 2)
// so each thread owns pairs of adjacent columns in two rows 8 apart.
constexpr int kFragRowsPerWarp = 16;
constexpr int kFragRowHalf = 8;       // second row of a thread's pair of rows
constexpr int kFragColStride = 8;     // columns between consecutive register quads
constexpr int kFragRegsPerQuad = 4;   // (row, col), (row, col+1), (row+8, col), (row+8, col+1)
constexpr int kFragLanesPerRow = 4;   // lanes sharing one row
GEMM_HOST_DEVICE constexpr int frag_row(int thread, int reg) {
  return kFragRowsPerWarp * (thread / kWarpSize) + (thread % kWarpSize) / kFragLanesPerRow +
         kFragRowHalf * ((reg / 2) % 2);
}
GEMM_HOST_DEVICE constexpr int frag_col(int thread, int reg) {
  return kFragColStride * (reg / kFragRegsPerQuad) + 2 * (thread % kFragLanesPerRow) + (reg % 2);
}

// --- 128-byte swizzled K-major shared-memory tiles [wgmma-swz] ---
constexpr int kSwizzleBytes = 128;                 // one swizzle row = 128 FP8 = one scale block of K
constexpr int kSwizzleAtomRows = 8;                // an atom is 8 rows x 128 bytes
constexpr int kSwizzleAtomBytes = kSwizzleBytes * kSwizzleAtomRows;  // tiles align to 1024 bytes

// --- shared-memory matrix descriptor [wgmma-desc] ---
constexpr int kDescAddrShift = 4;                  // addresses and offsets are stored >> 4
constexpr uint64_t kDescFieldMask = 0x3FFF;        // 14-bit fields
constexpr int kDescLboBit = 16;                    // leading-dimension byte offset (unused for swizzled K-major)
constexpr int kDescSboBit = 32;                    // stride byte offset: between 8-row atoms
constexpr int kDescSwizzleBit = 62;
constexpr uint64_t kDescSwizzle128B = 1;
GEMM_HOST_DEVICE constexpr uint64_t make_smem_desc_k_major_sw128(uint32_t smem_addr) {
  return ((static_cast<uint64_t>(smem_addr) >> kDescAddrShift) & kDescFieldMask) |
         ((static_cast<uint64_t>(kSwizzleAtomBytes) >> kDescAddrShift) << kDescSboBit) |
         (kDescSwizzle128B << kDescSwizzleBit);
}
// Advancing K by one wgmma step inside the 128-byte swizzle row = adding 32 bytes to the start
// address (the hardware applies the swizzle to the computed address).
constexpr uint64_t kDescKStep = static_cast<uint64_t>(kWgmmaK) >> kDescAddrShift;

// --- Swizzled epilogue staging (CU_TENSOR_MAP_SWIZZLE_32B / 64B / 128B; CuTe's Swizzle<1|2|3,4,3>) ---
// The output tile is staged as column chunks of 64 rows x `span` bytes (32, 64 or 128: the swizzle span,
// one TMA store box row). The swizzle XORs the 16-byte unit index inside a span with address bits
// [7, 7 + log2(span / 16)), so for every span the fragment's 4-byte stores (8 rows x 4 lanes per warp,
// 16 contiguous bytes a row) hit 32 distinct banks. Chunk bases are multiples of 8 rows x span.
constexpr int kMinStoreSpanBytes = 32;
constexpr int kMaxStoreSpanBytes = 128;
constexpr int kSwizzleUnitShift = 4;  // the XORed bits: a 16-byte unit's index, from address bit 4
constexpr int kSwizzleRowShift = 7;   // the XOR source: 128-byte rows, from address bit 7
constexpr int kSwizzleUnitBytes = 1 << kSwizzleUnitShift;
GEMM_HOST_DEVICE constexpr uint32_t swizzle_span(uint32_t offset, int span_bytes) {
  const uint32_t units_mask = static_cast<uint32_t>(span_bytes / kSwizzleUnitBytes - 1);
  return offset ^ (((offset >> kSwizzleRowShift) & units_mask) << kSwizzleUnitShift);
}

// --- TMA [cp-async-bulk-tensor] ---
constexpr int kTmaAlignBytes = 16;   // base address and every global stride
constexpr int kTmaMaxBox = 256;      // elements per box dimension

// --- shared memory per block (sm_90: 227 KB opt-in dynamic) ---
constexpr int kMaxSmemPerBlock = 227 * 1024;

}  // namespace gemm::cuda::hopper
