"""The layer_norm / rms_norm oracle (validation.norms) checked against torch in float64 and against
hand-computed Fractions."""
import math
from fractions import Fraction

import mpmath
import pytest
import torch
import torch.nn.functional as F

from validation.norms import errors_in_units, reference_norm, reference_norm_backward


def _randn(shape, seed, dtype=torch.float32, offset=0.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float64) + offset).to(dtype)


def _assert_close(exact, ref: torch.Tensor, rel=1e-12):
    """Every |oracle - torch fp64| within rel * max |torch fp64|."""
    scale = float(ref.abs().max())
    worst = max(max(r) for r in errors_in_units(ref, exact, unit=scale))
    assert worst <= rel, worst


def _is_rounded_up(bound: float, exact: Fraction) -> bool:
    """bound is the smallest double >= exact."""
    return Fraction(bound) >= exact > Fraction(math.nextafter(bound, -math.inf))


@pytest.mark.parametrize("rms", [False, True])
@pytest.mark.parametrize("affine", [False, True])
def test_against_torch_float64(rms, affine):
    ns, eps = (3, 8), 1e-5
    x = _randn((4, 3, 8), 0)
    w, b = (_randn(ns, 1), _randn(ns, 2)) if affine else (None, None)
    g = _randn((4, 3, 8), 3)
    x64 = x.double().requires_grad_()
    w64 = w.double().requires_grad_() if affine else None
    b64 = b.double().requires_grad_() if affine and not rms else None
    if rms:
        y64 = F.rms_norm(x64, ns, w64, eps=eps)
    else:
        y64 = F.layer_norm(x64, ns, w64, b64, eps=eps)
    y64.backward(g.double())

    rows, y, rstd, mean = reference_norm(x, ns, w, None if rms else b, eps, rms=rms)
    _assert_close(y, y64.detach())
    x2 = x.double().reshape(-1, 24)
    ref_mean = torch.zeros(4, dtype=torch.float64) if rms else x2.mean(1)
    ref_var = (x2 * x2).mean(1) if rms else x2.var(1, correction=0)
    for i, r in enumerate(rows):
        assert mean[i] == r.mean and float(r.mean) == pytest.approx(float(ref_mean[i]), rel=1e-14, abs=1e-15)
        assert float(r.var) == pytest.approx(float(ref_var[i]), rel=1e-13)
        assert float(rstd[i]) == pytest.approx(float((ref_var[i] + eps).rsqrt()), rel=1e-13)

    dx, dw, db = reference_norm_backward(x, ns, w, g, eps, rms=rms)
    _assert_close(dx, x64.grad)
    if affine:
        _assert_close(dw, w64.grad.reshape(-1))
    else:
        assert dw is None
    if rms:
        assert db is None
    else:
        _assert_close(db, g.double().reshape(-1, 24).sum(0) if b64 is None else b64.grad.reshape(-1))


def test_constant_row():
    eps = 1e-5
    x = torch.full((2, 16), 3.25)
    w, b = _randn(16, 4), _randn(16, 5)
    rows, y, rstd, mean = reference_norm(x, (16,), w, b, eps)
    with mpmath.workprec(256):
        expect = 1 / mpmath.sqrt(mpmath.mpf(Fraction(eps).numerator) / Fraction(eps).denominator)
        for i, r in enumerate(rows):
            assert r.var == 0 and r.mean == Fraction(3.25) == mean[i]
            assert r.max_abs_dev == r.abs_centered_sum == r.abs_dev_mean == r.radius == 0
            assert abs(rstd[i] / expect - 1) < mpmath.mpf(2) ** -250
            assert y[i] == [mpmath.mpf(v) for v in b.double().tolist()]          # exactly b


def test_offset_mean_is_exact():
    x = _randn(4096, 6, offset=1e6).reshape(1, -1)
    fr = [Fraction(v) for v in x.double().reshape(-1).tolist()]
    n = len(fr)
    mu = sum(fr) / n
    (r,), y, _, (mean,) = reference_norm(x, 4096)
    assert r.mean == mean == mu and r.n == n
    assert r.var == sum((v - mu) ** 2 for v in fr) / n
    abs_c, abs_k = sum(abs(v - mu) for v in fr), sum(abs(v - fr[0]) for v in fr) / n
    max_dev = max(abs(v - mu) for v in fr)
    for bound, exact in ((r.abs_centered_sum, abs_c), (r.abs_dev_mean, abs_k), (r.max_abs_dev, max_dev)):
        assert _is_rounded_up(bound, exact)
    assert r.radius >= max(abs(v - fr[0]) for v in fr)
    # y is centred and scaled: mean ~0, mean of squares ~1 (var / (var + eps)).
    with mpmath.workprec(256):
        assert abs(mpmath.fsum(y[0]) / n) < 1e-60
        assert abs(mpmath.fsum(v * v for v in y[0]) / n - 1) < 1e-4


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rms_var_is_mean_of_squares(dtype):
    x = torch.tensor([[1.5, -2.0, 0.1, 3.0, 1e-3], [1e6, -1e-6, 7.0, 0.0, -3.5]], dtype=dtype)
    rows, _, _, mean = reference_norm(x, (5,), rms=True)
    for row, r, mu in zip(x.double().tolist(), rows, mean):
        assert mu == r.mean == 0
        assert r.var == sum(Fraction(v) ** 2 for v in row) / 5
        assert _is_rounded_up(r.abs_centered_sum, sum(abs(Fraction(v)) for v in row))
        assert _is_rounded_up(r.max_abs_dev, max(abs(Fraction(v)) for v in row))
