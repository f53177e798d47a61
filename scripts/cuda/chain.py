#!/usr/bin/env python3
"""GEMMs in a chain, the way a model's CUDA graph runs them (H200): what a launch costs behind another kernel.

    python3 scripts/cuda/chain.py OUT.jsonl main=/tmp/lib_main.so new=/tmp/libtune.so

Per shape and build (tune_shim.cu builds, see tune.py): a CUDA graph of 50 x (a 1 MB elementwise kernel, the
GEMM), replayed 4 times between two events; µs per (kernel, GEMM) pair, median of 5 rounds, builds interleaved.
Unlike tune.timeit and the package benchmark there is no L2 flush and no event between the two kernels, so a
programmatic launch of the GEMM can overlap the kernel before it (h200/pdl_chain.jsonl).
"""

from __future__ import annotations

import json
import statistics
import sys

import torch

import tune

SHAPES = [(64, 7168, 2048), (64, 2112, 7168), (128, 4096, 7168), (1024, 4096, 512), (1024, 3072, 1536),
          (4096, 7168, 2048)]
PAIRS_PER_GRAPH, REPLAYS, ROUNDS = 50, 4, 5


def main():
    libs = {name: tune.Backend(path) for name, path in (x.split("=", 1) for x in sys.argv[2:])}
    x = torch.zeros(1 << 18, device="cuda")
    with open(sys.argv[1], "w") as f:
        for m, n, k in SHAPES:
            a, b, a_s, b_s = tune.make(m, n, k)
            a_s = a_s.t().contiguous().t()  # M-major, as quantize_activation(column_major_scales=True)
            out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
            times = {name: [] for name in libs}
            for _ in range(ROUNDS):
                for name, be in libs.items():
                    for _ in range(3):  # warm-up outside the capture
                        x.add_(1.0)
                        be.gemm(a, b, a_s, b_s, out=out)
                    torch.cuda.synchronize()
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        for _ in range(PAIRS_PER_GRAPH):
                            x.add_(1.0)
                            be.gemm(a, b, a_s, b_s, out=out)
                    graph.replay()
                    torch.cuda.synchronize()
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    for _ in range(REPLAYS):
                        graph.replay()
                    end.record()
                    end.synchronize()
                    times[name].append(start.elapsed_time(end) * 1e3 / (REPLAYS * PAIRS_PER_GRAPH))
            rec = {"m": m, "n": n, "k": k, "us_per_pair": {name: round(statistics.median(v), 2) for name, v in times.items()}}
            f.write(json.dumps(rec) + "\n")
            print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
