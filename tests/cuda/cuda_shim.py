"""The CUDA launcher without the package: scripts/cuda/tune_shim.cu + gemm/cuda/*.cu built into a shared
library and driven through ctypes by scripts/cuda/tune.py's Backend (forced plans, raw scale formats,
quantize_launch).

The library is $GEMM_CUDA_SHIM when set (scripts/cuda/validate.sh builds it once), else built here with
nvcc into a temporary directory. HAS_SM90 is False on machines without an sm_90 GPU, where the tests
that need the shim are skipped. build_host_probe compiles the plain-C++ probes of the planners and schedules.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import torch
from _helpers import REPO_ROOT

HAS_SM90 = (
    torch.cuda.is_available() and torch.version.hip is None and torch.cuda.get_device_capability()[0] == 9
)


def load_tune():
    """scripts/cuda/tune.py as a module (its Backend, ctypes mirrors and helpers)."""
    spec = importlib.util.spec_from_file_location("cuda_tune", REPO_ROOT / "scripts" / "cuda" / "tune.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shim_path(build_dir: Path) -> Path:
    """The shim library: $GEMM_CUDA_SHIM, or a fresh nvcc build in build_dir."""
    if os.environ.get("GEMM_CUDA_SHIM"):
        return Path(os.environ["GEMM_CUDA_SHIM"])
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise FileNotFoundError("nvcc not found: set GEMM_CUDA_SHIM to a built shim (see scripts/cuda/validate.sh)")
    out = build_dir / "libtune.so"
    tune = load_tune()
    subprocess.run([nvcc, *tune.NVCC_FLAGS, "-o", str(out), *tune.SHIM_SOURCES], cwd=REPO_ROOT, check=True,
                   capture_output=True, text=True)
    return out


def build_host_probe(source: str, build_dir: Path) -> Path:
    """tests/cuda/<source>.cpp built with the host C++ compiler into build_dir (no GPU, no nvcc needed)."""
    import pytest

    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None:
        pytest.fail(f"no host C++ compiler (g++/c++/clang++) to compile {source}.cpp")
    exe = build_dir / source
    subprocess.run(
        [cxx, "-std=c++17", "-O1", f"-I{REPO_ROOT}", str(Path(__file__).parent / f"{source}.cpp"), "-o", str(exe)],
        check=True,
    )
    return exe
