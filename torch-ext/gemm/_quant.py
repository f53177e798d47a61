"""Block quantization helpers that emit exactly the tensors `gemm` takes."""

import torch
import torch.nn.functional as F

from ._fp8 import SCALE_BLOCK_K, SCALE_BLOCK_N, ceil_div, fp8_max


def _block_scale(amax: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    # An all-zero block would give amax / max = 0 and then 0/0 = NaN when dividing by it; any positive
    # scale quantizes zeros to zero, so such blocks get 1.
    scale = amax / fp8_max(dtype)
    return torch.where(scale > 0, scale, torch.ones_like(scale))


def _check_float(name: str, t: torch.Tensor) -> None:
    # Integer codes carry no scale of their own: quantizing them would silently invent one.
    if not t.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor (e.g. torch.bfloat16), got {t.dtype}")


def _saturate(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    # x / (amax / max) can round to just above max; the cast must not overflow.
    limit = fp8_max(dtype)
    return x.clamp(-limit, limit).to(dtype)


def quantize_activation(
    x: torch.Tensor,
    block: int = SCALE_BLOCK_K,
    dtype: torch.dtype = torch.float8_e4m3fn,
    column_major_scales: bool = False,
):
    """Quantize `x` [..., K] per 1 x `block` group along K.

    Returns `(x_fp8, scale)`: `x_fp8` [..., K] contiguous in `dtype`, `scale` [..., ceil(K/block)]
    float32 with `x ~= x_fp8 * scale` group-wise (a ragged last group is zero-padded). With the default
    block of 128 these are the `a` and `a_scale` that `gemm` takes.

    `scale` is contiguous by default. With `column_major_scales=True` (vLLM's keyword for the same
    thing) it is the same values stored M-major: the rows of `x` are adjacent for each K group
    (`scale.stride(-1)` is the row count). That is the layout cuBLAS and DeepGEMM take, and the one the
    CUDA backend reads fastest: its 128+-row tiles load a K group's scales with one TMA copy instead of
    transposing them first (about 3 % of the time of an M >= 1024 GEMM on an H200).
    """
    _check_float("quantize_activation: x", x)
    k = x.shape[-1]
    k_blocks = ceil_div(k, block)
    groups = F.pad(x.float(), (0, k_blocks * block - k)).unflatten(-1, (k_blocks, block))
    scale = _block_scale(groups.abs().amax(dim=-1), dtype)
    q = _saturate(groups / scale.unsqueeze(-1), dtype).flatten(-2)[..., :k]
    if column_major_scales:
        scale = scale.reshape(-1, k_blocks).t().contiguous().t().view(scale.shape)
    return q.contiguous(), scale


def quantize_weight(w: torch.Tensor, block: int = SCALE_BLOCK_N, dtype: torch.dtype = torch.float8_e4m3fn):
    """Quantize a weight `w` [N, K] per `block` x `block` tile.

    Returns `(w_fp8, scale)`: `w_fp8` [N, K] contiguous in `dtype`, `scale` [ceil(N/block),
    ceil(K/block)] contiguous float32 (ragged edge tiles are zero-padded). With the default block of
    128 these are the `b` and `b_scale` that `gemm` takes.
    """
    _check_float("quantize_weight: w", w)
    if w.dim() != 2:
        raise ValueError(f"quantize_weight: w must be a 2-D tensor [N, K], got shape {tuple(w.shape)}")
    n, k = w.shape
    n_blocks, k_blocks = ceil_div(n, block), ceil_div(k, block)
    padded = F.pad(w.float(), (0, k_blocks * block - k, 0, n_blocks * block - n))
    tiles = padded.view(n_blocks, block, k_blocks, block)
    scale = _block_scale(tiles.abs().amax(dim=(1, 3)), dtype)
    q = _saturate(tiles / scale[:, None, :, None], dtype).view(n_blocks * block, k_blocks * block)
    return q[:n, :k].contiguous(), scale
