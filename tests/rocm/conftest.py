"""Session fixtures for the gfx942 CPU emulation: build the libraries once, load them with ctypes."""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "emu"))  # emu_gemm, emu_build: for every test here
import emu_build  # noqa: E402


@pytest.fixture(scope="session")
def emu_clang() -> str:
    clang = emu_build.find_clang()
    if clang is None:
        message = "clang++-19 not found (scripts/rocm/setup_toolchain.sh or apt-get install clang-19)"
        # In CI the emulation is the only execution of the ROCm kernel: a missing compiler is a failure.
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return clang


@pytest.fixture(scope="session")
def emu_build_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("rocm_emu")


@pytest.fixture(scope="session")
def probe_lib(emu_clang, emu_build_dir) -> ctypes.CDLL:
    path = emu_build.build(emu_clang, ["probe"], emu_build_dir)["probe"]
    return ctypes.CDLL(str(path))


@pytest.fixture(scope="session")
def gemm_libs(emu_clang, emu_build_dir) -> dict[str, ctypes.CDLL]:
    """The GEMM launcher TU as built for CI and with GEMM_TEST_WRONG_LANE_MAP (compiled together)."""
    paths = emu_build.build(emu_clang, ["gemm", "gemm_wrong_map"], emu_build_dir)
    return {name: ctypes.CDLL(str(path)) for name, path in paths.items()}
