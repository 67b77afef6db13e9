"""Single-read softmax / log_softmax for rows that fit on chip: each program loads whole rows once,
keeps them in registers for the maximum, the sum of exponentials and the output, and writes once
(2 x the data's bytes moved, against 3 x for the reduction + normalizing pass of long rows).

Layout as schedules/normalize.py: rows r are the kept positions, j runs along the reduced dim, and
source and destination come as (outer, red, inner) views with their own strides. A program owns
BLOCK_ROWS whole rows: a [BLOCK_ROWS, BLOCK_J] tile when J_FAST (the reduced dim is the contiguous
one), else [BLOCK_J, BLOCK_ROWS] (rows contiguous, e.g. dim=0 of a row-major tensor), so loads and
stores stay coalesced either way. BLOCK_J >= the row length (a power of two). TREE_VEC and TREE_THREADS
describe the layout the row sum's tree follows (the input's 16-byte vectors; 32 * num_warps threads).

Numerics, in the accumulator dtype ACC_DTYPE (fp32 for the `fast` mode, fp64 for `fp64`):
* m = the row's maximum (exact; order-free; taken in fp32 unless the input is fp64);
* e_j = exp(x_j - m), one exponential per element (for fp32 output from the fp32 accumulator,
  TWO_PART_EXP: exp_two_part of x_j - m made exact by TwoSum, so the gap's rounding and the product
  with log2(e) do not enter), and s = sum e_j by a fixed balanced tree of
  depth log2(BLOCK_J), the same order on every device (schedules/tree.py): along contiguous rows the
  register-order tree (tree_sum_blocked_rows: each thread's own elements first, then lanes, then the
  warps' sums in one shared-memory round; sm_90 SASS, softmax fp32 rows of 8192 on 4 warps: 89 -> 14
  shuffles, 8 -> 5 barriers; H200 8192^2 fp64 mode 2650 -> 3427 GB/s, bf16 fast 3717 -> 3796), across
  strided rows tree_reduce_first_axis (the rows' elements are in other threads' registers anyway);
* softmax: y_j = e_j * r with r = 1 / s divided in fp64, rounded to ACC_DTYPE (the exponentials are
  reused: no second exp per element);
  log_softmax: y_j = (x_j - m) - log(s) formed in ACC_DTYPE, log(s) taken in fp64 per row (the
  normalizing pass forms it in fp64 for both modes; the fp32 accumulator's three roundings here cost
  about one more ulp of y and spare two fp64 additions and three conversions an element).
* log_softmax with SPLIT_TAIL (precred.modes.log_softmax_split_tail: the `accurate` mode -- into
  bf16 / fp16 in fp32, with terms exp(x_j - m) 2^32, strategies/stable_exp.py exp_scaled; else in fp64):
  in fp64 one sum by the tree, the tail of the terms of all elements but the maxima, and s = c + tail
  for the row's c maxima (counted); in fp32 two trees, s and the tail of the terms below the maximum
  (COUNT_MAXIMA: precred.modes.split_tail_counts_maxima); then
  log(s) in fp64 as log1p(tail) where s < 1.5 (the row has one maximum) else log(s)
  (log_of_split_sum), and y_j = (x_j - m) - log(s) in ACC_DTYPE: both parts <= 0, so y's relative
  error is log(s)'s (the tail sum's) and a few u, even for the maximum's y = -log1p(tail) next to 0,
  where log(s) rounds the tail away (fp32's below 2^-24: fast's and torch's; fp64's below 2^-53).
Bounds: precred.softmax_error_bound (single_read=True). Specials without branches, torch's: a NaN in
the row makes s NaN; +inf makes m = +inf and inf - inf = NaN; an all -inf row gives -inf - -inf = NaN:
every such row is NaN throughout. A -inf element among finite ones gives e = 0 (softmax 0, log
-inf). Padding lanes load -inf, so they add exp(-inf) = 0.

single_read_logsumexp_kernel: the same first half for logsumexp over contiguous rows (the fp64 and
fast modes over fp32 rows of at most precred.plan.LOGSUMEXP_SINGLE_READ_MAX_ROW's elements), writing
m + log(s) per row.
"""
import triton
import triton.language as tl

from .finish import round_to_output, to_accumulator
from .normalize import _offsets, tile_indices
from ..strategies.compensated import two_sum
from ..strategies.stable_exp import exp_two_part, log_of_split_sum, split_tail_sum, split_tail_terms, terms_below
from .grid import block_indices
from .tree import tree_reduce_first_axis, tree_sum_blocked_rows

_PLAIN = tl.constexpr(0)   # strategies.PLAIN: the sum's combine in the fixed tree


@triton.jit
def _row_sums(v, J_FAST: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK_J: tl.constexpr, TREE_VEC: tl.constexpr,
              TREE_THREADS: tl.constexpr):
    """Each row's sum of the tile v by the fixed tree (along contiguous rows the register-order tree,
    across strided rows tree_reduce_first_axis), shaped to broadcast against the tile."""
    if J_FAST:
        return tree_sum_blocked_rows(v, BLOCK_ROWS, BLOCK_J, TREE_VEC, TREE_THREADS)[:, None]
    else:
        total, _, _ = tree_reduce_first_axis(v, v, v, BLOCK_J, BLOCK_ROWS, _PLAIN)
        return total[None, :]


@triton.jit
def single_read_kernel(src_ptr, dst_ptr, n_rows, red_len,
                       src_inner, src_stride_outer, src_stride_inner, src_stride_red,
                       dst_inner, dst_stride_outer, dst_stride_inner, dst_stride_red,
                       LOG: tl.constexpr, ACC_DTYPE: tl.constexpr, TWO_PART_EXP: tl.constexpr,
                       SPLIT_TAIL: tl.constexpr, COUNT_MAXIMA: tl.constexpr, J_FAST: tl.constexpr,
                       BLOCK_ROWS: tl.constexpr, BLOCK_J: tl.constexpr,
                       TREE_VEC: tl.constexpr, TREE_THREADS: tl.constexpr, ROW_BLOCK_STAGES: tl.constexpr):
    # ROW_BLOCK_STAGES (precred.plan.single_read_persistence): 0 -- a program per block of BLOCK_ROWS
    # rows; else a persistent grid, each program taking the blocks program_id, + num_programs, ... in a
    # loop software-pipelined over that many stages (the next block's load in flight while this one is
    # reduced and written: where one program holds the SM, nothing else would overlap them). Each
    # block's numerics are the same either way.
    if ROW_BLOCK_STAGES == 0:
        _single_read_block(tl.program_id(0), src_ptr, dst_ptr, n_rows, red_len,
                           src_inner, src_stride_outer, src_stride_inner, src_stride_red,
                           dst_inner, dst_stride_outer, dst_stride_inner, dst_stride_red,
                           LOG, ACC_DTYPE, TWO_PART_EXP, SPLIT_TAIL, COUNT_MAXIMA, J_FAST, BLOCK_ROWS, BLOCK_J,
                           TREE_VEC, TREE_THREADS)
    else:
        for row_block in tl.range(tl.program_id(0), tl.cdiv(n_rows, BLOCK_ROWS), tl.num_programs(0),
                                  num_stages=ROW_BLOCK_STAGES):
            _single_read_block(row_block, src_ptr, dst_ptr, n_rows, red_len,
                               src_inner, src_stride_outer, src_stride_inner, src_stride_red,
                               dst_inner, dst_stride_outer, dst_stride_inner, dst_stride_red,
                               LOG, ACC_DTYPE, TWO_PART_EXP, SPLIT_TAIL, COUNT_MAXIMA, J_FAST, BLOCK_ROWS, BLOCK_J,
                               TREE_VEC, TREE_THREADS)


@triton.jit
def _single_read_block(row_block, src_ptr, dst_ptr, n_rows, red_len,
                       src_inner, src_stride_outer, src_stride_inner, src_stride_red,
                       dst_inner, dst_stride_outer, dst_stride_inner, dst_stride_red,
                       LOG: tl.constexpr, ACC_DTYPE: tl.constexpr, TWO_PART_EXP: tl.constexpr,
                       SPLIT_TAIL: tl.constexpr, COUNT_MAXIMA: tl.constexpr, J_FAST: tl.constexpr,
                       BLOCK_ROWS: tl.constexpr, BLOCK_J: tl.constexpr,
                       TREE_VEC: tl.constexpr, TREE_THREADS: tl.constexpr):
    """Block row_block of BLOCK_ROWS rows: load once, reduce, write (the module docstring)."""
    r1 = block_indices(row_block, BLOCK_ROWS, n_rows)
    rows, j, mask = tile_indices(r1, tl.arange(0, BLOCK_J), n_rows, red_len, J_FAST)
    raw = tl.load(src_ptr + _offsets(rows, j, src_inner, src_stride_outer, src_stride_inner, src_stride_red),
                  mask=mask, other=0)
    # Padding is -inf, set after widening: under the interpreter bf16 arrives as int16 bits
    # (precred.launch), where -inf has no literal. The maximum is taken in fp32 for every input but
    # fp64 (exact there: it is one of the values), not in an fp64 accumulator: a compare and two
    # selects an element off the GPU's fp64 pipe, which bounds the fp64 mode.
    MAX_DTYPE: tl.constexpr = tl.float64 if raw.dtype == tl.float64 else tl.float32
    x_max = tl.where(mask, to_accumulator(raw, MAX_DTYPE), float("-inf"))
    x = x_max.to(ACC_DTYPE)
    if J_FAST:
        m_tile = tl.max(x_max, 1)[:, None].to(ACC_DTYPE)
    else:
        m_tile = tl.max(x_max, 0)[None, :].to(ACC_DTYPE)
    if SPLIT_TAIL:   # log_softmax's split-tail pass (precred.modes.log_softmax_split_tail)
        # Branch-free. COUNT_MAXIMA (precred.modes.split_tail_counts_maxima: the fp64 accumulator): one
        # tree, of the tail -- the terms of every element but the maxima (a NaN's term, NaN, included) --,
        # and s = c + tail for the row's c maxima, whose terms are exactly 1 (counted, not summed: an
        # integer sum, the same in any order); a row holding +inf (m = +inf) has s NaN, as the sum of its
        # terms would (inf - inf). Else (fp32) two trees: s, and the tail of the terms below the maximum.
        e = split_tail_terms(x - m_tile)
        if COUNT_MAXIMA:
            is_max = x == m_tile
            tail = split_tail_sum(_row_sums(tl.where(is_max, 0.0, e), J_FAST, BLOCK_ROWS, BLOCK_J, TREE_VEC,
                                            TREE_THREADS))
            if J_FAST:
                maxima = tl.sum(is_max.to(tl.int32), 1)[:, None]
            else:
                maxima = tl.sum(is_max.to(tl.int32), 0)[None, :]
            s = tl.where(m_tile == float("inf"), float("nan"), maxima.to(tl.float64) + tail)
        else:
            s = split_tail_sum(_row_sums(e, J_FAST, BLOCK_ROWS, BLOCK_J, TREE_VEC, TREE_THREADS))
            tail = split_tail_sum(_row_sums(tl.where(x < m_tile, e, 0.0), J_FAST, BLOCK_ROWS, BLOCK_J, TREE_VEC,
                                            TREE_THREADS))
        y = (x - m_tile) - log_of_split_sum(s, tail).to(ACC_DTYPE)
    else:
        if TWO_PART_EXP:   # x - m exactly, as two fp32 parts (precred.modes.softmax_two_part_exp)
            gap_hi, gap_lo = two_sum(x, -m_tile)
            e = exp_two_part(gap_hi, gap_lo)
        else:
            e = tl.exp(x - m_tile)
        s_tile = _row_sums(e, J_FAST, BLOCK_ROWS, BLOCK_J, TREE_VEC, TREE_THREADS).to(tl.float64)
        if LOG:   # in ACC_DTYPE: fp32 for `fast` (three roundings), fp64 for `fp64` (x and m exact there)
            y = (x - m_tile) - tl.log(s_tile).to(ACC_DTYPE)
        else:
            y = e * (1.0 / s_tile).to(ACC_DTYPE)
    tl.store(dst_ptr + _offsets(rows, j, dst_inner, dst_stride_outer, dst_stride_inner, dst_stride_red),
             round_to_output(y, dst_ptr.dtype.element_ty), mask=mask)


@triton.jit
def single_read_logsumexp_kernel(src_ptr, dst_ptr, n_rows, red_len, stride_row,
                                 ACC_DTYPE: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK_J: tl.constexpr,
                                 TREE_VEC: tl.constexpr, TREE_THREADS: tl.constexpr):
    """logsumexp of contiguous rows held on chip (precred.plan.plan_logsumexp_rows): each program loads
    BLOCK_ROWS whole rows once, takes each row's maximum m (fp32: exact, the input is fp32), then one
    exponential per element against it -- no running maximum, so no rescaling exp -- summed by the
    register-order tree of depth log2(BLOCK_J) in ACC_DTYPE (tree_sum_blocked_rows, as
    single_read_kernel's), and writes m + log(s) formed in fp64.
    Bound: precred.logsumexp_error_bound at that depth (its derivation counts up to h + 1 exps and h
    products per term; here each term has one exp and no product). Specials as the one-pass
    reduction's (strategies/stable_exp.py terms_below): a row of -inf gives s = 0, -inf; a +inf gives
    +inf; a NaN makes s NaN. Padding lanes load -inf and add 0."""
    r1 = block_indices(tl.program_id(0), BLOCK_ROWS, n_rows)
    rows, j, mask = tile_indices(r1, tl.arange(0, BLOCK_J), n_rows, red_len, True)
    raw = tl.load(src_ptr + rows.to(tl.int64) * stride_row + j, mask=mask, other=0)
    x = tl.where(mask, to_accumulator(raw, tl.float32), float("-inf"))
    m = tl.max(x, 1)
    e = terms_below(x.to(ACC_DTYPE), m[:, None].to(ACC_DTYPE))
    s = tree_sum_blocked_rows(e, BLOCK_ROWS, BLOCK_J, TREE_VEC, TREE_THREADS)
    lse = m.to(tl.float64) + tl.log(s.to(tl.float64))
    tl.store(dst_ptr + r1, round_to_output(lse, dst_ptr.dtype.element_ty), mask=r1 < n_rows)
