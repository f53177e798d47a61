// The activation quantizer (gemm_contract.h QuantizeArgs): x [M, K] bf16/fp16/fp32 -> e4m3fn q [M, K] and
// one scale per 1 x 128 group, in one pass over x.
//  - half a warp quantizes a group: each of its 16 lanes loads 8 consecutive elements (one 16-byte load for
//    16-bit inputs, two for fp32), the lanes' |x| maxima meet by shuffles, and each lane stores its 8 FP8
//    bytes as one 8-byte word; a warp takes two adjacent groups of a row, so it reads 512 or 1024
//    contiguous bytes. Bandwidth-bound: the arithmetic is a few instructions per byte loaded;
//  - numerics are the contract's, bit for bit the Python reference's: s = amax / 448 in fp32 (IEEE
//    division), 1 for an all-zero group, optionally the least power of two >= s (exact, by bits), and
//    q = x / s in fp32 rounded to nearest even with saturation to +-448 (cvt .satfinite). The division
//    by the group's s is one multiply by 1/s and one correction (quotient_rn below), three instructions
//    an element where IEEE division takes about ten, which kept the kernel short of DRAM bandwidth;
//  - a warp finds its row and groups by a multiply-shift (TaskDivider), not a 64-bit division;
//  - ragged K reads zeros past the row (the last group is zero-padded); misaligned rows take the
//    element-wise loads and stores.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "../gemm_contract.h"
#include "hopper_layout.h"
#include "hopper_ptx.h"
#include "scale_formats.h"

namespace gemm::cuda {

constexpr int kQuantGroup = static_cast<int>(kScaleBlockK);
constexpr int kQuantElemsPerLane = 8;  // 16 bytes of a 16-bit input; one 8-byte store of FP8
constexpr int kQuantLanesPerGroup = kQuantGroup / kQuantElemsPerLane;
constexpr int kQuantGroupsPerWarp = hopper::kWarpSize / kQuantLanesPerGroup;
constexpr int kQuantThreads = 256;
constexpr int kQuantWarpsPerBlock = kQuantThreads / hopper::kWarpSize;
constexpr int kQuantVecBytes = 16;                      // the load width
constexpr int kQuantStoreBytes = kQuantElemsPerLane;    // one FP8 byte per element
constexpr float kE4m3fnMax = 448.0f;
static_assert(kQuantLanesPerGroup * kQuantGroupsPerWarp == hopper::kWarpSize, "whole groups per warp");

// n / d for every 32-bit n by a multiply-high and a shift (round-up method: magic = 2^32 (2^l - d) / d
// + 1 with l = ceil(log2 d)), for a divisor fixed at launch.
struct TaskDivider {
  uint32_t magic = 0, shift = 0;
  TaskDivider() = default;
  explicit TaskDivider(uint32_t d) {
    while ((uint64_t{1} << shift) < d) ++shift;
    magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  __device__ __forceinline__ uint32_t div(uint32_t n) const {
    return static_cast<uint32_t>((static_cast<uint64_t>(__umulhi(n, magic)) + n) >> shift);
  }
};

// What the launcher derives from QuantizeArgs.
struct QuantizeParams {
  QuantizeArgs args;
  int64_t groups = 0;         // per row: ceil(k / kQuantGroup)
  int64_t warps_per_row = 0;  // ceil(groups / kQuantGroupsPerWarp)
  int64_t tasks = 0;          // m * warps_per_row
  TaskDivider per_row;        // divides a task index by warps_per_row where tasks < 2^32
  bool vector_loads = false;  // x's base and row stride are 16-byte aligned
  bool vector_stores = false; // q's base and row stride are 8-byte aligned
  // Whether a GEMM behind may launch at once (else as the blocks finish): quantizer_lets_gemm_start_early().
  bool early_dependents = true;
};

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

// Elements c0 .. c0 + 7 of a row as fp32, zero past k.
template <typename T>
__device__ __forceinline__ void load_chunk(const T* __restrict__ row, int64_t c0, int64_t k, bool vector_loads,
                                           float (&v)[kQuantElemsPerLane]) {
  constexpr int kElemsPerVec = kQuantVecBytes / static_cast<int>(sizeof(T));
  if (vector_loads && c0 + kQuantElemsPerLane <= k) {
#pragma unroll
    for (int i = 0; i < kQuantElemsPerLane; i += kElemsPerVec) {
      const uint4 raw = __ldg(reinterpret_cast<const uint4*>(row + c0 + i));
      const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int j = 0; j < kElemsPerVec; ++j) v[i + j] = to_float(e[j]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < kQuantElemsPerLane; ++i) v[i] = c0 + i < k ? to_float(row[c0 + i]) : 0.f;
  }
}

// max that propagates NaN (as torch's amax does; fmaxf drops it).
__device__ __forceinline__ float max_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

// The group's scale from its amax (or the static scale), rounded as the arguments ask.
__device__ __forceinline__ float group_scale(float amax, const QuantizeArgs& a) {
  float s;
  if (a.static_scale != nullptr) {
    s = *a.static_scale;
  } else {
    s = amax / kE4m3fnMax;
    s = s > 0.f ? s : 1.f;  // all-zero group (and NaN, as the reference's where(s > 0, s, 1))
  }
  if (a.scale_format == ScaleFormat::kUE8M0) {
    // The least power of two UE8M0 holds (2^-127) bounds it from below.
    return fmaxf(pow2_ceil(s), __uint_as_float(kFloatTwoPowMinus127));
  }
  return a.pow2_scale ? pow2_ceil(s) : s;
}

// Groups for which the multiply-and-correct division gives the e4m3 code of the IEEE quotient: a scale
// whose reciprocal is normal, and a finite amax at most 2^64 scales (so no inf or NaN, and no quotient
// that overflows, which a static scale allows). Then every |x| >= 2^-60 has a normal quotient and
// remainder, and a smaller x a quotient below 2^-20, a zero of x's sign in e4m3 however it rounds.
constexpr float kQuotientMinScale = 0x1p-40f, kQuotientMaxScale = 0x1p40f, kQuotientMaxRatio = 0x1p64f;

// RN(x / s) from r = RN(1 / s) for s in [kQuotientMinScale, kQuotientMaxScale]: q0 = RN(x r) is within an
// ulp of x / s, the remainder x - q0 s is exact in one fma, and RN(q0 + (x - q0 s) r) is the correctly
// rounded quotient (Markstein). The remainder is taken negated so that a zero x keeps its sign.
__device__ __forceinline__ float quotient_rn(float x, float s, float r) {
  const float q0 = x * r;
  const float neg_rem = fmaf(q0, s, -x);
  return fmaf(-neg_rem, r, q0);
}

// Grid: 1-D, striding over warp tasks (a row's pair of adjacent groups).
template <typename T>
__global__ void __launch_bounds__(kQuantThreads) quantize_kernel(const QuantizeParams p) {
  // A GEMM behind it is its programmatic dependent: let it start its prologue now, or after this block's
  // work (it waits for this grid to complete before it reads q or the scales either way).
  if (p.early_dependents) ptx::launch_dependents();
  const QuantizeArgs& a = p.args;
  const int lane = static_cast<int>(threadIdx.x % hopper::kWarpSize);
  const int half = lane / kQuantLanesPerGroup;
  const int sub = lane % kQuantLanesPerGroup;
  const int64_t warp0 = static_cast<int64_t>(blockIdx.x) * kQuantWarpsPerBlock + threadIdx.x / hopper::kWarpSize;
  const int64_t warp_stride = static_cast<int64_t>(gridDim.x) * kQuantWarpsPerBlock;
  for (int64_t task = warp0; task < p.tasks; task += warp_stride) {
    const int64_t r = p.tasks <= UINT32_MAX ? p.per_row.div(static_cast<uint32_t>(task)) : task / p.warps_per_row;
    const int64_t g = (task - r * p.warps_per_row) * kQuantGroupsPerWarp + half;
    const int64_t c0 = g * kQuantGroup + sub * kQuantElemsPerLane;
    float v[kQuantElemsPerLane];
    // A half-warp past the last group loads nothing (c0 >= k) but takes part in the shuffles.
    load_chunk(static_cast<const T*>(a.x) + r * a.x_stride_m, c0, a.k, p.vector_loads, v);
    float amax = 0.f;
#pragma unroll
    for (int i = 0; i < kQuantElemsPerLane; ++i) amax = max_nan(amax, fabsf(v[i]));
#pragma unroll
    for (int off = kQuantLanesPerGroup / 2; off > 0; off /= 2) {
      amax = max_nan(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    }
    if (g >= p.groups) continue;
    const float s = group_scale(amax, a);
    if (s >= kQuotientMinScale && s <= kQuotientMaxScale && amax <= s * kQuotientMaxRatio) {
      const float rcp = __frcp_rn(s);
#pragma unroll
      for (int i = 0; i < kQuantElemsPerLane; ++i) v[i] = quotient_rn(v[i], s, rcp);
    } else {
#pragma unroll
      for (int i = 0; i < kQuantElemsPerLane; ++i) v[i] = v[i] / s;
    }
    uint32_t words[kQuantElemsPerLane / 4];
#pragma unroll
    for (int i = 0; i < kQuantElemsPerLane; i += 4) {
      const __nv_fp8x2_storage_t lo =
          __nv_cvt_float2_to_fp8x2(make_float2(v[i], v[i + 1]), __NV_SATFINITE, __NV_E4M3);
      const __nv_fp8x2_storage_t hi =
          __nv_cvt_float2_to_fp8x2(make_float2(v[i + 2], v[i + 3]), __NV_SATFINITE, __NV_E4M3);
      words[i / 4] = static_cast<uint32_t>(lo) | static_cast<uint32_t>(hi) << 16;
    }
    uint8_t* q_row = static_cast<uint8_t*>(a.q) + r * a.q_stride_m;
    if (p.vector_stores && c0 + kQuantElemsPerLane <= a.k) {
      *reinterpret_cast<uint2*>(q_row + c0) = make_uint2(words[0], words[1]);
    } else {
#pragma unroll
      for (int i = 0; i < kQuantElemsPerLane; ++i) {
        if (c0 + i < a.k) q_row[c0 + i] = static_cast<uint8_t>(words[i / 4] >> (8 * (i % 4)));
      }
    }
    if (sub == 0) {
      const int64_t at = r * a.scale_stride_m + g * a.scale_stride_k;
      if (a.scale_format == ScaleFormat::kUE8M0) {
        static_cast<uint8_t*>(a.scale)[at] = pow2_to_ue8m0(s);
      } else {
        static_cast<float*>(a.scale)[at] = s;
      }
    }
  }
  if (!p.early_dependents) ptx::launch_dependents();
}

}  // namespace gemm::cuda
