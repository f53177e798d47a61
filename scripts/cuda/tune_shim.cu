// C entry points over the CUDA backend for scripts/cuda/tune.py: run gemm_launch, or one forced
// (tile config, whole tiles or stream-K) plan, with a workspace callback supplied from Python.
#include <cuda_runtime.h>

#include <cstring>

#include "../../gemm/cuda/gemm_cuda.h"

extern "C" int tune_gemm(const gemm::GemmArgs* args, void* (*allocate)(void*, size_t), void* context,
                         void* stream, int config, int stream_k, char* error, int error_len) {
  const gemm::Workspace workspace{allocate, context};
  std::string e;
  if (config < 0) {
    e = gemm::gemm_launch(*args, workspace, stream);
  } else {
    int device = 0;
    cudaGetDevice(&device);
    gemm::cuda::GpuSlots slots;
    e = gemm::cuda::gpu_slots(device, slots);
    const int out_bytes = args->c_format == gemm::OutFormat::kFP32 ? 4 : 2;
    const auto plan = gemm::cuda::make_plan(config, stream_k != 0, args->m, args->n, args->k, slots, out_bytes);
    if (e.empty()) e = gemm::cuda::launch_with_plan(*args, workspace, stream, plan);
  }
  std::strncpy(error, e.c_str(), error_len - 1);
  error[error_len - 1] = 0;
  return e.empty() ? 0 : 1;
}

// out = {config, block_m, block_n, stream_k, grid (CTAs), cluster_n} of the heuristic's plan on this device.
extern "C" void tune_plan(long long m, long long n, long long k, int* out) {
  int device = 0;
  cudaGetDevice(&device);
  gemm::cuda::GpuSlots slots;
  gemm::cuda::gpu_slots(device, slots);
  const auto p = gemm::cuda::choose_plan(m, n, k, slots, 2);
  out[0] = p.config;
  out[1] = gemm::cuda::kTileConfigs[p.config].block_m;
  out[2] = gemm::cuda::kTileConfigs[p.config].block_n;
  out[3] = p.stream_k() ? 1 : 0;
  out[4] = p.ctas();
  out[5] = p.cluster_n();
}

extern "C" int tune_num_configs() { return gemm::cuda::kNumTileConfigs; }
extern "C" void tune_config(int i, int* out) {
  out[0] = gemm::cuda::kTileConfigs[i].block_m;
  out[1] = gemm::cuda::kTileConfigs[i].block_n;
  out[2] = gemm::cuda::kTileConfigs[i].cluster_n;
}

// out = {SMs, co-resident 2-CTA clusters} of the current device.
extern "C" void tune_slots(int* out) {
  int device = 0;
  cudaGetDevice(&device);
  gemm::cuda::GpuSlots slots;
  gemm::cuda::gpu_slots(device, slots);
  out[0] = slots.sms;
  out[1] = slots.clusters2;
}
