"""The dense bf16-input FP8 linear transformers calls: `matmul_2d` (finegrained-fp8's interface)."""

from typing import Optional, Sequence

import torch

from ._args import check_activation, check_devices, check_out_dtype, check_weight, weight_scale
from ._ops import add_op_namespace_prefix, ops


def static_activation_scale(who: str, activation_scale: torch.Tensor) -> torch.Tensor:
    """A per-tensor activation scale as the `quantize` op takes it: 1 element, float32."""
    if not torch.is_tensor(activation_scale) or not activation_scale.is_floating_point():
        kind = activation_scale.dtype if torch.is_tensor(activation_scale) else type(activation_scale).__name__
        raise TypeError(f"{who}: activation_scale must be a floating-point tensor (float32), got {kind}")
    if activation_scale.numel() != 1:
        raise ValueError(
            f"{who}: activation_scale must be a per-tensor scale (1 element), got shape "
            f"{tuple(activation_scale.shape)}"
        )
    # A model cast to bf16 may carry its scale in bf16: widening one element costs nothing.
    return activation_scale.reshape(1).to(torch.float32)


def matmul_2d(
    A: torch.Tensor,
    B: torch.Tensor,
    Bs: torch.Tensor,
    block_size: Optional[Sequence[int]],
    output_dtype: Optional[torch.dtype] = None,
    activation_scale: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """`A @ dequant(B, Bs).T` with A quantized to FP8 per 1 x 128 group on the way in.

    A:  [..., K] bfloat16, float16 or float32 (any leading dims, any strides)
    B:  [N, K] float8_e4m3fn (float8_e4m3fnuz on ROCm/CPU)
    Bs: [ceil(N/128), ceil(K/128)] float32 or float8_e8m0fnu (uint8 exponents are viewed as UE8M0),
        or one element when block_size is None (a per-tensor weight scale)
    block_size: [128, 128] (list or tuple), or None / [N, K] for a per-tensor weight scale
    output_dtype: bfloat16, float16 or float32; None means A.dtype
    activation_scale: None quantizes A dynamically (scale = amax / fp8 max per row per 128 K, fused
        `quantize` op); a per-tensor float32 scale quantizes A statically with it.

    Returns a fresh [..., N] tensor. Asynchronous on the current stream; never synchronizes.
    """
    who = "matmul_2d"
    check_activation(who, A)
    check_weight(who, B, 2, "[N, K]")
    n, k = B.shape
    if A.shape[-1] != k:
        raise ValueError(f"{who}: A must have shape [..., K] with K = B.shape[1] = {k}, got {tuple(A.shape)}")
    check_devices(who, "A", A, B=B, Bs=Bs, activation_scale=activation_scale)
    Bs = weight_scale(who, Bs, block_size, B)
    out_dtype = A.dtype if output_dtype is None else output_dtype
    check_out_dtype(who, "output_dtype", out_dtype)
    static = None if activation_scale is None else static_activation_scale(who, activation_scale)

    x = A if A.dim() == 2 else A.reshape(-1, k)
    out = torch.empty(x.shape[0], n, dtype=out_dtype, device=A.device)
    # One op quantizes into temporaries and multiplies.
    ops.linear(out, x, B, Bs, static, False)
    return out if A.dim() == 2 else out.view(*A.shape[:-1], n)


@torch.library.register_fake(add_op_namespace_prefix("linear"))
def _linear_fake(out, x, b, b_scale, static_scale, pow2_scale) -> None:
    # The op only writes into `out`, whose metadata the caller fixed.
    check_devices("linear", "x", x, b=b, b_scale=b_scale, out=out, static_scale=static_scale)


# finegrained-fp8 exports the same function under both names.
matmul = matmul_2d
