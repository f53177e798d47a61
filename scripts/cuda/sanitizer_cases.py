#!/usr/bin/env python3
"""A few ragged / stream-K / repack shapes through the built package, each checked against
the float64 reference; run under compute-sanitizer by scripts/cuda/run_sanitizer.sh (sm_90a GPU only)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
os.environ["LOCAL_KERNELS"] = f"kernels-community/gemm={ROOT}"

import torch  # noqa: E402
import kernels  # noqa: E402
from _helpers import assert_close_gemm, make_inputs, reference_gemm  # noqa: E402

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
    return 0


if __name__ == "__main__":
    sys.exit(main())
