"""The suite's interpreter shim (tests/conftest.py, _patch_language_once_per_launch: triton.language
patched once per launch instead of at every inner jit call) changes what the tests cost, never what
they see: every op's outputs and gradients have Triton's own interpreter's bits, and the shim does
skip the repeated patching (else it would be dead weight)."""
import pytest
import torch

import precred
from conftest import INTERPRETER_CALLS, same_bits, triton_interpreter_as_released

pytestmark = pytest.mark.skipif(INTERPRETER_CALLS is None,
                                reason="the interpreter shim is off (GPU run, PRECRED_TEST_REPATCH=1 or another Triton)")


def _layer_norm_and_grads(x, weight, bias):
    x, weight, bias = (t.clone().requires_grad_() for t in (x, weight, bias))
    y = precred.layer_norm(x, x.shape[-1:], weight, bias)
    return (y.detach(), *torch.autograd.grad((y * y).sum(), (x, weight, bias)))


def _calls():
    """One call per strategy and schedule family the trees merge: rows (inner), columns (outer), the
    exact filter, Welford, the stable exponential sum, the extrema, the product, a norm's backward."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(6, 300, generator=g) * 1e3 + 1e4
    bf16 = x.to(torch.bfloat16)
    small = torch.randn(5, 40, generator=g)
    weight, bias = torch.randn(300, generator=g), torch.randn(300, generator=g)
    return {
        "sum fast rows": lambda: precred.sum(x, -1),
        "sum kahan columns": lambda: precred.sum(x, 0, mode="kahan"),
        "mean pairwise bf16 columns": lambda: precred.mean(bf16, 0, mode="pairwise"),
        "sum exact bf16 rows": lambda: precred.sum(bf16, -1, mode="exact"),
        "sum exact columns": lambda: precred.sum(x, 0, mode="exact"),
        "var_mean columns": lambda: precred.var_mean(x, 0),
        "var rows fp64 mode": lambda: precred.var(x, -1, mode="fp64"),
        "logsumexp rows": lambda: precred.logsumexp(small * 30, -1),
        "logsumexp bf16 columns": lambda: precred.logsumexp(bf16 / 1e3, 0),
        "softmax rows": lambda: precred.softmax(small, -1),
        "log_softmax columns": lambda: precred.log_softmax(small, 0),
        "argmax columns": lambda: precred.argmax(bf16, 0),
        "amax rows": lambda: precred.amax(x, -1),
        "prod rows": lambda: precred.prod(1 + small / 100, -1),
        "layer_norm and its gradients": lambda: _layer_norm_and_grads(x, weight, bias),
    }


CALLS = _calls()


@pytest.mark.parametrize("name", list(CALLS))
def test_outputs_have_the_interpreters_own_bits(name):
    shimmed = CALLS[name]()
    with triton_interpreter_as_released():
        released = CALLS[name]()
    shimmed = shimmed if isinstance(shimmed, tuple) else (shimmed,)
    released = released if isinstance(released, tuple) else (released,)
    assert len(shimmed) == len(released)
    assert all(same_bits(a, b) for a, b in zip(shimmed, released))


def test_language_is_patched_once_per_launch(monkeypatch):
    """Per kernel launch, the shim patches triton.language at most twice (the kernel's modules, then
    triton.language.core for Triton's own jit functions); Triton's interpreter patches at every inner
    call, many more times for the same sums."""
    from triton.runtime import interpreter
    counts = {"patches": 0, "launches": 0}
    patch_lang, run = interpreter._patch_lang, interpreter.InterpretedFunction.run

    def counted_patch(fn):
        counts["patches"] += 1
        return patch_lang(fn)

    def counted_run(self, *args, **kwargs):
        counts["launches"] += 1
        return run(self, *args, **kwargs)

    monkeypatch.setattr(interpreter, "_patch_lang", counted_patch)
    monkeypatch.setattr(interpreter.InterpretedFunction, "run", counted_run)
    x = torch.randn(4, 300)
    precred.sum(x, 0, mode="kahan")
    shimmed = dict(counts)
    counts.update(patches=0, launches=0)
    with triton_interpreter_as_released():
        precred.sum(x, 0, mode="kahan")
    assert shimmed["launches"] == counts["launches"] >= 1
    assert shimmed["patches"] <= 2 * shimmed["launches"] < counts["patches"], (shimmed, counts)
