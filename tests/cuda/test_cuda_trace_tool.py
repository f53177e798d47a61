"""CPU-side checks of scripts/cuda/trace_ctas.py: every stamp anchor lies exactly once in the kernel and
the stamped launcher compiles for sm_90a, so that a kernel change which breaks the tool fails here rather
than on a GPU machine."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from _helpers import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "scripts" / "cuda"))
import trace_ctas  # noqa: E402

KERNEL = (REPO_ROOT / trace_ctas.KERNEL).read_text()


def test_every_stamp_is_placed():
    traced = trace_ctas.traced_kernel(KERNEL)
    for slot, name in enumerate(trace_ctas.NAMES):
        assert f"trace_stamp({slot});" in traced, name
    # Two anchors place tma_first (paired and single loads); every other name has one.
    assert traced.count("trace_stamp(") == 1 + len(trace_ctas.NAMES) + 1


def test_a_moved_anchor_is_an_error():
    _, anchor, _ = trace_ctas.STAMPS[0]
    with pytest.raises(ValueError, match="trace anchor found 0 times"):
        trace_ctas.traced_kernel(KERNEL.replace(anchor, ""))


def _nvcc():
    # The machine's nvcc, else the one scripts/setup.sh installs (as scripts/compile_checks.sh finds it).
    local = REPO_ROOT / ".toolchain/cuda/nvidia/cu13/bin/nvcc"
    return shutil.which("nvcc") or (str(local) if local.exists() else None)


@pytest.mark.skipif(_nvcc() is None, reason="needs nvcc (scripts/setup.sh installs it)")
def test_traced_launcher_compiles(tmp_path):
    # The anchors can still match after a kernel change that breaks what the stamps refer to
    # (`unit`, `steps`, `tid`): the traced launcher must compile for sm_90a as the plain one does.
    tree = trace_ctas.write_traced_tree(tmp_path)
    flags = [f for f in trace_ctas.NVCC_FLAGS if f not in ("-shared", "-Xcompiler", "-fPIC")]
    done = subprocess.run([_nvcc(), *flags, "-c", "-o", str(tmp_path / "launcher.o"), trace_ctas.LAUNCHER],
                          cwd=tree, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
