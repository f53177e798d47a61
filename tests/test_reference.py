"""The references the other tests rest on: the package's own Python reference (gemm_reference) against the
exact float64 product, and the quantizer oracle's (reference_quantize_activation) exact power-of-two rounding."""

import math

import pytest
import torch
from _helpers import UE8M0_MIN, assert_close_gemm, make_inputs, pow2_ceil, reference_gemm, ue8m0_bytes

# fp32 sums of 128 exact FP8 products: a few fp32 ulps of the largest output.
FP32_REL_TOL = 1e-5


@pytest.mark.kernels_ci
@pytest.mark.parametrize("fp8_dtype", [torch.float8_e4m3fn, torch.float8_e4m3fnuz])
@pytest.mark.parametrize("m,n,k", [(7, 192, 100), (65, 576, 1152), (1, 1, 3884)])
def test_reference_matches_float64(kernel, m, n, k, fp8_dtype):
    a, b, a_scale, b_scale = make_inputs(m, n, k, fp8_dtype=fp8_dtype, seed=m + n + k)
    exact = reference_gemm(a, b, a_scale, b_scale)
    got = kernel.gemm_reference(a, b, a_scale, b_scale, out_dtype=torch.float32)
    assert got.dtype == torch.float32
    tol = FP32_REL_TOL * exact.abs().max().item()
    torch.testing.assert_close(got.double(), exact, atol=tol, rtol=FP32_REL_TOL)
    assert_close_gemm(kernel.gemm_reference(a, b, a_scale, b_scale), exact)


@pytest.mark.kernels_ci
def test_reference_reads_any_layout_and_batch(kernel):
    a, b, a_scale, b_scale = make_inputs(64, 192, 300, layout="a_m_major", seed=1)
    exact = reference_gemm(a, b, a_scale, b_scale)
    assert_close_gemm(kernel.gemm_reference(a, b.t().contiguous().t(), a_scale.t().contiguous().t(), b_scale), exact)
    batched = kernel.gemm_reference(a.reshape(4, 16, 300), b, a_scale.reshape(4, 16, -1), b_scale)
    assert batched.shape == (4, 16, 192)
    assert_close_gemm(batched.reshape(64, 192), exact)


def test_reference_detects_swapped_scale_blocks(kernel):
    # The inputs the op tests use must make a K-block scale mix-up visible to the tolerance.
    a, b, a_scale, b_scale = make_inputs(33, 192, 576, seed=2)
    exact = reference_gemm(a, b, a_scale, b_scale)
    swapped = a_scale[:, [1, 0, 2, 3, 4]]
    with pytest.raises(AssertionError):
        assert_close_gemm(kernel.gemm_reference(a, b, swapped, b_scale), exact)


@pytest.mark.kernels_ci
def test_reference_refuses_non_fp8_operands(kernel):
    # An fp32 `a` would be read as already dequantized and multiplied by a_scale a second time.
    a, b, a_scale, b_scale = make_inputs(7, 192, 100, seed=3)
    with pytest.raises(TypeError, match=r"gemm_reference: a must be torch.float8_e4m3fn .*got torch.float32"):
        kernel.gemm_reference(a.float(), b, a_scale, b_scale)
    with pytest.raises(TypeError, match=r"gemm_reference: b must be torch.float8_e4m3fn .*got torch.bfloat16"):
        kernel.gemm_reference(a, b.bfloat16(), a_scale, b_scale)


@pytest.mark.kernels_ci
def test_oracle_pow2_ceil_exact():
    # Normal and subnormal fp32 scales, exact powers of two and their neighbours, the largest finite scales.
    values = [1.0, 1.5, 0.75, 3.0, 2.0**-126, 2.0**-126 * 1.25, 2.0**-149, 3 * 2.0**-149, 2.0**-130 * 1.5,
              2.0**127, 1.1 * 2.0**126, 448.0, 1 / 448]
    s = torch.tensor(values, dtype=torch.float32)
    for v, got in zip(s.tolist(), pow2_ceil(s).tolist()):
        mantissa, exponent = math.frexp(v)
        assert got == (2.0 ** (exponent - 1) if mantissa == 0.5 else 2.0**exponent), v
    assert pow2_ceil(torch.tensor([1.5 * 2.0**127])).isinf().all()
    assert ue8m0_bytes(torch.tensor([UE8M0_MIN, 1.0, 2.0**127, float("inf"), float("nan")])).tolist() == [0, 127, 254, 255, 255]
