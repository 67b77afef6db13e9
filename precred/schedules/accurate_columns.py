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
schedules/recompute.py, would read each strided column element by element), or one column at a time
where a block has at most plan.ACCURATE_COLUMNS_SPARSE_MAX of them. Its bound is the fp64 mode's at
AccurateColumnsPlan.recompute_depth.

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
from .recompute import next_pending
from .steps import programmatic_launch_points

# How far an element may lie above its column's reference before the reference moves up to it.
_LAG = tl.constexpr(8.0)


@triton.jit
def accurate_logsumexp_columns_kernel(src_ptr, dst_ptr, flags_ptr, part_m_ptr, part_s_ptr, part_r_ptr,
                                      inner_size, stride_outer, stride_red, stride_inner, red_len, chunk_len,
                                      n_parts, n_outputs, exp_error, fp64_slack,
                                      BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr, LOOP_STAGES: tl.constexpr,
                                      SPLIT: tl.constexpr, RECOMPUTE: tl.constexpr,
                                      SPARSE_MAX: tl.constexpr, SPARSE_LANES: tl.constexpr,
                                      LAUNCH_DEPENDENTS: tl.constexpr, WAIT_FOR_PREVIOUS: tl.constexpr):
    """Program (column block, part): the columns' states over the part's rows [part * chunk_len, +
    chunk_len) of the reduced axis; SPLIT: stored at [part, output] of the part_* workspace (m widened
    to fp64), else finished into dst (fp32) and flags (int8, 1 where kept; module docstring).
    RECOMPUTE: the second stage, over the columns whose flag is 0 alone (a program with none reads
    nothing): the same tiles in fp64 -- each element widened, the lagging reference in fp64, libdevice's
    exp of the fp64 gap, the fp64 mode's numerics -- finished as m + log(s) in fp64 (flags untouched),
    or stored as parts (r unused) for the merge's recompute. A block with at most SPARSE_MAX such
    columns takes them one at a time instead (_recompute_column: the same numerics down the column in
    tiles of SPARSE_LANES rows), so that a few scattered ones cost their own elements, not the block's."""
    programmatic_launch_points(LAUNCH_DEPENDENTS, WAIT_FOR_PREVIOUS)
    pid = tl.program_id(0)
    part = pid % n_parts
    tile = pid // n_parts
    n_blocks = tl.cdiv(inner_size, BLOCK_I)
    o = tile // n_blocks
    cols = (tile % n_blocks) * BLOCK_I + tl.arange(0, BLOCK_I)
    col_ok = cols < inner_size
    out_index = o.to(tl.int64) * inner_size + cols
    lanes = tl.arange(0, BLOCK_R)
    first = part.to(tl.int64) * chunk_len
    end = tl.minimum(first + chunk_len, red_len)
    if RECOMPUTE:
        col_ok = col_ok & (tl.load(flags_ptr + out_index, mask=col_ok, other=1) == 0)
        pending = tl.sum(col_ok.to(tl.int32), 0)
        sparse = pending <= SPARSE_MAX
        if sparse:   # one column at a time, in slot order
            slots = tl.arange(0, BLOCK_I)
            k = next_pending(col_ok, slots, -1, BLOCK_I)
            while k < BLOCK_I:
                out = tl.sum(tl.where(slots == k, out_index, 0), 0)
                column = src_ptr + o.to(tl.int64) * stride_outer + tl.sum(tl.where(slots == k, cols, 0), 0).to(
                    tl.int64) * stride_inner
                m1, s1 = _recompute_column(column, stride_red, first, end, SPARSE_LANES)
                if SPLIT:
                    slot = part.to(tl.int64) * n_outputs + out
                    tl.store(part_m_ptr + slot, m1)
                    tl.store(part_s_ptr + slot, s1)
                else:
                    tl.store(dst_ptr + out, finish_logsumexp(s1, m1, tl.float32))
                k = next_pending(col_ok, slots, k, BLOCK_I)
        col_ok = col_ok & (pending > SPARSE_MAX)   # the dense path's columns: none if taken above
        end = tl.where(sparse, first, end)   # ... and then no tiles
    ptrs = (src_ptr + o.to(tl.int64) * stride_outer + (first + lanes)[:, None] * stride_red
            + cols[None, :].to(tl.int64) * stride_inner)
    step = tl.full((), BLOCK_R, tl.int64) * stride_red
    s = tl.zeros([BLOCK_I], tl.float64)
    if RECOMPUTE:
        m64 = tl.full([BLOCK_I], float("-inf"), tl.float64)
        for start in tl.range(first, end, BLOCK_R, num_stages=LOOP_STAGES):
            mask = ((start + lanes) < end)[:, None] & col_ok[None, :]
            x = tl.load(ptrs, mask=mask, other=float("-inf"), eviction_policy="evict_first")
            m64, s = _fp64_tile(m64, s, x.to(tl.float64))
            ptrs += step
        if SPLIT:
            slot = part.to(tl.int64) * n_outputs + out_index
            tl.store(part_m_ptr + slot, m64, mask=col_ok)
            tl.store(part_s_ptr + slot, s, mask=col_ok)
        else:
            tl.store(dst_ptr + out_index, finish_logsumexp(s, m64, tl.float32), mask=col_ok)
    else:
        r = tl.zeros([BLOCK_I], tl.float32)
        m = tl.full([BLOCK_I], float("-inf"), tl.float32)
        for start in tl.range(first, end, BLOCK_R, num_stages=LOOP_STAGES):
            mask = ((start + lanes) < end)[:, None] & col_ok[None, :]
            x = tl.load(ptrs, mask=mask, other=float("-inf"), eviction_policy="evict_first")   # read once
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
            _finish(dst_ptr, flags_ptr, out_index, col_ok, m, s, r, exp_error, fp64_slack)


@triton.jit
def _fp64_tile(m, s, x):
    """The recompute's state (m, s) of each column (or of one column: scalars) after the fp64 tile x
    (its rows along axis 0): the lagging reference moved as in the first stage, the old s rescaled by
    exp(m - ref) and the tile's terms exp(x - ref) added, libdevice's fp64 exp throughout; ref is the
    reference, or 0 where that is infinite (no inf - inf)."""
    top = tl.max(x, 0)
    moved = tl.where(top - m > _LAG, top, m)
    ref = tl.where(tl.abs(moved) == float("inf"), 0.0, moved)
    f = tl.where(m == moved, 1.0, tl.exp(m - ref))
    return moved, s * f + tl.sum(tl.exp(x - tl.expand_dims(ref, 0)), 0)


@triton.jit
def _recompute_column(column, stride_red, first, end, LANES: tl.constexpr):
    """(m, s) in fp64 of one column's rows [first, end) (element j at column + j * stride_red): tiles of
    LANES rows, the column kernel's recompute steps (_fp64_tile)."""
    lanes = tl.arange(0, LANES)
    m = tl.full((), float("-inf"), tl.float64)
    s = tl.zeros((), tl.float64)
    for start in range(first, end, LANES):
        rows = start + lanes
        x = tl.load(column + rows * stride_red, mask=rows < end, other=float("-inf"))
        m, s = _fp64_tile(m, s, x.to(tl.float64))
    return m, s


@triton.jit
def accurate_logsumexp_columns_merge_kernel(part_m_ptr, part_s_ptr, part_r_ptr, dst_ptr, flags_ptr, n_outputs,
                                            n_parts, exp_error, fp64_slack, BLOCK_P: tl.constexpr,
                                            BLOCK_O: tl.constexpr, RECOMPUTE: tl.constexpr,
                                            LAUNCH_DEPENDENTS: tl.constexpr, WAIT_FOR_PREVIOUS: tl.constexpr):
    """Program: BLOCK_O outputs, their n_parts states ([n_parts, n_outputs], fp64) streamed in BLOCK_P
    lanes -- first their maximum M, then S = sum s g and R = sum r g with g = exp(m - M) in fp64
    (exactly 1 for the maximum's own; a part of -inf under a finite M gets 0, as under +inf) -- and
    finished (accurate_rows._finish). RECOMPUTE: the outputs whose flag is 0 alone, finished as
    M + log(S) in fp64 (the column kernel's recompute parts; flags untouched)."""
    programmatic_launch_points(LAUNCH_DEPENDENTS, WAIT_FOR_PREVIOUS)
    outputs = tl.program_id(0).to(tl.int64) * BLOCK_O + tl.arange(0, BLOCK_O)
    out_ok = outputs < n_outputs
    parts_read = n_parts
    if RECOMPUTE:
        out_ok = out_ok & (tl.load(flags_ptr + outputs, mask=out_ok, other=1) == 0)
        parts_read = tl.where(tl.max(out_ok.to(tl.int32), 0) > 0, n_parts, 0)   # none pending: no reads
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
        if not RECOMPUTE:
            rescaled += tl.load(part_r_ptr + slots, mask=here, other=0.0) * g
    if RECOMPUTE:
        tl.store(dst_ptr + outputs, finish_logsumexp(tl.sum(total, 0), top, tl.float32), mask=out_ok)
    else:
        _finish(dst_ptr, flags_ptr, outputs, out_ok, top.to(tl.float32), tl.sum(total, 0), tl.sum(rescaled, 0),
                exp_error, fp64_slack)
