"""Pure-PyTorch reference with the kernel's numerics, for tests and for checking a deployment."""

import torch

from ._fp8 import FP8_DTYPES, SCALE_BLOCK_K, SCALE_BLOCK_N, ceil_div


def gemm_reference(
    a: torch.Tensor,
    b: torch.Tensor,
    a_scale: torch.Tensor,
    b_scale: torch.Tensor,
    out_dtype: torch.dtype = torch.bfloat16,
) -> torch.Tensor:
    """`(a * a_scale) @ (b * b_scale).T` computed like the kernel.

    The product of each 128-wide K block is summed in float32 (exact for FP8 inputs up to the fp32
    rounding of the sum), multiplied once by `a_scale * b_scale` and added to a float32 accumulator;
    the result is rounded to `out_dtype` at the end. `a` may have leading batch dims ([..., K], with
    `a_scale` [..., ceil(K/128)]); any strides are accepted. Slow: meant for checking, not serving.
    """
    for name, t in (("a", a), ("b", b)):
        if t.dtype not in FP8_DTYPES:
            raise TypeError(
                f"gemm_reference: {name} must be torch.float8_e4m3fn or torch.float8_e4m3fnuz, got {t.dtype}"
            )
    k = a.shape[-1]
    n = b.shape[0]
    a_float = a.float()
    b_float = b.float()
    # Per output column n, the scale of its 128-row block of b.
    b_scale_rows = b_scale.float().repeat_interleave(SCALE_BLOCK_N, dim=0)[:n]
    acc = torch.zeros(*a.shape[:-1], n, dtype=torch.float32, device=a.device)
    for kb in range(ceil_div(k, SCALE_BLOCK_K)):
        ks = slice(kb * SCALE_BLOCK_K, min(k, (kb + 1) * SCALE_BLOCK_K))
        partial = a_float[..., ks] @ b_float[:, ks].T
        acc += partial * (a_scale[..., kb : kb + 1].float() * b_scale_rows[:, kb])
    return acc.to(out_dtype)
