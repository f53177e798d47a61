"""gemm/cdna3_mfma_layout.h against AMD's Matrix Instruction Calculator data (tests/rocm/golden), entry by
entry; the inverse maps undo the forward maps, every (lane, slot) is used exactly once, and the emulated
FP8 MFMAs (built from the calculator data, never from the header) equal a plain matmul."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))
import golden_lanes  # noqa: E402
import import_calculator  # noqa: E402

pytestmark = [pytest.mark.rocm_emu, pytest.mark.kernels_ci]

WAVE = 64
SLOTS = 8  # fp8 bytes per MFMA operand
SHAPES = {32: (32, 32, 16), 16: (16, 16, 32)}  # shape id -> (M, N, K)
INSTRUCTIONS = {32: "v_mfma_f32_32x32x16_fp8_fp8", 16: "v_mfma_f32_16x16x32_fp8_fp8"}
# Where gen_cdna3_mfma_fp8_lanes.py left the calculator's JSON (the team's shared reference folder).
REFERENCE_JSON = Path("shared/reference/cdna3_mfma_fp8_lanes.json")
ERR_LEN = 1024


def ptr(array: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(array.ctypes.data)


def tables(lib, shape):
    m, n, k = SHAPES[shape]
    accum = m * n // WAVE
    t = {
        "fwd_a": np.zeros((m, k, 2), np.int32), "fwd_b": np.zeros((k, n, 2), np.int32),
        "fwd_d": np.zeros((m, n, 2), np.int32), "inv_a": np.zeros((WAVE, SLOTS, 2), np.int32),
        "inv_b": np.zeros((WAVE, SLOTS, 2), np.int32), "inv_d": np.zeros((WAVE, accum, 2), np.int32),
    }
    assert lib.emu_layout_tables(shape, *(ptr(v) for v in t.values())) == 0
    return t


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("matrix", ["A", "B", "D"])
def test_header_agrees_with_amd_calculator(probe_lib, shape, matrix):
    """Every (lane, slot) of the header's inverse map, and every element of its forward map, is the
    calculator's: a header wrong in a way that agrees with itself fails here."""
    golden = golden_lanes.instruction(INSTRUCTIONS[shape])
    assert (golden["M"], golden["N"], golden["K"]) == SHAPES[shape]
    t = tables(probe_lib, shape)
    truth = golden[matrix].tolist()  # [lane][slot] -> [row, col]
    inverse, forward = t["inv_" + matrix.lower()].tolist(), t["fwd_" + matrix.lower()].tolist()
    wrong = [(lane, s, inverse[lane][s], truth[lane][s])
             for lane in range(WAVE) for s in range(len(truth[0])) if inverse[lane][s] != truth[lane][s]]
    assert not wrong, f"{matrix.lower()}_of(lane, slot) = header's (row, col), AMD's; first of {len(wrong)}: {wrong[:4]}"
    wrong = [((r, c), forward[r][c], [lane, s])
             for lane in range(WAVE) for s in range(len(truth[0])) for r, c in [truth[lane][s]]
             if forward[r][c] != [lane, s]]
    assert not wrong, f"{matrix.lower()}(row, col) = header's (lane, slot), AMD's; first of {len(wrong)}: {wrong[:4]}"


def test_golden_data_is_the_calculator_output():
    """The committed .inc is what import_calculator.py makes of the reference JSON, where that is present."""
    repo = Path(__file__).resolve().parents[2]
    source = next((d / REFERENCE_JSON for d in repo.parents if (d / REFERENCE_JSON).is_file()), None)
    if source is None:
        pytest.skip(f"{REFERENCE_JSON} not found above {repo}: provenance is the .inc header only")
    assert import_calculator.convert(source) == golden_lanes.INC.read_text()


@pytest.mark.parametrize("shape", SHAPES)
def test_forward_maps_cover_every_lane_slot_once(probe_lib, shape):
    m, n, k = SHAPES[shape]
    accum = m * n // WAVE
    t = tables(probe_lib, shape)
    for name, slots in (("fwd_a", SLOTS), ("fwd_b", SLOTS), ("fwd_d", accum)):
        pos = t[name].reshape(-1, 2)
        assert pos[:, 0].min() >= 0 and pos[:, 0].max() < WAVE, name
        assert pos[:, 1].min() >= 0 and pos[:, 1].max() < slots, name
        hits = np.zeros((WAVE, slots), np.int64)
        np.add.at(hits, (pos[:, 0], pos[:, 1]), 1)
        assert (hits == 1).all(), f"{name}: (lane, slot) pairs hit {hits.min()}..{hits.max()} times"


@pytest.mark.parametrize("shape", SHAPES)
def test_inverse_maps_undo_forward_maps(probe_lib, shape):
    m, n, k = SHAPES[shape]
    t = tables(probe_lib, shape)
    for fwd, inv, rows, cols in (("fwd_a", "inv_a", m, k), ("fwd_b", "inv_b", k, n), ("fwd_d", "inv_d", m, n)):
        for r in range(rows):
            for c in range(cols):
                lane, slot = t[fwd][r, c]
                assert tuple(t[inv][lane, slot]) == (r, c), f"{inv}({lane},{slot}) != {(r, c)}"


def test_fnuz_decoder_matches_torch(probe_lib):
    out = np.zeros(256, np.float32)
    probe_lib.emu_decode_fnuz(ptr(out))
    expected = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fnuz).float().numpy()
    np.testing.assert_array_equal(np.isnan(out), np.isnan(expected))
    assert np.isnan(out[0x80]) and out[0x7F] == 240.0 and out[0x01] == 2.0**-10 and out[0x08] == 2.0**-7
    finite = ~np.isnan(expected)
    np.testing.assert_array_equal(out[finite], expected[finite])


def random_fnuz(rng, shape):
    data = rng.integers(0, 256, size=shape, dtype=np.uint8)
    data[data == 0x80] = 0x00  # keep NaN out of the operands
    return data


def decode(data):
    return torch.from_numpy(data).view(torch.float8_e4m3fnuz).double().numpy()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("use_inverse", [False, True], ids=["forward-staging", "inverse-staging"])
def test_emulated_mfma_equals_matmul(probe_lib, shape, use_inverse):
    m, n, k = SHAPES[shape]
    problems, waves_per_block = 4, 2  # two blocks of two wavefronts: wave slots must not mix
    rng = np.random.default_rng(shape * 10 + use_inverse)
    a = random_fnuz(rng, (problems, m, k))
    b = random_fnuz(rng, (problems, n, k))
    c = rng.standard_normal((problems, m, n)).astype(np.float32) * 1000
    d = np.full((problems, m, n), np.nan, np.float32)
    err = ctypes.create_string_buffer(ERR_LEN)
    rc = probe_lib.emu_mfma_probe(shape, int(use_inverse), problems, waves_per_block, ptr(a), ptr(b), ptr(c),
                                  ptr(d), err, ERR_LEN)
    assert rc == 0, err.value
    ref = c.astype(np.float64) + decode(a) @ decode(b).transpose(0, 2, 1)
    bound = np.abs(c) + np.abs(decode(a)) @ np.abs(decode(b)).transpose(0, 2, 1)
    assert np.abs(ref).mean() > 1.0  # a real signal, not near-zero outputs
    np.testing.assert_array_less(np.abs(d - ref), 1e-6 * bound + 1e-30)
