// CUDA sm_90a implementation of gemm::gemm_launch (see gemm/gemm_contract.h).
//
// Per call: pick a plan (planner.h), make A and B TMA-readable (repack into workspace only
// when their layout needs it, both in one launch where they share a loader), encode the tensor maps,
// zero the stream-K flags, transpose the A scales where TMA must read them and cannot in place, and
// launch the persistent kernel on the caller's stream (as a programmatic dependent of the kernel before
// it). Never synchronizes, never prints.
#include <cuda.h>
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <string>
#include <utility>

#include "../gemm_contract.h"
#include "aux_kernels.cuh"
#include "forced_plan.h"
#include "gemm_kernel.cuh"
#include "grouped_planner.h"
#include "grouped_prep_kernels.cuh"
#include "hopper_layout.h"
#include "kernel_params.h"
#include "planner.h"
#include "tile_configs.h"

namespace gemm {
namespace {

using cuda::KernelParams;
using cuda::TensorMaps;
using cuda::Plan;
using cuda::TileConfig;
using cuda::kTileConfigs;

constexpr int kMaxDevices = 64;
constexpr unsigned kTensorMapDriverVersion = 12000;  // cuTensorMapEncodeTiled's ABI since CUDA 12.0
constexpr int64_t kMaxGridY = 65535;

std::string cuda_error(const char* what, cudaError_t err) {
  return std::string("gemm (CUDA): ") + what + " failed: " + cudaGetErrorString(err);
}

// Counters a kernel counts up in (stream-K flags, tile claims), zeroed on `stream` ahead of it.
std::string zero_counters(int* counters, size_t count, const char* what, cudaStream_t stream) {
  if (const cudaError_t e = cudaMemsetAsync(counters, 0, count * sizeof(int), stream); e != cudaSuccess) {
    return cuda_error((std::string("cudaMemsetAsync of ") + what).c_str(), e);
  }
  return {};
}

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// The driver entry point through the runtime: no link against libcuda is needed.
EncodeTiledFn tensor_map_encoder() {
  static const EncodeTiledFn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, kTensorMapDriverVersion,
                                         cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      return static_cast<EncodeTiledFn>(nullptr);
    }
    return reinterpret_cast<EncodeTiledFn>(p);
  }();
  return fn;
}

// A K-major FP8 operand as TMA will read it.
struct Operand {
  const uint8_t* ptr = nullptr;
  int64_t row_bytes = 0;
};

bool tma_readable(const void* ptr, int64_t rows, int64_t k, int64_t stride_row, int64_t stride_k) {
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  if (addr % cuda::hopper::kTmaAlignBytes != 0) return false;
  if (k > 1 && stride_k != 1) return false;
  if (rows == 1) return true;
  return stride_row >= k && stride_row % cuda::hopper::kTmaAlignBytes == 0;
}

// Operand repacks of one call grouped by loader, [0] byte loads and [1] uint4 column loads: a launch each.
using RepackGroups = std::array<cuda::RepackJobs, 2>;

// Returns the operand TMA reads: the tensor itself, or a K-major copy in workspace that a job in
// `repacks` then describes (launch_repacks makes it).
std::string prepare_operand(const char* name, const void* ptr, int64_t rows, int64_t k,
                            int64_t stride_row, int64_t stride_k, const Workspace& ws,
                            RepackGroups& repacks, Operand& op) {
  const int64_t packed_ld = cuda::cdiv(k, cuda::hopper::kTmaAlignBytes) * cuda::hopper::kTmaAlignBytes;
  if (tma_readable(ptr, rows, k, stride_row, stride_k)) {
    op.ptr = static_cast<const uint8_t*>(ptr);
    op.row_bytes = rows == 1 ? packed_ld : stride_row;
    return {};
  }
  const size_t bytes = static_cast<size_t>(rows) * static_cast<size_t>(packed_ld);
  auto* dst = static_cast<uint8_t*>(ws.get(bytes));
  if (dst == nullptr) {
    return std::string("gemm (CUDA): workspace allocation of ") + std::to_string(bytes) +
           " bytes for the K-major copy of `" + name + "` failed";
  }
  // uint4 column loads need an M/N-major source whose base and column stride are 16-byte aligned.
  const bool vector_loads = stride_row == 1 && reinterpret_cast<uintptr_t>(ptr) % cuda::kRepackVecBytes == 0 &&
                            (k == 1 || stride_k % cuda::kRepackVecBytes == 0);
  cuda::RepackJobs& jobs = repacks[vector_loads ? 1 : 0];
  jobs.job[jobs.count] = cuda::RepackJob{static_cast<const uint8_t*>(ptr), rows, k, stride_row, stride_k, dst,
                                         packed_ld};
  jobs.row_tiles[jobs.count++] = cuda::cdiv(rows, cuda::kRepackTile);
  op.ptr = dst;
  op.row_bytes = packed_ld;
  return {};
}

std::string launch_repacks(const RepackGroups& repacks, int64_t k, cudaStream_t stream) {
  for (int vector_loads = 0; vector_loads < 2; ++vector_loads) {
    const cuda::RepackJobs& jobs = repacks[vector_loads];
    if (jobs.count == 0) continue;
    const int64_t row_tiles = jobs.row_tiles[0] + jobs.row_tiles[1];
    const dim3 grid(static_cast<unsigned>(cuda::cdiv(k, cuda::kRepackTile)),
                    static_cast<unsigned>(std::min(row_tiles, kMaxGridY)));
    const auto repack = vector_loads ? cuda::repack_k_major_kernel<cuda::kRepackVecBytes>
                                     : cuda::repack_k_major_kernel<1>;
    repack<<<grid, cuda::kRepackThreads, 0, stream>>>(jobs);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
      return cuda_error("repack_k_major_kernel launch", e);
    }
  }
  return {};
}

// A tensor map of `rank` (2 or 3) dimensions, innermost first: dims[i] elements, dims[i + 1] strided by
// strides[i] bytes, boxes of box[i] elements.
std::string encode_tiled(const char* name, CUtensorMapDataType type, const void* ptr, int rank, const int64_t* dims,
                         const int64_t* strides, const int* box, CUtensorMapSwizzle swizzle,
                         CUtensorMapL2promotion l2_promotion, CUtensorMap& map) {
  const EncodeTiledFn encode = tensor_map_encoder();
  if (encode == nullptr) {
    return "gemm (CUDA): cuTensorMapEncodeTiled is unavailable from the driver (needs CUDA >= 12.0)";
  }
  constexpr int kMaxRank = 3;
  cuuint64_t d[kMaxRank], st[kMaxRank - 1];
  cuuint32_t b[kMaxRank], elem_strides[kMaxRank];
  for (int i = 0; i < rank; ++i) {
    d[i] = static_cast<cuuint64_t>(dims[i]);
    b[i] = static_cast<cuuint32_t>(box[i]);
    elem_strides[i] = 1;
    if (i + 1 < rank) st[i] = static_cast<cuuint64_t>(strides[i]);
  }
  const CUresult r = encode(&map, type, static_cast<cuuint32_t>(rank), const_cast<void*>(ptr), d, st, b, elem_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, l2_promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::string shape;
    for (int i = rank - 1; i >= 0; --i) {
      shape += std::to_string(dims[i]) + (i > 0 ? " x " : " elements");
    }
    return std::string("gemm (CUDA): cuTensorMapEncodeTiled for `") + name + "` failed with CUresult " +
           std::to_string(static_cast<int>(r)) + " (" + shape + ", outer strides of " + std::to_string(strides[0]) +
           (rank > 2 ? " and " + std::to_string(strides[1]) : std::string()) + " bytes)";
  }
  return {};
}

// A 2-D tensor map: `inner` x `outer` elements, rows `row_bytes` apart, boxes of box_inner x box_outer.
std::string encode_2d(const char* name, CUtensorMapDataType type, const void* ptr, int64_t inner, int64_t outer,
                      int64_t row_bytes, int box_inner, int box_outer, CUtensorMapSwizzle swizzle,
                      CUtensorMapL2promotion l2_promotion, CUtensorMap& map) {
  const int64_t dims[2] = {inner, outer};
  const int box[2] = {box_inner, box_outer};
  return encode_tiled(name, type, ptr, 2, dims, &row_bytes, box, swizzle, l2_promotion, map);
}

// FP8 operands: 128-byte (one K block) rows of box_rows rows, 128B-swizzled for wgmma.
std::string encode_operand(const char* name, const Operand& op, int64_t rows, int64_t k, int box_rows,
                           CUtensorMap& map) {
  return encode_2d(name, CU_TENSOR_MAP_DATA_TYPE_UINT8, op.ptr, k, rows, op.row_bytes, cuda::kBlockK, box_rows,
                   CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, map);
}

// Rows of A's box where a problem is shorter than one single-CTA tile, else 0: only its own rows, in whole
// swizzle atoms, because TMA fills box rows past a tensor's end more slowly than it loads rows
// (docs/cuda.md, Tile configurations).
int short_a_box_rows(int64_t m, const TileConfig& cfg) {
  if (cfg.cluster_n != 1 || m >= cfg.block_m) return 0;
  return static_cast<int>(cuda::cdiv(m, cuda::hopper::kSwizzleAtomRows) * cuda::hopper::kSwizzleAtomRows);
}

// A's map for tiles of `cfg`: a cluster's CTAs each load (and multicast) a slice of the A tile; a problem
// shorter than a tile loads short_rows rows (short_a_box_rows) where that is not 0.
std::string encode_a_tiles(const Operand& a, int64_t m, int64_t k, const TileConfig& cfg, CUtensorMap& map,
                           int short_rows = 0) {
  return encode_operand("a", a, m, k, short_rows > 0 ? short_rows : cfg.block_m / cfg.cluster_n, map);
}

// The same operand as a 3-D view [whole K blocks][rows][128 bytes] whose boxes hold two K blocks of
// box_rows rows: two consecutive stages of the ring, one TMA instruction (pairs_loads()).
std::string encode_operand_pairs(const char* name, const Operand& op, int64_t rows, int64_t whole_kblocks,
                                 int box_rows, CUtensorMap& map) {
  const int64_t dims[3] = {cuda::kBlockK, rows, whole_kblocks};
  const int64_t strides[2] = {op.row_bytes, cuda::kBlockK};
  const int box[3] = {cuda::kBlockK, box_rows, cuda::kKBlocksPerPair};
  return encode_tiled(name, CU_TENSOR_MAP_DATA_TYPE_UINT8, op.ptr, 3, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, map);
}

// ---- A scales as TMA reads them: rows of a [K/128, rows] (M-major) array ----
struct ScaleOperand {
  const float* ptr = nullptr;
  int64_t ld = 0;  // floats between K blocks
};

constexpr int64_t kAlignFloats = cuda::hopper::kTmaAlignBytes / static_cast<int64_t>(sizeof(float));

bool scales_m_major_readable(const float* ptr, int64_t rows, int64_t kblocks, int64_t stride_row,
                             int64_t stride_k) {
  if (reinterpret_cast<uintptr_t>(ptr) % cuda::hopper::kTmaAlignBytes != 0) return false;
  if (rows > 1 && stride_row != 1) return false;
  return kblocks == 1 || (stride_k >= rows && stride_k % kAlignFloats == 0);
}

// Sets up `copy`: a K-block-major fp32 copy in workspace of `rows` x `kblocks` scales in `format` (the
// caller launches it, see launch_scale_copy).
std::string plan_scale_copy(const char* name, const void* ptr, ScaleFormat format, int64_t rows, int64_t kblocks,
                            int64_t stride_row, int64_t stride_k, const Workspace& ws, cuda::ScaleCopy& copy) {
  const int64_t padded = cuda::cdiv(rows, kAlignFloats) * kAlignFloats;
  const size_t bytes = static_cast<size_t>(kblocks) * static_cast<size_t>(padded) * sizeof(float);
  auto* dst = static_cast<float*>(ws.get(bytes));
  if (dst == nullptr) {
    return std::string("gemm (CUDA): workspace allocation of ") + std::to_string(bytes) +
           " bytes for the K-block-major copy of `" + name + "` failed";
  }
  copy = cuda::ScaleCopy{ptr, rows, kblocks, stride_row, stride_k, dst, padded, format};
  return {};
}

// Uses the fp32 scales in place when TMA can read them, else sets up a K-block-major copy in `copy`.
std::string prepare_scales(const char* name, const float* ptr, int64_t rows, int64_t kblocks,
                           int64_t stride_row, int64_t stride_k, const Workspace& ws, cuda::ScaleCopy& copy,
                           ScaleOperand& op) {
  if (scales_m_major_readable(ptr, rows, kblocks, stride_row, stride_k)) {
    op.ptr = ptr;
    op.ld = kblocks == 1 ? cuda::cdiv(rows, kAlignFloats) * kAlignFloats : stride_k;
    return {};
  }
  if (std::string err = plan_scale_copy(name, ptr, ScaleFormat::kF32, rows, kblocks, stride_row, stride_k, ws, copy);
      !err.empty()) return err;
  op.ptr = copy.dst;
  op.ld = copy.ld;
  return {};
}

std::string launch_scale_copy(const cuda::ScaleCopy& copy, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(cuda::cdiv(copy.rows, cuda::kScaleCopyTile)),
                  static_cast<unsigned>(std::min(cuda::cdiv(copy.cols, cuda::kScaleCopyTile), kMaxGridY)));
  const auto transpose = copy.format == ScaleFormat::kUE8M0 ? cuda::transpose_scales_kernel<ScaleFormat::kUE8M0>
                                                            : cuda::transpose_scales_kernel<ScaleFormat::kF32>;
  transpose<<<grid, cuda::kScaleCopyThreads, 0, stream>>>(copy);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    return cuda_error("transpose_scales_kernel launch", e);
  }
  return {};
}

// Boxes of box_rows rows x box_kblocks K blocks: [box_kblocks][box_rows] floats in shared memory.
std::string encode_scales(const char* name, const ScaleOperand& op, int64_t rows, int64_t kblocks,
                          int box_rows, int box_kblocks, CUtensorMap& map) {
  const int64_t row_bytes = op.ld * static_cast<int64_t>(sizeof(float));
  return encode_2d(name, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, op.ptr, rows, kblocks, row_bytes, box_rows, box_kblocks,
                   CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE, map);
}

// The tensor maps of A scales that 128+-row tiles load by TMA: a stage's column a box (maps.a_scale) and,
// where the plan pairs its loads, two stages' a box (maps.a_scale_pair); the scales are read in place
// where they are M-major, else `copy` is planned for the caller to launch.
std::string encode_a_scales(const float* a_scale, int64_t m, int64_t kblocks, int64_t stride_m, int64_t stride_k,
                            const TileConfig& cfg, bool pairs, const Workspace& ws, cuda::ScaleCopy& copy,
                            TensorMaps& maps) {
  ScaleOperand sa;
  const int box = cuda::a_scale_stage_floats(cfg);
  if (std::string err = prepare_scales("a_scale", a_scale, m, kblocks, stride_m, stride_k, ws, copy, sa); !err.empty()) {
    return err;
  }
  if (std::string err = encode_scales("a_scale", sa, m, kblocks, box, 1, maps.a_scale); !err.empty()) return err;
  if (!pairs) return {};
  return encode_scales("a_scale", sa, m, kblocks, box, cuda::kKBlocksPerPair, maps.a_scale_pair);
}

// ---- 16-bit output as the TMA-store epilogue writes it: boxes of 64 rows x the config's swizzle span ----
bool out_tma_storable(const GemmArgs& args) {
  if (args.c_format == OutFormat::kFP32) return false;  // fp32 goes from registers
  const int64_t row_bytes = args.c_stride_m * cuda::kStagedOutBytes;
  return reinterpret_cast<uintptr_t>(args.c) % cuda::hopper::kTmaAlignBytes == 0 &&
         (args.m == 1 || row_bytes % cuda::hopper::kTmaAlignBytes == 0);
}

std::string encode_out(const GemmArgs& args, const TileConfig& cfg, CUtensorMap& map) {
  const int64_t packed = cuda::cdiv(args.n * cuda::kStagedOutBytes, cuda::hopper::kTmaAlignBytes) *
                         cuda::hopper::kTmaAlignBytes;
  const int64_t row_bytes = args.m == 1 ? packed : args.c_stride_m * cuda::kStagedOutBytes;
  const CUtensorMapDataType type =
      args.c_format == OutFormat::kBF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const int span = cuda::store_span_bytes(cfg);
  const CUtensorMapSwizzle swizzle = span == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                     : span == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                  : CU_TENSOR_MAP_SWIZZLE_32B;
  return encode_2d("out", type, args.c, args.n, args.m, row_bytes, span / cuda::kStagedOutBytes,
                   cuda::hopper::kWgmmaM, swizzle, CU_TENSOR_MAP_L2_PROMOTION_NONE, map);
}

// Formats and layouts every kernel here takes (dense and grouped): e4m3fn operands, fp32 or UE8M0
// scales, an output with unit stride along N.
std::string formats_error(const GemmArgs& args) {
  if (args.a_format != Fp8Format::kE4M3FN || args.b_format != Fp8Format::kE4M3FN) {
    return "gemm (CUDA): a and b must be float8_e4m3fn on sm_90a (got a format " +
           std::to_string(static_cast<int>(args.a_format)) + ", b format " +
           std::to_string(static_cast<int>(args.b_format)) + "; 0 = e4m3fn, 1 = e4m3fnuz)";
  }
  for (const auto& [name, format] : {std::pair{"a_scale", args.a_scale_format}, std::pair{"b_scale", args.b_scale_format}}) {
    if (format != ScaleFormat::kF32 && format != ScaleFormat::kUE8M0) {
      return std::string("gemm (CUDA): ") + name + " must be float32 or UE8M0 (got scale format " +
             std::to_string(static_cast<int>(format)) + "; 0 = float32, 1 = UE8M0)";
    }
  }
  if (args.c_stride_n != 1) {
    return "gemm (CUDA): out must have unit stride along N (expected c_stride_n 1, got " +
           std::to_string(args.c_stride_n) + ")";
  }
  return {};
}

// The A scales as fp32 (strides in floats): the caller's, or UE8M0 ones decoded by a K-block-major copy
// planned into `copy` (the caller launches it), which every path then reads in place.
std::string fp32_a_scales(const GemmArgs& args, const Workspace& ws, cuda::ScaleCopy& copy, const float*& ptr,
                          int64_t& stride_m, int64_t& stride_k) {
  ptr = static_cast<const float*>(args.a_scale);
  stride_m = args.a_scale_stride_m;
  stride_k = args.a_scale_stride_k;
  if (args.a_scale_format != ScaleFormat::kUE8M0) return {};
  if (std::string err = plan_scale_copy("a_scale", args.a_scale, ScaleFormat::kUE8M0, args.m,
                                        cuda::cdiv(args.k, cuda::kBlockK), stride_m, stride_k, ws, copy);
      !err.empty()) return err;
  ptr = copy.dst;
  stride_m = 1;
  stride_k = copy.ld;
  return {};
}

// ---- dispatch: one launcher per row of kTileConfigs ----
using ConfigLauncher = cudaError_t (*)(const TensorMaps&, const KernelParams&, int grid, int cluster_ctas,
                                       cudaStream_t, int* max_clusters);

// The launch of config I: `grid` CTAs in clusters of `cluster_ctas` (its cluster_n, times the plan's K
// split) on `stream`, as a programmatic dependent of the kernel before it (its launch and prologue
// overlap that kernel's end, or the part after that kernel's griddepcontrol.launch_dependents); with
// stream == nullptr and `max_clusters` set, only asks how many such clusters fit on the device at once.
// kGrouped: the config's grouped instantiation (grouped_planner.h's configs).
template <int I, bool kGrouped = false>
cudaError_t launch_config(const TensorMaps& maps, const KernelParams& p, int grid, int cluster_ctas,
                          cudaStream_t stream, int* max_clusters) {
  constexpr TileConfig c = kGrouped ? cuda::grouped_tile_config(I) : kTileConfigs[I];
  static_assert(!kGrouped || cuda::grouped_smem_fits(c), "the groups' table does not fit beside the ring");
  // Three instantiations of a dense config: whole tiles, K splits (plans, and the occupancy of split
  // clusters) and stream-K regions; each carries only its schedule's code.
  enum Variant { kWhole, kSplit, kStreamK, kNumVariants };
  const Variant variant = cluster_ctas > c.cluster_n ? kSplit : p.sched.sk_tiles > 0 ? kStreamK : kWhole;
  if (kGrouped && variant != kWhole) return cudaErrorInvalidConfiguration;
  if (variant == kSplit && !cuda::splits_k(c)) return cudaErrorInvalidConfiguration;
  auto* kernel = &cuda::fp8_gemm_kernel<c.block_m, c.block_n, c.cluster_n, c.slabs, c.pairs, false, kGrouped, false>;
  if constexpr (!kGrouped) {
    if (variant == kStreamK) {
      kernel = &cuda::fp8_gemm_kernel<c.block_m, c.block_n, c.cluster_n, c.slabs, c.pairs, false, false, true>;
    }
    if constexpr (cuda::splits_k(c)) {
      if (variant == kSplit) {
        kernel = &cuda::fp8_gemm_kernel<c.block_m, c.block_n, c.cluster_n, c.slabs, c.pairs, true, false, false>;
      }
    }
  }
  constexpr int smem = kGrouped ? cuda::grouped_smem_bytes(c) : cuda::smem_bytes(c);
  // The shared-memory opt-in holds for the device's context: set once per kernel and device (a
  // couple of us of host time a call otherwise). Threads racing on the first call both set it.
  static std::atomic<bool> smem_opted_in[kNumVariants][kMaxDevices] = {};
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  std::atomic<bool>* opted_in = device >= 0 && device < kMaxDevices ? &smem_opted_in[variant][device] : nullptr;
  if (opted_in == nullptr || !opted_in->load(std::memory_order_acquire)) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
    if (opted_in != nullptr) opted_in->store(true, std::memory_order_release);
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(grid));
  config.blockDim = dim3(cuda::num_threads(c));
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  // Single-CTA configs launch without a cluster attribute: with a 1x1x1 cluster dimension, large
  // whole-tile plans ran slower.
  cudaLaunchAttribute attrs[2]{};
  unsigned num_attrs = 0;
  if (cluster_ctas > 1) {
    attrs[num_attrs].id = cudaLaunchAttributeClusterDimension;
    attrs[num_attrs++].val.clusterDim = {static_cast<unsigned>(cluster_ctas), 1, 1};
  }
  if (max_clusters == nullptr) {
    attrs[num_attrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[num_attrs++].val.programmaticStreamSerializationAllowed = 1;
  }
  config.attrs = attrs;
  config.numAttrs = num_attrs;
  if (max_clusters != nullptr) return cudaOccupancyMaxActiveClusters(max_clusters, kernel, &config);
  return cudaLaunchKernelEx(&config, kernel, maps, p);
}

template <size_t... I>
constexpr std::array<ConfigLauncher, sizeof...(I)> make_launchers(std::index_sequence<I...>) {
  return {&launch_config<static_cast<int>(I)>...};
}
constexpr auto kLaunchers = make_launchers(std::make_index_sequence<cuda::kNumTileConfigs>{});

int out_bytes(OutFormat f) { return f == OutFormat::kFP32 ? 4 : 2; }

// How many clusters of `size` CTAs fit on the device at once: the fewest over the configs that run
// such clusters (A multicast of that width, or one-CTA configs splitting K that many ways).
cudaError_t max_clusters(int size, int& clusters) {
  clusters = 0;
  bool any = false;
  for (int i = 0; i < cuda::kNumTileConfigs; ++i) {
    const int cluster_n = kTileConfigs[i].cluster_n;
    if (cluster_n != size && !(cuda::splits_k(kTileConfigs[i]) && size <= cuda::kMaxKSplit)) continue;
    int c = 0;
    if (const cudaError_t e = kLaunchers[i](TensorMaps{}, KernelParams{}, size, size, nullptr, &c); e != cudaSuccess) {
      return e;
    }
    clusters = any ? std::min(clusters, c) : c;
    any = true;
  }
  return cudaSuccess;
}

// ---- the grouped GEMM (MoE experts) ----
template <size_t... I>
constexpr std::array<ConfigLauncher, sizeof...(I)> make_grouped_launchers(std::index_sequence<I...>) {
  return {&launch_config<cuda::kGroupedConfigs[I], true>...};
}
constexpr auto kGroupedLaunchers = make_grouped_launchers(std::make_index_sequence<cuda::kNumGroupedConfigs>{});

ConfigLauncher grouped_launcher(int config) {
  for (int i = 0; i < cuda::kNumGroupedConfigs; ++i) {
    if (cuda::kGroupedConfigs[i] == config) return kGroupedLaunchers[i];
  }
  return nullptr;
}

std::string grouped_args_error(const GemmArgs& args) {
  if (std::string err = formats_error(args); !err.empty()) return err;
  if (std::string err = grouped_routing_error(args); !err.empty()) return "gemm (CUDA): " + err;
  if (args.num_groups > cuda::kMaxGroups) {
    return "gemm (CUDA): num_groups must be at most " + std::to_string(cuda::kMaxGroups) + " (got " +
           std::to_string(args.num_groups) + ")";
  }
  if (args.num_groups > 1 && args.b_stride_group != args.n * args.b_stride_n) {
    return "gemm (CUDA): b must hold its groups n * b_stride_n apart (expected b_stride_group " +
           std::to_string(args.n * args.b_stride_n) + ", got " + std::to_string(args.b_stride_group) + ")";
  }
  return {};
}

// Sorts the rows of `src` (fp32 A scales) by group id (row_group) into workspace: the segments' ends, the
// permutation and the sorted copies of A and its scales, which `src` then describes.
std::string sort_rows_by_group(GemmArgs& src, const Workspace& ws, cudaStream_t stream, int32_t*& ends,
                               int32_t*& perm) {
  const int64_t m = src.m, k = src.k, kblocks = cuda::cdiv(k, cuda::kBlockK);
  const int64_t a_ld = cuda::cdiv(k, cuda::hopper::kTmaAlignBytes) * cuda::hopper::kTmaAlignBytes;
  const int64_t scale_ld = cuda::cdiv(m, kAlignFloats) * kAlignFloats;
  const int64_t ends_bytes = cuda::cdiv(src.num_groups * 4, cuda::hopper::kTmaAlignBytes) * cuda::hopper::kTmaAlignBytes;
  const int64_t perm_bytes = cuda::cdiv(m * 4, cuda::hopper::kTmaAlignBytes) * cuda::hopper::kTmaAlignBytes;
  const int64_t a_bytes = m * a_ld;
  const size_t bytes = static_cast<size_t>(ends_bytes + perm_bytes + a_bytes + kblocks * scale_ld * 4);
  auto* base = static_cast<uint8_t*>(ws.get(bytes));
  if (base == nullptr) {
    return "gemm (CUDA): workspace allocation of " + std::to_string(bytes) + " bytes for the rows sorted by group failed";
  }
  ends = reinterpret_cast<int32_t*>(base);
  perm = reinterpret_cast<int32_t*>(base + ends_bytes);
  auto* a_sorted = base + ends_bytes + perm_bytes;
  auto* scale_sorted = reinterpret_cast<float*>(a_sorted + a_bytes);
  const cuda::SortRows sort{src.row_group, m, static_cast<int32_t>(src.num_groups), ends, perm};
  cuda::sort_rows_by_group_kernel<<<1, cuda::kSortThreads, 0, stream>>>(sort);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return cuda_error("sort_rows_by_group_kernel launch", e);
  const cuda::GatherRows gather{static_cast<const uint8_t*>(src.a), src.a_stride_m, src.a_stride_k,
                                static_cast<const float*>(src.a_scale), src.a_scale_stride_m, src.a_scale_stride_k,
                                k, kblocks, ends + src.num_groups - 1, perm, a_sorted, a_ld, scale_sorted, scale_ld};
  const int blocks = static_cast<int>(std::min<int64_t>(m, cuda::kMaxGatherBlocks));
  cuda::gather_group_rows_kernel<<<blocks, cuda::kGatherThreads, 0, stream>>>(gather);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return cuda_error("gather_group_rows_kernel launch", e);
  src.a = a_sorted;
  src.a_stride_m = a_ld;
  src.a_stride_k = 1;
  src.a_scale = scale_sorted;
  src.a_scale_stride_m = 1;
  src.a_scale_stride_k = scale_ld;
  return {};
}

// The grouped GEMM: rows by group_ends, by the masked layout's group_rows, or sorted by row_group first;
// B as one [num_groups * n, k] operand whose group g starts at row g * n (a group's ragged last N tile
// reads the next group's first rows, which its stores never reach, or zeros past the last group).
std::string launch_grouped(const GemmArgs& args, const Workspace& workspace, cudaStream_t stream,
                           const cuda::GpuSlots& gpu) {
  if (std::string err = grouped_args_error(args); !err.empty()) return err;
  const int64_t m = args.m, n = args.n, k = args.k, groups = args.num_groups;
  const cuda::GroupedPlan plan = cuda::choose_grouped_plan(m, n, k, groups, gpu, args.expected_group_rows);
  const TileConfig cfg = cuda::grouped_tile_config(plan.config);
  if (!cuda::grouped_fits_int32(m, n, groups, cfg.block_m, plan.sched.n_blocks)) {
    return "gemm (CUDA): the grouped problem is too large for the kernel's 32-bit schedule (m " + std::to_string(m) +
           ", n " + std::to_string(n) + ", num_groups " + std::to_string(groups) + ")";
  }
  std::string err;
  KernelParams p;
  p.group.rows.num_groups = static_cast<int32_t>(groups);
  p.group.b_scale_stride_group = args.b_scale_stride_group;
  GemmArgs src = args;
  const int64_t kblocks = cuda::cdiv(k, cuda::kBlockK);
  // UE8M0 A scales are decoded at once: the row sort's gather reads them too.
  cuda::ScaleCopy decode{};
  const float* fp32_scales = nullptr;
  if (err = fp32_a_scales(args, workspace, decode, fp32_scales, src.a_scale_stride_m, src.a_scale_stride_k);
      !err.empty()) return err;
  src.a_scale = fp32_scales;
  if (decode.dst != nullptr) {
    if (err = launch_scale_copy(decode, stream); !err.empty()) return err;
  }
  if (args.row_group != nullptr) {
    int32_t *ends = nullptr, *perm = nullptr;
    if (err = sort_rows_by_group(src, workspace, stream, ends, perm); !err.empty()) return err;
    p.group.rows.ends = ends;
    p.group.out_rows = perm;
  } else if (args.group_ends != nullptr) {
    p.group.rows.ends = args.group_ends;
  } else {
    p.group.rows.counts = args.group_rows;
    p.group.rows.stride = args.group_row_stride;
  }

  Operand a, b;
  RepackGroups repacks{};
  if (err = prepare_operand("a", src.a, m, k, src.a_stride_m, src.a_stride_k, workspace, repacks, a); !err.empty()) {
    return err;
  }
  if (err = prepare_operand("b", args.b, groups * n, k, args.b_stride_n, args.b_stride_k, workspace, repacks, b);
      !err.empty()) return err;
  TensorMaps maps{};
  if (err = encode_a_tiles(a, m, k, cfg, maps.a); !err.empty()) return err;
  if (err = encode_operand("b", b, groups * n, k, cfg.block_n, maps.b); !err.empty()) return err;
  // 128+-row tiles load their A scales by TMA, as the dense ones do; segments start at any row, so the
  // boxes start aligned below the tile (a_scale_box_row()). The masked layout's only where TMA reads them
  // in place: a K-block-major copy would move every padding row, which the scale warp's gather skips.
  const float* a_scale = static_cast<const float*>(src.a_scale);
  const bool a_scale_tma =
      cuda::scales_by_tma(cfg) &&
      (args.group_rows == nullptr ||
       scales_m_major_readable(a_scale, m, kblocks, src.a_scale_stride_m, src.a_scale_stride_k));
  cuda::ScaleCopy scale_copy{};
  if (a_scale_tma) {
    if (err = encode_a_scales(a_scale, m, kblocks, src.a_scale_stride_m, src.a_scale_stride_k, cfg, plan.pairs,
                              workspace, scale_copy, maps);
        !err.empty()) return err;
  }
  const int64_t whole_kblocks = k / cuda::kBlockK;
  if (plan.pairs) {
    if (err = encode_operand_pairs("a", a, m, whole_kblocks, cfg.block_m, maps.a_pair); !err.empty()) return err;
    if (err = encode_operand_pairs("b", b, groups * n, whole_kblocks, cfg.block_n, maps.b_pair); !err.empty()) {
      return err;
    }
  }

  p.m = m;
  p.n = n;
  p.sched = plan.sched;
  p.a_scale = a_scale;
  p.a_scale_stride_m = src.a_scale_stride_m;
  p.a_scale_stride_k = src.a_scale_stride_k;
  p.b_scale = args.b_scale;
  p.b_scale_format = args.b_scale_format;
  p.b_scale_stride_n = args.b_scale_stride_n;
  p.b_scale_stride_k = args.b_scale_stride_k;
  p.a_scale_tma = a_scale_tma;
  p.b_evict_first = plan.b_evict_first;
  p.pair_kblocks = plan.pairs ? static_cast<int32_t>(whole_kblocks) : 0;
  p.out = args.c;
  p.out_ld = args.c_stride_m;
  p.out_format = args.c_format;
  const int64_t vec_bytes = 2 * out_bytes(args.c_format);
  p.out_pairs = reinterpret_cast<uintptr_t>(args.c) % vec_bytes == 0 && (m == 1 || args.c_stride_m % 2 == 0);
  // Rows sorted by group go back to their own rows from registers.
  p.out_tma = p.group.out_rows == nullptr && out_tma_storable(args);
  if (p.out_tma) {
    if (err = encode_out(args, cfg, maps.out); !err.empty()) return err;
  }
  if (plan.claims) {
    p.tile_claims = static_cast<int*>(workspace.get(sizeof(int)));
    if (p.tile_claims == nullptr) return "gemm (CUDA): workspace allocation of the tile-claim counter failed";
    if (err = zero_counters(p.tile_claims, 1, "the tile-claim counter", stream); !err.empty()) return err;
  }
  if (scale_copy.dst != nullptr) {
    if (err = launch_scale_copy(scale_copy, stream); !err.empty()) return err;
  }
  if (err = launch_repacks(repacks, k, stream); !err.empty()) return err;
  if (const cudaError_t e = grouped_launcher(plan.config)(maps, p, plan.ctas(), plan.cluster_n(), stream, nullptr);
      e != cudaSuccess) {
    return cuda_error("fp8_gemm_kernel (grouped) launch", e);
  }
  return {};
}

}  // namespace

namespace cuda {

std::string launch_with_plan(const GemmArgs& args, const Workspace& workspace, void* stream_ptr,
                             const Plan& plan) {
  if (std::string err = formats_error(args); !err.empty()) return err;
  if (!plan.fits) {
    return "gemm (CUDA): the problem is too large for the kernel's 32-bit tile schedule (m " + std::to_string(args.m) +
           ", n " + std::to_string(args.n) + ", k " + std::to_string(args.k) + ")";
  }
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  const int64_t m = args.m, n = args.n, k = args.k;
  const TileConfig& cfg = kTileConfigs[plan.config];
  std::string err;

  Operand a, b;
  RepackGroups repacks{};
  if (err = prepare_operand("a", args.a, m, k, args.a_stride_m, args.a_stride_k, workspace, repacks, a);
      !err.empty()) return err;
  if (err = prepare_operand("b", args.b, n, k, args.b_stride_n, args.b_stride_k, workspace, repacks, b);
      !err.empty()) return err;
  TensorMaps maps{};
  const int a_box_rows = short_a_box_rows(m, cfg);
  if (err = encode_a_tiles(a, m, k, cfg, maps.a, a_box_rows); !err.empty()) return err;
  if (err = encode_operand("b", b, n, k, cfg.block_n, maps.b); !err.empty()) return err;
  const int64_t kblocks = cuda::cdiv(k, cuda::kBlockK);
  cuda::ScaleCopy scale_copy{};
  const float* a_scale = nullptr;
  int64_t a_scale_stride_m = 0, a_scale_stride_k = 0;
  if (err = fp32_a_scales(args, workspace, scale_copy, a_scale, a_scale_stride_m, a_scale_stride_k); !err.empty()) {
    return err;
  }
  const bool a_scale_tma =
      cuda::scales_by_tma(cfg) &&
      (!cuda::gather_a_scales(plan) || scales_m_major_readable(a_scale, m, kblocks, a_scale_stride_m, a_scale_stride_k));
  // Paired loads read whole K blocks only (a plan pairs only with kMinPairUnitKBlocks of them): a ragged
  // last one loads alone, zero-filled past K.
  const int64_t whole_kblocks = k / cuda::kBlockK;
  const bool pairs = cuda::pairs_planned(plan);
  if (a_scale_tma) {
    if (err = encode_a_scales(a_scale, m, kblocks, a_scale_stride_m, a_scale_stride_k, cfg, pairs, workspace,
                              scale_copy, maps);
        !err.empty()) return err;
  }
  if (pairs) {
    if (err = encode_operand_pairs("a", a, m, whole_kblocks, cfg.block_m, maps.a_pair); !err.empty()) return err;
    if (err = encode_operand_pairs("b", b, n, whole_kblocks, cfg.block_n, maps.b_pair); !err.empty()) return err;
  }

  KernelParams p;
  p.a_box_rows = a_box_rows;
  p.m = m;
  p.n = n;
  p.sched = plan.sched;
  p.a_scale = a_scale;
  p.a_scale_stride_m = a_scale_stride_m;
  p.a_scale_stride_k = a_scale_stride_k;
  p.b_scale = args.b_scale;
  p.b_scale_format = args.b_scale_format;
  p.b_scale_stride_n = args.b_scale_stride_n;
  p.b_scale_stride_k = args.b_scale_stride_k;
  p.a_scale_tma = a_scale_tma;
  p.b_evict_first = cuda::b_evict_first(plan);
  p.pair_kblocks = pairs ? static_cast<int32_t>(whole_kblocks) : 0;

  p.out = args.c;
  p.out_ld = args.c_stride_m;
  p.out_format = args.c_format;
  const int64_t vec_bytes = 2 * out_bytes(args.c_format);
  p.out_pairs = reinterpret_cast<uintptr_t>(args.c) % vec_bytes == 0 && (m == 1 || args.c_stride_m % 2 == 0);
  p.out_tma = out_tma_storable(args);
  if (p.out_tma) {
    if (err = encode_out(args, cfg, maps.out); !err.empty()) return err;
  }
  if (plan.stream_k()) {
    // Slots, then flags: the slots are whole 16-byte multiples, so the flags stay aligned.
    const size_t slot_bytes = static_cast<size_t>(plan.partial_floats()) * sizeof(float);
    const size_t flag_bytes = static_cast<size_t>(plan.num_flags()) * sizeof(int);
    auto* base = static_cast<uint8_t*>(workspace.get(slot_bytes + flag_bytes));
    if (base == nullptr) {
      return "gemm (CUDA): workspace allocation of " + std::to_string(slot_bytes + flag_bytes) +
             " bytes for the stream-K hand-off failed";
    }
    p.partial = reinterpret_cast<float*>(base);
    p.sk_flags = reinterpret_cast<int*>(base + slot_bytes);
    if (err = zero_counters(p.sk_flags, plan.num_flags(), "the stream-K flags", stream); !err.empty()) return err;
  }

  // The copies go last, right before the GEMM. The GEMM launches as a programmatic dependent of the
  // kernel before it in the stream (the operand repack, the A-scale transpose, or the caller's last
  // kernel) and reads and writes global memory only after griddepcontrol.wait, which returns once that
  // kernel has completed and its writes are visible; the copies themselves launch in plain stream order.
  if (scale_copy.dst != nullptr) {
    if (err = launch_scale_copy(scale_copy, stream); !err.empty()) return err;
  }
  if (err = launch_repacks(repacks, k, stream); !err.empty()) return err;
  if (const cudaError_t e = kLaunchers[plan.config](maps, p, plan.ctas(), plan.cluster_ctas(), stream, nullptr);
      e != cudaSuccess) {
    return cuda_error("fp8_gemm_kernel launch", e);
  }
  return {};
}

// The GPU as the planner sees it, read once per device index (benign race: every writer stores the
// same values).
std::string gpu_slots(int device, GpuSlots& slots) {
  // [0]: SMs, [s]: clusters of s CTAs; [0] is stored last, so a nonzero [0] means a complete entry.
  static std::atomic<int> cache[kMaxDevices][cuda::kMaxClusterCtas + 1] = {};
  const bool cached = device >= 0 && device < kMaxDevices;
  if (cached && cache[device][0].load(std::memory_order_acquire) != 0) {
    slots.sms = cache[device][0].load(std::memory_order_relaxed);
    for (int s = 2; s <= cuda::kMaxClusterCtas; ++s) slots.clusters[s] = cache[device][s].load(std::memory_order_relaxed);
    return {};
  }
  if (const cudaError_t e = cudaDeviceGetAttribute(&slots.sms, cudaDevAttrMultiProcessorCount, device);
      e != cudaSuccess) {
    return cuda_error("cudaDeviceGetAttribute(MultiProcessorCount)", e);
  }
  for (int s = 2; s <= cuda::kMaxClusterCtas; ++s) {
    if (const cudaError_t e = max_clusters(s, slots.clusters[s]); e != cudaSuccess) {
      return cuda_error("cudaOccupancyMaxActiveClusters", e);
    }
  }
  if (cached) {
    for (int s = 2; s <= cuda::kMaxClusterCtas; ++s) cache[device][s].store(slots.clusters[s], std::memory_order_relaxed);
    cache[device][0].store(slots.sms, std::memory_order_release);
  }
  return {};
}

}  // namespace cuda

std::string gemm_launch(const GemmArgs& args, const Workspace& workspace, void* stream) {
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return cuda_error("cudaGetDevice", e);
  cuda::GpuSlots slots;
  if (std::string err = cuda::gpu_slots(device, slots); !err.empty()) return err;
  if (args.num_groups > 0) return launch_grouped(args, workspace, static_cast<cudaStream_t>(stream), slots);
  const Plan plan = cuda::choose_plan(args.m, args.n, args.k, slots, out_bytes(args.c_format));
  return cuda::launch_with_plan(args, workspace, stream, plan);
}

}  // namespace gemm
