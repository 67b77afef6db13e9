"""AOT autograd traces precred's ops -- forward and backward -- on its fake / functional tensors
without dynamo around it, where torch.compiler.is_compiling() is False: so did torch 2.11's AOT autograd
trace a compiled training step's backward (layer_norm's backward read a FakeTensor's data_ptr on an
H100). The kernels must be reached through their custom ops there (precred.checks.traced); the traced
functions then give eager's bits, gradients included."""
import pytest
import torch
from functorch.compile import aot_function, make_boxed_func

import precred

STEPS = {
    "layer_norm": lambda x, w: precred.layer_norm(x, (8,), w),
    "rms_norm": lambda x, w: precred.rms_norm(x, (8,), w),
    "var_mean": lambda x, w: precred.var_mean(x * w, 1)[0],
    "std": lambda x, w: precred.std(x * w, 1),
    "logsumexp": lambda x, w: precred.logsumexp(x * w, 1),
    "sum": lambda x, w: precred.sum(x * w, 1),
    "softmax": lambda x, w: precred.softmax(x * w, 1),
    "amax": lambda x, w: precred.amax(x * w, 1),
}


def _boxed(gm, example_inputs):
    return make_boxed_func(gm.forward)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("op", list(STEPS))
def test_aot_autograd_traces_forward_and_backward_to_eagers_bits(device, op, dtype):
    g = torch.Generator().manual_seed(0)
    x0, w0 = (torch.randn(shape, generator=g).to(device=device, dtype=dtype) for shape in [(4, 8), (8,)])
    step = STEPS[op]
    x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
    out = aot_function(step, fw_compiler=_boxed, bw_compiler=_boxed)(x, w)
    out.sum().backward()
    xe, we = x0.clone().requires_grad_(), w0.clone().requires_grad_()
    want = step(xe, we)
    want.sum().backward()
    assert torch.equal(out, want) and torch.equal(x.grad, xe.grad) and torch.equal(w.grad, we.grad)
