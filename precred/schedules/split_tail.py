"""log_softmax's split-tail pass on the two-pass path (the `accurate` mode: precred.modes.log_softmax_split_tail
and precred.launch.softmax_rows), between the one-pass reduction and the normalizing pass: the reduction
hands over each row's maximum m and log(s) in fp64, and a row whose log(s) < log(1.5) -- one maximum
(two would make s >= 2 but for s's error), y = x - m - log(s) next to 0 for it, where s in fp64 loses
the tail below 2^-53 -- is read again for tail = the sum of its terms below m, in fp64, and its log(s)
is overwritten with log1p(tail), whose relative error is the tail sum's (strategies/stable_exp.py
log1p_small). Rows with log(s) >= log(1.5) are left alone, and a program none of whose rows needs it
reads nothing but its rows' m and log(s) (the loop over the row runs no trip). randn rows need it
more often than one might think: of randn * 4 columns, 5 of 256 of 262144 values, 37 of 1024 of 65536,
706 of 8192 of 8192, 11% of 65536 of 1024 have s < 1.5 (the largest value stands apart).

Layout as schedules/normalize.py: rows r are the kept positions, j runs along the reduced dim of the
(outer, red, inner) view; a program owns BLOCK_ROWS rows and one part of their reduced dim
(precred.plan.split_tail_part_length: a row needing its tail walked by one program was 8-48 GB/s over
dim 0 of 65536 x 1024 / 262144 x 256 on the H200, a few programs walking the whole dim), which it
walks in tiles of BLOCK_J, [BLOCK_ROWS, BLOCK_J] when J_FAST (the reduced dim is contiguous) else
[BLOCK_J, BLOCK_ROWS], loads masked to the rows that need it. Each row's terms accumulate in BLOCK_J
lanes over the part's tiles, then the fixed tree over the lanes; with several parts,
split_tail_finish_kernel adds the parts' sums in order: depth ceil(part / BLOCK_J) - 1 + log2(BLOCK_J)
+ parts - 1 (precred.plan.split_tail_depth). Bound: precred.softmax_error_bound (tail_depth). Specials: a row
holding NaN has log(s) NaN (left alone); one holding +inf (m = +inf) or of -inf only gets tail 0 (its
gaps are -inf or NaN, never below m), and the normalizing pass makes it NaN as before.
"""
import triton
import triton.language as tl

from .finish import to_accumulator
from .grid import block_indices, row_and_column_block
from .normalize import _offsets, tile_indices
from .tree import tree_reduce_first_axis, tree_reduce_last_axis
from ..strategies.stable_exp import log1p_small

_PLAIN = tl.constexpr(0)   # strategies.PLAIN: the lanes' sum by the fixed tree
_LOG_ONE_AND_A_HALF = tl.constexpr(0.4054651081081644)   # log(1.5) in fp64


@triton.jit
def split_tail_kernel(src_ptr, log_s_ptr, max_ptr, partial_ptr, n_rows, red_len, part_len,
                      src_inner, src_stride_outer, src_stride_inner, src_stride_red,
                      J_FAST: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK_J: tl.constexpr,
                      PARTIAL: tl.constexpr, FLAT_GRID: tl.constexpr):
    """Program (i, k) -- of a grid (row blocks, parts), or flat (grid.py) --: rows i * BLOCK_ROWS.. over the
    reduced elements [k part_len, (k + 1) part_len). PARTIAL: store the part's tail sum at
    partial_ptr[k n_rows + r] (split_tail_finish_kernel adds the parts); else (one part) store
    log1p(tail) over log(s)."""
    row_block, part = row_and_column_block(n_rows, BLOCK_ROWS, FLAT_GRID)
    r1 = block_indices(row_block, BLOCK_ROWS, n_rows)
    first = part * part_len
    in_range = r1 < n_rows
    log_s = tl.load(log_s_ptr + r1, mask=in_range, other=1.0)
    m = tl.load(max_ptr + r1, mask=in_range, other=0.0)
    need = in_range & (log_s < _LOG_ONE_AND_A_HALF)
    if J_FAST:
        need_tile, m_tile = need[:, None], m[:, None]
        lanes = tl.zeros([BLOCK_ROWS, BLOCK_J], tl.float64)
    else:
        need_tile, m_tile = need[None, :], m[None, :]
        lanes = tl.zeros([BLOCK_J, BLOCK_ROWS], tl.float64)
    end = tl.where(tl.max(need.to(tl.int32), 0) > 0, tl.minimum(first + part_len, red_len), first)
    for start in range(first, end, BLOCK_J):
        rows, j, mask = tile_indices(r1, start + tl.arange(0, BLOCK_J), n_rows, red_len, J_FAST)
        mask = mask & need_tile
        x = to_accumulator(tl.load(src_ptr + _offsets(rows, j, src_inner, src_stride_outer, src_stride_inner,
                                                      src_stride_red), mask=mask, other=0), tl.float64)
        x = tl.where(mask, x, float("-inf"))
        lanes += tl.where(x < m_tile, tl.exp(x - m_tile), 0.0)
    if J_FAST:
        tail, _, _ = tree_reduce_last_axis(lanes, lanes, lanes, BLOCK_ROWS, BLOCK_J, _PLAIN)
    else:
        tail, _, _ = tree_reduce_first_axis(lanes, lanes, lanes, BLOCK_J, BLOCK_ROWS, _PLAIN)
    if PARTIAL:
        tl.store(partial_ptr + part * n_rows + r1, tail, mask=need)
    else:
        tl.store(log_s_ptr + r1, log1p_small(tail), mask=need)


@triton.jit
def split_tail_finish_kernel(log_s_ptr, partial_ptr, n_rows, parts, BLOCK: tl.constexpr):
    """The rows split_tail_kernel left in parts: tail = the parts' sums added in order (part 0 first:
    parts - 1 roundings, the same order on every device), log(s) overwritten with log1p(tail). The
    rows that need it are told apart as there, from log(s), which split_tail_kernel left alone."""
    r = block_indices(tl.program_id(0), BLOCK, n_rows)
    in_range = r < n_rows
    need = in_range & (tl.load(log_s_ptr + r, mask=in_range, other=1.0) < _LOG_ONE_AND_A_HALF)
    tail = tl.zeros([BLOCK], tl.float64)
    for part in range(parts):
        tail += tl.load(partial_ptr + part * n_rows + r, mask=need, other=0.0)
    tl.store(log_s_ptr + r, log1p_small(tail), mask=need)
