"""The oracle is what every other test trusts, so it is checked against independent references:
Python Fractions (exact by construction), math.fsum (correctly rounded, used in an exact remainder loop),
numpy's float64 -> float32 / float16 casts (hardware / correctly rounded), torch's nextafter, and
hand-computed halfway, subnormal and overflow cases."""
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from validation import oracle
from validation.oracle import (exact_abs_sum, exact_mean, exact_sum, precision_bits, reference_mean,
                               reference_sum, round_to, ulp, ulp_error, unit_roundoff)

F = Fraction
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
FAST = settings(max_examples=150, deadline=None)


def frac_sum(values) -> Fraction:
    return sum((F(float(v)) for v in values), F(0))


def fsum_exact(values) -> Fraction:
    """Independent exact sum: fsum is correctly rounded, so d_k = fsum(x - d_1 - ... - d_{k-1}) peels the
    exact sum into doubles until the remainder (a multiple of 2**-1074) is exactly 0."""
    xs, ds = [float(v) for v in values], []
    while (d := math.fsum(xs + [-d for d in ds])) != 0:
        ds.append(d)
    return sum(map(F, ds), F(0))


# ------------------------------------------------------------------------------------------- exact sums
finite32 = st.floats(allow_nan=False, allow_infinity=False, width=32)
finite64 = st.floats(allow_nan=False, allow_infinity=False, width=64)
finite16 = st.floats(allow_nan=False, allow_infinity=False, width=16)


@FAST
@given(st.lists(finite32, max_size=60))
def test_exact_sum_float32_lists(xs):
    want = frac_sum(xs)
    assert exact_sum(xs) == want
    assert exact_sum(np.array(xs, dtype=np.float32)) == want
    assert exact_sum(torch.tensor(xs, dtype=torch.float32)) == want
    assert exact_abs_sum(np.array(xs, dtype=np.float32)) == frac_sum(abs(x) for x in xs)


@FAST
@given(st.lists(finite64, max_size=60))
def test_exact_sum_float64_lists(xs):
    assert exact_sum(xs) == frac_sum(xs)
    assert exact_abs_sum(torch.tensor(xs, dtype=torch.float64)) == frac_sum(abs(x) for x in xs)


@FAST
@given(st.lists(finite16, max_size=60), st.lists(finite32, max_size=60))
def test_exact_sum_half_formats(xs16, xs32):
    t16 = torch.tensor(xs16, dtype=torch.float16)
    assert exact_sum(t16) == frac_sum(xs16)
    tb = torch.tensor(xs32, dtype=torch.float32).to(torch.bfloat16)
    tb = tb[torch.isfinite(tb)]                                         # rounding may overflow to inf
    assert exact_sum(tb) == frac_sum(tb.double().tolist())


@pytest.mark.parametrize("xs, want", [
    ([1e38, 1.0, -1e38], F(1)),                                          # catastrophic cancellation
    ([2.0 ** 1023, 2.0 ** 1023, -(2.0 ** 1023), -(2.0 ** 1023), 2.0 ** -1074], F(1, 2 ** 1074)),
    ([math.ulp(0.0)] * 5 + [-math.ulp(0.0)] * 2, F(3, 2 ** 1074)),      # subnormals
    ([1.0, 2.0 ** -1074, -1.0], F(1, 2 ** 1074)),
    ([0.0, -0.0], F(0)),
    ([], F(0)),
    ([1e308, 1e308, -1e308], F(1e308)),                                  # partial sums beyond double range
])
def test_exact_sum_adversarial(xs, want):
    assert exact_sum(xs) == want


def test_exact_sum_wide_range_float32_matches_fraction_and_fsum():
    rng = np.random.default_rng(7)
    n = 4096
    x = (rng.uniform(1, 2, n) * np.exp2(rng.integers(-149, 127, n)) * rng.choice([-1, 1], n)).astype(np.float32)
    x = np.concatenate([x, -x[: n // 2]])                               # plus exact cancellation
    assert exact_sum(x) == frac_sum(x.tolist()) == fsum_exact(x.tolist())


def test_exact_sum_chunked_paths(monkeypatch):
    """Force many column chunks and row passes: the chunking must not change any bit."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((7, 50)) * np.exp2(rng.integers(-60, 60, (7, 50)))
    a[2] = 0.0
    a[4, :45] = 0.0                                                      # a block of zeros in a row
    want = [frac_sum(row) for row in a]
    monkeypatch.setattr(oracle, "_COL_CHUNK", 8)
    assert oracle._exact_row_sums(a) == want


def test_exact_sum_large_n_matches_fsum():
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(1 << 18) * 1e4 + 1e6).astype(np.float32)
    assert exact_sum(torch.from_numpy(x)) == fsum_exact(x.tolist())


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_exact_sum_rejects_specials(bad):
    with pytest.raises(ValueError):
        exact_sum([1.0, bad])
    with pytest.raises(ValueError):
        exact_abs_sum(torch.tensor([bad], dtype=torch.bfloat16))


def test_exact_mean():
    assert exact_mean([1.0, 2.0, 4.0]) == F(7, 3)
    assert exact_mean(torch.tensor([1e38, -1e38, 3.0])) == F(1)
    with pytest.raises(ValueError):
        exact_mean([])


# ------------------------------------------------------------------------------------------- round_to
@FAST
@given(finite64)
def test_round_to_float32_matches_numpy(d):
    with np.errstate(over="ignore"):
        want = float(np.float32(d))                      # correctly rounded cast (+-inf on overflow)
    got = round_to(F(d), torch.float32)
    assert got == want
    if d != 0:                                                           # an exact 0 (Fraction) gives +0.0
        assert math.copysign(1, got) == math.copysign(1, want)


@FAST
@given(finite64)
def test_round_to_float64_and_float16_match_python_and_numpy(d):
    assert round_to(F(d), torch.float64) == d
    with np.errstate(over="ignore"):
        assert round_to(F(d), torch.float16) == float(np.float16(d))    # numpy's double->half is direct


@FAST
@given(st.integers(-(10 ** 40), 10 ** 40), st.integers(1, 10 ** 40))
def test_round_to_float64_non_dyadic(num, den):
    # int / int true division in CPython is correctly rounded
    assert round_to(F(num, den), torch.float64) == num / den


@FAST
@given(finite32)
def test_round_to_half_formats_match_torch_on_float32_inputs(f):
    """torch rounds float32 -> bf16 / fp16 once, to nearest even: an independent reference on fp32 inputs."""
    for dtype in (torch.bfloat16, torch.float16):
        want = torch.tensor(f, dtype=torch.float32).to(dtype).double().item()
        assert round_to(F(f), dtype) == want


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_to_is_nearest_even_on_random_doubles(dtype):
    """Check the defining property against torch.nextafter neighbours, on doubles with random low bits (where
    torch's own double -> bf16/fp16 cast rounds twice, through fp32, and is sometimes wrong)."""
    rng = np.random.default_rng(5)
    p, emin, emax = oracle.format_info(dtype)
    exps = rng.integers(emin - p, emax + 1, 400)
    ds = rng.uniform(1, 2, 400) * np.exp2(exps) * rng.choice([-1, 1], 400)
    for d in ds.tolist():
        r = round_to(F(d), dtype)
        if math.isinf(r):
            continue
        t = torch.tensor(r, dtype=torch.float64).to(dtype)
        assert t.double().item() == r                                    # representable in dtype
        up = torch.nextafter(t, torch.tensor(math.inf, dtype=dtype)).double().item()
        down = torch.nextafter(t, torch.tensor(-math.inf, dtype=dtype)).double().item()
        err = abs(F(d) - F(r))
        assert err <= abs(F(d) - F(up)) and err <= abs(F(d) - F(down))


def test_round_to_known_double_rounding_case():
    d = 1 + 2.0 ** -8 + 2.0 ** -40                       # just above the bf16 midpoint of 1 and 1 + 2^-7
    assert round_to(F(d), torch.bfloat16) == 1 + 2.0 ** -7
    d = 1 + 2.0 ** -11 + 2.0 ** -40
    assert round_to(F(d), torch.float16) == 1 + 2.0 ** -10


@pytest.mark.parametrize("dtype, p", [(torch.float32, 24), (torch.float64, 53), (torch.bfloat16, 8),
                                      (torch.float16, 11)])
def test_round_to_ties_to_even(dtype, p):
    half = F(1, 2 ** p)                                                  # half an ulp at 1
    assert round_to(1 + half, dtype) == 1.0                              # tie, 1.0 is even
    assert round_to(1 + 3 * half, dtype) == 1 + 2.0 ** (2 - p)           # tie, 1 + 2 ulp is even
    assert round_to(1 + half + F(1, 2 ** (p + 60)), dtype) == 1 + 2.0 ** (1 - p)
    assert round_to(-(1 + 3 * half), dtype) == -(1 + 2.0 ** (2 - p))
    assert round_to(1 - F(1, 2 ** (p + 1)), dtype) == 1.0                # tie below 1 (spacing halves)
    assert round_to(F(1, 3), dtype) == round_to(F(1, 3) + F(1, 2 ** (p + 80)), dtype)


def test_round_to_subnormals():
    tiny = F(1, 2 ** 149)                                                # smallest fp32 subnormal
    assert round_to(tiny / 2, torch.float32) == 0.0                      # tie -> even (0)
    assert math.copysign(1, round_to(-tiny / 2, torch.float32)) == -1   # sign kept: -0.0
    assert round_to(tiny / 2 + F(1, 2 ** 300), torch.float32) == 2.0 ** -149
    assert round_to(3 * tiny / 2, torch.float32) == 2.0 ** -148          # tie 1.5 -> 2
    assert round_to(5 * tiny / 2, torch.float32) == 2.0 ** -148          # tie 2.5 -> 2
    assert round_to(F(3, 4) * tiny, torch.float32) == 2.0 ** -149
    assert round_to(F(1, 2 ** 1075), torch.float64) == 0.0
    assert round_to(F(3, 2 ** 1076), torch.float64) == 2.0 ** -1074
    assert round_to(F(1, 2 ** 25), torch.float16) == 0.0                 # fp16 subnormal quantum 2^-24
    assert round_to(F(3, 2 ** 25), torch.float16) == 2.0 ** -23
    assert round_to(F(1, 2 ** 133), torch.bfloat16) == 2.0 ** -133       # bf16 smallest subnormal


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_to_overflow_boundary(dtype):
    p, _, emax = oracle.format_info(dtype)
    max_finite = F(2 ** p - 1) * F(2) ** (emax - p + 1)
    half_ulp = F(2) ** (emax - p)
    assert round_to(max_finite, dtype) == float(max_finite)
    assert round_to(max_finite + half_ulp - F(1, 2 ** 2000), dtype) == float(max_finite)
    assert round_to(max_finite + half_ulp, dtype) == math.inf            # tie goes to even: inf
    assert round_to(-(max_finite + half_ulp), dtype) == -math.inf
    assert round_to(F(2) ** 5000, dtype) == math.inf
    assert round_to(0, dtype) == 0.0 and math.copysign(1, round_to(F(0), dtype)) == 1
    assert round_to(F(-0.0), dtype) == 0.0


def test_round_to_fp32_overflow_values():
    fmax = float(np.finfo(np.float32).max)
    assert round_to(F(fmax) + F(2) ** 103, torch.float32) == math.inf
    assert round_to(F(fmax) + F(2) ** 103 - 1, torch.float32) == fmax
    assert round_to(F(65520), torch.float16) == math.inf
    assert round_to(F(65520) - F(1, 1000), torch.float16) == 65504.0


# ------------------------------------------------------------------------------------------------ ulps
def test_unit_roundoff_and_precision():
    assert [unit_roundoff(d) for d in DTYPES] == [2.0 ** -24, 2.0 ** -53, 2.0 ** -8, 2.0 ** -11]
    assert [precision_bits(d) for d in DTYPES] == [24, 53, 8, 11]
    with pytest.raises(TypeError):
        precision_bits(torch.int32)


def test_ulp_binade_edges_and_subnormals():
    assert ulp(1.0, torch.float32) == F(1, 2 ** 23)
    assert ulp(1 - F(1, 2 ** 30), torch.float32) == F(1, 2 ** 24)
    assert ulp(2.0, torch.float32) == F(1, 2 ** 22)
    assert ulp(-2.0, torch.float32) == F(1, 2 ** 22)
    assert ulp(F(2) - F(1, 2 ** 90), torch.float32) == F(1, 2 ** 23)
    assert ulp(0, torch.float32) == ulp(2.0 ** -140, torch.float32) == F(1, 2 ** 149)
    assert ulp(2.0 ** -126, torch.float32) == F(1, 2 ** 149)             # smallest normal: same spacing
    assert ulp(2.0 ** -125, torch.float32) == F(1, 2 ** 148)
    assert ulp(0.0, torch.float64) == F(1, 2 ** 1074)
    assert ulp(1.0, torch.bfloat16) == F(1, 2 ** 7)
    assert ulp(0, torch.bfloat16) == F(1, 2 ** 133)
    assert ulp(1.0, torch.float16) == F(1, 2 ** 10)
    assert ulp(0, torch.float16) == F(1, 2 ** 24)
    assert ulp(65504.0, torch.float16) == 32
    assert ulp(1e6, torch.float16) == 32                                  # above max: top binade
    assert ulp(math.inf, torch.float32) == F(2) ** 104
    assert ulp(F(2) ** 3000, torch.float64) == F(2) ** 971


def test_ulp_matches_numpy_spacing():
    rng = np.random.default_rng(2)
    x = np.abs(rng.standard_normal(300) * np.exp2(rng.integers(-149, 120, 300))).astype(np.float32)
    for v in x[x > 0]:
        assert ulp(float(v), torch.float32) == F(float(np.spacing(v)))
    y = np.abs(rng.standard_normal(300) * np.exp2(rng.integers(-1070, 1000, 300)))
    for v in y[y > 0]:
        assert ulp(float(v), torch.float64) == F(float(np.spacing(v)))


def test_ulp_error():
    one_ulp = 2.0 ** -23
    assert ulp_error(1.0, F(1), torch.float32) == 0.0
    assert ulp_error(1.0 + one_ulp, F(1), torch.float32) == 1.0
    assert ulp_error(1.0, F(1) + F(one_ulp) / 2, torch.float32) == 0.5
    assert ulp_error(math.inf, F(1), torch.float32) == math.inf
    assert ulp_error(math.nan, F(1), torch.float32) == math.inf
    assert ulp_error(torch.tensor(3.0, dtype=torch.bfloat16), F(2), torch.bfloat16) == 64.0
    assert ulp_error(1e300, F(0), torch.float32) == math.inf                 # huge ratio: inf, no OverflowError


# ---------------------------------------------------------------------------------------- reference ops
def _rows_fraction(x: torch.Tensor, dims):
    """Exact sums by brute force: sum Fractions over the reduced dims with torch's own shapes."""
    xd = x.double()
    kept = [d for d in range(x.dim()) if d not in dims]
    perm = xd.permute(*kept, *dims).reshape(-1, math.prod(x.shape[d] for d in dims) if dims else 1)
    return [(frac_sum(r.tolist()), frac_sum(abs(v) for v in r.tolist())) for r in perm]


@pytest.mark.parametrize("dim", [0, 1, -1, None, (0, 1), (1, 0), ()])
@pytest.mark.parametrize("keepdim", [False, True])
def test_reference_sum_2d(dim, keepdim):
    x = torch.tensor([[1e30, 1.0, -1e30, 3.5], [2.0 ** -149, 1.0, 2.0 ** 24, 1.0], [1e-3, -2e-3, 4e-3, 0.0]],
                     dtype=torch.float32)
    out, exact = reference_sum(x, dim=dim, keepdim=keepdim)
    torch_out = x.sum(dim=dim, keepdim=keepdim)
    assert out.shape == torch_out.shape and out.dtype == torch.float32
    if dim is None or dim == ():
        dims = [0, 1]
    else:
        dims = sorted({d % 2 for d in ((dim,) if isinstance(dim, int) else dim)})
    want = _rows_fraction(x, dims)
    assert exact == want
    assert out.flatten().double().tolist() == [round_to(s, torch.float32) for s, _ in want]


def test_reference_sum_values_and_out_dtype():
    x = torch.tensor([[1e30, 1.0, -1e30, 3.5], [1.0, 2.0 ** -24, 2.0 ** -24, 0.0]], dtype=torch.float32)
    out, exact = reference_sum(x, dim=1)
    assert out.tolist() == [4.5, 1.0 + 2.0 ** -23]       # a sequential fp32 sum gives 3.5 and 1.0
    assert exact[0] == (F(9, 2), 2 * F(float(np.float32(1e30))) + F(9, 2))
    out64, _ = reference_sum(x, dim=1, out_dtype=torch.float64)
    assert out64.dtype == torch.float64 and out64.tolist() == [4.5, 1.0 + 2.0 ** -23]
    outb, _ = reference_sum(x, dim=1, out_dtype=torch.bfloat16)
    assert outb.double().tolist() == [4.5, 1.0]


def test_reference_sum_3d_and_edge_shapes():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 4, generator=g).to(torch.bfloat16)
    out, exact = reference_sum(x, dim=(0, 2), keepdim=True)
    assert out.shape == (1, 3, 1) and out.dtype == torch.bfloat16
    assert exact == _rows_fraction(x, [0, 2])
    e, _ = reference_sum(torch.empty(3, 0), dim=1)
    assert e.tolist() == [0.0, 0.0, 0.0]
    s, ex = reference_sum(torch.tensor(2.5))
    assert s.item() == 2.5 and s.shape == () and ex == [(F(5, 2), F(5, 2))]
    with pytest.raises(IndexError):
        reference_sum(x, dim=3)
    with pytest.raises(ValueError):
        reference_sum(torch.tensor([1.0, math.nan]))


def test_reference_mean():
    x = torch.tensor([[1.0, 2.0, 4.0], [1e38, -1e38, 3.0]], dtype=torch.float32)
    out, exact = reference_mean(x, dim=1)
    assert exact[0] == (F(7, 3), F(7, 3)) and exact[1][0] == F(1)
    assert out.tolist() == [round_to(F(7, 3), torch.float32), 1.0]
    out, exact = reference_mean(x)
    assert exact[0][0] == F(10, 6) and out.shape == ()
    with pytest.raises(ValueError):
        reference_mean(torch.empty(2, 0), dim=1)


def test_scalar_inputs_of_other_types():
    assert round_to(np.float32(1.5), torch.bfloat16) == 1.5
    assert round_to(torch.tensor(0.1), torch.float32) == float(np.float32(0.1))
    assert ulp(np.float32(1.0), torch.float32) == F(1, 2 ** 23)
    assert round_to(math.inf, torch.float16) == math.inf
    with pytest.raises(ValueError):
        round_to(math.nan, torch.float32)
    with pytest.raises(ValueError):
        ulp(math.nan, torch.float32)
    with pytest.raises(TypeError):
        exact_sum(np.zeros(3, dtype=np.longdouble))


def test_mpf_to_fraction_keeps_sign_and_exponent():
    import mpmath
    from validation.oracle import mpf_to_fraction
    assert mpf_to_fraction(mpmath.mpf(-1.5)) == Fraction(-3, 2)
    assert mpf_to_fraction(mpmath.mpf(2) ** -1100) == Fraction(1, 2 ** 1100)
    assert mpf_to_fraction(mpmath.mpf(0)) == 0
