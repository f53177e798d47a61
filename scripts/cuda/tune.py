#!/usr/bin/env python3
"""CUDA-backend tuning harness (sm_90a GPU): drives gemm_launch and forced plans through ctypes, no package build.

    nvcc -std=c++17 -O3 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a \\
        -o /tmp/libtune.so scripts/cuda/tune_shim.cu gemm/cuda/gemm_launcher.cu gemm/cuda/quantize_launcher.cu
    python3 scripts/cuda/tune.py /tmp/libtune.so [--check] [--suite] [--sweep FILE.jsonl]

--check: every tile config x {whole tiles, stream-K} on ragged shapes, plus M-major, misaligned, padded
         and fp16/fp32 outputs, against an fp32 reference (fresh data, signed per-block scales);
--suite: DeepSeek-V3 and AMD-challenge shapes, ours (heuristic plan) vs cuBLAS block-scaled
         torch._scaled_mm (checked first; wrong results are reported as WRONG, not timed);
--sweep: times every config, whole tiles and stream-K, per suite shape, and cuBLAS: the data the cost
         model in gemm/cuda/planner.h is fitted to;
--profile M,N,K,CONFIG[,STREAM_K]: two launches of one forced plan, for `ncu --launch-skip 1 --launch-count 1`;
--quant: the activation quantizer (bf16 -> e4m3fn + M-major fp32 scales) on DeepSeek-V3 activation shapes,
         time and achieved DRAM bandwidth (bytes read + written);
--ab RESULTS.json: a planner A/B against a benchmark run (benchmarks/results/*/results.json) with a
         DeepGEMM peer: on every K-major shape where DeepGEMM beat ours by more than 5 % (call or kernel
         time), the base plan (--base, default the heuristic's), the heuristic's plan and every other
         whole-tile / stream-K plan (and K splits where M <= 512), each checked against the fp32
         reference first, interleaved in shuffled rounds; prints base, new, new/base, the fastest plan
         and DeepGEMM's time from the file (--ab-shapes adds shapes without one); --ab-out FILE.jsonl
         keeps every plan's median in the format of tests/cuda/planner_timings.jsonl.
--vs BASE_LIB: a kernel A/B: each shape's planned plan run through this library and BASE_LIB (a shim
         built from the code before the change; each with its own planner's plan, so that a new tile
         row is measured against what the base plans in its place), each checked against the
         fp32 reference first, then timed in --rounds shuffled rounds of --iters calls; As M-major, as the
         benchmark gives it. Shapes: DeepSeek-V3 decode (M = 1..128), a large set and ragged M; prints
         new/base per shape and the geomean per set. A change is kept only if no set is slower.
Timing: CUDA events, a 256 MB buffer written before each iteration (cold L2), median.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import random
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.shapes
from benchmarks.shapes import CHALLENGE as CH, DEEPSEEK_V3 as DS, LARGE_SQUARE as BIG  # noqa: E402
from benchmarks.shapes import DEEPSEEK_V3_DECODE_MS as DS_DECODE_MS, DEEPSEEK_V3_NK as DS_NK, mnk_grid  # noqa: E402

# The shim this harness drives, as the tests and scripts/cuda/trace_ctas.py build it (paths from the root).
SHIM_SOURCES = ["scripts/cuda/tune_shim.cu", "gemm/cuda/gemm_launcher.cu", "gemm/cuda/quantize_launcher.cu"]
NVCC_FLAGS = ["-std=c++17", "-O3", "-shared", "-Xcompiler", "-fPIC", "-gencode=arch=compute_90a,code=sm_90a"]
SCALE_BLOCK = 128
FLUSH_BYTES = 256 * 1024 * 1024
OUT_FORMATS = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}
QUANT = [(m, k) for m in (64, 128, 1024, 4096, 16384) for k in (1536, 2048, 7168, 16384)] + [(65536, 7168)]


class GemmArgs(ctypes.Structure):  # mirrors gemm::GemmArgs (gemm/gemm_contract.h)
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
        ("group_row_stride", ctypes.c_int64), ("expected_group_rows", ctypes.c_int64)]


class QuantizeArgs(ctypes.Structure):  # mirrors gemm::QuantizeArgs (gemm/gemm_contract.h)
    _fields_ = [("m", ctypes.c_int64), ("k", ctypes.c_int64),
                ("x", ctypes.c_void_p), ("x_stride_m", ctypes.c_int64), ("x_format", ctypes.c_int32),
                ("q", ctypes.c_void_p), ("q_stride_m", ctypes.c_int64), ("q_format", ctypes.c_int32),
                ("scale", ctypes.c_void_p), ("scale_stride_m", ctypes.c_int64), ("scale_stride_k", ctypes.c_int64),
                ("scale_format", ctypes.c_int32), ("pow2_scale", ctypes.c_bool), ("static_scale", ctypes.c_void_p)]


IN_FORMATS = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}
# UE8M0 scales: torch.float8_e8m0fnu, or their raw exponent bytes as uint8.
UE8M0_DTYPES = (torch.uint8,) + ((torch.float8_e8m0fnu,) if hasattr(torch, "float8_e8m0fnu") else ())


def scale_format(t: torch.Tensor) -> int:
    return 1 if t.dtype in UE8M0_DTYPES else 0


ALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
# One call's workspace, released when the call returns as the binding does: the caching allocator hands
# the blocks out again only to later work on the same stream. (Keeping them alive for the whole run
# made every call with a large workspace pay a synchronous cudaMalloc inside the timed region.)
_workspace: list[torch.Tensor] = []


@ALLOC
def _allocate(_context, nbytes):
    t = torch.empty(max(int(nbytes), 1), dtype=torch.uint8, device="cuda")
    _workspace.append(t)
    return t.data_ptr()


class Backend:
    def __init__(self, path: str):
        self.lib = ctypes.CDLL(path)
        self.lib.tune_gemm.argtypes = [ctypes.POINTER(GemmArgs), ALLOC, ctypes.c_void_p, ctypes.c_void_p,
                                       ctypes.c_int, ctypes.c_int, ctypes.c_int,  # config, stream_k, k_split
                                       ctypes.c_char_p, ctypes.c_int]
        self.lib.tune_plan.argtypes = [ctypes.c_longlong] * 3 + [ctypes.POINTER(ctypes.c_int)]
        self.lib.tune_config.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
        self.lib.tune_slots.argtypes = [ctypes.POINTER(ctypes.c_int)]
        self.lib.tune_quantize.argtypes = [ctypes.POINTER(QuantizeArgs), ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        sizes = (ctypes.c_longlong * 2)()
        self.lib.tune_args_sizes(sizes)
        if tuple(sizes) != (ctypes.sizeof(GemmArgs), ctypes.sizeof(QuantizeArgs)):
            raise RuntimeError(f"ctypes mirrors out of date: C++ sizes {tuple(sizes)}, ctypes "
                               f"{(ctypes.sizeof(GemmArgs), ctypes.sizeof(QuantizeArgs))}")
        sizes = self.lib.tune_max_cluster_ctas()
        o = (ctypes.c_int * (sizes + 1))()
        self.lib.tune_slots(o)
        self.slots = {s: o[s] for s in range(1, sizes + 1)}  # co-resident clusters of s CTAs (1: SMs)
        self.configs = []  # (block_m, block_n, cluster_n)
        self.max_k_split = []  # per config: the largest K split it runs (1: none)
        for i in range(self.lib.tune_num_configs()):
            o = (ctypes.c_int * 5)()
            self.lib.tune_config(i, o)
            self.configs.append((o[0], o[1], o[2]))
            self.max_k_split.append(o[4])

    def tiles(self, cfg, m, n):
        """Schedule tiles of a config (cluster tiles: BLOCK_M x cluster_n * BLOCK_N) and its slots."""
        bm, bn, cn = self.configs[cfg]
        return -(-m // bm) * -(-n // (bn * cn)), self.slots[cn]

    def gemm(self, a, b, a_s, b_s, out=None, out_dtype=torch.bfloat16, config=-1, stream_k=False, k_split=1,
             num_groups=0):
        m, k = a.shape
        n = b.shape[0]
        c = out if out is not None else torch.empty(m, n, dtype=out_dtype, device="cuda")
        args = GemmArgs(m, n, k, a.data_ptr(), *a.stride(), b.data_ptr(), *b.stride(),
                        a_s.data_ptr(), *a_s.stride(), b_s.data_ptr(), *b_s.stride(),
                        c.data_ptr(), *c.stride(), 0, 0, OUT_FORMATS[c.dtype], scale_format(a_s), scale_format(b_s),
                        num_groups)
        err = ctypes.create_string_buffer(512)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        try:
            plan = (config, int(stream_k), k_split)
            if self.lib.tune_gemm(ctypes.byref(args), _allocate, None, stream, *plan, err, 512):
                raise RuntimeError(err.value.decode())
        finally:
            _workspace.clear()
        return c

    def quantize(self, x, q, scale, scale_format=0, pow2=False, static_scale=None, q_format=0):
        """quantize_launch of x [M, K] into q [M, K] (q_format 0: e4m3fn) and scale [M, ceil(K / 128)] (any
        strides, scale_format 0: fp32, 1: UE8M0)."""
        m, k = x.shape
        args = QuantizeArgs(m, k, x.data_ptr(), x.stride(0), IN_FORMATS[x.dtype], q.data_ptr(), q.stride(0), q_format,
                            scale.data_ptr(), *scale.stride(), scale_format, pow2,
                            static_scale.data_ptr() if static_scale is not None else None)
        err = ctypes.create_string_buffer(512)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        if self.lib.tune_quantize(ctypes.byref(args), stream, err, 512):
            raise RuntimeError(err.value.decode())

    def plan(self, m, n, k):
        o = (ctypes.c_int * 7)()
        self.lib.tune_plan(m, n, k, o)
        return tuple(o)


def make(m, n, k):
    kb, nb = -(-k // SCALE_BLOCK), -(-n // SCALE_BLOCK)
    a = (torch.randn(m, k, device="cuda") * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, device="cuda") * 2).to(torch.float8_e4m3fn)
    return a, b, torch.randn(m, kb, device="cuda"), torch.randn(nb, kb, device="cuda")


def reference(a, b, a_s, b_s):
    k, n = a.shape[1], b.shape[0]
    a_deq = a.float() * a_s.repeat_interleave(SCALE_BLOCK, 1)[:, :k]
    b_deq = b.float() * b_s.repeat_interleave(SCALE_BLOCK, 0)[:n].repeat_interleave(SCALE_BLOCK, 1)[:, :k]
    return a_deq @ b_deq.t()


def close(out, ref) -> tuple[bool, float]:
    o = out.float()
    if not torch.isfinite(o).all():
        return False, float("nan")
    rel = ((o - ref).norm() / ref.norm()).item()
    ok = bool(((o - ref).abs() <= 2e-3 * ref.abs().max() + 1e-2 * ref.abs()).all()) and rel < 5e-3
    return ok, rel


_flush = None


WARM_QUEUE_CYCLES = 5_000_000  # ~3 ms of GPU sleep: the host queues every timed call behind it


def timeit(fn, iters=20, cold=True) -> float:
    """Median event time of `fn` over `iters` calls, on a cold L2 (a 256 MB write before each) or, with
    cold=False, back to back on a warm one."""
    return statistics.median(time_samples(fn, iters, cold))


def time_samples(fn, iters=20, cold=True) -> list[float]:
    """Event times (us) of `iters` calls of `fn` (see timeit)."""
    global _flush
    if _flush is None:
        _flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    for _ in range(3):
        fn()
    # All calls are queued before the first is waited for (as benchmarks/timing.py does): the host's
    # Python and planning time then overlaps the flushes instead of landing between a start event and
    # its kernel, which a sync per call let into short decode timings (identical kernels measured several
    # % apart).
    # Warm calls have no flush to hide the host's time behind, so a sleep kernel holds the GPU while they
    # are queued; else a start event can fire while the host is still preparing the call it times.
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    if not cold:
        torch.cuda._sleep(WARM_QUEUE_CYCLES)
    for start, end in zip(starts, ends):
        if cold:
            _flush.zero_()
        start.record()
        fn()
        end.record()
    ends[-1].synchronize()
    return [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]


def geomean(values) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


def interleaved_medians(runs: dict, rounds: int, iters: int) -> dict:
    """Median time (us) of each of `runs` (name -> callable), timed in `rounds` rounds of `iters` calls
    each, in a fresh random order every round, so that drift in clock or L2 state hits all alike."""
    samples = {key: [] for key in runs}
    for _ in range(rounds):
        for key in random.sample(list(runs), len(runs)):
            samples[key] += time_samples(runs[key], iters)
    return {key: statistics.median(v) for key, v in samples.items()}


def check(be: Backend) -> list[str]:
    fails = []

    def report(name, ok, rel):
        print(f"{'PASS' if ok else 'FAIL'} {name} rel={rel:.2e}", flush=True)
        if not ok:
            fails.append(name)

    # Ragged shapes (fewer tiles than SMs: a stream-K plan spreads every tile over several CTAs), and
    # shapes with whole waves plus a stream-K region (1 / 3 tiles past 132, pieces of 2-3 K blocks).
    for cfg, (bm, bn, _) in enumerate(be.configs):
        for sk in (False, True):
            for m, n, k in [(200, 300, 1040), (77, 520, 1000), (1, 8, 16), (300, 264, 384),
                            (bm * 7, bn * 19 + 8, 640), (bm * 3, bn * 45 - 24, 1152)]:
                x = make(m, n, k)
                report(f"config {be.configs[cfg]} stream_k {int(sk)} {m}x{n}x{k}",
                       *close(be.gemm(*x, config=cfg, stream_k=sk), reference(*x)))
    # Units long enough to load two K blocks a TMA instruction (kMinPairUnitKBlocks), with ragged M, N
    # and K (the last, partial K block loads alone), on every config (those without paired loads run
    # their single loads on the same shapes).
    for cfg, (bm, bn, _) in enumerate(be.configs):
        for sk in (False, True):
            for m, n, k in [(bm * 3 + 5, bn * 5 - 24, 7056), (77, 520, 7056)]:
                x = make(m, n, k)
                report(f"config {be.configs[cfg]} stream_k {int(sk)} {m}x{n}x{k}",
                       *close(be.gemm(*x, config=cfg, stream_k=sk), reference(*x)))
    m, n, k = 256, 384, 1536
    a, b, a_s, b_s = make(m, n, k)
    ref = reference(a, b, a_s, b_s)
    t = lambda x: x.t().contiguous().t()  # noqa: E731 - same values, transposed memory
    report("M-major a, b and scales", *close(be.gemm(t(a), t(b), t(a_s), t(b_s)), ref))
    report("N-major b alone", *close(be.gemm(a, t(b), a_s, b_s), ref))  # one repack job: B's
    shifted = torch.empty(m + 1, k, dtype=torch.uint8, device="cuda").view(torch.float8_e4m3fn)
    shifted[1:] = a
    report("misaligned a[1:]", *close(be.gemm(shifted[1:], b, a_s, b_s), ref))
    for pad in (8, 64):
        padded = torch.empty(n, k + pad, dtype=torch.uint8, device="cuda").view(torch.float8_e4m3fn)[:, :k]
        padded.copy_(b)
        report(f"b row stride k+{pad}", *close(be.gemm(a, padded, a_s, b_s), ref))
        # Both repacked in one launch, A by vector loads and B byte by byte.
        report(f"M-major a, b row stride k+{pad}", *close(be.gemm(t(a), padded, a_s, b_s), ref))
    for dt in (torch.float16, torch.float32):
        report(f"out {dt}", *close(be.gemm(a, b, a_s, b_s, out_dtype=dt), ref))
    # Output rows TMA can address (padded to a 16-byte multiple) and rows it cannot (odd stride: the
    # register-store path), each with a poisoned guard column that must stay untouched.
    for pad in (8, 1):
        for dt in (torch.bfloat16, torch.float16):
            buf = torch.full((m, n + pad), float("nan"), dtype=dt, device="cuda")
            out = be.gemm(a, b, a_s, b_s, out=buf[:, :n])
            ok, rel = close(out, ref)
            report(f"out {dt} row stride n+{pad}", ok and bool(buf[:, n:].isnan().all()), rel)
    # Row-major A scales with padded rows (even and odd strides) and a misaligned base on every 128+-row
    # config, whole tiles and stream-K: gathered by the scale warp (few K blocks a CTA) and transposed
    # before the GEMM (more).
    kk = 1536
    for mm, nn in ((520, n), (2056, 2304)):
        a, b, a_s, b_s = make(mm, nn, kk)
        ref = reference(a, b, a_s, b_s)
        for pad in (4, 1):
            buf = torch.randn(mm + 1, kk // SCALE_BLOCK + pad, device="cuda")
            for name, view in ((f"row stride kb+{pad}", buf[:mm, :kk // SCALE_BLOCK]),
                               (f"row stride kb+{pad}, misaligned", buf[1:, :kk // SCALE_BLOCK])):
                view.copy_(a_s)
                for cfg, (bm, _, _) in enumerate(be.configs):
                    if bm >= 128:
                        for sk in (False, True):
                            report(f"config {be.configs[cfg]} stream_k {int(sk)} {mm}x{nn}x{kk} a_scale {name}",
                                   *close(be.gemm(a, b, view, b_s, config=cfg, stream_k=sk), ref))
    for cfg in range(len(be.configs)):
        x = make(1, 200, 256)
        report(f"config {be.configs[cfg]} m=1", *close(be.gemm(*x, config=cfg), reference(*x)))
    for dt in (torch.float16, torch.float32):
        x = make(100, 1000, 2000)
        report(f"config {be.configs[0]} stream_k 1 out {dt}",
               *close(be.gemm(*x, out_dtype=dt, config=0, stream_k=True), reference(*x)))
    x = make(64, 576, 7168)
    first = be.gemm(*x, config=0, stream_k=True)
    report("stream-K bitwise repeatable x20", all(torch.equal(first, be.gemm(*x, config=0, stream_k=True))
                                                  for _ in range(20)), 0.0)
    # K split over clusters on every one-CTA config: ragged M, N and K, one wave and several (tiles beyond
    # the co-resident clusters: a CTA runs several units, its ring reused between them), every split.
    for cfg, (bm, bn, cn) in enumerate(be.configs):
        for split in (v for v in (2, 3, 4, 8) if v <= be.max_k_split[cfg]):
            for m, n, k in [(77, 520, 5000), (200, 300, 4100), (bm * 7, bn * 19 + 8, 4224)]:
                x = make(m, n, k)
                report(f"config {be.configs[cfg]} k_split {split} {m}x{n}x{k}",
                       *close(be.gemm(*x, config=cfg, k_split=split), reference(*x)))
    for dt in (torch.float16, torch.float32):
        x = make(100, 1000, 4096)
        report(f"config {be.configs[0]} k_split 4 out {dt}",
               *close(be.gemm(*x, out_dtype=dt, config=0, k_split=4), reference(*x)))
    first = be.gemm(*x, config=0, k_split=8)
    report("k-split bitwise repeatable x20", all(torch.equal(first, be.gemm(*x, config=0, k_split=8))
                                                 for _ in range(20)), 0.0)
    return fails


def cublas(a, b, a_s, b_s):
    return torch._scaled_mm(a, b.t(), scale_a=a_s.t().contiguous().t(), scale_b=b_s.t(), out_dtype=torch.bfloat16)


def suite(be: Backend) -> list[str]:
    fails, speedups = [], {"DS": [], "CH": []}
    for name, shapes in (("DS", DS), ("CH", CH)):
        for m, n, k in shapes:
            x = make(m, n, k)
            ref = reference(*x)
            out = be.gemm(*x)
            ok, rel = close(out, ref)
            if not ok:
                fails.append(f"{name} {m}x{n}x{k}")
            t = timeit(lambda: be.gemm(*x, out=out))
            try:
                tc = timeit(lambda: cublas(*x)) if close(cublas(*x), ref)[0] else None
            except RuntimeError:
                tc = None
            if tc:
                speedups[name].append(tc / t)
            nbytes = m * k + n * k + 2 * m * n
            print(f"{name} {m:5d} {n:5d} {k:5d} ok={ok} rel={rel:.1e} ours {t:8.1f} us {2*m*n*k/t/1e6:6.0f} TF/s "
                  f"{nbytes/t/1e6:5.2f} TB/s  cuBLAS {f'{tc:8.1f} us x{tc/t:4.2f}' if tc else 'WRONG or refused'}"
                  f"  plan {be.plan(m, n, k)}", flush=True)
    for name, s in speedups.items():
        if s:
            print(f"{name}: geomean speed-up vs cuBLAS {geomean(s):.3f} over "
                  f"{len(s)} shapes, min {min(s):.2f}")
    return fails


def sweep(be: Backend, path: str, iters: int) -> None:
    with open(path, "w") as f:
        for m, n, k in DS + CH + BIG:
            x = make(m, n, k)
            out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
            times = {}
            try:
                cublas_us = round(timeit(lambda: cublas(*x), iters), 2) if close(cublas(*x), reference(*x))[0] else None
            except RuntimeError:
                cublas_us = None
            for cfg in range(len(be.configs)):
                tiles, slots = be.tiles(cfg, m, n)
                for sk in (0, 1) if tiles % slots else (0,):  # whole waves: stream-K is the same plan
                    times[f"{cfg}/{sk}"] = round(timeit(lambda: be.gemm(*x, out=out, config=cfg, stream_k=sk), iters), 2)
            best = min(times, key=times.get)
            f.write(json.dumps({"m": m, "n": n, "k": k, "best": best, "cublas": cublas_us, "t": times}) + "\n")
            f.flush()
            cb = f"cuBLAS {cublas_us:.1f} us x{cublas_us / times[best]:.2f}" if cublas_us else "cuBLAS WRONG"
            print(f"SWEEP {m}x{n}x{k} best {best} {be.configs[int(best.split('/')[0])]} {times[best]:.1f} us "
                  f"{2 * m * n * k / times[best] / 1e6:.0f} TF/s  {cb}  plan {be.plan(m, n, k)}", flush=True)


def plan_key(config: int, stream_k: int, k_split: int = 1) -> str:
    """A forced plan as planner_timings.jsonl names it: CONFIG/STREAM_K[/K_SPLIT]."""
    return f"{config}/{stream_k}" + (f"/{k_split}" if k_split > 1 else "")


def parse_plans(spec: str) -> dict[tuple[int, int, int], str]:
    """"M,N,K=CONFIG/STREAM_K[/K_SPLIT];..." -> {(m, n, k): plan key}."""
    plans = {}
    for item in filter(None, (part.strip() for part in spec.split(";"))):
        shape, plan = item.split("=")
        m, n, k = (int(v) for v in shape.split(","))
        fields = [int(v) for v in plan.split("/")]
        if len(fields) not in (2, 3):
            raise ValueError(f"plan {plan!r}: CONFIG/STREAM_K[/K_SPLIT]")
        plans[(m, n, k)] = plan_key(*fields)
    return plans


def deepgemm_gaps(path: str, margin: float = 0.95) -> list[tuple[tuple[int, int, int], dict]]:
    """K-major shapes of a benchmark results file where DeepGEMM's call or kernel time is below `margin` x
    ours: [((m, n, k), {"ours": (call, kernel), "deepgemm": (call, kernel)})] in file order."""
    times: dict[tuple[int, int, int], dict] = {}
    for r in json.loads(Path(path).read_text())["rows"]:
        if r["layout"] == "kmajor" and r["status"] == "OK" and r["peer"] in ("ours", "deepgemm"):
            times.setdefault((r["m"], r["n"], r["k"]), {})[r["peer"]] = (
                r["timing"]["median_us"], r["kernel_timing"]["median_us"])
    return [(shape, t) for shape, t in times.items() if len(t) == 2 and
            any(dg < margin * ours for dg, ours in zip(t["deepgemm"], t["ours"]))]


def ab(be: Backend, results: str, base: dict, rounds: int, iters: int, out_path: str | None,
       extra: list[tuple[int, int, int]] = ()) -> list[str]:
    fails, ratios = [], []
    out_file = open(out_path, "w") if out_path else None
    print(f"{'shape':>18} {'base':>8} {'new':>8} {'base us':>9} {'new us':>9} {'new/base':>8} "
          f"{'fastest':>8} {'us':>9} {'DeepGEMM call/kernel us':>24} {'ours then':>10}")
    shapes = deepgemm_gaps(results) + [(shape, None) for shape in extra]
    for (m, n, k), t in shapes:
        x = make(m, n, k)
        ref = reference(*x)
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        p = be.plan(m, n, k)
        new = plan_key(p[0], p[3], p[6])
        old = base.get((m, n, k), new)
        candidates = {old, new}
        for cfg in range(len(be.configs)):
            tiles, slots = be.tiles(cfg, m, n)
            candidates |= {plan_key(cfg, sk) for sk in ((0, 1) if tiles % slots else (0,))}
            if m <= 512:  # few M blocks: K splits
                candidates |= {plan_key(cfg, 0, split) for split in (2, 3, 4) if split <= be.max_k_split[cfg]}
        runs = {}
        for key in sorted(candidates):
            cfg, sk, *split = (int(v) for v in key.split("/"))
            run = lambda cfg=cfg, sk=sk, split=split: be.gemm(*x, out=out, config=cfg, stream_k=bool(sk),
                                                              k_split=split[0] if split else 1)
            try:
                ok, rel = close(run(), ref)
            except RuntimeError:  # no such plan on this device (a K split beyond its cluster slots)
                continue
            if not ok:
                fails.append(f"{m}x{n}x{k} plan {key} rel={rel:.1e}")
                continue
            runs[key] = run
        med = interleaved_medians(runs, rounds, iters)
        if old not in med or new not in med:
            fails.append(f"{m}x{n}x{k}: base {old} or new {new} failed its check")
            continue
        best = min(med, key=med.get)
        ratios.append(med[new] / med[old])
        peer = f"{t['deepgemm'][0]:11.1f} / {t['deepgemm'][1]:10.1f} {t['ours'][0]:10.1f}" if t else f"{'-':>24} {'-':>10}"
        print(f"{f'{m}x{n}x{k}':>18} {old:>8} {new:>8} {med[old]:9.1f} {med[new]:9.1f} {med[new] / med[old]:8.3f} "
              f"{best:>8} {med[best]:9.1f} {peer}", flush=True)
        if out_file:
            out_file.write(json.dumps({"m": m, "n": n, "k": k, "t": {key: round(v, 2) for key, v in med.items()}}) + "\n")
            out_file.flush()
    if ratios:
        changed = [r for r in ratios if r != 1.0]
        print(f"new/base geomean {geomean(ratios):.3f} over {len(ratios)} shapes"
              f" ({len(changed)} with a changed plan)")
    return fails


VS_SETS = {
    "decode": mnk_grid(DS_DECODE_MS, DS_NK),
    "large": mnk_grid((512, 4096), [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168)]),
    # M not a multiple of any tile's rows, as a serving batch has it: the last M block is partly empty.
    "ragged": mnk_grid((40, 96, 200, 1000), [(2112, 7168), (4096, 7168), (7168, 2048), (24576, 1536)])
    + [(192, 7168, 16384)],
}


def vs(be: Backend, base_lib: str, rounds: int, iters: int) -> list[str]:
    libs = {"base": Backend(base_lib), "new": be}
    fails = []
    print(f"{'set':>6} {'shape':>16} {'plan':>8} {'base us':>9} {'new us':>9} {'new/base':>8}")
    for name, shapes in VS_SETS.items():
        ratios = []
        for m, n, k in shapes:
            a, b, a_s, b_s = make(m, n, k)
            a_s = a_s.t().contiguous().t()
            ref = reference(a, b, a_s, b_s)
            out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
            plans = {tag: lib.plan(m, n, k) for tag, lib in libs.items()}
            runs = {tag: (lambda lib=lib, p=plans[tag]: lib.gemm(a, b, a_s, b_s, out=out, config=p[0],
                                                                 stream_k=bool(p[3]), k_split=p[6]))
                    for tag, lib in libs.items()}
            keys = {tag: plan_key(p[0], p[3], p[6]) for tag, p in plans.items()}
            bad = [tag for tag, run in runs.items() if not close(run(), ref)[0]]
            if bad:
                fails += [f"{m}x{n}x{k} plan {keys[tag]}: {tag} wrong" for tag in bad]
                continue
            med = interleaved_medians(runs, rounds, iters)
            ratios.append(med["new"] / med["base"])
            plan = keys["new"] if keys["new"] == keys["base"] else f"{keys['base']}->{keys['new']}"
            print(f"{name:>6} {f'{m}x{n}x{k}':>16} {plan:>8} {med['base']:9.2f} "
                  f"{med['new']:9.2f} {ratios[-1]:8.3f}", flush=True)
        if ratios:
            print(f"{name}: new/base geomean {geomean(ratios):.4f} over "
                  f"{len(ratios)} shapes, {min(ratios):.3f} to {max(ratios):.3f}", flush=True)
    return fails


def quant_bench(be: Backend) -> None:
    for m, k in QUANT:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        q = torch.empty(m, k, dtype=torch.uint8, device="cuda")
        kb = -(-k // SCALE_BLOCK)
        scale = torch.empty(kb, m, device="cuda").t()
        t = timeit(lambda: be.quantize(x, q, scale))
        nbytes = m * k * (x.element_size() + 1) + m * kb * 4
        print(f"QUANT {m:6d} x {k:5d} bf16: {t:8.1f} us {nbytes / t / 1e6:5.2f} TB/s", flush=True)


def profile(be: Backend, spec: str) -> None:
    """One warm-up and one measured launch of a forced plan "M,N,K,CONFIG[,STREAM_K]" (for ncu)."""
    m, n, k, cfg, *rest = (int(v) for v in spec.split(","))
    x = make(m, n, k)
    for _ in range(2):
        out = be.gemm(*x, config=cfg, stream_k=bool(rest[0]) if rest else False)
    torch.cuda.synchronize()
    print(f"PROFILE {m}x{n}x{k} config {be.configs[cfg]} ok={close(out, reference(*x))}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("lib")
    p.add_argument("--check", action="store_true")
    p.add_argument("--suite", action="store_true")
    p.add_argument("--sweep", metavar="JSONL")
    p.add_argument("--iters", type=int, default=10, help="timed iterations per sweep point")
    p.add_argument("--profile", metavar="M,N,K,CONFIG[,STREAM_K]")
    p.add_argument("--quant", action="store_true")
    p.add_argument("--ab", metavar="RESULTS_JSON")
    p.add_argument("--base", metavar="M,N,K=PLAN;...", default="",
                   help="--ab: base plans (CONFIG/STREAM_K[/K_SPLIT]) where they differ from the heuristic's")
    p.add_argument("--rounds", type=int, default=3, help="--ab, --vs: shuffled rounds of --iters calls per plan")
    p.add_argument("--ab-out", metavar="JSONL")
    p.add_argument("--ab-shapes", metavar="M,N,K;...", default="", help="--ab: more shapes (no DeepGEMM time)")
    p.add_argument("--vs", metavar="BASE_LIB")
    args = p.parse_args()
    base = parse_plans(args.base)  # before the GPU is touched: a typo fails at once
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    be = Backend(args.lib)
    fails = []
    if args.check:
        fails += check(be)
    if args.suite:
        fails += suite(be)
    if args.sweep:
        sweep(be, args.sweep, args.iters)
    if args.profile:
        profile(be, args.profile)
    if args.quant:
        quant_bench(be)
    if args.ab:
        extra = [tuple(int(v) for v in item.split(",")) for item in args.ab_shapes.split(";") if item.strip()]
        fails += ab(be, args.ab, base, args.rounds, args.iters, args.ab_out, extra)
    if args.vs:
        fails += vs(be, args.vs, args.rounds, args.iters)
    print("FAILS:", fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
