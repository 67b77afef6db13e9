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
from .tree import tree_reduce_first_axis

_COMPENSATED = tl.constexpr(1)   # strategies.COMPENSATED


@triton.jit
def _merge_columns(part_ptr, out_ptr, n_parts, n_cols, cols, col_ok, BLOCK_P: tl.constexpr,
                   BLOCK_C: tl.constexpr):
    lanes = tl.arange(0, BLOCK_P)
    hi = tl.zeros([BLOCK_P, BLOCK_C], part_ptr.dtype.element_ty)
    lo = tl.zeros([BLOCK_P, BLOCK_C], part_ptr.dtype.element_ty)
    for start in range(0, n_parts, BLOCK_P):
        parts = start + lanes
        mask = (parts < n_parts)[:, None] & col_ok[None, :]
        values = tl.load(part_ptr + parts.to(tl.int64)[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
        hi, lo = compensated_update(hi, lo, values)
    hi, lo, _ = tree_reduce_first_axis(hi, lo, hi, BLOCK_P, BLOCK_C, _COMPENSATED)
    tl.store(out_ptr + cols, round_to_output(compensated_finalize(hi, lo), out_ptr.dtype.element_ty), mask=col_ok)


@triton.jit
def norm_merge_kernel(dw_part_ptr, db_part_ptr, dw_ptr, db_ptr, n_parts, n_cols,
                      WEIGHT_GRAD: tl.constexpr, BIAS_GRAD: tl.constexpr, BLOCK_P: tl.constexpr,
                      BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_ok = cols < n_cols
    if WEIGHT_GRAD:
        _merge_columns(dw_part_ptr, dw_ptr, n_parts, n_cols, cols, col_ok, BLOCK_P, BLOCK_C)
    if BIAS_GRAD:
        _merge_columns(db_part_ptr, db_ptr, n_parts, n_cols, cols, col_ok, BLOCK_P, BLOCK_C)
