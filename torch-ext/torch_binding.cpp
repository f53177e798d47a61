// Registers the `gemm` op and turns torch tensors into gemm::GemmArgs for the backend's launcher.
//
// The binding is the only place that validates: backends may assume m, n, k >= 1, consistent shapes,
// supported dtypes, one device, non-null pointers and one of the two dense layouts per operand
// (see gemm/gemm_contract.h). Every violated precondition becomes a Python exception that names the
// argument, the expected and the actual value.
#include "torch_binding.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <vector>

#include "gemm/gemm_contract.h"
#include "registration.h"

// build.toml's [torch] cxx-flags rename glibc's __libc_single_threaded (GLIBC_2.32), which
// libstdc++'s inline refcounting reads, to this library-private variable so the module needs only
// glibc 2.28 (manylinux_2_28). 0 means "other threads may exist": refcounts stay atomic.
#if defined(__libc_single_threaded)
extern "C" __attribute__((visibility("hidden"))) char __libc_single_threaded = 0;
#endif

#if defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
#include <c10/core/DeviceGuard.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#endif

namespace gemm_binding {
namespace {

// Python spelling of the dtypes users pass, so messages read like the call they wrote.
std::string dtype_name(at::ScalarType type) {
  switch (type) {
    case at::kFloat8_e4m3fn: return "torch.float8_e4m3fn";
    case at::kFloat8_e4m3fnuz: return "torch.float8_e4m3fnuz";
    case at::kFloat8_e5m2: return "torch.float8_e5m2";
    case at::kFloat8_e5m2fnuz: return "torch.float8_e5m2fnuz";
    case at::kFloat8_e8m0fnu: return "torch.float8_e8m0fnu";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kHalf: return "torch.float16";
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kChar: return "torch.int8";
    case at::kByte: return "torch.uint8";
    case at::kShort: return "torch.int16";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    case at::kBool: return "torch.bool";
    default: return std::string("torch.") + c10::toString(type);
  }
}

// The strides a backend reads for a 2-D tensor [rows, cols] in one of the two dense layouts.
struct Layout2d {
  int64_t row_stride;  // stride of dim 0
  int64_t col_stride;  // stride of dim 1
};

// Row-major: unit column stride and non-overlapping rows; column-major: the mirror image. A size-1
// dim carries no layout information, so its stride is replaced by the value the other dim implies:
// backends never see a meaningless stride, and [1, K] or [M, 1] cannot be misread.
std::optional<Layout2d> dense_layout(const at::Tensor& t) {
  const int64_t rows = t.size(0), cols = t.size(1);
  const int64_t row_stride = t.stride(0), col_stride = t.stride(1);
  if ((cols == 1 || col_stride == 1) && (rows == 1 || row_stride >= cols)) {
    return Layout2d{rows == 1 ? cols : row_stride, 1};
  }
  if ((rows == 1 || row_stride == 1) && (cols == 1 || col_stride >= rows)) {
    return Layout2d{1, cols == 1 ? rows : col_stride};
  }
  return std::nullopt;
}

// An input as the backend will read it. A stride pattern that is neither dense layout (overlapping,
// broadcast or doubly strided views) is copied with .contiguous() on the current stream rather than
// misread; `storage` keeps that copy alive until the launch has been enqueued.
struct Operand {
  at::Tensor storage;
  Layout2d layout;
};

Operand dense_operand(const at::Tensor& t) {
  if (const auto layout = dense_layout(t)) return {t, *layout};
  at::Tensor copy = t.contiguous();
  return {copy, dense_layout(copy).value()};
}

// Backs gemm::Workspace with the torch caching allocator: each request is a uint8 tensor on the launch
// device, held until the launch has been enqueued. The allocator only hands the memory out again after
// the work queued on the current stream, so no synchronization is needed.
class TorchWorkspace {
 public:
  explicit TorchWorkspace(at::Device device) : options_(at::TensorOptions().dtype(at::kByte).device(device)) {}

  gemm::Workspace view() {
    gemm::Workspace workspace;
    workspace.allocate = &TorchWorkspace::allocate;
    workspace.context = this;
    return workspace;
  }

 private:
  static void* allocate(void* context, size_t bytes) {
    auto* self = static_cast<TorchWorkspace*>(context);
    try {
      self->blocks_.push_back(at::empty({static_cast<int64_t>(bytes)}, self->options_));
    } catch (const std::exception&) {
      return nullptr;  // the launcher turns a failed request into its error string
    }
    return self->blocks_.back().mutable_data_ptr();
  }

  at::TensorOptions options_;
  std::vector<at::Tensor> blocks_;
};

struct Problem {
  int64_t m, n, k;
  gemm::Fp8Format a_format, b_format;
  gemm::OutFormat out_format;
};

// Messages are assembled from strings only (std::to_string for numbers, Device::str()): the CUDA
// build on torch 2.11 crashed while raising the first error whose message streamed an integer
// (dtype errors, which stream only strings, raised fine), so no number goes through an ostream here.
std::string num(int64_t v) { return std::to_string(v); }

// "[d0, d1, ...]"
std::string list_str(c10::IntArrayRef values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + num(values[i]);
  return s + "]";
}
std::string shape_str(const at::Tensor& t) { return list_str(t.sizes()); }

void check_2d(const at::Tensor& t, const char* name, const char* dims) {
  TORCH_CHECK_VALUE(t.dim() == 2, "gemm: ", name, " must be a 2-D tensor ", dims, ", got a ", num(t.dim()),
                    "-D tensor of shape ", shape_str(t));
}

void check_shape(const at::Tensor& t, const char* name, const char* dims, int64_t rows, int64_t cols) {
  TORCH_CHECK_VALUE(t.size(0) == rows && t.size(1) == cols, "gemm: ", name, " must have shape ", dims, " = [",
                    num(rows), ", ", num(cols), "], got ", shape_str(t));
}

// Every tensor is checked against a's device: one elsewhere (another GPU, the CPU, `meta`) would be
// read as if it were there. (A `meta` tensor dispatches to the fake implementation instead, which
// runs the same check in Python.)
void check_device(const at::Tensor& t, const char* name, const at::Tensor& a) {
  TORCH_CHECK_VALUE(t.device() == a.device(), "gemm: all tensors must be on one device; expected ", name, " on ",
                    a.device().str(), " (the device of a), got ", t.device().str());
}

void check_scale_dtype(const at::Tensor& t, const char* name) {
  TORCH_CHECK_TYPE(t.scalar_type() == at::kFloat, "gemm: ", name, " must be torch.float32, got ",
                   dtype_name(t.scalar_type()), " (upcast other scale formats, e.g. E8M0, with .float())");
}

// Each operand's format is passed to the backend separately: CPU and ROCm decode a and b independently,
// so mixing e4m3fn with e4m3fnuz is exact there; CUDA takes e4m3fn only.
gemm::Fp8Format fp8_format(const at::Tensor& t, const char* name, bool fnuz_supported, const char* backend) {
  const at::ScalarType type = t.scalar_type();
  TORCH_CHECK_TYPE(type == at::kFloat8_e4m3fn || type == at::kFloat8_e4m3fnuz, "gemm: ", name,
                   " must be torch.float8_e4m3fn or torch.float8_e4m3fnuz, got ", dtype_name(type));
  TORCH_CHECK_TYPE(type != at::kFloat8_e4m3fnuz || fnuz_supported, "gemm: ", name,
                   " is torch.float8_e4m3fnuz, which is not supported on ", backend,
                   " (it is the AMD gfx942 format); pass torch.float8_e4m3fn");
  return type == at::kFloat8_e4m3fn ? gemm::Fp8Format::kE4M3FN : gemm::Fp8Format::kE4M3FNUZ;
}

gemm::OutFormat out_format(const at::Tensor& out) {
  switch (out.scalar_type()) {
    case at::kBFloat16: return gemm::OutFormat::kBF16;
    case at::kHalf: return gemm::OutFormat::kFP16;
    case at::kFloat: return gemm::OutFormat::kFP32;
    default:
      TORCH_CHECK_TYPE(false, "gemm: out must be torch.bfloat16, torch.float16 or torch.float32, got ",
                       dtype_name(out.scalar_type()));
  }
}

// Everything that can be checked without touching data or the device.
Problem validate(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& a_scale,
                 const at::Tensor& b_scale, bool fnuz_supported, const char* backend) {
  check_2d(a, "a", "[M, K]");
  check_2d(b, "b", "[N, K]");
  check_2d(a_scale, "a_scale", "[M, ceil(K/128)]");
  check_2d(b_scale, "b_scale", "[ceil(N/128), ceil(K/128)]");
  check_2d(out, "out", "[M, N]");

  Problem problem;
  problem.a_format = fp8_format(a, "a", fnuz_supported, backend);
  problem.b_format = fp8_format(b, "b", fnuz_supported, backend);
  check_scale_dtype(a_scale, "a_scale");
  check_scale_dtype(b_scale, "b_scale");
  problem.out_format = out_format(out);

  check_device(b, "b", a);
  check_device(a_scale, "a_scale", a);
  check_device(b_scale, "b_scale", a);
  check_device(out, "out", a);

  problem.m = a.size(0);
  problem.k = a.size(1);
  problem.n = b.size(0);
  TORCH_CHECK_VALUE(problem.k >= 1, "gemm: K (a.shape[1]) must be >= 1, got ", num(problem.k));
  TORCH_CHECK_VALUE(problem.n >= 1, "gemm: N (b.shape[0]) must be >= 1, got ", num(problem.n));
  TORCH_CHECK_VALUE(b.size(1) == problem.k, "gemm: b must have shape [N, K] with K = a.shape[1] = ", num(problem.k),
                    ", got ", shape_str(b));
  const int64_t k_blocks = gemm::ceil_div(problem.k, gemm::kScaleBlockK);
  const int64_t n_blocks = gemm::ceil_div(problem.n, gemm::kScaleBlockN);
  check_shape(a_scale, "a_scale", "[M, ceil(K/128)]", problem.m, k_blocks);
  check_shape(b_scale, "b_scale", "[ceil(N/128), ceil(K/128)]", n_blocks, k_blocks);
  check_shape(out, "out", "[M, N]", problem.m, problem.n);
  return problem;
}

void launch(const Problem& problem, at::Tensor& out, const at::Tensor& a, const at::Tensor& b,
            const at::Tensor& a_scale, const at::Tensor& b_scale, void* stream) {
  const std::optional<Layout2d> out_layout = dense_layout(out);
  TORCH_CHECK_VALUE(out_layout && out_layout->col_stride == 1,
                    "gemm: out must be row-major (inner stride 1, row stride >= N = ", num(problem.n),
                    "), got strides ", list_str(out.strides()));
  const Operand a_op = dense_operand(a);
  const Operand b_op = dense_operand(b);
  const Operand a_scale_op = dense_operand(a_scale);
  const Operand b_scale_op = dense_operand(b_scale);

  gemm::GemmArgs args;
  args.m = problem.m;
  args.n = problem.n;
  args.k = problem.k;
  args.a = a_op.storage.const_data_ptr();
  args.a_stride_m = a_op.layout.row_stride;
  args.a_stride_k = a_op.layout.col_stride;
  args.b = b_op.storage.const_data_ptr();
  args.b_stride_n = b_op.layout.row_stride;
  args.b_stride_k = b_op.layout.col_stride;
  args.a_scale = a_scale_op.storage.const_data_ptr<float>();
  args.a_scale_stride_m = a_scale_op.layout.row_stride;
  args.a_scale_stride_k = a_scale_op.layout.col_stride;
  args.b_scale = b_scale_op.storage.const_data_ptr<float>();
  args.b_scale_stride_n = b_scale_op.layout.row_stride;
  args.b_scale_stride_k = b_scale_op.layout.col_stride;
  args.c = out.mutable_data_ptr();
  args.c_stride_m = out_layout->row_stride;
  args.c_stride_n = out_layout->col_stride;
  args.a_format = problem.a_format;
  args.b_format = problem.b_format;
  args.c_format = problem.out_format;

  TorchWorkspace workspace(a.device());
  const std::string error = gemm::gemm_launch(args, workspace.view(), stream);
  TORCH_CHECK(error.empty(), "gemm: ", error);
}

}  // namespace

#if defined(CPU_KERNEL)
void gemm_cpu(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& a_scale,
              const at::Tensor& b_scale) {
  const Problem problem = validate(out, a, b, a_scale, b_scale, /*fnuz_supported=*/true, "CPU");
  if (problem.m == 0) return;  // nothing to compute; backends may assume m >= 1
  launch(problem, out, a, b, a_scale, b_scale, /*stream=*/nullptr);
}
#endif

#if defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
#if defined(ROCM_KERNEL)
constexpr bool kFnuzSupported = true;  // gfx942's native format
constexpr const char* kGpuBackend = "ROCm";
#else
constexpr bool kFnuzSupported = false;  // no e4m3fnuz on NVIDIA hardware
constexpr const char* kGpuBackend = "CUDA";
#endif

// One path for CUDA and ROCm (which registers on the CUDA key): c10's device-generic guard and stream
// API is what OptionalCUDAGuard / getCurrentCUDAStream wrap, needs no vendor header, and does not
// depend on the HIP "masquerading" getters that recent ROCm torch builds no longer provide.
void gemm_gpu(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& a_scale,
              const at::Tensor& b_scale) {
  const Problem problem = validate(out, a, b, a_scale, b_scale, kFnuzSupported, kGpuBackend);
  if (problem.m == 0) return;  // a zero-sized grid would be an invalid launch
  const c10::OptionalDeviceGuard guard(a.device());
  const c10::Stream stream = c10::impl::getDeviceGuardImpl(a.device().type())->getStream(a.device());
  launch(problem, out, a, b, a_scale, b_scale, stream.native_handle());
}

// A GPU build has no CPU backend; without this, CPU tensors would hit the dispatcher's generic
// "could not run ... with arguments from the 'CPU' backend".
void refuse_cpu(at::Tensor& /*out*/, const at::Tensor& a, const at::Tensor& /*b*/, const at::Tensor& /*a_scale*/,
                const at::Tensor& /*b_scale*/) {
  TORCH_CHECK_VALUE(false, "gemm: this build of gemm runs on ", kGpuBackend, " devices, but a is on ", a.device().str(),
                    "; move the tensors to a GPU (or load the CPU build)");
}
#endif

}  // namespace gemm_binding

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("gemm(Tensor! out, Tensor a, Tensor b, Tensor a_scale, Tensor b_scale) -> ()");
#if defined(CPU_KERNEL)
  ops.impl("gemm", c10::kCPU, &gemm_binding::gemm_cpu);
#endif
#if defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
  ops.impl("gemm", c10::kCUDA, &gemm_binding::gemm_gpu);
#if !defined(CPU_KERNEL)
  ops.impl("gemm", c10::kCPU, &gemm_binding::refuse_cpu);
#endif
#endif
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
