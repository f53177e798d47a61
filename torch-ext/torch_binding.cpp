// Registers the ops (torch_binding.h lists them) and turns torch tensors into gemm::GemmArgs /
// gemm::QuantizeArgs for the backend's launcher.
//
// The binding is the only place that validates: backends may assume m, n, k >= 1, consistent shapes,
// supported dtypes, one device, non-null pointers and one of the two dense layouts per operand
// (see gemm/gemm_contract.h). Every violated precondition becomes a Python exception that names the
// argument, the expected and the actual value.
#include "torch_binding.h"

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
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

// Every message starts with the op's name, as the user called it.
void check_dim(const char* op, const at::Tensor& t, const char* name, int64_t dim, const char* dims) {
  TORCH_CHECK_VALUE(t.dim() == dim, op, ": ", name, " must be a ", num(dim), "-D tensor ", dims, ", got a ",
                    num(t.dim()), "-D tensor of shape ", shape_str(t));
}

void check_shape(const char* op, const at::Tensor& t, const char* name, const char* dims,
                 std::vector<int64_t> expected) {
  TORCH_CHECK_VALUE(t.sizes() == c10::IntArrayRef(expected), op, ": ", name, " must have shape ", dims, " = ",
                    list_str(expected), ", got ", shape_str(t));
}

// Every tensor is checked against the first input's device: one elsewhere (another GPU, the CPU,
// `meta`) would be read as if it were there. (A `meta` tensor dispatches to the fake implementation
// instead, which runs the same check in Python.)
void check_device(const char* op, const at::Tensor& t, const char* name, const at::Tensor& anchor,
                  const char* anchor_name) {
  TORCH_CHECK_VALUE(t.device() == anchor.device(), op, ": all tensors must be on one device; expected ", name,
                    " on ", anchor.device().str(), " (the device of ", anchor_name, "), got ", t.device().str());
}

// A tensor the op writes must not share memory with another it reads or writes: the op would read it
// half overwritten. Views whose overlap at::get_overlap_status cannot decide (not dense: padded rows) are
// let through, as torch's own out= ops let them through.
void check_no_overlap(const char* op, const at::Tensor& written, const char* written_name, const at::Tensor& other,
                      const char* other_name) {
  const at::MemOverlapStatus status = at::get_overlap_status(written, other);
  TORCH_CHECK_VALUE(status != at::MemOverlapStatus::Full && status != at::MemOverlapStatus::Partial, op, ": ",
                    written_name, " must not share memory with ", other_name, " (the op writes ", written_name,
                    "); pass separate tensors");
}

// Scales are read as they are: UE8M0 bytes go to the backend untouched. uint8 is UE8M0 too (the
// exponent bytes, as checkpoints store them): the Python entry points pass e8m0 scales that way, since
// inductor cannot remove the functional wrapper of a mutating op that touches a float8_e8m0fnu tensor.
gemm::ScaleFormat scale_format(const char* op, const at::Tensor& t, const char* name) {
  const at::ScalarType type = t.scalar_type();
  TORCH_CHECK_TYPE(type == at::kFloat || type == at::kFloat8_e8m0fnu || type == at::kByte, op, ": ", name,
                   " must be torch.float32 or torch.float8_e8m0fnu, got ", dtype_name(type),
                   " (torch.uint8 is read as UE8M0 exponents; upcast other scale formats with .float())");
  return type == at::kFloat ? gemm::ScaleFormat::kF32 : gemm::ScaleFormat::kUE8M0;
}

// Each operand's format is passed to the backend separately: CPU and ROCm decode a and b independently,
// so mixing e4m3fn with e4m3fnuz is exact there; CUDA takes e4m3fn only.
gemm::Fp8Format fp8_format(const char* op, const at::Tensor& t, const char* name, bool fnuz_supported,
                           const char* backend) {
  const at::ScalarType type = t.scalar_type();
  TORCH_CHECK_TYPE(type == at::kFloat8_e4m3fn || type == at::kFloat8_e4m3fnuz, op, ": ", name,
                   " must be torch.float8_e4m3fn or torch.float8_e4m3fnuz, got ", dtype_name(type));
  TORCH_CHECK_TYPE(type != at::kFloat8_e4m3fnuz || fnuz_supported, op, ": ", name,
                   " is torch.float8_e4m3fnuz, which is not supported on ", backend,
                   " (it is the AMD gfx942 format); pass torch.float8_e4m3fn");
  return type == at::kFloat8_e4m3fn ? gemm::Fp8Format::kE4M3FN : gemm::Fp8Format::kE4M3FNUZ;
}

gemm::OutFormat out_format(const char* op, const at::Tensor& out) {
  switch (out.scalar_type()) {
    case at::kBFloat16: return gemm::OutFormat::kBF16;
    case at::kHalf: return gemm::OutFormat::kFP16;
    case at::kFloat: return gemm::OutFormat::kFP32;
    default:
      TORCH_CHECK_TYPE(false, op, ": out must be torch.bfloat16, torch.float16 or torch.float32, got ",
                       dtype_name(out.scalar_type()));
  }
}

gemm::InFormat in_format(const char* op, const at::Tensor& x) {
  switch (x.scalar_type()) {
    case at::kBFloat16: return gemm::InFormat::kBF16;
    case at::kHalf: return gemm::InFormat::kFP16;
    case at::kFloat: return gemm::InFormat::kFP32;
    default:
      TORCH_CHECK_TYPE(false, op, ": x must be torch.bfloat16, torch.float16 or torch.float32, got ",
                       dtype_name(x.scalar_type()));
  }
}

// An output's row-major layout (inner stride 1): outputs cannot be copied, so any other is refused.
Layout2d row_major_output(const char* op, const at::Tensor& t, const char* name, int64_t cols) {
  const std::optional<Layout2d> layout = dense_layout(t);
  TORCH_CHECK_VALUE(layout && layout->col_stride == 1, op, ": ", name,
                    " must be row-major (inner stride 1, row stride >= ", num(cols), "), got strides ",
                    list_str(t.strides()));
  return *layout;
}

// A 1-D index tensor of one dtype, length `length`, on the anchor's device, as the backend reads it.
at::Tensor index_operand(const char* op, const at::Tensor& t, const char* name, at::ScalarType dtype,
                         int64_t length, const char* length_name, const at::Tensor& anchor) {
  TORCH_CHECK_TYPE(t.scalar_type() == dtype, op, ": ", name, " must be ", dtype_name(dtype), ", got ",
                   dtype_name(t.scalar_type()));
  check_dim(op, t, name, 1, length_name);
  check_shape(op, t, name, length_name, {length});
  check_device(op, t, name, anchor, "a");
  return t.contiguous();
}

// The GEMM problem both GEMM ops describe: formats and sizes, everything checked without touching data.
struct Problem {
  int64_t m, n, k, groups;
  gemm::Fp8Format a_format, b_format;
  gemm::ScaleFormat a_scale_format, b_scale_format;
  gemm::OutFormat out_format;
};

// Checks shared by gemm ([N, K] b) and grouped_gemm ([E, N, K] b): b and b_scale carry `groups`
// leading dims (0 or 1).
Problem validate_gemm(const char* op, const at::Tensor& out, const at::Tensor& a, const at::Tensor& b,
                      const at::Tensor& a_scale, const at::Tensor& b_scale, bool grouped, bool fnuz_supported,
                      const char* backend) {
  const int64_t lead = grouped ? 1 : 0;
  check_dim(op, a, "a", 2, "[M, K]");
  check_dim(op, b, "b", 2 + lead, grouped ? "[E, N, K]" : "[N, K]");
  check_dim(op, a_scale, "a_scale", 2, "[M, ceil(K/128)]");
  check_dim(op, b_scale, "b_scale", 2 + lead, grouped ? "[E, ceil(N/128), ceil(K/128)]" : "[ceil(N/128), ceil(K/128)]");
  check_dim(op, out, "out", 2, "[M, N]");

  Problem problem;
  problem.a_format = fp8_format(op, a, "a", fnuz_supported, backend);
  problem.b_format = fp8_format(op, b, "b", fnuz_supported, backend);
  problem.a_scale_format = scale_format(op, a_scale, "a_scale");
  problem.b_scale_format = scale_format(op, b_scale, "b_scale");
  problem.out_format = out_format(op, out);

  check_device(op, b, "b", a, "a");
  check_device(op, a_scale, "a_scale", a, "a");
  check_device(op, b_scale, "b_scale", a, "a");
  check_device(op, out, "out", a, "a");

  problem.m = a.size(0);
  problem.k = a.size(1);
  problem.n = b.size(lead);
  problem.groups = grouped ? b.size(0) : 0;
  TORCH_CHECK_VALUE(problem.k >= 1, op, ": K (a.shape[1]) must be >= 1, got ", num(problem.k));
  TORCH_CHECK_VALUE(problem.n >= 1, op, ": N (b.shape[", num(lead), "]) must be >= 1, got ", num(problem.n));
  if (grouped) {
    TORCH_CHECK_VALUE(problem.groups >= 1, op, ": E (b.shape[0]) must be >= 1, got ", num(problem.groups));
  }
  TORCH_CHECK_VALUE(b.size(1 + lead) == problem.k, op, ": b must have shape ", grouped ? "[E, N, K]" : "[N, K]",
                    " with K = a.shape[1] = ", num(problem.k), ", got ", shape_str(b));
  const int64_t k_blocks = gemm::ceil_div(problem.k, gemm::kScaleBlockK);
  const int64_t n_blocks = gemm::ceil_div(problem.n, gemm::kScaleBlockN);
  check_shape(op, a_scale, "a_scale", "[M, ceil(K/128)]", {problem.m, k_blocks});
  if (grouped)
    check_shape(op, b_scale, "b_scale", "[E, ceil(N/128), ceil(K/128)]", {problem.groups, n_blocks, k_blocks});
  else
    check_shape(op, b_scale, "b_scale", "[ceil(N/128), ceil(K/128)]", {n_blocks, k_blocks});
  check_shape(op, out, "out", "[M, N]", {problem.m, problem.n});
  check_no_overlap(op, out, "out", a, "a");
  check_no_overlap(op, out, "out", b, "b");
  check_no_overlap(op, out, "out", a_scale, "a_scale");
  check_no_overlap(op, out, "out", b_scale, "b_scale");
  return problem;
}

// A grouped operand [E, rows, cols]: one dense 2-D layout shared by every group, groups stride(0)
// apart; any other pattern is copied, as for 2-D operands.
struct GroupedOperand : Operand {
  int64_t group_stride;
};

GroupedOperand grouped_operand(const at::Tensor& t) {
  if (const auto layout = dense_layout(t.select(0, 0))) return {{t, *layout}, t.stride(0)};
  at::Tensor copy = t.contiguous();
  return {{copy, dense_layout(copy.select(0, 0)).value()}, copy.stride(0)};
}

// b and b_scale (one expert's layout for grouped ones) into `args`.
void set_weight(gemm::GemmArgs& args, const Operand& b, const Operand& b_scale) {
  args.b = b.storage.const_data_ptr();
  args.b_stride_n = b.layout.row_stride;
  args.b_stride_k = b.layout.col_stride;
  args.b_scale = b_scale.storage.const_data_ptr();
  args.b_scale_stride_n = b_scale.layout.row_stride;
  args.b_scale_stride_k = b_scale.layout.col_stride;
}

// GemmArgs of everything but b and b_scale; `storage` keeps copied operands alive until the launch.
gemm::GemmArgs gemm_args(const char* op, const Problem& problem, at::Tensor& out, const at::Tensor& a,
                         const at::Tensor& a_scale, std::vector<at::Tensor>& storage) {
  const Layout2d out_layout = row_major_output(op, out, "out", problem.n);
  const Operand a_op = dense_operand(a);
  const Operand a_scale_op = dense_operand(a_scale);
  storage.push_back(a_op.storage);
  storage.push_back(a_scale_op.storage);

  gemm::GemmArgs args;
  args.m = problem.m;
  args.n = problem.n;
  args.k = problem.k;
  args.a = a_op.storage.const_data_ptr();
  args.a_stride_m = a_op.layout.row_stride;
  args.a_stride_k = a_op.layout.col_stride;
  args.a_scale = a_scale_op.storage.const_data_ptr();
  args.a_scale_stride_m = a_scale_op.layout.row_stride;
  args.a_scale_stride_k = a_scale_op.layout.col_stride;
  args.c = out.mutable_data_ptr();
  args.c_stride_m = out_layout.row_stride;
  args.c_stride_n = out_layout.col_stride;
  args.a_format = problem.a_format;
  args.b_format = problem.b_format;
  args.c_format = problem.out_format;
  args.a_scale_format = problem.a_scale_format;
  args.b_scale_format = problem.b_scale_format;
  return args;
}

void launch_gemm(const char* op, const gemm::GemmArgs& args, at::Device device, void* stream) {
  TorchWorkspace workspace(device);
  const std::string error = gemm::gemm_launch(args, workspace.view(), stream);
  TORCH_CHECK(error.empty(), op, ": ", error);
}

// Runs `launch(stream)` on the current stream of `anchor`'s device, under a device guard (GPU
// builds); the CPU has no stream.
template <class Launch>
void on_current_stream(const at::Tensor& anchor, Launch&& launch) {
#if defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
  // c10's device-generic guard and stream API is what OptionalCUDAGuard / getCurrentCUDAStream wrap,
  // needs no vendor header, and does not depend on the HIP "masquerading" getters that recent ROCm
  // torch builds no longer provide.
  const c10::OptionalDeviceGuard guard(anchor.device());
  const c10::Stream stream = c10::impl::getDeviceGuardImpl(anchor.device().type())->getStream(anchor.device());
  launch(stream.native_handle());
#else
  (void)anchor;
  launch(nullptr);
#endif
}

#if defined(CPU_KERNEL)
constexpr bool kFnuzSupported = true;
constexpr const char* kBackend = "CPU";
#elif defined(ROCM_KERNEL)
constexpr bool kFnuzSupported = true;  // gfx942's native format
constexpr const char* kBackend = "ROCm";
#else
constexpr bool kFnuzSupported = false;  // no e4m3fnuz on NVIDIA hardware
constexpr const char* kBackend = "CUDA";
#endif

#if !defined(CPU_KERNEL)
// A GPU build has no CPU backend; without this, CPU tensors would hit the dispatcher's generic
// "could not run ... with arguments from the 'CPU' backend".
[[noreturn]] void refuse_cpu(const char* op, const at::Tensor& anchor, const char* anchor_name) {
  TORCH_CHECK_VALUE(false, op, ": this build of gemm runs on ", kBackend, " devices, but ", anchor_name, " is on ",
                    anchor.device().str(), "; move the tensors to a GPU (or load the CPU build)");
  __builtin_unreachable();
}
#endif

// gemm's and quantize's bodies, with the name of the op their errors name; the GEMM's on a problem
// validate_gemm already checked.
void launch_dense(const char* op, const Problem& problem, at::Tensor& out, const at::Tensor& a, const at::Tensor& b,
                  const at::Tensor& a_scale, const at::Tensor& b_scale) {
  if (problem.m == 0) return;  // nothing to compute; backends may assume m >= 1
  on_current_stream(a, [&](void* stream) {
    std::vector<at::Tensor> storage;
    gemm::GemmArgs args = gemm_args(op, problem, out, a, a_scale, storage);
    const Operand b_op = dense_operand(b);
    const Operand b_scale_op = dense_operand(b_scale);
    set_weight(args, b_op, b_scale_op);
    launch_gemm(op, args, a.device(), stream);
  });
}

void run_quantize(const char* op, at::Tensor& q, at::Tensor& scale, const at::Tensor& x,
                  const std::optional<at::Tensor>& static_scale, bool pow2_scale) {
  check_dim(op, x, "x", 2, "[M, K]");
  check_dim(op, q, "q", 2, "[M, K]");
  check_dim(op, scale, "scale", 2, "[M, ceil(K/128)]");
  gemm::QuantizeArgs args;
  args.x_format = in_format(op, x);
  args.q_format = fp8_format(op, q, "q", kFnuzSupported, kBackend);
  args.scale_format = scale_format(op, scale, "scale");
  check_device(op, q, "q", x, "x");
  check_device(op, scale, "scale", x, "x");
  args.m = x.size(0);
  args.k = x.size(1);
  check_shape(op, q, "q", "[M, K]", {args.m, args.k});
  check_shape(op, scale, "scale", "[M, ceil(K/128)]", {args.m, gemm::ceil_div(args.k, gemm::kScaleBlockK)});
  check_no_overlap(op, q, "q", x, "x");
  check_no_overlap(op, scale, "scale", x, "x");
  check_no_overlap(op, q, "q", scale, "scale");
  if (static_scale) {
    TORCH_CHECK_TYPE(static_scale->scalar_type() == at::kFloat, op, ": static_scale must be torch.float32, got ",
                     dtype_name(static_scale->scalar_type()));
    TORCH_CHECK_VALUE(static_scale->numel() == 1, op, ": static_scale must have one element, got shape ",
                      shape_str(*static_scale));
    check_device(op, *static_scale, "static_scale", x, "x");
    check_no_overlap(op, q, "q", *static_scale, "static_scale");
    check_no_overlap(op, scale, "scale", *static_scale, "static_scale");
    args.static_scale = static_scale->const_data_ptr<float>();
  }
  args.pow2_scale = pow2_scale;
  const Layout2d q_layout = row_major_output(op, q, "q", args.k);
  const std::optional<Layout2d> scale_layout = dense_layout(scale);
  TORCH_CHECK_VALUE(scale_layout, op, ": scale must be row-major or M-major (one unit stride, the other >= its dim), got strides ",
                    list_str(scale.strides()));
  if (args.m == 0 || args.k == 0) return;  // nothing to write; backends may assume m, k >= 1

  // x is read row by row: any other layout is copied, in its own dtype.
  const std::optional<Layout2d> x_dense = dense_layout(x);
  const at::Tensor x_rows = x_dense && x_dense->col_stride == 1 ? x : x.contiguous();
  args.x = x_rows.const_data_ptr();
  args.x_stride_m = x_rows.is_same(x) ? x_dense->row_stride : args.k;
  args.q = q.mutable_data_ptr();
  args.q_stride_m = q_layout.row_stride;
  args.scale = scale.mutable_data_ptr();
  args.scale_stride_m = scale_layout->row_stride;
  args.scale_stride_k = scale_layout->col_stride;
  on_current_stream(x, [&](void* stream) {
    const std::string error = gemm::quantize_launch(args, stream);
    TORCH_CHECK(error.empty(), op, ": ", error);
  });
}

}  // namespace

void gemm_op(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& a_scale,
             const at::Tensor& b_scale) {
  constexpr const char* op = "gemm";
  launch_dense(op, validate_gemm(op, out, a, b, a_scale, b_scale, false, kFnuzSupported, kBackend), out, a, b,
               a_scale, b_scale);
}

void grouped_gemm_op(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& a_scale,
                  const at::Tensor& b_scale, const std::optional<at::Tensor>& group_ends,
                  const std::optional<at::Tensor>& row_group, const std::optional<at::Tensor>& group_rows,
                  int64_t expected_rows) {
  constexpr const char* op = "grouped_gemm";
  const Problem problem = validate_gemm(op, out, a, b, a_scale, b_scale, true, kFnuzSupported, kBackend);
  const int given = group_ends.has_value() + row_group.has_value() + group_rows.has_value();
  if (group_ends) check_no_overlap(op, out, "out", *group_ends, "group_ends");
  if (row_group) check_no_overlap(op, out, "out", *row_group, "row_group");
  if (group_rows) check_no_overlap(op, out, "out", *group_rows, "group_rows");
  TORCH_CHECK_VALUE(given == 1, op, ": exactly one of group_ends, row_group and group_rows must be given, got ",
                    num(given));
  TORCH_CHECK_VALUE(expected_rows >= 0, op, ": expected_rows must be >= 0 (0: no hint), got ", num(expected_rows));
  const at::Tensor ends = group_ends ? index_operand(op, *group_ends, "group_ends", at::kInt, problem.groups,
                                                     "[E]", a)
                                     : at::Tensor();
  const at::Tensor ids = row_group ? index_operand(op, *row_group, "row_group", at::kLong, problem.m, "[M]", a)
                                   : at::Tensor();
  at::Tensor counts;
  int64_t row_stride = 0;
  if (group_rows) {
    counts = index_operand(op, *group_rows, "group_rows", at::kInt, problem.groups, "[E]", a);
    TORCH_CHECK_VALUE(problem.m % problem.groups == 0, op,
                      ": with group_rows, a must hold E blocks of max_m rows (M a multiple of E = ",
                      num(problem.groups), "), got M = ", num(problem.m));
    row_stride = problem.m / problem.groups;
  }
  if (problem.m == 0) return;
  on_current_stream(a, [&](void* stream) {
    std::vector<at::Tensor> storage;
    gemm::GemmArgs args = gemm_args(op, problem, out, a, a_scale, storage);
    const GroupedOperand b_op = grouped_operand(b);
    const GroupedOperand b_scale_op = grouped_operand(b_scale);
    set_weight(args, b_op, b_scale_op);
    args.num_groups = problem.groups;
    args.b_stride_group = b_op.group_stride;
    args.b_scale_stride_group = b_scale_op.group_stride;
    args.group_ends = ends.defined() ? ends.const_data_ptr<int32_t>() : nullptr;
    args.row_group = ids.defined() ? ids.const_data_ptr<int64_t>() : nullptr;
    args.group_rows = counts.defined() ? counts.const_data_ptr<int32_t>() : nullptr;
    args.group_row_stride = counts.defined() ? row_stride : 0;
    args.expected_group_rows = expected_rows;
    launch_gemm(op, args, a.device(), stream);
  });
}

void quantize_op(at::Tensor& q, at::Tensor& scale, const at::Tensor& x, const std::optional<at::Tensor>& static_scale,
                 bool pow2_scale) {
  run_quantize("quantize", q, scale, x, static_scale, pow2_scale);
}

// quantize + gemm in one op: x [M, K] quantized per 1x128 group into buffers from the caching
// allocator (FP8 in b's format, fp32 scales M-major: the layout every backend's GEMM reads fastest),
// then multiplied, in one dispatch.
void linear_op(at::Tensor& out, const at::Tensor& x, const at::Tensor& b, const at::Tensor& b_scale,
               const std::optional<at::Tensor>& static_scale, bool pow2_scale) {
  constexpr const char* op = "linear";
  check_dim(op, x, "x", 2, "[M, K]");
  check_dim(op, b, "b", 2, "[N, K]");
  fp8_format(op, b, "b", kFnuzSupported, kBackend);  // q takes b's format
  check_device(op, b, "b", x, "x");
  TORCH_CHECK_VALUE(x.size(1) == b.size(1), op, ": x must have shape [M, K] with K = b.shape[1] = ", num(b.size(1)),
                    ", got ", shape_str(x));
  const int64_t m = x.size(0);
  const int64_t k_blocks = gemm::ceil_div(x.size(1), gemm::kScaleBlockK);
  at::Tensor q = at::empty(x.sizes(), b.options());
  at::Tensor scale = at::empty({k_blocks, m}, x.options().dtype(at::kFloat)).t();
  // Every check (the GEMM's on b_scale and out, the quantizer's on x) runs before anything is launched.
  const Problem problem = validate_gemm(op, out, q, b, scale, b_scale, false, kFnuzSupported, kBackend);
  check_no_overlap(op, out, "out", x, "x");
  if (static_scale) check_no_overlap(op, out, "out", *static_scale, "static_scale");
  run_quantize(op, q, scale, x, static_scale, pow2_scale);
  launch_dense(op, problem, out, q, b, scale, b_scale);
}

#if !defined(CPU_KERNEL)
void gemm_refuse_cpu(at::Tensor&, const at::Tensor& a, const at::Tensor&, const at::Tensor&, const at::Tensor&) {
  refuse_cpu("gemm", a, "a");
}
void grouped_gemm_refuse_cpu(at::Tensor&, const at::Tensor& a, const at::Tensor&, const at::Tensor&,
                             const at::Tensor&, const std::optional<at::Tensor>&, const std::optional<at::Tensor>&,
                             const std::optional<at::Tensor>&, int64_t) {
  refuse_cpu("grouped_gemm", a, "a");
}
void linear_refuse_cpu(at::Tensor&, const at::Tensor& x, const at::Tensor&, const at::Tensor&,
                       const std::optional<at::Tensor>&, bool) {
  refuse_cpu("linear", x, "x");
}
void quantize_refuse_cpu(at::Tensor&, at::Tensor&, const at::Tensor& x, const std::optional<at::Tensor>&, bool) {
  refuse_cpu("quantize", x, "x");
}
#endif

}  // namespace gemm_binding

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("gemm(Tensor! out, Tensor a, Tensor b, Tensor a_scale, Tensor b_scale) -> ()");
  ops.def("quantize(Tensor! q, Tensor! scale, Tensor x, Tensor? static_scale, bool pow2_scale) -> ()");
  ops.def(
      "grouped_gemm(Tensor! out, Tensor a, Tensor b, Tensor a_scale, Tensor b_scale, Tensor? group_ends, "
      "Tensor? row_group, Tensor? group_rows=None, int expected_rows=0) -> ()");
  ops.def("linear(Tensor! out, Tensor x, Tensor b, Tensor b_scale, Tensor? static_scale, bool pow2_scale) -> ()");
#if defined(CPU_KERNEL)
  constexpr auto kDeviceKey = c10::kCPU;
#else
  // ROCm registers on the CUDA key too.
  constexpr auto kDeviceKey = c10::kCUDA;
  ops.impl("gemm", c10::kCPU, &gemm_binding::gemm_refuse_cpu);
  ops.impl("quantize", c10::kCPU, &gemm_binding::quantize_refuse_cpu);
  ops.impl("grouped_gemm", c10::kCPU, &gemm_binding::grouped_gemm_refuse_cpu);
  ops.impl("linear", c10::kCPU, &gemm_binding::linear_refuse_cpu);
#endif
  ops.impl("gemm", kDeviceKey, &gemm_binding::gemm_op);
  ops.impl("quantize", kDeviceKey, &gemm_binding::quantize_op);
  ops.impl("grouped_gemm", kDeviceKey, &gemm_binding::grouped_gemm_op);
  ops.impl("linear", kDeviceKey, &gemm_binding::linear_op);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
