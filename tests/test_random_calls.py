"""Seeded random calls of every entry point, on each device the build serves: shapes drawn from the
edges (M = 0-9 rows, where the CPU runs its dot kernel, ragged N and K around the 16-lane, 64-column
and 128-block boundaries), operand and scale layouts from strides (contiguous, transposed storage,
padded rows, slices of a larger tensor), both FP8 formats where the device takes them, fp32 and UE8M0
scales, every output dtype. Each call is checked against the float64 reference; a narrow output must
be the fp32 output rounded (bit for bit on the CPU, whose kernel is the same for every output format;
within an output ulp where a GPU planner may pick another plan for it); matmul_2d must equal
quantize + gemm bit for bit.
"""

from __future__ import annotations

import random

import pytest
import torch
from _helpers import (
    _random_fp8,
    _random_scales,
    assert_close_gemm,
    ceil_div,
    fp8_dtypes_for,
    reference_gemm,
    reference_grouped,
)

CASES = 400
MS = (0, 1, 2, 3, 4, 5, 7, 8, 9, 13, 33, 130)
NS = (1, 2, 5, 16, 17, 63, 64, 65, 127, 129, 200, 300)
KS = (1, 2, 15, 16, 17, 100, 127, 128, 129, 255, 300, 640)
OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def _layout(t: torch.Tensor, rng: random.Random) -> torch.Tensor:
    """The same values in a random layout."""
    rows, cols = t.shape
    kind = rng.choice(["contiguous", "transposed", "padded", "slice"])
    if kind == "contiguous":
        return t.contiguous()
    if kind == "transposed":
        return t.t().contiguous().t()
    if kind == "padded":
        big = torch.zeros(rows, cols + rng.randint(1, 40), dtype=t.dtype, device=t.device)
    else:
        big = torch.zeros(2 * rows, cols + 3, dtype=t.dtype, device=t.device)[::2, 3:]
    big[:, :cols] = t
    return big[:, :cols]


def _min_ref(k: int) -> float:
    # Below one K block a product of two small FP8 values can be tiny: any nonzero reference will do.
    return 1.0 if k >= 128 else 1e-6


def _dense(kernel, device, rng, gen, fp8_dtypes):
    m, n, k = rng.choice(MS), rng.choice(NS), rng.choice(KS)
    a_dtype, b_dtype = rng.choice(fp8_dtypes), rng.choice(fp8_dtypes)
    k_blocks = ceil_div(k, 128)
    a = _random_fp8((m, k), a_dtype, gen).to(device)
    b = _layout(_random_fp8((n, k), b_dtype, gen).to(device), rng)
    a_scale = _random_scales((m, k_blocks), gen).to(device)
    b_scale = _random_scales((ceil_div(n, 128), k_blocks), gen).to(device)
    if rng.random() < 0.3:  # powers of two, half of them passed as UE8M0
        a_scale, b_scale = (s.abs().log2().ceil().exp2() for s in (a_scale, b_scale))
        a_scale, b_scale = (s.to(torch.float8_e8m0fnu) if rng.random() < 0.5 else s for s in (a_scale, b_scale))
    if m:
        a, a_scale = _layout(a, rng), _layout(a_scale, rng)
    b_scale = _layout(b_scale, rng)
    out_dtype = rng.choice(OUT_DTYPES)
    exact = kernel.gemm(a, b, a_scale, b_scale, out_dtype=torch.float32)
    narrow = kernel.gemm(a, b, a_scale, b_scale, out_dtype=out_dtype)
    if device == "cpu":
        assert torch.equal(narrow, exact.to(out_dtype))
    elif m:
        rounded = exact.to(out_dtype).float()
        eps = torch.finfo(out_dtype).eps
        finite = rounded[rounded.isfinite()]
        atol = eps * finite.abs().max().item() if finite.numel() else 0.0
        torch.testing.assert_close(narrow.float(), rounded, rtol=2 * eps, atol=atol, equal_nan=True)
    if m:
        assert_close_gemm(exact, reference_gemm(a, b, a_scale.float(), b_scale.float()), _min_ref(k))


def _linear(kernel, device, rng, gen, fp8_dtypes):
    m, n, k = max(1, rng.choice(MS)), rng.choice(NS), rng.choice(KS)
    x = torch.randn(m, k, generator=gen).to(device, rng.choice([torch.bfloat16, torch.float16, torch.float32]))
    x = _layout(x, rng)
    b_dtype = rng.choice(fp8_dtypes)
    b = _random_fp8((n, k), b_dtype, gen).to(device)
    b_scale = _random_scales((ceil_div(n, 128), ceil_div(k, 128)), gen).to(device)
    out_dtype = rng.choice(OUT_DTYPES)
    q, s = kernel.quantize_activation(x, dtype=b_dtype)
    assert torch.equal(kernel.matmul_2d(x, b, b_scale, [128, 128], output_dtype=out_dtype),
                       kernel.gemm(q, b, s, b_scale, out_dtype=out_dtype))


def _experts(kernel, device, rng, gen, fp8_dtypes):
    n, k, num_experts = rng.choice(NS), rng.choice(KS), rng.choice([1, 2, 5, 8])
    b_dtype = rng.choice(fp8_dtypes)
    b = torch.stack([_random_fp8((n, k), b_dtype, gen) for _ in range(num_experts)]).to(device)
    b_scale = _random_scales((num_experts, ceil_div(n, 128), ceil_div(k, 128)), gen).to(device)
    entry = rng.choice(["matmul_grouped", "matmul_batched", "masked"])
    if entry == "masked":
        max_m = rng.choice([1, 4, 8, 16])
        a = _random_fp8((num_experts * max_m, k), b_dtype, gen).view(num_experts, max_m, k).to(device)
        a_scale = _random_scales((num_experts, max_m, ceil_div(k, 128)), gen).to(device)
        valid = [rng.randint(0, max_m + 2) for _ in range(num_experts)]  # counts past max_m are clamped
        masked_m = torch.tensor(valid, dtype=torch.int32, device=device)
        out = kernel.grouped_gemm(a, b, a_scale, b_scale, masked_m=masked_m, out_dtype=torch.float32)
        for e, rows in enumerate(valid):
            rows = min(rows, max_m)
            if rows:
                ref = reference_gemm(a[e, :rows], b[e], a_scale[e, :rows], b_scale[e])
                assert_close_gemm(out[e, :rows], ref, _min_ref(k))
        return
    if entry == "matmul_grouped":
        counts = [rng.choice([0, 0, 1, 2, 3, 4, 5, 9, 17]) for _ in range(num_experts)]
        ids = [e for e, c in enumerate(counts) for _ in range(c)]
        x = torch.randn(len(ids) + rng.choice([0, 0, 3]), k, generator=gen).bfloat16().to(device)
        offsets = torch.tensor(counts, device=device).cumsum(0).int()
        out = kernel.matmul_grouped(x, b, b_scale, offsets, None, [128, 128])
    else:
        ids = [rng.choice(range(num_experts + 2)) for _ in range(max(1, rng.choice(MS)))]  # >= E: sentinels
        x = torch.randn(len(ids), k, generator=gen).bfloat16().to(device)
        out = kernel.matmul_batched(x, b, b_scale, torch.tensor(ids, device=device), [128, 128])
    valid = [r for r, e in enumerate(ids) if e < num_experts]
    if valid:
        q, s = kernel.quantize_activation(x, dtype=b_dtype)
        ref = reference_grouped(q[: len(ids)].cpu(), b.cpu(), s[: len(ids)].cpu(), b_scale.cpu(), ids)
        assert_close_gemm(out[valid], ref[valid], _min_ref(k))


@pytest.mark.parametrize("seed", range(CASES))
def test_random_call(kernel, device, seed):
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    entry = rng.choice([_dense, _dense, _dense, _linear, _experts, _experts])
    entry(kernel, device, rng, gen, fp8_dtypes_for(device))
