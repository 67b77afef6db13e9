"""`inner` schedule: the reduced axis is the (possibly strided) fast axis of each row.

The input is viewed as rows r = (o, i) of a (outer, reduce, inner) layout: element j of row r lives at
o*stride_outer + i*stride_inner + j*stride_red, with o = r // inner_size, i = r % inner_size.
A program owns BLOCK_M rows and one part of the reduced axis (the `split` schedule runs several parts
per row and merges the partial states in a second launch, or in this one: see "Fused merge"). It streams its part in [BLOCK_M, BLOCK_N]
tiles into a tile-shaped state -- each lane accumulates every BLOCK_N-th element -- and merges the
BLOCK_N lanes once at the end with the fixed tree. (Pairwise parts of several tiles: each tile is merged
by a balanced tree at once and the tile sums by the binary counter, TILE_COUNTER.)

The exact filter over 16-bit input (VECTOR_SUMS with STRATEGY 7, exact_input_part) first sums each tile's
16-byte vectors in the thread (the lane tree's first levels) and keeps lanes of those vector sums: an
eighth of the state for the same loads.
Welford over the input does the same (VECTOR_SUMS with STRATEGY 2): each vector's (mean, m2) by
equal-count merges, then one Chan merge per lane and tile with the tile's scalar weights -- no
per-element update -- and a final tree over TREE_VEC times fewer lanes, all of one count (no division).

Welford's strategy (var/std) also carries a count per lane -- computed from the part's geometry after
the loop on the input, loaded with the partial states after it -- and subtracts each row's shift K
(precred.strategies.welford), read from the original input in every pass.

The loop may be software-pipelined (LOOP_STAGES > 1, precred.plan._loop_stages): Triton then loads
the next LOOP_STAGES - 1 tiles into shared memory while this one is folded; the order of the updates
is unchanged.

Fused merge (MERGE_LANES > 0, precred.plan.Plan.fused_merge): every program writes its part's state,
then counts itself in on its row block's arrival counter; the last to arrive merges the row block's
parts with the second pass's own loop (MERGE_LANES lanes, in order, then the fixed tree) -- the bits
do not depend on which program arrives last -- writes the output and resets the counter to 0 for the
next launch. Ordering: a CTA barrier, then the counter's acq_rel atomic (gpu scope), publishes the
program's states before its arrival is seen; the last program's acquire makes all of them visible.

The exact mode's filter over whole rows of a small input (RECOMPUTE_TILE > 0, precred.plan.exact_in_one_launch)
finishes its rows itself and recomputes those it cannot certify (recompute.certify_or_recompute); so
does logsumexp's fp32 filter in one pass of one part a row (EXP_FINISH_LANES > 0,
precred.plan.certified_exp_in_one_launch), in fp64 (recompute.certify_exp_or_recompute).

Bytes moved: every input element once; one output (or one partial state) per row and part.
Integer arguments are left to Triton's specialization: a stride of 1 becomes a compile-time constant
and multiples of 16 are known as such, which is what lets the loads be 16-byte vectors.
"""
import triton
import triton.language as tl

from ..strategies import (NO_MAGNITUDE, PLAIN, STABLE_EXP, WELFORD_EQUAL_COUNTS, exact_combine,
                          exact_update, lanes_as_keys, magnitude_key, stable_exp_combine, welford_combine,
                          welford_lane_counts)
from ..strategies.stable_exp import exp_of_gap, terms_below
from ..strategies.welford import welford_merge_vectors, welford_vector_moments
from .steps import (accumulate_tile, counted_tile, counted_values, finished_index, fold_partial_tile, initial_state,
                    lane_positions, load_shift, programmatic_launch_points, tile_at, tile_weights, write_result)
from .finish import to_accumulator
from .grid import block_indices
from .recompute import certify_exp_or_recompute, certify_or_recompute
from .tree import (counter_push, counter_total, tree_reduce_last_axis, tree_sum_across_threads,
                   tree_sum_within_threads)

_EQUAL_COUNTS = tl.constexpr(WELFORD_EQUAL_COUNTS)
_PLAIN = tl.constexpr(PLAIN)
_STABLE_EXP = tl.constexpr(STABLE_EXP)


@triton.jit
def program_rows(n_rows, inner_size, stride_outer, stride_inner, red_len, chunk_len, n_parts, BLOCK_M: tl.constexpr):
    """This program's rows and part: (rows, row mask, int64 offsets of the rows' first elements, part,
    the part's first and end positions along the reduced axis). Programs are numbered row block-major."""
    pid = tl.program_id(0)
    row_block = pid // n_parts
    part = pid % n_parts
    rows = block_indices(row_block, BLOCK_M, n_rows)
    row_mask = rows < n_rows
    # int64 offsets: a tensor may hold more than 2^31 elements.
    row_base = (rows // inner_size).to(tl.int64) * stride_outer + (rows % inner_size).to(tl.int64) * stride_inner
    part_start = part.to(tl.int64) * chunk_len
    part_end = tl.minimum(part_start + chunk_len, red_len)
    return rows, row_mask, row_base, part, part_start, part_end


@triton.jit
def reduce_part(src_hi_ptr, src_lo_ptr, src_cnt_ptr, rows, row_mask, row_base, part_start, part_end, stride_red,
                shift_tile, STRATEGY: tl.constexpr, ACC_DTYPE: tl.constexpr, SRC_IS_STATE: tl.constexpr,
                USES_LO: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, LOOP_STAGES: tl.constexpr,
                TILE_COUNTER: tl.constexpr, TREE_VEC: tl.constexpr, TREE_THREADS: tl.constexpr,
                VECTOR_SUMS: tl.constexpr = False, PREFETCH: tl.constexpr = False,
                INTERLEAVED: tl.constexpr = False, tiles_apart=1, PART_TAIL: tl.constexpr = True,
                WORD_LOADS: tl.constexpr = False, HALVES_MIN_LANES: tl.constexpr = 0,
                WELFORD_TWO_PASS: tl.constexpr = False):
    """The merged state of elements [part_start, part_end) of BLOCK_M rows (row r's element j at
    row_base + j * stride_red): lanes of BLOCK_N, each a chain over every BLOCK_N-th element, then the
    fixed lane tree. Returns per-row (hi, lo, cnt); an extremum's cnt is its absolute int64 index.
    TILE_COUNTER (pairwise, plain strategy: no lo, no cnt): a balanced tree over the part, of depth
    log2(BLOCK_N) + ceil(log2(tiles)) (precred.plan.Pass.depth): the levels of the blocked layout's
    register-order tree (tree.tree_sum_blocked_rows: TREE_VEC elements per thread vector, TREE_THREADS
    threads) that stay in a thread, on every tile; then, per thread, the binary counter over the
    tiles; then, once, the tree's levels across threads.
    INTERLEAVED (plan.Pass.interleaved): the part's tiles are every tiles_apart-th tile of the row from
    part_start, its first tile's position, to part_end, the row's end; the chained loop of the sums and
    the extrema only. PART_TAIL: a part may end in a partial tile (else every part is whole tiles and
    the Welford vector part's partial-tile code is not compiled: its counted tree held most of that
    kernel's registers; plan.WELFORD_TAIL_FREE_MIN_RED)."""
    lanes = tl.arange(0, BLOCK_N)
    # int64 offsets of the part's first tile (a tensor may hold more than 2^31 elements); the loop only
    # advances the pointers by a scalar step.
    first_tile = row_base[:, None] + (part_start + lanes)[None, :] * stride_red
    hi_ptrs = src_hi_ptr + first_tile
    lo_ptrs = src_lo_ptr + first_tile
    cnt_ptrs = src_cnt_ptr + first_tile
    tl.static_assert(not INTERLEAVED or not (TILE_COUNTER or VECTOR_SUMS or PREFETCH or STRATEGY == 2
                                             or STRATEGY == 3 or STRATEGY == 10 or STRATEGY == 7),
                     "interleaved parts: the chained loop of the sums and the extrema only")
    step = tl.full((), BLOCK_N, tl.int64) * stride_red
    tile_step = BLOCK_N   # positions from one of the part's tiles to the next
    if INTERLEAVED:
        tile_step = tiles_apart * BLOCK_N
        step = step * tiles_apart
    if TILE_COUNTER:
        # Each thread's share of a tile is summed in the thread (the blocked tree's first levels), the
        # tiles' shares by the counter, per thread; the levels across threads run once, at the end.
        # the counter's levels: [BLOCK_M, threads across a row], tree_sum_within_threads' shape
        VECTOR: tl.constexpr = TREE_VEC if TREE_VEC < BLOCK_N else BLOCK_N
        ACROSS: tl.constexpr = TREE_THREADS if TREE_THREADS < BLOCK_N // VECTOR else BLOCK_N // VECTOR
        zero = tl.zeros([BLOCK_M, ACROSS], ACC_DTYPE)
        s0, s1, s2, s3, s4, s5, s6, s7 = zero, zero, zero, zero, zero, zero, zero, zero
        g = 0
        for start in tl.range(part_start, part_end, BLOCK_N, num_stages=LOOP_STAGES):
            mask = row_mask[:, None] & ((start + lanes) < part_end)[None, :]
            raw = tl.load(hi_ptrs, mask=mask, other=0, eviction_policy="evict_first")   # read once (steps.py)
            values = to_accumulator(raw, ACC_DTYPE)
            share = tree_sum_within_threads(values, BLOCK_M, BLOCK_N, TREE_VEC, TREE_THREADS)
            s0, s1, s2, s3, s4, s5, s6, s7 = counter_push(share, g, s0, s1, s2, s3, s4, s5, s6, s7)
            hi_ptrs += step
            g += 1
        total = tree_sum_across_threads(counter_total(g, s0, s1, s2, s3, s4, s5, s6, s7), BLOCK_M)
        # lo is 0; cnt is the plain strategy's unused tile-shaped placeholder, as the tree returns it
        return total, tl.zeros([BLOCK_M], ACC_DTYPE), tl.zeros([BLOCK_M, BLOCK_N], ACC_DTYPE)
    if VECTOR_SUMS and STRATEGY == 2:
        return welford_vector_part(hi_ptrs, step, lanes, row_mask, part_start, part_end, shift_tile, ACC_DTYPE,
                                   BLOCK_M, BLOCK_N, LOOP_STAGES, TREE_VEC, PREFETCH, PART_TAIL, WELFORD_TWO_PASS)
    if VECTOR_SUMS and (STRATEGY == 3 or STRATEGY == 10):
        return stable_exp_vector_part(hi_ptrs, step, lanes, row_mask, part_start, part_end, ACC_DTYPE, BLOCK_M,
                                      BLOCK_N, LOOP_STAGES, TREE_VEC, "evict_first")   # read once
    if STRATEGY == 7 and PREFETCH and WORD_LOADS:
        return exact_word_part(src_hi_ptr, row_base, row_mask, part_start, part_end, BLOCK_M, BLOCK_N, TREE_VEC)
    if STRATEGY == 7 and PREFETCH:
        return exact_input_part(hi_ptrs, step, lanes, row_mask, part_start, part_end, BLOCK_M, BLOCK_N,
                                TREE_VEC if VECTOR_SUMS else 1)
    hi, lo, cnt = initial_state(BLOCK_M, BLOCK_N, ACC_DTYPE, STRATEGY, SRC_IS_STATE)
    loop_end = part_end
    # The extremum's value alone, and the indexed extremum on the input: whole tiles in the loop, then
    # the partial last tile apart (steps.accumulate_tile's FULL_TILE).
    FULL_TILES: tl.constexpr = (STRATEGY == 8 or STRATEGY == 9
                                or ((STRATEGY == 4 or STRATEGY == 5) and not SRC_IS_STATE))
    if FULL_TILES:
        loop_end = part_start + (part_end - part_start) // BLOCK_N * BLOCK_N
    for start in tl.range(part_start, loop_end, tile_step, num_stages=LOOP_STAGES):
        mask = row_mask[:, None] & ((start + lanes) < part_end)[None, :]
        if STRATEGY == 2:
            reciprocal, complement = tile_weights(start, part_start, BLOCK_N, ACC_DTYPE)
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
        has_tail = loop_end < part_end   # a partial last tile, where the pointers stopped ...
        if INTERLEAVED:   # ... unless this part's tiles stepped past it: then it is another part's
            has_tail = has_tail & (loop_end >= part_start) & ((loop_end - part_start) % tile_step == 0)
        if has_tail:
            mask = row_mask[:, None] & ((loop_end + lanes) < part_end)[None, :]
            hi, lo, cnt = fold_partial_tile(hi, lo, cnt, hi_ptrs, lo_ptrs, cnt_ptrs, mask, loop_end - part_start,
                                            shift_tile, ACC_DTYPE, STRATEGY, SRC_IS_STATE, USES_LO)
    if STRATEGY == 2 and not SRC_IS_STATE:
        cnt = tl.broadcast_to(welford_lane_counts(part_start, part_end, lanes, BLOCK_N)[None, :],
                              (BLOCK_M, BLOCK_N))

    cnt = lane_positions(cnt, lanes[None, :], row_mask[:, None] & ((part_start + lanes) < part_end)[None, :],
                         STRATEGY, SRC_IS_STATE)
    # the plain sums' lanes, at least HALVES_MIN_LANES of them (> 0), by tree.tree_sum_halves: an order the
    # program's warps do not change (plan.PLAIN_HALVES_MIN_LANES)
    HALVES_VEC: tl.constexpr = TREE_VEC if HALVES_MIN_LANES > 0 and BLOCK_N >= HALVES_MIN_LANES else 0
    row_hi, row_lo, row_cnt = tree_reduce_last_axis(hi, lo, cnt, BLOCK_M, BLOCK_N, STRATEGY, HALVES_VEC=HALVES_VEC)
    row_cnt = finished_index(row_cnt, part_start, STRATEGY, SRC_IS_STATE)
    return row_hi, row_lo, row_cnt


@triton.jit
def exact_input_part(ptrs, step, lanes, row_mask, part_start, part_end, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, VECTOR: tl.constexpr):
    """reduce_part for the exact filter's plain loop over the input (PREFETCH): the next tile is loaded
    into registers, with the L2 evict_first hint, while this one is folded -- the loads of the software
    pipeline without cp.async, which drops the hint. VECTOR > 1 (a thread's 16-byte vector): each
    tile's vectors are merged by the first levels of a tree of exact_combine (every element a state
    (x, 0, its key)) and the lanes are BLOCK_N // VECTOR vector states -- a VECTOR-th of the state's
    registers for the same loads and fp64 additions (2 per element: the leaf merges add |s| to t = 0).
    The order of the filter's additions is free: t bounds the error of whichever order they took, and
    what the filter certifies is the correctly rounded sum. Loading two tiles ahead instead of one
    measured slower (H100, 2026-11-27, sweep_outer --op sum --modes fast,exact, two runs, GB/s, bf16 rows:
    8192^2 2374/2364 -> 2347/2351, 65536x1024 2411/2409 -> 2347/2355, 1024x65536 2331/2328 -> 2306/2311);
    so did four loop-carried tiles, as exact_word_part's (H200, 2026-11-28, same sweep, two rounds, GB/s,
    1024x65536 at tiles of 2048 / 1024 / 512: bf16 2990-3000 -> 2821-2828 / 2990-2996 / 2893, fp16
    3028-3039 -> 2531-2547 / 2975 / 2889-2893; 16x262144 within 1%)."""
    SUMS: tl.constexpr = BLOCK_N // VECTOR
    s = tl.zeros([BLOCK_M, SUMS], tl.float64)
    t = tl.zeros([BLOCK_M, SUMS], tl.float64)
    m = tl.full([BLOCK_M, SUMS], NO_MAGNITUDE, tl.uint32)
    raw_next = tile_at(ptrs, row_mask, lanes, part_start, part_end)
    for start in range(part_start, part_end, BLOCK_N):
        raw = raw_next
        ptrs += step
        raw_next = tile_at(ptrs, row_mask, lanes, start + BLOCK_N, part_end)
        x32 = to_accumulator(raw, tl.float32)   # masked elements are 0: no term, no magnitude
        if VECTOR > 1:
            tile_s, tile_t, tile_m = tree_reduce_last_axis(x32.to(tl.float64), tl.zeros([BLOCK_M, BLOCK_N], tl.float64),
                                                           magnitude_key(x32), BLOCK_M, BLOCK_N, 7, SUMS)
            s, t, m = exact_combine(s, t, m, tile_s, tile_t, tile_m)
        else:
            s, t, m = exact_update(s, t, m, x32.to(tl.float64), magnitude_key(x32))
    return tree_reduce_last_axis(s, t, m, BLOCK_M, SUMS, 7)


@triton.jit
def word_halves(words, BF16: tl.constexpr):
    """The two 16-bit inputs of each int32 word (little-endian: element 2j in the low half), widened
    exactly to fp32: bf16 by its bits alone (shifted into place), fp16 by conversion. Not bf16 by
    conversion: sm_90 has it (F2F.F64.BF16 of the word or its .H1 half), but Triton's interpreter
    widens bf16 subnormals wrongly (0x007F -> 1.157e-38 instead of 1.166e-38; 0x0001 -> 0), which
    tests/test_sum_accuracy.py's subnormal rows caught on the CPU; the two measured within 1.5% on
    the GPU (plan.EXACT_WORD_LOADS' note)."""
    if BF16:
        low = (words << 16).to(tl.float32, bitcast=True)
        high = (words & -65536).to(tl.float32, bitcast=True)
    else:
        low = words.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
        high = (words >> 16).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    return low, high


@triton.jit
def exact_fold_words(s, t, m, words, BF16: tl.constexpr, BLOCK_M: tl.constexpr, WORDS: tl.constexpr,
                     SUMS: tl.constexpr):
    """Fold a [BLOCK_M, WORDS] tile of int32 words into the lanes' states (s, t, m) of SUMS vectors."""
    low, high = word_halves(words, BF16)   # masked words: 0, 0
    pair_s = low.to(tl.float64) + high.to(tl.float64)   # the leaf merge of (low, 0, key) and (high, 0, key)
    pair_m = tl.minimum(magnitude_key(low), magnitude_key(high))
    tile_s, tile_t, tile_m = tree_reduce_last_axis(pair_s, tl.abs(pair_s), pair_m, BLOCK_M, WORDS, 7, SUMS)
    return exact_combine(s, t, m, tile_s, tile_t, tile_m)


@triton.jit
def exact_word_part(src_ptr, row_base, row_mask, part_start, part_end, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    VECTOR: tl.constexpr):
    """exact_input_part over 16-bit rows read as int32 words (WORD_LOADS: contiguous rows of an even
    length at 4-byte aligned, even offsets; precred.launch; plan.EXACT_WORD_LOADS' note), four tiles
    in flight. Why: in exact_input_part's loop (sm_90 SASS, bf16 8192^2) the tile loaded ahead is
    repacked (PRMT) or moved into the loop-carried registers in the iteration that loads it, so the
    warp waits for that load there and the prefetch hides nothing. Here the loop carries the loaded
    words themselves, which word_halves widens, in four buffers, each reloaded (four tiles ahead) once
    it is folded (ptxas issues the reloads at the iteration's end; four buffers still read 4-5% faster
    than two: plan.EXACT_WORD_LOADS' note). Each word's two elements are one leaf merge, then the
    tree's first levels over a thread's vector, as exact_input_part: the same state, any order
    (strategies/exact.py)."""
    WORDS: tl.constexpr = BLOCK_N // 2
    SUMS: tl.constexpr = BLOCK_N // VECTOR
    AHEAD: tl.constexpr = 4 * WORDS   # words from a buffer's tile to its next one
    BF16: tl.constexpr = src_ptr.dtype.element_ty == tl.int16   # bf16 arrives as its int16 bits
    word_index = tl.arange(0, WORDS)
    ptrs = src_ptr.to(tl.pointer_type(tl.int32)) + (row_base // 2)[:, None] + (part_start // 2 + word_index)[None, :]
    # Masks in words (part_end is even): their constancy lets the loads stay 16-byte vectors.
    word_start = part_start // 2
    word_end = part_end // 2
    s = tl.zeros([BLOCK_M, SUMS], tl.float64)
    t = tl.zeros([BLOCK_M, SUMS], tl.float64)
    m = tl.full([BLOCK_M, SUMS], NO_MAGNITUDE, tl.uint32)
    # Tiles past the part (the last iteration's, and the loads ahead of it) are masked: all zeros, which
    # add nothing (and only raise t).
    first = tile_at(ptrs, row_mask, word_index, word_start, word_end)
    second = tile_at(ptrs + WORDS, row_mask, word_index, word_start + WORDS, word_end)
    third = tile_at(ptrs + 2 * WORDS, row_mask, word_index, word_start + 2 * WORDS, word_end)
    fourth = tile_at(ptrs + 3 * WORDS, row_mask, word_index, word_start + 3 * WORDS, word_end)
    for start in range(word_start, word_end, AHEAD):
        s, t, m = exact_fold_words(s, t, m, first, BF16, BLOCK_M, WORDS, SUMS)
        first = tile_at(ptrs + AHEAD, row_mask, word_index, start + AHEAD, word_end)
        s, t, m = exact_fold_words(s, t, m, second, BF16, BLOCK_M, WORDS, SUMS)
        second = tile_at(ptrs + AHEAD + WORDS, row_mask, word_index, start + AHEAD + WORDS, word_end)
        s, t, m = exact_fold_words(s, t, m, third, BF16, BLOCK_M, WORDS, SUMS)
        third = tile_at(ptrs + AHEAD + 2 * WORDS, row_mask, word_index, start + AHEAD + 2 * WORDS, word_end)
        s, t, m = exact_fold_words(s, t, m, fourth, BF16, BLOCK_M, WORDS, SUMS)
        fourth = tile_at(ptrs + AHEAD + 3 * WORDS, row_mask, word_index, start + AHEAD + 3 * WORDS, word_end)
        ptrs += AHEAD
    return tree_reduce_last_axis(s, t, m, BLOCK_M, SUMS, 7)


@triton.jit
def welford_fold_vectors(mean, m2, raw, start, part_start, shift_tile, ACC_DTYPE: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, TREE_VEC: tl.constexpr,
                         TWO_PASS: tl.constexpr):
    """Fold the full tile `raw` (the one at `start`) into the lanes' vector states (mean, m2)."""
    values = to_accumulator(raw, ACC_DTYPE) - shift_tile
    if TWO_PASS:   # each vector's (mean, m2) by two passes in registers (welford_vector_moments)
        tile_mean, tile_m2 = welford_vector_moments(values, BLOCK_M, BLOCK_N, TREE_VEC)
    else:   # each vector's (mean, m2): the lane tree's first levels, every value a state of count 1
        tile_mean, tile_m2, _ = tree_reduce_last_axis(values, tl.zeros_like(values),
                                                      tl.full([BLOCK_M, BLOCK_N], 1.0, tl.float64), BLOCK_M,
                                                      BLOCK_N, _EQUAL_COUNTS, BLOCK_N // TREE_VEC)
    reciprocal, complement = tile_weights(start, part_start, BLOCK_N, ACC_DTYPE)
    return welford_merge_vectors(mean, m2, tile_mean, tile_m2, reciprocal, complement, TREE_VEC)


@triton.jit
def welford_vector_part(ptrs, step, lanes, row_mask, part_start, part_end, shift_tile, ACC_DTYPE: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, LOOP_STAGES: tl.constexpr,
                        TREE_VEC: tl.constexpr, PREFETCH: tl.constexpr, PART_TAIL: tl.constexpr,
                        TWO_PASS: tl.constexpr = False):
    """reduce_part for Welford over the input with lanes of TREE_VEC-element vectors: per-row (mean, m2,
    count) of the part, shifted by shift_tile. The tree is reduce_part's, its first log2(TREE_VEC)
    levels taken on every tile: the vector levels, the lane's chain over its tiles (the first merge
    takes the vector's state exactly), the tree over the BLOCK_N // TREE_VEC vector lanes -- so the
    depth the bounds count (precred.plan.Pass.depth) is unchanged. Full tiles: every value counted,
    each vector's moments by two passes (TWO_PASS: strategies.welford.welford_vector_moments) or by
    equal-count merges (welford_equal_combine), merged into the lanes (welford_merge_vectors), and the
    lane tree of equal counts. The last, partial tile (only where PART_TAIL): its own tree of counted merges
    (welford_combine; masked values count 0), then merged into the row's state."""
    SUMS: tl.constexpr = BLOCK_N // TREE_VEC
    mean = tl.zeros([BLOCK_M, SUMS], ACC_DTYPE)
    m2 = tl.zeros([BLOCK_M, SUMS], ACC_DTYPE)
    full_end = part_start + (part_end - part_start) // BLOCK_N * BLOCK_N
    if PREFETCH:
        # The plain loop loading the next tile while this one is folded (exact_input_part's loads,
        # plan.WELFORD_PREFETCH); after the full tiles raw_next holds the partial last tile, masked
        # (nothing is read where the part has none).
        raw_next = tile_at(ptrs, row_mask, lanes, part_start, part_end)
        for start in range(part_start, full_end, BLOCK_N):
            raw = raw_next
            ptrs += step
            raw_next = tile_at(ptrs, row_mask, lanes, start + BLOCK_N, part_end)
            mean, m2 = welford_fold_vectors(mean, m2, raw, start, part_start, shift_tile, ACC_DTYPE, BLOCK_M, BLOCK_N,
                                            TREE_VEC, TWO_PASS)
    else:
        for start in tl.range(part_start, full_end, BLOCK_N, num_stages=LOOP_STAGES):
            raw = tl.load(ptrs, mask=row_mask[:, None], other=0, eviction_policy="evict_first")   # read once
            mean, m2 = welford_fold_vectors(mean, m2, raw, start, part_start, shift_tile, ACC_DTYPE, BLOCK_M, BLOCK_N,
                                            TREE_VEC, TWO_PASS)
            ptrs += step
    # Every lane saw the full tiles' values, TREE_VEC a tile: one count, so the lane tree merges
    # equal counts (no division). The partial last tile, if any, is merged by its own tree of counted
    # merges, then into the row's state: an element's depth stays within plan.Pass.depth (the tail's
    # log2(BLOCK_N) + 1 levels count no more than a chain of two tiles and the tree).
    full_count = ((full_end - part_start) // BLOCK_N * TREE_VEC).to(tl.float64)
    row_mean, row_m2, _ = tree_reduce_last_axis(mean, m2, tl.zeros([BLOCK_M, SUMS], tl.float64) + full_count, BLOCK_M,
                                                SUMS, _EQUAL_COUNTS)
    row_cnt = tl.zeros([BLOCK_M], tl.float64) + full_count * SUMS
    if PART_TAIL and full_end < part_end:
        mask = row_mask[:, None] & ((full_end + lanes) < part_end)[None, :]
        if PREFETCH:
            values, counts = counted_tile(raw_next, mask, shift_tile, ACC_DTYPE)
        else:
            values, counts = counted_values(ptrs, mask, shift_tile, ACC_DTYPE)
        tail_mean, tail_m2, tail_cnt = tree_reduce_last_axis(values, tl.zeros_like(values), counts, BLOCK_M,
                                                             BLOCK_N, 2)
        row_mean, row_m2, row_cnt = welford_combine(row_mean, row_m2, row_cnt, tail_mean, tail_m2, tail_cnt)
    return row_mean, row_m2, row_cnt


@triton.jit
def stable_exp_fold_vectors(s, m, raw, mask, ACC_DTYPE: tl.constexpr, BLOCK_M: tl.constexpr,
                            BLOCK_N: tl.constexpr, TREE_VEC: tl.constexpr, MASKED: tl.constexpr):
    """Fold a loaded [BLOCK_M, BLOCK_N] tile into the lanes' states (s, m), one lane per TREE_VEC
    adjacent values (a thread's 16-byte vector); each vector's terms are summed by the lane tree's first
    log2(TREE_VEC) levels. MASKED: values outside `mask` are -inf (terms 0; a vector of them leaves the
    lane as it was). Specials: strategies.stable_exp.terms_below, exp_of_gap.

    fp64 accumulator: against the lane's new maximum, m' = max(m, the vector's maximum) and
    s' = s exp(m - m') + sum exp(x - m') -- no comparison or select of a merge's direction (m' >= m),
    the maximum taken before widening (fp32 compares; widening is exact: the same maximum).
    fp32 accumulator: the vector's own state (its maximum, the terms against it) merged into the lane's
    by stable_exp_combine -- the fold above measured no faster there (plan.STABLE_EXP_VECTORS' note).
    Either way an element's term is one exponential of its gap to a maximum, and each later step on its
    path one exponential, one product and one addition: what precred.bounds.logsumexp_error_bound's
    derivation counts, at the depth plan.Pass.depth gives."""
    SUMS: tl.constexpr = BLOCK_N // TREE_VEC
    FOLD: tl.constexpr = ACC_DTYPE == tl.float64
    # The maximum is compared before widening to the fp64 accumulator (exact: the same maximum).
    values = to_accumulator(raw, tl.float32 if FOLD and raw.dtype != tl.float64 else ACC_DTYPE)
    if MASKED:
        values = tl.where(mask, values, float("-inf"))
    vectors = tl.reshape(values, (BLOCK_M, SUMS, TREE_VEC))
    vector_max = tl.max(vectors, axis=2).to(ACC_DTYPE)
    if FOLD:   # the terms against the lane's new maximum
        vector_max = tl.maximum(m, vector_max)
    terms = tl.reshape(terms_below(vectors.to(ACC_DTYPE), vector_max[:, :, None]), (BLOCK_M, BLOCK_N))
    vector_s, _, _ = tree_reduce_last_axis(terms, terms, terms, BLOCK_M, BLOCK_N, _PLAIN, SUMS)
    if FOLD:
        return s * exp_of_gap(m, vector_max) + vector_s, vector_max
    s, _, m = stable_exp_combine(s, s, m, vector_s, vector_s, vector_max)
    return s, m


@triton.jit
def stable_exp_vector_part(ptrs, step, lanes, row_mask, part_start, part_end, ACC_DTYPE: tl.constexpr,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, LOOP_STAGES: tl.constexpr,
                           TREE_VEC: tl.constexpr, EVICTION: tl.constexpr):
    """reduce_part for the stable exponential sum over the input with lanes of TREE_VEC-element
    vectors: per-row (s, -, m) of the part. Each tile is folded into the lanes' states
    (stable_exp_fold_vectors), and the BLOCK_N // TREE_VEC lanes merged by the tree at the end: an
    element's path has the vector levels, the chain and the lane tree -- the depth plan.Pass.depth
    counts -- with one exponential for its term and at most one per step after, as
    precred.bounds.logsumexp_error_bound's derivation has it. The last, partial tile's masked values
    are -inf. EVICTION: the loads' L2 policy (evict_first: read once, steps.accumulate_tile; softmax's
    row loop reads again)."""
    SUMS: tl.constexpr = BLOCK_N // TREE_VEC
    s = tl.zeros([BLOCK_M, SUMS], ACC_DTYPE)
    m = tl.full([BLOCK_M, SUMS], float("-inf"), ACC_DTYPE)
    full_end = part_start + (part_end - part_start) // BLOCK_N * BLOCK_N
    for start in tl.range(part_start, full_end, BLOCK_N, num_stages=LOOP_STAGES):
        raw = tl.load(ptrs, mask=row_mask[:, None], other=0, eviction_policy=EVICTION)
        s, m = stable_exp_fold_vectors(s, m, raw, row_mask[:, None], ACC_DTYPE, BLOCK_M, BLOCK_N, TREE_VEC, False)
        ptrs += step
    if full_end < part_end:
        mask = row_mask[:, None] & ((full_end + lanes) < part_end)[None, :]
        raw = tl.load(ptrs, mask=mask, other=0, eviction_policy=EVICTION)
        s, m = stable_exp_fold_vectors(s, m, raw, mask, ACC_DTYPE, BLOCK_M, BLOCK_N, TREE_VEC, True)
    row_s, _, row_m = tree_reduce_last_axis(s, s, m, BLOCK_M, SUMS, _STABLE_EXP)
    return row_s, tl.zeros([BLOCK_M], ACC_DTYPE), row_m


@triton.jit
def inner_kernel(
    src_hi_ptr,    # input elements, or the hi parts of partial states when SRC_IS_STATE
    src_lo_ptr,    # lo parts of partial states (read only when SRC_IS_STATE and STRATEGY uses lo)
    src_cnt_ptr,   # counts of partial states (Welford, SRC_IS_STATE)
    dst_hi_ptr,    # output [n_rows] (final pass), or hi parts of partial states [n_rows, n_parts]
    dst_lo_ptr,    # lo parts of partial states (DST_IS_STATE), or Welford's mean output (WRITE_MEAN)
    dst_cnt_ptr,   # counts of partial states (Welford, DST_IS_STATE)
    shift_ptr,     # Welford: the original input, whose row r starts at the shift_* offsets below
    part_hi_ptr,   # fused merge only: the partial states [n_rows, n_parts] (hi, lo, cnt) ...
    part_lo_ptr,
    part_cnt_ptr,
    arrivals_ptr,  # ... and an int32 arrival counter per row block, 0 on entry and on exit
    n_rows,        # number of rows = outputs of this pass
    inner_size,    # rows are (o, i) pairs with i < inner_size
    stride_outer, stride_inner, stride_red,  # element strides of the source
    red_len,       # length of the reduced axis
    chunk_len,     # elements per part, a multiple of BLOCK_N (== red_len rounded up when n_parts == 1)
    n_parts,       # parts per row
    divisor: tl.float64,   # sum: divides the value when DIVIDE (mean); Welford: divides m2 (n - correction)
    shift_inner, shift_stride_outer, shift_stride_inner,   # row r = (o, i) of the original input
    STRATEGY: tl.constexpr, ACC_DTYPE: tl.constexpr,
    SRC_IS_STATE: tl.constexpr, DST_IS_STATE: tl.constexpr, DIVIDE: tl.constexpr, USES_LO: tl.constexpr,
    TAKE_SQRT: tl.constexpr, WRITE_MEAN: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    LOOP_STAGES: tl.constexpr,   # tl.range's num_stages (precred.plan._loop_stages); 1: a plain loop
    MERGE_LANES: tl.constexpr,   # > 0: the fused merge's lanes (the second pass's); 0: no fused merge
    TILE_COUNTER: tl.constexpr,  # pairwise: each tile's lane tree, then a binary counter over tiles
    TREE_VEC: tl.constexpr,      # TILE_COUNTER: elements per 16-byte vector of the source, and ...
    TREE_THREADS: tl.constexpr,  # ... threads per program (the blocked layout the tile tree follows)
    STATE_TREE_VEC: tl.constexpr,  # the fused merge's TREE_VEC (its source: partial states) ...
    MERGE_TILE_COUNTER: tl.constexpr,  # ... and the merging pass's TILE_COUNTER
    VECTOR_SUMS: tl.constexpr = False,  # exact / Welford / stable exp over the input: lanes of TREE_VEC-element vectors
    PREFETCH: tl.constexpr = False,     # plain loops loading a tile ahead: exact_input_part, welford_vector_part
    PART_TAIL: tl.constexpr = True,     # some part ends in a partial tile (reduce_part)
    LAUNCH_DEPENDENTS: tl.constexpr = False,  # let the next launch (a later pass, a recompute) start early (PDL)
    WAIT_FOR_PREVIOUS: tl.constexpr = False,  # a programmatic dependent of the previous pass: wait for its writes
    RECOMPUTE_TILE: tl.constexpr = 0,   # > 0: the exact mode in one launch (recompute.certify_or_recompute),
    # the exact filter's input format (superaccumulator.INPUT_FORMATS; fp32's: its grid is every format's floor)
    MAN_BITS: tl.constexpr = 23, EXP_BITS: tl.constexpr = 8, LSB_EXP: tl.constexpr = -149,
    INTERLEAVED: tl.constexpr = False,  # the parts interleave their tiles (plan.Pass.interleaved)
    WORD_LOADS: tl.constexpr = False,   # the exact filter's 16-bit rows read as int32 words (exact_word_part)
    HALVES_MIN_LANES: tl.constexpr = 0,   # > 0: the plain sums' lanes by tree.tree_sum_halves from this many
    WELFORD_TWO_PASS: tl.constexpr = False,      # Welford's vector lanes: each vector's moments by two passes
    EXP_FINISH_LANES: tl.constexpr = 0,   # > 0: logsumexp's fp32 filter in one launch (certify_exp_or_recompute)
):
    programmatic_launch_points(LAUNCH_DEPENDENTS, WAIT_FOR_PREVIOUS)
    rows, row_mask, row_base, part, part_start, part_end = program_rows(
        n_rows, inner_size, stride_outer, stride_inner, red_len, chunk_len, n_parts, BLOCK_M)
    if INTERLEAVED:   # part p reads the row's tiles p, p + n_parts, p + 2 n_parts, ...
        part_start = part.to(tl.int64) * BLOCK_N
        part_end = tl.full((), 0, tl.int64) + red_len

    if STRATEGY == 2:
        shift = load_shift(shift_ptr, rows, row_mask, shift_inner, shift_stride_outer, shift_stride_inner,
                           ACC_DTYPE)
        shift_tile = shift[:, None]
    else:
        shift = 0.0
        shift_tile = 0.0
    row_hi, row_lo, row_cnt = reduce_part(src_hi_ptr, src_lo_ptr, src_cnt_ptr, rows, row_mask, row_base, part_start,
                                          part_end, stride_red, shift_tile, STRATEGY, ACC_DTYPE, SRC_IS_STATE,
                                          USES_LO, BLOCK_M, BLOCK_N, LOOP_STAGES, TILE_COUNTER, TREE_VEC,
                                          TREE_THREADS, VECTOR_SUMS, PREFETCH, INTERLEAVED, n_parts, PART_TAIL,
                                          WORD_LOADS, HALVES_MIN_LANES, WELFORD_TWO_PASS)

    state_index = rows.to(tl.int64) * n_parts + part   # workspace [n_rows, n_parts]
    if RECOMPUTE_TILE > 0:   # one pass over whole rows: the exact filter, then its uncertified rows here
        certify_or_recompute(row_hi, row_lo, row_cnt, rows, row_mask, src_hi_ptr, dst_hi_ptr, inner_size,
                             stride_outer, stride_inner, stride_red, red_len, divisor, DIVIDE, MAN_BITS, EXP_BITS,
                             LSB_EXP, RECOMPUTE_TILE, BLOCK_M)
    elif EXP_FINISH_LANES > 0:   # one pass over whole rows: logsumexp's fp32 filter, then its uncertified rows
        certify_exp_or_recompute(row_hi, row_cnt, rows, row_mask, src_hi_ptr, dst_hi_ptr, dst_lo_ptr, n_rows,
                                 inner_size, stride_outer, stride_inner, stride_red, red_len, divisor,
                                 EXP_FINISH_LANES, BLOCK_M)
    elif MERGE_LANES == 0:
        write_result(row_hi, row_lo, row_cnt, dst_hi_ptr, dst_lo_ptr, dst_cnt_ptr, rows, state_index, row_mask,
                     divisor, shift, STRATEGY, DST_IS_STATE, DIVIDE, USES_LO, TAKE_SQRT, WRITE_MEAN, MAN_BITS,
                     LSB_EXP)
    else:
        write_result(row_hi, row_lo, row_cnt, part_hi_ptr, part_lo_ptr, part_cnt_ptr, rows, state_index, row_mask,
                     divisor, shift, STRATEGY, True, DIVIDE, USES_LO, TAKE_SQRT, WRITE_MEAN, MAN_BITS, LSB_EXP)
        tl.debug_barrier()   # every thread's states stored before the arrival is published
        counter = arrivals_ptr + tl.program_id(0) // n_parts
        if tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu") == n_parts - 1:
            tl.atomic_xchg(counter, 0)
            merge_start = tl.full((), 0, tl.int64)
            merged_hi, merged_lo, merged_cnt = reduce_part(
                part_hi_ptr, part_lo_ptr, part_cnt_ptr, rows, row_mask, rows.to(tl.int64) * n_parts, merge_start,
                merge_start + n_parts, 1, shift_tile, STRATEGY, ACC_DTYPE, True, USES_LO, BLOCK_M, MERGE_LANES, 1,
                MERGE_TILE_COUNTER, STATE_TREE_VEC, TREE_THREADS, False, False, HALVES_MIN_LANES=HALVES_MIN_LANES)
            write_result(merged_hi, merged_lo, merged_cnt, dst_hi_ptr, dst_lo_ptr, dst_cnt_ptr, rows, rows,
                         row_mask, divisor, shift, STRATEGY, False, DIVIDE, USES_LO, TAKE_SQRT, WRITE_MEAN,
                         MAN_BITS, LSB_EXP)
