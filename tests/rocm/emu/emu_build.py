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

# Flags shared by every emulation build: the fake runtime first on the include path, SOURCE_ROOT for
# "gemm/..." includes, C++20 for std::binary_semaphore.
COMMON_FLAGS = [
    "-x", "c++", "-std=c++20", "-pthread", "-Wall", "-Wextra", "-Werror", "-Wno-psabi",
    "-I", str(EMU_DIR / "include"), "-I", str(SOURCE_ROOT),
    "-DGEMM_HIP_EMULATION",
]
# ctypes libraries: -O2 because one OS thread per GPU thread is slow enough already; hidden visibility
# so that two libraries loaded in one process (the GEMM and its wrong-lane-map twin) share no emulator
# state (only EMU_EXPORT functions are visible).
LIBRARY_FLAGS = ["-O2", "-fPIC", "-shared", "-fvisibility=hidden"]
# The ThreadSanitizer executable.
TSAN_FLAGS = ["-O1", "-g", "-fsanitize=thread"]

# name -> (sources, extra flags, output file name)
TARGETS = {
    "probe": ([EMU_DIR / "probe.cpp"], LIBRARY_FLAGS, "libemu_probe.so"),
    "gemm": ([EMU_DIR / "emu_entry.cpp"], LIBRARY_FLAGS, "libemu_gemm.so"),
    "gemm_wrong_map": ([EMU_DIR / "emu_entry.cpp"], [*LIBRARY_FLAGS, "-DGEMM_TEST_WRONG_LANE_MAP"],
                       "libemu_gemm_wrong_map.so"),
    "race_driver": ([EMU_DIR / "race_driver.cpp", EMU_DIR / "emu_entry.cpp"], TSAN_FLAGS, "race_driver"),
}


def find_clang() -> str | None:
    for name in CLANG_CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def command(clang: str, name: str, out_dir: Path) -> tuple[list[str], Path]:
    sources, extra, file_name = TARGETS[name]
    out = out_dir / file_name
    return [clang, *COMMON_FLAGS, *extra, *map(str, sources), "-o", str(out)], out


def build(clang: str, names: list[str], out_dir: Path) -> dict[str, Path]:
    """Builds `names` concurrently (at most two: the machine is shared); raises with the log on failure."""
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
    wanted = sys.argv[2:] or list(TARGETS)
    for name, path in build(clang, wanted, Path(sys.argv[1] if len(sys.argv) > 1 else os.getcwd())).items():
        print(f"{name}: {path}")
