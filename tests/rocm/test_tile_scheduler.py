"""gemm/rocm_tile_scheduler.h on the host (g++, the header is plain constexpr C++): every (tile, split) of
a grid is computed by exactly one block, splits cover K exactly, and the blocks one XCD runs (block
ids congruent modulo the XCD count, in dispatch order) take consecutive tiles of the group_m order."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.kernels_ci

REPO = Path(__file__).resolve().parents[2]

# Reads "tiles_m tiles_n group_m xcds k_blocks_per_split splits k_blocks" per case; prints, per block
# (x fastest, then z), "x z m n kb_begin kb_end", and "end" after each case.
PROGRAM = r"""
#include <cstdio>
#include "gemm/rocm_tile_scheduler.h"
int main() {
  using namespace gemm::rocm;
  int tm, tn, gm, xcds, per, splits;
  long long kb;
  while (std::scanf("%d %d %d %d %d %d %lld", &tm, &tn, &gm, &xcds, &per, &splits, &kb) == 7) {
    const TileSchedule s{tm, tn, gm, xcds, per};
    for (int z = 0; z < splits; ++z)
      for (int x = 0; x < tm * tn; ++x) {
        const TileWork w = schedule_tile(s, x, z, kb);
        std::printf("%d %d %d %d %lld %lld\n", x, z, w.m, w.n, (long long)w.kb_begin, (long long)w.kb_end);
      }
    std::printf("end\n");
  }
}
"""

TILES_M = (1, 2, 3, 5, 8, 13, 24)
TILES_N = (1, 3, 7, 8, 12, 19)
CASES = [(tm, tn, gm, xcds, per, splits, kb)
         for tm, tn in itertools.product(TILES_M, TILES_N)
         for gm, xcds in ((1, 8), (2, 8), (8, 8), (3, 6), (8, 1))
         for per, splits, kb in ((56, 1, 56), (3, 4, 11))]


def grouped_order(tiles_m: int, tiles_n: int, group_m: int) -> list[tuple[int, int]]:
    """The tile order the XCD renumbering feeds: group_m tile rows sweep N, column by column."""
    order = []
    for first in range(0, tiles_m, group_m):
        rows = min(group_m, tiles_m - first)
        order += [(first + i, n) for n in range(tiles_n) for i in range(rows)]
    return order


def check_case(case, rows) -> None:
    tiles_m, tiles_n, group_m, xcds, per, splits, k_blocks = case
    tiles = tiles_m * tiles_n
    seen = {}
    for x, z, m, n, kb_begin, kb_end in rows:
        assert 0 <= m < tiles_m and 0 <= n < tiles_n, f"{case}: block {x} got tile {(m, n)}"
        assert (m, n, z) not in seen, f"{case}: tile {(m, n)} split {z} computed twice"
        seen[(m, n, z)] = x
        assert (kb_begin, kb_end) == (z * per, min(z * per + per, k_blocks)), f"{case}: split {z} K range"
    assert len(seen) == tiles * splits, f"{case}: {tiles * splits - len(seen)} (tile, split) never computed"
    order = grouped_order(tiles_m, tiles_n, group_m)
    position = {tile: i for i, tile in enumerate(order)}
    for z in range(splits):
        tile_of = {x: (m, n) for x, zz, m, n, *_ in rows if zz == z}
        expected_start = 0
        for xcd in range(xcds):
            blocks = range(xcd, tiles, xcds)  # what XCD xcd runs of this split, in dispatch order
            positions = [position[tile_of[x]] for x in blocks]
            assert positions == list(range(expected_start, expected_start + len(positions))), (
                f"{case}: XCD {xcd} of split {z} runs grouped positions {positions}, not a consecutive run")
            expected_start += len(positions)


def run_schedule(tmp_path: Path, cases) -> list[list[tuple[int, ...]]]:
    compiler = shutil.which("g++") or shutil.which("clang++-19")
    if compiler is None:
        message = "no C++ compiler (g++ or clang++-19) for the tile scheduler's host test"
        if os.environ.get("CI") == "true":  # in CI a test that did not run must not look like one that passed
            pytest.fail(message)
        pytest.skip(message)
    src, exe = tmp_path / "schedule.cpp", tmp_path / "schedule"
    src.write_text(PROGRAM)
    subprocess.run([compiler, "-std=c++17", "-Wall", "-Werror", "-I", str(REPO), str(src), "-o", str(exe)], check=True)
    stdin = "".join(" ".join(map(str, c)) + "\n" for c in cases)
    out = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, check=True).stdout
    results, current = [], []
    for line in out.splitlines():
        if line == "end":
            results.append(current)
            current = []
        else:
            current.append(tuple(map(int, line.split())))
    return results


def test_every_tile_once_and_each_xcd_runs_consecutive_tiles(tmp_path):
    results = run_schedule(tmp_path, CASES)
    assert len(results) == len(CASES)
    assert any(c[0] * c[1] % 8 for c in CASES), "grids that are not a multiple of 8 blocks must be covered"
    for case, rows in zip(CASES, results):
        check_case(case, rows)


def test_the_check_catches_a_wrong_schedule(tmp_path):
    # The checker itself can fail: the plain round-robin order (no XCD renumbering) and a duplicated tile.
    case = (5, 7, 2, 8, 56, 1, 56)
    rows = run_schedule(tmp_path, [case])[0]
    order = grouped_order(5, 7, 2)
    round_robin = [(x, 0, *order[x], 0, 56) for x in range(35)]
    with pytest.raises(AssertionError, match="not a consecutive run"):
        check_case(case, round_robin)
    duplicated = [rows[0], rows[0], *rows[2:]]
    with pytest.raises(AssertionError, match="computed twice"):
        check_case(case, duplicated)
