"""gemm as transformers' `kernels-community/finegrained-fp8` kernel, end to end.

Writes tiny FP8 checkpoints of real FP8 architectures itself (random weights, block-128 weight scales
as fp32 `amax / 448` or as UE8M0 powers of two), loads them with `from_pretrained` while
LOCAL_KERNELS maps `kernels-community/finegrained-fp8` to this package's build, and checks:
  1. against the same model whose every FP8 matmul is float64 math with the same per-1x128
     activation quantization: each FP8 module's output on the inputs it received, and the logits;
     for every experts implementation transformers sends to the kernel (grouped_mm, batched_mm, eager);
  2. against the `dequantize=True` bf16 model: per module and logits, within the activation-
     quantization error (cosine >= 0.99 per row for every module);
  3. `generate` of 32 tokens eagerly, and with a static cache under torch.compile(fullgraph=True).
MoE routing is a discrete choice that a rounding difference can flip, so the reference runs are
given the routing the kernel run chose (RoutingReplay): the comparison measures the matmuls.
Tolerances and why: MODULE_REF64, MODULE_DEQUANT, LOGITS_REF64, LOGITS_DEQUANT below.

    LOCAL_KERNELS is set here; run from the repository root after `python3 scripts/build.py`:
    python3 scripts/transformers_e2e.py [--device cuda] [--arch deepseek_v3 qwen3_moe] [--no-generate]

Prints one line per check and a PASS/FAIL summary; exits 1 on any failure. tests/test_transformers.py
imports the checkpoint writer, the references and the comparisons from here.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

# The checkpoints are written here: nothing needs the Hub, and transformers' other Hub kernels (e.g.
# rotary) must fail as "not found", which it tolerates, not on a trust check it cannot make offline.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
FINEGRAINED_FP8_REPO_ID = "kernels-community/finegrained-fp8"
BLOCK = 128
FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max
SCALE_FORMATS = ("float", "ue8m0")
EXPERTS_IMPLEMENTATIONS = ("grouped_mm", "batched_mm", "eager")
NEW_TOKENS = 32

# Small configs of real FP8 architectures. hidden and MoE widths are multiples of 128 (the MoE calls
# need whole blocks); DeepSeek-V3's q_a (192), kv_a (160) and kv_b projections give ragged N/K
# and a 4-D input to matmul_2d, and its first layer is a dense MLP of FP8Linear.
TINY_CONFIGS = {
    "deepseek_v3": dict(
        vocab_size=256, hidden_size=256, intermediate_size=512, moe_intermediate_size=256, num_hidden_layers=2,
        first_k_dense_replace=1, n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2, n_group=1,
        topk_group=1, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=192, kv_lora_rank=128,
        qk_rope_head_dim=32, qk_nope_head_dim=64, v_head_dim=64, max_position_embeddings=128,
        tie_word_embeddings=False,
    ),
    "qwen3_moe": dict(
        vocab_size=256, hidden_size=256, intermediate_size=512, moe_intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64, num_experts=4, num_experts_per_tok=2,
        decoder_sparse_step=1, mlp_only_layers=[], max_position_embeddings=128, tie_word_embeddings=False,
    ),
}  # fmt: skip

# Tolerances, per row of an output (one token over the hidden or vocabulary dimension): minimum cosine
# similarity and maximum relative L2 error.
# - Each FP8 linear module against the float64 reference on the inputs it received in the kernel
#   run: identical bf16 inputs give identical FP8 codes, so what differs is fp32 accumulation and
#   the bf16 rounding of the output (2^-9 relative).
MODULE_REF64 = (0.9999, 0.02)
# - An experts module's second matmul quantizes the first one's bf16 output, where a 1-ulp
#   accumulation difference flips an FP8 code now and then: one flipped code among a row's 128 moves
#   that row by up to 2^-4 of its largest input, ~1-2 % relative L2 (seen on the H100: 0.99990).
MODULE_REF64_EXPERTS = (0.9995, 0.04)
# - Each FP8 module against the same module dequantized to bf16 (no activation quantization), on the
#   same inputs: e4m3 keeps 3 mantissa bits, a rounding error up to 2^-4 per activation, ~3.6 %
#   per dot product of random-sign terms, about twice that after two quantized matmuls in a row.
MODULE_DEQUANT = (0.99, 0.2)
# - Whole-model logits, where the reference run's small differences propagate: every later layer
#   re-quantizes its input to 3 mantissa bits, so a 1-ulp bf16 difference flips FP8 codes and
#   grows layer by layer (measured on these configs with exact matmuls: 3-4 % relative L2 against
#   the float64 run, 5-16 % against the dequantized model). Routing is replayed (RoutingReplay).
LOGITS_REF64 = (0.995, 0.10)
LOGITS_DEQUANT = (0.98, 0.25)


# ------------------------------------------------------------------------------ checkpoint writing


def tiny_config(arch: str):
    from transformers import AutoConfig

    return AutoConfig.for_model(arch, **TINY_CONFIGS[arch])


def quantize_weight(w: torch.Tensor, scale_fmt: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(e4m3fn weight, scale) with one scale per 128x128 block, ragged edges included:
    fp32 `amax / 448` ("float") or that rounded up to a power of two, as UE8M0 bytes ("ue8m0")."""
    n, k = w.shape
    nb, kb = math.ceil(n / BLOCK), math.ceil(k / BLOCK)
    padded = torch.nn.functional.pad(w.float(), (0, kb * BLOCK - k, 0, nb * BLOCK - n))
    blocks = padded.view(nb, BLOCK, kb, BLOCK)
    scale = (blocks.abs().amax(dim=(1, 3)) / FP8_MAX).clamp_min(torch.finfo(torch.float32).tiny)
    if scale_fmt == "ue8m0":
        scale = torch.exp2(torch.ceil(torch.log2(scale)))
    elif scale_fmt != "float":
        raise ValueError(f"scale_fmt must be one of {SCALE_FORMATS}, got {scale_fmt!r}")
    expanded = scale.repeat_interleave(BLOCK, 0)[:n].repeat_interleave(BLOCK, 1)[:, :k]
    q = (w.float() / expanded).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    # UE8M0 scales are stored as their exponent bytes (uint8, readable by any safetensors version);
    # transformers views `*scale_inv` uint8 parameters as float8_e8m0fnu after loading.
    return q, scale.to(torch.float8_e8m0fnu).view(torch.uint8) if scale_fmt == "ue8m0" else scale


def is_fp8_weight(name: str, tensor: torch.Tensor) -> bool:
    """Weights transformers turns into FP8Linear / FP8 experts: 2-D projections inside the decoder
    layers; not the embeddings, norms, lm_head or the MoE router (`mlp.gate`)."""
    return tensor.ndim == 2 and name.endswith(".weight") and ".layers." in name and not name.endswith("mlp.gate.weight")


def write_fp8_checkpoint(arch: str, path: Path, scale_fmt: str, seed: int = 0) -> Path:
    """A Hub-style pre-quantized checkpoint in `path`: per-expert e4m3fn weights with sibling
    `weight_scale_inv`, config.json's quantization_config with weight_block_size [128, 128]."""
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    AutoModelForCausalLM.from_config(tiny_config(arch), dtype=torch.bfloat16).save_pretrained(path)
    files = sorted(path.glob("*.safetensors"))
    assert len(files) == 1, f"expected one safetensors file in {path}, found {files}"
    tensors = {}
    for name, tensor in load_file(files[0]).items():
        if is_fp8_weight(name, tensor):
            tensors[name], tensors[name.removesuffix("weight") + "weight_scale_inv"] = quantize_weight(tensor, scale_fmt)
        else:
            tensors[name] = tensor
    save_file(tensors, files[0], metadata={"format": "pt"})
    config = json.loads((path / "config.json").read_text())
    config["quantization_config"] = {
        "quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
        "weight_block_size": [BLOCK, BLOCK], "scale_fmt": scale_fmt,
    }  # fmt: skip
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return path


# ----------------------------------------------------------------------------------------- loading


def map_finegrained_fp8(kernel_root: Path) -> None:
    """LOCAL_KERNELS gets `kernels-community/finegrained-fp8=<kernel_root>` (other entries kept).
    `kernels` reads the variable at every get_kernel; transformers loads the kernel once, at the
    first FP8 forward, and keeps it for the life of the process."""
    entries = [e for e in os.environ.get("LOCAL_KERNELS", "").split(":") if e and not e.startswith(FINEGRAINED_FP8_REPO_ID + "=")]
    os.environ["LOCAL_KERNELS"] = ":".join([*entries, f"{FINEGRAINED_FP8_REPO_ID}={kernel_root}"])
    os.environ["USE_HUB_KERNELS"] = "1"
    # On SM90/SM100 transformers sends FP8Linear to the DeepGEMM Hub kernel unless told not to.
    os.environ["TRANSFORMERS_DISABLE_DEEPGEMM_LINEAR"] = "1"


@contextlib.contextmanager
def fp8_without_gpu():
    """transformers dequantizes pre-quantized FP8 checkpoints to bf16 on a machine without a GPU;
    its environment check is bypassed so that the FP8 modules are built and the kernel is called."""
    from transformers.quantizers.quantizer_finegrained_fp8 import FineGrainedFP8HfQuantizer

    original = FineGrainedFP8HfQuantizer.validate_environment
    FineGrainedFP8HfQuantizer.validate_environment = lambda self, *args, **kwargs: None
    try:
        yield
    finally:
        FineGrainedFP8HfQuantizer.validate_environment = original


def load_fp8(path: Path, device: str, experts_implementation: str, **kwargs):
    """from_pretrained of the FP8 checkpoint; fails on any missing, unexpected or mismatched key.
    use_kernels=False: no other Hub layer (rotary, ...) is swapped in, and none is fetched; the FP8
    modules load their kernel on their own, whatever use_kernels says."""
    from transformers import AutoModelForCausalLM

    guard = fp8_without_gpu() if device == "cpu" else contextlib.nullcontext()
    with guard:
        model, info = AutoModelForCausalLM.from_pretrained(
            path, dtype=torch.bfloat16, device_map=device, experts_implementation=experts_implementation,
            output_loading_info=True, use_kernels=False, **kwargs,
        )  # fmt: skip
    problems = {k: v for k, v in info.items() if v}
    assert not problems, f"loading {path} reported {problems}"
    return model.eval()


def load_dequantized(path: Path, device: str):
    """The same checkpoint with transformers' own `dequantize=True`: every FP8 weight in bf16."""
    from transformers import AutoModelForCausalLM, FineGrainedFP8Config

    config = FineGrainedFP8Config(weight_block_size=[BLOCK, BLOCK], dequantize=True)
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.bfloat16, quantization_config=config, experts_implementation="eager", device_map=device,
        use_kernels=False,
    )
    assert not any(p.dtype == FP8 for p in model.parameters()), "dequantize=True left FP8 weights"
    return model.eval()


def fp8_modules(model) -> dict[str, torch.nn.Module]:
    """transformers' FP8Linear and FP8 experts modules of a model, by name."""
    from transformers.integrations.finegrained_fp8 import FP8Experts, FP8Linear

    return {name: m for name, m in model.named_modules() if isinstance(m, (FP8Linear, FP8Experts))}


def check_fp8_model(model, scale_fmt: str) -> None:
    """Every FP8 module holds FP8 weights (no bf16 bypass) and scales of the checkpoint's format."""
    scale_dtype = torch.float8_e8m0fnu if scale_fmt == "ue8m0" else torch.float32
    modules = fp8_modules(model)
    assert modules, "no FP8Linear / FP8 experts module in the model"
    for name, module in modules.items():
        for pname, param in module.named_parameters(recurse=False):
            if pname.endswith("scale_inv"):
                assert param.dtype == scale_dtype, f"{name}.{pname} is {param.dtype}, expected {scale_dtype}"
            elif "bias" not in pname:
                assert param.dtype == FP8, f"{name}.{pname} is {param.dtype}, expected {FP8}"


# ------------------------------------------------------------------------------------ the kernel


def finegrained_fp8_module():
    import transformers.integrations.finegrained_fp8 as fp8

    return fp8


def loaded_kernel():
    """The kernel module transformers loaded through lazy_load_kernel (loading it if needed)."""
    from transformers.integrations.hub_kernels import _KERNEL_MODULE_MAPPING

    finegrained_fp8_module().load_finegrained_fp8_kernel()
    return _KERNEL_MODULE_MAPPING["finegrained-fp8"]


@contextlib.contextmanager
def kernel_calls():
    """Counts the calls transformers makes to the loaded kernel's three entry points (eager only)."""
    fp8 = finegrained_fp8_module()
    fp8.load_finegrained_fp8_kernel()
    original = fp8._FINEGRAINED_FP8
    fields = [f.name for f in dataclasses.fields(original)]
    counts = dict.fromkeys(fields, 0)

    def counting(field, fn):
        def call(*args, **kwargs):
            counts[field] += 1
            return fn(*args, **kwargs)

        return call

    fp8._FINEGRAINED_FP8 = type(original)(**{f: counting(f, getattr(original, f)) for f in fields})
    try:
        yield counts
    finally:
        fp8._FINEGRAINED_FP8 = original


# ------------------------------------------------------------------------- float64 reference math


def _weight_f64(b: torch.Tensor, bs: torch.Tensor, block_size) -> torch.Tensor:
    bn, bk = block_size
    n, k = b.shape[-2:]
    scale = bs.to(torch.float64).repeat_interleave(bn, -2)[..., :n, :].repeat_interleave(bk, -1)[..., :k]
    return b.to(torch.float64) * scale


def quantize_activation_f64(a: torch.Tensor, block_k: int = BLOCK) -> torch.Tensor:
    """Dynamic activation quantization as finegrained-fp8 defines it, dequantized to float64: per
    row and 1 x block_k group, s = amax / 448 in fp32, q = e4m3(a / s)."""
    k = a.shape[-1]
    groups = torch.nn.functional.pad(a.float(), (0, (-k) % block_k)).unflatten(-1, (-1, block_k))
    amax = groups.abs().amax(-1, keepdim=True)
    # A tensor divisor: torch's CUDA division by a Python scalar multiplies by its reciprocal, one ulp
    # off IEEE division in some groups, which flips FP8 codes the kernel (IEEE) does not.
    scale = amax / torch.full_like(amax, FP8_MAX)
    q = (groups / scale.clamp_min(1e-12)).to(FP8)
    return (q.to(torch.float64) * scale.to(torch.float64)).flatten(-2)[..., :k]


def reference_matmul_2d(A, B, Bs, block_size, output_dtype=None, activation_scale=None):
    if activation_scale is not None:
        raise NotImplementedError("the reference covers dynamic activation quantization only")
    out = quantize_activation_f64(A, block_size[1]) @ _weight_f64(B, Bs, block_size).T
    return out.to(output_dtype or A.dtype)


def reference_matmul_batched(A, B, Bs, expert_ids, block_size, output_dtype=None):
    out = A.new_zeros(A.shape[0], B.shape[1], dtype=output_dtype or A.dtype)
    for e in range(B.shape[0]):
        rows = (expert_ids == e).nonzero().flatten()
        out[rows] = reference_matmul_2d(A[rows], B[e], Bs[e], block_size, out.dtype)
    return out


def reference_matmul_grouped(A, B, Bs, offsets, tokens_per_expert, block_size, output_dtype=None):
    out = A.new_zeros(A.shape[0], B.shape[1], dtype=output_dtype or A.dtype)
    ends = offsets.tolist()
    for e, (start, end) in enumerate(zip([0, *ends[:-1]], ends)):
        out[start:end] = reference_matmul_2d(A[start:end], B[e], Bs[e], block_size, out.dtype)
    return out


@contextlib.contextmanager
def reference_kernel():
    """transformers calls the float64 reference instead of the loaded kernel."""
    fp8 = finegrained_fp8_module()
    fp8.load_finegrained_fp8_kernel()
    original = fp8._FINEGRAINED_FP8
    fp8._FINEGRAINED_FP8 = type(original)(
        matmul=reference_matmul_2d, batched_matmul=reference_matmul_batched, grouped_matmul=reference_matmul_grouped
    )
    try:
        yield
    finally:
        fp8._FINEGRAINED_FP8 = original


# ------------------------------------------------------------------------------ routing and metrics


def experts_modules(model) -> dict[str, torch.nn.Module]:
    return {name: m for name, m in model.named_modules() if name.endswith("mlp.experts")}


class RoutingReplay:
    """Records (top_k_index, top_k_weights) that each experts module receives in one run and feeds
    the same routing to the same-named modules of another model."""

    def __init__(self):
        self.routing: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {}

    @contextlib.contextmanager
    def record(self, model):
        def hook(name):
            def pre(module, args):
                self.routing.setdefault(name, []).append((args[1].clone(), args[2].clone()))

            return pre

        handles = [m.register_forward_pre_hook(hook(n)) for n, m in experts_modules(model).items()]
        try:
            yield self
        finally:
            for h in handles:
                h.remove()

    @contextlib.contextmanager
    def replay(self, model):
        cursor = dict.fromkeys(self.routing, 0)

        def hook(name):
            def pre(module, args):
                index, weights = self.routing[name][cursor[name]]
                cursor[name] += 1
                return (args[0], index, weights.to(args[2].dtype))

            return pre

        modules = experts_modules(model)
        assert set(modules) == set(self.routing), f"experts modules differ: {sorted(modules)} vs {sorted(self.routing)}"
        handles = [m.register_forward_pre_hook(hook(n)) for n, m in modules.items()]
        try:
            yield self
        finally:
            for h in handles:
                h.remove()
        assert cursor == {n: len(r) for n, r in self.routing.items()}, "replayed a different number of calls"


class ModuleCalls:
    """Records every call of a model's FP8 modules (inputs and output) and replays the inputs into
    the same-named modules of a model (or of the same model under reference_kernel())."""

    def __init__(self):
        self.calls: list[tuple[str, tuple, dict, torch.Tensor]] = []

    @contextlib.contextmanager
    def record(self, model):
        def hook(name):
            def post(module, args, kwargs, output):
                self.calls.append((name, args, kwargs, output))

            return post

        handles = [m.register_forward_hook(hook(n), with_kwargs=True) for n, m in fp8_modules(model).items()]
        try:
            yield self
        finally:
            for h in handles:
                h.remove()

    def compare(self, model, bounds: tuple[float, float], what: str, experts_bounds=None) -> RowErrors:
        """Each recorded output against `model`'s module on the same inputs (experts modules within
        `experts_bounds` when given); the worst rows."""
        assert self.calls, "no FP8 module was called"
        modules = dict(model.named_modules())
        experts = experts_modules(model)
        errors = []
        with torch.no_grad():
            for name, args, kwargs, output in self.calls:
                bound = experts_bounds if experts_bounds is not None and name in experts else bounds
                errors.append(assert_rows_close(output, modules[name](*args, **kwargs), bound, f"{what}, {name}"))
        return RowErrors(min(e.min_cosine for e in errors), max(e.max_rel_l2 for e in errors),
                         max(e.max_abs_over_max_ref for e in errors))  # fmt: skip


@dataclass
class RowErrors:
    min_cosine: float
    max_rel_l2: float
    max_abs_over_max_ref: float

    def __str__(self) -> str:
        return (f"min cosine {self.min_cosine:.6f}, max relative L2 {self.max_rel_l2:.3e}, "
                f"max|diff|/max|ref| {self.max_abs_over_max_ref:.3e}")  # fmt: skip


def row_errors(out: torch.Tensor, ref: torch.Tensor) -> RowErrors:
    """Per-row (last dimension) cosine similarity and relative L2 error, and the largest elementwise
    error relative to the largest reference magnitude."""
    assert out.shape == ref.shape, f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    got = out.detach().to(torch.float64).flatten(0, -2).cpu()
    want = ref.detach().to(torch.float64).flatten(0, -2).cpu()
    assert torch.isfinite(got).all(), "non-finite output"
    assert want.abs().amax() > 0, "all-zero reference: the comparison could not fail"
    cosine = torch.nn.functional.cosine_similarity(got, want, dim=-1)
    rel_l2 = (got - want).norm(dim=-1) / want.norm(dim=-1)
    return RowErrors(cosine.min().item(), rel_l2.max().item(), ((got - want).abs().amax() / want.abs().amax()).item())


def assert_rows_close(out, ref, bounds: tuple[float, float], what: str) -> RowErrors:
    min_cosine, max_rel_l2 = bounds
    errors = row_errors(out, ref)
    assert errors.min_cosine >= min_cosine and errors.max_rel_l2 <= max_rel_l2, (
        f"{what}: {errors} (bounds: cosine >= {min_cosine}, relative L2 <= {max_rel_l2})"
    )
    return errors


def input_ids(vocab_size: int, device: str, batch: int = 2, length: int = 9, seed: int = 1) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (batch, length), generator=gen).to(device)


# ---------------------------------------------------------------------------------------- checks


def check_logits(path: Path, device: str, scale_fmt: str, experts_implementation: str) -> str:
    """The kernel run against the same model whose every FP8 matmul is the float64 reference:
    each FP8 module on the inputs it received, then the logits."""
    model = load_fp8(path, device, experts_implementation)
    check_fp8_model(model, scale_fmt)
    ids = input_ids(model.config.vocab_size, device)
    replay, calls = RoutingReplay(), ModuleCalls()
    with torch.no_grad(), kernel_calls() as counts, replay.record(model), calls.record(model):
        logits = model(ids).logits
    expected_call = {"grouped_mm": "grouped_matmul", "batched_mm": "batched_matmul", "eager": "matmul"}
    assert counts["matmul"] > 0 and counts[expected_call[experts_implementation]] > 0, f"kernel calls {counts}"
    with torch.no_grad(), reference_kernel():
        modules = calls.compare(model, MODULE_REF64, "FP8 module vs float64 reference", MODULE_REF64_EXPERTS)
        with replay.replay(model):
            ref = model(ids).logits
    whole = assert_rows_close(logits, ref, LOGITS_REF64, "logits vs float64 reference")
    return f"modules: {modules}; logits: {whole}; kernel calls {counts}"


def check_dequantized(path: Path, device: str, experts_implementation: str = "grouped_mm") -> str:
    """The kernel run against transformers' dequantize=True bf16 model: the activation-quantization
    error, per FP8 module on the same inputs, then the logits."""
    model = load_fp8(path, device, experts_implementation)
    ids = input_ids(model.config.vocab_size, device)
    replay, calls = RoutingReplay(), ModuleCalls()
    with torch.no_grad(), replay.record(model), calls.record(model):
        logits = model(ids).logits
    bf16 = load_dequantized(path, device)
    modules = calls.compare(bf16, MODULE_DEQUANT, "FP8 module vs dequantized bf16")
    with torch.no_grad(), replay.replay(bf16):
        ref = bf16(ids).logits
    whole = assert_rows_close(logits, ref, LOGITS_DEQUANT, "logits vs dequantized bf16")
    return f"modules: {modules}; logits: {whole}"


def check_generate(path: Path, device: str) -> str:
    """32 new tokens eagerly (dynamic cache), then with a static cache under torch.compile with
    fullgraph=True: a graph break is an error."""
    from transformers import CompileConfig

    model = load_fp8(path, device, "grouped_mm")
    ids = input_ids(model.config.vocab_size, device, batch=1)
    common = dict(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False)
    with torch.no_grad():
        eager = model.generate(ids, **common)
    assert eager.shape == (1, ids.shape[1] + NEW_TOKENS), f"eager generate returned {tuple(eager.shape)}"

    torch._dynamo.reset()
    if hasattr(torch._dynamo.config, "error_on_graph_break"):
        torch._dynamo.config.error_on_graph_break = True
    compile_config = CompileConfig(fullgraph=True)
    compile_config._compile_all_devices = device == "cpu"  # transformers compiles on accelerators only
    from torch._dynamo.utils import counters

    counters.clear()
    with torch.no_grad():
        compiled = model.generate(ids, cache_implementation="static", compile_config=compile_config, **common)
    assert compiled.shape == eager.shape, f"compiled generate returned {tuple(compiled.shape)}"
    assert hasattr(model, "_compiled_call"), "generate did not compile the forward"
    assert counters["stats"]["unique_graphs"] > 0, "no graph was compiled"
    breaks = dict(counters["graph_break"])
    assert not breaks, f"graph breaks: {breaks}"
    same = (compiled == eager).float().mean().item()
    return f"{NEW_TOKENS} tokens eager and compiled (static cache, fullgraph); {same:.0%} of tokens equal"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--arch", nargs="+", default=list(TINY_CONFIGS), choices=list(TINY_CONFIGS))
    parser.add_argument("--kernel-root", type=Path, default=REPO_ROOT, help="directory holding build/<variant>/")
    parser.add_argument("--no-generate", action="store_true", help="skip the generate checks")
    args = parser.parse_args(argv)

    map_finegrained_fp8(args.kernel_root)
    import transformers

    kernel = loaded_kernel()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, device {args.device}"
          + (f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else ""))  # fmt: skip
    print(f"kernel: {kernel.__file__}")
    results: list[tuple[str, bool, str]] = []

    def run(name: str, check, *check_args) -> None:
        try:
            detail, ok = check(*check_args), True
        except Exception as e:  # every failure is reported, then the next check runs
            detail, ok = f"{type(e).__name__}: {e}", False
            traceback.print_exc()
        results.append((name, ok, detail))
        print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        for arch in args.arch:
            for scale_fmt in SCALE_FORMATS:
                path = write_fp8_checkpoint(arch, Path(tmp) / f"{arch}-{scale_fmt}", scale_fmt)
                for impl in EXPERTS_IMPLEMENTATIONS:
                    run(f"{arch} {scale_fmt} {impl}: logits vs float64", check_logits, path, args.device, scale_fmt, impl)
                run(f"{arch} {scale_fmt}: logits vs dequantize=True bf16", check_dequantized, path, args.device)
                if not args.no_generate:
                    run(f"{arch} {scale_fmt}: generate", check_generate, path, args.device)

    failed = [name for name, ok, _ in results if not ok]
    print(f"\n{'FAIL' if failed else 'PASS'}: {len(results) - len(failed)} of {len(results)} checks passed")
    for name in failed:
        print(f"  failed: {name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
