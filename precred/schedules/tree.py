"""The fixed pairwise tree that merges the lanes of a tile-shaped accumulator.

Every schedule keeps one accumulator state per lane while it streams the reduced axis, then merges
the lanes once, here. Each level merges adjacent lanes (2i, 2i+1), so the tree is balanced and its
depth is log2(width) combines -- what precred.bounds assumes -- and its first levels stay inside a
thread (lanes are held in contiguous runs, as loaded). Each level is a `tl.reduce` over an axis of
exactly two elements: with two operands the combine's result does not
depend on Triton's internal reduction order (every combine is symmetric: a + b == b + a, TwoSum's
error term is exact in either order, the exact filter's sums and minima commute, Welford's merge
orders its operands first, the extremum's order is total, integer maxima are exact), so the order is
ours, identical on every GPU and in the interpreter. (A full-width tl.reduce would leave the order to
Triton, which has changed it between releases; a reshape + tl.split tree compiled 100x slower for wide
fp64 tiles.) The interpreter runs each level as the combine called once on the pairs' two halves (merge_pairs:
tl.split, combine(first, second) as its tl.reduce would), numpy operations on whole tiles, because its
tl.reduce calls the combine pair by pair in Python (a logsumexp test of 64 rows of 8192: 90 s -> 7 s when
the plain sums' levels first stopped doing so); the GPU keeps tl.reduce, whose code that choice would
change (ptxas scheduled the bf16 sum's loop differently).
The plain sums' passes of plan.PLAIN_HALVES_MIN_LANES lanes or more take tree_sum_halves instead: each
16-byte vector's adjacent pairs, then the vectors' sums in halves -- every level a sum of two, so the
order is ours whatever the layout, and the levels inside a thread come first without the order following
the warps (tree_sum_blocked_rows' does).
The extrema take no tree along the last axis (the lanes across threads): their order is total, so
order-free reductions give the tree's bits in fewer instructions (strategies/extremum.extremum_reduce;
tl.max of amax's keys). H100, bench/sweep_outer.py --dim -1, GB/s, tree -> order-free: argmax fp32
16x262144 1085 -> 1113, 4x4194304 1658 -> 1732, 128x65536 1311 -> 1364, 8192x8192 2546 -> 2568, bf16
16x262144 670 -> 712, 8192x8192 2187 -> 2261 (1024x65536 bf16 2270 -> 2233, 8x1048576 1044 -> 1010);
amax fp32 8x1048576 1601-1613 -> 1631-1638, 4x4194304 1785-1794 -> 1827-1828, 32x131072 1168-1186 ->
1205-1209, the unsplit shapes within 1%. Along the first axis (a few rows of the outer schedule's tile,
inside each thread) the extremum keeps the tree: three reductions there took more instructions and
registers (ptxas, sm_90: argmax fp64 8192^2 over dim 0, 48 -> 68 registers).
The exact filter's lanes merge in Triton's own order on the GPU (one tl.reduce of exact_combine): its
bound holds for any order of its additions and what it certifies is the correctly rounded sum, unique
(strategies/exact.py), so the order changes no output bit (sm_90 SASS, fp32 16x262144: 1136 -> 896
instructions, 156 -> 61 shuffles). The interpreter keeps the tree: its tl.reduce calls the combine
element by element.
"""
import triton
import triton.language as tl

from ..strategies import state_combine
from ..strategies.compensated import compensated_combine
from ..strategies.exact import exact_combine
from ..strategies.extremum import extremum_combine, extremum_reduce
from ..strategies.extremum_value import value_max_combine
from ..strategies.plain import plain_combine
from ..strategies.product import product_combine
from ..strategies.stable_exp import stable_exp_combine
from ..strategies.welford import welford_combine, welford_equal_combine
from ..checks import KERNELS_INTERPRETED

_INTERPRETED = tl.constexpr(KERNELS_INTERPRETED)


@triton.jit
def _pair_halves(pairs, AXIS: tl.constexpr):
    """Elements 0 and 1 of AXIS, an axis of two of a 3-D tile: tl.split's halves, the axis moved last."""
    if AXIS == 2:
        first, second = tl.split(pairs)
    else:
        first, second = tl.split(tl.permute(pairs, (0, 2, 1)))
    return first, second


@triton.jit
def merge_pairs(hi_pairs, lo_pairs, cnt, AXIS: tl.constexpr, STRATEGY: tl.constexpr):
    """One level of the trees: merge each pair of states along AXIS (1 or 2), an axis of exactly two
    elements of the 3-D hi_pairs / lo_pairs, by STRATEGY's combine. cnt (its elements in hi_pairs' order)
    is merged where the state has a third part (counts, maxima, indices, smallest magnitudes), else
    returned untouched. The GPU runs one tl.reduce over the axis. The interpreter calls the combine once
    on the two halves: combine(first, second), what its tl.reduce computes, but as numpy operations on
    whole tiles -- its tl.reduce calls the combine pair by pair in Python (ReduceOps.generic_reduce: a
    CI run spent most of its time there), so the bits are the same in fewer steps."""
    if (STRATEGY == 2 or STRATEGY == 3 or STRATEGY == 4 or STRATEGY == 5 or STRATEGY == 7 or STRATEGY == 10
            or STRATEGY == 11):
        cnt_pairs = tl.reshape(cnt, hi_pairs.shape)
        if _INTERPRETED:
            hi_a, hi_b = _pair_halves(hi_pairs, AXIS)
            lo_a, lo_b = _pair_halves(lo_pairs, AXIS)
            cnt_a, cnt_b = _pair_halves(cnt_pairs, AXIS)
            if STRATEGY == 2:
                hi, lo, cnt = welford_combine(hi_a, lo_a, cnt_a, hi_b, lo_b, cnt_b)
            elif STRATEGY == 11:
                hi, lo, cnt = welford_equal_combine(hi_a, lo_a, cnt_a, hi_b, lo_b, cnt_b)
            elif STRATEGY == 3 or STRATEGY == 10:
                hi, lo, cnt = stable_exp_combine(hi_a, lo_a, cnt_a, hi_b, lo_b, cnt_b)
            elif STRATEGY == 4 or STRATEGY == 5:
                hi, lo, cnt = extremum_combine(hi_a, lo_a, cnt_a, hi_b, lo_b, cnt_b)
            else:
                hi, lo, cnt = exact_combine(hi_a, lo_a, cnt_a, hi_b, lo_b, cnt_b)
        elif STRATEGY == 2:
            hi, lo, cnt = tl.reduce((hi_pairs, lo_pairs, cnt_pairs), AXIS, welford_combine)
        elif STRATEGY == 11:
            hi, lo, cnt = tl.reduce((hi_pairs, lo_pairs, cnt_pairs), AXIS, welford_equal_combine)
        elif STRATEGY == 3 or STRATEGY == 10:
            hi, lo, cnt = tl.reduce((hi_pairs, lo_pairs, cnt_pairs), AXIS, stable_exp_combine)
        elif STRATEGY == 4 or STRATEGY == 5:
            hi, lo, cnt = tl.reduce((hi_pairs, lo_pairs, cnt_pairs), AXIS, extremum_combine)
        else:
            hi, lo, cnt = tl.reduce((hi_pairs, lo_pairs, cnt_pairs), AXIS, exact_combine)
    elif _INTERPRETED:
        hi_a, hi_b = _pair_halves(hi_pairs, AXIS)
        lo_a, lo_b = _pair_halves(lo_pairs, AXIS)
        if STRATEGY == 8 or STRATEGY == 9:
            hi, lo = value_max_combine(hi_a, lo_a, hi_b, lo_b)
        else:   # compensated, product or plain
            hi, lo = state_combine(hi_a, lo_a, hi_b, lo_b, STRATEGY)
    elif STRATEGY == 8 or STRATEGY == 9:
        hi, lo = tl.reduce((hi_pairs, lo_pairs), AXIS, value_max_combine)
    elif STRATEGY == 6:
        hi, lo = tl.reduce((hi_pairs, lo_pairs), AXIS, product_combine)
    elif STRATEGY == 1:
        hi, lo = tl.reduce((hi_pairs, lo_pairs), AXIS, compensated_combine)
    else:
        hi, lo = tl.reduce((hi_pairs, lo_pairs), AXIS, plain_combine)
    return hi, lo, cnt


@triton.jit
def tree_sum_halves(v, ROWS: tl.constexpr, WIDTH: tl.constexpr, VEC: tl.constexpr):
    """Sum a [ROWS, WIDTH] tile over axis 1 (powers of two) by a balanced binary tree whose order is a
    function of (WIDTH, VEC) alone -- not of the threads holding it: adjacent elements within each
    VEC-element vector first, then the vectors' sums q = 0 .. Q-1 (Q = WIDTH / VEC) in halves: q with
    q + Q/2, then the same on the Q/2 sums, down to one. Each level is a sum over an axis of two
    elements: one addition, in no order of Triton's, whatever the layout (an unaligned input gets
    another one). In the blocked layout the launchers expect (16-byte vectors, vector q at thread
    q % threads) the halves first pair vectors of one thread (registers), then the same lane of two
    warps (a shared-memory round each), then lanes l and l + 16, l + 8, ... (shuffles). Depth
    log2(WIDTH), as the bounds assume. The blocked tree (tree_sum_blocked_rows) pairs a thread's
    adjacent repeats, whose positions follow the threads: a plan's warps would change its bits
    (tests/test_gpu_only.py forbids that for the sums' lanes); these do not. (Merging the warps by one
    tl.sum over a warps axis, as tree_sum_across_threads does, gave other bits for a row whose start
    was not 16-byte aligned: Triton's order, in another layout.)"""
    VECTOR: tl.constexpr = VEC if VEC < WIDTH else WIDTH
    Q: tl.constexpr = WIDTH // VECTOR
    for level in tl.static_range(0, 8):          # within a vector: adjacent pairs
        if (VECTOR >> level) > 1:
            v = tl.sum(tl.reshape(v, (ROWS, WIDTH >> (level + 1), 2)), 2)
    for level in tl.static_range(0, 24):         # the vectors' sums in halves
        if (Q >> level) > 1:
            v = tl.sum(tl.reshape(v, (ROWS, 2, Q >> (level + 1))), 1)
    return tl.reshape(v, (ROWS,))


@triton.jit
def tree_reduce_last_axis(hi, lo, cnt, ROWS: tl.constexpr, WIDTH: tl.constexpr, STRATEGY: tl.constexpr,
                          TO_WIDTH: tl.constexpr = 1, HALVES_VEC: tl.constexpr = 0):
    """Merge a [ROWS, WIDTH] state (WIDTH a power of two) into [ROWS] by a balanced binary tree -- but
    for the extrema, and the exact filter on the GPU, whose merges are order-free (module docstring).
    `cnt` is merged by Welford's strategy (counts; WELFORD_EQUAL_COUNTS: states of equal counts), the
    stable exponential sum's (maxima) and the extremum's (indices) and the exact filter's (smallest
    magnitudes); the other strategies return it untouched (unused). TO_WIDTH > 1: only the tree's first
    levels, down to [ROWS, TO_WIDTH] (the merged states of WIDTH // TO_WIDTH adjacent lanes; a thread's
    vector when that is its size). HALVES_VEC > 0 (the plain strategy, TO_WIDTH 1): tree_sum_halves'
    order, vectors of HALVES_VEC (lo stays 0)."""
    if STRATEGY == 0 and HALVES_VEC > 0 and TO_WIDTH == 1:   # the plain sums: vectors, then halves
        hi = tree_sum_halves(hi, ROWS, WIDTH, HALVES_VEC)
        lo = tl.zeros([ROWS], lo.dtype)
    elif STRATEGY == 4 or STRATEGY == 5:   # the extremum: order-free (extremum_reduce), no tree
        hi, cnt = extremum_reduce(hi, cnt, 1)
        lo = tl.zeros([ROWS, 1], lo.dtype)
    elif STRATEGY == 8 or STRATEGY == 9:   # the extremum's value alone: its largest key, order-free
        hi = tl.max(hi, 1)
        lo = tl.zeros([ROWS, 1], lo.dtype)
    elif STRATEGY == 7 and TO_WIDTH == 1 and not _INTERPRETED:   # the exact filter: in Triton's order
        hi, lo, cnt = tl.reduce((hi, lo, cnt), 1, exact_combine)
    else:
        # static_range unrolls at compile time, so each level may rebind hi/lo with a halved shape.
        for level in tl.static_range(0, 24):
            if (WIDTH >> level) > TO_WIDTH:
                hi, lo, cnt = merge_pairs(tl.reshape(hi, (ROWS, (WIDTH >> level) // 2, 2)),
                                          tl.reshape(lo, (ROWS, (WIDTH >> level) // 2, 2)), cnt, 2, STRATEGY)
    if TO_WIDTH == 1:
        if (STRATEGY == 2 or STRATEGY == 3 or STRATEGY == 4 or STRATEGY == 5 or STRATEGY == 7 or STRATEGY == 10
                or STRATEGY == 11):
            cnt = tl.reshape(cnt, (ROWS,))
        hi = tl.reshape(hi, (ROWS,))
        lo = tl.reshape(lo, (ROWS,))
    return hi, lo, cnt


@triton.jit
def tree_reduce_first_axis(hi, lo, cnt, WIDTH: tl.constexpr, COLS: tl.constexpr, STRATEGY: tl.constexpr):
    """Merge a [WIDTH, COLS] state (WIDTH a power of two) into [COLS]: the same tree as
    tree_reduce_last_axis, along axis 0, without transposing the tile first."""
    for level in tl.static_range(0, 24):
        if (WIDTH >> level) > 1:
            hi, lo, cnt = merge_pairs(tl.reshape(hi, ((WIDTH >> level) // 2, 2, COLS)),
                                      tl.reshape(lo, ((WIDTH >> level) // 2, 2, COLS)), cnt, 1, STRATEGY)
    if (STRATEGY == 2 or STRATEGY == 3 or STRATEGY == 4 or STRATEGY == 5 or STRATEGY == 7 or STRATEGY == 10
            or STRATEGY == 11):
        cnt = tl.reshape(cnt, (COLS,))
    return tl.reshape(hi, (COLS,)), tl.reshape(lo, (COLS,)), cnt


# The binary counter of the outer schedule's pairwise passes: a streaming pairwise sum of the tile
# sums v_0, v_1, ... . Level k holds the sum of a block of 2^k consecutive tiles while bit k of the
# number of tiles pushed so far is set. Pushing tile g carries v_g up through the levels whose bit
# of g is set (merging each level's earlier block with the later one) and parks the carry at the
# first clear bit -- exactly the adding of 1 to g in binary. The control depends only on the scalar
# g, the same for the whole program. Eight levels: up to 2^8 - 1 tiles (precred.plan.COUNTER_TILES).

@triton.jit
def _counter_level(level, carry, climbing, g, K: tl.constexpr):
    """Level K while pushing tile g: merge into the carry if bit K of g is set, else park it here."""
    bit_set = ((g >> K) & 1) == 1
    bit_clear = ((g >> K) & 1) == 0
    parked = tl.where(climbing & bit_clear, carry, level)
    carry = tl.where(climbing & bit_set, level + carry, carry)
    return parked, carry, climbing & bit_set


@triton.jit
def counter_push(v, g, s0, s1, s2, s3, s4, s5, s6, s7):
    """Push the g-th tile sum v (g counted from 0); returns the eight levels."""
    climbing = g >= 0
    s0, v, climbing = _counter_level(s0, v, climbing, g, 0)
    s1, v, climbing = _counter_level(s1, v, climbing, g, 1)
    s2, v, climbing = _counter_level(s2, v, climbing, g, 2)
    s3, v, climbing = _counter_level(s3, v, climbing, g, 3)
    s4, v, climbing = _counter_level(s4, v, climbing, g, 4)
    s5, v, climbing = _counter_level(s5, v, climbing, g, 5)
    s6, v, climbing = _counter_level(s6, v, climbing, g, 6)
    s7, v, climbing = _counter_level(s7, v, climbing, g, 7)
    return s0, s1, s2, s3, s4, s5, s6, s7


@triton.jit
def _counter_sweep(total, level, n, K: tl.constexpr):
    return tl.where(((n >> K) & 1) == 1, level + total, total)


@triton.jit
def counter_total(n, s0, s1, s2, s3, s4, s5, s6, s7):
    """The sum of the n tiles pushed: the parked levels (the set bits of n), lowest first, starting
    from the exact identity 0. An element parked at level k went through k merges, then at most one
    per set bit of n from k up: depth <= ceil(log2(n)) over the tile sums."""
    total = tl.zeros(s0.shape, s0.dtype)
    total = _counter_sweep(total, s0, n, 0)
    total = _counter_sweep(total, s1, n, 1)
    total = _counter_sweep(total, s2, n, 2)
    total = _counter_sweep(total, s3, n, 3)
    total = _counter_sweep(total, s4, n, 4)
    total = _counter_sweep(total, s5, n, 5)
    total = _counter_sweep(total, s6, n, 6)
    total = _counter_sweep(total, s7, n, 7)
    return total


@triton.jit
def tree_sum_within_threads(v, ROWS: tl.constexpr, WIDTH: tl.constexpr, VEC: tl.constexpr, THREADS: tl.constexpr):
    """The levels of tree_sum_blocked_rows that stay inside a thread: a [ROWS, WIDTH] tile -> [ROWS,
    ACROSS], each thread's sum of what it holds of each row (adjacent e, then adjacent r)."""
    VECTOR: tl.constexpr = VEC if VEC < WIDTH else WIDTH
    ACROSS: tl.constexpr = THREADS if THREADS < WIDTH // VECTOR else WIDTH // VECTOR
    REPEATS: tl.constexpr = WIDTH // (VECTOR * ACROSS)
    for level in tl.static_range(0, 8):          # within a thread's vector: adjacent pairs
        if (VECTOR >> level) > 1:
            v = tl.sum(tl.reshape(v, (ROWS, WIDTH >> (level + 1), 2)), 2)
    for level in tl.static_range(0, 16):         # over the repeats: r = 2i, 2i + 1, the same thread
        if (REPEATS >> level) > 1:
            v = tl.reshape(tl.sum(tl.reshape(v, (ROWS, REPEATS >> (level + 1), 2, ACROSS)), 2),
                           (ROWS, (REPEATS >> (level + 1)) * ACROSS))
    return v


@triton.jit
def tree_sum_across_threads(v, ROWS: tl.constexpr):
    """The levels of tree_sum_blocked_rows across threads: [ROWS, ACROSS] (tree_sum_within_threads'
    shape; thread t of a row holds column t, t = 32 * w + lane) -> [ROWS]. Within a warp, adjacent
    lanes (one shuffle a level); across the WARPS = ACROSS / 32 warps of a row, the warp sums
    p_0 .. p_{WARPS-1} fold in halves: p_w + p_{w + WARPS/2} first, then the same on the WARPS/2 sums,
    down to one -- a balanced tree of depth log2(WARPS).
    The GPU runs the warp levels as one tl.sum over the WARPS axis: Triton's reduction stores each warp's
    value to shared memory once, then lanes 0 .. WARPS-1 of a warp load them and merge them by the
    butterfly whose first shuffle is xor WARPS/2 -- exactly the halves above (sm_90 PTX). One
    shared-memory round and two barriers instead of a round each level (sm_90 SASS,
    bench/kernel_resources.py: layer_norm's forward over fp32 rows of 8192 on 8 warps, 29 -> 11
    barriers, 1136 -> 1016 instructions; H200, its 8192^2 call 3606 -> 3846 GB/s on 16 warps, which had
    measured +1.5% with a round each level: plan.NORM_FORWARD_ROW_OVERRIDES). That order is Triton's,
    so it holds only where the layout is the one the launcher promises (one warp's 32 lanes span 32
    adjacent columns; THREADS = 32 * num_warps): test_tree checks the bits on the device against the
    halves written out, which is what the interpreter runs (each level a tl.sum of pairs, as
    everywhere here)."""
    ACROSS: tl.constexpr = v.shape[1]
    LANES: tl.constexpr = ACROSS if ACROSS < 32 else 32
    WARPS: tl.constexpr = ACROSS // LANES
    for level in tl.static_range(0, 5):          # within a warp: adjacent lanes
        if (LANES >> level) > 1:
            v = tl.sum(tl.reshape(v, (ROWS, ACROSS >> (level + 1), 2)), 2)
    if WARPS > 1:
        if _INTERPRETED:                         # the halves, written out (docstring)
            for level in tl.static_range(0, 10):
                if (WARPS >> level) > 1:
                    v = tl.sum(tl.reshape(v, (ROWS, 2, WARPS >> (level + 1))), 1)
        else:
            # Through [ROWS, WARPS, 1]: reducing the [ROWS, WARPS] slice itself, Triton's layout pass
            # moved the later elementwise passes of an fp64 tile into the reduction's layout (sm_90,
            # layer_norm precise fp32 8192^2: 65408 bytes of spills); this way it keeps them.
            v = tl.sum(tl.reshape(v, (ROWS, WARPS, 1)), 1)
    return tl.reshape(v, (ROWS,))


@triton.jit
def tree_sum_blocked_rows(v, ROWS: tl.constexpr, WIDTH: tl.constexpr, VEC: tl.constexpr, THREADS: tl.constexpr):
    """Sum a [ROWS, WIDTH] tile over axis 1 (WIDTH, VEC, THREADS powers of two) by a balanced binary tree
    whose levels follow the registers of Triton's blocked layout: element j = (r * THREADS + t) * VEC + e
    (e < VEC: a thread's vector; t < THREADS: the threads across the row; r: the layout's repeats),
    and the tree merges adjacent e first, then adjacent r (r, r + 1 with the same t), then adjacent t
    within a warp, then the warps' sums in halves (tree_sum_across_threads: one shared-memory round).
    Each thread thus sums all it holds of a row before any value crosses a lane, so the shuffle and
    shared-memory levels carry one value per thread and row instead of one per repeat (H100, layer_norm
    8192-element rows: 1272 -> 912 instructions per thread, fp32; fp64 1832 -> 1304). Depth
    log2(WIDTH), as the bounds assume; the order is a function of (WIDTH, VEC, THREADS) only, the same
    on every GPU and in the interpreter. VEC and THREADS describe the layout the launcher expects
    (16-byte vectors, 32 * num_warps threads): where Triton's differs the levels within a warp give the
    same result, only slower; the warp levels need THREADS = 32 * num_warps (every launcher passes it).
    Each level but the warps' is a sum over an axis of two elements: one addition, in no order of
    Triton's."""
    return tree_sum_across_threads(tree_sum_within_threads(v, ROWS, WIDTH, VEC, THREADS), ROWS)
