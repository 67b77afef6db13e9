"""layer_norm / rms_norm semantics against torch.nn.functional: shapes and normalized dims, optional
weight / bias, dtypes, layouts, empty inputs, NaN / inf, errors naming the argument, the caller's
tensors untouched, autograd (gradcheck in fp64 on both paths), torch.compile, bitwise determinism of
forward and backward, and the nn modules. Accuracy against the oracle: test_norm_accuracy."""
import math

import pytest
import torch
import triton
import triton.language as tl
import torch.nn.functional as F

import precred
from precred.schedules.norm_rows import opaque_copy, runtime_zero
from precred import plan as planner
from precred.norm_launch import _RECIPES as norm_recipes
from precred import norm_launch as norm_launch_module
from precred.plan import plan_norm_backward

from conftest import equal_with_nan, force_long_row_paths

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
# A sanity tolerance for the semantics (shapes, dims, layouts, eps=None, which grads), not the accuracy
# claim: agreement with torch in fp64 relative to the outputs' scale, 5-6 units of roundoff for 16-bit
# outputs, up to ~70 (fp32) and ~900 (fp64) where the backward's sums add up. The bounds themselves are
# asserted against the exact oracle in test_norm_accuracy (weight / bias present or not, every dtype).
TOLERANCE = {torch.float32: 4e-6, torch.float64: 1e-13, torch.bfloat16: 2e-2, torch.float16: 3e-3}


@pytest.fixture(params=["on-chip", "streaming", "row-loop"])
def path(request, monkeypatch):
    if request.param != "on-chip":
        force_long_row_paths(monkeypatch, request.param, lanes=32)
    plan_norm_backward.cache_clear()
    norm_recipes.clear()      # CUDA launch recipes replay the path they were made on
    yield request.param
    plan_norm_backward.cache_clear()
    norm_recipes.clear()


def _inputs(shape, normalized, dtype, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g, dtype=torch.float64) * 2 + 0.5).to(dtype).to(device)
    w = (torch.rand(normalized, generator=g, dtype=torch.float64) + 0.5).to(dtype).to(device)
    b = torch.randn(normalized, generator=g, dtype=torch.float64).to(dtype).to(device)
    return x, w, b


def _close(a, ref, dtype, tolerance=None):
    """a, of dtype, within tolerance (default TOLERANCE[dtype]) of ref relative to the outputs' scale."""
    assert a.shape == ref.shape and a.dtype == dtype
    scale = max(1.0, ref.double().abs().max().item())
    assert (a.double() - ref.double()).abs().max().item() <= (tolerance or TOLERANCE[dtype]) * scale


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape,normalized", [((6, 40), [40]), ((2, 3, 4, 10), [4, 10]), ((33,), [33])])
def test_matches_torch(shape, normalized, dtype, path, device):
    x, w, b = _inputs(shape, normalized, dtype, device)
    f = lambda t: t.double()  # noqa: E731
    for weight, bias in [(w, b), (None, b), (w, None), (None, None)]:
        ref = F.layer_norm(f(x), normalized, f(weight) if weight is not None else None,
                           f(bias) if bias is not None else None, 1e-5)
        _close(precred.layer_norm(x, normalized, weight, bias, 1e-5), ref, dtype)
    for weight in (w, None):
        ref = F.rms_norm(f(x), normalized, f(weight) if weight is not None else None,
                         precred_eps_default(dtype))
        _close(precred.rms_norm(x, normalized, weight), ref, dtype)   # eps=None: as torch's kernels


@pytest.mark.parametrize("x_dtype, p_dtype", [(torch.bfloat16, torch.float32), (torch.float32, torch.float64),
                                               (torch.float32, torch.bfloat16)], ids=str)
def test_parameters_of_another_dtype(x_dtype, p_dtype, device):
    """weight / bias of a float dtype other than x's (layer_norm's docstring): read as they are, the
    output in x's dtype, their gradients in their own dtypes -- as torch's CUDA kernel for 16-bit x with
    fp32 parameters."""
    x, w, b = _inputs((6, 40), [40], x_dtype, device)
    w, b = w.to(p_dtype).requires_grad_(True), b.to(p_dtype).requires_grad_(True)
    f = lambda t: t.detach().double()  # noqa: E731
    _close(precred.layer_norm(x, [40], w, b), F.layer_norm(f(x), [40], f(w), f(b), 1e-5), x_dtype)
    _close(precred.rms_norm(x, [40], w), F.rms_norm(f(x), [40], f(w), precred_eps_default(x_dtype)), x_dtype)
    precred.layer_norm(x, [40], w, b).sum().backward()
    wr, br = f(w).requires_grad_(True), f(b).requires_grad_(True)
    F.layer_norm(f(x), [40], wr, br, 1e-5).sum().backward()
    # fp32 arithmetic (x is not fp64), rounded to the parameters' dtype
    tolerance = max(TOLERANCE[torch.float32], TOLERANCE[p_dtype])
    _close(w.grad, wr.grad, p_dtype, tolerance)
    _close(b.grad, br.grad, p_dtype, tolerance)


def precred_eps_default(dtype):
    return torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32).eps


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rms_norm_default_eps_is_torchs(dtype, device):
    """eps=None is the epsilon of the type torch's kernels compute in (fp32's for 16-bit input, not
    finfo(bf16).eps = 2^-7, which torch's docstring names): rows whose mean square is near 2^-7 tell the
    two apart by far more than the tolerance (0.07 against 1.0 for a row of one 0.0062)."""
    values = torch.tensor([[0.0062], [0.03], [-0.05], [0.2]], dtype=torch.float64)
    x = torch.cat([values, values * 0.5], 1).to(dtype)
    for normalized in ([1], [2]):
        rows = x[:, :normalized[0]].contiguous()
        got = precred.rms_norm(rows.to(device), normalized)
        want = F.rms_norm(rows, normalized)   # torch on the CPU, eps=None, in the input dtype
        _close(got.cpu(), want, dtype)
        assert torch.equal(got, precred.rms_norm(rows.to(device), normalized, eps=precred_eps_default(dtype)))
        module = precred.nn.RMSNorm(normalized, dtype=dtype, device=device)
        assert module.eps is None and torch.equal(module(rows.to(device)), got)


def test_non_contiguous_and_expanded_inputs(device):
    x, w, b = _inputs((40, 6), [6], torch.float32, device)
    xt = x.t().contiguous().t()                                   # strided rows
    _close(precred.layer_norm(xt, [6], w, b), F.layer_norm(xt.double(), [6], w.double(),
                                                            b.double()), torch.float32)
    e = x[:1].expand(5, 6)                                        # stride-0 rows
    _close(precred.rms_norm(e, [6], w), F.rms_norm(e.double(), [6], w.double(), precred_eps_default(torch.float32)),
           torch.float32)


def test_empty_inputs(device):
    x = torch.empty(0, 8, device=device)
    assert precred.layer_norm(x, [8]).shape == (0, 8)
    x = torch.empty(3, 0, device=device)
    assert precred.rms_norm(x, [0]).shape == (3, 0)


@pytest.mark.parametrize("special", [math.nan, math.inf, -math.inf])
def test_nan_and_inf_follow_torch(special, path, device):
    x, w, b = _inputs((3, 20), [20], torch.float32, device)
    x[1, 5] = special
    ref = F.layer_norm(x.double(), [20], w.double(), b.double())
    got = precred.layer_norm(x, [20], w, b)
    assert torch.equal(got.isnan(), ref.isnan()) and got[1].isnan().all()
    # torch's fp32 rms_norm (CPU and CUDA alike): mean(x^2) = inf, rstd 0, so the row's finite elements
    # give 0 and the inf NaN. (torch's fp64 CUDA kernel makes the whole row NaN: the same dtype is the
    # reference.)
    ref = F.rms_norm(x, [20], w, 1e-6)
    got = precred.rms_norm(x, [20], w, 1e-6)
    assert torch.equal(got.isnan(), ref.isnan())
    assert equal_with_nan(got[1], ref[1])


def test_errors_name_the_argument(device):
    x, w, b = _inputs((4, 8), [8], torch.float32, device)
    with pytest.raises(TypeError, match="input"):
        precred.layer_norm(torch.ones(4, 8, dtype=torch.int32, device=device), [8])
    with pytest.raises(RuntimeError, match="normalized_shape"):
        precred.layer_norm(x, [4])
    with pytest.raises(TypeError, match="normalized_shape"):
        precred.layer_norm(x, 8.0)
    with pytest.raises(ValueError, match="normalized_shape"):
        precred.layer_norm(x, [])
    with pytest.raises(RuntimeError, match="weight"):
        precred.layer_norm(x, [8], w[:4])
    with pytest.raises(TypeError, match="bias"):
        precred.layer_norm(x, [8], w, b.to(torch.int64))
    with pytest.raises(ValueError, match="eps"):
        precred.rms_norm(x, [8], w, -1.0)
    with pytest.raises(TypeError, match="eps"):
        precred.layer_norm(x, [8], eps="1e-5")
    with pytest.raises(TypeError, match="eps"):   # unhashable: was the signature cache's bare TypeError
        precred.layer_norm(x, [8], eps=[1e-5])
    with pytest.raises(TypeError, match="eps"):
        precred.rms_norm(x, [8], w, {1e-5: 1})
    with pytest.raises(ValueError, match="mode"):
        precred.layer_norm(x, [8], mode="exact")


def test_remembered_signatures_still_reject_bad_arguments(device):
    """Calls whose signature passed the checks skip them (ops.normalization._CHECKED); arguments that
    hash like accepted ones (True like 1) are still rejected."""
    x, w, _ = _inputs((4, 1), [1], torch.float32, device)
    for _ in range(2):
        precred.rms_norm(x, 1, w, 1)
        precred.layer_norm(x, [1], w)
    with pytest.raises(TypeError, match="eps"):
        precred.rms_norm(x, 1, w, True)
    with pytest.raises(TypeError, match="normalized_shape"):
        precred.layer_norm(x, True, w)
    with pytest.raises(TypeError, match="normalized_shape"):
        precred.layer_norm(x, [True], w)
    with pytest.raises(TypeError, match="weight"):
        precred.layer_norm(x, [1], w.to(torch.int32))
    with pytest.raises(RuntimeError, match="weight"):
        precred.layer_norm(x, [1], w.expand(1, 1))


def test_callers_tensors_are_untouched(device):
    x, w, b = _inputs((4, 8), [8], torch.bfloat16, device)
    copies = [t.clone() for t in (x, w, b)]
    precred.layer_norm(x, [8], w, b)
    precred.rms_norm(x, [8], w)
    assert all(torch.equal(t, c) for t, c in zip((x, w, b), copies))


@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
def test_gradcheck_fp64(rms, path, device):
    x, w, b = _inputs((3, 20), [20], torch.float64, device)
    x, w, b = (t.requires_grad_() for t in (x, w, b))
    if rms:
        assert torch.autograd.gradcheck(lambda x, w: precred.rms_norm(x, [20], w, 1e-5), (x, w), fast_mode=True)
        assert torch.autograd.gradcheck(lambda x: precred.rms_norm(x, [20], None, 1e-5), (x,), fast_mode=True)
    else:
        assert torch.autograd.gradcheck(lambda x, w, b: precred.layer_norm(x, [20], w, b), (x, w, b), fast_mode=True)
        assert torch.autograd.gradcheck(lambda x, b: precred.layer_norm(x, [20], None, b), (x, b), fast_mode=True)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # numpy's overflow, under the interpreter
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_rows_beyond_fp32s_range(dtype, device):
    """Finite rows near fp32's largest value: layer_norm `fast` gives NaN, the documented limit of its
    fp32 differences (the other modes and rms_norm are held to their bounds there in
    test_norm_accuracy.test_rows_near_fp32s_largest_within_bounds)."""
    x = torch.tensor([[1e38, -1e38, 2e38, -2e38]], dtype=dtype, device=device)
    assert torch.isnan(precred.layer_norm(x, [4], eps=0.0, mode="fast")).all()


@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
def test_second_derivatives(rms, device):
    """Gradients taken with create_graph=True are differentiable (torch's autograd, on purpose: the
    kernels are not): gradgradcheck passes, and a gradient penalty through the norm equals torch's."""
    x, w, b = _inputs((3, 6), [6], torch.float64, device)
    x, w, b = (t.requires_grad_() for t in (x, w, b))
    if rms:
        assert torch.autograd.gradgradcheck(lambda x, w: precred.rms_norm(x, [6], w, 1e-5), (x, w))
    else:
        assert torch.autograd.gradgradcheck(lambda x, w, b: precred.layer_norm(x, [6], w, b), (x, w, b))
        assert torch.autograd.gradgradcheck(lambda x: precred.layer_norm(x, [6]), (x,))
    m = torch.randn(6, 6, dtype=torch.float64, device=device)
    v = torch.randn(3, 6, dtype=torch.float64, device=device)
    penalties = []
    for norm in ((precred.rms_norm, torch.nn.functional.rms_norm) if rms else
                 (precred.layer_norm, torch.nn.functional.layer_norm)):
        mm = m.clone().requires_grad_()
        (gx,) = torch.autograd.grad((norm(x @ mm, [6]) * v).sum(), x, create_graph=True)
        penalties.append(torch.autograd.grad((gx ** 2).sum(), mm)[0])
    torch.testing.assert_close(penalties[0], penalties[1], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_forward_and_backward_are_bitwise_reproducible(dtype, path, device):
    x, w, b = _inputs((37, 24), [24], dtype, device)
    g = torch.randn(37, 24, device=device).to(dtype)

    def run():
        xs, ws, bs = (t.clone().requires_grad_() for t in (x, w, b))
        y = precred.layer_norm(xs, [24], ws, bs)
        return (y, *torch.autograd.grad(y, (xs, ws, bs), g))

    first, second = run(), run()
    assert all(torch.equal(a, c) for a, c in zip(first, second))


@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
def test_one_input_over_different_normalized_shapes(rms, path, device):
    """The same input, one call normalizing its last dim, the next its last two: on CUDA the second call
    must not replay the first's launch recipe, which x's shape alone does not tell apart (without weight
    or bias nothing else does; the backward's key held no normalized size at all) -- it normalized 16
    elements a row where 128 were asked and wrote 32 rows of statistics into buffers of 4. Forward and
    backward against torch, without and with weight and bias, each shape first in turn."""
    x, _, _ = _inputs((4, 8, 16), [8, 16], torch.float32, device)
    g = torch.randn(4, 8, 16, generator=torch.Generator().manual_seed(1)).to(device)
    norm = precred.rms_norm if rms else precred.layer_norm
    torch_norm = F.rms_norm if rms else F.layer_norm
    for shapes in ([[16], [8, 16]], [[8, 16], [16]]):
        for affine in (False, True):
            for normalized in shapes:
                w, b = _inputs((1,), normalized, torch.float32, device)[1:] if affine else (None, None)
                params = (w,) if rms else (w, b)
                xs = x.clone().requires_grad_()
                ps = [p.clone().requires_grad_() if p is not None else None for p in params]
                y = norm(xs, normalized, *ps)
                xr = x.double().requires_grad_()
                pr = [p.double().requires_grad_() if p is not None else None for p in params]
                yr = torch_norm(xr, normalized, *pr, **({"eps": torch.finfo(torch.float32).eps} if rms else {}))
                _close(y, yr.float(), torch.float32)
                wanted = [xs] + [p for p in ps if p is not None]
                grads = torch.autograd.grad(y, wanted, g)
                grads_ref = torch.autograd.grad(yr, [xr] + [p for p in pr if p is not None], g.double())
                for got, ref in zip(grads, grads_ref):
                    assert got.shape == ref.shape
                    _close(got, ref.float(), torch.float32)


@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
def test_streamed_apply_on_a_flat_grid_gives_the_same_bits(rms, device, monkeypatch):
    """The streamed forward's apply pass launched on a one-dimensional grid (schedules/grid.py: CUDA caps
    a grid's second dimension, the column blocks, at 65535; rows of 2^25 elements pass it) gives the
    two-dimensional grid's bits: precred.launch.GRID_Y_MAX set to 1 flattens it here."""
    from precred import launch
    from precred.schedules.norm_stream import norm_apply_kernel
    force_long_row_paths(monkeypatch, "streaming")
    monkeypatch.setattr(planner, "NORM_APPLY_TILE", (2, 16))
    grids = []
    real = norm_launch_module._launch

    def recording(kernel, grid, *args, **kwargs):
        if kernel is norm_apply_kernel:
            grids.append(grid)
        return real(kernel, grid, *args, **kwargs)
    monkeypatch.setattr(norm_launch_module, "_launch", recording)
    x, w, b = _inputs((7, 100), [100], torch.float32, device)
    outputs = []
    for y_max in (launch.GRID_Y_MAX, 1):
        monkeypatch.setattr(launch, "GRID_Y_MAX", y_max)
        norm_recipes.clear()
        outputs.append(precred.rms_norm(x, [100], w) if rms else precred.layer_norm(x, [100], w, b))
    norm_recipes.clear()
    assert [len(g) for g in grids] == [2, 1]
    assert torch.equal(outputs[0], outputs[1])


def test_backward_matches_torch_with_partial_requires_grad(device):
    x, w, b = _inputs((5, 12), [12], torch.float32, device)
    xs = x.clone().requires_grad_()
    y = precred.layer_norm(xs, [12], w, b)                  # w, b without grad: dx only
    (dx,) = torch.autograd.grad(y.sum() * 0 + (y * y).sum(), (xs,))
    xr = x.double().requires_grad_()
    yr = F.layer_norm(xr, [12], w.double(), b.double())
    (dxr,) = torch.autograd.grad((yr * yr).sum(), (xr,))
    _close(dx, dxr.float(), torch.float32)


def test_torch_compile_fullgraph_traces_the_custom_op(device):
    x, w, b = _inputs((4, 16), [16], torch.float32, device)

    def f(t):
        return precred.layer_norm(t * 2.0, [16], w, b) + precred.rms_norm(t, [16], w)

    compiled = torch.compile(f, fullgraph=True, backend="eager")
    assert torch.equal(compiled(x), f(x))


@pytest.mark.parametrize("rms", [False, True])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_compiled_and_eager_gradients_are_the_same(rms, dtype, backend, device):
    """torch.compile traces the custom op and its registered autograd; eager calls that autograd
    records take an autograd.Function with the same context and backward: the same bits both ways.
    aot_eager traces the backward too, with fake tensors (as inductor does for a training step): the
    backward kernels go through their own custom op there (precred::norm_backward) -- launched
    directly, they failed ("invalid python storage")."""
    x, w, b = _inputs((4, 16), [16], dtype, device)
    dy = torch.randn(4, 16, generator=torch.Generator().manual_seed(3)).to(dtype).to(device)

    def f(t, weight, bias):
        if rms:
            return precred.rms_norm(t, [16], weight)
        return precred.layer_norm(t, [16], weight, bias)
    grads = []
    torch._dynamo.reset()
    for fn in (f, torch.compile(f, fullgraph=True, backend=backend)):
        inputs = [t.clone().requires_grad_() for t in (x, w, b)]
        y = fn(*inputs)
        used = inputs[:2] if rms else inputs
        grads.append([y.detach()] + list(torch.autograd.grad(y, used, dy)))
    for eager, compiled in zip(*grads):
        assert torch.equal(eager, compiled)


def test_nn_modules_load_torch_state_dicts(device):
    ref = torch.nn.LayerNorm(16).to(device)
    with torch.no_grad():
        ref.weight.uniform_(0.5, 1.5)
        ref.bias.normal_()
    ours = precred.nn.LayerNorm(16, mode="precise").to(device)
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(3, 16, device=device)
    _close(ours(x), F.layer_norm(x.double(), [16], ref.weight.double(), ref.bias.double()), torch.float32)
    assert "mode='precise'" in repr(ours)
    rms_ref = torch.nn.RMSNorm([2, 8], eps=1e-6).to(device)
    rms = precred.nn.RMSNorm([2, 8], eps=1e-6).to(device)
    rms.load_state_dict(rms_ref.state_dict())
    x = torch.randn(3, 2, 8, device=device)
    _close(rms(x), F.rms_norm(x.double(), [2, 8], rms_ref.weight.double(), 1e-6), torch.float32)
    with pytest.raises(ValueError, match="mode"):
        precred.nn.LayerNorm(4, mode="fp32")


@triton.jit
def _runtime_zero_kernel(x_ptr, out_ptr):
    zero = runtime_zero(x_ptr)
    tl.store(out_ptr, zero)
    same = opaque_copy(tl.full([4], -2.5, tl.float32), zero, True) == -2.5
    tl.store(out_ptr + 1, tl.sum(same.to(tl.int32)))


def test_the_forward_s_opaque_zero_is_zero(device):
    """The forward kernel XORs its raw tile with runtime_zero(a pointer) to keep passes from sharing a
    converted tile: it must be 0, so that every element stays as loaded."""
    out = torch.full((2,), -1, dtype=torch.int32, device=device)
    _runtime_zero_kernel[(1,)](torch.zeros(4, device=device), out)
    assert out.tolist() == [0, 4]
