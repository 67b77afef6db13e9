"""softmax / log_softmax: every mode x dtype x schedule of the row's logsumexp, every element within
precred.softmax_error_bound against an mpmath reference; torch's semantics for specials, dims, dtype and
arguments; the default mode's fp32 goal (softmax <= 2 ulp); determinism, autograd, compile."""
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import torch

from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import precred
from precred.bounds import EXP_TWO_PART_ERROR_UNITS, softmax_plan_arguments
from precred.launch import plan_softmax, softmax_rows, softmax_statistics_plan
from precred.modes import get_exp_mode
from precred.plan import LoopPlan, Plan, RowPlan, plan_row_loop
from validation.oracle import round_to, ulp_error
from validation.stable_exp import output_exact_to, reference_softmax as reference

from conftest import DEVICE as _DEVICE, same_bits
from test_logsumexp import PLANNER_SETTINGS, _exp_of_difference_kernel, family

# softmax's `accurate` is the fp64 mode (modes.EXP_MODES): test_accurate_is_the_fp64_mode checks that.
EXP_MODES = [m for m in precred.EXP_MODES if m != "accurate"]
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]


# The kernels a softmax can take: the single-read kernel (rows on chip), and the reduction + normalizing
# pass under the default planner and under tiny tiles (a split reduction, long lane chains).
PATHS = {"single-read": None, "row-loop": "loop", "two-pass": {}, "two-pass-split": PLANNER_SETTINGS["tiny-tiles"]}
# The row-loop kernel over dim 1 with 16 lanes: several tiles per row, so the lane chains and both loops
# run (it takes contiguous rows only).
ROW_LOOP_LANES = 16


def path_and_dims(n):
    """(path, dim) pairs to check rows of length n on: all of them for short rows (strided rows up to
    64 are single-read in both accumulators; the row loop takes dim 1 only); long rows over dim 1 only (strided, they are two-pass;
    the split's tiny tiles are slow under the interpreter, and the reduction's schedules have their
    own tests in test_logsumexp)."""
    if n <= 64:
        return [(path, dim) for path in PATHS for dim in (1, 0) if path != "row-loop" or dim == 1]
    return [("single-read", 1), ("row-loop", 1), ("two-pass", 1)]


def softmax_by_path(x, dim, mode, log, out_dtype, path):
    """(output, plan) of precred's softmax along dim of x (on its device) through `path`."""
    m = get_exp_mode(mode)
    if PATHS[path] is None:
        plan = plan_softmax(x, dim, m, out_dtype, log)
        assert isinstance(plan, RowPlan), plan
    elif PATHS[path] == "loop":
        plan = plan_row_loop(x.shape[0], x.shape[1], element_size=x.element_size(),
                             accumulator_size=m.accumulator_dtype(x.dtype, out_dtype).itemsize, sm_count=1,
                             block_n=ROW_LOOP_LANES)
    else:
        plan = softmax_statistics_plan(x, dim, m, out_dtype, **PATHS[path])
    return softmax_rows(x, dim, m, out_dtype, log, plan), plan


def assert_elements_within_bound(x, mode, log, device, out_dtype=None):
    """Every element of softmax(x, 1) (log_softmax when `log`), by the paths of path_and_dims over
    dim 1 or over dim 0 of the transposed copy, within precred.softmax_error_bound."""
    out_dtype = out_dtype or x.dtype
    exact_rows = reference(x, log)
    for path, dim in path_and_dims(x.shape[1]):
        xd = x.to(device) if dim == 1 else x.t().contiguous().to(device)
        got, plan = softmax_by_path(xd, dim, mode, log, out_dtype, path)
        assert_rows_within_bound(x, (got if dim == 1 else got.t()), plan, exact_rows, mode, log, out_dtype,
                                 f"{path} dim={dim}")


def assert_rows_within_bound(x, got, plan, exact_rows, mode, log, out_dtype, where="", columns=None):
    """Every element of got (softmax or log_softmax of x's rows, computed by `plan`) within
    precred.softmax_error_bound of exact_rows (reference(x, log, columns)); those in `columns` only,
    when given."""
    got = got.cpu().double().tolist()
    for (row, exact), values, xs in zip(exact_rows, got, x.double().tolist()):
        if columns is not None:
            values, xs = [values[j] for j in columns], [xs[j] for j in columns]
        if exact is None:
            assert all(math.isnan(v) for v in values), values    # torch: NaN rows
            continue
        for value, e, xi in zip(values, exact, xs):
            if xi == -math.inf:
                assert value == (-math.inf if log else 0.0)
                continue
            bound = precred.softmax_error_bound(mode, row.n, row.s, row.t, row.m, xi, x.dtype, log=log,
                                                out_dtype=out_dtype, log_s=float(row.lse - Fraction(row.m)),
                                                **softmax_plan_arguments(plan, row.n))
            # The data here stay where every mode claims a bound (the fast mode claims none once its
            # sum error is beyond first order): an element without one would be an element untested.
            assert math.isfinite(bound), f"{mode}: no bound claimed at x = {xi!r}"
            err = abs(Fraction(value) - e)
            assert err <= Fraction(bound) + Fraction(output_exact_to(row, e, log)) * 4, (
                f"{mode} {'log_softmax' if log else 'softmax'} {x.dtype}->{out_dtype} n={row.n} "
                f"{where}: error {float(err):.3e} > bound {bound:.3e} "
                f"(exact {float(e):.9e}, got {value!r})")


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", EXP_MODES)
def test_within_bound(mode, dtype, log, device):
    rng = np.random.default_rng([9, DTYPES.index(dtype), EXP_MODES.index(mode), log])
    for name in ["normal", "spread1e4", "huge", "tiny", "close", "one_finite"]:
        for rows, n in ((3, 37), (2, 700)):
            assert_elements_within_bound(family(name, rows, n, rng, dtype), mode, log, device)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("mode", precred.EXP_MODES)
@settings(max_examples=25, deadline=None)
@given(a=hnp.arrays(np.float32, hnp.array_shapes(min_dims=2, max_dims=2, max_side=40),
                    elements=st.floats(-1e4, 1e4, width=32) | st.just(-math.inf)))
def test_public_call_within_bound_hypothesis(mode, log, a):
    """Hypothesis-drawn fp32 rows (values over +-1e4, -inf among them: masked elements and all -inf
    rows, NaN as torch) through the public call, every element within the bound of the plan it takes."""
    x = torch.from_numpy(a)
    xd = x.to(_DEVICE)                     # the plan of the device the call runs on (its SM count)
    got = (precred.log_softmax if log else precred.softmax)(xd, -1, mode=mode)
    plan = plan_softmax(xd, 1, get_exp_mode(mode), x.dtype, log)
    assert_rows_within_bound(x, got, plan, reference(x, log), mode, log, x.dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mode", EXP_MODES)
def test_public_calls_around_the_path_limits(mode, dtype, monkeypatch, device):
    """precred.softmax / log_softmax as called, on rows around the planner's limits, lowered: single-read
    up to 16 elements, the row loop (16 lanes) up to 256 bytes with 1 row per SM, two-pass beyond;
    each output within the bound of the path the planner took."""
    from precred import launch, plan as planner
    monkeypatch.setitem(planner.SINGLE_READ_MAX_ROW, 4, 16)
    monkeypatch.setitem(planner.SINGLE_READ_MAX_ROW, 8, 16)
    monkeypatch.setattr(planner, "ROW_LOOP_MAX_ROW_BYTES", 256)
    monkeypatch.setattr(planner, "ROW_LOOP_MIN_ROWS_PER_SM", 1)
    monkeypatch.setattr(planner, "ROW_LOOP_SHAPE", {4: (16, 4), 8: (16, 4)})
    caches = (planner.plan_single_read, planner.plan_row_loop)
    for cache in caches:
        cache.cache_clear()
    launch._RECIPES.clear()
    # CUDA calls replay by precred.eager: none of an earlier test's plans in, none of the lowered ones out
    monkeypatch.setattr(precred.eager, "_CALLS", {})
    longest_loop = 256 // dtype.itemsize
    m = get_exp_mode(mode)
    rows = max(3, launch.device_sm_count(torch.device(device)))   # the row loop's 1 row per SM
    try:
        rng = np.random.default_rng([17, EXP_MODES.index(mode)])
        for n, kind in ((16, RowPlan), (17, LoopPlan), (longest_loop, LoopPlan), (longest_loop + 1, Plan)):
            x = family("normal", rows, n, rng, dtype)
            plan = plan_softmax(x.to(device), 1, m, dtype)
            assert isinstance(plan, kind), (n, plan)
            for log in (False, True):
                fn = precred.log_softmax if log else precred.softmax
                assert_rows_within_bound(x, fn(x.to(device), 1, mode=mode), plan, reference(x, log), mode, log,
                                         dtype, f"public n={n}")
    finally:
        for cache in caches:
            cache.cache_clear()
        launch._RECIPES.clear()


def test_statistics_pass_accumulates_in_the_modes_accumulator():
    """The two-pass path's reduction writes each row's m and log(s) in fp64 but accumulates in the
    softmax mode's accumulator (fp32 in `fast` for fp32 and 16-bit input and output, the one
    precred.softmax_error_bound counts): the plan logsumexp takes in that accumulator, not the fp64 one
    the fp64 outputs would make it (the fp64 loops ran softmax `fast` over dim 0 of bf16 at half speed)."""
    from precred.launch import plan_for
    for dtype in (torch.bfloat16, torch.float32):
        x = torch.empty(8192, 1024, dtype=dtype)
        for mode, out_dtype, acc in (("fast", dtype, torch.float32), ("fast", torch.float64, torch.float64),
                                     ("fp64", dtype, torch.float64)):
            m = get_exp_mode(mode)
            got = softmax_statistics_plan(x, 0, m, out_dtype, sm_count=132)
            assert got == plan_for(x, (0,), m, acc, sm_count=132)[1], (dtype, mode, out_dtype)
            if acc == torch.float32:   # the tile an fp64 accumulator would size differs
                assert got != plan_for(x, (0,), m, torch.float64, sm_count=132)[1], (dtype, mode)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mode", EXP_MODES)
def test_strided_short_rows_share_a_tile_within_bound(mode, dtype, log, device):
    """Rows of at most plan.SINGLE_READ_STRIDED_MAX_J along a strided dim: the single-read kernel's
    wide tiles of many rows (hundreds per program with fp32 state, 32 or 64 with fp64's:
    plan.SINGLE_READ_STRIDED_TILE_BYTES), within the bound."""
    x = family("normal", 300, 13, np.random.default_rng([13, EXP_MODES.index(mode), log]), dtype)
    plan = plan_softmax(x.t().contiguous(), 0, get_exp_mode(mode), dtype)
    assert isinstance(plan, RowPlan) and not plan.j_fast and plan.block_rows >= 32
    assert_elements_within_bound(x, mode, log, device)


def test_two_part_exponential_within_its_bound(device):
    """exp_two_part(TwoSum(x - m)) (softmax's fp32 exponential, strategies/stable_exp.py) within
    EXP_TWO_PART_ERROR_UNITS u of exp(x - m) wherever that is a normal fp32 number, whatever the gap --
    the rounded gap and the product with log2(e) of the other exponential would be 3u |x - m| off at
    gaps near 87 -- and at most the smallest normal below it (flushed to 0 or subnormal): gaps whose
    difference is inexact (x of the other sign or far smaller than m), reduced arguments at the
    Cody-Waite boundaries (k ln 2 +- ln 2 / 2), the underflow edge, and -inf (0) and NaN (NaN)."""
    rng = np.random.default_rng(11)
    k = np.arange(-126, 1)
    gaps = np.concatenate([rng.uniform(0, 90, 3000), (k + 0.5) * math.log(2), (k - 0.5) * math.log(2),
                           87.0 + rng.uniform(0, 1, 200), [0.0, 1e-30, 2.0 ** -24]])
    m = np.where(rng.random(gaps.size) < 0.5, rng.uniform(-3, 3, gaps.size), rng.uniform(-1, 1, gaps.size) * 1e3)
    x32 = torch.tensor(m - gaps, dtype=torch.float32)
    m32 = torch.tensor(m, dtype=torch.float32)
    x32 = torch.cat([x32, torch.tensor([-math.inf, math.nan, 1.0])])
    m32 = torch.cat([m32, torch.tensor([0.5, 0.5, 1.0])])
    out = torch.empty_like(x32, device=device)
    _exp_of_difference_kernel[(1,)](x32.to(device), m32.to(device), out, x32.numel(), BLOCK=4096)
    got = out.cpu().double().tolist()
    assert got[-3] == 0.0 and math.isnan(got[-2]) and got[-1] == 1.0
    u, smallest_normal = 2.0 ** -24, 2.0 ** -126
    for value, xi, mi in zip(got[:-3], x32.double().tolist(), m32.double().tolist()):
        with mpmath.workprec(100):
            exact = mpmath.exp(mpmath.mpf(xi) - mpmath.mpf(mi))
        if exact >= smallest_normal:
            assert abs(value - exact) <= EXP_TWO_PART_ERROR_UNITS * u * exact, (xi, mi, value, float(exact))
        else:
            assert 0.0 <= value <= smallest_normal, (xi, mi, value, float(exact))


def test_default_mode_fp32_softmax_within_two_ulp(device):
    """Issue 4's goal: fp32 softmax within 2 ulp (+ the row-sum's bound, which fp64 makes negligible)."""
    rng = np.random.default_rng(2)
    for name in ["normal", "spread1e4", "close"]:
        x = family(name, 4, 1500, rng, torch.float32)
        got = precred.softmax(x.to(device), 1).cpu().tolist()
        for (row, exact), values in zip(reference(x, False), got):
            for value, e in zip(values, exact):
                if e != 0 and round_to(e, torch.float32) != 0:
                    assert ulp_error(value, e, torch.float32) <= 2.0, (name, value, float(e))


FP32_SMALLEST_NORMAL = 2.0 ** -126


def test_default_mode_of_16_bit_softmax_is_fast_within_two_ulp(device):
    """softmax's default into bf16 / fp16 is `fast` (precred.modes.softmax_mode), log_softmax's
    `accurate` there, every other output keeps fp64: the bits say which kernel ran. Its premise: fast's bound into a 16-bit
    output is at most 1/16 ulp above the fp64 mode's, plus 2^-124 (fp32 terms and products below 2^-126
    may be flushed) -- over rows of n values at plan depths h >= log2(n), row sums s in [1, n], t / s up
    to ln(n) (the most any row has, bounds.certified_log_sum_margin), gaps up to where the output
    underflows, both kernels' bounds. Then issue 4's goal on adversarial rows against mpmath: within 2
    ulp (plus that 2^-124)."""
    from precred.bounds import softmax_error_bound
    from precred.modes import softmax_mode
    from validation.oracle import ulp
    for dtype in (torch.bfloat16, torch.float16):
        assert softmax_mode(None, dtype, False) == "fast"
        assert softmax_mode(None, dtype, True) == "accurate" and softmax_mode("fp64", dtype, False) == "fp64"
        assert softmax_mode(None, torch.float32, False) == "fp64" == softmax_mode(None, torch.float32, True)
        x = family("normal", 3, 700, np.random.default_rng(4), dtype).to(device)
        bits = torch.int16
        assert torch.equal(precred.softmax(x, 1).view(bits), precred.softmax(x, 1, mode="fast").view(bits))
        assert torch.equal(precred.log_softmax(x, 1).view(bits), precred.log_softmax(x, 1, mode="accurate").view(bits))
        assert torch.equal(precred.softmax(x, 0, dtype=torch.float32),
                           precred.softmax(x, 0, dtype=torch.float32, mode="fp64"))
        for n in (2, 1000, 2 ** 16, 2 ** 24, 2 ** 31):
            for depth in (d for d in (1, 8, 16, 24, 32, 40) if 2 ** d >= n):
                for s in (1.0, math.sqrt(n), 0.999 * n):
                    t = 0.999 * s * math.log(n)
                    for gap in (0.0, 0.7, 10.0, 50.0, 80.0, 87.0, 95.0, 104.0):
                        y = math.exp(-gap) / s
                        for single_read in (False, True):
                            fast, fp64 = (softmax_error_bound(mode, n, s, t, 0.0, -gap, dtype, depth=depth,
                                                              single_read=single_read) for mode in ("fast", "fp64"))
                            margin = float(ulp(y, dtype)) / 16 + 4 * FP32_SMALLEST_NORMAL
                            assert fast <= fp64 + margin, (dtype, n, depth, s, gap, single_read, fast, fp64)
    rng = np.random.default_rng(3)
    for dtype in (torch.bfloat16, torch.float16):
        for name in ["normal", "spread1e4", "close", "one_finite"]:
            x = family(name, 3, 1500, rng, dtype)
            want = reference(x, False)
            # over dim 0 too for one family (the strided two-pass path; fast's paths have their own tests)
            for dim, xd in ((1, x), (0, x.t().contiguous()))[:2 if name == "normal" else 1]:
                got = precred.softmax(xd.to(device), dim).cpu()
                got = (got if dim == 1 else got.t()).float().tolist()
                for (row, exact), values in zip(want, got):
                    for value, e in zip(values, exact):
                        claim = 2 * ulp(e, dtype) + 4 * Fraction(FP32_SMALLEST_NORMAL)
                        assert abs(Fraction(value) - e) <= claim, (name, dim, value, float(e))


def test_specials_and_shapes_follow_torch(device):
    inf, nan = math.inf, math.nan
    x = torch.tensor([[-inf] * 4, [inf, 1.0, -inf, 2.0], [nan, 1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0],
                      [-inf, 0.5, -inf, -inf]])
    for mode in EXP_MODES:
        for f, tf in ((precred.softmax, torch.softmax), (precred.log_softmax, torch.log_softmax)):
            got = f(x.to(device), 1, mode=mode).cpu()
            torch.testing.assert_close(got, tf(x, 1), equal_nan=True)
            for path in PATHS:
                for dim, xd in ((1, x), (0, x.t().contiguous()))[:1 if path == "row-loop" else 2]:
                    got, _ = softmax_by_path(xd.to(device), dim, mode, f is precred.log_softmax, x.dtype, path)
                    torch.testing.assert_close(got.cpu(), tf(xd, dim), equal_nan=True)
    y = torch.randn(3, 4, 5, device=device)
    for dim in (0, 1, 2, -1):
        torch.testing.assert_close(precred.softmax(y, dim), torch.softmax(y, dim))
        torch.testing.assert_close(precred.log_softmax(y, dim), torch.log_softmax(y, dim))
    yt = torch.randn(30, 20, device=device).t()
    torch.testing.assert_close(precred.softmax(yt, 0), torch.softmax(yt, 0))
    torch.testing.assert_close(precred.softmax(yt, 1), torch.softmax(yt, 1))
    out = precred.softmax(y.bfloat16(), 1, dtype=torch.float32)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, torch.softmax(y.bfloat16(), 1, dtype=torch.float32))
    assert torch.equal(precred.softmax(y.bfloat16(), 1, torch.float32), out)   # dtype positional, as torch's
    assert torch.equal(precred.log_softmax(y, 0, torch.float64), precred.log_softmax(y, 0, dtype=torch.float64))
    # A narrower dtype rounds the output alone (softmax's docstring); torch casts x first: 70000 -> fp16's inf
    wide = torch.tensor([[70000.0, 0.0]])
    assert torch.softmax(wide, 1, torch.float16).isnan().all()
    assert precred.softmax(wide.to(device), 1, torch.float16).tolist() == [[1.0, 0.0]]
    assert precred.log_softmax(wide.to(device), 1, torch.float16).tolist() == [[0.0, -float("inf")]]
    assert precred.softmax(torch.empty(0, 3, device=device), 1).shape == (0, 3)
    assert precred.softmax(torch.tensor(3.0, device=device), 0).item() == 1.0
    assert precred.log_softmax(torch.tensor(3.0, device=device), 0).item() == 0.0


def test_bad_arguments(device):
    x = torch.randn(3, 4, device=device)
    with pytest.raises(TypeError, match="dim must be an int"):
        precred.softmax(x, None)
    with pytest.raises(TypeError, match="dim must be an int"):
        precred.log_softmax(x, (0, 1))
    with pytest.raises(TypeError, match="input must have a floating dtype"):
        precred.softmax(torch.arange(4, device=device), 0)
    with pytest.raises(TypeError, match="dtype must be a floating dtype"):
        precred.softmax(x, 1, dtype=torch.int32)
    with pytest.raises(ValueError, match="mode must be one of"):
        precred.softmax(x, 1, mode="kahan")
    with pytest.raises(IndexError, match="out of range"):
        precred.log_softmax(x, 2)


@pytest.mark.parametrize("mode", EXP_MODES)
def test_bitwise_deterministic(mode, device):
    x = torch.randn(5, 1500, device=device) * 4
    for f in (precred.softmax, precred.log_softmax):
        assert torch.equal(f(x, 1, mode=mode), f(x, 1, mode=mode))
        assert torch.equal(f(x, 0, mode=mode), f(x, 0, mode=mode))


def test_accurate_log_softmax_bitwise_deterministic(device):
    """`accurate` log_softmax (its split-tail passes: fp32 into bf16, fp64 into fp32; every path) twice
    on the same peaked rows gives the same bits."""
    x = peaked(6, 1500, np.random.default_rng(5), torch.float32).to(device)
    for dtype in (torch.bfloat16, torch.float32):
        xd = x.to(dtype)
        for dim, xx in ((1, xd), (0, xd.t().contiguous())):
            assert torch.equal(precred.log_softmax(xx, dim, mode="accurate"), precred.log_softmax(xx, dim, mode="accurate"))
        for path in ("row-loop", "two-pass"):
            a, _ = softmax_by_path(xd, 1, "accurate", True, dtype, path)
            b, _ = softmax_by_path(xd, 1, "accurate", True, dtype, path)
            assert torch.equal(a, b), (dtype, path)


def test_autograd(device):
    x = torch.randn(3, 7, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: precred.softmax(t, 1), (x,))
    assert torch.autograd.gradcheck(lambda t: precred.log_softmax(t, 0), (x,))
    xb = torch.randn(4, 9, device=device).bfloat16().requires_grad_()
    w = torch.randn(4, 9, device=device)
    (precred.softmax(xb, 1).float() * w).sum().backward()
    ref = xb.detach().clone().requires_grad_()
    (torch.softmax(ref.float(), 1) * w).sum().backward()
    torch.testing.assert_close(xb.grad.float(), ref.grad.float(), atol=1e-2, rtol=0)


def test_torch_compile_fullgraph(device):
    def f(t):
        return precred.softmax(t, -1) + precred.log_softmax(t, 0)

    x = torch.randn(4, 50, device=device)
    torch.testing.assert_close(torch.compile(f, fullgraph=True, backend="eager")(x), f(x))


@pytest.mark.parametrize("log", [False, True])
def test_accurate_is_the_fp64_mode(log, device, monkeypatch):
    """softmax in the `accurate` mode is the fp64 mode's bits (rows and dim 0); log_softmax on the
    two-pass path where no row has s < 1.5 (randn's), though the split-tail kernel is launched there.
    Through the single-read and row-loop kernels `accurate` log_softmax runs the split-tail pass (tested
    below) -- in fp32 into bf16, in fp64 into fp32 -- and the fp64 mode does not: the launches say so."""
    from precred import launch
    op = precred.log_softmax if log else precred.softmax
    x = torch.randn(37, 300, device=device) * 6
    if not log:
        for dim in (-1, 0):
            assert torch.equal(op(x, dim, mode="accurate"), op(x, dim, mode="fp64"))
            assert torch.equal(op(x, dim, mode="accurate", dtype=torch.float64),
                               op(x, dim, mode="fp64", dtype=torch.float64))
        return
    launched = []
    real = launch._launch
    monkeypatch.setattr(launch, "_launch", lambda kernel, *a, **k: launched.append((kernel, k)) or real(kernel, *a, **k))
    launch._RECIPES.clear()
    from precred.schedules.split_tail import split_tail_kernel
    for dtype, acc in ((torch.bfloat16, "fp32"), (torch.float32, "fp64")):
        xt = x.to(dtype)
        for mode in ("fp64", "accurate"):
            launched.clear()
            got, _ = softmax_by_path(xt, 1, mode, True, dtype, "two-pass")
            assert (split_tail_kernel in [k for k, _ in launched]) == (mode == "accurate"), (dtype, mode)
            if mode == "fp64":
                fp64 = got
        assert torch.equal(fp64, got)
        for path in ("single-read", "row-loop"):
            for mode in ("accurate", "fp64"):
                launched.clear()
                softmax_by_path(xt, 1, mode, True, dtype, path)
                ((kernel, consts),) = launched
                if mode == "accurate":
                    assert consts["SPLIT_TAIL"] and str(consts["ACC_DTYPE"]) == acc, (dtype, path, kernel, consts)
                else:
                    assert not consts["SPLIT_TAIL"] and str(consts["ACC_DTYPE"]) == "fp64", (dtype, path, consts)


def peaked(rows, n, rng, dtype, maxima=1):
    """Rows whose maximum (0, at `maxima` random places) dominates: the others lie at gaps G + Exp(2),
    G from 0.5 to 130 over the rows, so the sum of the terms below the maximum, tail = s - maxima, runs
    from ~n to below 2^-170 -- log_softmax's y = -log1p(tail) of the maximum from -log(n) to where it
    rounds to 0 in every format. fp32 log(1 + tail) loses it below 2^-24."""
    top = np.array([0.5, 3.0, 10.0, 17.0, 25.0, 40.0, 60.0, 85.0, 100.0, 108.0, 120.0, 130.0])
    gaps = top[np.arange(rows) % len(top)][:, None] + rng.exponential(2.0, (rows, n))
    a = -gaps
    for r in range(rows):
        a[r, rng.choice(n, maxima, replace=False)] = 0.0
    return torch.from_numpy(a).to(dtype)


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16])
def test_accurate_log_softmax_into_16_bits_within_bound(out_dtype, device):
    """log_softmax `accurate` into bf16 / fp16 (the default there): through the single-read and row-loop
    kernels the split-tail fp32 pass (SPLIT_TAIL; the row loop's third read where s < 1.5), on the
    two-pass path the fp64 mode -- every element within precred.softmax_error_bound of mpmath, rows of
    one and of two maxima next to y = 0 included, from 16-bit and from fp32 input, over dim 1 and dim 0
    (strided single-read rows up to 64)."""
    rng = np.random.default_rng([21, out_dtype.itemsize])
    for in_dtype in (out_dtype, torch.float32):
        for n in (37, 700):
            for maxima in (1, 2):
                x = peaked(12, n, rng, in_dtype, maxima)
                assert_elements_within_bound(x, "accurate", True, device, out_dtype)
        for name in ["normal", "spread1e4", "huge", "tiny", "close", "one_finite"]:
            if name == "huge" and out_dtype == torch.float16:   # beyond fp16's range: inf, no bound claimed
                continue
            assert_elements_within_bound(family(name, 3, 37, rng, in_dtype), "accurate", True, device, out_dtype)


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float64])
def test_accurate_log_softmax_fp64_split_tail_within_bound(out_dtype, device):
    """log_softmax `accurate` into fp32 / fp64: the single-read and row-loop kernels' fp64 split-tail
    pass, every element of peaked rows (one and two maxima) within precred.softmax_error_bound of mpmath
    -- relative to y next to 0 --, every path (the two-pass one with the fp64 mode's bound); the fp64
    mode on the same rows within its own."""
    rng = np.random.default_rng([23, out_dtype.itemsize])
    for n in (37, 700):
        for maxima in (1, 2):
            x = peaked(12, n, rng, out_dtype, maxima)
            for mode in ("accurate", "fp64"):
                assert_elements_within_bound(x, mode, True, device, out_dtype)


def test_split_tail_bound_is_within_one_ulp():
    """The premise of log_softmax's 16-bit default (precred.modes.LOG_SOFTMAX_16BIT_DEFAULT_MODE): the
    split-tail pass's bound (single-read and row-loop kernels) is within 1.01 ulp of the exact y (plus
    the output's smallest subnormal) over rows of n values, plan depths h >= log2(n) up to 48 (the row
    loop's rows of 2^17 bf16 on 4096 lanes: 31 + 12), row sums s from 1 (tails down to 2^-100) through
    the branch at 1.5 to n, and gaps up to 3e4; `accurate` into fp32 (the fp64 split-tail pass)
    likewise -- while fast's, and the fp64 mode's once the tail is below 2^-53, are not bounded
    relative to y next to 0."""
    from precred.bounds import softmax_error_bound, _HALF_TINY
    from validation.oracle import ulp
    for dtype in (torch.bfloat16, torch.float16):
        for n in (2, 1000, 2 ** 15, 2 ** 20):
            for depth in (d for d in (1, 10, 15, 20, 24, 48) if 2 ** d >= n):
                for s in (1.0, 1 + 2.0 ** -100, 1 + 2.0 ** -40, 1 + 2.0 ** -20, 1.1, 1.4999, 1.5, 1.5001, 2.0,
                          math.sqrt(n), float(n)):
                    if s > n:
                        continue
                    for gap in (0.0, 1e-3, 0.5, 10.0, 90.0, 1e3, 3e4):
                        y = -gap - math.log(s)
                        if y == 0 or (dtype == torch.float16 and abs(y) > 6e4):
                            continue
                        # the row loop's s is fast's fp32 state, whose bound grows with t / s <= ln(n)
                        # (bounds.certified_log_sum_margin): at its largest
                        t = 0.999 * s * math.log(n)
                        for loop in (False, True):
                            got = softmax_error_bound("accurate", n, s, t, 0.0, -gap, dtype, depth=depth, log=True,
                                                      out_dtype=dtype, single_read=not loop, row_loop=loop)
                            assert got <= 1.01 * float(ulp(y, dtype)) + 2 * _HALF_TINY[dtype], (
                                dtype, n, depth, s, gap, loop)
    # `accurate` into fp32 through the same kernels: its fp64 split-tail pass
    for n in (2, 1000, 2 ** 15, 2 ** 20):
        for depth in (d for d in (1, 15, 24, 48) if 2 ** d >= n):
            for s in (1.0, 1 + 2.0 ** -100, 1 + 2.0 ** -60, 1 + 2.0 ** -20, 1.4999, 1.5001, float(n)):
                for gap in (0.0, 1e-3, 10.0, 1e3, 1e30):
                    y = -gap - math.log(s)
                    if y == 0 or s > n:
                        continue
                    for loop in (False, True):
                        got = softmax_error_bound("accurate", n, s, 0.999 * s * math.log(n), 0.0, -gap, torch.float32,
                                                  depth=depth, log=True, single_read=not loop, row_loop=loop)
                        assert got <= 1.01 * float(ulp(y, torch.float32)) + 2 * _HALF_TINY[torch.float32], (
                            n, depth, s, gap, loop)
    # next to y = 0 the two-pass path's fp64 bound is absolute: many bf16 ulps of a y of -2^-60
    fp64 = softmax_error_bound("fp64", 1000, 1 + 2.0 ** -60, 0.0, 0.0, 0.0, torch.bfloat16, depth=10, log=True)
    assert fp64 > 4 * float(ulp(-(2.0 ** -60), torch.bfloat16))


@pytest.mark.parametrize("dim", [1, 0])
def test_split_tail_in_parts_within_bound(dim, device, monkeypatch):
    """The two-pass path's split-tail kernel with each row split into parts (precred.plan.SPLIT_TAIL_PART
    set small: rows of 300 in parts of 32 contiguous / 16 strided elements, 10 / 19 parts, which
    split_tail_finish_kernel adds in order): every element of peaked rows (one and two maxima, tails
    down to where they round away) within precred.softmax_error_bound at that depth, bf16 and fp32
    into their own dtype, over dim 1 and dim 0; the finish runs, and a second call gives the same bits."""
    from precred import launch, plan as planning
    from precred.schedules.split_tail import split_tail_finish_kernel
    monkeypatch.setattr(planning, "SPLIT_TAIL_PART", {True: 32, False: 16})
    monkeypatch.setattr(planning, "SPLIT_TAIL_TILE", {True: (1, 8), False: (4, 8)})
    launched = []
    real = launch._launch
    monkeypatch.setattr(launch, "_launch", lambda kernel, *a, **k: launched.append(kernel) or real(kernel, *a, **k))
    launch._RECIPES.clear()
    rng = np.random.default_rng([29, dim])
    n = 300
    assert planning.split_tail_parts(n, dim == 1) == (10 if dim == 1 else 19)
    for dtype in (torch.bfloat16, torch.float32):
        for maxima in (1, 2):
            x = peaked(8, n, rng, dtype, maxima)
            xd = (x if dim == 1 else x.t().contiguous()).to(device)
            launched.clear()
            got, plan = softmax_by_path(xd, dim, "accurate", True, dtype, "two-pass")
            assert split_tail_finish_kernel in launched
            again, _ = softmax_by_path(xd, dim, "accurate", True, dtype, "two-pass")
            assert torch.equal(got, again)
            assert_rows_within_bound(x, got if dim == 1 else got.t(), plan, reference(x, True), "accurate", True, dtype,
                                     f"parts dim={dim}")
    launch._RECIPES.clear()


def record_grids(monkeypatch) -> dict:
    """{kernel: the grid of its latest launch} through precred.launch._launch, for the test's duration."""
    from precred import launch
    grids = {}
    real = launch._launch

    def recording(kernel, grid, *args, **kwargs):
        grids[kernel] = grid
        return real(kernel, grid, *args, **kwargs)
    monkeypatch.setattr(launch, "_launch", recording)
    return grids


@pytest.mark.parametrize("dim", [1, 0])
def test_flat_grid_gives_the_two_dimensional_grids_bits(dim, device, monkeypatch):
    """The normalizing pass and the split tail (parts of a row) launched on a one-dimensional grid
    (schedules/grid.py: CUDA caps a grid's second dimension at 65535, which a softmax over 2^26 elements
    passes): precred.launch.GRID_Y_MAX set to 1 flattens every such launch here, and the outputs are the
    two-dimensional grid's, bit for bit -- softmax `fast`, log_softmax `accurate` with its tail in
    parts, bf16 and fp32, over dim 1 and dim 0."""
    from precred import launch, plan as planning
    from precred.schedules.normalize import normalize_kernel
    from precred.schedules.split_tail import split_tail_kernel
    monkeypatch.setattr(planning, "SPLIT_TAIL_PART", {True: 32, False: 16})
    monkeypatch.setattr(planning, "SPLIT_TAIL_TILE", {True: (1, 8), False: (4, 8)})
    monkeypatch.setattr(launch, "NORMALIZE_TILE", (4, 32))
    grids = record_grids(monkeypatch)
    rng = np.random.default_rng([31, dim])
    n = 300
    for dtype in (torch.bfloat16, torch.float32):
        x = peaked(8, n, rng, dtype)
        xd = (x if dim == 1 else x.t().contiguous()).to(device)
        for mode, log in (("fast", False), ("accurate", True)):
            outputs = []
            for y_max in (launch.GRID_Y_MAX, 1):
                monkeypatch.setattr(launch, "GRID_Y_MAX", y_max)
                launch._RECIPES.clear()
                grids.clear()
                outputs.append(softmax_by_path(xd, dim, mode, log, dtype, "two-pass")[0])
                kernels = [normalize_kernel] + ([split_tail_kernel] if log else [])
                assert all(len(grids[k]) == (2 if y_max > 1 else 1) for k in kernels), (y_max, grids)
            assert torch.equal(outputs[0], outputs[1]), (dtype, mode)
    launch._RECIPES.clear()


def test_persistent_grid_gives_the_row_blocks_bits(device, monkeypatch):
    """The single-read kernel on a persistent grid (precred.plan.SINGLE_READ_PERSISTENT: programs that
    loop over the row blocks, software-pipelined) writes the bits of a program per block -- the fp64
    accumulator with and without log_softmax's counted split tail, the fp32 one with and without its
    split tail; rows with specials (NaN, +inf, all -inf, one finite value) among them -- and launches
    programs per SM x SMs of them. NaN outputs compare as NaN, not by their bits: the NaN that log_softmax
    gives a +inf element (inf - inf) came with the sign bit set on the persistent grid and clear on the
    other (H100, sm_90, the same kernel source), as the compiler orders the subtraction; no caller can
    rely on a NaN's sign or payload (torch does not say which NaN it returns either)."""
    from precred import launch, plan as planning
    from precred.schedules.single_read import single_read_kernel
    grids = record_grids(monkeypatch)
    sm_count = launch.device_sm_count(torch.device(device))
    rows = 2 * sm_count * 4 + 3   # more blocks than programs for blocks of up to 4 rows
    rng = np.random.default_rng(41)
    persistent = {(8, 256, True): (1, 2), (8, 256, False): (1, 3), (4, 512, False): (2, 2), (4, 512, True): (1, 3)}
    for dtype, mode, log, n, key in ((torch.float32, "accurate", True, 256, (8, 256, True)),
                                     (torch.float32, "fp64", False, 200, (8, 256, False)),
                                     (torch.bfloat16, "fast", True, 300, (4, 512, False)),
                                     (torch.bfloat16, "accurate", True, 300, (4, 512, True))):
        x = peaked(rows, n, rng, dtype)
        x[1, 5], x[2, 7], x[3] = float("nan"), float("inf"), float("-inf")
        x[4] = float("-inf")
        x[4, 9] = 1.0
        xd = x.to(device)
        blocks = -(-rows // plan_softmax(xd, 1, get_exp_mode(mode), dtype, log).block_rows)
        outputs = []
        for table in ({}, persistent):
            monkeypatch.setattr(planning, "SINGLE_READ_PERSISTENT", table)
            launch._RECIPES.clear()
            outputs.append(softmax_by_path(xd, 1, mode, log, dtype, "single-read")[0])
            assert grids[single_read_kernel] == ((table[key][0] * sm_count,) if table else (blocks,))
        nan_a, nan_b = outputs[0].isnan(), outputs[1].isnan()
        assert torch.equal(nan_a, nan_b), (dtype, mode)
        assert same_bits(outputs[0].masked_fill(nan_a, 0), outputs[1].masked_fill(nan_b, 0)), (dtype, mode)
    launch._RECIPES.clear()


def test_split_tail_log_softmax_keeps_the_tail_next_to_zero(device):
    """The maximum's log_softmax -log1p(tail) of a row [0, -30, -40, ...] comes back within half an ulp
    and a bit in `accurate` (bf16's default: the fp32 split-tail pass; into fp32 the fp64 one; on the
    two-pass path the split-tail kernel), where torch's (and fast's fp32 sum) give 0, and the fp64 mode
    (fp32's default) loses tails below 2^-53."""
    x = torch.tensor([[0.0, -30.0, -40.0, -41.0], [0.0, -60.5, -61.0, -62.0], [0.0, 0.0, -60.0, -70.0],
                      [0.0, -45.0, -50.0, -51.0]])
    for dtype in (torch.bfloat16, torch.float32):
        xd = x.to(dtype)
        got = precred.log_softmax(xd.to(device), 1, mode="accurate").cpu()
        if dtype == torch.bfloat16:
            assert torch.equal(got, precred.log_softmax(xd.to(device), 1).cpu())
        for (row, exact), values in zip(reference(xd, True), got.double().tolist()):
            e = exact[0]
            assert e != 0 and ulp_error(values[0], e, dtype) <= 0.51, (dtype, values[0], float(e))
        assert precred.log_softmax(xd.to(device), 1, mode="fast")[0, 0].item() == 0.0
        assert torch.log_softmax(xd, 1)[0, 0].item() == 0.0
        assert precred.log_softmax(xd.to(device), 1, mode="fp64")[1, 0].item() == 0.0
        for path in ("row-loop", "two-pass", "two-pass-split"):
            other, _ = softmax_by_path(xd.to(device), 1, "accurate", True, dtype, path)
            assert ulp_error(other[1, 0].item(), reference(xd[1:2], True)[0][1][0], dtype) <= 0.51, path
