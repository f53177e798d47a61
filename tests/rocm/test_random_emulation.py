"""Seeded random problems on the emulated gfx942 GEMM (gemm/gemm_launcher.hip): shapes at tile and
block edges, every operand layout `fp8_operand` makes (K-major, M/N-major, padded, byte-strided: read
in place or staged), both FP8 formats (e4m3fn folded), row- or column-major scales, fp32 or UE8M0
scales, every output format, the planner's config or a random listed one (split-K included); and
grouped calls with random routing (contiguous, by row id with sentinels, masked). Each is compared
with the fp64 reference; rows a grouped call must not write keep their canary; every tensor sits
against an unmapped page."""

from __future__ import annotations

import random

import pytest
import torch

import emu_gemm as E

pytestmark = pytest.mark.rocm_emu

CASES = 64
GROUPED_CASES = 24
CANARY = -12345.0  # exactly representable in bf16, fp16 and fp32
MS = (1, 2, 5, 16, 17, 33, 64, 65, 100, 130)
NS = (1, 8, 17, 63, 64, 65, 129, 200)
KS = (1, 15, 16, 100, 128, 129, 208, 256, 300)
LAYOUTS = ("k_major", "mn_major", "mn_padded", "padded", "strided")
FORMATS = (torch.float8_e4m3fnuz, torch.float8_e4m3fn)
OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


@pytest.fixture(scope="module")
def lib(gemm_libs):
    return gemm_libs["gemm"]


@pytest.fixture(scope="module")
def configs(lib):
    return E.configs(lib)


@pytest.mark.parametrize("seed", range(CASES))
def test_random_problem(lib, configs, seed):
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    m, n, k = rng.choice(MS), rng.choice(NS), rng.choice(KS)
    a = E.fp8_operand(g, m, k, rng.choice(FORMATS), rng.choice(LAYOUTS))
    b = E.fp8_operand(g, n, k, rng.choice(FORMATS), rng.choice(LAYOUTS))
    k_blocks = -(-k // E.BLOCK)
    transposed = rng.random() < 0.5
    a_scale = _scales(g, rng, (m, k_blocks), transposed)
    b_scale = _scales(g, rng, (-(-n // E.BLOCK), k_blocks), transposed)
    config = rng.choice([-1] + [c.index for c in configs])  # -1: the planner's choice
    c = torch.full((m, n), float("nan"), dtype=rng.choice(OUT_DTYPES))
    err, _ = E.run(lib, a, b, a_scale, b_scale, c, config)
    assert err == "", err
    ref, bound = E.reference(a, b, a_scale.float(), b_scale.float())
    bad = E.mismatches(c, ref, bound)
    assert not bad.any(), (f"{int(bad.sum())}/{bad.numel()} outputs wrong: m {m} n {n} k {k}, config {config}, "
                           f"a {a.dtype} {a.stride()}, b {b.dtype} {b.stride()}, scales {a_scale.dtype} "
                           f"{b_scale.dtype} {a_scale.stride()}, out {c.dtype}")


def _scales(g, rng, shape, transposed):
    """[..., rows, cols] block scales: random signed fp32, or powers of two (fp32 or UE8M0)."""
    *lead, rows, cols = shape
    kind = rng.choice(["fp32", "fp32", "pow2", "ue8m0"])
    make = E.block_scales if kind == "fp32" else lambda *a: E.pow2_block_scales(*a, exponents=4)
    scales = torch.stack([make(g, rows, cols, transposed) for _ in range(lead[0])]) if lead else \
        make(g, rows, cols, transposed)
    return E.to_ue8m0(scales) if kind == "ue8m0" else scales


@pytest.mark.parametrize("seed", range(GROUPED_CASES))
def test_random_grouped_problem(lib, configs, seed):
    rng = random.Random(1000 + seed)
    g = torch.Generator().manual_seed(1000 + seed)
    groups, n, k = rng.choice([1, 2, 5, 8]), rng.choice(NS), rng.choice(KS)
    counts = [rng.choice([0, 1, 2, 7, 16, 33, 64, 65]) for _ in range(groups)]
    routing = rng.choice(["group_ends", "row_group", "group_rows"])
    k_blocks, transposed = -(-k // E.BLOCK), rng.random() < 0.5
    b_format = rng.choice(FORMATS)
    b = torch.stack([E.fp8_operand(g, n, k, b_format, "k_major") for _ in range(groups)])
    b_scale = _scales(g, rng, (groups, -(-n // E.BLOCK), k_blocks), False)
    if routing == "group_rows":  # the masked layout: [E * max_m] rows, counts past max_m clamped
        max_m = max(1, rng.choice([1, 8, 33]))
        m = groups * max_m
        row_group = torch.tensor([e if r < counts[e] else -1 for e in range(groups) for r in range(max_m)])
        extra = {"group_rows": torch.tensor(counts, dtype=torch.int32)}
    elif routing == "group_ends":
        m = sum(counts) + rng.choice([0, 3])
        ids = [e for e, count in enumerate(counts) for _ in range(count)]
        row_group = torch.tensor(ids + [-1] * (m - len(ids)), dtype=torch.int64)
        extra = {"group_ends": torch.tensor(counts).cumsum(0).to(torch.int32)}
    else:
        m = max(1, sum(counts))
        row_group = torch.tensor([rng.choice(range(-1, groups + 2)) for _ in range(m)], dtype=torch.int64)
        extra = {"row_group": row_group.clone()}
    a = E.fp8_operand(g, m, k, rng.choice(FORMATS), rng.choice(LAYOUTS))
    a_scale = _scales(g, rng, (m, k_blocks), transposed)
    c = torch.full((m, n), CANARY, dtype=rng.choice(OUT_DTYPES))
    config = rng.choice([-1] + [c.index for c in configs if c.split_k == 1])  # grouped GEMMs run unsplit
    err, _ = E.run(lib, a, b, a_scale, b_scale, c, config, **extra)
    assert err == "", err
    for e in range(groups):
        rows = (row_group == e).nonzero().flatten()
        if rows.numel():
            ref, bound = E.reference(a[rows], b[e], a_scale[rows].float(), b_scale[e].float())
            bad = E.mismatches(c[rows], ref, bound)
            assert not bad.any(), f"group {e} ({routing}, config {config}): {int(bad.sum())} of {bad.numel()} wrong"
    untouched = c[(row_group < 0) | (row_group >= groups)]
    assert (untouched == CANARY).all(), f"a row the call must not write was written ({routing})"
