"""Timing methods and device ceilings.

Call time, GPU: CUDA events around each call (or, with e2e, the host clock around call + synchronize, as
the AMD challenge scored), after warm-up; by default a buffer of at least twice the L2 is written between
iterations, outside the timed region, so every call starts with cold caches. CPU: time.perf_counter
around the synchronous call, a buffer twice the last-level cache read and written between calls.
Kernel time (GPU only): the call captured once in a CUDA graph, each replay timed with CUDA events, the
L2 flushed between replays: the GPU time of the kernels the call launches, without the host's share.
Side by side (the peers of one shape): the peers take turns in ROUNDS rounds, in a fresh random order
each round, so that a drift of the device's state during a shape (a GPU's clock coming back up after a
power-capped shape before it) falls on every peer alike, not on whichever peer runs first. Each turn is
a peer's warm-up calls and then its share of the iterations, as a peer timed alone: a call's host work
right after another peer's is slower for a while, and at decode sizes the GPU waits for it.
Host time (GPU only): host clock over back-to-back calls queued behind a GPU sleep, divided by the count.
Reported: median, p10/p90 and the coefficient of variation of the iterations."""
import ctypes
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

# Flush buffer: at least twice the last-level cache (H200 L2 is 60 MB; MI300X has a 256 MB Infinity Cache).
FLUSH_MIN_BYTES = 256 << 20
CPU_FLUSH_MIN_BYTES = 64 << 20
COPY_BYTES = 1 << 30
CEILING_ITERS = 10
# FP8 peak shape: large enough to reach the device's matrix rate.
PEAK_MNK = 8192
# CPU ceilings: many short tries (a few ms of FMAs each; a 512 MiB read), the best one counts, so that
# other load on a shared machine lowers no ceiling: a ceiling must be one the kernel cannot beat.
CPU_FMA_ITERS = 2_000_000
CPU_FMA_TRIES = 30
CPU_READ_BYTES = 512 << 20
CPU_READ_TRIES = 10
CPU_CEILINGS_SOURCE = Path(__file__).with_name("cpu_ceilings.c")
# Host time: calls queued behind a GPU sleep long enough to cover them (cycles at ~2 GHz), median of repeats.
HOST_CALLS = 50
HOST_REPEATS = 5
HOST_SLEEP_CYCLES = 100_000_000
# Side-by-side rounds per shape (each peer's iterations split evenly over them).
ROUNDS = 3
# Rows whose iterations spread more than this (stdev / mean) are flagged as noisy.
NOISY_CV = 0.10

# Dense (no sparsity) datasheet rates, per device name substring: (FP8 FLOP/s, HBM bytes/s).
DATASHEET = {
    "H200": (1979e12, 4.8e12),
    "H100": (1979e12, 3.35e12),
    "MI300X": (2615e12, 5.3e12),
}


@dataclass
class Stats:
    median_us: float
    p10_us: float
    p90_us: float
    cv: float  # stdev / mean of the iterations
    iters: int
    samples_us: list

    def as_dict(self):
        return {"median_us": self.median_us, "p10_us": self.p10_us, "p90_us": self.p90_us, "cv": self.cv,
                "iters": self.iters, "samples_us": self.samples_us}


def _stats(times_us):
    if len(times_us) > 1:
        q = statistics.quantiles(times_us, n=10, method="inclusive")
        cv = statistics.stdev(times_us) / statistics.fmean(times_us)
    else:
        q, cv = [times_us[0]] * 9, 0.0
    return Stats(statistics.median(times_us), q[0], q[-1], cv, len(times_us), times_us)


def _last_level_cache_bytes() -> int:
    """Largest CPU cache (sysfs), 0 when unknown."""
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = f.read_text().strip()
        scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
        sizes.append(int(text.rstrip("KM")) * scale)
    return max(sizes, default=0)


class Timer:
    def __init__(self, device: torch.device, iters: int, warmup: int, cold: bool, e2e: bool):
        self.device, self.iters, self.warmup, self.cold, self.e2e = device, iters, warmup, cold, e2e
        self.rounds = min(ROUNDS, iters)  # side-by-side rounds: each has at least one iteration a peer
        self.is_gpu = device.type == "cuda"
        self.flush = None
        if cold:
            if self.is_gpu:
                l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
                nbytes = max(FLUSH_MIN_BYTES, 2 * l2)
            else:
                nbytes = max(CPU_FLUSH_MIN_BYTES, 2 * _last_level_cache_bytes())
            self.flush = torch.zeros(nbytes, dtype=torch.uint8, device=device)

    @property
    def short(self) -> str:
        clock = "perf_counter" if not self.is_gpu else ("host clock (e2e)" if self.e2e else "CUDA events")
        return f"{clock}, {'cold' if self.cold else 'warm'} cache"

    @property
    def method(self) -> str:
        if not self.is_gpu:
            clock = "time.perf_counter around the synchronous call"
        else:
            clock = "host clock around call + synchronize (e2e)" if self.e2e else "CUDA events"
        cache = f"cold cache ({self.flush.numel() >> 20} MiB {'written' if self.is_gpu else 'read and written'} " \
                "between calls)" if self.cold else "warm cache"
        return (f"{clock}, {cache}, {self.warmup} warm-up, median/p10/p90/CV of {self.iters}, "
                f"a shape's peers side by side in {self.rounds} shuffled rounds")

    @property
    def kernel_method(self) -> str:
        if not self.is_gpu:
            return "none on a CPU (the call is the kernel)"
        return (f"the call captured in a CUDA graph, each of {self.iters} replays timed with CUDA events, "
                f"{'L2 flushed between replays' if self.cold else 'warm L2'}, peers side by side as for call "
                "time; median")

    def _sync(self):
        if self.is_gpu:
            torch.cuda.synchronize(self.device)

    def _evict(self):
        # GPU: a write is enough. CPU: memset streams past the caches (non-temporal stores), so read too.
        if self.flush is not None:
            if self.is_gpu:
                self.flush.zero_()
            else:
                self.flush.add_(1)

    def _event_samples(self, fn, n) -> list:
        """n calls of fn, each after a flush, timed with CUDA events (µs)."""
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for s, e in zip(starts, ends):
            self._evict()  # queued before the start event: the flush is outside the timed region
            s.record()
            fn()
            e.record()
        self._sync()
        return [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]

    def _call_samples(self, fn, n) -> list:
        """n calls of fn, each after a flush: CUDA events, or the host clock around call + synchronize."""
        if self.is_gpu and not self.e2e:
            return self._event_samples(fn, n)
        times = []
        for _ in range(n):
            self._evict()
            self._sync()
            t0 = time.perf_counter()
            fn()
            self._sync()
            times.append((time.perf_counter() - t0) * 1e6)
        return times

    def _warm(self, fn, count=None):
        for _ in range(self.warmup if count is None else count):
            fn()
        self._sync()

    def time(self, fn, iters=None, warmup=None) -> Stats:
        """Call time of fn alone (ceilings, a peer's own tuning)."""
        self._warm(fn, warmup)
        return _stats(self._call_samples(fn, iters or self.iters))

    def _side_by_side(self, fns: dict, sample, rng) -> dict:
        """Each of `fns` (name -> callable) warmed up and sampled in turns (see the module docstring):
        name -> Stats of its self.iters samples, or the exception its calls raised."""
        out, samples = {}, {name: [] for name in fns}
        per_round = -(-self.iters // self.rounds)
        for _ in range(self.rounds):
            live = [name for name in fns if name not in out]
            for name in rng.sample(live, len(live)):
                try:
                    self._warm(fns[name])
                    samples[name] += sample(fns[name], per_round)
                except Exception as exc:
                    out[name] = exc
        return {name: out.get(name) or _stats(samples[name][:self.iters]) for name in fns}

    def time_side_by_side(self, fns: dict, rng) -> dict:
        """Call time of each of `fns`, side by side: name -> Stats, or the exception its calls raised."""
        return self._side_by_side(fns, self._call_samples, rng)

    def kernel_time_side_by_side(self, fns: dict, rng) -> dict:
        """GPU time of the kernels each of `fns` launches: each captured once in a CUDA graph, the replays
        timed side by side. name -> Stats, or the exception its capture or replays raised."""
        graphs, failed = {}, {}
        for name, fn in fns.items():
            try:
                graphs[name] = self._capture(fn)
            except Exception as exc:  # e.g. a peer that synchronizes inside the call cannot be captured
                failed[name] = exc
        timed = self._side_by_side({name: g.replay for name, g in graphs.items()}, self._event_samples, rng)
        for g in graphs.values():
            g.reset()
        return {name: failed.get(name) or timed[name] for name in fns}

    def _capture(self, fn) -> torch.cuda.CUDAGraph:
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):  # first call outside the capture (lazy set-up, allocator pools)
            fn()
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        return graph

    def host_time(self, fn) -> float:
        """Host µs a call takes (argument checks, plan lookup, descriptor encoding, launch), GPU work excluded:
        HOST_CALLS calls queued behind a GPU sleep, so the host never waits for the device; median of repeats."""
        per_call = []
        for _ in range(HOST_REPEATS):
            self._sync()
            torch.cuda._sleep(HOST_SLEEP_CYCLES)
            t0 = time.perf_counter()
            for _ in range(HOST_CALLS):
                fn()
            per_call.append((time.perf_counter() - t0) * 1e6 / HOST_CALLS)
            self._sync()
        return statistics.median(per_call)


def _cpu_ceilings_library():
    """benchmarks/cpu_ceilings.c compiled with the host C compiler (None, reason when it cannot be)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        return None, "no C compiler (cc/gcc/clang) to build benchmarks/cpu_ceilings.c"
    out = Path(tempfile.mkdtemp(prefix="gemm_ceilings_")) / "libceilings.so"
    build = subprocess.run([cc, "-O2", "-fopenmp", "-shared", "-fPIC", "-o", str(out), str(CPU_CEILINGS_SOURCE)],
                           capture_output=True, text=True)
    if build.returncode != 0:
        return None, f"{cc} failed on benchmarks/cpu_ceilings.c: {build.stderr.strip()[-300:]}"
    lib = ctypes.CDLL(str(out))
    lib.fma_flops.restype = ctypes.c_double
    lib.fma_flops.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64]
    lib.read_bandwidth.restype = ctypes.c_double
    lib.read_bandwidth.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int]
    return lib, None


# GEMM_CPU_ISA values of the CPU kernel and the vector width each runs.
CPU_ISA_BITS = {"avx512": 512, "avx2": 256, "sse2": 128, "portable": 128}


def cpu_ceilings() -> dict:
    """FP32 FMA rate and read bandwidth with every torch thread, on the vector ISA the CPU kernel uses.
    The FMA rate is the larger of the best all-thread try and threads x the best one-thread try (the
    latter is what every core reaches when the others are idle, turbo included)."""
    lib, error = _cpu_ceilings_library()
    if lib is None:
        return {"error": error}
    threads = torch.get_num_threads()
    pinned = os.environ.get("GEMM_CPU_ISA")
    bits = min(CPU_ISA_BITS.get(pinned, 512), lib.widest_vector_bits())
    one = max(lib.fma_flops(bits, 1, CPU_FMA_ITERS) for _ in range(CPU_FMA_TRIES))
    flops = max(threads * one, max(lib.fma_flops(bits, threads, CPU_FMA_ITERS) for _ in range(CPU_FMA_TRIES)))
    buf = torch.ones(CPU_READ_BYTES, dtype=torch.uint8)
    bandwidth = max(lib.read_bandwidth(buf.data_ptr(), buf.numel() // 16, threads) for _ in range(CPU_READ_TRIES))
    return {"fma_flops": flops, "read_bandwidth_Bps": bandwidth, "vector_bits": bits, "threads": threads}


def measure_ceilings(device: torch.device, fp8_dtype, timer: Timer) -> dict:
    """Peak rate and bandwidth the roofline floors use; each is one the kernel cannot beat.
    GPU: datasheet FP8 rate (measured per-tensor FP8 rate shown beside it), measured copy bandwidth.
    CPU: measured FP32 FMA rate and read bandwidth (cpu_ceilings.c), best of several tries."""
    if device.type != "cuda":
        cpu = cpu_ceilings()
        if "error" in cpu:
            raise RuntimeError(f"CPU ceilings: {cpu['error']}")
        return {**cpu, "peak_flops": cpu["fma_flops"], "peak_bandwidth_Bps": cpu["read_bandwidth_Bps"],
                "peak_source": f"measured FP32 FMA, {cpu['vector_bits']}-bit vectors, {cpu['threads']} threads",
                "bandwidth_source": f"measured read bandwidth, {cpu['threads']} threads"}
    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device=device).random_(0, 255)
    dst = torch.empty_like(src)
    copy = timer.time(lambda: dst.copy_(src), iters=CEILING_ITERS, warmup=2)
    out = {"copy_bandwidth_Bps": 2 * COPY_BYTES / (copy.median_us * 1e-6)}
    del src, dst
    n = PEAK_MNK
    a = torch.randn(n, n, device=device).to(fp8_dtype)
    b = torch.randn(n, n, device=device).to(fp8_dtype).t()  # column-major, as _scaled_mm requires
    one = torch.ones((), device=device)
    try:
        mm = timer.time(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                                 use_fast_accum=True), iters=CEILING_ITERS, warmup=2)
        out["fp8_tensor_rate_flops"] = 2 * n ** 3 / (mm.median_us * 1e-6)
    except RuntimeError as exc:
        out["fp8_tensor_rate_error"] = str(exc).splitlines()[0]
    name = torch.cuda.get_device_name(device)
    for key, (fp8, bw) in DATASHEET.items():
        if key in name:
            out["datasheet_fp8_flops"], out["datasheet_bandwidth_Bps"] = fp8, bw
    # The datasheet rate where known (a measured rate is only a lower bound of the peak).
    out["peak_flops"] = out.get("datasheet_fp8_flops") or out.get("fp8_tensor_rate_flops")
    out["peak_source"] = "datasheet FP8" if "datasheet_fp8_flops" in out else "measured per-tensor FP8 _scaled_mm"
    out["peak_bandwidth_Bps"] = out["copy_bandwidth_Bps"]
    out["bandwidth_source"] = "measured copy bandwidth (bytes read + written)"
    return out
