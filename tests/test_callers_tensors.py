"""Every public op leaves the caller's tensors as they were, in every mode, forward and backward: the
input, weight and bias, and the gradient fed to backward are views inside larger buffers (rows inside
a flat buffer, and a strided window of a 2-d one), so a stray write into them or next to them -- an
in-place finish writing through the wrong pointer, a tail past a row's end -- changes a buffer."""
import pytest
import torch

import precred

ROWS, N = 6, 40


def _views(buffer: torch.Tensor, layout: str) -> torch.Tensor:
    """A (ROWS, N) view of buffer: contiguous rows from an offset into it, or every other row and
    column of a window (non-contiguous, its neighbors in memory belonging to the buffer)."""
    if layout == "rows":
        return buffer.view(-1)[37:37 + ROWS * N].view(ROWS, N)
    return buffer[3:3 + 2 * ROWS:2, 5:5 + 2 * N:2]


def _buffer(seed: int, dtype, device) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(2 * ROWS + 8, 2 * N + 12, generator=gen, dtype=torch.float64).to(dtype).to(device)


def _first(out):
    """The differentiable float output of a call (values of (values, indices), var of (var, mean))."""
    return out[0] if isinstance(out, tuple) else out


# (name, call(x, mode, weight, bias), modes, differentiable)
CALLS = [
    ("sum", lambda x, m, w, b: precred.sum(x, dim=1, mode=m), list(precred.MODES), True),
    ("mean", lambda x, m, w, b: precred.mean(x, dim=0, mode=m), list(precred.MODES), True),
    ("sum-all", lambda x, m, w, b: precred.sum(x, mode=m), list(precred.MODES), True),
    ("var", lambda x, m, w, b: precred.var(x, 1, mode=m), list(precred.VAR_MODES), True),
    ("std", lambda x, m, w, b: precred.std(x, 0, mode=m), list(precred.VAR_MODES), True),
    ("var_mean", lambda x, m, w, b: precred.var_mean(x, 1, mode=m), list(precred.VAR_MODES), True),
    ("std_mean", lambda x, m, w, b: precred.std_mean(x, 0, mode=m), list(precred.VAR_MODES), True),
    ("logsumexp", lambda x, m, w, b: precred.logsumexp(x, 1, mode=m), list(precred.EXP_MODES), True),
    ("logsumexp-dim0", lambda x, m, w, b: precred.logsumexp(x, 0, mode=m), list(precred.EXP_MODES), True),
    ("softmax", lambda x, m, w, b: precred.softmax(x, 1, mode=m), list(precred.EXP_MODES), True),
    ("log_softmax", lambda x, m, w, b: precred.log_softmax(x, 0, mode=m), list(precred.EXP_MODES), True),
    ("prod", lambda x, m, w, b: precred.prod(x, 1, mode=m), list(precred.PROD_MODES), True),
    ("amax", lambda x, m, w, b: precred.amax(x, 1), [None], True),
    ("min", lambda x, m, w, b: precred.min(x, 0), [None], True),
    ("argmax", lambda x, m, w, b: precred.argmax(x, 1), [None], False),
    ("layer_norm", lambda x, m, w, b: precred.layer_norm(x, [N], w, b, mode=m), list(precred.NORM_MODES), True),
    ("rms_norm", lambda x, m, w, b: precred.rms_norm(x, [N], w, mode=m), list(precred.NORM_MODES), True),
]
CASES = [(name, call, mode, grad) for name, call, modes, grad in CALLS for mode in modes]


@pytest.mark.parametrize("layout", ["rows", "strided"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name, call, mode, grad", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_callers_tensors_untouched(name, call, mode, grad, dtype, layout, device):
    buffers = [_buffer(seed, dtype, device) for seed in range(4)]   # x, weight, bias, upstream gradient
    before = [b.clone() for b in buffers]
    x = _views(buffers[0], layout)
    w, b = buffers[1].view(-1)[11:11 + N], buffers[2].view(-1)[29:29 + N]
    if grad:
        x.requires_grad_()
        w.requires_grad_()
        b.requires_grad_()
    out = _first(call(x, mode, w, b))
    assert out.data_ptr() not in [t.data_ptr() for t in (x, w, b)]
    if grad:
        g = buffers[3].view(-1)[5:5 + out.numel()].view(out.shape)
        inputs = [x] + ([w, b] if name in ("layer_norm", "rms_norm") else [])
        torch.autograd.grad(out, inputs, g, allow_unused=True)
    for got, want in zip(buffers, before):
        assert torch.equal(got, want), name
