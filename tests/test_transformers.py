"""transformers is the client: with LOCAL_KERNELS mapping `kernels-community/finegrained-fp8` to this
package's build, transformers 5.x loads it through its own lazy_load_kernel and runs its FP8Linear and
FP8 experts modules (built by replace_with_fp8_linear while loading pre-quantized checkpoints of tiny
DeepSeek-V3 and Qwen3-MoE models) on each device the build runs on (the CPU in CI; transformers
dequantizes FP8 checkpoints there unless its environment check is bypassed, which the shared loader
does), for each experts implementation it sends to the kernel.

Outputs are compared per module, on the inputs each module received, with the same module
dequantized to bf16 (transformers' `dequantize=True`) and with the float64 reference of the same
quantized computation; tolerances and their reasons are in scripts/transformers_e2e.py (MODULE_*,
LOGITS_*). The checkpoint writer and the checks are shared with that script, which runs the same
checks and `generate` on a GPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _helpers import kernel_root, local_variant_dir

pytest.importorskip("transformers", reason="transformers is not installed (scripts/setup.sh installs the pinned version)")

from scripts import transformers_e2e as e2e  # noqa: E402

ARCHS = tuple(e2e.TINY_CONFIGS)


@pytest.fixture(scope="module")
def finegrained_fp8():
    """The kernel transformers loaded for `kernels-community/finegrained-fp8`: this build."""
    variant_dir = local_variant_dir()
    e2e.map_finegrained_fp8(kernel_root())
    kernel = e2e.loaded_kernel()
    assert Path(kernel.__file__).parent == variant_dir, (
        f"transformers loaded {kernel.__file__}, not the build under test in {variant_dir} "
        "(it keeps the first kernel it loads for the life of the process)"
    )
    return kernel


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, finegrained_fp8):
    root = tmp_path_factory.mktemp("fp8")
    return {
        (arch, fmt): e2e.write_fp8_checkpoint(arch, root / f"{arch}-{fmt}", fmt)
        for arch in ARCHS for fmt in e2e.SCALE_FORMATS
    }  # fmt: skip


def test_transformers_loads_the_build(finegrained_fp8):
    from transformers.integrations.hub_kernels import _KERNEL_MODULE_MAPPING

    assert _KERNEL_MODULE_MAPPING["finegrained-fp8"] is finegrained_fp8
    for name in ("matmul_2d", "matmul_batched", "matmul_grouped"):
        assert callable(getattr(finegrained_fp8, name, None)), f"the kernel lacks {name}"


def test_loads_as_gemm_by_name(kernel, finegrained_fp8):
    # `kernel` is get_kernel("kernels-community/gemm", ...): the same build, the same interface.
    assert Path(kernel.__file__).parent == Path(finegrained_fp8.__file__).parent
    assert callable(getattr(kernel, "matmul_2d", None)), "kernels-community/gemm lacks matmul_2d"


CASES = [
    (arch, fmt, impl)
    for arch in ARCHS
    for fmt in e2e.SCALE_FORMATS
    for impl in (e2e.EXPERTS_IMPLEMENTATIONS if fmt == "float" else ("grouped_mm",))
]


@pytest.mark.parametrize("arch,scale_fmt,experts_implementation", CASES)
def test_fp8_modules_match_float64_reference(checkpoints, device, arch, scale_fmt, experts_implementation):
    e2e.check_logits(checkpoints[arch, scale_fmt], device, scale_fmt, experts_implementation)


@pytest.mark.parametrize("arch,scale_fmt,experts_implementation", CASES)
def test_fp8_modules_match_dequantized_bf16(checkpoints, device, arch, scale_fmt, experts_implementation):
    e2e.check_dequantized(checkpoints[arch, scale_fmt], device, experts_implementation)


# One FP8Linear (ragged N: kv_a is 160 x 256) and one experts module: a wrong scale block in either
# must fail the comparison with the dequantized model, naming the module.
CORRUPTED = {
    "model.layers.0.self_attn.kv_a_proj_with_mqa": "weight_scale_inv",
    "model.layers.1.mlp.experts": "down_proj_scale_inv",
}


@pytest.mark.parametrize("module_name", list(CORRUPTED))
def test_comparison_detects_a_wrong_scale(checkpoints, device, module_name):
    path = checkpoints["deepseek_v3", "float"]
    model = e2e.load_fp8(path, device, "grouped_mm")
    scale = getattr(model.get_submodule(module_name), CORRUPTED[module_name])
    with torch.no_grad():
        scale.view(-1, *scale.shape[-2:])[:, 0, 0] *= 2  # the first block (of every expert)
    calls = e2e.ModuleCalls()
    with torch.no_grad(), calls.record(model):
        model(e2e.input_ids(model.config.vocab_size, device))
    with pytest.raises(AssertionError, match=module_name.replace(".", r"\.")):
        calls.compare(e2e.load_dequantized(path, device), e2e.MODULE_DEQUANT, "FP8 module vs dequantized bf16")
