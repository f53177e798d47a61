// ROCm gfx942 implementation of gemm::gemm_launch: pick a config (rocm_planner.h), stage operands the
// kernel cannot read directly into workspace, launch the GEMM (and the split-K reduce) on `stream`.
// Grouped calls (num_groups > 0) run the grouped instance of the same kernel, after a device-side sort
// of the rows when groups come as row ids (contiguous segments and the masked layout are read in
// place). Never synchronizes, allocates only through Workspace, returns errors as strings.
#include <hip/hip_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gemm_contract.h"
#include "rocm_gemm_kernel.h"
#include "rocm_group_sort_kernel.h"
#include "rocm_planner.h"
#include "rocm_quantize_kernel.h"
#include "rocm_reduce_kernel.h"
#include "rocm_scale_kernel.h"
#include "rocm_scatter_kernel.h"
#include "rocm_transpose_kernel.h"

namespace gemm::rocm {

constexpr int64_t kWorkspaceAlign = 256;  // each workspace region starts on its own 256-byte line
constexpr int64_t kMaxGridX = 0x7FFFFFFF;
constexpr int64_t kMaxGridZ = 65535;
constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();  // grouped row indices and group ids are int32
constexpr int kReduceBlocksPerCu = 8;     // enough resident blocks to stream the partials at full rate
constexpr float kFnScaleFactor = 2.0f;    // an e4m3fn byte read as e4m3fnuz is worth half

std::vector<RocmConfig> all_configs() { return {std::begin(kTestConfigs), std::end(kTestConfigs)}; }

namespace {

std::string hip_error(const char* what, hipError_t err) {
  return std::string("ROCm: ") + what + " failed: " + hipGetErrorString(err);
}

std::string check_launch(const char* kernel) {
  const hipError_t err = hipGetLastError();
  return err == hipSuccess ? std::string() : hip_error(kernel, err);
}

// How one FP8 operand reaches the kernel: read in place (K-major, or M/N-major with 16-byte aligned
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

// In place, the kernel addresses an operand tile with 32-bit per-lane offsets (kMaxOperandStride).
bool k_major_readable(const Operand& op) {
  return op.stride_k == 1 && aligned(op.data, op.stride_row) && op.stride_row <= kMaxOperandStride;
}
bool mn_major_readable(const Operand& op) {
  return op.stride_row == 1 && aligned(op.data, op.stride_k) && op.stride_k <= kMaxOperandStride;
}

Operand plan_operand(const void* data, int64_t stride_row, int64_t stride_k, int64_t rows, int64_t k) {
  Operand op{static_cast<const uint8_t*>(data), stride_row, stride_k, rows, false, ceil_div(k, kChunkBytes) * kChunkBytes};
  op.needs_staging = !k_major_readable(op) && !mn_major_readable(op);
  return op;
}

// The storage order of both operands (a kernel template parameter): M/N-major only when both are
// read in place that way (the challenge layout); otherwise every operand that is not K-major in
// place is staged (mixed orders included).
OperandMajor plan_major(Operand& a, Operand& b, bool allow_mn_major) {
  if (allow_mn_major && !a.needs_staging && !b.needs_staging && mn_major_readable(a) && mn_major_readable(b))
    return OperandMajor::kMN;
  a.needs_staging = a.needs_staging || !k_major_readable(a);
  b.needs_staging = b.needs_staging || !k_major_readable(b);
  return OperandMajor::kK;
}

OperandView view_of(const Operand& op, Fp8Format format, OperandMajor major) {
  return {op.data, major == OperandMajor::kK ? op.stride_row : op.stride_k, op.rows,
          format == Fp8Format::kE4M3FN ? ~0u : 0u};
}

// A dense call's operands as the kernel will read them, and the instance that reads them: the one rule
// both select_config and launch_with_config follow.
struct DensePlan {
  Operand a, b;
  InstanceVariant variant;
};
DensePlan plan_dense(const GemmArgs& args) {
  Operand a = plan_operand(args.a, args.a_stride_m, args.a_stride_k, args.m, args.k);
  Operand b = plan_operand(args.b, args.b_stride_n, args.b_stride_k, args.n, args.k);
  const OperandMajor major = plan_major(a, b, true);
  const bool fold = args.a_format == Fp8Format::kE4M3FN || args.b_format == Fp8Format::kE4M3FN;
  return {a, b, {major, args.b_scale_format, fold}};
}

int64_t align_up(int64_t bytes) { return ceil_div(bytes, kWorkspaceAlign) * kWorkspaceAlign; }

// src_rows: row r of the copy is row src_rows[r] of the operand (a grouped call's sorted rows).
std::string stage_operand(Operand& op, uint8_t* dst, int64_t k, hipStream_t stream, const int32_t* src_rows = nullptr) {
  const bool rows_contiguous = src_rows == nullptr && op.stride_row == 1 && aligned(op.data, op.stride_k);
  const TransposeParams params{op.data, op.stride_row, op.stride_k, dst, op.staged_ld,
                               op.rows, k, ceil_div(k, kTransposeTile), rows_contiguous, src_rows};
  const int64_t blocks = ceil_div(op.rows, kTransposeTile) * params.tiles_k;
  if (blocks > kMaxGridX) return "ROCm: operand too large to stage: " + std::to_string(blocks) + " tiles";
  hipLaunchKernelGGL(stage_k_major_kernel, dim3(static_cast<uint32_t>(blocks)), dim3(kTransposeThreads), 0, stream,
                     params);
  op.data = dst;
  op.stride_row = op.staged_ld;
  op.stride_k = 1;
  return check_launch("stage_k_major_kernel launch");
}

template <bool kGrouped, int kTileIndex, ScaleFormat kBScale, OperandMajor kMajor, bool kFold>
void launch_gemm(const ParamsFor<kGrouped>& params, dim3 grid, hipStream_t stream) {
  hipLaunchKernelGGL((gemm_fp8_kernel<kTileIndex, kBScale, kGrouped, kMajor, kFold>), grid,
                     dim3(kTiles[kTileIndex].threads()), 0, stream, params);
}

template <bool kGrouped>
using GemmLauncher = void (*)(const ParamsFor<kGrouped>&, dim3, hipStream_t);

// The instances of one tile and storage order: [B scale format][fold].
template <bool kGrouped, int kTile, OperandMajor kMajor>
constexpr std::array<std::array<GemmLauncher<kGrouped>, kNumFolds>, kNumScaleFormats> kTileLaunchers = {{
    {{&launch_gemm<kGrouped, kTile, ScaleFormat::kF32, kMajor, false>, &launch_gemm<kGrouped, kTile, ScaleFormat::kF32, kMajor, true>}},
    {{&launch_gemm<kGrouped, kTile, ScaleFormat::kUE8M0, kMajor, false>, &launch_gemm<kGrouped, kTile, ScaleFormat::kUE8M0, kMajor, true>}},
}};
template <bool kGrouped, OperandMajor kMajor, size_t... I>
constexpr std::array<std::array<std::array<GemmLauncher<kGrouped>, kNumFolds>, kNumScaleFormats>, sizeof...(I)>
make_launchers(std::index_sequence<I...>) {
  return {{kTileLaunchers<kGrouped, static_cast<int>(I), kMajor>...}};
}
// [tile][B scale format][fold]: dense instances for both storage orders; grouped ones read K-major
// operands only (the launcher stages the others), which halves their count.
constexpr auto kDenseLaunchers = std::array{make_launchers<false, OperandMajor::kK>(std::make_index_sequence<kNumTiles>()),
                                            make_launchers<false, OperandMajor::kMN>(std::make_index_sequence<kNumTiles>())};
constexpr auto kGroupedLaunchers = make_launchers<true, OperandMajor::kK>(std::make_index_sequence<kNumTiles>());

bool is_fp8_format(Fp8Format f) { return f == Fp8Format::kE4M3FN || f == Fp8Format::kE4M3FNUZ; }
bool is_scale_format(ScaleFormat f) { return f == ScaleFormat::kF32 || f == ScaleFormat::kUE8M0; }
bool is_in_format(InFormat f) { return f == InFormat::kBF16 || f == InFormat::kFP16 || f == InFormat::kFP32; }
bool is_out_format(OutFormat f) {
  return f == OutFormat::kBF16 || f == OutFormat::kFP16 || f == OutFormat::kFP32;
}

// A scales as the kernel reads them: fp32, M-contiguous (4 rows per 16-byte load), stride_k between K blocks.
struct AScales {
  const float* data;
  int64_t stride_k;
};

// Whether the caller's A scales are already what the kernel reads: fp32, M-contiguous, 16-byte aligned
// columns (the challenge layout). Others are expanded into workspace first (expand_a_scales).
bool a_scales_readable(const GemmArgs& args) {
  return args.a_scale_format == ScaleFormat::kF32 && args.a_scale_stride_m == 1 &&
         aligned(args.a_scale, args.a_scale_stride_k * int64_t{sizeof(float)});
}

int64_t a_scale_ld(int64_t m) { return ceil_div(m, kScalesPerLoad) * kScalesPerLoad; }

// A scales (fp32 or UE8M0, rows optionally gathered through src_rows) -> fp32 [k_blocks][a_scale_ld(m)] at dst.
std::string expand_a_scales(const GemmArgs& args, float* dst, const int32_t* src_rows, hipStream_t stream, AScales& out) {
  const int64_t k_blocks = ceil_div(args.k, kBlockK), ld = a_scale_ld(args.m);
  const ScaleExpandParams expand{args.a_scale, args.a_scale_stride_m, args.a_scale_stride_k,
                                 args.a_scale_format == ScaleFormat::kUE8M0, src_rows, dst, ld, args.m, k_blocks};
  const int64_t blocks = std::min<int64_t>(ceil_div(args.m * k_blocks, kScaleExpandThreads), kMaxGridX);
  hipLaunchKernelGGL(expand_a_scales_kernel, dim3(static_cast<uint32_t>(blocks)), dim3(kScaleExpandThreads), 0, stream,
                     expand);
  out = {dst, ld};
  return check_launch("expand_a_scales_kernel launch");
}

// The kernel parameters every launch shares (split-K and output fields are the caller's).
KernelParams gemm_params(const GemmArgs& args, const Operand& a, const Operand& b, OperandMajor major,
                         const AScales& a_scale, const TileShape& tile, const RocmConfig& config, int64_t tiles_m,
                         int64_t k_blocks_per_split) {
  const bool fn_a = args.a_format == Fp8Format::kE4M3FN, fn_b = args.b_format == Fp8Format::kE4M3FN;
  KernelParams params{};
  params.a = view_of(a, args.a_format, major);
  params.b = view_of(b, args.b_format, major);
  params.a_scale = a_scale.data;
  params.a_scale_stride_k = a_scale.stride_k;
  params.b_scale = args.b_scale;
  params.b_scale_stride_n = args.b_scale_stride_n;
  params.b_scale_stride_k = args.b_scale_stride_k;
  params.m = args.m;
  params.n = args.n;
  params.k = args.k;
  params.schedule = {static_cast<int32_t>(tiles_m), static_cast<int32_t>(ceil_div(args.n, tile.block_n)), config.group_m,
                     kMi300xXcds, static_cast<int32_t>(k_blocks_per_split)};
  params.scale_factor = (fn_a ? kFnScaleFactor : 1.0f) * (fn_b ? kFnScaleFactor : 1.0f);
  params.out_format = args.c_format;
  return params;
}

int64_t out_bytes(OutFormat format) { return format == OutFormat::kFP32 ? 4 : 2; }

// Grouped GEMM (num_groups > 0): the rows of each group times its own B, unsplit (docs/rocm.md).
// group_ends and group_rows (the masked layout): the grouped kernel on A as it is. row_group: a counting
// sort of the rows by group (rocm_group_sort_kernel.h), A rows and scales gathered into sorted order, the
// grouped kernel into a sorted C in workspace, the non-sentinel rows copied back to C (rocm_scatter_kernel.h).
std::string launch_grouped(const GemmArgs& args, const RocmConfig& config, const Workspace& workspace,
                           hipStream_t stream) {
  const std::string where = "ROCm grouped: ";
  if (args.num_groups < 1 || args.num_groups >= kMaxInt32)  // the sort's bins (groups + 1) are int32
    return where + "num_groups must be in [1, 2^31 - 1), got " + std::to_string(args.num_groups);
  if (std::string err = grouped_routing_error(args); !err.empty()) return where + err;
  if (config.split_k != 1)
    return where + "grouped GEMMs run unsplit: config.split_k must be 1, got " + std::to_string(config.split_k);
  if (args.m > kMaxInt32) return where + "m must be < 2^31 (int32 row indices), got " + std::to_string(args.m);
  const bool masked = args.group_rows != nullptr;
  const int64_t stride = args.group_row_stride;

  const TileShape& tile = kTiles[config.tile];
  const bool by_row_id = args.row_group != nullptr;
  const int64_t groups = args.num_groups, k_blocks = ceil_div(args.k, kBlockK);
  const int64_t tiles_m = masked ? groups * masked_group_tiles(stride, tile.block_m)
                                 : grouped_row_tiles(args.m, groups, tile.block_m);
  const int64_t tiles_n = ceil_div(args.n, tile.block_n);
  if (tiles_m * tiles_n > kMaxGridX)
    return where + "too many output tiles for one grid: " + std::to_string(tiles_m * tiles_n);

  Operand a = plan_operand(args.a, args.a_stride_m, args.a_stride_k, args.m, args.k);
  a.needs_staging = a.needs_staging || by_row_id;  // rows by id: gathered into sorted order
  Operand b = plan_operand(args.b, args.b_stride_n, args.b_stride_k, args.n, args.k);
  b.needs_staging = b.needs_staging || args.b_stride_group % kChunkBytes != 0;  // every group's B 16-byte aligned
  const OperandMajor major = plan_major(a, b, false);
  const bool expand_scales = by_row_id || !a_scales_readable(args);
  const int64_t chunks = ceil_div(args.m, kSortChunk);

  // One workspace request: [sort: counts, bin starts, group ends, perm][A][B][fp32 A scales][sorted C].
  const int64_t counts_bytes = by_row_id ? align_up(chunks * (groups + 1) * 4) : 0;
  const int64_t starts_bytes = by_row_id ? align_up((groups + 1) * 4) : 0;
  const int64_t ends_bytes = by_row_id ? align_up(groups * 4) : 0;
  const int64_t perm_bytes = by_row_id ? align_up(args.m * 4) : 0;
  const int64_t a_bytes = a.needs_staging ? align_up(args.m * a.staged_ld) : 0;
  const int64_t b_bytes = b.needs_staging ? align_up(groups * args.n * b.staged_ld) : 0;
  const int64_t a_scale_bytes = expand_scales ? align_up(k_blocks * a_scale_ld(args.m) * int64_t{sizeof(float)}) : 0;
  const int64_t c_bytes = by_row_id ? align_up(args.m * args.n * out_bytes(args.c_format)) : 0;
  const int64_t total = counts_bytes + starts_bytes + ends_bytes + perm_bytes + a_bytes + b_bytes + a_scale_bytes + c_bytes;
  uint8_t* scratch = nullptr;
  if (total > 0) {
    if (workspace.allocate == nullptr) return where + "workspace.allocate is null but " + std::to_string(total) + " bytes are needed";
    scratch = static_cast<uint8_t*>(workspace.get(static_cast<size_t>(total)));
    if (scratch == nullptr) return where + "workspace allocation of " + std::to_string(total) + " bytes failed";
  }
  uint8_t* next = scratch;
  auto region = [&next](int64_t bytes) {
    uint8_t* start = next;
    next += bytes;
    return start;
  };
  GroupSortParams sort{args.row_group, args.m, static_cast<int32_t>(groups), static_cast<int32_t>(chunks),
                       reinterpret_cast<int32_t*>(region(counts_bytes)), reinterpret_cast<int32_t*>(region(starts_bytes)),
                       reinterpret_cast<int32_t*>(region(ends_bytes)), reinterpret_cast<int32_t*>(region(perm_bytes))};
  uint8_t* a_staged = region(a_bytes);
  uint8_t* b_staged = region(b_bytes);
  float* a_scale_expanded = reinterpret_cast<float*>(region(a_scale_bytes));
  uint8_t* c_sorted = region(c_bytes);
  const int32_t* sorted_rows = by_row_id ? sort.perm : nullptr;

  if (by_row_id) {
    hipLaunchKernelGGL(group_rows_kernel, dim3(static_cast<uint32_t>(chunks)), dim3(kSortThreads), 0, stream, sort, 0);
    if (std::string err = check_launch("group_rows_kernel (count) launch"); !err.empty()) return err;
    hipLaunchKernelGGL(group_offsets_kernel, dim3(1), dim3(kSortThreads), 0, stream, sort);
    if (std::string err = check_launch("group_offsets_kernel launch"); !err.empty()) return err;
    hipLaunchKernelGGL(group_rows_kernel, dim3(static_cast<uint32_t>(chunks)), dim3(kSortThreads), 0, stream, sort, 1);
    if (std::string err = check_launch("group_rows_kernel (scatter) launch"); !err.empty()) return err;
  }
  if (a.needs_staging)
    if (std::string err = stage_operand(a, a_staged, args.k, stream, sorted_rows); !err.empty()) return err;
  int64_t b_stride_group = args.b_stride_group;
  if (b.needs_staging) {
    const int64_t staged_group = args.n * b.staged_ld;
    for (int64_t g = 0; g < groups; ++g) {
      Operand group_b = b;
      group_b.data += g * args.b_stride_group;
      if (std::string err = stage_operand(group_b, b_staged + g * staged_group, args.k, stream); !err.empty()) return err;
    }
    b = {b_staged, b.staged_ld, 1, args.n, false, b.staged_ld};
    b_stride_group = staged_group;
  }
  AScales a_scale{static_cast<const float*>(args.a_scale), args.a_scale_stride_k};
  if (expand_scales)
    if (std::string err = expand_a_scales(args, a_scale_expanded, sorted_rows, stream, a_scale); !err.empty()) return err;

  GroupedKernelParams params{};
  static_cast<KernelParams&>(params) = gemm_params(args, a, b, major, a_scale, tile, config, tiles_m, k_blocks);
  params.out = by_row_id ? static_cast<void*>(c_sorted) : args.c;
  params.out_stride_m = by_row_id ? args.n : args.c_stride_m;
  params.split_stride = 0;
  params.group_ends = by_row_id ? sort.group_ends : args.group_ends;
  params.group_rows = args.group_rows;
  params.group_row_stride = stride;
  params.num_groups = static_cast<int32_t>(groups);
  params.b_stride_group = b_stride_group;
  params.b_scale_stride_group = args.b_scale_stride_group;
  kGroupedLaunchers[config.tile][static_cast<int>(args.b_scale_format)][params.a.fold_mask | params.b.fold_mask ? 1 : 0](
      params, dim3(static_cast<uint32_t>(tiles_m * tiles_n)), stream);
  if (std::string err = check_launch("gemm_fp8_kernel (grouped) launch"); !err.empty()) return err;
  if (!by_row_id) return {};

  const ScatterParams scatter{c_sorted, static_cast<uint8_t*>(args.c), args.c_stride_m, sort.perm,
                              sort.group_ends + (groups - 1), args.m, args.n,
                              static_cast<int32_t>(out_bytes(args.c_format))};
  const int64_t blocks = std::min<int64_t>(ceil_div(args.m * args.n, kScatterThreads), kMaxGridX);
  hipLaunchKernelGGL(scatter_rows_kernel, dim3(static_cast<uint32_t>(blocks)), dim3(kScatterThreads), 0, stream, scatter);
  return check_launch("scatter_rows_kernel launch");
}

}  // namespace

RocmConfig select_config(const GemmArgs& args, int cu_count) {
  return select_config(args.m, args.n, args.k, plan_dense(args).variant, cu_count);
}

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
  if (ceil_div(args.k, kChunkBytes) * kChunkBytes > kMaxOperandStride)  // a staged operand's row stride
    return where + "k must be <= " + std::to_string(kMaxOperandStride) + ", got " + std::to_string(args.k);
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
  if (args.num_groups != 0) return launch_grouped(args, config, workspace, stream);

  const TileShape& tile = kTiles[config.tile];
  const int64_t k_blocks = ceil_div(args.k, kBlockK);
  // No empty split: at most one split per K block, and the count that the per-split share implies.
  const int64_t blocks_per_split = ceil_div(k_blocks, std::min<int64_t>(config.split_k, k_blocks));
  const int64_t splits = ceil_div(k_blocks, blocks_per_split);
  const int64_t tiles_m = ceil_div(args.m, tile.block_m), tiles_n = ceil_div(args.n, tile.block_n);
  if (tiles_m * tiles_n > kMaxGridX)
    return where + "too many output tiles for one grid: " + std::to_string(tiles_m * tiles_n);

  auto [a, b, variant] = plan_dense(args);

  // One workspace request: [staged A][staged B][split-K partials][fp32 A scales], each region
  // 256-byte aligned.
  const int64_t a_bytes = a.needs_staging ? align_up(args.m * a.staged_ld) : 0;
  const int64_t b_bytes = b.needs_staging ? align_up(args.n * b.staged_ld) : 0;
  const int64_t partial_bytes = splits > 1 ? align_up(splits * args.m * args.n * int64_t{sizeof(float)}) : 0;
  const bool expand_scales = !a_scales_readable(args);
  const int64_t a_scale_bytes = expand_scales ? align_up(k_blocks * a_scale_ld(args.m) * int64_t{sizeof(float)}) : 0;
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
  AScales a_scale{static_cast<const float*>(args.a_scale), args.a_scale_stride_k};
  if (expand_scales) {
    float* expanded = reinterpret_cast<float*>(scratch + a_bytes + b_bytes + partial_bytes);
    if (std::string err = expand_a_scales(args, expanded, nullptr, stream, a_scale); !err.empty()) return err;
  }

  KernelParams params = gemm_params(args, a, b, variant.major, a_scale, tile, config, tiles_m, blocks_per_split);
  params.out = splits > 1 ? static_cast<void*>(partials) : args.c;
  params.out_stride_m = splits > 1 ? args.n : args.c_stride_m;
  params.split_stride = splits > 1 ? args.m * args.n : 0;
  params.out_format = splits > 1 ? OutFormat::kFP32 : args.c_format;

  const dim3 grid(static_cast<uint32_t>(tiles_m * tiles_n), 1, static_cast<uint32_t>(splits));
  kDenseLaunchers[static_cast<int>(variant.major)][config.tile][static_cast<int>(variant.b_scale)][variant.fold ? 1 : 0](
      params, grid, stream);
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
  int device = 0, cu_count = 0;
  if (hipError_t err = hipGetDevice(&device); err != hipSuccess) return rocm::hip_error("hipGetDevice", err);
  if (hipError_t err = hipDeviceGetAttribute(&cu_count, hipDeviceAttributeMultiprocessorCount, device); err != hipSuccess)
    return rocm::hip_error("hipDeviceGetAttribute(MultiprocessorCount)", err);
  const rocm::RocmConfig config = args.num_groups != 0 ? rocm::select_grouped_config(args.m, args.num_groups)
                                                       : rocm::select_config(args, cu_count);
  return rocm::launch_with_config(args, config, workspace, static_cast<hipStream_t>(stream));
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
