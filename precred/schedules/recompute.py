"""Second stages of the filtered modes: recompute the outputs the filter could not certify.

`exact` (recompute_kernel): with the integer superaccumulator -- or, for small inputs planned as one
inner pass and for short columns planned as one outer pass, inside the filter's own launch
(certify_or_recompute, certify_or_recompute_columns; precred.plan.exact_in_one_launch);
logsumexp's fp64 mode on 16-bit inputs (exp_recompute_kernel, at the end): in fp64 -- or, where the
filter is one inner pass of one part a row, inside its own launch (certify_exp_or_recompute;
precred.plan.certified_exp_in_one_launch). The rest of this note is about the first.

Runs after the filter's last pass (the shared schedules with strategies/exact.py), which wrote every
output and a flag per output (1: certified correctly rounded). A program owns BLOCK_O outputs and one
chunk of the reduced axis (precred.plan.plan_recompute: as few outputs as keep the launch to one round of
resident programs); if all its outputs are certified it reads their flags and stops -- the whole cost
of this launch on ordinary data. Otherwise, for each uncertified output, it streams its
chunk of the row from the original input in [BLOCK_R] tiles into [BLOCK_R, LIMBS] int64 limb sums
(strategies/superaccumulator.py) and reduces them across lanes.

One chunk per row (CHUNKED false): the program finishes the output itself. Several chunks (few,
long rows): each program adds its limbs into the row's int64 limb sums with atomics and counts itself
in; the last to arrive reads the sums back (through atomics, past any stale cache), zeroing them and
the row's counter (the launcher reuses the scratch: it is zero on entry and on exit), and finishes.
Integer addition is exact and order-free, so the result does not depend on who arrives last.

The row layout is the launcher's (outer, reduce, inner) view: output r = (o, i) reads elements
o*stride_outer + i*stride_inner + j*stride_red, j < red_len (int64 offsets).
"""
import triton
import triton.language as tl

from ..strategies.exact import exact_finish
from ..strategies.superaccumulator import LIMBS, accumulate_limb_columns, accumulate_limbs, finish_limbs
from .finish import finish_logsumexp, round_to_output, to_accumulator
from .grid import block_start
from ..strategies.stable_exp import terms_below
from .steps import programmatic_launch_points, store_certified_logsumexp
from .tree import tree_reduce_last_axis


@triton.jit
def raw_bits(raw):
    """The loaded values' bit patterns as int32, zero-extended for 16-bit formats (bf16 arrives as its
    int16 bit pattern, see precred.launch)."""
    if raw.dtype == tl.float32:
        bits = raw.to(tl.int32, bitcast=True)
    else:   # fp16, or bf16's int16 bit pattern
        bits = raw.to(tl.uint16, bitcast=True).to(tl.int32)
    return bits


@triton.jit
def row_limbs(src_ptr, r, inner_size, stride_outer, stride_inner, stride_red, start, end, MAN_BITS: tl.constexpr,
              EXP_BITS: tl.constexpr, BLOCK_R: tl.constexpr):
    """The [LIMBS, 1] int64 limb sums of elements [start, end) of output r's row (the (outer, reduce,
    inner) view: o = r // inner_size, i = r % inner_size), streamed in BLOCK_R lanes."""
    base = (r // inner_size).to(tl.int64) * stride_outer + (r % inner_size).to(tl.int64) * stride_inner
    lanes = tl.arange(0, BLOCK_R)
    acc = tl.zeros([BLOCK_R, LIMBS], tl.int64)
    for position in range(start, end, BLOCK_R):
        j = position + lanes
        raw = tl.load(src_ptr + base + j * stride_red, mask=j < end, other=0)
        acc = accumulate_limbs(acc, raw_bits(raw), MAN_BITS, EXP_BITS)
    return tl.sum(acc, axis=0)[:, None]


@triton.jit
def next_pending(pending, slots, after, BLOCK: tl.constexpr):
    """The smallest slot above `after` where `pending` holds, or BLOCK when none does: how the programs
    below visit only their uncertified outputs, in order (a reduction over flags they hold, no load
    per output). Start with after = -1."""
    return tl.min(tl.where(pending & (slots > after), slots, BLOCK))


@triton.jit
def group_members(in_groups, groups, g):
    """Which members of group g are flagged: row g of a [GROUPS, MEMBERS] tile of 0 / 1 flags
    (groups = arange(GROUPS)), as booleans -- a reduction over the tile, as the flags are held."""
    return tl.max(tl.where(groups[:, None] == g, in_groups, 0), 0) > 0


@triton.jit
def certify_or_recompute(s, t, m, out_index, mask, src_ptr, out_ptr, inner_size, stride_outer, stride_inner,
                         stride_red, red_len, divisor, DIVIDE: tl.constexpr, MAN_BITS: tl.constexpr,
                         EXP_BITS: tl.constexpr, LSB_EXP: tl.constexpr, BLOCK_R: tl.constexpr,
                         BLOCK: tl.constexpr):
    """The exact mode in one launch (one inner pass over the input, a program holding whole rows): the
    filter's state (s, t, m) of BLOCK outputs (out_index, where mask) is finished; the certified
    outputs are written, and the program recomputes each of the others from its row -- the whole
    reduced axis, [0, red_len) -- with the superaccumulator, in order, as recompute_kernel does for a
    row of one chunk: the same bits as the two launches give (one correctly rounded value). No flags
    are written. On ordinary data the loop below never runs, but its registers count in the kernel's
    (sm_90, 64 x 4096 fp32: 63 -> 108 a thread), which is why only small inputs take this path
    (precred.plan.exact_in_one_launch)."""
    value, certified = exact_finish(s, t, m, divisor, DIVIDE, out_ptr.dtype.element_ty, MAN_BITS, LSB_EXP)
    tl.store(out_ptr + out_index, round_to_output(value, out_ptr.dtype.element_ty), mask=mask & certified)
    pending = mask & (certified == 0)
    row_start = tl.full((), 0, tl.int64)   # int64 offsets along the row
    slots = tl.arange(0, BLOCK)
    k = next_pending(pending, slots, -1, BLOCK)
    while k < BLOCK:
        r = tl.sum(tl.where(slots == k, out_index, 0))   # the output index of slot k
        limbs = row_limbs(src_ptr, r, inner_size, stride_outer, stride_inner, stride_red, row_start, red_len,
                          MAN_BITS, EXP_BITS, BLOCK_R)
        recomputed = finish_limbs(limbs, red_len, DIVIDE, LSB_EXP, out_ptr.dtype.element_ty)
        tl.store(out_ptr + r + tl.arange(0, 1), round_to_output(recomputed, out_ptr.dtype.element_ty))
        k = next_pending(pending, slots, k, BLOCK)


@triton.jit
def certify_exp_or_recompute(s, m, out_index, mask, src_ptr, out_ptr, flags_ptr, n_out, inner_size, stride_outer,
                             stride_inner, stride_red, red_len, margin, LANES: tl.constexpr, BLOCK: tl.constexpr):
    """logsumexp's fp32 filter (strategy 10) in one launch (one inner pass, a program holding whole rows):
    the filter's state (s, m) of BLOCK outputs (out_index, where mask) is finished as write_result
    does (steps.store_certified_logsumexp: the certified value, or the row's maximum m, and the flag),
    then, where some output is not certified, the program redoes those rows in fp64 with
    exp_recompute_kernel's own code (recompute_rows, unchunked: one fp64 exponential a term against the
    maximum just stored, LANES lanes along the row, the fixed lane tree; depth
    precred.plan.exp_finish_depth), and flags them 2. On ordinary data the branch is one reduction of
    the flags; nothing is left to a recompute launch."""
    certified = store_certified_logsumexp(s, m, margin, out_ptr, flags_ptr, out_index, mask)
    unkept = mask & (certified == 0)
    if tl.max(unkept.to(tl.int32), 0) > 0:
        # the maxima just stored came from other threads (the pass's layout): a CTA barrier orders them
        # before recompute_rows reads them back and before its stores, which must be the last
        tl.debug_barrier()
        recompute_rows(out_index, unkept, 0, 0, red_len, src_ptr, out_ptr, out_ptr, flags_ptr, n_out, inner_size,
                       stride_outer, stride_inner, stride_red, 1, False, BLOCK, LANES, False, 1)
        tl.store(flags_ptr + out_index, tl.full(out_index.shape, 2, tl.int8), mask=unkept)


@triton.jit
def certify_or_recompute_columns(s, t, m, out_index, col_mask, first_col, src_base, out_base, src_ptr, out_ptr,
                                 stride_inner, stride_red, red_len, divisor, DIVIDE: tl.constexpr,
                                 MAN_BITS: tl.constexpr, EXP_BITS: tl.constexpr, LSB_EXP: tl.constexpr,
                                 BLOCK_I: tl.constexpr, COLUMNS: tl.constexpr, ROWS: tl.constexpr):
    """certify_or_recompute for the outer schedule's one pass over short columns (a program holding
    whole columns of a strided axis, precred.plan.exact_in_one_launch): the filter's state (s, t, m)
    of the BLOCK_I columns first_col + [0, BLOCK_I) is finished, the certified outputs are written, and
    the program recomputes the others with the superaccumulator, COLUMNS side by side (a thread a
    column: loads coalesced along the kept axis), down the whole column -- [0, red_len), ROWS rows a
    step -- the same limbs as recompute_kernel's, so the same bits. Column groups with nothing to
    recompute are skipped; on ordinary data none is entered. Column i's elements start at
    src_base + i * stride_inner, its output is out_base + i."""
    value, certified = exact_finish(s, t, m, divisor, DIVIDE, out_ptr.dtype.element_ty, MAN_BITS, LSB_EXP)
    tl.store(out_ptr + out_index, round_to_output(value, out_ptr.dtype.element_ty), mask=col_mask & certified)
    pending = (col_mask & (certified == 0)).to(tl.int32)
    if tl.max(pending, axis=0) > 0:
        GROUPS: tl.constexpr = BLOCK_I // COLUMNS
        group = tl.arange(0, GROUPS)
        pending_groups = tl.reshape(pending, [GROUPS, COLUMNS])
        groups_pending = tl.max(pending_groups, axis=1)   # [GROUPS]: any column of the group to recompute
        for g in range(0, GROUPS):
            if tl.max(tl.where(group == g, groups_pending, 0), axis=0) > 0:
                todo = group_members(pending_groups, group, g)
                cols = first_col + g * COLUMNS + tl.arange(0, COLUMNS)
                ptrs = src_ptr + src_base + cols.to(tl.int64) * stride_inner
                acc = tl.zeros([LIMBS, COLUMNS], tl.int64)
                for start in range(0, red_len, ROWS):
                    for r in tl.static_range(ROWS):   # a row of the group's columns at a time (one a thread)
                        j = start + r
                        raw = tl.load(ptrs + j.to(tl.int64) * stride_red, mask=todo & (j < red_len), other=0)
                        acc = accumulate_limb_columns(acc, raw_bits(raw), MAN_BITS, EXP_BITS)
                recomputed = finish_limbs(acc, red_len, DIVIDE, LSB_EXP, out_ptr.dtype.element_ty)
                tl.store(out_ptr + out_base + cols,
                         round_to_output(recomputed, out_ptr.dtype.element_ty), mask=todo)


@triton.jit
def recompute_kernel(
    src_ptr,        # the original input (bf16 as int16 bit patterns)
    out_ptr,        # [n_out] outputs, written by the filter; uncertified ones are overwritten here
    flags_ptr,      # [n_out] int8: 1 where the filter certified the output
    limbs_ptr,      # [n_out, LIMBS] int64 zeros (CHUNKED only): the rows' limb sums; zeros again on exit
    arrivals_ptr,   # [n_out] int32 zeros (CHUNKED only): chunks of the row done so far; zeros on exit
    n_out, inner_size, stride_outer, stride_inner, stride_red, red_len,
    chunk_len,      # elements per chunk, a multiple of BLOCK_R
    n_chunks,       # chunks per row
    count,          # the element count n (int64), the divisor of a mean
    MAN_BITS: tl.constexpr, EXP_BITS: tl.constexpr, LSB_EXP: tl.constexpr,   # the input format
    DIVIDE: tl.constexpr, CHUNKED: tl.constexpr, BLOCK_O: tl.constexpr, BLOCK_R: tl.constexpr,
    WAIT_FOR_PREVIOUS: tl.constexpr,   # launched as a programmatic dependent of the filter's last pass
):
    programmatic_launch_points(False, WAIT_FOR_PREVIOUS)   # then the filter's outputs and flags are visible
    first = block_start(tl.program_id(0), BLOCK_O, n_out)
    chunk = tl.program_id(1)
    slots = tl.arange(0, BLOCK_O)
    outputs = first + slots
    flags = tl.load(flags_ptr + outputs, mask=outputs < n_out, other=1)
    pending = flags == 0
    k = next_pending(pending, slots, -1, BLOCK_O)
    slot = tl.arange(0, LIMBS)[:, None]
    one = tl.arange(0, 1)
    start = chunk.to(tl.int64) * chunk_len
    end = tl.minimum(start + chunk_len, red_len)
    while k < BLOCK_O:
        r = first + k
        limbs = row_limbs(src_ptr, r, inner_size, stride_outer, stride_inner, stride_red, start, end, MAN_BITS,
                          EXP_BITS, BLOCK_R)
        if CHUNKED:
            row_sums = limbs_ptr + r.to(tl.int64) * LIMBS + slot
            tl.atomic_add(row_sums, limbs)
            tl.debug_barrier()   # every thread's limb additions before the arrival is published
            if tl.atomic_add(arrivals_ptr + r, 1, sem="acq_rel", scope="gpu") == n_chunks - 1:
                tl.debug_barrier()   # the acquiring atomic before any thread's exchange of the sums
                # read the sums and leave the scratch zeroed for the next launch
                total = tl.atomic_xchg(row_sums, tl.zeros([LIMBS, 1], tl.int64))
                tl.atomic_xchg(arrivals_ptr + r, 0)
                value = finish_limbs(total, count, DIVIDE, LSB_EXP, out_ptr.dtype.element_ty)
                tl.store(out_ptr + r + one, round_to_output(value, out_ptr.dtype.element_ty))
        else:
            value = finish_limbs(limbs, count, DIVIDE, LSB_EXP, out_ptr.dtype.element_ty)
            tl.store(out_ptr + r + one, round_to_output(value, out_ptr.dtype.element_ty))
        k = next_pending(pending, slots, k, BLOCK_O)


_PLAIN = tl.constexpr(0)   # strategies.PLAIN: the sums' combine in the fixed lane tree


@triton.jit
def exp_recompute_kernel(
    src_ptr,        # the original input (bf16 as int16 bit patterns)
    out_ptr,        # [n_out] outputs, written by logsumexp's fp32 filter: an uncertified one holds its
                    # row's maximum (the reference here), and is overwritten with its result
    flags_ptr,      # [n_out] int8: 1 where the filter certified the output
    part_s_ptr,     # [n_out, n_chunks] fp64 (CHUNKED only): each chunk's sum of exp(x - the row's maximum)
    arrivals_ptr,   # [n_out] int32 zeros (CHUNKED only): chunks of the row done so far; zeros on exit
    n_out, inner_size, stride_outer, stride_inner, stride_red, red_len,
    chunk_len,      # elements per chunk, a multiple of BLOCK_R and GROUP_R (CHUNKED), else red_len
    n_chunks,       # chunks per row
    CHUNKED: tl.constexpr, BLOCK_O: tl.constexpr,
    BLOCK_R: tl.constexpr,        # lanes of a lone row's tiles
    ONE_TILE: tl.constexpr,       # chunk_len <= BLOCK_R: a lone row's chunk is one tile (no loop)
    GROUP: tl.constexpr,          # rows of a group (adjacent outputs), a power of two dividing BLOCK_O; 1: none
    GROUP_R: tl.constexpr,        # lanes of a group's tiles
    GROUP_ONE_TILE: tl.constexpr,   # chunk_len <= GROUP_R
    GROUP_MIN: tl.constexpr,      # uncertified rows from which a group is recomputed whole
    BLOCK_CHUNKS: tl.constexpr,   # a power of two >= n_chunks (CHUNKED): the chunks' merge tree
    WAIT_FOR_PREVIOUS: tl.constexpr,   # launched as a programmatic dependent of the filter's last pass
):
    """logsumexp's fp64 mode on 16-bit inputs (and the `accurate` mode's contiguous fp32 rows), second
    stage: each output the filter could not certify (strategy 10, schedules/finish.py
    certify_logsumexp; the accurate rows kernel's own bound) is recomputed from its row in fp64 by the
    programs that own it: one per BLOCK_O outputs and chunk of the row, which read their flags and stop
    when all are certified.

    The filter leaves in an uncertified output its row's maximum M (exact in the output's format: it
    is one of the inputs, and the output has the input's format; finite, since a row with an infinite
    or NaN element has a non-finite result, which the filter keeps). So the recompute reads each row
    once: one exponential per element against M (strategies/stable_exp.py terms_below), added along
    each lane over the chunk's tiles and then by the fixed lane tree -- no maximum to find first, no
    running maximum (whose rescales chain the exponentials), and the chunks' sums need no rescaling.
    (Handed a non-finite reference -- the tests' cleared flags do -- terms_below's rule still gives
    torch's answers: NaN for NaN, +inf for +inf, -inf for a row of -inf.)

    Rows go in groups of GROUP adjacent outputs (precred.plan.ExpRecomputePlan): a group holding at
    least GROUP_MIN uncertified rows is recomputed whole, as [GROUP, GROUP_R] tiles, and only its
    uncertified rows are written; a group with fewer (the scattered rows of ordinary data) recomputes
    them one at a time in [1, BLOCK_R] tiles. Along a strided axis (dim 0 of a matrix: an element a
    sector) a group's tile rows are runs of adjacent elements (a 32-byte sector for 16 bf16 columns,
    which one column's loads would fetch 16 times over); along a contiguous one a group keeps several
    rows' loads in flight where a lone row's are one after the other. Each row's result depends on its
    data and on which of the two ways took it, both fixed by the flags: the same bits on every run. (A
    group's certified rows are computed against their kept result, never written.)

    Several chunks (long rows): each program stores its chunk's sum and counts itself in on the row's
    counter; the last to arrive reads the row's sums (fixed places, so the bits do not depend on who
    arrives last), adds them by the fixed tree over BLOCK_CHUNKS lanes, writes M + log(S) and resets
    the counter to 0 for the next launch. Ordering as the inner schedule's fused merge: a CTA barrier,
    then the counters' acq_rel atomics (gpu scope), and a barrier again before the sums are read
    (by threads other than those whose atomics acquired, in a group).
    Error: precred.bounds.logsumexp_error_bound("fp64", ...) with precred.plan.ExpRecomputePlan.depth
    (the larger of the two tilings'): each term takes one exponential and no product, then depth
    additions, within the derivation's h + 1 exponentials and h products."""
    programmatic_launch_points(False, WAIT_FOR_PREVIOUS)   # then the filter's outputs and flags are visible
    first = block_start(tl.program_id(0), BLOCK_O, n_out)
    chunk = tl.program_id(1)
    slots = tl.arange(0, BLOCK_O)
    flags = tl.load(flags_ptr + first + slots, mask=first + slots < n_out, other=1)
    pending = flags == 0
    start = chunk.to(tl.int64) * chunk_len
    end = tl.minimum(start + chunk_len, red_len)
    if GROUP > 1:   # the groups with at least GROUP_MIN uncertified rows, whole; theirs are done
        GROUPS: tl.constexpr = BLOCK_O // GROUP
        groups = tl.arange(0, GROUPS)
        members = tl.arange(0, GROUP)
        in_groups = tl.reshape(pending.to(tl.int32), [GROUPS, GROUP])
        whole = tl.sum(in_groups, 1) >= GROUP_MIN
        g = next_pending(whole, groups, -1, GROUPS)
        while g < GROUPS:
            todo = group_members(in_groups, groups, g)
            recompute_rows(first + g * GROUP + members, todo, chunk, start, end, src_ptr, out_ptr, part_s_ptr,
                           arrivals_ptr, n_out, inner_size, stride_outer, stride_inner, stride_red,
                           n_chunks, CHUNKED, GROUP, GROUP_R, GROUP_ONE_TILE, BLOCK_CHUNKS)
            g = next_pending(whole, groups, g, GROUPS)
        pending = pending & (tl.reshape(tl.broadcast_to(whole[:, None], [GROUPS, GROUP]), [BLOCK_O]) == 0)
    k = next_pending(pending, slots, -1, BLOCK_O)   # the rest one at a time
    while k < BLOCK_O:
        recompute_rows(first + k + tl.arange(0, 1), tl.full([1], 1, tl.int1), chunk, start, end, src_ptr, out_ptr,
                       part_s_ptr, arrivals_ptr, n_out, inner_size, stride_outer, stride_inner,
                       stride_red, n_chunks, CHUNKED, 1, BLOCK_R, ONE_TILE, BLOCK_CHUNKS)
        k = next_pending(pending, slots, k, BLOCK_O)


@triton.jit
def recompute_rows(r, todo, chunk, start, end, src_ptr, out_ptr, part_s_ptr, arrivals_ptr, n_out,
                   inner_size, stride_outer, stride_inner, stride_red, n_chunks, CHUNKED: tl.constexpr,
                   ROWS: tl.constexpr, BLOCK_R: tl.constexpr, ONE_TILE: tl.constexpr, BLOCK_CHUNKS: tl.constexpr):
    """exp_recompute_kernel's work on rows r ([ROWS] output indices; written where todo) over the
    chunk [start, end), in [ROWS, BLOCK_R] tiles: each row's terms against its reference M (the
    output's value, widened to fp64) along the BLOCK_R lanes, the lane tree, then the output -- or,
    chunked, the chunk's sum and the last arrival's merge. Rows past n_out load -inf and are never
    written. (Also, unchunked, the accurate rows kernel's fp64 finish of its held rows:
    accurate_rows._finish_in_fp64.)"""
    lanes = tl.arange(0, BLOCK_R)[None, :]
    base = (r // inner_size).to(tl.int64) * stride_outer + (r % inner_size).to(tl.int64) * stride_inner
    rows_ptr = src_ptr + base[:, None]
    valid = (r < n_out)[:, None]
    m = to_accumulator(tl.load(out_ptr + r, mask=r < n_out, other=0), tl.float64)
    if ONE_TILE:
        s = terms_below(_rows_tile(rows_ptr, start, end, stride_red, lanes, valid), m[:, None])
    else:
        s = tl.zeros([ROWS, BLOCK_R], tl.float64)
        for position in range(start, end, BLOCK_R):
            s += terms_below(_rows_tile(rows_ptr, position, end, stride_red, lanes, valid), m[:, None])
    rows_s = tree_reduce_last_axis(s, s, s, ROWS, BLOCK_R, _PLAIN)[0]
    if CHUNKED:
        part = r.to(tl.int64) * n_chunks
        tl.store(part_s_ptr + part + chunk, rows_s, mask=todo)
        tl.debug_barrier()   # every thread's stores issued before the arrivals are published
        arrived = tl.atomic_add(arrivals_ptr + r, 1, mask=todo, sem="acq_rel", scope="gpu")
        last = todo & (arrived == n_chunks - 1)
        if tl.max(last.to(tl.int32), 0) > 0:
            tl.atomic_xchg(arrivals_ptr + r, 0, mask=last)
            tl.debug_barrier()   # the acquiring atomics before any thread's loads of the sums
            c = tl.arange(0, BLOCK_CHUNKS)[None, :]
            chunk_s = tl.load(part_s_ptr + part[:, None] + c, mask=(c < n_chunks) & last[:, None], other=0.0)
            total_s = tree_reduce_last_axis(chunk_s, chunk_s, chunk_s, ROWS, BLOCK_CHUNKS, _PLAIN)[0]
            tl.store(out_ptr + r, finish_logsumexp(total_s, m, out_ptr.dtype.element_ty), mask=last)
    else:
        tl.store(out_ptr + r, finish_logsumexp(rows_s, m, out_ptr.dtype.element_ty), mask=todo)


@triton.jit
def _rows_tile(rows_ptr, position, end, stride_red, lanes, valid):
    """Elements position + lanes of some rows (below end, of valid rows; -inf elsewhere) in fp64, a
    [rows, lanes] tile. The padding is set after widening: under the interpreter bf16 arrives as int16
    bits, where -inf has no literal."""
    j = position + lanes
    inside = (j < end) & valid
    raw = tl.load(rows_ptr + j.to(tl.int64) * stride_red, mask=inside, other=0)
    return tl.where(inside, to_accumulator(raw, tl.float64), float("-inf"))
