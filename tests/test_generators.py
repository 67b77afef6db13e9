"""Generators must deliver the property they promise on the values they actually return (after rounding)."""
import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from validation import generators as gen
from validation.oracle import exact_abs_sum, exact_sum, format_info, round_to

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def rng(seed=0):
    return np.random.default_rng(seed)


def max_finite(dtype) -> Fraction:
    p, _, emax = format_info(dtype)
    return Fraction(2 ** p - 1) * Fraction(2) ** (emax - p + 1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("family", sorted(gen.FAMILIES))
@pytest.mark.parametrize("n", [0, 1, 2, 17, 1000])
def test_families_shape_dtype_finite_deterministic(family, dtype, n):
    x = gen.FAMILIES[family](n, rng(n), dtype)
    assert isinstance(x, torch.Tensor) and x.dtype == dtype and x.shape == (n,) and x.device.type == "cpu"
    assert torch.isfinite(x).all()
    assert torch.equal(x, gen.FAMILIES[family](n, rng(n), dtype))       # same seed, same data


def test_families_cover_the_contract():
    assert set(gen.FAMILIES) >= {"normal", "uniform", "large_offset", "ill_conditioned", "wide_range",
                                 "subnormals", "alternating"}


# --------------------------------------------------------------------------------------- ill-conditioned
def test_condition_number():
    assert gen.condition_number([1.0, 2.0]) == 1.0
    assert gen.condition_number([1.0, -0.5]) == 3.0
    assert gen.condition_number([1.0, -1.0]) == math.inf
    assert gen.condition_number([]) == math.inf
    assert gen.condition_number([1e300, -1e300, 1e-300]) == math.inf   # ratio beyond float range: inf, no raise
    assert gen.condition_number(torch.tensor([1e300, -1e300, 2.0 ** -1074], dtype=torch.float64)) == math.inf


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("cond", [1e3, 1e8, 1e16, 1e30])
@pytest.mark.parametrize("n", [64, 1000])
def test_ill_conditioned_hits_condition_number(dtype, cond, n):
    for seed in range(3):
        x = gen.ill_conditioned(n, cond, rng(seed), dtype)
        assert x.dtype == dtype and x.shape == (n,) and torch.isfinite(x).all()
        assert exact_sum(x) != 0
        c = gen.condition_number(x)
        assert cond / 10 <= c <= cond * 10, (seed, c)
        assert exact_abs_sum(x) < max_finite(dtype) / 4                  # no partial sum can overflow


@pytest.mark.parametrize("dtype, n, cond", [(torch.bfloat16, 64, 1e12), (torch.bfloat16, 1000, 1e20),
                                            (torch.float16, 64, 1e6), (torch.float16, 1000, 1e8),
                                            (torch.float64, 64, 1e100), (torch.float64, 1000, 1e300)])
def test_ill_conditioned_other_formats(dtype, n, cond):
    x = gen.ill_conditioned(n, cond, rng(1), dtype)
    assert exact_sum(x) != 0
    assert cond / 10 <= gen.condition_number(x) <= cond * 10


def test_ill_conditioned_beyond_reach_returns_best_effort():
    x = gen.ill_conditioned(8, 1e12, rng(), torch.bfloat16)              # 4 chain steps of <= 4 bits each
    assert exact_sum(x) != 0 and torch.isfinite(x).all()
    assert 1e2 < gen.condition_number(x) < 1e12
    assert gen.ill_conditioned(0, 1e8, rng(), torch.float32).shape == (0,)
    assert gen.ill_conditioned(1, 1e8, rng(), torch.float32).shape == (1,)


# ------------------------------------------------------------------------------------------ other families
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("low, high", [(-8, 8), (0, 3), (-100, -1)])
@pytest.mark.parametrize("n", [1, 50, 5000])
def test_small_integers_partial_sums_exact(dtype, low, high, n):
    p = format_info(dtype)[0]
    x = gen.small_integers(n, rng(n), dtype, low=low, high=high)
    v = x.double()
    assert x.dtype == dtype and x.shape == (n,)
    assert torch.equal(v, v.round()) and ((v == 0) | ((v >= low) & (v <= high))).all()
    assert v.abs().sum().item() <= 2 ** p                                # S1 bound: every subset sum exact
    # sequential and pairwise sums carried out IN dtype equal the exact ones at every step
    seq = torch.cumsum(x, 0, dtype=dtype)
    assert torch.equal(seq.double(), torch.cumsum(v, 0))
    level = x
    while level.numel() > 1:
        if level.numel() % 2:
            level = torch.cat([level, torch.zeros(1, dtype=dtype)])
        level = level[0::2] + level[1::2]
    assert level.double().item() == float(exact_sum(x))


def test_small_integers_budget_zeroes_excess():
    x = gen.small_integers(1000, rng(), torch.bfloat16)                  # |x| ~ 4.4 avg, budget 256
    assert 0 < (x != 0).sum() < 200 and x.double().abs().sum() <= 256
    with pytest.raises(ValueError):
        gen.small_integers(10, rng(), torch.bfloat16, low=-1000, high=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 100, 1 << 16])
def test_wide_range_no_overflow_and_wide(dtype, n):
    x = gen.wide_range(n, rng(n), dtype)
    assert torch.isfinite(x).all() and (x != 0).all()
    assert exact_abs_sum(x) <= max_finite(dtype)                         # no partial sum, in any order, overflows
    assert torch.isfinite(x.double().abs().sum())
    if n >= 100:
        _, emin, emax = format_info(dtype)
        e = torch.frexp(x.double().abs())[1]
        assert (e.max() - e.min()).item() >= (emax - emin - math.log2(n)) * 0.8  # most of the exponent range
        assert (x > 0).any() and (x < 0).any()


@pytest.mark.parametrize("dtype", DTYPES)
def test_subnormals_are_subnormal(dtype):
    p, emin, _ = format_info(dtype)
    x = gen.subnormals(4000, rng(), dtype).double()
    a = x.abs()
    assert (a > 0).all()
    assert (a < 2.0 ** (emin + 1)).all()                                 # subnormals plus smallest normals
    frac_sub = (a < 2.0 ** emin).double().mean().item()
    assert 0.8 < frac_sub < 0.95
    assert (x > 0).any() and (x < 0).any()
    for v in x[:200].tolist():                           # exactly representable, quantum 2^(emin-p+1)
        assert round_to(Fraction(v), dtype) == v
        assert (Fraction(v) / Fraction(2) ** (emin - p + 1)).denominator == 1


@pytest.mark.parametrize("dtype", DTYPES)
def test_alternating(dtype):
    x = gen.alternating(1001, rng(), dtype).double()
    assert (x[0::2] > 0).all() and (x[1::2] < 0).all()
    assert (x.abs() >= 63 / 64).all() and (x.abs() <= 65 / 64).all()
    assert gen.condition_number(x) > 50                                  # heavy cancellation


@pytest.mark.parametrize("dtype", DTYPES)
def test_uniform_normal_offset_equal(dtype):
    u = gen.uniform(100000, rng(), dtype)
    assert (u >= 0).all() and (u < 1).all()
    z = gen.normal(10000, rng(), dtype).double()
    assert abs(z.mean().item()) < 0.1 and 0.9 < z.std().item() < 1.1
    off = gen.large_offset(1000, 1e4 if dtype != torch.float16 else 1e3, 1.0, rng(), dtype).double()
    assert abs(off.mean().item() / (1e4 if dtype != torch.float16 else 1e3) - 1) < 0.01
    assert len(set(off.tolist())) > 10   # never a constant row: the spread is at least 4 ulps of the offset
    e = gen.all_equal(7, 0.1, dtype)
    assert e.dtype == dtype and e.shape == (7,) and (e == e[0]).all()
    assert e[0].item() == round_to(Fraction(0.1), dtype)
    assert gen.all_equal(0, 1.0, dtype).shape == (0,)


@pytest.mark.parametrize("kind", ["nan", "inf", "-inf", "inf_and_-inf"])
@pytest.mark.parametrize("n", [2, 3, 100])
def test_with_specials(kind, n):
    x = gen.normal(n, rng(), torch.bfloat16)
    y = gen.with_specials(x, kind, rng(n))
    assert y.dtype == x.dtype and y.shape == x.shape and torch.isfinite(x).all()   # x untouched
    special = ~torch.isfinite(y)
    assert 1 <= special.sum() <= max(2, n // 8)
    assert torch.equal(y[~special], x[~special])
    ys = y[special]
    if kind == "nan":
        assert ys.isnan().all()
    elif kind == "inf":
        assert (ys == math.inf).all()
    elif kind == "-inf":
        assert (ys == -math.inf).all()
    else:
        assert (ys == math.inf).any() and (ys == -math.inf).any() and not ys.isnan().any()


def test_with_specials_any_shape():
    x = gen.normal(64, rng(), torch.float32).reshape(8, 8).t()           # non-contiguous 2-D
    y = gen.with_specials(x, "nan", rng(1))
    assert y.shape == x.shape and 1 <= y.isnan().sum() <= 8
    assert torch.equal(y[~y.isnan()], x[~y.isnan()])


def test_with_specials_errors():
    with pytest.raises(ValueError):
        gen.with_specials(torch.zeros(0), "nan", rng())
    with pytest.raises(ValueError):
        gen.with_specials(torch.zeros(1), "inf_and_-inf", rng())
    with pytest.raises(ValueError):
        gen.with_specials(torch.zeros(4), "zero", rng())


def test_lengths_around():
    assert gen.lengths_around([16, 128]) == [1, 15, 16, 17, 127, 128, 129]
    assert gen.lengths_around([1, 2]) == [1, 2, 3]
    assert gen.lengths_around([]) == [1]


@pytest.mark.parametrize("dtype", DTYPES)
def test_private_rounding_helpers_agree_with_oracle(dtype):
    """The generator's fast scalar roundings must be the oracle's correct rounding."""
    p, emin, _ = format_info(dtype)
    r = rng(9)
    for _ in range(300):
        unit = int(r.integers(emin - 2 * p, 40))
        t = int(r.integers(-(1 << 62), 1 << 62)) >> int(r.integers(0, 62))
        t = t * (1 << int(r.integers(0, 3) * 300))                       # sometimes far beyond float range
        want = round_to(Fraction(t) * Fraction(2) ** unit, dtype)
        if math.isfinite(want):
            assert gen._round_scaled_int(t, unit, p, emin) == want
        d = float(r.standard_normal() * 2.0 ** int(r.integers(emin - p, 10)))
        assert gen._round_float(d, p, emin) == round_to(Fraction(d), dtype)
