// CPU backend of gemm::gemm_launch (see ../gemm_contract.h for the contract).
//
// Numerics (the recipe, in this order): for every 128-wide K block kb,
//   partial[m, n] = sum_k decode(A[m, k]) * decode(B[n, k])       (fp32, k ascending)
//   acc[m, n]     = acc[m, n] + partial[m, n] * (As[m, kb] * Bs[n / 128, kb])    (fp32)
// then acc is rounded once to the output format (bf16/fp16: round to nearest even, NaN kept).
// The AVX-512 and AVX2 paths fuse each multiply-add (FMA); SSE2 and the portable path (other
// architectures) may round twice.
// Every output element is computed by one thread in a fixed order, so results do not depend on
// the thread count.
//
// Blocking: rows are processed in chunks whose A is decoded once into a packed fp32 panel
// ([K block][row tile][k][kMR]); each task owns a kTileN-column strip of B, decodes one K block of
// it at a time into a packed panel ([k][kNR] per strip, hot in L1/L2) and reuses it for every row
// tile of the chunk. The micro-kernel keeps a kMR x kNR partial product in vector registers for one
// K block, then promotes it into the task's fp32 accumulator tile with the per-row scale.
#include "../gemm_contract.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <utility>

// Vector types cross function boundaries only inside one ISA's flattened entry point, so the
// psABI note about passing them without that ISA enabled does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

#include "fp8_formats.h"
#include "x86_vector_isa.h"

#ifndef _OPENMP
#warning "gemm CPU backend compiled without -fopenmp: at::parallel_for runs on one thread"
#endif

namespace gemm::cpu {
namespace {

// Columns per task. Dividing kScaleBlockN keeps one B scale per (task, K block).
constexpr int64_t kTileN = 64;
static_assert(kScaleBlockN % kTileN == 0, "a column tile must not straddle a B scale block");

// Rows whose decoded A is held at once: bounds the workspace for long prefills while decoding
// each B panel only once per this many rows (B decode cost / FMA cost ~ vector lanes / rows).
constexpr int64_t kMaxChunkRows = 1024;
// ... and fewer rows when K is so long that the decoded A of kMaxChunkRows would exceed this.
constexpr int64_t kMaxPackedABytes = int64_t{256} << 20;

// Most row splits considered when balancing tasks over threads.
constexpr int64_t kMaxRowSplits = 8;

// Work below which another thread costs more (fork/join, and a wait when cores are shared) than it
// saves, in decoded FP8 elements; a decode costs about as much as this many multiply-adds.
constexpr int64_t kMinElementsPerThread = int64_t{1} << 18;
constexpr int64_t kMultiplyAddsPerDecode = 16;

// Vectors per micro-tile row: two independent B loads per k step.
constexpr int kVectorsPerRow = 2;
// One register for the broadcast A value.
constexpr int kBroadcastRegisters = 1;
// Left to the compiler: with all 31 (AVX-512: 14 rows) GCC 12 spills accumulators in the k loop
// (measured 512x2112x7168: 12 rows 15 % faster than 14; AVX2 equal at 4 and 6 rows).
constexpr int kCompilerRegisters = 4;

// Pins the vector ISA path (avx512, avx2, sse2, portable) instead of the widest one.
constexpr const char* kIsaEnvVar = "GEMM_CPU_ISA";

// How far ahead (in k) the decoder of an N-major B prefetches (measured: 8 to 128 all help, 32
// best).
constexpr int64_t kPrefetchKRows = 32;

// Workspace carve-outs start on a cache line so packed panels never split one.
constexpr size_t kCacheLineBytes = 64;

template <class Isa>
struct VectorTypes {
  static constexpr int kLanes = Isa::kVectorBytes / static_cast<int>(sizeof(float));
  typedef float Float __attribute__((vector_size(Isa::kVectorBytes)));
  typedef int32_t Int __attribute__((vector_size(Isa::kVectorBytes)));
};

template <class Isa>
struct TileConfig {
  static constexpr int kLanes = VectorTypes<Isa>::kLanes;
  static constexpr int kNR = kLanes * kVectorsPerRow;
  // Rows of the register tile: what is left of the register file after the B vectors, the A
  // broadcast and the compiler's share, kVectorsPerRow accumulators per row.
  static constexpr int kMR =
      (Isa::kVectorRegisters - kVectorsPerRow - kBroadcastRegisters - kCompilerRegisters) /
      kVectorsPerRow;
  static_assert(kTileN % kNR == 0, "a column tile is a whole number of micro-tile strips");
};

// What every task of one row chunk shares. The packed A layout depends on the selected ISA's kMR.
struct ChunkPlan {
  const GemmArgs* args;
  const Fp8Decoder* b_decoder;
  int64_t k_blocks;
  int64_t m_begin;          // first row of the chunk
  int64_t rows;             // rows in the chunk
  int64_t row_tiles;        // ceil(rows / kMR)
  int64_t tile_rows;        // rows of every row tile but the last: rows spread evenly, <= kMR
  int64_t n_tiles;          // ceil(n / kTileN)
  int64_t tiles_per_split;  // row tiles per task
  // [k_blocks][row_tiles][kScaleBlockK][kMR]: one K block of all rows is contiguous.
  const float* a_pack;
};

// Decodes fp8 src[r * stride_row + k * stride_k] (r < valid_rows, k < k_len) into
// dst[k * padded_rows + r]; rows valid_rows..padded_rows are zero so padded lanes add nothing
// (and a NaN in one row never reaches another row). `vector_rows` x `vector_k` leading rows and
// columns were already written by decode_panel_vector.
void decode_panel(const uint8_t* src, int64_t stride_row, int64_t stride_k, int64_t valid_rows,
                  int64_t padded_rows, int64_t k_len, const float* table, float* dst,
                  int64_t vector_rows = 0, int64_t vector_k = 0) {
  for (int64_t r = 0; r < valid_rows; ++r) {
    const uint8_t* row = src + r * stride_row;
    for (int64_t k = r < vector_rows ? vector_k : 0; k < k_len; ++k)
      dst[k * padded_rows + r] = table[row[k * stride_k]];
  }
  for (int64_t r = valid_rows; r < padded_rows; ++r)
    for (int64_t k = 0; k < k_len; ++k) dst[k * padded_rows + r] = 0.0f;
}

// One stage of an in-register square transpose: swaps the off-diagonal kBlock x kBlock blocks of
// every 2*kBlock x 2*kBlock block (lane j of row i with j & kBlock set <-> lane j - kBlock of row
// i + kBlock). All stages for kBlock = 1, 2, ..., kLanes / 2 transpose the matrix.
template <class Float, int kLanes, int kBlock, int... kLane>
inline void transpose_stage(Float* rows, std::integer_sequence<int, kLane...>) {
#pragma GCC unroll 16
  for (int i = 0; i < kLanes; ++i) {
    if (i & kBlock) continue;
    const Float low = rows[i], high = rows[i + kBlock];
    rows[i] =
        __builtin_shufflevector(low, high, ((kLane & kBlock) ? kLane - kBlock + kLanes : kLane)...);
    rows[i + kBlock] =
        __builtin_shufflevector(low, high, ((kLane & kBlock) ? kLane + kLanes : kLane + kBlock)...);
  }
}

template <class Float, int kLanes, int kBlock = 1>
inline void transpose_square(Float* rows) {
  if constexpr (kBlock < kLanes) {
    transpose_stage<Float, kLanes, kBlock>(rows, std::make_integer_sequence<int, kLanes>{});
    transpose_square<Float, kLanes, 2 * kBlock>(rows);
  }
}

// decode_panel for rows contiguous in K (stride_k == 1): decodes kLanes x kLanes blocks
// arithmetically, one row's kLanes codes per vector, and transposes them in registers into the
// [k][row] panel layout. For rows adjacent in memory (stride_row == 1, an N-major B) the kLanes
// codes of one k are already a panel row: no transpose. The ragged remainder goes through the
// table.
template <class Isa>
inline void decode_panel_vector(const uint8_t* src, int64_t stride_row, int64_t stride_k,
                                int64_t valid_rows, int64_t padded_rows, int64_t k_len,
                                int64_t k_remaining, const Fp8Decoder& decoder, float* dst) {
  using V = VectorTypes<Isa>;
  constexpr int kLanes = V::kLanes;
  const int64_t vector_rows = valid_rows / kLanes * kLanes;
  if (stride_row == 1) {
    for (int64_t k = 0; k < k_len; ++k) {
      // Each k is another page of B: without a prefetch every row is a dependent TLB + cache miss.
      if (k + kPrefetchKRows < k_remaining)
        __builtin_prefetch(src + (k + kPrefetchKRows) * stride_k);
      for (int64_t r0 = 0; r0 < vector_rows; r0 += kLanes) {
        const typename V::Float values = decode_e4m3_vector<typename V::Float>(
            (typename V::Int)Isa::widen_bytes(src + k * stride_k + r0), decoder);
        std::memcpy(dst + k * padded_rows + r0, &values, sizeof(values));
      }
    }
    decode_panel(src, stride_row, stride_k, valid_rows, padded_rows, k_len, decoder.table, dst,
                 vector_rows, k_len);
    return;
  }
  const int64_t vector_k = k_len / kLanes * kLanes;
  for (int64_t r0 = 0; r0 < vector_rows; r0 += kLanes) {
    for (int64_t k0 = 0; k0 < vector_k; k0 += kLanes) {
      typename V::Float block[kLanes];
#pragma GCC unroll 16
      for (int i = 0; i < kLanes; ++i) {
        block[i] = decode_e4m3_vector<typename V::Float>(
            (typename V::Int)Isa::widen_bytes(src + (r0 + i) * stride_row + k0), decoder);
      }
      transpose_square<typename V::Float, kLanes>(block);
#pragma GCC unroll 16
      for (int t = 0; t < kLanes; ++t)
        std::memcpy(dst + (k0 + t) * padded_rows + r0, &block[t], sizeof(block[t]));
    }
  }
  decode_panel(src, stride_row, stride_k, valid_rows, padded_rows, k_len, decoder.table, dst,
               vector_rows, vector_k);
}

// partial = A_panel[k_len x kRows] * B_panel[k_len x kNR] in registers, then
// acc[i][:] += partial[i][:] * row_scale[i].
template <class Isa, int kRows>
inline void micro_kernel(const float* a_panel, const float* b_panel, int64_t k_len, float* acc,
                         int64_t acc_stride, const float* row_scale) {
  using Cfg = TileConfig<Isa>;
  using Vec = typename VectorTypes<Isa>::Float;
  Vec partial[kRows][kVectorsPerRow] = {};
  for (int64_t k = 0; k < k_len; ++k) {
    Vec b[kVectorsPerRow];
#pragma GCC unroll 4
    for (int v = 0; v < kVectorsPerRow; ++v)
      std::memcpy(&b[v], b_panel + k * Cfg::kNR + v * Cfg::kLanes, sizeof(Vec));
#pragma GCC unroll 16
    for (int i = 0; i < kRows; ++i) {
      const float a = a_panel[k * Cfg::kMR + i];
#pragma GCC unroll 4
      for (int v = 0; v < kVectorsPerRow; ++v) partial[i][v] += b[v] * a;
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectorsPerRow; ++v) {
      float* dst = acc + i * acc_stride + v * Cfg::kLanes;
      Vec c;
      std::memcpy(&c, dst, sizeof(Vec));
      c += partial[i][v] * row_scale[i];
      std::memcpy(dst, &c, sizeof(Vec));
    }
  }
}

// Picks the micro-kernel instantiation for a (possibly partial) row tile.
template <class Isa, int kRows = TileConfig<Isa>::kMR>
inline void micro_kernel_rows(int64_t rows, const float* a_panel, const float* b_panel,
                              int64_t k_len, float* acc, int64_t acc_stride,
                              const float* row_scale) {
  if constexpr (kRows > 1) {
    if (rows < kRows) {
      micro_kernel_rows<Isa, kRows - 1>(rows, a_panel, b_panel, k_len, acc, acc_stride, row_scale);
      return;
    }
  }
  micro_kernel<Isa, kRows>(a_panel, b_panel, k_len, acc, acc_stride, row_scale);
}

template <class T>
void store_tile(const float* acc, int64_t rows, int64_t cols, T* c, int64_t c_stride_m,
                int64_t c_stride_n) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      c[i * c_stride_m + j * c_stride_n] = static_cast<T>(acc[i * kTileN + j]);
}

// One task: a kTileN-column strip times a run of row tiles of the chunk, all K blocks.
// `scratch` holds the decoded B panel then the fp32 accumulator tile.
template <class Isa>
inline void run_task(const ChunkPlan& plan, int64_t task, float* scratch) {
  using Cfg = TileConfig<Isa>;
  const GemmArgs& g = *plan.args;
  const int64_t n_tile = task % plan.n_tiles;
  const int64_t tile_begin = task / plan.n_tiles * plan.tiles_per_split;
  const int64_t tile_end = std::min(plan.row_tiles, tile_begin + plan.tiles_per_split);
  if (tile_begin >= tile_end) return;
  const int64_t row_begin = tile_begin * plan.tile_rows;
  const int64_t rows = std::min(tile_end * plan.tile_rows, plan.rows) - row_begin;
  const int64_t n_begin = n_tile * kTileN;
  const int64_t cols = std::min(kTileN, g.n - n_begin);
  const int64_t strips = ceil_div(cols, Cfg::kNR);

  float* b_pack = scratch;
  float* acc = scratch + kTileN * kScaleBlockK;
  std::fill(acc, acc + rows * kTileN, 0.0f);

  const auto* b_bytes = static_cast<const uint8_t*>(g.b);
  const float* b_scale_row = static_cast<const float*>(g.b_scale) + n_begin / kScaleBlockN * g.b_scale_stride_n;
  for (int64_t kb = 0; kb < plan.k_blocks; ++kb) {
    const int64_t k_begin = kb * kScaleBlockK;
    const int64_t k_len = std::min(kScaleBlockK, g.k - k_begin);
    for (int64_t s = 0; s < strips; ++s) {
      const int64_t n = n_begin + s * Cfg::kNR;
      const uint8_t* src = b_bytes + n * g.b_stride_n + k_begin * g.b_stride_k;
      const int64_t valid = std::min<int64_t>(Cfg::kNR, g.n - n);
      float* dst = b_pack + s * Cfg::kNR * kScaleBlockK;
      if (g.b_stride_k == 1) {
        // This strip's next K block: a task walks kTileN rows at once, more streams than the
        // hardware prefetcher follows, so each row would otherwise miss on every block.
        const int64_t next_len = std::min(kScaleBlockK, g.k - k_begin - kScaleBlockK);
        for (int64_t r = 0; r < valid; ++r)
          for (int64_t line = 0; line < next_len; line += kCacheLineBytes)
            __builtin_prefetch(src + r * g.b_stride_n + kScaleBlockK + line);
      }
      if (g.b_stride_k == 1 || g.b_stride_n == 1)
        decode_panel_vector<Isa>(src, g.b_stride_n, g.b_stride_k, valid, Cfg::kNR, k_len,
                                 g.k - k_begin, *plan.b_decoder, dst);
      else
        decode_panel(src, g.b_stride_n, g.b_stride_k, valid, Cfg::kNR, k_len, plan.b_decoder->table,
                     dst);
    }
    const float b_scale = b_scale_row[kb * g.b_scale_stride_k];
    for (int64_t tile = tile_begin; tile < tile_end; ++tile) {
      const int64_t r = tile * plan.tile_rows;
      const int64_t tile_rows = std::min(plan.tile_rows, plan.rows - r);
      float row_scale[Cfg::kMR];
      for (int64_t i = 0; i < tile_rows; ++i)
        row_scale[i] =
            static_cast<const float*>(g.a_scale)[(plan.m_begin + r + i) * g.a_scale_stride_m + kb * g.a_scale_stride_k] *
            b_scale;
      const float* a_panel = plan.a_pack + (kb * plan.row_tiles + tile) * kScaleBlockK * Cfg::kMR;
      float* acc_tile = acc + (r - row_begin) * kTileN;
      for (int64_t s = 0; s < strips; ++s)
        micro_kernel_rows<Isa>(tile_rows, a_panel, b_pack + s * Cfg::kNR * kScaleBlockK, k_len,
                               acc_tile + s * Cfg::kNR, kTileN, row_scale);
    }
  }

  const int64_t c_offset = (plan.m_begin + row_begin) * g.c_stride_m + n_begin * g.c_stride_n;
  switch (g.c_format) {
    case OutFormat::kBF16:
      store_tile(acc, rows, cols, static_cast<c10::BFloat16*>(g.c) + c_offset, g.c_stride_m,
                 g.c_stride_n);
      break;
    case OutFormat::kFP16:
      store_tile(acc, rows, cols, static_cast<c10::Half*>(g.c) + c_offset, g.c_stride_m,
                 g.c_stride_n);
      break;
    case OutFormat::kFP32:
      store_tile(acc, rows, cols, static_cast<float*>(g.c) + c_offset, g.c_stride_m, g.c_stride_n);
      break;
  }
}

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
  const int64_t padded_k = k_blocks * kScaleBlockK;
  const int64_t max_chunk_rows =
      std::min(kMaxChunkRows, kMaxPackedABytes / (padded_k * static_cast<int64_t>(sizeof(float))));
  const int64_t chunk_rows = std::max<int64_t>(1, max_chunk_rows / path.row_tile) * path.row_tile;
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

    const int64_t a_panel_elements = path.row_tile * kScaleBlockK;
    at::parallel_for(
        0, plan.row_tiles * k_blocks, ceil_div(kMinElementsPerThread, a_panel_elements),
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

    // Tasks are (column tile, run of row tiles). Splitting the rows balances few column tiles over
    // the threads but decodes each B panel once more per split: take the split count with the
    // shortest estimated makespan. A task decodes kTileN x K of B (each decode costs about
    // kMultiplyAddsPerDecode multiply-adds) and does rows x kTileN x K multiply-adds.
    const auto task_cost = [&](int64_t tiles_per_split) {
      return kTileN * args.k * (kMultiplyAddsPerDecode + tiles_per_split * plan.tile_rows);
    };
    const auto makespan = [&](int64_t splits) {
      const int64_t tiles_per_split = ceil_div(plan.row_tiles, splits);
      const int64_t tasks = n_tiles * ceil_div(plan.row_tiles, tiles_per_split);
      return ceil_div(tasks, threads) * task_cost(tiles_per_split);
    };
    int64_t splits = 1;
    for (int64_t s = 2; s <= std::min(plan.row_tiles, kMaxRowSplits); ++s)
      if (makespan(s) < makespan(splits)) splits = s;
    plan.tiles_per_split = ceil_div(plan.row_tiles, splits);
    const int64_t tasks = n_tiles * ceil_div(plan.row_tiles, plan.tiles_per_split);
    const int64_t task_elements = task_cost(plan.tiles_per_split) / kMultiplyAddsPerDecode;
    const int64_t slots =
        std::min({threads, tasks, ceil_div(tasks * task_elements, kMinElementsPerThread)});
    // Each slot (one scratch, run by one thread at a time) claims tasks until none are left, so a
    // thread that starts late (cores shared) or a slower task does not leave work stranded. Every
    // task writes its own outputs in a fixed order: the result does not depend on who runs it.
    std::atomic<int64_t> next_task{0};
    at::parallel_for(0, slots, 1, [&](int64_t begin, int64_t end) {
      for (int64_t slot = begin; slot < end; ++slot) {
        auto* scratch = reinterpret_cast<float*>(slots_base + slot * slot_bytes);
        for (int64_t task = next_task++; task < tasks; task = next_task++)
          path.run_task(plan, task, scratch);
      }
    });
  }
  return {};
}

}  // namespace gemm
