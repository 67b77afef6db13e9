"""Error bounds of every mode: the contract the tests hold each result to (DESIGN.md).

`error_bound` returns an upper bound on |computed - exact| for one output, where exact is the exact
sum (op="sum") or the exact sum divided by n (op="mean") of the n inputs, S1 = sum |x_i| (exact), and
`depth` is the depth of the evaluation tree the plan built (precred.plan.Plan.depth: the largest
number of additions any element goes through). Without `depth` the bound holds for any order
(depth n - 1, recursive summation). Derivations, with u the accumulator's unit roundoff and
gamma_k = k u / (1 - k u):

* plain accumulation (fast, pairwise, fp64): any summation tree of depth d gives
  |s_hat - s| <= gamma_d * S1 (Higham, Accuracy and Stability, eq. 4.6 generalised to trees).
* compensated (kahan): `hi` is that same plain sum and every addition's exact error e_k is captured
  by TwoSum, so hi + sum(e_k) = s exactly, with sum |e_k| <= gamma_d * S1. `lo` sums the e_k through
  at most 2d additions (a merge adds lo_a + lo_b, then e), so |hi + lo - s| <= gamma_2d*gamma_d*S1.
  hi + lo is then formed in fp64 (one rounding, u_64).
  16-bit input into a non-fp64 output runs the fp64 mode instead (precred.modes.sum_mode): its
  gamma^64_d S1 < 2 d 2^-53 S1 (d < 2^52) is below gamma_2d gamma_d S1 >= 2 d^2 2^-48 S1 for every
  d >= 1 (u = 2^-24), and the same final roundings follow, so this bound holds there too
  (tests/test_sum_accuracy.py checks that it dominates the fp64 mode's).
* exact: the result is the exact value correctly rounded (strategies/exact.py proves the filter's
  certificate, strategies/superaccumulator.py the recomputation): half an ulp of the output format
  at the exact value (half the smallest subnormal below the normal range), whatever n and S1.
* mean: the value is divided by n in fp64 (correctly rounded; n is exact in fp64): one more u_64.
* the result is rounded once to the output dtype unless it is already representable there
  (a plain sum whose accumulator is the output dtype). 16-bit outputs are reached through fp32 --
  two roundings, both counted. Results in the subnormal range add half the format's smallest
  subnormal.
"""
import math

import torch

from .modes import (get_exp_mode, get_mode, get_norm_mode, get_prod_mode, get_var_mode, log_softmax_split_tail,
                    norm_affine_dtype, softmax_two_part_exp, split_tail_counts_maxima)
from .strategies.stable_exp import TAIL_SCALE_LOG2
from .plan import LoopPlan, RowPlan, norm_fp32_pass, norm_fp32_rstd, norm_fp64_mean, split_tail_depth

_UNIT_ROUNDOFF = {torch.float64: 2.0 ** -53, torch.float32: 2.0 ** -24,
                  torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}
# Half of the smallest positive subnormal: the absolute error floor of rounding into the format.
_HALF_TINY = {torch.float64: 2.0 ** -1075, torch.float32: 2.0 ** -150,
              torch.bfloat16: 2.0 ** -134, torch.float16: 2.0 ** -25}


def unit_roundoff(dtype: torch.dtype) -> float:
    return _UNIT_ROUNDOFF[dtype]


def gamma(k: int, u: float) -> float:
    """gamma_k = k u / (1 - k u); infinite when k u >= 1 (no bound)."""
    if k <= 0:
        return 0.0
    ku = k * u
    return math.inf if ku >= 1.0 else ku / (1.0 - ku)


def error_bound(mode: str, n: int, S1: float, s: float, dtype: torch.dtype, *,
                depth: int | None = None, op: str = "sum", out_dtype: torch.dtype | None = None) -> float:
    """Upper bound on |computed - exact| of `precred.sum`/`precred.mean` in `mode`.

    mode: a precred mode; n: number of summed elements; S1: sum of |x_i|; s: the exact sum;
    dtype: the input dtype; depth: the plan's tree depth (default n - 1, valid for every plan);
    op: "sum" or "mean"; out_dtype: the output dtype (default dtype).

    Valid while every partial sum stays finite in the accumulator (S1 below its largest finite value
    suffices): the fp32 modes (fast, pairwise, kahan) give +-inf where a partial sum leaves fp32's
    range, even if the exact sum is representable (as torch.sum does); fp64 and exact accumulate fp32
    and 16-bit inputs far inside fp64's range.
    """
    if op not in ("sum", "mean"):
        raise ValueError(f"op must be 'sum' or 'mean', got {op!r}")
    m = get_mode(mode)
    out_dtype = dtype if out_dtype is None else out_dtype
    if mode == "exact":
        exact = float(s) / n if op == "mean" else float(s)
        return half_ulp(exact, out_dtype)
    acc_dtype = m.accumulator_dtype(dtype, out_dtype)
    u = _UNIT_ROUNDOFF[acc_dtype]
    u64 = _UNIT_ROUNDOFF[torch.float64]
    S1, s = abs(float(S1)), float(s)
    d = max(n - 1, 0) if depth is None else depth
    if S1 * (1.0 + gamma(d, u)) >= _MAX_FINITE[acc_dtype]:   # a partial sum may overflow: no claim
        return math.inf

    # Error of the fp64 value the kernel finalizes, before the division of a mean.
    if m.strategy == 1:  # compensated
        err = gamma(2 * d, u) * gamma(d, u) * S1
        err += u64 * (abs(s) + err)
    else:
        err = gamma(d, u) * S1

    exact = s
    if op == "mean":
        exact = s / n
        err = err / n + u64 * (abs(exact) + err / n)

    # Final rounding into the output dtype, when the value may not be representable there.
    already_exact = (m.strategy == 0 and op == "sum"
                     and _UNIT_ROUNDOFF[acc_dtype] >= _UNIT_ROUNDOFF[out_dtype])
    if not already_exact:
        err = _rounded_to_output(err, exact, out_dtype)
    # The bound itself is evaluated in binary64: pad it by a few of its own roundings.
    return err * (1.0 + 16 * u64)


# (precision with the implicit bit, smallest normal exponent) of the 16/32-bit formats.
_FORMAT = {torch.float32: (24, -126), torch.bfloat16: (8, -126), torch.float16: (11, -14)}


def half_ulp(value: float, dtype: torch.dtype) -> float:
    """Half the spacing of dtype (fp32, bf16, fp16) at `value` (the spacing just above |value|'s
    power of two; the subnormal spacing below the normal range): the error of a correct rounding."""
    p, emin = _FORMAT[dtype]
    exponent = math.frexp(abs(value))[1] - 1 if value != 0 else emin
    return math.ldexp(1.0, max(exponent, emin) - p)


def _rounded_to_output(err: float, exact: float, out_dtype: torch.dtype) -> float:
    """The bound `err` on an fp64 value near `exact`, after that value is rounded to out_dtype (16-bit
    outputs through fp32: two roundings). Rounding into the subnormal range adds at most half a
    subnormal spacing per rounding (two at most). inf (no claim) where the value may reach the
    output's largest finite value: there the rounding can overflow (through fp32, a value just below
    the 16-bit overflow threshold can round to an fp32 tie that rounds on to inf), and an exact result
    beyond it is inf for every mode."""
    if out_dtype == torch.float64:
        return err
    if abs(exact) + err >= _MAX_FINITE[out_dtype]:
        return math.inf
    u_out = _UNIT_ROUNDOFF[out_dtype]
    if out_dtype in (torch.bfloat16, torch.float16):
        u_out = u_out + _UNIT_ROUNDOFF[torch.float32] * (1.0 + u_out)  # fp64 -> fp32 -> 16-bit
    return u_out * abs(exact) + (1.0 + u_out) * err + 2 * _HALF_TINY[out_dtype]


_TINY_64 = 5e-324    # the smallest positive binary64 subnormal, 2^-1074
_SMALLEST_NORMAL = {torch.float64: 2.0 ** -1022, torch.float32: 2.0 ** -126}
_MAX_FINITE = {torch.float64: 1.7976931348623157e308, torch.float32: 3.4028234663852886e38,
               torch.bfloat16: 3.3895313892515355e38, torch.float16: 65504.0}


def moments_error_bound(mode: str, n: int, m2: float, radius: float, mean: float, dtype: torch.dtype, *,
                        depth: int, op: str = "var", correction: float = 1.0,
                        out_dtype: torch.dtype | None = None) -> float:
    """Upper bound on |computed - exact| of precred.var / std / the mean of var_mean, in a Welford mode.

    n: values in the row; m2: the exact sum of squared deviations from the mean; radius: max |x_i - K|
    over the row, K the kernel's shift (the row's first element); mean: the exact mean; depth: the
    plan's tree depth h (precred.plan.Plan.depth: chain, lane tree and later passes); op: "var", "std"
    or "mean"; correction as torch's. inf where no bound is claimed (n - correction <= 0, a possible
    overflow of the accumulator, or an error too large for the first-order analysis to hold).

    Derivation (u the accumulator's unit roundoff, L = ceil(log2 n), R = radius, eta = half the
    accumulator's smallest subnormal). The kernel runs Welford's update and Chan's merge on x - K; the
    whole computation is one binary merge tree of depth h over the n values (a chain update is a
    merge with a one-element side; the merges of equal counts inside a vector or a tile, weights 1/2
    and mean (ma + mb) / 2, are merges of it too). First order in u:
    * mean: a merge forms ma*wa + mb*wb (a chain update mean*(k-1)/k + x/k): two rounded weights, two
      products and a sum of terms at most R: at most 3uR(1 + u), counted as 7uR (room for the older
      form ma + (mb - ma) nb/n, and for the tiles' weights of precred.schedules.steps.tile_weights,
      within 1.51 u each: 3.51 uR; their m2 term 8.51 u of the 10 u below); a merge's mean is a
      weighted average of its operands', so errors never grow when passed up: |mean error| <= E = (7h + 1) u R + 4 h eta (the +1: x - K itself rounded).
    * m2: a merge's own roundings cost <= 10 u m2_node (Chan's form 8u; the update form 4u plus
      7u|delta|R, summed over updates <= 10 u R sqrt(n m2)); summed over the tree <= 10 u h m2, since a
      term of m2 is counted once per ancestor. The operands' mean errors enter delta^2 na nb / n: at
      most 4 E |delta| na nb / n per merge, and by Cauchy-Schwarz sum |delta| na nb / n <=
      sqrt(sum delta^2 na nb / n) sqrt(sum na nb / n) <= sqrt(m2) sqrt(n L) (the first sum is exactly
      m2; na nb / n <= min(na, nb), and an element is on the smaller side at most log2 n times).
      Rounding x - K perturbs each value by <= u R: <= 2 u R sqrt(n m2). Altogether
      |dm2| <= u h (10 m2 + 40 sqrt(L) R sqrt(n m2)) + underflow (16 n h eta + 4 (4 h eta) sqrt(n L m2)).
      Vectors of at most 8 values whose (mean, m2) are taken by two passes instead of their merges
      (strategies/welford.py welford_vector_moments) stay within their merges' budget, but for a
      second-order n (gamma_3 R + 4 eta)^2 over the row, added twice.
    The first-order terms are padded by 1/(1 - 2 rho), rho = |dm2| / m2, and no bound is claimed for
    rho >= 1/4. Then var = m2 / (n - correction) in fp64 (2 u_64: a division, or a product by the
    reciprocal), std = sqrt(var) in fp64
    (|sqrt(a) - sqrt(b)| <= min(|a - b| / sqrt(b), sqrt(|a - b|)), then u_64), mean = K + mean in fp64
    (u_64), and the rounding to the output dtype.
    """
    if op not in ("var", "std", "mean"):
        raise ValueError(f"op must be 'var', 'std' or 'mean', got {op!r}")
    m = get_var_mode(mode)
    out_dtype = dtype if out_dtype is None else out_dtype
    acc_dtype = m.accumulator_dtype(dtype, out_dtype)
    u = _UNIT_ROUNDOFF[acc_dtype]
    u64 = _UNIT_ROUNDOFF[torch.float64]
    # Half the smallest subnormal; fp64's (2^-1075) is not a binary64 number: its full spacing stands in.
    eta = max(_HALF_TINY[acc_dtype], _TINY_64)
    h = max(int(depth), 1)
    L = max(1, math.ceil(math.log2(n))) if n > 1 else 1
    R = abs(float(radius))
    E = (7 * h + 1) * u * R + 4 * h * eta
    if op == "mean":   # the means never read m2: only their own intermediates (at most 2R) must stay finite
        if R * 4 > _MAX_FINITE[acc_dtype] * 0.5:
            return math.inf
        err = E + u64 * (abs(float(mean)) + E) + _TINY_64
        return _rounded_to_output(err, float(mean), out_dtype) * (1.0 + 16 * u64)
    # Every intermediate of m2 is at most n R^2 (m2 of shifted values).
    if n * R * R * 4 > _MAX_FINITE[acc_dtype] * 0.5:
        return math.inf
    m2, mean = float(m2), float(mean)   # both below n R^2 now

    d_m2 = u * h * (10 * m2 + 40 * math.sqrt(L) * R * math.sqrt(n * m2))
    d_m2 += 16 * n * h * eta + 16 * h * eta * math.sqrt(n * L * m2)
    # The vectors' two-pass moments (strategies/welford.py welford_vector_moments): each vector's m2 is
    # also off by VEC e^2, e <= gamma_3 R + 4 eta its mean's error -- n e^2 over the row, second order.
    d_m2 += 2 * n * (gamma(3, u) * R + 4 * eta) ** 2
    if d_m2 > 0:
        rho = d_m2 / m2 if m2 > 0 else math.inf
        if rho >= 0.25:
            if m2 > 0:
                return math.inf
        else:
            d_m2 /= 1 - 2 * rho
    divisor = n - correction
    if divisor <= 0:
        return math.inf
    var = m2 / divisor
    # the fp64 division, or a product by its reciprocal (moments_rows.py: 2 u_64), underflow included
    d_var = d_m2 / divisor + 2 * u64 * (var + d_m2 / divisor) + _TINY_64
    if op == "var":
        return _rounded_to_output(d_var, var, out_dtype) * (1.0 + 16 * u64)
    std = math.sqrt(var)
    d_std = math.sqrt(d_var) if std == 0 else min(d_var / std, math.sqrt(d_var))
    d_std += u64 * (std + d_std) + _TINY_64
    return _rounded_to_output(d_std, std, out_dtype) * (1.0 + 16 * u64)


# Relative error of one exponential, in units of the accumulator's u: fp32 on the GPU is ex2.approx of
# x*log2(e) (PTX: relative error 2^-22 = 4u; taken as 8u) -- Triton's tl.exp, or for logsumexp's terms
# and merges ex2.approx.ftz (strategies/stable_exp.py exp_flushed), whose results below 2^-126 are 0:
# the bounds' n (2h + 1) eps term counts those --, fp64 is libdevice's exp (within 1 ulp = 2u; taken as
# 4u); the interpreter's numpy exp is within both.
_EXP_ERROR_UNITS = {torch.float32: 8.0, torch.float64: 4.0}
# softmax's fp32 exponential of a two-part argument (strategies/stable_exp.py exp_two_part, where the
# derivation is): relative error in units of fp32's u, the argument's parts taken as exact.
EXP_TWO_PART_ERROR_UNITS = 4.0
# The `accurate` logsumexp's fp32 exponential of an exact gap (strategies/stable_exp.py
# exp_of_exact_gap, where the derivation is): relative error in units of fp32's u, GPU and interpreter.
# Built on PTX's own 2^-22 (4u) for ex2.approx, without _EXP_ERROR_UNITS' factor 2: that bound was
# checked exhaustively over the gaps this exponential takes (tests/test_gpu_only.py
# test_ex2_approx_within_its_documented_error, H200, 2026-12-02).
ACCURATE_EXP_ERROR_UNITS = 6.0
_SMALLEST_NORMAL = {torch.float32: 2.0 ** -126, torch.float64: 2.0 ** -1022}


def logsumexp_error_bound(mode: str, n: int, s: float, t: float, lse: float, dtype: torch.dtype, *,
                          depth: int, out_dtype: torch.dtype | None = None) -> float:
    """Upper bound on |computed - exact| of precred.logsumexp in `mode` for one finite row.

    n: values in the row; with m its maximum, s = sum exp(x_i - m) (>= 1) and t = sum exp(x_i - m) *
    (m - x_i), both exact; lse = m + log(s), exact; depth: the plan's tree depth h. inf where no
    bound is claimed (the first-order analysis would not hold).

    Derivation (u the accumulator's unit roundoff, c u the relative error of one exp, eps the
    accumulator's smallest normal). m is exact: maxima are exact. Element i's term exp(x_i - m) is made
    by one exp of a gap to the running maximum and then rescaled by at most one exp per later merge on
    its path (h at most), each followed by a rounded product; the gaps along the path add up to
    m - x_i, and a gap |a - b| is itself rounded (u |d|), as is Triton's product of it with log2(e)
    before the fp32 ex2 (2u |d|). So the term carries a relative error of at most
    (h + 1) c u + h u + 3 u (m - x_i), and the sums (h additions on any path) add gamma_h of the terms:
    |s_hat - s| <= u ((h + 1) c + 2 h) s + 3 u t + n (2h + 1) eps (flushed or subnormal exps),
    first order; padded by 1/(1 - 2 rho), rho = |ds| / s, and no bound for rho >= 1/4. Then, in fp64:
    log(s_hat) is within rho / (1 - rho) of log(s), libdevice's log adds 2 u_64 |log s|, the sum
    m + log(s) u_64 |lse|; then the rounding to the output dtype.

    The accurate mode on fp32 input and output claims 2 ulp of lse or the fp64 bound, whichever is
    larger (schedules/accurate_rows.py keeps a row's result only where its own a-posteriori bound proves
    it within 2 ulp; its other rows, and the other schedules and dtypes, run the fp64 mode's numerics:
    within the fp64 bound, which exceeds 2 ulp only for results within ~1e-7 of 0).

    The fp64 mode on bf16 / fp16 inputs first runs the fp32 pass and keeps its result where the bound
    above for that pass (certified_log_sum_margin: every row's) proves it rounds to the exact result's
    rounding; those outputs are within the rounding alone. The rest are recomputed in fp64 -- by the
    recompute launch (precred.plan.ExpRecomputePlan.depth) or, on rows of
    plan.CERTIFIED_EXP_ONE_LAUNCH_RED, by the pass's own finish (plan.exp_finish_depth): pass that depth
    (precred.plan.certified_exp_fp64_depth picks it). The accurate fp32 rows kernel's unkept rows
    likewise take precred.plan.accurate_rows_fp64_depth.
    """
    out_dtype = dtype if out_dtype is None else out_dtype
    if mode == "accurate" and dtype == torch.float32 and out_dtype == torch.float32:
        # schedules/accurate_rows.py keeps a row's fp32 result only where its bound proves it within 2
        # ulp; the rest, and every other schedule, take the fp64 mode's numerics (the bound below).
        fp64_bound = logsumexp_error_bound("fp64", n, s, t, lse, dtype, depth=depth, out_dtype=out_dtype)
        return max(4 * half_ulp(float(lse), torch.float32), fp64_bound)
    d_log = _log_sum_error(mode, n, s, t, dtype, out_dtype, depth)
    u64 = _UNIT_ROUNDOFF[torch.float64]
    lse = float(lse)
    err = d_log + u64 * (abs(lse) + d_log) + _TINY_64
    return _rounded_to_output(err, lse, out_dtype) * (1.0 + 16 * u64)


def certified_log_sum_margin(n: int, depth: int) -> float:
    """A bound on |log(s_hat) - log(s)| of logsumexp's fp32 pass (the `fast` numerics) over any row of n
    values under a plan of depth `depth`: the filter of the fp64 mode on 16-bit inputs
    (schedules/finish.py certify_logsumexp). inf when no bound holds (then nothing is certified).

    The row's bound (logsumexp_error_bound's derivation) grows with t / s and 1 / s only, and both are
    bounded whatever the row: s >= 1 (the maximum's own term), and t / s = sum p_i (m - x_i) with
    p_i = exp(x_i - m) / s, i.e. -ln(p_i) - ln(s) for each gap, so t / s = H(p) - ln(s) <= ln(n), the
    entropy of n weights at most ln(n). So the row's bound at s = 1, t = ln(n) holds for every row."""
    rho = _sum_relative_error("fast", n, 1.0, math.log(n), torch.float32, torch.float32, depth)
    if math.isinf(rho):
        return math.inf
    return rho / (1 - rho) * (1 + 2.0 ** -40)


def _sum_relative_error(mode, n, s, t, dtype, out_dtype, depth) -> float:
    """|s_hat - s| / s of logsumexp_error_bound's derivation, padded to second order; inf when >= 1/4."""
    acc = get_exp_mode(mode).accumulator_dtype(dtype, out_dtype)
    u = _UNIT_ROUNDOFF[acc]
    h = max(int(depth), 1)
    s, t = float(s), float(t)
    d_s = u * (((h + 1) * _EXP_ERROR_UNITS[acc] + 2 * h) * s + 3 * t) + n * (2 * h + 1) * _SMALLEST_NORMAL[acc]
    rho = d_s / s
    if rho >= 0.25:
        return math.inf
    return rho / (1 - 2 * rho)


def _log_sum_error(mode, n, s, t, dtype, out_dtype, depth) -> float:
    """The bound on |log(s_hat) - log(s)| (fp64 log included) of logsumexp_error_bound's derivation."""
    rho = _sum_relative_error(mode, n, s, t, dtype, out_dtype, depth)
    if math.isinf(rho):
        return math.inf
    d_log = rho / (1 - rho)
    return d_log + 2 * _UNIT_ROUNDOFF[torch.float64] * (math.log(float(s)) + d_log)


def softmax_plan_arguments(plan, n: int) -> dict:
    """softmax_error_bound's path arguments for the plan a softmax / log_softmax call over rows of n
    ran (precred.launch.plan_for's softmax: plan_softmax): its depth; single_read for the single-read
    kernel's RowPlan, row_loop for the row loop's LoopPlan, else the two-pass path, whose split-tail
    kernel (`accurate` log_softmax) takes tail_depth = precred.plan.split_tail_depth(n)."""
    return dict(depth=plan.depth, single_read=isinstance(plan, RowPlan), row_loop=isinstance(plan, LoopPlan),
                tail_depth=split_tail_depth(n))


def softmax_error_bound(mode: str, n: int, s: float, t: float, m: float, x: float, dtype: torch.dtype, *,
                        depth: int, log: bool = False, out_dtype: torch.dtype | None = None,
                        single_read: bool = False, row_loop: bool = False, log_s: float | None = None,
                        tail_depth: int | None = None) -> float:
    """Upper bound on |computed - exact| of one element of precred.softmax (or log_softmax, `log`) in
    `mode`: the element x of a finite row with maximum m, n, s, t and plan depth as in
    logsumexp_error_bound. inf where no bound is claimed. log_s: log(s), where known more closely than
    s in fp64 (next to s = 1: log_softmax's split-tail bound is relative to it). tail_depth: on the
    two-pass path (neither single_read nor row_loop), the split-tail kernel's depth
    (precred.plan.split_tail_depth) where the mode runs it; without it that path's bound is the
    reduction's alone.

    Derivation (u the accumulator's unit roundoff, c u one exp's relative error as there). The
    reduction hands over m (exact) and log(s) in fp64, within L = the log-sum error of
    logsumexp_error_bound's derivation. The normalizing pass forms (x - m) - log(s) in fp64 (two
    roundings: u_64 (|x - m| + |shift|)) and converts it to the accumulator (u |shift|): the shift
    x - lse is within E = L + u_64 (|x - m| + |shift|) + u |shift| (padded by (1 + 4u)).
    log_softmax: that is the error, then the rounding to the output. softmax: exp of a value within E
    of the shift, with the exp's own c u and, for fp32, Triton's product with log2(e) (2u |shift|):
    relative error expm1(E + 2u |shift|) + c u (1 + that), then the rounding to the output.

    single_read (the single-read kernel, schedules/single_read.py; depth = log2 of its row tile): the
    row's sum is one exp per term (relative error theta = expm1(3u gap) (1 + c u) + c u, the gap
    m - x rounded and, in fp32, multiplied by log2(e)) added by a depth-h tree: within the two-pass
    bound's |s_hat - s| <= rho s (which counts h + 1 exps per term). With the two-part exponential
    (fp32 output from the fp32 accumulator, precred.modes.softmax_two_part_exp) x - m is exact, theta =
    c' u (c' = EXP_TWO_PART_ERROR_UNITS), and the sum's own rho = c' u + gamma_h (1 + c' u) + 2 n eps / s
    (a flushed term; a flushed or subnormal sum's rounding). log_softmax is formed as in the
    normalizing pass with the fp64 accumulator; with the fp32 one it is formed in fp32, (x - m) -
    fl(log(s_hat)), three roundings: u (gap + log(s) + L + |shift|) in place of the fp64 forming's
    two and the conversion. softmax reuses the term: y = e_hat * r_hat, r_hat =
    1 / s_hat divided in fp64 and rounded to the accumulator, the product rounded: relative error
    (1 + theta)(1 + u_64)(1 + u)^2 / (1 - rho) - 1, plus two smallest normals (a flushed term, a
    flushed product), then the rounding to the output.
    """
    out_dtype = dtype if out_dtype is None else out_dtype
    split = log_softmax_split_tail(mode, dtype, out_dtype, log)
    if split is not None and (single_read or row_loop or tail_depth is not None):
        # s_hat's error: the single-read kernel sums s as its tail; the row loop's s is its online
        # state's (fast's numerics in fp32, the fp64 mode's in fp64); the two-pass path's is the mode's
        # fp64 reduction, whose log(s) < log(1.5) (within 2 u_64 of s < 1.5: 4 u_64 more) sends the row to
        # the fp64 tail kernel (schedules/split_tail.py), at its own depth. The fp64 mode's log_softmax
        # has no split (log(s) below).
        if single_read and split_tail_counts_maxima(split):   # s = c + tail_hat in fp64 (c maxima, counted)
            rho_c, a_c = split_tail_log_sum_error(n, depth + 1, split)
            acc, tail_h, rho_s = split, depth, rho_c + _UNIT_ROUNDOFF[split] * a_c
        elif single_read:   # s summed as its tail is, by a tree of its own
            acc, tail_h, rho_s = split, depth, split_tail_log_sum_error(n, depth, split)[0]
        elif row_loop:
            acc, tail_h = split, depth
            rho_s = _sum_relative_error("fast" if split == torch.float32 else "fp64", n, s, t, dtype, out_dtype, depth)
        else:
            acc, tail_h = torch.float64, tail_depth
            rho_s = _sum_relative_error(mode, n, s, t, dtype, out_dtype, depth) + 4 * _UNIT_ROUNDOFF[torch.float64]
        return _split_tail_log_softmax_bound(n, math.log(float(s)) if log_s is None else float(log_s),
                                             float(m) - float(x), out_dtype, tail_h, acc, rho_s)
    acc = get_exp_mode(mode).accumulator_dtype(dtype, out_dtype)
    u, u64 = _UNIT_ROUNDOFF[acc], _UNIT_ROUNDOFF[torch.float64]
    gap = float(m) - float(x)
    if single_read and not log:
        c = _EXP_ERROR_UNITS[acc] * u
        if softmax_two_part_exp(acc, out_dtype, log):   # one exp a term, then the tree's h additions
            theta = EXP_TWO_PART_ERROR_UNITS * u
            rho = theta + gamma(max(int(depth), 1), u) * (1 + theta) + 2 * n * _SMALLEST_NORMAL[acc] / float(s)
        else:   # no theta where the gap is not resolved at all (expm1 would overflow)
            theta = math.expm1(3 * u * gap) * (1 + c) + c if 3 * u * gap < 700.0 else None
            rho = _sum_relative_error(mode, n, s, t, dtype, out_dtype, depth)
        if math.isinf(rho):
            return math.inf
        y = math.exp(-gap) / float(s)
        if theta is not None:
            err = ((1 + theta) * (1 + u64) * (1 + u) ** 2 / (1 - rho) - 1) * y
        else:   # the gap is not resolved at all: both values lie in [0, exp(-gap (1 - 3u)) (...)]
            err = math.exp(-gap * (1 - 3 * u)) * (1 + c) * (1 + u64) * (1 + u) ** 2 / ((1 - rho) * float(s))
        err += 2 * _SMALLEST_NORMAL[acc]
        return _rounded_to_output(err, y, out_dtype) * (1.0 + 16 * u64)
    d_log = _log_sum_error(mode, n, s, t, dtype, out_dtype, depth)
    if math.isinf(d_log):
        return math.inf
    shift = -gap - math.log(float(s))
    if log and single_read and acc != torch.float64:
        # The single-read kernel forms (x - m) - log(s) in the fp32 accumulator: x - m rounded
        # (u gap), log(s_hat) (within L of log(s)) rounded from fp64 (u (log(s) + L)), their
        # difference rounded (u |shift|).
        formed = u * (gap + math.log(float(s)) + d_log + abs(shift))
    else:
        formed = u64 * (gap + abs(shift)) + u * abs(shift)
    e = (d_log + formed) * (1 + 4 * u) + _TINY_64
    if log:
        return _rounded_to_output(e, shift, out_dtype) * (1.0 + 16 * u64)
    arg = e + 2 * u * abs(shift)
    if shift + arg > 709.0:
        return math.inf
    y = math.exp(shift)
    if arg < 700.0:
        rel = math.expm1(arg)
        rel += _EXP_ERROR_UNITS[acc] * u * (1 + rel)
        err = rel * y
    else:   # the shift is not resolved at all: the result lies in [0, exp(shift + arg) (1 + c u)]
        err = math.exp(shift + arg) * (1 + _EXP_ERROR_UNITS[acc] * u)
    err += _SMALLEST_NORMAL[acc]    # a result below the smallest normal may be flushed to 0
    return _rounded_to_output(err, y, out_dtype) * (1.0 + 16 * u64)


def split_tail_log_sum_error(n: int, depth: int, acc: torch.dtype = torch.float32) -> tuple[float, float]:
    """(rho, a): the split-tail pass's sums of terms exp(x_j - m) (s of all, the tail of those below m),
    each added by a tree of depth h in the accumulator acc, are within rho of their exact value
    relative, plus a absolute (in units of the unscaled sums).

    fp32: a term is 2^(K - g log2(e)) for the gap g = m - x_j >= 0, K = TAIL_SCALE_LOG2
    (strategies/stable_exp.py exp_scaled). Its exponent is formed from the gap rounded to fp32 (u g),
    times log2(e) rounded to fp32 (u), by an fma rounded once on the GPU, twice under the interpreter:
    within u (K + 4 g log2(e)) (1 + 4u) of the exact one, since the formed exponent is at most K + g
    log2(e) (1 + 3u) in magnitude. ex2.approx adds c u (_EXP_ERROR_UNITS). A term whose exponent stays
    above -127 has g log2(e) <= K + 127 + 1, so its relative error is at most theta = expm1(u (5K + 512)
    (1 + 4u) ln 2) (1 + c u) + c u; a term below is flushed to 0 or is subnormal: off by less than
    2^-125 scaled. The tree's subnormal partial sums add at most 2^-150 an addition: a = n 2^-124 2^-K.
    fp64: libdevice's exp (c_64 u_64) of the gap rounded to fp64 (u_64 g): theta = expm1(746 u_64) (1 +
    c_64 u_64) + c_64 u_64 for every term above fp64's subnormals (g < 746); a term or partial sum
    there is off by less than 2^-1074: a = n 2^-1072.
    Either way the tree's h roundings of positive terms add gamma_h: rho = theta + gamma_h (1 + theta)."""
    u = _UNIT_ROUNDOFF[acc]
    c = _EXP_ERROR_UNITS[acc]
    if acc == torch.float32:
        scale = TAIL_SCALE_LOG2
        theta = math.expm1(u * (5 * scale + 512) * (1 + 4 * u) * math.log(2.0)) * (1 + c * u) + c * u
        a = n * 2.0 ** (-124 - scale)
    else:
        theta = math.expm1(746 * u) * (1 + c * u) + c * u
        a = n * 2.0 ** -1072
    return theta + gamma(max(int(depth), 1), u) * (1 + theta), a


# log1p(t) = log(w) + d (2 - w) (strategies/stable_exp.py log_of_split_sum, where the derivation is:
# 4.1) and log(s), with libdevice's 1-ulp log: relative error in u_64.
_LOG1P_ERROR_UNITS = 8.0


def _split_tail_log_softmax_bound(n: int, log_s: float, gap: float, out_dtype: torch.dtype, depth: int,
                                  acc: torch.dtype, rho_s: float) -> float:
    """softmax_error_bound of log_softmax's split-tail pass (schedules/single_read.py and row_loop.py,
    SPLIT_TAIL) in the accumulator acc at the element whose gap to its row's maximum is `gap`, in a
    finite row of n values with log_s = log(sum exp(x_j - m)). rho_s: the relative error of s_hat (the
    single-read kernel's c + tail_hat where it counts the maxima, else its tree of s: rho, as the tail's;
    the row loop's online state: _sum_relative_error of fast's fp32 or of the fp64 mode's; the two-pass
    path's fp64 reduction); no bound where it is inf.

    Derivation. The tail sum tail_hat is within rho relative and a absolute of tail = s - c (c maxima;
    split_tail_log_sum_error, the plan's depth); s_hat within rho_s relative and a absolute (the
    single-read kernel's s_hat = fl64(c + tail_hat), c counted: within rho tail + a + u (s + rho tail
    + a) of s, i.e. rho_s = rho at depth + 1 (gamma_(h+1) >= gamma_h + u (1 + gamma_h)) plus u a, s >= 1;
    its s_hat summed by a tree of its own: rho_s = rho).
    fp64 forms log(s) (within _LOG1P_ERROR_UNITS u_64
    of it, log1p or log) as:
    * log1p(tail_hat) where s_hat < 1.5. Then c = 1 (c >= 2 makes s_hat >= 2 (1 - rho_s) - a > 1.5), so
      log(s) = log1p(tail), and log1p is 1-Lipschitz on [0, inf): within rho tail + a, tail = s - 1.
      Possible only where s <= (1.5 + a) / (1 - rho_s).
    * log(s_hat) elsewhere: within -log(1 - rho_s - a) <= (rho_s + a)(1 + 2 (rho_s + a)) (s >= 1).
      Possible only where s >= (1.5 - a) / (1 + rho_s).
    The larger of the two where both are possible. Then in the accumulator (u): log(s) rounded (u
    log(s) + its half subnormal), x - m rounded (u g; exact when the gap is), their difference rounded
    (u |y| + its half subnormal), |y| = g + log(s) (both parts have y's sign: no cancellation); the row
    loop forms the difference in fp64 first, then rounds it to the accumulator (fewer roundings). Then
    the rounding to the output."""
    u, u64 = _UNIT_ROUNDOFF[acc], _UNIT_ROUNDOFF[torch.float64]
    rho, a = split_tail_log_sum_error(n, depth, acc)
    if math.isinf(rho_s) or rho_s >= 0.25:
        return math.inf
    s = math.exp(log_s)
    d_log = 0.0
    if s <= (1.5 + a) / (1 - rho_s):
        d_log = max(d_log, rho * math.expm1(log_s) + a)   # rho tail + a
    if s >= (1.5 - a) / (1 + rho_s):
        d_log = max(d_log, (rho_s + a) * (1 + 2 * (rho_s + a)))
    d_log += _LOG1P_ERROR_UNITS * u64 * log_s
    y = -gap - log_s
    err = d_log * (1 + u) + u * (log_s + gap + abs(y)) * (1 + 2 * u) + 2 * _HALF_TINY[acc]
    return _rounded_to_output(err, y, out_dtype) * (1.0 + 16 * u64)


def product_error_bound(mode: str, n: int, p: float, dtype: torch.dtype, *,
                        out_dtype: torch.dtype | None = None) -> float:
    """Upper bound on |computed - exact| of `precred.prod` in `mode`, where p is the exact product of
    the n inputs (|p| for the bound's sake) and every partial product of the plan stays in the
    accumulator's normal range (no overflow, no underflow, no subnormal).

    Derivation (strategies/product.py): whatever the tree, a product of n factors is n - 1
    multiplications, each computing fl(a b) = a b (1 + d) with |d| <= u of the accumulator, so the
    accumulated value is p * prod(1 + d_k) with |prod(1 + d_k) - 1| <= gamma_(n-1) (Higham, Lemma 3.1).
    The value is then rounded once to the output dtype (16-bit outputs through fp32), unless the
    accumulator is the output dtype.
    """
    m = get_prod_mode(mode)
    out_dtype = dtype if out_dtype is None else out_dtype
    acc_dtype = m.accumulator_dtype(dtype, out_dtype)
    p = abs(float(p))
    # The partial products are the caller's to keep in range (they are not known here); the product
    # itself is checked: outside the accumulator's normal range no bound is claimed.
    if p != 0 and not (_SMALLEST_NORMAL[acc_dtype] <= p < _MAX_FINITE[acc_dtype] / (1 + 2 * n * _UNIT_ROUNDOFF[acc_dtype])):
        return math.inf
    err = gamma(max(n - 1, 0), _UNIT_ROUNDOFF[acc_dtype]) * p
    if _UNIT_ROUNDOFF[acc_dtype] < _UNIT_ROUNDOFF[out_dtype]:
        err = _rounded_to_output(err, p, out_dtype)
    return err * (1.0 + 16 * _UNIT_ROUNDOFF[torch.float64])


def norm_error_bound(mode: str, dtype: torch.dtype, *, rms: bool, n: int, depth: int | None, var: float,
                     eps: float, radius: float, abs_dev_mean: float, abs_centered_sum: float, centered, xhat,
                     weight=None, y=None, row_mean: float = 0.0, row_m2: float | None = None,
                     out_dtype: torch.dtype | None = None, parameter_dtypes=None, fp32_pass: bool | None = None):
    """Upper bounds on |computed - exact| of the outputs of one row of precred.layer_norm / rms_norm.

    Exact per-row values: n elements; var the normalizing variance (layer_norm: sum (x - mean)^2 / n;
    rms_norm: mean(x^2)); eps; radius >= max |x - K| (K the row's first element); abs_dev_mean >=
    mean |x - K|; abs_centered_sum >= sum |c| with c = x - mean (rms_norm: c = x). Per element (numpy
    arrays): centered = |c|, xhat = |c rstd|, weight = |w| (None: 1), y = |y| (default |xhat w|).
    depth: the single-read plan's tree depth (precred.plan.RowPlan.depth); None for a row on the
    streaming path, which also needs the row's exact mean and m2 (row_mean, row_m2; rms_norm too). inf
    where no bound is claimed (the variance's error not below a quarter of var + eps).

    Derivation, first order in the accumulator's unit roundoff u (fp32 for `fast`, fp64 for `precise`
    and for fp64 inputs), gamma_k as in error_bound:
    * single-read rows (layer_norm): d = x - K rounded (u|d_j|, |d_j| <= |c_j| + radius); the tree sum
      (gamma_D sum|d|), times fp64's 1 / n (2 u_64) and rounded to the accumulator (u): the
      shifted mean is off by e_mu <= (gamma_D + 3u) abs_dev_mean; c = d - mu' rounded:
      |dc_j| <= u|d_j| + e_mu + u|c_j|.
      rms_norm: c = x exactly. The power-of-two scale is exact; the squares and the tree cost
      gamma_(D+1) of sum c^2, and the perturbed c's add 2 E sum|c| + n E^2 (E = max_j |dc_j|), over n;
    * streaming rows: mean and variance from the fp64 Welford reduction (moments_error_bound, depth
      n), rms_norm's mean(x^2) = var + mean^2 (adding 2|mean| e_mu + e_mu^2); c = (x - hi) - lo with
      the mean as hi + lo in the accumulator: |dc_j| <= 2u|c_j| + 2u^2|mean| + e_mu (layer_norm);
    * then var + eps is off by e_v (plus 4 u_64 of fp64 arithmetic) and rstd by a relative
      rho_r <= e_v / (2 v) / (1 - e_v / v) + u (rounded to the accumulator) + 4 u_64, v = var + eps;
      3 u_32 more where the single-read forward may take rstd's steps in fp32 (precred.plan.norm_fp32_rstd:
      16-bit output of narrower input, `precise` on short rows; q / n, + eps, the square root and the
      reciprocal, each rounded; 3.5 for an fp64 accumulator, whose q is rounded to fp32 first);
      xhat = c rstd rounded: |dxhat_j| <= rstd |dc_j| + |xhat_j| (rho_r + u); y = xhat w + b, two
      roundings of the affine dtype's u_a (u_a |xhat w| + u_a |y|; precred.modes.norm_affine_dtype:
      the accumulator's, or fp32 for 16-bit outputs of an fp64 accumulator, where xhat is rounded to
      fp32 first: u_a |xhat| more); the rounding to the output dtype (through fp32 where the affine
      dtype is fp64 and the output 16-bit) and half its smallest subnormal. Padded by (1 + 16u) for the
      second-order terms. parameter_dtypes: the weight's and bias's dtypes (default: the input's).
    * fp32_pass (default: as precred.plan.norm_fp32_pass decides for single-read rows): the precise
      forward of 16-bit input and output may compute xhat = ((x - hi) - lo) * rstd in fp32 from its
      fp64 mean (as an fp32 pair, off by the stored mean's error e_m) and rstd, as the streaming pass
      does: |dc_j| <= 2 u32 |c_j| + 2 u32^2 |mean| + e_m, rstd and xhat rounded to fp32; the larger
      of the two branches' bounds (needs row_mean, the exact mean).
    * precise layer_norm of 16-bit input and output on single-read rows (precred.plan.norm_fp64_mean):
      the mean alone by an fp64 sum (the first bullet's e_mu in u_64, plus K + mu' rounded in fp64:
      the stored mean's e_m), then c = (x - hi) - lo in fp32 with the mean as an fp32 pair, as the
      streaming rows' (2 u32 |c_j| + 2 u32^2 |mean| + e_m, and where a huge mean has the kernel centre
      x / 4 instead, up to four times half fp32's smallest subnormal more), and every later step as
      `fast`'s: the fp32 accumulator's u (needs row_mean).
    """
    import numpy as np

    out_dtype = dtype if out_dtype is None else out_dtype
    parameter_dtypes = (dtype,) if parameter_dtypes is None else tuple(parameter_dtypes)
    acc = _norm_forward_accumulator(mode, dtype, out_dtype, parameter_dtypes, rms, depth)
    u = _UNIT_ROUNDOFF[acc]
    xhat = np.abs(np.asarray(xhat, float))
    w = np.ones_like(xhat) if weight is None else np.abs(np.asarray(weight, float))
    y = xhat * w if y is None else np.abs(np.asarray(y, float))
    v = float(var) + float(eps)
    dc, mean_error, rho_stored = _norm_statistics_error(mode, dtype, out_dtype, parameter_dtypes, rms, n, depth, var,
                                                        eps, radius, abs_dev_mean, abs_centered_sum, centered,
                                                        row_mean, row_m2)
    if not math.isfinite(rho_stored):
        return np.full(xhat.shape, math.inf)
    rstd = 1.0 / math.sqrt(v)
    affine = norm_affine_dtype(acc, out_dtype, parameter_dtypes)
    u_a = _UNIT_ROUNDOFF[affine]
    # each product or sum that lands among the subnormals adds up to half their spacing: xhat's (then
    # times |w|), its conversion, the product by w and the sum with b
    tiny = max(_HALF_TINY[acc], _HALF_TINY[affine])
    d_xhat = rstd * dc + xhat * (rho_stored + 2 * u) + tiny     # rstd rounded to the accumulator, then xhat
    if affine != acc:      # xhat rounded to the affine dtype first
        d_xhat = d_xhat + u_a * (xhat + d_xhat) + tiny
    if fp32_pass is None:
        fp32_pass = depth is not None and norm_fp32_pass(acc, dtype, out_dtype, parameter_dtypes, n)
    if fp32_pass:
        # xhat = ((x - hi) - lo) * rstd in fp32 from the fp64 mean and rstd (the streaming pass's
        # formula, with the stored mean's error); a program takes it only where every row's rstd is
        # below 2^100, so a row may come out of either branch: the larger bound
        u32, tiny32 = _UNIT_ROUNDOFF[torch.float32], _HALF_TINY[torch.float32]
        centered = np.abs(np.asarray(centered, float))
        dc32 = (np.zeros_like(centered) if rms else
                2 * u32 * centered + 2 * u32 * u32 * abs(float(row_mean)) + mean_error + 2 * tiny32)
        d_xhat = np.maximum(d_xhat, rstd * dc32 + xhat * (rho_stored + 2 * u32) + tiny32)
    err = w * d_xhat + u_a * xhat * w + u_a * (y + w * d_xhat) + 2 * tiny
    if any(_UNIT_ROUNDOFF[p] < u_a for p in parameter_dtypes):   # w, b rounded to the affine dtype
        err = err + u_a * (2 * xhat * w + y)                      # |b| <= |y| + |xhat w|
    u_out = _UNIT_ROUNDOFF[out_dtype]
    if u_out > u_a:
        err = err + u_out * (y + err)
        if affine == torch.float64 and out_dtype in (torch.bfloat16, torch.float16):
            err = err + _UNIT_ROUNDOFF[torch.float32] * (y + err)
        err = err + _HALF_TINY[out_dtype]
    # no claim where an output may reach its format's largest finite value (the rounding may overflow)
    return np.where(y + err >= _MAX_FINITE[out_dtype], math.inf, err * (1.0 + 16 * u))


def norm_backward_error_bound(mode: str, dtype: torch.dtype, *, rms: bool, n: int, depth: int, rstd: float,
                              mean: float, mean_error: float, rstd_error: float, centered, xhat, gw, dx,
                              projection: float, total: float, abs_gw_xhat_sum: float, abs_gw_sum: float):
    """Upper bounds on |computed - exact| of dx over one row of precred.layer_norm / rms_norm's backward.

    Exact per-row values: rstd; mean (0 for rms_norm); projection = mean(g w xhat) and total =
    mean(g w) (the row means the formula subtracts); abs_gw_xhat_sum = sum |g w xhat|, abs_gw_sum =
    sum |g w|. The forward pass's statistics are off by mean_error (absolute) and rstd_error
    (relative): norm_error_bound's e_mu and rho_r (without the accumulator rounding). depth: the
    backward plan's depth (precred.plan.NormBackwardPlan.depth). Per element (numpy arrays): centered
    = |x - mean|, xhat, gw = |g w|, dx = |dx| (exact).

    Derivation, first order in the accumulator's u (fp32 `fast`, fp64 `precise` / fp64 input):
    xhat = ((x - hi) - lo) * rstd rounded: |dxhat_j| <= rstd (2u|c_j| + 2u^2|mean| + mean_error) +
    |xhat_j| (rstd_error + 2u); g w rounded (u). The row means: the tree over the products (gamma_(D+1))
    plus the perturbed xhat's, then a product by fp64's 1 / n rounded to the accumulator (2 u_64 + u
    <= 2u): |dP| <= (gamma_(D+1) sum|gw xhat| + sum |gw| |dxhat|) / n + 2u|P|, |dM| <= (gamma_D + u)
    sum|gw| / n + 2u|M|. inner = gw - xhat P - M, three
    roundings: 2u|gw| + 2u|xhat P| + u|inner| + |xhat| |dP| + |P| |dxhat| + |dM|; dx = inner * rstd
    rounded: rstd |d inner| + |dx| (rstd_error + 2u), then the output's rounding. Padded by (1 + 16u).
    """
    import numpy as np

    m = get_norm_mode(mode)
    acc = m.accumulator_dtype(dtype, dtype)
    u = _UNIT_ROUNDOFF[acc]
    xh, gw, dx = (np.abs(np.asarray(a, float)) for a in (xhat, gw, dx))
    D = max(int(depth), 1)
    d_xhat = norm_xhat_error(mode, dtype, rms=rms, rstd=rstd, mean=mean, mean_error=mean_error,
                             rstd_error=rstd_error, centered=centered, xhat=xhat)
    d_p = (gamma(D + 1, u) * abs_gw_xhat_sum + float(np.sum(gw * d_xhat))) / n + 2 * u * abs(projection)
    d_m = 0.0 if rms else (gamma(D, u) + u) * abs_gw_sum / n + 2 * u * abs(total)
    inner = dx / rstd if rstd > 0 else dx
    d_inner = 2 * u * gw + 2 * u * xh * abs(projection) + u * inner + xh * d_p + abs(projection) * d_xhat + d_m
    # products landing among the subnormals: up to half their spacing each, a few per element
    err = rstd * (d_inner + 4 * _HALF_TINY[acc]) + dx * (rstd_error + 2 * u) + 2 * _HALF_TINY[acc]
    u_out = _UNIT_ROUNDOFF[dtype]
    if u_out > u:
        err = err + u_out * (dx + err) + _HALF_TINY[dtype]
    if not math.isfinite(rstd_error) or rstd * (1 + rstd_error) >= _MAX_FINITE[acc] / 4:
        return np.full(dx.shape, math.inf)   # rstd rounded to the accumulator may overflow: no claim
    # no claim where dx may reach its format's largest finite value
    return np.where(dx + err >= _MAX_FINITE[dtype], math.inf, err * (1.0 + 16 * u))


def norm_xhat_error(mode: str, dtype: torch.dtype, *, rms: bool, rstd: float, mean: float, mean_error: float,
                    rstd_error: float, centered, xhat):
    """Upper bounds on |computed - exact| of the backward pass's xhat = ((x - hi) - lo) * rstd (numpy
    array; arguments as norm_backward_error_bound's): rstd (2u|c_j| + 2u^2|mean| + mean_error) +
    |xhat_j| (rstd_error + 2u); rms_norm: |xhat_j| (rstd_error + 2u)."""
    import numpy as np

    acc = get_norm_mode(mode).accumulator_dtype(dtype, dtype)
    u, tiny = _UNIT_ROUNDOFF[acc], _HALF_TINY[acc]
    xh = np.abs(np.asarray(xhat, float))
    if not math.isfinite(rstd_error):   # no claim on the statistics: none here
        return np.full(xh.shape, math.inf)
    if rms:
        return xh * (rstd_error + 2 * u) + tiny
    c = np.abs(np.asarray(centered, float))
    # + tiny per rounding that may land among the subnormals (lo, the difference, the product)
    return rstd * (2 * u * c + 2 * u * u * abs(mean) + mean_error + 2 * tiny) + xh * (rstd_error + 2 * u) + tiny


def norm_parameter_grad_error_bound(mode: str, dtype: torch.dtype, out_dtype: torch.dtype, *, rows: int,
                                    abs_term_sum, term_error_sum, exact):
    """Upper bounds on |computed - exact| of dweight (terms g xhat) or dbias (terms g), per column.

    abs_term_sum = sum over rows of |term|, term_error_sum = sum over rows of the terms' own errors
    (|g| |dxhat| for dweight, 0 for dbias), exact = |the exact gradient| (numpy arrays). Each program
    sums its rows' terms in the accumulator (a chain and a tree: at most `rows` additions for any
    term), the products g xhat rounded (u); the per-program partials are merged by precred's kahan sum
    (error_bound: ~1 rounding), then rounded to out_dtype: gamma_rows sum|term| + term_error_sum +
    u sum|term| + 2 u_64-or-u |exact| + the output rounding, padded by (1 + 16u).
    """
    import numpy as np

    acc = get_norm_mode(mode).accumulator_dtype(dtype, dtype)
    u = _UNIT_ROUNDOFF[acc]
    s, e, exact = (np.abs(np.asarray(a, float)) for a in (abs_term_sum, term_error_sum, exact))
    err = gamma(max(rows, 1), u) * s + e + u * s + 2 * u * (exact + e)
    u_out = _UNIT_ROUNDOFF[out_dtype]
    err = err + u_out * (exact + err) + _HALF_TINY[out_dtype]
    return err * (1.0 + 16 * u)


def _norm_forward_accumulator(mode, dtype, out_dtype, parameter_dtypes, rms, depth) -> torch.dtype:
    """The dtype of the forward's per-element arithmetic: the mode's accumulator, but fp32 where the
    single-read forward takes the mean alone in fp64 (precred.plan.norm_fp64_mean)."""
    acc = get_norm_mode(mode).accumulator_dtype(dtype, out_dtype)
    if depth is not None and norm_fp64_mean(acc, dtype, out_dtype, parameter_dtypes, rms):
        return torch.float32
    return acc


def _norm_statistics_error(mode, dtype, out_dtype, parameter_dtypes, rms, n, depth, var, eps, radius, abs_dev_mean,
                           abs_centered_sum, centered, row_mean, row_m2):
    """(|dc_j| per element, the stored mean's error, the stored rstd's relative error): the statistics
    part of norm_error_bound's derivation (see there). The stored rstd's error is inf where no bound is
    claimed."""
    import numpy as np

    acc = _norm_forward_accumulator(mode, dtype, out_dtype, parameter_dtypes, rms, depth)
    fp64_mean = acc != get_norm_mode(mode).accumulator_dtype(dtype, out_dtype)
    u, u64 = _UNIT_ROUNDOFF[acc], _UNIT_ROUNDOFF[torch.float64]
    centered = np.abs(np.asarray(centered, float))
    var, v = float(var), float(var) + float(eps)
    tiny = _HALF_TINY[acc]
    if depth is not None:
        D = max(int(depth), 1)
        if fp64_mean:   # the mean in fp64, stored as is; c = (x - hi) - lo in fp32 (x / 4 - ... for a huge mean)
            e_mu = (gamma(D, u64) + 3 * u64) * abs_dev_mean + _HALF_TINY[torch.float64]
            mean_error = e_mu + u64 * (abs(float(row_mean)) + e_mu)
            dc = 2 * u * centered + 2 * u * u * abs(float(row_mean)) + mean_error + 8 * tiny
        else:
            # + tiny: mu' rounded to the accumulator may land on its subnormal grid
            e_mu = 0.0 if rms else (gamma(D, u) + 3 * u) * abs_dev_mean + tiny
            dc = np.zeros_like(centered) if rms else u * (centered + radius) + e_mu + u * centered + 2 * tiny
            mean_error = 0.0 if rms else e_mu + u64 * (abs(float(row_mean)) + e_mu)   # K + mu' in fp64
        # t = c 2^-E is exact but where a scale below 1 (max |c| >= 2) meets a subnormal c: half a
        # subnormal spacing in t, 2^E <= max |c| of it in c
        c_max = float(np.max(centered)) + float(np.max(dc)) if centered.size else 0.0
        dc = dc + (tiny * c_max if c_max >= 1.0 else 0.0)
        big_e = float(np.max(dc))
        # (products, not ** 2: Python's float power raises where it overflows; these give inf, no claim)
        perturbation = (2 * big_e * abs_centered_sum + n * big_e * big_e) / n
        e_v = gamma(D + 1, u) * (var + perturbation) + perturbation
    else:
        if row_m2 is None:
            raise ValueError("norm_error_bound: a streaming row (depth=None) needs row_m2 and row_mean")
        moments = dict(depth=n, out_dtype=torch.float64)
        e_mu = moments_error_bound("fp64", n, row_m2, radius, row_mean, dtype, op="mean", **moments)
        e_v = moments_error_bound("fp64", n, row_m2, radius, row_mean, dtype, op="var", correction=0.0, **moments)
        if rms:   # mean(x^2) = var + mean^2 in fp64
            e_v += 2 * abs(row_mean) * e_mu + e_mu * e_mu + 2 * u64 * var
            dc = np.zeros_like(centered)
            mean_error = 0.0
        else:   # the mean as hi + lo in the accumulator: lo may land on its subnormal grid
            dc = 2 * u * centered + 2 * u * u * abs(row_mean) + e_mu + 2 * tiny
            mean_error = e_mu
    e_v += 4 * u64 * v
    if not math.isfinite(e_v) or e_v >= 0.25 * v:
        return dc, mean_error, math.inf
    if math.sqrt(v) * _MAX_FINITE[acc] <= 4.0:
        # rstd = 1 / sqrt(v) rounded to the accumulator (the streaming pass, the backward) would reach
        # its largest finite value: no claim
        return dc, mean_error, math.inf
    rho = e_v / (2 * v) / (1 - e_v / v) + 4 * u64
    if depth is not None and norm_fp32_rstd(acc, dtype, out_dtype, n):
        # rstd by fp32 steps in the programs that allow it (schedules/norm_rows.py rstd_in_fp32; the
        # row loop's rows, which also come with a depth, keep fp64's): q / n and + eps rounded to
        # fp32 (eps normal there), the square root and the reciprocal: 3 u32 to first order; an fp64
        # accumulator's q rounded to fp32 first, half a u32 more
        rho += (3.5 if acc == torch.float64 else 3.0) * _UNIT_ROUNDOFF[torch.float32]
    return dc, mean_error, rho


def norm_statistics_error(mode: str, dtype: torch.dtype, *, rms: bool, n: int, depth: int | None, var: float,
                          eps: float, radius: float, abs_dev_mean: float, abs_centered_sum: float, centered,
                          row_mean: float = 0.0, row_m2: float | None = None,
                          parameter_dtypes=None) -> tuple[float, float]:
    """(absolute error of the fp64 mean, relative error of the fp64 rstd) that the forward pass of one
    row leaves for the backward pass; arguments as norm_error_bound's."""
    parameter_dtypes = (dtype,) if parameter_dtypes is None else tuple(parameter_dtypes)
    _, mean_error, rstd_error = _norm_statistics_error(mode, dtype, dtype, parameter_dtypes, rms, n, depth, var, eps,
                                                       radius, abs_dev_mean, abs_centered_sum, centered, row_mean,
                                                       row_m2)
    return mean_error, rstd_error
