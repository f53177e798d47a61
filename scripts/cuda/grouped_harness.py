"""ctypes access to the CUDA backend's grouped GEMM through the tuner shim (scripts/cuda/tune_shim.cu, its
ctypes mirrors in tune.py), for tests/cuda/test_cuda_grouped.py; no
package build needed (tests/cuda/cuda_shim.py builds the shim).

As a script, a grouped kernel or planner A/B between two shims (tune.py --vs for the dense GEMM):

    python3 scripts/cuda/grouped_harness.py NEW_LIB --vs BASE_LIB [--rounds 3] [--iters 10]

runs the contiguous suite's prefill-sized cases (the benchmark's routing, 4096 and 32768 tokens, and
DeepGEMM's 4 x 8192) through each library's own grouped plan, compares the two outputs (whole-tile plans
of any tile shape sum each output in the same order, so they should be bitwise equal; a relative
difference above 1e-2 fails), then times both in shuffled rounds on a cold L2 and prints new/base per
case and the geomean.
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from pathlib import Path

import torch

from tune import ALLOC, OUT_FORMATS, GemmArgs, _allocate, _workspace, geomean, interleaved_medians


class Grouped:
    def __init__(self, path: str | Path):
        self.lib = ctypes.CDLL(str(path))
        self.lib.tune_gemm.argtypes = [ctypes.POINTER(GemmArgs), ALLOC, ctypes.c_void_p, ctypes.c_void_p,
                                       ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]

    def __call__(self, a, w, a_s, w_s, out, *, group_ends=None, row_group=None, group_rows=None, expected_rows=0):
        """out[rows of group g] = a[rows] @ dequant(w[g]).T; a [m, k], w [E, n, k], w_s [E, n/128, k/128],
        out [m, n] (masked layout: a, out viewed as [E * max_m, ...], group_rows [E])."""
        m, k = a.shape
        groups, n = w.shape[0], w.shape[1]
        ptr = lambda t: t.data_ptr() if t is not None else None  # noqa: E731
        args = GemmArgs(m, n, k, a.data_ptr(), *a.stride(), w.data_ptr(), w.stride(1), w.stride(2),
                        a_s.data_ptr(), *a_s.stride(), w_s.data_ptr(), w_s.stride(1), w_s.stride(2),
                        out.data_ptr(), *out.stride(), 0, 0, OUT_FORMATS[out.dtype], 0, 0,
                        groups, w.stride(0), w_s.stride(0), ptr(group_ends), ptr(row_group), ptr(group_rows),
                        m // groups if group_rows is not None else 0, expected_rows)
        err = ctypes.create_string_buffer(512)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        try:
            if self.lib.tune_gemm(ctypes.byref(args), _allocate, None, stream, -1, 0, 1, err, 512):
                raise RuntimeError(err.value.decode())
        finally:
            _workspace.clear()
        return out


def skewed_counts(tokens: int, top_k: int, groups: int, seed: int) -> torch.Tensor:
    """Rows per group of `tokens` x top-k routing with a seeded skew (Zipf-like popularity, each token's
    top-k groups distinct), as int64 [groups]."""
    gen = torch.Generator().manual_seed(seed)
    popularity = 1.0 / torch.arange(1, groups + 1, dtype=torch.float64) ** 0.8
    popularity = popularity[torch.randperm(groups, generator=gen)]
    ids = torch.multinomial(popularity.expand(tokens, groups), top_k, replacement=False, generator=gen)
    return torch.bincount(ids.reshape(-1), minlength=groups)


def vs(new_lib: str, base_lib: str, rounds: int, iters: int) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks
    from benchmarks.grouped import route
    from benchmarks.shapes import DEEPGEMM_GROUPED_CASE, MOE_LAYERS, MOE_TOPK, GroupedShape

    libs = {"base": Grouped(base_lib), "new": Grouped(new_lib)}
    cases = [GroupedShape(name, e, n, k, tokens=t, topk=MOE_TOPK) for t in (4096, 32768) for name, e, n, k in MOE_LAYERS]
    ratios, differ, wrong = [], [], []
    for shape in cases + [DEEPGEMM_GROUPED_CASE]:
        counts, m, n, k = route(shape), shape.m, shape.n, shape.k
        a = (torch.randn(m, k, device="cuda") * 2).to(torch.float8_e4m3fn)
        a_s = (torch.rand(-(-k // 128), m, device="cuda") + 0.5).t()  # M-major, as the benchmark gives it
        w = (torch.randn(shape.experts, n, k, device="cuda") * 2).to(torch.float8_e4m3fn)
        w_s = torch.rand(shape.experts, -(-n // 128), -(-k // 128), device="cuda") + 0.5
        ends = torch.cumsum(torch.tensor(counts), 0).to(torch.int32).cuda()
        outs = {tag: torch.empty(m, n, dtype=torch.bfloat16, device="cuda") for tag in libs}
        runs = {tag: (lambda lib=lib, o=outs[tag]: lib(a, w, a_s, w_s, o, group_ends=ends)) for tag, lib in libs.items()}
        for run in runs.values():
            run()
        if not torch.equal(outs["base"], outs["new"]):
            diff = (outs["new"].float() - outs["base"].float()).abs().max() / outs["base"].float().abs().max()
            (wrong if diff > 1e-2 else differ).append(f"{shape.label} ({diff:.1e})")
        med = interleaved_medians(runs, rounds, iters)
        ratios.append(med["new"] / med["base"])
        print(f"{shape.label:>36} base {med['base']:9.1f} us  new {med['new']:9.1f} us  new/base {ratios[-1]:.3f}  "
              f"{2 * m * n * k / med['new'] / 1e6:6.0f} TFLOP/s", flush=True)
    print(f"new/base geomean {geomean(ratios):.4f} over {len(ratios)} cases; "
          f"outputs not bitwise equal on: {differ or 'none'}; beyond 1e-2: {wrong or 'none'}")
    return 1 if wrong else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lib")
    parser.add_argument("--vs", metavar="BASE_LIB", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args()
    sys.exit(vs(args.lib, args.vs, args.rounds, args.iters))
