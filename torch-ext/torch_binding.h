// The ops as the binding registers them: each writes into caller-allocated outputs (its `Tensor!`
// arguments) and returns nothing, so that the Python package (torch-ext/gemm/) owns allocation and
// batch flattening, and torch.compile sees out-variant ops with fake implementations.
//
//   gemm(Tensor! out, Tensor a, Tensor b, Tensor a_scale, Tensor b_scale) -> ()
//     out     [M, N]                     bfloat16 | float16 | float32, row stride may be padded, inner stride 1
//     a       [M, K]                     float8_e4m3fn | float8_e4m3fnuz (fnuz: ROCm and CPU only)
//     b       [N, K]                     float8_e4m3fn | float8_e4m3fnuz (weight layout)
//     a_scale [M, ceil(K/128)]           float32 | float8_e8m0fnu (UE8M0, read as it is)
//     b_scale [ceil(N/128), ceil(K/128)] float32 | float8_e8m0fnu
//
//   grouped_gemm(Tensor! out, Tensor a, Tensor b, Tensor a_scale, Tensor b_scale, Tensor? group_ends,
//                Tensor? row_group, Tensor? group_rows=None) -> ()
//     as gemm, with b [E, N, K] and b_scale [E, ceil(N/128), ceil(K/128)]; exactly one of
//     group_ends [E] int32 (inclusive cumsum: rows [ends[g-1], ends[g]) use expert g, rows >= ends[E-1]
//     are not written), row_group [M] int64 (an expert id per row; ids outside [0, E) leave their
//     row unwritten) and group_rows [E] int32 (the masked layout: a holds E blocks of M / E rows, of
//     which block g's first group_rows[g] use expert g; the others are not written). The CPU backend
//     refuses offsets that decrease, are negative or exceed M.
//
//   quantize(Tensor! q, Tensor! scale, Tensor x, Tensor? static_scale, bool pow2_scale) -> ()
//     x [M, K] bfloat16 | float16 | float32; q [M, K] float8_e4m3fn | float8_e4m3fnuz, inner stride 1;
//     scale [M, ceil(K/128)] float32 | float8_e8m0fnu, row-major or M-major; static_scale None or a
//     one-element float32 tensor; numerics in gemm/gemm_contract.h (QuantizeArgs).
//
//   linear(Tensor! out, Tensor x, Tensor b, Tensor b_scale, Tensor? static_scale, bool pow2_scale) -> ()
//     quantize then gemm in one op: x [M, K] as quantize's, b, b_scale and out as gemm's; the FP8
//     activations and their scales are temporaries from the caching allocator.
//
// Every violated precondition raises (ValueError for shapes/strides/devices, TypeError for dtypes,
// RuntimeError for a backend refusal); nothing prints, aborts or synchronizes. A GPU build refuses
// CPU tensors with a ValueError.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace gemm_binding {

void gemm_op(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& a_scale,
             const at::Tensor& b_scale);

void grouped_gemm_op(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& a_scale,
                     const at::Tensor& b_scale, const std::optional<at::Tensor>& group_ends,
                     const std::optional<at::Tensor>& row_group, const std::optional<at::Tensor>& group_rows,
                     int64_t expected_rows);

void quantize_op(at::Tensor& q, at::Tensor& scale, const at::Tensor& x, const std::optional<at::Tensor>& static_scale,
                 bool pow2_scale);

void linear_op(at::Tensor& out, const at::Tensor& x, const at::Tensor& b, const at::Tensor& b_scale,
               const std::optional<at::Tensor>& static_scale, bool pow2_scale);

}  // namespace gemm_binding
