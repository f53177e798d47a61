"""The gfx942 GEMM (gemm/gemm_launcher.hip and its kernels) executed on the CPU emulator and compared
with an fp64 reference: every test config and every config the planner picks for the tuned shapes,
split-K, ragged M/N/K, K-major /
M,N-major / padded / strided operands (in place and staged), e4m3fnuz and e4m3fn (folded) inputs,
bf16/fp16/fp32 outputs, distinct signed per-block scales (row- and column-major), NaN confinement,
determinism, and a deliberately wrong lane map that must fail. Every tensor sits against an unmapped
page (after its end, or before its start), so out-of-bounds accesses fail too."""

from __future__ import annotations

import ctypes

import pytest
import torch

import emu_gemm as E

pytestmark = pytest.mark.rocm_emu

FNUZ, FN = torch.float8_e4m3fnuz, torch.float8_e4m3fn


@pytest.fixture(scope="module")
def lib(gemm_libs):
    return gemm_libs["gemm"]


@pytest.fixture(scope="module")
def configs(lib):
    found = E.configs(lib)
    assert found, "the launcher exposes no test configs"
    return found


def scale_copies(a_scale):
    """Launches the A scales add: the kernel reads fp32 M-contiguous scales with 16-byte aligned
    columns in place; any other A scales are expanded into workspace first (one launch)."""
    in_place = a_scale.dtype == torch.float32 and a_scale.stride(0) == 1 and (a_scale.stride(1) * 4) % 16 == 0 \
        and a_scale.data_ptr() % 16 == 0
    return 0 if in_place else 1


def problem(seed, m, n, k, a_dtype=FNUZ, b_dtype=FNUZ, a_layout="k_major", b_layout="k_major",
            scales_transposed=False):
    g = torch.Generator().manual_seed(seed)
    a = E.fp8_operand(g, m, k, a_dtype, a_layout)
    b = E.fp8_operand(g, n, k, b_dtype, b_layout)
    kb = -(-k // E.BLOCK)
    a_scale = E.block_scales(g, m, kb, scales_transposed)
    b_scale = E.block_scales(g, -(-n // E.BLOCK), kb, scales_transposed)
    return a, b, a_scale, b_scale


def check(lib, a, b, a_scale, b_scale, out_dtype=torch.bfloat16, config_index=-1, c=None):
    """Runs the emulated GEMM into a NaN-filled C and asserts it matches the reference everywhere."""
    m, n = a.shape[0], b.shape[0]
    if c is None:
        c = torch.full((m, n), float("nan"), dtype=out_dtype)
    err, stats = E.run(lib, a, b, a_scale, b_scale, c, config_index)
    assert err == "", err
    ref, bound = E.reference(a, b, a_scale, b_scale)
    assert ref.abs().mean() > 1.0, "test data must give a real signal"
    bad = E.mismatches(c, ref, bound)
    if bad.any():
        i, j = (int(x) for x in bad.nonzero()[0])
        pytest.fail(f"{int(bad.sum())}/{bad.numel()} outputs wrong; first C[{i},{j}] = {float(c[i, j])}, "
                    f"reference {float(ref[i, j])} (config {config_index}, stats {stats.launches} launches)")
    return c, stats


# ---- every tile configuration, split and unsplit, on a ragged problem -------------------------
def ragged_case(cfg):
    # Ragged in all three: M and N cross a partial tile, K ends inside a 128 block (208 = 128 + 80:
    # K-major rows stay 16-byte aligned, so the kernel reads them in place and masks the K edge), and
    # every split gets at least one K block.
    return cfg.block_m + 13, cfg.block_n // 2 + 9, 208 + E.BLOCK * (cfg.split_k - 1)


@pytest.mark.kernels_ci
def test_every_config_ragged(lib, configs):
    failures = []
    for cfg in configs:  # however many the launcher lists
        m, n, k = ragged_case(cfg)
        a, b, a_scale, b_scale = problem(100 + cfg.index, m, n, k)
        c = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
        err, stats = E.run(lib, a, b, a_scale, b_scale, c, cfg.index)
        ref, bound = E.reference(a, b, a_scale, b_scale)
        wrong = int(E.mismatches(c, ref, bound).sum()) if not err else -1
        # split-K adds exactly the reduce kernel; row-major A scales one expansion
        launches = (2 if cfg.split_k > 1 else 1) + scale_copies(a_scale)
        if err or wrong or stats.launches != launches:
            failures.append(f"{cfg}: error {err!r}, {wrong} wrong outputs, {stats.launches} launches")
    assert not failures, "\n".join(failures)


def test_all_test_configs_listed(configs):
    assert len({c.tile for c in configs}) >= 4 and {c.mfma_m for c in configs} == {16, 32}
    assert any(c.split_k > 1 for c in configs) and any(c.split_k == 1 for c in configs)


@pytest.mark.kernels_ci
def test_exact_tiles_many_blocks_grouped_order(lib, configs):
    # 3 x 4 output tiles of 64 x 64 with group_m 8 > tiles_m: one partial group.
    index = next(c.index for c in configs if c.block_m == 64 and c.block_n == 64 and c.split_k == 1)
    check(lib, *problem(7, 192, 256, 256), config_index=index)


def test_grouped_order_full_and_partial_groups(lib, configs):
    # Tile rows 3 > group_m 2: one full group and one partial group, each over 3 tile columns, 2 splits.
    index = next(c.index for c in configs if c.group_m == 2)
    cfg = configs[index]
    m, n = 2 * cfg.block_m + 44, 2 * cfg.block_n + 4
    check(lib, *problem(8, m, n, 256), config_index=index)


# ---- layouts -------------------------------------------------------------------------------------
LAYOUT_CASES = [
    # (a_layout, b_layout, m, n, k, staged operands): the kernel reads 16-byte aligned K-major and
    # M/N-major operands in place; anything else goes through the staging copy in workspace.
    ("k_major", "k_major", 64, 64, 256, 0),
    ("mn_major", "mn_major", 96, 80, 256, 0),    # challenge layout, transposed in registers
    ("mn_padded", "mn_padded", 50, 70, 200, 0),  # M/N-major in place with ragged rows and K
    ("mn_major", "k_major", 50, 72, 200, 2),     # column stride 50, K-major row stride 200: unaligned
    ("k_major", "mn_major", 40, 48, 336, 1),     # mixed orders: the M/N-major B is staged K-major
    ("padded", "strided", 33, 65, 160, 1),       # padded rows in place; byte-strided B staged
    ("strided", "padded", 17, 130, 130, 1),      # two N scale blocks, K just past one block
]
UNSPLIT_CONFIG = 2  # 64 x 64 tile, no split: workspace is used by staging only


@pytest.mark.kernels_ci
@pytest.mark.parametrize("a_layout,b_layout,m,n,k,staged", LAYOUT_CASES)
def test_layouts_heuristic(lib, a_layout, b_layout, m, n, k, staged):
    check(lib, *problem(11, m, n, k, a_layout=a_layout, b_layout=b_layout))


@pytest.mark.parametrize("a_layout,b_layout,m,n,k,staged", LAYOUT_CASES)
@pytest.mark.parametrize("index", [0, UNSPLIT_CONFIG, 6])
def test_layouts_forced_configs(lib, configs, a_layout, b_layout, m, n, k, staged, index):
    a, b, a_scale, b_scale = problem(12, m, n, k, a_layout=a_layout, b_layout=b_layout)
    _, stats = check(lib, a, b, a_scale, b_scale, config_index=index)
    if index == UNSPLIT_CONFIG:
        assert configs[index].split_k == 1
        # The in-place paths must really be taken (else the tests above would not reach them).
        copies = staged + scale_copies(a_scale)
        assert stats.launches == 1 + copies and stats.workspace_requests == (copies > 0), stats.launches


@pytest.mark.kernels_ci
@pytest.mark.parametrize("m,column", [(68, 68), (70, 72), (70, 70)],
                         ids=["vector-loads", "vector-loads-ragged", "scalar-unaligned-columns"])
@pytest.mark.parametrize("index", [0, 2], ids=["mfma32", "mfma16"])
def test_column_major_a_scales(lib, m, column, index):
    # As stored column-major (the challenge layout): with 16-byte aligned columns the kernel reads
    # 4 rows per load (clamped at M), otherwise one at a time.
    a, b, a_scale, b_scale = problem(22, m, 96, 384)
    storage = torch.full((a_scale.shape[1], column), float("nan"))
    a_scale_cm = storage[:, :m].copy_(a_scale.t()).t()
    assert a_scale_cm.stride() == (1, column)
    check(lib, a, b, a_scale_cm, b_scale, torch.float32, config_index=index)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("a_layout,b_layout,m,n,k,staged", LAYOUT_CASES)
def test_no_reads_before_tensors(lib, a_layout, b_layout, m, n, k, staged):
    # The other guard side: every tensor and workspace request starts right after an unmapped page.
    E.set_guard_side(lib, E.GUARD_BEFORE_START)
    try:
        a, b, a_scale, b_scale = problem(23, m, n, k, a_layout=a_layout, b_layout=b_layout, scales_transposed=True)
        check(lib, a, b, a_scale, b_scale, config_index=UNSPLIT_CONFIG)
        check(lib, a, b, a_scale, b_scale, config_index=6)
    finally:
        E.set_guard_side(lib, E.GUARD_AFTER_END)


def test_transposed_scales_and_padded_c(lib):
    a, b, a_scale, b_scale = problem(13, 70, 140, 300, scales_transposed=True)
    sentinel = 12345.0
    storage = torch.full((70, 160), sentinel, dtype=torch.float32)
    c = storage[:, :140].fill_(float("nan"))
    check(lib, a, b, a_scale, b_scale, c=c)
    assert (storage[:, 140:] == sentinel).all(), "the kernel wrote into C's row padding"


# ---- formats -------------------------------------------------------------------------------------
@pytest.mark.kernels_ci
@pytest.mark.parametrize("a_dtype,b_dtype", [(FNUZ, FNUZ), (FN, FN), (FN, FNUZ), (FNUZ, FN)],
                         ids=["fnuz-fnuz", "fn-fn", "fn-fnuz", "fnuz-fn"])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_formats(lib, a_dtype, b_dtype, out_dtype):
    check(lib, *problem(14, 48, 80, 256, a_dtype=a_dtype, b_dtype=b_dtype), out_dtype=out_dtype)


def test_fn_extremes_fold(lib):
    # e4m3fn values beyond the fnuz range (up to 448) and fn -0 (0x80, which is NaN in fnuz) must
    # survive the fold: bytes read at half value, scale doubled, -0 read as +0.
    g = torch.Generator().manual_seed(15)
    a = (torch.randn(64, 256, generator=g) * 150).clamp(-448, 448).to(FN)
    b = (torch.randn(64, 256, generator=g) * 150).clamp(-448, 448).to(FN)
    a.view(torch.uint8)[::3, ::5] = 0x80
    b.view(torch.uint8)[1::4, 2::7] = 0x80
    a_scale = E.block_scales(g, 64, 2) * 1e-2
    b_scale = E.block_scales(g, 1, 2) * 1e-2
    check(lib, a, b, a_scale, b_scale, out_dtype=torch.float32)


@pytest.mark.parametrize("dtype,nan_byte", [(FNUZ, 0x80), (FN, 0x7F)], ids=["fnuz", "fn"])
@pytest.mark.parametrize("index", [-1, 7], ids=["heuristic", "split4"])
def test_nan_stays_in_its_row(lib, dtype, nan_byte, index):
    # One NaN in A[5, 300] (K block 2) must poison exactly row 5 of C: nothing leaks across lanes,
    # tiles or splits, and the fn fold keeps NaN a NaN.
    a, b, a_scale, b_scale = problem(21, 40, 72, 512, a_dtype=dtype)
    clean = a.clone()
    a.view(torch.uint8)[5, 300] = nan_byte
    c = torch.full((40, 72), float("nan"), dtype=torch.float32)
    err, _ = E.run(lib, a, b, a_scale, b_scale, c, index)
    assert err == "", err
    assert c[5].isnan().all()
    rest = torch.arange(40) != 5
    ref, bound = E.reference(clean, b, a_scale, b_scale)
    assert not E.mismatches(c[rest], ref[rest], bound[rest]).any()


# ---- determinism -----------------------------------------------------------------------------
@pytest.mark.kernels_ci
@pytest.mark.parametrize("index", [-1, 4, 7], ids=["heuristic", "split2", "split4"])
def test_bitwise_deterministic(lib, index):
    a, b, a_scale, b_scale = problem(16, 40, 72, 520)
    first, _ = check(lib, a, b, a_scale, b_scale, torch.float32, config_index=index)
    second, _ = check(lib, a, b, a_scale, b_scale, torch.float32, config_index=index)
    assert torch.equal(first.view(torch.int32), second.view(torch.int32))


def test_split_k_matches_unsplit(lib, configs):
    a, b, a_scale, b_scale = problem(17, 40, 64, 512)  # 4 K blocks: 4 splits of one
    for index in (3, 7):  # same tile, 1 and 4 splits
        assert configs[index].tile == configs[3].tile
    unsplit, _ = check(lib, a, b, a_scale, b_scale, torch.float32, config_index=3)
    split, stats = check(lib, a, b, a_scale, b_scale, torch.float32, config_index=7)
    assert stats.launches == 2 + scale_copies(a_scale) and stats.workspace_bytes >= 4 * 40 * 64 * 4
    # Different summation order, same math: close, and each is within tolerance of the reference.
    torch.testing.assert_close(split, unsplit, rtol=1e-5, atol=1e-4)


# ---- the heuristic path ------------------------------------------------------------------------
def test_heuristic_picks_a_listed_tile(lib):
    a, b, a_scale, b_scale = problem(18, 64, 64, 256)
    c = torch.empty(64, 64, dtype=torch.bfloat16)
    tile, split_k, group_m = E.select(lib, a, b, a_scale, b_scale, c)
    assert 0 <= tile < 4 and split_k >= 1 and group_m >= 1
    check(lib, a, b, a_scale, b_scale)


def test_every_planned_config_runs(lib, configs):
    # Each distinct config the planner picks for the tuned shapes (splits up to 16 included) on a scaled-down problem whose
    # K gives every split at least one block and ends ragged, and whose M and N cross partial tiles.
    block = {c.tile: (c.block_m, c.block_n) for c in configs}
    chosen = sorted({row[3:] for row in E.tuned(lib)})
    assert chosen, "rocm_planner.h lists no tuned shapes"
    for tile, split_k, group_m in chosen:
        block_m, block_n = block[tile]
        m, n, k = 2 * block_m + 5, block_n + 7, E.BLOCK * split_k + 64
        a, b, a_scale, b_scale = problem(30 + split_k, m, n, k)
        c = torch.full((m, n), float("nan"), dtype=torch.float32)
        err, _ = E.run_config(lib, a, b, a_scale, b_scale, c, tile, split_k, group_m)
        assert err == "", f"config {(tile, split_k, group_m)}: {err}"
        ref, bound = E.reference(a, b, a_scale, b_scale)
        bad = E.mismatches(c, ref, bound)
        assert not bad.any(), f"config {(tile, split_k, group_m)}: {int(bad.sum())} wrong outputs"


# ---- the emulator catches a wrong lane layout -----------------------------------------------------
@pytest.mark.kernels_ci
@pytest.mark.parametrize("mfma_m", [32, 16])
def test_wrong_lane_map_fails(gemm_libs, configs, mfma_m):
    index = next(c.index for c in configs if c.mfma_m == mfma_m and c.split_k == 1)
    a, b, a_scale, b_scale = problem(19, 64, 64, 256)
    check(gemm_libs["gemm"], a, b, a_scale, b_scale, torch.float32, config_index=index)  # the same data passes
    c = torch.full((64, 64), float("nan"), dtype=torch.float32)
    err, _ = E.run(gemm_libs["gemm_wrong_map"], a, b, a_scale, b_scale, c, index)
    assert err == ""
    ref, bound = E.reference(a, b, a_scale, b_scale)
    wrong = E.mismatches(c, ref, bound)
    assert wrong.float().mean() > 0.5, f"wrong lane map went unnoticed ({int(wrong.sum())} mismatches)"


# ---- refused arguments come back as messages naming the argument ---------------------------------
def test_launcher_refusals_name_the_argument(lib):
    a, b, a_scale, b_scale = problem(20, 32, 32, 128)
    c = torch.zeros(32, 64, dtype=torch.bfloat16)[:, ::2]  # c_stride_n == 2
    err, stats = E.run(lib, a, b, a_scale, b_scale, c)
    assert "c" in err and "stride" in err and "2" in err, err
    assert stats.launches == 0
