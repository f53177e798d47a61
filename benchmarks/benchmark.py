"""`kernels benchmark .` workloads (needs `pip install 'kernels[benchmark]'`).

The kernels CLI loads this file on its own (not as part of the `benchmarks` package), times each
benchmark_<workload> with the host clock and checks it with torch.allclose(out, verify_<workload>(),
atol=1e-2). Scales are chosen so that |C| stays near 0.25 (max about 1.5): one bf16 step there is under
that atol, while a wrong scale block moves elements by several times it. The CUDA-event, cold-L2,
side-by-side numbers come from `python3 -m benchmarks.bench`."""
import math

import torch

from kernels.benchmark import Benchmark

SCALE_BLOCK = 128  # one scale per 128 K (A, B) and per 128 N (B)
OUTPUT_STD = 0.25

# (M, N, K) per workload and device: DeepSeek-V3 layers on a GPU, cut-down versions on a CPU.
WORKLOADS = {
    "cuda": {"decode": (64, 2112, 7168), "ragged_n": (128, 576, 7168), "prefill": (4096, 7168, 2048)},
    "cpu": {"decode": (16, 2112, 7168), "ragged_n": (64, 576, 7168), "prefill": (512, 1536, 1536)},
}


def _scales(rows: int, cols: int, magnitude: float, device) -> torch.Tensor:
    """Distinct per-block scales of either sign, |s| uniform in [0.5, 1.5] * magnitude."""
    sign = torch.randint(0, 2, (rows, cols), device=device) * 2 - 1
    return sign * (0.5 + torch.rand(rows, cols, device=device)) * magnitude


def _dequant(x, scale, rows_per_scale):
    rows, k = x.shape
    s = scale.repeat_interleave(rows_per_scale, 0)[:rows].repeat_interleave(SCALE_BLOCK, 1)[:, :k]
    return x.float() * s


class GemmBenchmark(Benchmark):
    seed = 42

    def _setup(self, workload: str):
        m, n, k = WORKLOADS["cpu" if self.device == "cpu" else "cuda"][workload]
        kb = math.ceil(k / SCALE_BLOCK)
        # sum over K of (randn * s_a) * (randn * s_b) has std sqrt(K) * s^2 (times ~1.2 for the spread).
        magnitude = math.sqrt(OUTPUT_STD / math.sqrt(k))
        self.a = torch.randn(m, k, device=self.device).to(torch.float8_e4m3fn)
        self.b = torch.randn(n, k, device=self.device).to(torch.float8_e4m3fn)
        self.a_scale = _scales(m, kb, magnitude, self.device)
        self.b_scale = _scales(math.ceil(n / SCALE_BLOCK), kb, magnitude, self.device)

    def _run(self):
        self.out = self.kernel.gemm(self.a, self.b, self.a_scale, self.b_scale)

    def _reference(self):
        ref = _dequant(self.a, self.a_scale, 1) @ _dequant(self.b, self.b_scale, SCALE_BLOCK).t()
        return ref.to(torch.bfloat16)

    def setup_decode(self):
        self._setup("decode")

    def benchmark_decode(self):
        self._run()

    def verify_decode(self):
        return self._reference()

    def setup_ragged_n(self):
        self._setup("ragged_n")

    def benchmark_ragged_n(self):
        self._run()

    def verify_ragged_n(self):
        return self._reference()

    def setup_prefill(self):
        self._setup("prefill")

    def benchmark_prefill(self):
        self._run()

    def verify_prefill(self):
        return self._reference()
