// Entry TU of the gfx942 emulation: the real ROCm launcher (gemm/gemm_launcher.hip, compiled as C++
// against tests/rocm/emu/include/hip/hip_runtime.h) behind the C ABI of emu_abi.h.
#include "gemm/gemm_launcher.hip"

#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "emu_abi.h"
#include "guarded_memory.h"

namespace {

gemm::GemmArgs to_gemm_args(const EmuGemmArgs& e) {
  gemm::GemmArgs g;
  g.m = e.m, g.n = e.n, g.k = e.k;
  g.a = e.a, g.a_stride_m = e.a_stride_m, g.a_stride_k = e.a_stride_k;
  g.b = e.b, g.b_stride_n = e.b_stride_n, g.b_stride_k = e.b_stride_k;
  g.a_scale = e.a_scale, g.a_scale_stride_m = e.a_scale_stride_m, g.a_scale_stride_k = e.a_scale_stride_k;
  g.b_scale = e.b_scale, g.b_scale_stride_n = e.b_scale_stride_n, g.b_scale_stride_k = e.b_scale_stride_k;
  g.c = e.c, g.c_stride_m = e.c_stride_m, g.c_stride_n = e.c_stride_n;
  g.a_format = static_cast<gemm::Fp8Format>(e.a_format);
  g.b_format = static_cast<gemm::Fp8Format>(e.b_format);
  g.c_format = static_cast<gemm::OutFormat>(e.c_format);
  g.a_scale_format = static_cast<gemm::ScaleFormat>(e.a_scale_format);
  g.b_scale_format = static_cast<gemm::ScaleFormat>(e.b_scale_format);
  g.num_groups = e.num_groups, g.b_stride_group = e.b_stride_group, g.b_scale_stride_group = e.b_scale_stride_group;
  g.group_ends = e.group_ends, g.row_group = e.row_group;
  g.group_rows = e.group_rows, g.group_row_stride = e.group_row_stride;
  return g;
}

// Every buffer of one emulated GEMM sits in a GuardedBuffer; the fault handler names the one whose
// end was overrun.
std::vector<std::unique_ptr<hip_emu::GuardedBuffer>> g_buffers;
hip_emu::GuardSide g_guard_side = hip_emu::GuardSide::kAfterEnd;  // emu_set_guard_side

std::string describe(uintptr_t address) {
  std::string text;
  for (const auto& buffer : g_buffers)
    if (buffer->describe(address, text)) return text;
  return "address " + hip_emu::hex(address) + " (outside every tensor and workspace)";
}

hip_emu::GuardedBuffer* add_buffer(std::string name, size_t bytes, uintptr_t align_like, const void* src) {
  g_buffers.push_back(std::make_unique<hip_emu::GuardedBuffer>(std::move(name), bytes, align_like, src, g_guard_side));
  return g_buffers.back()->ok() ? g_buffers.back().get() : nullptr;
}

// The bytes a strided tensor spans, from its lowest-addressed element (strides may be negative).
struct Extent {
  int64_t first;  // byte offset of the lowest-addressed element from element (0, 0)
  size_t bytes;
};
struct Dim {
  int64_t size, stride;
};
Extent extent(std::initializer_list<Dim> dims, size_t element_bytes) {
  int64_t lo = 0, hi = 0;
  for (const Dim& d : dims) {
    lo += std::min<int64_t>(0, (d.size - 1) * d.stride);
    hi += std::max<int64_t>(0, (d.size - 1) * d.stride);
  }
  return {lo * static_cast<int64_t>(element_bytes), static_cast<size_t>(hi - lo + 1) * element_bytes};
}
Extent extent(int64_t rows, int64_t cols, int64_t stride_r, int64_t stride_c, size_t element_bytes) {
  return extent({{rows, stride_r}, {cols, stride_c}}, element_bytes);
}

// A strided 2-D tensor copied into a guarded buffer; the returned pointer addresses element (0, 0).
template <class T>
T* guard_tensor(const char* name, T* data, Extent x) {
  const auto* first = reinterpret_cast<const uint8_t*>(data) + x.first;
  auto* buffer = add_buffer(name, x.bytes, reinterpret_cast<uintptr_t>(first), first);
  return buffer == nullptr ? nullptr : reinterpret_cast<T*>(buffer->data() - x.first);
}

// Guarded stand-in for the torch caching allocator. Fresh workspace is filled with 0xFF bytes (fp32
// NaN) so that a kernel reading scratch it never wrote shows NaN instead of lucky zeros.
constexpr int kWorkspacePoisonByte = 0xFF;
constexpr uintptr_t kWorkspaceAlignLike = 0;  // the caching allocator returns aligned blocks
struct HostWorkspace {
  EmuStats* stats;
  static void* allocate(void* context, size_t bytes) {
    auto* self = static_cast<HostWorkspace*>(context);
    auto* buffer = add_buffer("workspace request " + std::to_string(self->stats->workspace_requests), bytes,
                              kWorkspaceAlignLike, nullptr);
    if (buffer == nullptr) return nullptr;
    std::memset(buffer->data(), kWorkspacePoisonByte, bytes);
    self->stats->workspace_requests += 1;
    self->stats->workspace_bytes += static_cast<int64_t>(bytes);
    return buffer->data();
  }
};

constexpr size_t out_bytes(int64_t format) {
  return static_cast<gemm::OutFormat>(format) == gemm::OutFormat::kFP32 ? 4 : 2;
}
constexpr size_t scale_bytes(int64_t format) {
  return static_cast<gemm::ScaleFormat>(format) == gemm::ScaleFormat::kF32 ? 4 : 1;
}

void copy_error(const std::string& text, char* err, int err_len) { std::snprintf(err, err_len, "%s", text.c_str()); }

const gemm::rocm::TileShape& tile_of(const gemm::rocm::RocmConfig& c) { return gemm::rocm::kTiles[c.tile]; }

std::string heuristic_launch(const gemm::GemmArgs& args, const gemm::Workspace& workspace) {
  return gemm::gemm_launch(args, workspace, nullptr);
}

auto launcher_for(const gemm::rocm::RocmConfig& config) {
  return [config](const gemm::GemmArgs& args, const gemm::Workspace& workspace) {
    return gemm::rocm::launch_with_config(args, config, workspace, nullptr);
  };
}

// Ends a guarded run (the outputs were copied back): the launcher's error, else the emulator's first fault.
int finish_run(std::string result, int64_t launches_before, EmuStats* stats, char* err, int err_len) {
  g_buffers.clear();
  stats->launches = hip_emu::launch_count.load() - launches_before;
  const std::string fault = hip_emu::fault_text();
  if (result.empty() && !fault.empty()) result = "emulator fault: " + fault;
  hip_emu::reset_faults();
  copy_error(result, err, err_len);
  return result.empty() ? 0 : 1;
}

// Runs `launch` on guarded copies of every tensor (and guarded workspace), copies C back, and reports
// the launcher's error or, failing that, the emulator's first fault.
template <class Launch>
int run_guarded(const EmuGemmArgs& e, Launch&& launch, EmuStats* stats, char* err, int err_len) {
  hip_emu::reset_faults();
  *stats = EmuStats{};
  const int64_t launches_before = hip_emu::launch_count.load();
  const int64_t kb = gemm::ceil_div(e.k, gemm::kScaleBlockK), nb = gemm::ceil_div(e.n, gemm::kScaleBlockN);
  g_buffers.clear();
  EmuGemmArgs guarded = e;
  const Extent c_extent = extent(e.m, e.n, e.c_stride_m, e.c_stride_n, out_bytes(e.c_format));
  const int64_t groups = std::max<int64_t>(e.num_groups, 1);
  guarded.a = guard_tensor("a", e.a, extent(e.m, e.k, e.a_stride_m, e.a_stride_k, 1));
  guarded.b = guard_tensor("b", e.b, extent({{groups, e.b_stride_group}, {e.n, e.b_stride_n}, {e.k, e.b_stride_k}}, 1));
  guarded.a_scale = guard_tensor("a_scale", e.a_scale,
                                 extent(e.m, kb, e.a_scale_stride_m, e.a_scale_stride_k, scale_bytes(e.a_scale_format)));
  guarded.b_scale = guard_tensor(
      "b_scale", e.b_scale,
      extent({{groups, e.b_scale_stride_group}, {nb, e.b_scale_stride_n}, {kb, e.b_scale_stride_k}}, scale_bytes(e.b_scale_format)));
  guarded.c = guard_tensor("c", e.c, c_extent);
  const bool group_ends_ok = e.group_ends == nullptr ||
                             (guarded.group_ends = guard_tensor("group_ends", e.group_ends, extent(e.num_groups, 1, 1, 1, 4)));
  const bool row_group_ok = e.row_group == nullptr ||
                            (guarded.row_group = guard_tensor("row_group", e.row_group, extent(e.m, 1, 1, 1, 8)));
  const bool group_rows_ok = e.group_rows == nullptr ||
                             (guarded.group_rows = guard_tensor("group_rows", e.group_rows, extent(e.num_groups, 1, 1, 1, 4)));
  std::string result;
  if (!guarded.a || !guarded.b || !guarded.a_scale || !guarded.b_scale || !guarded.c || !group_ends_ok || !row_group_ok ||
      !group_rows_ok) {
    result = "emulator: could not map guarded copies of the tensors";
  } else {
    hip_emu::describe_address = describe;
    HostWorkspace host{stats};
    result = launch(to_gemm_args(guarded), gemm::Workspace{&HostWorkspace::allocate, &host});
    hip_emu::describe_address = nullptr;
    std::memcpy(static_cast<uint8_t*>(e.c) + c_extent.first, static_cast<uint8_t*>(guarded.c) + c_extent.first,
                c_extent.bytes);
  }
  // A fault the launcher did not see (it checks hipGetLastError only after launches) still fails.
  return finish_run(result, launches_before, stats, err, err_len);
}

int run_quantize(const EmuQuantizeArgs& e, EmuStats* stats, char* err, int err_len) {
  hip_emu::reset_faults();
  *stats = EmuStats{};
  const int64_t launches_before = hip_emu::launch_count.load();
  g_buffers.clear();
  const int64_t kb = gemm::ceil_div(e.k, gemm::kScaleBlockK);
  const Extent x_extent = extent(e.m, e.k, e.x_stride_m, 1, static_cast<gemm::InFormat>(e.x_format) == gemm::InFormat::kFP32 ? 4 : 2);
  const Extent q_extent = extent(e.m, e.k, e.q_stride_m, 1, 1);
  const Extent s_extent = extent(e.m, kb, e.scale_stride_m, e.scale_stride_k, scale_bytes(e.scale_format));
  gemm::QuantizeArgs g;
  g.m = e.m, g.k = e.k;
  g.x = guard_tensor("x", e.x, x_extent), g.x_stride_m = e.x_stride_m;
  g.x_format = static_cast<gemm::InFormat>(e.x_format);
  g.q = guard_tensor("q", e.q, q_extent), g.q_stride_m = e.q_stride_m;
  g.q_format = static_cast<gemm::Fp8Format>(e.q_format);
  g.scale = guard_tensor("scale", e.scale, s_extent);
  g.scale_stride_m = e.scale_stride_m, g.scale_stride_k = e.scale_stride_k;
  g.scale_format = static_cast<gemm::ScaleFormat>(e.scale_format);
  g.pow2_scale = e.pow2_scale != 0;
  const bool static_ok = e.static_scale == nullptr ||
                         (g.static_scale = guard_tensor("static_scale", e.static_scale, extent(1, 1, 1, 1, 4)));
  std::string result;
  if (!g.x || !g.q || !g.scale || !static_ok) {
    result = "emulator: could not map guarded copies of the tensors";
  } else {
    hip_emu::describe_address = describe;
    result = gemm::quantize_launch(g, nullptr);
    hip_emu::describe_address = nullptr;
    std::memcpy(static_cast<uint8_t*>(e.q) + q_extent.first, static_cast<uint8_t*>(g.q) + q_extent.first, q_extent.bytes);
    std::memcpy(static_cast<uint8_t*>(e.scale) + s_extent.first, static_cast<uint8_t*>(g.scale) + s_extent.first,
                s_extent.bytes);
  }
  return finish_run(result, launches_before, stats, err, err_len);
}

}  // namespace

extern "C" {

EMU_EXPORT int emu_quantize(const EmuQuantizeArgs* args, EmuStats* stats, char* err, int err_len) {
  return run_quantize(*args, stats, err, err_len);
}

EMU_EXPORT int emu_num_configs() { return static_cast<int>(gemm::rocm::all_configs().size()); }

EMU_EXPORT int emu_config(int index, int64_t* out) {
  const auto configs = gemm::rocm::all_configs();
  if (index < 0 || index >= static_cast<int>(configs.size())) return 1;
  const auto& c = configs[index];
  const int64_t fields[] = {c.tile, c.split_k, c.group_m, tile_of(c).block_m, tile_of(c).block_n,
                            tile_of(c).threads(), tile_of(c).mfma_m()};
  std::memcpy(out, fields, sizeof(fields));
  return 0;
}

EMU_EXPORT void emu_select_config(const EmuGemmArgs* args, int cu_count, int64_t* out) {
  const auto c = gemm::rocm::select_config(to_gemm_args(*args), cu_count);
  out[0] = c.tile, out[1] = c.split_k, out[2] = c.group_m;
}

EMU_EXPORT int emu_gemm(const EmuGemmArgs* args, int config_index, EmuStats* stats, char* err, int err_len) {
  if (config_index < 0) return run_guarded(*args, heuristic_launch, stats, err, err_len);
  const auto configs = gemm::rocm::all_configs();
  if (config_index >= static_cast<int>(configs.size())) {
    copy_error("config index out of range: " + std::to_string(config_index), err, err_len);
    return 1;
  }
  return run_guarded(*args, launcher_for(configs[config_index]), stats, err, err_len);
}

EMU_EXPORT int emu_gemm_config(const EmuGemmArgs* args, int tile, int split_k, int group_m, EmuStats* stats,
                               char* err, int err_len) {
  return run_guarded(*args, launcher_for({tile, split_k, group_m}), stats, err, err_len);
}

EMU_EXPORT int emu_num_tuned() { return static_cast<int>(std::size(gemm::rocm::kTuned)); }

EMU_EXPORT void emu_tuned(int index, int64_t* out) {
  const auto& t = gemm::rocm::kTuned[index];
  const int64_t fields[] = {t.m, t.n, t.k, t.config.tile, t.config.split_k, t.config.group_m};
  std::memcpy(out, fields, sizeof(fields));
}

EMU_EXPORT void emu_set_deadlock_timeout_ms(int ms) { hip_emu::deadlock_timeout_ms = ms; }

EMU_EXPORT void emu_set_guard_side(int side) { g_guard_side = static_cast<hip_emu::GuardSide>(side); }

}  // extern "C"
