"""CPU-side checks of the CUDA grouped GEMM's schedule and plan (gemm/cuda/grouped_scheduler.h and
grouped_planner.h, plain C++).

Compiles tests/cuda/grouped_probe.cpp with the host compiler. The probe walks every CTA's units on seeded
random and hand-picked routings (contiguous and masked, wrong inputs included) and checks that each row
of a group is stored exactly once per N block by that group's tile, that no other row is, and that no
tile is spent without a row; and it prints the grouped plan of MoE shapes.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cuda_shim import build_host_probe

from benchmarks.shapes import H200_SMS

# DeepSeek-V3 experts (256, top-8): gate-up and down projections at 64 / 512 / 1024 / 4096 tokens.
MOE_SHAPES = [(t * 8, n, k, 256) for t in (64, 512, 1024, 4096) for n, k in ((4096, 7168), (7168, 2048))]


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> Path:
    return build_host_probe("grouped_probe", tmp_path_factory.mktemp("probe"))


@pytest.mark.kernels_ci
def test_schedule_stores_every_group_row_once(probe):
    run = subprocess.run([str(probe), "--walk"], capture_output=True, text=True)
    assert run.returncode == 0 and " 0 failures" in run.stdout, run.stdout[-4000:] + run.stderr[-2000:]


def grouped_plans(probe, shapes, expected_rows=0):
    text = "\n".join(f"{m} {n} {k} {e} {H200_SMS} {expected_rows}" for m, n, k, e in shapes)
    out = subprocess.run([str(probe), "--plan"], input=text, capture_output=True, text=True, check=True).stdout
    assert "FAIL" not in out, out
    return [tuple(int(v) for v in line.split()) for line in out.strip().splitlines()]


@pytest.mark.kernels_ci
def test_decode_plans_use_64_row_tiles(probe):
    """At most 16 rows a group (decode): 64-row tiles, B streamed evict-first; from 32 rows on, 128+ rows."""
    for (m, groups, _config, block_m, grid, _pairs, evict_first, _claims, _cluster_n), (_, _, k, _) in zip(
        grouped_plans(probe, MOE_SHAPES), MOE_SHAPES
    ):
        assert 1 <= grid <= H200_SMS
        if -(-m // groups) <= 16:
            assert block_m == 64 and evict_first == 1, (m, k)
        else:
            assert block_m >= 128 and evict_first == 0, (m, k)


@pytest.mark.kernels_ci
def test_expected_rows_hint_picks_the_tiles(probe):
    """The masked layout's rows / E is max_m: 256 plans 128+-row tiles, unless the caller's expected_m says
    a decode batch (2 rows an expert) or prefill (1024)."""
    masked = [(256 * 256, 4096, 7168, 256)]
    (plain,) = grouped_plans(probe, masked)
    (decode,) = grouped_plans(probe, masked, expected_rows=2)
    (prefill,) = grouped_plans(probe, masked, expected_rows=1024)
    assert plain[3] == 128 and decode[3] == 64 and decode[6] == 1 and prefill[3] == 192


@pytest.mark.kernels_ci
def test_grid_never_exceeds_the_tiles(probe):
    (_, _, _, block_m, grid, _, _, _, _), = grouped_plans(probe, [(3, 192, 192, 8)])
    assert block_m == 64 and grid == 6  # at most 3 groups with a tile, 2 N tiles each


@pytest.mark.kernels_ci
def test_only_single_cta_192_row_plans_claim_tiles(probe):
    """Claimed tiles where they were measured faster (192x128 grouped plans on single CTAs), the static walk
    elsewhere: a cluster's CTAs must run the same units, which the static walk gives them."""
    shapes = MOE_SHAPES + [(32768 * 8, 4096, 7168, 256), (32768 * 8, 7168, 2048, 256), (4 * 8192, 4096, 7168, 4),
                           (4096 * 8, 4096, 1536, 128)]
    plans = grouped_plans(probe, shapes)
    assert any(p[-2] for p in plans) and not all(p[-2] for p in plans)
    for _m, _groups, _config, block_m, _grid, _pairs, _evict_first, claims, cluster_n in plans:
        assert claims == (block_m == 192 and cluster_n == 1), (block_m, claims, cluster_n)


@pytest.mark.kernels_ci
def test_cluster_plans_run_whole_clusters(probe):
    """Groups of 1024+ rows at K >= 4096 run 192x128 tiles in 2-CTA clusters (A multicast); the grid is whole
    clusters, within the SMs and the cluster tiles (two N blocks each)."""
    shapes = [(4 * 8192, 4096, 7168, 4), (256 * 1024, 4096, 7168, 256), (2 * 8192, 192, 4096, 2)]
    for (m, n, _k, groups), (_, _, _config, block_m, grid, _, _, claims, cluster_n) in zip(
        shapes, grouped_plans(probe, shapes)
    ):
        assert block_m == 192 and cluster_n == 2 and not claims, (m, n)
        assert grid % 2 == 0 and grid <= H200_SMS, (m, n, grid)
        cluster_tiles = (-(-m // 192) + groups) * -(-n // 256)
        assert grid <= 2 * cluster_tiles, (m, n, grid)
