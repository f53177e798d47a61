"""ctypes access to the CUDA backend's grouped GEMM through the tuner shim (scripts/cuda/tune_shim.cu), for
tests/cuda/test_cuda_grouped.py and scripts/cuda/bench_grouped.py; no package build needed.

    nvcc -std=c++17 -O3 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a \\
        -o /tmp/libtune.so scripts/cuda/tune_shim.cu gemm/cuda/gemm_launcher.cu
"""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parents[2]
OUT_FORMATS = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}


class GemmArgs(ctypes.Structure):  # mirrors gemm::GemmArgs (gemm/gemm_contract.h), every field
    _fields_ = [(name, ctypes.c_int64) for name in ("m", "n", "k")] + [
        ("a", ctypes.c_void_p), ("a_stride_m", ctypes.c_int64), ("a_stride_k", ctypes.c_int64),
        ("b", ctypes.c_void_p), ("b_stride_n", ctypes.c_int64), ("b_stride_k", ctypes.c_int64),
        ("a_scale", ctypes.c_void_p), ("a_scale_stride_m", ctypes.c_int64), ("a_scale_stride_k", ctypes.c_int64),
        ("b_scale", ctypes.c_void_p), ("b_scale_stride_n", ctypes.c_int64), ("b_scale_stride_k", ctypes.c_int64),
        ("c", ctypes.c_void_p), ("c_stride_m", ctypes.c_int64), ("c_stride_n", ctypes.c_int64),
        ("a_format", ctypes.c_int32), ("b_format", ctypes.c_int32), ("c_format", ctypes.c_int32),
        ("a_scale_format", ctypes.c_int32), ("b_scale_format", ctypes.c_int32),
        ("num_groups", ctypes.c_int64), ("b_stride_group", ctypes.c_int64), ("b_scale_stride_group", ctypes.c_int64),
        ("group_ends", ctypes.c_void_p), ("row_group", ctypes.c_void_p), ("group_rows", ctypes.c_void_p),
        ("group_row_stride", ctypes.c_int64)]


ALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
# A call's workspace lives until the call returns, as in the binding: the caching allocator hands the
# blocks out again only to later work on the same stream.
_workspace: list[torch.Tensor] = []


@ALLOC
def _allocate(_context, nbytes):
    t = torch.empty(max(int(nbytes), 1), dtype=torch.uint8, device="cuda")
    _workspace.append(t)
    return t.data_ptr()


def build_shim(out: Path) -> Path:
    subprocess.run(["nvcc", "-std=c++17", "-O3", "-shared", "-Xcompiler", "-fPIC",
                    "-gencode=arch=compute_90a,code=sm_90a", "-o", str(out),
                    str(REPO_ROOT / "scripts/cuda/tune_shim.cu"), str(REPO_ROOT / "gemm/cuda/gemm_launcher.cu")],
                   check=True)
    return out


class Grouped:
    def __init__(self, path: str | Path):
        self.lib = ctypes.CDLL(str(path))
        self.lib.tune_gemm.argtypes = [ctypes.POINTER(GemmArgs), ALLOC, ctypes.c_void_p, ctypes.c_void_p,
                                       ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]

    def __call__(self, a, w, a_s, w_s, out, *, group_ends=None, row_group=None, group_rows=None):
        """out[rows of group g] = a[rows] @ dequant(w[g]).T; a [m, k], w [E, n, k], w_s [E, n/128, k/128],
        out [m, n] (masked layout: a, out viewed as [E * max_m, ...], group_rows [E])."""
        m, k = a.shape
        groups, n = w.shape[0], w.shape[1]
        ptr = lambda t: t.data_ptr() if t is not None else None  # noqa: E731
        args = GemmArgs(m, n, k, a.data_ptr(), *a.stride(), w.data_ptr(), w.stride(1), w.stride(2),
                        a_s.data_ptr(), *a_s.stride(), w_s.data_ptr(), w_s.stride(1), w_s.stride(2),
                        out.data_ptr(), *out.stride(), 0, 0, OUT_FORMATS[out.dtype], 0, 0,
                        groups, w.stride(0), w_s.stride(0), ptr(group_ends), ptr(row_group), ptr(group_rows),
                        m // groups if group_rows is not None else 0)
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
