"""The merge of layer_norm / rms_norm's dweight / dbias partials: one launch for both.

The backward kernels (norm_rows.norm_backward_kernel, norm_stream.norm_backward_columns_kernel) leave
one partial row per program or row block, [n_parts, n_cols] in the accumulator dtype. Program c owns BLOCK_C columns and
sums them over the parts: lane l of BLOCK_P accumulates parts l, l + BLOCK_P, ... with the compensated
strategy (TwoSum, strategies/compensated.py), the lanes are merged by the fixed tree with the
compensated combine, and hi + lo (fp64) is rounded once to the output dtype -- the `kahan` mode's sum,
whose error bound precred.bounds.norm_parameter_grad_error_bound assumes. The order is fixed by the
shapes alone: every bit is the same run to run. One launch for dweight and dbias together, instead of a
reduction call each, is host time that a mid-sized norm's backward feels.
"""
import triton
import triton.language as tl

from ..strategies import compensated_finalize, compensated_update
from .finish import round_to_output
from .grid import block_indices
from .tree import tree_reduce_first_axis

_COMPENSATED = tl.constexpr(1)   # strategies.COMPENSATED


@triton.jit
def _finish_columns(hi, lo, out_ptr, cols, col_ok, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    hi, lo, _ = tree_reduce_first_axis(hi, lo, hi, BLOCK_P, BLOCK_C, _COMPENSATED)
    tl.store(out_ptr + cols, round_to_output(compensated_finalize(hi, lo), out_ptr.dtype.element_ty), mask=col_ok)


@triton.jit
def norm_merge_kernel(dw_part_ptr, db_part_ptr, dw_ptr, db_ptr, n_parts, n_cols,
                      WEIGHT_GRAD: tl.constexpr, BIAS_GRAD: tl.constexpr, BLOCK_P: tl.constexpr,
                      BLOCK_C: tl.constexpr):
    """dweight and dbias in one loop over the parts: each tile of both is loaded before either is
    summed, so the two arrays' loads are in flight together (one after the other, the merge was two
    chains of dependent rounds). Each array's order is its own lanes' chains and tree (the module's
    note), as when they were merged one after the other: for a given tile (precred.plan.plan_norm_merge),
    the same bits."""
    cols = block_indices(tl.program_id(0), BLOCK_C, n_cols)
    col_ok = cols < n_cols
    lanes = tl.arange(0, BLOCK_P)
    w_hi = tl.zeros([BLOCK_P, BLOCK_C], dw_part_ptr.dtype.element_ty)
    w_lo = w_hi
    b_hi = tl.zeros([BLOCK_P, BLOCK_C], db_part_ptr.dtype.element_ty)
    b_lo = b_hi
    for start in range(0, n_parts, BLOCK_P):
        parts = start + lanes
        mask = (parts < n_parts)[:, None] & col_ok[None, :]
        offsets = parts.to(tl.int64)[:, None] * n_cols + cols[None, :]
        if WEIGHT_GRAD:
            w = tl.load(dw_part_ptr + offsets, mask=mask, other=0.0)
        if BIAS_GRAD:
            b = tl.load(db_part_ptr + offsets, mask=mask, other=0.0)
        if WEIGHT_GRAD:
            w_hi, w_lo = compensated_update(w_hi, w_lo, w)
        if BIAS_GRAD:
            b_hi, b_lo = compensated_update(b_hi, b_lo, b)
    if WEIGHT_GRAD:
        _finish_columns(w_hi, w_lo, dw_ptr, cols, col_ok, BLOCK_P, BLOCK_C)
    if BIAS_GRAD:
        _finish_columns(b_hi, b_lo, db_ptr, cols, col_ok, BLOCK_P, BLOCK_C)
