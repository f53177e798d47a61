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
    "bad", [torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.float8_e8m0fnu], ids=str
)
@pytest.mark.parametrize("which", ["a_scale", "b_scale"])
def test_scale_dtype(kernel, device, inputs, which, bad):
    a, b, a_scale, b_scale = inputs
    scales = {"a_scale": a_scale, "b_scale": b_scale}
    scales[which] = scales[which].abs().to(bad)
    with _raises(TypeError, f"{which} must be torch.float32", str(bad), ".float()"):
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
