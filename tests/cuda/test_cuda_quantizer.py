"""The CUDA activation quantizer (gemm/cuda/quantize_kernel.cuh) against reference_quantize_activation
(tests/_helpers.py), bit for bit, through the raw launcher (tests/cuda/cuda_shim.py); skipped without an
sm_90 GPU.
"""

from __future__ import annotations

import pytest
import torch
from _helpers import SCALE_BLOCK_K as BLOCK, ceil_div, fp8_bits, reference_quantize_activation

FP8 = torch.float8_e4m3fn
IN_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def make_x(m: int, k: int, dtype: torch.dtype, seed: int, tiny_row: bool = True) -> torch.Tensor:
    """Rows of magnitudes 1e-3..1e3, an all-zero group, and (bf16/fp32, tiny_row) a row whose scale may be
    a subnormal fp32."""
    gen = torch.Generator().manual_seed(seed)
    mag = 10.0 ** (torch.rand(m, 1, generator=gen) * 6 - 3)
    x = torch.randn(m, k, generator=gen) * mag
    x[0, : min(k, BLOCK)] = 0
    if tiny_row and m > 1 and dtype != torch.float16:
        x[1] *= 1e-36  # amax / 448 is a subnormal fp32: pow2 and UE8M0 round it differently
    return x.to(dtype)


MODES = {  # name: (ue8m0, pow2, static)
    "fp32": (False, False, None),
    "fp32_pow2": (False, True, None),
    "ue8m0": (True, False, None),
    "static": (False, False, 0.37),
    "static_ue8m0": (True, False, 0.25),
}
SHAPES = [(1, 128), (3, 100), (65, 1000), (17, 1001), (33, 7168), (256, 4096)]


def run_kernel(shim, x, mode, scale_layout="row_major", q_pad=0):
    ue8m0, pow2, static = MODES[mode]
    m, k = x.shape
    kb = ceil_div(k, BLOCK)
    q = torch.empty(m, k + q_pad, dtype=torch.uint8, device="cuda")[:, :k]
    sdt = torch.uint8 if ue8m0 else torch.float32
    if scale_layout == "m_major":
        scale = torch.empty(kb, m, dtype=sdt, device="cuda").t()
    elif scale_layout == "m_major_padded":
        scale = torch.empty(kb, m + 3, dtype=sdt, device="cuda")[:, :m].t()
    else:
        scale = torch.empty(m, kb, dtype=sdt, device="cuda")
    static_t = torch.tensor([static], dtype=torch.float32, device="cuda") if static is not None else None
    shim.quantize(x, q, scale, scale_format=int(ue8m0), pow2=pow2, static_scale=static_t)
    return q, scale


def assert_matches(shim, x, mode, **layout):
    q, scale = run_kernel(shim, x, mode, **layout)
    ue8m0, pow2, static = MODES[mode]
    scale_dtype = torch.uint8 if ue8m0 else torch.float32
    q_ref, s_ref = reference_quantize_activation(x.cpu(), FP8, pow2, static, scale_dtype)
    bad = (fp8_bits(q.view(FP8)) != fp8_bits(q_ref)).nonzero()
    assert bad.numel() == 0, f"{mode} {layout}: {bad.shape[0]} q bytes differ, first at {bad[0].tolist()}"
    s = scale.cpu()
    equal = torch.equal(s, s_ref) if s.dtype == torch.uint8 else torch.equal(s.view(torch.int32), s_ref.view(torch.int32))
    assert equal, f"{mode} {layout}: scales differ at {(s != s_ref).nonzero()[:4].tolist()}"


@pytest.mark.cuda
@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("dtype", IN_DTYPES, ids=str)
def test_quantizer_bitwise(shim, dtype, mode):
    for i, (m, k) in enumerate(SHAPES):
        x = make_x(m, k, dtype, seed=i).cuda()
        for scale_layout in ("row_major", "m_major", "m_major_padded"):
            assert_matches(shim, x, mode, scale_layout=scale_layout)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", IN_DTYPES, ids=str)
def test_quantizer_strided_rows(shim, dtype):
    """Padded x rows (aligned: 16-byte loads; odd: element loads) and padded q rows."""
    m, k = 70, 1000
    x = make_x(m, k, dtype, seed=7).cuda()
    for pad in (8, 3):
        buf = torch.zeros(m, k + pad, dtype=dtype, device="cuda")
        buf[:, :k] = x
        assert_matches(shim, buf[:, :k], "fp32", q_pad=pad)
        shifted = torch.zeros(m, k + pad + 1, dtype=dtype, device="cuda")
        shifted[:, 1 : k + 1] = x
        assert_matches(shim, shifted[:, 1 : k + 1], "ue8m0", scale_layout="m_major")


@pytest.mark.cuda
@pytest.mark.parametrize("m,k", [(65536, 256), (8, 16384), (4096, 7168)])
def test_quantizer_large(shim, m, k):
    x = make_x(m, k, torch.bfloat16, seed=11).cuda()
    assert_matches(shim, x, "fp32", scale_layout="m_major")
    assert_matches(shim, x, "ue8m0", scale_layout="m_major")


@pytest.mark.cuda
def test_quantizer_refuses_e4m3fnuz(shim):
    x = torch.randn(4, 256, device="cuda", dtype=torch.bfloat16)
    q = torch.empty(4, 256, dtype=torch.uint8, device="cuda")
    scale = torch.empty(4, 2, device="cuda")
    with pytest.raises(RuntimeError, match="e4m3fn.*got q format 1"):
        shim.quantize(x, q, scale, q_format=1)


@pytest.mark.cuda
def test_quantized_gemm_matches_fp32_scales(shim):
    """The quantizer's UE8M0 output fed to the GEMM gives the bits of its fp32-pow2 output fed to it."""
    m, n, k = 300, 520, 1000
    x = make_x(m, k, torch.bfloat16, seed=5, tiny_row=False).cuda()  # no scale below 2^-127: same q
    b = (torch.randn(n, k, device="cuda") * 2).to(FP8)
    b_s = torch.rand(ceil_div(n, BLOCK), ceil_div(k, BLOCK), device="cuda") + 0.5
    q8, s8 = run_kernel(shim, x, "ue8m0", scale_layout="m_major")
    q32, s32 = run_kernel(shim, x, "fp32_pow2", scale_layout="m_major")
    assert torch.equal(q8, q32)
    out8 = shim.gemm(q8.view(FP8), b, s8, b_s)
    out32 = shim.gemm(q32.view(FP8), b, s32, b_s)
    assert torch.equal(out8.view(torch.int16), out32.view(torch.int16))
