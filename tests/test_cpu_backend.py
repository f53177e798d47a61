"""CPU backend checks (gemm/cpu/): layouts read from strides, both FP8 formats, every output format,
ragged shapes, a few rows (the dot kernel), exact FP8 decoding, rounding, NaN confinement,
thread-count determinism and each vector ISA path. Every case compares against the float64 reference of tests/_helpers.py on fresh
random data with distinct signed per-block scales.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest
import torch
from _helpers import (
    FP8_DTYPES,
    LAYOUTS,
    REPO_ROOT,
    SCALE_BLOCK_K,
    assert_close_gemm,
    ceil_div,
    make_inputs,
    reference_gemm,
)

OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
# The bytes each format reads as NaN (e4m3fn: S.1111.111; e4m3fnuz: the would-be -0).
NAN_BYTES = {torch.float8_e4m3fn: (0x7F, 0xFF), torch.float8_e4m3fnuz: (0x80,)}
# Rows the backend decodes per chunk (kMaxChunkRows in gemm/cpu/gemm_launcher.cpp): crossing it
# exercises the chunk loop.
CHUNK_ROWS = 1024
# Row counts the dot kernel takes (kDotMaxRows in gemm/cpu/tile_configs.h: up to 8 with AVX-512, 4
# with AVX2, 2 with SSE2 and the portable path), and one past them.
DOT_ROWS = (1, 2, 3, 4, 5, 8, 9)


@pytest.fixture(autouse=True)
def only_cpu_build(kernel, devices):
    if devices != ["cpu"]:
        pytest.skip("the loaded build is not the CPU backend")


def run(kernel, a, b, a_scale, b_scale, out_dtype=torch.bfloat16):
    return kernel.gemm(a, b, a_scale, b_scale, out_dtype=out_dtype)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("fp8_dtype", FP8_DTYPES)
@pytest.mark.parametrize("out_dtype", OUT_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_layouts_formats_outputs(kernel, fp8_dtype, out_dtype, layout):
    # Ragged in every dim: partial row tile, partial column strip, partial last K block.
    m, n, k = 19, 200, 300
    a, b, a_scale, b_scale = make_inputs(m, n, k, fp8_dtype=fp8_dtype, layout=layout, seed=1)
    assert_close_gemm(run(kernel, a, b, a_scale, b_scale, out_dtype), reference_gemm(a, b, a_scale, b_scale))


@pytest.mark.kernels_ci
@pytest.mark.parametrize(
    "m,n,k",
    [(1, 1, 1), (1, 64, 128), (2, 65, 129), (15, 127, 255), (29, 576, 1152), (64, 192, 3884), (130, 129, 64)],
)
def test_ragged_shapes(kernel, m, n, k):
    a, b, a_scale, b_scale = make_inputs(m, n, k, seed=m + n + k)
    # (1, 1, 1) has a single product: its magnitude is that of one FP8 pair times two scales.
    min_ref = 1.0 if k >= SCALE_BLOCK_K else 1e-6
    assert_close_gemm(run(kernel, a, b, a_scale, b_scale), reference_gemm(a, b, a_scale, b_scale), min_ref)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("m", DOT_ROWS)
@pytest.mark.parametrize("n,k", [(1, 1), (5, 17), (70, 300), (130, 129)])
def test_few_rows(kernel, m, n, k):
    # N narrower than the dot kernel's column group (1, 5) and a last group overlapping the one
    # before (70, 130); K ending inside a vector (1, 17, 300, 129).
    a, b, a_scale, b_scale = make_inputs(m, n, k, seed=m * n + k)
    min_ref = 1.0 if k >= SCALE_BLOCK_K else 1e-6
    assert_close_gemm(run(kernel, a, b, a_scale, b_scale), reference_gemm(a, b, a_scale, b_scale), min_ref)


@pytest.mark.parametrize("m", [1, 2])
def test_few_rows_long_k(kernel, m):
    # Past 2^20 K the dot kernel's promotion factors come in several windows of K blocks
    # (scratch of 64 x 128 floats over m rows).
    k = (1 << 20) + 200
    a, b, a_scale, b_scale = make_inputs(m, 9, k, seed=m)
    assert_close_gemm(run(kernel, a, b, a_scale, b_scale), reference_gemm(a, b, a_scale, b_scale))


def test_rows_across_chunks(kernel):
    m, n, k = CHUNK_ROWS + 37, 70, 256
    a, b, a_scale, b_scale = make_inputs(m, n, k, seed=7)
    assert_close_gemm(run(kernel, a, b, a_scale, b_scale), reference_gemm(a, b, a_scale, b_scale))


@pytest.mark.kernels_ci
def test_any_strides(kernel):
    # B N-major, b_scale transposed, out with a padded row stride: layouts make_inputs does not make.
    m, n, k = 21, 150, 260
    a, b, a_scale, b_scale = make_inputs(m, n, k, seed=3)
    b_n_major = b.t().contiguous().t()
    b_scale_t = b_scale.t().contiguous().t()
    out = torch.full((m, n + 9), 7.0, dtype=torch.bfloat16)[:, :n]
    kernel.gemm(a, b_n_major, a_scale, b_scale_t, out=out)
    assert b_n_major.stride() == (1, n) and out.stride() == (n + 9, 1)
    assert_close_gemm(out, reference_gemm(a, b, a_scale, b_scale))
    assert (out.as_strided((m, 9), (n + 9, 1), n) == 7.0).all(), "wrote outside out's columns"


@pytest.mark.kernels_ci
@pytest.mark.parametrize("fp8_dtype", FP8_DTYPES)
def test_decodes_every_code_exactly(kernel, fp8_dtype):
    # Every code once per row (NaN codes read as 0 here, see the NaN tests), against torch's own
    # decoding. With the identity on the other side, C holds the decoded values exactly.
    # Through A (the table decoder) and through B (the vector decoders).
    k = 256
    codes = torch.tensor([0 if c in NAN_BYTES[fp8_dtype] else c for c in range(k)], dtype=torch.uint8)
    rows = torch.stack([codes.roll(shift) for shift in range(64)]).view(fp8_dtype)  # [64, 256]
    identity = torch.eye(k).to(fp8_dtype)
    decoded = rows.float()
    assert decoded.abs().max() == torch.finfo(fp8_dtype).max and decoded.isfinite().all()
    k_blocks = ceil_div(k, SCALE_BLOCK_K)

    out = run(kernel, rows, identity, torch.ones(64, k_blocks), torch.ones(ceil_div(k, 128), k_blocks), torch.float32)
    torch.testing.assert_close(out, decoded, rtol=0, atol=0)
    for b in (rows, rows.t().contiguous().t()):  # K-major, then N-major (transpose-free vector path)
        out = run(kernel, identity, b, torch.ones(k, k_blocks), torch.ones(1, k_blocks), torch.float32)
        torch.testing.assert_close(out.t(), decoded, rtol=0, atol=0)
    # Through the dot kernel (three rows of A, B read in place): one-hot rows of A pick a column of
    # B holding every code, in a full vector, and in a ragged K end (k = 200: 192..199).
    for k, picks in ((256, [0, 17, 255]), (200, [5, 130, 199])):
        b = torch.stack([codes.roll(shift) for shift in range(256)])[:, :k].view(fp8_dtype)  # [256, k]
        one_hot = torch.zeros(3, k)
        one_hot[range(3), picks] = 1
        k_blocks = ceil_div(k, SCALE_BLOCK_K)
        out = run(kernel, one_hot.to(fp8_dtype), b, torch.ones(3, k_blocks), torch.ones(2, k_blocks), torch.float32)
        torch.testing.assert_close(out, b.float()[:, picks].t(), rtol=0, atol=0)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("fp8_dtype", FP8_DTYPES)
@pytest.mark.parametrize("m,nan_row", [(20, 9), (3, 1)])  # the micro-kernel, the dot kernel
def test_nan_stays_in_its_row(kernel, fp8_dtype, m, nan_row):
    n, k = 96, 256
    a, b, a_scale, b_scale = make_inputs(m, n, k, fp8_dtype=fp8_dtype, seed=5)
    a_bytes = a.view(torch.uint8).clone()
    a_bytes[nan_row, 130] = NAN_BYTES[fp8_dtype][0]
    a = a_bytes.view(fp8_dtype)
    out = run(kernel, a, b, a_scale, b_scale)
    assert out[nan_row].isnan().all()
    others = torch.cat([out[:nan_row], out[nan_row + 1:]])
    ref = reference_gemm(a, b, a_scale, b_scale)
    assert_close_gemm(others, torch.cat([ref[:nan_row], ref[nan_row + 1:]]))


@pytest.mark.kernels_ci
@pytest.mark.parametrize("fp8_dtype", FP8_DTYPES)
@pytest.mark.parametrize("m", [12, 2])  # the micro-kernel, the dot kernel
def test_nan_in_b_stays_in_its_column(kernel, fp8_dtype, m):
    # Every NaN code of the format, in a row of B the vector decoder reads (full 16 x 16 blocks).
    n, k = 64, 256
    a, b, a_scale, b_scale = make_inputs(m, n, k, fp8_dtype=fp8_dtype, seed=12)
    b_bytes = b.view(torch.uint8).clone()
    nan_cols = [5, 40][: len(NAN_BYTES[fp8_dtype])]
    for col, code in zip(nan_cols, NAN_BYTES[fp8_dtype]):
        b_bytes[col, 17] = code
    b = b_bytes.view(fp8_dtype)
    out = run(kernel, a, b, a_scale, b_scale, torch.float32)
    keep = [j for j in range(n) if j not in nan_cols]
    assert out[:, nan_cols].isnan().all()
    assert_close_gemm(out[:, keep], reference_gemm(a, b, a_scale, b_scale)[:, keep])


@pytest.mark.kernels_ci
def test_zero_blocks_with_zero_scales_give_zero(kernel):
    m, n, k = 8, 64, 256
    a, b, a_scale, b_scale = make_inputs(m, n, k, seed=6)
    a = torch.zeros_like(a)
    a_scale = torch.zeros_like(a_scale)
    out = run(kernel, a, b, a_scale, b_scale, torch.float32)
    assert not out.isnan().any() and (out == 0).all()


@pytest.mark.kernels_ci
@pytest.mark.parametrize("out_dtype", (torch.bfloat16, torch.float16))
def test_rounds_to_nearest_even(kernel, out_dtype):
    # The narrow outputs must be the fp32 result rounded once (torch's cast rounds to nearest even).
    a, b, a_scale, b_scale = make_inputs(33, 160, 384, seed=8)
    exact = run(kernel, a, b, a_scale, b_scale, torch.float32)
    narrow = run(kernel, a, b, a_scale, b_scale, out_dtype)
    assert torch.equal(narrow, exact.to(out_dtype))


@pytest.mark.kernels_ci
def test_fp16_overflow_is_inf(kernel):
    m, n, k = 4, 64, 128
    a, b, a_scale, b_scale = make_inputs(m, n, k, seed=9)
    a_scale = a_scale.abs() * 1e4
    b_scale = b_scale.abs() * 1e4
    exact = run(kernel, a, b, a_scale, b_scale, torch.float32)
    assert exact.abs().max() > torch.finfo(torch.float16).max
    torch.testing.assert_close(run(kernel, a, b, a_scale, b_scale, torch.float16), exact.to(torch.float16))


def test_scale_block_index_matters(kernel):
    # The check above must be able to fail: swapping two K blocks' scales changes the result.
    a, b, a_scale, b_scale = make_inputs(16, 128, 512, seed=10)
    ref = reference_gemm(a, b, a_scale, b_scale)
    swapped = a_scale[:, [1, 0, 2, 3]]
    with pytest.raises(AssertionError):
        assert_close_gemm(run(kernel, a, b, swapped, b_scale), ref)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("m", [45, 3])
def test_bitwise_deterministic_across_threads(kernel, m):
    a, b, a_scale, b_scale = make_inputs(m, 330, 640, seed=11)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        single = run(kernel, a, b, a_scale, b_scale, torch.float32)
        torch.set_num_threads(max(2, threads))
        results = [run(kernel, a, b, a_scale, b_scale, torch.float32) for _ in range(5)]
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(r, single) for r in results)


# Runs in a fresh process: the backend picks its vector path once, at its first call.
ISA_SCRIPT = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, {tests!r})
    os.environ["LOCAL_KERNELS"] = {local!r}
    import kernels, torch
    from _helpers import make_inputs, reference_gemm, assert_close_gemm, FP8_DTYPES, REPO_ID, KERNEL_VERSION
    kernel = kernels.get_kernel(REPO_ID, version=KERNEL_VERSION)
    for m, n, k in [(1, 64, 128), (17, 100, 300), (40, 257, 640), (1, 5, 17), (2, 130, 129), (3, 70, 300),
                    (4, 37, 200)]:
        for dtype in FP8_DTYPES:
            a, b, a_scale, b_scale = make_inputs(m, n, k, fp8_dtype=dtype, seed=m)
            assert_close_gemm(kernel.gemm(a, b, a_scale, b_scale), reference_gemm(a, b, a_scale, b_scale))
    # This path's vector decoder on every non-NaN code, exactly (B = codes, A = identity).
    nan_codes = {{torch.float8_e4m3fn: (0x7F, 0xFF), torch.float8_e4m3fnuz: (0x80,)}}
    for dtype in FP8_DTYPES:
        codes = torch.tensor([0 if c in nan_codes[dtype] else c for c in range(256)], dtype=torch.uint8)
        rows = torch.stack([codes.roll(shift) for shift in range(64)]).view(dtype)
        identity = torch.eye(256).to(dtype)
        for b in (rows, rows.t().contiguous().t()):
            out = kernel.gemm(identity, b, torch.ones(256, 2), torch.ones(1, 2), out_dtype=torch.float32)
            torch.testing.assert_close(out.t(), rows.float(), rtol=0, atol=0)
        # ... and through its dot kernel: a one-hot row of A picks a column of B holding every code.
        b = torch.stack([codes.roll(shift) for shift in range(256)])[:, :200].view(dtype)
        one_hot = torch.zeros(1, 200)
        one_hot[0, 199] = 1
        out = kernel.gemm(one_hot.to(dtype), b, torch.ones(1, 2), torch.ones(2, 2), out_dtype=torch.float32)
        torch.testing.assert_close(out, b.float()[:, 199:].t(), rtol=0, atol=0)
    print("ok")
    """
)


def isa_supported(isa: str) -> bool:
    flags = open("/proc/cpuinfo").read()
    x86 = {"sse2": True, "avx2": " avx2 " in flags and " fma " in flags, "avx512": " avx512f " in flags}
    return isa == "portable" or (platform.machine() == "x86_64" and x86[isa])


# "portable" is the only path on other architectures; x86 runs it when pinned.
@pytest.mark.parametrize("isa", ["avx512", "avx2", "sse2", "portable"])
def test_each_vector_path(kernel, isa):
    if not isa_supported(isa):
        pytest.skip(f"this CPU has no {isa}")
    script = ISA_SCRIPT.format(tests=str(REPO_ROOT / "tests"), local=os.environ["LOCAL_KERNELS"])
    env = {**os.environ, "GEMM_CPU_ISA": isa}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def test_unknown_isa_is_a_python_error(kernel):
    script = ISA_SCRIPT.format(tests=str(REPO_ROOT / "tests"), local=os.environ["LOCAL_KERNELS"])
    env = {**os.environ, "GEMM_CPU_ISA": "avx9000"}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "RuntimeError" in result.stderr and "GEMM_CPU_ISA" in result.stderr, (
        result.stderr[-2000:]
    )
