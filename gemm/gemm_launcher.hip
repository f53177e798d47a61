// ROCm gfx942 implementation of gemm::gemm_launch: pick a config (rocm_planner.h), stage operands the
// kernel cannot read directly into workspace, launch the GEMM (and the split-K reduce) on `stream`.
// Never synchronizes, allocates only through Workspace, returns errors as strings.
#include <hip/hip_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gemm_contract.h"
#include "rocm_gemm_kernel.h"
#include "rocm_planner.h"
#include "rocm_quantize_kernel.h"
#include "rocm_reduce_kernel.h"
#include "rocm_scale_kernel.h"
#include "rocm_transpose_kernel.h"

namespace gemm::rocm {

constexpr int64_t kWorkspaceAlign = 256;  // each workspace region starts on its own 256-byte line
constexpr int64_t kMaxGridX = 0x7FFFFFFF;
constexpr int64_t kMaxGridZ = 65535;
constexpr int kReduceBlocksPerCu = 8;     // enough resident blocks to stream the partials at full rate
constexpr float kFnScaleFactor = 2.0f;    // an e4m3fn byte read as e4m3fnuz is worth half

std::vector<RocmConfig> all_configs() { return {std::begin(kTestConfigs), std::end(kTestConfigs)}; }

RocmConfig select_config(const GemmArgs& args, int cu_count) {
  return select_config(args.m, args.n, args.k, cu_count);
}

namespace {

std::string hip_error(const char* what, hipError_t err) {
  return std::string("ROCm: ") + what + " failed: " + hipGetErrorString(err);
}

std::string check_launch(const char* kernel) {
  const hipError_t err = hipGetLastError();
  return err == hipSuccess ? std::string() : hip_error(kernel, err);
}

// How one FP8 operand reaches the kernel: read in place (K-major or M/N-major with 16-byte aligned
// pointer and stride), or through a K-major staging copy in workspace (any other strides).
struct Operand {
  const uint8_t* data;
  int64_t stride_row, stride_k;
  int64_t rows;
  bool needs_staging;
  int64_t staged_ld;  // bytes per staged row
};

bool aligned(const void* data, int64_t stride) {
  return reinterpret_cast<uintptr_t>(data) % kChunkBytes == 0 && stride % kChunkBytes == 0;
}

Operand plan_operand(const void* data, int64_t stride_row, int64_t stride_k, int64_t rows, int64_t k) {
  const bool k_major = stride_k == 1 && aligned(data, stride_row);
  const bool m_major = stride_row == 1 && aligned(data, stride_k);
  return {static_cast<const uint8_t*>(data), stride_row, stride_k, rows, !k_major && !m_major,
          ceil_div(k, kChunkBytes) * kChunkBytes};
}

OperandView view_of(const Operand& op, Fp8Format format) {
  const bool k_major = op.stride_k == 1 && aligned(op.data, op.stride_row);  // else M/N-major (see plan_operand)
  return {op.data, k_major ? op.stride_row : op.stride_k, op.rows, !k_major, format == Fp8Format::kE4M3FN};
}

int64_t align_up(int64_t bytes) { return ceil_div(bytes, kWorkspaceAlign) * kWorkspaceAlign; }

std::string stage_operand(Operand& op, uint8_t* dst, int64_t k, hipStream_t stream) {
  const bool rows_contiguous = op.stride_row == 1 && aligned(op.data, op.stride_k);
  const TransposeParams params{op.data, op.stride_row, op.stride_k, dst, op.staged_ld,
                               op.rows, k, ceil_div(k, kTransposeTile), rows_contiguous};
  const int64_t blocks = ceil_div(op.rows, kTransposeTile) * params.tiles_k;
  if (blocks > kMaxGridX) return "ROCm: operand too large to stage: " + std::to_string(blocks) + " tiles";
  hipLaunchKernelGGL(stage_k_major_kernel, dim3(static_cast<uint32_t>(blocks)), dim3(kTransposeThreads), 0, stream,
                     params);
  op.data = dst;
  op.stride_row = op.staged_ld;
  op.stride_k = 1;
  return check_launch("stage_k_major_kernel launch");
}

template <int kTileIndex, ScaleFormat kBScale>
void launch_gemm(const KernelParams& params, dim3 grid, hipStream_t stream) {
  hipLaunchKernelGGL((gemm_fp8_kernel<kTileIndex, kBScale>), grid, dim3(kTiles[kTileIndex].threads()), 0, stream,
                     params);
}

using GemmLauncher = void (*)(const KernelParams&, dim3, hipStream_t);
constexpr int kNumScaleFormats = 2;  // ScaleFormat::kF32, kUE8M0: the B scales' format

template <size_t... I>
constexpr std::array<std::array<GemmLauncher, kNumScaleFormats>, sizeof...(I)> make_launchers(
    std::index_sequence<I...>) {
  return {{{&launch_gemm<static_cast<int>(I), ScaleFormat::kF32>,
            &launch_gemm<static_cast<int>(I), ScaleFormat::kUE8M0>}...}};
}
constexpr auto kLaunchers = make_launchers(std::make_index_sequence<kNumTiles>());

bool is_fp8_format(Fp8Format f) { return f == Fp8Format::kE4M3FN || f == Fp8Format::kE4M3FNUZ; }
bool is_scale_format(ScaleFormat f) { return f == ScaleFormat::kF32 || f == ScaleFormat::kUE8M0; }
bool is_in_format(InFormat f) { return f == InFormat::kBF16 || f == InFormat::kFP16 || f == InFormat::kFP32; }
bool is_out_format(OutFormat f) {
  return f == OutFormat::kBF16 || f == OutFormat::kFP16 || f == OutFormat::kFP32;
}

}  // namespace

std::string launch_with_config(const GemmArgs& args, const RocmConfig& config, const Workspace& workspace,
                               hipStream_t stream) {
  const std::string where = "ROCm: ";
  if (config.tile < 0 || config.tile >= kNumTiles)
    return where + "config.tile must be in [0, " + std::to_string(kNumTiles) + "), got " + std::to_string(config.tile);
  if (config.split_k < 1 || config.split_k > kMaxGridZ)
    return where + "config.split_k must be in [1, 65535], got " + std::to_string(config.split_k);
  if (config.group_m < 1) return where + "config.group_m must be >= 1, got " + std::to_string(config.group_m);
  if (args.m < 1 || args.n < 1 || args.k < 1)
    return where + "m, n, k must be >= 1, got " + std::to_string(args.m) + ", " + std::to_string(args.n) + ", " +
           std::to_string(args.k);
  if (args.c_stride_n != 1) return where + "c must have stride 1 along n, got " + std::to_string(args.c_stride_n);
  if (!is_fp8_format(args.a_format) || !is_fp8_format(args.b_format))
    return where + "a_format/b_format must be e4m3fn (0) or e4m3fnuz (1), got " +
           std::to_string(static_cast<int>(args.a_format)) + "/" + std::to_string(static_cast<int>(args.b_format));
  if (!is_out_format(args.c_format))
    return where + "c_format must be bf16 (0), fp16 (1) or fp32 (2), got " +
           std::to_string(static_cast<int>(args.c_format));

  if (!is_scale_format(args.a_scale_format) || !is_scale_format(args.b_scale_format))
    return where + "a_scale_format/b_scale_format must be fp32 (0) or ue8m0 (1), got " +
           std::to_string(static_cast<int>(args.a_scale_format)) + "/" +
           std::to_string(static_cast<int>(args.b_scale_format));

  const TileShape& tile = kTiles[config.tile];
  const int64_t k_blocks = ceil_div(args.k, kBlockK);
  // No empty split: at most one split per K block, and the count that the per-split share implies.
  const int64_t blocks_per_split = ceil_div(k_blocks, std::min<int64_t>(config.split_k, k_blocks));
  const int64_t splits = ceil_div(k_blocks, blocks_per_split);
  const int64_t tiles_m = ceil_div(args.m, tile.block_m), tiles_n = ceil_div(args.n, tile.block_n);
  if (tiles_m * tiles_n > kMaxGridX)
    return where + "too many output tiles for one grid: " + std::to_string(tiles_m * tiles_n);

  Operand a = plan_operand(args.a, args.a_stride_m, args.a_stride_k, args.m, args.k);
  Operand b = plan_operand(args.b, args.b_stride_n, args.b_stride_k, args.n, args.k);

  // One workspace request: [staged A][staged B][split-K partials][fp32 A scales], each region
  // 256-byte aligned.
  const int64_t a_bytes = a.needs_staging ? align_up(args.m * a.staged_ld) : 0;
  const int64_t b_bytes = b.needs_staging ? align_up(args.n * b.staged_ld) : 0;
  const int64_t partial_bytes = splits > 1 ? align_up(splits * args.m * args.n * int64_t{sizeof(float)}) : 0;
  const bool expand_a_scales = args.a_scale_format == ScaleFormat::kUE8M0;
  const int64_t a_scale_ld = ceil_div(args.m, kScalesPerLoad) * kScalesPerLoad;
  const int64_t a_scale_bytes = expand_a_scales ? align_up(k_blocks * a_scale_ld * int64_t{sizeof(float)}) : 0;
  const int64_t total = a_bytes + b_bytes + partial_bytes + a_scale_bytes;
  uint8_t* scratch = nullptr;
  if (total > 0) {
    if (workspace.allocate == nullptr) return where + "workspace.allocate is null but " + std::to_string(total) + " bytes are needed";
    scratch = static_cast<uint8_t*>(workspace.get(static_cast<size_t>(total)));
    if (scratch == nullptr) return where + "workspace allocation of " + std::to_string(total) + " bytes failed";
  }
  if (a.needs_staging)
    if (std::string err = stage_operand(a, scratch, args.k, stream); !err.empty()) return err;
  if (b.needs_staging)
    if (std::string err = stage_operand(b, scratch + a_bytes, args.k, stream); !err.empty()) return err;
  float* partials = splits > 1 ? reinterpret_cast<float*>(scratch + a_bytes + b_bytes) : nullptr;
  const float* a_scale = static_cast<const float*>(args.a_scale);
  int64_t a_scale_stride_m = args.a_scale_stride_m, a_scale_stride_k = args.a_scale_stride_k;
  if (expand_a_scales) {
    float* expanded = reinterpret_cast<float*>(scratch + a_bytes + b_bytes + partial_bytes);
    const ScaleExpandParams expand{static_cast<const uint8_t*>(args.a_scale), args.a_scale_stride_m,
                                   args.a_scale_stride_k, expanded, a_scale_ld, args.m, k_blocks};
    const int64_t blocks = std::min<int64_t>(ceil_div(args.m * k_blocks, kScaleExpandThreads), kMaxGridX);
    hipLaunchKernelGGL(expand_ue8m0_scales_kernel, dim3(static_cast<uint32_t>(blocks)), dim3(kScaleExpandThreads), 0,
                       stream, expand);
    if (std::string err = check_launch("expand_ue8m0_scales_kernel launch"); !err.empty()) return err;
    a_scale = expanded, a_scale_stride_m = 1, a_scale_stride_k = a_scale_ld;
  }

  const bool fn_a = args.a_format == Fp8Format::kE4M3FN, fn_b = args.b_format == Fp8Format::kE4M3FN;
  KernelParams params{};
  params.a = view_of(a, args.a_format);
  params.b = view_of(b, args.b_format);
  params.a_scale = a_scale;
  params.a_scale_stride_m = a_scale_stride_m;
  params.a_scale_stride_k = a_scale_stride_k;
  params.a_scale_vector = a_scale_stride_m == 1 && aligned(a_scale, a_scale_stride_k * int64_t{sizeof(float)});
  params.b_scale = args.b_scale;
  params.b_scale_stride_n = args.b_scale_stride_n;
  params.b_scale_stride_k = args.b_scale_stride_k;
  params.out = splits > 1 ? static_cast<void*>(partials) : args.c;
  params.out_stride_m = splits > 1 ? args.n : args.c_stride_m;
  params.split_stride = splits > 1 ? args.m * args.n : 0;
  params.m = args.m;
  params.n = args.n;
  params.k = args.k;
  params.k_blocks_per_split = static_cast<int32_t>(blocks_per_split);
  params.tiles_m = static_cast<int32_t>(tiles_m);
  params.tiles_n = static_cast<int32_t>(tiles_n);
  params.group_m = config.group_m;
  params.scale_factor = (fn_a ? kFnScaleFactor : 1.0f) * (fn_b ? kFnScaleFactor : 1.0f);
  params.out_format = splits > 1 ? OutFormat::kFP32 : args.c_format;

  const dim3 grid(static_cast<uint32_t>(tiles_m * tiles_n), 1, static_cast<uint32_t>(splits));
  kLaunchers[config.tile][static_cast<int>(args.b_scale_format)](params, grid, stream);
  if (std::string err = check_launch("gemm_fp8_kernel launch"); !err.empty()) return err;
  if (splits == 1) return {};

  int device = 0, cu_count = kMi300xCuCount;
  if (hipError_t err = hipGetDevice(&device); err != hipSuccess) return hip_error("hipGetDevice", err);
  if (hipError_t err = hipDeviceGetAttribute(&cu_count, hipDeviceAttributeMultiprocessorCount, device); err != hipSuccess)
    return hip_error("hipDeviceGetAttribute(MultiprocessorCount)", err);
  const int64_t reduce_blocks =
      std::min<int64_t>(ceil_div(args.m * args.n, kReduceThreads), int64_t{cu_count} * kReduceBlocksPerCu);
  const ReduceParams reduce{partials, static_cast<int32_t>(splits), args.m, args.n, args.c, args.c_stride_m, args.c_format};
  hipLaunchKernelGGL(splitk_reduce_kernel, dim3(static_cast<uint32_t>(reduce_blocks)), dim3(kReduceThreads), 0, stream,
                     reduce);
  return check_launch("splitk_reduce_kernel launch");
}

}  // namespace gemm::rocm

std::string gemm::gemm_launch(const GemmArgs& args, const Workspace& workspace, void* stream) {
  if (args.num_groups != 0) return "grouped GEMMs are not implemented by the ROCm backend";
  int device = 0, cu_count = 0;
  if (hipError_t err = hipGetDevice(&device); err != hipSuccess) return rocm::hip_error("hipGetDevice", err);
  if (hipError_t err = hipDeviceGetAttribute(&cu_count, hipDeviceAttributeMultiprocessorCount, device); err != hipSuccess)
    return rocm::hip_error("hipDeviceGetAttribute(MultiprocessorCount)", err);
  return rocm::launch_with_config(args, rocm::select_config(args, cu_count), workspace,
                                  static_cast<hipStream_t>(stream));
}

std::string gemm::quantize_launch(const QuantizeArgs& args, void* stream) {
  using namespace rocm;
  const std::string where = "ROCm quantize: ";
  if (args.m < 1 || args.k < 1)
    return where + "m, k must be >= 1, got " + std::to_string(args.m) + ", " + std::to_string(args.k);
  if (!is_in_format(args.x_format))
    return where + "x_format must be bf16 (0), fp16 (1) or fp32 (2), got " + std::to_string(static_cast<int>(args.x_format));
  if (!is_fp8_format(args.q_format))
    return where + "q_format must be e4m3fn (0) or e4m3fnuz (1), got " + std::to_string(static_cast<int>(args.q_format));
  if (!is_scale_format(args.scale_format))
    return where + "scale_format must be fp32 (0) or ue8m0 (1), got " +
           std::to_string(static_cast<int>(args.scale_format));
  const int64_t k_blocks = ceil_div(args.k, kScaleBlockK);
  const int64_t blocks = ceil_div(args.m * k_blocks, kQuantGroupsPerBlock);
  if (blocks > kMaxGridX) return where + "too many groups for one grid: " + std::to_string(args.m * k_blocks);
  const int64_t x_bytes = args.x_format == InFormat::kFP32 ? 4 : 2;
  constexpr int64_t kQStoreBytes = kQuantPerThread;
  const bool fnuz = args.q_format == Fp8Format::kE4M3FNUZ;
  const bool ue8m0 = args.scale_format == ScaleFormat::kUE8M0;
  QuantizeParams params{};
  params.x = static_cast<const uint8_t*>(args.x);
  params.x_stride_m = args.x_stride_m;
  params.x_format = args.x_format;
  params.x_vector = aligned(args.x, args.x_stride_m * x_bytes);
  params.q = static_cast<uint8_t*>(args.q);
  params.q_stride_m = args.q_stride_m;
  params.q_fnuz = fnuz;
  params.q_vector = reinterpret_cast<uintptr_t>(args.q) % kQStoreBytes == 0 && args.q_stride_m % kQStoreBytes == 0;
  params.fp8_max = fnuz ? kE4M3FnuzMax : kE4M3FnMax;
  params.scale = args.scale;
  params.scale_stride_m = args.scale_stride_m;
  params.scale_stride_k = args.scale_stride_k;
  params.scale_ue8m0 = ue8m0;
  params.pow2 = args.pow2_scale || ue8m0;
  params.static_scale = args.static_scale;
  params.m = args.m;
  params.k = args.k;
  params.k_blocks = k_blocks;
  hipLaunchKernelGGL(quantize_fp8_kernel, dim3(static_cast<uint32_t>(blocks)), dim3(kQuantThreads), 0,
                     static_cast<hipStream_t>(stream), params);
  return check_launch("quantize_fp8_kernel launch");
}
