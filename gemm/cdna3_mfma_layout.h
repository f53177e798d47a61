// CDNA3 (gfx942, MI300X) FP8 MFMA operand and result lane layouts: the only place these facts live.
//
// Source: AMD Matrix Instruction Calculator, CDNA3, for
//   v_mfma_f32_32x32x16_fp8_fp8  (__builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(long a, long b, float16 c, 0,0,0))
//   v_mfma_f32_16x16x32_fp8_fp8  (__builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(long a, long b, float4  c, 0,0,0))
// and the AMD CDNA3 ISA guide, section "Matrix fused multiply-add". Each `long` operand packs 8 FP8
// bytes, byte b in bits [8b, 8b+8). A wavefront has 64 lanes.
//
//   32x32x16: A[i][k] -> lane 32*(k/8) + i, byte k%8      B[k][j] -> lane 32*(k/8) + j, byte k%8
//             D[i][j] -> lane 32*((i/4)%2) + j, element 4*(i/8) + i%4
//   16x16x32: A[i][k] -> lane 16*(k/8) + i, byte k%8      B[k][j] -> lane 16*(k/8) + j, byte k%8
//             D[i][j] -> lane 16*(i/4) + j, element i%4
//
// Forward maps (matrix coordinate -> lane, slot) are what the CPU emulator implements the builtins
// from; inverse maps (lane, slot -> matrix coordinate) are what the kernel uses to stage operands and
// scatter results. tests/rocm checks that each inverse undoes its forward map, and that a kernel
// compiled with a deliberately wrong map fails under emulation.
#pragma once

namespace gemm::cdna3 {

constexpr int kWaveSize = 64;
constexpr int kFp8PerOperand = 8;  // bytes packed in one `long` MFMA operand

struct LanePos {
  int lane;
  int slot;  // byte within the 8-byte operand, or element within the accumulator vector
};
struct MatPos {
  int row;
  int col;
};

// Shape of one FP8 MFMA: D[kM][kN] += A[kM][kK] * B[kK][kN].
template <int M, int N, int K>
struct MfmaFp8Shape {
  static constexpr int kM = M, kN = N, kK = K;
  static constexpr int kAccum = M * N / kWaveSize;  // fp32 results per lane
  static constexpr int kLaneGroups = kWaveSize / M;  // lanes sharing a row, each holding 8 K values
};

// ---- v_mfma_f32_32x32x16_fp8_fp8 ----
struct Mfma32x32x16 : MfmaFp8Shape<32, 32, 16> {
  static constexpr LanePos a(int i, int k) { return {32 * (k / 8) + i, k % 8}; }
  static constexpr LanePos b(int k, int j) { return {32 * (k / 8) + j, k % 8}; }
  static constexpr LanePos d(int i, int j) { return {32 * ((i / 4) % 2) + j, 4 * (i / 8) + i % 4}; }
  // Inverses: which A row / B column and which K byte lane `l`, byte `s` carries.
  static constexpr MatPos a_of(int l, int s) { return {l % 32, 8 * (l / 32) + s}; }  // (i, k)
  static constexpr MatPos b_of(int l, int s) { return {8 * (l / 32) + s, l % 32}; }  // (k, j)
  static constexpr MatPos d_of(int l, int e) { return {8 * (e / 4) + 4 * (l / 32) + e % 4, l % 32}; }
};

// ---- v_mfma_f32_16x16x32_fp8_fp8 ----
struct Mfma16x16x32 : MfmaFp8Shape<16, 16, 32> {
  static constexpr LanePos a(int i, int k) { return {16 * (k / 8) + i, k % 8}; }
  static constexpr LanePos b(int k, int j) { return {16 * (k / 8) + j, k % 8}; }
  static constexpr LanePos d(int i, int j) { return {16 * (i / 4) + j, i % 4}; }
  static constexpr MatPos a_of(int l, int s) { return {l % 16, 8 * (l / 16) + s}; }
  static constexpr MatPos b_of(int l, int s) { return {8 * (l / 16) + s, l % 16}; }
  static constexpr MatPos d_of(int l, int e) { return {4 * (l / 16) + e, l % 16}; }
};

}  // namespace gemm::cdna3
