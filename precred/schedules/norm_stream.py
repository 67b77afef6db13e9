"""layer_norm / rms_norm over rows too long for registers: the data stream through in tiles.

Forward: the row statistics come first from the Welford reduction (schedules inner/split, fp64
accumulator, precred.launch.reduce_moments), as the fp64 biased variance and mean of each row;
`norm_apply_kernel` turns them into the row's mean and rstd (`row_statistics`, per program: a few fp64
operations per row, no extra launch), reads x again in [BLOCK_ROWS, BLOCK_J] tiles (a 2-D grid, so a
few very long rows still fill the GPU) and writes y = (x - mean) * rstd * w + b, the mean subtracted as
hi + lo in ACC_DTYPE (* w + b in norm_rows.store_affine's dtype). The programs of the first column block also store mean and rstd for the backward
pass.

Backward, in two launches. `norm_backward_row_terms_kernel` (a program per row) reads each row once
and accumulates sum(g w) and sum(g w xhat) in BLOCK_N lanes (merged by the fixed tree); their means,
rounded to ACC_DTYPE, go to a per-row scratch. `norm_backward_columns_kernel` then splits the columns
across programs (a 2-D grid of column blocks and row blocks): each reads its BLOCK_C columns of its
rows, BLOCK_R rows at a time, writes dx and adds g * xhat and g into [BLOCK_R, BLOCK_C] dw / db lanes,
merged over the rows by the fixed tree and stored once into the row block's row of the partials
([row blocks, n_cols], ACC_DTYPE). The row blocks are few (enough programs to fill the GPU), so the
partials are small next to the data: the looped kernel this replaces (a program per range of rows,
both phases in it) left a partial row per program -- on 1024 x 65536, 256 rows of 65536, written and
read again by the merge, more traffic than the gradient's -- and re-read its rows in an order no cache
held. The launcher merges the partials in a fixed order, as for rows on chip (schedules/norm_rows.py).
"""
import triton
import triton.language as tl

from .finish import round_to_output, to_accumulator
from .grid import block_indices, row_and_column_block
from .norm_rows import normalized_chunk, store_affine
from .tree import tree_reduce_first_axis, tree_reduce_last_axis

_PLAIN = tl.constexpr(0)   # strategies.PLAIN


@triton.jit
def row_statistics(var, mean, eps, RMS: tl.constexpr):
    """(mean, rstd) of rows, fp64, from Welford's fp64 biased variance and mean: layer_norm's
    1 / sqrt(var + eps); rms_norm's mean is 0 and its mean of squares var + mean^2 (two non-negative
    terms). An infinite mean (an inf in the row, no NaN) makes rms_norm's mean of squares inf, as torch
    (Welford's variance is NaN there); a row holding both +inf and -inf has a NaN mean and comes out NaN
    throughout, where torch gives 0 at its finite elements (documented in precred.rms_norm). sqrt and
    the division are correctly rounded in fp64 (sqrt.rn / div.rn on the GPU, numpy in the interpreter)."""
    if RMS:
        square = mean * mean
        var = tl.where(square > 1.7976931348623157e308, square, var + square)   # inf where |mean| is
        mean = tl.zeros_like(mean)
    return mean, 1.0 / tl.sqrt(var + eps)


@triton.jit
def norm_apply_kernel(x_ptr, w_ptr, b_ptr, var_ptr, welford_mean_ptr, y_ptr, mean_ptr, rstd_ptr,
                      n_rows, n_cols, eps: tl.float64,
                      RMS: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, ACC_DTYPE: tl.constexpr,
                      AFFINE_DTYPE: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK_J: tl.constexpr,
                      FLAT_GRID: tl.constexpr):
    # x, y: [n_rows, n_cols] contiguous; var, welford_mean (read), mean, rstd (written by the programs of
    # column block 0): [n_rows] fp64; grid (row blocks, column blocks), or flat (grid.py). eps: fp64
    # (annotated).
    row_block, column_block = row_and_column_block(n_rows, BLOCK_ROWS, FLAT_GRID)
    rows = block_indices(row_block, BLOCK_ROWS, n_rows)
    cols = block_indices(column_block, BLOCK_J, n_cols)
    row_ok = rows < n_rows
    col_ok = cols < n_cols
    mask = row_ok[:, None] & col_ok[None, :]
    offsets = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
    x = to_accumulator(tl.load(x_ptr + offsets, mask=mask, other=0), ACC_DTYPE)
    var = tl.load(var_ptr + rows, mask=row_ok, other=0.0)
    mean, rstd = row_statistics(var, tl.load(welford_mean_ptr + rows, mask=row_ok, other=0.0), eps, RMS)
    if column_block == 0:
        tl.store(mean_ptr + rows, mean, mask=row_ok)
        tl.store(rstd_ptr + rows, rstd, mask=row_ok)
    xhat = normalized_chunk(x, mean[:, None], rstd[:, None], RMS, ACC_DTYPE)
    store_affine(xhat, w_ptr, b_ptr, y_ptr, offsets, cols, col_ok, mask, HAS_W, HAS_B, AFFINE_DTYPE)


@triton.jit
def norm_backward_row_terms_kernel(x_ptr, w_ptr, g_ptr, mean_ptr, rstd_ptr, projection_ptr, total_ptr, n_cols,
                                   RMS: tl.constexpr, HAS_W: tl.constexpr, ACC_DTYPE: tl.constexpr,
                                   BLOCK_N: tl.constexpr):
    # One program per row: mean(g w xhat) and mean(g w) into projection / total ([n_rows] ACC_DTYPE).
    row = tl.program_id(0).to(tl.int64)
    base = row * n_cols
    lanes = tl.arange(0, BLOCK_N)[None, :]
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    projection = tl.zeros([1, BLOCK_N], ACC_DTYPE)
    total = tl.zeros([1, BLOCK_N], ACC_DTYPE)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + lanes
        mask = cols < n_cols
        x = to_accumulator(tl.load(x_ptr + base + cols, mask=mask, other=0), ACC_DTYPE)
        g = to_accumulator(tl.load(g_ptr + base + cols, mask=mask, other=0), ACC_DTYPE)
        if HAS_W:
            g = g * to_accumulator(tl.load(w_ptr + cols, mask=mask, other=0), ACC_DTYPE)
        xhat = tl.where(mask, normalized_chunk(x, mean, rstd, RMS, ACC_DTYPE), 0.0)
        projection += g * xhat
        total += g
    projection_sum, _, _ = tree_reduce_last_axis(projection, projection, projection, 1, BLOCK_N, _PLAIN)
    total_sum, _, _ = tree_reduce_last_axis(total, total, total, 1, BLOCK_N, _PLAIN)
    tl.store(projection_ptr + row + tl.arange(0, 1), (projection_sum.to(tl.float64) / n_cols).to(ACC_DTYPE))
    tl.store(total_ptr + row + tl.arange(0, 1), (total_sum.to(tl.float64) / n_cols).to(ACC_DTYPE))


@triton.jit
def norm_backward_columns_kernel(x_ptr, w_ptr, g_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_part_ptr, db_part_ptr,
                                 projection_ptr, total_ptr, n_rows, n_cols, rows_per_block,
                                 RMS: tl.constexpr, HAS_W: tl.constexpr, WEIGHT_GRAD: tl.constexpr,
                                 BIAS_GRAD: tl.constexpr, ACC_DTYPE: tl.constexpr, BLOCK_R: tl.constexpr,
                                 BLOCK_C: tl.constexpr, LOOP_STAGES: tl.constexpr):
    # Grid (column blocks, row blocks): BLOCK_C columns of rows_per_block rows (a multiple of BLOCK_R),
    # BLOCK_R rows at a time; dw / db in [BLOCK_R, BLOCK_C] lanes, merged over the rows by the fixed tree
    # and stored into the row block's row of the partials ([row blocks, n_cols]).
    cols = block_indices(tl.program_id(0), BLOCK_C, n_cols)
    col_ok = cols < n_cols
    row_block = tl.program_id(1)
    first_row = row_block.to(tl.int64) * rows_per_block
    last_row = tl.minimum(first_row + rows_per_block, n_rows)
    w = tl.full([1, BLOCK_C], 1.0, ACC_DTYPE)
    if HAS_W:
        w = to_accumulator(tl.load(w_ptr + cols, mask=col_ok, other=0), ACC_DTYPE)[None, :]
    dw = tl.zeros([BLOCK_R, BLOCK_C], ACC_DTYPE)
    db = tl.zeros([BLOCK_R, BLOCK_C], ACC_DTYPE)
    for start in tl.range(first_row, last_row, BLOCK_R, num_stages=LOOP_STAGES):
        rows = start + tl.arange(0, BLOCK_R)
        row_ok = rows < last_row
        mask = row_ok[:, None] & col_ok[None, :]
        offsets = rows[:, None] * n_cols + cols[None, :]
        mean = tl.load(mean_ptr + rows, mask=row_ok, other=0.0)[:, None]
        rstd = tl.load(rstd_ptr + rows, mask=row_ok, other=0.0)[:, None]
        projection_mean = tl.load(projection_ptr + rows, mask=row_ok, other=0.0)[:, None]
        total_mean = tl.load(total_ptr + rows, mask=row_ok, other=0.0)[:, None]
        x = to_accumulator(tl.load(x_ptr + offsets, mask=mask, other=0), ACC_DTYPE)
        g = to_accumulator(tl.load(g_ptr + offsets, mask=mask, other=0), ACC_DTYPE)
        xhat = tl.where(mask, normalized_chunk(x, mean, rstd, RMS, ACC_DTYPE), 0.0)
        inner = g * w - xhat * projection_mean
        if not RMS:
            inner = inner - total_mean
        tl.store(dx_ptr + offsets, round_to_output((inner * rstd.to(ACC_DTYPE)).to(tl.float64),
                                                   dx_ptr.dtype.element_ty), mask=mask)
        dw += tl.where(mask, g * xhat, 0.0)
        db += tl.where(mask, g, 0.0)
    part = row_block.to(tl.int64) * n_cols + cols
    if WEIGHT_GRAD:
        dw_sum, _, _ = tree_reduce_first_axis(dw, dw, dw, BLOCK_R, BLOCK_C, _PLAIN)
        tl.store(dw_part_ptr + part, dw_sum, mask=col_ok)
    if BIAS_GRAD:
        db_sum, _, _ = tree_reduce_first_axis(db, db, db, BLOCK_R, BLOCK_C, _PLAIN)
        tl.store(db_part_ptr + part, db_sum, mask=col_ok)
