"""The CUDA activation quantizer (gemm/cuda/quantize_kernel.cuh) against the Python reference, bit for bit.

The reference is the package's quantize_activation (torch-ext/gemm/_quant.py) for fp32 scales, extended
here by the contract's options (gemm_contract.h QuantizeArgs): scales rounded up to powers of two, UE8M0
scales (the least power of two >= s that UE8M0 holds, so at least 2^-127), and a static scale. It runs on
the CPU: torch divides an fp32 CUDA tensor by a Python scalar as a multiplication by its rounded
reciprocal, which is not the contract's amax / 448.
The GPU tests run through the raw launcher (tests/cuda/cuda_shim.py) and are skipped without an sm_90 GPU;
the reference's own checks run anywhere.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import types

import pytest
import torch
import torch.nn.functional as F
from _helpers import REPO_ROOT

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
BLOCK = 128
TWO_POW_MINUS_127 = 2.0**-127
UE8M0_NAN = 0xFF
IN_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def package_quantize_activation():
    """torch-ext/gemm/_quant.py's quantize_activation, loaded without the compiled package."""
    name = "gemm_python_reference"
    if name not in sys.modules:
        package = types.ModuleType(name)
        package.__path__ = [str(REPO_ROOT / "torch-ext" / "gemm")]
        sys.modules[name] = package
        for sub in ("_fp8", "_quant"):
            spec = importlib.util.spec_from_file_location(f"{name}.{sub}", REPO_ROOT / "torch-ext" / "gemm" / f"{sub}.py")
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
    return sys.modules[f"{name}._quant"].quantize_activation


def pow2_ceil(s: torch.Tensor) -> torch.Tensor:
    """The least power of two >= s (positive fp32; inf stays inf), exactly: built from the exponent bits."""
    mantissa, exponent = torch.frexp(s)  # s = mantissa * 2^exponent, mantissa in [0.5, 1)
    e = torch.where(mantissa == 0.5, exponent - 1, exponent).to(torch.int64)  # 2^e >= s
    normal = (e + 127).clamp(min=0) << 23
    subnormal = torch.ones_like(e) << (e + 149).clamp(0, 22)
    value = torch.where(e >= -126, normal, subnormal).to(torch.int32).view(torch.float32)
    return torch.where(torch.isinf(s), s, value)


def ue8m0_bytes(s: torch.Tensor) -> torch.Tensor:
    """The UE8M0 byte of powers of two >= 2^-127 (inf: the NaN byte)."""
    b = (s.view(torch.int32) >> 23).to(torch.uint8)
    b = torch.where(s == TWO_POW_MINUS_127, torch.zeros_like(b), b)
    return torch.where(torch.isinf(s), torch.full_like(b, UE8M0_NAN), b)


def reference_quantize(x: torch.Tensor, ue8m0: bool = False, pow2: bool = False, static: float | None = None):
    """(q, scale) on the CPU: q [M, K] e4m3fn; scale [M, ceil(K / 128)] fp32, or UE8M0 bytes."""
    x = x.cpu()
    k = x.shape[-1]
    kb = -(-k // BLOCK)
    groups = F.pad(x.float(), (0, kb * BLOCK - k)).unflatten(-1, (kb, BLOCK))
    if static is None:
        s = groups.abs().amax(dim=-1) / FP8_MAX
        s = torch.where(s > 0, s, torch.ones_like(s))
    else:
        s = torch.full(groups.shape[:-1], static, dtype=torch.float32)
    if ue8m0:
        s = torch.clamp(pow2_ceil(s), min=TWO_POW_MINUS_127)
    elif pow2:
        s = pow2_ceil(s)
    q = (groups / s.unsqueeze(-1)).clamp(-FP8_MAX, FP8_MAX).to(FP8).flatten(-2)[..., :k]
    return q.contiguous(), (ue8m0_bytes(s) if ue8m0 else s)


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


# ------------------------------------------------------------------ the reference itself (any machine)


def test_reference_is_the_package_reference():
    quantize_activation = package_quantize_activation()
    for dtype in IN_DTYPES:
        x = make_x(9, 1000, dtype, seed=0)
        q, s = reference_quantize(x)
        q_pkg, s_pkg = quantize_activation(x)
        assert torch.equal(q.view(torch.uint8), q_pkg.view(torch.uint8)) and torch.equal(s, s_pkg)


def test_reference_pow2_ceil_exact():
    values = [1.0, 1.5, 0.75, 3.0, 2.0**-126, 2.0**-126 * 1.25, 2.0**-149, 3 * 2.0**-149, 2.0**-130 * 1.5,
              2.0**127, 1.1 * 2.0**126, 448.0, 1 / 448]
    s = torch.tensor(values, dtype=torch.float32)
    for v, got in zip(s.tolist(), pow2_ceil(s).tolist()):
        mantissa, exponent = math.frexp(v)
        assert got == (2.0 ** (exponent - 1) if mantissa == 0.5 else 2.0**exponent), v
    assert ue8m0_bytes(torch.tensor([TWO_POW_MINUS_127, 1.0, 2.0**127, float("inf")])).tolist() == [0, 127, 254, 255]


# ------------------------------------------------------------------ the kernel (sm_90 GPU)

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
    kb = -(-k // BLOCK)
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
    q_ref, s_ref = reference_quantize(x, *MODES[mode])
    q_ref = q_ref.view(torch.uint8)
    bad = (q.cpu() != q_ref).nonzero()
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
    b_s = torch.rand(-(-n // BLOCK), -(-k // BLOCK), device="cuda") + 0.5
    q8, s8 = run_kernel(shim, x, "ue8m0", scale_layout="m_major")
    q32, s32 = run_kernel(shim, x, "fp32_pow2", scale_layout="m_major")
    assert torch.equal(q8, q32)
    out8 = shim.gemm(q8.view(FP8), b, s8, b_s)
    out32 = shim.gemm(q32.view(FP8), b, s32, b_s)
    assert torch.equal(out8.view(torch.int16), out32.view(torch.int16))
