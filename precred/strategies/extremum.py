"""The extremum with its index (max / min / argmax / argmin / amax / amin): state (v, index).

Placement in the schedules' (hi, lo, cnt) state: hi = v (the accumulator dtype: fp32 for 16/32-bit
inputs, fp64 for fp64 -- both hold every input value exactly), cnt = the index along the reduced axis
(int64); lo is unused (passed through). Minima run as maxima of -x (negation is exact, -0.0 included)
and are negated back when written, so one comparison serves both.

The order is total and order-free, so the result does not depend on how lanes, tiles, parts or
atomics meet (bitwise the same on every schedule):
* NaN is above every number (torch: a NaN anywhere wins); two NaNs tie;
* ties (equal values, and -0.0 == 0.0) go to the smaller index: the first occurrence, as torch;
  the value returned is the element at that index, so its sign of zero (and NaN payload) is the input's.
The identity (the state of an empty lane) is (-inf, INDEX_NONE): any element beats it, an element of
value -inf included, because its index is smaller.
"""
import triton
import triton.language as tl

from .extremum_value import value_key

# Index of the identity state: above any real index, so a real element of equal value (-inf) wins.
# First passes keep int32 indices relative to their part's start (half the registers of int64; the
# schedules make them absolute, int64, before writing), whose identity is INDEX_NONE_32.
INDEX_NONE = tl.constexpr(2**62)
INDEX_NONE_32 = tl.constexpr(2**31 - 1)


@triton.jit
def extremum_update(v, i, x, tile_offset, mask, FULL_TILE: tl.constexpr = False):
    """Fold a tile of oriented elements x into the lanes' (v, i), i holding the offset of the tile that
    gave v (`tile_offset`, int32, above every offset the lanes hold: a lane's elements arrive in order;
    schedules.steps.lane_positions adds each lane's own offset after the loop): an element replaces
    the lane's state when it is larger, or a NaN over a number -- never on a tie, since the lane's
    index is the earlier one. Cheaper than the merge, which must order the indices. "x is above v" is
    written as not(x <= v) and v a number: the same as (x > v) or (x is NaN and v is not), in two
    comparisons instead of three. An element of -inf does not replace the identity (-inf, INDEX_NONE_32)
    here, though it comes first in the order: a lane left at the identity with elements holds -inf
    alone, and lane_positions gives it its first element's index (tile offset 0). Asking here whether
    the lane is still empty cost a compare and a predicate operation per element in the loop.
    FULL_TILE: every lane of the tile holds an element of its part (or of a row past the outputs, whose
    state is never written): `mask` is not asked, one predicate operation less per element."""
    if FULL_TILE:
        take = ~(x <= v) & (v == v)
    else:
        take = mask & ~(x <= v) & (v == v)
    return tl.where(take, x, v), tl.where(take, tile_offset, i)


@triton.jit
def absolute_index(i, part_start):
    """A first pass's relative int32 index -> the int64 index along the reduced axis."""
    return tl.where(i == INDEX_NONE_32, INDEX_NONE, i.to(tl.int64) + part_start)


@triton.jit
def extremum_beats(v_a, i_a, v_b, i_b):
    """Whether (v_a, i_a) comes first in the order above."""
    a_nan = v_a != v_a
    b_nan = v_b != v_b
    tie = (v_a == v_b) | (a_nan & b_nan)
    return (v_a > v_b) | (a_nan & ~b_nan) | (tie & (i_a < i_b))


@triton.jit
def extremum_combine(v_a, lo_a, i_a, v_b, lo_b, i_b):
    """Merge two states: the winner of the order (symmetric: the same bits in either order, since only
    identical states tie on both value and index)."""
    a_wins = extremum_beats(v_a, i_a, v_b, i_b)
    return tl.where(a_wins, v_a, v_b), lo_a, tl.where(a_wins, i_a, i_b)


@triton.jit
def extremum_reduce(v, i, AXIS: tl.constexpr):
    """Merge the states (v, i) of a tile along AXIS into the winner of the order above, as three
    order-free reductions instead of a tree of extremum_combine: the largest key (value_key, every NaN
    the canonical NaN's, above +inf; -0.0's key, -1, taken as 0.0's: they tie), the smallest index among
    the lanes of that key, and the bits of v at that index. Integer maxima and minima give the same
    result in any order (Triton chooses it), and the winner of a total order is unique, so these are
    the bits the tree gave. The index is unique among the lanes but for empty lanes (INDEX_NONE /
    INDEX_NONE_32), whose v are all -inf: the bits of v at the winning index are one value."""
    key = value_key(v)
    key = tl.where(key == -1, 0, key)
    top = tl.max(key, AXIS)
    if i.dtype == tl.int32:
        first = tl.min(tl.where(key == tl.expand_dims(top, AXIS), i, INDEX_NONE_32), AXIS)
    else:
        first = tl.min(tl.where(key == tl.expand_dims(top, AXIS), i, INDEX_NONE), AXIS)
    if v.dtype == tl.float64:
        bits = v.to(tl.int64, bitcast=True)
        lowest = -(2**63)
    else:
        bits = v.to(tl.int32, bitcast=True)
        lowest = -(2**31)
    winner = tl.max(tl.where(i == tl.expand_dims(first, AXIS), bits, lowest), AXIS)
    return winner.to(v.dtype, bitcast=True), first


@triton.jit
def oriented(x, STRATEGY: tl.constexpr):
    """The value the order compares: x for maxima (strategies 4 and 8), -x for minima (5 and 9). Written
    as x * -1, which flips the sign bit of zeros too (Triton's unary minus is 0 - x, which maps -0.0 to
    +0.0)."""
    if STRATEGY == 5 or STRATEGY == 9:
        x = x * -1.0
    return x
