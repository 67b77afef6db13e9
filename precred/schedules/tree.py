"""The fixed pairwise tree that merges the lanes of a tile-shaped accumulator.

Every schedule keeps one accumulator state per lane while it streams the reduced axis, then merges
the lanes once, here. The tree is written out (reshape + split, adjacent pairs first) instead of
calling `tl.reduce`, because tl.reduce's internal order is Triton's to change between releases
(DESIGN.md): this order is ours, so its depth -- log2(width) combines -- is what precred.bounds
assumes, and it is the same on the GPU and under the interpreter.
"""
import triton
import triton.language as tl

from ..strategies import state_combine


@triton.jit
def tree_reduce_last_axis(hi, lo, ROWS: tl.constexpr, WIDTH: tl.constexpr, STRATEGY: tl.constexpr):
    """Merge a [ROWS, WIDTH] state (WIDTH a power of two) into [ROWS] by a balanced binary tree."""
    # static_range unrolls at compile time, so each level may rebind hi/lo with a halved shape.
    for level in tl.static_range(0, 24):
        if (WIDTH >> level) > 1:
            hi_a, hi_b = tl.split(tl.reshape(hi, (ROWS, (WIDTH >> level) // 2, 2)))
            lo_a, lo_b = tl.split(tl.reshape(lo, (ROWS, (WIDTH >> level) // 2, 2)))
            hi, lo = state_combine(hi_a, lo_a, hi_b, lo_b, STRATEGY)
    return tl.reshape(hi, (ROWS,)), tl.reshape(lo, (ROWS,))
