#!/usr/bin/env python3
"""Interleaved A/B timing of kernel builds and forced plans (H200), the method of the ab_*.jsonl files in
benchmarks/results/h200/. Builds are tune.py shims of different source trees:

    nvcc -std=c++17 -O3 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a \\
        -o /tmp/lib_new.so scripts/cuda/tune_shim.cu gemm/cuda/gemm_launcher.cu
    python3 scripts/cuda/ab.py OUT.jsonl --lib main=/tmp/lib_main.so --lib new=/tmp/lib_new.so \\
        [--plans=-1/0,4/0,4/1] [--a-scale row,mmajor] [--operands mn] [--warm] [--cublas] [--rounds 5] M,N,K ...

Per shape, every (build, plan, A-scale layout) variant is first checked against the fp32 reference (a
wrong one is listed under "wrong" and, unless --time-wrong, not timed; variants of the same plan must also
be bitwise equal, else they are listed under "bitwise"), then all are timed for --rounds rounds, each round
in a fresh random order, each time the median of 10 calls on a cold L2 (tune.timeit). A plan is
CONFIG/STREAM_K[/K_SPLIT], -1/0 being the planner's (a K split a shape or build does not allow, or a config
a build's table lacks, is skipped). A variant's key names only what varies: "new", "4/1", "main 4/1
mmajor", ... One JSON line per shape; --cublas adds block-scaled torch._scaled_mm (its timed call includes
a scale transpose; K-major operands only). --operands mn passes A and B M/N-major (the challenge layout: the timed call includes
their K-major repack). --warm times the calls back to back on a warm L2 instead (operands and scales
already cached). --time-wrong times wrong variants too: diagnostic builds that leave out part of the work.

Builds whose tile tables (kTileConfigs) differ need `-Xcompiler -fno-gnu-unique -Xlinker -Bsymbolic` on all
but the first: the inline table is a GNU-unique symbol, which one process shares across libraries loaded
with RTLD_LOCAL, so a second library would silently read the first one's table.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics

import torch

import tune


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="JSON lines, one per shape")
    ap.add_argument("shapes", nargs="+", help="M,N,K")
    ap.add_argument("--lib", action="append", required=True, help="NAME=PATH of a tune_shim build")
    ap.add_argument("--plans", default="-1/0",
                    help="comma-separated CONFIG/STREAM_K[/K_SPLIT] (-1/0: the planner's)")
    ap.add_argument("--a-scale", default="row", help="row (as quantizers make them), mmajor, or both: row,mmajor")
    ap.add_argument("--operands", default="kmajor", choices=("kmajor", "mn"), help="A and B K-major or M/N-major")
    ap.add_argument("--warm", action="store_true", help="warm L2: no flush between calls")
    ap.add_argument("--cublas", action="store_true")
    ap.add_argument("--time-wrong", action="store_true",
                    help="time wrong variants too (diagnostic builds that leave out part of the work)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    libs = {name: tune.Backend(path) for name, path in (x.split("=", 1) for x in args.lib)}
    plans = [tuple(int(v) for v in (p + "/1").split("/")[:3]) for p in args.plans.split(",")]
    layouts = args.a_scale.split(",")
    with open(args.out, "w") as f:
        for spec in args.shapes:
            m, n, k = (int(v) for v in spec.split(","))
            a, b, a_s, b_s = tune.make(m, n, k)
            ref = tune.reference(a, b, a_s, b_s)
            if args.operands == "mn":
                a, b = a.t().contiguous().t(), b.t().contiguous().t()
            scales = {"row": a_s, "mmajor": a_s.t().contiguous().t()}
            out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
            timed, firsts, wrong, bitwise = {}, {}, [], []
            for (name, be), (cfg, sk, split), layout in itertools.product(libs.items(), plans, layouts):
                if cfg >= len(be.configs):
                    continue  # a config this build's table does not have
                if cfg >= 0 and sk and be.tiles(cfg, m, n)[0] % be.tiles(cfg, m, n)[1] == 0:
                    continue  # whole waves: the stream-K plan is the whole-tile plan
                plan = f"{cfg}/{sk}" + (f"/{split}" if split > 1 else "")
                key = " ".join(part for part, varies in ((name, len(libs) > 1), (plan, len(plans) > 1),
                                                         (layout, len(layouts) > 1)) if varies) or name
                run = (lambda be=be, cfg=cfg, sk=sk, split=split, s=scales[layout], o=None:
                       be.gemm(a, b, s, b_s, out=o, config=cfg, stream_k=bool(sk), k_split=split))
                try:
                    result = run()
                except RuntimeError:  # no such plan here (a K split the shape's K does not allow)
                    continue
                if not tune.close(result, ref)[0]:
                    wrong.append(key)
                    if args.time_wrong:
                        timed[key] = lambda run=run: run(o=out)
                    continue
                if (cfg, sk, split) in firsts and not torch.equal(firsts[(cfg, sk, split)], result):
                    bitwise.append(key)
                firsts.setdefault((cfg, sk, split), result)
                timed[key] = lambda run=run: run(o=out)
            if args.cublas and k % tune.SCALE_BLOCK == 0 and args.operands == "kmajor":
                timed["cublas"] = lambda: tune.cublas(a, b, a_s, b_s)
            # Each round times the variants in a fresh random order: on power-bound shapes the position in a
            # round moved identical plans by up to 7 % (h200/sweep_planner.jsonl), and a fixed order would
            # hand that to one variant every round.
            times = {key: [] for key in timed}
            for r in range(args.rounds):
                order = list(timed)
                random.Random(r).shuffle(order)
                for key in order:
                    times[key].append(tune.timeit(timed[key], 10, cold=not args.warm))
            rec = {"m": m, "n": n, "k": k, "t": {key: round(statistics.median(v), 2) for key, v in times.items()},
                   "plan": next(iter(libs.values())).plan(m, n, k), "wrong": wrong, "bitwise": bitwise}
            f.write(json.dumps(rec) + "\n")
            f.flush()
            print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
