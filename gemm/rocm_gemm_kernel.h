// The gfx942 FP8 block-scaled GEMM kernel: one template, instantiated once per entry of kTiles
// (rocm_tile_configs.h); shapes, layouts and formats are runtime parameters of the same code.
//
// Hardware builtins used (the CPU emulator in tests/rocm implements exactly these):
//   __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8, __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8
// Language features (not target builtins): __builtin_bit_cast, _Float16 (fp16 output), clang
// ext_vector_type vectors (uint32 x4, float x4/x16, uint8 x1/2/4/8 row pieces), byte-level
// reinterpret_cast of __shared__ arrays. No inline asm, no cross-lane builtins, no buffer loads:
// out-of-range rows/chunks read a clamped valid address and are zeroed by selects (see load_chunk,
// keep_bytes), so the emulator executes the bounds logic unchanged. clang-19 accepts the buffer-load
// builtins for gfx942, but a wave-uniform buffer resource cannot bound a strided row's K tail, so the
// masks would be needed anyway.
//
// Per workgroup: a BlockM x BlockN tile of C over the K blocks of one split. Per 128-K stage (one
// scale block):
//   global (16-byte loads; M/N-major operands transposed in registers; e4m3fn folded to fnuz)
//   -> LDS (K-major rows of 128 bytes, XOR swizzle, 2 stages: the next stage loads during the MFMAs)
//   -> MFMAs into a zeroed fp32 partial -> acc += partial * As[row] * Bs (promotion once per block).
// An MFMA lane reads 8 K-consecutive bytes of one row (cdna3_mfma_layout.h); each lane reads 16 bytes
// per LDS access and feeds the low 8 to MFMA step 2p and the high 8 to step 2p+1. That permutes K
// inside the block identically for A and B, which leaves the block's dot products unchanged.
#pragma once

#include <hip/hip_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cdna3_mfma_layout.h"
#include "gemm_contract.h"
#include "rocm_tile_configs.h"
#include "rocm_tile_scheduler.h"

namespace gemm::rocm {

typedef uint32_t u32x4 __attribute__((ext_vector_type(4)));
typedef float f32x4 __attribute__((ext_vector_type(4)));
typedef float f32x16 __attribute__((ext_vector_type(16)));

constexpr int kChunkBytes = 16;                        // one global/LDS vector access
constexpr int kChunksPerRow = kBlockK / kChunkBytes;   // 8 chunks per 128-byte row of a stage
constexpr int kSwizzleRows = kChunksPerRow;            // rows r..r+7 spread one chunk column over all banks
constexpr int kOperandsPerChunk = kChunkBytes / cdna3::kFp8PerOperand;  // 2 MFMA steps per LDS read

// One FP8 operand [rows, k] as the kernel reads it: K-major (stride between rows, K contiguous) or
// M/N-major (stride between K columns, rows contiguous: the AMD challenge layout). The pointer and the
// stride are 16-byte aligned (the launcher stages anything else into a K-major copy).
struct OperandView {
  const uint8_t* data;
  int64_t stride;    // bytes between rows (K-major) or between K columns (M/N-major)
  int64_t rows;
  int32_t m_major;   // rows contiguous: staged through a register transpose
  int32_t fold_fn;   // bytes are e4m3fn: fold to e4m3fnuz while staging
};

// Everything a GEMM launch needs.
struct KernelParams {
  OperandView a;  // [m, k]
  OperandView b;  // [n, k]
  const float* a_scale;
  int64_t a_scale_stride_m, a_scale_stride_k;
  int32_t a_scale_vector;  // stride_m == 1 and 16-byte aligned columns: 4 rows per load (challenge layout)
  const void* b_scale;   // fp32 or UE8M0 (the kernel's template argument)
  int64_t b_scale_stride_n, b_scale_stride_k;
  void* out;            // C, or the fp32 split-K workspace [split][m][n]
  int64_t out_stride_m;
  int64_t split_stride;  // elements between two splits' slices of the workspace (0 when unsplit)
  int64_t m, n, k;
  TileSchedule schedule;  // which tile and K blocks each block computes (rocm_tile_scheduler.h)
  float scale_factor;   // 2 per e4m3fn operand: the same byte is worth twice as much in fn as in fnuz
  OutFormat out_format;
};

// A grouped launch (MoE experts): A's rows come in contiguous segments, group g owning rows
// [ends[g - 1], ends[g]) and multiplying them by its own B and B scales. tiles_m is the host's
// upper bound grouped_row_tiles(); blocks find their group on the device (find_group_tile).
struct GroupedKernelParams : KernelParams {
  const int32_t* group_ends;     // [num_groups], inclusive ends of the row segments (device)
  int32_t num_groups;
  int64_t b_stride_group;        // bytes between two groups' B
  int64_t b_scale_stride_group;  // scale elements between two groups' B scales
};

template <bool kGrouped>
using ParamsFor = std::conditional_t<kGrouped, GroupedKernelParams, KernelParams>;

// Row tiles of a grouped launch: group g's tiles are the BlockM-aligned tiles overlapping its rows,
// numbered from s_g / BlockM + g (s_g its first row). That numbering never overlaps between groups
// and stays below ceil(m / BlockM) + groups - 1, so the host sizes the grid without reading the ends.
constexpr int64_t grouped_row_tiles(int64_t m, int64_t groups, int block_m) { return ceil_div(m, block_m) + groups - 1; }

// First row of group g: the previous group's end, clamped into [0, m] (ends are documented
// non-decreasing and <= m; the clamp keeps any other input inside the tensors).
__device__ __forceinline__ int64_t group_begin(const int32_t* ends, int32_t g, int64_t m) {
  const int64_t end = g == 0 ? 0 : ends[g - 1];
  return end < 0 ? 0 : end > m ? m : end;
}

// The rows a grouped block may write ([row_begin, row_end): its group's rows) and its tile's first row.
struct GroupTile {
  int32_t group;
  int64_t row_begin, row_end, m0;
};

// Row tile `tile_m` belongs to the last group whose first tile index s_g / BlockM + g is <= tile_m
// (a binary search over the ends: ceil(log2 groups) uniform loads). The tile starts at row
// (tile_m - g) * BlockM, a multiple of BlockM as in the dense kernel; it holds none of the group's
// rows when the group is empty or the index lies in the gap after the group's last tile.
template <int kBlockM>
__device__ __forceinline__ GroupTile find_group_tile(const int32_t* ends, int32_t groups, int64_t m, int tile_m) {
  int32_t lo = 0, hi = groups;  // invariant: group lo's first tile index <= tile_m
  while (hi - lo > 1) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (group_begin(ends, mid, m) / kBlockM + mid <= tile_m)
      lo = mid;
    else
      hi = mid;
  }
  const int64_t begin = group_begin(ends, lo, m), end = group_begin(ends, lo + 1, m);
  return {lo, begin, end > begin ? end : begin, static_cast<int64_t>(tile_m - lo) * kBlockM};
}

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
  x &= ~((negative_zero >> 7) * kByte);  // 0x80 flag -> 0x01 -> 0xFF byte mask
  return (x & ~((nan >> 7) * kByte)) | nan;
}

__device__ __forceinline__ u32x4 fold_chunk(u32x4 v) {
  return u32x4{fold_e4m3fn_to_fnuz(v.x), fold_e4m3fn_to_fnuz(v.y), fold_e4m3fn_to_fnuz(v.z),
               fold_e4m3fn_to_fnuz(v.w)};
}

// One aligned 16-byte load at `offset` of `base`. Callers clamp out-of-range coordinates to a valid
// chunk (its bytes are then zeroed past K, or land in rows the epilogue never writes), so loads never
// branch per lane.
__device__ __forceinline__ u32x4 load_chunk(const uint8_t* base, int64_t offset) {
  return *reinterpret_cast<const u32x4*>(base + offset);
}

// Keeps the first `valid` bytes of a chunk (all when valid >= 16, none when valid <= 0), zeroes the
// rest: the ragged K edge of a K-major row. A chunk that starts inside the tensor may read up to 15
// bytes past its last element (K-major: past K; M/N-major: past the last row); they lie in the same
// 16-byte-aligned granule, hence the same page.
__device__ __forceinline__ u32x4 keep_bytes(u32x4 v, int64_t valid) {
  constexpr int kWordBytes = 4;
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

// LDS position of chunk `chunk` of stage row `row` (rows of 128 bytes = all 32 banks): XOR swizzle.
// MFMA reads: 8 consecutive rows (aligned) at one logical chunk hit 8 different chunk slots, so a
// 16-byte read by 8 lanes covers all banks. M/N-major staging writes 4-byte pieces of rows
// r, r+16, r+32, ... in one instruction; the row/16 term sends those to different slots too.
__device__ __forceinline__ int lds_index(int row, int chunk) {
  return row * kChunksPerRow + (chunk ^ ((row ^ (row / kChunkBytes)) % kSwizzleRows));
}

// Stages one operand tile [kRows, kBlockK] from global memory into registers, then into LDS.
// K-major: thread t owns 16-byte chunks t, t + kThreads, ... (row = chunk / 8): one LDS write each.
// M/N-major: thread t owns kLoads K-consecutive columns of 16 consecutive rows; the register
// transpose turns them into 16 row pieces of kLoads bytes, one LDS write each.
// load() only issues the global loads (addresses clamped into the tensor); everything that consumes
// the data (K-edge zeroing, fn folding, transpose) runs in store(), after the current stage's MFMAs,
// so the loads stay in flight meanwhile. Rows past the end are not zeroed: a row of A (B) only reaches
// the same row (column) of C, which the epilogue never writes.
template <int kRows, int kThreads>
struct OperandStager {
  static constexpr int kLoads = kRows * kChunksPerRow / kThreads;
  static constexpr int kRowGroups = kRows / kChunkBytes;  // M/N-major: 16-row groups along the tile
  static_assert(kLoads * kThreads == kRows * kChunksPerRow, "a stage must split evenly over the threads");
  static_assert(kLoads == 1 || kLoads == 2 || kLoads == 4 || kLoads == 8, "row pieces are 1, 2, 4 or 8 bytes");
  typedef uint8_t Piece __attribute__((ext_vector_type(kLoads)));

  u32x4 chunk[kLoads];

  __device__ __forceinline__ void load(const OperandView& op, int64_t row0, int64_t k0, int64_t k, int tid) {
    if (op.m_major) {
      const int64_t row = row0 + (tid % kRowGroups) * kChunkBytes;
      const int64_t safe_row = row < op.rows ? row : (op.rows - 1) / kChunkBytes * kChunkBytes;
      for (int i = 0; i < kLoads; ++i) {
        const int64_t col = k0 + (tid / kRowGroups) * kLoads + i;
        chunk[i] = load_chunk(op.data, (col < k ? col : k - 1) * op.stride + safe_row);
      }
    } else {
      const int64_t last_chunk = (k - 1) / kChunkBytes * kChunkBytes;
      for (int i = 0; i < kLoads; ++i) {
        const int c = tid + i * kThreads;
        const int64_t row = row0 + c / kChunksPerRow, col = k0 + (c % kChunksPerRow) * kChunkBytes;
        chunk[i] = load_chunk(op.data, (row < op.rows ? row : op.rows - 1) * op.stride + (col < k ? col : last_chunk));
      }
    }
  }

  __device__ __forceinline__ void store(u32x4* lds, const OperandView& op, int64_t k0, int64_t k, int tid) {
    if (k0 + kBlockK > k && op.m_major) {  // the ragged K block (uniform branches): zero all at or past K
      for (int i = 0; i < kLoads; ++i)
        chunk[i] = k0 + (tid / kRowGroups) * kLoads + i < k ? chunk[i] : u32x4{0u, 0u, 0u, 0u};
    } else if (k0 + kBlockK > k) {
      for (int i = 0; i < kLoads; ++i)
        chunk[i] = keep_bytes(chunk[i], k - (k0 + ((tid + i * kThreads) % kChunksPerRow) * kChunkBytes));
    }
    if (op.fold_fn)
      for (int i = 0; i < kLoads; ++i) chunk[i] = fold_chunk(chunk[i]);
    if (op.m_major) {
      const int row0 = (tid % kRowGroups) * kChunkBytes, col = (tid / kRowGroups) * kLoads;
      uint8_t* bytes = reinterpret_cast<uint8_t*>(lds);
      for (int r = 0; r < kChunkBytes; ++r) {
        Piece piece;
        for (int i = 0; i < kLoads; ++i) piece[i] = static_cast<uint8_t>(chunk[i][r / 4] >> (8 * (r % 4)));
        *reinterpret_cast<Piece*>(bytes + lds_index(row0 + r, col / kChunkBytes) * kChunkBytes + col % kChunkBytes) = piece;
      }
    } else {
      for (int i = 0; i < kLoads; ++i) {
        const int c = tid + i * kThreads;
        lds[lds_index(c / kChunksPerRow, c % kChunksPerRow)] = chunk[i];
      }
    }
  }
};

constexpr int kScalesPerLoad = 4;  // fp32 A scales in one 16-byte load

// A UE8M0 scale byte e is worth 2^(e - 127): e in [1, 254] is the fp32 exponent field as it is, e = 0
// the subnormal 2^-127, e = 0xFF NaN. Exact, so fp32 and UE8M0 scales of equal value give equal bits.
__device__ __forceinline__ float ue8m0_to_float(uint32_t e) {
  constexpr uint32_t kNanByte = 0xFFu, kQuietNan = 0x7FC00000u, kTwoToMinus127 = 0x00400000u;
  constexpr int kMantissaBits = 23;
  return __builtin_bit_cast(float, e == kNanByte ? kQuietNan : e == 0 ? kTwoToMinus127 : e << kMantissaBits);
}

// How the B scale tensor stores one multiplier (Stored), what a lane holds from the load until the
// next stage (Raw: the loaded bits as they are; a UE8M0 byte widened or decoded right after its load
// would make the MFMAs wait for it), and the fp32 value taken from it at the top of the next stage.
template <ScaleFormat kFormat>
struct ScaleElement {
  using Stored = float;
  using Raw = float;
  static __device__ __forceinline__ float value(Raw raw) { return raw; }
};
template <>
struct ScaleElement<ScaleFormat::kUE8M0> {
  using Stored = uint8_t;
  using Raw = uint8_t;
  static __device__ __forceinline__ float value(Raw raw) { return ue8m0_to_float(raw); }
};

// True when accumulator elements 4q..4q+3 of every lane hold 4 consecutive rows (both FP8 MFMA
// layouts do), so their 4 A scales are one 16-byte load when the scales are M-contiguous.
template <class Layout>
constexpr bool accum_rows_in_fours() {
  for (int lane = 0; lane < cdna3::kWaveSize; ++lane)
    for (int e = 0; e < Layout::kAccum; ++e)
      if (Layout::d_of(lane, e).row != Layout::d_of(lane, e / kScalesPerLoad * kScalesPerLoad).row + e % kScalesPerLoad)
        return false;
  return Layout::kAccum % kScalesPerLoad == 0;
}

// ---- The kernel -----------------------------------------------------------------------------
// kBScale: how the B scales are stored (fp32, or UE8M0 bytes read as they are). A scales are fp32 (the
// launcher expands UE8M0 A scales first: see rocm_scale_kernel.h). kGrouped: the block's rows are
// one group's segment, with that group's B (GroupedKernelParams); rows outside it are never written.
template <int kTileIndex, ScaleFormat kBScale, bool kGrouped>
__global__ __launch_bounds__(kTiles[kTileIndex].threads()) void gemm_fp8_kernel(ParamsFor<kGrouped> p) {
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
  static_assert(kWaveM % Layout::kM == 0 && kWaveN % Layout::kN == 0, "wave tile must hold whole MFMA tiles");
  static_assert(kScaleBlockN % kTile.block_n == 0, "a tile's columns must share one B scale block");
  static_assert(kSteps % kOperandsPerChunk == 0, "LDS reads cover MFMA steps in pairs");
  static_assert(accum_rows_in_fours<typename Op::Layout>(), "A-scale vector loads need rows in fours");

  __shared__ u32x4 lds_a[kStages][kTile.block_m * kChunksPerRow];
  __shared__ u32x4 lds_b[kStages][kTile.block_n * kChunksPerRow];

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % cdna3::kWaveSize;
  const int wave = tid / cdna3::kWaveSize;
  const int wave_m = wave % kTile.warps_m;
  const int wave_n = wave / kTile.warps_m;

  const int64_t k_blocks = ceil_div(p.k, kBlockK);
  const TileWork work = schedule_tile(p.schedule, static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.z), k_blocks);
  const int64_t kb_begin = work.kb_begin, kb_end = work.kb_end;
  int64_t m0 = static_cast<int64_t>(work.m) * kTile.block_m;
  const int64_t n0 = static_cast<int64_t>(work.n) * kTile.block_n;
  // Rows this block reads up to and writes: [m_begin, m_end), all of A when dense.
  int64_t m_begin = 0, m_end = p.m;
  OperandView a_op = p.a, b_op = p.b;
  const void* b_scale_base = p.b_scale;
  if constexpr (kGrouped) {
    const GroupTile group = find_group_tile<kTile.block_m>(p.group_ends, p.num_groups, p.m, work.m);
    if (group.row_begin >= group.row_end || group.m0 >= group.row_end) return;  // whole block: before any barrier
    m0 = group.m0, m_begin = group.row_begin, m_end = group.row_end;
    a_op.rows = m_end;  // A rows past the segment are never read
    b_op.data += group.group * p.b_stride_group;
    b_scale_base = static_cast<const typename ScaleElement<kBScale>::Stored*>(p.b_scale) + group.group * p.b_scale_stride_group;
  }
  // What this lane feeds the MFMAs (inverse operand maps) and which outputs it holds.
  const cdna3::MatPos a_pos = Layout::a_of(lane, 0);  // (row i, first k)
  const cdna3::MatPos b_pos = Layout::b_of(lane, 0);  // (first k, column j)
  const int a_group = a_pos.col / cdna3::kFp8PerOperand;
  const int b_group = b_pos.row / cdna3::kFp8PerOperand;

  // Global -> register staging of one stage and its scales, issued one stage ahead: the loads are in
  // flight while the previous stage's MFMAs run. As: one value per accumulator row (rows past M read
  // row M-1: never stored), Bs: one per tile.
  OperandStager<kTile.block_m, kThreads> stage_a;
  OperandStager<kTile.block_n, kThreads> stage_b;
  using BScale = ScaleElement<kBScale>;
  float a_scale_next[kSubM][Layout::kAccum];
  typename BScale::Raw b_scale_next = 0;
  const auto* b_scale_row = static_cast<const typename BScale::Stored*>(b_scale_base) + (n0 / kScaleBlockN) * p.b_scale_stride_n;
  // Scales first: any wait the compiler inserts for their registers (the two scale paths share them)
  // then precedes the operand loads instead of draining them before the MFMAs.
  auto load_stage = [&](int64_t kb) __attribute__((always_inline)) {
    const float* a_scale_col = p.a_scale + kb * p.a_scale_stride_k;
    if (p.a_scale_vector) {
#pragma unroll
      for (int i = 0; i < kSubM; ++i)
#pragma unroll
        for (int e = 0; e < Layout::kAccum; e += kScalesPerLoad) {
          const int64_t row = m0 + wave_m * kWaveM + i * Layout::kM + Layout::d_of(lane, e).row;
          const f32x4 v = *reinterpret_cast<const f32x4*>(a_scale_col + (row < m_end ? row : (m_end - 1) / kScalesPerLoad * kScalesPerLoad));
          for (int r = 0; r < kScalesPerLoad; ++r) a_scale_next[i][e + r] = v[r];
        }
    } else {
#pragma unroll
      for (int i = 0; i < kSubM; ++i)
#pragma unroll
        for (int e = 0; e < Layout::kAccum; ++e) {
          const int64_t row = m0 + wave_m * kWaveM + i * Layout::kM + Layout::d_of(lane, e).row;
          a_scale_next[i][e] = a_scale_col[(row < m_end ? row : m_end - 1) * p.a_scale_stride_m];
        }
    }
    b_scale_next = b_scale_row[kb * p.b_scale_stride_k];
    stage_a.load(a_op, m0, kb * kBlockK, p.k, tid);
    stage_b.load(b_op, n0, kb * kBlockK, p.k, tid);
  };
  auto store_stage = [&](int stage, int64_t kb) __attribute__((always_inline)) {
    stage_a.store(lds_a[stage], a_op, kb * kBlockK, p.k, tid);
    stage_b.store(lds_b[stage], b_op, kb * kBlockK, p.k, tid);
  };

  Accum acc[kSubM][kSubN];
  for (int i = 0; i < kSubM; ++i)
    for (int j = 0; j < kSubN; ++j) acc[i][j] = Accum{};

  if (kb_begin < kb_end) {
    load_stage(kb_begin);
    store_stage(0, kb_begin);
  }
  __syncthreads();

  for (int64_t kb = kb_begin; kb < kb_end; ++kb) {
    const int stage = static_cast<int>((kb - kb_begin) % kStages);
    const bool has_next = kb + 1 < kb_end;
    float a_scale[kSubM][Layout::kAccum];
#pragma unroll
    for (int i = 0; i < kSubM; ++i)
#pragma unroll
      for (int e = 0; e < Layout::kAccum; ++e) a_scale[i][e] = a_scale_next[i][e];
    const float b_scale = BScale::value(b_scale_next) * p.scale_factor;
    if (has_next) load_stage(kb + 1);

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

    if (has_next) store_stage(stage ^ 1, kb + 1);  // the other buffer was last read before the previous barrier
    __syncthreads();
  }

  // Epilogue: each lane writes the outputs its accumulators hold (d_of), bounds-checked.
  for (int i = 0; i < kSubM; ++i)
    for (int j = 0; j < kSubN; ++j)
      for (int e = 0; e < Layout::kAccum; ++e) {
        const cdna3::MatPos d = Layout::d_of(lane, e);
        const int64_t row = m0 + wave_m * kWaveM + i * Layout::kM + d.row;
        const int64_t col = n0 + wave_n * kWaveN + j * Layout::kN + d.col;
        if (row < m_end && col < p.n && (!kGrouped || row >= m_begin))
          store_output(p.out, blockIdx.z * p.split_stride + row * p.out_stride_m + col, acc[i][j][e], p.out_format);
      }
}

}  // namespace gemm::rocm
