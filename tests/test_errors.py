"""Every bad input raises a Python exception naming the argument, the expected and the actual value.

Checked both through the public `gemm()` and through the raw op (`ops.gemm(out, a, b, a_scale,
b_scale)`), whose C++ checks must stand on their own.
"""

import pytest
import torch
from _helpers import fp8_dtypes_for, make_inputs

M, N, K = 65, 192, 300  # ceil(K/128) = 3, ceil(N/128) = 2


@pytest.fixture
def inputs(device):
    return make_inputs(M, N, K, device=device, fp8_dtype=fp8_dtypes_for(device)[0], seed=0)


def _out(device, shape=(M, N), dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device=device)


def _raises(exc, *fragments):
    """pytest.raises that also requires each fragment in the message."""

    class _Check:
        def __enter__(self):
            self.ctx = pytest.raises(exc)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc_info):
            suppressed = self.ctx.__exit__(*exc_info)
            message = str(self.info.value)
            for fragment in fragments:
                assert fragment in message, f"{fragment!r} not in {message!r}"
            return suppressed

    return _Check()


@pytest.mark.kernels_ci
@pytest.mark.parametrize("bad", [torch.bfloat16, torch.float8_e5m2, torch.int8, torch.float32])
def test_a_dtype(kernel, device, inputs, bad):
    a, b, a_scale, b_scale = inputs
    with _raises(TypeError, "a must be", "float8_e4m3fn", str(bad)):
        kernel.gemm(a.float().to(bad), b, a_scale, b_scale)


@pytest.mark.kernels_ci
def test_b_dtype(kernel, device, inputs):
    a, b, a_scale, b_scale = inputs
    with _raises(TypeError, "b must be torch.float8_e4m3fn or torch.float8_e4m3fnuz", "torch.float8_e5m2"):
        kernel.gemm(a, b.float().to(torch.float8_e5m2), a_scale, b_scale)
    with _raises(TypeError, "b must be", "torch.bfloat16"):
        kernel.gemm(a, b.float().bfloat16(), a_scale, b_scale)


def test_fnuz_refused_on_cuda(kernel, device):
    if device != "cuda" or torch.version.hip is not None:
        pytest.skip("fnuz is refused only on CUDA (NVIDIA)")
    a, b, a_scale, b_scale = make_inputs(M, N, K, device=device, fp8_dtype=torch.float8_e4m3fnuz)
    with _raises(TypeError, "a is torch.float8_e4m3fnuz, which is not supported on CUDA"):
        kernel.gemm(a, b, a_scale, b_scale)
    a_fn = a.float().to(torch.float8_e4m3fn)
    with _raises(TypeError, "b is torch.float8_e4m3fnuz, which is not supported on CUDA"):
        kernel.gemm(a_fn, b, a_scale, b_scale)


@pytest.mark.kernels_ci
@pytest.mark.parametrize(
    "bad", [torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.uint8], ids=str
)
@pytest.mark.parametrize("which", ["a_scale", "b_scale"])
def test_scale_dtype(kernel, device, inputs, which, bad):
    a, b, a_scale, b_scale = inputs
    scales = {"a_scale": a_scale, "b_scale": b_scale}
    scales[which] = scales[which].abs().to(bad)
    with _raises(TypeError, f"{which} must be torch.float32 or torch.float8_e8m0fnu", str(bad), ".float()"):
        kernel.gemm(a, b, scales["a_scale"], scales["b_scale"])


@pytest.mark.kernels_ci
def test_scale_shapes_off_by_one_block(kernel, device, inputs):
    a, b, a_scale, b_scale = inputs
    # K // 128 instead of ceil(K / 128).
    with _raises(ValueError, "a_scale must have shape [M, ceil(K/128)] = [65, 3]", "[65, 2]"):
        kernel.gemm(a, b, a_scale[:, :2], b_scale)
    with _raises(ValueError, "b_scale must have shape [ceil(N/128), ceil(K/128)] = [2, 3]", "[2, 2]"):
        kernel.gemm(a, b, a_scale, b_scale[:, :2])
    with _raises(ValueError, "b_scale", "= [2, 3]", "[1, 3]"):
        kernel.gemm(a, b, a_scale, b_scale[:1])
    with _raises(ValueError, "b_scale", "= [2, 3]", "[3, 3]"):
        kernel.gemm(a, b, a_scale, torch.cat([b_scale, b_scale[:1]]))
    # A transposed (non-square) scale is a shape error, not a silent reinterpretation.
    with _raises(ValueError, "a_scale", "[3, 65]"):
        kernel.ops.gemm(_out(device), a, b, a_scale.t().contiguous(), b_scale)
    with _raises(ValueError, "b_scale", "[3, 2]"):
        kernel.gemm(a, b, a_scale, b_scale.t())


@pytest.mark.kernels_ci
def test_k_and_n_mismatch(kernel, device, inputs):
    a, b, a_scale, b_scale = inputs
    with _raises(ValueError, "b must have shape [N, K] with K = a.shape[1] = 299", "[192, 300]"):
        kernel.ops.gemm(_out(device), a[:, :299], b, a_scale, b_scale)
    with _raises(ValueError, "K (a.shape[1]) must be >= 1, got 0"):
        kernel.gemm(a[:, :0], b[:, :0], a_scale[:, :0], b_scale[:, :0])
    with _raises(ValueError, "N (b.shape[0]) must be >= 1, got 0"):
        kernel.gemm(a, b[:0], a_scale, b_scale[:0])


@pytest.mark.kernels_ci
def test_out_argument(kernel, device, inputs):
    a, b, a_scale, b_scale = inputs
    with _raises(ValueError, "out must have shape (65, 192)", "(65, 191)"):
        kernel.gemm(a, b, a_scale, b_scale, out=_out(device, (M, N - 1)))
    with _raises(ValueError, "out must have shape [M, N] = [65, 192]", "[64, 192]"):
        kernel.ops.gemm(_out(device, (M - 1, N)), a, b, a_scale, b_scale)
    with _raises(TypeError, "out must be torch.bfloat16, torch.float16 or torch.float32", "torch.int32"):
        kernel.gemm(a, b, a_scale, b_scale, out=_out(device, dtype=torch.int32))
    for bad in (torch.float8_e4m3fn, torch.int8):
        with _raises(TypeError, "out_dtype must be torch.bfloat16, torch.float16 or torch.float32", str(bad)):
            kernel.gemm(a, b, a_scale, b_scale, out_dtype=bad)
    with _raises(TypeError, "out_dtype is torch.float16 but out has dtype torch.bfloat16"):
        kernel.gemm(a, b, a_scale, b_scale, out=_out(device), out_dtype=torch.float16)
    # Column-major or inner-strided out: refused (the result must land in `out` as given).
    with _raises(ValueError, "out must be row-major", "[1, 65]"):
        kernel.gemm(a, b, a_scale, b_scale, out=_out(device, (N, M)).t())
    with _raises(ValueError, "out must be row-major", "[384, 2]"):
        kernel.gemm(a, b, a_scale, b_scale, out=_out(device, (M, 2 * N))[:, ::2])
    with _raises(ValueError, "out's leading dims must be mergeable"):
        a3, as3 = a[:64].view(2, 32, K), a_scale[:64].view(2, 32, -1)
        kernel.gemm(a3, b, as3, b_scale, out=_out(device, (32, 2, N)).transpose(0, 1))


@pytest.mark.kernels_ci
def test_dims(kernel, device, inputs):
    a, b, a_scale, b_scale = inputs
    with _raises(ValueError, "b must be a 2-D tensor [N, K]", "(300,)"):
        kernel.gemm(a, b[0], a_scale, b_scale)
    with _raises(ValueError, "b must be a 2-D tensor [N, K]", "(1, 192, 300)"):
        kernel.gemm(a, b[None], a_scale, b_scale)
    with _raises(ValueError, "a must have shape [..., K]", "0-D"):
        kernel.gemm(a[0, 0], b, a_scale, b_scale)
    with _raises(ValueError, "a_scale must have shape [..., ceil(K/128)]", "(65, 3)", "(5, 13)"):
        kernel.gemm(a.view(5, 13, K), b, a_scale, b_scale)
    with _raises(ValueError, "b_scale must be a 2-D tensor", "1-D"):
        kernel.gemm(a, b, a_scale, b_scale.flatten())
    # The raw op takes 2-D tensors only; the wrapper flattens batch dims.
    with _raises(ValueError, "a must be a 2-D tensor [M, K]", "3-D"):
        kernel.ops.gemm(_out(device), a[None], b, a_scale, b_scale)
    with _raises(ValueError, "out must be a 2-D tensor [M, N]", "1-D"):
        kernel.ops.gemm(_out(device, (M * N,)), a, b, a_scale, b_scale)


ARGUMENTS = ("a", "b", "a_scale", "b_scale")


@pytest.mark.kernels_ci
@pytest.mark.parametrize("name", ["b", "a_scale", "b_scale", "out"])
def test_tensor_on_meta(kernel, device, inputs, name):
    # A `meta` tensor among real ones dispatches the op to its fake implementation, which used to
    # write nothing: the call returned uninitialized memory. Through the wrapper and the raw op.
    args = dict(zip(ARGUMENTS, inputs), out=_out(device))
    args[name] = args[name].to("meta")
    expected = f"expected {name} on {torch.device(device, 0) if device == 'cuda' else device}"
    with _raises(ValueError, "all tensors must be on one device", expected, "got meta"):
        kernel.gemm(**args)
    with _raises(ValueError, "all tensors must be on one device", expected, "got meta"):
        kernel.ops.gemm(args["out"], *(args[n] for n in ARGUMENTS))
    if name != "out":  # gemm() without out on 2-D operands leaves the device check to the op
        with _raises(ValueError, "all tensors must be on one device", expected, "got meta"):
            kernel.gemm(*(args[n] for n in ARGUMENTS))


@pytest.mark.kernels_ci
def test_all_on_meta_is_shape_only(kernel, device, inputs):
    # Meta tensors everywhere are legitimate (shape propagation): no error, nothing computed.
    a, b, a_scale, b_scale = (t.to("meta") for t in inputs)
    out = kernel.gemm(a, b, a_scale, b_scale)
    assert out.device.type == "meta" and out.shape == (M, N)


def test_mixed_devices(kernel, device, inputs):
    if device != "cuda":
        pytest.skip("needs a GPU next to the CPU")
    a, b, a_scale, b_scale = inputs
    with _raises(ValueError, "all tensors must be on one device", "expected b_scale on cuda:0", "got cpu"):
        kernel.gemm(a, b, a_scale, b_scale.cpu())
    with _raises(ValueError, "all tensors must be on one device", "expected out on cuda:0", "got cpu"):
        kernel.gemm(a, b, a_scale, b_scale, out=_out("cpu"))
    # The raw op: the binding's own check (the dispatcher picks the GPU kernel).
    with _raises(ValueError, "all tensors must be on one device", "expected b_scale on cuda:0", "got cpu"):
        kernel.ops.gemm(_out(device), a, b, a_scale, b_scale.cpu())
    if torch.cuda.device_count() >= 2:
        with _raises(ValueError, "all tensors must be on one device", "expected b on cuda:0", "got cuda:1"):
            kernel.gemm(a, b.to("cuda:1"), a_scale, b_scale)
    # All on the CPU, with the GPU build loaded: a clear refusal, not the dispatcher's generic error.
    with _raises(ValueError, "this build of gemm runs on", "a is on cpu"):
        kernel.gemm(a.cpu(), b.cpu(), a_scale.cpu(), b_scale.cpu())


@pytest.mark.kernels_ci
def test_m_zero_still_validates(kernel, device, inputs):
    # An empty batch returns early, but only after every check: a bad call must not pass silently.
    a, b, a_scale, b_scale = inputs
    with _raises(ValueError, "b_scale"):
        kernel.gemm(a[:0], b, a_scale[:0], b_scale[:, :2])
    with _raises(TypeError, "a_scale must be torch.float32"):
        kernel.gemm(a[:0], b, a_scale[:0].double(), b_scale)


# --- matmul_2d / matmul_grouped / matmul_batched / grouped_gemm --------------------------------------

E = 4


@pytest.fixture
def dense(device):
    """(x bf16 [M, K], B [N, K] FP8, Bs [2, 3] fp32) for matmul_2d."""
    _, b, _, b_scale = make_inputs(1, N, K, device=device, fp8_dtype=fp8_dtypes_for(device)[0], seed=1)
    return torch.randn(M, K, device=device).bfloat16(), b, b_scale


@pytest.fixture
def moe(device):
    """(x bf16 [M, K], B [E, N, K] FP8, Bs [E, 2, 3] fp32, offsets int32 [E])."""
    fp8 = fp8_dtypes_for(device)[0]
    b = torch.randn(E, N, K, device=device).to(fp8)
    b_scale = torch.rand(E, 2, 3, device=device)
    offsets = torch.tensor([10, 10, 40, 65], dtype=torch.int32, device=device)
    return torch.randn(M, K, device=device).bfloat16(), b, b_scale, offsets


@pytest.mark.kernels_ci
def test_matmul_2d_block_size(kernel, device, dense):
    x, b, b_scale = dense
    for bad, shown in (([64, 64], "[64, 64]"), ((128, 64), "[128, 64]"), (128, "128"), ([128], "[128]")):
        with _raises(ValueError, "matmul_2d: block_size must be [128, 128]", f"got {shown}"):
            kernel.matmul_2d(x, b, b_scale, bad)
    with _raises(ValueError, "block_size None means one weight scale per matrix", "Bs must have 1 element", "(2, 3)"):
        kernel.matmul_2d(x, b, b_scale, None)


@pytest.mark.kernels_ci
def test_matmul_2d_weight_scale(kernel, device, dense):
    x, b, b_scale = dense
    with _raises(ValueError, "matmul_2d: Bs must have shape [ceil(N/128), ceil(K/128)] = [2, 3]", "[2, 2]"):
        kernel.matmul_2d(x, b, b_scale[:, :2], [128, 128])  # K // 128 instead of ceil
    with _raises(ValueError, "Bs must have shape", "[3, 2]"):
        kernel.matmul_2d(x, b, b_scale.t(), [128, 128])
    for bad in (torch.bfloat16, torch.float64, torch.int32, torch.float8_e4m3fn):
        with _raises(TypeError, "matmul_2d: Bs must be torch.float32 or torch.float8_e8m0fnu", str(bad)):
            kernel.matmul_2d(x, b, b_scale.to(bad), [128, 128])


@pytest.mark.kernels_ci
def test_matmul_2d_operands(kernel, device, dense):
    x, b, b_scale = dense
    with _raises(TypeError, "matmul_2d: A must be torch.bfloat16, torch.float16 or torch.float32", "float8_e4m3fn", "gemm()"):
        kernel.matmul_2d(x.float().to(torch.float8_e4m3fn), b, b_scale, [128, 128])
    with _raises(TypeError, "matmul_2d: A must be", "torch.int32"):
        kernel.matmul_2d(x.int(), b, b_scale, [128, 128])
    with _raises(TypeError, "matmul_2d: B must be torch.float8_e4m3fn or torch.float8_e4m3fnuz", "torch.bfloat16"):
        kernel.matmul_2d(x, b.float().bfloat16(), b_scale, [128, 128])
    with _raises(ValueError, "matmul_2d: B must be a 2-D tensor [N, K]", "(1, 192, 300)"):
        kernel.matmul_2d(x, b[None], b_scale, [128, 128])
    with _raises(ValueError, "matmul_2d: A must have shape [..., K] with K = B.shape[1] = 300", "(65, 299)"):
        kernel.matmul_2d(x[:, :299], b, b_scale, [128, 128])
    with _raises(TypeError, "matmul_2d: output_dtype must be torch.bfloat16, torch.float16 or torch.float32", "torch.int8"):
        kernel.matmul_2d(x, b, b_scale, [128, 128], torch.int8)
    with _raises(ValueError, "matmul_2d: activation_scale must be a per-tensor scale (1 element)", "(2,)"):
        kernel.matmul_2d(x, b, b_scale, [128, 128], activation_scale=torch.ones(2, device=device))
    with _raises(TypeError, "matmul_2d: activation_scale must be a floating-point tensor", "torch.int32"):
        kernel.matmul_2d(x, b, b_scale, [128, 128], activation_scale=torch.ones(1, dtype=torch.int32, device=device))


@pytest.mark.kernels_ci
def test_new_entry_points_check_devices(kernel, device, dense, moe):
    x, b, b_scale = dense
    with _raises(ValueError, "matmul_2d: all tensors must be on one device; expected Bs on", "got meta"):
        kernel.matmul_2d(x, b, b_scale.to("meta"), [128, 128])
    with _raises(ValueError, "matmul_2d", "expected activation_scale on", "got meta"):
        kernel.matmul_2d(x, b, b_scale, [128, 128], activation_scale=torch.ones((), device="meta"))
    x, b, b_scale, offsets = moe
    with _raises(ValueError, "matmul_grouped: all tensors must be on one device; expected offsets on", "got meta"):
        kernel.matmul_grouped(x, b, b_scale, offsets.to("meta"), None, [128, 128])
    with _raises(ValueError, "matmul_batched", "expected expert_ids on", "got meta"):
        kernel.matmul_batched(x, b, b_scale, torch.zeros(M, dtype=torch.int64, device="meta"), [128, 128])
    with _raises(ValueError, "grouped_gemm", "expected b on", "got meta"):
        kernel.grouped_gemm(x.float().to(b.dtype), b.to("meta"), torch.ones(M, 3, device=device), b_scale, offsets=offsets)


@pytest.mark.kernels_ci
def test_grouped_routing(kernel, device, moe):
    x, b, b_scale, offsets = moe
    with _raises(TypeError, "matmul_grouped: offsets must be torch.int32 or torch.int64", "torch.float32"):
        kernel.matmul_grouped(x, b, b_scale, offsets.float(), None, [128, 128])
    with _raises(ValueError, "matmul_grouped: offsets must have shape [E] = [4]", "[3]"):
        kernel.matmul_grouped(x, b, b_scale, offsets[:3], None, [128, 128])
    with _raises(ValueError, "matmul_grouped: offsets or tokens_per_expert must be given, got neither"):
        kernel.matmul_grouped(x, b, b_scale, None, None, [128, 128])
    with _raises(TypeError, "tokens_per_expert must be torch.int32 or torch.int64 or torch.float32", "torch.float16"):
        kernel.matmul_grouped(x, b, b_scale, None, offsets.half(), [128, 128])
    for bad in (torch.float32, torch.bool, torch.int16):
        with _raises(TypeError, "matmul_batched: expert_ids must be torch.int32 or torch.int64", str(bad)):
            kernel.matmul_batched(x, b, b_scale, torch.zeros(M, device=device).to(bad), [128, 128])
    with _raises(ValueError, "matmul_batched: expert_ids must have shape [M] = [65]", "[64]"):
        kernel.matmul_batched(x, b, b_scale, torch.zeros(M - 1, dtype=torch.int64, device=device), [128, 128])


@pytest.mark.kernels_ci
def test_grouped_weights(kernel, device, moe):
    x, b, b_scale, offsets = moe
    with _raises(ValueError, "matmul_grouped: Bs must have shape [E, ceil(N/128), ceil(K/128)] = [4, 2, 3]", "[3, 2, 3]"):
        kernel.matmul_grouped(x, b, b_scale[:3], offsets, None, [128, 128])
    with _raises(ValueError, "matmul_batched: B must be a 3-D tensor [E, N, K]", "(192, 300)"):
        kernel.matmul_batched(x, b[0], b_scale[0], torch.zeros(M, dtype=torch.int64, device=device), [128, 128])
    with _raises(ValueError, "matmul_grouped: A must be a 2-D tensor [M, K]", "(1, 65, 300)"):
        kernel.matmul_grouped(x[None], b, b_scale, offsets, None, [128, 128])
    with _raises(ValueError, "matmul_grouped: block_size must be [128, 128]", "[64, 128]"):
        kernel.matmul_grouped(x, b, b_scale, offsets, None, [64, 128])
    with _raises(TypeError, "matmul_grouped: Bs must be torch.float32 or torch.float8_e8m0fnu", "torch.float16"):
        kernel.matmul_grouped(x, b, b_scale.half(), offsets, None, [128, 128])


@pytest.mark.kernels_ci
def test_grouped_gemm_arguments(kernel, device, moe):
    x, b, b_scale, offsets = moe
    a, a_scale = x.float().to(b.dtype), torch.rand(M, 3, device=device)
    ids = torch.zeros(M, dtype=torch.int64, device=device)
    with _raises(ValueError, "grouped_gemm: exactly one of offsets, expert_ids, masked_m must be given", "['offsets', 'expert_ids']"):
        kernel.grouped_gemm(a, b, a_scale, b_scale, offsets=offsets, expert_ids=ids)
    with _raises(ValueError, "grouped_gemm: exactly one of", "none"):
        kernel.grouped_gemm(a, b, a_scale, b_scale)
    with _raises(ValueError, "grouped_gemm: a must be [E, max_m, K] and a_scale [E, max_m, ceil(K/128)]", "(65, 300)"):
        kernel.grouped_gemm(a, b, a_scale, b_scale, masked_m=torch.ones(E, dtype=torch.int32, device=device))
    with _raises(ValueError, "grouped_gemm: a must have shape [E, max_m, K] with E = b.shape[0] = 4", "(5, 13, 300)"):
        kernel.grouped_gemm(a.view(5, 13, K), b, a_scale.view(5, 13, 3), b_scale, masked_m=torch.ones(E, dtype=torch.int32, device=device))
    with _raises(ValueError, "grouped_gemm: out must have shape (65, 192)", "(65, 191)"):
        kernel.grouped_gemm(a, b, a_scale, b_scale, offsets=offsets, out=_out(device, (M, N - 1)))
    with _raises(TypeError, "grouped_gemm: out_dtype is torch.float16 but out has dtype torch.bfloat16"):
        kernel.grouped_gemm(a, b, a_scale, b_scale, offsets=offsets, out=_out(device), out_dtype=torch.float16)
    with _raises(ValueError, "grouped_gemm: b must be a 3-D tensor [E, N, K]", "(192, 300)"):
        kernel.grouped_gemm(a, b[0], a_scale, b_scale, offsets=offsets)
    for hint in (2.5, True, torch.tensor(4)):
        with _raises(TypeError, "grouped_gemm: expected_m must be an int", type(hint).__name__):
            kernel.grouped_gemm(a, b, a_scale, b_scale, offsets=offsets, expected_m=hint)
    with _raises(ValueError, "grouped_gemm: expected_m must be >= 1", "got 0"):
        kernel.grouped_gemm(a, b, a_scale, b_scale, offsets=offsets, expected_m=0)
    with _raises(ValueError, "grouped_gemm: expected_rows must be >= 0 (0: no hint)", "got -1"):
        kernel.ops.grouped_gemm(_out(device), a, b, a_scale, b_scale, offsets, None, None, -1)


def test_grouped_offsets_values_checked_on_cpu(kernel, device, moe):
    # Device data is host-readable only on the CPU; GPU kernels clamp segments instead (README).
    if device != "cpu":
        pytest.skip("routing values are checked where they are host-readable: the CPU backend")
    x, b, b_scale, _ = moe
    decreasing = torch.tensor([10, 5, 40, 65], dtype=torch.int32)
    with _raises(RuntimeError, "group_ends must be non-decreasing", "group_ends[1] = 5 after 10"):
        kernel.matmul_grouped(x, b, b_scale, decreasing, None, [128, 128])
    with _raises(RuntimeError, "group_ends must be <= M = 65", "group_ends[3] = 70"):
        kernel.matmul_grouped(x, b, b_scale, None, torch.tensor([10.0, 0, 30, 30]), [128, 128])


# Every entry point, each of its required tensor arguments replaced by None or a number: a TypeError naming
# the argument, not an AttributeError from inside the wrapper.
ENTRY_POINTS = {
    "gemm": ("a", "b", "a_scale", "b_scale"),
    "grouped_gemm": ("a", "b", "a_scale", "b_scale"),
    "matmul_2d": ("A", "B", "Bs"),
    "matmul_batched": ("A", "B", "Bs"),
    "matmul_grouped": ("A", "B", "Bs"),
    "quantize_activation": ("x",),
    "quantize_weight": ("w",),
}


@pytest.mark.kernels_ci
@pytest.mark.parametrize("bad", [None, 3])
@pytest.mark.parametrize("entry, name", [(e, n) for e, names in ENTRY_POINTS.items() for n in names])
def test_non_tensor_arguments(kernel, device, inputs, moe, entry, name, bad):
    a, b, a_scale, b_scale = inputs
    x, b3, b3_scale, offsets = moe
    kwargs = {
        "gemm": dict(a=a, b=b, a_scale=a_scale, b_scale=b_scale),
        "grouped_gemm": dict(a=x.float().to(b3.dtype), b=b3, a_scale=torch.rand(M, 3, device=device),
                             b_scale=b3_scale, offsets=offsets),
        "matmul_2d": dict(A=x, B=b, Bs=b_scale, block_size=[128, 128]),
        "matmul_batched": dict(A=x, B=b3, Bs=b3_scale, expert_ids=torch.zeros(M, dtype=torch.int64, device=device),
                               block_size=[128, 128]),
        "matmul_grouped": dict(A=x, B=b3, Bs=b3_scale, offsets=offsets, tokens_per_expert=None, block_size=[128, 128]),
        "quantize_activation": dict(x=x),
        "quantize_weight": dict(w=x),
    }[entry]
    getattr(kernel, entry)(**kwargs)  # the baseline call is valid
    kwargs[name] = bad
    with _raises(TypeError, f"{name} must be a torch.Tensor, got {type(bad).__name__}"):
        getattr(kernel, entry)(**kwargs)


@pytest.mark.kernels_ci
def test_written_tensors_must_not_share_memory(kernel, device, moe):
    fp8 = fp8_dtypes_for(device)[0]
    m, n, k = 4, 64, 128  # a bf16 [m, n] out viewed as FP8 is an [m, k] a
    out = torch.zeros(m, n, dtype=torch.bfloat16, device=device)
    b = torch.randn(n, k, device=device).to(fp8)
    ones = torch.ones(m, 1, device=device), torch.ones(1, 1, device=device)
    with _raises(ValueError, "gemm: out must not share memory with a"):
        kernel.ops.gemm(out, out.view(fp8), b, *ones)
    with _raises(ValueError, "gemm: out must not share memory with a"):
        kernel.gemm(out.view(fp8), b, *ones, out=out)
    out32 = torch.ones(m, n, device=device)
    with _raises(ValueError, "gemm: out must not share memory with a_scale"):
        kernel.ops.gemm(out32, out.view(fp8), b, out32.view(-1)[:m].view(m, 1), ones[1])
    # q and scale carved from one buffer, overlapping.
    buf = torch.empty(m * k, dtype=fp8, device=device)
    q, scale = buf.view(m, k), buf[: 4 * m].view(torch.float32).view(m, 1)
    with _raises(ValueError, "quantize: q must not share memory with scale"):
        kernel.ops.quantize(q, scale, torch.randn(m, k, device=device).bfloat16(), None, False)
    x = torch.randn(m, k, device=device)
    with _raises(ValueError, "quantize: q must not share memory with x"):
        kernel.ops.quantize(x.view(fp8).view(-1)[: m * k].view(m, k), torch.empty(m, 1, device=device), x, None, False)
    # linear: out is x (N = K).
    xb, w = x.bfloat16(), torch.randn(k, k, device=device).to(fp8)
    with _raises(ValueError, "linear: out must not share memory with x"):
        kernel.ops.linear(xb, xb, w, ones[1], None, False)
    x3, b3, b3_scale, offsets = moe
    a3 = x3.float().to(b3.dtype)
    out3 = torch.ones(M, N, device=device)
    with _raises(ValueError, "grouped_gemm: out must not share memory with b_scale"):
        kernel.ops.grouped_gemm(out3, a3, b3, torch.ones(M, 3, device=device), out3.view(-1)[: b3_scale.numel()].view(b3_scale.shape),
                                offsets, None)
