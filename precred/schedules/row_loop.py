"""Softmax / log_softmax of contiguous rows too long for registers but short enough for L2: one
program per row reads it twice -- the online (max, sum of exp) state over the row, then the
normalizing loop -- in one launch, the second read hoping for L2 (every program's row in flight at
once). Measured (H100, ncu, fp32 1024x65536, ~528 rows of 256 KB in flight): HBM read 534 MB for the
256 MB input with the first read evict_first, 466 MB with evict_last (precred.plan's
ROW_LOOP_FIRST_READ_EVICTION): a quarter of the second read hits.

Numerics are exactly those of the reduction's inner schedule with one part followed by the
normalizing pass (schedules/inner.py, schedules/normalize.py): BLOCK_N lanes of stable-exp state
(strategies/stable_exp.py) streamed over the row -- lanes of 16-byte vectors' states where the
reduction keeps them (VECTORS: inner.stable_exp_vector_part, plan.stable_exp_vectors) --, merged by
the fixed tree, log(s) in fp64, then (x - m) - log(s) per element. Bounds: precred.softmax_error_bound
with the plan's depth (precred.plan.LoopPlan).

SPLIT_TAIL (log_softmax in `accurate`: with the fp32 state into bf16 / fp16, else fp64's;
precred.modes.log_softmax_split_tail): after that state, a row whose s < 1.5 -- it has one maximum, and
log(s) = log1p(tail) next to 0, where s would lose the tail -- is read a third time for tail = the sum
of its terms below m (in fp32 scaled as the single-read kernel's, strategies/stable_exp.py
exp_scaled), over BLOCK_N lanes then the same fixed tree (depth: the plan's); log(s) is then
log1p(tail) (log_of_split_sum). Rows with s >= 1.5 (randn rows: all of them) keep log(s) of the
state, whose relative error log(s) >= 0.4 absorbs. Bound: precred.softmax_error_bound (row_loop=True).
"""
import triton
import triton.language as tl

from .finish import to_accumulator
from .inner import stable_exp_vector_part
from .normalize import normalized
from .steps import accumulate_tile
from ..strategies.stable_exp import log_of_split_sum, split_tail_sum, split_tail_terms
from .tree import tree_reduce_last_axis

_STABLE_EXP = tl.constexpr(3)   # strategies.STABLE_EXP
_PLAIN = tl.constexpr(0)        # strategies.PLAIN: the tail's lanes, by the same fixed tree


@triton.jit
def row_loop_kernel(src_ptr, dst_ptr, red_len, src_stride_row, dst_stride_row,
                    LOG: tl.constexpr, ACC_DTYPE: tl.constexpr, SPLIT_TAIL: tl.constexpr, BLOCK_N: tl.constexpr,
                    VECTORS: tl.constexpr, TREE_VEC: tl.constexpr, FIRST_READ_EVICTION: tl.constexpr,
                    LOOP_STAGES: tl.constexpr):
    # FIRST_READ_EVICTION: the first read's L2 policy (precred.plan.ROW_LOOP_FIRST_READ_EVICTION).
    # LOOP_STAGES: the two reads' software pipelining (precred.plan.LoopPlan.stages; 1: plain loops,
    # which wait out each tile's load). The split-tail read, rare, keeps a plain loop.
    row = tl.program_id(0).to(tl.int64)
    lanes = tl.arange(0, BLOCK_N)
    src_row = src_ptr + row * src_stride_row
    if VECTORS:
        start = tl.full((), 0, tl.int64)
        row_s, _, row_m = stable_exp_vector_part(src_row + lanes[None, :], BLOCK_N, lanes, tl.full([1], 1, tl.int1),
                                                 start, start + red_len, ACC_DTYPE, 1, BLOCK_N, LOOP_STAGES,
                                                 TREE_VEC, FIRST_READ_EVICTION)
    else:
        s = tl.zeros([1, BLOCK_N], ACC_DTYPE)
        m = tl.full([1, BLOCK_N], float("-inf"), ACC_DTYPE)
        for start in tl.range(0, red_len, BLOCK_N, num_stages=LOOP_STAGES):
            mask = ((start + lanes) < red_len)[None, :]
            ptrs = src_row + (start + lanes)[None, :]
            s, _, m = accumulate_tile(s, s, m, ptrs, ptrs, ptrs, mask, 0, 0.0, 1.0, 0.0, ACC_DTYPE, _STABLE_EXP,
                                      False, False)
        row_s, _, row_m = tree_reduce_last_axis(s, s, m, 1, BLOCK_N, _STABLE_EXP)
    if SPLIT_TAIL:   # log_softmax's split-tail pass (precred.modes.log_softmax_split_tail)
        # A row whose s < 1.5 has one maximum (module docstring): it is read once more for the sum of its
        # terms below the maximum, against m (the loop runs no trip for every other row).
        tail_end = tl.where(tl.max(row_s, 0) < 1.5, red_len, 0)
        t = tl.zeros([1, BLOCK_N], ACC_DTYPE)
        m_row = row_m[:, None]
        for start in range(0, tail_end, BLOCK_N):
            mask = ((start + lanes) < red_len)[None, :]
            x = tl.where(mask, to_accumulator(tl.load(src_row + (start + lanes)[None, :], mask=mask, other=0),
                                              ACC_DTYPE), float("-inf"))
            t += tl.where(x < m_row, split_tail_terms(x - m_row), 0.0)
        tail, _, _ = tree_reduce_last_axis(t, t, t, 1, BLOCK_N, _PLAIN)
        log_s = log_of_split_sum(row_s.to(tl.float64), split_tail_sum(tail))[:, None]
    else:
        log_s = tl.log(row_s.to(tl.float64))[:, None]
    m64 = row_m.to(tl.float64)[:, None]
    dst_row = dst_ptr + row * dst_stride_row
    for start in tl.range(0, red_len, BLOCK_N, num_stages=LOOP_STAGES):
        mask = ((start + lanes) < red_len)[None, :]
        x = to_accumulator(tl.load(src_row + (start + lanes)[None, :], mask=mask, other=0), tl.float64)
        tl.store(dst_row + (start + lanes)[None, :],
                 normalized(x, m64, log_s, dst_ptr.dtype.element_ty, LOG, ACC_DTYPE), mask=mask)
