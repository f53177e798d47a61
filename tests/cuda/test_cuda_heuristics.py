"""CPU-side checks of the CUDA tile heuristic (gemm/cuda/gemm_heuristics.h, plain C++).

Compiles tests/cuda/plan_probe.cpp with the host compiler and asks it for the plan of every shape
in cuda_shapes.CONFIG_SHAPES: together they must reach every tile configuration the package
instantiates, and a split-K plan, so that the GPU tests exercise every kernel that ships.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from cuda_shapes import CONFIG_SHAPES, H200_SMS, RAGGED_SHAPES, TMA_SCALE_SHAPE

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> Path:
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None:
        pytest.fail("no host C++ compiler (g++/c++/clang++) to compile the heuristics probe")
    exe = tmp_path_factory.mktemp("probe") / "plan_probe"
    subprocess.run(
        [cxx, "-std=c++17", "-O1", f"-I{REPO_ROOT}", str(Path(__file__).parent / "plan_probe.cpp"), "-o", str(exe)],
        check=True,
    )
    return exe


def plans(probe: Path, shapes) -> tuple[int, list[tuple[int, ...]]]:
    text = "\n".join(f"{m} {n} {k}" for m, n, k in shapes)
    out = subprocess.run([str(probe), str(H200_SMS)], input=text, capture_output=True, text=True, check=True).stdout
    lines = out.strip().splitlines()
    num_configs = int(lines[0].split()[1])
    return num_configs, [tuple(int(v) for v in line.split()) for line in lines[1:]]


def test_config_shapes_cover_every_tile_config(probe):
    num_configs, rows = plans(probe, CONFIG_SHAPES)
    assert len(rows) == len(CONFIG_SHAPES)
    picked = {r[3] for r in rows}
    missing = sorted(set(range(num_configs)) - picked)
    assert not missing, f"no shape in CONFIG_SHAPES selects tile configs {missing}; plans: {rows}"
    assert any(r[6] > 1 for r in rows), "no shape in CONFIG_SHAPES selects a split-K plan"


def test_plans_are_valid(probe):
    _, rows = plans(probe, CONFIG_SHAPES + RAGGED_SHAPES + [(16384, 16384, 128), (1, 32768, 16384)])
    for m, n, k, cfg, bm, bn, splits, grid in rows:
        assert bn % 8 == 0 and bm % 64 == 0 and bn <= 256, (m, n, k, bm, bn)
        assert 1 <= grid <= H200_SMS, (m, n, k, grid)
        assert 1 <= splits <= -(-k // 128), (m, n, k, splits)


def test_tma_scale_shape_uses_a_128_row_tile(probe):
    _, rows = plans(probe, [TMA_SCALE_SHAPE])
    assert rows[0][4] == 128, f"{TMA_SCALE_SHAPE} no longer plans a 128-row tile: {rows[0]}"
