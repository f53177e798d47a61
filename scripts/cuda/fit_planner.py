#!/usr/bin/env python3
"""How close the CUDA planner's plans are to the fastest measured ones, for a grid of its model constants
(gemm/cuda/gemm_heuristics.h). CPU only: the planner is plain C++ (tests/cuda/plan_probe.cpp prints its plans).

    python3 scripts/cuda/fit_planner.py benchmarks/results/h200/sweep_planner.jsonl \\
        [--lib main] [kTailFixupBytesPerUs=21.0e3,64.0e3] [kSmFlopsPerUs=6.0e6:10.0e6:10.5e6,...]

Inputs are JSON lines of scripts/cuda/ab.py (or tune.py --sweep): per shape, times keyed by forced plan
"CONFIG/STREAM_K[/K_SPLIT]" (with several builds, "NAME CONFIG/..." - --lib picks one). For every
combination of the given values (an array constant as colon-separated elements) the headers are copied,
the constants substituted, plan_probe built and run on the shapes, and the planner's plan looked up among
the forced ones. Printed per combination: the geomean of (time of the planner's plan / fastest forced plan)
over the shapes where its plan was measured, and the worst shapes. The planner's own "-1/0" timings are not
used: they are the same kernels as one of the forced plans, timed at another position in the round.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SMS = 132  # H200


def load(paths: list[str], lib: str | None) -> list[dict]:
    rows = []
    for path in paths:
        for line in Path(path).read_text().splitlines():
            r = json.loads(line)
            t = {}
            for key, us in r["t"].items():
                name, _, plan = key.rpartition(" ")
                if (lib is None and not name) or name == lib:
                    if plan != "-1/0":
                        t[plan] = us
            if t:
                rows.append({"shape": (r["m"], r["n"], r["k"]), "t": t})
    return rows


def substitute(text: str, name: str, value: str) -> str:
    if ":" in value:  # an array constant
        pattern, repl = rf"(constexpr double {name}\[[^\]]*\] = \{{)[^}}]+\}}", r"\g<1>" + value.replace(":", ", ") + "}"
    else:
        pattern, repl = rf"(constexpr double {name} = )[^;]+;", rf"\g<1>{value};"
    text, n = re.subn(pattern, repl, text)
    if n != 1:
        raise SystemExit(f"{name}: no single `constexpr double` definition in gemm_heuristics.h")
    return text


def plans(shapes: list[tuple[int, int, int]], constants: dict[str, str], work: Path) -> dict:
    src = work / "src"
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(ROOT / "gemm", src / "gemm")
    header = src / "gemm/cuda/gemm_heuristics.h"
    text = header.read_text()
    for name, value in constants.items():
        text = substitute(text, name, value)
    header.write_text(text)
    probe = work / "plan_probe"
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None:
        raise SystemExit("no host C++ compiler (g++/c++/clang++) for tests/cuda/plan_probe.cpp")
    subprocess.run([cxx, "-std=c++17", "-O1", f"-I{src}", str(ROOT / "tests/cuda/plan_probe.cpp"), "-o", str(probe)],
                   check=True)
    out = subprocess.run([str(probe), str(SMS)], input="\n".join(f"{m} {n} {k}" for m, n, k in shapes),
                         capture_output=True, text=True, check=True).stdout
    chosen = {}
    for line in out.splitlines()[1:]:  # "m n k config block_m block_n stream_k ... k_split b_evict_first scored"
        f = line.split()
        split = int(f[13])
        # The scored config: a paired twin runs its twin's plan, and the fit data times that plan.
        chosen[(int(f[0]), int(f[1]), int(f[2]))] = f"{f[15]}/{f[6]}" + (f"/{split}" if split > 1 else "")
    return chosen


def plan_losses(rows: list[dict], chosen: dict) -> list[tuple[float, tuple, str, str]]:
    """(time of the planner's plan / fastest forced plan, shape, plan, fastest) where the plan was measured."""
    losses = []
    for r in rows:
        plan, t = chosen[r["shape"]], r["t"]
        if plan not in t and plan.endswith("/1"):  # whole waves: the stream-K plan is the whole-tile one
            plan = plan[:-1] + "0"
        if plan in t:
            best = min(t, key=t.get)
            losses.append((t[plan] / t[best], r["shape"], plan, best))
    return losses


def geomean_loss(losses) -> float:
    return math.exp(sum(math.log(x[0]) for x in losses) / len(losses))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", help="JSONL files, then NAME=v1,v2,... constant grids")
    ap.add_argument("--lib", help="the build whose times to use, in files of several")
    args = ap.parse_args()
    files = [a for a in args.inputs if "=" not in a]
    grid = dict(a.split("=", 1) for a in args.inputs if "=" in a)
    rows = load(files, args.lib)
    shapes = sorted({r["shape"] for r in rows})
    with tempfile.TemporaryDirectory() as tmp:
        for values in itertools.product(*[v.split(",") for v in grid.values()]):
            constants = dict(zip(grid, values))
            losses = plan_losses(rows, plans(shapes, constants, Path(tmp)))
            label = constants or "as in gemm_heuristics.h"
            if not losses:
                print(f"{label}: no shape has the planner's plan among its forced plans")
                continue
            worst = ", ".join(f"{'x'.join(map(str, s))} {p} vs {b} {x:.3f}" for x, s, p, b in sorted(losses)[::-1][:4])
            print(f"{label}: geomean loss {geomean_loss(losses):.4f} over {len(losses)}; worst {worst}")


if __name__ == "__main__":
    main()
