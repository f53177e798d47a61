#!/usr/bin/env python3
"""Compile every gemm/*.hip for gfx942 and hold the result to the design targets.

For each HIP source: a host+device object and device-only assembly with clang-19 and the HIP tree of
scripts/rocm/setup_toolchain.sh (-std=c++20 -Wall -Werror -O3); the assembly must select the FP8
MFMA instructions the kernel is written for; every kernel's resources (-Rpass-analysis=
kernel-resource-usage) must meet its target: no scratch, no VGPR spill, LDS <= 64 KiB, and for a GEMM
tile the LDS and VGPR+AGPR budget that rocm_tile_configs.h designs for (read from the header through a
tiny C++ program, not restated here). Every GEMM instance's main loop (the loop with the most MFMAs)
must be the kernel's design in the assembly: one basic block (no branch but the back edge), exactly
the designed fragment reads, each one ds_read_b128, no `s_waitcnt lgkmcnt(0)` between two MFMAs that
read the same fragment, at most two LDS waits a stage, one barrier per stage, and, where a K block
spans two stages, LDS stores and (with two MFMA rows a wave) promotion FMAs issued between the loop's
first and last MFMA. The object is also
built as C++17 (kernel-builder's standard before torch 2.12). Compiling for gfx90a must fail for want
of fp8-insts, which shows the check depends on the target. Prints a resource table and closes with
`N passed, M failed`.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TARGET = "gfx942"
WRONG_TARGET = "gfx90a"  # CDNA2: no FP8 MFMA
CLANG = os.environ.get("CLANGXX", "clang++-19")
HOST_CXX = os.environ.get("CXX", "g++")
STANDARD = "-std=c++20"
OLDER_STANDARD = "-std=c++17"  # kernel-builder builds with C++17 for torch < 2.12, C++20 from 2.12
FLAGS = ["-x", "hip", "-Wall", "-Werror", "-O3"]
REQUIRED_MFMA = "v_mfma_f32_32x32x16_fp8_fp8"
OPTIONAL_MFMA = ["v_mfma_f32_16x16x32_fp8_fp8"]  # required when the source's kernels name it
LDS_LIMIT = 64 * 1024  # bytes per workgroup on CDNA3
GEMM_KERNEL = re.compile(r"gemm_fp8_kernelILi(\d+)E")
# The B scale format of a GEMM instance (ScaleFormat: 0 fp32, 1 UE8M0).
SCALE_FORMAT = re.compile(r"ScaleFormatE(\d)E")
SCALE_NAMES = {"0": "f32", "1": "ue8m0"}
# The grouped instances (kGrouped = true: MoE experts, one group's rows per block).
GROUPED = re.compile(r"ScaleFormatE\dELb1E")
# Both operands' storage order (OperandMajor: 0 K-major, 1 M/N-major) and whether e4m3fn is folded.
MAJOR_FOLD = re.compile(r"OperandMajorE(\d)ELb(\d)E")
MAJOR_NAMES = {"0": "k-major", "1": "mn-major"}

# Prints one line per tile of kTiles: index lds_bytes waves_per_simd register_budget uses_16x16, then the
# main loop's design: stages per iteration (one K block), fragment reads (ds_read_b128) per iteration and
# MFMA rows per wave (the promotion of a row can issue between the MFMAs of the next when there are two).
DESIGN_PROGRAM = r"""
#include <cstdio>
#include "gemm/rocm_lds_layout.h"
#include "gemm/rocm_tile_configs.h"
int main() {
  using namespace gemm::rocm;
  for (int i = 0; i < kNumTiles; ++i) {
    const TileShape& t = kTiles[i];
    const int mfma_k = t.mfma_k(), groups = mfma_k / gemm::cdna3::kFp8PerOperand;
    const int pairs = t.stage_k / (groups * kChunkBytes), stages = kBlockK / t.stage_k;
    const int sub_m = t.block_m / t.warps_m / t.mfma_m(), sub_n = t.block_n / t.warps_n / t.mfma_m();
    std::printf("%d %d %d %d %d %d %d %d\n", i, t.lds_bytes(), t.waves_per_simd(), t.register_budget(),
                t.mfma == MfmaKind::k16x16x32 ? 1 : 0, stages, stages * pairs * (sub_m + sub_n), sub_m);
  }
}
"""


class Checks:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def check(self, ok: bool, what: str, detail: str = "") -> bool:
        if ok:
            self.passed += 1
            print(f"PASS {what}")
        else:
            self.failed += 1
            print(f"FAIL {what}" + (f"\n     {detail}" if detail else ""))
        return ok


def toolchain() -> Path:
    tree = Path(os.environ.get("ROCM_TREE", REPO / ".toolchain" / "rocm"))
    if not (tree / "share" / "hip" / "version").is_file() or shutil.which(CLANG) is None:
        subprocess.run(["bash", str(REPO / "scripts" / "rocm" / "setup_toolchain.sh")], check=True,
                       stdout=subprocess.DEVNULL)
    return tree


def clang(tree: Path, source: Path, out: Path, *extra: str, arch: str = TARGET,
          standard: str = STANDARD) -> subprocess.CompletedProcess:
    cmd = [CLANG, *FLAGS, standard, f"--offload-arch={arch}", f"--rocm-path={tree}", "-I", str(REPO), *extra,
           str(source), "-o", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True)


def design_targets(tmp: Path) -> dict[int, dict[str, int]]:
    program = tmp / "design.cpp"
    program.write_text(DESIGN_PROGRAM)
    exe = tmp / "design"
    subprocess.run([HOST_CXX, "-std=c++20", "-I", str(REPO), str(program), "-o", str(exe)], check=True)
    targets = {}
    for line in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines():
        index, lds, waves, budget, uses_16, stages, reads, rows = map(int, line.split())
        targets[index] = {"lds": lds, "waves": waves, "budget": budget, "mfma16": uses_16, "stages": stages,
                          "reads": reads, "mfma_rows": rows}
    return targets


def resource_report(stderr: str) -> dict[str, dict[str, str]]:
    kernels: dict[str, dict[str, str]] = {}
    current = None
    for line in stderr.splitlines():
        if "remark:" not in line:
            continue
        text = re.sub(r"\s*\[-Rpass-analysis=kernel-resource-usage\]$", "", line.split("remark:", 1)[1]).strip()
        if text.startswith("Function Name:"):
            current = text.split(":", 1)[1].strip()
            kernels[current] = {}
        elif current is not None and ":" in text:
            key, value = text.rsplit(":", 1)
            kernels[current][key.strip()] = value.strip()
    return kernels


def loads_in_flight(asm: str, mangled: str) -> bool | None:
    """Whether the kernel's MFMA loop issues global loads and reaches its first MFMA with no
    `s_waitcnt vmcnt` in between (the next stage's loads overlap the MFMAs); None if no such loop."""
    start = asm.find(mangled + ":")
    if start < 0:
        return None
    body = asm[start:asm.find("s_endpgm", start)].split("\n")
    for h, line in enumerate(body):
        if "Loop Header" not in line:
            continue
        label = line.split(":")[0]
        back = [i for i, l in enumerate(body) if re.search(r"s_c?branch\w*\s+" + re.escape(label) + r"$", l.strip())]
        loop = body[h:max(back) + 1] if back else []
        mfma = next((i for i, l in enumerate(loop) if "v_mfma" in l), None)
        load = next((i for i, l in enumerate(loop) if "global_load" in l), None)
        if mfma is None or load is None:
            continue
        return load < mfma and not any("vmcnt" in l for l in loop[load:mfma] if "s_waitcnt" in l)
    return None


def main_loop(asm: str, mangled: str) -> list[str] | None:
    """The instructions of the kernel's innermost loop with the most MFMAs, from its header label to its
    back branch (comments dropped), or None."""
    start = asm.find(mangled + ":")
    if start < 0:
        return None
    raw = asm[start:asm.find(".Lfunc_end", start)].split("\n")  # the whole function: a grouped block may exit early
    headers = {i for i, line in enumerate(raw) if "Loop Header" in line}
    body = [line.split(";")[0].rstrip() for line in raw]
    best = None
    for h in sorted(headers):
        label = re.match(r"^(\.LBB\d+_\d+):", body[h])
        back = [i for i, l in enumerate(body) if i > h and label and
                re.search(r"s_c?branch\w*\s+" + re.escape(label.group(1)) + r"$", l.strip())]
        if not back or any(h < i <= max(back) for i in headers):
            continue  # not a loop we can cut out, or not innermost
        loop = [l.strip() for l in body[h:max(back) + 1] if l.strip()]
        if best is None or sum("v_mfma" in l for l in loop) > sum("v_mfma" in l for l in best):
            best = loop
    return best


def fragment_waits(loop: list[str]) -> int:
    """How many `s_waitcnt lgkmcnt(0)` sit between two consecutive MFMAs that read the same
    ds_read_b128 fragment (a wait that serialises LDS and the MFMAs)."""
    owner: dict[int, int] = {}  # VGPR -> the ds_read_b128 (position) that last wrote it
    last_mfma, last_frags, waits = None, set(), 0
    for pos, line in enumerate(loop):
        if line.startswith("ds_read_b128"):
            first = int(re.search(r"v\[(\d+):", line).group(1))
            for r in range(first, first + 4):
                owner[r] = pos
        elif line.startswith("v_mfma"):
            frags = {owner[r] for r in map(int, re.findall(r"v\[(\d+):\d+\]", line)[1:3]) if r in owner}
            if last_mfma is not None and frags & last_frags:
                waits += sum(1 for l in loop[last_mfma:pos] if l.startswith("s_waitcnt") and "lgkmcnt(0)" in l)
            last_mfma, last_frags = pos, frags
    return waits


def between_mfmas(loop: list[str], prefixes: tuple[str, ...]) -> tuple[int, int]:
    """(instructions with these prefixes between the loop's first and last MFMA, all of them)."""
    mfmas = [i for i, l in enumerate(loop) if l.startswith("v_mfma")]
    hits = [i for i, l in enumerate(loop) if l.startswith(prefixes)]
    return sum(mfmas[0] < i < mfmas[-1] for i in hits), len(hits)


def check_main_loop(checks: Checks, rel: Path, name: str, loop: list[str] | None, target: dict) -> None:
    if not checks.check(loop is not None, f"{rel}: {name} has a main loop"):
        return
    branches = [l for l in loop if l.startswith(("s_cbranch", "s_branch"))]
    labels = [l for l in loop[1:] if re.match(r"^\.LBB\d+_\d+:", l)]
    checks.check(len(branches) == 1 and not labels, f"{rel}: {name} main loop is one basic block",
                 f"{len(branches)} branches, {len(labels)} inner labels")
    reads = [l.split()[0] for l in loop if l.startswith("ds_read")]
    checks.check(reads and set(reads) == {"ds_read_b128"} and len(reads) == target["reads"],
                 f"{rel}: {name} main loop reads each fragment once with ds_read_b128 ({len(reads)} == {target['reads']})",
                 f"{sorted(set(reads))}")
    waits = fragment_waits(loop)
    checks.check(waits == 0, f"{rel}: {name} main loop has no lgkmcnt(0) between two MFMAs of one fragment ({waits})")
    lds_zero = sum(l.startswith("s_waitcnt") and "lgkmcnt(0)" in l for l in loop)
    checks.check(lds_zero <= 2 * target["stages"],
                 f"{rel}: {name} main loop waits for LDS at most twice a stage: fragments, stores ({lds_zero})")
    barriers = sum(l.startswith("s_barrier") for l in loop)
    checks.check(barriers == target["stages"], f"{rel}: {name} main loop has one barrier per stage ({barriers})")
    stores, all_stores = between_mfmas(loop, ("ds_write",))
    fmas, all_fmas = between_mfmas(loop, ("v_fma", "v_fmac", "v_pk_fma"))
    if target["stages"] == 1:  # one stage a block: its stores and promotion end the loop body
        return
    checks.check(stores > 0 and (fmas > 0 or target["mfma_rows"] == 1),
                 f"{rel}: {name} main loop issues LDS stores ({stores}/{all_stores}) and promotion FMAs "
                 f"({fmas}/{all_fmas}; needs two MFMA rows) between its MFMAs")


def short_name(mangled: str) -> str:
    match = GEMM_KERNEL.search(mangled)
    if match:
        scale = SCALE_FORMAT.search(mangled)
        scales = f",{SCALE_NAMES[scale.group(1)]}" if scale else ""
        grouped = ",grouped" if GROUPED.search(mangled) else ""
        major_fold = MAJOR_FOLD.search(mangled)
        layout = f",{MAJOR_NAMES[major_fold.group(1)]}{',fn' if major_fold.group(2) == '1' else ''}" if major_fold else ""
        return f"gemm_fp8_kernel<{match.group(1)}{scales}{grouped}{layout}>"
    match = re.search(r"rocm\d+(\w+?_kernel)", mangled)
    return match.group(1) if match else mangled


def check_source(source: Path, tree: Path, tmp: Path, targets: dict, checks: Checks) -> None:
    rel = source.relative_to(REPO)
    obj = tmp / (source.stem + ".o")
    result = clang(tree, source, obj, "-c")
    checks.check(result.returncode == 0 and obj.is_file(), f"{rel}: host+device object for {TARGET} ({STANDARD})",
                 result.stderr.strip()[-2000:])
    result = clang(tree, source, tmp / (source.stem + ".cxx17.o"), "-c", standard=OLDER_STANDARD)
    checks.check(result.returncode == 0, f"{rel}: host+device object for {TARGET} ({OLDER_STANDARD})",
                 result.stderr.strip()[-2000:])

    asm = tmp / (source.stem + ".s")
    result = clang(tree, source, asm, "--cuda-device-only", "-S", "-Rpass-analysis=kernel-resource-usage")
    if not checks.check(result.returncode == 0, f"{rel}: device assembly for {TARGET}", result.stderr.strip()[-2000:]):
        return
    text = asm.read_text()
    kernels = resource_report(result.stderr)
    gemm_tiles = {int(m.group(1)) for m in map(GEMM_KERNEL.search, kernels) if m}
    checks.check(REQUIRED_MFMA in text, f"{rel}: assembly selects {REQUIRED_MFMA}")
    if any(targets[t]["mfma16"] for t in gemm_tiles):
        for mnemonic in OPTIONAL_MFMA:
            checks.check(mnemonic in text, f"{rel}: assembly selects {mnemonic} (used by a 16x16 tile)")

    checks.check(any(GROUPED.search(m) for m in kernels if GEMM_KERNEL.search(m)) or not gemm_tiles,
                 f"{rel}: grouped GEMM instances compiled")
    print(f"  {'kernel':<56}{'VGPR':>6}{'AGPR':>6}{'SGPR':>6}{'scratch':>9}{'LDS':>8}{'waves/SIMD':>12}  {'design target'}")
    for mangled, res in kernels.items():
        name = short_name(mangled)
        vgpr, agpr, sgpr = int(res["VGPRs"]), int(res["AGPRs"]), int(res["SGPRs"])
        scratch, lds, occ = int(res["ScratchSize [bytes/lane]"]), int(res["LDS Size [bytes/block]"]), int(
            res["Occupancy [waves/SIMD]"])
        vspill, sspill = int(res["VGPRs Spill"]), int(res["SGPRs Spill"])
        match = GEMM_KERNEL.search(mangled)
        target = targets[int(match.group(1))] if match else None
        goal = f"LDS {target['lds']}, {target['waves']} w/SIMD, <= {target['budget']} regs" if target else "-"
        print(f"  {name:<56}{vgpr:>6}{agpr:>6}{sgpr:>6}{scratch:>9}{lds:>8}{occ:>12}  {goal}"
              + (f"  (SGPR spill {sspill} into VGPR lanes)" if sspill else ""))
        checks.check(scratch == 0 and vspill == 0, f"{rel}: {name} uses no scratch (scratch {scratch}, VGPR spill {vspill})")
        checks.check(lds <= LDS_LIMIT, f"{rel}: {name} LDS {lds} <= {LDS_LIMIT}")
        if target:
            checks.check(lds == target["lds"], f"{rel}: {name} LDS {lds} == designed {target['lds']}")
            checks.check(vgpr + agpr <= target["budget"],
                         f"{rel}: {name} VGPR+AGPR {vgpr + agpr} <= {target['budget']} (budget for {target['waves']} waves/SIMD)")
            checks.check(occ >= target["waves"], f"{rel}: {name} occupancy {occ} >= designed {target['waves']} waves/SIMD")
            if target["waves"] == 1:  # no other wave on the SIMD hides load latency: the pipeline must
                checks.check(loads_in_flight(text, mangled) is True,
                             f"{rel}: {name} main loop issues the next stage's loads before its MFMAs, no vmcnt wait between")
            check_main_loop(checks, rel, name, main_loop(text, mangled), target)

    wrong = clang(tree, source, tmp / (source.stem + f".{WRONG_TARGET}.s"), "--cuda-device-only", "-S", arch=WRONG_TARGET)
    checks.check(wrong.returncode != 0 and "fp8-insts" in wrong.stderr,
                 f"{rel}: compiling for {WRONG_TARGET} fails for want of fp8-insts (target dependence)",
                 f"exit {wrong.returncode}: {wrong.stderr.strip()[-500:]}")


def main() -> int:
    checks = Checks()
    sources = sorted((REPO / "gemm").glob("*.hip"))
    checks.check(bool(sources), "gemm/*.hip sources found")
    tree = toolchain()
    with tempfile.TemporaryDirectory(prefix="gemm_rocm_check_") as tmp_name:
        tmp = Path(tmp_name)
        targets = design_targets(tmp)
        for source in sources:
            check_source(source, tree, tmp, targets, checks)
    print(f"{checks.passed} passed, {checks.failed} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
