// The gfx942 FP8 block-scaled GEMM kernel: one template, instantiated once per entry of kTiles
// (rocm_config.h).
//
// Hardware builtins used (the CPU emulator in tests/rocm implements exactly these):
//   __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8, __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8
// Language builtins (not target-specific): __builtin_bit_cast; _Float16 for fp16 conversion.
// No inline asm, no cross-lane builtins, no buffer loads: bounds are explicit predicates on plain
// 16-byte loads (see load_chunk), which the emulator executes unchanged.
//
// Per workgroup: a BlockM x BlockN tile of C over the K blocks of one split. Per 128-K stage:
//   global (16-byte loads, e4m3fn folded to fnuz in registers) -> LDS (XOR swizzle, 2 stages)
//   -> MFMA into a zeroed fp32 partial -> acc += partial * As[row] * Bs (promotion once per block).
// Operands are K-major: lane l of an MFMA reads 8 K-consecutive bytes of one row (cdna3 layout),
// so A [M, K] and B [N, K] rows are staged row by row, 128 bytes each.
#pragma once

#include <hip/hip_runtime.h>

#include <cstdint>

#include "cdna3_mfma_layout.h"
#include "gemm_launcher.h"
#include "rocm_config.h"

namespace gemm::rocm {

typedef uint32_t u32x4 __attribute__((ext_vector_type(4)));
typedef float f32x4 __attribute__((ext_vector_type(4)));
typedef float f32x16 __attribute__((ext_vector_type(16)));

constexpr int kChunkBytes = 16;                        // one global/LDS vector access
constexpr int kChunksPerRow = kBlockK / kChunkBytes;   // 8 chunks per 128-byte row of a stage
constexpr int kSwizzleRows = kChunksPerRow;            // rows r..r+7 spread one chunk column over all banks
constexpr int kOperandsPerChunk = kChunkBytes / cdna3::kFp8PerOperand;  // 2 MFMA steps per LDS read

// Everything a GEMM launch needs; pointers already resolved to K-major, 16-byte aligned rows.
struct KernelParams {
  const uint8_t* a;  // [m, k] K-major, row stride a_stride_m bytes (multiple of 16)
  int64_t a_stride_m;
  const uint8_t* b;  // [n, k] K-major
  int64_t b_stride_n;
  const float* a_scale;
  int64_t a_scale_stride_m, a_scale_stride_k;
  const float* b_scale;
  int64_t b_scale_stride_n, b_scale_stride_k;
  void* out;            // C, or the fp32 split-K workspace [split][m][n]
  int64_t out_stride_m;
  int64_t split_stride;  // elements between two splits' slices of the workspace (0 when unsplit)
  int64_t m, n, k;
  int32_t k_blocks_per_split;
  int32_t tiles_m, tiles_n, group_m;
  float scale_factor;   // 2 per e4m3fn operand: the same byte is worth twice as much in fn as in fnuz
  int32_t fold_fn_a, fold_fn_b;  // operand bytes are e4m3fn: fold to fnuz while staging
  OutFormat out_format;
};

// ---- MFMA selection -------------------------------------------------------------------------
template <MfmaKind kKind>
struct MfmaOp;

template <>
struct MfmaOp<MfmaKind::k32x32x16> {
  using Layout = cdna3::Mfma32x32x16;
  using Accum = f32x16;
  static __device__ __forceinline__ Accum run(long a, long b, Accum c) {
    return __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(a, b, c, 0, 0, 0);
  }
};

template <>
struct MfmaOp<MfmaKind::k16x16x32> {
  using Layout = cdna3::Mfma16x16x32;
  using Accum = f32x4;
  static __device__ __forceinline__ Accum run(long a, long b, Accum c) {
    return __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(a, b, c, 0, 0, 0);
  }
};

#ifdef GEMM_TEST_WRONG_LANE_MAP
// Test-only: a deliberately wrong result map (i <-> j inside each MFMA tile) so the emulation test
// proves it detects a lane-layout error.
template <class Layout>
struct LaneMap : Layout {
  static constexpr cdna3::MatPos d_of(int l, int e) {
    const cdna3::MatPos right = Layout::d_of(l, e);
    return {right.col, right.row};
  }
};
#else
template <class Layout>
struct LaneMap : Layout {};
#endif

// ---- Byte-level helpers ---------------------------------------------------------------------
// e4m3fn -> e4m3fnuz on four packed bytes without branches: fn -0 (0x80, the fnuz NaN) -> +0,
// fn NaN (0x7F / 0xFF) -> the fnuz NaN 0x80; every other byte is kept and read at half its fn value
// (the launcher doubles the scale). Per-byte sums below never carry into the next byte.
__device__ __forceinline__ uint32_t fold_e4m3fn_to_fnuz(uint32_t x) {
  constexpr uint32_t kSignBits = 0x80808080u, kMagnitude = 0x7F7F7F7Fu, kOnes = 0x01010101u, kByte = 0xFFu;
  const uint32_t magnitude = x & kMagnitude;
  const uint32_t zero = ~(magnitude + kMagnitude) & kSignBits;  // 0x80 where the magnitude is 0
  const uint32_t negative_zero = zero & x;
  const uint32_t nan = (magnitude + kOnes) & kSignBits;  // 0x80 where the magnitude is 0x7F
  x &= ~((negative_zero >> 7) * kByte);
  return (x & ~((nan >> 7) * kByte)) | nan;
}

__device__ __forceinline__ u32x4 fold_chunk(u32x4 v) {
  return u32x4{fold_e4m3fn_to_fnuz(v.x), fold_e4m3fn_to_fnuz(v.y), fold_e4m3fn_to_fnuz(v.z),
               fold_e4m3fn_to_fnuz(v.w)};
}

// 16 bytes of row `row` (of `rows`) at K offset k0 (a multiple of 16); zero for rows past the end.
// Branch-free per lane: an out-of-range row or chunk reads a clamped, valid address and a select
// zeroes it (mask_k_edge zeroes bytes past K). Rows start 16-byte aligned (the launcher stages any other
// layout), so the load is aligned; on the K edge it may read up to 15 bytes past the row's last
// element, which lie in the same 16-byte-aligned granule (so the same page) as that element.
__device__ __forceinline__ u32x4 load_chunk(const uint8_t* base, int64_t stride, int64_t row, int64_t rows,
                                            int64_t k0, int64_t k) {
  const int64_t last_chunk = (k - 1) / kChunkBytes * kChunkBytes;
  const int64_t safe_row = row < rows ? row : rows - 1;
  const int64_t safe_k0 = k0 < k ? k0 : last_chunk;
  const u32x4 v = *reinterpret_cast<const u32x4*>(base + safe_row * stride + safe_k0);
  return row < rows ? v : u32x4{0u, 0u, 0u, 0u};
}

// Zeroes the bytes of a chunk at K offset k0 that lie at or past K (only the ragged-K stage needs it).
__device__ __forceinline__ u32x4 mask_k_edge(u32x4 v, int64_t k0, int64_t k) {
  constexpr int kWordBytes = 4;
  const int64_t valid = k - k0;  // bytes of this chunk below K; <= 0 past the edge
  for (int word = 0; word < kChunkBytes / kWordBytes; ++word) {
    const int64_t keep = valid - word * kWordBytes;
    v[word] &= keep >= kWordBytes ? ~0u : keep <= 0 ? 0u : (1u << (8 * keep)) - 1u;
  }
  return v;
}

// The 8-byte MFMA operand `half` (0: low 8 bytes, 1: high 8 bytes) of a 16-byte LDS read.
__device__ __forceinline__ long operand(u32x4 v, int half) {
  const uint32_t lo = half == 0 ? v.x : v.z;
  const uint32_t hi = half == 0 ? v.y : v.w;
  return static_cast<long>((static_cast<uint64_t>(hi) << 32) | lo);
}

// fp32 -> bf16 with round-to-nearest-even; NaN stays NaN (quieted), infinities stay infinite.
__device__ __forceinline__ uint16_t to_bf16_bits(float f) {
  constexpr uint32_t kAbsMask = 0x7FFFFFFFu, kInfBits = 0x7F800000u, kQuietBit = 0x0040u, kRoundBias = 0x7FFFu;
  const uint32_t bits = __builtin_bit_cast(uint32_t, f);
  if ((bits & kAbsMask) > kInfBits) return static_cast<uint16_t>((bits >> 16) | kQuietBit);
  return static_cast<uint16_t>((bits + kRoundBias + ((bits >> 16) & 1u)) >> 16);
}

// One output element in the requested format (fp16: the IEEE conversion, round-to-nearest-even).
__device__ __forceinline__ void store_output(void* out, int64_t index, float value, OutFormat format) {
  if (format == OutFormat::kFP32)
    static_cast<float*>(out)[index] = value;
  else if (format == OutFormat::kBF16)
    static_cast<uint16_t*>(out)[index] = to_bf16_bits(value);
  else
    static_cast<uint16_t*>(out)[index] = __builtin_bit_cast(uint16_t, static_cast<_Float16>(value));
}

// LDS position of chunk `chunk` of stage row `row`: XOR swizzle, so the 8 rows read by 8 lanes at the
// same logical chunk land in 8 different 16-byte bank groups (128 bytes = all 32 banks).
__device__ __forceinline__ int lds_index(int row, int chunk) {
  return row * kChunksPerRow + (chunk ^ (row % kSwizzleRows));
}

// Grouped tile order: group_m tile rows sweep N together so their B tiles stay in L2.
struct TileCoord {
  int m, n;
};
__device__ __forceinline__ TileCoord swizzle_tile(int id, int tiles_m, int tiles_n, int group_m) {
  const int per_group = group_m * tiles_n;
  const int first_m = (id / per_group) * group_m;
  const int rows = tiles_m - first_m < group_m ? tiles_m - first_m : group_m;
  const int in_group = id % per_group;
  return {first_m + in_group % rows, in_group / rows};
}

// ---- The kernel -----------------------------------------------------------------------------
template <int kTileIndex>
__global__ __launch_bounds__(kTiles[kTileIndex].threads()) void gemm_fp8_kernel(KernelParams p) {
  constexpr TileShape kTile = kTiles[kTileIndex];
  using Op = MfmaOp<kTile.mfma>;
  using Layout = LaneMap<typename Op::Layout>;
  using Accum = typename Op::Accum;
  constexpr int kThreads = kTile.threads();
  constexpr int kWaveM = kTile.block_m / kTile.warps_m;
  constexpr int kWaveN = kTile.block_n / kTile.warps_n;
  constexpr int kSubM = kWaveM / Layout::kM;  // MFMA tiles per wave along M
  constexpr int kSubN = kWaveN / Layout::kN;
  constexpr int kSteps = kBlockK / Layout::kK;  // MFMAs per sub-tile per stage
  constexpr int kPairs = kSteps / kOperandsPerChunk;
  constexpr int kChunkGroups = Layout::kK / cdna3::kFp8PerOperand;  // K groups of 8 across a lane group
  constexpr int kLoadsA = kTile.block_m * kChunksPerRow / kThreads;
  constexpr int kLoadsB = kTile.block_n * kChunksPerRow / kThreads;
  static_assert(kWaveM % Layout::kM == 0 && kWaveN % Layout::kN == 0, "wave tile must hold whole MFMA tiles");
  static_assert(kLoadsA * kThreads == kTile.block_m * kChunksPerRow, "A stage must split evenly over threads");
  static_assert(kLoadsB * kThreads == kTile.block_n * kChunksPerRow, "B stage must split evenly over threads");
  static_assert(kScaleBlockN % kTile.block_n == 0, "a tile's columns must share one B scale block");
  static_assert(kSteps % kOperandsPerChunk == 0, "LDS reads cover MFMA steps in pairs");

  __shared__ u32x4 lds_a[kStages][kTile.block_m * kChunksPerRow];
  __shared__ u32x4 lds_b[kStages][kTile.block_n * kChunksPerRow];

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % cdna3::kWaveSize;
  const int wave = tid / cdna3::kWaveSize;
  const int wave_m = wave % kTile.warps_m;
  const int wave_n = wave / kTile.warps_m;

  const TileCoord tile = swizzle_tile(static_cast<int>(blockIdx.x), p.tiles_m, p.tiles_n, p.group_m);
  const int64_t m0 = static_cast<int64_t>(tile.m) * kTile.block_m;
  const int64_t n0 = static_cast<int64_t>(tile.n) * kTile.block_n;
  const int64_t k_blocks = ceil_div(p.k, kBlockK);
  const int64_t kb_begin = static_cast<int64_t>(blockIdx.z) * p.k_blocks_per_split;
  const int64_t kb_end = kb_begin + p.k_blocks_per_split < k_blocks ? kb_begin + p.k_blocks_per_split : k_blocks;

  // Global -> register staging of one stage: thread tid owns chunks tid, tid + kThreads, ...
  u32x4 staged_a[kLoadsA], staged_b[kLoadsB];
  auto load_stage = [&](int64_t kb) {
    const int64_t k0 = kb * kBlockK;
    for (int i = 0; i < kLoadsA; ++i) {
      const int chunk = tid + i * kThreads;
      staged_a[i] = load_chunk(p.a, p.a_stride_m, m0 + chunk / kChunksPerRow, p.m,
                               k0 + (chunk % kChunksPerRow) * kChunkBytes, p.k);
    }
    for (int i = 0; i < kLoadsB; ++i) {
      const int chunk = tid + i * kThreads;
      staged_b[i] = load_chunk(p.b, p.b_stride_n, n0 + chunk / kChunksPerRow, p.n,
                               k0 + (chunk % kChunksPerRow) * kChunkBytes, p.k);
    }
    // Rare cases under workgroup-uniform branches, once per stage: the ragged K block, fn operands.
    if (k0 + kBlockK > p.k) {
      for (int i = 0; i < kLoadsA; ++i)
        staged_a[i] = mask_k_edge(staged_a[i], k0 + ((tid + i * kThreads) % kChunksPerRow) * kChunkBytes, p.k);
      for (int i = 0; i < kLoadsB; ++i)
        staged_b[i] = mask_k_edge(staged_b[i], k0 + ((tid + i * kThreads) % kChunksPerRow) * kChunkBytes, p.k);
    }
    if (p.fold_fn_a)
      for (int i = 0; i < kLoadsA; ++i) staged_a[i] = fold_chunk(staged_a[i]);
    if (p.fold_fn_b)
      for (int i = 0; i < kLoadsB; ++i) staged_b[i] = fold_chunk(staged_b[i]);
  };
  auto store_stage = [&](int stage) {
    for (int i = 0; i < kLoadsA; ++i) {
      const int chunk = tid + i * kThreads;
      lds_a[stage][lds_index(chunk / kChunksPerRow, chunk % kChunksPerRow)] = staged_a[i];
    }
    for (int i = 0; i < kLoadsB; ++i) {
      const int chunk = tid + i * kThreads;
      lds_b[stage][lds_index(chunk / kChunksPerRow, chunk % kChunksPerRow)] = staged_b[i];
    }
  };

  // What this lane feeds the MFMAs (inverse operand maps) and which outputs it holds.
  const cdna3::MatPos a_pos = Layout::a_of(lane, 0);  // (row i, first k)
  const cdna3::MatPos b_pos = Layout::b_of(lane, 0);  // (first k, column j)
  const int a_group = a_pos.col / cdna3::kFp8PerOperand;
  const int b_group = b_pos.row / cdna3::kFp8PerOperand;

  Accum acc[kSubM][kSubN];
  for (int i = 0; i < kSubM; ++i)
    for (int j = 0; j < kSubN; ++j) acc[i][j] = Accum{};

  if (kb_begin < kb_end) {
    load_stage(kb_begin);
    store_stage(0);
  }
  __syncthreads();

  const float* b_scale_row = p.b_scale + (n0 / kScaleBlockN) * p.b_scale_stride_n;
  for (int64_t kb = kb_begin; kb < kb_end; ++kb) {
    const int stage = static_cast<int>((kb - kb_begin) % kStages);
    const bool has_next = kb + 1 < kb_end;
    if (has_next) load_stage(kb + 1);  // in flight while this stage's MFMAs run

    // Scales of this K block: one per accumulator row (As) and one per tile (Bs, uniform).
    float a_scale[kSubM][Layout::kAccum];
    for (int i = 0; i < kSubM; ++i)
      for (int e = 0; e < Layout::kAccum; ++e) {
        const int64_t row = m0 + wave_m * kWaveM + i * Layout::kM + Layout::d_of(lane, e).row;
        const float scale = p.a_scale[(row < p.m ? row : p.m - 1) * p.a_scale_stride_m + kb * p.a_scale_stride_k];
        a_scale[i][e] = row < p.m ? scale : 0.0f;  // clamped read + select: no branch per load
      }
    const float b_scale = b_scale_row[kb * p.b_scale_stride_k] * p.scale_factor;

    Accum partial[kSubM][kSubN];
    for (int i = 0; i < kSubM; ++i)
      for (int j = 0; j < kSubN; ++j) partial[i][j] = Accum{};
    for (int pair = 0; pair < kPairs; ++pair) {
      u32x4 a_frag[kSubM], b_frag[kSubN];
      for (int i = 0; i < kSubM; ++i)
        a_frag[i] = lds_a[stage][lds_index(wave_m * kWaveM + i * Layout::kM + a_pos.row, pair * kChunkGroups + a_group)];
      for (int j = 0; j < kSubN; ++j)
        b_frag[j] = lds_b[stage][lds_index(wave_n * kWaveN + j * Layout::kN + b_pos.col, pair * kChunkGroups + b_group)];
      for (int half = 0; half < kOperandsPerChunk; ++half)
        for (int i = 0; i < kSubM; ++i)
          for (int j = 0; j < kSubN; ++j)
            partial[i][j] = Op::run(operand(a_frag[i], half), operand(b_frag[j], half), partial[i][j]);
    }

    // Promotion: the fp32 partial of this 128-K block, scaled once, into the accumulator.
    for (int i = 0; i < kSubM; ++i)
      for (int j = 0; j < kSubN; ++j)
        for (int e = 0; e < Layout::kAccum; ++e) acc[i][j][e] += partial[i][j][e] * (a_scale[i][e] * b_scale);

    if (has_next) store_stage(stage ^ 1);  // the other buffer was last read before the previous barrier
    __syncthreads();
  }

  // Epilogue: each lane writes the outputs its accumulators hold (d_of), bounds-checked.
  for (int i = 0; i < kSubM; ++i)
    for (int j = 0; j < kSubN; ++j)
      for (int e = 0; e < Layout::kAccum; ++e) {
        const cdna3::MatPos d = Layout::d_of(lane, e);
        const int64_t row = m0 + wave_m * kWaveM + i * Layout::kM + d.row;
        const int64_t col = n0 + wave_n * kWaveN + j * Layout::kN + d.col;
        if (row < p.m && col < p.n)
          store_output(p.out, blockIdx.z * p.split_stride + row * p.out_stride_m + col, acc[i][j][e], p.out_format);
      }
}

}  // namespace gemm::rocm
