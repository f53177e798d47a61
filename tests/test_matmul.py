"""matmul_2d / matmul (finegrained-fp8's interface, what transformers calls) and the fused activation
quantizer under it, on every backend.

The oracle is the quantized computation itself: A quantized by reference_quantize_activation (which
every quantizer must match bit for bit), then the exact float64 product with the dequantized weight.
"""

import pytest
import torch
from _helpers import (
    assert_close_gemm,
    ceil_div,
    fp8_dtypes_for,
    make_inputs,
    reference_gemm,
    reference_quantize_activation,
)

ACT_DTYPES = [torch.bfloat16, torch.float16, torch.float32]
# DeepSeek-V3's kv_a_proj_with_mqa (576 x 7168), transformers' tiny DeepSeek kv_a_proj (160 x 256),
# a ragged-K tail (300) and a Qwen3 TP shard (192 x 192).
SHAPES = [(576, 7168), (160, 256), (192, 300), (192, 192)]


def _weight(device, n, k, seed=0, pow2=False):
    fp8 = fp8_dtypes_for(device)[0]
    _, b, _, b_scale = make_inputs(1, n, k, device=device, fp8_dtype=fp8, seed=seed)
    if pow2:
        b_scale = torch.exp2(torch.round(torch.log2(b_scale.abs())))
    return b, b_scale


def _activation(shape, dtype, device, seed=1, magnitude=4.0):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * magnitude
    return x.to(dtype).to(device)


def _expected(x, b, b_scale, static_scale=None):
    k = x.shape[-1]
    q, s = reference_quantize_activation(x.reshape(-1, k), b.dtype, static_scale=static_scale)
    return reference_gemm(q, b, s, b_scale.float()).view(*x.shape[:-1], b.shape[0])


@pytest.mark.kernels_ci
@pytest.mark.parametrize("n,k", SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("m", [1, 7, 33])
def test_matmul_2d_matches_quantized_reference(kernel, device, m, n, k):
    b, b_scale = _weight(device, n, k)
    x = _activation((m, k), torch.bfloat16, device)
    out = kernel.matmul_2d(x, b, b_scale, [128, 128])
    assert out.dtype == torch.bfloat16 and out.shape == (m, n) and out.is_contiguous()
    assert_close_gemm(out, _expected(x, b, b_scale))


@pytest.mark.kernels_ci
@pytest.mark.parametrize("act_dtype", ACT_DTYPES, ids=str)
@pytest.mark.parametrize("m", [1, 5, 16, 17])
@pytest.mark.parametrize("n,k", [(576, 7168), (192, 1000), (160, 256)], ids=lambda v: str(v))
def test_matmul_2d_bitwise_equal_to_quantize_then_gemm(kernel, device, act_dtype, m, n, k):
    """matmul_2d gives the bits of the activation quantizer followed by gemm (M-major scales, bf16 out):
    dynamic and static scales, padded and misaligned rows, a ragged last K block."""
    b, b_scale = _weight(device, n, k)
    wide = _activation((m, k + 8), act_dtype, device)
    static = 3 / 256
    for x in (wide[:, :k], wide[:, 1 : k + 1]):
        q, s = kernel.quantize_activation(x, dtype=b.dtype, column_major_scales=True)
        out = kernel.matmul_2d(x, b, b_scale, [128, 128], torch.bfloat16)
        assert torch.equal(out, kernel.gemm(q, b, s, b_scale))
        q, s = reference_quantize_activation(x, b.dtype, static_scale=static)
        out = kernel.matmul_2d(x, b, b_scale, [128, 128], torch.bfloat16, torch.tensor(static, device=device))
        assert torch.equal(out, kernel.gemm(q, b, s.t().contiguous().t(), b_scale))


def test_matmul_2d_large_m(kernel, device):
    b, b_scale = _weight(device, 576, 7168, seed=2)
    x = _activation((257, 7168), torch.bfloat16, device, seed=3)
    assert_close_gemm(kernel.matmul_2d(x, b, b_scale, [128, 128]), _expected(x, b, b_scale))


@pytest.mark.kernels_ci
def test_matmul_2d_m_zero(kernel, device):
    b, b_scale = _weight(device, 160, 256)
    out = kernel.matmul_2d(torch.empty(0, 256, dtype=torch.bfloat16, device=device), b, b_scale, [128, 128])
    assert out.shape == (0, 160) and out.dtype == torch.bfloat16
    out = kernel.matmul_2d(torch.empty(2, 0, 256, dtype=torch.float16, device=device), b, b_scale, [128, 128])
    assert out.shape == (2, 0, 160) and out.dtype == torch.float16


@pytest.mark.kernels_ci
@pytest.mark.parametrize("shape", [(1, 5, 256), (1, 1, 7, 256), (3, 4, 5, 256)], ids=str)
def test_matmul_2d_leading_dims(kernel, device, shape):
    # transformers passes [batch, seq, K] and, for DeepSeek's kv_b_proj, 4-D inputs.
    b, b_scale = _weight(device, 160, 256)
    x = _activation(shape, torch.bfloat16, device)
    out = kernel.matmul_2d(x, b, b_scale, [128, 128])
    assert out.shape == (*shape[:-1], 160)
    assert_close_gemm(out.reshape(-1, 160), _expected(x, b, b_scale).reshape(-1, 160))
    assert torch.equal(out.reshape(-1, 160), kernel.matmul_2d(x.reshape(-1, 256), b, b_scale, [128, 128]))


@pytest.mark.kernels_ci
def test_matmul_2d_non_contiguous_input(kernel, device):
    b, b_scale = _weight(device, 192, 300)
    base = _activation((300, 40), torch.bfloat16, device)
    x = base.t()  # [40, 300], column-major
    padded = _activation((40, 400), torch.bfloat16, device)[:, :300]  # padded rows
    strided = _activation((40, 600), torch.bfloat16, device)[:, ::2]  # inner stride 2
    for a in (x, padded, strided):
        assert torch.equal(kernel.matmul_2d(a, b, b_scale, [128, 128]), kernel.matmul_2d(a.contiguous(), b, b_scale, [128, 128]))
    assert_close_gemm(kernel.matmul_2d(x, b, b_scale, [128, 128]), _expected(x.contiguous(), b, b_scale))


@pytest.mark.kernels_ci
@pytest.mark.parametrize("act_dtype", ACT_DTYPES, ids=str)
def test_matmul_2d_input_dtypes(kernel, device, act_dtype):
    b, b_scale = _weight(device, 192, 300)
    x = _activation((9, 300), act_dtype, device)
    out = kernel.matmul_2d(x, b, b_scale, [128, 128])
    assert out.dtype == act_dtype  # output_dtype None means A.dtype
    assert_close_gemm(out, _expected(x, b, b_scale))
    for out_dtype in (torch.bfloat16, torch.float32):
        got = kernel.matmul_2d(x, b, b_scale, [128, 128], out_dtype)  # positional, as transformers passes it
        assert got.dtype == out_dtype
        assert_close_gemm(got, _expected(x, b, b_scale))


@pytest.mark.kernels_ci
def test_matmul_2d_ue8m0_scales_bitwise_equal_to_pow2_fp32(kernel, device):
    b, b_scale = _weight(device, 576, 1024, pow2=True)
    x = _activation((17, 1024), torch.bfloat16, device)
    ref = kernel.matmul_2d(x, b, b_scale, [128, 128])
    e8m0 = b_scale.to(torch.float8_e8m0fnu)
    assert torch.equal(e8m0.float(), b_scale)
    assert torch.equal(kernel.matmul_2d(x, b, e8m0, [128, 128]), ref)
    assert torch.equal(kernel.matmul_2d(x, b, e8m0.view(torch.uint8), [128, 128]), ref)  # checkpoint bytes
    assert_close_gemm(ref, _expected(x, b, b_scale))


@pytest.mark.kernels_ci
@pytest.mark.parametrize("shape", [(), (1,)], ids=["0-D", "1-element"])
def test_matmul_2d_static_activation_scale(kernel, device, shape):
    b, b_scale = _weight(device, 192, 300)
    x = _activation((11, 300), torch.bfloat16, device, magnitude=1.0)
    static = 3 / 256  # exact in bf16 too
    scale = torch.full(shape, static, dtype=torch.float32, device=device)
    out = kernel.matmul_2d(x, b, b_scale, [128, 128], torch.bfloat16, activation_scale=scale)
    assert_close_gemm(out, _expected(x, b, b_scale, static_scale=static))
    # A static scale 3x larger rounds A differently (a power of two would only shift exponents).
    other = kernel.matmul_2d(x, b, b_scale, [128, 128], activation_scale=scale * 3)
    assert not torch.equal(out, other)
    # A bf16 scale (a model cast to bf16) is widened, not refused.
    assert torch.equal(kernel.matmul_2d(x, b, b_scale, [128, 128], activation_scale=scale.bfloat16()), out)


@pytest.mark.kernels_ci
def test_matmul_2d_block_size_forms(kernel, device):
    b, b_scale = _weight(device, 192, 300)
    x = _activation((5, 300), torch.bfloat16, device)
    ref = kernel.matmul_2d(x, b, b_scale, [128, 128])
    assert torch.equal(kernel.matmul_2d(x, b, b_scale, (128, 128)), ref)
    # Per-tensor weight scale: block_size None or [N, K], one scale; the same as that scale in every block.
    one = torch.tensor(0.0123, device=device)
    grid = one.expand(2, 3).contiguous()
    per_block = kernel.matmul_2d(x, b, grid, [128, 128])
    assert_close_gemm(per_block, _expected(x, b, grid))
    for block_size, scale in ((None, one), (None, one.reshape(1)), ([192, 300], one.reshape(1, 1))):
        assert torch.equal(kernel.matmul_2d(x, b, scale, block_size), per_block)
    e8m0 = torch.tensor(2.0**-6, device=device).to(torch.float8_e8m0fnu)
    assert torch.equal(kernel.matmul_2d(x, b, e8m0, None), kernel.matmul_2d(x, b, torch.full((2, 3), 2.0**-6, device=device), [128, 128]))


@pytest.mark.kernels_ci
def test_matmul_alias_and_fresh_output(kernel, device):
    assert kernel.matmul is kernel.matmul_2d
    b, b_scale = _weight(device, 192, 300)
    x = _activation((1, 4, 300), torch.bfloat16, device)
    out = kernel.matmul(x, b, b_scale, [128, 128], x.dtype, activation_scale=None)
    before = out.clone()
    bias = torch.randn(192, dtype=torch.bfloat16, device=device)
    out.add_(bias)  # transformers adds the bias in place
    assert torch.equal(out, before + bias)
    assert out.data_ptr() != x.data_ptr()


@pytest.mark.kernels_ci
@pytest.mark.parametrize("act_dtype", ACT_DTYPES + [torch.float64], ids=str)
@pytest.mark.parametrize("shape", [(5, 300), (2, 3, 128), (4, 1), (130, 7168)], ids=str)
def test_quantize_activation_matches_reference_bitwise(kernel, device, act_dtype, shape):
    x = _activation(shape, act_dtype, device, seed=7, magnitude=3.0)
    x[0, ..., :] = 0  # an all-zero group
    for fp8 in fp8_dtypes_for(device):
        for pow2 in (False, True):
            q, s = kernel.quantize_activation(x, dtype=fp8, pow2_scale=pow2)
            q_ref, s_ref = reference_quantize_activation(x.reshape(-1, shape[-1]), fp8, pow2_scale=pow2)
            assert q.shape == x.shape and q.dtype == fp8 and s.dtype == torch.float32
            assert s.shape == (*shape[:-1], ceil_div(shape[-1], 128))
            assert torch.equal(s.reshape(s_ref.shape).cpu(), s_ref.cpu())
            assert torch.equal(q.reshape(q_ref.shape).view(torch.uint8).cpu(), q_ref.view(torch.uint8).cpu())


@pytest.mark.kernels_ci
@pytest.mark.parametrize("pow2", [False, True])
def test_quantize_activation_torch_path_matches_reference_bitwise(kernel, pow2):
    # What quantize_activation runs where the build's op does not (CPU tensors with a GPU build,
    # e4m3fnuz on CUDA): the same numerics, bit for bit.
    x = _activation((37, 7168), torch.bfloat16, "cpu", seed=10, magnitude=3.0)
    for fp8 in (torch.float8_e4m3fn, torch.float8_e4m3fnuz):
        q, s = kernel._quant._quantize_activation_torch(x, 128, fp8, False, torch.float32, pow2)
        q_ref, s_ref = reference_quantize_activation(x, fp8, pow2_scale=pow2)
        assert torch.equal(s, s_ref) and torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))


@pytest.mark.kernels_ci
@pytest.mark.parametrize("column_major", [False, True])
def test_quantize_activation_ue8m0_scales(kernel, device, column_major):
    x = _activation((33, 300), torch.bfloat16, device, seed=8)
    q2, s2 = kernel.quantize_activation(x, pow2_scale=True, column_major_scales=column_major)
    q, s = kernel.quantize_activation(x, scale_dtype=torch.float8_e8m0fnu, column_major_scales=column_major)
    assert s.dtype == torch.float8_e8m0fnu and s.shape == (33, 3) and s.stride() == s2.stride()
    assert torch.equal(q.view(torch.uint8), q2.view(torch.uint8)) and torch.equal(s.float(), s2)
    # UE8M0 activation scales go straight into the GEMM, bitwise equal to their fp32 values.
    b, b_scale = _weight(device, 192, 300, pow2=True)
    assert torch.equal(kernel.gemm(q, b, s, b_scale), kernel.gemm(q2, b, s2, b_scale))
    assert torch.equal(kernel.gemm(q, b, s, b_scale.to(torch.float8_e8m0fnu)), kernel.gemm(q2, b, s2, b_scale))


@pytest.mark.kernels_ci
def test_quantize_activation_m_zero_and_other_blocks(kernel, device):
    q, s = kernel.quantize_activation(torch.empty(0, 300, device=device))
    assert q.shape == (0, 300) and s.shape == (0, 3)
    # Groups other than the GEMM's 128 are still served (finegrained's fp8_act_quant takes any).
    x = _activation((3, 256), torch.float32, device)
    q, s = kernel.fp8_act_quant(x, 64)
    assert s.shape == (3, 4)
    assert torch.allclose(q.float() * s.repeat_interleave(64, -1), x, rtol=2**-4, atol=0)


@pytest.mark.kernels_ci
def test_quantize_weight_ue8m0(kernel, device):
    w = torch.randn(200, 300, generator=torch.Generator().manual_seed(9)).to(device)
    q, s = kernel.quantize_weight(w, scale_dtype=torch.float8_e8m0fnu)
    q2, s2 = kernel.quantize_weight(w, pow2_scale=True)
    q_plain, s_plain = kernel.quantize_weight(w)
    assert s.dtype == torch.float8_e8m0fnu and s.shape == (2, 3)
    assert torch.equal(s.float(), s2) and torch.equal(q.view(torch.uint8), q2.view(torch.uint8))
    # Rounded up: never below the plain scale, less than twice it, and a power of two.
    assert (s2 >= s_plain).all() and (s2 < 2 * s_plain).all()
    assert torch.equal(torch.exp2(torch.log2(s2).round()), s2)
