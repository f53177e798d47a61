#!/usr/bin/env python3
"""Refit the cost-model constants of gemm/cuda/planner.h to timings of every forced plan (CPU only).

    python3 scripts/cuda/fit_planner.py TIMINGS.jsonl          fit, print the constants and the losses
    python3 scripts/cuda/fit_planner.py TIMINGS.jsonl --check  the losses of planner.h as it is
    python3 scripts/cuda/fit_planner.py --shapes               the shapes of tests/cuda/planner_timings.jsonl,
                                                               as tune.py --ab-shapes takes them

TIMINGS.jsonl is tune.py's --ab-out format (one line per shape: {"m", "n", "k", "t": {plan: us}}). A
candidate set of constants is written into a copy of gemm/, tests/cuda/plan_probe.cpp is compiled against
it with the host compiler and asked for every shape's plan; the loss of a shape is the time of the plan
chosen over the fastest timed one. Coordinate descent on multiplicative steps minimizes the mean log
loss plus a twentieth of the worst, with the rates that are hardware facts kept near their measured
values. The fitted values are printed for planner.h (and docs/cuda.md); nothing in the tree is changed.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLANNER = "gemm/cuda/planner.h"
NUMBER = r"([0-9.e+]+)"
# Each constant: the pattern of its definition (one group around the value), and the range of factors on
# its current value the fit may use.
CONSTANTS = {
    "kSmFlopsPerUs[0]": (r"kSmFlopsPerUs\[kMaxMathWarpgroups\] = \{" + NUMBER, (0.8, 1.25)),
    "kSmFlopsPerUs[1]": (r"kSmFlopsPerUs\[kMaxMathWarpgroups\] = \{[0-9.e+]+, " + NUMBER, (0.8, 1.25)),
    "kSmFlopsPerUs[2]": (r"kSmFlopsPerUs\[kMaxMathWarpgroups\] = \{[0-9.e+]+, [0-9.e+]+, " + NUMBER, (0.8, 1.25)),
    "kSmFlopsPerUsTwoSlabs": (r"kSmFlopsPerUsTwoSlabs = " + NUMBER, (0.8, 1.25)),
    "kTwoSlabUnitOverheadUs": (r"kTwoSlabUnitOverheadUs = " + NUMBER, (0.3, 3.0)),
    "kNarrowTileCols": (r"kNarrowTileCols = " + NUMBER, (0.3, 3.0)),
    "kSmBytesPerUs": (r"kSmBytesPerUs = " + NUMBER, (0.7, 1.4)),
    "kClusterKBlockTime": (r"kClusterKBlockTime = " + NUMBER, (0.8, 1.25)),
    "kClusterFixedUs": (r"kClusterFixedUs = " + NUMBER, (0.3, 3.0)),
    "kNarrowTwoWgKBlockTime": (r"kNarrowTwoWgKBlockTime = " + NUMBER, (0.9, 1.25)),
    "kSmDramBytesPerUs": (r"kSmDramBytesPerUs = " + NUMBER, (0.7, 1.4)),
    "kOneMBlockStream": (r"kOneMBlockStream = " + NUMBER, (0.5, 2.0)),
    "kDramBytesPerUs": (r"kDramBytesPerUs = " + NUMBER, (0.8, 1.15)),
    "kStreamKFixedUs": (r"kStreamKFixedUs = " + NUMBER, (0.3, 3.0)),
    "kFixupBytesPerUs": (r"kFixupBytesPerUs = " + NUMBER, (0.3, 3.0)),
    "kTailSkKBlockTime": (r"kTailSkKBlockTime = " + NUMBER, (0.7, 1.5)),
    "kTailFixupBytesPerUs": (r"kTailFixupBytesPerUs = " + NUMBER, (0.3, 3.0)),
    "kKSplitRankUs": (r"kKSplitRankUs = " + NUMBER, (0.3, 3.0)),
    "kKSplitKBlockTime": (r"kKSplitKBlockTime = " + NUMBER, (0.8, 2.0)),
}
STEPS = (0.7, 0.85, 0.93, 0.97, 1.03, 1.08, 1.18, 1.4)
WORST_WEIGHT = 0.05


class Model:
    """planner.h with substituted constants, compiled into the plan probe in a scratch copy of gemm/."""

    def __init__(self, work: Path):
        self.work = work
        self.source = (ROOT / PLANNER).read_text()
        shutil.copytree(ROOT / "gemm", work / "gemm")
        (work / "tests/cuda").mkdir(parents=True)
        shutil.copy(ROOT / "tests/cuda/plan_probe.cpp", work / "tests/cuda")
        self.start = {name: float(re.search(rx, self.source).group(1)) for name, (rx, _) in CONSTANTS.items()}

    def plans(self, values: dict[str, float], shapes) -> list[tuple[int, ...]]:
        text = self.source
        for name, (rx, _) in CONSTANTS.items():
            m = re.search(rx, text)
            text = text[: m.start(1)] + repr(values[name]) + text[m.end(1):]
        (self.work / PLANNER).write_text(text)
        exe = self.work / "probe"
        subprocess.run(["g++", "-std=c++17", "-O1", f"-I{self.work}", str(self.work / "tests/cuda/plan_probe.cpp"),
                        "-o", str(exe)], check=True)
        out = subprocess.run([str(exe), "132"], input="\n".join(f"{m} {n} {k}" for m, n, k in shapes),
                             capture_output=True, text=True, check=True).stdout.splitlines()[1:]
        return [tuple(int(v) for v in line.split()) for line in out]


def plan_key(planned: tuple[int, ...]) -> str:
    """The timing key (CONFIG/STREAM_K[/K_SPLIT]) of a plan_probe plan line's fields: by the scored config,
    since a paired twin runs its twin's plan and the timings name that plan."""
    stream_k, k_split, scored = planned[6], planned[13], planned[15]
    return f"{scored}/{stream_k}" + (f"/{k_split}" if k_split > 1 else "")


def plan_losses(planned: list[tuple[int, ...]], rows: list[dict]) -> list[tuple[float, tuple[int, int, int], str, str]]:
    """(time of the planned plan / fastest timed plan, shape, plan, fastest) per timing row, planned[i] being
    row i's plan_probe line; inf where the planned plan was not timed."""
    out = []
    for fields, r in zip(planned, rows):
        t, plan = r["t"], plan_key(fields)
        if plan not in t and plan.endswith("/1"):  # whole waves: the stream-K plan is the whole-tile one
            plan = plan[:-1] + "0"
        best = min(t, key=t.get)
        out.append((t[plan] / t[best] if plan in t else math.inf, (r["m"], r["n"], r["k"]), plan, best))
    return out


def losses(model: Model, values: dict[str, float], rows: list[dict]):
    return plan_losses(model.plans(values, [(r["m"], r["n"], r["k"]) for r in rows]), rows)


def score(ls) -> float:
    logs = [math.log(x[0]) for x in ls]
    return sum(logs) / len(logs) + WORST_WEIGHT * max(logs)


def report(ls) -> None:
    timed = [x for x in ls if math.isfinite(x[0])]
    geomean = math.exp(sum(math.log(x[0]) for x in timed) / len(timed))
    print(f"planned / fastest: geomean {geomean:.4f}, worst {max(timed)[0]:.3f} over {len(timed)} shapes "
          f"({len(ls) - len(timed)} planned plans not timed)")
    for loss, (m, n, k), plan, best in sorted(timed, reverse=True)[:10]:
        print(f"  {loss:.3f} {m}x{n}x{k}: planned {plan}, fastest {best}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("timings", nargs="?")
    p.add_argument("--check", action="store_true")
    p.add_argument("--shapes", action="store_true")
    p.add_argument("--passes", type=int, default=4)
    args = p.parse_args()
    if args.shapes:
        rows = [json.loads(line) for line in (ROOT / "tests/cuda/planner_timings.jsonl").read_text().splitlines()]
        print(";".join(f"{r['m']},{r['n']},{r['k']}" for r in rows))
        return 0
    if not args.timings:
        p.error("TIMINGS.jsonl is required")
    rows = [json.loads(line) for line in Path(args.timings).read_text().splitlines()]
    with tempfile.TemporaryDirectory() as work:
        model = Model(Path(work))
        values = dict(model.start)
        best = score(losses(model, values, rows))
        if not args.check:
            for _ in range(args.passes):
                improved = False
                for name, (_, (lo, hi)) in CONSTANTS.items():
                    for step in STEPS:
                        trial = dict(values, **{name: values[name] * step})
                        if not lo <= trial[name] / model.start[name] <= hi:
                            continue
                        s = score(losses(model, trial, rows))
                        if s < best - 1e-5:
                            best, values, improved = s, trial, True
                if not improved:
                    break
            for name, v in values.items():
                print(f"{name} = {v:.4g}" + ("" if v == model.start[name] else f"  (was {model.start[name]:.4g})"))
        report(losses(model, values, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
