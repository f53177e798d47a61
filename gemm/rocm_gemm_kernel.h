// The gfx942 FP8 block-scaled GEMM kernel: one template, instantiated per entry of kTiles
// (rocm_tile_configs.h), B scale format, dense/grouped, operand storage order and FP8 format (fnuz,
// or e4m3fn folded to fnuz): everything that changes the main loop's instructions is a compile-time
// parameter, so each instance has one straight-line main loop; shapes and strides are runtime values.
//
// Hardware builtins used (the CPU emulator in tests/rocm implements exactly these):
//   __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8, __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8,
//   __builtin_amdgcn_perm (v_perm_b32: the M/N-major byte transpose),
//   __builtin_amdgcn_readfirstlane (the tile's B scale, equal in every lane, into an SGPR),
//   __builtin_amdgcn_sched_group_barrier (scheduling only: interleaves loads, LDS writes and VALU with MFMAs)
// Language features (not target builtins): __builtin_bit_cast, _Float16 (fp16 output), clang
// ext_vector_type vectors, byte offsets into __shared__ arrays. No inline asm, no cross-lane builtins,
// no buffer loads: out-of-range rows/chunks read a clamped valid address and are zeroed by selects
// (keep_bytes), so the emulator executes the bounds logic unchanged. clang-19 accepts the buffer-load
// builtins for gfx942, but a wave-uniform buffer resource cannot bound a strided row's K tail, so the
// masks would be needed anyway.
//
// Per workgroup: a BlockM x BlockN tile of C over the K blocks of one split. A K block of 128 (one
// scale block) is staged in kBlockK / stage_k LDS stages:
//   global (16-byte loads K-major; 4-16-byte column loads M/N-major, transposed in registers with
//   v_perm_b32; e4m3fn folded to fnuz) -> registers, one stage ahead
//   -> LDS (rows of stage_k bytes, XOR swizzle: rocm_lds_layout.h; 2 buffers: stage s+1 is written
//   while stage s is read) -> MFMAs into an fp32 partial that the block's first MFMA starts from zero
//   -> acc += partial * As[row] * Bs (promotion once per block).
// An MFMA lane reads 8 K-consecutive bytes of one row (cdna3_mfma_layout.h); each lane reads 16 bytes
// per LDS access and feeds the low 8 to MFMA step 2p and the high 8 to step 2p+1. That permutes K
// inside the block identically for A and B, which leaves the block's dot products unchanged.
#pragma once

#include <hip/hip_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cdna3_mfma_layout.h"
#include "gemm_contract.h"
#include "rocm_lds_layout.h"
#include "rocm_tile_configs.h"
#include "rocm_tile_scheduler.h"

namespace gemm::rocm {

typedef uint32_t u32x4 __attribute__((ext_vector_type(4)));
typedef float f32x4 __attribute__((ext_vector_type(4)));
typedef float f32x16 __attribute__((ext_vector_type(16)));

// The largest operand stride the kernel reads in place: a tile's loads are a uniform base plus a
// 32-bit per-lane offset below (rows or K columns of a tile, at most 256) x stride.
constexpr int64_t kMaxOperandStride = (int64_t{1} << 32) / 256;

// One FP8 operand [rows, k] as the kernel reads it. The pointer and the stride are 16-byte aligned.
struct OperandView {
  const uint8_t* data;
  int64_t stride;      // bytes between rows (K-major) or between K columns (M/N-major)
  int64_t rows;
  uint32_t fold_mask;  // ~0u: bytes are e4m3fn, folded to e4m3fnuz while staging (instances with kFold)
};

// Everything a GEMM launch needs.
struct KernelParams {
  OperandView a;  // [m, k]
  OperandView b;  // [n, k]
  const float* a_scale;     // fp32, M-contiguous, 16-byte aligned columns: 4 rows per load
  int64_t a_scale_stride_k;
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
// [ends[g - 1], ends[g]) or, in the masked layout, [g * stride, g * stride + rows[g]), and multiplying
// them by its own B and B scales. tiles_m is the host's bound grouped_row_tiles() or
// num_groups * masked_group_tiles(); blocks find their group on the device (find_group_tile,
// find_masked_group_tile).
struct GroupedKernelParams : KernelParams {
  const int32_t* group_ends;     // [num_groups], inclusive ends of the row segments (device), or null
  const int32_t* group_rows;     // [num_groups], valid rows per block of the masked layout (device), or null
  int64_t group_row_stride;      // rows between two blocks of the masked layout
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

// Row tiles per group of the masked layout: BlockM-aligned tiles (as in the dense kernel, which keeps
// the 4-row A-scale loads aligned) overlapping a block of `stride` rows that starts anywhere; one more
// than ceil(stride / BlockM) unless BlockM divides the stride.
constexpr int64_t masked_group_tiles(int64_t stride, int block_m) {
  return ceil_div(stride, block_m) + (stride % block_m != 0 ? 1 : 0);
}

// Masked layout: row tile `tile_m` is tile tile_m % tiles_per_group of group tile_m / tiles_per_group
// (arithmetic and one uniform load); the group's rows are [g * stride, g * stride + rows[g]) with rows[g]
// clamped into [0, stride], so any count stays inside the group's block.
template <int kBlockM>
__device__ __forceinline__ GroupTile find_masked_group_tile(const int32_t* rows, int64_t stride, int tile_m) {
  const int tiles_per_group = static_cast<int>(masked_group_tiles(stride, kBlockM));  // the grid is int32
  const int32_t g = tile_m / tiles_per_group;
  const int64_t count = rows[g], begin = g * stride;
  const int64_t end = begin + (count < 0 ? 0 : count > stride ? stride : count);
  return {g, begin, end, (begin / kBlockM + tile_m % tiles_per_group) * kBlockM};
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

// The fold where `mask` is ~0u (an e4m3fn operand), the bytes unchanged where it is 0 (fnuz): one
// bitfield select, so an instance with kFold serves any mix of the two formats.
__device__ __forceinline__ uint32_t fold_where(uint32_t x, uint32_t mask) {
  return (fold_e4m3fn_to_fnuz(x) & mask) | (x & ~mask);
}

// Keeps the first `valid` bytes of a chunk (all when valid >= 16, none when valid <= 0), zeroes the
// rest: the ragged K edge of a K-major row. A chunk that starts inside the tensor may read up to 15
// bytes past its last element (K-major: past K; M/N-major: past the last row); they lie in the same
// 16-byte-aligned granule, hence the same page.
__device__ __forceinline__ u32x4 keep_bytes(u32x4 v, int64_t valid) {
  constexpr int kWordBytes = 4;
  const int bytes = valid >= kChunkBytes ? kChunkBytes : valid <= 0 ? 0 : static_cast<int>(valid);
#pragma unroll
  for (int word = 0; word < kChunkBytes / kWordBytes; ++word) {
    const int keep = bytes - word * kWordBytes;
    v[word] &= keep >= kWordBytes ? ~0u : keep <= 0 ? 0u : (1u << (8 * keep)) - 1u;
  }
  return v;
}

// The 8-byte MFMA operand `half` (0: low 8 bytes, 1: high 8 bytes) of a 16-byte LDS read.
typedef long i64x2 __attribute__((ext_vector_type(2)));
__device__ __forceinline__ long operand(u32x4 v, int half) { return __builtin_bit_cast(i64x2, v)[half]; }

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

// 4 K-columns of 4 rows (word i: the 4 rows' bytes at K column i) -> 4 rows of 4 K-consecutive bytes
// (word r: row r's bytes at K columns 0..3), with eight v_perm_b32. v_perm_b32's selector picks bytes
// of {hi:lo}: 0-3 from lo, 4-7 from hi.
constexpr int kTransposeBytes = 4;
__device__ __forceinline__ void transpose_4x4(const uint32_t* in, uint32_t (&out)[kTransposeBytes]) {
  constexpr uint32_t kInterleaveLow = 0x05010400u;   // lo.b0 hi.b0 lo.b1 hi.b1
  constexpr uint32_t kInterleaveHigh = 0x07030602u;  // lo.b2 hi.b2 lo.b3 hi.b3
  constexpr uint32_t kLowHalves = 0x05040100u;       // lo.b0 lo.b1 hi.b0 hi.b1
  constexpr uint32_t kHighHalves = 0x07060302u;      // lo.b2 lo.b3 hi.b2 hi.b3
  const uint32_t lo01 = __builtin_amdgcn_perm(in[1], in[0], kInterleaveLow);
  const uint32_t hi01 = __builtin_amdgcn_perm(in[1], in[0], kInterleaveHigh);
  const uint32_t lo23 = __builtin_amdgcn_perm(in[3], in[2], kInterleaveLow);
  const uint32_t hi23 = __builtin_amdgcn_perm(in[3], in[2], kInterleaveHigh);
  out[0] = __builtin_amdgcn_perm(lo23, lo01, kLowHalves);
  out[1] = __builtin_amdgcn_perm(lo23, lo01, kHighHalves);
  out[2] = __builtin_amdgcn_perm(hi23, hi01, kLowHalves);
  out[3] = __builtin_amdgcn_perm(hi23, hi01, kHighHalves);
}

// Stages one operand's [kRows, kStageK] stage from global memory into registers (load), then into
// LDS (store), with the thread-to-data map of StageAccess (rocm_lds_layout.h). The loads of stage
// s+1 are issued at the top of stage s and stored at its end, so they arrive behind stage s's
// MFMAs (a second register set would hide two stages but costs 16 VGPRs the 128x128 tile lacks for
// two waves per SIMD). load() only issues the loads; everything that
// consumes the data (K-edge zeroing, fn folding, transpose) runs in store(). kEdge: the stage may
// reach past K (the last K block, handled outside the main loop): columns are clamped into the
// tensor on load and zeroed on store. Rows past the end read a clamped row and are not zeroed: a row
// of A (B) only reaches the same row (column) of C, which the epilogue never writes.
template <int kRows, int kStageK, int kThreads, OperandMajor kMajor, bool kFold>
struct OperandStager {
  using Access = StageAccess<kRows, kStageK, kThreads>;
  static constexpr bool kMnMajor = kMajor == OperandMajor::kMN;
  static constexpr int kWords = (kMnMajor ? Access::kMnRows : kChunkBytes) / kTransposeBytes;  // per load
  static constexpr int kLoads = kMnMajor ? Access::kPieceK : Access::kChunks;  // M/N-major: one per K column
  typedef uint32_t Load __attribute__((ext_vector_type(kWords)));
  typedef uint32_t Piece __attribute__((ext_vector_type(Access::kPieceK / kTransposeBytes)));

  Load data[kLoads];
  // Addresses: a uniform base (the tile's first row, at K column 0) plus a 32-bit per-lane offset,
  // so every load is one global_load with an SGPR base (the launcher keeps tile_rows x stride below
  // 2^32: kMaxOperandStride). M/N-major: the offset of the first of the lane's columns; the others
  // follow at uniform multiples of the stride.
  const uint8_t* base;
  uint32_t lane_offset[kMnMajor ? 1 : kLoads];

  __device__ __forceinline__ void init(const OperandView& op, int64_t row0, int tid) {
    if constexpr (kMnMajor) {
      base = op.data + row0;
      const int64_t row = row0 + Access::mn_major_block(tid).row;
      const int64_t safe_row = row < op.rows ? row : (op.rows - 1) / Access::kMnRows * Access::kMnRows;
      lane_offset[0] = static_cast<uint32_t>(Access::mn_major_block(tid).k * op.stride + safe_row - row0);
    } else {
      base = op.data + row0 * op.stride;
#pragma unroll
      for (int i = 0; i < kLoads; ++i) {
        const int64_t row = row0 + Access::k_major_chunk(tid, i).row;
        const int64_t safe_row = row < op.rows ? row : op.rows - 1;
        lane_offset[i] = static_cast<uint32_t>((safe_row - row0) * op.stride + Access::k_major_chunk(tid, i).k);
      }
    }
  }

  template <bool kEdge>
  __device__ __forceinline__ void load(const OperandView& op, int64_t k0, int64_t k, int tid) {
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const uint8_t* column = base + (kMnMajor ? (k0 + i) * op.stride : k0);  // uniform
      const uint32_t offset = lane_offset[kMnMajor ? 0 : i];
      if constexpr (kEdge) {  // a column at or past K reads the last column (M/N-major) or chunk (K-major)
        int64_t back = 0;     // bytes the clamp moves the address back (64-bit: outside the main loop)
        if constexpr (kMnMajor) {
          const int64_t col = k0 + Access::mn_major_block(tid).k + i;
          back = col < k ? 0 : (col - (k - 1)) * op.stride;
        } else {
          const int64_t col = k0 + Access::k_major_chunk(tid, i).k;
          back = col < k ? 0 : col - (k - 1) / kChunkBytes * kChunkBytes;
        }
        data[i] = *reinterpret_cast<const Load*>(column + (static_cast<int64_t>(offset) - back));
      } else {
        data[i] = *reinterpret_cast<const Load*>(column + offset);
      }
    }
  }

  // The store is cut into kPieces pieces (K-major: one 16-byte chunk; M/N-major: the transpose and
  // four row pieces) that the kernel spreads between its MFMAs.
  static constexpr int kPieces = kMnMajor ? 1 : kLoads;

  template <bool kEdge>
  __device__ __forceinline__ void store_piece(int piece, uint8_t* lds, const OperandView& op, int64_t k0, int64_t k,
                                              int tid) {
    if constexpr (kMnMajor) {
      uint32_t column[kWords][kLoads];  // [4-row group][K column]
#pragma unroll
      for (int i = 0; i < kLoads; ++i)
#pragma unroll
        for (int g = 0; g < kWords; ++g) {
          uint32_t word = data[i][g];
          if constexpr (kEdge) word = k0 + Access::mn_major_block(tid).k + i < k ? word : 0u;
          if constexpr (kFold) word = fold_where(word, op.fold_mask);
          column[g][i] = word;
        }
      Piece rows[Access::kMnRows];
#pragma unroll
      for (int g = 0; g < kWords; ++g)
#pragma unroll
        for (int c = 0; c < kLoads / kTransposeBytes; ++c) {  // rows 4g .. 4g + 3, K columns 4c .. 4c + 3
          uint32_t four[kTransposeBytes];
          transpose_4x4(column[g] + c * kTransposeBytes, four);
#pragma unroll
          for (int r = 0; r < kTransposeBytes; ++r) rows[g * kTransposeBytes + r][c] = four[r];
        }
#pragma unroll
      for (int r = 0; r < Access::kMnRows; ++r)
        reinterpret_cast<Piece*>(lds)[Access::mn_major_write(tid, r) / Access::kPieceK] = rows[r];
    } else {
      u32x4 chunk = data[piece];
      if constexpr (kEdge) chunk = keep_bytes(chunk, k - (k0 + Access::k_major_chunk(tid, piece).k));
      if constexpr (kFold)
#pragma unroll
        for (int w = 0; w < kWords; ++w) chunk[w] = fold_where(chunk[w], op.fold_mask);
      reinterpret_cast<u32x4*>(lds)[Access::k_major_write(tid, piece) / kChunkBytes] = chunk;
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
// kBScale: how the B scales are stored (fp32, or UE8M0 bytes read as they are). A scales are fp32,
// M-contiguous (the launcher expands any other A scales first: see rocm_scale_kernel.h). kGrouped: the
// block's rows are one group's segment, with that group's B (GroupedKernelParams); rows outside it are
// never written. kMajor: both operands' storage order. kFold: some operand is e4m3fn (fold_mask).
template <int kTileIndex, ScaleFormat kBScale, bool kGrouped, OperandMajor kMajor, bool kFold>
__global__ __launch_bounds__(kTiles[kTileIndex].threads(), kTiles[kTileIndex].waves_per_simd()) void gemm_fp8_kernel(
    ParamsFor<kGrouped> p) {
  constexpr TileShape kTile = kTiles[kTileIndex];
  using Op = MfmaOp<kTile.mfma>;
  using Layout = LaneMap<typename Op::Layout>;
  using Accum = typename Op::Accum;
  constexpr int kThreads = kTile.threads();
  constexpr int kWaveM = kTile.block_m / kTile.warps_m;
  constexpr int kWaveN = kTile.block_n / kTile.warps_n;
  constexpr int kSubM = kWaveM / Layout::kM;  // MFMA tiles per wave along M
  constexpr int kSubN = kWaveN / Layout::kN;
  constexpr int kStageK = kTile.stage_k;
  constexpr int kStagesPerBlock = kBlockK / kStageK;
  using Fragment = FragmentAccess<Layout, kStageK>;
  constexpr int kPairs = Fragment::kPairs;  // ds_read_b128 per fragment per stage, 2 MFMA steps each
  constexpr int kOperandsPerRead = kChunkBytes / cdna3::kFp8PerOperand;
  static_assert(kWaveM % Layout::kM == 0 && kWaveN % Layout::kN == 0, "wave tile must hold whole MFMA tiles");
  static_assert(kScaleBlockN % kTile.block_n == 0, "a tile's columns must share one B scale block");
  static_assert(kStagesPerBlock * kStageK == kBlockK && kStages % kStagesPerBlock == 0,
                "a main-loop iteration (kStages stages) covers whole K blocks");
  static_assert(accum_rows_in_fours<typename Op::Layout>(), "A-scale vector loads need rows in fours");

  __shared__ u32x4 lds_a[kStages][kTile.block_m * kStageK / kChunkBytes];
  __shared__ u32x4 lds_b[kStages][kTile.block_n * kStageK / kChunkBytes];

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
    const GroupTile group = p.group_rows != nullptr
                                ? find_masked_group_tile<kTile.block_m>(p.group_rows, p.group_row_stride, work.m)
                                : find_group_tile<kTile.block_m>(p.group_ends, p.num_groups, p.m, work.m);
    if (group.row_begin >= group.row_end || group.m0 >= group.row_end) return;  // whole block: before any barrier
    m0 = group.m0, m_begin = group.row_begin, m_end = group.row_end;
    a_op.rows = m_end;  // A rows past the segment are never read
    b_op.data += group.group * p.b_stride_group;
    b_scale_base = static_cast<const typename ScaleElement<kBScale>::Stored*>(p.b_scale) + group.group * p.b_scale_stride_group;
  }
  // Per-lane LDS fragment offsets (16-byte units), loop-invariant.
  int a_read[kSubM][kPairs], b_read[kSubN][kPairs];
#pragma unroll
  for (int i = 0; i < kSubM; ++i)
#pragma unroll
    for (int pair = 0; pair < kPairs; ++pair)
      a_read[i][pair] = Fragment::a_read(lane, wave_m * kWaveM + i * Layout::kM, pair) / kChunkBytes;
#pragma unroll
  for (int j = 0; j < kSubN; ++j)
#pragma unroll
    for (int pair = 0; pair < kPairs; ++pair)
      b_read[j][pair] = Fragment::b_read(lane, wave_n * kWaveN + j * Layout::kN, pair) / kChunkBytes;

  // Scales of one K block, loaded at its first stage and used at its last. As: one value per
  // accumulator row, 4 rows per 16-byte load (rows past the block's rows read a clamped group: never
  // stored). Bs: each lane reads the scale of its own columns' block (one value per tile: the address
  // is per lane so that the load is a vector load, whose wait never drains the LDS counter).
  using BScale = ScaleElement<kBScale>;
  float a_scale[kSubM][Layout::kAccum];
  typename BScale::Raw b_scale_raw = 0;
  // Per-lane 32-bit offsets from uniform bases (the tile's first row, its columns' scale block).
  uint32_t a_scale_rows[kSubM][Layout::kAccum / kScalesPerLoad];
#pragma unroll
  for (int i = 0; i < kSubM; ++i)
#pragma unroll
    for (int e = 0; e < Layout::kAccum; e += kScalesPerLoad) {
      // The hardware layout's rows (Op::Layout, not LaneMap: the test-only wrong map must still load
      // aligned groups of four; its outputs land in the wrong places all the same).
      const int row = wave_m * kWaveM + i * Layout::kM + Op::Layout::d_of(lane, e).row;  // in the tile
      a_scale_rows[i][e / kScalesPerLoad] =
          static_cast<uint32_t>(row < m_end - m0 ? row : (m_end - 1) / kScalesPerLoad * kScalesPerLoad - m0);
    }
  const int lane_col = wave_n * kWaveN + Layout::d_of(lane, 0).col;  // in the tile
  const uint32_t b_scale_lane = static_cast<uint32_t>((n0 % kScaleBlockN + lane_col) / kScaleBlockN * p.b_scale_stride_n);
  const auto* b_scale_tile = static_cast<const typename BScale::Stored*>(b_scale_base) + (n0 / kScaleBlockN) * p.b_scale_stride_n;
  auto load_scales = [&](int64_t kb) __attribute__((always_inline)) {
    const float* a_scale_col = p.a_scale + kb * p.a_scale_stride_k + m0;  // uniform
#pragma unroll
    for (int i = 0; i < kSubM; ++i)
#pragma unroll
      for (int e = 0; e < Layout::kAccum; e += kScalesPerLoad) {
        const f32x4 v = *reinterpret_cast<const f32x4*>(a_scale_col + a_scale_rows[i][e / kScalesPerLoad]);
#pragma unroll
        for (int r = 0; r < kScalesPerLoad; ++r) a_scale[i][e + r] = v[r];
      }
    b_scale_raw = (b_scale_tile + kb * p.b_scale_stride_k)[b_scale_lane];
  };

  // Square M/N-major tiles: each half of the waves stages one operand (the first half A, the second
  // B; the choice is wave-uniform), 8-row columns of it a thread: half the column loads and address
  // arithmetic a thread of staging both operands in 4-row columns, for the same transposes and writes.
  constexpr int kStageThreads = kMajor == OperandMajor::kMN ? kTile.mn_major_stage_threads() : kThreads;
  constexpr bool kSplitStaging = kStageThreads < kThreads;
  using StagerA = OperandStager<kTile.block_m, kStageK, kStageThreads, kMajor, kFold>;
  using StagerB = OperandStager<kTile.block_n, kStageK, kThreads, kMajor, kFold>;  // unused when split
  StagerA stage_a;  // split: this wave's operand
  StagerB stage_b;
  const bool stages_b = kSplitStaging && __builtin_amdgcn_readfirstlane(tid) >= kStageThreads;
  const int stage_tid = tid % kStageThreads;
  const OperandView own_op = stages_b ? b_op : a_op;
  if constexpr (kSplitStaging) {
    stage_a.init(own_op, stages_b ? n0 : m0, stage_tid);
  } else {
    stage_a.init(a_op, m0, tid);
    stage_b.init(b_op, n0, tid);
  }
  // Stage s covers K [s * kStageK, (s + 1) * kStageK).
  auto load_stage = [&](auto edge, int64_t s) __attribute__((always_inline)) {
    if constexpr (kSplitStaging) {
      stage_a.template load<decltype(edge)::value>(own_op, s * kStageK, p.k, stage_tid);
    } else {
      stage_a.template load<decltype(edge)::value>(a_op, s * kStageK, p.k, tid);
      stage_b.template load<decltype(edge)::value>(b_op, s * kStageK, p.k, tid);
    }
  };
  // Piece `piece` of the LDS store of stage s into buffer `set` (A's pieces first, then B's).
  auto store_piece = [&](auto edge, int set, int64_t s, int piece) __attribute__((always_inline)) {
    constexpr bool kEdge = decltype(edge)::value;
    if (kSplitStaging)
      stage_a.template store_piece<kEdge>(
          piece, stages_b ? reinterpret_cast<uint8_t*>(lds_b[set]) : reinterpret_cast<uint8_t*>(lds_a[set]), own_op,
          s * kStageK, p.k, stage_tid);
    else if (piece < StagerA::kPieces)
      stage_a.template store_piece<kEdge>(piece, reinterpret_cast<uint8_t*>(lds_a[set]), a_op, s * kStageK, p.k, tid);
    else
      stage_b.template store_piece<kEdge>(piece - StagerA::kPieces, reinterpret_cast<uint8_t*>(lds_b[set]), b_op,
                                          s * kStageK, p.k, tid);
  };
  constexpr int kStorePieces = StagerA::kPieces + (kSplitStaging ? 0 : StagerB::kPieces);

  Accum acc[kSubM][kSubN], partial[kSubM][kSubN];
#pragma unroll
  for (int i = 0; i < kSubM; ++i)
#pragma unroll
    for (int j = 0; j < kSubN; ++j) acc[i][j] = Accum{};
  // Promotion of accumulator row i: the fp32 partial of this 128-K block, scaled once.
  // a_scale becomes As x Bs (x 2 per e4m3fn operand): the multiplier of each accumulator row.
  // Every lane loaded the same Bs (one per tile); readfirstlane keeps it in an SGPR, so that the
  // products never pair it with a VGPR that a pending load is about to write.
  auto apply_b_scale = [&]() __attribute__((always_inline)) {
    const float b_scale = __builtin_bit_cast(
        float, __builtin_amdgcn_readfirstlane(__builtin_bit_cast(int, BScale::value(b_scale_raw) * p.scale_factor)));
#pragma unroll
    for (int i = 0; i < kSubM; ++i)
#pragma unroll
      for (int e = 0; e < Layout::kAccum; ++e) a_scale[i][e] = a_scale[i][e] * b_scale;
  };
  // In pairs of elements: one v_pk_fma_f32 each (the same fused multiply-add per element).
  auto promote_with = [&](int i, const float (&multiplier)[Layout::kAccum]) __attribute__((always_inline)) {
    typedef float f32x2 __attribute__((ext_vector_type(2)));
#pragma unroll
    for (int j = 0; j < kSubN; ++j)
#pragma unroll
      for (int e = 0; e < Layout::kAccum; e += 2) {
        const f32x2 sum = f32x2{acc[i][j][e], acc[i][j][e + 1]} +
                          f32x2{partial[i][j][e], partial[i][j][e + 1]} * f32x2{multiplier[e], multiplier[e + 1]};
        acc[i][j][e] = sum.x;
        acc[i][j][e + 1] = sum.y;
      }
  };
  auto promote = [&](int i) __attribute__((always_inline)) { promote_with(i, a_scale[i]); };
  // M/N-major blocks of two stages (128x128: 4 MFMA rows): a block's last stage is issue-bound (its
  // store's transpose) while the next block's first stage waits for its loads with idle middle
  // slices, so the last kDeferredRows rows are promoted there, before that stage's first MFMAs into
  // them (their multipliers kept aside: the first stage loads the next block's A scales). K-major
  // keeps every row in its block (the kept multipliers would spill it).
  constexpr int kDeferredRows = kMajor == OperandMajor::kMN && kStagesPerBlock > 1 ? kSubM / 2 : 0;
  constexpr int kPromotedRows = kSubM - kDeferredRows;
  float deferred_scale[kDeferredRows > 0 ? kDeferredRows : 1][Layout::kAccum];
  auto promote_deferred = [&]() __attribute__((always_inline)) {
#pragma unroll
    for (int d = 0; d < kDeferredRows; ++d) promote_with(kPromotedRows + d, deferred_scale[d]);
  };

  // One stage (LDS buffer `set`, K-stage s). Every fragment of the stage is read at its top (one
  // ds_read_b128 each, fragment 0 last), so the stage's only LDS wait precedes its first MFMA. Its
  // MFMAs then run slice by slice (slice (pair, i): A fragment i at step pair `pair` against every B
  // fragment) in three scheduling regions, each MFMA followed by other instructions of its region:
  //  - load slices (the first half): the global loads of stage `next` (and the scale loads in a
  //    block's first stage), as early as the LDS wait allows;
  //  - middle slices: the scale combination and promotion of a block's last stage (accumulator row
  //    i once its last MFMA has issued, i.e. in the slice after its last one);
  //  - store slices (the last quarter, at least one): the LDS store of stage `next` into the other
  //    buffer (last read before the previous barrier), by when the loads have had most of the stage
  //    to arrive. The store's VALU work (M/N-major: the byte transpose) outnumbers what its MFMAs
  //    hide, and could not start earlier, so its region packs kStoreOtherPerMfma after each MFMA.
  // kEdge: `next` lies in the split's last K block, which may reach past K.
  constexpr int kSlices = kPairs * kSubM;
  constexpr int kStoreSlices = kSlices / 4 > 1 ? kSlices / 4 : 1;
  constexpr int kLoadSlices = kSlices / 2 < kSlices - kStoreSlices ? kSlices / 2 : kSlices - kStoreSlices;
  constexpr int kMfmasPerSlice = kOperandsPerRead * kSubN;
  static_assert(kLoadSlices >= 1, "a stage has a region for its loads and one for its stores");
  // sched_group_barrier masks (LLVM AMDGPU SchedGroupMask: 0x8 MFMA; 0x7F6 every other class: VALU,
  // SALU, VMEM, DS, TRANS) and how many other instructions one MFMA hides (a 16x16x32 occupies the
  // matrix pipe for 4 issue slots, a 32x32x16 for 8).
  constexpr int kSchedMfma = 0x8, kSchedOther = 0x7F6;
  constexpr int kOtherPerMfma = kTile.mfma == MfmaKind::k16x16x32 ? 3 : 7;
  constexpr int kStoreOtherPerMfma = 2 * kOtherPerMfma;
  auto interleave = [&](int mfmas, auto others_c) __attribute__((always_inline)) {
    for (int m = 0; m < mfmas; ++m) {
      __builtin_amdgcn_sched_group_barrier(kSchedMfma, 1, 0);
      __builtin_amdgcn_sched_group_barrier(kSchedOther, decltype(others_c)::value, 0);
    }
  };
  // carried_c: the previous block's deferred rows are still to be promoted (a first stage in the main loop).
  auto run_stage = [&](auto half_c, auto edge_c, auto carried_c, int set, int64_t s, int64_t next, bool has_next)
                       __attribute__((always_inline)) {
    constexpr int kHalf = decltype(half_c)::value;  // stage within its K block
    constexpr bool kCarried = decltype(carried_c)::value && kDeferredRows > 0;
    using Edge = std::integral_constant<bool, decltype(edge_c)::value>;
    constexpr bool kFirst = kHalf == 0, kLast = kHalf == kStagesPerBlock - 1;
    u32x4 b_frag[kSubN][kPairs], a_frag[kSlices];
#pragma unroll
    for (int pair = 0; pair < kPairs; ++pair)
#pragma unroll
      for (int j = 0; j < kSubN; ++j)
        if (pair + j > 0) b_frag[j][pair] = lds_b[set][b_read[j][pair]];
#pragma unroll
    for (int slice = 1; slice < kSlices; ++slice) a_frag[slice] = lds_a[set][a_read[slice % kSubM][slice / kSubM]];
    __builtin_amdgcn_sched_barrier(0);
    b_frag[0][0] = lds_b[set][b_read[0][0]];
    a_frag[0] = lds_a[set][a_read[0][0]];
    __builtin_amdgcn_sched_barrier(0);
    auto run_slice = [&](int slice) __attribute__((always_inline)) {
      const int pair = slice / kSubM, i = slice % kSubM;
#pragma unroll
      for (int half = 0; half < kOperandsPerRead; ++half)
#pragma unroll
        for (int j = 0; j < kSubN; ++j)  // a block's first MFMA into each partial starts from zero
          partial[i][j] = Op::run(operand(a_frag[slice], half), operand(b_frag[j][pair], half),
                                  kFirst && pair == 0 && half == 0 ? Accum{} : partial[i][j]);
      // the promotion of the row whose last MFMA the previous slice issued
      if (kLast && pair == kPairs - 1 && i > 0 && i - 1 < kPromotedRows) {
        if (kFirst && i == 1) apply_b_scale();
        promote(i - 1);
      }
    };
    using Other = std::integral_constant<int, kOtherPerMfma>;
    using StoreOther = std::integral_constant<int, kStoreOtherPerMfma>;
    // Global loads in the order they are waited for (they return in order): a one-stage block
    // promotes in the same stage, so its scales go first; a longer block's first stage stores the
    // next stage long before its last stage needs the scales.
    constexpr bool kScalesFirst = kFirst && kLast;
    if (kFirst && kScalesFirst) load_scales(s / kStagesPerBlock);
    if (has_next) load_stage(Edge{}, next);
    if (kFirst && !kScalesFirst) load_scales(s / kStagesPerBlock);
    // A block of several stages has its scales by its last stage: combined after that stage's loads
    // are issued (so they leave as soon as the LDS wait allows), before its first promotion.
    if (kLast && !kFirst) apply_b_scale();
#pragma unroll
    for (int slice = 0; slice < kLoadSlices; ++slice) run_slice(slice);
    interleave(kLoadSlices * kMfmasPerSlice, Other{});
    __builtin_amdgcn_sched_barrier(0);
    if constexpr (kCarried) promote_deferred();
#pragma unroll
    for (int slice = kLoadSlices; slice < kSlices - kStoreSlices; ++slice) run_slice(slice);
    interleave((kSlices - kStoreSlices - kLoadSlices) * kMfmasPerSlice, Other{});
    __builtin_amdgcn_sched_barrier(0);
#pragma unroll
    for (int slice = kSlices - kStoreSlices; slice < kSlices; ++slice) run_slice(slice);
    if (has_next)
#pragma unroll
      for (int piece = 0; piece < kStorePieces; ++piece) store_piece(Edge{}, set ^ 1, next, piece);
    if (kLast) {
      if (kFirst && kSubM == 1) apply_b_scale();
      if constexpr (kDeferredRows == 0) promote(kSubM - 1);
#pragma unroll
      for (int d = 0; d < kDeferredRows; ++d)
#pragma unroll
        for (int e = 0; e < Layout::kAccum; ++e) deferred_scale[d][e] = a_scale[kPromotedRows + d][e];
    }
    interleave(kStoreSlices * kMfmasPerSlice, StoreOther{});
    __builtin_amdgcn_sched_barrier(0);  // the stage's MFMAs stay before its barrier
    __syncthreads();
  };

  // The split's last K block (the only one that may reach past K) goes first, outside the main loop:
  // its stages load with clamped columns and store with K masked. Then the main loop runs the other
  // blocks in order with no runtime branch: its last stage loads and stores a harmless copy of
  // itself into the unused buffer instead of testing for a next stage. (Blocks are summed last block
  // first; each is still promoted once.)
  using Half0 = std::integral_constant<int, 0>;
  using HalfLast = std::integral_constant<int, kStagesPerBlock - 1>;
  const int64_t s_last = (kb_end - 1) * kStagesPerBlock;        // first stage of the last block
  const int64_t s_regular = kb_begin * kStagesPerBlock;         // first stage of the main loop
  const bool has_regular = kb_begin < kb_end - 1;
  if (kb_begin < kb_end) {
    load_stage(std::true_type{}, s_last);
#pragma unroll
    for (int piece = 0; piece < kStorePieces; ++piece) store_piece(std::true_type{}, 0, s_last, piece);
    __syncthreads();
    if constexpr (kStagesPerBlock == 2) {
      run_stage(Half0{}, std::true_type{}, std::false_type{}, 0, s_last, s_last + 1, true);
      run_stage(HalfLast{}, std::false_type{}, std::false_type{}, 1, s_last + 1, s_regular, has_regular);
    } else {
      run_stage(Half0{}, std::false_type{}, std::false_type{}, 0, s_last, s_regular, has_regular);
    }
  }
  // Main loop: one K block an iteration. Stage v of the split (the last block's stages first) lives
  // in LDS buffer v % 2.
  if constexpr (kStagesPerBlock == 2) {
    // Block and stage numbers in 32 bits (the launcher refuses K above 2^24): the clamp of the next stage
    // and the loop test are scalar instructions, where 64-bit compares are vector ones. (One-stage
    // tiles keep 64-bit numbers: their scale addresses then advance by induction, which costs less.)
    const int32_t s_final = static_cast<int32_t>(s_last - 1);  // the main loop's last stage
    for (int32_t kb = static_cast<int32_t>(kb_begin); kb < static_cast<int32_t>(kb_end) - 1; ++kb) {
      const int32_t s = kb * kStagesPerBlock;
      run_stage(Half0{}, std::false_type{}, std::true_type{}, 0, static_cast<uint32_t>(s), static_cast<uint32_t>(s + 1),
                true);
      run_stage(HalfLast{}, std::false_type{}, std::false_type{}, 1, static_cast<uint32_t>(s + 1),
                static_cast<uint32_t>(s + 2 < s_final ? s + 2 : s_final), true);
    }
  } else {
    const int64_t s_final = s_last - 1;  // the main loop's last stage
    for (int64_t kb = kb_begin; kb < kb_end - 1; ++kb) {
      const int64_t s = kb * kStagesPerBlock;
      const int set = static_cast<int>((kb - kb_begin + 1) % kStages);
      run_stage(Half0{}, std::false_type{}, std::false_type{}, set, s, s + 1 < s_final ? s + 1 : s_final, true);
    }
  }

  if (kDeferredRows > 0 && kb_begin < kb_end) promote_deferred();  // the last block's

  // Epilogue: each lane writes the outputs its accumulators hold (d_of), bounds-checked (tile-local
  // coordinates against the rows and columns left in the tensor).
  const int64_t rows_left = m_end - m0, cols_left = p.n - n0, rows_skipped = m_begin - m0;
  void* out_tile = p.out;
  const int64_t out_tile_index = blockIdx.z * p.split_stride + m0 * p.out_stride_m + n0;
#pragma unroll
  for (int i = 0; i < kSubM; ++i)
#pragma unroll
    for (int j = 0; j < kSubN; ++j)
#pragma unroll
      for (int e = 0; e < Layout::kAccum; ++e) {
        const cdna3::MatPos d = Layout::d_of(lane, e);
        const int row = wave_m * kWaveM + i * Layout::kM + d.row, col = wave_n * kWaveN + j * Layout::kN + d.col;
        if (row < rows_left && col < cols_left && (!kGrouped || row >= rows_skipped))
          store_output(out_tile, out_tile_index + row * p.out_stride_m + col, acc[i][j][e], p.out_format);
      }
}

}  // namespace gemm::rocm
