"""Reads cdna3_mfma_fp8_lanes.inc (AMD's calculator data, the file the emulator's MFMAs include) for Python."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

INC = Path(__file__).resolve().parent / "cdna3_mfma_fp8_lanes.inc"
WAVE = 64
OPERAND_SLOTS = 8  # fp8 bytes in one MFMA operand (two VGPRs)
PREFIXES = {"v_mfma_f32_32x32x16_fp8_fp8": "CDNA3_MFMA_32X32X16_FP8",
            "v_mfma_f32_16x16x32_fp8_fp8": "CDNA3_MFMA_16X16X32_FP8"}


def defines(path: Path = INC) -> dict[str, list[int]]:
    text = re.sub(r"//[^\n]*", "", path.read_text()).replace("\\\n", " ")
    return {m.group(1): [int(v) for v in m.group(2).replace(",", " ").split()]
            for m in re.finditer(r"^#define (\w+) ([^\n]*)$", text, re.M)}


def instruction(name: str) -> dict:
    """M, N, K, cycles, valu_coexec_cycles, and A/B/D as arrays [lane, slot] -> (row, col)."""
    d, p = defines(), PREFIXES[name]
    m, n, k = d[p + "_M"][0], d[p + "_N"][0], d[p + "_K"][0]
    accum = m * n // WAVE
    return {
        "M": m, "N": n, "K": k, "cycles": d[p + "_CYCLES"][0], "valu_coexec_cycles": d[p + "_VALU_COEXEC_CYCLES"][0],
        "A": np.array(d[p + "_A"]).reshape(WAVE, OPERAND_SLOTS, 2),
        "B": np.array(d[p + "_B"]).reshape(WAVE, OPERAND_SLOTS, 2),
        "D": np.array(d[p + "_D"]).reshape(WAVE, accum, 2),
    }
