"""Exact oracle for layer_norm and rms_norm: outputs, and gradients of sum(grad_out * y).

Inputs are viewed as (M, n) rows, a row being the last n = prod(normalized_shape) elements.

Exact (Fractions), as in validation.moments: per row S = sum x and Q = sum x^2 (for fp32/bf16/fp16 every
x^2 is exact in float64 and validation.oracle sums [x, x*x] exactly; fp64 squares go through Fractions),
mean = S/n and var = (Q - S^2/n)/n for layer_norm (biased), mean = 0 and var = Q/n for rms_norm. The
NormRow bounds come from exact quantities rounded up once: sum |x - c| for a double or rational c is
2*S_ge - S + (n - 2k)*c, with S_ge the exact sum of the k elements x >= c. (radius alone is the float64
max |x - shift| padded by 2^-52, exactly as in moments.py.)

Rounded at `prec` bits (default 256), each operation correctly rounded (raw mpmath.libmp calls with an
explicit precision, the same arithmetic as under mpmath.workprec(prec)): rstd = 1/sqrt(var + eps), eps
taken as the exact double Fraction(eps). x - mean is formed as (n*x - S)/n from exact operands, so it keeps
full relative precision under any cancellation (offset 1e6, spread 1); w, b, grad_out are used exactly as
their floats; sums over a row or a column are accumulated exactly (mpf_sum: only terms below 2^-2prec
of the running sum could be dropped) and rounded once. Every y, dx, dweight, dbias is therefore within a
few 2^-prec of the terms it is built from: ~1e-70 relative at 256 bits, far below any format's ulp; for
testing purposes the values are exact.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import mpmath
import numpy as np
import torch
from mpmath.libmp import (fone, fzero, from_float, from_int, from_man_exp, from_rational, mpf_add, mpf_div,
                          mpf_mul, mpf_neg, mpf_sqrt, mpf_sub, mpf_sum, round_nearest)

from .oracle import _as_float64_array, _exact_row_sums, _fraction_to_float

__all__ = ["NormRow", "reference_norm", "reference_norm_backward", "errors_in_units", "bound_inputs"]

_RND = round_nearest


@dataclass(frozen=True)
class NormRow:
    n: int
    mean: Fraction            # exact mean (0 for rms_norm)
    var: Fraction             # exact biased variance m2/n (layer_norm) or mean of squares Q/n (rms_norm)
    shift: float              # the row's first element
    radius: float             # upper bound on max |x - shift| (moments.py's padding)
    abs_dev_mean: float       # upper bound on mean |x_j - shift| (exact value rounded up)
    max_abs_dev: float        # upper bound on max |x_j - mean| (exact value rounded up)
    abs_centered_sum: float   # upper bound on sum |x_j - mean| (exact value rounded up)


def _round_up(v: Fraction) -> float:
    """The smallest double >= v (inf past the largest double)."""
    try:
        f = float(v)                                     # correctly rounded int / int
    except OverflowError:
        return math.inf if v > 0 else -math.inf
    return math.nextafter(f, math.inf) if math.isfinite(f) and Fraction(f) < v else f


def _raw(v: Fraction, prec: int):
    """A Fraction as a raw mpf rounded to nearest at prec bits (one rounding)."""
    return from_rational(v.numerator, v.denominator, prec, _RND)


def _raw_dyadic(v: Fraction):
    """A Fraction with a power-of-two denominator (an exact sum of floats) as an exact raw mpf."""
    return from_man_exp(v.numerator, 1 - v.denominator.bit_length())


def _rows(x: torch.Tensor, normalized_shape) -> np.ndarray:
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(x.shape[x.dim() - len(ns):]) != ns or math.prod(ns) == 0:
        raise ValueError(f"normalized_shape {ns} is not a non-empty tail of x.shape {tuple(x.shape)}")
    return _as_float64_array(x).reshape(-1, math.prod(ns))   # ValueError on NaN/inf


def _vector(t, n: int):
    """weight / bias / None as n raw mpfs (exact), or None."""
    return None if t is None else [from_float(v) for v in _as_float64_array(t).reshape(n).tolist()]


def _norm_rows(a: np.ndarray, squares_exact: bool, rms: bool) -> list[NormRow]:
    """Exact statistics and bounds of every row of a finite float64 (M, n) array."""
    m, n = a.shape
    if squares_exact:
        sums = _exact_row_sums(np.concatenate([a, a * a]))
        s_list, q_list = sums[:m], sums[m:]
    else:
        s_list = _exact_row_sums(a)
        q_list = [sum((Fraction(v) ** 2 for v in row), Fraction(0)) for row in a.tolist()]
    means = [Fraction(0) if rms else s / n for s in s_list]
    # x >= mean, decided exactly: x > float(mean) implies x > mean (float() rounds to nearest), and
    # likewise for <; only x == float(mean) needs the rational comparison.
    mean_f = np.array([float(mu) for mu in means]).reshape(m, 1)
    mean_le_f = np.array([Fraction(float(mu)) >= mu for mu in means]).reshape(m, 1)
    ge_mean = (a > mean_f) | ((a == mean_f) & mean_le_f)
    ge_shift = a >= a[:, :1]
    sge = _exact_row_sums(np.concatenate([np.where(ge_mean, a, 0.0), np.where(ge_shift, a, 0.0)]))
    k_mean, k_shift = ge_mean.sum(axis=1).tolist(), ge_shift.sum(axis=1).tolist()
    rows = []
    for i, (s, q, mu) in enumerate(zip(s_list, q_list, means)):
        shift = float(a[i, 0])
        # sum |x - c| = 2 * (sum of x >= c) - S + (n - 2 * #(x >= c)) * c, exactly.
        abs_shift = 2 * sge[m + i] - s + (n - 2 * k_shift[i]) * Fraction(shift)
        abs_mean = 2 * sge[i] - s + (n - 2 * k_mean[i]) * mu
        lo, hi = Fraction(float(a[i].min())), Fraction(float(a[i].max()))
        rows.append(NormRow(
            n=n, mean=mu, var=q / n if rms else (q - s * s / n) / n, shift=shift,
            # |x - K| rounded in float64 is within one ulp: pad by a relative 2^-52 (as moments.py).
            radius=float(np.max(np.abs(a[i] - shift))) * (1 + 2.0 ** -52),
            abs_dev_mean=_round_up(abs_shift / n),
            max_abs_dev=_round_up(max(hi - mu, mu - lo)),
            abs_centered_sum=_round_up(abs_mean)))
    return rows


def _xhat(row: list[float], r: NormRow, s_raw, rstd_n, rms: bool, prec: int):
    """xhat_j = (x_j - mean) * rstd as raw mpfs: (n*x_j - S) is exact up to one rounding, times rstd/n."""
    if rms:
        return [mpf_mul(from_float(v), rstd_n, prec, _RND) for v in row]
    n_raw = from_int(r.n)
    return [mpf_mul(mpf_sub(mpf_mul(from_float(v), n_raw), s_raw, prec, _RND), rstd_n, prec, _RND)
            for v in row]


def _prepare(x, normalized_shape, eps, rms, prec):
    a = _rows(x, normalized_shape)
    rows = _norm_rows(a, x.dtype != torch.float64, rms)
    rstds, xhats = [], []
    for row, r in zip(a.tolist(), rows):
        rstd = mpf_div(fone, mpf_sqrt(_raw(r.var + Fraction(eps), prec), prec, _RND), prec, _RND)
        rstd_n = rstd if rms else mpf_div(rstd, from_int(r.n), prec, _RND)
        s_raw = _raw_dyadic(r.mean * r.n)              # the exact row sum S (0 for rms_norm)
        rstds.append(rstd)
        xhats.append(_xhat(row, r, s_raw, rstd_n, rms, prec))
    return a, rows, rstds, xhats


def reference_norm(x: torch.Tensor, normalized_shape, weight=None, bias=None, eps: float = 1e-5, *,
                   rms: bool = False, prec: int = 256):
    """layer_norm (or rms_norm with rms=True) of a finite tensor, to prec bits.

    Returns (rows, y, rstd, mean): rows a list[NormRow], one per row of the (M, n) view; y a list of M
    lists of n mpmath.mpf, y_ij = (x_ij - mean_i) * rstd_i * w_j + b_j (rms: x_ij * rstd_i * w_j + b_j);
    rstd a list of M mpf, 1/sqrt(var_i + eps); mean a list of M exact Fractions (0 for rms_norm).
    weight / bias: tensors of normalized_shape, or None (w = 1, b = 0)."""
    a, rows, rstds, xhats = _prepare(x, normalized_shape, eps, rms, prec)
    n = a.shape[1]
    w, b = _vector(weight, n), _vector(bias, n)
    y = []
    for xh in xhats:
        yr = xh if w is None else [mpf_mul(v, wj, prec, _RND) for v, wj in zip(xh, w)]
        if b is not None:
            yr = [mpf_add(v, bj, prec, _RND) for v, bj in zip(yr, b)]
        y.append([mpmath.mp.make_mpf(v) for v in yr])
    return rows, y, [mpmath.mp.make_mpf(v) for v in rstds], [r.mean for r in rows]


def reference_norm_backward(x: torch.Tensor, normalized_shape, weight, grad_out: torch.Tensor,
                            eps: float = 1e-5, *, rms: bool = False, prec: int = 256):
    """Gradients of sum(grad_out * y) for y = reference_norm(x, normalized_shape, weight, bias, eps, rms=rms).

    Returns (dx, dweight, dbias): dx a list of M lists of n mpf,
      layer_norm: dx_i = rstd * (g_i w_i - mean_j(g_j w_j) - xhat_i * mean_j(g_j w_j xhat_j)),
      rms_norm:   dx_i = rstd * (g_i w_i - xhat_i * mean_j(g_j w_j xhat_j)), xhat = x * rstd;
    dweight a list of n mpf, sum over rows of g_ij xhat_ij (None when weight is None);
    dbias a list of n mpf, sum over rows of g_ij, for layer_norm (None for rms_norm)."""
    a, rows, rstds, xhats = _prepare(x, normalized_shape, eps, rms, prec)
    m, n = a.shape
    w = _vector(weight, n)
    g = _as_float64_array(grad_out).reshape(m, n).tolist()
    dx, gx_cols, g_cols = [], [[] for _ in range(n)], [[] for _ in range(n)]
    for gr, xh, rstd in zip(g, xhats, rstds):
        g_raw = [from_float(v) for v in gr]
        gw = g_raw if w is None else [mpf_mul(gj, wj) for gj, wj in zip(g_raw, w)]   # exact products
        n_raw = from_int(n)
        c2 = mpf_div(mpf_sum([mpf_mul(u, v) for u, v in zip(gw, xh)]), n_raw, prec, _RND)  # mean(g w xhat)
        c1 = fzero if rms else mpf_div(mpf_sum(gw), n_raw, prec, _RND)                  # mean(g w)
        # g w - c1 - xhat * c2 summed exactly from its (exact or prec-bit) terms, then one rounding.
        dx.append([mpmath.mp.make_mpf(mpf_mul(mpf_sum([u, mpf_neg(c1), mpf_neg(mpf_mul(v, c2))], prec, _RND),
                                              rstd, prec, _RND)) for u, v in zip(gw, xh)])
        for j in range(n):
            gx_cols[j].append(mpf_mul(g_raw[j], xh[j]))
            g_cols[j].append(g_raw[j])
    col_sum = lambda cols: [mpmath.mp.make_mpf(mpf_sum(c, prec, _RND)) for c in cols]
    return dx, None if w is None else col_sum(gx_cols), None if rms else col_sum(g_cols)


def errors_in_units(computed: torch.Tensor, exact, unit: float = 1.0) -> list[list[float]]:
    """|computed - exact| / unit as floats, per element. exact: a list of rows of mpf (y, dx) or one flat
    list (dweight, dbias); computed is reshaped to match. NaN/inf in computed gives inf."""
    rows = exact if exact and isinstance(exact[0], list) else [exact]
    c = computed.detach().to("cpu", torch.float64).reshape(len(rows), -1).tolist()
    return [[float(abs(mpmath.mpf(cv) - e)) / unit if math.isfinite(cv) else math.inf
             for cv, e in zip(cr, er)] for cr, er in zip(c, rows)]


def bound_inputs(x_row, row: NormRow, moments_row, rms: bool) -> dict:
    """precred.norm_error_bound's per-row arguments from the oracle: row (reference_norm's NormRow),
    moments_row (validation.moments.reference_moments' row: the streaming path's exact mean and m2) and
    the row's values: n, var, radius, abs_dev_mean, abs_centered_sum, centered = |x - mean| (rms_norm:
    |x|), row_mean, row_m2. Quantities beyond fp64 (rows over its whole exponent range) are inf: the
    bound then claims nothing."""
    centered = np.abs(np.asarray(x_row, dtype=np.float64) - (0.0 if rms else float(row.mean)))
    return dict(n=row.n, var=_fraction_to_float(row.var), radius=row.radius, abs_dev_mean=row.abs_dev_mean,
                abs_centered_sum=row.abs_centered_sum, centered=centered,
                row_mean=_fraction_to_float(moments_row.mean), row_m2=_fraction_to_float(moments_row.m2))
