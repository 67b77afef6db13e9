"""layer_norm / rms_norm over rows that fit on chip: forward and backward kernels that load each row once.

Rows are the contiguous [n_rows, n_cols] view of the input (the normalized dims are the trailing ones).
A program holds BLOCK_ROWS whole rows ([BLOCK_ROWS, BLOCK_N] tiles, BLOCK_N >= n_cols a power of two)
in registers and does every pass there. Arithmetic runs in ACC_DTYPE (fp32 for the `fast` mode, fp64
for `precise` and for fp64 inputs; but `precise` layer_norm of 16-bit input and output takes its mean
alone in fp64 and runs fp32 from there on, FP64_MEAN: fp64_mean_as_pair); the per-row divisions and
square roots run in fp64 (a division by n as a product by fp64's 1 / n) -- but rstd's for 16-bit
output of narrower input, in fp32 (rstd_in_fp32, plan.norm_fp32_rstd) -- correctly rounded on the GPU
and in the interpreter alike.
Sums use the fixed pairwise tree (schedules/tree.py), the same order on every device.

Forward numerics (bounds: precred.bounds.norm_error_bound):
* layer_norm: shift K = the row's first element (0 if not finite); d = x - K; shifted mean
  mu' = sum(d) / n; c = d - mu'. The rounding errors then scale with the spread of the row, not with
  |mean| (a mean 1e6 times the spread costs nothing; the Welford strategy uses the same shift);
* rms_norm: c = x;
* a power-of-two scale 2^-E with 2^E <= max|c| < 2^(E+1) makes t = c * 2^-E exact and < 2 (4 at the
  top of the range), so sum(t^2) neither overflows (values near 1e19 and beyond) nor underflows (tiny
  values); rs = 1 / sqrt(sum(t^2) / n + eps * 2^(-2E)) in fp64 (by fp32 steps for 16-bit output
  where they fit: rstd_scaled_when_needed, rstd_in_fp32_where_it_fits); y = (t * rs) * w + b (the last two
  steps in fp32 for 16-bit outputs of an fp64 accumulator: store_affine; for 16-bit input too, on rows
  of precred.plan.NORM_FP32_PASS_MIN_ROW and more, xhat = ((x - hi) - lo) * rstd in fp32 with the
  mean as an fp32 pair hi + lo -- the streaming pass's arithmetic -- wherever every row of the
  program has rstd < 2^100: plan.norm_fp32_pass, FP32_PASS). An fp64
  accumulator of narrower input needs no scale (its squares cannot leave fp64's range): E = 0 there.
  fp32 takes the scale only in a program where some row's sum(c^2) left [2^-60, fp32's largest]
  (sum_of_squares_scaled_when_needed; elsewhere E = 0 and the max|c| pass is skipped). H100,
  bench/profile_norm.py, layer_norm fast GB/s always -> when needed: 65536x1024 bf16 2314 -> 2469,
  262144x256 fp32 2589 -> 2666, the other shapes of issue 3 within 2%.
Every row sum, forward and backward, takes the blocked layout's register order
(tree.tree_sum_blocked_rows): a balanced tree of depth log2(BLOCK_N). (The backward's used to take the
adjacent-pairs tree; H100, bench/profile_norm.py, layer_norm backward GB/s adjacent -> blocked: 8192^2
fp32 1663 -> 2229, bf16 1179 -> 1548; 4096^2 bf16 564 -> 1146; 262144x256 bf16 1611 -> 2024; 65536x1024
within 3%; 4096^2 fp32 1447 -> 1208, still above torch's 1160.)
The kernel also writes, in fp64, the row's mean (K + mu'; 0 for rms_norm) and rstd = rs * 2^-E, which
the backward pass reuses.

Specials, torch's: a NaN or inf in a layer_norm row makes the whole row NaN (inf - inf); in rms_norm
an inf makes rstd 0, so the row's finite elements give 0 and the inf elements NaN.
"""
import triton
import triton.language as tl

from .finish import round_to_output, to_accumulator
from .grid import block_indices, block_start
from .steps import row_shift
from .tree import tree_reduce_first_axis, tree_sum_blocked_rows

_PLAIN = tl.constexpr(0)   # strategies.PLAIN: the sum's combine in the fixed tree


@triton.jit
def power_of_two_scale(a):
    """2^-E for the largest power of two 2^E <= a (a >= 0, per row), in a's dtype, built from the
    exponent bits so that it is exact: a subnormal or zero a gives the largest scale (2^127 for fp32;
    2^511 for fp64, whose square must stay finite), a huge, infinite or NaN a the smallest normal one
    (2^-126 / 2^-1022)."""
    if a.dtype == tl.float64:
        biased = ((a.to(tl.int64, bitcast=True) >> 52) & 0x7FF).to(tl.int32)
        scale_biased = tl.minimum(tl.maximum(2046 - biased, 1), 1534).to(tl.int64)   # <= 2^511: squares stay finite
        scale = (scale_biased << 52).to(tl.float64, bitcast=True)
    else:
        biased = (a.to(tl.int32, bitcast=True) >> 23) & 0xFF
        scale_biased = tl.minimum(tl.maximum(254 - biased, 1), 254)
        scale = (scale_biased << 23).to(tl.float32, bitcast=True)
    return scale


@triton.jit
def q_outside_fp32_range(q):
    """Per row: the fp32 sum of squares q left [2^-60, fp32's largest] (an overflow, squares near the
    underflow, or a NaN; NaN is outside)."""
    return ~((q >= 8.673617379884035e-19) & (q <= 3.4028234663852886e38))


@triton.jit
def squares_left_fp32_range(q):
    """Whether some row's q is outside (q_outside_fp32_range): the program then takes the power-of-two
    scale. (Rows past the last count too: their q is 0, so a partly filled program takes it.)"""
    return tl.max(q_outside_fp32_range(q).to(tl.int32), 0) != 0


@triton.jit
def sum_of_squares_scaled_when_needed(c, ROWS: tl.constexpr, WIDTH: tl.constexpr, TREE_VEC: tl.constexpr,
                                      TREE_THREADS: tl.constexpr):
    """(scale, q = sum((c * scale)^2)) per row of an fp32 tile: scale 1 -- no max|c| pass, a row
    reduction fewer -- unless some row's q left [2^-60, fp32's largest] (an overflow, squares near the
    underflow, or a NaN), then for the whole program power_of_two_scale's, as the plain path. Where
    q is in that range the result is the scaled path's up to the squares that fall below 2^-126 (n
    2^-150 at most, relative n 2^-90 of q: inside the bounds' 16u padding for n < 2^60), so every
    y, mean and rstd equals the scaled path's but for those (powers of two commute with the
    roundings). Which rows take which path depends on the data alone: deterministic."""
    q = tree_sum_blocked_rows(c * c, ROWS, WIDTH, TREE_VEC, TREE_THREADS)
    if squares_left_fp32_range(q):
        scale, q = scaled_sum_of_squares(c, ROWS, WIDTH, TREE_VEC, TREE_THREADS)
    else:
        scale = tl.full([ROWS], 1.0, c.dtype)
    return scale, q


@triton.jit
def scaled_sum_of_squares(c, ROWS: tl.constexpr, WIDTH: tl.constexpr, TREE_VEC: tl.constexpr,
                          TREE_THREADS: tl.constexpr):
    """(scale, q = sum((c * scale)^2)) per row, scale = power_of_two_scale(max |c|): t = c * scale is
    exact and below 4, so the squares neither overflow nor underflow."""
    scale = power_of_two_scale(tl.max(tl.abs(c), 1))
    t = c * scale[:, None]
    return scale, tree_sum_blocked_rows(t * t, ROWS, WIDTH, TREE_VEC, TREE_THREADS)


@triton.jit
def rstd_in_fp64(q, scale, inv_n, eps):
    """rstd / scale = 1 / sqrt(q / n + eps * scale^2) per row in fp64, q / n as q times inv_n (fp64's
    1 / n: a product in place of a division per row; 2 u64); each step correctly rounded (ptxas may
    fuse the product and the sum: one rounding fewer); scale^2 <= 2^254 is exact and keeps
    eps * scale^2 finite."""
    scale64 = scale.to(tl.float64)
    return 1.0 / tl.sqrt(q.to(tl.float64) * inv_n + eps * (scale64 * scale64))


@triton.jit
def eps_fits_fp32_steps(eps):
    """Whether rstd_in_fp32 takes this eps (fp64; per row or one): 0, or in [2^-126, 2^100], where its
    fp32 rounding is relative and q / n + eps stays finite."""
    return (eps == 0.0) | ((eps >= 1.1754943508222875e-38) & (eps <= 1.2676506002282294e30))


@triton.jit
def rstd_in_fp32(q, n_cols, eps32):
    """1 / sqrt(q / n + eps) per row by correctly rounded fp32 steps (div_rn, sqrt_rn: the same bits on
    every GPU and in the interpreter, whose numpy rounds each step too), returned in fp64; eps32: eps
    rounded to fp32. Needs q inside [2^-60, fp32's largest] and eps_fits_fp32_steps(eps), so that every
    step stays normal and finite (n < 2^24). Relative error 3 u32 to first order
    (precred.bounds.norm_error_bound), in a chain of a fraction of the latency of fp64's."""
    var = tl.div_rn(q, tl.zeros_like(q) + n_cols)   # n exact in fp32; a count of 1 arrives as a constexpr
    return tl.div_rn(1.0, tl.sqrt_rn(var + eps32)).to(tl.float64)


@triton.jit
def rstd_in_fp32_where_it_fits(q, row_ok, n_cols, inv_n, eps):
    """rstd per row of an fp64 q (an fp64 accumulator's: no scale) by rstd_in_fp32 on q rounded to
    fp32 (half a u32 more: 3.5 u32), on every row where that fits its steps; the fp64 steps on the
    others, and in a branch that only a program holding such a row takes (its fp32 rows get the bits
    they get anywhere)."""
    q32 = q.to(tl.float32)
    fits = ~q_outside_fp32_range(q32) & eps_fits_fp32_steps(tl.zeros_like(q) + eps)   # eps per row
    rs = rstd_in_fp32(q32, n_cols, eps.to(tl.float32))
    if tl.max((row_ok & ~fits).to(tl.int32), 0) != 0:
        rs = tl.where(fits, rs, rstd_in_fp64(q, tl.full(q.shape, 1.0, tl.float64), inv_n, eps))
    return rs


@triton.jit
def rstd_scaled_when_needed(c, n_cols, inv_n, eps, pre, ROWS: tl.constexpr, WIDTH: tl.constexpr,
                            TREE_VEC: tl.constexpr, TREE_THREADS: tl.constexpr, FP32_RSTD: tl.constexpr,
                            FP64_MEAN: tl.constexpr):
    """(scale, rs = rstd / scale) per row of an fp32 tile c: sum_of_squares_scaled_when_needed's scale
    and q, then rs by rstd_in_fp64 -- or, FP32_RSTD, by rstd_in_fp32 in the programs that take no scale
    and whose eps fits its steps; the others take the fp64 steps inside the scale's branch, which an
    eps outside sends them to as well. So with FP32_RSTD a row's rstd, and its y, may differ in the
    last bits as its program takes the scale or not (a row of 1e-30 among its neighbours; the last,
    partly filled program): both within the bound, and the same input and plan give the same bits.
    One branch: with the fp32 steps in a second branch of their own, after the scale's, H200 rms_norm
    bf16 262144x256 read 3581-3605 GB/s; in one, 3603 (3738-3757 at 80 registers,
    plan.NORM_FORWARD_ROW_OVERRIDES); fp32 steps alone, no fp64 code (wrong for extreme rows), 3803.
    Not taken: the fp32 steps also on the scaled rows they fit, per row inside the scale's branch (a
    row's bits then independent of its neighbours'): H200, bench/profile_norm.py, fast bf16 GB/s
    262144x256 rms_norm 3735 -> 2995, layer_norm 3090 -> 2834, 65536x1024 layer_norm 3565 -> 3256
    (sm_90 at 80 registers: rms_norm 262144x256 spilled 8 -> 56 bytes).
    FP64_MEAN (fp64_mean_as_pair): c is the centred row times pre (per row, a power of two: 1, or 1/4
    where the mean is huge); a program holding a row of pre != 1 takes the scale's branch, whose
    rstd then divides by scale * pre, so rs = rstd / scale there too."""
    tl.static_assert(FP32_RSTD or not FP64_MEAN, "FP64_MEAN takes the fp32 tile's path")
    if FP32_RSTD:
        q = tree_sum_blocked_rows(c * c, ROWS, WIDTH, TREE_VEC, TREE_THREADS)
        scaled = squares_left_fp32_range(q) | ~eps_fits_fp32_steps(eps)
        if FP64_MEAN:
            scaled = scaled | (tl.max((pre != 1.0).to(tl.int32), 0) != 0)
        if scaled:
            scale, q = scaled_sum_of_squares(c, ROWS, WIDTH, TREE_VEC, TREE_THREADS)
            rs = rstd_in_fp64(q, scale * pre if FP64_MEAN else scale, inv_n, eps)
        else:
            scale = tl.full([ROWS], 1.0, c.dtype)
            rs = rstd_in_fp32(q, n_cols, eps.to(tl.float32))
    else:
        scale, q = sum_of_squares_scaled_when_needed(c, ROWS, WIDTH, TREE_VEC, TREE_THREADS)
        rs = rstd_in_fp64(q, scale, inv_n, eps)
    return scale, rs


@triton.jit
def split_to_accumulator(value, ACC_DTYPE: tl.constexpr):
    """An fp64 per-row value as hi + lo in ACC_DTYPE (hi = value rounded, lo = the rest rounded): for an
    fp32 accumulator, (x - hi) - lo keeps a mean to ~2^-48 of itself."""
    hi = value.to(ACC_DTYPE)
    lo = (value - hi.to(tl.float64)).to(ACC_DTYPE)
    return hi, lo


@triton.jit
def normalized_chunk(x, mean, rstd, RMS: tl.constexpr, ACC_DTYPE: tl.constexpr):
    """xhat = (x - mean) * rstd in ACC_DTYPE, mean (as hi + lo) and rstd fp64, broadcastable to x."""
    r = rstd.to(ACC_DTYPE)
    if RMS:
        xhat = x * r
    else:
        mean_hi, mean_lo = split_to_accumulator(mean, ACC_DTYPE)
        xhat = ((x - mean_hi) - mean_lo) * r
    return xhat


@triton.jit
def runtime_zero(pointer):
    """0, as an int32 the compiler cannot fold: the top bit of a tensor's address (CPU and GPU addresses
    are far below 2^63). Not from a row or column count: Triton passes counts from 2^31 on as uint32 or
    int64 and turns counts of 1 into constants, and a sign-bit shift of those is not 0 or not opaque."""
    return (pointer.to(tl.int64) >> 63).to(tl.int32)


@triton.jit
def opaque_copy(raw, opaque_zero, WIDENED: tl.constexpr):
    """raw, bit for bit. Where WIDENED (an fp64 accumulator of narrower input), through an XOR with a
    runtime zero the compiler cannot fold: the forward converts the raw tile anew in each pass, and
    without this, common-subexpression elimination would share one converted fp64 tile between the
    passes and keep it live in registers across the row reductions (H100, 8192-element rows: 176 -> 128
    registers for fp32 input, 132 -> 78 for bf16, one program per SM -> two and three). For an fp32
    accumulator the converted tile is at most twice the raw one, and sharing it measured no worse
    (bf16: 87 registers shared, 119 converted anew). opaque_zero: runtime_zero's."""
    if not WIDENED:
        out = raw
    elif raw.dtype == tl.float32:
        out = (raw.to(tl.int32, bitcast=True) ^ opaque_zero).to(tl.float32, bitcast=True)
    elif raw.dtype == tl.int16:   # bf16 as its int16 bit pattern (the interpreter's; the XOR widens to int32)
        out = (raw ^ opaque_zero).to(tl.int16)
    else:                         # fp16, bf16
        out = (raw.to(tl.int16, bitcast=True) ^ opaque_zero).to(tl.int16).to(raw.dtype, bitcast=True)
    return out


@triton.jit
def store_affine(xhat, w_ptr, b_ptr, y_ptr, offsets, cols, col_ok, mask, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                 AFFINE_DTYPE: tl.constexpr):
    """y = xhat * w + b in AFFINE_DTYPE (precred.modes.norm_affine_dtype: the accumulator's, or fp32
    for the 16-bit outputs of an fp64 one; xhat rounded to it first), stored rounded to y's dtype."""
    y = xhat.to(AFFINE_DTYPE)
    if HAS_W:
        y = y * to_accumulator(tl.load(w_ptr + cols, mask=col_ok, other=0), AFFINE_DTYPE)[None, :]
    if HAS_B:
        y = y + to_accumulator(tl.load(b_ptr + cols, mask=col_ok, other=0), AFFINE_DTYPE)[None, :]
    tl.store(y_ptr + offsets, round_to_output(y, y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def fp64_mean_as_pair(raw, first_ptrs, row_ok, mask, inv_n, ROWS: tl.constexpr, WIDTH: tl.constexpr,
                      TREE_VEC: tl.constexpr, TREE_THREADS: tl.constexpr):
    """(mean, pre, hi, lo) of 16-bit rows (`precise`, 16-bit output: plan.norm_fp64_mean): the mean
    K + sum(x - K) / n by an fp64 tree (d = x - K exact but where their exponents lie more than 44
    apart), then as an fp32 pair hi + lo of mean * pre, so that c = (x * pre - hi) - lo in fp32 keeps
    it to ~2^-48 of itself. pre = 1/4 where |mean| >= 2^119, else 1: x - hi could leave fp32's range
    only there (|x| <= 2^128 - 2^120 for bf16), and x * pre is exact for 16-bit x. (The multiply
    measured free: H200, precise bf16 262144x256 3124/3127 GB/s with it, 3117/3119 without.)"""
    shift = row_shift(first_ptrs, row_ok, tl.float64)   # a finite shift, else 0
    d = tl.where(mask, to_accumulator(raw, tl.float64) - shift[:, None], 0.0)
    mean = shift + tree_sum_blocked_rows(d, ROWS, WIDTH, TREE_VEC, TREE_THREADS) * inv_n
    pre = tl.where(tl.abs(mean) >= 6.646139978924579e35, 0.25, 1.0).to(tl.float32)   # 2^119; NaN: 1
    hi, lo = split_to_accumulator(mean * pre.to(tl.float64), tl.float32)
    return mean, pre, hi, lo


@triton.jit
def centred_row(raw, mask, shift, shifted_mean, pre, RMS: tl.constexpr, FP64_MEAN: tl.constexpr,
                ACC_DTYPE: tl.constexpr):
    """c = (x - K) - mu' (layer_norm; rms_norm: c = x) in ACC_DTYPE, masked lanes 0. FP64_MEAN:
    c = (x * pre - hi) - lo, shift and shifted_mean being hi and lo (fp64_mean_as_pair)."""
    x = to_accumulator(raw, ACC_DTYPE)
    if FP64_MEAN:
        x = x * pre[:, None]   # exact: 16-bit input, pre 1 or 1/4
    if RMS:
        c = tl.where(mask, x, 0.0)
    else:
        c = tl.where(mask, (x - shift[:, None]) - shifted_mean.to(ACC_DTYPE)[:, None], 0.0)
    return c


@triton.jit
def norm_forward_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_rows, n_cols, eps: tl.float64,
                        inv_n: tl.float64,
                        RMS: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                        ACC_DTYPE: tl.constexpr, AFFINE_DTYPE: tl.constexpr, BLOCK_ROWS: tl.constexpr,
                        BLOCK_N: tl.constexpr, TREE_VEC: tl.constexpr, TREE_THREADS: tl.constexpr,
                        FP32_PASS: tl.constexpr, FP32_RSTD: tl.constexpr, FP64_MEAN: tl.constexpr):
    # x, y: [n_rows, n_cols] contiguous; w, b: [n_cols]; mean, rstd: [n_rows] fp64. eps and inv_n (1 / n_cols,
    # correctly rounded on the host: the row divisions by n become products) arrive as fp64 (annotated:
    # an unannotated float argument would reach the kernel rounded to fp32).
    # Only the raw tile (the input dtype) stays live across the passes; each pass converts it anew
    # (opaque_copy). The power-of-two scale is needed only where the squares could leave the
    # accumulator's range: an fp32 accumulator, or fp64 input. For an fp64 accumulator of narrower
    # input, |c| < 2^130 and c is a multiple of 2^-241 (d is one of 2^-149; mu' = sum(d) / n, n < 2^40,
    # is 0 or at least 2^-189 in magnitude, so one of 2^-241), so every c^2 and sum(c^2) stay normal
    # and finite in fp64: the scale is 1 there and its pass is skipped (a power-of-two scale changes no
    # bit where nothing underflows).
    # The interpreter passes eps as the Python float itself, which has no .to and whose comparisons
    # are Python bools (~True is -2): an fp64 scalar tensor on both (a no-op when compiled).
    eps = tl.full((), eps, tl.float64)
    rows = block_indices(tl.program_id(0), BLOCK_ROWS, n_rows)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < n_rows
    mask = row_ok[:, None] & (cols < n_cols)[None, :]
    offsets = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
    raw = tl.load(x_ptr + offsets, mask=mask, other=0)
    WIDENED: tl.constexpr = ACC_DTYPE == tl.float64 and raw.dtype != tl.float64   # see the scale above
    pre = tl.full([BLOCK_ROWS], 1.0, tl.float32)
    if RMS:
        shift = tl.zeros([BLOCK_ROWS], ACC_DTYPE)
        shifted_mean = tl.zeros([BLOCK_ROWS], tl.float64)
        mean = shifted_mean
    elif FP64_MEAN:   # 16-bit rows, `precise`: the mean in fp64, then as hi + lo (passed as shift, shifted_mean)
        mean, pre, shift, shifted_mean = fp64_mean_as_pair(raw, x_ptr + rows.to(tl.int64) * n_cols, row_ok, mask,
                                                           inv_n, BLOCK_ROWS, BLOCK_N, TREE_VEC, TREE_THREADS)
    else:
        shift = row_shift(x_ptr + rows.to(tl.int64) * n_cols, row_ok, ACC_DTYPE)   # a finite shift, else 0
        d = tl.where(mask, to_accumulator(raw, ACC_DTYPE) - shift[:, None], 0.0)
        s = tree_sum_blocked_rows(d, BLOCK_ROWS, BLOCK_N, TREE_VEC, TREE_THREADS)
        shifted_mean = s.to(tl.float64) * inv_n
        mean = shift.to(tl.float64) + shifted_mean
    c = centred_row(opaque_copy(raw, runtime_zero(x_ptr), WIDENED), mask, shift, shifted_mean, pre, RMS, FP64_MEAN,
                    ACC_DTYPE)
    if WIDENED:
        scale = tl.full([BLOCK_ROWS], 1.0, ACC_DTYPE)
        q = tree_sum_blocked_rows(c * c, BLOCK_ROWS, BLOCK_N, TREE_VEC, TREE_THREADS)
        if FP32_RSTD:
            rs = rstd_in_fp32_where_it_fits(q, row_ok, n_cols, inv_n, eps)
        else:
            rs = rstd_in_fp64(q, scale, inv_n, eps)
    else:
        scale, rs = rstd_scaled_when_needed(c, n_cols, inv_n, eps, pre, BLOCK_ROWS, BLOCK_N, TREE_VEC, TREE_THREADS,
                                            FP32_RSTD, FP64_MEAN)
    rstd = rs * (scale * pre if FP64_MEAN else scale).to(tl.float64)   # exact: powers of two
    if FP32_PASS and tl.max((row_ok & ~(rstd < 1.2676506002282294e30)).to(tl.int32), 0) == 0:
        # 16-bit input and output: xhat = ((x - hi) - lo) * rstd in fp32 (the mean as hi + lo, rstd < 2^100
        # for every row of the program, so it and xhat stay finite), as the streaming pass computes it
        xhat = normalized_chunk(to_accumulator(raw, tl.float32), mean[:, None], rstd[:, None], RMS, tl.float32)
    else:
        c = centred_row(opaque_copy(raw, runtime_zero(y_ptr), WIDENED), mask, shift, shifted_mean, pre, RMS,
                        FP64_MEAN, ACC_DTYPE)
        xhat = (c * scale[:, None]) * rs.to(ACC_DTYPE)[:, None]
        if FP32_PASS:
            xhat = xhat.to(tl.float32)   # store_affine's first step (its dtype is fp32 here)
    store_affine(xhat, w_ptr, b_ptr, y_ptr, offsets, cols, cols < n_cols, mask, HAS_W, HAS_B, AFFINE_DTYPE)
    tl.store(mean_ptr + rows, mean, mask=row_ok)
    tl.store(rstd_ptr + rows, rstd, mask=row_ok)


@triton.jit
def row_gradient(x, g, w, mean, rstd, mask, inv_n, RMS: tl.constexpr, ACC_DTYPE: tl.constexpr,
                 BLOCK_ROWS: tl.constexpr, BLOCK_N: tl.constexpr, TREE_VEC: tl.constexpr,
                 TREE_THREADS: tl.constexpr):
    """(dx, xhat) of [BLOCK_ROWS, BLOCK_N] whole rows (masked lanes 0): xhat = (x - mean) * rstd (mean
    as hi + lo), gw = g * w, and
      layer_norm: dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)),
      rms_norm:   dx = rstd * (gw - xhat * mean(gw * xhat)),
    the row means by tree_sum_blocked_rows, times inv_n (fp64's 1 / n: no division a row) in fp64."""
    xhat = tl.where(mask, normalized_chunk(x, mean[:, None], rstd[:, None], RMS, ACC_DTYPE), 0.0)
    gw = tl.where(mask, g * w, 0.0)
    projection = tree_sum_blocked_rows(gw * xhat, BLOCK_ROWS, BLOCK_N, TREE_VEC, TREE_THREADS)
    inner = gw - xhat * (projection.to(tl.float64) * inv_n).to(ACC_DTYPE)[:, None]
    if not RMS:
        total = tree_sum_blocked_rows(gw, BLOCK_ROWS, BLOCK_N, TREE_VEC, TREE_THREADS)
        inner = inner - (total.to(tl.float64) * inv_n).to(ACC_DTYPE)[:, None]
    return tl.where(mask, inner * rstd.to(ACC_DTYPE)[:, None], 0.0), xhat


@triton.jit
def norm_backward_kernel(x_ptr, w_ptr, g_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_part_ptr, db_part_ptr,
                         n_rows, n_cols, rows_per_program, inv_n: tl.float64,
                         RMS: tl.constexpr, HAS_W: tl.constexpr, WEIGHT_GRAD: tl.constexpr,
                         BIAS_GRAD: tl.constexpr, ACC_DTYPE: tl.constexpr, BLOCK_ROWS: tl.constexpr,
                         BLOCK_N: tl.constexpr, LOOP_STAGES: tl.constexpr, TREE_VEC: tl.constexpr,
                         TREE_THREADS: tl.constexpr):
    # Program p owns rows [p * rows_per_program, (p + 1) * rows_per_program) (a multiple of BLOCK_ROWS),
    # writes their dx, and its partial dw / db (the sums over its rows, in ACC_DTYPE) to row p of
    # dw_part / db_part ([programs, n_cols]); the launcher merges the partials in a fixed order. No
    # float atomics: every bit of dx, dw and db is the same run to run. inv_n: 1 / n_cols in fp64
    # (correctly rounded on the host), as the forward's.
    program = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < n_cols
    if HAS_W:
        w = to_accumulator(tl.load(w_ptr + cols, mask=col_ok, other=0), ACC_DTYPE)[None, :]
    else:
        w = tl.full([1, BLOCK_N], 1.0, ACC_DTYPE)
    dw = tl.zeros([BLOCK_ROWS, BLOCK_N], ACC_DTYPE)
    db = tl.zeros([BLOCK_ROWS, BLOCK_N], ACC_DTYPE)
    first_row = block_start(program, rows_per_program, n_rows)
    for start in tl.range(0, rows_per_program, BLOCK_ROWS, num_stages=LOOP_STAGES):
        rows = first_row + start + tl.arange(0, BLOCK_ROWS)
        row_ok = rows < n_rows
        mask = row_ok[:, None] & col_ok[None, :]
        offsets = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
        x = to_accumulator(tl.load(x_ptr + offsets, mask=mask, other=0), ACC_DTYPE)
        g = to_accumulator(tl.load(g_ptr + offsets, mask=mask, other=0), ACC_DTYPE)
        mean = tl.load(mean_ptr + rows, mask=row_ok, other=0.0)
        rstd = tl.load(rstd_ptr + rows, mask=row_ok, other=0.0)
        dx, xhat = row_gradient(x, g, w, mean, rstd, mask, inv_n, RMS, ACC_DTYPE, BLOCK_ROWS, BLOCK_N,
                                TREE_VEC, TREE_THREADS)
        tl.store(dx_ptr + offsets, round_to_output(dx.to(tl.float64), dx_ptr.dtype.element_ty), mask=mask)
        dw += tl.where(mask, g * xhat, 0.0)
        db += tl.where(mask, g, 0.0)
    if WEIGHT_GRAD:
        dw_sum, _, _ = tree_reduce_first_axis(dw, dw, dw, BLOCK_ROWS, BLOCK_N, _PLAIN)
        tl.store(dw_part_ptr + program.to(tl.int64) * n_cols + cols, dw_sum, mask=col_ok)
    if BIAS_GRAD:
        db_sum, _, _ = tree_reduce_first_axis(db, db, db, BLOCK_ROWS, BLOCK_N, _PLAIN)
        tl.store(db_part_ptr + program.to(tl.int64) * n_cols + cols, db_sum, mask=col_ok)
