"""pytest set-up: loads the local build through `kernels`, as kernels-community tests do.

LOCAL_KERNELS points `kernels.get_kernel("kernels-community/gemm", version=1)` at the build under
test: the one LOCAL_KERNELS already names (kernel-builder's `nix run .#ci-test` sets it to its own
output, and the source tree then has no build/), else this repository's build/<variant>/ (made by
`python3 scripts/build.py`). Fixtures: `kernel` (the loaded module),
`devices` (devices the loaded variant runs on) and `device` (each test runs once per device).
Helpers shared by the tests (inputs, reference, accuracy rule) live in tests/_helpers.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _helpers import (
    KERNEL_VERSION,
    REPO_ID,
    REPO_ROOT,
    find_variant_dir,
    local_kernels_entries,
    local_variant_dir,
    variant_devices,
)

# Must be set before `kernels` is imported: it parses the overrides once and caches them.
if REPO_ID not in local_kernels_entries():
    others = os.environ.get("LOCAL_KERNELS")
    os.environ["LOCAL_KERNELS"] = ":".join(filter(None, [others, f"{REPO_ID}={REPO_ROOT}"]))

import kernels  # noqa: E402


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Parametrized at collection so that test ids name the device; an absent build is reported
    # by the `kernel` fixture, so collection itself never fails on it.
    if "device" in metafunc.fixturenames:
        try:
            devices = variant_devices(find_variant_dir())
        except FileNotFoundError:
            devices = ["cpu"]
        metafunc.parametrize("device", devices)


@pytest.fixture(scope="session")
def kernel():
    """The gemm module, loaded exactly as users load it (LOCAL_KERNELS + get_kernel)."""
    local_variant_dir()
    return kernels.get_kernel(REPO_ID, version=KERNEL_VERSION)


@pytest.fixture(scope="session")
def devices(kernel) -> list[str]:
    return variant_devices(Path(kernel.__file__).parent)
