"""`outer` schedule: the reduced axis is strided and the kept inner axis is contiguous.

The input is viewed as (outer, reduce, inner) with stride_inner typically 1. A program owns one outer
index o, BLOCK_I consecutive inner indices and one part of the reduced axis, and loads
[BLOCK_R, BLOCK_I] tiles that are coalesced along the inner axis -- no transposing copy. Each of the
BLOCK_R lanes of a column accumulates every BLOCK_R-th element; the lanes are merged once at the end
by the fixed tree. (Pairwise: each tile is merged by that tree at once and the tile sums by a binary
counter.) The planner sizes first-pass tiles so that each thread holds all BLOCK_R lanes of its
columns: the lane tree then runs in registers. Partial states go to a [n_parts, outer*inner]
workspace, which a second launch of this same kernel reduces over its (strided) first axis.
Welford's strategy carries counts and subtracts each column's shift as the inner schedule does; over
the input, with the lanes in registers (TILE_MOMENTS), each tile's lanes are merged first (equal
counts, no division) and each column keeps one state (welford_tile_part); the stable exponential sum
does the same with each tile's maximum and its terms (stable_exp_tile_part).

The exact filter's one pass over short columns (RECOMPUTE_TILE > 0, precred.plan.exact_in_one_launch)
finishes its columns itself and recomputes those it cannot certify (recompute.certify_or_recompute_columns).

Bytes moved: every input element once; one output (or partial state) per (o, i) and part.
"""
import triton
import triton.language as tl

from ..strategies import (NO_MAGNITUDE, PLAIN, WELFORD_EQUAL_COUNTS, exact_combine, lanes_as_keys, magnitude_key,
                          stable_exp_combine, welford_combine, welford_lane_counts)
from ..strategies.stable_exp import terms_below
from ..strategies.welford import welford_merge_pairs, welford_merge_vectors
from .finish import to_accumulator
from .grid import block_indices
from .recompute import certify_or_recompute_columns
from .steps import (accumulate_tile, counted_values, finished_index, fold_partial_tile, initial_state, lane_positions,
                    load_shift, programmatic_launch_points, tile_weights, write_result)
from .tree import counter_push, counter_total, tree_reduce_first_axis

_EQUAL_COUNTS = tl.constexpr(WELFORD_EQUAL_COUNTS)
_PLAIN = tl.constexpr(PLAIN)


@triton.jit
def outer_kernel(
    src_hi_ptr,    # input elements, or the hi parts of partial states when SRC_IS_STATE
    src_lo_ptr,    # lo parts of partial states (read only when SRC_IS_STATE and STRATEGY uses lo)
    src_cnt_ptr,   # counts of partial states (Welford, SRC_IS_STATE)
    dst_hi_ptr,    # output [outer, inner] (final pass), or hi parts of states [n_parts, outer*inner]
    dst_lo_ptr,    # lo parts of partial states (DST_IS_STATE), or Welford's mean output (WRITE_MEAN)
    dst_cnt_ptr,   # counts of partial states (Welford, DST_IS_STATE)
    shift_ptr,     # Welford: the original input, whose output index o*inner + i starts its row at the
    outer_size, inner_size,                  # shift_* offsets below
    stride_outer, stride_inner, stride_red,  # element strides of the source
    red_len, chunk_len, n_parts,
    divisor: tl.float64,   # sum: divides the value when DIVIDE (mean); Welford: divides m2 (n - correction)
    shift_inner, shift_stride_outer, shift_stride_inner,
    STRATEGY: tl.constexpr, ACC_DTYPE: tl.constexpr,
    SRC_IS_STATE: tl.constexpr, DST_IS_STATE: tl.constexpr, DIVIDE: tl.constexpr, USES_LO: tl.constexpr,
    TAKE_SQRT: tl.constexpr, WRITE_MEAN: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr,
    TILE_COUNTER: tl.constexpr,   # pairwise: each tile's lane tree, then a binary counter over tiles
    LOOP_STAGES: tl.constexpr,    # tl.range's num_stages (precred.plan._loop_stages); 1: a plain loop
    TILE_MOMENTS: tl.constexpr = False,   # Welford / the stable exponential sum over the input, lanes in
                                          # registers: welford_tile_part / stable_exp_tile_part
    EXACT_TILE_BOUND: tl.constexpr = 0.0,   # > 0: exact_tile_part bounds each tile's tree by this factor
                                            # times its largest magnitude (strategies/exact.py)
    LAUNCH_DEPENDENTS: tl.constexpr = False,  # let the next launch (a later pass, a recompute) start early (PDL)
    WAIT_FOR_PREVIOUS: tl.constexpr = False,  # a programmatic dependent of the previous pass: wait for its writes
    RECOMPUTE_TILE: tl.constexpr = 0,   # > 0: the exact mode in one launch, this many columns recomputed side by
    RECOMPUTE_ROWS: tl.constexpr = 0,   # side, this many rows a step (recompute.certify_or_recompute_columns)
    # the exact filter's input format (superaccumulator.INPUT_FORMATS; fp32's: its grid is every format's floor)
    MAN_BITS: tl.constexpr = 23, EXP_BITS: tl.constexpr = 8, LSB_EXP: tl.constexpr = -149,
):
    programmatic_launch_points(LAUNCH_DEPENDENTS, WAIT_FOR_PREVIOUS)
    pid = tl.program_id(0)
    n_inner_blocks = tl.cdiv(inner_size, BLOCK_I)
    part = pid % n_parts
    tile = pid // n_parts
    o = tile // n_inner_blocks
    inner_block = tile % n_inner_blocks

    cols = block_indices(inner_block, BLOCK_I, inner_size)
    col_mask = cols < inner_size
    col_base = o.to(tl.int64) * stride_outer + cols.to(tl.int64) * stride_inner

    part_start = part.to(tl.int64) * chunk_len
    part_end = tl.minimum(part_start + chunk_len, red_len)

    out_index = o.to(tl.int64) * inner_size + cols
    lanes = tl.arange(0, BLOCK_R)
    # int64 offsets of the part's first tile; the loop only advances the pointers by a scalar step.
    first_tile = (part_start + lanes)[:, None] * stride_red + col_base[None, :]
    hi_ptrs = src_hi_ptr + first_tile
    lo_ptrs = src_lo_ptr + first_tile
    cnt_ptrs = src_cnt_ptr + first_tile
    step = tl.full((), BLOCK_R, tl.int64) * stride_red
    if TILE_COUNTER:
        # Plain strategy only (pairwise): states have no lo. Each tile's lanes merge by the fixed tree,
        # the tile sums by the counter: a balanced tree over the part, of depth ceil(log2(part length)).
        zero = tl.zeros([BLOCK_I], ACC_DTYPE)
        s0, s1, s2, s3, s4, s5, s6, s7 = zero, zero, zero, zero, zero, zero, zero, zero
        g = 0
        for start in tl.range(part_start, part_end, BLOCK_R, num_stages=LOOP_STAGES):
            mask = ((start + lanes) < part_end)[:, None] & col_mask[None, :]
            raw = tl.load(hi_ptrs, mask=mask, other=0, eviction_policy="evict_first")   # read once (steps.py)
            values = to_accumulator(raw, ACC_DTYPE)
            tile_sum, _, _ = tree_reduce_first_axis(values, values, values, BLOCK_R, BLOCK_I, STRATEGY)
            s0, s1, s2, s3, s4, s5, s6, s7 = counter_push(tile_sum, g, s0, s1, s2, s3, s4, s5, s6, s7)
            hi_ptrs += step
            g += 1
        col_hi = counter_total(g, s0, s1, s2, s3, s4, s5, s6, s7)
        col_lo = zero
        col_cnt = zero
        shift = 0.0
    else:
        if STRATEGY == 2:
            shift = load_shift(shift_ptr, out_index, col_mask, shift_inner, shift_stride_outer,
                               shift_stride_inner, ACC_DTYPE)
            shift_tile = shift[None, :]
        else:
            shift = 0.0
            shift_tile = 0.0
        if TILE_MOMENTS and STRATEGY == 7:
            col_hi, col_lo, col_cnt = exact_tile_part(hi_ptrs, step, lanes, col_mask, part_start, part_end, BLOCK_R,
                                                      BLOCK_I, LOOP_STAGES, EXACT_TILE_BOUND)
        elif TILE_MOMENTS and (STRATEGY == 3 or STRATEGY == 10):
            col_hi, col_lo, col_cnt = stable_exp_tile_part(hi_ptrs, step, lanes, col_mask, part_start, part_end,
                                                           ACC_DTYPE, BLOCK_R, BLOCK_I, LOOP_STAGES)
        elif TILE_MOMENTS:
            col_hi, col_lo, col_cnt = welford_tile_part(hi_ptrs, step, lanes, col_mask, part_start, part_end,
                                                        shift_tile, ACC_DTYPE, BLOCK_R, BLOCK_I, LOOP_STAGES)
        else:
            col_hi, col_lo, col_cnt = chained_part(hi_ptrs, lo_ptrs, cnt_ptrs, step, lanes, col_mask, part_start,
                                                   part_end, shift_tile, STRATEGY, ACC_DTYPE, SRC_IS_STATE,
                                                   USES_LO, BLOCK_R, BLOCK_I, LOOP_STAGES)

    state_index = part.to(tl.int64) * outer_size * inner_size + out_index   # workspace [n_parts, outputs]
    if RECOMPUTE_TILE > 0:   # one pass over whole short columns: the exact filter, then its uncertified ones here
        certify_or_recompute_columns(col_hi, col_lo, col_cnt, out_index, col_mask, inner_block * BLOCK_I,
                                     o.to(tl.int64) * stride_outer, o.to(tl.int64) * inner_size, src_hi_ptr,
                                     dst_hi_ptr, stride_inner, stride_red, red_len, divisor, DIVIDE, MAN_BITS,
                                     EXP_BITS, LSB_EXP, BLOCK_I, RECOMPUTE_TILE, RECOMPUTE_ROWS)
    else:
        write_result(col_hi, col_lo, col_cnt, dst_hi_ptr, dst_lo_ptr, dst_cnt_ptr, out_index, state_index,
                     col_mask, divisor, shift, STRATEGY, DST_IS_STATE, DIVIDE, USES_LO, TAKE_SQRT, WRITE_MEAN,
                     MAN_BITS, LSB_EXP)


@triton.jit
def chained_part(hi_ptrs, lo_ptrs, cnt_ptrs, step, lanes, col_mask, part_start, part_end, shift_tile,
                 STRATEGY: tl.constexpr, ACC_DTYPE: tl.constexpr, SRC_IS_STATE: tl.constexpr, USES_LO: tl.constexpr,
                 BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr, LOOP_STAGES: tl.constexpr):
    """The merged state of each column over [part_start, part_end): each lane chains its tiles; the
    BLOCK_R lanes of each column merge once, by the fixed tree."""
    hi, lo, cnt = initial_state(BLOCK_R, BLOCK_I, ACC_DTYPE, STRATEGY, SRC_IS_STATE)
    loop_end = part_end
    # The extremum's value alone, and the indexed extremum on the input: whole tiles in the loop, then
    # the partial last tile apart (steps.accumulate_tile's FULL_TILE).
    FULL_TILES: tl.constexpr = (STRATEGY == 8 or STRATEGY == 9
                                or ((STRATEGY == 4 or STRATEGY == 5) and not SRC_IS_STATE))
    if FULL_TILES:
        loop_end = part_start + (part_end - part_start) // BLOCK_R * BLOCK_R
    for start in tl.range(part_start, loop_end, BLOCK_R, num_stages=LOOP_STAGES):
        mask = ((start + lanes) < part_end)[:, None] & col_mask[None, :]
        if STRATEGY == 2:
            reciprocal, complement = tile_weights(start, part_start, BLOCK_R, ACC_DTYPE)
        else:
            reciprocal, complement = 1.0, 0.0
        hi, lo, cnt = accumulate_tile(hi, lo, cnt, hi_ptrs, lo_ptrs, cnt_ptrs, mask, start - part_start,
                                      shift_tile, reciprocal, complement, ACC_DTYPE, STRATEGY, SRC_IS_STATE,
                                      USES_LO, FULL_TILES)
        hi_ptrs += step
        lo_ptrs += step
        cnt_ptrs += step
    if FULL_TILES:
        if STRATEGY == 8 or STRATEGY == 9:
            hi = lanes_as_keys(hi, ACC_DTYPE)
        if loop_end < part_end:
            mask = ((loop_end + lanes) < part_end)[:, None] & col_mask[None, :]
            hi, lo, cnt = fold_partial_tile(hi, lo, cnt, hi_ptrs, lo_ptrs, cnt_ptrs, mask, loop_end - part_start,
                                            shift_tile, ACC_DTYPE, STRATEGY, SRC_IS_STATE, USES_LO)
    if STRATEGY == 2 and not SRC_IS_STATE:
        cnt = tl.broadcast_to(welford_lane_counts(part_start, part_end, lanes, BLOCK_R)[:, None],
                              (BLOCK_R, BLOCK_I))
    cnt = lane_positions(cnt, lanes[:, None], ((part_start + lanes) < part_end)[:, None] & col_mask[None, :],
                         STRATEGY, SRC_IS_STATE)
    col_hi, col_lo, col_cnt = tree_reduce_first_axis(hi, lo, cnt, BLOCK_R, BLOCK_I, STRATEGY)
    return col_hi, col_lo, finished_index(col_cnt, part_start, STRATEGY, SRC_IS_STATE)


@triton.jit
def welford_tile_part(ptrs, step, lanes, col_mask, part_start, part_end, shift_tile, ACC_DTYPE: tl.constexpr,
                      BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr, LOOP_STAGES: tl.constexpr):
    """chained_part for Welford over the input when each thread holds all BLOCK_R lanes of its columns
    (TILE_MOMENTS): each full tile's lanes are merged first, by the fixed tree with equal counts (no
    division; in registers), and the columns keep one state each, merged with every tile's by Chan's
    merge with the tile's scalar weights (strategies.welford.welford_merge_vectors; tiles of two fp32
    values a column: welford_merge_pairs, the two merges in one step). An element goes
    through the tree's log2(BLOCK_R) levels, then the chain: the depth plan.Pass.depth counts. A partial
    last tile: the same tree with counts (welford_combine), merged into the columns' states."""
    mean = tl.zeros([BLOCK_I], ACC_DTYPE)
    m2 = tl.zeros([BLOCK_I], ACC_DTYPE)
    full_end = part_start + (part_end - part_start) // BLOCK_R * BLOCK_R
    for start in tl.range(part_start, full_end, BLOCK_R, num_stages=LOOP_STAGES):
        values = to_accumulator(tl.load(ptrs, mask=col_mask[None, :], other=0, eviction_policy="evict_first"),
                                ACC_DTYPE) - shift_tile
        reciprocal, complement = tile_weights(start, part_start, BLOCK_R, ACC_DTYPE)
        # fp32 input, tiles of 2 lanes: each pair's merge fused into the column's (welford_merge_pairs).
        # H200, 2026-12-04, bench/sweep_outer.py --op var --dim 0, two rounds, GB/s of the fp64 mode: fp32
        # 8192^2 3297/3300 -> 3333/3324, 65536x1024 3132/3138 -> 3171/3168, 1024x65536 3301/3303 ->
        # 3351/3345 (fast, 262144x256 (8 lanes) and 4096^2 within 0.5%); bf16 (its 8-column vectors) no
        # faster for 2 fewer fp64 operations a pair: 8192^2 2059/2063 -> 2067/2063, 1024x65536 2017/2018 ->
        # 1976/1972 -- it keeps the tree and welford_merge_vectors.
        if BLOCK_R == 2 and ptrs.dtype.element_ty == tl.float32:
            first, second = tl.split(tl.trans(values))
            mean, m2 = welford_merge_pairs(mean, m2, first, second, reciprocal * 0.5, complement)
        else:
            tile_mean, tile_m2, _ = tree_reduce_first_axis(values, tl.zeros_like(values),
                                                           tl.full([BLOCK_R, BLOCK_I], 1.0, tl.float64), BLOCK_R,
                                                           BLOCK_I, _EQUAL_COUNTS)
            mean, m2 = welford_merge_vectors(mean, m2, tile_mean, tile_m2, reciprocal, complement, BLOCK_R)
        ptrs += step
    cnt = tl.zeros([BLOCK_I], tl.float64) + (full_end - part_start).to(tl.float64)
    if full_end < part_end:
        mask = ((full_end + lanes) < part_end)[:, None] & col_mask[None, :]
        values, counts = counted_values(ptrs, mask, shift_tile, ACC_DTYPE)
        tail_mean, tail_m2, tail_cnt = tree_reduce_first_axis(values, tl.zeros_like(values), counts, BLOCK_R,
                                                              BLOCK_I, 2)
        mean, m2, cnt = welford_combine(mean, m2, cnt, tail_mean, tail_m2, tail_cnt)
    return mean, m2, cnt


@triton.jit
def exact_tile_part(ptrs, step, lanes, col_mask, part_start, part_end, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr,
                    LOOP_STAGES: tl.constexpr, TREE_BOUND: tl.constexpr):
    """chained_part for the exact filter over the input when each thread holds all BLOCK_R lanes of its
    columns (TILE_MOMENTS): each tile's lanes are merged first, in registers, by the tree of exact_combine
    (every element a state (x, 0, its key); the leaf merges add |s| to t = 0), and the columns keep one
    state each, merged with every tile's -- the same fp64 additions as the lanes' chains (2 an element),
    on a BLOCK_R-th of their state registers. TREE_BOUND > 0 (strategies/exact.py tile_tree_bound): the
    tile's lanes are summed by the plain fp64 tree (1 addition an element) and its t is TREE_BOUND times
    the tile's largest magnitude. The filter's order is free (strategies/exact.py: t bounds the error of
    whichever order the additions took). Masked elements load as 0: no term, no magnitude."""
    s = tl.zeros([BLOCK_I], tl.float64)
    t = tl.zeros([BLOCK_I], tl.float64)
    m = tl.full([BLOCK_I], NO_MAGNITUDE, tl.uint32)
    for start in tl.range(part_start, part_end, BLOCK_R, num_stages=LOOP_STAGES):
        mask = ((start + lanes) < part_end)[:, None] & col_mask[None, :]
        x32 = to_accumulator(tl.load(ptrs, mask=mask, other=0, eviction_policy="evict_first"), tl.float32)
        if TREE_BOUND > 0:
            x64 = x32.to(tl.float64)
            tile_s, _, _ = tree_reduce_first_axis(x64, x64, x64, BLOCK_R, BLOCK_I, _PLAIN)
            # The largest |x| (a NaN input may be passed over: s is NaN then, the output special anyway).
            largest = tl.max(tl.abs(x32), axis=0)
            s, t, m = exact_combine(s, t, m, tile_s, largest.to(tl.float64) * TREE_BOUND,
                                    tl.min(magnitude_key(x32), axis=0))
        else:
            tile_s, tile_t, tile_m = tree_reduce_first_axis(x32.to(tl.float64), tl.zeros([BLOCK_R, BLOCK_I], tl.float64),
                                                            magnitude_key(x32), BLOCK_R, BLOCK_I, 7)
            s, t, m = exact_combine(s, t, m, tile_s, tile_t, tile_m)
        ptrs += step
    return s, t, m


@triton.jit
def stable_exp_tile_part(ptrs, step, lanes, col_mask, part_start, part_end, ACC_DTYPE: tl.constexpr,
                         BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr, LOOP_STAGES: tl.constexpr):
    """chained_part for the stable exponential sum over the input when each thread holds all BLOCK_R
    lanes of its columns (TILE_MOMENTS): each tile's (s, m) per column -- its maximum, then one
    exponential an element and the fixed tree's additions, along the first axis -- merged into the
    column's state (stable_exp_combine). An element goes through the
    tree's log2(BLOCK_R) levels, then the chain: the depth plan.Pass.depth counts, with one exponential
    for its term and at most one per merge after (precred.bounds.logsumexp_error_bound). The last,
    partial tile's masked values are -inf."""
    s = tl.zeros([BLOCK_I], ACC_DTYPE)
    m = tl.full([BLOCK_I], float("-inf"), ACC_DTYPE)
    full_end = part_start + (part_end - part_start) // BLOCK_R * BLOCK_R
    for start in tl.range(part_start, full_end, BLOCK_R, num_stages=LOOP_STAGES):
        values = to_accumulator(tl.load(ptrs, mask=col_mask[None, :], other=0, eviction_policy="evict_first"),
                                ACC_DTYPE)
        tile_s, tile_m = stable_exp_columns(values, BLOCK_R, BLOCK_I)
        s, _, m = stable_exp_combine(s, s, m, tile_s, tile_s, tile_m)
        ptrs += step
    if full_end < part_end:
        mask = ((full_end + lanes) < part_end)[:, None] & col_mask[None, :]
        raw = tl.load(ptrs, mask=mask, other=0, eviction_policy="evict_first")
        tile_s, tile_m = stable_exp_columns(tl.where(mask, to_accumulator(raw, ACC_DTYPE), float("-inf")), BLOCK_R,
                                            BLOCK_I)
        s, _, m = stable_exp_combine(s, s, m, tile_s, tile_s, tile_m)
    return s, tl.zeros([BLOCK_I], ACC_DTYPE), m


@triton.jit
def stable_exp_columns(values, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    """The stable exponential state (s, m) of each column of a [BLOCK_R, BLOCK_I] tile: m the column's
    maximum, s = sum exp(x - m) by the fixed tree's additions (specials: strategies.stable_exp.terms_below)."""
    column_max = tl.max(values, axis=0)
    terms = terms_below(values, column_max[None, :])
    s, _, _ = tree_reduce_first_axis(terms, terms, terms, BLOCK_R, BLOCK_I, _PLAIN)
    return s, column_max
