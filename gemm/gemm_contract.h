// The contract every backend implements: one launch function (ROCm: gemm_launcher.hip, CUDA: cuda/gemm_launcher.cu, CPU: cpu/gemm_launcher.cpp).
//
// C[m, n] = sum_k (A[m, k] * As[m, k / 128]) * (B[n, k] * Bs[n / 128, k / 128]),
// with the partial sum of each 128-wide K block promoted into an fp32 accumulator once,
// multiplied by As * Bs (the DeepSeek-V3 recipe, "NT" convention).
//
// The header is plain C++17 with no torch or vendor-runtime include so that the binding (g++),
// nvcc, clang -x hip and the CPU emulator can all compile against it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gemm {

// One scale per 128 K elements (A and B) and per 128 N rows (B): the DeepSeek-V3 block size.
constexpr int64_t kScaleBlockK = 128;
constexpr int64_t kScaleBlockN = 128;

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

enum class Fp8Format : int32_t {
  kE4M3FN = 0,    // OCP e4m3fn: bias 7, max 448, 0x80 = -0 (NVIDIA, CPU)
  kE4M3FNUZ = 1,  // e4m3fnuz: bias 8, max 240, 0x80 = NaN (AMD gfx942, CPU)
};

enum class OutFormat : int32_t { kBF16 = 0, kFP16 = 1, kFP32 = 2 };

// All strides are in elements and may be any int64 value the binding accepted; a backend reads
// layouts from them (K-major: a_stride_k == 1; M-major: a_stride_m == 1) and must never guess.
struct GemmArgs {
  int64_t m = 0, n = 0, k = 0;

  const void* a = nullptr;  // [m, k] FP8 bytes
  int64_t a_stride_m = 0, a_stride_k = 0;
  const void* b = nullptr;  // [n, k] FP8 bytes (weight layout)
  int64_t b_stride_n = 0, b_stride_k = 0;

  const float* a_scale = nullptr;  // [m, ceil(k / 128)]
  int64_t a_scale_stride_m = 0, a_scale_stride_k = 0;
  const float* b_scale = nullptr;  // [ceil(n / 128), ceil(k / 128)]
  int64_t b_scale_stride_n = 0, b_scale_stride_k = 0;

  void* c = nullptr;  // [m, n], c_stride_n == 1
  int64_t c_stride_m = 0, c_stride_n = 1;

  Fp8Format a_format = Fp8Format::kE4M3FN;
  Fp8Format b_format = Fp8Format::kE4M3FN;
  OutFormat c_format = OutFormat::kBF16;
};

// Scratch memory comes from the caller (the torch caching allocator, ordered on the launch stream):
// backends never call cudaMalloc/hipMalloc and keep no global workspace. `allocate` returns nullptr
// when it fails; the memory stays valid until gemm_launch returns and the stream reaches the work.
struct Workspace {
  void* (*allocate)(void* context, size_t bytes) = nullptr;
  void* context = nullptr;
  void* get(size_t bytes) const { return allocate(context, bytes); }
};

// Enqueues the GEMM on `stream` (cudaStream_t / hipStream_t; ignored on CPU) for the current device.
// Returns an empty string on success; otherwise the reason the call was refused or failed, naming
// the argument, the expected and the actual value. Never prints, aborts, exits or synchronizes.
// Preconditions checked by the binding: m >= 1, n >= 1, k >= 1, shapes consistent, pointers non-null.
std::string gemm_launch(const GemmArgs& args, const Workspace& workspace, void* stream);

}  // namespace gemm
