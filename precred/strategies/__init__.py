"""Numeric strategies: an accumulator state (hi, lo) and init / update / combine / finalize.

Schedules call the dispatchers below with the strategy id as a compile-time constant, so each
compiled kernel contains exactly one strategy and the schedule code never forks per strategy.
(Triton cannot take a jit function held in a kernel argument as `tl.reduce`'s combine_fn, DESIGN.md;
a constexpr switch is the pattern that works everywhere, interpreter included.)

The sum strategies keep the same two-component state so workspaces of partial states have one layout:
`hi` (the running sum) and `lo` (a compensation term, identically 0 for plain accumulation). Welford's
(mean, m2, count) state puts mean and m2 where hi and lo go and the count in a third array
(strategies/welford.py); the stable exponential sum's (s, m) puts s in hi and the running maximum m in
the third array (strategies/stable_exp.py); the extremum's (v, index) puts v in hi and the index in the
third array (strategies/extremum.py), and amax's key alone sits in hi (strategies/extremum_value.py);
the product's p is hi (strategies/product.py); the exact
filter's (s, t, smallest |x|) fills all three (strategies/exact.py). The schedules
branch on the strategy id at compile time where their updates differ.
"""
import triton
import triton.language as tl

from .plain import plain_update, plain_combine, plain_finalize
from .compensated import compensated_update, compensated_combine, compensated_finalize, two_sum
from .welford import welford_combine, welford_equal_combine, welford_lane_counts, welford_update
from .stable_exp import stable_exp_combine, stable_exp_update
from .extremum import INDEX_NONE, INDEX_NONE_32, absolute_index, extremum_combine, extremum_reduce, extremum_update, oriented
from .extremum_value import (fold_value_lanes, key_value, lanes_as_keys, lowest_key, value_key, value_lanes,
                             value_max_combine)
from .product import product_combine
from .exact import NO_MAGNITUDE, bound_up_to_fp32, exact_combine, exact_finish, exact_update, magnitude_key

# Strategy ids (compile-time constants in kernels).
PLAIN = 0
COMPENSATED = 1
WELFORD = 2
STABLE_EXP = 3
MAXIMUM = 4    # extremum.py: max / argmax / amax
MINIMUM = 5    # extremum.py on -x: min / argmin / amin
PRODUCT = 6
EXACT = 7      # exact.py: the exact mode's filter (the superaccumulator recomputes what it cannot certify)
MAXIMUM_VALUE = 8    # extremum_value.py: amax, max(x) -- the value alone, IEEE 754-2019 maximum
MINIMUM_VALUE = 9    # extremum_value.py on -x: amin, min(x)
# stable_exp.py in fp32 as a filter (logsumexp's fp64 mode on 16-bit inputs): the state and the
# schedules' steps are STABLE_EXP's; the last pass writes the rounded value and whether the fp32 pass's
# error bound certifies that rounding (schedules/finish.py), and the uncertified outputs are recomputed
# in fp64 (schedules/recompute.py).
CERTIFIED_EXP = 10
# Not a mode's strategy: the trees' combine for Welford states that hold equal counts (welford.py
# welford_equal_combine; cnt carries the fp64 counts), merged without a division.
WELFORD_EQUAL_COUNTS = 11
EXTREMA = (MAXIMUM, MINIMUM)
VALUE_EXTREMA = (MAXIMUM_VALUE, MINIMUM_VALUE)


@triton.jit
def state_update(hi, lo, x, STRATEGY: tl.constexpr):
    if STRATEGY == 1:
        hi, lo = compensated_update(hi, lo, x)
    elif STRATEGY == 6:
        hi = hi * x
    else:
        hi, lo = plain_update(hi, lo, x)
    return hi, lo


@triton.jit
def state_combine(hi_a, lo_a, hi_b, lo_b, STRATEGY: tl.constexpr):
    if STRATEGY == 1:
        hi, lo = compensated_combine(hi_a, lo_a, hi_b, lo_b)
    elif STRATEGY == 6:
        hi, lo = product_combine(hi_a, lo_a, hi_b, lo_b)
    else:
        hi, lo = plain_combine(hi_a, lo_a, hi_b, lo_b)
    return hi, lo


@triton.jit
def state_finalize(hi, lo, STRATEGY: tl.constexpr):
    """The state's value in fp64 (the caller rounds once more, to the output dtype)."""
    if STRATEGY == 1:
        value = compensated_finalize(hi, lo)
    else:
        value = plain_finalize(hi, lo)
    return value


__all__ = [
    "PLAIN", "COMPENSATED", "WELFORD", "state_update", "state_combine", "state_finalize", "two_sum",
    "welford_update", "welford_combine", "welford_lane_counts", "STABLE_EXP", "stable_exp_update",
    "stable_exp_combine", "MAXIMUM", "MINIMUM", "PRODUCT", "INDEX_NONE", "INDEX_NONE_32", "absolute_index", "extremum_combine", "extremum_reduce",
    "extremum_update", "oriented",
    "product_combine", "EXTREMA", "EXACT", "exact_update", "exact_combine", "exact_finish", "magnitude_key",
    "NO_MAGNITUDE", "MAXIMUM_VALUE", "MINIMUM_VALUE", "VALUE_EXTREMA", "key_value", "lowest_key", "value_key",
    "value_lanes", "fold_value_lanes", "lanes_as_keys",
    "value_max_combine", "CERTIFIED_EXP", "WELFORD_EQUAL_COUNTS", "welford_equal_combine",
]
