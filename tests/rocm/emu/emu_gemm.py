"""ctypes side of tests/rocm/emu/emu_entry.cpp: run the emulated ROCm GEMM on torch CPU tensors, plus an
fp64 reference and the operand/scale generators the emulation tests share."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import torch

BLOCK = 128  # kScaleBlockK == kScaleBlockN (gemm/gemm_contract.h)
FP8_FORMAT = {torch.float8_e4m3fn: 0, torch.float8_e4m3fnuz: 1}
OUT_FORMAT = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}
IN_FORMAT = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}  # gemm::InFormat, the quantizer's x
NAN_BYTE = {torch.float8_e4m3fn: 0x7F, torch.float8_e4m3fnuz: 0x80}
SCALE_FORMAT = {torch.float32: 0, torch.float8_e8m0fnu: 1}
ERR_LEN = 2048


class EmuGemmArgs(ctypes.Structure):
    _fields_ = [(name, t) for name, t in (
        ("m", ctypes.c_int64), ("n", ctypes.c_int64), ("k", ctypes.c_int64),
        ("a", ctypes.c_void_p), ("a_stride_m", ctypes.c_int64), ("a_stride_k", ctypes.c_int64),
        ("b", ctypes.c_void_p), ("b_stride_n", ctypes.c_int64), ("b_stride_k", ctypes.c_int64),
        ("a_scale", ctypes.c_void_p), ("a_scale_stride_m", ctypes.c_int64), ("a_scale_stride_k", ctypes.c_int64),
        ("b_scale", ctypes.c_void_p), ("b_scale_stride_n", ctypes.c_int64), ("b_scale_stride_k", ctypes.c_int64),
        ("c", ctypes.c_void_p), ("c_stride_m", ctypes.c_int64), ("c_stride_n", ctypes.c_int64),
        ("a_format", ctypes.c_int64), ("b_format", ctypes.c_int64), ("c_format", ctypes.c_int64),
        ("a_scale_format", ctypes.c_int64), ("b_scale_format", ctypes.c_int64),
        ("num_groups", ctypes.c_int64), ("b_stride_group", ctypes.c_int64), ("b_scale_stride_group", ctypes.c_int64),
        ("group_ends", ctypes.c_void_p), ("row_group", ctypes.c_void_p),
        ("group_rows", ctypes.c_void_p), ("group_row_stride", ctypes.c_int64),
    )]


class EmuQuantizeArgs(ctypes.Structure):
    _fields_ = [(name, t) for name, t in (
        ("m", ctypes.c_int64), ("k", ctypes.c_int64),
        ("x", ctypes.c_void_p), ("x_stride_m", ctypes.c_int64), ("x_format", ctypes.c_int64),
        ("q", ctypes.c_void_p), ("q_stride_m", ctypes.c_int64), ("q_format", ctypes.c_int64),
        ("scale", ctypes.c_void_p), ("scale_stride_m", ctypes.c_int64), ("scale_stride_k", ctypes.c_int64),
        ("scale_format", ctypes.c_int64), ("pow2_scale", ctypes.c_int64), ("static_scale", ctypes.c_void_p),
    )]


class EmuStats(ctypes.Structure):
    _fields_ = [("workspace_requests", ctypes.c_int64), ("workspace_bytes", ctypes.c_int64),
                ("launches", ctypes.c_int64)]


@dataclass
class Config:
    index: int
    tile: int
    split_k: int
    group_m: int
    block_m: int
    block_n: int
    threads: int
    mfma_m: int


def configs(lib) -> list[Config]:
    out = []
    for i in range(lib.emu_num_configs()):
        fields = (ctypes.c_int64 * 7)()
        assert lib.emu_config(i, fields) == 0
        out.append(Config(i, *fields))
    return out


def make_args(a, b, a_scale, b_scale, c, group_ends=None, row_group=None, group_rows=None,
              group_row_stride=None) -> EmuGemmArgs:
    """b and b_scale are [E, ...] (one more leading dimension) when group_ends, row_group or group_rows
    is given."""
    m, k = a.shape
    grouped = group_ends is not None or row_group is not None or group_rows is not None
    if group_rows is not None and group_row_stride is None:
        group_row_stride = m // b.shape[0]
    n = b.shape[-2]
    return EmuGemmArgs(
        m, n, k,
        a.data_ptr(), a.stride(0), a.stride(1),
        b.data_ptr(), b.stride(-2), b.stride(-1),
        a_scale.data_ptr(), a_scale.stride(0), a_scale.stride(1),
        b_scale.data_ptr(), b_scale.stride(-2), b_scale.stride(-1),
        c.data_ptr(), c.stride(0), c.stride(1),
        FP8_FORMAT[a.dtype], FP8_FORMAT[b.dtype], OUT_FORMAT[c.dtype],
        SCALE_FORMAT[a_scale.dtype], SCALE_FORMAT[b_scale.dtype],
        b.shape[0] if grouped else 0, b.stride(0) if grouped else 0, b_scale.stride(0) if grouped else 0,
        group_ends.data_ptr() if group_ends is not None else None,
        row_group.data_ptr() if row_group is not None else None,
        group_rows.data_ptr() if group_rows is not None else None, group_row_stride or 0)


GUARD_AFTER_END, GUARD_BEFORE_START = 0, 1


def set_guard_side(lib, side: int) -> None:
    """Which side of every tensor and workspace request the emulator guards tightly (entry default 0)."""
    lib.emu_set_guard_side(side)


def run(lib, a, b, a_scale, b_scale, c, config_index: int = -1, group_ends=None, row_group=None, group_rows=None,
        group_row_stride=None) -> tuple[str, EmuStats]:
    """Runs the emulated launcher into `c` (config_index < 0: the heuristic). Returns (error, stats).
    group_row_stride defaults to m / E when group_rows is given."""
    args = make_args(a, b, a_scale, b_scale, c, group_ends, row_group, group_rows, group_row_stride)
    stats = EmuStats()
    err = ctypes.create_string_buffer(ERR_LEN)
    rc = lib.emu_gemm(ctypes.byref(args), config_index, ctypes.byref(stats), err, ERR_LEN)
    message = err.value.decode()
    assert (rc == 0) == (message == ""), (rc, message)
    return message, stats


def run_config(lib, a, b, a_scale, b_scale, c, tile: int, split_k: int, group_m: int) -> tuple[str, EmuStats]:
    """launch_with_config with an arbitrary config (the tuned table's, say)."""
    args = make_args(a, b, a_scale, b_scale, c)
    stats = EmuStats()
    err = ctypes.create_string_buffer(ERR_LEN)
    rc = lib.emu_gemm_config(ctypes.byref(args), tile, split_k, group_m, ctypes.byref(stats), err, ERR_LEN)
    message = err.value.decode()
    assert (rc == 0) == (message == ""), (rc, message)
    return message, stats


def tuned(lib) -> list[tuple[int, int, int, int, int, int]]:
    """rocm_planner.h's pinned table: (m, n, k, tile, split_k, group_m) per entry."""
    rows = []
    for i in range(lib.emu_num_tuned()):
        fields = (ctypes.c_int64 * 6)()
        lib.emu_tuned(i, fields)
        rows.append(tuple(fields))
    return rows


def select(lib, a, b, a_scale, b_scale, c, cu_count: int = 304) -> tuple[int, int, int]:
    out = (ctypes.c_int64 * 3)()
    lib.emu_select_config(ctypes.byref(make_args(a, b, a_scale, b_scale, c)), cu_count, out)
    return tuple(out)


# ---- data ---------------------------------------------------------------------------------------
def fp8_operand(g: torch.Generator, rows: int, k: int, dtype, layout: str) -> torch.Tensor:
    """[rows, k] FP8 values of randn (so NaN never occurs), in the requested memory layout:
    'k_major' (strides (k, 1)), 'mn_major' (strides (1, rows): the AMD challenge layout),
    'mn_padded' (M/N-major with K columns of a 16-byte multiple >= rows + 16 apart),
    'padded' (K-major rows a 16-byte multiple >= k + 16 apart), 'strided' (every other byte along K: neither major).
    Bytes between the elements (padding, gaps) are NaN, so a kernel that reads them into a sum shows it."""
    values = torch.randn(rows, k, generator=g).to(dtype)

    def nan_storage(*shape):
        return torch.full(shape, NAN_BYTE[dtype], dtype=torch.uint8).view(dtype)

    if layout == "k_major":
        return values.contiguous()
    if layout == "mn_major":
        return values.t().contiguous().t()
    if layout == "mn_padded":
        return nan_storage(k, -(-rows // 16) * 16 + 16)[:, :rows].copy_(values.t()).t()
    if layout == "padded":
        return nan_storage(rows, -(-k // 16) * 16 + 16)[:, :k].copy_(values)
    if layout == "strided":
        return nan_storage(rows, 2 * k)[:, ::2].copy_(values)
    raise ValueError(layout)


def block_scales(g: torch.Generator, rows: int, cols: int, transposed: bool = False) -> torch.Tensor:
    """Distinct random per-block scales in +-[0.25, 1.25), about half negative; optionally stored
    column-major (strides (1, rows))."""
    magnitude = 0.25 + torch.rand(rows, cols, generator=g)
    sign = torch.where(torch.rand(rows, cols, generator=g) < 0.5, -1.0, 1.0)
    scales = (magnitude * sign).float()
    return scales.t().contiguous().t() if transposed else scales


def pow2_block_scales(g: torch.Generator, rows: int, cols: int, transposed: bool = False,
                      exponents: int = 20) -> torch.Tensor:
    """Random powers of two 2^[-exponents, exponents) per block (positive: UE8M0 has no sign), fp32."""
    scales = torch.exp2(torch.randint(-exponents, exponents, (rows, cols), generator=g).float())
    return scales.t().contiguous().t() if transposed else scales


def to_ue8m0(scales: torch.Tensor) -> torch.Tensor:
    """fp32 powers of two -> torch.float8_e8m0fnu with the same values and strides."""
    e = ((scales.view(torch.int32) >> 23) & 0xFF).to(torch.uint8)
    out = torch.empty_strided(scales.shape, scales.stride(), dtype=torch.uint8).copy_(e)
    return out.view(torch.float8_e8m0fnu)


def dequantize(x: torch.Tensor, scales: torch.Tensor, row_block: int) -> torch.Tensor:
    """fp64 values of x [rows, k] times their block scale (row block `row_block`, K block 128)."""
    rows, k = x.shape
    s = scales.double().repeat_interleave(row_block, 0)[:rows].repeat_interleave(BLOCK, 1)[:, :k]
    return x.double() * s


def reference(a, b, a_scale, b_scale) -> tuple[torch.Tensor, torch.Tensor]:
    """(C, bound): the exact fp64 product and sum |products|, the scale of fp32 accumulation error."""
    a_deq, b_deq = dequantize(a, a_scale, 1), dequantize(b, b_scale, BLOCK)
    return a_deq @ b_deq.t(), a_deq.abs() @ b_deq.abs().t()


# Output rounding (half an ulp, relative) per format, plus an fp32 accumulation allowance of the
# absolute-product sum; a kernel that drops a K block, a scale or a lane is orders of magnitude off.
ROUNDING = {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}
ACCUMULATION = 2e-6


def mismatches(c: torch.Tensor, ref: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
    """Boolean [m, n]: where c is outside rounding(format) * |ref| + ACCUMULATION * bound, plus half the
    format's subnormal spacing (an output below its smallest normal rounds on that absolute grid)."""
    subnormal_spacing = torch.finfo(c.dtype).tiny * torch.finfo(c.dtype).eps
    tolerance = ROUNDING[c.dtype] * ref.abs() + ACCUMULATION * bound + 0.5 * subnormal_spacing + 1e-30
    return ~((c.double() - ref).abs() <= tolerance)
