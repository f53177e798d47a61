"""Grouped FP8 GEMM for MoE experts: transformers' `matmul_grouped` / `matmul_batched` and the engines'
`grouped_gemm` (contiguous, batched by expert id, masked), all on the `grouped_gemm` op.

Routing tensors stay on the device: they are converted with device-side ops (dtype casts, cumsum,
comparisons) and read by the kernels there, so no call synchronizes and every call can be captured in
a CUDA/HIP graph and replayed with new routing. Their values (offsets non-decreasing and <= M) cannot be
checked on the host without a synchronization: the CPU backend checks them; GPU kernels clamp every
segment to [0, M) and never read or write outside it, so bad routing gives wrong rows, never a fault.
"""

import numbers
from typing import Optional, Sequence

import torch

from ._args import (
    as_scale_format,
    check_activation,
    check_devices,
    check_out_dtype,
    check_weight,
    merge_leading_dims,
    require_tensor,
    weight_scale,
)
from ._ops import add_op_namespace_prefix, ops
from ._quant import quantize_rows

INTEGER_DTYPES = (torch.int32, torch.int64)


def _check_routing(who: str, name: str, t: torch.Tensor, length: int, what: str, dtypes=INTEGER_DTYPES) -> None:
    if not torch.is_tensor(t):
        raise TypeError(f"{who}: {name} must be a tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        allowed = " or ".join(str(d) for d in dtypes)
        raise TypeError(f"{who}: {name} must be {allowed}, got {t.dtype}")
    if tuple(t.shape) != (length,):
        raise ValueError(f"{who}: {name} must have shape [{what}] = [{length}], got {list(t.shape)}")


def group_ends(
    who: str, num_experts: int, offsets: Optional[torch.Tensor], tokens_per_expert: Optional[torch.Tensor]
) -> torch.Tensor:
    """int32 [E] inclusive row ends: `offsets` as given, else the device-side cumsum of `tokens_per_expert`
    (which transformers passes as float32 on the CPU: counts are exact integers in float32 up to 2^24)."""
    if offsets is not None:
        _check_routing(who, "offsets", offsets, num_experts, "E")
        return offsets.to(torch.int32)
    if tokens_per_expert is None:
        raise ValueError(f"{who}: offsets or tokens_per_expert must be given, got neither")
    _check_routing(who, "tokens_per_expert", tokens_per_expert, num_experts, "E",
                   INTEGER_DTYPES + (torch.float32,))  # fmt: skip
    return tokens_per_expert.cumsum(0, dtype=torch.int32)


def row_group_from_ids(who: str, expert_ids: torch.Tensor, rows: int) -> torch.Tensor:
    """int64 [M] expert id per row; ids outside [0, E) are sentinels whose rows are left alone."""
    _check_routing(who, "expert_ids", expert_ids, rows, "M")
    return expert_ids.to(torch.int64)


def _moe_weights(who: str, A: torch.Tensor, B: torch.Tensor) -> None:
    check_activation(who, A)
    if A.dim() != 2:
        raise ValueError(f"{who}: A must be a 2-D tensor [M, K] (rows of all experts), got shape {tuple(A.shape)}")
    check_weight(who, B, 3, "[E, N, K]")
    if A.shape[1] != B.shape[2]:
        raise ValueError(f"{who}: A must have shape [M, K] with K = B.shape[2] = {B.shape[2]}, got {tuple(A.shape)}")


def _quantized_grouped(A, B, Bs, ends, row_group, output_dtype):
    out = torch.empty(A.shape[0], B.shape[1], dtype=output_dtype, device=A.device)
    a, a_scale = quantize_rows(A, B.dtype)
    ops.grouped_gemm(out, a, B, a_scale, Bs, ends, row_group)
    return out


def matmul_grouped(
    A: torch.Tensor,
    B: torch.Tensor,
    Bs: torch.Tensor,
    offsets: Optional[torch.Tensor],
    tokens_per_expert: Optional[torch.Tensor],
    block_size: Optional[Sequence[int]],
    output_dtype: Optional[torch.dtype] = None,
) -> torch.Tensor:
    """Experts over rows sorted by expert: rows [offsets[e-1], offsets[e]) use B[e] (finegrained-fp8's
    `matmul_grouped`, transformers' `grouped_mm` experts path).

    A [M, K] bf16/fp16/fp32, quantized per 1 x 128 group on the way in; B [E, N, K] FP8; Bs
    [E, ceil(N/128), ceil(K/128)] float32 or UE8M0 (or E elements with block_size None); offsets int32
    [E] inclusive cumsum, or None and tokens_per_expert [E] (int32, int64 or float32) instead.
    Returns a fresh [M, N] tensor in output_dtype (None: A.dtype); rows >= offsets[-1] are not written.
    """
    who = "matmul_grouped"
    _moe_weights(who, A, B)
    check_devices(who, "A", A, B=B, Bs=Bs, offsets=offsets, tokens_per_expert=tokens_per_expert)
    Bs = weight_scale(who, Bs, block_size, B)
    out_dtype = A.dtype if output_dtype is None else output_dtype
    check_out_dtype(who, "output_dtype", out_dtype)
    ends = group_ends(who, B.shape[0], offsets, tokens_per_expert)
    return _quantized_grouped(A, B, Bs, ends, None, out_dtype)


def matmul_batched(
    A: torch.Tensor,
    B: torch.Tensor,
    Bs: torch.Tensor,
    expert_ids: torch.Tensor,
    block_size: Optional[Sequence[int]],
    output_dtype: Optional[torch.dtype] = None,
) -> torch.Tensor:
    """One expert per row: row m uses B[expert_ids[m]] (finegrained-fp8's `matmul_batched`,
    transformers' `batched_mm` experts path).

    A [M, K] bf16/fp16/fp32; B, Bs and block_size as for matmul_grouped; expert_ids [M] int64 or int32.
    Ids >= E (expert-parallel sentinels) and negative ids leave their output rows unwritten.
    Returns a fresh [M, N] tensor in output_dtype (None: A.dtype).
    """
    who = "matmul_batched"
    _moe_weights(who, A, B)
    check_devices(who, "A", A, B=B, Bs=Bs, expert_ids=expert_ids)
    Bs = weight_scale(who, Bs, block_size, B)
    out_dtype = A.dtype if output_dtype is None else output_dtype
    check_out_dtype(who, "output_dtype", out_dtype)
    row_group = row_group_from_ids(who, expert_ids, A.shape[0])
    return _quantized_grouped(A, B, Bs, None, row_group, out_dtype)


def grouped_gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    a_scale: torch.Tensor,
    b_scale: torch.Tensor,
    offsets: Optional[torch.Tensor] = None,
    expert_ids: Optional[torch.Tensor] = None,
    masked_m: Optional[torch.Tensor] = None,
    out: Optional[torch.Tensor] = None,
    out_dtype: Optional[torch.dtype] = None,
    expected_m: Optional[int] = None,
) -> torch.Tensor:
    """Grouped `(a * a_scale) @ (b[e] * b_scale[e]).T` on FP8 inputs, routed by exactly one of:

    offsets    int32 [E], inclusive cumsum (contiguous layout): a [M, K], a_scale [M, ceil(K/128)],
               out [M, N]; rows >= offsets[-1] are not written;
    expert_ids int64/int32 [M], one expert per row: same shapes; rows with ids outside [0, E) are not written;
    masked_m   int32/int64 [E], valid rows per expert (DeepGEMM's masked layout): a [E, max_m, K],
               a_scale [E, max_m, ceil(K/128)], out [E, max_m, N]; rows >= masked_m[e] are not written
               (counts outside [0, max_m] are clamped into it).
    b [E, N, K] FP8; b_scale [E, ceil(N/128), ceil(K/128)]; scales float32 or float8_e8m0fnu (uint8 is
    viewed as UE8M0). out_dtype bf16 (default), fp16 or fp32. Returns `out` (fresh when not given:
    unwritten rows then hold whatever the allocator left there).
    expected_m: the rows an expert typically holds (DeepGEMM's `expected_m`, e.g. tokens x top-k / E), a
    hint for the tile choice that never changes the result; default rows / E, which for the masked
    layout is max_m, the right guess for prefill but not for decode batches of a few rows per expert.
    """
    who = "grouped_gemm"
    given = [name for name, t in (("offsets", offsets), ("expert_ids", expert_ids), ("masked_m", masked_m)) if t is not None]
    if len(given) != 1:
        raise ValueError(f"{who}: exactly one of offsets, expert_ids, masked_m must be given, got {given or 'none'}")
    for name, t in (("b", b), ("a_scale", a_scale), ("b_scale", b_scale)):
        require_tensor(who, name, t)
    check_devices(who, "a", a, b=b, a_scale=a_scale, b_scale=b_scale, offsets=offsets, expert_ids=expert_ids,
                  masked_m=masked_m, out=out)  # fmt: skip
    if b.dim() != 3:
        raise ValueError(f"{who}: b must be a 3-D tensor [E, N, K], got shape {tuple(b.shape)}")
    a_scale = as_scale_format(who, "a_scale", a_scale)
    b_scale = as_scale_format(who, "b_scale", b_scale)
    num_experts, n = b.shape[0], b.shape[1]
    rows_dims = 2 if masked_m is not None else 1
    rows = "E, max_m" if masked_m is not None else "M"
    if a.dim() != rows_dims + 1 or a_scale.dim() != rows_dims + 1 or a_scale.shape[:-1] != a.shape[:-1]:
        raise ValueError(
            f"{who}: a must be [{rows}, K] and a_scale [{rows}, ceil(K/128)] with the same leading dims, got "
            f"a {tuple(a.shape)} and a_scale {tuple(a_scale.shape)}"
        )
    if out_dtype is not None:
        check_out_dtype(who, "out_dtype", out_dtype)
    if expected_m is not None:
        if isinstance(expected_m, bool) or not isinstance(expected_m, (numbers.Integral, torch.SymInt)):
            raise TypeError(f"{who}: expected_m must be an int, got {type(expected_m).__name__}")
        if expected_m < 1:
            raise ValueError(f"{who}: expected_m must be >= 1, got {expected_m}")
    result_shape = (*a.shape[:-1], n)
    if out is None:
        out = torch.empty(result_shape, dtype=out_dtype or torch.bfloat16, device=a.device)
    else:
        if out_dtype is not None and out_dtype != out.dtype:
            raise TypeError(f"{who}: out_dtype is {out_dtype} but out has dtype {out.dtype}")
        if tuple(out.shape) != result_shape:
            raise ValueError(f"{who}: out must have shape {result_shape}, got {tuple(out.shape)}")

    ends = row_group = group_rows = None
    if offsets is not None:
        ends = group_ends(who, num_experts, offsets, None)
    elif expert_ids is not None:
        row_group = row_group_from_ids(who, expert_ids, a.shape[0])
    else:
        if a.shape[0] != num_experts:
            raise ValueError(f"{who}: a must have shape [E, max_m, K] with E = b.shape[0] = {num_experts}, got {tuple(a.shape)}")
        _check_routing(who, "masked_m", masked_m, num_experts, "E")
        group_rows = masked_m.to(torch.int32)
    out_2d = out if out.dim() == 2 else merge_leading_dims(who, out)
    ops.grouped_gemm(out_2d, a.reshape(-1, a.shape[-1]), b, a_scale.reshape(-1, a_scale.shape[-1]), b_scale,
                     ends, row_group, group_rows, expected_m or 0)  # fmt: skip
    return out


@torch.library.register_fake(add_op_namespace_prefix("grouped_gemm"))
def _grouped_gemm_fake(out, a, b, a_scale, b_scale, group_ends, row_group, group_rows=None, expected_rows=0) -> None:
    # The op only writes into `out`, whose metadata the caller fixed.
    check_devices("grouped_gemm", "a", a, b=b, a_scale=a_scale, b_scale=b_scale, group_ends=group_ends,
                  row_group=row_group, group_rows=group_rows, out=out)  # fmt: skip
