"""The linear suite: what transformers' FP8Linear calls, bf16 activations times an FP8 weight with
128x128 scales, the per-1x128 activation quantization inside the timed call. Every quantizing peer is
checked against the same quantized computation (the tests' quantizer oracle, then the fp32 dequantized
GEMM); peers that do not quantize the activations are checked against the unquantized product."""
import torch

# The repository root is on sys.path wherever `benchmarks` is importable as a package. The oracle's
# default numerics are finegrained-fp8's fp8_act_quant and vLLM's per_token_group_quant_fp8.
from tests._helpers import reference_quantize_activation

from .peers import TUNE_ITERS, Ours, Peer, TritonBlock, _outer_major, _row_major_scale, _scale_rows_aligned
from .problem import SCALE_BLOCK_K, SCALE_BLOCK_N, ceil_div, dequant
from .shapes import KIND_LINEAR

BLOCK_SIZE = [SCALE_BLOCK_N, SCALE_BLOCK_K]


class LinearProblem:
    """x [M, K] bf16 (randn), weight [N, K] FP8 with [N/128, K/128] fp32 scales (randn, distinct per block)."""

    def __init__(self, shape, device, fp8_dtype, seed, out_dtype=torch.bfloat16):
        self.shape, self.out_dtype, self.fp8_dtype = shape, out_dtype, fp8_dtype
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
        kb, nb = ceil_div(shape.k, SCALE_BLOCK_K), ceil_div(shape.n, SCALE_BLOCK_N)
        self.x = torch.randn(shape.m, shape.k, device=device, generator=gen).to(torch.bfloat16)
        self.b = torch.randn(shape.n, shape.k, device=device, generator=gen).to(fp8_dtype)
        self.b_scale = torch.randn(nb, kb, device=device, generator=gen)
        self._ref = self._plain_ref = None

    def quantized(self):
        """(FP8 x, its [M, K/128] scales) from the reference quantizer."""
        return reference_quantize_activation(self.x, self.fp8_dtype)

    def weight(self):
        return dequant(self.b, self.b_scale, SCALE_BLOCK_N)

    @property
    def reference(self):
        """The quantized computation: dequant(quantize(x)) @ dequant(W)^T in fp32."""
        if self._ref is None:
            q, s = self.quantized()
            self._ref = dequant(q, s, 1) @ self.weight().t()
        return self._ref

    @property
    def unquantized_reference(self):
        if self._plain_ref is None:
            self._plain_ref = self.x.float() @ self.weight().t()
        return self._plain_ref

    def drop_reference(self) -> None:
        self._ref = self._plain_ref = None

    @property
    def flops(self) -> int:
        s = self.shape
        return 2 * s.m * s.n * s.k

    @property
    def bytes(self) -> int:
        """bf16 x and the FP8 weight with its scales read once, the output written once."""
        s = self.shape
        out = torch.empty((), dtype=self.out_dtype).element_size()
        scales = 4 * ceil_div(s.n, SCALE_BLOCK_N) * ceil_div(s.k, SCALE_BLOCK_K)
        return 2 * s.m * s.k + self.b.element_size() * s.n * s.k + scales + out * s.m * s.n


class _LinearPeer(Peer):
    kind = KIND_LINEAR


class OursLinear(_LinearPeer):
    """matmul_2d(x, W, Ws, [128, 128], bf16): quantization and GEMM in one call."""
    name = "ours"
    label = "matmul_2d (this package: quantize + GEMM)"

    def unavailable(self, device):
        kernel = Ours.kernel()
        if kernel is None:
            return Ours._load_error
        return None if hasattr(kernel, "matmul_2d") else "the loaded package has no matmul_2d"

    def prepare(self, p, timer, check_fn):
        matmul_2d = Ours.kernel().matmul_2d
        return (lambda: matmul_2d(p.x, p.b, p.b_scale, BLOCK_SIZE, p.out_dtype)), {}


class OursGemmAlone(_LinearPeer):
    """gemm() on inputs quantized untimed (As M-major): the bar the fused path is held to. Not a rival."""
    name = "ours-gemm"
    label = "gemm() alone on pre-quantized x (this package)"
    block_scaled = False

    def unavailable(self, device):
        return None if Ours.kernel() is not None else Ours._load_error

    def prepare(self, p, timer, check_fn):
        gemm = Ours.kernel().gemm
        q, s = p.quantized()
        s = _outer_major(s)
        return (lambda: gemm(q, p.b, s, p.b_scale, out_dtype=p.out_dtype)), {}


class _TritonLinear(_LinearPeer):
    def unavailable(self, device):
        return TritonBlock().unavailable(device)

    def run(self, p, config):
        raise NotImplementedError

    def prepare(self, p, timer, check_fn):
        from .triton_blockscaled import tune
        ref = p.reference
        best, log = tune(lambda cfg: self.run(p, cfg), lambda out: check_fn(out, ref),
                         lambda fn: timer.time(fn, iters=TUNE_ITERS).median_us)
        chosen = best or log[0]["config"]  # none passed: the check reports the first config's error
        return (lambda: self.run(p, chosen)), {"tuning": log, "config": best}


class TritonTwoKernels(_TritonLinear):
    """vLLM's per_token_group_quant_fp8 then w8a8_block_fp8_matmul (both Triton, written here), tuned GEMM."""
    name = "triton"
    label = "Triton per_token_group_quant_fp8 + w8a8_block_fp8_matmul (vLLM design, here)"

    def run(self, p, config):
        from .triton_blockscaled import blockscaled_gemm, per_token_group_quant_fp8
        q, s = per_token_group_quant_fp8(p.x, p.fp8_dtype)
        return blockscaled_gemm(q, p.b, s, p.b_scale, config, out_dtype=p.out_dtype)


class TritonInlineQuant(_TritonLinear):
    """finegrained-fp8's matmul_2d design: the GEMM quantizes each bf16 A tile in its K loop (Triton, here)."""
    name = "triton-inline"
    label = "Triton GEMM quantizing A in its K loop (finegrained-fp8 design, here)"

    def run(self, p, config):
        from .triton_blockscaled import blockscaled_gemm
        return blockscaled_gemm(p.x, p.b, None, p.b_scale, config, out_dtype=p.out_dtype)


class QuantScaledMM(_LinearPeer):
    """The Triton group quantizer (M-major scales) then cuBLASLt's block-scaled torch._scaled_mm."""
    name = "scaled-mm-block"
    label = "Triton quant + torch._scaled_mm block (cuBLASLt)"

    def unavailable(self, device):
        if device.type != "cuda":
            return "needs a GPU"
        return TritonBlock().unavailable(device)

    def prepare(self, p, timer, check_fn):
        from .triton_blockscaled import per_token_group_quant_fp8
        b = p.b.contiguous()
        b_scale = _row_major_scale(p.b_scale, _scale_rows_aligned(b.device, b.dtype))

        def call():
            q, s = per_token_group_quant_fp8(p.x, p.fp8_dtype, column_major_scales=True)
            return torch._scaled_mm(q, b.t(), scale_a=s, scale_b=b_scale.t(), out_dtype=p.out_dtype)
        return call, {}


class Bf16Linear(_LinearPeer):
    """torch.matmul of bf16 x with a bf16 copy of the dequantized weight (made untimed): a bf16 model's cost."""
    name = "bf16"
    label = "torch.matmul bf16"
    block_scaled = False

    def unavailable(self, device):
        return None if device.type == "cuda" else "bf16 baseline is a GPU peer"

    def reference(self, p):
        return p.unquantized_reference

    def prepare(self, p, timer, check_fn):
        w = p.weight().to(torch.bfloat16)
        return (lambda: torch.matmul(p.x, w.t()).to(p.out_dtype)), {}


class DequantMatmul(_LinearPeer):
    """What a CPU user without a kernel does: dequantize the weight to fp32 in the call, torch.matmul with x."""
    name = "dequant-fp32"
    label = "dequant weight fp32 + torch.matmul"

    def reference(self, p):
        return p.unquantized_reference

    def prepare(self, p, timer, check_fn):
        return (lambda: (p.x.float() @ p.weight().t()).to(p.out_dtype)), {}


PEERS = [OursLinear, OursGemmAlone, TritonTwoKernels, TritonInlineQuant, QuantScaledMM, Bf16Linear, DequantMatmul]
