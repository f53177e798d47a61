"""UE8M0 scales on the CUDA launcher (sm_90a GPU), through the raw launcher (tests/cuda/cuda_shim.py).

A UE8M0 scale is one byte e worth 2^(e - 127). The kernel reads B's bytes as they are (the scale warp
decodes them) and the launcher decodes A's into its K-block-major fp32 copy, so a GEMM with UE8M0 scales
must equal, bit for bit, the same GEMM with the fp32 powers of two they encode: on every tile config,
whole tiles, stream-K and K splits, ragged N and K, row-major and transposed scale layouts.
"""

from __future__ import annotations

import pytest
import torch
from cuda_shim import load_tune

tune = load_tune()
FP8 = torch.float8_e4m3fn
BLOCK = 128
UE8M0_BIAS = 127
UE8M0_NAN = 0xFF
# Exponents of the random scales: products of an A and a B scale stay normal for bf16 outputs.
EXP_LO, EXP_HI = -6, 6


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def pow2_scales(rows: int, cols: int, gen: torch.Generator, lo: int = EXP_LO, hi: int = EXP_HI):
    """(UE8M0 bytes, the fp32 powers of two they encode) of a [rows, cols] scale array."""
    e = torch.randint(lo + UE8M0_BIAS, hi + UE8M0_BIAS + 1, (rows, cols), generator=gen, device="cuda")
    return e.to(torch.uint8), ue8m0_values(e.to(torch.uint8))


def ue8m0_values(e: torch.Tensor) -> torch.Tensor:
    """2^(e - 127) in fp32 for every byte (0: 2^-127, 0xFF: NaN), exactly."""
    e32 = e.to(torch.int32)
    bits = torch.where(e32 == 0, torch.full_like(e32, 0x00400000), e32 << 23)
    values = bits.view(torch.float32)
    return torch.where(e32 == UE8M0_NAN, torch.full_like(values, float("nan")), values)


def make(m: int, n: int, k: int, seed: int):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = (torch.randn(m, k, generator=gen, device="cuda") * 2).to(FP8)
    b = (torch.randn(n, k, generator=gen, device="cuda") * 2).to(FP8)
    a_e, a_f = pow2_scales(m, ceil_div(k, BLOCK), gen)
    b_e, b_f = pow2_scales(ceil_div(n, BLOCK), ceil_div(k, BLOCK), gen)
    return a, b, a_e, a_f, b_e, b_f


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int16 if t.element_size() == 2 else torch.int32)


def check_formats(shim, fails: list[str], name: str, m: int, n: int, k: int, seed: int = 0, **plan) -> None:
    """The three UE8M0 combinations against the fp32 run of the same plan; the fp32 run against the
    float reference (so that two equal wrong answers cannot pass)."""
    a, b, a_e, a_f, b_e, b_f = make(m, n, k, seed)
    want = shim.gemm(a, b, a_f, b_f, **plan)
    ok, rel = tune.close(want, tune.reference(a, b, a_f, b_f))
    if not ok:
        fails.append(f"{name} {m}x{n}x{k}: fp32 scales vs reference rel {rel:.2e}")
    for label, a_s, b_s in (("a UE8M0", a_e, b_f), ("b UE8M0", a_f, b_e), ("both UE8M0", a_e, b_e)):
        got = shim.gemm(a, b, a_s, b_s, **plan)
        if not torch.equal(bits(got), bits(want)):
            diff = int((bits(got) != bits(want)).sum())
            fails.append(f"{name} {m}x{n}x{k} {label}: {diff} elements differ from the fp32-scale run")


@pytest.mark.cuda
def test_ue8m0_bitwise_every_plan(shim):
    """Every tile config x {whole tiles, stream-K} and every K split, ragged M/N/K (tune.py --check shapes)."""
    fails: list[str] = []
    for cfg, (bm, bn, _) in enumerate(shim.configs):
        for sk in (False, True):
            for m, n, k in [(200, 300, 1040), (77, 520, 1000), (1, 8, 16), (bm * 3, bn * 45 - 24, 1152),
                            (bm * 3 + 5, bn * 5 - 24, 7056)]:
                check_formats(shim, fails, f"config {shim.configs[cfg]} stream_k {int(sk)}", m, n, k,
                              config=cfg, stream_k=sk)
        for split in (v for v in (2, 4) if v <= shim.max_k_split[cfg]):
            check_formats(shim, fails, f"config {shim.configs[cfg]} k_split {split}", 77, 520, 5000,
                          config=cfg, k_split=split)
    check_formats(shim, fails, "heuristic plan", 4096, 2112, 7168)
    assert not fails, "\n".join(fails)


@pytest.mark.cuda
@pytest.mark.parametrize("layout", ["row_major", "transposed", "padded", "e8m0fnu"])
def test_ue8m0_scale_layouts(shim, layout):
    """UE8M0 scales stored transposed (M- / N-major), with padded rows, or as torch.float8_e8m0fnu."""
    if layout == "e8m0fnu" and not hasattr(torch, "float8_e8m0fnu"):
        pytest.skip("torch has no float8_e8m0fnu")
    m, n, k = 520, 1000, 2000
    a, b, a_e, a_f, b_e, b_f = make(m, n, k, seed=1)

    def lay(e: torch.Tensor) -> torch.Tensor:
        if layout == "transposed":
            return e.t().contiguous().t()
        if layout == "padded":
            buf = torch.full((e.shape[0], e.shape[1] + 3), UE8M0_NAN, dtype=torch.uint8, device="cuda")
            buf[:, : e.shape[1]] = e
            return buf[:, : e.shape[1]]
        if layout == "e8m0fnu":
            return e.view(torch.float8_e8m0fnu)
        return e

    for cfg in range(len(shim.configs)):
        want = shim.gemm(a, b, a_f, b_f, config=cfg)
        got = shim.gemm(a, b, lay(a_e), lay(b_e), config=cfg)
        assert torch.equal(bits(got), bits(want)), f"config {shim.configs[cfg]}"


@pytest.mark.cuda
def test_ue8m0_extreme_bytes(shim):
    """Every byte the format has: 0 (2^-127, a subnormal fp32), 1..254, and 0xFF (NaN), decoded exactly."""
    m, n, k = 130, 640, 1024
    gen = torch.Generator(device="cuda").manual_seed(2)
    a = (torch.randn(m, k, generator=gen, device="cuda") * 2).to(FP8)
    b = (torch.randn(n, k, generator=gen, device="cuda") * 2).to(FP8)
    kb, nb = ceil_div(k, BLOCK), ceil_div(n, BLOCK)
    a_e = torch.randint(0, 255, (m, kb), generator=gen, device="cuda").to(torch.uint8)
    b_e = torch.randint(0, 255, (nb, kb), generator=gen, device="cuda").to(torch.uint8)
    a_e[0], b_e[0, 0] = 0, 0
    for cfg in range(len(shim.configs)):
        want = shim.gemm(a, b, ue8m0_values(a_e), ue8m0_values(b_e), out_dtype=torch.float32, config=cfg)
        got = shim.gemm(a, b, a_e, b_e, out_dtype=torch.float32, config=cfg)
        assert torch.equal(bits(got), bits(want)), f"config {shim.configs[cfg]}"
    # A NaN B scale makes its whole N block NaN and leaves the others alone.
    b_e = torch.full((nb, kb), UE8M0_BIAS, dtype=torch.uint8, device="cuda")
    b_e[1, 3] = UE8M0_NAN
    out = shim.gemm(a, b, torch.full((m, kb), UE8M0_BIAS, dtype=torch.uint8, device="cuda"), b_e)
    assert out[:, BLOCK : 2 * BLOCK].isnan().all()
    assert not out[:, :BLOCK].isnan().any() and not out[:, 2 * BLOCK :].isnan().any()


@pytest.mark.cuda
def test_refusals(shim):
    """A grouped call without its routing is refused with a message (not a crash or a wrong result)."""
    a, b, a_e, a_f, b_e, b_f = make(64, 128, 256, seed=3)
    with pytest.raises(RuntimeError, match=r"needs exactly one of group_ends, row_group and group_rows, got 0"):
        shim.gemm(a, b, a_f, b_f, num_groups=2)
