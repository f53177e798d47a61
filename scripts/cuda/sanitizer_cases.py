#!/usr/bin/env python3
"""A few ragged / stream-K / repack shapes and grouped GEMMs through the built package, each checked against
the float64 reference; then, with GEMM_CUDA_SHIM set (validate.sh sets it), UE8M0 scales and the
activation quantizer's ragged and misaligned tails through the raw launcher. Run under compute-sanitizer by
scripts/cuda/run_sanitizer.sh (sm_90a GPU only)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "cuda"))
os.environ["LOCAL_KERNELS"] = f"kernels-community/gemm={ROOT}"

import torch  # noqa: E402
import kernels  # noqa: E402
from _helpers import assert_close_gemm, make_inputs, reference_gemm  # noqa: E402
from cuda_shim import load_tune  # noqa: E402

CASES = [  # (m, n, k, layout): ragged M/N/K, K % 16 != 0, stream-K, K split, both BLOCK_M, M-major repack
    (1, 8, 16, "contiguous"),
    (77, 520, 1000, "contiguous"),
    (64, 576, 7168, "contiguous"),
    (30, 500, 5000, "contiguous"),
    (300, 2112, 1040, "contiguous"),
    (1030, 1600, 576, "contiguous"),
    (129, 200, 1152, "a_m_major"),
    (96, 320, 384, "b_padded"),
]


def main() -> int:
    gemm = kernels.get_kernel("kernels-community/gemm", version=1)
    for m, n, k, layout in CASES:
        a, b, a_s, b_s = make_inputs(m, n, k, "cuda", torch.float8_e4m3fn, layout)
        out = gemm.gemm(a, b, a_s, b_s)
        torch.cuda.synchronize()
        assert_close_gemm(out, reference_gemm(a, b, a_s, b_s))
        print(f"ok {m}x{n}x{k} {layout}", flush=True)
    grouped_cases(gemm)
    shim_cases()
    return 0


# (rows per expert, n, k): 64-row tiles; 128-row tiles on segments starting at rows that are not multiples of
# 4 (A-scale boxes from the aligned row below); 192x128 tiles. Three rows past the last offset each.
GROUPED_CASES = [([3, 0, 70, 9], 192, 192), ([300, 5, 211, 1], 256, 512), ([1031, 1221], 256, 1536)]


def grouped_cases(gemm) -> None:
    for counts, n, k in GROUPED_CASES:
        m = sum(counts) + 3
        a, _, a_s, _ = make_inputs(m, n, k, "cuda", torch.float8_e4m3fn)
        experts = [make_inputs(1, n, k, "cuda", torch.float8_e4m3fn, seed=g + 1) for g in range(len(counts))]
        w, ws = torch.stack([e[1] for e in experts]), torch.stack([e[3] for e in experts])
        ends = torch.tensor(counts).cumsum(0).to(torch.int32).cuda()
        ids = torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts))
        ids = torch.cat([ids, torch.full((3,), len(counts))]).cuda()  # the tail rows: sentinels
        pow2 = torch.exp2(torch.round(torch.log2(a_s.abs())))  # UE8M0 holds positive powers of two
        for routing in ((ends, None), (None, ids)):
            for scales in (a_s, pow2.to(torch.float8_e8m0fnu)):
                out = torch.zeros(m, n, dtype=torch.bfloat16, device="cuda")
                gemm.ops.grouped_gemm(out, a, w, scales, ws, *routing)
                torch.cuda.synchronize()
                begin = 0
                for g, c in enumerate(counts):
                    rows = slice(begin, begin + c)
                    if c:
                        assert_close_gemm(out[rows], reference_gemm(a[rows], w[g], scales[rows].float(), ws[g]))
                    begin += c
                assert not out[begin:].any(), "a row past the last offset was written"
        # The masked layout [E, max_m, K], its scales M-major over all E * max_m rows (read in place by TMA).
        max_m = -(-max(counts) // 64) * 64
        a3, _, s3, _ = make_inputs(len(counts) * max_m, n, k, "cuda", torch.float8_e4m3fn, seed=7)
        s3 = s3.t().contiguous().t()
        out = torch.zeros(len(counts), max_m, n, dtype=torch.bfloat16, device="cuda")
        gemm.grouped_gemm(a3.view(len(counts), max_m, k), w, s3.view(len(counts), max_m, -1), ws,
                          masked_m=torch.tensor(counts, dtype=torch.int32, device="cuda"), out=out)
        torch.cuda.synchronize()
        for g, c in enumerate(counts):
            rows = slice(g * max_m, g * max_m + c)
            if c:
                assert_close_gemm(out[g, :c], reference_gemm(a3[rows], w[g], s3[rows], ws[g]))
            assert not out[g, c:].any(), "a masked row was written"
        print(f"ok grouped {counts} x {n} x {k}", flush=True)


UE8M0_CASES = [(1, 8, 16), (77, 520, 1000), (300, 2112, 1040)]  # (m, n, k): 64- and 128-row plans
QUANT_CASES = [(1, 16), (3, 100), (17, 1001), (65, 1000)]  # (m, k): ragged groups, K % 8 != 0


def shim_cases() -> None:
    path = os.environ.get("GEMM_CUDA_SHIM")
    if not path:
        print("shim cases skipped: GEMM_CUDA_SHIM is not set", flush=True)
        return
    tune = load_tune()
    be = tune.Backend(path)
    for m, n, k in UE8M0_CASES:
        a, b, a_s, b_s = tune.make(m, n, k)
        a_e = torch.randint(120, 134, a_s.shape, device="cuda", dtype=torch.uint8)
        b_e = torch.randint(120, 134, b_s.shape, device="cuda", dtype=torch.uint8)
        out = be.gemm(a, b, a_e, b_e)
        want = be.gemm(a, b, torch.exp2(a_e.float() - 127), torch.exp2(b_e.float() - 127))
        torch.cuda.synchronize()
        assert torch.equal(out.view(torch.int16), want.view(torch.int16)), (m, n, k)
        print(f"ok UE8M0 {m}x{n}x{k}", flush=True)
    for m, k in QUANT_CASES:
        for dtype in (torch.bfloat16, torch.float32):
            buf = torch.randn(m, k + 1, device="cuda").to(dtype)
            kb = -(-k // 128)
            q = torch.empty(m, k, dtype=torch.uint8, device="cuda")
            for x in (buf[:, :k], buf[:, 1:]):
                be.quantize(x, q, torch.empty(kb, m, device="cuda").t())
                be.quantize(x, q, torch.empty(m, kb, dtype=torch.uint8, device="cuda"), scale_format=1)
            torch.cuda.synchronize()
            print(f"ok quantize {m}x{k} {dtype}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
