"""The normalizing pass of softmax / log_softmax: y = exp(x - lse) or x - lse, elementwise, with
x - lse = (x - m) - log(s) formed in fp64 from the row's maximum m and log(s) (written apart by the
one-pass reduction over the same dim: m + log(s) rounded to fp64 would lose log(s) when |m| is huge).

Rows are the kept positions r (row-major over the kept dims), j runs along the reduced dim. Source and
destination each come as an (outer, red, inner) view (precred.layout), possibly with different
(outer, inner) splits of r: element (r, j) is at (r // inner)*stride_outer + (r % inner)*stride_inner +
j*stride_red in each. A program owns one [rows x reduced] tile; J_FAST puts the reduced index on the
tile's fast axis (the reduced dim is the contiguous one), else the rows are (dim=0 of a row-major tensor),
so loads and stores stay coalesced either way. Divisions are per row, not per element.
"""
import triton
import triton.language as tl

from .finish import round_to_output, to_accumulator
from .grid import block_indices, row_and_column_block


@triton.jit
def _offsets(rows, j, inner, stride_outer, stride_inner, stride_red):
    return ((rows // inner).to(tl.int64) * stride_outer + (rows % inner).to(tl.int64) * stride_inner
            + j.to(tl.int64) * stride_red)


@triton.jit
def tile_indices(r1, j1, n_rows, red_len, J_FAST: tl.constexpr):
    """(rows, j, mask) of a tile from its row and reduced-index ranges: the reduced index on the tile's
    fast axis when J_FAST, else the rows."""
    if J_FAST:
        rows = r1[:, None]
        j = j1[None, :]
    else:
        rows = r1[None, :]
        j = j1[:, None]
    return rows, j, (rows < n_rows) & (j < red_len)


@triton.jit
def normalize_kernel(src_ptr, log_s_ptr, max_ptr, dst_ptr, n_rows, red_len,
                     src_inner, src_stride_outer, src_stride_inner, src_stride_red,
                     dst_inner, dst_stride_outer, dst_stride_inner, dst_stride_red,
                     LOG: tl.constexpr, ACC_DTYPE: tl.constexpr, J_FAST: tl.constexpr,
                     BLOCK_ROWS: tl.constexpr, BLOCK_J: tl.constexpr, FLAT_GRID: tl.constexpr):
    row_block, j_block = row_and_column_block(n_rows, BLOCK_ROWS, FLAT_GRID)   # grid.py
    r1 = block_indices(row_block, BLOCK_ROWS, n_rows)
    j1 = block_indices(j_block, BLOCK_J, red_len)
    rows, j, mask = tile_indices(r1, j1, n_rows, red_len, J_FAST)
    x = to_accumulator(tl.load(src_ptr + _offsets(rows, j, src_inner, src_stride_outer, src_stride_inner,
                                                  src_stride_red), mask=mask, other=0), tl.float64)
    log_s = tl.load(log_s_ptr + rows, mask=rows < n_rows, other=0.0)
    m = tl.load(max_ptr + rows, mask=rows < n_rows, other=0.0)
    tl.store(dst_ptr + _offsets(rows, j, dst_inner, dst_stride_outer, dst_stride_inner, dst_stride_red),
             normalized(x, m, log_s, dst_ptr.dtype.element_ty, LOG, ACC_DTYPE), mask=mask)


@triton.jit
def normalized(x, m, log_s, OUT_DTYPE: tl.constexpr, LOG: tl.constexpr, ACC_DTYPE: tl.constexpr):
    """The output element for input x (fp64) of a row with maximum m and log(s) (fp64), rounded to
    OUT_DTYPE: (x - m) - log(s) in fp64 (x is exact there), then the accumulator, then its exp for
    softmax. torch's specials: a row holding +inf (m = +inf) is NaN throughout, as is a row of -inf
    (-inf - -inf) or one holding NaN (log(s) NaN)."""
    shifted = tl.where(m == float("inf"), float("nan"), (x - m) - log_s).to(ACC_DTYPE)
    if LOG:
        y = shifted
    else:
        y = tl.exp(shifted)
    return round_to_output(y.to(tl.float64), OUT_DTYPE)
