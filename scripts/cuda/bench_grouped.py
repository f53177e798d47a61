#!/usr/bin/env python3
"""Times the CUDA grouped GEMM (MoE experts) on DeepSeek-V3 expert shapes (256 experts, top-8): gate-up
N = 4096, K = 7168 and down N = 7168, K = 2048 at 64 / 512 / 4096 tokens, routed by a seeded skewed
distribution, contiguous (group_ends) and batched by expert id (row_group, pre-pass included). Each row is
checked against a float64 reference of a few experts first. CUDA graph replays (no launch overhead), a
256 MB write before each (cold L2), median of --iters.

    python3 scripts/cuda/bench_grouped.py [/tmp/libtune.so] [--iters 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grouped_harness import Grouped, skewed_counts  # noqa: E402

EXPERTS, TOP_K = 256, 8
SHAPES = [(4096, 7168), (7168, 2048)]
TOKENS = [64, 512, 4096]
FLUSH_BYTES = 256 * 1024 * 1024


def check(out, a, a_s, w, w_s, ends):
    """Experts with the most and the fewest (non-zero) rows against float64."""
    starts = torch.cat([ends.new_zeros(1), ends[:-1]]).tolist()
    rows = [(e, s, t) for e, (s, t) in enumerate(zip(starts, ends.tolist())) if t > s]
    for e, s, t in (max(rows, key=lambda r: r[2] - r[1]), min(rows, key=lambda r: r[2] - r[1])):
        k = a.shape[1]
        a_deq = a[s:t].double() * a_s[s:t].double().repeat_interleave(128, 1)[:, :k]
        w_deq = w[e].double() * w_s[e].double().repeat_interleave(128, 0)[: w.shape[1]].repeat_interleave(128, 1)[:, :k]
        ref = a_deq @ w_deq.t()
        err = ((out[s:t].double() - ref).abs().max() / ref.abs().max()).item()
        if not err < 1e-2:
            raise SystemExit(f"WRONG: expert {e} rows {s}:{t} max relative error {err:.3g}")


def time_graph(fn, iters):
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    fn()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    times = []
    for _ in range(iters):
        flush.zero_()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib", help="the built tuner shim (tests/cuda/cuda_shim.py NVCC_FLAGS and SHIM_SOURCES)")
    ap.add_argument("--iters", type=int, default=30)
    args = ap.parse_args()
    grouped = Grouped(args.lib)
    print(f"{'tokens':>6} {'N':>5} {'K':>5} {'mode':>10} {'us':>9} {'TFLOP/s':>8}  (max/min rows an expert)")
    for n, k in SHAPES:
        w = torch.randn(EXPERTS, n, k, device="cuda").to(torch.float8_e4m3fn)
        w_s = torch.rand(EXPERTS, -(-n // 128), -(-k // 128), device="cuda") + 0.5
        for tokens in TOKENS:
            counts = skewed_counts(tokens, TOP_K, EXPERTS, seed=tokens)
            m = tokens * TOP_K
            ends = torch.cumsum(counts, 0).to(torch.int32).cuda()
            a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
            a_s = torch.rand(m, -(-k // 128), device="cuda") + 0.5
            out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
            grouped(a, w, a_s, w_s, out, group_ends=ends)
            check(out, a, a_s, w, w_s, ends.cpu())
            flops = 2.0 * m * n * k
            ids = torch.repeat_interleave(torch.arange(EXPERTS), counts)[torch.randperm(m)].cuda()
            for mode, kw in (("contiguous", {"group_ends": ends}), ("row_group", {"row_group": ids})):
                us = time_graph(lambda: grouped(a, w, a_s, w_s, out, **kw), args.iters)
                print(f"{tokens:>6} {n:>5} {k:>5} {mode:>10} {us:>9.1f} {flops / us / 1e6:>8.1f}"
                      f"  ({int(counts.max())}/{int(counts[counts > 0].min())})")


if __name__ == "__main__":
    main()
