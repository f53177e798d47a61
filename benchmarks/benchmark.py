"""`kernels benchmark .` workloads (pip install 'kernels[benchmark]'): host-clock timing, checked with
allclose(atol=1e-2). Scales keep |C| near 0.25, where one bf16 step is below that atol and a wrong scale
block is not. The side-by-side, cold-L2, kernel-time numbers come from `python3 -m benchmarks.bench`."""
import torch

from kernels.benchmark import Benchmark

# (M, N, K) on a GPU / on a CPU: DeepSeek-V3 layers, cut down for a CPU.
WORKLOADS = {"decode": ((64, 2112, 7168), (16, 2112, 7168)),
             "ragged_n": ((128, 576, 7168), (64, 576, 7168)),
             "prefill": ((4096, 7168, 2048), (512, 1536, 1536))}


def _scales(rows, k, magnitude, device):
    """Distinct per-block scales of either sign, |s| uniform in [0.5, 1.5] * magnitude."""
    shape = (rows, -(-k // 128))
    return (torch.randint(0, 2, shape, device=device) * 2 - 1) * (torch.rand(shape, device=device) + 0.5) * magnitude


def _blocks(x, scale, rows):
    return x.float() * scale.repeat_interleave(rows, 0)[: x.shape[0]].repeat_interleave(128, 1)[:, : x.shape[1]]


class GemmBenchmark(Benchmark):
    seed = 42

    def _setup(self, m, n, k):
        magnitude = (0.25 / k ** 0.5) ** 0.5  # std of C ~ sqrt(K) * magnitude^2
        self.a, self.b = (torch.randn(r, k, device=self.device).to(torch.float8_e4m3fn) for r in (m, n))
        self.a_scale = _scales(m, k, magnitude, self.device)
        self.b_scale = _scales(-(-n // 128), k, magnitude, self.device)

    def _run(self):
        self.out = self.kernel.gemm(self.a, self.b, self.a_scale, self.b_scale)

    def _reference(self):
        return (_blocks(self.a, self.a_scale, 1) @ _blocks(self.b, self.b_scale, 128).t()).to(torch.bfloat16)


for _name, (_gpu, _cpu) in WORKLOADS.items():
    setattr(GemmBenchmark, f"setup_{_name}", lambda self, g=_gpu, c=_cpu: self._setup(*(c if self.device == "cpu" else g)))
    setattr(GemmBenchmark, f"benchmark_{_name}", GemmBenchmark._run)
    setattr(GemmBenchmark, f"verify_{_name}", GemmBenchmark._reference)
