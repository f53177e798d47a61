"""A grouped block-scaled FP8 GEMM in Triton, of finegrained-fp8's matmul_grouped design (written here):
rows sorted by expert, BLOCK_M = clamp(next_pow2(ceil(rows / experts)), 16, 128), tile counts per expert
cumulated in torch inside the call, a grid of (cdiv(rows, BLOCK_M) + experts) x cdiv(N, BLOCK_N) programs,
each finding its expert by binary search over the cumulative tile counts; the K loop is the dense
design's (one tl.dot per 128-wide scale block, promoted to fp32 with both scales)."""
import torch
import triton
import triton.language as tl

from .problem import SCALE_BLOCK_K, SCALE_BLOCK_N

BLOCK_K = SCALE_BLOCK_K
BLOCK_N = SCALE_BLOCK_N  # the weight's scale block, as finegrained-fp8 fixes it
MIN_BLOCK_M, MAX_BLOCK_M = 16, 128
# What is tuned per shape: warps and pipeline depth (the tile sizes are the design's).
CONFIGS = [dict(num_warps=4, num_stages=3), dict(num_warps=4, num_stages=4), dict(num_warps=8, num_stages=3)]


@triton.jit
def _grouped_gemm_kernel(
    a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr, offsets_ptr, tile_offsets_ptr, N, K, E,
    stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
    stride_asm, stride_ask, stride_bse, stride_bsn, stride_bsk,
    SEARCH_STEPS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    tile = tl.program_id(0)
    pid_n = tl.program_id(1)
    if tile >= tl.load(tile_offsets_ptr + E - 1):
        return
    # Lower bound: the first expert whose cumulative tile count exceeds this tile.
    lo = tl.zeros((), dtype=tl.int32)
    hi = tl.zeros((), dtype=tl.int32) + E
    for _ in tl.static_range(SEARCH_STEPS):
        active = lo < hi
        mid = (lo + hi) // 2
        right = tl.load(tile_offsets_ptr + mid, mask=active, other=0) <= tile
        lo = tl.where(active & right, mid + 1, lo)
        hi = tl.where(active & (right == 0), mid, hi)
    expert = lo
    first_tile = tl.load(tile_offsets_ptr + expert - 1, mask=expert > 0, other=0)
    row_begin = tl.load(offsets_ptr + expert - 1, mask=expert > 0, other=0)
    row_end = tl.load(offsets_ptr + expert)

    offs_m = (row_begin + (tile - first_tile) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < row_end
    mask_n = offs_n < N
    expert64 = expert.to(tl.int64)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + expert64 * stride_be + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    as_ptrs = as_ptr + offs_m * stride_asm
    bs_ptrs = bs_ptr + expert64 * stride_bse + (offs_n // BLOCK_N) * stride_bsn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kb = k0 // BLOCK_K
        k_left = K - k0
        a = tl.load(a_ptrs, mask=mask_m[:, None] & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & mask_n[None, :], other=0.0)
        a_s = tl.load(as_ptrs + kb * stride_ask, mask=mask_m, other=0.0)
        b_s = tl.load(bs_ptrs + kb * stride_bsk, mask=mask_n, other=0.0)
        acc += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])


def block_m_for(rows: int, experts: int) -> int:
    return min(MAX_BLOCK_M, max(MIN_BLOCK_M, triton.next_power_of_2(triton.cdiv(rows, experts))))


def grouped_gemm(a, b, a_scale, b_scale, offsets, tokens_per_expert, config, out_dtype=torch.bfloat16):
    """out[rows of expert e] = (A * As)[those rows] @ (B[e] * Bs[e])^T. a [M, K] sorted by expert, b [E, N, K],
    offsets int32 [E] inclusive cumulative row counts, tokens_per_expert [E] (only for the tile counts)."""
    m, k = a.shape
    e, n, _ = b.shape
    block_m = block_m_for(m, e)
    tile_offsets = torch.cumsum(torch.div(tokens_per_expert + block_m - 1, block_m, rounding_mode="floor"),
                                0).to(torch.int32)
    c = torch.empty(m, n, dtype=out_dtype, device=a.device)
    grid = (triton.cdiv(m, block_m) + e, triton.cdiv(n, BLOCK_N))
    _grouped_gemm_kernel[grid](
        a, b, c, a_scale, b_scale, offsets, tile_offsets, n, k, e,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), b.stride(2), c.stride(0), c.stride(1),
        a_scale.stride(0), a_scale.stride(1), b_scale.stride(0), b_scale.stride(1), b_scale.stride(2),
        SEARCH_STEPS=max(1, e.bit_length()), BLOCK_M=block_m, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, **config,
    )
    return c
