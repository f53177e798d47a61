"""LDS bank conflicts of every LDS access the gfx942 GEMM kernel makes, computed from the kernel's own
address functions (gemm/rocm_lds_layout.h, which the kernel calls for every LDS address): for every
tile of kTiles, every wavefront, every fragment read (ds_read_b128) and every stage write (K-major
ds_write_b128, M/N-major ds_write_b64/b32), the lanes that the LDS serves in one cycle must touch each of
the 32 banks at most once (no padding: the XOR swizzle alone must do it). The writes of a stage must
also cover every byte of it exactly once. A negative control removes the swizzle and must see
conflicts, so the check can fail."""

from __future__ import annotations

import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

import emu_build

pytestmark = [pytest.mark.rocm_emu, pytest.mark.kernels_ci]

BANKS = 32
BANK_BYTES = 4
LDS_CYCLE_BYTES = BANKS * BANK_BYTES  # the lanes of one LDS cycle move at most 128 bytes
WAVE = 64
SWIZZLE = "return low ^ spread;"  # the swizzle's last line in rocm_lds_layout.h (the negative control removes it)

# Prints one line per access of one wavefront: "tile operand kind width stage_bytes addr0 ... addr63".
PROGRAM = r"""
#include <cstdio>
#include <utility>
#include "gemm/rocm_lds_layout.h"
#include "gemm/rocm_tile_configs.h"
using namespace gemm;
using namespace gemm::rocm;

template <int kTile, int kRows, bool kIsA>
void operand(const char* name, int rows_per_wave) {
  constexpr TileShape t = kTiles[kTile];
  using Access = StageAccess<kRows, t.stage_k, t.threads()>;
  const int stage_bytes = kRows * t.stage_k;
  for (int wave = 0; wave < t.threads() / cdna3::kWaveSize; ++wave) {
    const int w = kIsA ? wave % t.warps_m : wave / t.warps_m;
    auto fragments = [&](auto mfma) {
      using Mfma = decltype(mfma);
      using Fragment = FragmentAccess<Mfma, t.stage_k>;
      for (int sub = 0; sub < rows_per_wave / Mfma::kM; ++sub)
        for (int pair = 0; pair < Fragment::kPairs; ++pair) {
          std::printf("%d %s read 16 %d", kTile, name, stage_bytes);
          for (int lane = 0; lane < cdna3::kWaveSize; ++lane)
            std::printf(" %d", kIsA ? Fragment::a_read(lane, w * rows_per_wave + sub * Mfma::kM, pair)
                                    : Fragment::b_read(lane, w * rows_per_wave + sub * Mfma::kN, pair));
          std::printf("\n");
        }
    };
    if (t.mfma == MfmaKind::k32x32x16) fragments(cdna3::Mfma32x32x16{}); else fragments(cdna3::Mfma16x16x32{});
    for (int i = 0; i < Access::kChunks; ++i) {
      std::printf("%d %s k_major_write 16 %d", kTile, name, stage_bytes);
      for (int lane = 0; lane < cdna3::kWaveSize; ++lane) std::printf(" %d", Access::k_major_write(wave * cdna3::kWaveSize + lane, i));
      std::printf("\n");
    }
  }
  // M/N-major writes: the waves that stage this operand (mn_major_stage_threads), as the kernel numbers them.
  using MnAccess = StageAccess<kRows, t.stage_k, t.mn_major_stage_threads()>;
  for (int wave = 0; wave < t.mn_major_stage_threads() / cdna3::kWaveSize; ++wave)
    for (int r = 0; r < MnAccess::kMnRows; ++r) {
      std::printf("%d %s mn_major_write %d %d", kTile, name, MnAccess::kPieceK, stage_bytes);
      for (int lane = 0; lane < cdna3::kWaveSize; ++lane) std::printf(" %d", MnAccess::mn_major_write(wave * cdna3::kWaveSize + lane, r));
      std::printf("\n");
    }
}

template <int kTile>
void tile() {
  constexpr TileShape t = kTiles[kTile];
  operand<kTile, t.block_m, true>("A", t.block_m / t.warps_m);
  operand<kTile, t.block_n, false>("B", t.block_n / t.warps_n);
}

template <size_t... I>
void all(std::index_sequence<I...>) { (tile<static_cast<int>(I)>(), ...); }

int main() { all(std::make_index_sequence<kNumTiles>()); }
"""


def accesses(tmp: Path, source_root: Path) -> list[dict]:
    src, exe = tmp / "lds_banks.cpp", tmp / "lds_banks"
    src.write_text(PROGRAM)
    subprocess.run(["g++", "-std=c++20", "-I", str(source_root), str(src), "-o", str(exe)], check=True)
    out = []
    for line in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines():
        f = line.split()
        out.append({"tile": int(f[0]), "operand": f[1], "kind": f[2], "width": int(f[3]), "stage_bytes": int(f[4]),
                    "addresses": list(map(int, f[5:]))})
    assert out and all(len(a["addresses"]) == WAVE for a in out)
    return out


def conflict_degree(addresses: list[int], width: int) -> int:
    """The most distinct 4-byte words any bank serves in one LDS cycle (1: conflict-free). A cycle
    serves 128 bytes: 8 lanes of a 16-byte access, 16 of an 8-byte one, 32 of narrower ones."""
    lanes = LDS_CYCLE_BYTES // width if width >= 8 else BANKS
    worst = 1
    for first in range(0, WAVE, lanes):
        words = defaultdict(set)
        for address in addresses[first:first + lanes]:
            for word in range(address // BANK_BYTES, (address + width - 1) // BANK_BYTES + 1):
                words[word % BANKS].add(word)
        worst = max(worst, max(len(w) for w in words.values()))
    return worst


def worst_conflicts(found: list[dict]) -> dict[tuple, int]:
    worst: dict[tuple, int] = {}
    for a in found:
        key = (a["tile"], a["operand"], a["kind"])
        worst[key] = max(worst.get(key, 1), conflict_degree(a["addresses"], a["width"]))
    return worst


@pytest.fixture(scope="module")
def kernel_accesses(tmp_path_factory) -> list[dict]:
    return accesses(tmp_path_factory.mktemp("lds_banks"), emu_build.SOURCE_ROOT)


def test_every_lds_access_is_conflict_free(kernel_accesses):
    kinds = {(a["tile"], a["operand"], a["kind"]) for a in kernel_accesses}
    tiles = {a["tile"] for a in kernel_accesses}
    assert len(kinds) == 3 * 2 * len(tiles), "every tile: fragment reads, K-major and M/N-major writes of A and B"
    conflicted = {k: v for k, v in worst_conflicts(kernel_accesses).items() if v > 1}
    assert not conflicted, f"(tile, operand, access) -> words one bank serves in one cycle: {conflicted}"


@pytest.mark.parametrize("kind", ["k_major_write", "mn_major_write"])
def test_stage_writes_cover_the_stage_once(kernel_accesses, kind):
    by_stage = defaultdict(list)
    for a in kernel_accesses:
        if a["kind"] == kind:
            by_stage[(a["tile"], a["operand"], a["stage_bytes"])] += [(x, a["width"]) for x in a["addresses"]]
    for (tile, operand, size), writes in by_stage.items():
        covered = sorted(b for x, width in writes for b in range(x, x + width))
        assert covered == list(range(size)), f"tile {tile} {operand} {kind}: not every byte of the stage once"


def test_negative_control_without_swizzle(tmp_path):
    """The same check on a copy of the layout header whose swizzle is removed must find conflicts."""
    root = tmp_path / "src"
    (root / "gemm").mkdir(parents=True)
    for header in ("rocm_lds_layout.h", "rocm_tile_configs.h", "cdna3_mfma_layout.h", "gemm_contract.h"):
        (root / "gemm" / header).write_text((emu_build.SOURCE_ROOT / "gemm" / header).read_text())
    layout = root / "gemm" / "rocm_lds_layout.h"
    text = layout.read_text()
    assert text.count(SWIZZLE) == 1, "the swizzle's return statement moved: update SWIZZLE"
    layout.write_text(text.replace(SWIZZLE, "return 0 * (low ^ spread);"))
    worst = worst_conflicts(accesses(tmp_path, root))
    assert max(v for (_, _, kind), v in worst.items() if kind == "read") >= 4
    assert max(v for (_, _, kind), v in worst.items() if kind == "mn_major_write") >= 4
