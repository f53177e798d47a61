"""The emulator's own runtime semantics: barriers, exited threads, deadlock reports, readfirstlane,
bounds-checked buffer loads, launch-configuration errors, device attributes."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

pytestmark = [pytest.mark.rocm_emu, pytest.mark.kernels_ci]

ERR_LEN = 1024


def ptr(array: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(array.ctypes.data)


def err_buf():
    return ctypes.create_string_buffer(ERR_LEN)


def rotate(lib, grid, block, values, rounds, dynamic_lds=0):
    out = np.full_like(values, -1)
    err = err_buf()
    grid3, block3 = np.array(grid, np.int32), np.array(block, np.int32)  # alive across the call
    rc = lib.emu_rotate_probe(ptr(grid3), ptr(block3), ptr(values), ptr(out), rounds, dynamic_lds, err, ERR_LEN)
    return rc, err.value.decode(), out


@pytest.mark.parametrize("grid,block", [((3, 1, 1), (256, 1, 1)), ((2, 2, 1), (8, 4, 2)), ((1, 1, 1), (96, 1, 1))])
def test_syncthreads_orders_shared_memory(probe_lib, grid, block):
    threads = block[0] * block[1] * block[2]
    blocks = grid[0] * grid[1] * grid[2]
    rng = np.random.default_rng(0)
    values = rng.integers(-(2**30), 2**30, size=blocks * threads, dtype=np.int32)
    rounds = 5
    rc, err, out = rotate(probe_lib, grid, block, values, rounds)
    assert rc == 0, err
    expected = np.roll(values.reshape(blocks, threads), -rounds, axis=1).reshape(-1)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("grid,block,lds,what", [
    ((1, 1, 1), (2048, 1, 1), 0, "block above 1024 threads"),
    ((0, 1, 1), (64, 1, 1), 0, "empty grid"),
    ((1, 1, 1), (64, 1, 1), 256, "dynamic LDS"),
])
def test_bad_launch_configuration_is_reported(probe_lib, grid, block, lds, what):
    values = np.zeros(4096, np.int32)
    rc, err, out = rotate(probe_lib, grid, block, values, 1, lds)
    assert rc == 1 and "hipErrorInvalidConfiguration" in err, what
    assert (out == -1).all(), "a refused launch must not run"


def test_exited_threads_leave_the_barrier(probe_lib):
    threads, live = 256, 100  # wave 1 partially and waves 2, 3 wholly exited
    values = np.arange(1, threads + 1, dtype=np.int32)
    out = np.full(threads, -1, np.int32)
    err = err_buf()
    assert probe_lib.emu_early_exit_probe(threads, live, ptr(values), ptr(out), err, ERR_LEN) == 0, err.value
    assert (out[:live] == values[:live].sum()).all()
    assert (out[live:] == -1).all()


def test_deadlock_is_reported_not_hung(probe_lib):
    probe_lib.emu_set_deadlock_timeout_ms(300)
    try:
        out = np.zeros(128, np.int32)
        err = err_buf()
        assert probe_lib.emu_deadlock_probe(128, ptr(out), err, ERR_LEN) == 1
        message = err.value.decode()
        assert "deadlock" in message and ("127 of 128" in message or "1 of 64" in message), message
    finally:
        probe_lib.emu_set_deadlock_timeout_ms(60000)
    # The runtime recovers: the next launch is clean.
    rc, err, _ = rotate(probe_lib, (1, 1, 1), (64, 1, 1), np.arange(64, dtype=np.int32), 1)
    assert rc == 0, err


def test_readfirstlane_returns_lane_zero_of_each_wave(probe_lib):
    threads = 192
    values = np.random.default_rng(1).integers(-1000, 1000, threads, dtype=np.int32)
    out = np.zeros(threads, np.int32)
    err = err_buf()
    assert probe_lib.emu_readfirstlane_probe(threads, ptr(values), ptr(out), err, ERR_LEN) == 0, err.value
    np.testing.assert_array_equal(out, np.repeat(values[::64], 64))


def buffer_load(lib, data, num_records, voffsets, soffset, nbytes):
    voff = np.array(voffsets, np.int32)
    out = np.full((len(voff), 16), 0xEE, np.uint8)
    err = err_buf()
    rc = lib.emu_buffer_probe(ptr(data), num_records, len(voff), ptr(voff), soffset, nbytes, ptr(out), err, ERR_LEN)
    return rc, err.value.decode(), out[:, :nbytes]


@pytest.mark.parametrize("nbytes", [16, 8, 4])
def test_buffer_load_bounds(probe_lib, nbytes):
    data = np.arange(1, 129, dtype=np.uint8)  # no zero byte: a zero can only come from the range check
    num_records = 64
    offsets = [0, 16, num_records - nbytes, num_records, num_records + 32, 1000]
    rc, err, out = buffer_load(probe_lib, data, num_records, offsets, 0, nbytes)
    assert rc == 0, err
    for row, off in zip(out, offsets):
        if off + nbytes <= num_records:
            np.testing.assert_array_equal(row, data[off:off + nbytes])
        else:
            assert (row == 0).all(), f"offset {off} is out of range and must read 0"


def test_buffer_load_soffset_counts_and_straddle_is_poisoned(probe_lib):
    data = np.arange(1, 129, dtype=np.uint8)
    # voffset + soffset is the checked offset (the contract's rule).
    rc, err, out = buffer_load(probe_lib, data, 64, [0, 80], 16, 16)
    assert rc == 0, err
    np.testing.assert_array_equal(out[0], data[16:32])
    assert (out[1] == 0).all()
    # Straddling num_records is chip-dependent: out-of-range bytes read fp8 NaN (0x80).
    rc, err, out = buffer_load(probe_lib, data, 60, [52], 0, 16)
    assert rc == 0, err
    np.testing.assert_array_equal(out[0][:8], data[52:60])
    assert (out[0][8:] == 0x80).all()


def test_buffer_load_soffset_dependent_verdict_is_a_fault(probe_lib):
    data = np.arange(1, 129, dtype=np.uint8)
    rc, err, _ = buffer_load(probe_lib, data, 64, [32], 40, 16)  # in range without soffset, out with it
    assert rc == 1 and "soffset" in err, err


def test_device_attributes(probe_lib):
    assert probe_lib.emu_cu_count() == 304


def gather(lib, data, indices, side=0):
    index = np.array(indices, np.int32)
    out = np.zeros(len(index), np.uint8)
    err = err_buf()
    rc = lib.emu_gather_probe(ptr(data), len(data), side, len(index), ptr(index), ptr(out), err, ERR_LEN)
    return rc, err.value.decode(), out


def test_reads_past_a_guarded_buffer_fault_instead_of_crashing(probe_lib):
    data = np.arange(1, 101, dtype=np.uint8)  # 100 bytes: the last 16-byte granule ends at 112
    rc, err, out = gather(probe_lib, data, [0, 50, 99, 111])  # inside the last granule: legal
    assert rc == 0, err
    np.testing.assert_array_equal(out[:3], data[[0, 50, 99]])
    rc, err, out = gather(probe_lib, data, list(range(64)) + [112])  # thread 64 reads past the granule
    assert rc == 1 and "thread 64" in err and "byte 112 of probe buffer (100 bytes): past its end" in err, err
    np.testing.assert_array_equal(out[:64], data[:64])  # the other threads ran to completion
    rc, err, _ = gather(probe_lib, data, [1])  # and the runtime is clean afterwards
    assert rc == 0, err


def test_reads_before_a_guarded_buffer_fault(probe_lib):
    data = np.arange(1, 101, dtype=np.uint8)
    rc, err, out = gather(probe_lib, data, [0, 99], side=1)
    assert rc == 0, err
    np.testing.assert_array_equal(out, data[[0, 99]])
    rc, err, _ = gather(probe_lib, data, [5, -3], side=1)
    assert rc == 1 and "thread 1" in err and "3 bytes before the start of probe buffer" in err, err


def test_lds_starts_poisoned_in_every_block(probe_lib):
    out = np.zeros((3, 64), np.int32)
    err = err_buf()
    assert probe_lib.emu_lds_poison_probe(3, ptr(out), err, ERR_LEN) == 0, err.value
    assert (out[0] == 7).all()
    assert (out[1:].view(np.uint32) == 0x80808080).all(), "a block saw an earlier block's LDS"
