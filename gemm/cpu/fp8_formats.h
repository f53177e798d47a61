// FP8 E4M3 encodings the CPU backend decodes: 256-entry fp32 tables built at compile time (for
// any layout), and vector decoders for contiguous bytes that the tests check against the tables on
// every code.
//
// The GEMM's B operand is decoded scaled by 2^-s, s = 15 - bias: an e4m3 code shifted into binary16's
// fields is that binary16 value, so one shift and the hardware's fp16 -> fp32 conversion (F16C,
// AVX-512) decode it. A is decoded scaled by 2^s, so every product, and every sum of products, is
// the same fp32 number as with exact decodes (powers of two, far from overflow and underflow).
//
// Sources:
//  - e4m3fn: OCP 8-bit Floating Point Specification (OFP8) rev 1.0, table 1: exponent bias 7,
//    no infinities, S.1111.111 is NaN (0x7F, 0xFF), max normal S.1111.110 = 448, 0x80 is -0,
//    subnormals (exponent field 0) are mantissa/8 * 2^(1 - bias).
//  - e4m3fnuz: LLVM APFloat `Float8E4M3FNUZ` (after Graphcore, "8-bit Numerical Formats for Deep
//    Neural Networks", 2022), the AMD gfx942 FP8 type: exponent bias 8, no infinities, no -0, the
//    byte 0x80 is the only NaN, max 0x7F = 240.
//  - UE8M0 (scales): OCP Microscaling Formats (MX) v1.0, §5.4: an unsigned 8-bit exponent worth
//    2^(e - 127), no zero, 0xFF is NaN (torch.float8_e8m0fnu).
//  - IEEE 754 binary16 (fp16 inputs of the quantizer): bias 15, 10 mantissa bits.
#pragma once

#include <array>
#include <cstring>
#include <cstdint>
#include <limits>

#include "../gemm_contract.h"

namespace gemm::cpu {

constexpr int kFp8Codes = 256;
constexpr uint32_t kFp8SignBit = 0x80;
constexpr int kFp8SignShift = 7;
constexpr uint32_t kFp8MagnitudeMask = 0x7F;
constexpr int kFp8MantissaBits = 3;
constexpr uint32_t kFp8MantissaMask = (1u << kFp8MantissaBits) - 1;
constexpr float kFp8MantissaScale = 1.0f / (1 << kFp8MantissaBits);

struct E4M3Encoding {
  int exponent_bias;
  bool magnitude_all_ones_is_nan;  // e4m3fn: S.1111.111
  bool negative_zero_is_nan;       // e4m3fnuz: 0x80
};

constexpr E4M3Encoding kE4M3FNEncoding{7, true, false};
constexpr E4M3Encoding kE4M3FNUZEncoding{8, false, true};

constexpr float exp2_int(int e) {
  float r = 1.0f;
  for (; e > 0; --e) r *= 2.0f;
  for (; e < 0; ++e) r *= 0.5f;
  return r;
}

constexpr float decode_e4m3(uint32_t code, E4M3Encoding enc) {
  const uint32_t magnitude = code & kFp8MagnitudeMask;
  const bool negative = (code & kFp8SignBit) != 0;
  if ((enc.magnitude_all_ones_is_nan && magnitude == kFp8MagnitudeMask) ||
      (enc.negative_zero_is_nan && code == kFp8SignBit)) {
    return std::numeric_limits<float>::quiet_NaN();
  }
  const int exponent = static_cast<int>(magnitude >> kFp8MantissaBits);
  const float mantissa = static_cast<float>(magnitude & kFp8MantissaMask) * kFp8MantissaScale;
  // Exponent field 0 is subnormal: no implicit leading 1, same scale as exponent field 1.
  const float value = exponent == 0 ? mantissa * exp2_int(1 - enc.exponent_bias)
                                    : (1.0f + mantissa) * exp2_int(exponent - enc.exponent_bias);
  return negative ? -value : value;
}

using Fp8Table = std::array<float, kFp8Codes>;

constexpr Fp8Table make_fp8_table(E4M3Encoding enc, float scale = 1.0f) {
  Fp8Table table{};
  for (int code = 0; code < kFp8Codes; ++code) table[code] = decode_e4m3(code, enc) * scale;
  return table;
}

inline constexpr Fp8Table kE4M3FNTable = make_fp8_table(kE4M3FNEncoding);
inline constexpr Fp8Table kE4M3FNUZTable = make_fp8_table(kE4M3FNUZEncoding);

static_assert(kE4M3FNTable[0x7E] == 448.0f && kE4M3FNTable[0xFE] == -448.0f, "e4m3fn max is 448");
static_assert(kE4M3FNTable[0x01] == exp2_int(-9), "e4m3fn min subnormal is 2^-9");
static_assert(kE4M3FNTable[0x7F] != kE4M3FNTable[0x7F], "e4m3fn 0x7F is NaN");
static_assert(kE4M3FNUZTable[0x7F] == 240.0f && kE4M3FNUZTable[0xFF] == -240.0f,
              "e4m3fnuz max is 240");
static_assert(kE4M3FNUZTable[0x01] == exp2_int(-10), "e4m3fnuz min subnormal is 2^-10");
static_assert(kE4M3FNUZTable[0x80] != kE4M3FNUZTable[0x80], "e4m3fnuz 0x80 is NaN");

// fp32 exponent bias (IEEE 754 binary32), needed by the vector decoder's rebias multiplier.
constexpr int kFp32ExponentBias = 127;
constexpr int kFp16ExponentBias = 15;  // IEEE 754 binary16
constexpr int kFp16MantissaBits = 10;

// s of the operand scaling (header): an e4m3 code's bits moved into binary16's fields read as the
// code's value times 2^-s.
constexpr int operand_shift(E4M3Encoding enc) { return kFp16ExponentBias - enc.exponent_bias; }

inline constexpr Fp8Table kE4M3FNOperandTable =
    make_fp8_table(kE4M3FNEncoding, exp2_int(-operand_shift(kE4M3FNEncoding)));
inline constexpr Fp8Table kE4M3FNUZOperandTable =
    make_fp8_table(kE4M3FNUZEncoding, exp2_int(-operand_shift(kE4M3FNUZEncoding)));

struct Fp8Decoder {
  E4M3Encoding encoding;
  const float* table;          // exact values
  const float* operand_table;  // B operand values: exact * 2^-s
  float other_operand_scale;   // 2^s: the A operand's factor when this format is B's
  // Multipliers of the arithmetic vector decoder (decode_e4m3_vector), which yields B operand values.
  float normal_rebias;   // 2^(127 - bias - s): fp8 fields placed in an fp32 -> their operand value
  float subnormal_unit;  // 2^(1 - bias - 3 - s): operand value of mantissa 1 with exponent field 0

  constexpr Fp8Decoder(E4M3Encoding enc, const float* decoded, const float* operand)
      : encoding(enc),
        table(decoded),
        operand_table(operand),
        other_operand_scale(exp2_int(operand_shift(enc))),
        normal_rebias(exp2_int(kFp32ExponentBias - enc.exponent_bias - operand_shift(enc))),
        subnormal_unit(exp2_int(1 - enc.exponent_bias - kFp8MantissaBits - operand_shift(enc))) {}
};

// nullptr for a format value outside the enum (the caller reports it).
inline const Fp8Decoder* fp8_decoder(Fp8Format format) {
  static constexpr Fp8Decoder kFN{kE4M3FNEncoding, kE4M3FNTable.data(),
                                  kE4M3FNOperandTable.data()};
  static constexpr Fp8Decoder kFNUZ{kE4M3FNUZEncoding, kE4M3FNUZTable.data(),
                                    kE4M3FNUZOperandTable.data()};
  switch (format) {
    case Fp8Format::kE4M3FN:
      return &kFN;
    case Fp8Format::kE4M3FNUZ:
      return &kFNUZ;
  }
  return nullptr;
}

// fp32 bit-field facts (IEEE 754 binary32) the vector decoder builds values from.
constexpr int kFp32MantissaBits = 23;
constexpr int kFp32SignShift = 31;
constexpr int32_t kFp32QuietNaNBits = 0x7FC00000;
// An e4m3 magnitude shifted by this lines its exponent and mantissa fields up with fp32's.
constexpr int kFp8ToFp32FieldShift = kFp32MantissaBits - kFp8MantissaBits;

// decode_e4m3 on vectors (`Int`: int32 lanes holding codes 0..255, `Float`: fp32 lanes of the same
// width), used to decode contiguous rows; the tests check it against the tables on every code.
// Normals: the fields moved into an fp32 then rebiased by one multiply by 2^(127 - bias), exact.
// Subnormals: mantissa * 2^(1 - bias - 3) from an integer conversion, so that no intermediate is
// an fp32 denormal and flush-to-zero modes cannot change the result.
template <class Float, class Int>
inline Float decode_e4m3_vector(Int code, const Fp8Decoder& decoder) {
  const Int magnitude = code & static_cast<int32_t>(kFp8MagnitudeMask);
  const Int mantissa = magnitude & static_cast<int32_t>(kFp8MantissaMask);
  const Int is_subnormal = magnitude <= static_cast<int32_t>(kFp8MantissaMask);
  // Subnormal lanes get a normal exponent here (their result is discarded below): an fp32 denormal
  // operand would cost a microcode assist.
  const Int normal_fields = magnitude | (is_subnormal & static_cast<int32_t>(kFp8MantissaMask + 1));
  const Float normal = (Float)(normal_fields << kFp8ToFp32FieldShift) * decoder.normal_rebias;
  const Float subnormal = __builtin_convertvector(mantissa, Float) * decoder.subnormal_unit;
  Int bits = ((Int)subnormal & is_subnormal) | ((Int)normal & ~is_subnormal);
  bits |= (code >> kFp8SignShift) << kFp32SignShift;
  const Int is_nan = decoder.encoding.magnitude_all_ones_is_nan
                         ? magnitude == static_cast<int32_t>(kFp8MagnitudeMask)
                         : code == static_cast<int32_t>(kFp8SignBit);
  return (Float)((bits & ~is_nan) | (is_nan & kFp32QuietNaNBits));  // vector casts keep the bits
}

// e4m3 codes (0..255 in 16-bit lanes) -> the binary16 bit patterns that read as their B operand
// values (operand scaling, header): the magnitude's fields moved up by 7 bits into fp16's, the sign
// bit carried from bit 14 to bit 15 by adding it to itself; NaN codes become fp16's quiet NaN, which
// converts to fp32's 0x7FC00000, the NaN the other decoders give.
constexpr int kFp8ToFp16FieldShift = kFp16MantissaBits - kFp8MantissaBits;
template <class Halves>
inline Halves e4m3_fp16_fields(Halves codes, E4M3Encoding enc) {
  constexpr int16_t kShiftedSignBit = kFp8SignBit << kFp8ToFp16FieldShift;
  constexpr int16_t kFp16QuietNaN = 0x7E00;
  const Halves shifted = codes << kFp8ToFp16FieldShift;
  const Halves half = shifted + (shifted & kShiftedSignBit);
  constexpr int16_t kMagnitude = kFp8MagnitudeMask;
  const Halves is_nan = enc.magnitude_all_ones_is_nan ? (codes & kMagnitude) == kMagnitude
                                                      : codes == static_cast<int16_t>(kFp8SignBit);
  return (half & ~is_nan) | (is_nan & kFp16QuietNaN);
}

// UE8M0 scale byte -> fp32: the byte is fp32's exponent field, except 0 (2^-127, an fp32 subnormal)
// and 0xFF (NaN).
constexpr uint32_t kUe8m0Nan = 0xFF;
constexpr int32_t kFp32Exp2Minus127Bits = 0x00400000;

inline float decode_ue8m0(uint8_t code) {
  const int32_t bits = code == 0                ? kFp32Exp2Minus127Bits
                       : code == kUe8m0Nan      ? kFp32QuietNaNBits
                                                : static_cast<int32_t>(code) << kFp32MantissaBits;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// A power-of-two fp32 scale >= 2^-127 (or inf / NaN) as its UE8M0 byte: fp32's exponent field
// (0 for 2^-127, 0xFF for inf and NaN).
inline uint8_t encode_ue8m0(float pow2) {
  uint32_t bits;
  std::memcpy(&bits, &pow2, sizeof(bits));
  return static_cast<uint8_t>(bits >> kFp32MantissaBits);
}

// The smallest scale UE8M0 can store.
constexpr float kUe8m0Min = exp2_int(-kFp32ExponentBias);

// Which scale encoding a tensor uses, and where its [outer, k block] multipliers are.
struct ScaleView {
  const void* data;
  int64_t stride_outer, stride_k;  // elements
  ScaleFormat format;

  float at(int64_t outer, int64_t kb) const {
    const int64_t index = outer * stride_outer + kb * stride_k;
    return format == ScaleFormat::kUE8M0 ? decode_ue8m0(static_cast<const uint8_t*>(data)[index])
                                         : static_cast<const float*>(data)[index];
  }
  // The same layout `elements` further on (another group's scales).
  ScaleView offset(int64_t elements) const {
    const int64_t bytes = elements * (format == ScaleFormat::kUE8M0 ? 1 : int64_t{sizeof(float)});
    return {static_cast<const uint8_t*>(data) + bytes, stride_outer, stride_k, format};
  }
};

// Smallest power of two >= s for a positive s (inf stays inf, 2^127 < s rounds to inf): a
// normal's exponent goes up by one unless its mantissa is zero; subnormals are scaled into the
// normal range first, exactly, so the same rule applies.
constexpr float kSubnormalLift = 0x1p64f;
inline float ceil_pow2(float s) {
  const bool subnormal = s < std::numeric_limits<float>::min();
  const float lifted = subnormal ? s * kSubnormalLift : s;
  uint32_t bits;
  std::memcpy(&bits, &lifted, sizeof(bits));
  constexpr uint32_t kMantissa = (1u << kFp32MantissaBits) - 1;
  bits = (bits + kMantissa) & ~kMantissa;
  float rounded;
  std::memcpy(&rounded, &bits, sizeof(rounded));
  return subnormal ? rounded / kSubnormalLift : rounded;
}

// fp32 -> e4m3 code, round to nearest even, for |v| <= the format's max or NaN (callers saturate
// first, as the quantizer's recipe does). Normals: the fp32 fields rebiased and rounded to three
// mantissa bits in the integer domain. Subnormals: adding a magic number whose fp32 spacing is the
// format's subnormal step makes the fp32 adder round |v| to that step; its bits minus the magic's
// are the code (the top step lands on the smallest normal's code). The tests check every code.
struct Fp8Encoder {
  E4M3Encoding encoding;
  float max;                      // largest finite value
  float min_normal;               // 2^(1 - bias)
  float subnormal_magic;          // 2^(1 - bias - 3 + 23): its fp32 spacing is the subnormal step
  int32_t subnormal_magic_bits;
  int32_t rebias;                 // (127 - bias) << 23

  constexpr Fp8Encoder(E4M3Encoding enc, float max_value)
      : encoding(enc),
        max(max_value),
        min_normal(exp2_int(1 - enc.exponent_bias)),
        subnormal_magic(exp2_int(magic_exponent(enc))),
        subnormal_magic_bits((magic_exponent(enc) + kFp32ExponentBias) << kFp32MantissaBits),
        rebias((kFp32ExponentBias - enc.exponent_bias) << kFp32MantissaBits) {}

 private:
  static constexpr int magic_exponent(E4M3Encoding enc) {
    return 1 - enc.exponent_bias - kFp8MantissaBits + kFp32MantissaBits;
  }
};

// nullptr for a format value outside the enum (the caller reports it).
inline const Fp8Encoder* fp8_encoder(Fp8Format format) {
  static constexpr Fp8Encoder kFN{kE4M3FNEncoding, kE4M3FNTable[0x7E]};
  static constexpr Fp8Encoder kFNUZ{kE4M3FNUZEncoding, kE4M3FNUZTable[0x7F]};
  switch (format) {
    case Fp8Format::kE4M3FN:
      return &kFN;
    case Fp8Format::kE4M3FNUZ:
      return &kFNUZ;
  }
  return nullptr;
}

// binary16 / bfloat16 -> fp32 on vectors of int32 lanes holding the 16-bit patterns, exact. fp16
// subnormals come from an integer conversion (no fp32 denormal operand, as in decode_e4m3_vector);
// inf and NaN keep their payload, as torch converts.
constexpr int32_t kFp16ExponentMask = 0x1F << kFp16MantissaBits;
constexpr int k16BitShift = 16;

template <class Float, class Int>
inline Float decode_bf16_vector(Int half_bits) {
  return (Float)(half_bits << k16BitShift);
}

template <class Float, class Int>
inline Float decode_fp16_vector(Int half_bits) {
  constexpr float kSubnormalUnit = exp2_int(1 - kFp16ExponentBias - kFp16MantissaBits);
  constexpr int kFieldShift = kFp32MantissaBits - kFp16MantissaBits;
  constexpr int32_t kRebias = (kFp32ExponentBias - kFp16ExponentBias) << kFp32MantissaBits;
  constexpr int32_t kFp32ExponentMask = 0xFF << kFp32MantissaBits;
  const Int magnitude = half_bits & 0x7FFF;
  const Int exponent = magnitude & kFp16ExponentMask;
  const Int normal = (magnitude << kFieldShift) + kRebias;
  const Int special = (magnitude << kFieldShift) | kFp32ExponentMask;
  const Int subnormal = (Int)(__builtin_convertvector(magnitude, Float) * kSubnormalUnit);
  Int bits = exponent == 0 ? subnormal : (exponent == kFp16ExponentMask ? special : normal);
  return (Float)(bits | ((half_bits & 0x8000) << k16BitShift));
}

// Codes in int32 lanes. NaN becomes S.1111.111 (e4m3fn, sign kept, as torch converts) or 0x80
// (e4m3fnuz); e4m3fnuz has no -0, so a negative value that rounds to zero is 0x00.
template <class Float, class Int>
inline Int encode_e4m3_vector(Float v, const Fp8Encoder& encoder) {
  constexpr int32_t kAbsMask = 0x7FFFFFFF;
  constexpr int32_t kFp32InfBits = 0x7F800000;
  constexpr int kDroppedBits = kFp32MantissaBits - kFp8MantissaBits;
  constexpr int32_t kHalfStepMinusOne = (1 << (kDroppedBits - 1)) - 1;
  const Int bits = (Int)v;
  const Int abs_bits = bits & kAbsMask;
  const Float abs = (Float)abs_bits;
  const Int rebiased = abs_bits - encoder.rebias;
  const Int normal = (rebiased + kHalfStepMinusOne + ((rebiased >> kDroppedBits) & 1)) >> kDroppedBits;
  const Int subnormal = (Int)(abs + encoder.subnormal_magic) - encoder.subnormal_magic_bits;
  const Int is_subnormal = abs < encoder.min_normal;
  Int code = (subnormal & is_subnormal) | (normal & ~is_subnormal);
  const Int sign = (bits >> kFp32SignShift) & static_cast<int32_t>(kFp8SignBit);
  const Int is_nan = abs_bits > kFp32InfBits;
  if (encoder.encoding.negative_zero_is_nan) {
    code |= sign & (code != 0);
    return (code & ~is_nan) | (is_nan & static_cast<int32_t>(kFp8SignBit));
  }
  return ((code & ~is_nan) | (is_nan & static_cast<int32_t>(kFp8MagnitudeMask))) | sign;
}

}  // namespace gemm::cpu
