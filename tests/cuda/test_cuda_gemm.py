"""H200 (sm_90a) tests of the CUDA backend through the package as users load it.

Skipped (not passed) where no CUDA sm_90 GPU is present; on the H200 every test here must run.
Every check compares against the float64 reference of tests/_helpers.py on fresh random data with
distinct signed per-block scales.
"""

from __future__ import annotations

import pytest
import torch
from _helpers import assert_close_gemm, make_inputs, reference_gemm
from cuda_shim import HAS_SM90

from benchmarks.shapes import CONFIG_SHAPES, RAGGED_SHAPES, SCALE_PATH_SHAPES

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not HAS_SM90, reason="needs a CUDA sm_90 (H100/H200) GPU")]

FP8 = torch.float8_e4m3fn


def run_and_check(kernel, m, n, k, layout="contiguous", seed=0, out_dtype=torch.bfloat16):
    a, b, a_s, b_s = make_inputs(m, n, k, "cuda", FP8, layout, seed)
    out = kernel.gemm(a, b, a_s, b_s, out_dtype=out_dtype)
    assert_close_gemm(out, reference_gemm(a, b, a_s, b_s))


@pytest.mark.parametrize("m,n,k", CONFIG_SHAPES)
def test_every_tile_config(kernel, m, n, k):
    run_and_check(kernel, m, n, k)


@pytest.mark.parametrize("m,n,k", RAGGED_SHAPES)
def test_ragged(kernel, m, n, k):
    run_and_check(kernel, m, n, k)


@pytest.mark.parametrize("layout", ["a_m_major", "as_m_major", "b_padded"])
def test_layouts(kernel, layout):
    run_and_check(kernel, 256, 576, 1536, layout=layout)


@pytest.mark.parametrize(
    "scale_layout", ["k_major", "k_major_padded", "m_major", "m_major_padded", "misaligned_view"]
)
@pytest.mark.parametrize("path", sorted(SCALE_PATH_SHAPES))
def test_a_scale_layouts_on_128_row_tiles(kernel, scale_layout, path):
    """128+-row tiles read A scales with TMA in place when M-major with 16-byte aligned columns; other
    layouts are gathered by the scale warp (small grids) or transposed by a kernel before the GEMM, which
    is its programmatic dependent."""
    m, n, k = SCALE_PATH_SHAPES[path]
    a, b, a_s, b_s = make_inputs(m, n, k, "cuda", FP8)
    kb = a_s.shape[1]
    if scale_layout == "m_major":
        a_s_v = a_s.t().contiguous().t()
    elif scale_layout == "m_major_padded":  # column stride M + 3: not 16-byte aligned, copied
        buf = torch.full((kb, m + 3), float("nan"), device="cuda")
        buf[:, :m] = a_s.t()
        a_s_v = buf[:, :m].t()
    elif scale_layout == "k_major_padded":  # row stride kb + 4, copied
        buf = torch.full((m, kb + 4), float("nan"), device="cuda")
        buf[:, :kb] = a_s
        a_s_v = buf[:, :kb]
    elif scale_layout == "misaligned_view":
        buf = torch.empty(m + 1, kb, device="cuda")
        buf[1:] = a_s
        a_s_v = buf[1:]
    else:
        a_s_v = a_s
    assert torch.equal(a_s_v, a_s)
    assert_close_gemm(kernel.gemm(a, b, a_s_v, b_s), reference_gemm(a, b, a_s, b_s))


def test_challenge_layout(kernel):
    """AMD-challenge inputs: a (1, M), b (1, N), a_scale (1, M), b_scale (1, N/128) strides."""
    m, n, k = 1024, 1536, 7168
    a, b, a_s, b_s = make_inputs(m, n, k, "cuda", FP8)
    a_t, b_t = a.t().contiguous().t(), b.t().contiguous().t()
    a_s_t, b_s_t = a_s.t().contiguous().t(), b_s.t().contiguous().t()
    assert a_t.stride() == (1, m) and b_t.stride() == (1, n)
    assert_close_gemm(kernel.gemm(a_t, b_t, a_s_t, b_s_t), reference_gemm(a, b, a_s, b_s))


def test_misaligned_views(kernel):
    """x[1:] views (base not 16-byte aligned, row stride K % 16 != 0) go through the K-major repack."""
    m, n, k = 130, 320, 1000
    a, b, a_s, _ = make_inputs(m + 1, n + 1, k, "cuda", FP8)
    b_s = make_inputs(m, n, k, "cuda", FP8, seed=3)[3]
    a_v, b_v, a_s_v = a[1:], b[1:], a_s[1:]
    assert a_v.data_ptr() % 16 != 0 and b_v.data_ptr() % 16 != 0
    assert_close_gemm(kernel.gemm(a_v, b_v, a_s_v, b_s), reference_gemm(a_v, b_v, a_s_v, b_s))


@pytest.mark.parametrize("out_dtype", [torch.float16, torch.float32])
def test_out_dtypes(kernel, out_dtype):
    run_and_check(kernel, 200, 2112, 2048, out_dtype=out_dtype)
    run_and_check(kernel, 64, 576, 7168, out_dtype=out_dtype)  # stream-K reduction path


def test_out_with_padded_row_stride(kernel):
    m, n, k = 96, 576, 1536
    a, b, a_s, b_s = make_inputs(m, n, k, "cuda", FP8)
    buf = torch.full((m, n + 24), float("nan"), device="cuda", dtype=torch.bfloat16)
    out = buf[:, :n]
    kernel.gemm(a, b, a_s, b_s, out=out)
    assert_close_gemm(out, reference_gemm(a, b, a_s, b_s))
    assert torch.isnan(buf[:, n:]).all(), "wrote outside the out view"


def _big_inputs(m, n, k, seed=0):
    """Like make_inputs, drawn on the GPU (a CPU draw of 2^31 values takes minutes)."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    fp8_max = torch.finfo(FP8).max
    a = ((torch.rand(m, k, generator=gen, device="cuda") * 2 - 1) * fp8_max).to(FP8)
    b = ((torch.rand(n, k, generator=gen, device="cuda") * 2 - 1) * fp8_max).to(FP8)
    kb, nb = -(-k // 128), -(-n // 128)
    sign = lambda shape: torch.where(torch.rand(shape, generator=gen, device="cuda") < 0.5, -1.0, 1.0)
    a_s = (0.5e-2 + 1e-2 * torch.rand(m, kb, generator=gen, device="cuda")) * sign((m, kb))
    b_s = (0.5e-2 + 1e-2 * torch.rand(nb, kb, generator=gen, device="cuda")) * sign((nb, kb))
    return a, b, a_s, b_s


def _check_rows(out, a, b, a_s, b_s, rows):
    assert_close_gemm(out[rows], reference_gemm(a[rows], b, a_s[rows], b_s))


@pytest.mark.slow
def test_64bit_offsets_mn(kernel):
    """M * N >= 2^31: output offsets need 64 bits (checked on the first and last rows)."""
    m, n, k = 262144, 8192, 128
    a, b, a_s, b_s = _big_inputs(m, n, k)
    out = kernel.gemm(a, b, a_s, b_s)
    assert m * n >= 2**31
    _check_rows(out, a, b, a_s, b_s, slice(0, 128))
    _check_rows(out, a, b, a_s, b_s, slice(m - 200, m))


@pytest.mark.slow
def test_64bit_offsets_mk(kernel):
    """M * K >= 2^31: A offsets (TMA rows, repack and scale reads) need 64 bits."""
    m, n, k = 2**21 + 64, 256, 1024
    a, b, a_s, b_s = _big_inputs(m, n, k)
    assert m * k >= 2**31
    out = kernel.gemm(a, b, a_s, b_s)
    _check_rows(out, a, b, a_s, b_s, slice(m - 300, m))
    a_t = a.t().contiguous().t()  # M-major: the repack kernel walks > 2^31 bytes
    out_t = kernel.gemm(a_t, b, a_s, b_s)
    _check_rows(out_t, a, b, a_s, b_s, slice(m - 300, m))


@pytest.mark.parametrize("m,n,k", [(128, 576, 1024), (64, 576, 7168)])  # the second: a K split
def test_nan_confined_to_its_row(kernel, m, n, k):
    a, b, a_s, b_s = make_inputs(m, n, k, "cuda", FP8)
    bad_row = 37
    a.view(torch.uint8)[bad_row, 5] = 0x7F  # e4m3fn NaN
    out = kernel.gemm(a, b, a_s, b_s)
    assert torch.isnan(out[bad_row]).all()
    keep = torch.ones(m, dtype=torch.bool, device="cuda")
    keep[bad_row] = False
    assert torch.isfinite(out[keep]).all(), "a NaN in one row of A leaked into other rows"
    assert_close_gemm(out[keep], reference_gemm(a[keep], b, a_s[keep], b_s))


@pytest.mark.parametrize("m,n,k", [(64, 576, 7168), (256, 2112, 1536)])
def test_graph_capture_and_replay(kernel, m, n, k):
    a, b, a_s, b_s = make_inputs(m, n, k, "cuda", FP8)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        kernel.gemm(a, b, a_s, b_s)  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = kernel.gemm(a, b, a_s, b_s)
    for seed in range(1, 11):
        na, nb, nas, nbs = make_inputs(m, n, k, "cuda", FP8, seed=seed)
        a.copy_(na), b.copy_(nb), a_s.copy_(nas), b_s.copy_(nbs)
        out.fill_(float("nan"))
        graph.replay()
        assert_close_gemm(out, reference_gemm(na, nb, nas, nbs))


def test_two_streams_concurrently(kernel):
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    x = make_inputs(4096, 2112, 7168, "cuda", FP8, seed=1)
    y = make_inputs(64, 576, 7168, "cuda", FP8, seed=2)
    torch.cuda.synchronize()
    with torch.cuda.stream(s1):
        out1 = kernel.gemm(*x)
    with torch.cuda.stream(s2):
        out2 = kernel.gemm(*y)
    torch.cuda.synchronize()
    assert_close_gemm(out1, reference_gemm(*x))
    assert_close_gemm(out2, reference_gemm(*y))


@pytest.mark.parametrize("m,n,k", [(64, 576, 7168), (128, 2112, 7168), (4096, 4096, 7168)])
def test_bitwise_deterministic(kernel, m, n, k):
    a, b, a_s, b_s = make_inputs(m, n, k, "cuda", FP8)
    first = kernel.gemm(a, b, a_s, b_s)
    for _ in range(100):
        assert torch.equal(kernel.gemm(a, b, a_s, b_s), first)


def test_non_default_stream(kernel):
    a, b, a_s, b_s = make_inputs(512, 4096, 512, "cuda", FP8)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = kernel.gemm(a, b, a_s, b_s)
    stream.synchronize()
    assert_close_gemm(out, reference_gemm(a, b, a_s, b_s))


def test_device_guard_keeps_current_device(kernel):
    """One GPU here: the op runs under a guard for the tensors' device and leaves the current one."""
    before = torch.cuda.current_device()
    with torch.cuda.device(0):
        a, b, a_s, b_s = make_inputs(100, 300, 640, "cuda:0", FP8)
        out = kernel.gemm(a, b, a_s, b_s)
    assert torch.cuda.current_device() == before
    assert out.device == a.device
    assert_close_gemm(out, reference_gemm(a, b, a_s, b_s))
