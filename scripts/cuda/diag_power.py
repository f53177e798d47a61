#!/usr/bin/env python3
"""SM clock, board power, temperature and the active clock-event (throttle) reasons while one GEMM plan runs
back to back (~1.5 s, warm L2), sampled by nvidia-smi every 20 ms; medians over the middle of the run (the
most frequent reasons mask), with the call time. Shows where the H200 runs at its
power limit, and what spreading a partial wave over more SMs (stream-K) does to the clock.

    python3 scripts/cuda/diag_power.py /tmp/libtune.so OUT.json M,N,K,CONFIG,STREAM_K ... [M,N,K,cublas]
"""
import json
import statistics
import subprocess
import sys
import time

import torch

import tune

RUN_S = 1.5


def sample(fn):
    proc = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active",
                             "--format=csv,noheader,nounits", "-lms", "20"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    fn()
    torch.cuda.synchronize()
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < RUN_S:
        for _ in range(20):
            fn()
        calls += 20
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    proc.terminate()
    lines = [[v.strip() for v in l.split(",")] for l in proc.communicate()[0].strip().splitlines() if l.count(",") == 3]
    samples = [(float(c), float(p), float(t), r) for c, p, t, r in lines]
    middle = samples[len(samples) // 4: 3 * len(samples) // 4] or samples
    return {"sm_mhz": statistics.median(s[0] for s in middle), "watts": statistics.median(s[1] for s in middle),
            "temp_c": statistics.median(s[2] for s in middle), "reasons": statistics.mode(s[3] for s in middle),
            "us_per_call": 1e6 * elapsed / calls, "samples": len(samples)}


def main():
    be = tune.Backend(sys.argv[1])
    rows = []
    for spec in sys.argv[3:]:
        m, n, k, plan = spec.split(",", 3)
        m, n, k = int(m), int(n), int(k)
        a, b, a_s, b_s = tune.make(m, n, k)
        a_s = a_s.t().contiguous().t()
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        if plan == "cublas":
            one = torch.ones((), device="cuda")
            fn = lambda: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        else:
            cfg, sk = (int(v) for v in plan.split(","))
            fn = lambda: be.gemm(a, b, a_s, b_s, out=out, config=cfg, stream_k=bool(sk))
        row = {"m": m, "n": n, "k": k, "plan": plan, **sample(fn)}
        row["tflops"] = 2 * m * n * k / row["us_per_call"] / 1e6
        rows.append(row)
        print(json.dumps(row), flush=True)
    with open(sys.argv[2], "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
