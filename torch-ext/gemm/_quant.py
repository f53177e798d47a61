"""Block quantization helpers that emit exactly the tensors `gemm` and `grouped_gemm` take.

Activations go through the fused `quantize` op (one pass over x, writing FP8 and scales); weights are
quantized once per checkpoint, in torch.
"""

from typing import Optional

import torch
import torch.nn.functional as F

from ._args import OP_SCALE_DTYPES, SCALE_DTYPES, check_devices, require_tensor
from ._fp8 import SCALE_BLOCK_K, SCALE_BLOCK_N, ceil_div, fp8_max
from ._ops import add_op_namespace_prefix, ops

# What the `quantize` op reads; float64 is narrowed to float32 first (the old torch path's numerics).
OP_INPUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
# A GPU build (CUDA or ROCm, both on the CUDA key) refuses CPU tensors, a CPU build GPU tensors.
GPU_BUILD = torch._C._dispatch_has_kernel_for_dispatch_key(add_op_namespace_prefix("quantize"), "CUDA")


def _op_serves(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether this build's `quantize` op runs on `device` in `dtype`; elsewhere quantize_activation
    stays the device-agnostic torch helper it always was (e.g. CPU tensors with a GPU build)."""
    if device.type == "cpu":
        return not GPU_BUILD
    if device.type == "cuda":
        return GPU_BUILD and (dtype != torch.float8_e4m3fnuz or torch.version.hip is not None)
    return True  # meta and fake tensors: the op's fake implementation


def _check_float(who: str, name: str, t: torch.Tensor) -> None:
    require_tensor(who, name, t)
    # Integer codes carry no scale of their own: quantizing them would silently invent one.
    if not t.is_floating_point():
        raise TypeError(f"{who}: {name} must be a floating-point tensor (e.g. torch.bfloat16), got {t.dtype}")


def _check_scale_dtype(who: str, scale_dtype: torch.dtype) -> None:
    if scale_dtype not in SCALE_DTYPES:
        raise TypeError(f"{who}: scale_dtype must be torch.float32 or torch.float8_e8m0fnu, got {scale_dtype}")


def _round_up_pow2(scale: torch.Tensor) -> torch.Tensor:
    # scale = m * 2^e with m in [0.5, 1): already a power of two when m == 0.5, else 2^e is the next one.
    mantissa, exponent = torch.frexp(scale)
    return torch.where(mantissa == 0.5, scale, torch.ldexp(torch.ones_like(scale), exponent))


def _block_scale(amax: torch.Tensor, dtype: torch.dtype, pow2_scale: bool) -> torch.Tensor:
    # An all-zero block would give amax / max = 0 and then 0/0 = NaN when dividing by it; any positive
    # scale quantizes zeros to zero, so such blocks get 1.
    scale = amax / fp8_max(dtype)
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    return _round_up_pow2(scale) if pow2_scale else scale


def _saturate(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    # x / (amax / max) can round to just above max; the cast must not overflow.
    limit = fp8_max(dtype)
    return x.clamp(-limit, limit).to(dtype)


def quantize_rows(
    x: torch.Tensor,
    dtype: torch.dtype,
    scale_dtype: torch.dtype = torch.float32,
    pow2_scale: bool = False,
    column_major_scales: bool = True,
    static_scale: Optional[torch.Tensor] = None,
):
    """The fused `quantize` op on x [M, K] (inner stride 1 or copied to it) -> (q [M, K], scale [M, ceil(K/128)]).

    M-major scales by default: the layout every backend's GEMM reads fastest (CUDA loads a K group's
    scales with one TMA copy, ROCm with vector loads, the CPU micro-kernel reads a row tile's scales
    adjacently). static_scale (1 element, float32) replaces the per-group scales.
    """
    m, k = x.shape
    if x.stride(-1) != 1:
        x = x.contiguous()
    q = torch.empty(m, k, dtype=dtype, device=x.device)
    k_blocks = ceil_div(k, SCALE_BLOCK_K)
    # Allocated in the dtype the op writes: a uint8 view of an e8m0 buffer would still be an e8m0 mutation.
    op_dtype = OP_SCALE_DTYPES[scale_dtype]
    if column_major_scales:
        scale = torch.empty(k_blocks, m, dtype=op_dtype, device=x.device).t()
    else:
        scale = torch.empty(m, k_blocks, dtype=op_dtype, device=x.device)
    ops.quantize(q, scale, x, static_scale, pow2_scale)
    return q, scale.view(scale_dtype)


def quantize_activation(
    x: torch.Tensor,
    block: int = SCALE_BLOCK_K,
    dtype: torch.dtype = torch.float8_e4m3fn,
    column_major_scales: bool = False,
    scale_dtype: torch.dtype = torch.float32,
    pow2_scale: bool = False,
):
    """Quantize `x` [..., K] per 1 x `block` group along K.

    Returns `(x_fp8, scale)`: `x_fp8` [..., K] contiguous in `dtype`, `scale` [..., ceil(K/block)]
    in `scale_dtype` with `x ~= x_fp8 * scale` group-wise (a ragged last group is zero-padded). With
    the default block of 128 these are the `a` and `a_scale` that `gemm` takes, written by the fused
    `quantize` op in one pass over `x`.

    scale = amax / fp8_max(dtype) per group (1 for an all-zero group); `pow2_scale=True` rounds it up
    to a power of two (DeepGEMM's and vLLM's choice for UE8M0 checkpoints), as does
    `scale_dtype=torch.float8_e8m0fnu` (UE8M0: one exponent byte per scale, which `gemm` reads as is).

    `scale` is contiguous by default. With `column_major_scales=True` (vLLM's keyword for the same
    thing) it is the same values stored M-major: the rows of `x` are adjacent for each K group
    (`scale.stride(-1)` is the row count). That is the layout cuBLAS and DeepGEMM take, and the one the
    CUDA backend reads fastest: its 128+-row tiles load a K group's scales with one TMA copy instead of
    transposing them first (about 3 % of the time of an M >= 1024 GEMM on an H200).
    """
    _check_float("quantize_activation", "x", x)
    _check_scale_dtype("quantize_activation", scale_dtype)
    pow2_scale = pow2_scale or scale_dtype == torch.float8_e8m0fnu
    if x.dim() < 1:
        raise ValueError("quantize_activation: x must have shape [..., K], got a 0-D tensor")
    if block != SCALE_BLOCK_K or not _op_serves(x.device, dtype):
        # The op's group is the GEMM's 128; other groups (for other consumers) are served in torch.
        return _quantize_activation_torch(x, block, dtype, column_major_scales, scale_dtype, pow2_scale)
    lead, k = x.shape[:-1], x.shape[-1]
    x_2d = x.reshape(-1, k)
    if x_2d.dtype not in OP_INPUT_DTYPES:
        x_2d = x_2d.float()
    q, scale = quantize_rows(x_2d, dtype, scale_dtype, pow2_scale, column_major_scales)
    return q.view(*lead, k), scale.view(*lead, scale.shape[-1])


def _quantize_activation_torch(x, block, dtype, column_major_scales, scale_dtype, pow2_scale):
    k = x.shape[-1]
    k_blocks = ceil_div(k, block)
    groups = F.pad(x.float(), (0, k_blocks * block - k)).unflatten(-1, (k_blocks, block))
    scale = _block_scale(groups.abs().amax(dim=-1), dtype, pow2_scale)
    q = _saturate(groups / scale.unsqueeze(-1), dtype).flatten(-2)[..., :k]
    scale = scale.to(scale_dtype)
    if column_major_scales:
        scale = scale.reshape(-1, k_blocks).t().contiguous().t().view(scale.shape)
    return q.contiguous(), scale


def quantize_weight(
    w: torch.Tensor,
    block: int = SCALE_BLOCK_N,
    dtype: torch.dtype = torch.float8_e4m3fn,
    scale_dtype: torch.dtype = torch.float32,
    pow2_scale: bool = False,
):
    """Quantize a weight `w` [N, K] per `block` x `block` tile.

    Returns `(w_fp8, scale)`: `w_fp8` [N, K] contiguous in `dtype`, `scale` [ceil(N/block),
    ceil(K/block)] contiguous in `scale_dtype` (ragged edge tiles are zero-padded). With the default
    block of 128 these are the `b` and `b_scale` that `gemm` takes. `pow2_scale=True` (implied by
    `scale_dtype=torch.float8_e8m0fnu`) rounds each scale up to a power of two, as transformers does
    for `scale_fmt="ue8m0"` checkpoints.
    """
    _check_float("quantize_weight", "w", w)
    _check_scale_dtype("quantize_weight", scale_dtype)
    if w.dim() != 2:
        raise ValueError(f"quantize_weight: w must be a 2-D tensor [N, K], got shape {tuple(w.shape)}")
    pow2_scale = pow2_scale or scale_dtype == torch.float8_e8m0fnu
    n, k = w.shape
    n_blocks, k_blocks = ceil_div(n, block), ceil_div(k, block)
    padded = F.pad(w.float(), (0, k_blocks * block - k, 0, n_blocks * block - n))
    tiles = padded.view(n_blocks, block, k_blocks, block)
    scale = _block_scale(tiles.abs().amax(dim=(1, 3)), dtype, pow2_scale)
    q = _saturate(tiles / scale[:, None, :, None], dtype).view(n_blocks * block, k_blocks * block)
    return q[:n, :k].contiguous(), scale.to(scale_dtype)


@torch.library.register_fake(add_op_namespace_prefix("quantize"))
def _quantize_fake(q, scale, x, static_scale, pow2_scale) -> None:
    # The op only writes into `q` and `scale`, whose metadata the caller fixed.
    check_devices("quantize", "x", x, q=q, scale=scale, static_scale=static_scale)
