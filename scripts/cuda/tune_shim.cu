// C entry points over the CUDA backend for scripts/cuda/tune.py and the launcher tests (tests/cuda): run
// gemm_launch, or one forced (tile config, whole tiles, stream-K or a K split over k_split-CTA clusters)
// plan, with a workspace callback supplied from Python; and quantize_launch.
#include <cuda_runtime.h>

#include <cstring>

#include "../../gemm/cuda/forced_plan.h"

extern "C" int tune_gemm(const gemm::GemmArgs* args, void* (*allocate)(void*, size_t), void* context,
                         void* stream, int config, int stream_k, int k_split, char* error, int error_len) {
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
    const auto plan =
        gemm::cuda::make_plan(config, stream_k != 0, k_split, args->m, args->n, args->k, slots, out_bytes);
    if (e.empty() && !plan.fits) e = "tune_gemm: no such plan for this shape and device";
    if (e.empty()) e = gemm::cuda::launch_with_plan(*args, workspace, stream, plan);
  }
  std::strncpy(error, e.c_str(), error_len - 1);
  error[error_len - 1] = 0;
  return e.empty() ? 0 : 1;
}

// out = {config, block_m, block_n, stream_k, grid (CTAs), cluster_n, k_split} of the heuristic's plan on
// this device.
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
  out[6] = p.sched.k_split;
}

extern "C" int tune_quantize(const gemm::QuantizeArgs* args, void* stream, char* error, int error_len) {
  const std::string e = gemm::quantize_launch(*args, stream);
  std::strncpy(error, e.c_str(), error_len - 1);
  error[error_len - 1] = 0;
  return e.empty() ? 0 : 1;
}

// out = {sizeof(GemmArgs), sizeof(QuantizeArgs)}: lets the ctypes mirrors check themselves.
extern "C" void tune_args_sizes(long long* out) {
  out[0] = sizeof(gemm::GemmArgs);
  out[1] = sizeof(gemm::QuantizeArgs);
}

extern "C" int tune_num_configs() { return gemm::cuda::kNumTileConfigs; }
// out = {block_m, block_n, cluster_n, slabs, largest K split (1: none)} of config i.
extern "C" void tune_config(int i, int* out) {
  const auto& c = gemm::cuda::kTileConfigs[i];
  out[0] = c.block_m;
  out[1] = c.block_n;
  out[2] = c.cluster_n;
  out[3] = c.slabs;
  out[4] = gemm::cuda::k_split_ok(c, gemm::cuda::kMaxKSplit, int64_t{1} << 40) ? gemm::cuda::kMaxKSplit : 1;
}

extern "C" int tune_max_cluster_ctas() { return gemm::cuda::kMaxClusterCtas; }
// out[s] = co-resident clusters of s CTAs on the current device (out[1]: SMs), s <= tune_max_cluster_ctas().
extern "C" void tune_slots(int* out) {
  int device = 0;
  cudaGetDevice(&device);
  gemm::cuda::GpuSlots slots;
  gemm::cuda::gpu_slots(device, slots);
  out[1] = slots.sms;
  for (int s = 2; s <= gemm::cuda::kMaxClusterCtas; ++s) out[s] = slots.clusters[s];
}
