// The CPU activation quantizer (QuantizeArgs in ../gemm_contract.h): per 1 x 128 group, one vector
// pass for amax and one for divide, saturate and encode, both reading the bf16/fp16/fp32 inputs
// where they are (no fp32 copy of the activations).
//
// Numerics (torch-ext/gemm/_quant.py's recipe, bit for bit): amax in fp32 (NaN wins), s = amax / max
// in fp32 (1 when not > 0), rounded up to a power of two when asked (and to at least 2^-127 for
// UE8M0, its smallest value); q = round_to_nearest_even(clamp(x / s, -max, max)).
//
// Generic over the vector ISA (x86_vector_isa.h), instantiated by the launcher like the GEMM kernel.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "../gemm_contract.h"
#include "fp8_formats.h"
#include "tile_configs.h"
#include "x86_vector_isa.h"

namespace gemm::cpu {

template <InFormat kIn>
constexpr int64_t kInBytes = kIn == InFormat::kFP32 ? 4 : 2;

// kLanes inputs from `src` as fp32 lanes.
template <class Isa, InFormat kIn>
inline typename VectorTypes<Isa>::Float load_inputs(const uint8_t* src) {
  using V = VectorTypes<Isa>;
  if constexpr (kIn == InFormat::kFP32) {
    typename V::Float values;
    std::memcpy(&values, src, sizeof(values));
    return values;
  } else {
    const auto half_bits = (typename V::Int)Isa::widen_halves(reinterpret_cast<const uint16_t*>(src));
    if constexpr (kIn == InFormat::kBF16)
      return decode_bf16_vector<typename V::Float>(half_bits);
    else
      return decode_fp16_vector<typename V::Float>(half_bits);
  }
}

// The same for the `valid` < kLanes inputs at the end of a group: zeros in the other lanes.
template <class Isa, InFormat kIn>
inline typename VectorTypes<Isa>::Float load_inputs(const uint8_t* src, int64_t valid) {
  constexpr int kLanes = VectorTypes<Isa>::kLanes;
  if (valid >= kLanes) return load_inputs<Isa, kIn>(src);
  uint8_t padded[kLanes * kInBytes<kIn>] = {};
  std::memcpy(padded, src, valid * kInBytes<kIn>);
  return load_inputs<Isa, kIn>(padded);
}

// Largest |x| of a group as fp32 bits: magnitudes compare as integers, and NaN's are the largest.
template <class Isa, InFormat kIn>
inline float group_amax(const uint8_t* x, int64_t k_len) {
  using V = VectorTypes<Isa>;
  constexpr int32_t kAbsMask = 0x7FFFFFFF;
  typename V::Int amax = {};
  for (int64_t k = 0; k < k_len; k += V::kLanes) {
    const auto magnitude = (typename V::Int)load_inputs<Isa, kIn>(x + k * kInBytes<kIn>, k_len - k) & kAbsMask;
    amax = amax > magnitude ? amax : magnitude;
  }
  int32_t bits = 0;
  for (int lane = 0; lane < V::kLanes; ++lane) bits = std::max(bits, amax[lane]);
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

inline float dynamic_scale(float amax, const QuantizeArgs& args, const Fp8Encoder& encoder) {
  const float s = amax / encoder.max;
  // An all-zero group would divide 0 by 0; any positive scale quantizes it to zeros (a NaN amax
  // lands here too, as with torch.where(s > 0, s, 1)).
  const float positive = s > 0.0f ? s : 1.0f;
  if (args.scale_format == ScaleFormat::kUE8M0) return std::max(ceil_pow2(positive), kUe8m0Min);
  return args.pow2_scale ? ceil_pow2(positive) : positive;
}

// Rows [row_begin, row_end) of the quantizer.
template <class Isa, InFormat kIn>
inline void quantize_rows(const QuantizeArgs& args, const Fp8Encoder& encoder, int64_t row_begin,
                          int64_t row_end) {
  using V = VectorTypes<Isa>;
  constexpr int kLanes = V::kLanes;
  const int64_t k_blocks = ceil_div(args.k, kScaleBlockK);
  for (int64_t row = row_begin; row < row_end; ++row) {
    const auto* x_row = static_cast<const uint8_t*>(args.x) + row * args.x_stride_m * kInBytes<kIn>;
    uint8_t* q_row = static_cast<uint8_t*>(args.q) + row * args.q_stride_m;
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      const int64_t k_begin = kb * kScaleBlockK;
      const int64_t k_len = std::min(kScaleBlockK, args.k - k_begin);
      const uint8_t* x = x_row + k_begin * kInBytes<kIn>;
      const float s = args.static_scale != nullptr
                          ? *args.static_scale
                          : dynamic_scale(group_amax<Isa, kIn>(x, k_len), args, encoder);
      const int64_t scale_index = row * args.scale_stride_m + kb * args.scale_stride_k;
      if (args.scale_format == ScaleFormat::kUE8M0)
        static_cast<uint8_t*>(args.scale)[scale_index] = encode_ue8m0(s);
      else
        static_cast<float*>(args.scale)[scale_index] = s;

      for (int64_t k = 0; k < k_len; k += kLanes) {
        const typename V::Float v = load_inputs<Isa, kIn>(x + k * kInBytes<kIn>, k_len - k) / s;
        // x / s can round to just above max; NaN fails both comparisons and stays NaN.
        const typename V::Float saturated =
            v < -encoder.max ? -encoder.max : (v > encoder.max ? encoder.max : v);
        const auto codes = encode_e4m3_vector<typename V::Float, typename V::Int>(saturated, encoder);
        uint8_t* q = q_row + k_begin + k;
        if (k_len - k >= kLanes) {
          Isa::narrow_to_bytes((typename Isa::Words)codes, q);
        } else {
          uint8_t tail[kLanes];
          Isa::narrow_to_bytes((typename Isa::Words)codes, tail);
          std::memcpy(q, tail, k_len - k);
        }
      }
    }
  }
}

// quantize_rows for the input format of `args`.
template <class Isa>
inline void quantize_rows(const QuantizeArgs& args, const Fp8Encoder& encoder, int64_t row_begin,
                          int64_t row_end) {
  switch (args.x_format) {
    case InFormat::kBF16:
      return quantize_rows<Isa, InFormat::kBF16>(args, encoder, row_begin, row_end);
    case InFormat::kFP16:
      return quantize_rows<Isa, InFormat::kFP16>(args, encoder, row_begin, row_end);
    case InFormat::kFP32:
      return quantize_rows<Isa, InFormat::kFP32>(args, encoder, row_begin, row_end);
  }
}

}  // namespace gemm::cpu
