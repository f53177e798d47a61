// Activation quantizer (gemm::quantize_launch on ROCm): x [m, k] bf16/fp16/fp32 -> FP8 q [m, k] and one
// scale per 1 x 128 group, in one pass over x. Numerics (the contract's, bit for bit):
//   s = amax / fp8_max (fp32 division; 1 when that is not > 0), rounded up to a power of two when asked
//   (or stored as UE8M0), or s = *static_scale; q = round-to-nearest-even(saturate(x / s)).
// The FP8 conversion is integer arithmetic (both e4m3fnuz and e4m3fn), so the emulator runs it as is.
#pragma once

#include <hip/hip_runtime.h>

#include <cstdint>

#include "gemm_contract.h"
#include "rocm_gemm_kernel.h"

namespace gemm::rocm {

constexpr int kQuantThreads = 256;
constexpr int kQuantPerThread = 8;                                    // elements of one group per lane
constexpr int kQuantLanesPerGroup = kScaleBlockK / kQuantPerThread;  // 16 lanes share a group's amax
constexpr int kQuantGroupsPerBlock = kQuantThreads / kQuantLanesPerGroup;
constexpr float kE4M3FnMax = 448.0f;    // OCP e4m3fn: 1.75 * 2^8
constexpr float kE4M3FnuzMax = 240.0f;  // e4m3fnuz: 1.875 * 2^7

struct QuantizeParams {
  const uint8_t* x;
  int64_t x_stride_m;  // elements
  InFormat x_format;
  int32_t x_vector;    // x and its row stride 16-byte aligned: a lane's 8 elements in 16-byte loads
  uint8_t* q;
  int64_t q_stride_m;
  int32_t q_fnuz;      // e4m3fnuz (bias 8, max 240) or e4m3fn (bias 7, max 448)
  int32_t q_vector;    // q and its row stride 8-byte aligned: a lane's 8 bytes in one store
  float fp8_max;
  void* scale;
  int64_t scale_stride_m, scale_stride_k;
  int32_t scale_ue8m0;
  int32_t pow2;        // round s up to a power of two (always for UE8M0)
  const float* static_scale;
  int64_t m, k, k_blocks;
};

typedef uint32_t u32x2 __attribute__((ext_vector_type(2)));

constexpr uint32_t kF32AbsMask = 0x7FFFFFFFu, kF32Inf = 0x7F800000u, kF32MinNormal = 0x00800000u;
constexpr uint32_t kF32Mantissa = 0x007FFFFFu, kF32ExponentMask = 0xFF800000u;
constexpr int kF32MantissaBits = 23, kF32Bias = 127;

// Element i of the 16 bytes `v` holds, as fp32 (8 bf16 / fp16 elements, or 4 fp32).
__device__ __forceinline__ float element_of(u32x4 v, int i, InFormat f) {
  const uint32_t word = v[i];  // __builtin_bit_cast of a vector element reads element 0 (clang-19)
  if (f == InFormat::kFP32) return __builtin_bit_cast(float, word);
  const uint32_t half = (v[i / 2] >> (16 * (i % 2))) & 0xFFFFu;
  if (f == InFormat::kBF16) return __builtin_bit_cast(float, half << 16);
  return static_cast<float>(__builtin_bit_cast(_Float16, static_cast<uint16_t>(half)));
}

__device__ __forceinline__ float load_element(const uint8_t* row, int64_t col, InFormat f) {
  if (f == InFormat::kFP32) return reinterpret_cast<const float*>(row)[col];
  const uint16_t bits = reinterpret_cast<const uint16_t*>(row)[col];
  if (f == InFormat::kBF16) return __builtin_bit_cast(float, static_cast<uint32_t>(bits) << 16);
  return static_cast<float>(__builtin_bit_cast(_Float16, bits));
}

// max(|a|, |b|) that keeps NaN, as torch.amax does.
__device__ __forceinline__ float nan_max(float a, float b) { return a > b || a != a ? a : b; }

// The smallest power of two >= s > 0, exactly (2^ceil(log2 s)); infinity and NaN stay as they are.
__device__ __forceinline__ float pow2_ceil(float s) {
  const uint32_t bits = __builtin_bit_cast(uint32_t, s);
  if (bits >= kF32Inf) return s;
  if (bits >= kF32MinNormal) return __builtin_bit_cast(float, (bits + kF32Mantissa) & kF32ExponentMask);
  return __builtin_bit_cast(float, bits <= 1u ? bits : 1u << (32 - __builtin_clz(bits - 1u)));  // subnormal
}

// The UE8M0 byte of a power of two s (below 2^-127: rounded up to 2^-127; infinity or NaN: 0xFF).
__device__ __forceinline__ uint32_t ue8m0_of(float pow2) {
  constexpr uint32_t kTwoToMinus127 = 0x00400000u, kNanByte = 0xFFu;
  const uint32_t bits = __builtin_bit_cast(uint32_t, pow2);
  if (bits >= kF32Inf) return kNanByte;
  return bits <= kTwoToMinus127 ? 0u : bits >> kF32MantissaBits;
}

// x >> shift rounded to nearest even (1 <= shift <= 31).
__device__ __forceinline__ uint32_t shift_right_rne(uint32_t x, int shift) {
  const uint32_t kept = x >> shift, rest = x & ((1u << shift) - 1u), half = 1u << (shift - 1);
  return kept + (rest > half || (rest == half && (kept & 1u)) ? 1u : 0u);
}

// fp32 -> e4m3 (fnuz: bias 8, no -0, NaN 0x80; fn: bias 7, NaN 0x7F | sign), round to nearest even.
// |v| <= the format's max (the caller saturates), so rounding never overflows.
__device__ __forceinline__ uint32_t to_e4m3(float v, bool fnuz) {
  constexpr int kMantissaBits = 3, kDropped = kF32MantissaBits - kMantissaBits, kMaxShift = 31;
  constexpr uint32_t kSignByte = 0x80u, kFnNan = 0x7Fu, kFnuzNan = 0x80u;
  const uint32_t bits = __builtin_bit_cast(uint32_t, v);
  const uint32_t sign = (bits >> 24) & kSignByte, a = bits & kF32AbsMask;
  if (a > kF32Inf) return fnuz ? kFnuzNan : sign | kFnNan;
  const int bias = fnuz ? 8 : 7;
  const int exponent = static_cast<int>(a >> kF32MantissaBits) - kF32Bias;
  uint32_t code;
  if (exponent >= 1 - bias) {  // normal: drop 20 mantissa bits; a carry moves into the exponent
    code = shift_right_rne(a, kDropped) - (static_cast<uint32_t>(kF32Bias - bias) << kMantissaBits);
  } else {  // subnormal (or zero): whole units of 2^(-bias - 2)
    const bool f32_subnormal = a < kF32MinNormal;  // a * 2^-149: exponent -126 without the implicit bit
    const uint32_t mantissa = f32_subnormal ? a : (a & kF32Mantissa) | kF32MinNormal;
    const int shift = kDropped + 1 - bias - (f32_subnormal ? 1 - kF32Bias : exponent);  // >= 21
    code = shift_right_rne(mantissa, shift < kMaxShift ? shift : kMaxShift);
  }
  return fnuz && code == 0 ? 0u : sign | code;
}

// One 1 x 128 group per 16 lanes; lane t of a group owns elements 8t .. 8t + 7.
__global__ __launch_bounds__(kQuantThreads) void quantize_fp8_kernel(QuantizeParams p) {
  __shared__ float lane_amax[kQuantThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % kQuantLanesPerGroup;
  const int64_t group = static_cast<int64_t>(blockIdx.x) * kQuantGroupsPerBlock + tid / kQuantLanesPerGroup;
  const bool live = group < p.m * p.k_blocks;
  const int64_t row = live ? group / p.k_blocks : 0;
  const int64_t kb = live ? group % p.k_blocks : 0;
  const int64_t col = kb * kScaleBlockK + lane * kQuantPerThread;
  const int64_t valid = live ? p.k - col : 0;  // elements of this lane inside x (8 or more: all)

  float v[kQuantPerThread];
  const int elem_bytes = p.x_format == InFormat::kFP32 ? 4 : 2;
  const uint8_t* x_row = p.x + row * p.x_stride_m * elem_bytes;
  if (p.x_vector && valid >= kQuantPerThread) {
    const u32x4* src = reinterpret_cast<const u32x4*>(x_row + col * elem_bytes);
    if (p.x_format == InFormat::kFP32) {
      const u32x4 lo = src[0], hi = src[1];
      for (int i = 0; i < kQuantPerThread / 2; ++i) {
        v[i] = element_of(lo, i, p.x_format);
        v[i + kQuantPerThread / 2] = element_of(hi, i, p.x_format);
      }
    } else {
      const u32x4 all = src[0];
      for (int i = 0; i < kQuantPerThread; ++i) v[i] = element_of(all, i, p.x_format);
    }
  } else {
    for (int i = 0; i < kQuantPerThread; ++i) v[i] = i < valid ? load_element(x_row, col + i, p.x_format) : 0.0f;
  }

  float s;
  if (p.static_scale != nullptr) {
    s = *p.static_scale;
  } else {
    float amax = 0.0f;
    for (int i = 0; i < kQuantPerThread; ++i) amax = nan_max(amax, __builtin_fabsf(v[i]));
    lane_amax[tid] = amax;
    __syncthreads();
    const int first = tid - lane;
    amax = lane_amax[first];
    for (int i = 1; i < kQuantLanesPerGroup; ++i) amax = nan_max(amax, lane_amax[first + i]);
    s = amax / p.fp8_max;
    s = s > 0.0f ? s : 1.0f;  // all-zero group (and NaN amax, as torch.where(s > 0, s, 1) does)
  }
  uint32_t s_byte = 0;
  if (p.pow2) s = pow2_ceil(s);
  if (p.scale_ue8m0) {
    // The byte holds 2^-127 at least; an inf scale is stored as the NaN byte but divides as inf, as
    // on the other backends.
    s_byte = ue8m0_of(s);
    const float floor = ue8m0_to_float(0);
    s = s > floor ? s : floor;
  }

  uint32_t out[kQuantPerThread];
  for (int i = 0; i < kQuantPerThread; ++i) {
    float y = v[i] / s;
    y = y > p.fp8_max ? p.fp8_max : y < -p.fp8_max ? -p.fp8_max : y;  // NaN passes
    out[i] = to_e4m3(y, p.q_fnuz);
  }
  uint8_t* q_row = p.q + row * p.q_stride_m;
  if (p.q_vector && valid >= kQuantPerThread) {
    u32x2 packed = {0u, 0u};
    for (int i = 0; i < kQuantPerThread; ++i) packed[i / 4] |= out[i] << (8 * (i % 4));
    *reinterpret_cast<u32x2*>(q_row + col) = packed;
  } else {
    for (int i = 0; i < kQuantPerThread; ++i)
      if (i < valid) q_row[col + i] = static_cast<uint8_t>(out[i]);
  }
  if (live && lane == 0) {
    const int64_t at = row * p.scale_stride_m + kb * p.scale_stride_k;
    if (p.scale_ue8m0)
      static_cast<uint8_t*>(p.scale)[at] = static_cast<uint8_t>(s_byte);
    else
      static_cast<float*>(p.scale)[at] = s;
  }
}

}  // namespace gemm::rocm
