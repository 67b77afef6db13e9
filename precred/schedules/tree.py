"""The fixed pairwise tree that merges the lanes of a tile-shaped accumulator.

Every schedule keeps one accumulator state per lane while it streams the reduced axis, then merges
the lanes once, here. Each level merges adjacent lanes (2i, 2i+1), so the tree is balanced and its
depth is log2(width) combines -- what precred.bounds assumes -- and its first levels stay inside a
thread (lanes are held in contiguous runs, as loaded). Each level is a `tl.reduce` over an axis of
exactly two elements: with two operands the combine's result does not
depend on Triton's internal reduction order (both combines are symmetric: a + b == b + a, and TwoSum's
error term is exact in either order), so the order is ours, identical on every GPU and in the
interpreter. (A full-width tl.reduce would leave the order to Triton, which has changed it between
releases; a reshape + tl.split tree compiled 100x slower for wide fp64 tiles.)
"""
import triton
import triton.language as tl

from ..strategies.compensated import compensated_combine
from ..strategies.plain import plain_combine


@triton.jit
def tree_reduce_last_axis(hi, lo, ROWS: tl.constexpr, WIDTH: tl.constexpr, STRATEGY: tl.constexpr):
    """Merge a [ROWS, WIDTH] state (WIDTH a power of two) into [ROWS] by a balanced binary tree."""
    # static_range unrolls at compile time, so each level may rebind hi/lo with a halved shape.
    for level in tl.static_range(0, 24):
        if (WIDTH >> level) > 1:
            hi_pairs = tl.reshape(hi, (ROWS, (WIDTH >> level) // 2, 2))
            lo_pairs = tl.reshape(lo, (ROWS, (WIDTH >> level) // 2, 2))
            if STRATEGY == 1:
                hi, lo = tl.reduce((hi_pairs, lo_pairs), 2, compensated_combine)
            else:
                hi, lo = tl.reduce((hi_pairs, lo_pairs), 2, plain_combine)
    return tl.reshape(hi, (ROWS,)), tl.reshape(lo, (ROWS,))


@triton.jit
def tree_reduce_first_axis(hi, lo, WIDTH: tl.constexpr, COLS: tl.constexpr, STRATEGY: tl.constexpr):
    """Merge a [WIDTH, COLS] state (WIDTH a power of two) into [COLS]: the same tree as
    tree_reduce_last_axis, along axis 0, without transposing the tile first."""
    for level in tl.static_range(0, 24):
        if (WIDTH >> level) > 1:
            hi_pairs = tl.reshape(hi, ((WIDTH >> level) // 2, 2, COLS))
            lo_pairs = tl.reshape(lo, ((WIDTH >> level) // 2, 2, COLS))
            if STRATEGY == 1:
                hi, lo = tl.reduce((hi_pairs, lo_pairs), 1, compensated_combine)
            else:
                hi, lo = tl.reduce((hi_pairs, lo_pairs), 1, plain_combine)
    return tl.reshape(hi, (COLS,)), tl.reshape(lo, (COLS,))
