"""UE8M0 scales (torch.float8_e8m0fnu, one byte e worth 2^(e - 127)) read by the emulated gfx942 GEMM as
they are: bitwise the same result as fp32 scales of equal (power-of-two) value for every mix of A and B
scale formats, tile, split, operand and scale layout; the fp64 reference; the extreme bytes (e = 0 is
2^-127, 0xFF is NaN and poisons only its own rows)."""

from __future__ import annotations


import pytest
import torch

import emu_gemm as E

pytestmark = pytest.mark.rocm_emu

FNUZ, FN = torch.float8_e4m3fnuz, torch.float8_e4m3fn
SPLIT4 = 7  # a test config with 4 K splits (test_emulation.py uses the same index)


@pytest.fixture(scope="module")
def lib(gemm_libs):
    return gemm_libs["gemm"]


def pow2_problem(seed, m, n, k, a_layout="k_major", a_dtype=FNUZ, scales_transposed=False):
    g = torch.Generator().manual_seed(seed)
    a = E.fp8_operand(g, m, k, a_dtype, a_layout)
    b = E.fp8_operand(g, n, k, FN, "k_major")
    kb = -(-k // E.BLOCK)
    a_scale = E.pow2_block_scales(g, m, kb, scales_transposed)
    b_scale = E.pow2_block_scales(g, -(-n // E.BLOCK), kb)
    return a, b, a_scale, b_scale


def run_ok(lib, a, b, a_scale, b_scale, config_index=-1):
    c = torch.full((a.shape[0], b.shape[0]), float("nan"), dtype=torch.float32)
    err, _ = E.run(lib, a, b, a_scale, b_scale, c, config_index)
    assert err == "", err
    return c


CASES = [
    # (m, n, k, A layout, scales column-major, config): ragged M/N/K, M-major A in place, A scales
    # read 4 rows per load (column-major, M a multiple of 4) and one at a time.
    (40, 72, 208, "k_major", False, -1),
    (64, 96, 256, "mn_major", True, -1),
    (70, 130, 300, "mn_padded", True, 0),
    (33, 65, 520, "k_major", True, SPLIT4),
    (17, 48, 130, "mn_major", False, 2),
]


@pytest.mark.kernels_ci
@pytest.mark.parametrize("m,n,k,a_layout,transposed,config", CASES)
@pytest.mark.parametrize("a_ue8m0,b_ue8m0", [(True, True), (False, True), (True, False)], ids=["both", "b", "a"])
def test_ue8m0_bitwise_equals_pow2_fp32(lib, m, n, k, a_layout, transposed, config, a_ue8m0, b_ue8m0):
    a, b, a_scale, b_scale = pow2_problem(40 + m, m, n, k, a_layout, scales_transposed=transposed)
    # The extreme exponents, paired so that every product stays finite: 2^-127 (e = 0, an fp32
    # subnormal) in the first K block, 2^127 (e = 254) in the last.
    a_scale[:, 0], b_scale[:, 0] = 2.0**-127, 2.0**120
    a_scale[:, -1], b_scale[:, -1] = 2.0**127, 2.0**-120
    expected = run_ok(lib, a, b, a_scale, b_scale, config)
    ref, bound = E.reference(a, b, a_scale, b_scale)
    assert not E.mismatches(expected, ref, bound).any()
    a_s = E.to_ue8m0(a_scale) if a_ue8m0 else a_scale
    b_s = E.to_ue8m0(b_scale) if b_ue8m0 else b_scale
    assert a_s.stride() == a_scale.stride()
    got = run_ok(lib, a, b, a_s, b_s, config)
    assert torch.equal(got.view(torch.int32), expected.view(torch.int32)), "UE8M0 and fp32 scales differ"


def test_ue8m0_against_reference_all_outputs(lib):
    # Exponents in [-3, 3): the outputs stay inside fp16's normal range.
    g = torch.Generator().manual_seed(50)
    a, b = E.fp8_operand(g, 96, 384, FNUZ, "k_major"), E.fp8_operand(g, 200, 384, FN, "k_major")
    a_s = E.to_ue8m0(E.pow2_block_scales(g, 96, 3, exponents=3))
    b_s = E.to_ue8m0(E.pow2_block_scales(g, 2, 3, exponents=3))
    for out_dtype in (torch.bfloat16, torch.float16, torch.float32):
        c = torch.full((96, 200), float("nan"), dtype=out_dtype)
        err, _ = E.run(lib, a, b, a_s, b_s, c)
        assert err == "", err
        ref, bound = E.reference(a, b, a_s, b_s)
        assert ref.abs().mean() > 1.0
        assert not E.mismatches(c, ref, bound).any(), out_dtype


@pytest.mark.parametrize("vector", [True, False], ids=["4-row-loads", "row-loads"])
def test_ue8m0_nan_byte_poisons_only_its_row(lib, vector):
    m = 64 if vector else 62
    a, b, a_scale, b_scale = pow2_problem(51, m, 72, 384, scales_transposed=True)
    a_s = E.to_ue8m0(a_scale)
    a_s.view(torch.uint8)[5, 1] = 0xFF
    c = run_ok(lib, a, b, a_s, E.to_ue8m0(b_scale))
    assert c[5].isnan().all()
    rest = torch.arange(m) != 5
    ref, bound = E.reference(a, b, a_scale, b_scale)
    assert not E.mismatches(c[rest], ref[rest], bound[rest]).any()


def test_ue8m0_swapped_scales_fail(lib):
    # The comparison can fail: two A scale columns exchanged give wrong outputs.
    a, b, a_scale, b_scale = pow2_problem(52, 32, 64, 256)
    a_s = E.to_ue8m0(a_scale)
    a_s.view(torch.uint8)[:] = a_s.view(torch.uint8).flip(1)
    c = run_ok(lib, a, b, a_s, E.to_ue8m0(b_scale))
    ref, bound = E.reference(a, b, a_scale, b_scale)
    assert E.mismatches(c, ref, bound).float().mean() > 0.5


def test_bad_scale_format_is_refused(lib):
    a, b, a_scale, b_scale = pow2_problem(53, 32, 32, 128)
    c = torch.zeros(32, 32)
    args = E.make_args(a, b, a_scale, b_scale, c)
    args.b_scale_format = 7
    stats, err = E.EmuStats(), E.ctypes.create_string_buffer(E.ERR_LEN)
    assert lib.emu_gemm(E.ctypes.byref(args), -1, E.ctypes.byref(stats), err, E.ERR_LEN) == 1
    message = err.value.decode()
    assert "b_scale_format" in message and "7" in message, message
    assert stats.launches == 0
