"""sm_90a tests of the CUDA grouped GEMM (MoE experts) through the launcher (gemm_launch via the tuner shim,
scripts/cuda/grouped_harness.py): contiguous (group_ends), batched by group id (row_group) and masked
(group_rows) layouts against a float64 reference per group, on fresh data with distinct signed scales per
block and per group.

Skipped (not passed) where no CUDA sm_90 GPU is present. The shim is tests/cuda/cuda_shim.py's.
"""

from __future__ import annotations

import sys

import pytest
import torch
from _helpers import REPO_ROOT, assert_close_gemm, make_inputs, reference_gemm

sys.path.insert(0, str(REPO_ROOT / "scripts" / "cuda"))
from cuda_shim import HAS_SM90, shim_path  # noqa: E402
from grouped_harness import Grouped, skewed_counts  # noqa: E402

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not HAS_SM90, reason="needs a CUDA sm_90 (H100/H200) GPU")]

CANARY = -12288.0  # exact in bf16 (1.5 * 2^13); rows a call must not write keep it


@pytest.fixture(scope="module")
def grouped(tmp_path_factory) -> Grouped:
    return Grouped(shim_path(tmp_path_factory.mktemp("shim")))


def make_experts(groups, n, k, seed):
    """w [E, n, k], w_s [E, n/128, k/128]: every group its own values and scales."""
    parts = [make_inputs(1, n, k, "cuda", seed=seed * 1000 + e) for e in range(groups)]
    return torch.stack([p[1] for p in parts]), torch.stack([p[3] for p in parts])


def make_rows(m, k, seed):
    a, _, a_s, _ = make_inputs(m, 1, k, "cuda", seed=seed)
    return a, a_s


def ends_of(counts):
    return torch.cumsum(torch.as_tensor(counts, dtype=torch.int64), 0).to(torch.int32).cuda()


def reference(a, a_s, w, w_s, row_ids, m, n):
    """float64 [m, n]: row r = reference of group row_ids[r]; NaN where row_ids[r] is not a group."""
    ref = torch.full((m, n), float("nan"), dtype=torch.float64)
    ids = row_ids.cpu()
    for g in ids[(ids >= 0) & (ids < w.shape[0])].unique().tolist():
        rows = (ids == g).nonzero().flatten()
        ref[rows] = reference_gemm(a[rows.cuda()], w[g], a_s[rows.cuda()], w_s[g]).cpu()
    return ref


def check(out, ref):
    """Rows with a group match the reference; the others still hold the canary."""
    valid = ~torch.isnan(ref[:, 0])
    assert valid.any()
    assert_close_gemm(out[valid.cuda()], ref[valid])
    untouched = out[(~valid).cuda()].float()
    assert bool((untouched == CANARY).all()), "a row outside every group was written"


def contiguous_row_ids(counts, m):
    ids = torch.repeat_interleave(torch.arange(len(counts)), torch.as_tensor(counts))
    return torch.cat([ids, torch.full((m - len(ids),), -1, dtype=torch.int64)])


def m_major(a_s):
    """The same scales stored M-major ([K/128, M] memory): what 128+-row tiles' TMA reads in place."""
    return a_s.t().contiguous().t()


def run_contiguous(grouped, counts, n, k, tail=0, seed=0, scales_m_major=False):
    groups = len(counts)
    m = sum(counts) + tail
    a, a_s = make_rows(max(m, 1), k, seed)
    a_s = m_major(a_s) if scales_m_major else a_s
    w, w_s = make_experts(groups, n, k, seed)
    out = torch.full((max(m, 1), n), CANARY, dtype=torch.bfloat16, device="cuda")
    grouped(a, w, a_s, w_s, out, group_ends=ends_of(counts))
    return out, reference(a, a_s, w, w_s, contiguous_row_ids(counts, max(m, 1)), max(m, 1), n)


COUNTS = [1, 7, 63, 64, 65, 1000, 0]


@pytest.mark.parametrize("scales_m_major", [False, True], ids=["row_major_scales", "m_major_scales"])
@pytest.mark.parametrize("n,k", [(192, 192), (256, 512), (4096, 7168)])
def test_contiguous_counts(grouped, n, k, scales_m_major):
    """Per-group counts 1, 7, 63, 64, 65, 1000 and an empty group, rows past the last end (canary); A scales
    transposed by the launcher or read in place."""
    out, ref = run_contiguous(grouped, COUNTS, n, k, tail=37, scales_m_major=scales_m_major)
    check(out, ref)


@pytest.mark.parametrize("groups", [1, 8, 256])
@pytest.mark.parametrize("tokens", [4, 64, 512])
def test_contiguous_skewed(grouped, groups, tokens):
    """Qwen3 TP shard shape (N = 192, K = 1536 / 8) under a skewed top-k routing; many groups empty."""
    counts = skewed_counts(tokens, min(8, groups), groups, seed=tokens + groups).tolist()
    out, ref = run_contiguous(grouped, counts, 192, 192, tail=3, seed=groups)
    check(out, ref)


def test_large_groups_start_at_any_row(grouped):
    """192x128 tiles (>= 1024 rows a group, K >= 1536): the second segment starts at row 1031, not a multiple
    of 4, so its tiles' A-scale boxes start at the aligned row below (the rows' scales all differ)."""
    out, ref = run_contiguous(grouped, [1031, 1221], 256, 1536, tail=5, seed=9)
    check(out, ref)


@pytest.mark.parametrize("n", [384, 4096])
def test_cluster_tiles_share_a(grouped, n):
    """Thousands of rows a group at K >= 4096: 192x128 tiles in 2-CTA clusters multicasting A
    (grouped_planner.h). The segments start at rows that are not tile multiples, an empty group sits between
    them, and at N = 384 the second CTA of the last cluster tile lies wholly past N."""
    out, ref = run_contiguous(grouped, [2100, 0, 3001], n, 4096, tail=5, seed=11, scales_m_major=True)
    check(out, ref)


def test_one_group_holds_every_row(grouped):
    counts = [0] * 256
    counts[200] = 2000
    out, ref = run_contiguous(grouped, counts, 256, 384)
    check(out, ref)


def test_swapped_group_scales_fail(grouped):
    """The reference with two groups' B scales swapped must not match: scales are read per group."""
    counts, n, k = [100, 100], 256, 256
    a, a_s = make_rows(200, k, 1)
    w, w_s = make_experts(2, n, k, 1)
    out = torch.full((200, n), CANARY, dtype=torch.bfloat16, device="cuda")
    grouped(a, w, a_s, w_s, out, group_ends=ends_of(counts))
    ids = contiguous_row_ids(counts, 200)
    check(out, reference(a, a_s, w, w_s, ids, 200, n))
    with pytest.raises(AssertionError):
        check(out, reference(a, a_s, w, w_s.flip(0).contiguous(), ids, 200, n))


@pytest.mark.parametrize("groups,tokens", [(8, 64), (256, 64), (256, 512)])
def test_batched_by_group_id(grouped, groups, tokens):
    """row_group: top-k ids per token row, sentinel ids (>= E and negative) left untouched."""
    n, k = 192, 192
    m = tokens * 8
    gen = torch.Generator().manual_seed(groups + tokens)
    ids = torch.randint(0, groups, (m,), generator=gen)
    ids[torch.rand(m, generator=gen) < 0.1] = groups  # expert-parallel sentinels
    ids[5] = -1
    a, a_s = make_rows(m, k, 2)
    w, w_s = make_experts(groups, n, k, 2)
    out = torch.full((m, n), CANARY, dtype=torch.bfloat16, device="cuda")
    grouped(a, w, a_s, w_s, out, row_group=ids.cuda())
    check(out, reference(a, a_s, w, w_s, ids, m, n))


@pytest.mark.parametrize("scales_m_major", [False, True], ids=["row_major_scales", "m_major_scales"])
def test_masked_layout(grouped, scales_m_major):
    """[E, max_m, K] with valid rows per group; padding rows untouched. Row-major scales are gathered by the
    scale warp, M-major ones loaded by TMA in place."""
    groups, max_m, n, k = 8, 128, 256, 512
    counts = torch.tensor([0, 1, 7, 63, 64, 65, 128, 100], dtype=torch.int32)
    a, a_s = make_rows(groups * max_m, k, 3)
    a_s = m_major(a_s) if scales_m_major else a_s
    w, w_s = make_experts(groups, n, k, 3)
    out = torch.full((groups * max_m, n), CANARY, dtype=torch.bfloat16, device="cuda")
    grouped(a, w, a_s, w_s, out, group_rows=counts.cuda())
    ids = torch.full((groups * max_m,), -1, dtype=torch.int64)
    for g, c in enumerate(counts.tolist()):
        ids[g * max_m : g * max_m + c] = g
    check(out, reference(a, a_s, w, w_s, ids, groups * max_m, n))


def test_deterministic(grouped):
    counts = skewed_counts(512, 8, 256, seed=7).tolist()
    first, _ = run_contiguous(grouped, counts, 192, 1536, seed=4)
    second, _ = run_contiguous(grouped, counts, 192, 1536, seed=4)
    assert torch.equal(first, second)
    n, k, m = 192, 384, 1024
    ids = torch.randint(0, 64, (m,), generator=torch.Generator().manual_seed(5)).cuda()
    a, a_s = make_rows(m, k, 6)
    w, w_s = make_experts(64, n, k, 6)
    outs = [grouped(a, w, a_s, w_s, torch.zeros(m, n, dtype=torch.bfloat16, device="cuda"), row_group=ids)
            for _ in range(2)]
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("mode", ["group_ends", "row_group"])
def test_cuda_graph_replay_with_new_routing(grouped, mode):
    """Captured once; replayed after the routing tensor is rewritten in place: no host reads of counts."""
    groups, n, k, m = 16, 256, 512, 600
    a, a_s = make_rows(m, k, 8)
    w, w_s = make_experts(groups, n, k, 8)
    routing = torch.zeros(groups if mode == "group_ends" else m, dtype=torch.int32 if mode == "group_ends" else torch.int64,
                          device="cuda")
    out = torch.full((m, n), CANARY, dtype=torch.bfloat16, device="cuda")

    def new_routing(seed):
        gen = torch.Generator().manual_seed(seed)
        if mode == "group_ends":
            counts = torch.multinomial(torch.ones(groups), 500, replacement=True, generator=gen).bincount(minlength=groups)
            routing.copy_(ends_of(counts.tolist()))
            return contiguous_row_ids(counts.tolist(), m)
        ids = torch.randint(0, groups + 2, (m,), generator=gen)  # ids >= groups: sentinels
        routing.copy_(ids.cuda())
        return torch.where(ids < groups, ids, -1)

    new_routing(0)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture (the launcher caches device facts)
        grouped(a, w, a_s, w_s, out, **{mode: routing})
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        grouped(a, w, a_s, w_s, out, **{mode: routing})
    for seed in (1, 2):
        ids = new_routing(seed)
        out.fill_(CANARY)
        graph.replay()
        torch.cuda.synchronize()
        check(out, reference(a, a_s, w, w_s, ids, m, n))


def test_refuses_bad_arguments(grouped):
    a, a_s = make_rows(64, 256, 9)
    w, w_s = make_experts(2, 256, 256, 9)
    out = torch.empty(64, 256, dtype=torch.bfloat16, device="cuda")
    ends = ends_of([32, 32])
    with pytest.raises(RuntimeError, match="exactly one of group_ends, row_group and group_rows"):
        grouped(a, w, a_s, w_s, out, group_ends=ends, row_group=torch.zeros(64, dtype=torch.int64, device="cuda"))
    padded = torch.cat([w, w], dim=1)[:, :256]  # groups 2 * n rows apart
    with pytest.raises(RuntimeError, match="b_stride_group"):
        grouped(a, padded, a_s, w_s, out, group_ends=ends)
