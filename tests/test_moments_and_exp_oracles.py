"""The variance and logsumexp oracles (validation/moments.py, validation/stable_exp.py), which the var,
norm, logsumexp and softmax tests trust, checked against independent references: the definitional
m2 = sum (x - mean)^2 in Fractions (the oracle forms Q - S^2 / n), log(sum(exp(x))) in mpmath at a
higher precision without the max shift, and torch's semantics for the special rows."""
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from validation.moments import exact_sqrt, reference_moments
from validation.stable_exp import WORK_BITS, reference_logsumexp

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def _rows(seed: int, dtype: torch.dtype, rows: int = 3, n: int = 17) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    scale = np.exp2(rng.integers(-8, 8, (rows, n)))
    return torch.from_numpy(rng.standard_normal((rows, n)) * scale + 3.0).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_moments_are_the_definitional_ones(dtype):
    x = _rows(1, dtype)
    rows, out_shape, keep_shape = reference_moments(x, 1)
    assert out_shape == [3] and keep_shape == [3, 1]
    for row, values in zip(rows, x.double().tolist()):
        fr = [Fraction(v) for v in values]
        mean = sum(fr, Fraction(0)) / len(fr)
        assert row.n == len(fr) and row.mean == mean
        assert row.m2 == sum(((v - mean) ** 2 for v in fr), Fraction(0))
        assert row.shift == values[0]
        assert Fraction(row.radius) >= max(abs(v - Fraction(values[0])) for v in fr)
        assert row.variance(1) == row.m2 / (len(fr) - 1) and row.variance(2.5) == row.m2 / (len(fr) - Fraction(2.5))
        assert row.variance(len(fr)) is None


def test_moments_follow_torchs_dims():
    """Rows are the kept positions in row-major order, whatever the dims (checked against torch's fp64
    var, which is accurate to far better than the differences a wrong row order would make)."""
    x = _rows(2, torch.float64, rows=4 * 5, n=6).reshape(4, 5, 6)
    for dim in [(0,), (1,), (2,), (0, 2), (2, 0), None]:
        rows, out_shape, _ = reference_moments(x, dim)
        want = torch.var(x, dim=dim, correction=1) if dim is not None else torch.var(x, correction=1)
        assert list(want.shape) == out_shape
        got = torch.tensor([float(r.variance(1)) for r in rows], dtype=torch.float64).reshape(out_shape)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=0)


@settings(max_examples=30, deadline=None)
@given(st.fractions(min_value=Fraction(1, 10 ** 30), max_value=Fraction(10 ** 30)))
def test_exact_sqrt_is_within_its_stated_error(value):
    root = exact_sqrt(value)
    assert abs(root * root - value) <= value * Fraction(2) ** -254   # relative 2^-255 on the root, squared


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_logsumexp_reference_against_an_unshifted_sum(dtype):
    """lse against log(sum(exp(x_i))) at 2 WORK_BITS bits, no max shift: within the reference's own
    stated error (exact_to); m is the row's maximum, s and t its sums to float64."""
    x = _rows(3, dtype, rows=4, n=40) * 20
    rows, out_shape, _ = reference_logsumexp(x, 1)
    assert out_shape == [4]
    for row, values in zip(rows, x.double().tolist()):
        assert row.n == 40 and row.m == max(values) and row.special is None
        with mpmath.workprec(2 * WORK_BITS):
            terms = [mpmath.exp(mpmath.mpf(v)) for v in values]
            lse = mpmath.log(mpmath.fsum(terms))
            s = mpmath.fsum(mpmath.exp(mpmath.mpf(v) - row.m) for v in values)
            t = mpmath.fsum(mpmath.exp(mpmath.mpf(v) - row.m) * (row.m - mpmath.mpf(v)) for v in values)
            got = mpmath.mpf(row.lse.numerator) / row.lse.denominator
            assert abs(got - lse) <= row.exact_to
        assert row.s == pytest.approx(float(s), rel=2.0 ** -52) and row.t == pytest.approx(float(t), rel=2.0 ** -52)


@pytest.mark.parametrize("dtype, top", [(torch.float32, 3e38), (torch.float64, 1e300), (torch.float64, -1e300)],
                         ids=["fp32-3e38", "fp64-1e300", "fp64--1e300"])
def test_logsumexp_reference_keeps_log_s_next_to_a_huge_maximum(dtype, top):
    """Rows of k copies of a huge maximum among values far below it (a spacing there is ~1e284 in fp64:
    their terms are 0, log(s) = log(k)): lse - m (log(s), and so log_softmax's values x - lse) within
    exact_to of log(sum(exp(x - m))) at 2 WORK_BITS bits, exact_to far below any ulp -- a WORK_BITS-bit
    lse would keep none of log(s) next to 1e300 (its spacing there ~1e252); the longer rows' numpy
    path too."""
    for n, k in ((5, 2), (5000, 3)):
        below = torch.linspace(2.0 ** -10, 0.5, n - k, dtype=torch.float64) * abs(top)
        x = torch.cat([torch.full((k,), top, dtype=torch.float64), top - below]).to(dtype).reshape(1, n)
        row = reference_logsumexp(x, 1)[0][0]
        got = row.lse - Fraction(row.m)
        with mpmath.workprec(2 * WORK_BITS):
            values = x.double().tolist()[0]
            log_s = mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(v) - mpmath.mpf(row.m)) for v in values))
            assert abs(mpmath.mpf(got.numerator) / got.denominator - log_s) <= row.exact_to
        assert row.m == float(x.max()) and float(got) == pytest.approx(math.log(k), rel=1e-15)
        assert row.exact_to < (1e-40 if n <= 4096 else 1e-15)


def test_logsumexp_reference_specials_follow_torch():
    inf, nan = math.inf, math.nan
    x = torch.tensor([[1.0, -inf, 2.0], [-inf, -inf, -inf], [0.0, inf, 1.0], [nan, 0.0, inf], [-inf, 3.0, -inf]])
    rows, _, _ = reference_logsumexp(x, 1)
    want = torch.logsumexp(x, 1).tolist()
    for row, w in zip(rows[:4], want[:4]):
        if row.lse is None:
            assert row.special == w or (math.isnan(row.special) and math.isnan(w))
        else:
            assert float(row.lse) == pytest.approx(w, rel=1e-7)
    assert rows[0].special is None and rows[1].special == -inf and rows[2].special == inf
    assert math.isnan(rows[3].special)
    assert float(rows[4].lse) == 3.0 and rows[4].m == 3.0   # one finite value among -inf: exactly it


def test_long_rows_reference_error_is_relative_to_a_small_tail():
    """Rows beyond MPMATH_MAX_N take the numpy path (fp64 exponentials summed exactly): next to s = 1
    (one or two maxima standing 30..90 above the rest) log(s) ~ tail is still within exact_to of
    log(sum(exp(x - m))) at 2 WORK_BITS bits, and exact_to is relative to that tail -- at most 2^-50 of
    log(s) -- not a flat 2^-51 (which was 2^51 bf16 ulps of a log_softmax of -2^-92)."""
    rng = np.random.default_rng(41)
    n = 5000
    for gap, maxima in ((30.0, 1), (60.0, 1), (90.0, 2), (0.5, 1)):
        values = -(gap + rng.exponential(2.0, n))
        values[rng.choice(n, maxima, replace=False)] = 0.0
        x = torch.from_numpy(values).reshape(1, n)
        row = reference_logsumexp(x, 1)[0][0]
        got = row.lse - Fraction(row.m)
        with mpmath.workprec(2 * WORK_BITS):
            log_s = mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(v)) for v in values))
            assert abs(mpmath.mpf(got.numerator) / got.denominator - log_s) <= row.exact_to
            tail_log = abs(log_s - mpmath.log(maxima))   # log(s) beyond the maxima's own log(count)
        assert row.exact_to <= 2.0 ** -50 * float(tail_log) * 1.01 + 2.0 ** -(WORK_BITS - 5) * abs(float(log_s))
