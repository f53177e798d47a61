"""Custom-op hygiene: opcheck on the registered op, torch.compile with dynamic shapes."""

import pytest
import torch
import torch._dynamo.testing
from _helpers import (
    assert_close_gemm,
    fp8_dtypes_for,
    make_inputs,
    make_moe_weights,
    reference_gemm,
    reference_grouped,
    reference_quantize_activation,
)

# torch's schema check (SchemaCheckMode) compares inputs with torch.allclose, which has no FP8 kernel;
# the same property (only `out` is written) is checked by hand in test_only_out_is_written.
OPCHECK_UTILS = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")

# M values after the first compile. 0 and 1 are specialized by dynamo by design, and the first M must
# differ from every other size in the call (duck sizing would tie M to, e.g., ceil(N/128) = 2).
COMPILE_MS = [7, 5, 33, 64, 100, 129, 2, 3]


@pytest.mark.kernels_ci
@pytest.mark.parametrize("m,n,k,out_dtype", [(7, 192, 300, torch.bfloat16), (64, 64, 128, torch.float32)])
def test_opcheck(kernel, device, m, n, k, out_dtype):
    a, b, a_scale, b_scale = make_inputs(m, n, k, device=device, fp8_dtype=fp8_dtypes_for(device)[0], seed=1)
    out = torch.empty(m, n, dtype=out_dtype, device=device)
    torch.library.opcheck(kernel.ops.gemm.default, (out, a, b, a_scale, b_scale), test_utils=OPCHECK_UTILS)
    # Column-major inputs too: the fake must not depend on layout.
    a_col, a_scale_col = a.t().contiguous().t(), a_scale.t().contiguous().t()
    torch.library.opcheck(kernel.ops.gemm.default, (out, a_col, b, a_scale_col, b_scale), test_utils=OPCHECK_UTILS)


@pytest.mark.kernels_ci
def test_only_out_is_written(kernel, device):
    # What the schema declares: `out` (Tensor!) is mutated in place, nothing else is touched.
    a, b, a_scale, b_scale = make_inputs(33, 192, 300, device=device, fp8_dtype=fp8_dtypes_for(device)[0], seed=5)
    inputs = (a, b, a_scale, b_scale)
    before = [t.view(torch.uint8).clone() if t.element_size() == 1 else t.clone() for t in inputs]
    out = torch.full((33, 192), float("nan"), dtype=torch.bfloat16, device=device)
    storage = out.untyped_storage().data_ptr()
    assert kernel.ops.gemm(out, *inputs) is None
    assert out.untyped_storage().data_ptr() == storage and out.stride() == (192, 1)
    assert_close_gemm(out, reference_gemm(*inputs))
    for t, saved in zip(inputs, before):
        assert torch.equal(t.view(torch.uint8) if t.element_size() == 1 else t, saved)


@pytest.mark.kernels_ci
def test_compile_dynamic_m_without_recompiling(kernel, device):
    fp8_dtype = fp8_dtypes_for(device)[0]
    _, b, _, b_scale = make_inputs(1, 192, 300, device=device, fp8_dtype=fp8_dtype, seed=2)
    frames = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")

    @torch.compile(backend=frames, fullgraph=True, dynamic=True)
    def linear(x):
        a, a_scale = kernel.quantize_activation(x, dtype=fp8_dtype)
        return kernel.gemm(a, b, a_scale, b_scale) * 2

    torch._dynamo.reset()
    for m in COMPILE_MS:
        x = torch.randn(m, 300, generator=torch.Generator().manual_seed(m)).to(device) * 50
        got = linear(x)
        a, a_scale = kernel.quantize_activation(x, dtype=fp8_dtype)
        assert_close_gemm(got, reference_gemm(a, b, a_scale, b_scale) * 2)
    assert frames.frame_count == 1, f"recompiled: {frames.frame_count} frames for M in {COMPILE_MS}"


@pytest.mark.kernels_ci
def test_compile_batched_and_out(kernel, device):
    fp8_dtype = fp8_dtypes_for(device)[0]
    a, b, a_scale, b_scale = make_inputs(66, 192, 300, device=device, fp8_dtype=fp8_dtype, seed=3)
    compiled = torch.compile(kernel.gemm, backend="aot_eager", fullgraph=True, dynamic=True)
    got = compiled(a.view(6, 11, 300), b, a_scale.view(6, 11, -1), b_scale)
    assert got.shape == (6, 11, 192)
    assert_close_gemm(got.reshape(66, 192), reference_gemm(a, b, a_scale, b_scale))
    out = torch.empty(66, 192, dtype=torch.float32, device=device)
    compiled(a, b, a_scale, b_scale, out=out)
    assert_close_gemm(out, reference_gemm(a, b, a_scale, b_scale))


@pytest.mark.slow
def test_compile_inductor(kernel, device):
    fp8_dtype = fp8_dtypes_for(device)[0]
    a, b, a_scale, b_scale = make_inputs(33, 192, 300, device=device, fp8_dtype=fp8_dtype, seed=4)
    compiled = torch.compile(kernel.gemm, fullgraph=True, dynamic=True)
    assert_close_gemm(compiled(a, b, a_scale, b_scale), reference_gemm(a, b, a_scale, b_scale))


@pytest.mark.kernels_ci
@pytest.mark.parametrize("scale_dtype", [torch.float32, torch.float8_e8m0fnu, torch.uint8], ids=str)
def test_opcheck_quantize(kernel, device, scale_dtype):
    fp8 = fp8_dtypes_for(device)[0]
    x = torch.randn(33, 300, device=device, dtype=torch.bfloat16)
    q = torch.empty(33, 300, dtype=fp8, device=device)
    for scale in (torch.empty(33, 3, dtype=scale_dtype, device=device), torch.empty(3, 33, dtype=scale_dtype, device=device).t()):
        torch.library.opcheck(kernel.ops.quantize.default, (q, scale, x, None, False), test_utils=OPCHECK_UTILS)
    static = torch.full((1,), 0.02, device=device)
    scale = torch.empty(33, 3, device=device)
    torch.library.opcheck(kernel.ops.quantize.default, (q, scale, x, static, False), test_utils=OPCHECK_UTILS)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_opcheck_linear(kernel, device, static):
    fp8 = fp8_dtypes_for(device)[0]
    _, b, _, b_scale = make_inputs(1, 192, 300, device=device, fp8_dtype=fp8, seed=3)
    x = torch.randn(33, 300, device=device, dtype=torch.bfloat16)
    out = torch.empty(33, 192, dtype=torch.bfloat16, device=device)
    scale = torch.full((1,), 0.02, device=device) if static else None
    torch.library.opcheck(kernel.ops.linear.default, (out, x, b, b_scale, scale, False), test_utils=OPCHECK_UTILS)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("routing", ["group_ends", "row_group", "group_rows"])
def test_opcheck_grouped_gemm(kernel, device, routing):
    fp8 = fp8_dtypes_for(device)[0]
    b, b_scale = make_moe_weights(4, 192, 300, device=device, fp8_dtype=fp8, seed=1)
    a, _, a_scale, _ = make_inputs(20, 192, 300, device=device, fp8_dtype=fp8, seed=2)
    ends = torch.tensor([3, 3, 12, 18], dtype=torch.int32, device=device)
    ids = torch.tensor([0, 1, 2, 3, 7] * 4, dtype=torch.int64, device=device)
    counts = torch.tensor([5, 0, 2, 4], dtype=torch.int32, device=device)
    args = {"group_ends": (ends, None, None), "row_group": (None, ids, None), "group_rows": (None, None, counts)}[routing]
    out = torch.empty(20, 192, dtype=torch.bfloat16, device=device)
    torch.library.opcheck(kernel.ops.grouped_gemm.default, (out, a, b, a_scale, b_scale, *args), test_utils=OPCHECK_UTILS)


@pytest.mark.kernels_ci
def test_compile_matmul_2d_without_recompiling(kernel, device):
    fp8 = fp8_dtypes_for(device)[0]
    _, b, _, b_scale = make_inputs(1, 192, 300, device=device, fp8_dtype=fp8, seed=3)
    frames = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")

    @torch.compile(backend=frames, fullgraph=True, dynamic=True)
    def linear(x):
        return kernel.matmul_2d(x, b, b_scale, [128, 128], x.dtype) * 2

    torch._dynamo.reset()
    for m in COMPILE_MS:
        x = (torch.randn(1, m, 300, generator=torch.Generator().manual_seed(m)) * 4).bfloat16().to(device)
        q, s = reference_quantize_activation(x[0], fp8)
        assert_close_gemm(linear(x)[0], reference_gemm(q, b, s, b_scale) * 2)
    assert frames.frame_count == 1, f"recompiled: {frames.frame_count} frames for M in {COMPILE_MS}"


@pytest.mark.kernels_ci
@pytest.mark.parametrize("entry", ["matmul_grouped", "matmul_batched"])
def test_compile_moe_without_recompiling(kernel, device, entry):
    fp8 = fp8_dtypes_for(device)[0]
    num_experts = 4
    b, b_scale = make_moe_weights(num_experts, 192, 300, device=device, fp8_dtype=fp8, seed=4)
    frames = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")

    @torch.compile(backend=frames, fullgraph=True, dynamic=True)
    def experts(x, routing):
        if entry == "matmul_grouped":
            return kernel.matmul_grouped(x, b, b_scale, offsets=None, tokens_per_expert=routing, block_size=[128, 128])
        return kernel.matmul_batched(x, b, b_scale, expert_ids=routing, block_size=[128, 128])

    torch._dynamo.reset()
    for m in COMPILE_MS:
        gen = torch.Generator().manual_seed(m)
        row_expert = sorted(torch.randint(0, num_experts, (m,), generator=gen).tolist())
        x = (torch.randn(m, 300, generator=gen) * 4).bfloat16().to(device)
        if entry == "matmul_grouped":
            routing = torch.bincount(torch.tensor(row_expert), minlength=num_experts).float().to(device)
        else:
            routing = torch.tensor(row_expert, dtype=torch.int64, device=device)
        q, s = reference_quantize_activation(x, fp8)
        assert_close_gemm(experts(x, routing), reference_grouped(q, b, s, b_scale, row_expert))
    assert frames.frame_count == 1, f"recompiled: {frames.frame_count} frames for M in {COMPILE_MS}"


@pytest.mark.kernels_ci
@pytest.mark.parametrize("expected_m", [None, 2])
def test_compile_grouped_gemm_masked(kernel, device, expected_m):
    fp8 = fp8_dtypes_for(device)[0]
    b, b_scale = make_moe_weights(4, 192, 256, device=device, fp8_dtype=fp8, seed=5)
    compiled = torch.compile(kernel.grouped_gemm, backend="aot_eager", fullgraph=True, dynamic=True)
    a, a_scale = reference_quantize_activation(torch.randn(4 * 9, 256, device=device) * 4, fp8)
    masked_m = torch.tensor([9, 0, 4, 2], dtype=torch.int32, device=device)
    out = torch.full((4, 9, 192), float("nan"), device=device)
    compiled(a.view(4, 9, 256), b, a_scale.view(4, 9, 2), b_scale, masked_m=masked_m, out=out, expected_m=expected_m)
    eager = torch.full_like(out, float("nan"))
    kernel.grouped_gemm(a.view(4, 9, 256), b, a_scale.view(4, 9, 2), b_scale, masked_m=masked_m, out=eager)
    assert torch.equal(out.nan_to_num(7.0), eager.nan_to_num(7.0))


# Inductor (not aot_eager): its decomposition of a mutating op's functional wrapper skips nodes that
# touch float8_e8m0fnu tensors, so UE8M0 scales must reach the ops as their uint8 exponent bytes.
SCALE_DTYPES = [torch.float32, torch.float8_e8m0fnu]


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.uint8) if t.element_size() == 1 else t


@pytest.mark.parametrize("scale_dtype", SCALE_DTYPES, ids=str)
def test_inductor_quantize_activation_without_recompiling(kernel, device, scale_dtype):
    fp8 = fp8_dtypes_for(device)[0]
    frames = torch._dynamo.testing.CompileCounterWithBackend("inductor")

    @torch.compile(backend=frames, fullgraph=True, dynamic=True)
    def quantize(x):
        return kernel.quantize_activation(x, dtype=fp8, scale_dtype=scale_dtype)

    torch._dynamo.reset()
    for m in COMPILE_MS:
        x = (torch.randn(m, 300, generator=torch.Generator().manual_seed(m)) * 4).bfloat16().to(device)
        (q, scale), (q_eager, scale_eager) = quantize(x), kernel.quantize_activation(x, dtype=fp8, scale_dtype=scale_dtype)
        assert q.dtype == fp8 and scale.dtype == scale_dtype and scale.shape == (m, 3)
        assert torch.equal(_bytes(q), _bytes(q_eager)) and torch.equal(_bytes(scale), _bytes(scale_eager))
    assert frames.frame_count == 1, f"recompiled: {frames.frame_count} frames for M in {COMPILE_MS}"


@pytest.mark.parametrize("scale_dtype", SCALE_DTYPES, ids=str)
@pytest.mark.parametrize("entry", ["matmul_2d", "matmul_grouped"])
def test_inductor_matmul_without_recompiling(kernel, device, scale_dtype, entry):
    fp8 = fp8_dtypes_for(device)[0]
    num_experts = 3
    w = torch.randn(num_experts, 192, 300, generator=torch.Generator().manual_seed(9)).to(device)
    weights = [kernel.quantize_weight(w_e, dtype=fp8, scale_dtype=scale_dtype) for w_e in w]
    b, b_scale = (weights[0] if entry == "matmul_2d" else [torch.stack(t) for t in zip(*weights)])
    assert b_scale.dtype == scale_dtype
    frames = torch._dynamo.testing.CompileCounterWithBackend("inductor")

    def linear(x, tokens_per_expert):
        if entry == "matmul_2d":
            return kernel.matmul_2d(x, b, b_scale, [128, 128], x.dtype)
        return kernel.matmul_grouped(x, b, b_scale, offsets=None, tokens_per_expert=tokens_per_expert, block_size=[128, 128])

    compiled = torch.compile(linear, backend=frames, fullgraph=True, dynamic=True)
    torch._dynamo.reset()
    for m in COMPILE_MS:
        gen = torch.Generator().manual_seed(m)
        x = (torch.randn(m, 300, generator=gen) * 4).bfloat16().to(device)
        tokens = torch.bincount(torch.randint(0, num_experts, (m,), generator=gen), minlength=num_experts).to(device)
        assert torch.equal(compiled(x, tokens), linear(x, tokens))
    assert frames.frame_count == 1, f"recompiled: {frames.frame_count} frames for M in {COMPILE_MS}"


@pytest.mark.kernels_ci
def test_ops_take_uint8_scales_as_ue8m0(kernel, device):
    # What the Python entry points pass for float8_e8m0fnu scales: the same bytes, the same results.
    fp8 = fp8_dtypes_for(device)[0]
    x = (torch.randn(33, 300, generator=torch.Generator().manual_seed(6)) * 4).bfloat16().to(device)
    q = {dt: torch.empty(33, 300, dtype=fp8, device=device) for dt in (torch.float8_e8m0fnu, torch.uint8)}
    scale = {dt: torch.empty(33, 3, dtype=dt, device=device) for dt in q}
    for dt in q:
        kernel.ops.quantize(q[dt], scale[dt], x, None, True)
    assert torch.equal(_bytes(q[torch.uint8]), _bytes(q[torch.float8_e8m0fnu]))
    assert torch.equal(scale[torch.uint8], _bytes(scale[torch.float8_e8m0fnu]))

    b, b_scale = kernel.quantize_weight(torch.randn(192, 300, device=device), dtype=fp8, scale_dtype=torch.float8_e8m0fnu)
    a, a_scale = q[torch.float8_e8m0fnu], scale[torch.float8_e8m0fnu]
    out = {dt: torch.empty(33, 192, dtype=torch.bfloat16, device=device) for dt in q}
    kernel.ops.gemm(out[torch.float8_e8m0fnu], a, b, a_scale, b_scale)
    kernel.ops.gemm(out[torch.uint8], a, b, _bytes(a_scale), _bytes(b_scale))
    assert torch.equal(out[torch.uint8], out[torch.float8_e8m0fnu])
    assert_close_gemm(out[torch.uint8], reference_gemm(a, b, a_scale, b_scale))
    torch.library.opcheck(kernel.ops.gemm.default, (out[torch.uint8], a, b, _bytes(a_scale), _bytes(b_scale)),
                          test_utils=OPCHECK_UTILS)
