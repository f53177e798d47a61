// Format facts of the scale encodings (gemm_contract.h ScaleFormat) as the device reads and writes them.
#pragma once

#include <cstdint>

#include "../gemm_contract.h"

namespace gemm::cuda {

constexpr uint32_t kFloatExponentShift = 23;          // fp32: 1 sign, 8 exponent, 23 mantissa bits
constexpr uint32_t kFloatExponentMask = 0x7F800000u;
constexpr uint32_t kFloatMantissaMask = 0x007FFFFFu;
constexpr uint32_t kUe8m0Nan = 0xFFu;                 // e = 0xFF encodes NaN
constexpr uint32_t kFloatTwoPowMinus127 = 0x00400000u;  // 2^-127, e = 0: a subnormal float
constexpr uint32_t kFloatQuietNan = 0x7FC00000u;

// 2^(e - 127) exactly, for every byte e: the normal range is the exponent field itself; e = 0 (the
// subnormal 2^-127) and e = 0xFF (NaN) have no such field.
__device__ __forceinline__ float ue8m0_to_float(uint32_t e) {
  const uint32_t bits = e == 0 ? kFloatTwoPowMinus127 : e == kUe8m0Nan ? kFloatQuietNan : e << kFloatExponentShift;
  return __uint_as_float(bits);
}

// The least power of two >= s for a positive s (inf stays inf), by bit manipulation: exact where
// exp2(ceil(log2(s))) in floating point is not.
__device__ __forceinline__ float pow2_ceil(float s) {
  const uint32_t bits = __float_as_uint(s);
  const uint32_t exponent = bits & kFloatExponentMask;
  if (exponent == kFloatExponentMask) return s;
  if (exponent == 0) {  // subnormal: the mantissa is the value; round it up to one set bit
    return __popc(bits) == 1 ? s : __uint_as_float(1u << (32 - __clz(bits)));
  }
  return (bits & kFloatMantissaMask) == 0 ? s : __uint_as_float(exponent + (1u << kFloatExponentShift));
}

// The UE8M0 byte of a power of two s >= 2^-127 (inf, which UE8M0 cannot hold, gives the NaN byte).
__device__ __forceinline__ uint8_t pow2_to_ue8m0(float s) {
  const uint32_t bits = __float_as_uint(s);
  return static_cast<uint8_t>(bits == kFloatTwoPowMinus127 ? 0u : bits >> kFloatExponentShift);
}

// Scale i of an array in `kFormat`, as fp32.
template <ScaleFormat kFormat>
__device__ __forceinline__ float load_scale(const void* base, int64_t i) {
  if constexpr (kFormat == ScaleFormat::kUE8M0) {
    return ue8m0_to_float(__ldg(static_cast<const uint8_t*>(base) + i));
  } else {
    return static_cast<const float*>(base)[i];
  }
}

}  // namespace gemm::cuda
