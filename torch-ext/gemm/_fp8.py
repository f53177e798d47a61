"""FP8 format facts and the e4m3fn -> e4m3fnuz conversion.

e4m3fn (OCP): exponent bias 7, max 448, 0x80 is -0, 0x7F/0xFF are NaN. e4m3fnuz (AMD gfx942): exponent
bias 8, max 240, 0x80 is the only NaN, no -0. A byte read as fnuz is therefore worth exactly half of the
same byte read as fn (subnormals included), which is what makes the conversion a reinterpretation.
"""

import torch

# One scale per 128 K elements (a and b) and per 128 N rows (b); mirrors gemm/gemm_contract.h.
SCALE_BLOCK_K = 128
SCALE_BLOCK_N = 128

FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e4m3fnuz)

# fnuz's exponent bias is one larger than fn's: the same byte means half as much.
FN_TO_FNUZ_SCALE = 2.0
FN_NEGATIVE_ZERO = 0x80  # fn -0, but the fnuz NaN: must become +0
FNUZ_NAN = 0x80
EXPONENT_MANTISSA_MASK = 0x7F  # fn NaN has every exponent and mantissa bit set (0x7F, 0xFF)


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def fp8_max(dtype: torch.dtype) -> float:
    """Largest finite value of an FP8 dtype (448 for e4m3fn, 240 for e4m3fnuz)."""
    if dtype not in FP8_DTYPES:
        raise TypeError(f"expected torch.float8_e4m3fn or torch.float8_e4m3fnuz, got {dtype}")
    return torch.finfo(dtype).max


def e4m3fn_to_e4m3fnuz(x: torch.Tensor, scale: torch.Tensor):
    """Re-encode e4m3fn data for gfx942 without changing what `x * scale` means.

    Returns `(x_fnuz, scale * 2)`: the bytes are reinterpreted as e4m3fnuz (worth half as much), the
    fn -0 byte 0x80 (the fnuz NaN) becomes +0, and fn NaN becomes the fnuz NaN. Shapes and strides of
    both tensors are preserved, so the results can be passed to `gemm` in place of the inputs.
    """
    if x.dtype != torch.float8_e4m3fn:
        raise TypeError(f"e4m3fn_to_e4m3fnuz: x must be torch.float8_e4m3fn, got {x.dtype}")
    if not scale.is_floating_point():
        raise TypeError(f"e4m3fn_to_e4m3fnuz: scale must be a floating-point tensor, got {scale.dtype}")
    bits = x.view(torch.uint8)
    is_nan = (bits & EXPONENT_MANTISSA_MASK) == EXPONENT_MANTISSA_MASK
    is_negative_zero = bits == FN_NEGATIVE_ZERO
    # In place on a layout-preserving clone: out-of-place masked_fill would make it contiguous.
    fnuz = bits.clone(memory_format=torch.preserve_format)
    fnuz.masked_fill_(is_negative_zero, 0).masked_fill_(is_nan, FNUZ_NAN)
    return fnuz.view(torch.float8_e4m3fnuz), scale * FN_TO_FNUZ_SCALE
