// ROCm gfx942 tile configurations: the tile table the GEMM kernel is instantiated from, the
// occupancy each tile implies, and the kernel's other template parameters. Plain C++ (17 or 20)
// with no HIP include, so host tools read it too.
// The choice of a tile per shape lives in rocm_planner.h (host-only), which the kernel never includes.
#pragma once

#include <cstdint>

#include "cdna3_mfma_layout.h"
#include "gemm_contract.h"

namespace gemm::rocm {

// ---- Fixed design facts ---------------------------------------------------------------------
constexpr int kBlockK = static_cast<int>(kScaleBlockK);  // one K stage == one scale block: promote once per stage
constexpr int kStages = 2;  // LDS double buffer: stage s+1 is written while stage s is read
constexpr int kWaveSize = cdna3::kWaveSize;
constexpr int kLdsBytesPerCu = 64 * 1024;  // MI300X LDS per CU (CDNA3 ISA guide, "Local data share")
constexpr int kSimdsPerCu = 4;
constexpr int kMaxWavesPerSimd = 8;
constexpr int kRegsPerSimdLane = 512;      // unified VGPR+AGPR file per lane of a SIMD on CDNA3

enum class MfmaKind : int32_t { k32x32x16 = 0, k16x16x32 = 1 };

// One compile-time tile shape: BlockM x BlockN outputs per workgroup of WarpsM x WarpsN waves,
// each wave owning a (BlockM / WarpsM) x (BlockN / WarpsN) sub-tile built from MFMA tiles. A K block
// of 128 (one scale block, promoted once) is staged through LDS in kBlockK / stage_k stages: half
// stages halve the LDS double buffer, which lets two 128x128 workgroups share a CU.
struct TileShape {
  int block_m;
  int block_n;
  int warps_m;
  int warps_n;
  MfmaKind mfma;
  int stage_k;

  constexpr int threads() const { return warps_m * warps_n * kWaveSize; }
  constexpr int mfma_m() const { return mfma == MfmaKind::k32x32x16 ? 32 : 16; }
  constexpr int mfma_k() const { return mfma == MfmaKind::k32x32x16 ? 16 : 32; }
  constexpr int lds_bytes() const { return kStages * (block_m + block_n) * stage_k; }
  constexpr int blocks_per_cu() const {
    const int by_lds = kLdsBytesPerCu / lds_bytes();
    const int by_waves = kSimdsPerCu * kMaxWavesPerSimd / (threads() / kWaveSize);
    return by_lds < by_waves ? by_lds : by_waves;
  }
  // Threads that stage one M/N-major operand: in a square tile, each half of the waves stages one
  // operand (8-row columns a thread, half the column loads); otherwise every thread stages both.
  constexpr int mn_major_stage_threads() const { return block_m == block_n ? threads() / 2 : threads(); }
  constexpr int waves_per_simd() const { return blocks_per_cu() * (threads() / kWaveSize) / kSimdsPerCu; }
  // Design target checked by scripts/rocm/compile_check.py and passed to the compiler
  // (__launch_bounds__): the register file must admit the occupancy LDS already allows, so
  // VGPR + AGPR <= 512 / waves_per_simd.
  constexpr int register_budget() const { return kRegsPerSimdLane / (waves_per_simd() > 0 ? waves_per_simd() : 1); }
};

// Tile shapes, largest first. BlockN divides kScaleBlockN so a tile's columns share one B scale.
inline constexpr TileShape kTiles[] = {
    {128, 128, 2, 2, MfmaKind::k16x16x32, 64},  // 0: large M and N (wave 64x64 = 4x4 MFMA 16x16: 16 A scales a lane, not 32)
    {64, 128, 2, 2, MfmaKind::k32x32x16, 64},   // 1: medium (wave 32x64)
    {64, 64, 2, 2, MfmaKind::k16x16x32, 128},   // 2: small (wave 32x32 = 2x2 MFMA 16x16)
    {32, 64, 2, 2, MfmaKind::k16x16x32, 128},   // 3: decode, M <= 32 (wave 16x32)
};
constexpr int kNumTiles = static_cast<int>(sizeof(kTiles) / sizeof(kTiles[0]));

// Storage order of both operands, a compile-time parameter: K-major (K contiguous in each row) or
// M/N-major (rows contiguous at each K: the AMD challenge layout). The launcher stages any other pair
// (mixed orders included) into a K-major copy.
enum class OperandMajor : int32_t { kK = 0, kMN = 1 };

// The other template parameters of a dense instance, besides its tile: [storage order][B scale format][fold].
constexpr int kNumOperandMajors = 2;  // OperandMajor::kK, kMN
constexpr int kNumScaleFormats = 2;   // ScaleFormat::kF32, kUE8M0: the B scales' format
constexpr int kNumFolds = 2;          // kFold false (both fnuz), true (some operand e4m3fn)

}  // namespace gemm::rocm
