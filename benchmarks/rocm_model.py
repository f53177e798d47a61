#!/usr/bin/env python3
"""MI300X time model of a gfx942 GEMM kernel built from its compiled assembly, calibrated on RadeonFlow.

No MI300X is available to measure on. The model reads what the compiler produced, not what the source
intends: each kernel instance is compiled with clang-19 (-O3, device-only assembly, the flags of
scripts/rocm/compile_check.py) and found by its demangled name (llvm-cxxfilt-19); its main loop (the
backward branch whose body holds the most MFMAs) is cut out and, per iteration, counted by instruction
class (MFMA cycles from AMD's calculator data in tests/rocm/golden; VALU, SALU, LDS, global memory,
waits, barriers) and timed for one wave by llvm-mca-19 (-mcpu=gfx942; one mca unit = 4 clocks,
reference/rocm-static-model.md). Occupancy comes from the compiler's VGPR/AGPR/LDS figures. When the
loop has runtime branches, the fastest and the slowest path through its body (most MFMAs first) are
both analysed.

The time formula is not here: it is `estimate_seconds` in gemm/rocm_planner.h, the planner's own, run
through a small g++ program (ESTIMATE_PROGRAM) for our kernel and for RadeonFlow's (its figures passed
in). Its two free constants, LATENCY (per K step, what llvm-mca cannot see: HBM/L2 latency behind the
one-stage prefetch, barrier skew) and the per-launch gap, are fitted here on RadeonFlow's measured
MI300X times (the peers folder: sources, compile script, MEASURED.md). Only when that fit is within
CALIBRATION_BOUND of every measured shape are our kernel's predictions printed as calibrated.

--write-costs writes the figures of every dense instance (per tile, storage order, B scale format and
fold: each main loop differs) and the fitted constants into gemm/rocm_loop_costs.h, which the planner
reads for the instance a call runs; tests/rocm/test_rocm_model.py fails when that header no longer
matches the assembly.

Usage: python3 benchmarks/rocm_model.py [--out benchmarks/results/rocm_model.md] [--write-costs]
"""
from __future__ import annotations

import argparse
import itertools
import math
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the repository root: benchmarks.shapes
from benchmarks.shapes import CHALLENGE, LAYOUT_CHALLENGE, LAYOUT_KMAJOR  # noqa: E402
sys.path.insert(0, str(REPO / "tests" / "rocm" / "golden"))
import golden_lanes  # noqa: E402  (AMD's calculator data: MFMA cycles)

COSTS_HEADER = REPO / "gemm" / "rocm_loop_costs.h"
WRITE_COMMAND = "python3 benchmarks/rocm_model.py --write-costs"

# ---- MI300X occupancy facts (CDNA3 ISA guide) ------------------------------------------------------
SIMDS_PER_CU = 4
LDS_PER_CU = 64 * 1024
VGPRS_PER_SIMD_LANE = 512  # unified VGPR+AGPR file per lane on CDNA3
VGPR_GRANULE = 8
MAX_WAVES_PER_SIMD = 8
WAVE = 64
MCA_CLOCKS_PER_UNIT = 4  # SISchedule.td: latency values are 1/(ops per cycle)/4
SCALE_BLOCK = 128
CALIBRATION_BOUND = 0.20
LATENCY_GRID = range(0, 20001, 100)            # clocks per K step
LAUNCH_GRID_US = [x / 2 for x in range(0, 41)]  # µs per launch

MFMA_CYCLES = {name: golden_lanes.instruction(name)["cycles"] for name in golden_lanes.PREFIXES}
MFMA_MACS = {name: math.prod(golden_lanes.instruction(name)[d] for d in "MNK") for name in golden_lanes.PREFIXES}

CLANG = os.environ.get("CLANGXX", "clang++-19")
MCA = os.environ.get("LLVM_MCA", "llvm-mca-19")
CXXFILT = os.environ.get("LLVM_CXXFILT", "llvm-cxxfilt-19")
HIP_FLAGS = ["-x", "hip", "-std=c++20", "-O3", "--offload-arch=gfx942", "--cuda-device-only", "-S",
             "-Rpass-analysis=kernel-resource-usage"]

# Prints kTiles: "index block_m block_n waves".
TILES_PROGRAM = r"""
#include <cstdio>
#include "gemm/rocm_tile_configs.h"
int main() {
  using namespace gemm::rocm;
  for (int i = 0; i < kNumTiles; ++i)
    std::printf("%d %d %d %d\n", i, kTiles[i].block_m, kTiles[i].block_n, kTiles[i].warps_m * kTiles[i].warps_n);
}
"""

# Reads commands from stdin, one per line:
#   estimate <InstanceCost: block_m block_n waves_per_simd blocks_per_cu> <LoopCost: k_steps mca_clocks
#            mfma_cycles other_instructions> <ModelConstants: latency_clocks launch_seconds>
#            <Staging: bytes launches> m n k split   -> estimate_seconds on an MI300X
#   plan m n k major b_scale fold  -> select_config's tile and split on an MI300X for that instance variant
#                  (OperandMajor, ScaleFormat, 0/1), its estimate on the fast and slow path, and how many
#                  workgroups of that tile are resident at once
ESTIMATE_PROGRAM = r"""
#include <cstdio>
#include <cstring>
#include "gemm/rocm_planner.h"
int main() {
  using namespace gemm::rocm;
  char command[16];
  long long m, n, k;
  while (std::scanf("%15s", command) == 1) {
    if (std::strcmp(command, "estimate") == 0) {
      InstanceCost inst{};
      ModelConstants c{};
      Staging staging{};
      int split;
      if (std::scanf("%d %d %d %d %d %lf %d %d %lf %lf %lf %d %lld %lld %lld %d", &inst.block_m, &inst.block_n,
                     &inst.waves_per_simd, &inst.blocks_per_cu, &inst.fast.k_steps, &inst.fast.mca_clocks,
                     &inst.fast.mfma_cycles, &inst.fast.other_instructions, &c.latency_clocks, &c.launch_seconds,
                     &staging.bytes, &staging.launches, &m, &n, &k, &split) != 16)
        return 1;
      std::printf("%.9e\n", estimate_seconds(inst, inst.fast, m, n, k, split, kMi300xCuCount, c, staging));
    } else if (int major, b_scale, fold;
               std::strcmp(command, "plan") == 0 && std::scanf("%lld %lld %lld %d %d %d", &m, &n, &k, &major, &b_scale, &fold) == 6) {
      const InstanceVariant variant{static_cast<OperandMajor>(major), static_cast<gemm::ScaleFormat>(b_scale), fold != 0};
      const RocmConfig config = select_config(m, n, k, variant, kMi300xCuCount);
      const InstanceCost& inst = loop_costs(variant, config.tile);
      std::printf("%d %d %.9e %.9e %d\n", config.tile, config.split_k,
                  estimate_seconds(inst, inst.fast, m, n, k, config.split_k, kMi300xCuCount, kModelConstants),
                  estimate_seconds(inst, inst.slow, m, n, k, config.split_k, kMi300xCuCount, kModelConstants),
                  kMi300xCuCount * inst.blocks_per_cu);
    }
  }
}
"""


# ---- the assembly ----------------------------------------------------------------------------------
CLASSES = ("mfma", "valu", "salu", "smem", "lds", "global", "waitcnt", "barrier", "nop", "branch")


def classify(mnemonic: str) -> str:
    if mnemonic.startswith("v_mfma"):
        return "mfma"
    if mnemonic.startswith("v_"):
        return "valu"
    if mnemonic.startswith("ds_"):
        return "lds"
    if mnemonic.startswith(("global_", "buffer_", "flat_")):
        return "global"
    if mnemonic.startswith(("s_load", "s_buffer_load")):
        return "smem"
    if mnemonic == "s_waitcnt":
        return "waitcnt"
    if mnemonic == "s_barrier":
        return "barrier"
    if mnemonic == "s_nop":
        return "nop"
    if mnemonic.startswith(("s_cbranch", "s_branch")):
        return "branch"
    return "salu"


@dataclass
class Block:
    label: str
    lines: list[str] = field(default_factory=list)

    @property
    def mnemonics(self) -> list[str]:
        return [line.split()[0] for line in self.lines]


def functions(asm: str) -> dict[str, list[Block]]:
    """Kernel name -> its basic blocks in layout order (instructions only, comments stripped)."""
    out: dict[str, list[Block]] = {}
    current: list[Block] | None = None
    for raw in asm.splitlines():
        line = raw.split(";")[0].rstrip()
        if re.match(r"^[A-Za-z_][\w.$]*:$", line) and not line.startswith(".L"):
            current = out.setdefault(line[:-1], [Block(line[:-1])])
        elif current is None:
            continue
        elif line.startswith(".Lfunc_end"):
            current = None
        elif re.match(r"^\.LBB\d+_\d+:$", line):
            current.append(Block(line[:-1]))
        elif re.match(r"^; %bb\.\d+:", raw):  # a block entered only by fall-through has no label
            current.append(Block(raw.split(":")[0][2:]))
        elif line.startswith(("\t", " ")) and line.strip() and not line.strip().startswith("."):
            current[-1].lines.append(line.strip())
    return out


def branch_target(line: str) -> str | None:
    parts = line.split()
    return parts[1] if parts[0].startswith(("s_cbranch", "s_branch")) else None


@dataclass
class LoopPath:
    counts: dict[str, int]
    lines: list[str]
    mfma_cycles: int
    mfma_macs: int
    lgkm_zero_waits: int
    vm_waits: int


def mfma_count(block: Block) -> int:
    return sum(m.startswith("v_mfma") for m in block.mnemonics)


def best_path(blocks: list[Block], head: int, end: int | None, slow: bool) -> list[int]:
    """Block indices of a path along forward edges from `head` to `end` (None: to wherever it ends with the
    most MFMAs). Ranked by MFMAs, then global loads (a steady-state iteration fetches the next stage; the
    last one does not), then the fewest (or, `slow`, the most) instructions. Edges are the fall-through
    (unless the block ends in s_branch) and the branch targets after the block."""
    index = {b.label: i for i, b in enumerate(blocks)}
    last = len(blocks) - 1 if end is None else end
    rank = (lambda c: c[0]) if slow else (lambda c: (c[0][0], c[0][1], -c[0][2]))

    def weight(i: int) -> tuple[int, int, int]:
        return mfma_count(blocks[i]), sum(classify(m) == "global" for m in blocks[i].mnemonics), len(blocks[i].lines)

    best_to: dict[int, tuple[tuple[int, int, int], list[int]]] = {head: (weight(head), [head])}
    for i in range(head, last):
        if i not in best_to:
            continue
        targets = {index[t] for t in map(branch_target, blocks[i].lines) if t in index and i < index[t] <= last}
        if not (blocks[i].lines and blocks[i].lines[-1].startswith("s_branch")):
            targets.add(i + 1)
        for t in targets:
            key, ids = best_to[i]
            cand = (tuple(a + b for a, b in zip(key, weight(t))), ids + [t])
            if t not in best_to or rank(cand) > rank(best_to[t]):
                best_to[t] = cand
    if end is not None:
        return best_to[end][1] if end in best_to else []
    return max(best_to.values(), key=rank)[1]


def analyse_path(blocks: list[Block], ids: list[int]) -> LoopPath:
    lines = [line for i in ids for line in blocks[i].lines]
    counts = {c: 0 for c in CLASSES}
    cycles = macs = 0
    for line in lines:
        m = line.split()[0]
        counts[classify(m)] += 1
        if m.startswith("v_mfma"):
            cycles += MFMA_CYCLES[m.replace("_e64", "")]
            macs += MFMA_MACS[m.replace("_e64", "")]
    return LoopPath(counts, lines, cycles, macs, sum("lgkmcnt(0)" in l for l in lines),
                    sum(l.startswith("s_waitcnt") and "vmcnt" in l for l in lines))


def main_loop_paths(blocks: list[Block]) -> tuple[LoopPath, LoopPath, int]:
    """(fastest, slowest) path through one iteration of the main loop, and the loop's block count.

    The main loop is the back edge (latch -> head) with the most MFMAs in [head, latch] whose MFMAs all
    lie on one forward path from head to latch (a real iteration), the shortest such. Every iteration
    does the same MFMAs, so paths are ranked by MFMAs first. Without such a loop (K fully unrolled), the
    whole kernel is the one iteration."""
    index = {b.label: i for i, b in enumerate(blocks)}
    loops = sorted(((sum(map(mfma_count, blocks[index[t]:j + 1])), -(j - index[t]), index[t], j)
                    for j, b in enumerate(blocks) for t in map(branch_target, b.lines) if t in index and index[t] <= j),
                   reverse=True)
    for mfmas, _, head, latch in loops:
        fast = best_path(blocks, head, latch, slow=False)
        if mfmas and sum(mfma_count(blocks[i]) for i in fast) == mfmas:
            slow = best_path(blocks, head, latch, slow=True)
            return analyse_path(blocks, fast), analyse_path(blocks, slow), latch - head + 1
    return (analyse_path(blocks, best_path(blocks, 0, None, slow=False)),
            analyse_path(blocks, best_path(blocks, 0, None, slow=True)), len(blocks))


def mca_clocks(lines: list[str], tmp: Path) -> float:
    """One-wave llvm-mca clocks per iteration of a straight-line loop body (branches dropped)."""
    body = tmp / "loop.s"
    body.write_text("\n".join(l for l in lines if classify(l.split()[0]) != "branch") + "\n")
    iterations = 100
    out = subprocess.run([MCA, "-mtriple=amdgcn-amd-amdhsa", "-mcpu=gfx942", f"-iterations={iterations}", str(body)],
                         capture_output=True, text=True, check=True).stdout
    return int(re.search(r"Total Cycles:\s+(\d+)", out).group(1)) / iterations * MCA_CLOCKS_PER_UNIT


def resources(remarks: str) -> dict[str, dict[str, int]]:
    """Kernel name -> VGPR, AGPR, LDS, scratch and compiler occupancy from -Rpass-analysis remarks."""
    out: dict[str, dict[str, int]] = {}
    current = None
    for line in remarks.splitlines():
        m = re.search(r"remark: Function Name: (\S+)", line)
        if m:
            current = out.setdefault(m.group(1), {})
            continue
        m = re.search(r"remark:\s+(VGPRs|AGPRs|ScratchSize \[bytes/lane\]|LDS Size \[bytes/block\]|"
                      r"Occupancy \[waves/SIMD\]): (\d+)", line)
        if m and current is not None:
            key = {"VGPRs": "vgpr", "AGPRs": "agpr"}.get(m.group(1), m.group(1).split()[0].lower())
            current[key] = int(m.group(2))
    return out


def demangle(names: list[str]) -> dict[str, str]:
    out = subprocess.run([CXXFILT], input="\n".join(names) + "\n", capture_output=True, text=True, check=True).stdout
    return dict(zip(names, out.splitlines()))


def template_args(demangled: str) -> tuple[str, tuple[str, ...]] | None:
    """'void ns::kernel<0, (ns::E)1, false>(...)' -> ('ns::kernel', ('0', '(ns::E)1', 'false')); None without
    template arguments. Splits at the top-level commas of the first <...>."""
    head = demangled.split(" ", 1)[-1] if demangled.startswith("void ") else demangled
    if "<" not in head:
        return None
    base, rest = head.split("<", 1)
    args, depth, current = [], 0, ""
    for ch in rest:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            if depth == 0:  # the closing '>' of the argument list
                args.append(current.strip())
                return base, tuple(args)
            depth -= 1
        if ch == "," and depth == 0:
            args.append(current.strip())
            current = ""
        else:
            current += ch
    return None


def kernel_instances(names: Iterable[str], base: str) -> dict[tuple[str, ...], str]:
    """Template arguments -> mangled name of every instance of kernel template `base` in the assembly."""
    out = {}
    for mangled, plain in demangle(sorted(names)).items():
        parsed = template_args(plain)
        if parsed and parsed[0] == base:
            out[parsed[1]] = mangled
    return out


# ==== shape + layout -> kernel instance: the ONE place to adjust when the kernel's template changes ====
OUR_KERNEL = "gemm::rocm::gemm_fp8_kernel"
# rocm_planner.h's InstanceVariant as (OperandMajor, B ScaleFormat, fold): every dense instance but its tile,
# in kLoopCosts' index order [storage order][B scale format][fold].
VARIANTS = list(itertools.product((0, 1), (0, 1), (False, True)))


def variant_for(layout: str) -> tuple[int, int, bool]:
    """The variant a suite's layout runs (benchmarks/shapes.py): the challenge's M/N-major operands or K-major
    ones, e4m3fnuz (no fold) with fp32 scales."""
    return (1 if layout == LAYOUT_CHALLENGE else 0), 0, False


def instance_for(tile: int, variant: tuple[int, int, bool], instances: dict[tuple[str, ...], str]) -> str:
    """The mangled name of the dense instance a call with this tile and variant runs:
    gemm_fp8_kernel<tile, B scale format, grouped = false, storage order, fold>."""
    major, b_scale, fold = variant
    return instances[(str(tile), f"(gemm::ScaleFormat){b_scale}", "false", f"(gemm::rocm::OperandMajor){major}",
                      str(fold).lower())]
# =========================================================================================================


@dataclass
class Instance:
    """One compiled kernel instance: its main loop and what bounds its occupancy."""
    name: str                # demangled
    block_m: int
    block_n: int
    waves_per_block: int
    res: dict[str, int]
    fast: LoopPath
    slow: LoopPath
    loop_blocks: int
    mca_fast: float = 0.0
    mca_slow: float = 0.0

    @property
    def k_steps_per_iteration(self) -> int:
        """K steps of 128 one loop iteration covers (the compiler may unroll the K loop)."""
        per_step = self.block_m * self.block_n * SCALE_BLOCK // self.waves_per_block
        if self.fast.mfma_macs % per_step:
            raise ValueError(f"{self.name}: loop MFMA work {self.fast.mfma_macs} is not a whole number of K steps")
        return self.fast.mfma_macs // per_step

    @property
    def blocks_per_cu(self) -> int:
        regs = -(-self.res["vgpr"] // VGPR_GRANULE) * VGPR_GRANULE + -(-self.res["agpr"] // VGPR_GRANULE) * VGPR_GRANULE
        waves_regs = min(MAX_WAVES_PER_SIMD, VGPRS_PER_SIMD_LANE // max(regs, 1))
        by_regs = waves_regs * SIMDS_PER_CU // self.waves_per_block
        by_lds = LDS_PER_CU // self.res["lds"] if self.res["lds"] else by_regs
        return max(1, min(by_regs, by_lds))

    @property
    def waves_per_simd(self) -> int:
        return self.blocks_per_cu * self.waves_per_block // SIMDS_PER_CU

    def loop_cost(self, slow: bool) -> tuple[int, float, int, int]:
        """The planner's LoopCost: K steps per iteration, one-wave llvm-mca clocks, MFMA cycles, other instructions."""
        path, mca = (self.slow, self.mca_slow) if slow else (self.fast, self.mca_fast)
        other = sum(v for k, v in path.counts.items() if k != "mfma")
        return self.k_steps_per_iteration, round(mca, 2), path.mfma_cycles, other

    def estimate_line(self, c: Constants, staging: tuple[int, int], m: int, n: int, k: int, split: int) -> str:
        """One `estimate` command of ESTIMATE_PROGRAM for this instance's fast path."""
        fields = (self.block_m, self.block_n, self.waves_per_simd, self.blocks_per_cu, *self.loop_cost(False),
                  c.latency_clocks, f"{c.launch_s:.9e}", *staging, m, n, k, split)
        return "estimate " + " ".join(map(str, fields))


def analyse(asm: str, remarks: str, pick: dict, tmp: Path) -> dict:
    """`pick`: label (our tile, or a RadeonFlow case) -> (mangled kernel name, block M, block N, waves per block)."""
    funcs, res = functions(asm), resources(remarks)
    names = demangle(sorted({name for name, *_ in pick.values()}))
    out = {}
    for label, (name, bm, bn, waves) in pick.items():
        fast, slow, nblocks = main_loop_paths(funcs[name])
        inst = Instance(names[name], bm, bn, waves, res[name], fast, slow, nblocks)
        inst.mca_fast = mca_clocks(fast.lines, tmp)
        inst.mca_slow = inst.mca_fast if slow.lines == fast.lines else mca_clocks(slow.lines, tmp)
        out[label] = inst
    return out


# ---- the planner's formula, run through g++ ------------------------------------------------------
@dataclass
class Constants:
    latency_clocks: int     # per K step of 128, unseen by llvm-mca
    launch_s: float         # per kernel launch in the timed region


COSTS_PLACEHOLDER = Constants(0, 0.0)  # in headers whose programs never plan (estimate commands carry their own)
RF_KERNEL = "gemm_kernel::gemm_kernel"


def nested_rows(tile_rows: dict[tuple[int, int, bool], list[str]]) -> list[str]:
    """The initializer of kLoopCosts[major][b_scale][fold][tile] from each variant's tile rows."""
    rows = []
    for major in (0, 1):
        rows.append(f"    {{  // OperandMajor {major}")
        for b_scale in (0, 1):
            rows.append(f"     {{  // ScaleFormat {b_scale}")
            for fold in (False, True):
                rows.append(f"      {{  // fold {str(fold).lower()}")
                rows += [f"       {line}" for line in tile_rows[(major, b_scale, fold)]]
                rows.append("      },")
            rows.append("     },")
        rows.append("    },")
    return rows


def costs_header(instances: dict[tuple[int, int, bool], dict[int, Instance]], c: Constants) -> str:
    """gemm/rocm_loop_costs.h: the figures the planner's estimate needs, per dense instance, and the fitted
    constants."""
    tile_rows = {}
    for variant, ours in instances.items():
        tile_rows[variant] = []
        for tile, inst in sorted(ours.items()):
            loops = ", ".join("{%d, %.2f, %d, %d}" % inst.loop_cost(slow) for slow in (False, True))
            tile_rows[variant].append(f"// {inst.name[:inst.name.index('>(') + 1].removeprefix('void ')}: "
                                      f"{inst.res['vgpr']} VGPR, {inst.res['agpr']} AGPR, {inst.res['lds']} B LDS")
            tile_rows[variant].append(f"{{{inst.block_m}, {inst.block_n}, {inst.waves_per_simd}, {inst.blocks_per_cu}, {loops}}},")
    return header_text(nested_rows(tile_rows), c)


def placeholder_header(tiles: dict[int, tuple[int, int, int]]) -> str:
    """A header the planner compiles with (right tiles, unit costs): the kernels' assembly does not depend on
    it, so compiling them never needs the real one, which may be stale or absent."""
    unit = [f"{{{bm}, {bn}, 1, 1, {{1, 1, 1, 1}}, {{1, 1, 1, 1}}}}," for _, (bm, bn, _) in sorted(tiles.items())]
    return header_text(nested_rows({v: unit for v in VARIANTS}), COSTS_PLACEHOLDER)


def header_text(rows: list[str], c: Constants) -> str:
    return f"""// Generated by `{WRITE_COMMAND}`: do not edit. The MI300X model's figures per
// kernel instance, read from the gfx942 assembly of gemm/gemm_launcher.hip (clang-19 -O3) and timed by
// llvm-mca-19, and the two constants fitted on RadeonFlow's measured times. rocm_planner.h's
// estimate_seconds reads them; tests/rocm/test_rocm_model.py fails when they no longer match the assembly.
#pragma once

#include "rocm_tile_configs.h"

namespace gemm::rocm {{

// One iteration of a main-loop path, one wave.
struct LoopCost {{
  int k_steps;             // K steps of 128 per iteration (the compiler may unroll the K loop)
  double mca_clocks;       // llvm-mca-19 clocks of the wave alone on its SIMD
  int mfma_cycles;         // MFMA pipe cycles (AMD's calculator tables)
  int other_instructions;  // every other instruction
}};

// A kernel instance: its tile, its occupancy (from VGPR, AGPR and LDS), and its main loop's cheapest
// steady-state path and dearest path (they differ while layout and format are runtime branches).
struct InstanceCost {{
  int block_m, block_n;
  int waves_per_simd, blocks_per_cu;
  LoopCost fast, slow;
}};

struct ModelConstants {{
  double latency_clocks;  // per K step, what llvm-mca cannot see
  double launch_seconds;  // per kernel launch
}};

inline constexpr ModelConstants kModelConstants{{{c.latency_clocks}, {c.launch_s:.6g}}};

// One row per dense instance, [storage order][B scale format][fold][tile] (kTiles' order): each is its
// own main loop, and they differ (a K-major loop issues fewer instructions than an M/N-major one; the
// e4m3fn fold and UE8M0 B scales add VALU work). benchmarks/rocm_model.py's instance_for() names them.
inline constexpr InstanceCost kLoopCosts[kNumOperandMajors][kNumScaleFormats][kNumFolds][kNumTiles] = {{
{chr(10).join(rows)}
}};

}}  // namespace gemm::rocm
"""


def gemm_tree(header: str, root: Path) -> Path:
    """A copy of gemm/ under `root` with `header` as its rocm_loop_costs.h; returns root."""
    (root / "gemm").mkdir(parents=True)
    for f in (REPO / "gemm").iterdir():
        if f.is_file():
            (root / "gemm" / f.name).write_text(f.read_text())
    (root / "gemm" / COSTS_HEADER.name).write_text(header)
    return root


class EstimateProgram:
    """ESTIMATE_PROGRAM built against gemm/ with `header` as gemm/rocm_loop_costs.h."""

    def __init__(self, header: str, tmp: Path):
        root = gemm_tree(header, Path(tempfile.mkdtemp(prefix="estimate_", dir=tmp)))
        src, self.exe = root / "estimate.cpp", root / "estimate"
        src.write_text(ESTIMATE_PROGRAM)
        subprocess.run(["g++", "-std=c++20", "-O1", "-I", str(root), str(src), "-o", str(self.exe)], check=True)

    def run(self, lines: list[str]) -> list[list[str]]:
        out = subprocess.run([str(self.exe)], input="\n".join(lines) + "\n", capture_output=True, text=True,
                             check=True).stdout
        return [line.split() for line in out.splitlines()]


def tile_table(tmp: Path) -> dict[int, tuple[int, int, int]]:
    """kTiles: index -> (block M, block N, waves per block)."""
    src, exe = tmp / "tiles.cpp", tmp / "tiles"
    src.write_text(TILES_PROGRAM)
    subprocess.run(["g++", "-std=c++20", "-I", str(REPO), str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    return {int(f[0]): tuple(map(int, f[1:])) for f in map(str.split, out.splitlines())}


def radeonflow_staging(r: dict) -> tuple[int, int]:
    """Its timed run() transposes A and B into K-major copies (read + write each) in two launches first."""
    return r["m"] * r["k"] + r["n"] * r["k"], 2


def fit(program: EstimateProgram, rf: dict[int, Instance], rows: list[dict]) -> tuple[Constants, float]:
    """The (latency, launch) pair minimising the worst relative error over RadeonFlow's measured shapes."""
    grid = [Constants(lat, us * 1e-6) for lat, us in itertools.product(LATENCY_GRID, LAUNCH_GRID_US)]
    lines = [rf[r["case"]].estimate_line(c, radeonflow_staging(r), r["m"], r["n"], r["k"], r["split"])
             for c in grid for r in rows]
    seconds = [float(f[0]) for f in program.run(lines)]
    best = None
    for i, c in enumerate(grid):
        err = max(abs(seconds[i * len(rows) + j] * 1e6 / r["us"] - 1) for j, r in enumerate(rows))
        if best is None or err < best[1]:
            best = (c, err)
    return best


# ---- inputs --------------------------------------------------------------------------------------
def shared_dir() -> Path | None:
    """The team's shared folder: $GEMM_SHARED_DIR, else the first `shared/peers` above this checkout."""
    if os.environ.get("GEMM_SHARED_DIR"):
        return Path(os.environ["GEMM_SHARED_DIR"])
    return next((d / "shared" for d in REPO.parents if (d / "shared" / "peers").is_dir()), None)


def rocm_tree() -> Path:
    tree = Path(os.environ.get("ROCM_TREE", REPO / ".toolchain" / "rocm"))
    if not (tree / "share" / "hip" / "version").is_file():
        subprocess.run(["bash", str(REPO / "scripts" / "rocm" / "setup_toolchain.sh")], check=True,
                       stdout=subprocess.DEVNULL)
    return tree.resolve()


def compile_ours(tree: Path, tiles: dict[int, tuple[int, int, int]], tmp: Path) -> tuple[str, str]:
    root = gemm_tree(placeholder_header(tiles), tmp / "ours")
    out = tmp / "ours.s"
    proc = subprocess.run([CLANG, *HIP_FLAGS, f"--rocm-path={tree}", "-I", str(root), "-Wall", "-Werror",
                           str(root / "gemm" / "gemm_launcher.hip"), "-o", str(out)], capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(proc.stderr)
    return out.read_text(), proc.stderr


def compile_radeonflow(peer: Path, tree: Path, tmp: Path) -> tuple[str, str]:
    out = tmp / "radeonflow"
    subprocess.run(["bash", str(peer / "compile_gfx942.sh"), str(out)], env=dict(os.environ, ROCM_TREE=str(tree)),
                   capture_output=True, text=True, check=True, cwd=REPO)
    return (out / "gemm_launcher-gfx942.s").read_text(), (out / "resource-usage.txt").read_text()


def radeonflow_cases(peer: Path) -> list[dict]:
    """Every case of MEASURED.md: m, n, k, RadeonFlow's split-K, and its best MI300X µs where published."""
    rows = []
    for line in (peer / "MEASURED.md").read_text().splitlines():
        f = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(f) > 10 and f[0].isdigit():
            tile, warps, threads, split = [x.strip() for x in f[10].split(",")]
            block_m, block_n, _ = map(int, tile.split("×"))
            rows.append({"case": int(f[0]), "m": int(f[1]), "n": int(f[2]), "k": int(f[3]),
                         "us": float(f[5].strip("*")) if f[5].startswith("**") else None,
                         "block_m": block_m, "block_n": block_n, "waves": int(threads) // WAVE, "split": int(split)})
    return rows


def published_geomean_us(peer: Path) -> float:
    """RadeonFlow's 18-case geomean on MI300X as MEASURED.md quotes it from its README."""
    return float(re.search(r"Geomean over all 18 cases: \*\*([\d.]+) µs", (peer / "MEASURED.md").read_text()).group(1))


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(map(math.log, values)) / len(values))


# ---- report --------------------------------------------------------------------------------------
def loop_rows(label: str, inst: Instance, path: LoopPath, mca: float) -> str:
    c = path.counts
    return (f"| {label} | {inst.k_steps_per_iteration} | {sum(c.values())} | {c['mfma']} | {path.mfma_cycles} | {c['valu']} | {c['salu']} | {c['smem']} "
            f"| {c['lds']} | {c['global']} | {c['waitcnt']} ({path.lgkm_zero_waits} lgkmcnt(0), {path.vm_waits} vmcnt) "
            f"| {c['barrier']} | {c['nop']} | {c['branch']} | {mca:.0f} | {path.mfma_cycles / mca:.0%} "
            f"| {inst.res['vgpr']} / {inst.res['agpr']} / {inst.res['lds'] // 1024} KiB | {inst.waves_per_simd} |")


@dataclass
class Predictions:
    """What the planner's estimate gives, through ESTIMATE_PROGRAM."""
    rf_measured_us: dict[int, float]     # RadeonFlow case -> predicted µs (measured cases)
    rf_challenge_us: list[float]         # per CHALLENGE shape
    plans: list[tuple[int, int, float, float, int]]  # per CHALLENGE shape, challenge layout: tile, split, fast µs, slow µs, slots
    plans_kmajor: list[tuple[int, int, float, float, int]]  # the same, K-major operands


MAJOR_NAMES = {0: "K-major", 1: "M/N-major"}


def plan_command(shape: tuple[int, int, int], variant: tuple[int, int, bool]) -> str:
    major, b_scale, fold = variant
    return f"plan {' '.join(map(str, shape))} {major} {b_scale} {int(fold)}"


def parse_plan(fields: list[str]) -> tuple[int, int, float, float, int]:
    return int(fields[0]), int(fields[1]), float(fields[2]) * 1e6, float(fields[3]) * 1e6, int(fields[4])


def report(by_variant: dict[tuple[int, int, bool], dict[int, Instance]], rf: dict[int, Instance] | None,
           rows: list[dict], cases: list[dict], published_us: float | None, c: Constants | None, err: float | None,
           pred: Predictions | None, stale: bool, note: str) -> tuple[str, dict]:
    ours, kmajor = by_variant[variant_for(LAYOUT_CHALLENGE)], by_variant[variant_for(LAYOUT_KMAJOR)]
    out = ["# ROCm gfx942 kernel: MI300X time model from the compiled assembly", "",
           "Generated by `python3 benchmarks/rocm_model.py`. **Nothing here was measured on AMD hardware**: the",
           "main loop of each kernel instance is read from its clang-19 gfx942 assembly; the times are",
           "`estimate_seconds` of `gemm/rocm_planner.h` (the planner's own formula) on those figures, with its two",
           "constants fitted on RadeonFlow's published MI300X times.", ""]
    if stale:
        out += [f"**`gemm/rocm_loop_costs.h` does not match this assembly: run `{WRITE_COMMAND}`.** The plans",
                "below are what the planner would choose with the regenerated header.", ""]
    branching = any(inst.slow.lines != inst.fast.lines for v in by_variant.values() for inst in v.values())
    out += ["## Main loops, per iteration (K steps = steps of 128 per iteration: the compiler may unroll)",
            "fast = the cheapest path through the loop body that still fetches the next stage (steady state), slow =",
            "the dearest (runtime branches pick one per call; a straight-line loop has one path, one row); blocks =",
            "basic blocks the loop spans; llvm-mca clocks = one wave alone (units x 4); MFMA share = MFMA cycles /",
            "those clocks.", "",
            "| kernel (path) | K steps | instructions | MFMA | MFMA cycles | VALU | SALU | SMEM | LDS | global | s_waitcnt "
            "| s_barrier | s_nop | branches | llvm-mca clocks | MFMA share, one wave | VGPR / AGPR / LDS | waves/SIMD |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for major, inst in [*((1, i) for i in ours.values()), *((0, i) for i in kmajor.values())]:
        label = f"{inst.block_m}x{inst.block_n} {MAJOR_NAMES[major]}"
        if inst.slow.lines == inst.fast.lines:
            out.append(loop_rows(f"ours {label} (fast = slow, {inst.loop_blocks} blocks)", inst, inst.fast, inst.mca_fast))
        else:
            out.append(loop_rows(f"ours {label} (fast, {inst.loop_blocks} blocks)", inst, inst.fast, inst.mca_fast))
            out.append(loop_rows(f"ours {label} (slow)", inst, inst.slow, inst.mca_slow))
    for case, inst in (rf or {}).items():
        if case in (0, len(rf) - 1):  # the first and the last instance; the table's K steps column covers unrolling
            out.append(loop_rows(f"RadeonFlow case {case} ({inst.block_m}x{inst.block_n})", inst, inst.fast, inst.mca_fast))
    out += ["", "## Every dense instance the planner costs (gemm/rocm_loop_costs.h)",
            "llvm-mca clocks of one wave per K step (other instructions than MFMAs), fast path; the planner plans a",
            "call with the row of the instance it runs.", "",
            "| tile | storage order | fp32 B scales | fp32, e4m3fn fold | UE8M0 B scales | UE8M0, e4m3fn fold |",
            "|---|---|---|---|---|---|"]
    for major in (1, 0):
        for tile in sorted(ours):
            cells = []
            for b_scale, fold in itertools.product((0, 1), (False, True)):
                inst = by_variant[(major, b_scale, fold)][tile]
                cells.append(f"{inst.mca_fast / inst.k_steps_per_iteration:.0f} ({inst.loop_cost(False)[3]})")
            out.append(f"| {ours[tile].block_m}x{ours[tile].block_n} | {MAJOR_NAMES[major]} | {' | '.join(cells)} |")
    summary: dict = {"calibrated": False}
    if c is None or pred is None:
        out += ["", f"## Calibration\n{note}", ""]
        return "\n".join(out) + "\n", summary
    out += ["", "## Calibration on RadeonFlow (MI300X, ROCm 6.3.1, its checker's best time per case)",
            f"Fitted: latency {c.latency_clocks} clocks per K step, {c.launch_s * 1e6:.1f} µs per launch. "
            f"Worst error {err:.1%} (bound ±{CALIBRATION_BOUND:.0%}): "
            + ("**calibrated**." if err <= CALIBRATION_BOUND else "**NOT calibrated: our predictions below do not count**."), "",
            "| case | M | N | K | split | measured µs | predicted µs | error |", "|---|---|---|---|---|---|---|---|"]
    errors = {}
    for r in rows:
        p = pred.rf_measured_us[r["case"]]
        errors[r["case"]] = p / r["us"] - 1
        out.append(f"| {r['case']} | {r['m']} | {r['n']} | {r['k']} | {r['split']} | {r['us']:.2f} | {p:.1f} | {p / r['us'] - 1:+.1%} |")
    slow_col = " (fast path) | ours predicted µs (slow path)" if branching else ""
    out += ["", "## The 18 challenge shapes, both kernels under the same model",
            "RadeonFlow: its 256x128 kernel with its own split-K (MEASURED.md; unmeasured cases use the split its",
            "launcher dispatches), transposes included as in its timed run(). Ours: the tile and split",
            "`select_config` picks (least estimate over every tile and split 1..16, costed by the instance the",
            "call runs), the challenge's M/N-major operands read in place; blocks / slots = workgroups of the grid",
            "/ workgroups resident at once. Ours K-major: the same shapes with K-major operands (DeepSeek's",
            "layout), planned with the K-major instances.", "",
            f"| M | N | K | RadeonFlow measured µs | RadeonFlow predicted µs | ours tile, split | blocks / slots "
            f"| ours predicted µs{slow_col} | ours K-major tile, split | ours K-major predicted µs |",
            "|---|---|---|---|---|---|---|---|" + ("---|" if branching else "") + "---|---|"]
    meas = {(r["m"], r["n"], r["k"]): r["us"] for r in rows}
    for (m, n, k), p_rf, (tile, split, fast, slow, slots), (k_tile, k_split, k_us, _, _) in zip(
            CHALLENGE, pred.rf_challenge_us, pred.plans, pred.plans_kmajor):
        inst = ours[tile]
        k_blocks = -(-k // SCALE_BLOCK)
        splits = -(-k_blocks // -(-k_blocks // split))
        blocks = -(-m // inst.block_m) * -(-n // inst.block_n) * splits
        got = f"{meas[(m, n, k)]:.2f}" if (m, n, k) in meas else "—"
        slow_cell = f" | {slow:.1f}" if branching else ""
        out.append(f"| {m} | {n} | {k} | {got} | {p_rf:.1f} | {inst.block_m}x{inst.block_n}, {split} "
                   f"| {blocks} / {slots} | {fast:.1f}{slow_cell} | {kmajor[k_tile].block_m}x{kmajor[k_tile].block_n}, "
                   f"{k_split} | {k_us:.1f} |")
    summary = {"calibrated": err <= CALIBRATION_BOUND, "worst_error": err, "errors": errors,
               "rf_geomean": geomean(pred.rf_challenge_us), "rf_published_geomean": published_us,
               "ours_fast_geomean": geomean(p[2] for p in pred.plans),
               "ours_slow_geomean": geomean(p[3] for p in pred.plans),
               "ours_kmajor_geomean": geomean(p[2] for p in pred.plans_kmajor)}
    slow_cell = f" | {summary['ours_slow_geomean']:.1f}" if branching else ""
    out.append(f"| geomean | | | {published_us:.2f} (all 18, published) | {summary['rf_geomean']:.1f} | | "
               f"| {summary['ours_fast_geomean']:.1f}{slow_cell} | | {summary['ours_kmajor_geomean']:.1f} |")
    out += ["", "## What the model leaves out",
            "- Caches: HBM is a floor over unique bytes only; L2/Infinity Cache re-reads and the XCD placement of",
            "  blocks (rocm_tile_scheduler.h gives each XCD consecutive tiles) are folded into the fitted latency,",
            "  which was fitted on one kernel's access pattern.",
            *(["- The loop path our kernel takes on the challenge layout lies between the fast and the slow path;",
               "  which one the runtime branches select is not derived from the assembly."] if branching else []),
            "- Latency: the fitted latency is charged once per K step of 128 and workgroup, whatever the prefetch",
            "  distance, the stages per K step or the waves resident. Its one calibration kernel has one tile, one",
            "  prefetch depth (loads one 128-K stage ahead) and 2 waves/SIMD, so the fit cannot tell exposed memory",
            "  latency from per-CU L2/fabric throughput, and a term in prefetch depth or occupancy would be unfitted:",
            "  none is credited. Our kernel loads half a K block ahead (two stages and barriers per K step); a",
            "  latency charged per stage would cost it more, not less.",
            "- Stream-K: a partial last round of blocks is charged as a whole round; split-K is the only remedy the",
            "  planner weighs.",
            "- Upstream clang-19, not ROCm's amdclang: RadeonFlow's measured code may differ from what is analysed."]
    return "\n".join(out) + "\n", summary


@dataclass
class ModelRun:
    text: str                           # the report (markdown)
    summary: dict                       # calibrated, worst_error, errors per case, geomeans
    ours: dict[int, Instance]           # tile index -> the instance instance_for() names for the challenge layout
    instances: dict[tuple[int, int, bool], dict[int, Instance]]  # every variant (VARIANTS) -> tile -> instance
    radeonflow: dict[int, Instance]     # challenge case -> instance; empty without the peers folder
    header: str                         # gemm/rocm_loop_costs.h as this assembly gives it
    constants: Constants | None         # fitted on RadeonFlow; None without the peers folder
    discovered: list[tuple[str, ...]]   # template arguments of every gemm_fp8_kernel instance found


def run(out_path: Path | None = None, write_costs: bool = False) -> ModelRun:
    tree = rocm_tree()
    with tempfile.TemporaryDirectory(prefix="rocm_model_") as tmp_name:
        tmp = Path(tmp_name)
        tiles = tile_table(tmp)
        asm, remarks = compile_ours(tree, tiles, tmp)
        instances = kernel_instances(functions(asm), OUR_KERNEL)
        analysed = analyse(asm, remarks, {(v, tile): (instance_for(tile, v, instances), *tiles[tile])
                                          for v in VARIANTS for tile in tiles}, tmp)
        by_variant = {v: {tile: analysed[(v, tile)] for tile in tiles} for v in VARIANTS}
        shared = shared_dir()
        peer = shared / "peers" / "radeonflow" if shared else None
        rf, rows, cases, published, c, err, pred, note = None, [], [], None, None, None, None, ""
        header = costs_header(by_variant, COSTS_PLACEHOLDER)
        if peer is None or not (peer / "compile_gfx942.sh").is_file():
            note = "RadeonFlow's sources (shared/peers/radeonflow) are absent: calibration skipped, no prediction counts."
            print(note)
        else:
            cases = radeonflow_cases(peer)
            rows = [r for r in cases if r["us"] is not None]
            published = published_geomean_us(peer)
            rf_asm, rf_remarks = compile_radeonflow(peer, tree, tmp)
            # Its launcher instantiates one kernel per shape: M, N, K per split, BM, BN among its template arguments.
            rf_kernels = {args[3:8]: name for args, name in kernel_instances(functions(rf_asm), RF_KERNEL).items()}
            rf = analyse(rf_asm, rf_remarks, {
                r["case"]: (rf_kernels[tuple(map(str, (r["m"], r["n"], -(-r["k"] // r["split"]), r["block_m"], r["block_n"])))],
                            r["block_m"], r["block_n"], r["waves"]) for r in cases}, tmp)
            c, err = fit(EstimateProgram(header, tmp), rf, rows)
            header = costs_header(by_variant, c)
            program = EstimateProgram(header, tmp)
            by_shape = {(r["m"], r["n"], r["k"]): r for r in cases}
            rf_lines = [rf[r["case"]].estimate_line(c, radeonflow_staging(r), r["m"], r["n"], r["k"], r["split"])
                        for r in rows + [by_shape[s] for s in CHALLENGE]]
            rf_us = [float(f[0]) * 1e6 for f in program.run(rf_lines)]
            plans = {layout: list(map(parse_plan, program.run([plan_command(s, variant_for(layout)) for s in CHALLENGE])))
                     for layout in (LAYOUT_CHALLENGE, LAYOUT_KMAJOR)}
            pred = Predictions({r["case"]: us for r, us in zip(rows, rf_us)}, rf_us[len(rows):],
                               plans[LAYOUT_CHALLENGE], plans[LAYOUT_KMAJOR])
    stale = not COSTS_HEADER.is_file() or COSTS_HEADER.read_text() != header
    if write_costs and c is not None:
        COSTS_HEADER.write_text(header)
        stale = False
    text, summary = report(by_variant, rf, rows, cases, published, c, err, pred, stale and c is not None, note)
    if out_path:
        out_path.write_text(text)
    return ModelRun(text, summary, by_variant[variant_for(LAYOUT_CHALLENGE)], by_variant, rf or {}, header, c,
                    sorted(instances))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "rocm_model.md")
    parser.add_argument("--write-costs", action="store_true", help=f"write {COSTS_HEADER.relative_to(REPO)}")
    args = parser.parse_args()
    print(run(args.out, args.write_costs).text)


if __name__ == "__main__":
    main()
