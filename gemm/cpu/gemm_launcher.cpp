// CPU backend of gemm::gemm_launch (see ../gemm_contract.h for the contract).
//
// Every output element is computed by one thread in a fixed order, so results do not depend on
// the thread count (the numerics are in gemm_kernel.h).
//
// Blocking: rows are processed in chunks of row tiles whose A is decoded once into a packed fp32
// panel ([K block][row tile][k][kMR]); each task owns a kTileN-column strip of B, decodes one K
// block of it at a time into a packed panel ([k][kNR] per strip, hot in L1/L2) and reuses it for
// every row tile of its run. The micro-kernel keeps a kMR x kNR partial product in vector registers
// for one K block, then promotes it into the task's fp32 accumulator tile with the per-row scale.
// A group of at most a few rows (decode) is one tile that the dot kernel computes instead, from
// B read in place: there a B panel would be decoded and transposed for a single use.
//
// Grouped GEMMs run the same path: each group's rows (a range, read in place for contiguous groups
// and the masked layout's blocks; or rows gathered by id) become its own row tiles, a chunk may hold
// several groups, and a task reads its group's B; tasks of all groups of a chunk run in one parallel
// loop, so small groups share the threads.
#include "../gemm_contract.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

// Vector types cross function boundaries only inside one ISA's flattened entry point, so the
// psABI note about passing them without that ISA enabled does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

#include "fp8_formats.h"
#include "gemm_kernel.h"
#include "planner.h"
#include "quantize_kernel.h"
#include "tile_configs.h"
#include "x86_vector_isa.h"

#ifndef _OPENMP
#warning "gemm CPU backend compiled without -fopenmp: at::parallel_for runs on one thread"
#endif

namespace gemm::cpu {
namespace {

// Pins the vector ISA path (avx512, avx2, sse2, portable) instead of the widest one.
constexpr const char* kIsaEnvVar = "GEMM_CPU_ISA";

// One pair of entries per ISA: `flatten` inlines the generic body so it is compiled for that target.
using RunTaskFn = void (*)(const ChunkPlan&, int64_t, float*);
using QuantizeRowsFn = void (*)(const QuantizeArgs&, const Fp8Encoder&, int64_t, int64_t);

#define GEMM_CPU_ISA_ENTRIES(Isa, suffix, target_attribute)                                      \
  target_attribute __attribute__((flatten)) void run_task_##suffix(                              \
      const ChunkPlan& plan, int64_t task, float* scratch) {                                     \
    run_task<Isa>(plan, task, scratch);                                                          \
  }                                                                                              \
  target_attribute __attribute__((flatten)) void quantize_rows_##suffix(                         \
      const QuantizeArgs& args, const Fp8Encoder& encoder, int64_t begin, int64_t end) {         \
    quantize_rows<Isa>(args, encoder, begin, end);                                               \
  }

#if defined(__x86_64__)
GEMM_CPU_ISA_ENTRIES(IsaAvx512, avx512, __attribute__((target("avx512f,fma"))))
GEMM_CPU_ISA_ENTRIES(IsaAvx2Fma, avx2, __attribute__((target("avx2,fma,f16c"))))
GEMM_CPU_ISA_ENTRIES(IsaSse2, sse2, )
#endif
GEMM_CPU_ISA_ENTRIES(IsaPortable, portable, )
#undef GEMM_CPU_ISA_ENTRIES

struct IsaPath {
  RunTaskFn run_task;
  QuantizeRowsFn quantize_rows;
  bool (*supported)();
  int64_t row_tile;
  int64_t dot_max_rows;
  const char* name;
};

template <class Isa>
constexpr IsaPath make_path(RunTaskFn run, QuantizeRowsFn quantize) {
  return {run, quantize, &Isa::supported, TileConfig<Isa>::kMR, TileConfig<Isa>::kDotMaxRows,
          Isa::kName};
}

// Widest first.
constexpr IsaPath kPaths[] = {
#if defined(__x86_64__)
    make_path<IsaAvx512>(run_task_avx512, quantize_rows_avx512),
    make_path<IsaAvx2Fma>(run_task_avx2, quantize_rows_avx2),
    make_path<IsaSse2>(run_task_sse2, quantize_rows_sse2),
#endif
    make_path<IsaPortable>(run_task_portable, quantize_rows_portable),
};

// The widest path this CPU runs, or the one GEMM_CPU_ISA names (to test or pin a narrower path);
// an error when GEMM_CPU_ISA names no path this CPU runs. Chosen once, at the first call.
struct IsaSelection {
  const IsaPath* path = nullptr;
  std::string error;
};

IsaSelection select_path() {
  const char* forced = std::getenv(kIsaEnvVar);
  for (const IsaPath& path : kPaths)
    if ((forced == nullptr || std::string(forced) == path.name) && path.supported())
      return {&path, {}};
  std::string names;
  for (const IsaPath& path : kPaths) names += std::string(names.empty() ? "" : ", ") + path.name;
  return {nullptr, std::string("gemm (CPU): ") + kIsaEnvVar + " must name a path this CPU runs (" +
                       names + "), got " + forced};
}

size_t round_up(size_t bytes) {
  return (bytes + kCacheLineBytes - 1) / kCacheLineBytes * kCacheLineBytes;
}

std::string format_error(const char* name, int32_t value) {
  return std::string("gemm (CPU): ") + name + " must be one of the enum values, got " +
         std::to_string(value);
}

bool known_scale_format(ScaleFormat format) {
  return format == ScaleFormat::kF32 || format == ScaleFormat::kUE8M0;
}

const IsaPath* selected_path(std::string& error) {
  static const IsaSelection selection = select_path();
  error = selection.error;
  return selection.path;
}

// The groups' rows as segments (and, for groups by row id, the row list they index). The offsets
// are host memory here, so bad ones are refused instead of clamped.
std::string plan_segments(const GemmArgs& args, std::vector<Segment>& segments,
                          std::vector<int64_t>& row_index) {
  if (args.num_groups == 0) {
    segments = {{0, 0, args.m}};
    return {};
  }
  if (args.num_groups < 0)
    return "gemm (CPU): num_groups must be >= 0, got " + std::to_string(args.num_groups);
  if (std::string err = grouped_routing_error(args); !err.empty()) return "gemm (CPU): " + err;
  if (args.row_group != nullptr) {
    segments = segments_from_row_groups(args.row_group, args.m, args.num_groups, row_index);
    return {};
  }
  if (args.group_rows != nullptr) {
    segments = segments_from_group_rows(args.group_rows, args.num_groups, args.group_row_stride);
    return {};
  }
  for (int64_t g = 0, previous = 0; g < args.num_groups; previous = args.group_ends[g++]) {
    const int64_t end = args.group_ends[g];
    if (end < previous)
      return "gemm (CPU): group_ends must be non-decreasing and >= 0, got group_ends[" +
             std::to_string(g) + "] = " + std::to_string(end) + " after " + std::to_string(previous);
    if (end > args.m)
      return "gemm (CPU): group_ends must be <= M = " + std::to_string(args.m) + ", got group_ends[" +
             std::to_string(g) + "] = " + std::to_string(end);
  }
  segments = segments_from_ends(args.group_ends, args.num_groups);
  return {};
}

}  // namespace
}  // namespace gemm::cpu

namespace gemm {

std::string gemm_launch(const GemmArgs& args, const Workspace& workspace, void* /*stream*/) {
  using namespace cpu;
  const Fp8Decoder* a_decoder = fp8_decoder(args.a_format);
  if (a_decoder == nullptr) return format_error("a_format", static_cast<int32_t>(args.a_format));
  const Fp8Decoder* b_decoder = fp8_decoder(args.b_format);
  if (b_decoder == nullptr) return format_error("b_format", static_cast<int32_t>(args.b_format));
  if (args.c_format != OutFormat::kBF16 && args.c_format != OutFormat::kFP16 &&
      args.c_format != OutFormat::kFP32)
    return format_error("c_format", static_cast<int32_t>(args.c_format));
  if (!known_scale_format(args.a_scale_format))
    return format_error("a_scale_format", static_cast<int32_t>(args.a_scale_format));
  if (!known_scale_format(args.b_scale_format))
    return format_error("b_scale_format", static_cast<int32_t>(args.b_scale_format));

  std::string error;
  const IsaPath* path = selected_path(error);
  if (path == nullptr) return error;
  std::vector<Segment> segments;
  std::vector<int64_t> row_index;
  error = plan_segments(args, segments, row_index);
  if (!error.empty()) return error;

  const int64_t k_blocks = ceil_div(args.k, kScaleBlockK);
  const int64_t n_tiles = ceil_div(args.n, kTileN);
  const int64_t threads = std::max<int64_t>(1, at::get_num_threads());
  const std::vector<ChunkSchedule> chunks =
      plan_chunks(segments, args.k, n_tiles, path->row_tile,
                  plan_chunk_tiles(k_blocks, path->row_tile), threads,
                  args.b_stride_k == 1 ? path->dot_max_rows : 0);
  if (chunks.empty()) return {};  // every group empty: nothing to write
  size_t max_tiles = 0;
  int64_t max_slots = 0;
  for (const ChunkSchedule& chunk : chunks) {
    max_tiles = std::max(max_tiles, chunk.tiles.size());
    max_slots = std::max(max_slots, chunk.slots);
  }

  // Workspace: the packed A of one chunk, then one (B panel + accumulator) scratch per slot.
  const size_t a_pack_bytes =
      round_up(sizeof(float) * max_tiles * k_blocks * kScaleBlockK * path->row_tile);
  const size_t slot_bytes =
      round_up(sizeof(float) * (kTileN * kScaleBlockK + max_tiles * path->row_tile * kTileN));
  const size_t total_bytes = a_pack_bytes + slot_bytes * max_slots;
  if (workspace.allocate == nullptr)
    return "gemm (CPU): workspace.allocate must be set, got nullptr";
  auto* base = static_cast<unsigned char*>(workspace.get(total_bytes));
  if (base == nullptr)
    return "gemm (CPU): workspace allocation of " + std::to_string(total_bytes) + " bytes failed";
  auto* a_pack = reinterpret_cast<float*>(base);
  unsigned char* slots_base = base + a_pack_bytes;

  // A operand values: A's exact values times B's factor (fp8_formats.h, operand scaling).
  Fp8Table a_operand_table;
  for (int code = 0; code < kFp8Codes; ++code)
    a_operand_table[code] = a_decoder->table[code] * b_decoder->other_operand_scale;
  const auto* a_bytes = static_cast<const uint8_t*>(args.a);
  const int64_t* rows = row_index.empty() ? nullptr : row_index.data();
  for (const ChunkSchedule& chunk : chunks) {
    ChunkPlan plan{};
    plan.args = &args;
    plan.b_decoder = b_decoder;
    plan.a_scale = {args.a_scale, args.a_scale_stride_m, args.a_scale_stride_k, args.a_scale_format};
    plan.b_scale = {args.b_scale, args.b_scale_stride_n, args.b_scale_stride_k, args.b_scale_format};
    plan.row_index = rows;
    plan.k_blocks = k_blocks;
    plan.n_tiles = n_tiles;
    plan.tiles = chunk.tiles.data();
    plan.num_tiles = static_cast<int64_t>(chunk.tiles.size());
    plan.pieces = chunk.pieces.data();
    plan.num_pieces = static_cast<int64_t>(chunk.pieces.size());
    plan.a_pack = a_pack;

    at::parallel_for(
        0, plan.num_tiles * k_blocks, plan_a_decode_grain(path->row_tile),
        [&](int64_t begin, int64_t end) {
          for (int64_t item = begin; item < end; ++item) {
            const int64_t kb = item / plan.num_tiles;
            const RowTile& tile = plan.tiles[item % plan.num_tiles];
            const int64_t k_begin = kb * kScaleBlockK;
            const uint8_t* src = a_bytes + k_begin * args.a_stride_k +
                                 (rows == nullptr ? tile.position * args.a_stride_m : 0);
            const int64_t k_len = std::min(kScaleBlockK, args.k - k_begin);
            float* dst = a_pack + item * kScaleBlockK * path->row_tile;
            const int64_t* tile_rows = rows == nullptr ? nullptr : rows + tile.position;
            if (tile.dot)
              decode_rows(src, args.a_stride_m, args.a_stride_k, tile.rows, k_len,
                          a_operand_table.data(), dst, tile_rows);
            else
              decode_panel(src, args.a_stride_m, args.a_stride_k, tile.rows, path->row_tile, k_len,
                           a_operand_table.data(), dst, 0, 0, tile_rows);
          }
        });

    // Each slot (one scratch, run by one thread at a time) claims tasks until none are left, so a
    // thread that starts late (cores shared) or a slower task does not leave work stranded. Every
    // task writes its own outputs in a fixed order: the result does not depend on who runs it.
    std::atomic<int64_t> next_task{0};
    at::parallel_for(0, chunk.slots, 1, [&](int64_t begin, int64_t end) {
      for (int64_t slot = begin; slot < end; ++slot) {
        auto* scratch = reinterpret_cast<float*>(slots_base + slot * slot_bytes);
        for (int64_t task = next_task++; task < chunk.tasks; task = next_task++)
          path->run_task(plan, task, scratch);
      }
    });
  }
  return {};
}

std::string quantize_launch(const QuantizeArgs& args, void* /*stream*/) {
  using namespace cpu;
  const Fp8Encoder* encoder = fp8_encoder(args.q_format);
  if (encoder == nullptr) return format_error("q_format", static_cast<int32_t>(args.q_format));
  if (args.x_format != InFormat::kBF16 && args.x_format != InFormat::kFP16 &&
      args.x_format != InFormat::kFP32)
    return format_error("x_format", static_cast<int32_t>(args.x_format));
  if (!known_scale_format(args.scale_format))
    return format_error("scale_format", static_cast<int32_t>(args.scale_format));
  std::string error;
  const IsaPath* path = selected_path(error);
  if (path == nullptr) return error;
  at::parallel_for(0, args.m, plan_quantize_grain(args.k), [&](int64_t begin, int64_t end) {
    path->quantize_rows(args, *encoder, begin, end);
  });
  return {};
}

}  // namespace gemm
