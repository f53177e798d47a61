"""Grouped GEMM (MoE experts) on the emulated gfx942 kernel: contiguous segments (group_ends), rows by
group id (row_group) and the masked layout (group_rows), against a float64 reference per group. Rows a
call must not write (past the last end, sentinel ids, past a block's count) hold a canary that must
survive bit for bit (NaN for the masked layout)."""

from __future__ import annotations

import math

import pytest
import torch

import emu_gemm as E

pytestmark = pytest.mark.rocm_emu

FNUZ, FN = torch.float8_e4m3fnuz, torch.float8_e4m3fn
CANARY = -12345.0  # exactly representable in bf16, fp16 and fp32
UNSPLIT = [0, 1, 2, 3]  # test configs 0..3: every tile, split_k = 1
SPLIT2 = 4  # a test config with 2 K splits


@pytest.fixture(scope="module")
def lib(gemm_libs):
    return gemm_libs["gemm"]


def experts(g, groups, n, k, pow2=False):
    """b [E, n, k] (e4m3fn) and distinct per-block, per-expert scales [E, ceil(n/128), ceil(k/128)]."""
    nb, kb = -(-n // E.BLOCK), -(-k // E.BLOCK)
    b = torch.stack([E.fp8_operand(g, n, k, FN, "k_major") for _ in range(groups)])
    scales = E.pow2_block_scales if pow2 else E.block_scales
    b_scale = torch.stack([scales(g, nb, kb) for _ in range(groups)])
    return b, b_scale


def activations(g, m, k, layout="k_major", pow2=False):
    kb = -(-k // E.BLOCK)
    a = E.fp8_operand(g, m, k, FNUZ, layout)
    return a, (E.pow2_block_scales if pow2 else E.block_scales)(g, m, kb)


def ends_of(counts):
    return torch.tensor(counts, dtype=torch.int64).cumsum(0).to(torch.int32)


def canvas(m, n, dtype=torch.float32, pad=0):
    return torch.full((m, n + pad), CANARY, dtype=dtype)[:, :n]


def run_ok(lib, a, b, a_scale, b_scale, c, config=-1, **groups):
    err, _ = E.run(lib, a, b, a_scale, b_scale, c, config, **groups)
    assert err == "", err
    return c


def check_rows(c, a, b, a_scale, b_scale, row_group, canary=CANARY):
    """Every row with a group id in [0, E) against the fp64 reference of its group; every other row
    still holds the canary."""
    groups = b.shape[0]
    for e in range(groups):
        rows = (row_group == e).nonzero().flatten()
        if rows.numel() == 0:
            continue
        ref, bound = E.reference(a[rows], b[e], a_scale[rows], b_scale[e])
        bad = E.mismatches(c[rows], ref, bound)
        assert not bad.any(), f"group {e}: {int(bad.sum())} of {bad.numel()} outputs wrong"
    untouched = c[(row_group < 0) | (row_group >= groups)]
    kept = untouched.isnan() if math.isnan(canary) else untouched == canary
    assert kept.all(), "a row the call must not write was written"


def row_ids_of(counts, m):
    """Group id per row of a contiguous layout; rows past the last end get the sentinel -1."""
    ids = torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts))
    return torch.cat([ids, torch.full((m - ids.numel(),), -1, dtype=torch.int64)])


# per-group counts 1, 7, 63, 64, 65 (around every tile height), an empty group, 5 rows past the end
COUNTS = [1, 7, 63, 0, 64, 65, 3, 20]


@pytest.mark.kernels_ci
@pytest.mark.parametrize("config", UNSPLIT)
def test_contiguous_every_tile(lib, config):
    g = torch.Generator().manual_seed(100 + config)
    m, n, k = sum(COUNTS) + 5, 192, 192  # ragged N and K (Qwen3 TP shard sizes)
    a, a_scale = activations(g, m, k)
    b, b_scale = experts(g, len(COUNTS), n, k)
    c = run_ok(lib, a, b, a_scale, b_scale, canvas(m, n), config, group_ends=ends_of(COUNTS))
    check_rows(c, a, b, a_scale, b_scale, row_ids_of(COUNTS, m))


@pytest.mark.parametrize("counts", [[130], [0, 0, 0, 0, 0, 130, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0]],
                         ids=["one_group", "all_rows_in_one_of_8", "all_empty"])
def test_contiguous_single_group(lib, counts):
    g = torch.Generator().manual_seed(110)
    m, n, k = 133, 128, 256
    a, a_scale = activations(g, m, k)
    b, b_scale = experts(g, len(counts), n, k)
    c = run_ok(lib, a, b, a_scale, b_scale, canvas(m, n), group_ends=ends_of(counts))
    check_rows(c, a, b, a_scale, b_scale, row_ids_of(counts, m))


def test_contiguous_256_groups(lib):
    g = torch.Generator().manual_seed(120)
    counts = torch.randint(0, 4, (256,), generator=g)
    counts[::7] = 0  # runs of empty groups
    counts = counts.tolist()
    m, n, k = sum(counts) + 3, 64, 96
    a, a_scale = activations(g, m, k)
    b, b_scale = experts(g, 256, n, k)
    c = run_ok(lib, a, b, a_scale, b_scale, canvas(m, n), group_ends=ends_of(counts))
    check_rows(c, a, b, a_scale, b_scale, row_ids_of(counts, m))


@pytest.mark.kernels_ci
@pytest.mark.parametrize("config", [-1, 0, 3])
def test_batched_with_sentinels(lib, config):
    g = torch.Generator().manual_seed(130)
    m, n, k, groups = 150, 192, 192, 8
    a, a_scale = activations(g, m, k)
    b, b_scale = experts(g, groups, n, k)
    ids = torch.randint(0, groups, (m,), generator=g)
    ids[ids == 6] = 2  # an empty group
    ids[torch.randperm(m, generator=g)[:20]] = torch.tensor([-1, 8, 1000, -(2**40)] * 5)  # sentinels
    c = run_ok(lib, a, b, a_scale, b_scale, canvas(m, n, pad=8), config, row_group=ids)
    check_rows(c, a, b, a_scale, b_scale, ids)


@pytest.mark.parametrize("ids", ["all_sentinel", "one_group", "counts"])
def test_batched_edges(lib, ids):
    g = torch.Generator().manual_seed(140)
    groups, n, k = 8, 64, 128
    if ids == "all_sentinel":
        row_group = torch.full((40,), 8, dtype=torch.int64)
    elif ids == "one_group":
        row_group = torch.full((70,), 3, dtype=torch.int64)
    else:  # counts 1, 7, 63, 64, 65 in shuffled order
        row_group = torch.repeat_interleave(torch.arange(5), torch.tensor([1, 7, 63, 64, 65]))
        row_group = row_group[torch.randperm(row_group.numel(), generator=g)]
    m = row_group.numel()
    a, a_scale = activations(g, m, k)
    b, b_scale = experts(g, groups, n, k)
    c = run_ok(lib, a, b, a_scale, b_scale, canvas(m, n, torch.bfloat16), row_group=row_group)
    check_rows(c, a, b, a_scale, b_scale, row_group)


def test_swapped_expert_scales_fail(lib):
    g = torch.Generator().manual_seed(150)
    counts = [40, 40, 40]
    m, n, k = sum(counts), 128, 256
    a, a_scale = activations(g, m, k)
    b, b_scale = experts(g, 3, n, k)
    swapped = b_scale[[0, 2, 1]].contiguous()
    c = run_ok(lib, a, b, a_scale, swapped, canvas(m, n), group_ends=ends_of(counts))
    with pytest.raises(AssertionError, match="group 1"):
        check_rows(c, a, b, a_scale, b_scale, row_ids_of(counts, m))


def test_deterministic(lib):
    g = torch.Generator().manual_seed(160)
    m, n, k, groups = 120, 192, 320, 8
    a, a_scale = activations(g, m, k)
    b, b_scale = experts(g, groups, n, k)
    ids = torch.randint(-1, groups, (m,), generator=g)
    first = run_ok(lib, a, b, a_scale, b_scale, canvas(m, n), row_group=ids)
    second = run_ok(lib, a, b, a_scale, b_scale, canvas(m, n), row_group=ids)
    assert torch.equal(first.view(torch.int32), second.view(torch.int32))
    ends = ends_of([30, 0, 50, 40])
    b4, bs4 = b[:4], b_scale[:4]
    first = run_ok(lib, a, b4, a_scale, bs4, canvas(m, n), group_ends=ends)
    second = run_ok(lib, a, b4, a_scale, bs4, canvas(m, n), group_ends=ends)
    assert torch.equal(first.view(torch.int32), second.view(torch.int32))


@pytest.mark.parametrize("mode", ["group_ends", "row_group"])
@pytest.mark.parametrize("a_ue8m0", [False, True], ids=["a_f32", "a_ue8m0"])
def test_ue8m0_scales_bitwise_equal_fp32(lib, mode, a_ue8m0):
    g = torch.Generator().manual_seed(170)
    counts = [10, 0, 70, 33]
    m, n, k = sum(counts) + 2, 192, 192
    a, a_scale = activations(g, m, k, pow2=True)
    b, b_scale = experts(g, len(counts), n, k, pow2=True)
    row_ids = row_ids_of(counts, m)
    groups = {"group_ends": ends_of(counts)} if mode == "group_ends" else {"row_group": row_ids.flip(0).contiguous()}
    ids = row_ids if mode == "group_ends" else groups["row_group"]
    expected = run_ok(lib, a, b, a_scale, b_scale, canvas(m, n), **groups)
    check_rows(expected, a, b, a_scale, b_scale, ids)
    a_s = E.to_ue8m0(a_scale) if a_ue8m0 else a_scale
    got = run_ok(lib, a, b, a_s, E.to_ue8m0(b_scale), canvas(m, n), **groups)
    assert torch.equal(got.view(torch.int32), expected.view(torch.int32)), "UE8M0 and fp32 scales differ"


def test_staged_layouts(lib):
    """M-major A staged K-major (grouped instances read K-major operands); B with unaligned strides
    staged per group; A scales column-major (4-row loads)."""
    g = torch.Generator().manual_seed(180)
    counts = [5, 64, 0, 27]
    m, n, k, groups = sum(counts) + 4, 96, 200, len(counts)
    a = E.fp8_operand(g, m, k, FNUZ, "mn_major")
    a_scale = E.block_scales(g, m, 2, transposed=True)
    b = torch.full((groups, n, 2 * k), E.NAN_BYTE[FN], dtype=torch.uint8).view(FN)[:, :, ::2]
    b.copy_(torch.randn(groups, n, k, generator=g).to(FN))  # every other byte along K: neither major
    b_scale = torch.stack([E.block_scales(g, 1, 2) for _ in range(groups)])
    assert b.stride(-1) == 2
    c = run_ok(lib, a, b, a_scale, b_scale, canvas(m, n, torch.float16), group_ends=ends_of(counts))
    check_rows(c, a, b, a_scale, b_scale, row_ids_of(counts, m))
    ids = row_ids_of(counts, m)[torch.randperm(m, generator=g)]
    c = run_ok(lib, a, b, a_scale, b_scale, canvas(m, n, torch.float16), row_group=ids)
    check_rows(c, a, b, a_scale, b_scale, ids)


def test_ends_outside_contract_stay_in_bounds(lib):
    """Ends that decrease or pass m are documented as unsupported; the kernel still reads and writes
    only inside the tensors (guard pages would fault) and leaves rows past every end alone."""
    g = torch.Generator().manual_seed(190)
    m, n, k = 50, 64, 128
    a, a_scale = activations(g, m, k)
    b, b_scale = experts(g, 4, n, k)
    for ends in ([30, 10, 45, 40], [20, 70, 80, 90], [-5, 10, 10, 12]):
        run_ok(lib, a, b, a_scale, b_scale, canvas(m, n), group_ends=torch.tensor(ends, dtype=torch.int32))
    c = run_ok(lib, a, b, a_scale, b_scale, canvas(m, n), group_ends=torch.tensor([-5, 10, 10, 12], dtype=torch.int32))
    assert (c[12:] == CANARY).all()


def test_refusals(lib):
    g = torch.Generator().manual_seed(200)
    m, n, k = 32, 64, 128
    a, a_scale = activations(g, m, k)
    b, b_scale = experts(g, 2, n, k)
    ends = ends_of([16, 16])
    err, _ = E.run(lib, a, b, a_scale, b_scale, canvas(m, n), SPLIT2, group_ends=ends)
    assert "split_k must be 1, got 2" in err
    err, _ = E.run(lib, a, b, a_scale, b_scale, canvas(m, n), group_ends=ends, row_group=torch.zeros(m, dtype=torch.int64))
    assert "needs exactly one of group_ends, row_group and group_rows, got 2" in err


def test_count_1000(lib):
    g = torch.Generator().manual_seed(210)
    counts = [3, 1000, 0, 40]
    m, n, k = sum(counts) + 1, 64, 128
    a, a_scale = activations(g, m, k)
    b, b_scale = experts(g, len(counts), n, k)
    c = run_ok(lib, a, b, a_scale, b_scale, canvas(m, n), group_ends=ends_of(counts))
    check_rows(c, a, b, a_scale, b_scale, row_ids_of(counts, m))


@pytest.mark.parametrize("mode", ["group_ends", "row_group"])
def test_host_work_independent_of_routing(lib, mode):
    """What the host enqueues (launches, workspace) depends on shapes only, never on the routing the
    device holds: one captured graph serves every routing."""
    g = torch.Generator().manual_seed(220)
    m, n, k, groups = 96, 64, 128, 8
    a, a_scale = activations(g, m, k)
    b, b_scale = experts(g, groups, n, k)
    seen = set()
    for counts in ([96, 0, 0, 0, 0, 0, 0, 0], [12] * 8, [0, 0, 0, 0, 0, 0, 0, 10]):
        ids = row_ids_of(counts, m)
        routing = {"group_ends": ends_of(counts)} if mode == "group_ends" else {"row_group": ids.flip(0).contiguous()}
        c = canvas(m, n)
        err, stats = E.run(lib, a, b, a_scale, b_scale, c, **routing)
        assert err == "", err
        check_rows(c, a, b, a_scale, b_scale, ids if mode == "group_ends" else routing["row_group"])
        seen.add((stats.launches, stats.workspace_requests, stats.workspace_bytes))
    assert len(seen) == 1, seen


# ---- the masked layout: a and c as [E, stride, K / N], block g's first clamp(rows[g], 0, stride) rows use group g
def masked_ids(counts, stride):
    """Group id per row of the masked layout; rows past a block's (clamped) count get the sentinel -1."""
    valid = torch.tensor(counts, dtype=torch.int64).clamp(0, stride)
    local = torch.arange(stride).unsqueeze(0)
    return torch.where(local < valid.unsqueeze(1), torch.arange(len(counts)).unsqueeze(1), -1).reshape(-1)


def run_masked(lib, g, counts, stride, n, k, config=-1, dtype=torch.float32, scales=None):
    """Runs the masked layout into a NaN-filled c and checks every row; returns c and the operands."""
    groups = len(counts)
    m = groups * stride
    a, a_scale = activations(g, m, k)
    b, b_scale = experts(g, groups, n, k)
    rows = torch.tensor(counts, dtype=torch.int32)
    c = run_ok(lib, a, b, a_scale, b_scale if scales is None else scales, canvas(m, n, dtype).fill_(math.nan),
               config, group_rows=rows)
    return c, (a, b, a_scale, b_scale, masked_ids(counts, stride))


def masked_counts(stride):
    """E = 8 counts around every tile height, a full block and clamped ones (stride + 5, negative)."""
    return [1, 7, 63, 64, 65, stride, stride + 5, -3]


@pytest.mark.kernels_ci
@pytest.mark.parametrize("config", UNSPLIT)
@pytest.mark.parametrize("stride", [64, 70])  # BlockM-aligned blocks, and blocks starting mid-tile
def test_masked_every_tile(lib, config, stride):
    g = torch.Generator().manual_seed(300 + config + stride)
    c, operands = run_masked(lib, g, masked_counts(stride), stride, 192, 192, config)  # ragged N and K
    check_rows(c, *operands, canary=math.nan)


@pytest.mark.parametrize("counts", [[0], [1], [37], [130], [135], [-(2**31)], [2**31 - 1]],
                         ids=["empty", "one", "some", "full", "past_stride", "int32_min", "int32_max"])
def test_masked_single_group(lib, counts):
    g = torch.Generator().manual_seed(310)
    c, operands = run_masked(lib, g, counts, 130, 128, 256, dtype=torch.bfloat16)
    check_rows(c, *operands, canary=math.nan)


@pytest.mark.kernels_ci
def test_masked_256_groups(lib):
    g = torch.Generator().manual_seed(320)
    stride = 9
    counts = torch.randint(-2, stride + 3, (256,), generator=g)
    counts[::7] = 0
    c, operands = run_masked(lib, g, counts.tolist(), stride, 64, 96)
    check_rows(c, *operands, canary=math.nan)


def test_masked_eight_groups_with_empty(lib):
    g = torch.Generator().manual_seed(330)
    counts = [0, 65, 0, 64, -1, 70, 7, 0]
    c, operands = run_masked(lib, g, counts, 66, 96, 200, dtype=torch.float16)
    check_rows(c, *operands, canary=math.nan)


def test_masked_swapped_expert_scales_fail(lib):
    g = torch.Generator().manual_seed(340)
    counts, stride = [40, 40, 40], 48
    m, n, k = 3 * stride, 128, 256
    a, a_scale = activations(g, m, k)
    b, b_scale = experts(g, 3, n, k)
    c = run_ok(lib, a, b, a_scale, b_scale[[0, 2, 1]].contiguous(), canvas(m, n).fill_(math.nan),
               group_rows=torch.tensor(counts, dtype=torch.int32))
    with pytest.raises(AssertionError, match="group 1"):
        check_rows(c, a, b, a_scale, b_scale, masked_ids(counts, stride), canary=math.nan)


def test_masked_staged_layouts(lib):
    """M-major A staged K-major, A scales column-major: the masked rows read from the staged copy."""
    g = torch.Generator().manual_seed(350)
    counts, stride, n, k = [5, 70, 0, 27], 70, 96, 200
    m = len(counts) * stride
    a = E.fp8_operand(g, m, k, FNUZ, "mn_major")
    a_scale = E.block_scales(g, m, 2, transposed=True)
    b, b_scale = experts(g, len(counts), n, k)
    c = run_ok(lib, a, b, a_scale, b_scale, canvas(m, n).fill_(math.nan), group_rows=torch.tensor(counts, dtype=torch.int32))
    check_rows(c, a, b, a_scale, b_scale, masked_ids(counts, stride), canary=math.nan)


def test_masked_one_launch_independent_of_counts(lib):
    """One kernel launch and no workspace (no sort, gather or scatter; A scales M-contiguous as the
    kernel reads them), whatever the device's counts: one captured graph serves every routing."""
    g = torch.Generator().manual_seed(360)
    groups, stride, n, k = 8, 24, 64, 256
    m = groups * stride
    a = E.fp8_operand(g, m, k, FNUZ, "k_major")
    a_scale = E.block_scales(g, m, 2, transposed=True)
    b, b_scale = experts(g, groups, n, k)
    seen = set()
    for counts in ([stride] + [0] * 7, [12] * 8, [0] * 7 + [30], [-1] * 8):
        c = canvas(m, n).fill_(math.nan)
        err, stats = E.run(lib, a, b, a_scale, b_scale, c, group_rows=torch.tensor(counts, dtype=torch.int32))
        assert err == "", err
        check_rows(c, a, b, a_scale, b_scale, masked_ids(counts, stride), canary=math.nan)
        seen.add((stats.launches, stats.workspace_requests, stats.workspace_bytes))
    assert seen == {(1, 0, 0)}, seen


def test_masked_refusals(lib):
    g = torch.Generator().manual_seed(370)
    m, n, k = 32, 64, 128
    a, a_scale = activations(g, m, k)
    b, b_scale = experts(g, 2, n, k)
    rows = torch.tensor([16, 16], dtype=torch.int32)
    err, _ = E.run(lib, a, b, a_scale, b_scale, canvas(m, n), group_rows=rows, group_row_stride=15)
    assert "m = num_groups * group_row_stride: expected m = 2 * 15, got 32" in err
    err, _ = E.run(lib, a, b, a_scale, b_scale, canvas(m, n), group_rows=rows, group_row_stride=-16)
    assert "group_row_stride must be >= 1, got -16" in err
    err, _ = E.run(lib, a, b, a_scale, b_scale, canvas(m, n), group_rows=rows, group_ends=ends_of([16, 16]))
    assert "needs exactly one of group_ends, row_group and group_rows, got 2" in err
