// How fast one SM takes in a GEMM's A and B tiles, by load path. The question it answers: the data path of
// the GEMM (TMA loads into a stage ring, nothing else) runs at about one 128-byte line every 2.2-2.7 cycles
// per SM (cuda_notes.md, session of 2026-12-04 17:03 UTC). Is that a rate of lines, of TMA instructions, or
// of the SM's TMA unit alone (so that part of each stage copied by the producer warps' cp.async, the LSU
// path, would raise it)?
//
// Each CTA walks the K blocks of its BM x BN tiles as the GEMM's producer does (128-byte K blocks,
// 128B-swizzled stages, full/empty mbarrier ring); one consumer warp frees each stage as soon as it lands.
// Paths: tma = A and B by TMA (the GEMM; `box` rows an instruction, `kpi` K blocks an instruction and a
// stage through a 3-D view [K/128][rows][128 bytes]), lsu = A and B by the 128 producer threads' 16-byte
// cp.async, tma_a_lsu_b = A by TMA and B by cp.async. `scales` adds the GEMM's third TMA of a stage, the
// M-major A scales (BM floats a K block).
//
//   nvcc -O3 -std=c++17 -I. -gencode=arch=compute_90a,code=sm_90a -o /tmp/ingest scripts/cuda/diag_ingest.cu
//   /tmp/ingest > ingest.jsonl   (one JSON line per case: shape, tile, stages, box, kpi, path, L2, us, cycles
//                                 per K block, bytes per clock per SM)
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "gemm/cuda/hopper_layout.h"
#include "gemm/cuda/hopper_ptx.h"

namespace {

namespace ptx = gemm::cuda::ptx;
namespace hw = gemm::cuda::hopper;

constexpr int kBlockK = 128;  // bytes of K per stage row
constexpr int kProducerThreads = 128;
constexpr int kThreads = kProducerThreads + hw::kWarpSize;
constexpr int kChunk = 16;  // cp.async bytes
constexpr int kChunksPerRow = kBlockK / kChunk;
enum Path { kTmaBoth = 0, kLsuBoth = 1, kTmaALsuB = 2 };

__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}

// rows x 128 bytes of `src` (row stride k) into a 128B-swizzled tile at `dst`, by the producer threads.
__device__ __forceinline__ void lsu_tile(uint32_t dst, const uint8_t* src, int64_t k, int rows) {
  for (int c = threadIdx.x; c < rows * kChunksPerRow; c += kProducerThreads) {
    const int row = c / kChunksPerRow, unit = c % kChunksPerRow;
    cp_async_16(dst + hw::swizzle_span(static_cast<uint32_t>(row * kBlockK + unit * kChunk), hw::kSwizzleBytes),
                src + row * k + unit * kChunk);
  }
}

struct Args {
  const uint8_t* a;
  const uint8_t* b;
  int64_t k;
  int m_blocks, n_blocks, bm, bn, box_a, box_b, kpi, stages, path;
  bool scales;
  long long* cycles;  // per CTA: first stage landed -> last stage landed
  int* kblocks;       // per CTA: K blocks landed after the first stage
};

// `rows` rows of one operand's K blocks [kb0, kb0 + kpi) by TMA, `box` rows an instruction:
// [rows / box][kpi][box][128] at dst.
__device__ __forceinline__ void tma_operand(uint8_t* dst, const CUtensorMap* map, uint64_t* bar, int kpi,
                                            int row0, int rows, int box, int kb0) {
  for (int r = 0; r < rows; r += box) {
    if (kpi == 1) {
      ptx::tma_load_2d(dst + r * kBlockK, map, bar, kb0 * kBlockK, row0 + r);
    } else {
      ptx::tma_load_3d(dst + r * kpi * kBlockK, map, bar, 0, row0 + r, kb0);
    }
  }
}

__global__ void __launch_bounds__(kThreads, 1)
    ingest(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
           const __grid_constant__ CUtensorMap map_sa, Args p) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  const int a_bytes = p.kpi * p.bm * kBlockK, b_bytes = p.kpi * p.bn * kBlockK;
  const int scale_bytes = p.scales ? p.kpi * p.bm * static_cast<int>(sizeof(float)) : 0;
  const int stage_bytes = a_bytes + b_bytes + (scale_bytes + 1023) / 1024 * 1024;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + p.stages * stage_bytes);
  uint64_t* empty = full + p.stages;
  const int lsu_arrivals = p.path == kTmaBoth ? 0 : kProducerThreads;
  if (threadIdx.x == 0) {
    for (int s = 0; s < p.stages; ++s) {
      ptx::mbar_init(&full[s], lsu_arrivals + (p.path == kLsuBoth ? 0 : 1));
      ptx::mbar_init(&empty[s], 1);
    }
    ptx::fence_barrier_init();
  }
  __syncthreads();
  const int stage_count = static_cast<int>(p.k / kBlockK) / p.kpi;
  const int tiles = p.m_blocks * p.n_blocks;
  if (threadIdx.x < kProducerThreads) {
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      const int m0 = (t % p.m_blocks) * p.bm, n0 = (t / p.m_blocks) * p.bn;
      for (int st = 0; st < stage_count; ++st, ++it) {
        const int s = it % p.stages, kb0 = st * p.kpi;
        if (it >= p.stages) ptx::mbar_wait(&empty[s], ((it / p.stages) - 1) & 1);
        uint8_t* sa = smem + s * stage_bytes;
        uint8_t* sb = sa + a_bytes;
        if (p.path != kLsuBoth && threadIdx.x == 0) {
          const int tma_bytes = (p.path == kTmaBoth ? a_bytes + b_bytes : a_bytes) + scale_bytes;
          ptx::mbar_arrive_expect_tx(&full[s], tma_bytes);
          tma_operand(sa, &map_a, &full[s], p.kpi, m0, p.bm, p.box_a, kb0);
          if (p.path == kTmaBoth) tma_operand(sb, &map_b, &full[s], p.kpi, n0, p.bn, p.box_b, kb0);
          if (p.scales) ptx::tma_load_2d(sb + b_bytes, &map_sa, &full[s], m0, kb0);
        }
        if (p.path != kTmaBoth) {
          if (p.path == kLsuBoth) lsu_tile(ptx::smem_addr(sa), p.a + m0 * p.k + kb0 * kBlockK, p.k, p.bm);
          lsu_tile(ptx::smem_addr(sb), p.b + n0 * p.k + kb0 * kBlockK, p.k, p.bn);
          ptx::cp_async_mbar_arrive_noinc(&full[s]);
        }
      }
    }
  } else if (threadIdx.x < kProducerThreads + hw::kWarpSize) {
    int it = 0;
    long long start = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      for (int st = 0; st < stage_count; ++st, ++it) {
        const int s = it % p.stages;
        ptx::mbar_wait(&full[s], (it / p.stages) & 1);
        if (it == 0) start = clock64();
        __syncwarp();
        if (threadIdx.x == kProducerThreads) ptx::mbar_arrive(&empty[s]);
      }
    }
    if (threadIdx.x == kProducerThreads) {
      p.cycles[blockIdx.x] = clock64() - start;
      p.kblocks[blockIdx.x] = (it - 1) * p.kpi;  // K blocks after the first stage
    }
  }
}

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// K-major [rows, k] bytes: 2-D boxes of 128 bytes x box rows, or with kpi > 1 a 3-D view [k / 128][rows][128]
// whose boxes take kpi K blocks at once.
CUtensorMap operand_map(EncodeTiledFn encode, const void* ptr, int64_t rows, int64_t k, int box, int kpi) {
  CUtensorMap map{};
  const cuuint64_t dims[3] = {kBlockK, static_cast<cuuint64_t>(rows), static_cast<cuuint64_t>(k / kBlockK)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(k), kBlockK};
  const cuuint32_t boxes[3] = {kBlockK, static_cast<cuuint32_t>(box), static_cast<cuuint32_t>(kpi)};
  const cuuint32_t elem[3] = {1, 1, 1};
  CUresult r;
  if (kpi == 1) {
    const cuuint64_t dims2[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(rows)};
    r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(ptr), dims2, strides, boxes, elem,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  } else {
    r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<void*>(ptr), dims, strides, boxes, elem,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  }
  if (r != CUDA_SUCCESS) std::printf("{\"error\": \"cuTensorMapEncodeTiled %d (kpi %d)\"}\n", static_cast<int>(r), kpi);
  return map;
}

// M-major A scales [k / 128][m] fp32: boxes of bm rows x kpi K blocks.
CUtensorMap scale_map(EncodeTiledFn encode, const void* ptr, int64_t m, int64_t k, int bm, int kpi) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(m), static_cast<cuuint64_t>(k / kBlockK)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(m * sizeof(float))};
  const cuuint32_t boxes[2] = {static_cast<cuuint32_t>(bm), static_cast<cuuint32_t>(kpi)};
  const cuuint32_t elem[2] = {1, 1};
  encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, const_cast<void*>(ptr), dims, strides, boxes, elem,
         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return map;
}

struct Case {
  int m, n, k, bm, bn, stages, box, kpi, path;
  bool scales, warm;
};

}  // namespace

int main() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q);
  const auto encode = reinterpret_cast<EncodeTiledFn>(fn);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaFuncSetAttribute(ingest, cudaFuncAttributeMaxDynamicSharedMemorySize, hw::kMaxSmemPerBlock);

  // Stages hold kpi K blocks: the rings below keep 4-6 K blocks in flight, as the GEMM's do.
  std::vector<Case> cases;
  for (bool scales : {false, true}) {
    for (int kpi : {1, 2}) {
      cases.push_back({1024, 1536, 7168, 128, 128, 6 / kpi, 128, kpi, kTmaBoth, scales, false});
      cases.push_back({4096, 7168, 16384, 192, 128, kpi == 1 ? 5 : 2, 192, kpi, kTmaBoth, scales, false});
      cases.push_back({6144, 576, 7168, 256, 128, kpi == 1 ? 4 : 2, 256, kpi, kTmaBoth, scales, false});
    }
  }
  cases.push_back({1024, 1536, 7168, 128, 128, 2, 128, 2, kTmaBoth, false, false});
  for (int box : {32, 64}) cases.push_back({1024, 1536, 7168, 128, 128, 6, box, 1, kTmaBoth, false, false});
  cases.push_back({1024, 1536, 7168, 128, 96, 6, 128, 1, kTmaBoth, false, false});  // 128 CTAs, 224 rows a stage
  cases.push_back({1024, 1536, 7168, 128, 96, 3, 128, 2, kTmaBoth, false, false});
  cases.push_back({1024, 1536, 7168, 128, 128, 4, 128, 1, kTmaBoth, false, false});
  cases.push_back({1024, 1536, 7168, 128, 128, 6, 128, 1, kTmaBoth, false, true});
  for (int path : {kLsuBoth, kTmaALsuB}) cases.push_back({1024, 1536, 7168, 128, 128, 6, 128, 1, path, false, false});

  const int64_t kMaxOperandBytes = int64_t{128} << 20, kFlushBytes = int64_t{256} << 20;
  uint8_t *a = nullptr, *b = nullptr;
  float* sa = nullptr;
  void* flush = nullptr;
  long long* cycles = nullptr;
  int* kblocks = nullptr;
  cudaMalloc(&a, kMaxOperandBytes);
  cudaMalloc(&b, kMaxOperandBytes);
  cudaMalloc(&sa, kMaxOperandBytes / kBlockK * sizeof(float));
  cudaMalloc(&flush, kFlushBytes);
  cudaMalloc(&cycles, sizeof(long long) * sms);
  cudaMalloc(&kblocks, sizeof(int) * sms);
  cudaMemset(a, 0x11, kMaxOperandBytes);
  cudaMemset(b, 0x22, kMaxOperandBytes);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (const Case& c : cases) {
    const int m_blocks = (c.m + c.bm - 1) / c.bm, n_blocks = (c.n + c.bn - 1) / c.bn;
    const int grid = std::min(m_blocks * n_blocks, sms);
    const int box_a = std::min(c.box, c.bm), box_b = std::min(c.box, c.bn);
    const CUtensorMap ma = operand_map(encode, a, c.m, c.k, box_a, c.kpi);
    const CUtensorMap mb = operand_map(encode, b, c.n, c.k, box_b, c.kpi);
    const CUtensorMap ms = scale_map(encode, sa, c.m, c.k, c.bm, c.kpi);
    const Args args{a, b, c.k, m_blocks, n_blocks, c.bm, c.bn, box_a, box_b, c.kpi, c.stages, c.path, c.scales,
                    cycles, kblocks};
    const int scale_bytes = c.scales ? (c.kpi * c.bm * 4 + 1023) / 1024 * 1024 : 0;
    const int smem = c.stages * (c.kpi * (c.bm + c.bn) * kBlockK + scale_bytes) + 2 * 8 * c.stages + 1024;
    std::vector<float> t;
    std::vector<double> cpk;
    for (int rep = 0; rep < 16; ++rep) {
      if (!c.warm) cudaMemsetAsync(flush, rep & 0xff, kFlushBytes);
      cudaEventRecord(e0);
      ingest<<<grid, kThreads, smem>>>(ma, mb, ms, args);
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms_elapsed = 0;
      cudaEventElapsedTime(&ms_elapsed, e0, e1);
      std::vector<long long> cyc(grid);
      std::vector<int> kbs(grid);
      cudaMemcpy(cyc.data(), cycles, sizeof(long long) * grid, cudaMemcpyDeviceToHost);
      cudaMemcpy(kbs.data(), kblocks, sizeof(int) * grid, cudaMemcpyDeviceToHost);
      if (rep == 0) continue;
      t.push_back(ms_elapsed * 1e3f);
      double sum = 0;
      for (int i = 0; i < grid; ++i) sum += static_cast<double>(cyc[i]) / std::max(kbs[i], 1);
      cpk.push_back(sum / grid);
    }
    std::sort(t.begin(), t.end());
    std::sort(cpk.begin(), cpk.end());
    const double us = t[t.size() / 2], cycles_per_kb = cpk[cpk.size() / 2];
    std::printf("{\"shape\": \"%dx%dx%d\", \"tile\": \"%dx%d\", \"stages\": %d, \"box\": %d, \"kpi\": %d, "
                "\"scales\": %s, \"path\": \"%s\", \"l2\": \"%s\", \"ctas\": %d, \"us\": %.2f, "
                "\"cycles_per_kblock\": %.0f, \"bytes_per_clk_sm\": %.1f}\n",
                c.m, c.n, c.k, c.bm, c.bn, c.stages, box_a, c.kpi, c.scales ? "true" : "false",
                c.path == kTmaBoth ? "tma" : c.path == kLsuBoth ? "lsu" : "tma_a_lsu_b", c.warm ? "warm" : "cold",
                grid, us, cycles_per_kb, (c.bm + c.bn) * kBlockK / cycles_per_kb);
    std::fflush(stdout);
    if (const cudaError_t err = cudaDeviceSynchronize(); err != cudaSuccess) {
      std::printf("{\"error\": \"%s\"}\n", cudaGetErrorString(err));
      return 1;
    }
  }
  return 0;
}
