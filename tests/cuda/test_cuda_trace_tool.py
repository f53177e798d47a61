"""CPU-side check of scripts/cuda/trace_ctas.py: every stamp anchor lies exactly once in the kernel, so
that a kernel change which moves one makes this fail here rather than the tool on a GPU machine."""

from __future__ import annotations

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
