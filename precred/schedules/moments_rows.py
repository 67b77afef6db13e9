"""var / std / var_mean over contiguous fp32 rows that fit on chip, in the fp32 accumulator (`fast`): each
program loads whole rows once and takes both passes of the two-pass algorithm in registers, as the
layer_norm forward takes its statistics (schedules/norm_rows.py). precred.plan.plan_moments_rows says
which rows come here (the measured ones); the rest take the Welford passes.

Rows are the contiguous [n_rows, n_cols] view (the reduced dim is the last and contiguous one; rows
stride_row apart). A program holds BLOCK_ROWS whole rows ([BLOCK_ROWS, BLOCK_N] tiles, BLOCK_N >= n_cols
a power of two), in fp32:
* shift K = the row's first element (0 if not finite), d = x - K, mu' = sum(d) / n (the sum by the fixed
  tree of depth h = log2(BLOCK_N), tree.tree_sum_blocked_rows; the division in fp64, as a product by
  fp64's 1 / n): the roundings
  scale with the spread of the row, not with |mean|, as in the Welford strategy;
* c = d - mu' (x - K formed again: the tile of d is not kept), m2 = sum(c^2) by the same tree -- never
  sum(x^2) - n mean^2 -- with norm_rows' power-of-two scale where some row's sum of squares could leave
  fp32's range (sum_of_squares_scaled_when_needed), undone exactly in fp64;
* var = m2 / max(0, n - correction) (as a product by its reciprocal, as mu'), its square root, the
  mean K + mu' in fp64, rounded once
  (schedules/finish.py, as the Welford passes finish: torch's specials, a row with an inf or NaN has a
  NaN variance and torch.mean's mean).
Bound: precred.moments_error_bound at depth h (precred.plan.RowPlan.depth) holds. With u fp32's unit
roundoff, R = max |x - K|, L = ceil(log2 n), to first order in u:
* the mean: (h + 1) u R (the tree's h roundings of n terms at most R, over n; x - K's rounding), within
  the bound's (7h + 1) u R; the fp64 product by 1 / n and sums add u_64 terms the bound counts apart;
* m2: c_i = (c*_i + a_i - e)(1 + b_i) with c*_i the exact deviation, |a_i| <= u R (x - K's rounding),
  e the mean's error as rounded to fp32 (|e| <= E = (h + 2) u R, the same in every c_i) and |b_i| <= u;
  since sum(c*) = 0 exactly, sum(c^2) = (m2 + 2 sum(c* a) + sum((a - e)^2)) (1 + 2u): e cancels to first
  order. With the squares' and the tree's roundings: |dm2| <= (h + 3) u m2 + 2 u R sqrt(n m2)
  (Cauchy-Schwarz) + n (h + 3)^2 u^2 R^2. The first two are within the bound's u h (10 m2 + 40 sqrt(L)
  R sqrt(n m2)); so is the third where m2 >= n (h + 3)^4 u^2 R^2 / (1600 h^2), and below that the
  bound's own ratio rho = dm2 / m2 exceeds 1600 h^2 / (h + 3)^2 >= 100, where it claims nothing (inf).
* squares below fp32's normal range (the unscaled path keeps sum(c^2) >= 2^-60) lose at most 2^-150
  each: within the bound's 16 n h eta.
"""
import triton
import triton.language as tl

from .finish import finish_mean, finish_variance, to_accumulator
from .grid import block_indices
from .norm_rows import centred_row, sum_of_squares_scaled_when_needed
from .steps import row_shift
from .tree import tree_sum_blocked_rows


@triton.jit
def reciprocal_of_power_of_two(scale):
    """1 / scale in fp64, exact, for an fp32 power of two scale in [2^-126, 2^127]
    (norm_rows.power_of_two_scale's), from its exponent bits: no division."""
    biased = (scale.to(tl.int32, bitcast=True) >> 23) & 0xFF    # 127 + k for scale = 2^k
    return ((1150 - biased).to(tl.int64) << 52).to(tl.float64, bitcast=True)   # fp64's 1023 - k


@triton.jit
def moments_rows_kernel(x_ptr, out_ptr, mean_ptr, n_rows, n_cols, stride_row, inv_n: tl.float64,
                        inv_divisor: tl.float64, TAKE_SQRT: tl.constexpr, WITH_MEAN: tl.constexpr,
                        BLOCK_ROWS: tl.constexpr, BLOCK_N: tl.constexpr, TREE_VEC: tl.constexpr,
                        TREE_THREADS: tl.constexpr):
    # x: rows of n_cols contiguous elements, stride_row apart; out, mean: n_rows outputs. inv_n: fp64's
    # 1 / n_cols; inv_divisor: fp64's 1 / max(0, n - correction) (inf for 0), both correctly rounded on
    # the host: the per-row divisions, which each thread runs for each of its rows (the latency of short
    # rows), become products (2 u_64 each, where the divisions took 1).
    rows = block_indices(tl.program_id(0), BLOCK_ROWS, n_rows)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < n_rows
    mask = row_ok[:, None] & (cols < n_cols)[None, :]
    starts = rows.to(tl.int64) * stride_row
    x = to_accumulator(tl.load(x_ptr + starts[:, None] + cols[None, :], mask=mask, other=0), tl.float32)
    shift = row_shift(x_ptr + starts, row_ok, tl.float32)   # a finite shift, else 0
    d = tl.where(mask, x - shift[:, None], 0.0)
    shifted_mean = tree_sum_blocked_rows(d, BLOCK_ROWS, BLOCK_N, TREE_VEC, TREE_THREADS).to(tl.float64) * inv_n
    c = centred_row(x, mask, shift, shifted_mean, 1.0, False, False, tl.float32)
    scale, q = sum_of_squares_scaled_when_needed(c, BLOCK_ROWS, BLOCK_N, TREE_VEC, TREE_THREADS)
    inv_scale = reciprocal_of_power_of_two(scale)
    m2 = (q.to(tl.float64) * inv_scale) * inv_scale   # exact: powers of two, m2 inside fp64's range
    # divisor 0: inv_divisor inf gives inf (m2 > 0) or NaN (m2 == 0), as m2 / 0 and torch
    tl.store(out_ptr + rows, finish_variance(m2 * inv_divisor, shift.to(tl.float64) + shifted_mean, TAKE_SQRT,
                                             out_ptr.dtype.element_ty), mask=row_ok)
    if WITH_MEAN:
        tl.store(mean_ptr + rows, finish_mean(shifted_mean, shift, mean_ptr.dtype.element_ty), mask=row_ok)
