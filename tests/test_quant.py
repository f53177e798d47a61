"""Quantization helpers and the e4m3fn -> e4m3fnuz conversion."""

import pytest
import torch
from _helpers import assert_close_gemm, fp8_dtypes_for, make_inputs, reference_gemm

FP8_DTYPES = [torch.float8_e4m3fn, torch.float8_e4m3fnuz]
EXPECTED_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e4m3fnuz: 240.0}
# Round-to-nearest with 3 mantissa bits: error <= 2^-4 of the value, so <= 2^-4 of the group max.
FP8_REL_ERROR = 2.0**-4


def _dequant_activation(q, scale, block=128):
    k = q.shape[-1]
    return q.float() * scale.repeat_interleave(block, dim=-1)[..., :k]


def _dequant_weight(q, scale, block=128):
    n, k = q.shape
    return q.float() * scale.repeat_interleave(block, 0)[:n].repeat_interleave(block, 1)[:, :k]


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", FP8_DTYPES)
def test_fp8_max_is_the_format_max(kernel, dtype):
    assert kernel.fp8_max(dtype) == EXPECTED_MAX[dtype]


def test_fp8_max_refuses_other_dtypes(kernel):
    with pytest.raises(TypeError, match="float8_e5m2"):
        kernel.fp8_max(torch.float8_e5m2)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", FP8_DTYPES)
@pytest.mark.parametrize("shape", [(5, 300), (2, 3, 128), (4, 1)])
def test_quantize_activation(kernel, shape, dtype):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)) * 3
    x[0, ..., :] = 0  # an all-zero group (row 0) must not produce NaN
    q, scale = kernel.quantize_activation(x, dtype=dtype)
    k_blocks = -(-shape[-1] // 128)
    assert q.dtype == dtype and q.shape == x.shape and q.is_contiguous()
    assert scale.dtype == torch.float32 and scale.shape == (*shape[:-1], k_blocks) and scale.is_contiguous()
    assert torch.isfinite(scale).all() and (scale > 0).all()
    assert not torch.isnan(q.float()).any()
    assert (q[0].float() == 0).all()
    # Every non-zero group reaches the format max exactly (never 448 for fnuz).
    qf = torch.nn.functional.pad(q.float().abs(), (0, k_blocks * 128 - shape[-1])).unflatten(-1, (k_blocks, 128))
    group_max = qf.amax(-1)
    nonzero = scale != 1
    assert (group_max[nonzero] == EXPECTED_MAX[dtype]).all()
    xf = torch.nn.functional.pad(x.abs(), (0, k_blocks * 128 - shape[-1])).unflatten(-1, (k_blocks, 128))
    bound = (xf.amax(-1) * FP8_REL_ERROR).repeat_interleave(128, -1)[..., : shape[-1]]
    assert ((_dequant_activation(q, scale) - x).abs() <= bound).all()


@pytest.mark.kernels_ci
@pytest.mark.parametrize("shape", [(5, 300), (2, 3, 260), (1, 128)])
def test_quantize_activation_column_major_scales(kernel, device, shape):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(5)).to(device)
    q_row, s_row = kernel.quantize_activation(x)
    q, scale = kernel.quantize_activation(x, column_major_scales=True)
    rows, k_blocks = x.shape[:-1].numel(), s_row.shape[-1]
    assert torch.equal(q, q_row) and torch.equal(scale, s_row) and scale.shape == s_row.shape
    # M-major: the rows of one K group are adjacent, the K groups `rows` floats apart.
    assert scale.reshape(-1, k_blocks).stride() == (1, rows)
    b, b_scale = kernel.quantize_weight(torch.randn(192, shape[-1], generator=torch.Generator().manual_seed(6)).to(device))
    assert torch.equal(kernel.gemm(q, b, scale, b_scale), kernel.gemm(q_row, b, s_row, b_scale))


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", FP8_DTYPES)
@pytest.mark.parametrize("shape", [(200, 300), (64, 100), (576, 256)])
def test_quantize_weight(kernel, shape, dtype):
    w = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    w[:128, :128] = 0  # an all-zero tile
    q, scale = kernel.quantize_weight(w, dtype=dtype)
    n_blocks, k_blocks = -(-shape[0] // 128), -(-shape[1] // 128)
    assert q.dtype == dtype and q.shape == w.shape and q.is_contiguous()
    assert scale.dtype == torch.float32 and scale.shape == (n_blocks, k_blocks) and scale.is_contiguous()
    assert torch.isfinite(scale).all() and scale[0, 0] == 1 and (q[:128, :128].float() == 0).all()
    deq = _dequant_weight(q, scale)
    for nb in range(n_blocks):
        for kb in range(k_blocks):
            tile = (slice(nb * 128, (nb + 1) * 128), slice(kb * 128, (kb + 1) * 128))
            amax = w[tile].abs().max()
            assert ((deq[tile] - w[tile]).abs() <= amax * FP8_REL_ERROR).all()
            if amax > 0:
                assert q[tile].float().abs().max() == EXPECTED_MAX[dtype]


@pytest.mark.kernels_ci
def test_quantized_gemm_end_to_end(kernel, device):
    gen = torch.Generator().manual_seed(2)
    x, w = torch.randn(33, 576, generator=gen), torch.randn(192, 576, generator=gen)
    a, a_scale = kernel.quantize_activation(x)
    b, b_scale = kernel.quantize_weight(w)
    args = [t.to(device) for t in (a, b, a_scale, b_scale)]
    out = kernel.gemm(*args)
    assert_close_gemm(out, reference_gemm(*args))
    # And close to the unquantized product, within FP8 quantization error.
    exact = x @ w.T
    assert (out.float().cpu() - exact).abs().max() < 0.1 * exact.abs().max()


@pytest.mark.kernels_ci
def test_quantizers_refuse_integer_input(kernel):
    # Integer codes have no scale to recover: quantizing them would invent one silently.
    with pytest.raises(TypeError, match=r"quantize_activation: x must be a floating-point tensor.*torch.int32"):
        kernel.quantize_activation(torch.arange(256, dtype=torch.int32).view(2, 128))
    with pytest.raises(TypeError, match=r"quantize_weight: w must be a floating-point tensor.*torch.int8"):
        kernel.quantize_weight(torch.ones(128, 128, dtype=torch.int8))


@pytest.mark.kernels_ci
def test_e4m3fn_to_e4m3fnuz_every_byte(kernel):
    fn = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn)
    scale = torch.tensor([0.75])
    fnuz, fnuz_scale = kernel.e4m3fn_to_e4m3fnuz(fn, scale)
    assert fnuz.dtype == torch.float8_e4m3fnuz and fnuz_scale.dtype == torch.float32
    assert fnuz_scale.item() == 1.5
    bits_in, bits_out = fn.view(torch.uint8), fnuz.view(torch.uint8)
    fn_nan = torch.isnan(fn.float())
    assert bits_out[0x80] == 0, "fn -0 (0x80) is the fnuz NaN: must become +0"
    assert (bits_out[fn_nan] == 0x80).all(), "fn NaN must stay NaN"
    assert torch.isnan(fnuz.float()).sum() == fn_nan.sum()
    finite = ~fn_nan
    # Same value once scaled: exact, since the two formats differ by a power of two.
    assert torch.equal(fn.double()[finite] * 0.75, fnuz.double()[finite] * fnuz_scale.double())
    keep = finite.clone()
    keep[0x80] = False
    assert torch.equal(bits_in[keep], bits_out[keep]), "finite bytes other than 0x80 are reinterpreted"


def test_e4m3fn_to_e4m3fnuz_keeps_layout_and_refuses_fnuz(kernel):
    base = torch.randn(256, 100).to(torch.float8_e4m3fn).t()  # column-major
    scale = torch.rand(2, 1).t()
    q, s = kernel.e4m3fn_to_e4m3fnuz(base, scale)
    assert q.stride() == base.stride() and s.stride() == scale.stride()
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        kernel.e4m3fn_to_e4m3fnuz(q, s)


def test_e4m3fn_to_e4m3fnuz_gemm_is_unchanged(kernel, device):
    # Halving every value and doubling both scales changes each product by an exact power of two.
    a, b, a_scale, b_scale = make_inputs(65, 192, 300, device=device, seed=3)
    a[0, 0] = -0.0  # the 0x80 byte
    a_q, a_s = kernel.e4m3fn_to_e4m3fnuz(a, a_scale)
    b_q, b_s = kernel.e4m3fn_to_e4m3fnuz(b, b_scale)
    ref = reference_gemm(a, b, a_scale, b_scale)
    assert_close_gemm(kernel.gemm_reference(a_q, b_q, a_s, b_s), ref)
    if torch.float8_e4m3fnuz in fp8_dtypes_for(device):
        out_fnuz = kernel.gemm(a_q, b_q, a_s, b_s)
        assert_close_gemm(out_fnuz, ref)
        if torch.float8_e4m3fn in fp8_dtypes_for(device):
            assert torch.equal(kernel.gemm(a, b, a_scale, b_scale), out_fnuz)


@pytest.mark.kernels_ci
def test_finegrained_fp8_compatible_names(kernel, device):
    gen = torch.Generator().manual_seed(4)
    x, w = torch.randn(2, 9, 300, generator=gen).to(device), torch.randn(192, 300, generator=gen).to(device)
    a, a_scale = kernel.fp8_act_quant(x, 128)
    b, b_scale = kernel.quantize_weight(w)
    assert a.dtype == torch.float8_e4m3fn and a_scale.shape == (2, 9, 3)
    out = kernel.w8a8_block_fp8_matmul(a, b, a_scale, b_scale, [128, 128])
    assert out.dtype == torch.float32 and out.shape == (2, 9, 192)
    assert_close_gemm(out.reshape(18, 192), reference_gemm(a.reshape(18, 300), b, a_scale.reshape(18, 3), b_scale))
    with pytest.raises(ValueError, match=r"block_size must be \[128, 128\], got \[64, 64\]"):
        kernel.w8a8_block_fp8_matmul(a, b, a_scale, b_scale, [64, 64])
