"""logsumexp's `accurate` mode over a strided reduced axis of fp32 input (dim 0 of a matrix; any axis
whose kept inner axis is contiguous): the numerics of schedules/accurate_rows.py, laid out as the outer
schedule (schedules/outer.py) -- columns along the contiguous axis, tiles of BLOCK_R x BLOCK_I.

The input is the launcher's (outer, reduce, inner) view. A program owns one outer index, BLOCK_I
consecutive inner indices (columns) and one part of the reduced axis. The planner sizes BLOCK_I to
4 columns a thread (one 16-byte load a lane) across the warps, so each thread holds all BLOCK_R lanes
of its columns: the tile's column maxima and sums run in registers. Each column keeps one state
(m fp32, s fp64, r fp32) over the tiles of its part, as a streamed row's thread does over its elements
(accurate_rows.py), but m is a lagging reference, not the running maximum: per tile it moves to the
tile's column maximum only where that lies more than _LAG = 8 above it (computed in fp32: a move
happens wherever the true gap exceeds 8, and where none happens every element is at most 8 (1 + 2^-24)
above m). The terms exp(x - m') of exact gaps are then at most e^8.000001 (no overflow: n e^8 is far
inside fp64) and S = sum exp(x - m) >= 1 still (the maximum M >= m, its term >= 1), so every step of
accurate_rows.py's bound holds with m for M and lse = m + log(S). Why lag: each move rescales the
column's s by f = exp(m - m') (the exact gap again, c u) and adds the rescaled mass s f to r; with the
running maximum a column read in many short tiles moves at each record of its maximum, and each
move adds about the mass so far, so R ~ S on ordinary data -- enough to cost the 2-ulp certificate
its margin (with the running maximum, one of 16 normal columns of 500 in tiles of 8 was left to the
recompute: tests/test_logsumexp.py test_accurate_columns_keep_what_their_bound_allows); with the lag, ordinary data (a column's spread within 8 of its first tile's
maximum) never moves after the first tile (R = 0), and each move of adversarial data shrinks the old
mass by e^-8 at least against the new reference -- R is computed all the same. So an element's term carries
c u for its own exp and c u per rescale of its column after it (at most tiles - 1 of them), and the
rescales' masses add up to R: the bound, the certificate and the specials are accurate_rows.py's (the
clamp's upper end at 16 above the reference, binding only against +inf), with `tiles` a part's tiles.

One part (the planner's choice where the columns alone fill the GPU): the program finishes its columns
(accurate_rows._finish: fp32 results and their flags). Several: each writes its columns' states to a
[n_parts, outputs] fp64 workspace, and accurate_columns_merge_kernel -- the next launch -- merges each
output's parts against their maximum by fp64 exps (a rescale of each part's s and r, as the rows'
parts merge) and finishes it. Its programs own few outputs and stream over the parts (lanes along
them), so the merge of the few-column inputs that take most parts (262144 x 256: hundreds of parts)
is spread over many programs. Either way the recompute then redoes the outputs left unflagged, from
the input, by the same launches with RECOMPUTE set: the fp64 mode's numerics on the unkept columns
alone, in column blocks of plan.ACCURATE_COLUMNS_RECOMPUTE_BLOCK_I (a per-output recompute,
schedules/recompute.py, would read each strided column element by element), or column by column where
a block has at most plan.ACCURATE_COLUMNS_SPARSE_MAX of them. Its bound is the fp64 mode's at
AccurateColumnsPlan.recompute_depth. The first stage's finishing programs (the unsplit kernel, or the
merge) put each block with an unkept output on a work list in device memory (_list_unkept), and the
recompute's launches run small fixed grids that walk it (plan.ACCURATE_COLUMNS_RECOMPUTE_PROGRAMS_PER_SM):
on ordinary data their programs read the list's length and end -- before, a grid over every block
read each block's flags, which cost ordinary data ~2 us more a call on the H200.

fp64 roundings (precred.plan.AccurateColumnsPlan.fp64_depth): a tile's sum over the BLOCK_R lanes, a
rescaling product and an addition per later tile, the merge's product and its sum over the parts. The
merge's gaps m_part - M are differences of fp32 values in fp64: exact unless their exponents lie over
29 apart, and then off by at most |m_part - M| 2^-53 < 2^-43 relative where the exp is not flushed --
inside rho's 2^-10 padding.

Determinism: the tiles, the lanes' sums (one compiled order), the parts (merged in part order), the
merge and the recompute's choice of path (the flags') are all fixed by the plan and the input; no
atomics.
"""
import triton
import triton.language as tl

from .accurate_rows import _finish, _reference, _terms
from .finish import finish_logsumexp
from .grid import block_indices
from .recompute import next_pending
from .steps import programmatic_launch_points

# How far an element may lie above its column's reference before the reference moves up to it.
_LAG = tl.constexpr(8.0)


@triton.jit
def accurate_logsumexp_columns_kernel(src_ptr, dst_ptr, flags_ptr, part_m_ptr, part_s_ptr, part_r_ptr, work_ptr,
                                      inner_size, stride_outer, stride_red, stride_inner, red_len, chunk_len,
                                      n_parts, n_outputs, exp_error, fp64_slack,
                                      BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr, LOOP_STAGES: tl.constexpr,
                                      SPLIT: tl.constexpr, RECOMPUTE: tl.constexpr, RECOMPUTE_BLOCK_I: tl.constexpr,
                                      SPARSE_MAX: tl.constexpr, SPARSE_LANES: tl.constexpr,
                                      SPARSE_WIDTH: tl.constexpr, LAUNCH_DEPENDENTS: tl.constexpr,
                                      WAIT_FOR_PREVIOUS: tl.constexpr, FULL_TILES: tl.constexpr = False):
    """The first stage: program (column block, part) takes the columns' states over the part's rows
    [part * chunk_len, + chunk_len) of the reduced axis; SPLIT: stored at [part, output] of the part_*
    workspace (m widened to fp64), else finished into dst (fp32) and flags (int8, 1 where kept; module
    docstring), each recompute block (RECOMPUTE_BLOCK_I columns) with an unkept one put on the work list
    (_list_unkept). FULL_TILES (the launcher's promise: BLOCK_I divides inner_size, BLOCK_R divides
    chunk_len and red_len) loads the tiles unmasked.
    RECOMPUTE: the second stage. Its programs walk the work list's (block, part) pairs in batches of
    BLOCK_I // RECOMPUTE_BLOCK_I (a warp each: _recompute_batch) -- none on ordinary data, where each
    program reads the list's length and ends -- and, unsplit, empty the list for the next call (its
    last reader)."""
    programmatic_launch_points(LAUNCH_DEPENDENTS, WAIT_FOR_PREVIOUS)
    if RECOMPUTE:
        BATCH: tl.constexpr = BLOCK_I // RECOMPUTE_BLOCK_I
        per_outer = tl.cdiv(inner_size, RECOMPUTE_BLOCK_I)
        listed = _listed(work_ptr, inner_size, n_outputs, RECOMPUTE_BLOCK_I)
        entries = tl.load(work_ptr) * n_parts
        slots = tl.arange(0, BLOCK_I)
        for batch in range(tl.program_id(0), tl.cdiv(entries, BATCH), tl.num_programs(0)):
            block, live = _recompute_batch(src_ptr, dst_ptr, flags_ptr, part_m_ptr, part_s_ptr, listed, batch,
                                           entries, per_outer, inner_size, stride_outer, stride_red, stride_inner,
                                           red_len, chunk_len, n_parts, n_outputs, BLOCK_R, BLOCK_I,
                                           RECOMPUTE_BLOCK_I, LOOP_STAGES, SPLIT, SPARSE_MAX, SPARSE_LANES,
                                           SPARSE_WIDTH)
            if not SPLIT:   # the blocks' claims, cleared for the next call
                tl.store(work_ptr + _CLAIMS + block, 0, mask=live & (slots % RECOMPUTE_BLOCK_I == 0))
        if not SPLIT:
            _release_list(work_ptr)
    else:
        pid = tl.program_id(0)
        part = pid % n_parts
        tile = pid // n_parts
        n_blocks = tl.cdiv(inner_size, BLOCK_I)
        o = tile // n_blocks
        cols = block_indices(tile % n_blocks, BLOCK_I, inner_size)
        col_ok = cols < inner_size
        out_index = o.to(tl.int64) * inner_size + cols
        lanes = tl.arange(0, BLOCK_R)
        first = part.to(tl.int64) * chunk_len
        end = tl.minimum(first + chunk_len, red_len)
        ptrs = (src_ptr + o.to(tl.int64) * stride_outer + (first + lanes)[:, None] * stride_red
                + cols[None, :].to(tl.int64) * stride_inner)
        step = tl.full((), BLOCK_R, tl.int64) * stride_red
        s = tl.zeros([BLOCK_I], tl.float64)
        r = tl.zeros([BLOCK_I], tl.float32)
        m = tl.full([BLOCK_I], float("-inf"), tl.float32)
        for start in tl.range(first, end, BLOCK_R, num_stages=LOOP_STAGES):
            if FULL_TILES:   # every tile inside the input: no mask, nor its select of -inf an element
                x = tl.load(ptrs, eviction_policy="evict_first")   # read once
            else:
                mask = ((start + lanes) < end)[:, None] & col_ok[None, :]
                x = tl.load(ptrs, mask=mask, other=float("-inf"), eviction_policy="evict_first")
            # the reference moves to the tile's maximum only when that is over _LAG above it (or it was
            # -inf, or the maximum is +inf: inf - m > _LAG; NaN differences never move it)
            top = tl.max(x, 0)
            moved = tl.where(top - m > _LAG, top, m)
            ref, lower, upper = _reference(moved, 2.0 * _LAG)
            f = tl.where(m == moved, 1.0, _terms(m, ref, lower, upper))
            new = tl.sum(_terms(x, ref[None, :], lower[None, :], upper[None, :]).to(tl.float64), 0)
            scaled = s * f.to(tl.float64)
            r = r * f + tl.where(f != 1.0, scaled.to(tl.float32), 0.0)
            s = scaled + new
            m = moved
            ptrs += step
        if SPLIT:
            slot = part.to(tl.int64) * n_outputs + out_index
            tl.store(part_m_ptr + slot, m.to(tl.float64), mask=col_ok)
            tl.store(part_s_ptr + slot, s, mask=col_ok)
            tl.store(part_r_ptr + slot, r.to(tl.float64), mask=col_ok)
        else:
            kept = _finish(dst_ptr, flags_ptr, out_index, col_ok, m, s, r, exp_error, fp64_slack)
            _list_unkept(work_ptr, out_index, col_ok & ~kept, inner_size, n_outputs, RECOMPUTE_BLOCK_I)


# The work list (int32): [0] its length, [1] the count of its last launch's programs done with it, then
# a claim per recompute block (1 while listed) -- all zero on entry and on exit of a call --, then the
# listed blocks (o * blocks per outer index + block; written before read), in the order their claims
# landed: an order no result depends on, since each block's recompute reads the input and writes its
# own outputs (or its own parts' slots) alone.
_CLAIMS = tl.constexpr(2)


@triton.jit
def _listed(work_ptr, inner_size, n_outputs, RECOMPUTE_BLOCK_I: tl.constexpr):
    """Where the work list's blocks start (after the claims, one per recompute block)."""
    return work_ptr + _CLAIMS + (n_outputs // inner_size) * tl.cdiv(inner_size, RECOMPUTE_BLOCK_I)


@triton.jit
def _list_unkept(work_ptr, outputs, unkept, inner_size, n_outputs, RECOMPUTE_BLOCK_I: tl.constexpr):
    """Put on the work list each recompute block that holds an output where `unkept` is true, once: the
    output that claims the block first (an atomic exchange of its claim) appends it (an atomic count).
    No atomics run where nothing is unkept."""
    per_outer = tl.cdiv(inner_size, RECOMPUTE_BLOCK_I)
    block = ((outputs // inner_size) * per_outer + (outputs % inner_size) // RECOMPUTE_BLOCK_I).to(tl.int32)
    first = unkept & (tl.atomic_xchg(work_ptr + _CLAIMS + block, 1, mask=unkept) == 0)
    slot = tl.atomic_add(work_ptr + 0 * block, 1, mask=first)
    tl.store(_listed(work_ptr, inner_size, n_outputs, RECOMPUTE_BLOCK_I) + slot, block, mask=first)


@triton.jit
def _release_list(work_ptr):
    """At the end of each program of the list's last launch: the last to finish sets the list's length
    and its own counter back to 0 (every program read the length before it counts itself in)."""
    if tl.atomic_add(work_ptr + 1, 1, sem="acq_rel", scope="gpu") == tl.num_programs(0) - 1:
        tl.atomic_xchg(work_ptr, 0)
        tl.atomic_xchg(work_ptr + 1, 0)


@triton.jit
def _listed_column(listed, entry, slot_in_block, per_outer, n_parts, RECOMPUTE_BLOCK_I: tl.constexpr):
    """(listed block, outer index, column, part) of a slot of list entry `entry` (the entry's
    (block, part) pair: block listed[entry // n_parts], part entry % n_parts)."""
    block = tl.load(listed + entry // n_parts)
    return (block, block // per_outer, (block % per_outer) * RECOMPUTE_BLOCK_I + slot_in_block, entry % n_parts)


@triton.jit
def _recompute_batch(src_ptr, dst_ptr, flags_ptr, part_m_ptr, part_s_ptr, listed, batch, entries, per_outer,
                     inner_size, stride_outer, stride_red, stride_inner, red_len, chunk_len, n_parts, n_outputs,
                     BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr, RECOMPUTE_BLOCK_I: tl.constexpr,
                     LOOP_STAGES: tl.constexpr, SPLIT: tl.constexpr, SPARSE_MAX: tl.constexpr,
                     SPARSE_LANES: tl.constexpr, SPARSE_WIDTH: tl.constexpr):
    """The recompute of batch `batch` of the list's (block, part) entries: BLOCK_I // RECOMPUTE_BLOCK_I
    of them, RECOMPUTE_BLOCK_I slots each (slot j: column j % RECOMPUTE_BLOCK_I of entry j //
    RECOMPUTE_BLOCK_I's block, over its part's rows). Over the columns whose flag is 0 alone, the first
    stage's tiles in fp64 -- each element widened, the lagging reference in fp64, libdevice's exp of
    the fp64 gap, the fp64 mode's numerics -- finished as m + log(s) in fp64 (flags untouched), or
    stored as parts (r unused) for the merge's recompute. A block with at most SPARSE_MAX such columns
    takes them apart instead, SPARSE_WIDTH of the batch's at a time (_recompute_columns: the same
    numerics down each column in tiles of SPARSE_LANES rows), so that a few scattered ones cost their
    own elements, not the block's. Each column's numerics are those of a program of its own: the batch
    only shares loads. Returns each slot's listed block and whether its entry exists."""
    BATCH: tl.constexpr = BLOCK_I // RECOMPUTE_BLOCK_I
    slots = tl.arange(0, BLOCK_I)
    entry = batch * BATCH + slots // RECOMPUTE_BLOCK_I
    live = entry < entries
    block, o, cols, part = _listed_column(listed, tl.where(live, entry, 0), slots % RECOMPUTE_BLOCK_I, per_outer,
                                          n_parts, RECOMPUTE_BLOCK_I)
    col_ok = live & (cols < inner_size)
    out_index = o.to(tl.int64) * inner_size + cols
    col_ok = col_ok & (tl.load(flags_ptr + out_index, mask=col_ok, other=1) == 0)
    pending = tl.sum(tl.reshape(col_ok.to(tl.int32), (BATCH, RECOMPUTE_BLOCK_I)), 1)   # per block
    sparse = tl.reshape(tl.broadcast_to((pending <= SPARSE_MAX)[:, None], (BATCH, RECOMPUTE_BLOCK_I)), (BLOCK_I,))
    dense = col_ok & ~sparse
    # the dense blocks first: their tiles
    first = part.to(tl.int64) * chunk_len
    length = (tl.minimum(first + chunk_len, red_len) - first).to(tl.int32)
    tiles = tl.where(tl.max(dense.to(tl.int32), 0) > 0, tl.cdiv(chunk_len, BLOCK_R), 0)   # none: no loads
    lanes = tl.arange(0, BLOCK_R)
    ptrs = (src_ptr + (o.to(tl.int64) * stride_outer + cols.to(tl.int64) * stride_inner + first * stride_red)[None, :]
            + lanes[:, None].to(tl.int64) * stride_red)
    step = tl.full((), BLOCK_R, tl.int64) * stride_red
    s = tl.zeros([BLOCK_I], tl.float64)
    m64 = tl.full([BLOCK_I], float("-inf"), tl.float64)
    for t in tl.range(0, tiles, num_stages=LOOP_STAGES):
        mask = ((lanes + t * BLOCK_R)[:, None] < length[None, :]) & dense[None, :]
        x = tl.load(ptrs, mask=mask, other=float("-inf"), eviction_policy="evict_first")
        m64, s = _fp64_tile(m64, s, x.to(tl.float64))
        ptrs += step
    if SPLIT:
        part_slot = part.to(tl.int64) * n_outputs + out_index
        tl.store(part_m_ptr + part_slot, m64, mask=dense)
        tl.store(part_s_ptr + part_slot, s, mask=dense)
    else:
        tl.store(dst_ptr + out_index, finish_logsumexp(s, m64, tl.float32), mask=dense)
    # then the sparse blocks' columns, SPARSE_WIDTH at a time in slot order (_recompute_columns)
    one_by_one = col_ok & sparse
    rank = tl.cumsum(one_by_one.to(tl.int32), 0) - 1   # each sparse column's place among them
    width = tl.arange(0, SPARSE_WIDTH)
    for group in range(0, tl.sum(one_by_one.to(tl.int32), 0), SPARSE_WIDTH):
        chosen = tl.min(tl.where(one_by_one[None, :] & (rank[None, :] == (group + width)[:, None]), slots[None, :],
                                 BLOCK_I), 1)   # the group's slots; BLOCK_I past the last
        valid = chosen < BLOCK_I
        _, o1, col1, part1 = _listed_column(listed, batch * BATCH + tl.where(valid, chosen, 0) // RECOMPUTE_BLOCK_I,
                                            chosen % RECOMPUTE_BLOCK_I, per_outer, n_parts, RECOMPUTE_BLOCK_I)
        start = part1.to(tl.int64) * chunk_len
        m1, s1 = _recompute_columns(src_ptr + o1.to(tl.int64) * stride_outer + col1.to(tl.int64) * stride_inner,
                                    stride_red, start, tl.minimum(start + chunk_len, red_len), valid, chunk_len,
                                    SPARSE_LANES)
        out = o1.to(tl.int64) * inner_size + col1
        if SPLIT:
            tl.store(part_m_ptr + part1.to(tl.int64) * n_outputs + out, m1, mask=valid)
            tl.store(part_s_ptr + part1.to(tl.int64) * n_outputs + out, s1, mask=valid)
        else:
            tl.store(dst_ptr + out, finish_logsumexp(s1, m1, tl.float32), mask=valid)
    return block, live


@triton.jit
def _fp64_tile(m, s, x):
    """The recompute's state (m, s) of each column after the fp64 tile x
    (its rows along axis 0): the lagging reference moved as in the first stage, the old s rescaled by
    exp(m - ref) and the tile's terms exp(x - ref) added, libdevice's fp64 exp throughout; ref is the
    reference, or 0 where that is infinite (no inf - inf)."""
    top = tl.max(x, 0)
    moved = tl.where(top - m > _LAG, top, m)
    ref = tl.where(tl.abs(moved) == float("inf"), 0.0, moved)
    f = tl.where(m == moved, 1.0, tl.exp(m - ref))
    return moved, s * f + tl.sum(tl.exp(x - tl.expand_dims(ref, 0)), 0)


@triton.jit
def _recompute_columns(columns, stride_red, first, end, valid, chunk_len, LANES: tl.constexpr):
    """(m, s) in fp64 of each column's rows [first, end) (element j at columns + j * stride_red, where
    `valid`): tiles of LANES rows from `first` (at most chunk_len of them), the column kernel's
    recompute steps (_fp64_tile), the columns side by side."""
    lanes = tl.arange(0, LANES)
    m = tl.full(columns.shape, float("-inf"), tl.float64)
    s = tl.zeros(columns.shape, tl.float64)
    for offset in range(0, chunk_len, LANES):
        rows = first[None, :] + (offset + lanes)[:, None]
        x = tl.load(columns[None, :] + rows * stride_red, mask=(rows < end[None, :]) & valid[None, :],
                    other=float("-inf"))
        m, s = _fp64_tile(m, s, x.to(tl.float64))
    return m, s


@triton.jit
def accurate_logsumexp_columns_merge_kernel(part_m_ptr, part_s_ptr, part_r_ptr, dst_ptr, flags_ptr, work_ptr,
                                            inner_size, n_outputs, n_parts, exp_error, fp64_slack,
                                            BLOCK_P: tl.constexpr, BLOCK_O: tl.constexpr, RECOMPUTE: tl.constexpr,
                                            RECOMPUTE_BLOCK_I: tl.constexpr, LAUNCH_DEPENDENTS: tl.constexpr,
                                            WAIT_FOR_PREVIOUS: tl.constexpr):
    """The merge of split plans. Program: BLOCK_O outputs, their n_parts states merged (_merge_parts)
    and finished (accurate_rows._finish), each recompute block with an unkept one put on the work list
    (_list_unkept). RECOMPUTE (BLOCK_O divides RECOMPUTE_BLOCK_I): the programs walk the work list's
    blocks in pieces of BLOCK_O outputs and merge the recompute's parts of those whose flag is 0,
    finished as M + log(S) in fp64 (flags untouched); this is the list's last launch: it clears the
    blocks' claims and the list (_release_list)."""
    programmatic_launch_points(LAUNCH_DEPENDENTS, WAIT_FOR_PREVIOUS)
    if RECOMPUTE:
        PIECES: tl.constexpr = RECOMPUTE_BLOCK_I // BLOCK_O
        per_outer = tl.cdiv(inner_size, RECOMPUTE_BLOCK_I)
        listed = _listed(work_ptr, inner_size, n_outputs, RECOMPUTE_BLOCK_I)
        for entry in range(tl.program_id(0), tl.load(work_ptr) * PIECES, tl.num_programs(0)):
            # piece entry % PIECES of block listed[entry // PIECES] (as the list's one part: n_parts 1)
            block, o, cols, _ = _listed_column(listed, entry // PIECES, (entry % PIECES) * BLOCK_O
                                               + tl.arange(0, BLOCK_O), per_outer, 1, RECOMPUTE_BLOCK_I)
            outputs = o.to(tl.int64) * inner_size + cols
            out_ok = cols < inner_size
            out_ok = out_ok & (tl.load(flags_ptr + outputs, mask=out_ok, other=1) == 0)
            top, total, _ = _merge_parts(part_m_ptr, part_s_ptr, part_r_ptr, outputs, out_ok, n_outputs, n_parts,
                                         BLOCK_P, BLOCK_O, False)
            tl.store(dst_ptr + outputs, finish_logsumexp(total, top, tl.float32), mask=out_ok)
            tl.store(work_ptr + _CLAIMS + block, 0, mask=entry % PIECES == 0)   # cleared for the next call
        _release_list(work_ptr)
    else:
        outputs = tl.program_id(0).to(tl.int64) * BLOCK_O + tl.arange(0, BLOCK_O)
        out_ok = outputs < n_outputs
        top, total, rescaled = _merge_parts(part_m_ptr, part_s_ptr, part_r_ptr, outputs, out_ok, n_outputs, n_parts,
                                            BLOCK_P, BLOCK_O, True)
        kept = _finish(dst_ptr, flags_ptr, outputs, out_ok, top.to(tl.float32), total, rescaled, exp_error,
                       fp64_slack)
        _list_unkept(work_ptr, outputs, out_ok & ~kept, inner_size, n_outputs, RECOMPUTE_BLOCK_I)


@triton.jit
def _merge_parts(part_m_ptr, part_s_ptr, part_r_ptr, outputs, out_ok, n_outputs, n_parts, BLOCK_P: tl.constexpr,
                 BLOCK_O: tl.constexpr, WITH_R: tl.constexpr):
    """(M, S, R) of the outputs' n_parts states ([n_parts, n_outputs], fp64) streamed in BLOCK_P lanes --
    first their maximum M, then S = sum s g and R = sum r g with g = exp(m - M) in fp64 (exactly 1 for
    the maximum's own; a part of -inf under a finite M gets 0, as under +inf); R is 0 unless WITH_R
    (the recompute's parts have none). No part is read where out_ok holds nowhere."""
    parts_read = tl.where(tl.max(out_ok.to(tl.int32), 0) > 0, n_parts, 0)
    lanes = tl.arange(0, BLOCK_P)
    big = tl.full([BLOCK_P, BLOCK_O], float("-inf"), tl.float64)
    for p in range(0, parts_read, BLOCK_P):
        slots = (p + lanes)[:, None].to(tl.int64) * n_outputs + outputs[None, :]
        here = ((p + lanes) < n_parts)[:, None] & out_ok[None, :]
        big = tl.maximum(big, tl.load(part_m_ptr + slots, mask=here, other=float("-inf")))
    top = tl.max(big, 0)
    total = tl.zeros([BLOCK_P, BLOCK_O], tl.float64)
    rescaled = tl.zeros([BLOCK_P, BLOCK_O], tl.float64)
    for p in range(0, parts_read, BLOCK_P):
        slots = (p + lanes)[:, None].to(tl.int64) * n_outputs + outputs[None, :]
        here = ((p + lanes) < n_parts)[:, None] & out_ok[None, :]
        pm = tl.load(part_m_ptr + slots, mask=here, other=float("-inf"))
        g = tl.where(pm == top[None, :], 1.0, tl.exp(pm - top[None, :]))
        total += tl.load(part_s_ptr + slots, mask=here, other=0.0) * g
        if WITH_R:
            rescaled += tl.load(part_r_ptr + slots, mask=here, other=0.0) * g
    return top, tl.sum(total, 0), tl.sum(rescaled, 0)
