"""Error budgets of layer_norm / rms_norm, forward and backward: every output within precred's bounds
(norm_error_bound, norm_backward_error_bound, norm_parameter_grad_error_bound), against the exact
oracle (validation.norms), on adversarial rows: mean offsets 1e2..1e6 times the spread, tiny (1e-30,
eps = 0) and huge (1e19) scales, constant rows, wide dynamic range; on the three forward paths
(single-read rows; the streaming path and the row loop, forced on short rows) and both backward paths
(rows on chip, read twice).
"""
import math

import mpmath
import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import precred
from precred import plan as planner
from precred.modes import get_norm_mode
from precred.norm_launch import _RECIPES as norm_recipes
from precred.plan import plan_norm_backward, plan_norm_forward, plan_norm_row_loop
from precred.schedules.norm_rows import rstd_in_fp32
from conftest import DEVICE as _DEVICE, force_long_row_paths
from validation.moments import reference_moments
from validation.norms import bound_inputs, reference_norm, reference_norm_backward
from validation.oracle import format_info

MODES = list(precred.NORM_MODES)
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]


def rows_of(kind: str, rows: int, n: int, dtype: torch.dtype, seed: int = 0):
    """(x, eps) of an adversarial kind; x: [rows, n] in dtype."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((rows, n))
    eps = 1e-5
    if kind.startswith("offset"):   # a spread of at least 4 ulps of the offset: 16-bit rows stay non-constant
        offset = float(kind[len("offset"):])
        p, _, _ = format_info(dtype)
        ulp = 2.0 ** (math.floor(math.log2(offset)) - p + 1) if offset else 0.0
        a = offset + max(1.0, 4 * ulp) * z
    elif kind == "tiny":
        a, eps = z * 1e-30, 0.0
    elif kind == "huge":
        a = z * 1e19 + 3e19
    elif kind == "constant":
        a = np.full((rows, n), 7.25)
    elif kind == "wide":
        span = 10 if dtype == torch.float16 else 20     # fp16: |values| < 65504
        a = z * np.exp2(rng.integers(-span, span, (rows, n)))
    else:
        raise ValueError(kind)
    if dtype == torch.float16 and kind == "tiny":
        a = z * 1e-3          # fp16's range (bf16 has fp32's exponents: it keeps 1e-30)
    return torch.from_numpy(a).to(dtype), eps


@pytest.fixture
def path(monkeypatch, request):
    """The forward / backward path of the rows: "on-chip", "streaming" or "row-loop" (see
    force_long_row_paths)."""
    if request.param != "on-chip":
        force_long_row_paths(monkeypatch, request.param)
    plan_norm_backward.cache_clear()
    norm_recipes.clear()      # CUDA launch recipes replay the path they were made on
    yield request.param
    plan_norm_backward.cache_clear()
    norm_recipes.clear()


def _floats(mpf_values):
    return np.array([float(v) for v in mpf_values])


def _errors(computed, exact):
    return np.array([float(abs(mpmath.mpf(float(c)) - e)) if math.isfinite(float(c)) else math.inf
                     for c, e in zip(computed, exact)])


def _row_inputs(x_row, row, rstd, moments_row, rms):
    """(norm_error_bound's row arguments, |xhat| = |x - mean| rstd per element)."""
    inputs = bound_inputs(x_row, row, moments_row, rms)
    return inputs, inputs["centered"] * float(rstd)


def check_forward_and_backward(x, eps, mode, rms, device, path, weight=True, bias=True):
    """Forward and backward of x's rows against the oracle, each output within its bound; path: the
    one the planner must have taken (see the path fixture); weight / bias: whether the call gets them
    (bias: layer_norm only)."""
    rows, n = x.shape
    shape = [n]
    gen = torch.Generator().manual_seed(1)
    w = (torch.rand(n, generator=gen, dtype=torch.float64) + 0.5).to(x.dtype) if weight else None
    b = None if rms or not bias else torch.randn(n, generator=gen, dtype=torch.float64).to(x.dtype)
    g = torch.randn(rows, n, generator=gen, dtype=torch.float64).to(x.dtype)
    xd = x.to(device).clone().requires_grad_()
    wd = w.to(device).clone().requires_grad_() if w is not None else None
    bd = b.to(device).clone().requires_grad_() if b is not None else None
    y = precred.rms_norm(xd, shape, wd, eps, mode=mode) if rms else precred.layer_norm(xd, shape, wd, bd, eps, mode=mode)
    wanted = [t for t in (xd, wd, bd) if t is not None]
    grads = dict(zip(map(id, wanted), torch.autograd.grad(y, wanted, g.to(device))))
    dx, dw, db = (grads[id(t)].cpu() if t is not None else None for t in (xd, wd, bd))
    y = y.detach().cpu()

    acc = get_norm_mode(mode).accumulator_dtype(x.dtype, x.dtype)
    fwd_plan = plan_norm_forward(rows, n, accumulator_size=acc.itemsize, element_size=x.element_size())
    sm_count = precred.launch.device_sm_count(torch.device(device))
    loop_plan = plan_norm_row_loop(rows, n, element_size=x.element_size(), sm_count=sm_count)
    assert path == ("on-chip" if fwd_plan is not None else "row-loop" if loop_plan is not None else "streaming")
    depth = None if fwd_plan is None else fwd_plan.depth     # None: the Welford statistics' bound
    bwd_plan = plan_norm_backward(rows, n, element_size=x.element_size(), accumulator_size=acc.itemsize,
                                  sm_count=sm_count)
    assert bwd_plan.on_chip == (path == "on-chip")

    ref_rows, y_ref, rstd_ref, _ = reference_norm(x, shape, w, b, eps, rms=rms)
    dx_ref, dw_ref, db_ref = reference_norm_backward(x, shape, w, g, eps, rms=rms)
    moments, _, _ = reference_moments(x, -1)
    x64, g64 = x.double().numpy(), g.double().numpy()
    w64 = w.double().numpy() if w is not None else None
    worst = 0.0
    gx_abs, gx_err, g_abs = np.zeros(n), np.zeros(n), np.zeros(n)
    for i, row in enumerate(ref_rows):
        inputs, xhat = _row_inputs(x64[i], row, rstd_ref[i], moments[i], rms)
        # forward
        y_exact = _floats(y_ref[i])
        bound = precred.norm_error_bound(mode, x.dtype, rms=rms, depth=depth, eps=eps, xhat=xhat, weight=w64,
                                         y=y_exact, **inputs)
        err = _errors(y[i].double().tolist(), y_ref[i])
        assert np.all(err <= bound), (i, float(np.max(err / bound)), mode, x.dtype)
        worst = max(worst, float(np.max(err / bound)))
        # backward: dx of this row
        mean_error, rstd_error = precred.bounds.norm_statistics_error(mode, x.dtype, rms=rms, depth=depth, eps=eps,
                                                                      **inputs)
        gw = g64[i] * (w64 if w64 is not None else 1.0)
        xhat_signed = (x64[i] - (0.0 if rms else float(row.mean))) * float(rstd_ref[i])
        bound_dx = precred.bounds.norm_backward_error_bound(
            mode, x.dtype, rms=rms, n=n, depth=bwd_plan.depth, rstd=float(rstd_ref[i]), mean=float(row.mean),
            mean_error=mean_error, rstd_error=rstd_error, centered=inputs["centered"], xhat=xhat, gw=gw,
            dx=_floats(dx_ref[i]), projection=float(np.mean(gw * xhat_signed)), total=float(np.mean(gw)),
            abs_gw_xhat_sum=float(np.sum(np.abs(gw * xhat_signed))), abs_gw_sum=float(np.sum(np.abs(gw))))
        err_dx = _errors(dx[i].double().tolist(), dx_ref[i])
        assert np.all(err_dx <= bound_dx), (i, float(np.max(err_dx / bound_dx)), mode, x.dtype)
        worst = max(worst, float(np.max(err_dx / bound_dx)))
        # terms of dweight / dbias and the errors of the computed xhat in them
        d_xhat = precred.bounds.norm_xhat_error(mode, x.dtype, rms=rms, rstd=float(rstd_ref[i]), mean=float(row.mean),
                                                mean_error=mean_error, rstd_error=rstd_error,
                                                centered=inputs["centered"], xhat=xhat)
        gx_abs += np.abs(g64[i] * xhat_signed)
        gx_err += np.abs(g64[i]) * d_xhat
        g_abs += np.abs(g64[i])
    if dw_ref is not None:
        bound_dw = precred.bounds.norm_parameter_grad_error_bound(mode, x.dtype, w.dtype, rows=rows,
                                                                  abs_term_sum=gx_abs, term_error_sum=gx_err,
                                                                  exact=_floats(dw_ref))
        assert np.all(_errors(dw.double().tolist(), dw_ref) <= bound_dw)
    if db_ref is not None and b is not None:
        bound_db = precred.bounds.norm_parameter_grad_error_bound(mode, x.dtype, b.dtype, rows=rows, abs_term_sum=g_abs,
                                                                  term_error_sum=np.zeros(n), exact=_floats(db_ref))
        assert np.all(_errors(db.cpu().double().tolist(), db_ref) <= bound_db)
    return y, worst


KINDS = ["offset0", "offset1e2", "offset1e4", "offset1e6", "tiny", "huge", "wide"]


@pytest.mark.parametrize("path", ["on-chip", "streaming", "row-loop"], indirect=True)
@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
def test_within_bounds(kind, mode, dtype, rms, path, device):
    if kind in ("huge", "offset1e6") and dtype == torch.float16:
        pytest.skip("beyond fp16's range (65504)")
    x, eps = rows_of(kind, 3, 100, dtype)
    check_forward_and_backward(x, eps, mode, rms, device, path)


@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=25, deadline=None)
@given(a=hnp.arrays(np.float32, hnp.array_shapes(min_dims=2, max_dims=2, max_side=24),
                    elements=st.floats(-1e6, 1e6, width=32)),
       offset=st.sampled_from([0.0, 1e2, 1e4, 1e6]), eps=st.sampled_from([1e-5, 0.0]))
def test_within_bounds_hypothesis(mode, rms, a, offset, eps):
    """Hypothesis-drawn fp32 rows (values over +-1e6, a mean offset of up to 1e6, eps 1e-5 or 0 when no
    row is constant), forward and backward (weight, bias), every output within its bound."""
    x = torch.from_numpy(a).double().add(offset).float()
    if eps == 0.0 and bool((x == x[:, :1]).all(dim=1).any()):
        eps = 1e-5                         # a constant row's rstd is 1 / sqrt(eps): inf at eps = 0
    check_forward_and_backward(x, eps, mode, rms, _DEVICE, "on-chip")


@pytest.mark.parametrize("parameter_dtype", [torch.bfloat16, torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_parameters_of_another_dtype_within_bounds(mode, dtype, parameter_dtype, device):
    """16-bit input, weight and bias of another dtype: the affine step's dtype follows
    precred.modes.norm_affine_dtype (fp32 for `precise` unless a parameter is fp64) and the forward
    bound is that dtype's."""
    x, eps = rows_of("offset1e2", 2, 100, dtype, seed=5)
    gen = torch.Generator().manual_seed(2)
    w = (torch.rand(100, generator=gen, dtype=torch.float64) + 0.5).to(parameter_dtype)
    b = torch.randn(100, generator=gen, dtype=torch.float64).to(parameter_dtype)
    y = precred.layer_norm(x.to(device), [100], w.to(device), b.to(device), eps, mode=mode).cpu()
    acc = get_norm_mode(mode).accumulator_dtype(dtype, dtype)
    depth = plan_norm_forward(2, 100, accumulator_size=acc.itemsize, element_size=dtype.itemsize).depth
    ref_rows, y_ref, rstd_ref, _ = reference_norm(x, [100], w, b, eps)
    moments, _, _ = reference_moments(x, -1)
    x64, w64 = x.double().numpy(), w.double().numpy()
    for i, row in enumerate(ref_rows):
        inputs, xhat = _row_inputs(x64[i], row, rstd_ref[i], moments[i], False)
        bound = precred.norm_error_bound(mode, dtype, rms=False, depth=depth, eps=eps, xhat=xhat, weight=w64,
                                         y=_floats(y_ref[i]), parameter_dtypes=(parameter_dtype, parameter_dtype),
                                         **inputs)
        assert np.all(_errors(y[i].double().tolist(), y_ref[i]) <= bound)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # numpy's overflow, under the interpreter
@pytest.mark.parametrize("row", [[1e38, -1e38, 2e38, -2e38, 3e38, -5e37, 7e37, 1.5e38], [3.3e38] * 6 + [-3.3e38] * 2],
                         ids=["mixed", "beyond-fp32-centred"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("mode, rms", [("fast", True), ("precise", True), ("precise", False)],
                         ids=["rms_norm-fast", "rms_norm-precise", "layer_norm-precise"])
def test_rows_near_fp32s_largest_within_bounds(mode, rms, dtype, row, device):
    """Finite rows near 3.4e38: rms_norm's power-of-two scale and `precise`'s arithmetic keep them
    within the bounds, forward and backward (layer_norm `fast` gives NaN there, documented:
    test_norm_semantics). The second row's x - mean (-4.95e38) leaves fp32's range: `precise` on
    16-bit rows, whose centred values are fp32 (plan.norm_fp64_mean), centres x / 4 where the mean
    is that large (norm_rows.fp64_mean_as_pair)."""
    x = torch.tensor([row], dtype=dtype)
    check_forward_and_backward(x, 0.0, mode, rms, device, "on-chip")


@pytest.mark.parametrize("weight, bias", [(False, False), (True, False), (False, True)],
                         ids=["no-parameters", "weight-only", "bias-only"])
@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_without_weight_or_bias_within_bounds(mode, dtype, rms, weight, bias, device):
    """The kernels' paths without a weight or a bias (HAS_W / HAS_B), forward and backward, at a mean
    offset of 1e2 spreads."""
    if rms and bias:
        pytest.skip("rms_norm takes no bias")
    x, eps = rows_of("offset1e2", 3, 100, dtype, seed=6)
    check_forward_and_backward(x, eps, mode, rms, device, "on-chip", weight=weight, bias=bias)


@pytest.mark.parametrize("long_rows", ["streaming", "row-loop"])
@pytest.mark.parametrize("n", [1, 15, 16, 17, 63, 64, 65, 129])
@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_lengths_around_the_path_limits(mode, dtype, rms, n, long_rows, monkeypatch, device):
    """Rows around the planner's limits, lowered to 16 elements on chip (forward and backward) and 64
    lanes for the row loop and the backward of rows read twice: up to 16 on chip, beyond it streamed or row-looped
    (forward) and read twice (backward) over one, two or three lane tiles, each row within its bounds."""
    force_long_row_paths(monkeypatch, long_rows)
    plan_norm_backward.cache_clear()
    norm_recipes.clear()
    x, eps = rows_of("offset1e2", 3, n, dtype, seed=n)
    try:
        check_forward_and_backward(x, eps, mode, rms, device, long_rows if n > 16 else "on-chip")
    finally:
        plan_norm_backward.cache_clear()
        norm_recipes.clear()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # numpy's overflow, under the interpreter
@pytest.mark.parametrize("eps", [0.0, 1e-5])
@pytest.mark.parametrize("mode", MODES)
def test_subnormal_rows_within_bounds(mode, eps, device):
    """Rows of fp32 subnormals (T = 2^-149): the shifted mean rounded onto the subnormal grid, halved
    subnormals under a scale below 1, subnormal outputs, and (eps = 0) an rstd beyond fp32's range,
    where no bound is claimed. Found by a review of the bounds against the kernels."""
    t = 2.0 ** -149
    for rms, rows in ((False, [[0.0, 0.0, t, 0.0], [0.0, t, 3 * t, 0.0]]), (True, [[2.0, 3 * t, 5 * t, 7 * t]]),
                      (True, [[2.0 ** -126] + [0.0] * 63])):
        x = torch.tensor(rows, dtype=torch.float32)
        check_forward_and_backward(x, eps, mode, rms, device, "on-chip")


# (dtype, n): at n = 2000 fp32 (8 warps of 4-element vectors over 2048 lanes) the layout repeats
@pytest.mark.parametrize("dtype, n", [(torch.float32, 100), (torch.bfloat16, 100), (torch.float32, 2000)],
                         ids=["f32-n100", "bf16-n100", "f32-n2000"])
@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["offset1e4", "wide"])
def test_backward_row_sums_in_the_blocked_order_within_bounds(kind, mode, dtype, rms, n, device):
    """The backward's row sums in the blocked layout's order (tree.tree_sum_blocked_rows), including a
    row whose layout repeats over the lanes: a balanced tree of depth log2(BLOCK_N), the bounds'."""
    rows = 3 if n < 1000 else 1     # the oracle's time grows with the elements
    x, eps = rows_of(kind, rows, n, dtype)
    assert plan_norm_backward(rows, n, element_size=x.element_size(), accumulator_size=4, sm_count=132).on_chip
    check_forward_and_backward(x, eps, mode, rms, device, "on-chip")


@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("kind", ["offset1e4", "tiny", "huge", "wide"])
def test_scale_when_needed_within_bounds(kind, dtype, rms, device):
    """fp32 arithmetic (`fast`) with the scale skipped where the squares stay in range (offset1e4,
    wide) and taken where they do not (tiny: 1e-30, eps 0; huge: 1e19): the same bounds."""
    x, eps = rows_of(kind, 3, 100, dtype)
    check_forward_and_backward(x, eps, "fast", rms, device, "on-chip")


@pytest.fixture
def fp32_pass(monkeypatch):
    """precise's fp32 normalizing pass (plan.norm_fp32_pass) on rows of 64 elements and more; for
    layer_norm, with the fp64 accumulator throughout (plan.NORM_FP64_MEAN off: bench/'s alternative)."""
    monkeypatch.setattr(planner, "NORM_FP32_PASS_MIN_ROW", 64)
    monkeypatch.setattr(planner, "NORM_FP64_MEAN", False)
    norm_recipes.clear()
    yield
    norm_recipes.clear()


@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("kind", ["offset1e2", "offset1e4", "tiny", "huge", "wide", "mixed"])
def test_fp32_pass_within_bounds(kind, dtype, rms, fp32_pass, device):
    """`precise` on 16-bit rows normalizes in fp32 (mean as hi + lo) where every row of the program has
    rstd < 2^100, in fp64 otherwise: `mixed` puts a row of 1e-35 (bf16; eps 0, rstd ~1e35) into the
    program of ordinary rows, which then all take the fp64 branch. Each row within the bound."""
    if kind in ("huge", "offset1e4") and dtype == torch.float16:
        pytest.skip("beyond fp16's range (65504)")
    if kind == "mixed":
        x, _ = rows_of("offset1e2", 3, 100, dtype, seed=2)
        x[0] = (torch.randn(100, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
                * (1e-35 if dtype == torch.bfloat16 else 1e-4)).to(dtype)
        eps = 0.0
    else:
        x, eps = rows_of(kind, 3, 100, dtype)
    assert precred.plan.norm_fp32_pass(torch.float64, dtype, dtype, (dtype,), 100)
    assert plan_norm_forward(3, 100, accumulator_size=8, element_size=dtype.itemsize).block_rows >= 3       # one program
    check_forward_and_backward(x, eps, "precise", rms, device, "on-chip")


@pytest.mark.parametrize("mode, dtype, rms", [("fast", torch.float32, False), ("fast", torch.float32, True),
                                             ("precise", torch.bfloat16, True)],
                         ids=["layer_norm-fast-fp32", "rms_norm-fast-fp32", "rms_norm-precise-bf16"])
def test_scale_when_needed_changes_no_bit_of_ordinary_rows(rms, mode, dtype, device):
    """`fast`: the forward takes the power-of-two scale for a whole program once one of its rows needs
    it. Rows that do not need it come out the same either way (powers of two commute with the
    roundings, where no square falls below 2^-126): a program of ordinary rows (no scale) and the same
    rows but the last, a row of 1e-30 instead (scaled), give y, and the statistics autograd keeps, bit
    for bit. fp32 rows only: `fast` on 16-bit rows takes rstd by fp32 steps where no row is scaled and
    by fp64 steps where one is (norm_rows.rstd_scaled_when_needed), so their bits may differ (both
    within the bound); so does `precise` layer_norm on 16-bit rows, which runs `fast`'s fp32 steps
    after its fp64 mean (plan.norm_fp64_mean). `precise` bf16 rms_norm takes no scale, and rstd's
    fp32 steps on every row they fit (norm_rows.rstd_in_fp32_where_it_fits): the row of 1e-30 (its
    sum of squares below 2^-60) takes the fp64 steps alone."""
    rows = plan_norm_forward(4, 300, accumulator_size=4 if mode == "fast" else 8,
                             element_size=dtype.itemsize).block_rows
    assert rows >= 4       # whole programs: a partly filled one takes the scale (its missing rows' q is 0)
    x, eps = rows_of("offset1e2", rows, 300, dtype, seed=4)
    tiny = (torch.full((1, 300), 1e-30) * torch.randn(1, 300, generator=torch.Generator().manual_seed(1))).to(dtype)
    w = (torch.rand(300, dtype=torch.float32) + 0.5).to(dtype)
    outputs = []
    for program in (x, torch.cat([x[:-1], tiny])):
        xd = program.to(device).requires_grad_()
        y = (precred.rms_norm(xd, [300], w.to(device), eps, mode=mode) if rms else
             precred.layer_norm(xd, [300], w.to(device), None, eps, mode=mode))
        outputs.append([y.detach().cpu()[:-1], *[t.cpu()[:-1] for t in y.grad_fn.saved_tensors[2:]]])
    assert all(torch.equal(a, b) for a, b in zip(*outputs))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_constant_rows_give_the_bias(mode, dtype, device):
    """var = 0: y = b exactly (x - mean is exactly 0; torch gives the same)."""
    x = torch.full((3, 50), 7.25, dtype=dtype)
    b = torch.randn(50, dtype=torch.float64).to(dtype)
    y = precred.layer_norm(x.to(device), [50], None, b.to(device), mode=mode).cpu()
    assert torch.equal(y, b.expand(3, 50))


@pytest.mark.parametrize("n", [2048, 8192])
def test_precise_is_within_two_ulp_at_offset_1e4(n, device):
    """The issue's goal for `precise`: <= 2 ulp of each fp32 output at a mean offset 1e4 times the spread
    (outputs above 2^-20 |w|, where the ~2^-45 |w| term of the bound stays below an ulp)."""
    x, eps = rows_of("offset1e4", 2, n, torch.float32, seed=3)
    _, y_ref, _, _ = reference_norm(x, [n], None, None, eps)
    y = precred.layer_norm(x.to(device), [n], mode="precise").cpu()
    exact = np.array([[float(v) for v in row] for row in y_ref])
    keep = np.abs(exact) >= 2.0 ** -20
    ulps = np.abs(y.double().numpy() - exact) / np.spacing(np.abs(exact).astype(np.float32)).astype(float)
    assert np.max(ulps[keep]) <= 2.0


@triton.jit
def _rstd_in_fp32_kernel(q_ptr, out_ptr, n_cols, eps: tl.float64, SIZE: tl.constexpr):
    i = tl.arange(0, SIZE)
    eps32 = tl.full((), eps, tl.float64).to(tl.float32)   # as norm_forward_kernel takes it
    tl.store(out_ptr + i, rstd_in_fp32(tl.load(q_ptr + i), n_cols, eps32))


@pytest.mark.parametrize("eps", [0.0, 2.0 ** -126, 1e-5, 1.0, 2.0 ** 100])
@pytest.mark.parametrize("n", [1, 3, 1000, 16383])
def test_rstd_in_fp32_within_its_bound(n, eps, device):
    """rstd_in_fp32 (the `fast` forward's rstd for 16-bit output) against 1 / sqrt(q / n + eps) in exact
    arithmetic, over the domain rstd_scaled_when_needed gives it (q in [2^-60, fp32's largest], eps 0
    or in [2^-126, 2^100]): relative error at most (1 + u) / (1 - u)^2 - 1 = 3u + O(u^2), u = 2^-24
    (q / n, + eps rounded to fp32: v within (1 +- u)^2; then the square root and the reciprocal)."""
    rng = np.random.default_rng(n)
    q = np.concatenate([2.0 ** rng.uniform(-60, 127, 62), [2.0 ** -60, 3.4028234663852886e38]]).astype(np.float32)
    out = torch.empty(64, dtype=torch.float64, device=device)
    _rstd_in_fp32_kernel[(1,)](torch.from_numpy(q).to(device), out, n, eps, SIZE=64)
    got = out.cpu().numpy()
    mpmath.mp.prec = 200
    u = mpmath.mpf(2) ** -24
    bound = (1 + u) / (1 - u) ** 2 - 1
    for i in range(64):
        exact = 1 / mpmath.sqrt(mpmath.mpf(float(q[i])) / n + mpmath.mpf(eps))
        assert abs(mpmath.mpf(float(got[i])) - exact) <= bound * exact, (i, float(q[i]))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
@pytest.mark.parametrize("eps", [1e-40, 1e39])
def test_eps_outside_the_fp32_steps_range_within_bounds(eps, rms, mode, device):
    """Both modes on bf16 rows take rstd by fp32 steps only where eps is 0 or in [2^-126, 2^100]; an
    eps outside (1e-40: below fp32's normal range; 1e39: beyond its largest, inf in fp32) sends the rows
    to the fp64 steps: within the same bound (taking the fp32 steps for 1e39, `fast`'s backward dx came
    out 0, off by ~100x its bound). Whole programs: a partly filled one takes the fp64 steps anyway."""
    rows = plan_norm_forward(8, 100, accumulator_size=4 if mode == "fast" else 8, element_size=2).block_rows
    x, _ = rows_of("offset1e2", rows, 100, torch.bfloat16)
    check_forward_and_backward(x, eps, mode, rms, device, "on-chip")


@pytest.mark.parametrize("depth", [3, None], ids=["single-read", "streamed"])
@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
def test_bound_claims_nothing_where_its_own_terms_overflow(rms, depth):
    """fp64 rows spanning the exponent range (precred-report's `wide` family): the bound's second-order
    terms (the perturbation E^2, the streamed mean's e_mu^2) leave fp64's range; norm_error_bound
    returns inf for every output -- no claim -- instead of raising OverflowError."""
    values = np.array([1e200, -1e200, 3.0, 1e-300, -2e199])
    mean = 0.0 if rms else float(values.mean())
    centered = np.abs(values - mean)
    # the row's exact statistics (rounded up): its variance and m2 ~4e399 are beyond fp64 (inf)
    bound = precred.norm_error_bound("precise", torch.float64, rms=rms, n=5, depth=depth, var=math.inf, eps=1e-5,
                                     radius=2e200 * (1 + 2.0 ** -52), abs_dev_mean=1.04e200 * (1 + 2.0 ** -40),
                                     abs_centered_sum=float(centered.sum()) * (1 + 2.0 ** -40), centered=centered,
                                     xhat=centered / 6.4e199,   # |c| rstd, rstd = 1 / sqrt(~4.1e399)
                                     row_mean=mean, row_m2=math.inf)
    assert bound.shape == (5,) and np.all(np.isinf(bound))
