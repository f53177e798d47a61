// CUDA sm_90a implementation of gemm::quantize_launch (see gemm/gemm_contract.h): checks what the kernel
// cannot serve, derives the vector-access flags from the pointers and strides, and launches
// quantize_kernel.cuh on the caller's stream. Never synchronizes, allocates or prints.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "../gemm_contract.h"
#include "planner.h"
#include "quantize_kernel.cuh"

namespace gemm {
namespace {

// Enough blocks to fill any GPU many times over; larger problems stride.
constexpr int64_t kMaxQuantBlocks = int64_t{1} << 20;

// Whether the GEMM that usually follows (the linear op's) should launch at once, its prologue beside the
// quantizer's blocks, or as they finish. A GEMM of 65-128 rows runs the decode tiles over two M blocks
// whose CTAs stream the same B tiles evict-first (planner.h, b_evict_first()): launched at once it took
// up to 26 % longer (H100, 128x7168x16384 quantize + GEMM 72 against 57 us); other sizes gain or are even.
bool quantizer_lets_gemm_start_early(int64_t m) {
  return m <= cuda::hopper::kWgmmaM || m > cuda::kMaxMBlocksBEvictFirst * cuda::hopper::kWgmmaM;
}

bool aligned(const void* ptr, int64_t m, int64_t row_bytes, int64_t align) {
  return reinterpret_cast<uintptr_t>(ptr) % align == 0 && (m == 1 || row_bytes % align == 0);
}

int64_t in_bytes(InFormat f) { return f == InFormat::kFP32 ? 4 : 2; }

}  // namespace

std::string quantize_launch(const QuantizeArgs& args, void* stream_ptr) {
  if (args.q_format != Fp8Format::kE4M3FN) {
    return "gemm (CUDA): the quantizer writes float8_e4m3fn on sm_90a (got q format " +
           std::to_string(static_cast<int>(args.q_format)) + "; 0 = e4m3fn, 1 = e4m3fnuz)";
  }
  if (args.x_format != InFormat::kBF16 && args.x_format != InFormat::kFP16 && args.x_format != InFormat::kFP32) {
    return "gemm (CUDA): x must be bfloat16, float16 or float32 (got x format " +
           std::to_string(static_cast<int>(args.x_format)) + "; 0 = bf16, 1 = fp16, 2 = fp32)";
  }
  if (args.scale_format != ScaleFormat::kF32 && args.scale_format != ScaleFormat::kUE8M0) {
    return "gemm (CUDA): scale must be float32 or UE8M0 (got scale format " +
           std::to_string(static_cast<int>(args.scale_format)) + "; 0 = float32, 1 = UE8M0)";
  }
  if (args.m <= 0 || args.k <= 0) return {};
  cuda::QuantizeParams p;
  p.args = args;
  p.groups = ceil_div(args.k, cuda::kQuantGroup);
  p.warps_per_row = ceil_div(p.groups, cuda::kQuantGroupsPerWarp);
  p.tasks = args.m * p.warps_per_row;
  // The kernel divides by it only where tasks < 2^32 (so warps_per_row fits too).
  p.per_row = cuda::TaskDivider(static_cast<uint32_t>(std::min<int64_t>(p.warps_per_row, UINT32_MAX)));
  p.vector_loads = aligned(args.x, args.m, args.x_stride_m * in_bytes(args.x_format), cuda::kQuantVecBytes);
  p.vector_stores = aligned(args.q, args.m, args.q_stride_m, cuda::kQuantStoreBytes);
  p.early_dependents = quantizer_lets_gemm_start_early(args.m);
  const auto blocks = static_cast<unsigned>(std::min(ceil_div(p.tasks, cuda::kQuantWarpsPerBlock), kMaxQuantBlocks));
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  switch (args.x_format) {
    case InFormat::kBF16:
      cuda::quantize_kernel<__nv_bfloat16><<<blocks, cuda::kQuantThreads, 0, stream>>>(p);
      break;
    case InFormat::kFP16:
      cuda::quantize_kernel<__half><<<blocks, cuda::kQuantThreads, 0, stream>>>(p);
      break;
    case InFormat::kFP32:
      cuda::quantize_kernel<float><<<blocks, cuda::kQuantThreads, 0, stream>>>(p);
      break;
  }
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    return std::string("gemm (CUDA): quantize_kernel launch failed: ") + cudaGetErrorString(e);
  }
  return {};
}

}  // namespace gemm
