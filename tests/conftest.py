"""Test configuration shared by every test module.

The device under test comes from PRECRED_TEST_DEVICE ("cpu" by default, "cuda" on a GPU machine).
On the CPU the Triton kernels run under Triton's interpreter, which must be switched on before
triton is first imported, hence the environment variable is set here, at collection time.
"""
import contextlib
import os

DEVICE = os.environ.get("PRECRED_TEST_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402


def _patch_language_once_per_launch():
    """Triton 3.6's interpreter patches triton.language for a kernel's launch (GridExecutor: _patch_lang on
    the modules the kernel's globals hold, undone when the grid is done) and again at every call of a
    @triton.jit function from inside the kernel (InterpretedFunction.__call__), though those modules are
    patched already: inspect.getmembers over triton.language, its tensor and math modules at every call,
    38% of a profiled test's time (tests/test_sum_accuracy.py's tiny-tile sums). Here an inner call patches
    only where its function's globals hold a language module (triton.language, triton.language.core: the
    latter for Triton's own jit functions, tl.zeros) not yet patched during this launch -- as Triton does,
    its patches left in place -- then calls the function as Triton does. Tests only (precred leaves Triton
    as it is); PRECRED_TEST_REPATCH=1 runs Triton's interpreter unchanged, and tests/test_interpreter_patch.py
    holds outputs and gradients to Triton's bits (triton_interpreter_as_released). Returns the
    (GridExecutor, InterpretedFunction) calls: Triton's and these, or None where not installed."""
    import inspect
    import triton
    import triton.language as tl
    from triton.runtime import interpreter
    if triton.__version__ != "3.6.0" or os.environ.get("PRECRED_TEST_REPATCH") == "1":
        return None
    launch, call = interpreter.GridExecutor.__call__, interpreter.InterpretedFunction.__call__
    patched = [None]   # the language modules patched during the running launch; None outside launches
    languages = {}     # a function -> the language modules its globals hold (what _patch_lang patches)

    def languages_of(fn):
        if fn not in languages:
            languages[fn] = frozenset(id(v) for v in fn.__globals__.values()
                                      if inspect.ismodule(v) and v in (tl, tl.core))
        return languages[fn]

    def launch_patching_once(self, *args, **kwargs):
        outer, patched[0] = patched[0], set(languages_of(self.fn))   # launch's own _patch_lang(self.fn)
        try:
            return launch(self, *args, **kwargs)
        finally:
            patched[0] = outer

    def call_patching_once(self, *args, **kwargs):
        if patched[0] is None:
            return call(self, *args, **kwargs)
        missing = languages_of(self.fn) - patched[0]
        if missing:
            interpreter._patch_lang(self.fn)
            patched[0] |= missing
        fn = self.rewrite()
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            raise interpreter.InterpreterError(repr(e)) from e

    interpreter.GridExecutor.__call__ = launch_patching_once
    interpreter.InterpretedFunction.__call__ = call_patching_once
    return (launch, call), (launch_patching_once, call_patching_once)


INTERPRETER_CALLS = _patch_language_once_per_launch() if os.environ.get("TRITON_INTERPRET") == "1" else None


@contextlib.contextmanager
def triton_interpreter_as_released():
    """Triton's own GridExecutor / InterpretedFunction calls inside the block (the patch-once shim above
    undone), the shim's again after it."""
    from triton.runtime import interpreter
    (launch, call), shim = INTERPRETER_CALLS
    interpreter.GridExecutor.__call__, interpreter.InterpretedFunction.__call__ = launch, call
    try:
        yield
    finally:
        interpreter.GridExecutor.__call__, interpreter.InterpretedFunction.__call__ = shim


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped on the CPU interpreter)")
    config.addinivalue_line("markers", "large_memory: holds tens of GB of GPU memory; run apart from parallel "
                                       "workers (bench/gpu_suite.py)")


def pytest_collection_modifyitems(config, items):
    if DEVICE != "cuda":
        skip = pytest.mark.skip(reason="GPU-only test; set PRECRED_TEST_DEVICE=cuda on a GPU machine")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def device() -> str:
    if DEVICE == "cuda" and not torch.cuda.is_available():
        pytest.exit("PRECRED_TEST_DEVICE=cuda but torch sees no CUDA device", returncode=2)
    return DEVICE


def mode_takes(mode: str, *dtypes) -> bool:
    """Whether a sum mode takes these input/output dtypes: `exact` takes fp32, bf16 and fp16 only (it
    raises a TypeError on fp64, tested in test_exact.py)."""
    return mode != "exact" or torch.float64 not in dtypes


def equal_with_nan(a: torch.Tensor, b: torch.Tensor) -> bool:
    """torch.equal, NaN equal to NaN: the same shape, NaN in the same places, and the other values
    equal (== : -0.0 equals 0.0; inf only inf -- unlike a comparison after nan_to_num)."""
    nan_a, nan_b = a.isnan(), b.isnan()
    return (a.shape == b.shape and torch.equal(nan_a, nan_b)
            and torch.equal(torch.where(nan_a, 0, a), torch.where(nan_b, 0, b)))


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """torch.equal of the bit patterns for floating tensors (-0.0 and 0.0 differ, NaN equals the same
    NaN), of the values otherwise (indices); the same shape either way, 0-d tensors included (whose
    bits are viewed flat: a 0-d tensor has no last dim to view as bytes)."""
    def bits(t):
        return t.reshape(-1).view(torch.uint8) if t.is_floating_point() else t

    return a.shape == b.shape and torch.equal(bits(a), bits(b))


def assert_training_step_compiles_to_eagers_bits(f, x: torch.Tensor) -> None:
    """f(x) and its gradient (of the output's sum) compiled with aot_eager -- which traces the backward
    with fake tensors, as inductor does for a training step -- bitwise equal to eager's."""
    torch._dynamo.reset()
    results = []
    for fn in (f, torch.compile(f, fullgraph=True, backend="aot_eager")):
        xs = x.clone().requires_grad_()
        y = fn(xs)
        results.append((y.detach(), torch.autograd.grad(y.sum(), xs)[0]))
    assert all(torch.equal(a, b) for a, b in zip(*results))


def force_long_row_paths(monkeypatch, path: str, lanes: int = 64) -> None:
    """layer_norm / rms_norm: make rows of more than 16 elements take `path`, "streaming" (the Welford
    launch, then the normalizing pass) or "row-loop" (one program per row over `lanes` lanes), and the
    backward that reads rows twice (`lanes` lanes for the row sums, column blocks of lanes / 2 for dx).
    Callers clear plan_norm_backward's cache and the launch recipes."""
    from precred import plan as planner
    for table in (planner.NORM_FORWARD_MAX_ROW, planner.NORM_BACKWARD_MAX_ROW):
        monkeypatch.setitem(table, 4, 16)
        monkeypatch.setitem(table, 8, 16)
    monkeypatch.setattr(planner, "NORM_BACKWARD_LOOP_LANES", lanes)
    # the backward's columns kernel: several column blocks and row blocks (partial rows) on small inputs
    monkeypatch.setattr(planner, "NORM_BACKWARD_COLUMNS_TILE", (2, lanes // 2))
    if path == "row-loop":
        monkeypatch.setattr(planner, "ROW_LOOP_MIN_ROWS_PER_SM", 0)
        monkeypatch.setattr(planner, "NORM_ROW_LOOP_SHAPE", (lanes, 4))
    elif path == "streaming":
        monkeypatch.setattr(planner, "ROW_LOOP_MIN_ROWS_PER_SM", 10 ** 9)
    else:
        raise ValueError(path)
