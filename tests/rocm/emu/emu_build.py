"""Build the CPU emulation libraries of the gfx942 HIP sources (tests/rocm only).

The HIP sources are compiled as plain C++ by clang-19 (``-x c++`` keeps ``ext_vector_type``) against the
fake ``hip/hip_runtime.h`` in ``tests/rocm/emu/include``. ``python tests/rocm/emu/emu_build.py OUT_DIR``
builds the libraries by hand; pytest builds them once per session through ``tests/rocm/conftest.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

EMU_DIR = Path(__file__).resolve().parent
REPO_ROOT = EMU_DIR.parents[2]
# Where "gemm/..." comes from: this checkout, or a mutated copy (tests/rocm/emu/mutation_check.py).
SOURCE_ROOT = Path(os.environ.get("GEMM_EMU_SOURCE_ROOT", REPO_ROOT))
CLANG_CANDIDATES = ("clang++-19",)

# Flags shared by every emulation build: the fake runtime first on the include path, SOURCE_ROOT
# root for "gemm/..." includes, C++20 for std::binary_semaphore, -O2 because one OS thread per GPU
# thread is slow enough already, hidden visibility so that two libraries loaded in one process (the
# GEMM and its wrong-lane-map twin) share no emulator state; only EMU_EXPORT functions are visible.
COMMON_FLAGS = [
    "-x", "c++", "-std=c++20", "-O2", "-fPIC", "-shared", "-pthread", "-fvisibility=hidden",
    "-Wall", "-Wextra", "-Werror", "-Wno-psabi",
    "-I", str(EMU_DIR / "include"), "-I", str(SOURCE_ROOT),
    "-DGEMM_HIP_EMULATION",
]

# name -> (source, extra flags)
LIBRARIES = {
    "probe": (EMU_DIR / "probe.cpp", []),
    "gemm": (EMU_DIR / "emu_entry.cpp", []),
    "gemm_wrong_map": (EMU_DIR / "emu_entry.cpp", ["-DGEMM_TEST_WRONG_LANE_MAP"]),
}


def find_clang() -> str | None:
    for name in CLANG_CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def command(clang: str, name: str, out_dir: Path) -> tuple[list[str], Path]:
    source, extra = LIBRARIES[name]
    out = out_dir / f"libemu_{name}.so"
    return [clang, *COMMON_FLAGS, *extra, str(source), "-o", str(out)], out


def build(clang: str, names: list[str], out_dir: Path) -> dict[str, Path]:
    """Compiles `names` concurrently (at most two: the machine is shared); raises with the log on failure."""
    out_dir.mkdir(parents=True, exist_ok=True)
    outputs: dict[str, Path] = {}
    pending = list(names)
    while pending:
        batch, pending = pending[:2], pending[2:]
        procs = []
        for name in batch:
            cmd, out = command(clang, name, out_dir)
            procs.append((name, cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
            outputs[name] = out
        for name, cmd, proc in procs:
            log, _ = proc.communicate()
            if proc.returncode != 0:
                raise RuntimeError(f"emulation build of {name} failed:\n{' '.join(cmd)}\n{log}")
    return outputs


if __name__ == "__main__":
    clang = find_clang()
    if clang is None:
        sys.exit("clang++-19 not found: run scripts/rocm/setup_toolchain.sh or apt-get install clang-19")
    wanted = sys.argv[2:] or list(LIBRARIES)
    for name, path in build(clang, wanted, Path(sys.argv[1] if len(sys.argv) > 1 else os.getcwd())).items():
        print(f"{name}: {path}")
