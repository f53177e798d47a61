"""The gfx942 activation quantizer (gemm::quantize_launch, gemm/rocm_quantize_kernel.h) on the CPU emulator,
against reference_quantize_activation (tests/_helpers.py): q bytes and scales bitwise equal for bf16/fp16/fp32
input (dense and padded rows), e4m3fnuz and e4m3fn, fp32 and UE8M0 scales in row- and M-major layout,
power-of-two scales, a static scale, ragged K, zero groups, tiny and saturating values."""

from __future__ import annotations

import ctypes

import pytest
import torch
from _helpers import fp8_bits, reference_quantize_activation

import emu_gemm as E

pytestmark = pytest.mark.rocm_emu

FNUZ, FN = torch.float8_e4m3fnuz, torch.float8_e4m3fn
@pytest.fixture(scope="module")
def lib(gemm_libs):
    return gemm_libs["gemm"]


def run(lib, x, q, scale, pow2=False, static=None):
    static_t = torch.tensor([static], dtype=torch.float32) if static is not None else None
    args = E.EmuQuantizeArgs(
        x.shape[0], x.shape[1], x.data_ptr(), x.stride(0), E.IN_FORMAT[x.dtype],
        q.data_ptr(), q.stride(0), E.FP8_FORMAT[q.dtype],
        scale.data_ptr(), scale.stride(0), scale.stride(1), E.SCALE_FORMAT[scale.dtype], int(pow2),
        static_t.data_ptr() if static_t is not None else None)
    stats, err = E.EmuStats(), ctypes.create_string_buffer(E.ERR_LEN)
    rc = lib.emu_quantize(ctypes.byref(args), ctypes.byref(stats), err, E.ERR_LEN)
    return rc, err.value.decode(), stats


def activations(seed, m, k, dtype, padded):
    g = torch.Generator().manual_seed(seed)
    # Per-row magnitudes over many octaves, a zero group, tiny values (FP8 subnormals) and ties.
    x = torch.randn(m, k, generator=g) * torch.exp2(torch.randint(-30, 30, (m, 1), generator=g).float())
    x[0, : min(k, E.BLOCK)] = 0.0
    if m > 1:
        x[1] = torch.randn(k, generator=g) * 1e-3
    x = x.to(dtype)
    if padded:
        storage = torch.full((m, k + 24), float("nan"), dtype=dtype)
        return storage[:, :k].copy_(x)
    return x


def empty_scales(m, kb, ue8m0, m_major):
    dtype = torch.float8_e8m0fnu if ue8m0 else torch.float32
    base = torch.empty(kb, m, dtype=torch.uint8 if ue8m0 else torch.float32).t() if m_major else \
        torch.empty(m, kb, dtype=torch.uint8 if ue8m0 else torch.float32)
    base.fill_(0xAB if ue8m0 else float("nan"))
    return base.view(dtype) if ue8m0 else base


def check(lib, x, dtype, ue8m0, m_major, pow2=False, static=None):
    m, k = x.shape
    kb = -(-k // E.BLOCK)
    q = torch.full((m, k), 0x55, dtype=torch.uint8).view(dtype)
    scale = empty_scales(m, kb, ue8m0, m_major)
    rc, err, stats = run(lib, x, q, scale, pow2, static)
    assert rc == 0 and err == "", err
    assert stats.launches == 1
    q_ref, s_ref = reference_quantize_activation(x, dtype, pow2, static, torch.uint8 if ue8m0 else torch.float32)
    bits = torch.uint8 if ue8m0 else torch.int32  # bitwise, NaN and -0 included
    assert torch.equal(scale.view(bits), s_ref.view(bits)), "scales differ"
    bad = fp8_bits(q) != fp8_bits(q_ref)
    assert not bad.any(), f"{int(bad.sum())} q bytes differ, first at {bad.nonzero()[0].tolist()}"


@pytest.mark.kernels_ci
@pytest.mark.parametrize("in_dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("dtype", [FNUZ, FN], ids=["fnuz", "fn"])
@pytest.mark.parametrize("ue8m0,pow2", [(False, False), (False, True), (True, False)], ids=["f32", "f32-pow2", "ue8m0"])
def test_quantize_matches_reference(lib, in_dtype, dtype, ue8m0, pow2):
    x = activations(60, 7, 300, in_dtype, padded=False)  # K = 2 full groups + 44
    check(lib, x, dtype, ue8m0, m_major=False, pow2=pow2)


@pytest.mark.parametrize("m,k", [(1, 1), (3, 127), (5, 129), (17, 264), (2, 1000)])
@pytest.mark.parametrize("m_major", [False, True], ids=["row-major", "m-major"])
@pytest.mark.parametrize("padded", [False, True], ids=["dense", "padded-rows"])
def test_quantize_shapes_and_layouts(lib, m, k, m_major, padded):
    x = activations(61 + k, m, k, torch.bfloat16, padded)
    check(lib, x, FNUZ, ue8m0=m % 2 == 1, m_major=m_major, pow2=False)
    check(lib, x, FN, ue8m0=False, m_major=m_major, pow2=True)


@pytest.mark.parametrize("static", [0.75, 2.0**-3, 1e-4])
@pytest.mark.parametrize("ue8m0,pow2", [(False, False), (False, True), (True, False)], ids=["f32", "f32-pow2", "ue8m0"])
def test_quantize_static_scale(lib, static, ue8m0, pow2):
    x = activations(62, 5, 260, torch.bfloat16, padded=False)  # saturates for the small scales
    check(lib, x, FN, ue8m0, m_major=False, pow2=pow2, static=static)


def test_quantize_fp32_odd_stride_scalar_loads(lib):
    # Row stride 301 floats: not 16-byte aligned, so the kernel takes its per-element path.
    x = torch.randn(4, 301)[:, :290]
    check(lib, x, FNUZ, ue8m0=False, m_major=False)


def test_quantize_reference_can_fail(lib):
    # A wrong scale rounding (pow2 off) changes the result: the comparison notices.
    x = activations(63, 3, 256, torch.bfloat16, padded=False)
    q = torch.empty(3, 256, dtype=FN)
    scale = torch.empty(3, 2)
    assert run(lib, x, q, scale)[0] == 0
    q_ref, s_ref = reference_quantize_activation(x, FN, pow2_scale=True)
    assert not torch.equal(scale, s_ref)


def test_quantize_refusals(lib):
    x = torch.randn(2, 128)
    q = torch.empty(2, 128, dtype=FN)
    scale = torch.empty(2, 1)
    args = E.EmuQuantizeArgs(2, 128, x.data_ptr(), 128, 9, q.data_ptr(), 128, 0, scale.data_ptr(), 1, 1, 0, 0, None)
    stats, err = E.EmuStats(), ctypes.create_string_buffer(E.ERR_LEN)
    assert lib.emu_quantize(ctypes.byref(args), ctypes.byref(stats), err, E.ERR_LEN) == 1
    assert "x_format" in err.value.decode() and "9" in err.value.decode()
    assert stats.launches == 0
