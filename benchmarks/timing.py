"""Timing method and device ceilings.

GPU: CUDA events around each call (or, with e2e, the host clock around call + synchronize, as the AMD
challenge scored), after warm-up; by default a buffer of at least twice the L2 is written between
iterations, outside the timed region, so every call starts with cold caches. CPU: time.perf_counter
around the synchronous call. Reported: median and p10/p90 of the iterations."""
import statistics
import time
from dataclasses import dataclass

import torch

# Flush buffer: at least twice the last-level cache (H200 L2 is 60 MB; MI300X has a 256 MB Infinity Cache).
FLUSH_MIN_BYTES = 256 << 20
CPU_FLUSH_BYTES = 64 << 20  # several times a server CPU's per-socket LLC share on this box
COPY_BYTES = {"cuda": 1 << 30, "cpu": 128 << 20}
CEILING_ITERS = 10
# FP8 peak shape: large enough to reach the device's matrix rate.
PEAK_MNK = {"cuda": 8192, "cpu": 1024}

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
    iters: int
    samples_us: list

    def as_dict(self):
        return {"median_us": self.median_us, "p10_us": self.p10_us, "p90_us": self.p90_us, "iters": self.iters,
                "samples_us": self.samples_us}


def _stats(times_us):
    q = statistics.quantiles(times_us, n=10, method="inclusive") if len(times_us) > 1 else [times_us[0]] * 9
    return Stats(statistics.median(times_us), q[0], q[-1], len(times_us), times_us)


class Timer:
    def __init__(self, device: torch.device, iters: int, warmup: int, cold: bool, e2e: bool):
        self.device, self.iters, self.warmup, self.cold, self.e2e = device, iters, warmup, cold, e2e
        self.is_gpu = device.type == "cuda"
        self.flush = None
        if cold:
            if self.is_gpu:
                l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
                nbytes = max(FLUSH_MIN_BYTES, 2 * l2)
            else:
                nbytes = CPU_FLUSH_BYTES
            self.flush = torch.empty(nbytes, dtype=torch.uint8, device=device)

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
        cache = f"cold cache ({self.flush.numel() >> 20} MiB written between calls)" if self.cold else "warm cache"
        return f"{clock}, {cache}, {self.warmup} warm-up, median/p10/p90 of {self.iters}"

    def _sync(self):
        if self.is_gpu:
            torch.cuda.synchronize(self.device)

    def _evict(self):
        if self.flush is not None:
            self.flush.zero_()

    def time(self, fn, iters=None, warmup=None) -> Stats:
        iters = iters or self.iters
        for _ in range(self.warmup if warmup is None else warmup):
            fn()
        self._sync()
        if self.is_gpu and not self.e2e:
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
            for s, e in zip(starts, ends):
                self._evict()  # queued before the start event: the flush is outside the timed region
                s.record()
                fn()
                e.record()
            self._sync()
            return _stats([s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)])
        times = []
        for _ in range(iters):
            self._evict()
            self._sync()
            t0 = time.perf_counter()
            fn()
            self._sync()
            times.append((time.perf_counter() - t0) * 1e6)
        return _stats(times)


def measure_ceilings(device: torch.device, fp8_dtype, timer: Timer) -> dict:
    """Copy bandwidth (bytes read + written) and the per-tensor FP8 matmul rate (fp32 matmul on CPU)."""
    kind = "cuda" if device.type == "cuda" else "cpu"
    nbytes = COPY_BYTES[kind]
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).random_(0, 255)
    dst = torch.empty_like(src)
    copy = timer.time(lambda: dst.copy_(src), iters=CEILING_ITERS, warmup=2)
    out = {"copy_bandwidth_Bps": 2 * nbytes / (copy.median_us * 1e-6)}
    del src, dst
    n = PEAK_MNK[kind]
    if kind == "cuda":
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
    else:
        a = torch.randn(n, n)
        mm = timer.time(lambda: a @ a, iters=CEILING_ITERS, warmup=2)
        out["fp32_matmul_rate_flops"] = 2 * n ** 3 / (mm.median_us * 1e-6)
    # Compute floor from the datasheet FP8 rate when known (the measured rate is a lower bound of it).
    out["peak_flops"] = out.get("datasheet_fp8_flops") or out.get("fp8_tensor_rate_flops") or \
        out.get("fp32_matmul_rate_flops")
    out["peak_bandwidth_Bps"] = out["copy_bandwidth_Bps"]
    return out
