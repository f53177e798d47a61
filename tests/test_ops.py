"""The raw ops of torch_binding.h: UE8M0 scales, the activation quantizer and the grouped GEMM.

Every case runs on fresh random data with a distinct scale per block (and per expert) against an
independent reference: the float64 product of tests/_helpers.py for the GEMMs (per expert for the
grouped op), and reference_quantize_activation for `quantize`, which must match bit for bit.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _helpers import (
    SCALE_BLOCK_K,
    UE8M0,
    assert_close_gemm,
    ceil_div,
    fp8_bits,
    fp8_dtypes_for,
    make_inputs,
    reference_gemm,
    reference_quantize_activation,
)

IN_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
# Rows of an output that the op must not write: any value a kernel would not produce by accident.
CANARY = -12345.0


def _on_cuda(device) -> bool:
    """An NVIDIA device (ROCm devices are 'cuda' to torch too)."""
    return str(device).startswith("cuda") and torch.version.hip is None


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The bytes of a tensor on the CPU, to compare results bit for bit (NaN included)."""
    return t.flatten().contiguous().view(torch.uint8).cpu()


def _pow2_scales(shape, gen: torch.Generator, low: int = -9, high: int = -5) -> torch.Tensor:
    """Distinct positive powers of two per block (UE8M0 has no sign)."""
    return torch.exp2(torch.randint(low, high + 1, shape, generator=gen).float())


def run_quantize(kernel, x, fp8_dtype, scale_dtype=torch.float32, pow2=False, static=None, m_major=False):
    m, k = x.shape
    k_blocks = ceil_div(k, SCALE_BLOCK_K)
    q = torch.empty(m, k, dtype=fp8_dtype, device=x.device)
    if m_major:
        scale = torch.empty(k_blocks, m, dtype=scale_dtype, device=x.device).t()
    else:
        scale = torch.empty(m, k_blocks, dtype=scale_dtype, device=x.device)
    kernel.ops.quantize(q, scale, x, static, pow2)
    return q, scale


def assert_quantize_matches(kernel, x, fp8_dtype, scale_dtype=torch.float32, pow2=False, static=None, m_major=False):
    q, scale = run_quantize(kernel, x, fp8_dtype, scale_dtype, pow2, static, m_major)
    q_ref, scale_ref = reference_quantize_activation(x, fp8_dtype, pow2, static, scale_dtype)
    assert torch.equal(_bits(scale), _bits(scale_ref)), "scales differ from the reference"
    assert torch.equal(fp8_bits(q), fp8_bits(q_ref)), "FP8 values differ from the reference"


def _activations(m, k, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    # Magnitudes spread over many binades, so that groups get very different scales.
    x = torch.randn(m, k, generator=gen) * torch.exp2(torch.randint(-12, 12, (m, 1), generator=gen).float())
    return x.to(dtype)


QUANT_SHAPES = [(7, 300), (1, 128), (0, 256), (33, 1)]
QUANT_CI_SHAPES = {(7, 300), (1, 128), (0, 256)}


@pytest.mark.parametrize(
    "m,k", [pytest.param(*s, marks=[pytest.mark.kernels_ci] if s in QUANT_CI_SHAPES else []) for s in QUANT_SHAPES]
)
@pytest.mark.parametrize("x_dtype", IN_DTYPES, ids=str)
@pytest.mark.parametrize("scale_dtype,pow2", [(torch.float32, False), (torch.float32, True), (UE8M0, True)], ids=str)
@pytest.mark.parametrize("m_major", [False, True], ids=["row_major", "m_major"])
def test_quantize_matches_reference(kernel, device, m, k, x_dtype, scale_dtype, pow2, m_major):
    for fp8_dtype in fp8_dtypes_for(device):
        x = _activations(m, k, x_dtype, seed=m + k).to(device)
        assert_quantize_matches(kernel, x, fp8_dtype, scale_dtype=scale_dtype, pow2=pow2, m_major=m_major)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("x_dtype", IN_DTYPES, ids=str)
def test_quantize_static_scale(kernel, device, x_dtype):
    x = _activations(9, 260, x_dtype, seed=5).to(device)
    for fp8_dtype in fp8_dtypes_for(device):
        static = torch.tensor([0.37], device=device)
        assert_quantize_matches(kernel, x, fp8_dtype, static=static)
        # A 0-dim tensor (transformers' activation_scale) and a power of two stored as UE8M0.
        assert_quantize_matches(kernel, x, fp8_dtype, static=torch.tensor(0.25, device=device), scale_dtype=UE8M0)
        # A static scale UE8M0 cannot hold, or pow2 asked for, is rounded up as a dynamic one is.
        assert_quantize_matches(kernel, x, fp8_dtype, static=torch.tensor(0.3, device=device), scale_dtype=UE8M0)
        assert_quantize_matches(kernel, x, fp8_dtype, static=torch.tensor([0.3], device=device), pow2=True)


@pytest.mark.kernels_ci
def test_quantize_rounds_every_code(kernel, device):
    # With a static scale of 1 the quantizer is saturate + round: every FP8 value, every midpoint
    # between neighbours (ties to even), one fp32 ULP either side of it, beyond max, inf, NaN and -0.
    for fp8_dtype in fp8_dtypes_for(device):
        codes = torch.arange(256, dtype=torch.uint8).view(fp8_dtype).float()
        values = codes[torch.isfinite(codes)].unique()
        mid = (values[1:] + values[:-1]) / 2
        special = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e30, -1e30, 1e-30, -1e-30])
        x = torch.cat([values, mid, mid.nextafter(mid + 1), mid.nextafter(mid - 1), special])
        x = F.pad(x, (0, ceil_div(x.numel(), SCALE_BLOCK_K) * SCALE_BLOCK_K - x.numel())).view(-1, SCALE_BLOCK_K)
        assert_quantize_matches(kernel, x.to(device), fp8_dtype, static=torch.tensor([1.0], device=device))


@pytest.mark.kernels_ci
@pytest.mark.parametrize("scale_dtype,pow2", [(torch.float32, False), (torch.float32, True), (UE8M0, True)], ids=str)
def test_quantize_special_groups(kernel, device, scale_dtype, pow2):
    # Per row: all zeros (scale 1), fp32 subnormals (a subnormal scale; UE8M0's floor), the largest
    # finite values (a power-of-two scale past fp32's range), a NaN and an inf among normal values.
    x = torch.randn(6, 256, generator=torch.Generator().manual_seed(3))
    x[0] = 0.0
    x[1] = x[1] * 1e-40
    x[2] = torch.finfo(torch.float32).max * torch.sign(x[2])
    x[3, 5] = float("nan")
    x[4, 200] = float("inf")
    x[5, :128] = 2.0**-130
    for fp8_dtype in fp8_dtypes_for(device):
        assert_quantize_matches(kernel, x.to(device), fp8_dtype, scale_dtype=scale_dtype, pow2=pow2)


@pytest.mark.kernels_ci
def test_quantize_padded_rows_and_strided_x(kernel, device):
    fp8_dtype = fp8_dtypes_for(device)[0]
    x = _activations(5, 200, torch.bfloat16, seed=9).to(device)
    # x with a padded row stride is read in place; a column-major x is copied, then read.
    for view in (F.pad(x, (0, 56))[:, :200], x.t().contiguous().t()):
        q = torch.zeros(5, 256, dtype=torch.uint8, device=device)
        scale = torch.empty(5, 2, device=device)
        kernel.ops.quantize(q[:, :200].view(fp8_dtype), scale, view, None, False)
        q_ref, scale_ref = reference_quantize_activation(x.cpu(), fp8_dtype)
        assert torch.equal(q[:, :200].cpu(), q_ref.view(torch.uint8)) and torch.equal(scale.cpu(), scale_ref)
        assert not q[:, 200:].any(), "the row padding of q was written"


# ---------------------------------------------------------------------------------------------
# UE8M0 scales in the GEMMs: read as they are, bit for bit the fp32 result of the same powers of two.


@pytest.mark.kernels_ci
@pytest.mark.parametrize("which", ["a_scale", "b_scale", "both"])
@pytest.mark.parametrize("m_major", [False, True], ids=["row_major", "m_major"])
def test_gemm_ue8m0_equals_fp32_pow2(kernel, device, which, m_major):
    m, n, k = 37, 200, 300
    a, b, _, _ = make_inputs(m, n, k, device=device, fp8_dtype=fp8_dtypes_for(device)[0], seed=11)
    gen = torch.Generator().manual_seed(12)
    a_scale = _pow2_scales((m, ceil_div(k, 128)), gen).to(device)
    if m_major:
        a_scale = a_scale.t().contiguous().t()
    b_scale = _pow2_scales((ceil_div(n, 128), ceil_div(k, 128)), gen).to(device)
    as_e8 = a_scale.to(UE8M0) if which in ("a_scale", "both") else a_scale
    bs_e8 = b_scale.to(UE8M0) if which in ("b_scale", "both") else b_scale
    out_fp32 = torch.empty(m, n, dtype=torch.float32, device=device)
    out_e8 = torch.empty_like(out_fp32)
    kernel.ops.gemm(out_fp32, a, b, a_scale, b_scale)
    kernel.ops.gemm(out_e8, a, b, as_e8, bs_e8)
    assert torch.equal(_bits(out_e8), _bits(out_fp32))
    assert_close_gemm(out_e8, reference_gemm(a, b, a_scale, b_scale))


@pytest.mark.kernels_ci
def test_ue8m0_extremes_decode(kernel, device):
    # Byte 0 is 2^-127 (an fp32 subnormal), 254 is 2^127 and 255 is NaN: a 1 x 1 x 1 product shows each.
    fp8_dtype = fp8_dtypes_for(device)[0]
    a = torch.ones(3, 1, dtype=fp8_dtype, device=device)
    b = torch.ones(1, 1, dtype=fp8_dtype, device=device)
    a_scale = torch.tensor([[0], [254], [255]], dtype=torch.uint8, device=device).view(UE8M0)
    b_scale = torch.tensor([[127]], dtype=torch.uint8, device=device).view(UE8M0)
    out = torch.empty(3, 1, dtype=torch.float32, device=device)
    kernel.ops.gemm(out, a, b, a_scale, b_scale)
    expected = torch.tensor([[2.0**-127], [2.0**127], [float("nan")]])
    torch.testing.assert_close(out.cpu(), expected, rtol=0, atol=0, equal_nan=True)


# ---------------------------------------------------------------------------------------------
# Grouped GEMM against a float64 reference per expert.

N_MOE, K_MOE = 192, 192  # ragged in both: Qwen3 TP shards


def make_experts(e, n, k, device, fp8_dtype, seed, pow2=False):
    """w [E, N, K] and ws [E, ceil(N/128), ceil(K/128)], distinct random scales per block and expert."""
    ws, bs = [], []
    gen = torch.Generator().manual_seed(seed + 1000)
    for g in range(e):
        _, b, _, b_scale = make_inputs(1, n, k, fp8_dtype=fp8_dtype, seed=seed + g)
        ws.append(b)
        bs.append(_pow2_scales(b_scale.shape, gen) if pow2 else b_scale)
    return torch.stack(ws).to(device), torch.stack(bs).to(device)


def grouped_reference(a, a_scale, w, ws, rows_of_expert):
    """float64 [M, N] with NaN in rows no expert owns."""
    ref = torch.full((a.shape[0], w.shape[1]), float("nan"), dtype=torch.float64)
    a, a_scale, w, ws = a.cpu(), a_scale.cpu(), w.cpu(), ws.cpu()
    for g, rows in enumerate(rows_of_expert):
        if len(rows):
            ref[rows] = reference_gemm(a[rows], w[g], a_scale[rows], ws[g])
    return ref


def run_grouped(kernel, a, w, a_scale, ws, ends=None, ids=None, out_dtype=torch.bfloat16):
    out = torch.full((a.shape[0], w.shape[1]), CANARY, dtype=out_dtype, device=a.device)
    kernel.ops.grouped_gemm(out, a, w, a_scale, ws, ends, ids)
    return out


def check_grouped(out, ref):
    owned = ~torch.isnan(ref[:, 0])
    assert_close_gemm(out.cpu()[owned], ref[owned])
    assert torch.all(out.cpu()[~owned] == CANARY), "rows no expert owns were written"


def contiguous_case(kernel, device, counts, tail=0, seed=0, n=N_MOE, k=K_MOE, pow2=False):
    """Rows sorted by expert (counts[g] rows each) then `tail` rows past the last offset."""
    fp8_dtype = fp8_dtypes_for(device)[0]
    m = sum(counts) + tail
    a, _, a_scale, _ = make_inputs(m, n, k, device=device, fp8_dtype=fp8_dtype, seed=seed)
    if pow2:
        a_scale = _pow2_scales(a_scale.shape, torch.Generator().manual_seed(seed)).to(device)
    w, ws = make_experts(len(counts), n, k, device, fp8_dtype, seed, pow2)
    ends = torch.tensor(counts, dtype=torch.int64).cumsum(0).to(torch.int32)
    starts = [0] + ends.tolist()[:-1]
    rows = [list(range(s, s + c)) for s, c in zip(starts, counts)]
    return a, a_scale, w, ws, ends.to(device), rows


GROUPED_COUNTS = {
    "one_expert": [1000],
    "counts_1_7_63_64_65_1000_and_empty": [1, 0, 7, 63, 0, 64, 65, 1000],
    "one_expert_holds_all": [0, 0, 0, 300, 0, 0, 0, 0],
    "all_empty": [0, 0, 0],
}


@pytest.mark.parametrize(
    "counts",
    [pytest.param(c, id=name, marks=[] if name == "counts_1_7_63_64_65_1000_and_empty" else [pytest.mark.kernels_ci])
     for name, c in GROUPED_COUNTS.items()],
)
def test_grouped_contiguous(kernel, device, counts):
    a, a_scale, w, ws, ends, rows = contiguous_case(kernel, device, counts, tail=5, seed=len(counts))
    out = run_grouped(kernel, a, w, a_scale, ws, ends=ends)
    if sum(counts) == 0:
        assert torch.all(out.cpu() == CANARY)
        return
    check_grouped(out, grouped_reference(a, a_scale, w, ws, rows))


@pytest.mark.kernels_ci
def test_grouped_256_experts_skewed(kernel, device):
    # DeepSeek-V3's expert count, tokens routed by a skewed (Zipf-like) distribution: most experts
    # get a few rows, many none.
    gen = torch.Generator().manual_seed(256)
    probs = 1.0 / torch.arange(1, 257).float() ** 1.2
    counts = torch.bincount(torch.multinomial(probs, 600, replacement=True, generator=gen), minlength=256)
    counts = counts[torch.randperm(256, generator=gen)].tolist()
    a, a_scale, w, ws, ends, rows = contiguous_case(kernel, device, counts, tail=3, seed=4, n=136, k=160)
    assert counts.count(0) > 50
    check_grouped(run_grouped(kernel, a, w, a_scale, ws, ends=ends), grouped_reference(a, a_scale, w, ws, rows))


@pytest.mark.kernels_ci
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32], ids=str)
def test_grouped_by_row_id_with_sentinels(kernel, device, out_dtype):
    e, m = 8, 300
    fp8_dtype = fp8_dtypes_for(device)[0]
    gen = torch.Generator().manual_seed(21)
    # Unsorted ids, expert 3 empty, and sentinels: E, far past E and negative.
    ids = torch.randint(0, e, (m,), generator=gen)
    ids[ids == 3] = 4
    ids[::17] = e
    ids[5::23] = 1000
    ids[7::31] = -1
    a, _, a_scale, _ = make_inputs(m, N_MOE, K_MOE, device=device, fp8_dtype=fp8_dtype, seed=22)
    w, ws = make_experts(e, N_MOE, K_MOE, device, fp8_dtype, seed=23)
    rows = [torch.nonzero(ids == g).flatten().tolist() for g in range(e)]
    out = run_grouped(kernel, a, w, a_scale, ws, ids=ids.to(device), out_dtype=out_dtype)
    check_grouped(out, grouped_reference(a, a_scale, w, ws, rows))


@pytest.mark.kernels_ci
def test_grouped_equals_dense_per_expert(kernel, device):
    # The grouped path is the dense path with another B per group: bit for bit the dense op's output.
    counts = [13, 0, 64, 130]
    a, a_scale, w, ws, ends, rows = contiguous_case(kernel, device, counts, seed=31)
    out = run_grouped(kernel, a, w, a_scale, ws, ends=ends, out_dtype=torch.float32)
    for g, r in enumerate(rows):
        if r:
            dense = torch.empty(len(r), w.shape[1], dtype=torch.float32, device=device)
            kernel.ops.gemm(dense, a[r[0] : r[-1] + 1], w[g], a_scale[r[0] : r[-1] + 1], ws[g])
            assert torch.equal(out[r[0] : r[-1] + 1], dense), f"expert {g} differs from the dense op"


@pytest.mark.kernels_ci
def test_grouped_swapped_expert_scales_fail(kernel, device):
    counts = [40, 50, 30]
    a, a_scale, w, ws, ends, rows = contiguous_case(kernel, device, counts, seed=41)
    ref = grouped_reference(a, a_scale, w, ws, rows)
    check_grouped(run_grouped(kernel, a, w, a_scale, ws, ends=ends), ref)
    swapped = ws[[1, 0, 2]].contiguous()
    with pytest.raises(AssertionError):
        check_grouped(run_grouped(kernel, a, w, a_scale, swapped, ends=ends), ref)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("which", ["a_scale", "b_scale", "both"])
# Few rows a group (64-row tiles on CUDA, scales gathered) and more (128-row tiles, A scales loaded by TMA from
# segments starting at rows that are not multiples of 4).
@pytest.mark.parametrize("counts", [[20, 0, 70, 9], [300, 5, 211, 1]], ids=["small_groups", "large_groups"])
def test_grouped_ue8m0_equals_fp32_pow2(kernel, device, which, counts):
    a, a_scale, w, ws, ends, rows = contiguous_case(kernel, device, counts, tail=4, seed=51, pow2=True)
    as_e8 = a_scale.to(UE8M0) if which in ("a_scale", "both") else a_scale
    ws_e8 = ws.to(UE8M0) if which in ("b_scale", "both") else ws
    ids = torch.full((a.shape[0],), len(counts), dtype=torch.int64)  # the tail rows: sentinels
    for g, r in enumerate(rows):
        ids[r] = g
    ref = grouped_reference(a, a_scale, w, ws, rows)
    for routing in ({"ends": ends}, {"ids": ids.to(device)}):
        out_fp32 = run_grouped(kernel, a, w, a_scale, ws, **routing, out_dtype=torch.float32)
        out_e8 = run_grouped(kernel, a, w, as_e8, ws_e8, **routing, out_dtype=torch.float32)
        assert torch.equal(_bits(out_e8), _bits(out_fp32))
        check_grouped(out_e8, ref)


@pytest.mark.kernels_ci
def test_grouped_strided_weights(kernel, device):
    # w N-major per expert and ws transposed per expert: layouts read from strides, not assumed.
    counts = [30, 45]
    a, a_scale, w, ws, ends, rows = contiguous_case(kernel, device, counts, seed=61, n=200, k=300)
    w_n_major = w.transpose(1, 2).contiguous().transpose(1, 2)
    ws_t = ws.transpose(1, 2).contiguous().transpose(1, 2)
    if _on_cuda(device):  # documented: CUDA's grouped GEMM takes K-major experts n * K apart
        with pytest.raises(RuntimeError, match="b must hold its groups n \\* b_stride_n apart"):
            run_grouped(kernel, a, w_n_major, a_scale, ws_t, ends=ends)
        return
    out = run_grouped(kernel, a, w_n_major, a_scale, ws_t, ends=ends)
    check_grouped(out, grouped_reference(a, a_scale, w, ws, rows))


@pytest.mark.kernels_ci
def test_grouped_deterministic_across_threads(kernel, device):
    counts = [100, 3, 0, 250]
    a, a_scale, w, ws, ends, _ = contiguous_case(kernel, device, counts, seed=71)
    first = run_grouped(kernel, a, w, a_scale, ws, ends=ends)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        single = run_grouped(kernel, a, w, a_scale, ws, ends=ends)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(first, run_grouped(kernel, a, w, a_scale, ws, ends=ends))
    assert torch.equal(first, single)


@pytest.mark.slow
def test_grouped_large_rows_across_chunks(kernel, device):
    # More rows than one chunk decodes, split over experts so that chunks hold pieces of several.
    counts = [700, 0, 900, 1, 650]
    a, a_scale, w, ws, ends, rows = contiguous_case(kernel, device, counts, tail=2, seed=81, n=256, k=512)
    check_grouped(run_grouped(kernel, a, w, a_scale, ws, ends=ends), grouped_reference(a, a_scale, w, ws, rows))


# ---------------------------------------------------------------------------------------------
# Bad inputs raise the documented exception, naming the argument, the expected and the actual value.


def _raises(exc, *fragments):
    class _Check:
        def __enter__(self):
            self.ctx = pytest.raises(exc)
            self.info = self.ctx.__enter__()

        def __exit__(self, *exc_info):
            suppressed = self.ctx.__exit__(*exc_info)
            assert suppressed, f"expected {exc.__name__}, got {exc_info[0].__name__}: {exc_info[1]}"
            message = str(self.info.value)
            for fragment in fragments:
                assert fragment in message, f"{fragment!r} not in {message!r}"
            return suppressed

    return _Check()


@pytest.fixture
def moe(kernel, device):
    a, a_scale, w, ws, ends, _ = contiguous_case(kernel, device, [3, 4, 5], tail=2, seed=91)
    out = torch.empty(a.shape[0], w.shape[1], dtype=torch.bfloat16, device=device)
    return out, a, w, a_scale, ws, ends


@pytest.mark.kernels_ci
@pytest.mark.parametrize(
    "ends,fragment",
    [([3, 2, 12], "group_ends must be non-decreasing and >= 0, got group_ends[1] = 2 after 3"),
     ([-1, 7, 12], "got group_ends[0] = -1 after 0"),
     ([3, 7, 15], "group_ends must be <= M = 14, got group_ends[2] = 15")],
    ids=["not_monotone", "negative", "past_m"],
)
def test_grouped_bad_offsets(kernel, device, moe, ends, fragment):
    if device != "cpu":
        pytest.skip("GPU kernels read offsets on the device and clamp them (no host synchronization)")
    out, a, w, a_scale, ws, _ = moe
    with _raises(RuntimeError, "grouped_gemm", fragment):
        kernel.ops.grouped_gemm(out, a, w, a_scale, ws, torch.tensor(ends, dtype=torch.int32), None)


@pytest.mark.kernels_ci
def test_grouped_bad_arguments(kernel, device, moe):
    out, a, w, a_scale, ws, ends = moe
    op = kernel.ops.grouped_gemm
    with _raises(TypeError, "group_ends must be torch.int32, got torch.int64"):
        op(out, a, w, a_scale, ws, ends.long(), None)
    with _raises(TypeError, "row_group must be torch.int64, got torch.int32"):
        op(out, a, w, a_scale, ws, None, torch.zeros(a.shape[0], dtype=torch.int32, device=device))
    with _raises(ValueError, "exactly one of group_ends, row_group and group_rows must be given, got 0"):
        op(out, a, w, a_scale, ws, None, None)
    with _raises(ValueError, "exactly one of group_ends, row_group and group_rows must be given, got 2"):
        op(out, a, w, a_scale, ws, ends, torch.zeros(a.shape[0], dtype=torch.int64, device=device))
    counts = torch.ones(3, dtype=torch.int32, device=device)
    with _raises(TypeError, "group_rows must be torch.int32, got torch.int64"):
        op(out, a, w, a_scale, ws, None, None, counts.long())
    with _raises(ValueError, "group_rows must have shape [E] = [3]", "[2]"):
        op(out, a, w, a_scale, ws, None, None, counts[:2])
    with _raises(ValueError, "with group_rows, a must hold E blocks of max_m rows (M a multiple of E = 3), got M = 14"):
        op(out, a, w, a_scale, ws, None, None, counts)
    with _raises(ValueError, "group_ends must have shape [E] = [3]", "[2]"):
        op(out, a, w, a_scale, ws, ends[:2], None)
    with _raises(ValueError, "row_group must have shape [M] = [14]", "[13]"):
        op(out, a, w, a_scale, ws, None, torch.zeros(13, dtype=torch.int64, device=device))
    with _raises(ValueError, "b_scale must have shape [E, ceil(N/128), ceil(K/128)] = [3, 2, 2]", "[2, 2, 2]"):
        op(out, a, w, a_scale, ws[:2], ends, None)
    with _raises(ValueError, "b_scale", "= [3, 2, 2]", "[3, 1, 2]"):
        op(out, a, w, a_scale, ws[:, :1], ends, None)
    with _raises(ValueError, "b must be a 3-D tensor [E, N, K]", "[192, 192]"):
        op(out, a, w[0], a_scale, ws, ends, None)
    with _raises(ValueError, "b must have shape [E, N, K] with K = a.shape[1] = 192", "[3, 192, 191]"):
        op(out, a, w[:, :, :191], a_scale, ws, ends, None)
    with _raises(TypeError, "b_scale must be torch.float32 or torch.float8_e8m0fnu, got torch.float16"):
        op(out, a, w, a_scale, ws.half(), ends, None)
    with _raises(ValueError, "E (b.shape[0]) must be >= 1, got 0"):
        op(out, a, w[:0], a_scale, ws[:0], ends[:0], None)
    if device != "cpu":  # a second device; `meta` tensors would dispatch to the fake implementation
        with _raises(ValueError, "all tensors must be on one device", "group_ends on", "got cpu"):
            op(out, a, w, a_scale, ws, ends.cpu(), None)


@pytest.mark.kernels_ci
@pytest.mark.kernels_ci
@pytest.mark.parametrize("pow2", [False, True])
def test_linear_equals_quantize_then_gemm(kernel, device, pow2):
    fp8 = fp8_dtypes_for(device)[0]
    _, b, _, b_scale = make_inputs(1, 200, 300, device=device, fp8_dtype=fp8, seed=5)
    x = torch.randn(37, 320, device=device, dtype=torch.bfloat16)[:, :300]  # a padded row stride
    out = torch.empty(37, 200, dtype=torch.bfloat16, device=device)
    kernel.ops.linear(out, x, b, b_scale, None, pow2)
    a, a_scale = kernel.quantize_activation(x, dtype=fp8, pow2_scale=pow2)
    assert torch.equal(out, kernel.gemm(a, b, a_scale, b_scale))


@pytest.mark.kernels_ci
def test_linear_bad_arguments(kernel, device):
    fp8 = fp8_dtypes_for(device)[0]
    _, b, _, b_scale = make_inputs(1, 200, 300, device=device, fp8_dtype=fp8, seed=6)
    x = torch.randn(4, 300, device=device)
    out = torch.empty(4, 200, dtype=torch.bfloat16, device=device)
    op = kernel.ops.linear
    with _raises(TypeError, "linear: x must be torch.bfloat16, torch.float16 or torch.float32, got torch.float64"):
        op(out, x.double(), b, b_scale, None, False)
    with _raises(ValueError, "linear: x must have shape [M, K] with K = b.shape[1] = 300", "[4, 299]"):
        op(out, x[:, :299], b, b_scale, None, False)
    with _raises(TypeError, "linear: b must be torch.float8_e4m3fn"):
        op(out, x, b.bfloat16(), b_scale, None, False)
    with _raises(ValueError, "linear: b_scale must have shape [ceil(N/128), ceil(K/128)] = [2, 3]", "[2, 2]"):
        op(out, x, b, b_scale[:, :2], None, False)
    with _raises(ValueError, "linear: out must have shape [M, N] = [4, 200]", "[4, 199]"):
        op(out[:, :199], x, b, b_scale, None, False)
    with _raises(TypeError, "linear: static_scale must be torch.float32, got torch.float64"):
        op(out, x, b, b_scale, torch.ones(1, dtype=torch.float64, device=device), False)


def test_quantize_bad_arguments(kernel, device):
    fp8_dtype = fp8_dtypes_for(device)[0]
    x = torch.randn(4, 200, device=device)
    q = torch.empty(4, 200, dtype=fp8_dtype, device=device)
    scale = torch.empty(4, 2, device=device)
    op = kernel.ops.quantize
    with _raises(TypeError, "x must be torch.bfloat16, torch.float16 or torch.float32, got torch.float64"):
        op(q, scale, x.double(), None, False)
    with _raises(TypeError, "q must be torch.float8_e4m3fn or torch.float8_e4m3fnuz, got torch.bfloat16"):
        op(q.bfloat16(), scale, x, None, False)
    with _raises(TypeError, "scale must be torch.float32 or torch.float8_e8m0fnu, got torch.float16"):
        op(q, scale.half(), x, None, False)
    with _raises(ValueError, "scale must have shape [M, ceil(K/128)] = [4, 2]", "[4, 1]"):
        op(q, scale[:, :1], x, None, False)
    with _raises(ValueError, "q must have shape [M, K] = [4, 200]", "[4, 199]"):
        op(q[:, :199], scale, x, None, False)
    with _raises(ValueError, "q must be row-major"):
        op(q.t().contiguous().t(), scale, x, None, False)
    with _raises(ValueError, "scale must be row-major or M-major"):
        op(q, torch.empty(4, 4, device=device)[:, ::2], x, None, False)
    with _raises(TypeError, "static_scale must be torch.float32, got torch.float64"):
        op(q, scale, x, torch.ones(1, dtype=torch.float64, device=device), False)
    with _raises(ValueError, "static_scale must have one element, got shape [2]"):
        op(q, scale, x, torch.ones(2, device=device), False)
    if device != "cpu":
        with _raises(ValueError, "all tensors must be on one device", "scale on", "got cpu"):
            op(q, scale.cpu(), x, None, False)
