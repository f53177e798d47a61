"""Fixtures of the CUDA launcher tests: `shim`, scripts/cuda/tune.py's Backend over the raw launcher."""

from __future__ import annotations

import pytest
from cuda_shim import HAS_SM90, load_tune, shim_path


@pytest.fixture(scope="session")
def shim(tmp_path_factory):
    if not HAS_SM90:
        pytest.skip("needs a CUDA sm_90 (H100/H200) GPU")
    return load_tune().Backend(str(shim_path(tmp_path_factory.mktemp("cuda_shim"))))
