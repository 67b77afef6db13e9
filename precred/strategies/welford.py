"""Welford's update and Chan's merge: (mean, m2, count) of a set of values, never via sum(x^2) - n*mean^2.

State: `mean` (of the values seen, in the accumulator dtype), `m2` (the sum of squared deviations from
that mean, same dtype) and `count` (fp64, exact up to 2^53). The schedules hold mean/m2 where sums hold
hi/lo, and `count` in a third array that only this strategy uses.

The schedules feed *shifted* values x - K, with K one element of the output's own row (its first
element, or 0 when that is not finite): the variance is shift-invariant, the mean is K + the shifted
mean, and the rounding errors of the state then scale with max|x - K| rather than with |mean| -- a row
with mean 1e6 times its spread costs nothing in accuracy (precred.bounds.moments_error_bound).

Non-finite values keep torch's semantics: the mean is then the plain sum's inf/NaN (mean + x instead of
the Welford step, so +inf stays +inf and inf - inf is NaN) and m2 is NaN.
"""
import triton
import triton.language as tl


@triton.jit
def _is_finite(v):
    return (v - v) == 0.0


@triton.jit
def welford_update(mean, m2, x, reciprocal, valid):
    """Fold element x into the state of lanes where `valid`; `reciprocal` = 1 / (count after the update).

    The schedules stream a lane's elements in tiles, and a lane valid in tile g was valid in every
    earlier tile, so its count after the update is g + 1 for the whole tile: the reciprocal is a
    scalar per tile, not a division per element.
    """
    delta = x - mean
    new_mean = mean + delta * reciprocal
    new_m2 = m2 + delta * (x - new_mean)
    finite = _is_finite(delta)
    new_mean = tl.where(finite, new_mean, mean + x)
    new_m2 = tl.where(finite, new_m2, delta - delta)   # NaN
    return tl.where(valid, new_mean, mean), tl.where(valid, new_m2, m2)


@triton.jit
def _precedes(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    """A strict order on states (count, then mean, then m2): the merge puts the earlier state first."""
    return (n_a < n_b) | ((n_a == n_b) & ((mean_a < mean_b) | ((mean_a == mean_b) & (m2_a < m2_b))))


@triton.jit
def welford_combine(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    """Chan's merge: n = na + nb, delta = mb - ma, mean = ma + delta*nb/n, m2 = m2a + m2b + delta^2*na*nb/n.

    Symmetric bit for bit: the operands are first put in a fixed order (`_precedes`), so
    combine(a, b) == combine(b, a) -- tl.reduce may call it either way round across threads, and the
    tree's order must stay ours (schedules/tree.py). An empty side (n == 0, the identity (0, 0, 0))
    gives the other side exactly: its weight is 0 or 1.
    """
    swap = _precedes(mean_b, m2_b, n_b, mean_a, m2_a, n_a)
    ma = tl.where(swap, mean_b, mean_a)
    mb = tl.where(swap, mean_a, mean_b)
    qa = tl.where(swap, m2_b, m2_a)
    qb = tl.where(swap, m2_a, m2_b)
    na = tl.where(swap, n_b, n_a)
    nb = tl.where(swap, n_a, n_b)
    n = na + nb
    weight_b = tl.where(n > 0, nb / tl.maximum(n, 1.0), 0.0)          # nb / n, in fp64
    delta = mb - ma
    mean = ma + delta * weight_b.to(ma.dtype)
    m2 = (qa + qb) + (delta * delta) * (na * weight_b).to(ma.dtype)   # na * nb / n
    finite = _is_finite(delta)
    mean = tl.where(finite, mean, ma + mb)
    m2 = tl.where(finite, m2, delta - delta)
    return mean, m2, n


@triton.jit
def welford_lane_counts(part_start, part_end, lanes, LANES: tl.constexpr):
    """Elements each lane of a part saw (fp64): lane j takes indices part_start + j + g*LANES < part_end."""
    remaining = part_end - part_start - lanes
    return tl.maximum((remaining + LANES - 1) // LANES, 0).to(tl.float64)
