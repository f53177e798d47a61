// CPU backend of gemm::gemm_launch (see ../gemm_contract.h for the contract).
//
// Every output element is computed by one thread in a fixed order, so results do not depend on
// the thread count (the numerics are in gemm_kernel.h).
//
// Blocking: rows are processed in chunks whose A is decoded once into a packed fp32 panel
// ([K block][row tile][k][kMR]); each task owns a kTileN-column strip of B, decodes one K block of
// it at a time into a packed panel ([k][kNR] per strip, hot in L1/L2) and reuses it for every row
// tile of the chunk. The micro-kernel keeps a kMR x kNR partial product in vector registers for one
// K block, then promotes it into the task's fp32 accumulator tile with the per-row scale.
#include "../gemm_contract.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

// Vector types cross function boundaries only inside one ISA's flattened entry point, so the
// psABI note about passing them without that ISA enabled does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

#include "fp8_formats.h"
#include "gemm_kernel.h"
#include "planner.h"
#include "tile_configs.h"
#include "x86_vector_isa.h"

#ifndef _OPENMP
#warning "gemm CPU backend compiled without -fopenmp: at::parallel_for runs on one thread"
#endif

namespace gemm::cpu {
namespace {

// Pins the vector ISA path (avx512, avx2, sse2, portable) instead of the widest one.
constexpr const char* kIsaEnvVar = "GEMM_CPU_ISA";

// One entry per ISA: `flatten` inlines the generic body so it is compiled for that target.
using RunTaskFn = void (*)(const ChunkPlan&, int64_t, float*);

#if defined(__x86_64__)
__attribute__((target("avx512f,fma"), flatten)) void run_task_avx512(const ChunkPlan& plan,
                                                                     int64_t task, float* scratch) {
  run_task<IsaAvx512>(plan, task, scratch);
}
__attribute__((target("avx2,fma"), flatten)) void run_task_avx2(const ChunkPlan& plan, int64_t task,
                                                                float* scratch) {
  run_task<IsaAvx2Fma>(plan, task, scratch);
}
__attribute__((flatten)) void run_task_sse2(const ChunkPlan& plan, int64_t task, float* scratch) {
  run_task<IsaSse2>(plan, task, scratch);
}
#endif
__attribute__((flatten)) void run_task_portable(const ChunkPlan& plan, int64_t task,
                                                float* scratch) {
  run_task<IsaPortable>(plan, task, scratch);
}

struct IsaPath {
  RunTaskFn run_task;
  bool (*supported)();
  int64_t row_tile;
  const char* name;
};

template <class Isa>
constexpr IsaPath make_path(RunTaskFn fn) {
  return {fn, &Isa::supported, TileConfig<Isa>::kMR, Isa::kName};
}

// Widest first.
constexpr IsaPath kPaths[] = {
#if defined(__x86_64__)
    make_path<IsaAvx512>(run_task_avx512),
    make_path<IsaAvx2Fma>(run_task_avx2),
    make_path<IsaSse2>(run_task_sse2),
#endif
    make_path<IsaPortable>(run_task_portable),
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

}  // namespace
}  // namespace gemm::cpu

namespace gemm {

std::string gemm_launch(const GemmArgs& args, const Workspace& workspace, void* /*stream*/) {
  using namespace cpu;
  if (args.a_scale_format != ScaleFormat::kF32 || args.b_scale_format != ScaleFormat::kF32 || args.num_groups != 0)
    return "UE8M0 scales and grouped GEMMs are not implemented by the CPU backend";
  const Fp8Decoder* a_decoder = fp8_decoder(args.a_format);
  if (a_decoder == nullptr) return format_error("a_format", static_cast<int32_t>(args.a_format));
  const Fp8Decoder* b_decoder = fp8_decoder(args.b_format);
  if (b_decoder == nullptr) return format_error("b_format", static_cast<int32_t>(args.b_format));
  if (args.c_format != OutFormat::kBF16 && args.c_format != OutFormat::kFP16 &&
      args.c_format != OutFormat::kFP32)
    return format_error("c_format", static_cast<int32_t>(args.c_format));

  static const IsaSelection selection = select_path();
  if (selection.path == nullptr) return selection.error;
  const IsaPath& path = *selection.path;
  const int64_t k_blocks = ceil_div(args.k, kScaleBlockK);
  const int64_t chunk_rows = plan_chunk_rows(k_blocks, path.row_tile);
  const int64_t max_row_tiles = ceil_div(std::min(args.m, chunk_rows), path.row_tile);
  const int64_t n_tiles = ceil_div(args.n, kTileN);
  const int64_t threads = std::max<int64_t>(1, at::get_num_threads());

  // Workspace: the packed A of one chunk, then one (B panel + accumulator) scratch per slot.
  const size_t a_pack_bytes =
      round_up(sizeof(float) * max_row_tiles * k_blocks * kScaleBlockK * path.row_tile);
  const size_t slot_bytes =
      round_up(sizeof(float) * (kTileN * kScaleBlockK + max_row_tiles * path.row_tile * kTileN));
  const size_t total_bytes = a_pack_bytes + slot_bytes * threads;
  if (workspace.allocate == nullptr)
    return "gemm (CPU): workspace.allocate must be set, got nullptr";
  auto* base = static_cast<unsigned char*>(workspace.get(total_bytes));
  if (base == nullptr)
    return "gemm (CPU): workspace allocation of " + std::to_string(total_bytes) + " bytes failed";
  auto* a_pack = reinterpret_cast<float*>(base);
  unsigned char* slots_base = base + a_pack_bytes;

  const auto* a_bytes = static_cast<const uint8_t*>(args.a);
  for (int64_t m_begin = 0; m_begin < args.m; m_begin += chunk_rows) {
    ChunkPlan plan{};
    plan.args = &args;
    plan.b_decoder = b_decoder;
    plan.k_blocks = k_blocks;
    plan.m_begin = m_begin;
    plan.rows = std::min(chunk_rows, args.m - m_begin);
    plan.row_tiles = ceil_div(plan.rows, path.row_tile);
    // e.g. 16 rows as 8 + 8 rather than 12 + 4: a thin tile is load-bound in the micro-kernel.
    plan.tile_rows = ceil_div(plan.rows, plan.row_tiles);
    plan.n_tiles = n_tiles;
    plan.a_pack = a_pack;

    at::parallel_for(
        0, plan.row_tiles * k_blocks, plan_a_decode_grain(path.row_tile),
        [&](int64_t begin, int64_t end) {
          for (int64_t item = begin; item < end; ++item) {
            const int64_t kb = item / plan.row_tiles, tile = item % plan.row_tiles;
            const int64_t row = tile * plan.tile_rows;
            const int64_t k_begin = kb * kScaleBlockK;
            decode_panel(a_bytes + (m_begin + row) * args.a_stride_m + k_begin * args.a_stride_k,
                         args.a_stride_m, args.a_stride_k,
                         std::min(plan.tile_rows, plan.rows - row), path.row_tile,
                         std::min(kScaleBlockK, args.k - k_begin), a_decoder->table,
                         a_pack + item * kScaleBlockK * path.row_tile);
          }
        });

    const TaskSplit split = plan_tasks(args.k, plan.row_tiles, plan.tile_rows, n_tiles, threads);
    plan.tiles_per_split = split.tiles_per_split;
    // Each slot (one scratch, run by one thread at a time) claims tasks until none are left, so a
    // thread that starts late (cores shared) or a slower task does not leave work stranded. Every
    // task writes its own outputs in a fixed order: the result does not depend on who runs it.
    std::atomic<int64_t> next_task{0};
    at::parallel_for(0, split.slots, 1, [&](int64_t begin, int64_t end) {
      for (int64_t slot = begin; slot < end; ++slot) {
        auto* scratch = reinterpret_cast<float*>(slots_base + slot * slot_bytes);
        for (int64_t task = next_task++; task < split.tasks; task = next_task++)
          path.run_task(plan, task, scratch);
      }
    });
  }
  return {};
}

}  // namespace gemm
