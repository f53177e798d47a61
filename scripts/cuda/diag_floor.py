#!/usr/bin/env python3
"""What a decode call cannot go below in the benchmark's harness (cold L2, CUDA events; tune.timeit):
the event time of a one-element kernel, of our smallest GEMM, and of M = 64 GEMMs whose B grows along K
at N = 24576 - the marginal bytes per microsecond between two of them is the streaming rate once the
fixed costs (launch, ramp, tail) are paid. Per-tensor FP8 torch._scaled_mm is timed on the same operands.

    python3 scripts/cuda/diag_floor.py /tmp/libtune.so OUT.json
"""
import json
import sys

import torch

import tune

SHAPES = [(64, 64, 128), (64, 24576, 128), (64, 24576, 768), (64, 24576, 1536), (128, 24576, 1536),
          (64, 7168, 16384), (128, 7168, 16384)]
ITERS, ROUNDS = 30, 3


def best(fn):
    return min(tune.timeit(fn, ITERS) for _ in range(ROUNDS))


def main():
    be = tune.Backend(sys.argv[1])
    x = torch.zeros(1, device="cuda")
    rows = [{"what": "one-element add", "us": best(lambda: x.add_(1))}]
    for m, n, k in SHAPES:
        a, b, a_s, b_s = tune.make(m, n, k)
        a_s = a_s.t().contiguous().t()
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        one = torch.ones((), device="cuda")
        nbytes = m * k + n * k + 2 * m * n + 4 * (a_s.numel() + b_s.numel())
        for what, fn in (("ours", lambda: be.gemm(a, b, a_s, b_s, out=out)),
                         ("per-tensor _scaled_mm",
                          lambda: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))):
            us = best(fn)
            rows.append({"what": what, "m": m, "n": n, "k": k, "bytes": nbytes, "us": us, "tb_per_s": nbytes / us / 1e6})
    ours = {(r["m"], r["n"], r["k"]): r for r in rows if r["what"] == "ours"}
    for lo, hi in (((64, 24576, 128), (64, 24576, 768)), ((64, 24576, 768), (64, 24576, 1536))):
        d_bytes, d_us = ours[hi]["bytes"] - ours[lo]["bytes"], ours[hi]["us"] - ours[lo]["us"]
        rows.append({"what": f"marginal {lo} -> {hi}", "bytes": d_bytes, "us": d_us, "tb_per_s": d_bytes / d_us / 1e6})
    for r in rows:
        print(json.dumps(r))
    with open(sys.argv[2], "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
