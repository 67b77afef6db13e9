"""Inside torch.autocast, precred's ops give the dtypes torch's give (precred.autocast): torch runs
sum, prod, softmax and log_softmax of 16-bit input with dtype=float32 and casts layer_norm's and
logsumexp's inputs to fp32 on CUDA (prod alone on the CPU); the other reductions keep the input's dtype.
On the device under test (the CPU's policy in CI, CUDA's with PRECRED_TEST_DEVICE=cuda)."""
import pytest
import torch

import precred
from precred.autocast import INPUTS_FP32, OUTPUT_FP32, POLICIES

F = torch.nn.functional

# op -> (precred's call f(x, weight, bias, **kwargs), torch's call f(x, weight, bias))
CALLS = {
    "sum": (lambda x, w, b, **k: precred.sum(x, 1, **k), lambda x, w, b: torch.sum(x, 1)),
    "prod": (lambda x, w, b, **k: precred.prod(x, 1, **k), lambda x, w, b: torch.prod(x, 1)),
    "softmax": (lambda x, w, b, **k: precred.softmax(x, 1, **k), lambda x, w, b: torch.softmax(x, 1)),
    "log_softmax": (lambda x, w, b, **k: precred.log_softmax(x, 1, **k), lambda x, w, b: torch.log_softmax(x, 1)),
    "layer_norm": (lambda x, w, b: precred.layer_norm(x, (8,), w, b), lambda x, w, b: F.layer_norm(x, (8,), w, b)),
    "rms_norm": (lambda x, w, b: precred.rms_norm(x, (8,), w), lambda x, w, b: F.rms_norm(x, (8,), w)),
    "mean": (lambda x, w, b: precred.mean(x, 1), lambda x, w, b: torch.mean(x, 1)),
    "var": (lambda x, w, b: precred.var(x, 1), lambda x, w, b: torch.var(x, 1)),
    "logsumexp": (lambda x, w, b: precred.logsumexp(x, 1), lambda x, w, b: torch.logsumexp(x, 1)),
    "amax": (lambda x, w, b: precred.amax(x, 1), lambda x, w, b: torch.amax(x, 1)),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("op", list(CALLS))
def test_autocast_gives_torchs_dtypes_and_the_fp32_calls_values(device, op, dtype):
    g = torch.Generator().manual_seed(2)
    x, w, b = (torch.randn(shape, generator=g).to(device=device, dtype=dtype) for shape in [(4, 8), (8,), (8,)])
    x.requires_grad_()
    ours, theirs = CALLS[op]
    with torch.autocast(device_type=device, dtype=dtype):
        got = ours(x, w, b)
        want = theirs(x.detach(), w, b)
    assert got.dtype == want.dtype, (op, got.dtype, want.dtype)
    # The equivalent call outside autocast, bitwise: dtype=float32, or the inputs cast to fp32.
    policy = POLICIES.get(torch.device(device).type, {}).get(op)
    if policy == OUTPUT_FP32:
        same = ours(x.detach(), w, b, dtype=torch.float32)
    elif policy == INPUTS_FP32:
        same = ours(x.detach().float(), w.float(), b.float())
    else:
        same = ours(x.detach(), w, b)
    assert torch.equal(got.detach(), same), (op, got, same)
    got.sum().backward()   # the gradient reaches the 16-bit input, in its dtype
    assert x.grad.dtype == dtype and torch.isfinite(x.grad).all()


def test_explicit_dtype_and_fp32_inputs_are_left_alone(device):
    x = torch.randn(4, 8, device=device, dtype=torch.bfloat16)
    with torch.autocast(device_type=device, dtype=torch.bfloat16):
        assert precred.sum(x, 1, dtype=torch.bfloat16).dtype == torch.bfloat16
        assert precred.softmax(x.float(), 1).dtype == torch.float32
        assert precred.layer_norm(x.double(), (8,)).dtype == torch.float64
