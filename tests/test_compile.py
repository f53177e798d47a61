"""Custom-op hygiene: opcheck on the registered op, torch.compile with dynamic shapes."""

import pytest
import torch
import torch._dynamo.testing
from _helpers import assert_close_gemm, fp8_dtypes_for, make_inputs, reference_gemm

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
