"""ThreadSanitizer over the emulated GEMM: every test config and the heuristic, in-place and staged
layouts. The emulator's barriers are mutexes and condition variables, so TSan sees exactly which LDS
accesses __syncthreads orders; a missing barrier is a reported data race, not a lucky pass."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import emu_build

pytestmark = pytest.mark.rocm_emu

TIMEOUT_S = 300


@pytest.fixture(scope="module")
def race_driver(emu_clang, emu_build_dir) -> Path:
    return emu_build.build(emu_clang, ["race_driver"], emu_build_dir)["race_driver"]


def test_no_data_races(race_driver):
    env = dict(os.environ, TSAN_OPTIONS="halt_on_error=1 exitcode=66")
    proc = subprocess.run([str(race_driver)], capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    output = proc.stdout + proc.stderr
    assert "ThreadSanitizer" not in output, output[-6000:]
    assert proc.returncode == 0, output[-6000:]
    assert " passed, 0 failed" in proc.stdout, output[-6000:]
