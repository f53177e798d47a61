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

// How a scale tensor stores its multipliers.
enum class ScaleFormat : int32_t {
  kF32 = 0,    // float32
  kUE8M0 = 1,  // one byte e per scale worth 2^(e - 127); e = 0xFF is NaN (torch.float8_e8m0fnu)
};

// Input of the activation quantizer.
enum class InFormat : int32_t { kBF16 = 0, kFP16 = 1, kFP32 = 2 };

// All strides are in elements and may be any int64 value the binding accepted; a backend reads
// layouts from them (K-major: a_stride_k == 1; M-major: a_stride_m == 1) and must never guess.
struct GemmArgs {
  int64_t m = 0, n = 0, k = 0;

  const void* a = nullptr;  // [m, k] FP8 bytes
  int64_t a_stride_m = 0, a_stride_k = 0;
  const void* b = nullptr;  // [n, k] FP8 bytes (weight layout)
  int64_t b_stride_n = 0, b_stride_k = 0;

  const void* a_scale = nullptr;  // [m, ceil(k / 128)] in a_scale_format
  int64_t a_scale_stride_m = 0, a_scale_stride_k = 0;
  const void* b_scale = nullptr;  // [ceil(n / 128), ceil(k / 128)] in b_scale_format
  int64_t b_scale_stride_n = 0, b_scale_stride_k = 0;

  void* c = nullptr;  // [m, n], c_stride_n == 1
  int64_t c_stride_m = 0, c_stride_n = 1;

  Fp8Format a_format = Fp8Format::kE4M3FN;
  Fp8Format b_format = Fp8Format::kE4M3FN;
  OutFormat c_format = OutFormat::kBF16;
  ScaleFormat a_scale_format = ScaleFormat::kF32;
  ScaleFormat b_scale_format = ScaleFormat::kF32;

  // Grouped GEMM (MoE experts) when num_groups > 0: b is [num_groups, n, k] with groups b_stride_group
  // elements apart and b_scale [num_groups, ceil(n / 128), ceil(k / 128)] b_scale_stride_group apart.
  // A row finds its group on the device, from exactly one of:
  //   group_ends [num_groups] int32, inclusive cumsum: rows [ends[g - 1], ends[g]) use group g;
  //              rows >= ends[num_groups - 1] are not written;
  //   row_group  [m] int64, a group id per row; rows whose id is outside [0, num_groups) are not written;
  //   group_rows [num_groups] int32, valid rows per group of the masked layout (a and c viewed as
  //              [num_groups, group_row_stride, k / n], m = num_groups * group_row_stride): rows
  //              [g * group_row_stride, g * group_row_stride + group_rows[g]) use group g, the others are
  //              not written.
  int64_t num_groups = 0;
  int64_t b_stride_group = 0, b_scale_stride_group = 0;
  const int32_t* group_ends = nullptr;
  const int64_t* row_group = nullptr;
  const int32_t* group_rows = nullptr;
  int64_t group_row_stride = 0;
  // A planning hint, never a bound: the valid rows a group typically holds (DeepGEMM's expected_m), where
  // the caller knows better than m / num_groups (the masked layout's max_m); 0: m / num_groups.
  int64_t expected_group_rows = 0;
};

// The routing rules every backend checks the same way for a grouped GEMM (num_groups > 0): exactly one
// routing, and the masked layout's m = num_groups * group_row_stride. The reason, without the backend's
// prefix, or empty.
inline std::string grouped_routing_error(const GemmArgs& args) {
  const int routings = (args.group_ends != nullptr) + (args.row_group != nullptr) + (args.group_rows != nullptr);
  if (routings != 1)
    return "a grouped GEMM needs exactly one of group_ends, row_group and group_rows, got " + std::to_string(routings);
  if (args.group_rows == nullptr) return {};
  const int64_t stride = args.group_row_stride;
  if (stride < 1) return "group_row_stride must be >= 1, got " + std::to_string(stride);
  if (args.m % stride != 0 || args.m / stride != args.num_groups)
    return "the masked layout needs m = num_groups * group_row_stride: expected m = " +
           std::to_string(args.num_groups) + " * " + std::to_string(stride) + ", got " + std::to_string(args.m);
  return {};
}

// Activation quantization, per 1 x 128 group along K:
//   s = amax(group) / max(q_format) (1 for an all-zero group; rounded up to a power of two when
//   pow2_scale or scale_format == kUE8M0), q = saturate(x / s) rounded to nearest even;
//   with static_scale (a device scalar) every group uses s = *static_scale instead, rounded the same way.
// x [m, k] row-major (padded row stride allowed); q [m, k] row-major; scale [m, ceil(k / 128)] in
// either dense layout, read from its strides (M-major: scale_stride_m == 1).
struct QuantizeArgs {
  int64_t m = 0, k = 0;
  const void* x = nullptr;
  int64_t x_stride_m = 0;
  InFormat x_format = InFormat::kBF16;
  void* q = nullptr;
  int64_t q_stride_m = 0;
  Fp8Format q_format = Fp8Format::kE4M3FN;
  void* scale = nullptr;
  int64_t scale_stride_m = 0, scale_stride_k = 0;
  ScaleFormat scale_format = ScaleFormat::kF32;
  bool pow2_scale = false;
  const float* static_scale = nullptr;
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

// Enqueues the activation quantizer; same error and stream rules as gemm_launch. m, k >= 1.
std::string quantize_launch(const QuantizeArgs& args, void* stream);

}  // namespace gemm
