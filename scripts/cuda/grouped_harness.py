"""ctypes access to the CUDA backend's grouped GEMM through the tuner shim (scripts/cuda/tune_shim.cu, its
ctypes mirrors in tune.py), for tests/cuda/test_cuda_grouped.py; no
package build needed (tests/cuda/cuda_shim.py builds the shim)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch

from tune import ALLOC, OUT_FORMATS, GemmArgs, _allocate, _workspace


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
