"""The per-tile and per-output steps every schedule shares: fold a loaded tile into the state, and write
a merged state out (as a partial state, or finished into the output).

A state is (hi, lo, cnt): the sum strategies use hi/lo and never touch cnt (the schedules pass a
placeholder, which the compiler drops); Welford's strategy keeps (mean, m2, count) there, the stable
exponential sum (s, -, m) (also as logsumexp's fp32 filter, strategy 10), the extremum (v, -, index),
the extremum's value alone (key, -, -) and the product (p, -, -).
"""
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from ..strategies import (INDEX_NONE, INDEX_NONE_32, NO_MAGNITUDE, absolute_index, bound_up_to_fp32, exact_combine,
                          exact_finish, exact_update, extremum_combine, extremum_update, fold_value_lanes,
                          key_value, lowest_key, magnitude_key, oriented, stable_exp_combine, stable_exp_update,
                          state_combine, state_update,
                          value_key, value_lanes, welford_combine, welford_update)
from .finish import certify_logsumexp, finish, finish_logsumexp, finish_mean, finish_moments, round_to_output, to_accumulator


@triton.jit
def initial_state(ROWS: tl.constexpr, COLS: tl.constexpr, ACC_DTYPE: tl.constexpr, STRATEGY: tl.constexpr,
                  SRC_IS_STATE: tl.constexpr):
    """The identity state of a [ROWS, COLS] tile of lanes: (0, 0, -) for the sums, (0, 0, 0) for
    Welford, (0, 0, no magnitude) for the exact filter, (0, -, -inf) for the stable exponential sum, (-inf, -,
    no index) for the extremum (int32 relative indices on the input, int64 on partial states),
    (-inf or key(-inf), -, -) for the extremum's value alone (extremum_value.value_lanes) and (1, -, -)
    for the product. Unused parts are placeholders the compiler drops."""
    hi = tl.zeros([ROWS, COLS], ACC_DTYPE)
    lo = tl.zeros([ROWS, COLS], ACC_DTYPE)
    cnt = hi
    if STRATEGY == 2:
        cnt = tl.zeros([ROWS, COLS], tl.float64)
    elif STRATEGY == 7:
        cnt = tl.full([ROWS, COLS], NO_MAGNITUDE, tl.uint32)   # the smallest nonzero |x|'s key
    elif STRATEGY == 3 or STRATEGY == 10:
        cnt = tl.full([ROWS, COLS], float("-inf"), ACC_DTYPE)   # the running maxima
    elif STRATEGY == 4 or STRATEGY == 5:
        hi = tl.full([ROWS, COLS], float("-inf"), ACC_DTYPE)
        if SRC_IS_STATE:
            cnt = tl.full([ROWS, COLS], INDEX_NONE, tl.int64)
        else:
            cnt = tl.full([ROWS, COLS], INDEX_NONE_32, tl.int32)
    elif STRATEGY == 8 or STRATEGY == 9:
        hi = value_lanes(ROWS, COLS, ACC_DTYPE)   # floats or keys (extremum_value.py); keys after the loop
    elif STRATEGY == 6:
        hi = tl.full([ROWS, COLS], 1.0, ACC_DTYPE)
    return hi, lo, cnt


@triton.jit
def accumulate_tile(hi, lo, cnt, hi_ptrs, lo_ptrs, cnt_ptrs, mask, tile_offset, shift, reciprocal, complement,
                    ACC_DTYPE: tl.constexpr, STRATEGY: tl.constexpr, SRC_IS_STATE: tl.constexpr,
                    USES_LO: tl.constexpr, FULL_TILE: tl.constexpr = False):
    """Fold one tile into the tile-shaped state: input elements by `update`, partial states (a later
    pass of the split schedule) by `combine`. For the sums, masked lanes load the identity 0, which
    every sum strategy adds exactly; Welford's update skips them (`mask`), and masked partial states
    load its identity (0, 0, 0). Welford only: `shift` is subtracted from every element (broadcast
    along the reduced axis); `reciprocal` and `complement` are 1/k and (k-1)/k for k = the lane's count
    after this tile. The stable exponential sum keeps (s, m) in (hi, cnt). The extremum keeps (v, index)
    there: on the input, `tile_offset` (the tile's first position relative to the part's start, a
    scalar) stands for the index in each lane until lane_positions adds the lanes' own offsets, once,
    after the loop (a select of a scalar per element instead of an add and a select); masked partial
    states enter as the identity (-inf, INDEX_NONE); FULL_TILE (a loop over whole tiles of the input:
    schedules.inner / outer, FULL_TILES) lets its update skip the mask. The extremum's value alone
    keeps its lanes' maxima (fold_value_lanes: floats on the GPU, keys when interpreted; the schedules
    key them after the loop, lanes_as_keys); it is given full tiles only (value_tail folds the last,
    partial one). The product's masked lanes are 1."""
    # Every input element is read once: evict_first lets the next tiles replace this one in L2 before
    # other lines (dirty ones cost a write-back). Plain loads carry the hint; pipelined loops' cp.async
    # drops it (precred.plan.PLAIN_16BIT_ROWS_MIN_RED). (The norms' and softmax's single-read kernels
    # measured no gain from it, H100 norm_suite / exp_suite: -5% to +2%; they load without it.)
    raw = tl.load(hi_ptrs, mask=mask, other=0, eviction_policy="evict_first")
    x_hi = to_accumulator(raw, ACC_DTYPE)
    if STRATEGY == 4 or STRATEGY == 5:
        if SRC_IS_STATE:   # partial states are oriented already, their indices absolute
            x_v = tl.where(mask, x_hi, float("-inf"))
            x_i = tl.load(cnt_ptrs, mask=mask, other=INDEX_NONE)
            hi, lo, cnt = extremum_combine(hi, lo, cnt, x_v, lo, x_i)
        else:
            hi, cnt = extremum_update(hi, cnt, oriented(x_hi, STRATEGY), tile_offset.to(tl.int32), mask, FULL_TILE)
    elif STRATEGY == 8 or STRATEGY == 9:   # partial states are oriented already
        # Full tiles only (the schedules fold a part's partial last tile by value_tail): a masked
        # element here belongs to a row or column past the outputs, which is never written.
        hi = fold_value_lanes(hi, x_hi if SRC_IS_STATE else oriented(x_hi, STRATEGY), ACC_DTYPE)
    elif STRATEGY == 6:
        hi, lo = state_combine(hi, lo, tl.where(mask, x_hi, 1.0), lo, STRATEGY)
    elif STRATEGY == 3 or STRATEGY == 10:
        if SRC_IS_STATE:   # masked partial states load (0, -inf), the merge's identity
            x_m = tl.load(cnt_ptrs, mask=mask, other=float("-inf")).to(ACC_DTYPE)
            hi, lo, cnt = stable_exp_combine(hi, lo, cnt, x_hi, lo, x_m)
        else:              # masked elements are -inf (strategies/stable_exp.py: harmless)
            hi, cnt = stable_exp_update(hi, cnt, tl.where(mask, x_hi, float("-inf")))
    elif STRATEGY == 7:   # masked elements load 0 (the minimum skips it), partial states (0, 0, no magnitude)
        if SRC_IS_STATE:   # t stored in fp32 (rounded up), the key's bits in int32 (-1: no magnitude)
            x_lo = tl.load(lo_ptrs, mask=mask, other=0.0).to(tl.float64)
            x_min = tl.load(cnt_ptrs, mask=mask, other=-1).to(tl.uint32, bitcast=True)
            hi, lo, cnt = exact_combine(hi, lo, cnt, x_hi, x_lo, x_min)
        else:
            hi, lo, cnt = exact_update(hi, lo, cnt, x_hi, magnitude_key(to_accumulator(raw, tl.float32)))
    elif STRATEGY == 2:
        if SRC_IS_STATE:
            x_lo = tl.load(lo_ptrs, mask=mask, other=0.0)
            x_cnt = tl.load(cnt_ptrs, mask=mask, other=0.0)
            hi, lo, cnt = welford_combine(hi, lo, cnt, x_hi, x_lo, x_cnt)
        else:
            hi, lo = welford_update(hi, lo, x_hi - shift, reciprocal, complement, mask)
    elif SRC_IS_STATE:
        if USES_LO:
            x_lo = tl.load(lo_ptrs, mask=mask, other=0.0)
        else:
            x_lo = tl.zeros(x_hi.shape, ACC_DTYPE)
        hi, lo = state_combine(hi, lo, x_hi, x_lo, STRATEGY)
    else:
        hi, lo = state_update(hi, lo, x_hi, STRATEGY)
    return hi, lo, cnt


@triton.jit
def value_tail(hi, ptrs, mask, ACC_DTYPE: tl.constexpr, STRATEGY: tl.constexpr, SRC_IS_STATE: tl.constexpr):
    """The extremum's value alone: fold a part's partial last tile, masked elements entering as the
    identity key(-inf). Kept out of the loop over full tiles: there, carrying each element's mask
    through the software pipeline to a select took 74 registers per thread against 37 without it
    (ptxas, sm_90, 4096 fp32 lanes on 8 warps), which cost programs per SM."""
    x = to_accumulator(tl.load(ptrs, mask=mask, other=0, eviction_policy="evict_first"), ACC_DTYPE)
    x_key = value_key(x if SRC_IS_STATE else oriented(x, STRATEGY))
    return tl.maximum(hi, tl.where(mask, x_key, lowest_key(1, 1, ACC_DTYPE)))


@triton.jit
def fold_partial_tile(hi, lo, cnt, hi_ptrs, lo_ptrs, cnt_ptrs, mask, tile_offset, shift, ACC_DTYPE: tl.constexpr,
                      STRATEGY: tl.constexpr, SRC_IS_STATE: tl.constexpr, USES_LO: tl.constexpr):
    """The partial last tile of a loop over whole tiles (the schedules' FULL_TILES: the extremum's value
    alone, the indexed extremum on the input), folded with its mask: by value_tail into the keys, or by
    accumulate_tile."""
    if STRATEGY == 8 or STRATEGY == 9:
        hi = value_tail(hi, hi_ptrs, mask, ACC_DTYPE, STRATEGY, SRC_IS_STATE)
    else:
        hi, lo, cnt = accumulate_tile(hi, lo, cnt, hi_ptrs, lo_ptrs, cnt_ptrs, mask, tile_offset, shift, 1.0, 0.0,
                                      ACC_DTYPE, STRATEGY, SRC_IS_STATE, USES_LO)
    return hi, lo, cnt


@triton.jit
def lane_positions(cnt, lane_offsets, has_elements, STRATEGY: tl.constexpr, SRC_IS_STATE: tl.constexpr):
    """A first pass's extremum, after its loop: each lane's tile offset (accumulate_tile) + the lane's
    offset in the tile (`lane_offsets`, broadcast along the kept axis) = the index relative to the part's
    start. A lane that took no element (INDEX_NONE_32) but has some (`has_elements`: the mask of the
    part's first tile, tile offset 0) holds -inf alone (strategies.extremum_update): its first element,
    at its own offset; empty lanes keep INDEX_NONE_32. Other strategies' cnt passes through."""
    if (STRATEGY == 4 or STRATEGY == 5) and not SRC_IS_STATE:
        cnt = tl.where(cnt == INDEX_NONE_32, tl.where(has_elements, lane_offsets, INDEX_NONE_32), cnt + lane_offsets)
    return cnt


@triton.jit
def finished_index(cnt, part_start, STRATEGY: tl.constexpr, SRC_IS_STATE: tl.constexpr):
    """The extremum's merged index as written: int64 along the reduced axis (first passes hold int32
    indices relative to part_start). Other strategies' cnt passes through."""
    if (STRATEGY == 4 or STRATEGY == 5) and not SRC_IS_STATE:
        cnt = absolute_index(cnt, part_start)
    return cnt


@triton.jit
def tile_weights(start, part_start, BLOCK: tl.constexpr, ACC_DTYPE: tl.constexpr):
    """(1/k, (k-1)/k) for the k-th tile of a part (k = g + 1), within 1.51 u of each (u the unit roundoff
    of ACC_DTYPE), every thread of every program computing the same bits. Below k = 2^24:
    r = fp32's correctly rounded 1/k (div_rn); in fp32 that is the reciprocal, in fp64 it is refined:
    1/k = r / (1 - e), e = 1 - k r computed exactly by one fma (k r has at most 48 bits), so
    r (1 + e + e^2) is off by e^3 <= 2^-72 before its two fp64 roundings -- within u (1 + 2^-19). The
    complement is 1 - reciprocal, rounded once: within u + u / (k - 1) <= 1.51 u for k >= 3 (exact for
    k <= 2). The Welford bound (precred.bounds.moments_error_bound) counts a merge's weights at 2u
    each ("3uR(1 + u), counted as 7uR"; Chan's form 8u of its 10u), so it holds. Two correctly rounded
    divisions took 17 fp64 operations a tile, a quarter of the loop of var's fp64 mode over bf16 rows:
    H200, 2026-12-04, bench/sweep_outer.py --op var --dim -1, fp64 mode GB/s, two rounds, with the
    vectors' two-pass moments (plan.WELFORD_TWO_PASS_VECTORS) -> these weights as well: bf16 8192^2
    2495/2472 -> 2697/2660, 65536x1024 2575/2586 -> 2785/2776, 1024x65536 2237/2271 -> 2583/2571;
    fp32 8192^2 3562/3571 -> 3649/3650 (the weights alone: 3508/3526 -> 3586/3591). From k = 2^24
    (parts of more than 2^24 tiles): fp64's correctly rounded division for the reciprocal."""
    g = (start - part_start) // BLOCK
    if g < 16777215:
        k32 = (g + 1).to(tl.float32)
        r = tl.math.div_rn(1.0, k32)
        if ACC_DTYPE == tl.float32:
            reciprocal = r
        else:
            r64 = r.to(tl.float64)
            e = tl.fma(-(g + 1).to(tl.float64), r64, 1.0)
            reciprocal = tl.fma(r64, tl.fma(e, e, e), r64)
    else:
        reciprocal = (1.0 / (g + 1).to(tl.float64)).to(ACC_DTYPE)
    complement = 1.0 - reciprocal
    return reciprocal, complement


@triton.jit
def tile_at(ptrs, row_mask, lanes, start, part_end):
    """The input tile at `start` of a part that ends at part_end (ptrs: its [rows, lanes] addresses):
    the rows of row_mask, the lanes before part_end, 0 elsewhere; read once (the L2 evict_first hint).
    The plain loops that load a tile ahead (exact_input_part, welford_vector_part) read through it."""
    return tl.load(ptrs, mask=row_mask[:, None] & ((start + lanes) < part_end)[None, :], other=0,
                   eviction_policy="evict_first")


@triton.jit
def counted_values(ptrs, mask, shift, ACC_DTYPE: tl.constexpr):
    """A partial tile of Welford's input as single-value states: (x - shift where `mask`, else 0; the
    count, 1.0 or 0.0 in fp64) -- the leaves of the counted tree that merges a part's last tile."""
    return counted_tile(tl.load(ptrs, mask=mask, other=0, eviction_policy="evict_first"), mask, shift, ACC_DTYPE)


@triton.jit
def counted_tile(raw, mask, shift, ACC_DTYPE: tl.constexpr):
    """counted_values of a tile already loaded (`raw`, loaded under `mask`)."""
    values = to_accumulator(raw, ACC_DTYPE)
    return tl.where(mask, values - shift, 0.0), tl.where(mask, 1.0, 0.0).to(tl.float64)


@triton.jit
def row_shift(first_ptrs, mask, ACC_DTYPE: tl.constexpr):
    """The shift K of each row (Welford's strategy, layer_norm's statistics): the row's first element,
    at first_ptrs, or 0 where that element is not finite (or masked)."""
    k = to_accumulator(tl.load(first_ptrs, mask=mask, other=0), ACC_DTYPE)
    return tl.where((k - k) == 0.0, k, 0.0)


@triton.jit
def load_shift(shift_ptr, out_index, mask, shift_inner, shift_stride_outer, shift_stride_inner,
               ACC_DTYPE: tl.constexpr):
    """Welford's shift K of each output: row_shift of its row in the original input (output index
    o*inner + i lives at o*stride_outer + i*stride_inner)."""
    offsets = (out_index // shift_inner).to(tl.int64) * shift_stride_outer \
        + (out_index % shift_inner).to(tl.int64) * shift_stride_inner
    return row_shift(shift_ptr + offsets, mask, ACC_DTYPE)


@triton.jit
def write_result(hi, lo, cnt, dst_hi_ptr, dst_lo_ptr, dst_cnt_ptr, out_index, state_index, mask, divisor,
                 shift, STRATEGY: tl.constexpr, DST_IS_STATE: tl.constexpr, DIVIDE: tl.constexpr,
                 USES_LO: tl.constexpr, TAKE_SQRT: tl.constexpr, WRITE_MEAN: tl.constexpr,
                 MAN_BITS: tl.constexpr, LSB_EXP: tl.constexpr):
    """Store merged states: as partial states at state_index (accumulator dtype, never rounded to the
    input dtype), or finished and rounded into the output at out_index. Welford's finished output is
    the variance (or standard deviation, TAKE_SQRT) in dst_hi and, when WRITE_MEAN, the mean in dst_lo;
    the stable exponential sum's is m + log(s) (or, WRITE_MEAN, log(s) in dst_hi and m in dst_lo); the
    extremum's is its value (exact in any output dtype that holds the input) and, WRITE_MEAN, its index
    in dst_lo (int64); the exact filter's and logsumexp's fp32 filter's is the value and, in dst_lo, an
    int8 flag: certified or not (MAN_BITS, LSB_EXP: the exact filter's input format, exact_finish's)."""
    if DST_IS_STATE:
        if STRATEGY == 8 or STRATEGY == 9:   # the value the key stands for (keyed again on load)
            hi = key_value(hi)
        tl.store(dst_hi_ptr + state_index, hi, mask=mask)
        if STRATEGY == 7:   # the exact filter's bound rounded up to fp32, its key's bits as int32
            tl.store(dst_lo_ptr + state_index, bound_up_to_fp32(lo), mask=mask)
            tl.store(dst_cnt_ptr + state_index, cnt.to(tl.int32, bitcast=True), mask=mask)
        elif USES_LO:
            tl.store(dst_lo_ptr + state_index, lo, mask=mask)
        if STRATEGY == 2 or STRATEGY == 3 or STRATEGY == 4 or STRATEGY == 5 or STRATEGY == 10:
            tl.store(dst_cnt_ptr + state_index, cnt, mask=mask)
    elif STRATEGY == 7:
        # The exact mode's filter: the rounded value and, in dst_lo (int8), whether it is certified.
        value, certified = exact_finish(hi, lo, cnt, divisor, DIVIDE, dst_hi_ptr.dtype.element_ty, MAN_BITS, LSB_EXP)
        tl.store(dst_hi_ptr + out_index, round_to_output(value, dst_hi_ptr.dtype.element_ty), mask=mask)
        tl.store(dst_lo_ptr + out_index, certified.to(tl.int8), mask=mask)
    elif STRATEGY == 8 or STRATEGY == 9:
        value = oriented(key_value(hi), STRATEGY).to(tl.float64)   # exact; minima negated back
        tl.store(dst_hi_ptr + out_index, round_to_output(value, dst_hi_ptr.dtype.element_ty), mask=mask)
    elif STRATEGY == 4 or STRATEGY == 5:
        value = oriented(hi, STRATEGY).to(tl.float64)   # minima were negated on the way in
        tl.store(dst_hi_ptr + out_index, round_to_output(value, dst_hi_ptr.dtype.element_ty), mask=mask)
        if WRITE_MEAN:
            tl.store(dst_lo_ptr + out_index, cnt, mask=mask)
    elif STRATEGY == 10:
        store_certified_logsumexp(hi, cnt, divisor, dst_hi_ptr, dst_lo_ptr, out_index, mask)
    elif STRATEGY == 3:
        if WRITE_MEAN:   # softmax's reduction: log(s) and the maximum m apart, both in fp64 (exact m)
            tl.store(dst_hi_ptr + out_index, tl.log(hi.to(tl.float64)), mask=mask)
            tl.store(dst_lo_ptr + out_index, cnt.to(tl.float64), mask=mask)
        else:
            tl.store(dst_hi_ptr + out_index, finish_logsumexp(hi, cnt, dst_hi_ptr.dtype.element_ty), mask=mask)
    elif STRATEGY == 2:
        value = finish_moments(lo, hi, divisor, TAKE_SQRT, dst_hi_ptr.dtype.element_ty)
        tl.store(dst_hi_ptr + out_index, value, mask=mask)
        if WRITE_MEAN:
            tl.store(dst_lo_ptr + out_index, finish_mean(hi, shift, dst_lo_ptr.dtype.element_ty), mask=mask)
    else:
        value = finish(hi, lo, divisor, dst_hi_ptr.dtype.element_ty, STRATEGY, DIVIDE)
        tl.store(dst_hi_ptr + out_index, value, mask=mask)


@triton.jit
def store_certified_logsumexp(s, m, margin, out_ptr, flags_ptr, out_index, mask):
    """logsumexp's fp32 filter (strategy 10) finished: the rounded value -- or, uncertified, the row's
    maximum m (exact in the output's format, the input's: the fp64 recompute's reference) -- and, in
    flags_ptr (int8), whether it is certified; `margin` is the pass's bound on |log(s_hat) - log(s)|
    (precred.bounds). Returns the certified mask."""
    value, certified = certify_logsumexp(s, m, margin, out_ptr.dtype.element_ty)
    value = tl.where(certified, value, round_to_output(m, out_ptr.dtype.element_ty))
    tl.store(out_ptr + out_index, value, mask=mask)
    tl.store(flags_ptr + out_index, certified.to(tl.int8), mask=mask)
    return certified


@triton.jit
def programmatic_launch_points(LAUNCH_DEPENDENTS: tl.constexpr, WAIT_FOR_PREVIOUS: tl.constexpr):
    """A kernel's programmatic dependent launch points (PDL, sm_90), at its start: LAUNCH_DEPENDENTS lets
    the next launch in the stream start once every program got here; WAIT_FOR_PREVIOUS (a launch that
    is itself such a dependent) waits until the previous launch finished and its writes are visible."""
    if LAUNCH_DEPENDENTS:
        gdc_launch_dependents()
    if WAIT_FOR_PREVIOUS:
        gdc_wait()
