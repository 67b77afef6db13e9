"""Reference for logsumexp along dims: high-precision values of m (the row's maximum, exact),
s = sum exp(x_i - m), t = sum exp(x_i - m) (m - x_i) and lse = m + log(s), the sum m + log(s) exact
(a Fraction): log(s) keeps its precision whatever |m| (a row of fp64 values near 1e300, whose lse
rounded to WORK_BITS bits would have lost log(s) entirely).

Rows up to MPMATH_MAX_N values: every exp and log in mpmath at WORK_BITS bits, the sums exact over
those values, so log(s) is within n 2^-(WORK_BITS - 2) max(1, |log(s)|) of the true value -- far below
any format's rounding, except for a result within that distance of a rounding boundary.
Longer rows (the GPU error report): numpy's float64 exp, whose results are within 1 ulp (relative
2^-52; exp(0) = 1 exactly, the maxima's terms), summed exactly: log(s) is then within 2^-51 tail / s of
the true value (tail: the terms below the maximum) -- far below an fp32 ulp of any result, also of a
log_softmax next to 0 (y ~ -tail), but not enough to certify the correct rounding of fp64 outputs.
softmax's outputs carry that error relatively (output_exact_to).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import mpmath
import numpy as np
import torch

from .oracle import _exact_row_sums, _reduced_rows, mpf_to_fraction

__all__ = ["RowLogSumExp", "output_exact_to", "reference_logsumexp", "reference_softmax", "WORK_BITS",
           "MPMATH_MAX_N"]

WORK_BITS = 160
MPMATH_MAX_N = 1 << 12


@dataclass(frozen=True)
class RowLogSumExp:
    n: int
    m: float            # the maximum (exact); +-inf / NaN for rows with specials
    s: float            # sum exp(x_i - m), rounded to float64 (for bounds)
    t: float            # sum exp(x_i - m) (m - x_i), rounded to float64 (for bounds)
    lse: Fraction | None   # m + log(s), log(s) to WORK_BITS bits, the sum exact; None for rows with inf / NaN
    special: float | None  # torch's result for rows with inf / NaN: -inf, +inf or NaN
    exact_to: float     # the reference's own absolute error bound on lse (its log(s)'s)


def _row(row: np.ndarray) -> RowLogSumExp:
    n = row.size
    if np.isnan(row).any():
        return RowLogSumExp(n, math.nan, math.nan, math.nan, None, math.nan, 0.0)
    if np.isposinf(row).any():
        return RowLogSumExp(n, math.inf, 1.0, 0.0, None, math.inf, 0.0)
    finite = row[np.isfinite(row)]
    if finite.size == 0:
        return RowLogSumExp(n, -math.inf, 0.0, 0.0, None, -math.inf, 0.0)
    m = float(finite.max())
    gaps = m - finite     # float64: exact for gaps below 2^53 ulps of m (any gap where exp is > 0 matters)
    if n <= MPMATH_MAX_N:
        with mpmath.workprec(WORK_BITS):
            terms = [mpmath.exp(-mpmath.mpf(float(g))) for g in gaps]
            s = mpmath.fsum(terms)
            t = mpmath.fsum(e * mpmath.mpf(float(g)) for e, g in zip(terms, gaps))
            log_s = mpf_to_fraction(mpmath.log(s))
        return RowLogSumExp(n, m, float(s), float(t), Fraction(m) + log_s, None,
                            n * 2.0 ** -(WORK_BITS - 2) * max(1.0, abs(float(log_s))))
    e = np.exp(-gaps)
    s_exact, t_exact = _exact_row_sums(np.stack([e, e * gaps]))   # e * gaps rounded: t is for bounds only
    with mpmath.workprec(WORK_BITS):
        log_s = mpf_to_fraction(mpmath.log(mpmath.mpf(s_exact.numerator) / s_exact.denominator))
    # Each np.exp term is within 2^-52 of its value, relatively, and the maxima's exp(0) = 1 are exact: so
    # |s_exact - s| <= 2^-52 tail, tail = s - (the maxima's count), and log(s) is within 2^-51 tail / s --
    # relative to log(s) ~ tail next to s = 1, where log_softmax's values sit next to 0 (a flat 2^-51
    # there was 2^51 bf16 ulps of a y of -2^-92 in precred-report's bound column).
    tail_over_s = float((s_exact - int((gaps == 0).sum())) / s_exact)
    return RowLogSumExp(n, m, float(s_exact), float(t_exact) * (1 + 2.0 ** -50), Fraction(m) + log_s, None,
                        2.0 ** -51 * tail_over_s + 2.0 ** -(WORK_BITS - 4) * abs(float(log_s)))


def reference_logsumexp(x: torch.Tensor, dim) -> tuple[list[RowLogSumExp], list[int], list[int]]:
    """The reference of every output row of x along dim (torch semantics), row-major over the kept
    dims, with the output shape without and with keepdim. Rows may hold inf / NaN (then `special`)."""
    a, out_shape, keep_shape = _reduced_rows(_finite_view(x), dim)
    rows = [_row(r) for r in _restore_specials(a, x, dim)]
    return rows, out_shape, keep_shape

def output_exact_to(row: RowLogSumExp, y, log: bool) -> float:
    """The reference's own error bound on one of reference_softmax's outputs y of `row`: log_softmax's
    y = x - lse is off by lse's (exact_to); softmax's y = exp(x - lse) relatively, by expm1(exact_to) and
    its exp's WORK_BITS rounding -- so a tiny output keeps a margin of its own size."""
    if log:
        return row.exact_to
    return (math.expm1(row.exact_to) + 2.0 ** -(WORK_BITS - 1)) * abs(float(y))


def reference_softmax(x: torch.Tensor, log: bool, columns=None):
    """softmax (log_softmax, `log`) of each row of a 2-D x (dim 1): the row's RowLogSumExp and its exact
    outputs (Fractions; 0 / -inf for elements of -inf), or None for rows with +inf or NaN, whose outputs
    are NaN -- of the elements in `columns` only, when given (every row's reference still
    reads the whole row)."""
    rows, _, _ = reference_logsumexp(x, 1)
    out = []
    for row, values in zip(rows, x.double().tolist()):
        if row.lse is None:
            out.append((row, None))
            continue
        with mpmath.workprec(WORK_BITS):
            ys = []
            for v in (values if columns is None else [values[j] for j in columns]):
                if v == -math.inf:
                    ys.append(-math.inf if log else Fraction(0))
                    continue
                z = Fraction(v) - row.lse   # exact: log_softmax's value
                if log:
                    ys.append(z)
                    continue
                # z rounded once to WORK_BITS bits (relative to z itself). Below e^-1100 every format
                # (fp64 subnormals included) rounds to 0: the exact value is taken as 0 there (off by
                # < 2^-1580, far below any bound) instead of a Fraction with a 2^-(10^30) denominator.
                z_mp = mpmath.mpf(z.numerator) / z.denominator
                ys.append(mpf_to_fraction(mpmath.exp(z_mp)) if z_mp > -1100 else Fraction(0))
        out.append((row, ys))
    return out


def _finite_view(x: torch.Tensor) -> torch.Tensor:
    # validation.oracle's row extraction insists on finite values; specials are put back below.
    return torch.nan_to_num(x.double(), nan=0.0, posinf=0.0, neginf=0.0)


def _restore_specials(a: np.ndarray, x: torch.Tensor, dim) -> np.ndarray:
    if bool(torch.isfinite(x).all()):
        return a
    nd = x.dim()
    dims = list(range(nd)) if dim is None else sorted({d % nd for d in ([dim] if isinstance(dim, int) else dim)})
    kept = [d for d in range(nd) if d not in dims]
    full = x.double().permute(*kept, *dims).reshape(a.shape).numpy()
    return full
