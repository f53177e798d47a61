// What the launcher hands the sm_90a FP8 GEMM kernel (gemm_kernel.cuh): its tensor maps and its
// per-call parameters.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "../gemm_contract.h"
#include "grouped_scheduler.h"
#include "tile_scheduler.h"

namespace gemm::cuda {

// The kernel's tensor maps, one parameter: the producer addresses them from one base register.
struct TensorMaps {
  CUtensorMap a, b, a_scale;                 // a_scale: only configs with scales_by_tma read it
  CUtensorMap a_pair, b_pair, a_scale_pair;  // two K blocks a box: read when KernelParams::pair_kblocks > 0
  CUtensorMap out;                           // only read when KernelParams::out_tma
};

// What grouped kernels (kGrouped) read beyond a dense GEMM's parameters.
struct GroupedParams {
  GroupRows rows;                    // where each group's rows lie
  int64_t b_scale_stride_group = 0;  // floats between groups' B scales (B itself is one [groups * n, k] map)
  const int32_t* out_rows = nullptr; // the output row of each A row (rows gathered by group id); nullptr: itself
};

struct KernelParams {
  int64_t m = 0, n = 0;
  TileSchedule sched;
  const float* a_scale = nullptr;
  int64_t a_scale_stride_m = 0, a_scale_stride_k = 0;
  const void* b_scale = nullptr;  // in b_scale_format
  int64_t b_scale_stride_n = 0, b_scale_stride_k = 0;
  void* out = nullptr;
  int64_t out_ld = 0;
  float* partial = nullptr;  // stream-K slots of BLOCK_M x BLOCK_N floats, one per range (sched.sk_tiles > 0)
  int* sk_flags = nullptr;   // per (range, math warpgroup): its slot rows are written; zero at launch
  int* tile_claims = nullptr;  // grouped tiles claimed (grouped_scheduler.h): the counter, zero at launch; nullptr: static
  OutFormat out_format = OutFormat::kBF16;
  bool out_pairs = false;   // base and row stride allow 2-element vector stores
  bool out_tma = false;     // 16-bit output stored through the staging tile by TMA (maps.out is valid)
  bool a_scale_tma = false; // 128+-row tiles: A scales loaded by TMA (maps.a_scale is valid), else gathered
  bool b_evict_first = false;  // B loaded under an L2 evict-first policy (b_evict_first() in planner.h)
  // K blocks [0, pair_kblocks) are whole, so the producer may load two of them with one instruction
  // through the TensorMaps *_pair maps (pairs_loads() in tile_configs.h); 0: never.
  int32_t pair_kblocks = 0;
  int32_t a_box_rows = 0;  // rows of A's TMA box where M < BLOCK_M (maps.a loads only those); 0: the tile's
  // fp32 or UE8M0 (decoded by the scale warp); A scales always arrive as fp32 (the launcher decodes UE8M0
  // ones into an fp32 copy).
  ScaleFormat b_scale_format = ScaleFormat::kF32;
  GroupedParams group;
};

}  // namespace gemm::cuda
