"""FP8 block-scaled matmul: `C[M, N] = (a * a_scale) @ (b * b_scale).T` (DeepSeek-V3 recipe).

See README.md for the contract. The native ops (`ops.gemm`, `ops.grouped_gemm`, `ops.quantize`)
validate everything and write into their first tensors. Python entry points:
- `gemm()` / `grouped_gemm()`: FP8 activations with their scales (engines);
- `matmul_2d` (alias `matmul`), `matmul_grouped`, `matmul_batched`: bf16/fp16/fp32 activations quantized
  on the way in, kernels-community/finegrained-fp8's interface, which transformers calls;
- `quantize_activation`, `quantize_weight`, `e4m3fn_to_e4m3fnuz`, `gemm_reference`: helpers.
"""

from typing import Optional

import torch

from ._args import OUT_DTYPES, check_devices, check_scale_dtype, merge_leading_dims, op_scale, require_tensor
from ._fp8 import SCALE_BLOCK_K, SCALE_BLOCK_N, e4m3fn_to_e4m3fnuz, fp8_max
from ._grouped import grouped_gemm, matmul_batched, matmul_grouped
from ._matmul import matmul, matmul_2d
from ._ops import add_op_namespace_prefix, ops
from ._quant import quantize_activation, quantize_weight
from ._reference import gemm_reference

__all__ = [
    "SCALE_BLOCK_K",
    "SCALE_BLOCK_N",
    "e4m3fn_to_e4m3fnuz",
    "fp8_act_quant",
    "fp8_max",
    "gemm",
    "gemm_reference",
    "grouped_gemm",
    "matmul",
    "matmul_2d",
    "matmul_batched",
    "matmul_grouped",
    "ops",
    "quantize_activation",
    "quantize_weight",
    "w8a8_block_fp8_matmul",
]


def gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    a_scale: torch.Tensor,
    b_scale: torch.Tensor,
    out: Optional[torch.Tensor] = None,
    out_dtype: Optional[torch.dtype] = None,
) -> torch.Tensor:
    """`(a * a_scale) @ (b * b_scale).T` with float32 accumulation promoted once per 128-K block.

    a:       [..., K] float8_e4m3fn (or float8_e4m3fnuz on ROCm/CPU)
    b:       [N, K] same FP8 dtype (weight layout)
    a_scale: [..., ceil(K/128)] float32 or float8_e8m0fnu (UE8M0), one scale per row per 128 K
    b_scale: [ceil(N/128), ceil(K/128)] float32 or float8_e8m0fnu, one scale per 128 x 128 block of b
    out:     optional [..., N] result tensor (row stride may be padded, inner stride 1)
    out_dtype: bfloat16 (default), float16 or float32; defaults to out.dtype when `out` is given.

    Returns the [..., N] result (`out` itself when given). Layouts are read from strides (see README);
    the call is asynchronous on the current stream and never synchronizes.
    """
    require_tensor("gemm", "a", a)
    require_tensor("gemm", "b", b)
    if a.dim() < 1:
        raise ValueError("gemm: a must have shape [..., K], got a 0-D tensor")
    if b.dim() != 2:
        raise ValueError(f"gemm: b must be a 2-D tensor [N, K], got shape {tuple(b.shape)}")
    check_scale_dtype("gemm", "a_scale", a_scale)
    check_scale_dtype("gemm", "b_scale", b_scale)
    if out_dtype is not None and out_dtype not in OUT_DTYPES:
        raise TypeError(
            f"gemm: out_dtype must be torch.bfloat16, torch.float16 or torch.float32, got {out_dtype}"
        )
    n = b.shape[0]
    if out is None and a.dim() == 2 and a_scale.dim() == 2:
        # The common call, kept short: at decode sizes the host's time per call exceeds the GPU's. The op
        # checks shapes, strides and devices itself (its fake implementation too, for meta tensors).
        out = torch.empty((a.shape[0], n), dtype=out_dtype or torch.bfloat16, device=a.device)
        ops.gemm(out, a, b, op_scale(a_scale), op_scale(b_scale))
        return out
    batch = a.shape[:-1]
    if a_scale.dim() != a.dim() or a_scale.shape[:-1] != batch:
        raise ValueError(
            f"gemm: a_scale must have shape [..., ceil(K/128)] with the leading dims of a "
            f"{tuple(batch)}, got {tuple(a_scale.shape)}"
        )
    _check_devices(a=a, b=b, a_scale=a_scale, b_scale=b_scale, out=out)
    if out is None:
        out_2d = torch.empty(a.shape[:-1].numel(), n, dtype=out_dtype or torch.bfloat16, device=a.device)
        out = out_2d.view(*batch, n)
    else:
        if out_dtype is not None and out_dtype != out.dtype:
            raise TypeError(f"gemm: out_dtype is {out_dtype} but out has dtype {out.dtype}")
        if out.shape != (*batch, n):
            raise ValueError(f"gemm: out must have shape {(*batch, n)}, got {tuple(out.shape)}")
        out_2d = out if out.dim() == 2 else merge_leading_dims("gemm", out)
    a_2d = a if a.dim() == 2 else a.reshape(-1, a.shape[-1])
    a_scale_2d = a_scale if a_scale.dim() == 2 else a_scale.reshape(-1, a_scale.shape[-1])
    ops.gemm(out_2d, a_2d, b, op_scale(a_scale_2d), op_scale(b_scale))
    return out


def w8a8_block_fp8_matmul(
    A: torch.Tensor,
    B: torch.Tensor,
    As: torch.Tensor,
    Bs: torch.Tensor,
    block_size=(SCALE_BLOCK_N, SCALE_BLOCK_K),
    output_dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Drop-in for kernels-community/finegrained-fp8's function of the same name (transformers calls it).

    Same arguments and defaults (float32 output); only 128 x 128 blocks are supported.
    """
    if list(block_size) != [SCALE_BLOCK_N, SCALE_BLOCK_K]:
        raise ValueError(f"w8a8_block_fp8_matmul: block_size must be [128, 128], got {list(block_size)}")
    return gemm(A, B, As, Bs, out_dtype=output_dtype)


def fp8_act_quant(x: torch.Tensor, block_size: int = SCALE_BLOCK_K):
    """Drop-in for finegrained-fp8's activation quantizer: `quantize_activation` in e4m3fn."""
    return quantize_activation(x, block=block_size)


def _check_devices(a: torch.Tensor, **others: Optional[torch.Tensor]) -> None:
    check_devices("gemm", "a", a, **others)


@torch.library.register_fake(add_op_namespace_prefix("gemm"))
def _gemm_fake(out, a, b, a_scale, b_scale) -> None:
    # The op only writes into `out`, whose metadata the caller fixed; nothing new to describe. The
    # device check is the one thing the binding cannot do for a call that landed here.
    _check_devices(a=a, b=b, a_scale=a_scale, b_scale=b_scale, out=out)
