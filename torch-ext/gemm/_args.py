"""Argument checks and normalizations shared by the public entry points.

Everything here reads only metadata (shapes, dtypes, devices), never tensor data, so no entry point
synchronizes the device and all of them trace under torch.compile without a graph break.
"""

from typing import Optional, Sequence

import torch

from ._fp8 import FP8_DTYPES, SCALE_BLOCK_K, SCALE_BLOCK_N, ceil_div

# What the ops write; mirrors the binding's out formats.
OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
# What the fused activation quantizer reads.
ACTIVATION_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
# Weight and activation scale formats the kernels read as they are (UE8M0: one exponent byte).
SCALE_DTYPES = (torch.float32, torch.float8_e8m0fnu)
# The dtype each scale format reaches the ops in: UE8M0 as its exponent bytes (uint8), which the binding
# reads as UE8M0. Inductor leaves the functional wrapper of a mutating op in the graph (and fails) when
# any of its tensors is float8_e8m0fnu; uint8 it handles.
OP_SCALE_DTYPES = {torch.float32: torch.float32, torch.float8_e8m0fnu: torch.uint8}
BLOCK_SIZE = [SCALE_BLOCK_N, SCALE_BLOCK_K]
BLOCK_SIZE_TUPLE = tuple(BLOCK_SIZE)


def require_tensor(who: str, name: str, t) -> None:
    # Anything else would fail on its first attribute read, with a message that names no argument.
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{who}: {name} must be a torch.Tensor, got {type(t).__name__}")


def check_devices(who: str, first: str, a: torch.Tensor, **others: Optional[torch.Tensor]) -> None:
    # Checked here as well as in the binding: a `meta` tensor among CPU or GPU ones would dispatch
    # the op to its fake implementation, which writes nothing.
    require_tensor(who, first, a)
    for name, t in others.items():
        if t is None:
            continue
        require_tensor(who, name, t)
        if t.device != a.device:
            raise ValueError(
                f"{who}: all tensors must be on one device; expected {name} on {a.device} "
                f"(the device of {first}), got {t.device}"
            )


def check_out_dtype(who: str, name: str, dtype: torch.dtype) -> None:
    if dtype not in OUT_DTYPES:
        raise TypeError(f"{who}: {name} must be torch.bfloat16, torch.float16 or torch.float32, got {dtype}")


def check_activation(who: str, A: torch.Tensor) -> None:
    """A [..., K] in a floating dtype the fused quantizer reads; FP8 A is refused (it has no scale here)."""
    require_tensor(who, "A", A)
    if A.dtype in FP8_DTYPES:
        raise TypeError(
            f"{who}: A must be torch.bfloat16, torch.float16 or torch.float32 (it is quantized here), got "
            f"{A.dtype}; for FP8 activations with their own scales call gemm() or grouped_gemm()"
        )
    if A.dtype not in ACTIVATION_DTYPES:
        raise TypeError(f"{who}: A must be torch.bfloat16, torch.float16 or torch.float32, got {A.dtype}")
    if A.dim() < 1:
        raise ValueError(f"{who}: A must have shape [..., K], got a 0-D tensor")


def check_weight(who: str, B: torch.Tensor, dims: int, layout: str) -> None:
    require_tensor(who, "B", B)
    if B.dtype not in FP8_DTYPES:
        raise TypeError(f"{who}: B must be torch.float8_e4m3fn or torch.float8_e4m3fnuz, got {B.dtype}")
    if B.dim() != dims:
        raise ValueError(f"{who}: B must be a {dims}-D tensor {layout}, got shape {tuple(B.shape)}")


def check_scale_dtype(who: str, name: str, scale: torch.Tensor) -> None:
    require_tensor(who, name, scale)
    if scale.dtype not in SCALE_DTYPES:
        raise TypeError(
            f"{who}: {name} must be torch.float32 or torch.float8_e8m0fnu, got {scale.dtype} "
            f"(upcast other scale formats with .float())"
        )


def op_scale(scale: torch.Tensor) -> torch.Tensor:
    """A float32 or float8_e8m0fnu scale as the ops take it (OP_SCALE_DTYPES), a view."""
    op_dtype = OP_SCALE_DTYPES[scale.dtype]
    return scale if scale.dtype == op_dtype else scale.view(op_dtype)


def as_scale_format(who: str, name: str, scale: torch.Tensor) -> torch.Tensor:
    """fp32 or UE8M0 as the ops take it (`op_scale`); uint8 exponents (how checkpoints store UE8M0) are
    taken as they are."""
    if scale.dtype == torch.uint8:
        return scale
    if scale.dtype not in SCALE_DTYPES:
        raise TypeError(
            f"{who}: {name} must be torch.float32 or torch.float8_e8m0fnu (or torch.uint8 UE8M0 exponents), "
            f"got {scale.dtype}"
        )
    return op_scale(scale)


def _is_per_tensor(block_size: Optional[Sequence[int]], n: int, k: int) -> bool:
    # finegrained-fp8's rule: no block size, or one block covering the whole weight.
    return block_size is None or (isinstance(block_size, (list, tuple)) and list(block_size) == [n, k])


def weight_scale(who: str, Bs: torch.Tensor, block_size: Optional[Sequence[int]], B: torch.Tensor) -> torch.Tensor:
    """Bs as the per-128x128-block grid [..., ceil(N/128), ceil(K/128)] the ops take (`as_scale_format`).

    block_size [128, 128] (list or tuple) takes Bs as that grid. block_size None (or [N, K]) means one
    scale per weight matrix (Bs.numel() == number of matrices); it is broadcast to the grid, a copy of
    ceil(N/128) * ceil(K/128) scales per matrix. Any other block size is refused.
    """
    require_tensor(who, "Bs", Bs)
    groups, (n, k) = B.shape[:-2], B.shape[-2:]
    grid = (*groups, ceil_div(n, SCALE_BLOCK_N), ceil_div(k, SCALE_BLOCK_K))
    if (block_size == BLOCK_SIZE or block_size == BLOCK_SIZE_TUPLE) and Bs.shape == grid and Bs.dtype in SCALE_DTYPES:
        return op_scale(Bs)  # the checkpoints' case, decided first: this runs on every call
    Bs = as_scale_format(who, "Bs", Bs)
    if _is_per_tensor(block_size, n, k) and Bs.numel() == groups.numel():
        return Bs.reshape(*groups, 1, 1).expand(grid).contiguous()
    if block_size is None:
        raise ValueError(
            f"{who}: block_size None means one weight scale per matrix, so Bs must have {groups.numel()} "
            f"element(s), got shape {tuple(Bs.shape)}"
        )
    if not isinstance(block_size, (list, tuple)) or list(block_size) != BLOCK_SIZE:
        shown = list(block_size) if isinstance(block_size, (list, tuple)) else block_size
        raise ValueError(
            f"{who}: block_size must be [128, 128] (or None / [N, K] for a per-tensor weight scale), "
            f"got {shown}"
        )
    if tuple(Bs.shape) != grid:
        dims = "[E, ceil(N/128), ceil(K/128)]" if groups else "[ceil(N/128), ceil(K/128)]"
        raise ValueError(f"{who}: Bs must have shape {dims} = {list(grid)}, got {list(Bs.shape)}")
    return Bs


def merge_leading_dims(who: str, out: torch.Tensor) -> torch.Tensor:
    """out [..., N] as [rows, N]; a view, since the result must land in `out` (reshape could copy)."""
    try:
        return out.view(-1, out.shape[-1])
    except RuntimeError:
        raise ValueError(
            f"{who}: out's leading dims must be mergeable into one (a view), got shape {tuple(out.shape)} "
            f"and strides {out.stride()}"
        ) from None
