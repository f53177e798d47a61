"""Shared test helpers: FP8 block-scaled inputs, an independent reference and the accuracy rule.

Import from tests as `from _helpers import make_inputs, reference_gemm, assert_close_gemm`
(pytest.ini puts tests/ on sys.path). The reference is written here, independently of the
package's own Python reference, so a bug shared by both cannot hide.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parent.parent
REPO_ID = "kernels-community/gemm"
KERNEL_VERSION = 1
BUILD_HINT = "run `python3 scripts/build.py` first (or `make test`, which builds)"

# The DeepSeek-V3 recipe: one scale per 128 K (A rows and B) and per 128 N (B).
SCALE_BLOCK_K = 128
SCALE_BLOCK_N = 128

FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e4m3fnuz)

# Scale magnitudes keep |C| well inside fp16's range and far from zero for K up to 16384 with
# FP8 values spread over the whole format (|C| ~ sqrt(K) * max^2 / 3 * scale^2).
SCALE_MIN, SCALE_MAX = 0.5e-2, 1.5e-2

# Layouts make_inputs can produce: where the data sits in memory, never a different shape.
LAYOUTS = (
    "contiguous",  # A [M,K], B [N,K], As [M,Kb], Bs [Nb,Kb], all row-major
    "a_m_major",  # A is the transpose of a contiguous [K,M] tensor (a_stride_m == 1)
    "as_m_major",  # As is the transpose of a contiguous [Kb,M] tensor (DeepGEMM's layout)
    "b_padded",  # B is a [N,K] view of a [N,K+pad] buffer (padded weights; rows stay 16-B aligned)
)
B_ROW_PAD = 16  # elements (= bytes for FP8): keeps the padded row stride a multiple of 16 bytes

# Accuracy rule (user-needs.md): elementwise |out - ref| <= atol + rtol * |ref| with atol scaled to
# the bf16 ULP at max|ref| (so a change of split-K or accumulation order cannot flake the test);
# plus vLLM's mean relative error and DeepGEMM's calc_diff against the reference.
ATOL_BF16_ULPS = 2
VLLM_MAX_MEAN_REL_ERROR = 1e-3
DEEPGEMM_MAX_CALC_DIFF = 1e-3
# Below this max|ref| a test could pass on an all-zero output: the inputs are badly chosen.
MIN_REF_ABS_MAX = 1.0


def local_kernels_entries() -> dict[str, str]:
    """LOCAL_KERNELS ("repo_id=path:repo_id=path") as a dict, as `kernels` parses it."""
    value = os.environ.get("LOCAL_KERNELS", "")
    return dict(entry.split("=", 1) for entry in value.split(":") if "=" in entry)


def kernel_root() -> Path:
    """Where the build under test lives: LOCAL_KERNELS's path for gemm when it names one (kernel-builder's
    ci-test points it at its own output, whose variant sits directly inside), else this repository
    (variants in build/)."""
    return Path(local_kernels_entries().get(REPO_ID, REPO_ROOT))


def find_variant_dir() -> Path:
    """<root>/<variant>/ or <root>/build/<variant>/ that `kernels` loads on this system, root being
    kernel_root(); FileNotFoundError when there is none."""
    # kernels >= 0.19 keeps its resolver in _internals (it was kernels.resolver up to 0.17).
    from kernels._internals.resolver import resolve_local_kernel  # after conftest has set LOCAL_KERNELS

    return resolve_local_kernel(kernel_root(), backend=None).variant_path


def local_variant_dir() -> Path:
    """find_variant_dir(), failing the calling test with the build hint when there is no build."""
    import pytest

    try:
        return find_variant_dir()
    except FileNotFoundError as e:
        pytest.fail(f"no build of gemm for this system in {kernel_root()}: {BUILD_HINT}\n{e}", pytrace=False)


def variant_devices(variant_dir: Path) -> list[str]:
    """Devices a variant runs on: "cpu" for the CPU build, "cuda" (also ROCm) when a GPU is present."""
    backend = json.loads((variant_dir / "metadata.json").read_text())["backend"]["type"]
    if backend == "cpu":
        return ["cpu"]
    return ["cuda"] if torch.cuda.is_available() else []


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def fp8_dtypes_for(device: str | torch.device) -> tuple[torch.dtype, ...]:
    """FP8 formats a backend takes natively: e4m3fn on CUDA, e4m3fnuz on ROCm, both on CPU."""
    if torch.device(device).type == "cpu":
        return FP8_DTYPES
    return (torch.float8_e4m3fnuz,) if torch.version.hip is not None else (torch.float8_e4m3fn,)


def _random_fp8(shape: tuple[int, int], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    fp8_max = torch.finfo(dtype).max
    values = (torch.rand(shape, generator=gen, dtype=torch.float32) * 2 - 1) * fp8_max
    return values.to(dtype)


def _random_scales(shape: tuple[int, int], gen: torch.Generator) -> torch.Tensor:
    """Distinct magnitudes in [SCALE_MIN, SCALE_MAX) with random signs (about half negative)."""
    magnitude = SCALE_MIN + (SCALE_MAX - SCALE_MIN) * torch.rand(shape, generator=gen)
    sign = torch.where(torch.rand(shape, generator=gen) < 0.5, -1.0, 1.0)
    return magnitude * sign


def make_inputs(
    m: int,
    n: int,
    k: int,
    device: str | torch.device = "cpu",
    fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    layout: str = "contiguous",
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random (a [m,k], b [n,k], a_scale [m,ceil(k/128)], b_scale [ceil(n/128),ceil(k/128)]).

    FP8 values cover the whole format; every scale block gets its own random value, negative ones
    included, so a kernel that reads the wrong scale block or drops a sign fails. Data is drawn on
    the CPU from `seed`, so every device sees the same numbers.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if fp8_dtype not in FP8_DTYPES:
        raise ValueError(f"fp8_dtype must be one of {FP8_DTYPES}, got {fp8_dtype}")
    gen = torch.Generator().manual_seed(seed)
    k_blocks, n_blocks = ceil_div(k, SCALE_BLOCK_K), ceil_div(n, SCALE_BLOCK_N)

    if layout == "a_m_major":
        a = _random_fp8((k, m), fp8_dtype, gen).to(device).t()
    else:
        a = _random_fp8((m, k), fp8_dtype, gen).to(device)
    if layout == "b_padded":
        b = _random_fp8((n, k + B_ROW_PAD), fp8_dtype, gen).to(device)[:, :k]
    else:
        b = _random_fp8((n, k), fp8_dtype, gen).to(device)
    if layout == "as_m_major":
        a_scale = _random_scales((k_blocks, m), gen).to(device).t()
    else:
        a_scale = _random_scales((m, k_blocks), gen).to(device)
    b_scale = _random_scales((n_blocks, k_blocks), gen).to(device)
    return a, b, a_scale, b_scale


def reference_gemm(
    a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor
) -> torch.Tensor:
    """Exact C = (A * As) @ (B * Bs)^T in float64 (returned as float64), any layout, any device.

    Promoting each 128-K partial sum by As * Bs is the same sum, so the float64 dequantized
    product is the value the kernel's fp32 accumulation approximates.
    """
    m, k = a.shape
    n = b.shape[0]
    a_deq = a.to(torch.float64) * a_scale.to(torch.float64).repeat_interleave(SCALE_BLOCK_K, 1)[:, :k]
    b_blocks = b_scale.to(torch.float64).repeat_interleave(SCALE_BLOCK_N, 0)[:n]
    b_deq = b.to(torch.float64) * b_blocks.repeat_interleave(SCALE_BLOCK_K, 1)[:, :k]
    return a_deq @ b_deq.t()


def bf16_ulp(x: float) -> float:
    """Spacing of bfloat16 numbers at magnitude x (x > 0)."""
    return 2.0 ** math.floor(math.log2(x)) * torch.finfo(torch.bfloat16).eps


def assert_close_gemm(out: torch.Tensor, ref: torch.Tensor, min_ref_abs_max: float = MIN_REF_ABS_MAX) -> None:
    """Checks a GEMM output against the exact reference (reference_gemm) by the accuracy rule.

    - elementwise: |out - ref| <= ATOL_BF16_ULPS * bf16_ulp(max|ref|) + eps(out.dtype) * |ref|
      (one output ULP of relative error for rounding), NaN only where ref is NaN;
    - vLLM: mean|out - ref_rounded| / mean|ref_rounded| < 1e-3, ref_rounded = ref in out.dtype
      (comparing with the unrounded ref would charge bf16's own rounding, about 1.4e-3);
    - DeepGEMM: calc_diff = 1 - 2<x,y> / (|x|^2 + |y|^2) < 1e-3.
    Refuses a near-zero reference, on which any output close to zero would pass.
    """
    assert out.shape == ref.shape, f"output shape {tuple(out.shape)} != reference shape {tuple(ref.shape)}"
    ref = ref.to(torch.float64).cpu()
    got = out.to(torch.float64).cpu()
    finite = torch.isfinite(ref)
    ref_abs_max = ref[finite].abs().max().item() if finite.any() else 0.0
    assert ref_abs_max >= min_ref_abs_max, (
        f"max|ref| = {ref_abs_max:.3g} < {min_ref_abs_max}: the test cannot fail on a near-zero output"
    )
    out_max = torch.finfo(out.dtype).max
    assert ref_abs_max <= out_max, f"max|ref| = {ref_abs_max:.3g} overflows {out.dtype} (max {out_max})"

    atol = ATOL_BF16_ULPS * bf16_ulp(ref_abs_max)
    rtol = torch.finfo(out.dtype).eps
    torch.testing.assert_close(got, ref, atol=atol, rtol=rtol, equal_nan=True)

    got_f, ref_rounded = got[finite], ref[finite].to(out.dtype).to(torch.float64)
    mean_rel = ((got_f - ref_rounded).abs().mean() / ref_rounded.abs().mean()).item()
    assert mean_rel < VLLM_MAX_MEAN_REL_ERROR, f"vLLM mean relative error {mean_rel:.3g} >= {VLLM_MAX_MEAN_REL_ERROR}"
    ref_f = ref[finite]
    calc_diff = 1 - 2 * (got_f * ref_f).sum().item() / ((got_f * got_f).sum() + (ref_f * ref_f).sum()).item()
    assert calc_diff < DEEPGEMM_MAX_CALC_DIFF, f"calc_diff {calc_diff:.3g} >= {DEEPGEMM_MAX_CALC_DIFF}"


UE8M0 = torch.float8_e8m0fnu
UE8M0_MIN = 2.0**-127  # byte 0: the smallest scale UE8M0 holds (an fp32 subnormal)
SCALE_OUT_DTYPES = (torch.float32, UE8M0, torch.uint8)  # fp32 values, UE8M0, or UE8M0's raw bytes


def pow2_ceil(s: torch.Tensor) -> torch.Tensor:
    """The least power of two >= s for positive fp32 s (subnormals included), built from the exponent bits
    so that no floating-point log or pow can round it; inf and NaN stay as they are."""
    mantissa, exponent = torch.frexp(s)  # s = mantissa * 2^exponent, mantissa in [0.5, 1)
    e = torch.where(mantissa == 0.5, exponent - 1, exponent).to(torch.int64)  # 2^e >= s, 2^(e-1) < s
    normal = (e + 127).clamp(0, 255) << 23
    subnormal = torch.ones_like(e) << (e + 149).clamp(0, 22)
    value = torch.where(e >= -126, normal, subnormal).to(torch.int32).view(torch.float32)
    return torch.where(torch.isfinite(s), value, s)


def ue8m0_bytes(s: torch.Tensor) -> torch.Tensor:
    """UE8M0's byte of fp32 powers of two >= 2^-127: the biased exponent (2^-127 = 0x00400000 gives 0),
    0xFF (NaN) for inf and NaN, whose exponent field is all ones."""
    return ((s.view(torch.int32) >> 23) & 0xFF).to(torch.uint8)


def fp8_bits(q: torch.Tensor) -> torch.Tensor:
    """q's bytes, to compare quantizers bit for bit, with e4m3fn's two NaN codes (0x7F, 0xFF) as one: the sign
    of the NaN that inf / inf gives is the hardware's (x86 sets it, GPUs do not), not the contract's."""
    bits = q.view(torch.uint8).cpu()
    return torch.where(bits == 0xFF, 0x7F, bits).to(torch.uint8) if q.dtype == torch.float8_e4m3fn else bits


def reference_quantize_activation(
    x: torch.Tensor,
    fp8_dtype: torch.dtype,
    pow2_scale: bool = False,
    static_scale: float | torch.Tensor | None = None,
    scale_dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] -> (q [M, K] fp8_dtype, scale [M, ceil(K/128)]): the one oracle every quantizer (CPU op,
    CUDA and ROCm kernels, the package's torch path) must match bit for bit, the contract of
    gemm_contract.h's QuantizeArgs. Per 1 x 128 group along K (x narrowed to fp32 first):
      s = amax / fp8 max, divided in fp32; 1 where that is not > 0 (an all-zero group, a NaN amax);
      a static scale replaces s for every group;
      rounded up to a power of two exactly (pow2_ceil) when pow2_scale or UE8M0 scales, static ones too;
      UE8M0: at least 2^-127;
      q = round-to-nearest-even(saturate(x / s)), then s stored (UE8M0: inf, which it cannot hold, as NaN).
    scale_dtype: torch.float32 (the values), torch.float8_e8m0fnu or torch.uint8 (UE8M0's bytes).
    Computed on the CPU, where torch divides as the contract does (CUDA multiplies by a reciprocal when
    dividing by a scalar); returned on x's device. Written independently of the package."""
    if scale_dtype not in SCALE_OUT_DTYPES:
        raise ValueError(f"scale_dtype must be one of {SCALE_OUT_DTYPES}, got {scale_dtype}")
    ue8m0 = scale_dtype != torch.float32
    m, k = x.shape
    k_blocks = ceil_div(k, SCALE_BLOCK_K)
    fp8_max = torch.finfo(fp8_dtype).max
    groups = torch.nn.functional.pad(x.cpu().float(), (0, k_blocks * SCALE_BLOCK_K - k)).view(m, k_blocks, SCALE_BLOCK_K)
    if static_scale is None:
        s = groups.abs().amax(dim=-1) / torch.full((m, k_blocks), fp8_max)
        s = torch.where(s > 0, s, torch.ones_like(s))
    else:
        s = torch.full((m, k_blocks), float(static_scale), dtype=torch.float32)
    if pow2_scale or ue8m0:
        s = pow2_ceil(s)
    if ue8m0:
        s = s.clamp(min=UE8M0_MIN)
    q = (groups / s.unsqueeze(-1)).clamp(-fp8_max, fp8_max).to(fp8_dtype).view(m, k_blocks * SCALE_BLOCK_K)[:, :k].contiguous()
    if ue8m0:
        s = ue8m0_bytes(s) if scale_dtype == torch.uint8 else ue8m0_bytes(s).view(UE8M0)
    return q.to(x.device), s.to(x.device)


def make_moe_weights(
    num_experts: int,
    n: int,
    k: int,
    device: str | torch.device = "cpu",
    fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    pow2_scales: bool = False,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random experts' weights (B [E, n, k] FP8 over the whole format, Bs [E, ceil(n/128), ceil(k/128)]
    float32), a distinct scale per block and per expert (signed; positive powers of two when pow2_scales,
    the values UE8M0 can hold)."""
    gen = torch.Generator().manual_seed(seed)
    b = torch.stack([_random_fp8((n, k), fp8_dtype, gen) for _ in range(num_experts)])
    grid = (num_experts, ceil_div(n, SCALE_BLOCK_N), ceil_div(k, SCALE_BLOCK_K))
    if pow2_scales:
        b_scale = torch.exp2(torch.randint(-9, -5, grid, generator=gen).float())
    else:
        b_scale = _random_scales(grid, gen)
    return b.to(device), b_scale.to(device)


def reference_grouped(
    a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor, row_expert: list[int]
) -> torch.Tensor:
    """float64 [M, N]: row m of the exact product with expert row_expert[m]'s weights (NaN for rows
    whose id is outside [0, E), which no kernel may write)."""
    m, n = a.shape[0], b.shape[1]
    out = torch.full((m, n), float("nan"), dtype=torch.float64)
    for e in sorted(set(row_expert)):
        if not 0 <= e < b.shape[0]:
            continue
        rows = torch.tensor([r for r in range(m) if row_expert[r] == e])
        out[rows] = reference_gemm(a[rows].cpu(), b[e].cpu(), a_scale[rows].float().cpu(), b_scale[e].float().cpu())
    return out
