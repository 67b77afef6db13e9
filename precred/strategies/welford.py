"""Welford's update and Chan's merge: (mean, m2, count) of a set of values, never via sum(x^2) - n*mean^2.

State: `mean` (of the values seen, in the accumulator dtype), `m2` (the sum of squared deviations from
that mean, same dtype) and `count` (fp64, exact up to 2^53). The schedules hold mean/m2 where sums hold
hi/lo, and `count` in a third array that only this strategy uses.

The schedules feed *shifted* values x - K, with K one element of the output's own row (its first
element, or 0 when that is not finite): the variance is shift-invariant, the mean is K + the shifted
mean, and the rounding errors of the state then scale with max|x - K| rather than with |mean| -- a row
with mean 1e6 times its spread costs nothing in accuracy (precred.bounds.moments_error_bound).

Over the input the schedules mostly skip the per-element update: a thread's 16-byte vector (inner
schedule) gets its (mean, m2) by two passes over its registers (welford_vector_moments,
precred.plan.WELFORD_TWO_PASS_VECTORS), a tile's lanes held in its registers (outer schedule) by Chan's
merge of equal counts (weights exactly 1/2, na nb / n = c / 2: no division); either is then merged into
the lane's state with the tile's scalar weights (welford_merge_vectors; an fp32 tile of two values a
column takes both merges in one step, welford_merge_pairs); the full tiles' lanes, which
all hold one count, merge by equal counts too (welford_equal_combine in schedules/tree.py's trees,
strategy id WELFORD_EQUAL_COUNTS). Each merge is an instance of the merge the bound counts
(precred.bounds.moments_error_bound), in the same tree, so the depth is unchanged; the two passes stay
within their vector's merges' budget but for a second-order term the bound adds.

Non-finite values keep torch.mean's semantics for the mean: the mean is updated and merged as the
weighted average mean*(1 - r) + x*r and ma*wa + mb*wb, in which an infinity stays an infinity (and
inf - inf is NaN) without a branch -- an empty side has mean 0 and weight 0, never inf * 0. The
variance of a row whose mean is not finite is NaN (precred.schedules.finish.finish_moments).

Every product that meets a sum is an explicit `tl.fma`. Written as `a * b + c`, Triton emits a
contractible mul and add, and ptxas fused them or not depending on the kernel around them: the H100
gave fp32 variances 1 ulp apart between two merge passes of the same tree that differed only in their
column block (tests/test_gpu_only.py, narrowed outer merges). With the FMAs spelled out the bits depend
on the operations alone. An FMA rounds once where the mul and the add rounded twice, so the bounds,
which count both roundings, still hold. (The CPU interpreter evaluates tl.fma as a * b + c, two
roundings: its bits may differ from the GPU's, as for every op with a rounding that differs there.)
"""
import triton
import triton.language as tl


@triton.jit
def welford_update(mean, m2, x, reciprocal, complement, valid):
    """Fold element x into the state of lanes where `valid`; `reciprocal` = 1 / k and `complement` =
    (k - 1) / k for k = the lane's count after the update.

    The schedules stream a lane's elements in tiles, and a lane valid in tile g was valid in every
    earlier tile, so its count after the update is g + 1 for the whole tile: both weights are scalars
    per tile, not a division per element. mean' = mean (k-1)/k + x/k; m2' = m2 + (x - mean)(x - mean').
    """
    delta = x - mean
    new_mean = tl.fma(mean, complement, x * reciprocal)
    new_m2 = tl.fma(delta, x - new_mean, m2)
    return tl.where(valid, new_mean, mean), tl.where(valid, new_m2, m2)


@triton.jit
def welford_equal_combine(mean_a, m2_a, count_a, mean_b, m2_b, count_b):
    """Chan's merge of two states of the same count c (fp64, exact), carried: the weights are exactly
    1/2 and na nb / n = c / 2 (rounded once to the state's dtype, as welford_combine rounds its weight),
    so no division. mean = (ma + mb) / 2 (one rounding; the halving is exact above the subnormals),
    m2 = m2a + m2b + delta^2 c / 2. Symmetric bit for bit: the sums commute and delta's sign cancels in
    delta * (delta * c / 2)."""
    delta = mean_b - mean_a
    weight = (count_a * 0.5).to(mean_a.dtype)
    return (mean_a + mean_b) * 0.5, tl.fma(delta, delta * weight, m2_a + m2_b), count_a + count_b


@triton.jit
def welford_merge_vectors(mean, m2, vector_mean, vector_m2, reciprocal, complement, VEC: tl.constexpr):
    """Chan's merge of lane states of VEC (k - 1) values with vector states of VEC values (the k-th
    tile's, merged by welford_equal_combine): the counts are the same in every lane, so the weights are the
    tile's scalars -- (k-1)/k = `complement`, 1/k = `reciprocal`, and na nb / n = VEC (k-1)/k, exactly
    VEC * complement (welford_combine's roundings, without its division). At k = 1 the lane takes the
    vector's state exactly."""
    delta = vector_mean - mean
    new_mean = tl.fma(mean, complement, vector_mean * reciprocal)
    return new_mean, tl.fma(delta, delta * (complement * VEC), m2 + vector_m2)


@triton.jit
def welford_merge_pairs(mean, m2, first, second, half_reciprocal, complement):
    """welford_merge_vectors of a tile of two values a lane (`first`, `second`: shifted values, count 1
    each), their own equal-count merge (welford_equal_combine) fused into it: s = a + b and d = b - a
    give the pair's mean s / 2 (exact but for subnormals) and m2 d^2 / 2, and then -- the lane holding
    2 (k - 1) values, `complement` = (k-1)/k, `half_reciprocal` = 1 / (2k) (exactly half tile_weights'
    reciprocal) --
        mean' = fma(mean, complement, s / (2k)),   delta = s / 2 - mean,
        m2'   = fma(delta, delta * 2 (k-1)/k, fma(d, d / 2, m2)).
    The mean and delta are the two merges' own bits (s * (r/2) is (s/2) * r: halving is exact); the
    pair's m2 enters the lane's with one rounding where the two merges rounded it, then added it (two):
    within their budget (precred.bounds.moments_error_bound). 12 fp64 operations a pair with the shifts,
    where the two merges took 14 (sm_90 SASS of var's fp64 loop over fp32 columns, 4 pairs a thread:
    66 -> 59; bench/kernel_resources.py). Taken over fp32 columns (schedules/outer.py welford_tile_part)."""
    s = first + second
    d = second - first
    # -delta = mean - s / 2: the same square, with no negation (Triton negates as 0 - x, an fp64 add)
    minus_delta = tl.fma(s, -0.5, mean)
    new_mean = tl.fma(mean, complement, s * half_reciprocal)
    return new_mean, tl.fma(minus_delta, minus_delta * (complement * 2.0), tl.fma(d, d * 0.5, m2))


@triton.jit
def _sum_adjacent_pairs(s, ROWS: tl.constexpr, SUMS: tl.constexpr, LENGTH: tl.constexpr):
    """[ROWS, SUMS, LENGTH] -> [ROWS, SUMS, 1] by the fixed tree of adjacent pairs (LENGTH a power of two),
    each level a sum over an axis of two: one addition, in no order of Triton's, inside the thread."""
    for level in tl.static_range(0, 8):
        if (LENGTH >> level) > 1:
            s = tl.sum(tl.reshape(s, (ROWS, SUMS, LENGTH >> (level + 1), 2)), 3)
    return s


@triton.jit
def welford_vector_moments(values, ROWS: tl.constexpr, WIDTH: tl.constexpr, VEC: tl.constexpr):
    """(mean, m2) of each VEC-element vector of a [ROWS, WIDTH] tile of shifted values, every value
    counted, by two passes over the vector in registers: mean = (pairwise sum) / VEC, then m2 = the
    pairwise sum of the squared deviations from it (the leaf pairs as fma(a, a, b * b)). Returns
    [ROWS, WIDTH // VEC] each. About 4 operations a value where welford_equal_combine's tree takes 6.

    Error (u the accumulator's unit roundoff, d = log2 VEC, R = max |value|, eta half the smallest
    subnormal): the sum is within gamma_d VEC R, so |mean error| = e <= gamma_d R + (VEC / 2) eta (the
    scaling by 1 / VEC is exact but for subnormal results) -- within the 7 u R + 4 eta a level the merge
    tree's mean is counted for (precred.bounds.moments_error_bound). The
    deviations round once, the squares and sums d + 1 times more: m2 = sum (v_i - mean~)^2 (1 + t_i),
    |t_i| <= gamma_(d+3), and sum (v_i - mean~)^2 = m2_exact + VEC e^2 (the deviations from the exact
    mean sum to 0). First order (d + 3) u m2 <= 6 u m2 for d <= 3: within the 10 u m2 a merge of the
    tree is counted for, at the vector's top merge alone; plus VEC e^2, second order, which
    moments_error_bound adds as 2 n (gamma_3 R + 4 eta)^2 over the row."""
    SUMS: tl.constexpr = WIDTH // VEC
    v = tl.reshape(values, (ROWS, SUMS, VEC))
    if values.dtype == tl.float32:
        # Each value scaled by 1 / VEC first, so that no partial sum exceeds R: summed first, a vector of
        # fp32 values beyond fp32's largest / VEC overflowed where the merges' means did not (var_mean's
        # mean of a row near 5e37: -inf, torch's -5e37). The scaling is exact but for subnormal results
        # (eta each, VEC / 2 of them: one operand of each leaf fma is scaled inside it).
        even, odd = tl.split(tl.reshape(v, (ROWS, SUMS, VEC // 2, 2)))
        mean = _sum_adjacent_pairs(tl.fma(even, 1.0 / VEC, odd * (1.0 / VEC)), ROWS, SUMS, VEC // 2)
    else:
        # fp64: the inputs are at most fp32's largest (fp64 input: vectors of 2, as the merges' a + b)
        mean = _sum_adjacent_pairs(v, ROWS, SUMS, VEC) * (1.0 / VEC)
    even, odd = tl.split(tl.reshape(v - mean, (ROWS, SUMS, VEC // 2, 2)))
    q = _sum_adjacent_pairs(tl.fma(even, even, odd * odd), ROWS, SUMS, VEC // 2)
    return tl.reshape(mean, (ROWS, SUMS)), tl.reshape(q, (ROWS, SUMS))


@triton.jit
def _precedes(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    """A strict order on states (count, then mean, then m2): the merge puts the earlier state first."""
    return (n_a < n_b) | ((n_a == n_b) & ((mean_a < mean_b) | ((mean_a == mean_b) & (m2_a < m2_b))))


@triton.jit
def welford_combine(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    """Chan's merge: n = na + nb, mean = ma na/n + mb nb/n, m2 = m2a + m2b + (mb - ma)^2 na nb / n.

    Symmetric bit for bit: the operands are first put in a fixed order (`_precedes`), so
    combine(a, b) == combine(b, a) -- tl.reduce may call it either way round across threads, and the
    tree's order must stay ours (schedules/tree.py). An empty side (n == 0, the identity (0, 0, 0))
    gives the other side exactly: its weight is 0, the other's 1.
    """
    swap = _precedes(mean_b, m2_b, n_b, mean_a, m2_a, n_a)
    ma = tl.where(swap, mean_b, mean_a)
    mb = tl.where(swap, mean_a, mean_b)
    qa = tl.where(swap, m2_b, m2_a)
    qb = tl.where(swap, m2_a, m2_b)
    na = tl.where(swap, n_b, n_a)
    nb = tl.where(swap, n_a, n_b)
    n = na + nb
    inverse = 1.0 / tl.maximum(n, 1.0)                       # fp64; n == 0 only for two empty sides
    weight_a = (na * inverse).to(ma.dtype)
    weight_b = (nb * inverse).to(ma.dtype)
    delta = mb - ma
    mean = tl.fma(ma, weight_a, mb * weight_b)
    # delta * (delta * w), not delta^2 * w: with an empty side (w == 0) a delta whose square overflows
    # would give inf * 0 = NaN; this way the term is 0 there, and where it overflows it is +inf.
    m2 = tl.fma(delta, delta * (na * nb * inverse).to(ma.dtype), qa + qb)
    return mean, m2, n


@triton.jit
def welford_lane_counts(part_start, part_end, lanes, LANES: tl.constexpr):
    """Elements each lane of a part saw (fp64): lane j takes indices part_start + j + g*LANES < part_end."""
    remaining = part_end - part_start - lanes
    return tl.maximum((remaining + LANES - 1) // LANES, 0).to(tl.float64)
