"""The stable exponential sum (logsumexp's strategy): state (s, m) with m the running maximum and
s = sum exp(x_i - m), updated and merged online so the data is read once.

Placement in the schedules' (hi, lo, cnt) state: hi = s, cnt = m; lo is unused (passed through).

One exponential per element and per merge: exp(-|a - b|) is either the new term (the element is not
above the maximum) or the factor that rescales the old sum (it is). Special values, without branches:
* a gap of two equal maxima is 0, not inf - inf: all -inf rows keep m = -inf (s counts their
  elements, harmlessly: the result is -inf + log(s) = -inf, and any finite element later scales that
  count by exp(-inf) = 0); two +inf give s + 1 with m = +inf, so the result is +inf, as torch;
* a NaN element is never above m (comparisons are false) and makes s NaN for good, so the result is
  NaN, as torch. m itself is never NaN.
Masked lanes load -inf, which by the first rule changes nothing that matters.

Both the update and the merge are symmetric where it matters: the merge of (sa, ma) and (sb, mb)
computes the same bits in either order (the larger maximum's sum plus the other's rescaled; equal
maxima add sa + sb, which commutes), as the fixed lane tree requires (schedules/tree.py).
Error bound: precred.bounds.logsumexp_error_bound.
"""
import triton
import triton.language as tl
from triton.language.extra import libdevice

from ..checks import KERNELS_INTERPRETED

# The interpreter has no libdevice: exp_flushed is then numpy's exp (within the same bound).
_COMPILED = tl.constexpr(not KERNELS_INTERPRETED)


@triton.jit
def exp_flushed(x):
    """exp(x) of a term of the sum s: in fp32 on the GPU, libdevice's exp2 of x * log2(e) (Triton's own
    fp32 rounding of log2(e), as tl.exp uses), i.e. ex2.approx.ftz.f32 (Triton links libdevice with
    flush-to-zero): one MUFU instruction where tl.exp's ex2.approx.f32 adds a compare and two
    multiplications to get subnormal results right. Results below 2^-126 are flushed to 0: the bounds'
    flushed-or-subnormal term (precred.bounds, n (2h + 1) eps) counts them. fp64 (and the
    interpreter): tl.exp -- libdevice's exp, which the fp64 mode's loop is bound by on the fp64 pipe.
    Measured against it (H100, 2026-11-28, a bare online-logsumexp loop over fp32 rows, GB/s): a
    64-entry table of 2^(j/64) (tl.gather) with a degree-5 polynomial, ~1.06 ulp, 1848 -> 1986 on
    1024x65536 and 1720 -> 1824 on 8192^2; a table-free degree-13 polynomial 1636 / 1588 (slower).
    Not taken: 6-8% would not carry the fp64 mode to 5x torch, and the table would be a kernel
    argument of every schedule. Nor (H200, 2026-11-28, bench/sweep_outer.py --op logsumexp --modes fp64
    --dim -1, two runs each against the code before): an exp of fp32 gaps with the fp64 pipe's work
    halved -- n = rint(d log2 e) and a degree-5 tail r^8 Q(r) in fp32, Cody-Waite and eight Horner
    FMAs in fp64, 2^n in the exponent bits, within 13u + 1.26u |d| of mpmath (sm_90 SASS per element:
    11 DFMA + 4 DADD / DMUL against ~22, but 3 fp32 -> fp64 conversions and ~7 FFMA) in the single-read
    rows and the vector fold: fp32 65536x1024 2065/2068 -> 1907/1922 GB/s, 262144x256 1962/1981 ->
    1827/1836, 8192^2 and 1024x65536 within 1%. ncu: both kernels issue-bound (issue slots 70-77% busy,
    ~3 instructions a cycle), not fp64-bound; only fewer instructions an element would help."""
    if _COMPILED and x.dtype == tl.float32:
        return libdevice.exp2(x * 1.4426950408889634)
    else:
        return tl.exp(x)


# exp_two_part's constants. Cody-Waite split of ln 2: LN2_HI has 15 significant bits, so k * LN2_HI is
# exact for |k| < 2^9, and hi - k * LN2_HI is exact too (Sterbenz: k = rint(hi log2 e) puts k ln 2 within
# a factor 2 of hi when k != 0); LN2_LO = fl32(ln 2 - LN2_HI). ROUNDING_SHIFTER = 1.5 * 2^23: adding it
# rounds to an integer, and the sum's low bits hold that integer (+ 2^22).
_LN2_HI = tl.constexpr(0.693145751953125)
_LN2_LO = tl.constexpr(1.428606765330187e-06)
_ROUNDING_SHIFTER = tl.constexpr(12582912.0)


@triton.jit
def exp_two_part(hi, lo):
    """exp(hi + lo) in fp32 for fp32 hi <= 16 and a small correction lo (|lo| <= 2^-20 (|hi| + 1)):
    relative error <= precred.bounds.EXP_TWO_PART_ERROR_UNITS u, whatever hi -- where exp_flushed of a
    rounded argument d carries 3u |d| more (d's rounding and the product with log2(e)); the single-read
    softmax kernel's fp32 outputs take it (schedules/single_read.py). Results below 2^-126 may be 0 or
    subnormal; -inf gives 0, NaN gives NaN. Only fp32 adds, multiplies and fmas (no MUFU, no
    libdevice), so the interpreter runs the same steps -- but its fma rounds twice (Triton 3.6:
    x * y + z in numpy), which the bound allows for.

    k = rint(hi log2 e) (by the shifter; off by one at most at a rounding boundary), r = hi - k ln 2
    (Cody-Waite; |r| <= 0.347), exp(r) by the degree-7 Taylor polynomial in Horner's form, times 2^k
    built in the exponent bits (exact), then exp(lo) ~ 1 + lo by one fma. Relative errors, in u:
    truncation 0.35^8 / 8! e^0.35 < 0.13 of exp(r) >= 0.707; Horner's roundings, u (|q_i| + |q_(i+1) r|)
    |r|^i over the steps (an fma rounding twice), < 2.0 of it (< 1.6 with fused fmas); the coefficients'
    roundings < 0.1; the reduced argument: r1 exact (Sterbenz; where k is off by one at a rounding
    boundary, within u |r1| <= 0.35), r2 = r1 - k LN2_LO rounded, u |r2| <= 0.35, with LN2_LO's own
    error |k| 2^-44; the last fma, 1 (+ lo^2 / 2, negligible). Sum 3.95, second order included: < 4
    (EXP_TWO_PART_ERROR_UNITS). Measured under the interpreter over 2e5 gaps in
    [-110, 0.5]: 2.2."""
    shifted = tl.fma(hi, 1.4426950408889634, _ROUNDING_SHIFTER)
    k = shifted - _ROUNDING_SHIFTER
    r = tl.fma(k, -_LN2_HI, hi)
    r = tl.fma(k, -_LN2_LO, r)
    p = tl.fma(r, 1.0 / 5040.0, 1.0 / 720.0)
    p = tl.fma(p, r, 1.0 / 120.0)
    p = tl.fma(p, r, 1.0 / 24.0)
    p = tl.fma(p, r, 1.0 / 6.0)
    p = tl.fma(p, r, 0.5)
    p = tl.fma(p, r, 1.0)
    p = tl.fma(p, r, 1.0)
    # 2^k for k >= -126: the exponent field k + 127 (the shifter's low 9 bits, shifted into place).
    scale = ((shifted.to(tl.int32, bitcast=True) + 127) << 23).to(tl.float32, bitcast=True)
    e = p * scale
    return tl.where(k < -126.0, 0.0, tl.fma(e, lo, e))


# exp_of_exact_gap's constants: L = fp32(log2 e), fp32((log2 e - L) ln 2), fp32(ln 2).
_LOG2E_HI = tl.constexpr(1.4426950216293335)
_LOG2E_LO_LN2 = tl.constexpr(1.3349757743696955e-08)
_LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def exp_of_exact_gap(hi, lo):
    """exp(hi + lo) in fp32 for finite hi <= 16 and lo its TwoSum error (hi + lo an exact gap x - m):
    within precred.bounds.ACCURATE_EXP_ERROR_UNITS u of it relative, whatever the gap (the `accurate`
    logsumexp's terms and rescales, schedules/accurate_rows.py). On the GPU: y = fl(hi log2(e)), and
    t = (hi + lo) - y ln 2 -- the rest of the exponent, in the natural base -- by two fmas: the product's
    own error d = y - hi L exactly (one fma; L = fl32(log2 e), so hi L - y is exact), t = (lo + hi
    fl32(L' ln 2)) - d ln 2, where L' = log2(e) - L, since (hi + lo) - y ln 2 = lo + hi L' ln 2 + (hi L - y)
    ln 2 (log2(e) ln 2 = 1); then ex2.approx.ftz of y -- PTX's 2^-22 = 4u relative, not doubled here as
    precred.bounds._EXP_ERROR_UNITS doubles it: checked exhaustively for every fp32 y in [-126, 16]
    (tests/test_gpu_only.py test_ex2_approx_within_its_documented_error) -- times 1 + t by one fma
    (rounded: u; the dropped t^2 / 2 < 2^-31 relative). |t| < 2^-15 for |hi| <= 257 (|d| <= 2^-16, |hi
    L' ln 2| < 2^-18, |lo| <= 2^-16); its own errors -- the two fmas' roundings (< 2^-39 each), fl32(L' ln
    2)'s (< 2^-42), ln 2's fp32 rounding (< 2^-41) -- stay below 2^-37 absolute, i.e. relative in
    exp: (1 + 4u)(1 + u)(1 + 2^-7 u) - 1 < 5.01u, taken as 6 (bounds.ACCURATE_EXP_ERROR_UNITS).
    Written so that it costs six sm_90 instructions (FMUL, three FFMA, MUFU, FFMA): the error term as
    fma(hi, -L, y), not fma(hi, L, -y) -- LLVM turns that -y into a second product hi * -L -- and ln 2
    folded into t's fmas instead of a product of its own (eight before).
    Results below 2^-126 are 0 (flushed; the bound's flush term counts them). The interpreter (no
    libdevice) runs exp_two_part, within 4u. exp(0 + 0) is exactly 1 either way."""
    if _COMPILED:
        y = hi * _LOG2E_HI
        d = tl.fma(hi, -_LOG2E_HI, y)
        t = tl.fma(d, -_LN2, tl.fma(hi, _LOG2E_LO_LN2, lo))
        e = libdevice.exp2(y)
        return tl.fma(e, t, e)
    else:
        return exp_two_part(hi, lo)


@triton.jit
def terms_below(values, maximum):
    """exp(x - m) for the values x of a group (a thread's vector, a tile's column) whose maximum m comes
    broadcast against them: the group's state is (sum of these, m), made without a merge per element.
    A group whose maximum is infinite takes its terms against 0 instead, so inf - inf never appears:
    -inf's give (0, -inf), the merge's identity; +inf's (inf, +inf), whose results are +inf (m + log(s))
    and, in softmax, NaN (schedules/normalize.py), as with stable_exp_update's states. A NaN value makes
    its term, hence s, NaN (tl.max skips it on the GPU; where m itself is NaN, so is every term)."""
    return exp_flushed(values - tl.where(tl.abs(maximum) == float("inf"), 0.0, maximum))


@triton.jit
def exp_of_gap(a, b):
    """exp(-|a - b|); exactly 1 when a == b (both -inf, or both +inf, included)."""
    gap = tl.where(a == b, 0.0, tl.abs(a - b))
    return exp_flushed(-gap)


@triton.jit
def stable_exp_update(s, m, x):
    """Fold element x into (s, m)."""
    e = exp_of_gap(x, m)
    above = x > m
    s = tl.where(above, s * e + 1.0, s + e)
    m = tl.where(above, x, m)
    return s, m


@triton.jit
def stable_exp_combine(s_a, lo_a, m_a, s_b, lo_b, m_b):
    """Merge two states (lo is unused and passed through); (0, -inf) is the identity."""
    e = exp_of_gap(m_a, m_b)
    a_on_top = m_a >= m_b
    s = tl.where(a_on_top, s_a + s_b * e, s_b + s_a * e)
    m = tl.where(a_on_top, m_a, m_b)
    return s, lo_a, m


# The split-tail log-sum (log_softmax's `accurate` pass into 16-bit outputs, schedules/single_read.py):
# its terms are exp(x - m) 2^TAIL_SCALE_LOG2, so that a term is flushed only below 2^-(126 + 32) of the
# maximum's (the flushed terms' sum stays below n 2^-158, under every 16-bit output's smallest
# subnormal), while n 2^32 cannot overflow fp32. precred.bounds.split_tail_log_sum_error uses it.
TAIL_SCALE_LOG2 = 32
_TAIL_EXPONENT = tl.constexpr(float(TAIL_SCALE_LOG2))
_TAIL_UNSCALE = tl.constexpr(2.0 ** -TAIL_SCALE_LOG2)


@triton.jit
def exp_scaled(gap):
    """exp(gap) 2^TAIL_SCALE_LOG2 in fp32 for a gap x - m <= 0: 2^(gap log2(e) + 32), the exponent by one
    fma (rounded twice under the interpreter, whose fma is x * y + z in numpy), then ex2.approx.ftz on the
    GPU (results below 2^-126 flushed). Error: precred.bounds.split_tail_log_sum_error."""
    a = tl.fma(gap, 1.4426950408889634, _TAIL_EXPONENT)
    if _COMPILED:
        return libdevice.exp2(a)
    else:
        return tl.exp2(a)


@triton.jit
def split_tail_terms(gap):
    """The split-tail pass's terms exp(gap) of gaps x - m <= 0 in their accumulator: fp32 ones scaled
    (exp_scaled), fp64 ones as they are (libdevice's exp)."""
    if gap.dtype == tl.float32:
        return exp_scaled(gap)
    else:
        return tl.exp(gap)


@triton.jit
def split_tail_sum(total):
    """A sum of split_tail_terms in fp64, unscaled: exact (a power of two, within fp64's range)."""
    if total.dtype == tl.float32:
        return total.to(tl.float64) * _TAIL_UNSCALE
    else:
        return total


@triton.jit
def log_of_split_sum(s, tail):
    """log(s) in fp64 of a row's s = sum exp(x - m) (fp64) from s and tail (fp64), the sum of the terms
    strictly below the maximum m. Where s < 1.5 the row has one maximum (two would make s >= 2 but for
    s's error), so s = 1 + tail exactly, and log(s) is log1p(tail): its relative error is the tail sum's,
    however small the tail -- where log(s) loses it (y = 0 for the maximum's log_softmax once tail <
    2^-24 in fp32, 2^-53 in fp64). Elsewhere log(s) >= 0.4 absorbs s's relative error. A NaN s (a NaN
    or +inf in the row, or a row of -inf) stays NaN (s < 1.5 is false).
    log1p(t) for 0 <= t <= 1/2: w = fl(1 + t), whose rounding error d = t - (w - 1) is exact (w - 1 by
    Sterbenz, d by Fast2Sum), and log1p(t) = log(w) + log(1 + d / w), the second part taken as d (2 - w):
    off by |d| (w - 1)^2 / w + d^2 / 2 <= 0.31 u_64 of log1p(t) (|d| <= u_64 w, log1p(t) >= 0.81 (w - 1)),
    and where w = 1 (t < 2^-53) it is t itself. With libdevice's log (1 ulp) and the three roundings:
    within 4.1 u_64 relative, counted as 8 (precred.bounds._LOG1P_ERROR_UNITS). One fp64 log a row, no
    division (Goldberg's log(w) t / (w - 1) cost an fp64 division a row: sm_90, bf16 rows of 256, 64 ->
    84 registers)."""
    one_maximum = s < 1.5
    w = 1.0 + tail
    log_w = tl.log(tl.where(one_maximum, w, s))
    return tl.where(one_maximum, _log1p_of(tail, w, log_w), log_w)


@triton.jit
def _log1p_of(t, w, log_w):
    """log1p(t) from w = fl(1 + t) and log(w) (log_of_split_sum's derivation)."""
    return log_w + (t - (w - 1.0)) * (2.0 - w)


@triton.jit
def log1p_small(t):
    """log1p(t) in fp64 for 0 <= t <= 1/2, within precred.bounds._LOG1P_ERROR_UNITS u_64 (log_of_split_sum's
    derivation): the split-tail kernel's log(s) of rows with one maximum (schedules/split_tail.py)."""
    w = 1.0 + t
    return _log1p_of(t, w, tl.log(w))
