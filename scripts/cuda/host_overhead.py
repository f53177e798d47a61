#!/usr/bin/env python3
"""Host time of one eager call: 2000 calls queued back to back, wall time per call when the last is queued
(host) and after the synchronize (wall), for the package (loaded through kernels.get_kernel, as users do:
`gemm.gemm` and the bare op `gemm.ops.gemm`) and for torch._scaled_mm. Run from the repository root after
scripts/build.py:

    LOCAL_KERNELS=kernels-community/gemm=$PWD python3 scripts/cuda/host_overhead.py
"""
import os
import time

import torch

CALLS, WARMUP = 2000, 50
SHAPES = [(1, 7168, 2048), (64, 2112, 7168), (128, 4096, 7168), (1024, 4096, 512)]


def per_call(fn):
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(CALLS):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return 1e6 * (t1 - t0) / CALLS, 1e6 * (t2 - t0) / CALLS


def main():
    os.environ.setdefault("LOCAL_KERNELS", f"kernels-community/gemm={os.getcwd()}")
    from kernels import get_kernel

    g = get_kernel("kernels-community/gemm", version=1)
    one = torch.ones((), device="cuda")
    for m, n, k in SHAPES:
        a, a_s = g.quantize_activation(torch.randn(m, k, device="cuda"))
        b, b_s = g.quantize_weight(torch.randn(n, k, device="cuda"))
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        calls = {"gemm.gemm": lambda: g.gemm(a, b, a_s, b_s, out=out),
                 "gemm.ops.gemm": lambda: g.ops.gemm(out, a, b, a_s, b_s),
                 "_scaled_mm per-tensor": lambda: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one,
                                                                   out_dtype=torch.bfloat16)}
        if m > 1 and k % 512 == 0:  # cuBLASLt block scaling: M > 1, K a multiple of 4 scale blocks
            a_s_mmajor = a_s.t().contiguous().t()
            calls["_scaled_mm block"] = lambda: torch._scaled_mm(a, b.t(), scale_a=a_s_mmajor, scale_b=b_s.t(),
                                                                 out_dtype=torch.bfloat16)
        for name, fn in calls.items():
            host, wall = per_call(fn)
            print(f"{m}x{n}x{k} {name:24s} host {host:6.2f} us/call  wall {wall:6.2f} us/call", flush=True)


if __name__ == "__main__":
    main()
