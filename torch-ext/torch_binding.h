// The `gemm` op as the binding registers it: one mutating op that writes into a caller-allocated
// `out`, so that the Python wrapper (torch-ext/gemm/__init__.py) owns allocation and batch flattening,
// and torch.compile sees a single out-variant op with a fake implementation.
//
//   gemm(Tensor! out, Tensor a, Tensor b, Tensor a_scale, Tensor b_scale) -> ()
//
//   out     [M, N]                 bfloat16 | float16 | float32, row stride may be padded, inner stride 1
//   a       [M, K]                 float8_e4m3fn | float8_e4m3fnuz (fnuz: ROCm and CPU only)
//   b       [N, K]                 same FP8 dtype as a (weight layout)
//   a_scale [M, ceil(K/128)]       float32
//   b_scale [ceil(N/128), ceil(K/128)] float32
//
// Every violated precondition raises (ValueError for shapes/strides/devices, TypeError for dtypes,
// RuntimeError for a backend refusal); nothing prints, aborts or synchronizes.
#pragma once

#include <ATen/core/Tensor.h>

namespace gemm_binding {

#if defined(CPU_KERNEL)
void gemm_cpu(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& a_scale,
              const at::Tensor& b_scale);
#endif

#if defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
void gemm_gpu(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& a_scale,
              const at::Tensor& b_scale);
#endif

}  // namespace gemm_binding
