"""Grouped FP8 GEMM for MoE experts on every backend: transformers' matmul_grouped / matmul_batched
(bf16 input, quantized on the way in) and grouped_gemm on FP8 inputs (contiguous, by expert id, masked).

Every result is checked against a float64 per-expert reference of the same quantized computation;
rows a call must leave alone (past offsets[-1], sentinel ids, past masked_m) are checked with a NaN
canary in a caller-given `out`.
"""

import random

import pytest
import torch
from _helpers import (
    assert_close_gemm,
    fp8_dtypes_for,
    make_moe_weights,
    reference_gemm,
    reference_grouped,
    reference_quantize_activation,
)

BLOCK = [128, 128]
# Rows per expert: empty experts, one row, counts around a 64-row tile, one expert with everything.
COUNTS = {
    "one_expert": [7],
    "mixed": [1, 0, 7, 63, 64, 65, 0, 3],
    "all_in_one": [0, 0, 0, 50, 0, 0, 0, 0],
    "large": [1000, 0, 24],
    "e256": [random.Random(0).choice([0, 0, 1, 2, 3]) for _ in range(256)],
}
# Qwen3 TP shard (N = 192, K = 1536 / 8) and a ragged K tail.
NK = [(192, 192), (256, 300)]


def _rows(counts):
    return [e for e, c in enumerate(counts) for _ in range(c)]


def _activation(m, k, device, dtype=torch.bfloat16, seed=1):
    return (torch.randn(m, k, generator=torch.Generator().manual_seed(seed)) * 4).to(dtype).to(device)


def _expected(x, b, b_scale, row_expert):
    q, s = reference_quantize_activation(x, b.dtype)
    return reference_grouped(q, b, s, b_scale, row_expert)


def _offsets(counts, device, dtype=torch.int32):
    return torch.tensor(counts, dtype=torch.int64).cumsum(0).to(dtype).to(device)


def _assert_rows(out, ref, rows):
    rows = torch.tensor(rows, dtype=torch.long)
    assert_close_gemm(out.cpu()[rows], ref[rows], min_ref_abs_max=0.5)


# Every routing on the first shape, the small ones on the second too.
GROUPED_CASES = [(case, nk) for case in COUNTS for nk in NK if nk == NK[0] or case not in ("large", "e256")]


@pytest.mark.parametrize("case,nk", GROUPED_CASES, ids=str)
def test_matmul_grouped_matches_reference(kernel, device, case, nk):
    counts, (n, k) = COUNTS[case], nk
    num_experts = len(counts)
    b, b_scale = make_moe_weights(num_experts, n, k, device=device, fp8_dtype=fp8_dtypes_for(device)[0], seed=2)
    row_expert = _rows(counts)
    x = _activation(len(row_expert), k, device)
    out = kernel.matmul_grouped(x, b, b_scale, offsets=_offsets(counts, device), tokens_per_expert=None, block_size=BLOCK)
    assert out.shape == (len(row_expert), n) and out.dtype == x.dtype
    if row_expert:
        _assert_rows(out, _expected(x, b, b_scale, row_expert), range(len(row_expert)))


@pytest.mark.kernels_ci
def test_matmul_grouped_fast(kernel, device):
    counts = COUNTS["mixed"]
    b, b_scale = make_moe_weights(8, 192, 192, device=device, fp8_dtype=fp8_dtypes_for(device)[0], seed=3)
    x = _activation(sum(counts), 192, device, seed=4)
    out = kernel.matmul_grouped(x, b, b_scale, offsets=_offsets(counts, device), tokens_per_expert=None, block_size=BLOCK)
    ref = _expected(x, b, b_scale, _rows(counts))
    _assert_rows(out, ref, range(sum(counts)))
    # Two experts' scales swapped: the rows of those experts must come out wrong (the test can fail).
    swapped = b_scale.clone()
    swapped[[3, 5]] = b_scale[[5, 3]]
    bad = kernel.matmul_grouped(x, b, swapped, offsets=_offsets(counts, device), tokens_per_expert=None, block_size=BLOCK)
    with pytest.raises(AssertionError):
        _assert_rows(bad, ref, range(sum(counts)))
    # Deterministic: the same call gives the same bits.
    again = kernel.matmul_grouped(x, b, b_scale, offsets=_offsets(counts, device), tokens_per_expert=None, block_size=BLOCK)
    assert torch.equal(out, again)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("count_dtype", [torch.float32, torch.int32, torch.int64], ids=str)
def test_tokens_per_expert_instead_of_offsets(kernel, device, count_dtype):
    # transformers passes float32 counts on the CPU (histc) and int32 on CUDA.
    counts = [3, 0, 5, 2]
    b, b_scale = make_moe_weights(4, 256, 256, device=device, fp8_dtype=fp8_dtypes_for(device)[0], seed=5)
    x = _activation(sum(counts) + 3, 256, device)  # 3 rows past the last expert
    by_offsets = kernel.matmul_grouped(x, b, b_scale, offsets=_offsets(counts, device), tokens_per_expert=None, block_size=BLOCK)
    tokens = torch.tensor(counts, dtype=count_dtype, device=device)
    by_counts = kernel.matmul_grouped(x, b, b_scale, None, tokens, BLOCK)
    assert torch.equal(by_counts[: sum(counts)], by_offsets[: sum(counts)])
    _assert_rows(by_counts, _expected(x, b, b_scale, _rows(counts) + [99] * 3), range(sum(counts)))


@pytest.mark.kernels_ci
def test_matmul_batched_with_sentinels(kernel, device):
    num_experts, m = 8, 41
    b, b_scale = make_moe_weights(num_experts, 192, 300, device=device, fp8_dtype=fp8_dtypes_for(device)[0], seed=6)
    rng = random.Random(1)
    ids = [rng.randrange(num_experts) for _ in range(m)]
    for r in (0, 7, 40):
        ids[r] = num_experts + r  # expert-parallel sentinels: ids >= E
    x = _activation(m, 300, device, seed=7)
    expert_ids = torch.tensor(ids, dtype=torch.int64, device=device)
    out = kernel.matmul_batched(x, b, b_scale, expert_ids=expert_ids, block_size=BLOCK)
    ref = _expected(x, b, b_scale, ids)
    valid = [r for r in range(m) if ids[r] < num_experts]
    _assert_rows(out, ref, valid)
    assert torch.equal(kernel.matmul_batched(x, b, b_scale, expert_ids.int(), BLOCK)[valid], out[valid])


@pytest.mark.kernels_ci
@pytest.mark.parametrize("mode", ["offsets", "expert_ids"])
def test_grouped_gemm_leaves_unrouted_rows_alone(kernel, device, mode):
    num_experts, n, k = 4, 192, 300
    fp8 = fp8_dtypes_for(device)[0]
    b, b_scale = make_moe_weights(num_experts, n, k, device=device, fp8_dtype=fp8, seed=8)
    counts = [2, 0, 9, 4]
    m = sum(counts) + 6  # rows past offsets[-1]
    ids = _rows(counts) + [num_experts, num_experts + 1, 1000, -1, num_experts, 2**40]
    if mode == "expert_ids":
        random.Random(2).shuffle(ids)
    a, a_scale = reference_quantize_activation(_activation(m, k, device, seed=9), fp8)
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=device)
    routing = (
        {"offsets": _offsets(counts, device)}
        if mode == "offsets"
        else {"expert_ids": torch.tensor(ids, dtype=torch.int64, device=device)}
    )
    assert kernel.grouped_gemm(a, b, a_scale, b_scale, out=out, **routing) is out
    ref = reference_grouped(a, b, a_scale, b_scale, ids)
    routed = [r for r in range(m) if 0 <= ids[r] < num_experts]
    _assert_rows(out, ref, routed)
    unrouted = [r for r in range(m) if r not in routed]
    assert torch.isnan(out.cpu()[unrouted].float()).all(), "a row no expert owns was written"


@pytest.mark.kernels_ci
@pytest.mark.parametrize("counts", [[0, 16, 5, 1], [-3, 40, 5, 16]], ids=["in-range", "clamped"])
@pytest.mark.parametrize("expected_m", [None, 1, 64])  # the CUDA plan's 64-row tiles, then 128-row ones
def test_grouped_gemm_masked(kernel, device, counts, expected_m):
    num_experts, max_m, n, k = 4, 16, 192, 256
    fp8 = fp8_dtypes_for(device)[0]
    b, b_scale = make_moe_weights(num_experts, n, k, device=device, fp8_dtype=fp8, seed=10)
    # Counts outside [0, max_m] are clamped into it: an expert's rows never reach another expert's block.
    masked_m = torch.tensor(counts, dtype=torch.int32, device=device)
    masked = [min(max(c, 0), max_m) for c in counts]
    a_flat, as_flat = reference_quantize_activation(_activation(num_experts * max_m, k, device, seed=11), fp8)
    a, a_scale = a_flat.view(num_experts, max_m, k), as_flat.view(num_experts, max_m, -1)
    out = torch.full((num_experts, max_m, n), float("nan"), dtype=torch.float32, device=device)
    kernel.grouped_gemm(a, b, a_scale, b_scale, masked_m=masked_m, out=out, expected_m=expected_m)
    for e in range(num_experts):
        if masked[e]:
            rows = slice(0, masked[e])
            assert_close_gemm(out[e, rows], reference_gemm(a[e, rows].cpu(), b[e].cpu(), a_scale[e, rows].cpu(), b_scale[e].cpu()))
        assert torch.isnan(out[e, masked[e] :].cpu()).all(), f"expert {e}: a row past masked_m was written"
    # Fresh output, default bf16.
    fresh = kernel.grouped_gemm(a, b, a_scale, b_scale, masked_m=masked_m)
    assert fresh.shape == (num_experts, max_m, n) and fresh.dtype == torch.bfloat16


@pytest.mark.kernels_ci
def test_grouped_ue8m0_scales_bitwise_equal_to_pow2_fp32(kernel, device):
    counts = [3, 0, 70, 2]
    b, b_scale = make_moe_weights(4, 256, 384, device=device, fp8_dtype=fp8_dtypes_for(device)[0], pow2_scales=True, seed=12)
    x = _activation(sum(counts), 384, device, seed=13)
    e8m0 = b_scale.to(torch.float8_e8m0fnu)
    assert torch.equal(e8m0.float(), b_scale)
    offsets = _offsets(counts, device)
    ref = kernel.matmul_grouped(x, b, b_scale, offsets, None, BLOCK)
    assert torch.equal(kernel.matmul_grouped(x, b, e8m0, offsets, None, BLOCK), ref)
    assert torch.equal(kernel.matmul_grouped(x, b, e8m0.view(torch.uint8), offsets, None, BLOCK), ref)
    ids = torch.tensor(_rows(counts), device=device)
    assert torch.equal(kernel.matmul_batched(x, b, e8m0, ids, BLOCK), kernel.matmul_batched(x, b, b_scale, ids, BLOCK))
    _assert_rows(ref, _expected(x, b, b_scale, _rows(counts)), range(sum(counts)))


@pytest.mark.kernels_ci
def test_grouped_per_tensor_weight_scale(kernel, device):
    counts = [4, 3, 0]
    b, _ = make_moe_weights(3, 256, 256, device=device, fp8_dtype=fp8_dtypes_for(device)[0], seed=14)
    per_expert = torch.tensor([0.011, 0.007, 0.013], device=device)
    grid = per_expert[:, None, None].expand(3, 2, 2).contiguous()
    x = _activation(sum(counts), 256, device, seed=15)
    offsets = _offsets(counts, device)
    ref = kernel.matmul_grouped(x, b, grid, offsets, None, BLOCK)
    for scale in (per_expert, per_expert.view(3, 1, 1)):
        assert torch.equal(kernel.matmul_grouped(x, b, scale, offsets, None, None), ref)
        assert torch.equal(kernel.matmul_batched(x, b, scale, torch.tensor(_rows(counts), device=device), None),
                           kernel.matmul_batched(x, b, grid, torch.tensor(_rows(counts), device=device), BLOCK))  # fmt: skip


@pytest.mark.kernels_ci
@pytest.mark.parametrize("act_dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_grouped_dtypes_and_empty(kernel, device, act_dtype):
    counts = [2, 5]
    b, b_scale = make_moe_weights(2, 192, 192, device=device, fp8_dtype=fp8_dtypes_for(device)[0], seed=16)
    x = _activation(7, 192, device, dtype=act_dtype, seed=17)
    out = kernel.matmul_grouped(x, b, b_scale, _offsets(counts, device), None, BLOCK)
    assert out.dtype == act_dtype
    _assert_rows(out, _expected(x, b, b_scale, _rows(counts)), range(7))
    out32 = kernel.matmul_batched(x, b, b_scale, torch.tensor(_rows(counts), device=device), BLOCK, torch.float32)
    assert out32.dtype == torch.float32
    _assert_rows(out32, _expected(x, b, b_scale, _rows(counts)), range(7))
    # M = 0: no rows, no launch.
    empty = x[:0]
    assert kernel.matmul_grouped(empty, b, b_scale, torch.zeros(2, dtype=torch.int32, device=device), None, BLOCK).shape == (0, 192)
    assert kernel.matmul_batched(empty, b, b_scale, torch.zeros(0, dtype=torch.int64, device=device), BLOCK).shape == (0, 192)


def _needs_gpu(device):
    if device != "cuda":
        pytest.skip("host synchronization and graph capture: needs a CUDA or ROCm device")


def test_no_host_synchronization(kernel, device):
    _needs_gpu(device)
    fp8 = fp8_dtypes_for(device)[0]
    b, b_scale = make_moe_weights(8, 256, 512, device=device, fp8_dtype=fp8, seed=20)
    x = _activation(40, 512, device, seed=21)
    counts = torch.tensor([5, 0, 7, 3, 9, 1, 10, 5], device=device)  # every one of the 40 rows routed
    offsets = counts.cumsum(0).int()
    ids = torch.repeat_interleave(torch.arange(8, device=device), counts)
    masked = torch.tensor([3, 0, 5, 5, 1, 0, 2, 4], dtype=torch.int32, device=device)
    a, a_scale = kernel.quantize_activation(x.view(8, 5, 512).reshape(40, 512))
    static = torch.tensor(0.02, device=device)

    def calls():
        yield kernel.matmul_2d(x, b[0], b_scale[0], [128, 128])
        yield kernel.matmul_2d(x, b[0], b_scale[0].to(torch.float8_e8m0fnu), [128, 128], activation_scale=static)
        yield kernel.matmul_grouped(x, b, b_scale, offsets, None, [128, 128])
        yield kernel.matmul_grouped(x, b, b_scale, None, counts.float(), [128, 128])
        yield kernel.matmul_batched(x, b, b_scale, ids, [128, 128])
        yield kernel.grouped_gemm(a.view(8, 5, 512), b, a_scale.view(8, 5, 4), b_scale, masked_m=masked)

    warm = [t.clone() for t in calls()]  # lazy initialization may synchronize once
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        again = list(calls())
    finally:
        torch.cuda.set_sync_debug_mode("default")
    for first, second in zip(warm[:5], again[:5]):
        assert torch.equal(first, second)


@pytest.mark.parametrize("entry", ["matmul_grouped", "matmul_batched", "masked"])
def test_graph_replay_with_new_routing(kernel, device, entry):
    _needs_gpu(device)
    fp8 = fp8_dtypes_for(device)[0]
    num_experts, m, k, n = 8, 48, 512, 256
    b, b_scale = make_moe_weights(num_experts, n, k, device=device, fp8_dtype=fp8, seed=22)
    x = _activation(m, k, device, seed=23)
    routing = torch.zeros(num_experts if entry != "matmul_batched" else m, dtype=torch.int32 if entry != "matmul_batched" else torch.int64, device=device)

    def run():
        if entry == "matmul_grouped":
            return kernel.matmul_grouped(x, b, b_scale, routing, None, [128, 128])
        if entry == "matmul_batched":
            return kernel.matmul_batched(x, b, b_scale, routing, [128, 128])
        a, a_scale = kernel.quantize_activation(x)
        return kernel.grouped_gemm(a.view(num_experts, m // num_experts, k), b, a_scale.view(num_experts, m // num_experts, -1), b_scale, masked_m=routing)

    def route(seed):
        gen = torch.Generator().manual_seed(seed)
        if entry == "matmul_grouped":
            counts = torch.bincount(torch.randint(0, num_experts, (m - 5,), generator=gen), minlength=num_experts)
            routing.copy_(counts.cumsum(0).int())
            return [e for e, c in enumerate(counts.tolist()) for _ in range(c)] + [num_experts] * 5
        if entry == "matmul_batched":
            ids = torch.randint(0, num_experts + 2, (m,), generator=gen)  # some sentinels
            routing.copy_(ids)
            return ids.tolist()
        valid = torch.randint(0, m // num_experts + 1, (num_experts,), generator=gen)
        routing.copy_(valid.int())
        per = m // num_experts
        return [e if r < valid[e] else num_experts for e in range(num_experts) for r in range(per)]

    route(0)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        run()  # warm-up outside the graph
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = run()
    for seed in (1, 2, 3):
        row_expert = route(seed)
        graph.replay()
        torch.cuda.synchronize()
        q, s = reference_quantize_activation(x, fp8)
        ref = reference_grouped(q, b, s, b_scale, row_expert)
        got = out.view(m, n)
        routed = [r for r in range(m) if row_expert[r] < num_experts]
        _assert_rows(got, ref, routed)
