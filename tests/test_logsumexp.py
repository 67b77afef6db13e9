"""logsumexp: every mode x dtype x schedule within precred.logsumexp_error_bound against the mpmath
reference (validation/stable_exp.py) on adversarial rows; torch's semantics for specials, empty
reductions and arguments; the default mode's fp32 goal (<= 2 ulp); determinism, autograd, compile.
The fp64 mode's two stages on 16-bit inputs are tested on their own too: the fp32 filter must be right
wherever it certifies and certify what its bound allows; the fp64 recompute must be right on every row
when the filter's flags are cleared."""
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import precred
from precred import launch
from precred.bounds import ACCURATE_EXP_ERROR_UNITS, certified_log_sum_margin
from precred.layout import reduction_view
from precred.launch import plan_for, reduce_logsumexp
from precred.modes import CERTIFIED_EXP_MODE, logsumexp_mode
from precred import plan as plan_module
from precred.plan import plan_exp_recompute
from precred.schedules.accurate_rows import within_two_ulp32
from precred.strategies.compensated import two_sum
from precred.strategies.stable_exp import exp_of_exact_gap, exp_two_part
from validation.oracle import format_info, round_to, ulp, ulp_error
from validation.stable_exp import reference_logsumexp

from conftest import DEVICE as _DEVICE, assert_training_step_compiles_to_eagers_bits, same_bits

EXP_MODES = list(precred.EXP_MODES)
# The modes whose passes a given plan runs differently: `accurate` with a plan runs the fp64 mode's
# (modes.EXP_MODES; test_accurate_is_the_default_and_the_fp64_mode_elsewhere), its own kernel only
# without one (the test_accurate_rows_* tests).
PLANNED_MODES = [m for m in EXP_MODES if m != "accurate"]
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
PLANNER_SETTINGS = {"default": {}, "tiny-tiles": dict(tile_elements=16, sm_count=64, split_min_bytes=0)}
NEG_INF = float("-inf")


def family(name, rows, n, rng, dtype):
    """(rows, n) adversarial inputs for logsumexp, scaled to the format's range."""
    _, emin, emax = format_info(dtype)
    top = min(2.0 ** (emax - 4), 1e30)
    if name == "normal":
        a = 3 * rng.standard_normal((rows, n))
    elif name == "spread1e4":           # values over +-1e4: most terms underflow, the max dominates
        a = rng.uniform(-1e4, 1e4, (rows, n))
    elif name == "huge":                # near the top of the format
        a = top * (1 + 0.01 * rng.standard_normal((rows, n)))
    elif name == "tiny":                # |x| near 2^(emin + 4): lse ~ log(n)
        a = 2.0 ** (emin + 4) * rng.standard_normal((rows, n))
    elif name == "close":               # many near-equal maxima plus a tail
        a = np.where(rng.random((rows, n)) < 0.5, 5.0, 5.0 - rng.exponential(3.0, (rows, n)))
    elif name == "one_finite":          # -inf everywhere but one value per row
        a = np.full((rows, n), NEG_INF)
        a[np.arange(rows), rng.integers(0, n, rows)] = rng.standard_normal(rows) * 10
    else:
        raise ValueError(name)
    return torch.from_numpy(a).to(dtype)


FAMILIES = ["normal", "spread1e4", "huge", "tiny", "close", "one_finite"]


def assert_within_bound(x, dim, mode, device, planner=None):
    """Run logsumexp over dim under the plan `planner` picks; every row within its bound. Returns the
    largest error / bound ratio."""
    dims = tuple(sorted(d % x.dim() for d in ((dim,) if isinstance(dim, int) else dim)))
    xd = x.to(device)
    m = logsumexp_mode(mode, x.dtype)
    view, plan = plan_for(xd, dims, m, x.dtype, **(planner or {}))
    got = reduce_logsumexp(xd, dims, m, plan=plan).cpu().double().tolist()
    # The certified fp64 mode's outputs are the filter's where certified (within the rounding alone) and
    # the fp64 path's elsewhere -- the filter's own finish or the recompute launch: the bound with that
    # path's depth (the recompute's chunks; the SM count only sets outputs per program) covers both.
    depth = plan.depth if m is not CERTIFIED_EXP_MODE else plan_module.certified_exp_fp64_depth(
        plan, view.outer * view.inner, view.red, sm_count=1, strided=view.stride_red != 1)
    return rows_within_bound(x, dim, got, mode, depth, plan.schedule)


def rows_within_bound(x, dim, got, mode, depth, label, references=None):
    """Every output in got (flat, row-major over the kept dims) within its row's bound at depth; the
    largest error / bound ratio. references: reference_logsumexp(x, dim)'s rows, where already made."""
    rows = references if references is not None else reference_logsumexp(x, dim)[0]
    worst = 0.0
    for value, row in zip(got, rows):
        if row.lse is None:
            assert (math.isnan(value) and math.isnan(row.special)) or value == row.special, (value, row)
            continue
        if round_to(row.lse, x.dtype) in (math.inf, -math.inf):
            assert value == round_to(row.lse, x.dtype)
            continue
        bound = precred.logsumexp_error_bound(mode, row.n, row.s, row.t, float(row.lse), x.dtype, depth=depth)
        err = abs(Fraction(value) - row.lse)
        assert err <= Fraction(bound) + Fraction(row.exact_to), (
            f"{mode} {x.dtype} n={row.n} {label} depth={depth}: error {float(err):.3e} > "
            f"bound {bound:.3e} (exact {float(row.lse):.9e}, got {value!r})")
        worst = max(worst, float(err) / bound)
    return worst


@pytest.mark.parametrize("planner", list(PLANNER_SETTINGS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", PLANNED_MODES)
def test_within_bound_every_schedule(mode, dtype, planner, device):
    rng = np.random.default_rng([3, DTYPES.index(dtype), EXP_MODES.index(mode)])
    # Tiny tiles force long lane chains, splits and merges of partial states; the interpreter is slow
    # on them, so they get shorter rows.
    shapes = ((4, 97), (3, 1025)) if planner == "default" else ((3, 97), (2, 300))
    for name in FAMILIES:
        for rows, n in shapes:
            x = family(name, rows, n, rng, dtype)
            assert_within_bound(x, -1, mode, device, PLANNER_SETTINGS[planner])
            assert_within_bound(x.t().contiguous(), 0, mode, device, PLANNER_SETTINGS[planner])   # outer


@pytest.mark.parametrize("mode,dtype", [("fast", torch.float32), ("fast", torch.bfloat16), ("fp64", torch.bfloat16)],
                         ids=str)
def test_narrow_strided_axis_within_bound(mode, dtype, device):
    """Fewer columns than four warps of 16-byte vectors (plan.NARROW_OUTER_MIN_INNER): the fp32 passes
    run one-warp programs with the lanes in registers, split into parts here (the fp64 mode on fp32
    input keeps its plan: tests/test_plan.py); within the bound on every family."""
    rng = np.random.default_rng([5, DTYPES.index(dtype), EXP_MODES.index(mode)])
    planner = dict(split_min_bytes=0)
    for name in FAMILIES:
        x = family(name, 264, 70, rng, dtype).t().contiguous()
        first = plan_for(x, (0,), logsumexp_mode(mode, dtype), dtype, **planner)[1].passes[0]
        assert first.num_warps == 1 and first.block_kept == 32 * 16 // x.element_size() and first.parts > 1, first
        assert_within_bound(x, 0, mode, device, planner)


@pytest.mark.parametrize("mode", PLANNED_MODES)
def test_within_bound_lengths_around_blocks(mode, device):
    rng = np.random.default_rng(11)
    for n in (1, 2, 15, 16, 17, 127, 128, 129, 2047, 2048, 2049):
        assert_within_bound(family("normal", 2, n, rng, torch.float32), -1, mode, device)


@pytest.mark.parametrize("mode", PLANNED_MODES)
@settings(max_examples=20, deadline=None)
@given(a=hnp.arrays(np.float32, hnp.array_shapes(min_dims=2, max_dims=2, max_side=40),
                    elements=st.floats(-1e4, 1e4, width=32)))
def test_within_bound_hypothesis(mode, a):
    assert_within_bound(torch.from_numpy(a), -1, mode, _DEVICE)


def test_default_mode_fp32_within_two_ulp(device):
    """Issue 4's goal for the default mode: fp32 logsumexp within 2 ulp on adversarial rows."""
    rng = np.random.default_rng(5)
    for name in ["normal", "spread1e4", "huge", "tiny", "close"]:
        x = family(name, 8, 3000, rng, torch.float32)
        got = precred.logsumexp(x.to(device), -1).cpu().tolist()
        rows, _, _ = reference_logsumexp(x, -1)
        for value, row in zip(got, rows):
            assert ulp_error(value, row.lse, torch.float32) <= 2.0, (name, value, float(row.lse))


@pytest.mark.parametrize("mode, shape", [("fp64", (4, 97)), ("fp64", (37, 256)), ("fp64", (3, 1024)),
                                         ("fp64", (2, 1)), ("fp64", (5, 1000)), ("fast", (4, 97)),
                                         ("fast", (2, 1)), ("fast", (3, 1024)), ("fast", (2, 3000))], ids=str)
def test_single_read_rows_within_bound(mode, shape, device, monkeypatch):
    """The fp64 (default) and fast modes over contiguous fp32 rows of at most LOGSUMEXP_SINGLE_READ_MAX_ROW's
    elements run the single-read kernel (the one-pass reduction is never called), several rows a
    program with a partial last one included: every row within the mode's bound at the row plan's
    depth, on every family; rows of a transposed copy (strided) take the one pass, as do longer rows
    and bf16 rows (the certified fp64 pass among them)."""
    rows, n = shape
    acc = 8 if mode == "fp64" else 4
    limit = plan_module.LOGSUMEXP_SINGLE_READ_MAX_ROW[(acc, 4)]
    plan = plan_module.plan_logsumexp_rows(rows, n, element_size=4, accumulator_size=acc)
    assert plan is not None and plan.block_j >= n

    def one_pass(*args, **kwargs):
        raise AssertionError("the one-pass reduction ran")

    rng = np.random.default_rng([17, rows, n])
    for name in FAMILIES:
        x = family(name, rows, n, rng, torch.float32)
        with monkeypatch.context() as patch:
            patch.setattr(launch, "reduce", one_pass)
            got = precred.logsumexp(x.to(device), -1, mode=mode).cpu().double().tolist()
        rows_within_bound(x, -1, got, mode, plan.depth, "single-read")
    with monkeypatch.context() as patch:
        patch.setattr(launch, "reduce", one_pass)
        if n > 1:   # (a row of one element reads contiguously either way)
            with pytest.raises(AssertionError, match="one-pass"):
                precred.logsumexp(x.t().contiguous().to(device), 0, mode=mode)
        with pytest.raises(AssertionError, match="one-pass"):
            precred.logsumexp(torch.zeros(2, limit + 1, device=device), 1, mode=mode)
        with pytest.raises(AssertionError, match="one-pass"):
            precred.logsumexp(x.to(torch.bfloat16).to(device), -1, mode=mode)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_specials_follow_torch(dtype, device):
    inf, nan = math.inf, math.nan
    x = torch.tensor([[NEG_INF] * 5, [inf, 1.0, NEG_INF, 2.0, 0.0], [nan, 1.0, 2.0, 3.0, 4.0],
                      [1.0, 2.0, 3.0, 4.0, 5.0], [inf] * 5, [NEG_INF, NEG_INF, 3.0, NEG_INF, NEG_INF],
                      [inf, NEG_INF, nan, 1.0, 1.0]], dtype=dtype)
    for mode in EXP_MODES:
        got = precred.logsumexp(x.to(device), 1, mode=mode).cpu()
        want = torch.logsumexp(x.double(), 1).to(dtype)
        torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", ["normal", "spread1e4", "huge", "close", "one_finite"])
def test_vector_states_within_bound(name, dtype, device, monkeypatch):
    """logsumexp's first passes over rows keep lanes of 16-byte vectors' (s, m) (plan.STABLE_EXP_VECTORS,
    schedules/inner.py stable_exp_vector_part): with and without them, rows of several tiles per lane
    and a partial last tile (1999 values) stay within every mode's bound at the plan's depth; with them
    also split (one tile per part, a partial tile in the last)."""
    rng = np.random.default_rng([17, FAMILIES.index(name), DTYPES.index(dtype)])
    x = family(name, 2, 1999, rng, dtype)
    split = dict(tile_elements=256, sm_count=64, split_min_bytes=0)
    for vectors, planners in ((True, ({}, split)), (False, ({},))):
        monkeypatch.setattr(plan_module, "STABLE_EXP_VECTORS", {4: vectors, 8: vectors})
        monkeypatch.setattr(plan_module, "STABLE_EXP_FP64_VECTOR_ROWS_MAX_RED", 1 << 30 if vectors else 0)
        launch._RECIPES.clear()
        for mode in PLANNED_MODES:
            for planner in planners:
                assert_within_bound(x, -1, mode, device, planner)
    launch._RECIPES.clear()


@pytest.mark.parametrize("name", ["normal", "spread1e4", "huge", "close", "one_finite"])
def test_certified_mode_over_long_rows_split_into_parts_within_bound(name, device):
    """The fp64 mode over 16-bit rows splits long rows into parts (plan.CERTIFIED_EXP_16BIT_ROW_PART,
    plan_reduction's long_row_part): with parts of 256 elements (7 parts of a 1999-element row, the last
    one partial) every row stays within the mode's bound."""
    rng = np.random.default_rng([23, FAMILIES.index(name)])
    x = family(name, 3, 1999, rng, torch.bfloat16)
    planner = dict(long_row_part=256, split_min_bytes=0, sm_count=1)   # 3 rows fill one SM: no other split
    _, plan = plan_for(x, (1,), CERTIFIED_EXP_MODE, x.dtype, **planner)
    assert plan.passes[0].parts == 7, plan
    assert_within_bound(x, -1, "fp64", device, planner)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", ["normal", "spread1e4", "one_finite"])
def test_outer_tile_states_within_bound(name, dtype, device, monkeypatch):
    """Over a strided axis with the lanes in registers (schedules/outer.py stable_exp_tile_part: each
    tile's (s, m) per column, then one merge per column and tile), every mode stays within its bound at
    the plan's depth (both accumulators, whatever plan.STABLE_EXP_VECTORS picks). 77 values per column:
    full tiles of 8 lanes (fp32; 4 for bf16's wider columns) and a partial last one."""
    rng = np.random.default_rng([19, FAMILIES.index(name), DTYPES.index(dtype)])
    columns = 512 if dtype == torch.float32 else 1024
    x = family(name, columns, 77, rng, dtype).t().contiguous()
    planner = dict(tile_elements=8192)
    monkeypatch.setattr(plan_module, "STABLE_EXP_VECTORS", {4: True, 8: True})
    launch._RECIPES.clear()
    for mode in PLANNED_MODES:
        first = plan_for(x, (0,), logsumexp_mode(mode, dtype), dtype, **planner)[1].passes[0]
        assert first.schedule == "outer" and first.lanes >= 4
        assert first.block_kept >= 32 * (16 // x.element_size()) * first.num_warps, "lanes not in registers"
        assert_within_bound(x, 0, mode, device, planner)
    launch._RECIPES.clear()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_specials_follow_torch_in_vectors_and_tiles(dtype, device):
    """test_specials_follow_torch's specials inside the vector states (rows of 300 values: full tiles
    and a partial one) and the outer tile states (the rows' first and last 77 values as 512 / 1024
    columns, lanes in registers, tile_elements 8192): every result exact, as torch's."""
    inf, nan = math.inf, math.nan
    n = 300
    rows = []
    # positions among the first and the last 77 values (the columns below take either)
    for specials in ([(7, inf)], [(299, nan)], [(60, nan)], [(40, inf), (41, nan)], [(250, inf), (251, nan)],
                     [(0, inf), (299, inf)], [(5, 3.0)], [(298, -2.5)], [(290, 4.0), (17, inf)]):
        one_finite = len(specials) == 1 and math.isfinite(specials[0][1])   # the rest -inf
        row = [NEG_INF if one_finite else 1.0] * n
        for position, value in specials:
            row[position] = value
        rows.append(row)
    rows += [[NEG_INF] * n, [inf] * n]
    x = torch.tensor(rows, dtype=dtype)
    columns = 512 if dtype == torch.float32 else 1024
    ends = torch.cat([x[:, :77], x[:, -77:]])
    tiled = ends[torch.arange(columns) % len(ends)].t().contiguous()
    # every row's result is exact: -inf, +inf, NaN, or the one finite value (s = 1 exactly)
    special = ~torch.isfinite(torch.logsumexp(tiled.double(), 0)) | (tiled == NEG_INF).any(0)
    keep = torch.nonzero(special).flatten()
    for mode in EXP_MODES:
        got = precred.logsumexp(x.to(device), 1, mode=mode).cpu()
        torch.testing.assert_close(got, torch.logsumexp(x.double(), 1).to(dtype), equal_nan=True, rtol=0, atol=0)
        m = logsumexp_mode(mode, dtype)
        plan = plan_for(tiled, (0,), m, dtype, tile_elements=8192)[1]
        assert plan.passes[0].block_kept >= 32 * (16 // x.element_size()) * plan.passes[0].num_warps
        got = reduce_logsumexp(tiled.to(device), (0,), m, plan=plan).cpu()[keep]
        want = torch.logsumexp(tiled.double(), 0).to(dtype)[keep]
        torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)


def test_shapes_keepdim_empty_and_dims(device):
    x = torch.randn(3, 4, 5, device=device)
    for dim in (0, 1, 2, -1, (0, 2), (1, 0), ()):
        for keepdim in (False, True):
            got = precred.logsumexp(x, dim, keepdim)
            want = torch.logsumexp(x, dim if dim != () else (0, 1, 2), keepdim)
            assert got.shape == want.shape and got.dtype == x.dtype
            torch.testing.assert_close(got, want)
    assert torch.equal(precred.logsumexp(torch.empty(2, 0, device=device), 1).cpu(), torch.full((2,), NEG_INF))
    assert precred.logsumexp(torch.empty(0, 3, device=device), 1).shape == (0,)
    assert precred.logsumexp(torch.tensor(2.5, device=device), 0).item() == 2.5
    xt = torch.randn(40, 30, device=device).t()        # non-contiguous
    torch.testing.assert_close(precred.logsumexp(xt, 1), torch.logsumexp(xt, 1))
    xe = torch.randn(5, 1, device=device).expand(5, 64)   # stride 0
    torch.testing.assert_close(precred.logsumexp(xe, 1), torch.logsumexp(xe, 1))


def test_bad_arguments(device):
    x = torch.randn(3, 4, device=device)
    with pytest.raises(TypeError, match="dim must be an int or a tuple"):
        precred.logsumexp(x, None)
    with pytest.raises(TypeError, match="input must have a floating dtype"):
        precred.logsumexp(torch.arange(4, device=device), 0)
    with pytest.raises(ValueError, match="mode must be one of"):
        precred.logsumexp(x, 1, mode="kahan")
    with pytest.raises(IndexError, match="dim=2 is out of range"):
        precred.logsumexp(x, 2)
    with pytest.raises(RuntimeError, match="appears multiple times"):
        precred.logsumexp(x, (1, -1))
    with pytest.raises(TypeError, match="keepdim must be a bool"):
        precred.logsumexp(x, 1, keepdim=1)
    before = x.clone()
    precred.logsumexp(x, 1)
    assert torch.equal(x, before)


@pytest.mark.parametrize("mode", EXP_MODES)
def test_bitwise_deterministic(mode, device):
    x = torch.randn(6, 2001, device=device) * 5
    a = precred.logsumexp(x, -1, mode=mode)
    b = precred.logsumexp(x, -1, mode=mode)
    c = precred.logsumexp(x.t().contiguous(), 0, mode=mode)
    assert torch.equal(a, b)
    assert torch.equal(precred.logsumexp(x.t().contiguous(), 0, mode=mode), c)


def test_autograd(device):
    x = torch.randn(4, 9, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: precred.logsumexp(t, 1), (x,))
    assert torch.autograd.gradcheck(lambda t: precred.logsumexp(t, (0, 1), keepdim=True), (x,))


@pytest.mark.parametrize("mode", EXP_MODES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_gradient_of_16_bit_input_far_from_zero(dtype, mode, device):
    """d lse / dx = softmax(x), in fp32 from an fp32 logsumexp, rounded to the input's format: at
    |lse| ~ 1e3 the 16-bit result (torch's way) would put exp off by a factor up to exp(|lse| 2^-9).
    Against the exact softmax (mpmath, from the oracle's lse): the fp32 lse is within 2^-23 |lse|
    (`fast`: a few fp32 ulps, within 2^-20 |lse|), x - lse rounds by 2^-24 |x - lse|, torch's fp32
    exp is within 2 ulps (CUDA's expf; CPU's within 1), the product by 1 is exact; then the output's
    half ulp (its spacing at p (1 + rel), subnormals included)."""
    gen = torch.Generator().manual_seed(7)
    offsets, spreads = [0.0, 100.0, 1000.0], [3.0, 3.0, 8.0]
    x = torch.stack([o + s * torch.randn(64, generator=gen, dtype=torch.float64) for o, s in zip(offsets, spreads)])
    x = x.to(dtype)
    xd = x.to(device).clone().requires_grad_()
    precred.logsumexp(xd, 1, mode=mode).sum().backward()
    got = xd.grad.cpu().double().numpy()
    rows, _, _ = reference_logsumexp(x, 1)
    p_fmt, emin, _ = format_info(dtype)
    lse_error = 2.0 ** -20 if mode == "fast" else 2.0 ** -23
    for i, row in enumerate(rows):
        with mpmath.workprec(100):
            lse = mpmath.mpf(row.lse.numerator) / row.lse.denominator
            exact = np.array([float(mpmath.exp(mpmath.mpf(float(v)) - lse)) for v in x[i].double().tolist()])
        gaps = np.abs(x[i].double().numpy() - float(lse))
        rel = lse_error * abs(float(lse)) + 2.0 ** -24 * gaps + 4 * 2.0 ** -24
        rel = np.expm1(rel) * (1 + 2.0 ** -20)
        high = exact * (1 + rel)
        spacing = np.exp2(np.maximum(np.floor(np.log2(np.maximum(high, 2.0 ** -160))), emin) - (p_fmt - 1))
        bound = rel * exact + 0.5 * spacing
        assert np.all(np.abs(got[i] - exact) <= bound), (offsets[i], float(np.max(np.abs(got[i] - exact) / bound)))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_second_derivative_of_16_bit_input_keeps_the_lse_term(dtype, device):
    """With create_graph=True the gradient of 16-bit input is formed from the saved output r (torch's
    way), so that it can be differentiated again: d/dx_j sum_i g_i = p^_j - S p~_j, where p^ = exp(x -
    r) (fp32), S = sum p^, and p~ = d r / dx_j (the backward again: softmax from an fp32 lse, rounded to
    the input's format). The Hessian of logsumexp maps ones to zero; without the d r / dx term the
    result would be p^_j, about p_j. Bound, from the exact softmax p and d = |r - lse| (exact lse of the
    16-bit input): p^_j and S p~_j both lie in p_j [e^-d (1 - a), e^d (1 + a)], a = (n + 8) 2^-24 (fp32
    exp, sum and product) + 2^-8 (p~ and each term rounded to 16 bits); their difference is rounded
    to 16 bits (2^-8 more, relative); and half a subnormal spacing per rounding to 16 bits."""
    gen = torch.Generator().manual_seed(11)
    x = (3.0 * torch.randn(3, 40, generator=gen, dtype=torch.float64)).to(dtype)
    xd = x.to(device).clone().requires_grad_()
    y = precred.logsumexp(xd, 1)
    (g,) = torch.autograd.grad(y.sum(), xd, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), xd)
    h = h.cpu().double().numpy()
    rows, _, _ = reference_logsumexp(x, 1)
    n = x.shape[1]
    a = (n + 8) * 2.0 ** -24 + 2.0 ** -8
    p_fmt, emin, _ = format_info(dtype)
    tiny = 0.5 * 2.0 ** (emin - p_fmt + 1)   # half a subnormal spacing per 16-bit rounding (S p~ <= 2 of them)
    for i, row in enumerate(rows):
        lse = float(row.lse)
        p = np.exp(x[i].double().numpy() - lse)
        d = abs(float(y[i].detach().cpu().double()) - lse)
        bound = p * (math.exp(d) * (1 + a) - math.exp(-d) * (1 - a)) * (1 + 2.0 ** -8) + 4 * tiny
        assert np.all(np.abs(h[i]) <= bound), (i, float(np.max(np.abs(h[i]) / bound)))
        big = p > 1e-3
        assert np.max(bound[big] / p[big]) < 0.1   # far below p: a missing d r / dx term would fail


def test_torch_compile_fullgraph(device):
    def f(t):
        return precred.logsumexp(t, -1) * 2

    x = torch.randn(4, 100, device=device)
    compiled = torch.compile(f, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(x), f(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_torch_compile_traces_a_training_step(dtype, device):
    """aot_eager traces the backward with fake tensors (as inductor does for a training step): the
    16-bit backward's fp32 logsumexp goes through its own custom op (precred::logsumexp_fp32) --
    launched directly, it failed ("invalid python storage"). Output and gradient as eager's, bits."""
    def f(t):
        return precred.logsumexp(t, -1) * 2

    x = torch.randn(4, 100, generator=torch.Generator().manual_seed(2)).to(dtype).to(device)
    assert_training_step_compiles_to_eagers_bits(f, x)


# --- the fp64 mode on 16-bit inputs: the fp32 filter and the fp64 recompute ---

@pytest.fixture
def filter_flags(monkeypatch):
    """Record the fp32 filter's flags at each call of the fp64 recompute (as the filter left them);
    then, with `clear=True`, zero them, so that the recompute redoes every output (`clear` a bool
    tensor: those it marks). A cleared output is given what the filter leaves in an uncertified one,
    its row's maximum (the recompute's reference): a row the recompute skips keeps that, not its
    result. The filter's flags are seen where the recompute launch reads them: every plan takes the
    two launches here (plan.CERTIFIED_EXP_ONE_LAUNCH_RED None; the one-launch finish has its own test,
    test_certified_filter_finishes_in_one_launch)."""
    seen = []
    settings = {"clear": False, "left": []}   # left: the outputs as the filter left them
    original = launch._launch_exp_recompute
    monkeypatch.setattr(plan_module, "CERTIFIED_EXP_ONE_LAUNCH_RED", None)

    def spy(view, source, out, flags, dependent):
        seen.append(flags.cpu().clone())
        settings["left"].append(out.cpu().clone().view(-1))
        if settings["clear"] is not False:
            cleared = (torch.ones(flags.shape, dtype=torch.bool, device=flags.device) if settings["clear"] is True
                       else settings["clear"].to(flags.device))
            rows = torch.as_strided(view.source, (view.outer, view.red, view.inner),
                                    (view.stride_outer, view.stride_red, view.stride_inner))
            flags[cleared] = 0
            out.view(-1)[cleared] = rows.amax(1).reshape(-1)[cleared]
        return original(view, source, out, flags, dependent)

    monkeypatch.setattr(launch, "_launch_exp_recompute", spy)
    return seen, settings


def _as_output(value: Fraction, dtype) -> float:
    """The kernels' rounding of an exact value to a 16-bit output: to fp32, then to the format."""
    return round_to(Fraction(round_to(value, torch.float32)), dtype)


def _filtered(x, device, dim=1):
    """(outputs on the CPU, the plan) of the certified fp64 mode over x's dim (no launch recipe replayed:
    the filter_flags spy sees every call)."""
    xd = x.to(device)
    _, plan = plan_for(xd, (dim,), CERTIFIED_EXP_MODE, x.dtype)
    return reduce_logsumexp(xd, (dim,), CERTIFIED_EXP_MODE, plan=plan).cpu(), plan


def _near_midpoint_rows(dtype, count):
    """Rows (x, x - g) of 16-bit values whose logsumexp x + log1p(exp(-g)) lies within 1e-6 of a
    rounding boundary of the format (found in fp64 over x in [1, 2) and g in [2^-10, 16)): the fp32
    filter cannot tell which way they round."""
    p, _, _ = format_info(dtype)
    bits = 0x3F80 if dtype == torch.bfloat16 else 0x3C00
    xs = torch.arange(bits, bits + (1 << (p - 1)), dtype=torch.int16).view(dtype).double().numpy()
    low, high = torch.tensor([2.0 ** -10, 16.0], dtype=dtype).view(torch.int16).tolist()
    gs = torch.arange(low, high, dtype=torch.int16).view(dtype).double().numpy()
    lse = xs[:, None] + np.log1p(np.exp(-gs[None, :]))
    spacing = 2.0 ** (np.floor(np.log2(lse)) - (p - 1))
    distance = np.abs(lse / spacing - np.floor(lse / spacing) - 0.5) * spacing
    i, j = np.nonzero(distance < 1e-6)
    pairs = np.stack([xs[i], xs[i] - gs[j]], axis=1)[:count]
    return torch.from_numpy(pairs).to(dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_filter_is_right_wherever_it_certifies(dtype, device, filter_flags):
    """Certified outputs are the exact result correctly rounded (a theorem of the filter's bound), on
    adversarial families and on rows built to sit next to a rounding boundary; on those, the filter
    leaves some to the recompute -- their outputs holding the row's maximum, the recompute's reference
    -- and every output is within the fp64 mode's bound."""
    seen, settings = filter_flags
    rng = np.random.default_rng([21, dtype.itemsize])
    inputs = [family(name, 6, 700, rng, dtype) for name in FAMILIES] + [_near_midpoint_rows(dtype, 40)]
    for x in inputs:
        got = _filtered(x, device)[0].double().tolist()
        flags = seen[-1].tolist()
        left = settings["left"][-1].double().tolist()
        rows, _, _ = reference_logsumexp(x, 1)
        for value, flag, row, first, elements in zip(got, flags, rows, left, x):
            if flag and row.lse is not None:
                assert value == _as_output(row.lse, dtype), (value, float(row.lse), x.dtype)
            if not flag:
                assert first == float(elements.max()), (first, x.dtype)
        assert_within_bound(x, 1, "fp64", device)
    assert not all(seen[-2].tolist()[:40]), "rows next to a rounding boundary: the filter must not certify all"
    # those rows as columns (over dim 0: the outer schedule's finish) leave their maxima too
    pairs = _near_midpoint_rows(dtype, 40)
    _filtered(pairs.t().contiguous(), device, 0)
    unkept = seen[-1] == 0
    assert unkept.any()
    assert torch.equal(settings["left"][-1][unkept].double(), pairs.amax(1)[unkept].double())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_filter_certifies_what_its_bound_allows(dtype, device, filter_flags):
    """A row whose exact result is more than twice the filter's margin (plus fp64's) from every rounding
    boundary is certified: the filter's interval lies inside the result's rounding cell."""
    seen, _ = filter_flags
    rng = np.random.default_rng([22, dtype.itemsize])
    x = family("normal", 64, 1500, rng, dtype)
    got, plan = _filtered(x, device)
    got = got.double().tolist()
    flags = seen[-1].tolist()
    margin = certified_log_sum_margin(x.shape[1], plan.depth)
    rows, _, _ = reference_logsumexp(x, 1)
    clear_rows = 0
    for flag, row in zip(flags, rows):
        lse = row.lse
        e = Fraction(2 * margin) + Fraction(2.0 ** -48) * (abs(lse) + 1)
        if _as_output(lse - e, dtype) == _as_output(lse + e, dtype):
            clear_rows += 1
            assert flag, (float(row.lse), margin)
    assert clear_rows >= 48, "the normal family's results are mostly far from boundaries"


# tiny tiles (the filter split) only with the chunked recompute: unchunked too took ~2 min a case in CI
@pytest.mark.parametrize("planner, chunks", [("default", "whole"), ("default", "tiles"), ("tiny-tiles", "tiles"),
                                             ("default", "one-tile")])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_recompute_alone_on_every_row(dtype, planner, chunks, device, filter_flags, monkeypatch):
    """The fp64 recompute redoes every output when the flags are cleared: within the fp64 mode's bound
    (whose depth counts the chunks' merge), rows of 1100 contiguous and strided (the transposed copy over
    dim 0): at the default constants ("whole": rows in one program, as a group of 4 in tiles of 256;
    columns in 3 chunks of one tile, one at a time: fewer than a group's threshold), in 5 chunks of 4
    tiles (the last short; groups in tiles of 32), or in 18 chunks of one tile (the merge tree padded to
    32; groups in one tile), merged by whichever chunk arrives last; after the filter's default plan and
    its split over tiny tiles. Rows of torch's specials too (inf, NaN, -inf rows and chunks)."""
    seen, settings = filter_flags
    settings["clear"] = True
    if chunks != "whole":
        min_chunk, expected = (256, 5) if chunks == "tiles" else (64, 18)
        for prefix in ("EXP_RECOMPUTE_", "EXP_RECOMPUTE_COLUMN_"):
            monkeypatch.setattr(plan_module, prefix + "MIN_CHUNK", min_chunk)
            monkeypatch.setattr(plan_module, prefix + "TILE", 64)
            # the rows in groups (3 of 3 uncertified), of tiles of 32 (8 a chunk) or one tile of 64
            monkeypatch.setattr(plan_module, prefix + "GROUP_MIN", 2)
            monkeypatch.setattr(plan_module, prefix + "GROUP_TILE", 32 if chunks == "tiles" else 64)
        for strided in (False, True):
            rp = plan_exp_recompute(3, 1100, sm_count=2, strided=strided)
            assert (rp.chunks, rp.one_tile) == (expected, chunks == "one-tile"), rp
            assert (rp.group > 1, rp.group_one_tile) == (True, chunks == "one-tile"), rp
    rng = np.random.default_rng([23, dtype.itemsize])
    for name in FAMILIES:
        x = family(name, 3, 1100, rng, dtype)
        assert_within_bound(x, -1, "fp64", device, PLANNER_SETTINGS[planner])
        assert_within_bound(x.t().contiguous(), 0, "fp64", device, PLANNER_SETTINGS[planner])
    # torch's specials through the chunks' merge: +inf in the last chunk, NaN in the first, +inf and NaN,
    # a row of -inf, +inf alone among -inf, a chunk of -inf among finite ones
    x = torch.from_numpy(rng.standard_normal((6, 1100))).to(dtype)
    x[0, 1050] = x[2, 5] = x[4, 600] = math.inf
    x[1, 5] = x[2, 900] = math.nan
    x[3] = x[4, :600] = x[4, 601:] = x[5, :300] = -math.inf
    assert_within_bound(x, -1, "fp64", device, PLANNER_SETTINGS[planner])
    assert_within_bound(x.t().contiguous(), 0, "fp64", device, PLANNER_SETTINGS[planner])
    assert any(bool(f.any()) for f in seen), "the filter certified outputs that the recompute then redid"


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_recompute_groups_and_lone_rows(dtype, dim, device, filter_flags):
    """The recompute takes adjacent outputs in groups (plan.ExpRecomputePlan): a group with at least
    group_min uncertified rows is redone whole -- only those written -- and one with fewer row by row.
    24 rows of 1100, as columns over dim 0 (one group of 32, its last 8 past the outputs; at least 8
    uncertified for the whole group) and as contiguous rows over dim 1 (groups of 4, at least 2): rows
    0-15 and 20 uncertified (whole groups either way), the odd rows below 16 and 17, 18, 23 (over dim
    0 the whole group, 11 of its 24; over dim 1 whole groups and a lone row), then rows 3, 9, 17, 23
    (lone rows either way). Every output within the fp64 mode's bound, the kept ones the filter's own
    bits, and a second call the same bits (the chunks' counters left at zero)."""
    seen, settings = filter_flags
    rp = plan_exp_recompute(24, 1100, sm_count=1, strided=dim == 0)
    assert (rp.group, rp.chunks, rp.group_min) == ((32, 3, 8) if dim == 0 else (4, 1, 2)), rp
    rng = np.random.default_rng([24, dtype.itemsize])
    x = torch.from_numpy(rng.standard_normal((1100, 24)) * 3).to(dtype)
    x[7, 2] = math.inf
    x[900, 5] = math.nan
    x[:, 9] = -math.inf
    x = x if dim == 0 else x.t().contiguous()

    def certified_mode(x):
        return _filtered(x, device, dim)[0].view(torch.int16)   # bits

    kept = certified_mode(x)
    for cleared in ([*range(16), 20], [*range(1, 16, 2), 17, 18, 23], [3, 9, 17, 23]):
        settings["clear"] = torch.zeros(24, dtype=torch.bool)
        settings["clear"][cleared] = True
        got = certified_mode(x)
        assert torch.equal(got, certified_mode(x)), "not the same bits twice"
        certified = seen[-1].bool() & ~settings["clear"]
        assert torch.equal(got[certified], kept[certified]), "a kept output was overwritten"
        rows_within_bound(x, dim, got.view(dtype).double().tolist(), "fp64", rp.depth, "groups")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_recompute_groups_across_kept_dims(dtype, device, filter_flags):
    """A group is adjacent outputs, not adjacent columns: over the middle dim of a (3, 1100, 7) tensor
    (21 outputs, strided rows; one group of 32) a group spans outputs of different leading indices, each
    row at its own address (outer * stride_outer + inner * stride_inner). Every output recomputed,
    each within the fp64 mode's bound."""
    seen, settings = filter_flags
    settings["clear"] = True
    rng = np.random.default_rng([25, dtype.itemsize])
    x = torch.from_numpy(rng.standard_normal((3, 1100, 7)) * 3).to(dtype)
    x[1, :, 4] = -math.inf
    x[2, 17, 0] = math.inf
    assert plan_exp_recompute(21, 1100, sm_count=1, strided=True).group == 32
    assert_within_bound(x, 1, "fp64", device)
    assert seen, "the recompute ran"


@pytest.mark.parametrize("red", [1, 3, 16, 40, 256])
def test_recompute_groups_of_short_columns(red, device, filter_flags):
    """Short columns go in wide groups of few lanes (plan.column_group: [512 columns, 1 lane] for 16
    rows, [128, 4] for 40 -> 64, [32, 16] for 256): every output of 600 bf16 columns recomputed (whole
    groups, the last one past the outputs), within the fp64 mode's bound, on ordinary values and on
    torch's specials (+inf, NaN, a column of -inf); the same bits twice."""
    seen, settings = filter_flags
    settings["clear"] = True
    group, lanes, _ = plan_module.column_group(red)
    assert lanes == min(64, max(1, (1 << (red - 1).bit_length()) // 16))
    assert group * lanes == max(512, plan_module.EXP_RECOMPUTE_COLUMN_GROUP * lanes)
    rng = np.random.default_rng([26, red])
    x = torch.from_numpy(rng.standard_normal((red, 600)) * 3).to(torch.bfloat16)
    x[red // 2, 7] = math.inf
    x[red - 1, 300] = math.nan
    x[:, 599] = -math.inf
    assert_within_bound(x, 0, "fp64", device)
    first = _filtered(x, device, 0)[0]   # not the public call: its replay would skip the spy's clearing
    assert same_bits(first, _filtered(x, device, 0)[0])
    assert seen, "the recompute ran"


def _peaked_rows(rows, n, rng, dtype):
    """Rows of one 0 among values in [-40, -20]: logsumexp = log1p(tail), tail ~ n e^-30, far below what
    the fp32 filter can certify (every such row is left to fp64)."""
    a = rng.uniform(-40.0, -20.0, (rows, n))
    a[:, rng.integers(0, n)] = 0.0
    return torch.from_numpy(a).to(dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("n", [200, 1000, 3000])
def test_certified_filter_finishes_in_one_launch(n, dtype, device, monkeypatch):
    """plan.CERTIFIED_EXP_ONE_LAUNCH_RED: logsumexp's fp32 filter planned as one inner pass finishes the
    rows it cannot certify itself, in fp64 (recompute.certify_exp_or_recompute): rows next to 0 (every
    one left by the filter) come back with flag 2 and within the fp64 mode's bound at the finish's
    depth (plan.exp_finish_depth), no recompute launch runs, the kept rows (randn + 5, torch's
    specials) keep the filter's bits -- those the two launches give -- and a second call gives the
    same bits. At 1 and 8 fp64 terms a thread (plan.EXP_FINISH_PER_THREAD). (The filter certifies a NaN
    row as it is, but not a +inf or all -inf one -- its interval's ends, lse -+ inf, are NaN -- which
    the fp64 finish then gives as torch does, as the recompute launch would.)"""
    rng = np.random.default_rng([27, n, dtype.itemsize])
    x = _peaked_rows(9, n, rng, dtype)
    x[2] = torch.from_numpy(rng.standard_normal(n) + 5.0).to(dtype)   # logsumexp ~ 5 + log(n): kept
    x[6, 3], x[7, 5], x[8] = math.nan, math.inf, -math.inf
    two_launches = _filtered(x, device)[0]
    calls, flags = [], []
    monkeypatch.setattr(launch, "_launch_exp_recompute", lambda *args: calls.append(args))
    original_outputs = launch._Workspace.outputs

    def outputs(self, *args):   # the call's flags (the workspace's second output), as the kernel leaves them
        out, second = original_outputs(self, *args)
        flags.append(second)
        return out, second

    monkeypatch.setattr(launch._Workspace, "outputs", outputs)
    monkeypatch.setattr(plan_module, "CERTIFIED_EXP_ONE_LAUNCH_RED", (1, n))   # these rows too
    for per_thread in (1, 8):
        monkeypatch.setattr(plan_module, "EXP_FINISH_PER_THREAD", per_thread)
        got, plan = _filtered(x, device)
        assert plan_module.certified_exp_in_one_launch(plan), plan
        assert flags[-1].cpu().tolist() == [2, 2, 1, 2, 2, 2, 1, 2, 2], flags[-1]
        assert not calls, "the one-launch filter launched the recompute"
        kept = torch.tensor([2, 6])
        assert torch.equal(got[kept].view(torch.int16), two_launches[kept].view(torch.int16))
        rows_within_bound(x, -1, got.double().tolist(), "fp64", plan_module.exp_finish_depth(plan.passes[0]),
                          f"finished in the filter's launch, {per_thread} a thread")
        assert torch.equal(_filtered(x, device)[0].view(torch.int16), got.view(torch.int16))
        # the public call (its plan is this one), twice: on a GPU the second replays the call's one-launch
        # recipe (launch._Recipe._run_one_pass), the flags its workspace's
        monkeypatch.setattr(launch, "_RECIPES", {})
        monkeypatch.setattr(precred.eager, "_CALLS", {})
        for _ in range(2):
            public = precred.logsumexp(x.to(device), -1, mode="accurate").cpu()
            assert torch.equal(public.view(torch.int16), got.view(torch.int16)), per_thread
            assert not calls


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_certified_filter_finishes_in_one_launch_where_measured(dtype):
    """The production rule (plan.CERTIFIED_EXP_ONE_LAUNCH_RED's note, H100): rows of 256 and 512 finish
    in the filter's launch; rows of 128 and 1024 -- each lost 6-11% on randn that way -- keep the
    recompute launch (one inner pass of one part a row all four, so the row length alone decides)."""
    for n, expected in ((128, False), (256, True), (512, True), (1024, False)):
        _, plan = plan_for(torch.zeros(4096, n, dtype=dtype), (1,), CERTIFIED_EXP_MODE, dtype, sm_count=132)
        assert len(plan.passes) == 1 and plan.passes[0].parts == 1, (n, plan)
        assert plan_module.certified_exp_in_one_launch(plan) is expected, (n, plan)


# --- the accurate mode over contiguous fp32 rows: the kept results and the fp64 recompute ---

# The streamed kernel's tiles made small enough that rows of a few hundred elements take several
# (rescales included), and the held rows' limit low enough that the interpreter runs both paths.
SMALL_ACCURATE_TILES = dict(ACCURATE_ONE_TILE_MAX_ROW=128, ACCURATE_STREAM_TILE=256, ACCURATE_STREAM_WARPS=2)


def _small_accurate_tiles(monkeypatch):
    for name, value in SMALL_ACCURATE_TILES.items():
        monkeypatch.setattr(plan_module, name, value)


def _fresh_recipes(monkeypatch):
    """Empty launch-recipe caches for the test (restored after it): on CUDA a public call replays the
    recipe its signature left, which a test's planner constants would not change."""
    from precred import eager

    monkeypatch.setattr(launch, "_RECIPES", {})
    monkeypatch.setattr(eager, "_CALLS", {})


def _accurate_rows(x, device, recompute=True, sm_count=1):
    """(outputs, flags) of the accurate mode's row kernel over x's last dim (recompute=False: the first
    stage alone, whose flags say which outputs it kept), planned for sm_count SMs (more SMs than half
    the rows: the streamed rows split into parts)."""
    from precred.layout import reduction_view

    rows_plan = plan_module.plan_accurate_logsumexp_rows(x.shape[0], x.shape[1], sm_count=sm_count)
    out, flags = launch.accurate_logsumexp_rows(reduction_view(x.to(device), (1,)), rows_plan, recompute=recompute)
    return out.cpu().double().tolist(), flags.cpu().tolist()




def _log_probability_rows(rows, n, rng):
    """Rows of log-probabilities (x - logsumexp(x) in fp64, rounded to fp32): logsumexp ~ 0, where an
    fp32 ulp is far below the kept results' bound, so the kernel must leave every row to the recompute."""
    a = 3 * rng.standard_normal((rows, n))
    a = a - np.log(np.exp(a - a.max(1, keepdims=True)).sum(1, keepdims=True)) - a.max(1, keepdims=True)
    return torch.from_numpy(a).float()


@pytest.mark.parametrize("tiles", ["default", "small", "split"])
def test_accurate_rows_within_two_ulp(tiles, device, monkeypatch):
    """The accurate mode's row kernel, held rows, streamed ones and streamed ones split into parts:
    every output it keeps (flag 1) and, with the fp64 recompute, every output within 2 ulp of mpmath's
    (its bound, logsumexp_error_bound) on the adversarial families."""
    if tiles != "default":
        _small_accurate_tiles(monkeypatch)
    sm_count = 64 if tiles == "split" else 1
    if tiles == "split":   # 3 rows of 1000 in parts of 1 or 2 tiles of 256 (the last one partial)
        monkeypatch.setattr(plan_module, "ACCURATE_MIN_PART_TILES", 1)
        assert plan_module.plan_accurate_logsumexp_rows(3, 1000, sm_count=sm_count).parts == 4
    rng = np.random.default_rng(17)
    # held rows cut by the tile's end (masked loads) or filling it (FULL_TILES: unmasked), in pieces
    # (rows of up to 256) or whole
    shapes = ((4, 97), (4, 128), (3, 1000)) if tiles != "default" else ((4, 97), (2, 512), (2, 3000), (2, 9000))
    assert {plan_module.plan_accurate_logsumexp_rows(rows, n, sm_count=sm_count).pieces > 1
            for rows, n in shapes[:2]} == ({True} if tiles != "default" else {True, False})
    assert {launch._full_row_tiles(rows, n, plan_module.plan_accurate_logsumexp_rows(rows, n, sm_count=sm_count))
            for rows, n in shapes} == {False, True}
    for name in FAMILIES:
        for rows, n in shapes:
            x = family(name, rows, n, rng, torch.float32)
            kept, flags = _accurate_rows(x, device, recompute=False, sm_count=sm_count)
            got, _ = _accurate_rows(x, device, sm_count=sm_count)
            references, _, _ = reference_logsumexp(x, -1)
            for value, first, flag, row, elements in zip(got, kept, flags, references, x):
                if row.lse is None:   # a special: kept as torch's answer
                    assert flag == 1 and ((math.isnan(value) and math.isnan(row.special)) or value == row.special)
                    continue
                assert ulp_error(value, row.lse, torch.float32) <= 2.0, (name, n, value, float(row.lse))
                if flag:
                    assert first == value and ulp_error(first, row.lse, torch.float32) <= 2.0, (name, n)
                else:   # what the recompute takes as its reference
                    assert first == float(elements.max()), (name, n, first)
            depth = plan_module.accurate_rows_fp64_depth(rows, n, sm_count=sm_count)
            rows_within_bound(x, -1, got, "accurate", depth, "rows", references)


@pytest.mark.parametrize("tiles", ["default", "small"])
def test_accurate_rows_keep_what_their_bound_allows(tiles, device, monkeypatch):
    """Both stages run: rows of normal data (logsumexp ~ log(n) + 4.5, an fp32 ulp above the kept
    results' bound) are all kept; rows of log-probabilities (logsumexp ~ 0) are all left to the
    recompute -- their outputs holding the row's maximum, its reference -- which gets them within the
    fp64 mode's bound."""
    if tiles == "small":
        _small_accurate_tiles(monkeypatch)
    rng = np.random.default_rng(19)
    n = 1000 if tiles == "small" else 3000
    _, flags = _accurate_rows(family("normal", 6, n, rng, torch.float32), device, recompute=False)
    assert flags == [1] * 6
    x = _log_probability_rows(6, n, rng)
    left, flags = _accurate_rows(x, device, recompute=False)
    assert flags == [0] * 6
    assert left == x.amax(1).double().tolist()
    got, _ = _accurate_rows(x, device)
    rows_within_bound(x, -1, got, "fp64", plan_module.accurate_rows_fp64_depth(6, n, sm_count=1), "recompute")
    _assert_kept_near_powers_of_two(lambda x, recompute: _accurate_rows(x, device, recompute=recompute), n, rng, -1)


@pytest.mark.parametrize("n", [200, 256, 1000, 3000])
def test_accurate_held_rows_finish_in_fp64(n, device, monkeypatch):
    """Held rows (a tile a program; in pieces up to 256) finish the rows their bound does not keep in
    fp64 in the same program: rows of log-probabilities (every one left by the bound: flag 0 and the
    row's maximum after the first stage alone) come back with flag 2 and within the fp64 mode's bound
    at the finish's depth (plan.AccurateExpPlan.finish_depth), no recompute launch runs, a row the
    bound keeps keeps its fp32 bits, and a second call gives the same bits. Rows of torch's specials
    among them (NaN, +inf, all -inf: kept as they are) are left alone."""
    calls = []
    original = launch._launch_exp_recompute
    monkeypatch.setattr(launch, "_launch_exp_recompute", lambda *args: calls.append(args) or original(*args))
    p = plan_module.plan_accurate_logsumexp_rows(9, n, sm_count=1)
    assert p.one_tile and (p.pieces > 1) == (n <= 256), p
    x = _log_probability_rows(9, n, np.random.default_rng([26, n]))
    x[2] += 5.0   # logsumexp ~ 5: kept
    x[6, 3], x[7, 5], x[8] = math.nan, math.inf, -math.inf
    first, first_flags = _accurate_rows(x, device, recompute=False)
    got, flags = _accurate_rows(x, device)
    assert first_flags == [0, 0, 1, 0, 0, 0, 1, 1, 1] and flags == [2, 2, 1, 2, 2, 2, 1, 1, 1], (first_flags, flags)
    assert first[:2] == x[:2].amax(1).double().tolist() and got[2] == first[2]
    assert math.isnan(got[6]) and got[7:] == [math.inf, -math.inf]
    assert not calls, "held rows launched the recompute"
    rows_within_bound(x, -1, got, "fp64", p.finish_depth, "held rows finished in fp64")
    np.testing.assert_array_equal(_accurate_rows(x, device)[0], got)   # NaN where NaN


def _assert_kept_near_powers_of_two(run, n, rng, dim):
    """Results on either side of the powers of two where an fp32 ulp halves (the bound's own edge), n
    elements each along dim (-1, or 0 of the transposed rows): the kept ones within 2 ulp, some kept
    and some left, every output within 2 ulp in the end. run(x, recompute): (outputs, flags)."""
    targets = [1.9, 2.1, 3.9, 4.1, 7.9, 8.1, -2.1, -7.9]
    x = _log_probability_rows(len(targets), n, rng) + torch.tensor(targets)[:, None]
    x = x if dim == -1 else x.t().contiguous()
    kept, flags = run(x, False)
    got, _ = run(x, True)
    references, _, _ = reference_logsumexp(x, dim)
    assert 0 < sum(flags) < len(targets), flags
    for first, flag, value, row in zip(kept, flags, got, references):
        assert ulp_error(value, row.lse, torch.float32) <= 2.0
        if flag:
            assert ulp_error(first, row.lse, torch.float32) <= 2.0


@pytest.mark.parametrize("split", [False, True])
def test_accurate_rows_specials_when_streamed(split, device, monkeypatch):
    """torch's answers for specials in the streamed kernel's lanes and tiles (and parts): -inf rows,
    +inf anywhere (first tile, last tile, next to NaN), NaN, one finite value among -inf."""
    _small_accurate_tiles(monkeypatch)
    _fresh_recipes(monkeypatch)
    if split:   # 7 rows on as many SMs: parts of one tile
        monkeypatch.setattr(plan_module, "ACCURATE_MIN_PART_TILES", 1)
        monkeypatch.setattr(launch, "device_sm_count", lambda _device: 7)
    x = torch.randn(7, 700)
    x[0] = NEG_INF
    x[1, 3] = math.inf
    x[2, 699] = math.inf
    x[3, 350] = math.nan
    x[4, 10], x[4, 600] = math.inf, math.nan
    x[5] = NEG_INF
    x[5, 401] = 2.5
    x[6, :300] = NEG_INF
    got = precred.logsumexp(x.to(device), 1).cpu()
    # the specials are torch's answers; the finite rows (5, 6 and the plain ones) within the accurate
    # mode's bound against mpmath: 2 ulp, or the fp64 path's bound at the plan's depth where larger
    depth = plan_module.accurate_rows_fp64_depth(*x.shape, sm_count=launch.device_sm_count(torch.device(device)))
    rows_within_bound(x, 1, got.double().tolist(), "accurate", depth, "specials")
    assert got[0] == NEG_INF and got[1] == math.inf and got[2] == math.inf and math.isnan(got[3]) and math.isnan(got[4])


def test_accurate_is_the_default_and_the_fp64_mode_elsewhere(device):
    """logsumexp's default is `accurate`; off contiguous fp32 rows and wide columns (narrow dim 0, bf16) it gives the fp64
    mode's bits."""
    x = torch.randn(300, 40, device=device) * 4
    assert torch.equal(precred.logsumexp(x, -1), precred.logsumexp(x, -1, mode="accurate"))
    assert torch.equal(precred.logsumexp(x, 0, mode="accurate"), precred.logsumexp(x, 0, mode="fp64"))
    xb = x.to(torch.bfloat16)
    assert logsumexp_mode("accurate", torch.bfloat16) is CERTIFIED_EXP_MODE   # the fp64 mode's route there
    assert torch.equal(precred.logsumexp(xb, -1, mode="accurate"), precred.logsumexp(xb, -1, mode="fp64"))



@triton.jit
def _exp_of_difference_kernel(x_ptr, m_ptr, out_ptr, n, BLOCK: tl.constexpr, EXACT_GAP: tl.constexpr = False):
    """exp(x - m) from TwoSum's hi + lo: exp_two_part, or (EXACT_GAP) exp_of_exact_gap (test_softmax.py tests exp_two_part)."""
    offsets = tl.arange(0, BLOCK)
    hi, lo = two_sum(tl.load(x_ptr + offsets, mask=offsets < n), -tl.load(m_ptr + offsets, mask=offsets < n))
    e = exp_of_exact_gap(hi, lo) if EXACT_GAP else exp_two_part(hi, lo)
    tl.store(out_ptr + offsets, e, mask=offsets < n)


def test_exact_gap_exponential_within_its_bound(device):
    """exp_of_exact_gap(TwoSum(x - m)) (the accurate mode's fp32 exponential: ex2 of a split product on
    the GPU, exp_two_part in the interpreter) within ACCURATE_EXP_ERROR_UNITS u of exp(x - m) wherever
    that is a normal fp32 number, at most the smallest normal below it; gaps from -16 (x above m: the
    column kernel's lagging reference) to 300 (the kernel's clamp stops at 257), inexact differences (m far larger than x, or of the other sign),
    the edges of ex2's binades and the underflow edge; exp(0) is exactly 1."""
    rng = np.random.default_rng(13)
    k = np.arange(-150, 1)
    gaps = np.concatenate([rng.uniform(0, 100, 3000), rng.uniform(100, 300, 200), rng.uniform(-16, 0, 500),
                           -k * math.log(2),
                           -k * math.log(2) + 1e-6, 87.0 + rng.uniform(0, 1, 200), [0.0, 1e-30, 2.0 ** -24]])
    m = np.where(rng.random(gaps.size) < 0.5, rng.uniform(-3, 3, gaps.size), rng.uniform(-1, 1, gaps.size) * 1e4)
    x32 = torch.tensor(m - gaps, dtype=torch.float32)
    m32 = torch.tensor(m, dtype=torch.float32)
    out = torch.empty_like(x32, device=device)
    _exp_of_difference_kernel[(1,)](x32.to(device), m32.to(device), out, x32.numel(), BLOCK=8192, EXACT_GAP=True)
    got = out.cpu().double().tolist()
    u, smallest_normal = 2.0 ** -24, 2.0 ** -126
    for value, xi, mi in zip(got, x32.double().tolist(), m32.double().tolist()):
        with mpmath.workprec(100):
            exact = mpmath.exp(mpmath.mpf(xi) - mpmath.mpf(mi))
        if xi == mi:
            assert value == 1.0
        elif exact >= smallest_normal:
            assert abs(value - exact) <= ACCURATE_EXP_ERROR_UNITS * u * exact, (xi, mi, value, float(exact))
        else:
            assert 0.0 <= value <= smallest_normal, (xi, mi, value, float(exact))


@triton.jit
def _within_two_ulp_kernel(value_ptr, lse_ptr, e_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    kept = within_two_ulp32(tl.load(value_ptr + offsets, mask=mask), tl.load(lse_ptr + offsets, mask=mask),
                            tl.load(e_ptr + offsets, mask=mask))
    tl.store(out_ptr + offsets, kept.to(tl.int8), mask=mask)


def test_two_ulp_certificate_is_sound_and_not_vacuous(device):
    """accurate_rows.within_two_ulp32 keeps a value only where it is within 2 ulp of every point of
    [lse - e, lse + e] -- checked exactly, against the spacing at the interval's smallest magnitude,
    on intervals that straddle powers of two (where the spacing halves), reach 0 or the subnormals,
    and lie far inside -- and keeps the comfortable ones."""
    rng = np.random.default_rng(29)
    cases = []
    for p in range(-130, 20, 3):
        for side in (-1.0, 1.0):
            lse = side * 2.0 ** p * (1 + rng.choice([-1, 1]) * rng.uniform(0, 2.0 ** -21))
            for spread in (0.0, 0.25, 0.5, 1.0, 1.4, 2.5):
                e = spread * 2.0 ** (p - 23)
                cases.append((float(np.float32(lse)), lse, e))
                cases.append((float(np.float32(lse)), lse + 0.6 * 2.0 ** (p - 23), e))
    cases += [(0.0, 0.0, 1e-30), (1.0, 1.0, 0.0), (3.0, 3.0, 1e-7), (1e-45, 1e-45, 1e-46)]
    value, lse, e = (torch.tensor(c, dtype=d) for c, d in zip(zip(*cases), (torch.float32, torch.float64,
                                                                          torch.float64)))
    out = torch.empty(len(cases), dtype=torch.int8, device=device)
    _within_two_ulp_kernel[(1,)](value.to(device), lse.to(device), e.to(device), out, len(cases), BLOCK=2048)
    kept = out.cpu().tolist()
    for flag, (v, l, err) in zip(kept, cases):
        below, above = Fraction(l) - Fraction(err), Fraction(l) + Fraction(err)
        nearest = Fraction(0) if below <= 0 <= above else min(abs(below), abs(above))
        exact_ok = abs(Fraction(v) - Fraction(l)) + Fraction(err) <= 2 * ulp(nearest, torch.float32)
        assert not flag or exact_ok, (v, l, err)
    comfortable = [flag for flag, (v, l, err) in zip(kept, cases) if l != 0 and err <= 0.25 * float(ulp(
        l, torch.float32)) and abs(v - l) <= 0.5 * float(ulp(l, torch.float32)) and abs(l) > 2.0 ** -120]
    assert comfortable and all(comfortable)


@pytest.mark.parametrize("tiles", ["default", "small"])
def test_accurate_rows_of_huge_magnitude_with_minus_inf(tiles, device, monkeypatch):
    """Maxima so large that max - 256 rounds to the maximum itself (|max| >= 2^33) or near -FLT_MAX, with
    -inf and far smaller elements among them: no inf - inf, no NaN, and the results within 2 ulp of the
    oracle's. (With the clamp at max - 256 the outputs round the same -- an fp32 spacing of 512 or more
    against log(n) < 22 -- but the bound's derivation needs their terms at 0: _reference's lower end.)"""
    if tiles == "small":
        _small_accurate_tiles(monkeypatch)
        _fresh_recipes(monkeypatch)
    rng = np.random.default_rng(37)
    rows = []
    for top in (1e30, -1e20, 3e38, -3.4e38, 2.0 ** 40):
        row = top * (1 + 1e-6 * rng.standard_normal(700))
        row[rng.integers(0, 700, 50)] = -math.inf
        row[rng.integers(0, 700, 50)] = rng.standard_normal(50)
        rows.append(row)
    x = torch.from_numpy(np.stack(rows)).float()
    got = precred.logsumexp(x.to(device), -1).cpu().double().tolist()
    references, _, _ = reference_logsumexp(x, -1)
    for value, row in zip(got, references):
        assert ulp_error(value, row.lse, torch.float32) <= 2.0, (value, float(row.lse))


# --- the accurate mode over a strided axis (columns): the kept results, the merge and the recompute ---

# Column blocks of 8 and a minimum width of 8, so that inputs a few dozen columns wide take the column
# kernel (several blocks, the last partial) in the interpreter; the recompute's blocks of 3 or more
# unkept columns take its dense path, the others its sparse one (tiles of 16 rows, 2 columns at once).
SMALL_ACCURATE_COLUMNS = dict(ACCURATE_COLUMNS_MIN_INNER=8, ACCURATE_COLUMNS_BLOCK_I=8, ACCURATE_COLUMNS_MIN_RED=1,
                              ACCURATE_COLUMNS_SPARSE_MAX=2, ACCURATE_COLUMNS_SPARSE_LANES=16,
                              ACCURATE_COLUMNS_SPARSE_WIDTH=2)


def _accurate_columns(x, dim, device, recompute=True, sm_count=1):
    """(outputs, flags) of the accurate mode's column kernel (and its merge, for split plans) over x's
    strided dim, planned for sm_count SMs (many SMs: the axis split into parts)."""
    from precred.layout import reduction_view

    view = reduction_view(x.to(device), (dim,))
    columns_plan = plan_module.plan_accurate_logsumexp_columns(view.outer, view.red, view.inner, sm_count=sm_count)
    assert columns_plan is not None
    out, flags = launch.accurate_logsumexp_columns(view, columns_plan, recompute=recompute)
    return out.cpu().double().tolist(), flags.cpu().tolist(), columns_plan


@pytest.mark.parametrize("tiles", ["default", "small", "split"])
def test_accurate_columns_within_two_ulp(tiles, device, monkeypatch):
    """The accurate mode's column kernel, one part and split into parts merged by the second launch,
    over dim 0 and a middle dim: every output it keeps (flag 1) and, with the fp64 recompute, every
    output within 2 ulp of mpmath's (its bound, logsumexp_error_bound) on the adversarial families."""
    monkeypatch.setattr(plan_module, "ACCURATE_COLUMNS_MIN_RED", 1)   # the interpreter's short axes
    if tiles != "default":
        for name, value in SMALL_ACCURATE_COLUMNS.items():
            monkeypatch.setattr(plan_module, name, value)
    sm_count = 64 if tiles == "split" else 1
    if tiles != "split":   # one SM's worth of warps: one part
        monkeypatch.setattr(plan_module, "ACCURATE_COLUMNS_WARPS_PER_SM", 1)
    if tiles == "split":   # parts of two tiles, merged 4 at a time
        monkeypatch.setattr(plan_module, "ACCURATE_COLUMNS_MIN_PART_TILES", 2)
        monkeypatch.setattr(plan_module, "ACCURATE_COLUMNS_MERGE_LANES", 4)
        monkeypatch.setattr(plan_module, "ACCURATE_COLUMNS_MERGE_TILE", 16)
    rng = np.random.default_rng(41)
    # (columns, length, the reduced dim): dim 0 of (length, columns), or the middle dim of
    # (2, length, columns / 2) -- small blocks only (the default ones need 128 columns or more)
    # (tiles cut by the axes' ends: masked loads; or whole: FULL_TILES, unmasked)
    cases = ((130, 300, 0), (128, 64, 0)) if tiles == "default" else ((20, 300, 0), (16, 97, 1), (16, 96, 1))
    full = set()
    for name in FAMILIES:
        for columns, n, dim in cases:
            x = family(name, columns, n, rng, torch.float32)   # each output's elements along a row of x
            arranged = (x.t() if dim == 0 else x.reshape(2, columns // 2, n).transpose(1, 2)).contiguous()
            kept, flags, p = _accurate_columns(arranged, dim, device, recompute=False, sm_count=sm_count)
            assert (p.parts > 1) == (tiles == "split"), p
            full.add(launch._full_column_tiles(reduction_view(arranged, (dim,)), p))
            got, _, _ = _accurate_columns(arranged, dim, device, sm_count=sm_count)
            references, _, _ = reference_logsumexp(arranged, dim)
            for value, first, flag, row in zip(got, kept, flags, references):
                if row.lse is None:   # a special: kept as torch's answer
                    assert flag == 1 and ((math.isnan(value) and math.isnan(row.special)) or value == row.special)
                    continue
                assert ulp_error(value, row.lse, torch.float32) <= 2.0, (name, n, dim, value, float(row.lse))
                if flag:
                    assert first == value, (name, n, dim)
            rows_within_bound(arranged, dim, got, "accurate", p.recompute_depth, "columns", references)
    assert full == {False, True}


def _small_accurate_columns(monkeypatch, split: bool) -> int:
    """Set the small-block column plans (SMALL_ACCURATE_COLUMNS); the SM count to plan for: many (the
    axis split into parts) or one, with one warp per SM wanted (one part)."""
    for name, value in SMALL_ACCURATE_COLUMNS.items():
        monkeypatch.setattr(plan_module, name, value)
    if not split:
        monkeypatch.setattr(plan_module, "ACCURATE_COLUMNS_WARPS_PER_SM", 1)
    return 64 if split else 1


@pytest.mark.parametrize("split", [False, True])
def test_accurate_columns_keep_what_their_bound_allows(split, device, monkeypatch):
    """Both stages run over columns: normal data all kept, log-probabilities (logsumexp ~ 0) all left to
    the fp64 recompute (the column launches again, in fp64), which gets every one within the fp64
    mode's bound; results on either side of powers of two partly kept -- every output within 2 ulp."""
    sm_count = _small_accurate_columns(monkeypatch, split)
    rng = np.random.default_rng(43)
    x = family("normal", 16, 500, rng, torch.float32).t().contiguous()
    _, flags, _ = _accurate_columns(x, 0, device, recompute=False, sm_count=sm_count)
    assert flags == [1] * 16
    x = _log_probability_rows(16, 500, rng).t().contiguous()
    _, flags, _ = _accurate_columns(x, 0, device, recompute=False, sm_count=sm_count)
    assert flags == [0] * 16
    got, _, p = _accurate_columns(x, 0, device, sm_count=sm_count)
    assert (p.parts > 1) == split, p
    rows_within_bound(x, 0, got, "fp64", p.recompute_depth, "recompute")   # the fp64 recompute's every output
    # a few unkept columns among kept ones: the recompute's sparse path (one or two a block of 8; four
    # in a batch of blocks, two at a time)
    mixed = family("normal", 16, 500, rng, torch.float32)
    mixed[::5] = _log_probability_rows(4, 500, rng)
    mixed = mixed.t().contiguous()
    _, flags, _ = _accurate_columns(mixed, 0, device, recompute=False, sm_count=sm_count)
    assert flags == [0 if c % 5 == 0 else 1 for c in range(16)], flags
    got, _, p = _accurate_columns(mixed, 0, device, sm_count=sm_count)
    rows_within_bound(mixed, 0, got, "accurate", p.recompute_depth, "sparse recompute")
    _assert_kept_near_powers_of_two(
        lambda x, recompute: _accurate_columns(x, 0, device, recompute=recompute, sm_count=sm_count)[:2], 500, rng, 0)


@pytest.mark.parametrize("split", [False, True])
def test_accurate_columns_work_list(split, device, monkeypatch):
    """The first stage lists exactly the recompute blocks that hold an unkept output, each once (its
    claim set, the others' not); the recompute's fixed grid walks the list -- one program or many, the
    same bits -- and leaves its length, counter and claims zero, so that the next call on the same list
    (a launch recipe's) starts empty and gives the same bits again."""
    from dataclasses import replace

    from precred.layout import reduction_view

    sm_count = _small_accurate_columns(monkeypatch, split)
    rng = np.random.default_rng(47)
    # 6 blocks of 8 columns, the last partial; unkept ones in blocks 0, 2 (three: the recompute's dense
    # path, the others its sparse one, in one batch) and 5
    columns = 45
    mixed = family("normal", columns, 300, rng, torch.float32)
    unkept = (0, 17, 18, 20, 44)
    mixed[list(unkept)] = _log_probability_rows(len(unkept), 300, rng)
    view = reduction_view(mixed.t().contiguous().to(device), (0,))
    p = plan_module.plan_accurate_logsumexp_columns(view.outer, view.red, view.inner, sm_count=sm_count)
    assert (p.parts > 1) == split and p.recompute_block_i == 8, p
    listable = 6
    work = launch.columns_work_list(view, p)
    assert work.numel() == 2 + 2 * listable
    _, flags = launch.accurate_logsumexp_columns(view, p, recompute=False, work=work)
    assert [c for c, flag in enumerate(flags.cpu().tolist()) if flag == 0] == list(unkept)
    got = work.cpu().tolist()
    assert got[0] == 3 and sorted(got[2 + listable:2 + listable + 3]) == [0, 2, 5], got
    assert got[2:2 + listable] == [1, 0, 1, 0, 0, 1], got
    work.zero_()
    results = []
    for programs in (None, 1):   # the planned grid, then one program walking every entry
        if programs is not None:
            monkeypatch.setattr(plan_module, "ACCURATE_COLUMNS_RECOMPUTE_PROGRAMS_PER_SM", programs)
            monkeypatch.setattr(plan_module, "ACCURATE_COLUMNS_RECOMPUTE_MERGE_PROGRAMS_PER_SM", programs)
            p = replace(p, sm_count=1)
        for _ in range(2):
            out, _ = launch.accurate_logsumexp_columns(view, p, work=work)
            assert work[:2 + listable].count_nonzero() == 0, work.cpu().tolist()   # the slots are written before read
            results.append(out.cpu())
    assert all(torch.equal(results[0], other) for other in results[1:])
    rows_within_bound(mixed, 1, results[0].double().tolist(), "accurate", p.recompute_depth,
                      "listed recompute")


@pytest.mark.parametrize("split", [False, True])
def test_accurate_columns_specials(split, device, monkeypatch):
    """torch's answers for specials down the columns (and across parts): -inf columns, +inf in the first
    or last tile, NaN, +inf next to NaN, one finite value among -inf; huge magnitudes among -inf within
    2 ulp. precred.logsumexp takes the column kernel here (wide enough, in the small-block setting)."""
    for name, value in SMALL_ACCURATE_COLUMNS.items():
        monkeypatch.setattr(plan_module, name, value)
    _fresh_recipes(monkeypatch)
    if split:
        monkeypatch.setattr(plan_module, "ACCURATE_COLUMNS_MIN_PART_TILES", 1)
        monkeypatch.setattr(launch, "device_sm_count", lambda _device: 64)
    else:
        monkeypatch.setattr(plan_module, "ACCURATE_COLUMNS_WARPS_PER_SM", 1)
        monkeypatch.setattr(launch, "device_sm_count", lambda _device: 1)
    x = torch.randn(300, 12)
    x[:, 0] = NEG_INF
    x[3, 1] = math.inf
    x[299, 2] = math.inf
    x[150, 3] = math.nan
    x[10, 4], x[200, 4] = math.inf, math.nan
    x[:, 5] = NEG_INF
    x[201, 5] = 2.5
    x[:100, 6] = NEG_INF
    x[:, 7] = 1e30 * (1 + 1e-6 * torch.randn(300))
    x[::7, 7] = NEG_INF
    x[:, 8] = -3.4e38 * (1 + 1e-7 * torch.rand(300))
    x[::5, 8] = NEG_INF
    x[:, 9] = 2.0 ** 40 * (1 + 1e-6 * torch.randn(300))
    p = launch._accurate_columns_plan(launch.reduction_view(x, (0,)), x.device)
    assert p is not None and (p.parts > 1) == split, p
    got = precred.logsumexp(x.to(device), 0).cpu()
    assert got[0] == NEG_INF and got[1] == math.inf and got[2] == math.inf and math.isnan(got[3]) and math.isnan(got[4])
    references, _, _ = reference_logsumexp(x, 0)
    for value, row in zip(got.double().tolist(), references):
        if row.lse is None:
            assert (math.isnan(value) and math.isnan(row.special)) or value == row.special, (value, row)
        else:
            assert ulp_error(value, row.lse, torch.float32) <= 2.0, (value, float(row.lse))


def test_accurate_columns_route(device, monkeypatch):
    """Without a plan, fp32 logsumexp over a strided axis of ACCURATE_COLUMNS_MIN_RED or more under a
    contiguous one of ACCURATE_COLUMNS_MIN_INNER or more takes the column kernel (the same bits as
    calling it), twice the same; shorter or narrower ones the fp64 mode's passes."""
    _fresh_recipes(monkeypatch)
    x = torch.randn(70, 200, device=device) * 3
    assert torch.equal(precred.logsumexp(x, 0), precred.logsumexp(x, 0, mode="fp64"))   # 70 < MIN_RED
    monkeypatch.setattr(plan_module, "ACCURATE_COLUMNS_MIN_RED", 64)
    _fresh_recipes(monkeypatch)   # the call above left the fp64 mode's recipe under this signature
    view = launch.reduction_view(x, (0,))
    p = launch._accurate_columns_plan(view, x.device)
    assert p is not None and plan_module.plan_accurate_logsumexp_columns(1, 70, 100, sm_count=1) is None
    direct, _, _ = _accurate_columns(x, 0, device, sm_count=launch.device_sm_count(x.device))
    assert precred.logsumexp(x, 0).cpu().double().tolist() == direct
    assert torch.equal(precred.logsumexp(x, 0), precred.logsumexp(x, 0))
    narrow = x[:, :100].contiguous()
    assert torch.equal(precred.logsumexp(narrow, 0), precred.logsumexp(narrow, 0, mode="fp64"))
