"""One benchmark problem: fresh random FP8 operands with distinct per-block scales, the fp32 reference,
the correctness check every peer passes before it is timed, and the FLOP/byte counts of the roofline."""
from dataclasses import dataclass, field

import torch

from .shapes import KIND_GEMM, KIND_LINEAR, LAYOUT_CHALLENGE, Shape

# The DeepSeek-V3 block sizes (gemm/gemm_contract.h: kScaleBlockK, kScaleBlockN).
SCALE_BLOCK_K = 128
SCALE_BLOCK_N = 128

# Elementwise |out - ref| <= atol + RTOL * |ref| (the AMD challenge's rtol), with atol one output-dtype
# epsilon of max|ref| so that elements near cancellation are judged on the output's resolution, not on
# their own tiny magnitude. Plus a global relative L2 error bound.
RTOL = 2e-2
REL_ERR_LIMIT = 1e-2


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def dequant(x: torch.Tensor, scale: torch.Tensor, rows_per_scale: int) -> torch.Tensor:
    """fp32 x * scale, one scale per rows_per_scale rows and per SCALE_BLOCK_K columns (ragged tails cut)."""
    rows, k = x.shape
    expanded = scale.float().repeat_interleave(rows_per_scale, 0)[:rows].repeat_interleave(SCALE_BLOCK_K, 1)[:, :k]
    return x.float() * expanded


@dataclass
class Check:
    ok: bool
    rel_err: float  # ||out - ref||_2 / ||ref||_2
    max_abs_err: float
    n_bad: int  # elements outside atol + RTOL * |ref|
    reason: str = ""

    def as_dict(self):
        return {"ok": self.ok, "rel_err": self.rel_err, "max_abs_err": self.max_abs_err, "n_bad": self.n_bad,
                "reason": self.reason}


def check(out: torch.Tensor, ref: torch.Tensor) -> Check:
    """Compares a peer's output with an fp32 reference; never passes on a reference that is all zeros."""
    if tuple(out.shape) != tuple(ref.shape):
        return Check(False, float("inf"), float("inf"), ref.numel(),
                     f"output shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    ref_max = ref.abs().max().item()
    if not ref_max > 0:
        raise ValueError("reference is all zeros: the check could not fail; the inputs are degenerate")
    out32 = out.float()
    diff = (out32 - ref).abs()
    finite = bool(torch.isfinite(out32).all().item())
    atol = torch.finfo(out.dtype).eps * ref_max if out.dtype.is_floating_point else 0.0
    n_bad = int((diff > atol + RTOL * ref.abs()).sum().item()) if finite else ref.numel()
    rel_err = (diff.norm() / ref.norm()).item() if finite else float("inf")
    max_abs = diff.max().item() if finite else float("inf")
    reasons = []
    if not finite:
        reasons.append("non-finite output")
    if n_bad:
        reasons.append(f"{n_bad} of {ref.numel()} elements outside atol={atol:.3g} + rtol={RTOL}*|ref|")
    if rel_err >= REL_ERR_LIMIT:
        reasons.append(f"relative error {rel_err:.3g} >= {REL_ERR_LIMIT}")
    return Check(not reasons, rel_err, max_abs, n_bad, "; ".join(reasons))


@dataclass
class Problem:
    """Operands exactly as a caller hands them over: K-major NT tensors, or the challenge's transposed views."""
    shape: Shape
    a: torch.Tensor  # [M, K] fp8
    b: torch.Tensor  # [N, K] fp8
    a_scale: torch.Tensor  # [M, ceil(K/128)] fp32
    b_scale: torch.Tensor  # [ceil(N/128), ceil(K/128)] fp32
    out_dtype: torch.dtype
    _ref: torch.Tensor = field(default=None, repr=False)

    @property
    def reference(self) -> torch.Tensor:
        if self._ref is None:
            a = dequant(self.a, self.a_scale, 1)
            b = dequant(self.b, self.b_scale, SCALE_BLOCK_N)
            self._ref = a @ b.t()
        return self._ref

    def drop_reference(self) -> None:
        self._ref = None

    @property
    def flops(self) -> int:
        s = self.shape
        return 2 * s.m * s.n * s.k

    @property
    def bytes(self) -> int:
        """Each operand read once, the output written once: the fewest bytes the GEMM must move."""
        s = self.shape
        kb = ceil_div(s.k, SCALE_BLOCK_K)
        scales = 4 * (s.m * kb + ceil_div(s.n, SCALE_BLOCK_N) * kb)
        fp8 = self.a.element_size()
        return fp8 * (s.m * s.k + s.n * s.k) + scales + s.m * s.n * torch.empty((), dtype=self.out_dtype).element_size()


def _randn(rows: int, cols: int, transposed: bool, device, generator) -> torch.Tensor:
    """[rows, cols] standard normal; with transposed=True a view of a [cols, rows] contiguous tensor."""
    if transposed:
        return torch.randn(cols, rows, device=device, generator=generator).t()
    return torch.randn(rows, cols, device=device, generator=generator)


def make_problem(shape, device: torch.device, fp8_dtype: torch.dtype, seed: int,
                 out_dtype: torch.dtype = torch.bfloat16):
    """randn data cast to FP8 and randn scales (distinct per block, about half negative), as the challenge does.
    Linear rows get bf16 activations (linear.py), grouped and masked rows many experts (grouped.py)."""
    if shape.kind == KIND_LINEAR:
        from .linear import LinearProblem
        return LinearProblem(shape, device, fp8_dtype, seed, out_dtype)
    if shape.kind != KIND_GEMM:
        from .grouped import GroupedProblem
        return GroupedProblem(shape, device, fp8_dtype, seed, out_dtype)
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    t = shape.layout == LAYOUT_CHALLENGE
    kb = ceil_div(shape.k, SCALE_BLOCK_K)
    nb = ceil_div(shape.n, SCALE_BLOCK_N)
    a = _randn(shape.m, shape.k, t, device, gen).to(fp8_dtype)
    b = _randn(shape.n, shape.k, t, device, gen).to(fp8_dtype)
    a_scale = _randn(shape.m, kb, t, device, gen)
    b_scale = _randn(nb, kb, t, device, gen)
    return Problem(shape, a, b, a_scale, b_scale, out_dtype)
