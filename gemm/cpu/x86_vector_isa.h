// x86-64 vector-register facts the CPU micro-kernel is blocked for, and the per-ISA steps the
// generic vector code needs written with intrinsics (byte / 16-bit -> int32 zero extension:
// PMOVZXBD / PMOVZXWD, or PUNPCKLBW/PUNPCKLWD on SSE2; int32 -> byte narrowing: VPMOVDB, or
// PACKSSDW + PACKUSWB; byte -> 16-bit zero extension and binary16 -> fp32: VPMOVZXBW and
// VCVTPH2PS, from F16C on the AVX2 path; Intel Intrinsics Guide).
//
// Source: Intel 64 and IA-32 Architectures Software Developer's Manual, Vol. 1: §10.2 (SSE: 16
// 128-bit XMM registers in 64-bit mode), §14.1 (AVX/AVX2: 16 256-bit YMM registers; FMA in §14.5),
// §15.1 (AVX-512: 32 512-bit ZMM registers). SSE2 is the x86-64 baseline every build can assume;
// the wider ISAs are chosen at run time (GCC function multiversioning, `__builtin_cpu_supports`).
// Other architectures (and GEMM_CPU_ISA=portable, to test it here) get IsaPortable: plain GCC
// vector extensions, 16-byte vectors, no intrinsics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace gemm::cpu {

// Cache line of x86-64 (and of the AArch64 cores the portable path meets): prefetch stride and
// the alignment of packed panels, which must never split one.
constexpr size_t kCacheLineBytes = 64;

struct IsaPortable {
  static constexpr const char* kName = "portable";
  static constexpr int kVectorBytes = 16;
  static constexpr int kVectorRegisters = 16;  // the fewest of SSE (16) and AArch64 NEON (32)
  static constexpr bool kConvertsFp16 = false;  // binary16 -> fp32 in hardware (see IsaAvx2Fma)
  static bool supported() { return true; }
  typedef uint8_t Bytes __attribute__((vector_size(kVectorBytes / 4)));
  typedef int32_t Words __attribute__((vector_size(kVectorBytes)));
  static Words widen_bytes(const uint8_t* src) {
    Bytes bytes;
    std::memcpy(&bytes, src, sizeof(bytes));
    return __builtin_convertvector(bytes, Words);
  }
  typedef uint16_t Halves __attribute__((vector_size(kVectorBytes / 2)));
  static Words widen_halves(const uint16_t* src) {
    Halves halves;
    std::memcpy(&halves, src, sizeof(halves));
    return __builtin_convertvector(halves, Words);
  }
  // Lanes holding 0..255, stored as kVectorBytes / 4 bytes.
  static void narrow_to_bytes(Words words, uint8_t* dst) {
    const Bytes bytes = __builtin_convertvector(words, Bytes);
    std::memcpy(dst, &bytes, sizeof(bytes));
  }
};

#if defined(__x86_64__)

struct IsaSse2 {
  static constexpr const char* kName = "sse2";
  static constexpr int kVectorBytes = 16;
  static constexpr int kVectorRegisters = 16;
  using Words = __m128i;
  static constexpr bool kConvertsFp16 = false;
  static bool supported() { return true; }  // part of x86-64
  // kVectorBytes / 4 bytes zero-extended to int32 lanes (GCC 12 lowers __builtin_convertvector
  // of bytes lane by lane, so this one step is written with the ISA's own instruction).
  static __m128i widen_bytes(const uint8_t* src) {
    int32_t word;
    std::memcpy(&word, src, sizeof(word));
    const __m128i zero = _mm_setzero_si128();
    return _mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128(word), zero), zero);
  }
  static __m128i widen_halves(const uint16_t* src) {
    return _mm_unpacklo_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src)),
                              _mm_setzero_si128());
  }
  static void narrow_to_bytes(__m128i words, uint8_t* dst) {
    const __m128i halves = _mm_packs_epi32(words, words);
    const int32_t bytes = _mm_cvtsi128_si32(_mm_packus_epi16(halves, halves));
    std::memcpy(dst, &bytes, sizeof(bytes));
  }
};

struct IsaAvx2Fma {
  static constexpr const char* kName = "avx2";
  static constexpr int kVectorBytes = 32;
  static constexpr int kVectorRegisters = 16;
  using Words = __m256i;
  static constexpr bool kConvertsFp16 = true;
  static bool supported() {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
  }
  // One fp32 vector's worth of bytes zero-extended to 16-bit lanes, and binary16 lanes to fp32.
  typedef int16_t Halves __attribute__((vector_size(kVectorBytes / 2)));
  __attribute__((target("avx2"))) static Halves widen_bytes_to_halves(const uint8_t* src) {
    return (Halves)_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src)));
  }
  __attribute__((target("avx2,f16c"))) static __m256 halves_to_floats(Halves halves) {
    return _mm256_cvtph_ps((__m128i)halves);
  }
  __attribute__((target("avx2"))) static __m256i widen_bytes(const uint8_t* src) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src)));
  }
  __attribute__((target("avx2"))) static __m256i widen_halves(const uint16_t* src) {
    return _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
  }
  __attribute__((target("avx2"))) static void narrow_to_bytes(__m256i words, uint8_t* dst) {
    const __m128i halves =
        _mm_packs_epi32(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), _mm_packus_epi16(halves, halves));
  }
};

struct IsaAvx512 {
  static constexpr const char* kName = "avx512";
  static constexpr int kVectorBytes = 64;
  static constexpr int kVectorRegisters = 32;
  using Words = __m512i;
  // libgcc's check includes the OS saving the ZMM state (XGETBV), not only CPUID.
  static bool supported() { return __builtin_cpu_supports("avx512f"); }
  static constexpr bool kConvertsFp16 = true;
  static constexpr __mmask16 kAllLanes = 0xFFFF;
  typedef int16_t Halves __attribute__((vector_size(kVectorBytes / 2)));
  __attribute__((target("avx512f"))) static Halves widen_bytes_to_halves(const uint8_t* src) {
    return (Halves)_mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
  }
  __attribute__((target("avx512f"))) static __m512 halves_to_floats(Halves halves) {
    return _mm512_cvtph_ps((__m256i)halves);
  }
  __attribute__((target("avx512f"))) static __m512i widen_bytes(const uint8_t* src) {
    // The zero-masked form: the plain one trips -Wmaybe-uninitialized in GCC 12's own header.
    return _mm512_maskz_cvtepu8_epi32(kAllLanes,
                                      _mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
  }
  __attribute__((target("avx512f"))) static __m512i widen_halves(const uint16_t* src) {
    return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)));
  }
  __attribute__((target("avx512f"))) static void narrow_to_bytes(__m512i words, uint8_t* dst) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(words));
  }
};

#endif  // __x86_64__

}  // namespace gemm::cpu
