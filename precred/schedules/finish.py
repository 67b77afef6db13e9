"""The last step every schedule shares: finalize the merged state and round it to the output."""
import triton
import triton.language as tl

from ..strategies import state_finalize


@triton.jit
def finish(hi, lo, divisor, OUT_DTYPE: tl.constexpr, STRATEGY: tl.constexpr, DIVIDE: tl.constexpr):
    """The output value: the state's value (fp64), divided by `divisor` (fp64) when DIVIDE, rounded to
    OUT_DTYPE.

    fp64 division is correctly rounded on the GPU (div.rn.f64) and in numpy, and an element count is
    exact in fp64. 16-bit outputs go through fp32 (two roundings, counted by precred.bounds), the same
    way on every device.
    """
    value = state_finalize(hi, lo, STRATEGY)
    if DIVIDE:
        value = value / divisor
    return round_to_output(value, OUT_DTYPE)


@triton.jit
def finish_moments(m2, mean, divisor, TAKE_SQRT: tl.constexpr, OUT_DTYPE: tl.constexpr):
    """Variance m2 / divisor (divisor = max(0, n - correction), torch's), or its square root, in fp64 --
    division and square root correctly rounded (div.rn.f64, sqrt.rn.f64; numpy in the interpreter) --
    rounded to OUT_DTYPE. A zero divisor gives inf (m2 > 0) or NaN (m2 == 0), as torch; a row whose
    mean is not finite (an inf or NaN in it) gives NaN, as torch."""
    return finish_variance(m2.to(tl.float64) / divisor, mean, TAKE_SQRT, OUT_DTYPE)


@triton.jit
def finish_variance(var, mean, TAKE_SQRT: tl.constexpr, OUT_DTYPE: tl.constexpr):
    """finish_moments from the fp64 variance var: its square root where TAKE_SQRT (correctly rounded),
    NaN where the mean is not finite, rounded to OUT_DTYPE."""
    value = var
    if TAKE_SQRT:
        value = tl.sqrt(value)
    not_finite = (mean - mean).to(tl.float64)   # 0 for a finite mean, NaN otherwise
    value = tl.where(not_finite == 0.0, value, not_finite)
    return round_to_output(value, OUT_DTYPE)


@triton.jit
def finish_mean(mean, shift, OUT_DTYPE: tl.constexpr):
    """Welford's mean of the shifted values plus the shift, added in fp64, rounded to OUT_DTYPE."""
    return round_to_output(shift.to(tl.float64) + mean.to(tl.float64), OUT_DTYPE)


@triton.jit
def finish_logsumexp(s, m, OUT_DTYPE: tl.constexpr):
    """m + log(s) in fp64 (log correctly rounded to within an fp64 ulp), rounded to OUT_DTYPE. m = -inf
    gives -inf, m = +inf gives +inf (s >= 1 there), a NaN s gives NaN: torch's logsumexp."""
    return round_to_output(m.to(tl.float64) + tl.log(s.to(tl.float64)), OUT_DTYPE)


@triton.jit
def certify_logsumexp(s, m, margin, OUT_DTYPE: tl.constexpr):
    """logsumexp's fp32 filter (strategy 10): (m + log(s) formed in fp64 and rounded to OUT_DTYPE,
    whether that rounding is certified to be the exact result's).

    margin bounds |log(s_hat) - log(s)| for the pass's plan whatever the row
    (precred.bounds.certified_log_sum_margin); the fp64 log and sum add at most 2 u_64 |log s| +
    u_64 |lse| and the two sums lse -+ e round by u_64 |lse -+ e| each: 2^-50 (|log s| + |lse|) covers
    them. So the exact result lies in [lse - e, lse + e] (computed). Rounding to the output (fp64 ->
    fp32 -> 16-bit, round_to_output) is monotone: when both ends round to the same bits, so does every
    point between, and the value is the exact result correctly rounded (as round_to_output rounds).
    +-0 differ in bits, so a result at zero is not certified. Non-finite results are finish_logsumexp's
    and certified as they are: m = +-inf gives +-inf at both ends, a NaN s is NaN (certified apart)."""
    log_s = tl.log(s.to(tl.float64))
    lse = m.to(tl.float64) + log_s
    e = margin + 8.881784197001252e-16 * (tl.abs(log_s) + tl.abs(lse))   # 2^-50
    value = round_to_output(lse, OUT_DTYPE)
    below = _output_bits(round_to_output(lse - e, OUT_DTYPE))
    above = _output_bits(round_to_output(lse + e, OUT_DTYPE))
    return value, (below == above) | (lse != lse)


@triton.jit
def _output_bits(value):
    """An output value's bit pattern (bf16 is one already), so that -0 and +0 differ and NaN equals NaN."""
    if value.dtype == tl.float16:
        bits = value.to(tl.int16, bitcast=True)
    elif value.dtype == tl.float32:
        bits = value.to(tl.int32, bitcast=True)
    elif value.dtype == tl.float64:
        bits = value.to(tl.int64, bitcast=True)
    else:
        bits = value
    return bits


@triton.jit
def round_to_output(value, OUT_DTYPE: tl.constexpr):
    """An fp64 (or, for a narrower output, fp32) value rounded to the output dtype (bf16 as its int16
    bit pattern)."""
    if OUT_DTYPE == tl.float64:
        out = value
    elif OUT_DTYPE == tl.int16:
        # bf16 output, written as its bit pattern (see precred.launch: bf16 travels as int16).
        out = fp32_to_bf16_bits(value.to(tl.float32))
    else:
        out = value.to(tl.float32).to(OUT_DTYPE)
    return out


@triton.jit
def fp32_to_bf16_bits(x):
    """fp32 -> the int16 bit pattern of bf16, round to nearest, ties to even, in integer arithmetic.

    The GPU's cvt.rn.bf16.f32 does the same rounding, but Triton's interpreter truncates and flushes
    subnormals, and the CPU run must give the same numbers: so the rounding is written out here.
    Adding 0x7FFF plus the lowest kept bit and keeping the high 16 bits is RNE, subnormals included
    (a carry into the exponent is the correct rounding up, to inf at the top); NaN stays a quiet NaN.
    """
    bits = x.to(tl.uint32, bitcast=True)
    rounded = (bits + (0x7FFF + ((bits >> 16) & 1))) >> 16
    rounded = tl.where(x != x, (bits >> 16) | 0x40, rounded)
    return rounded.to(tl.uint16).to(tl.int16, bitcast=True)


@triton.jit
def to_accumulator(raw, ACC_DTYPE: tl.constexpr):
    """Loaded input -> accumulator dtype. bf16 arrives as its int16 bit pattern (precred.launch) and is
    widened exactly by a shift: Triton's interpreter flushes bf16 subnormals in its own conversion.
    Measured and dropped (H100, 2026-11-26): widening two at a time from one 32-bit register by inline
    PTX (shl / and: one instruction an element, 1.5 here; bf16 logsumexp rows loop 75 -> 70 per 8
    elements) left logsumexp within 1% and lost sum fast 8192^2 / 65536x1024 3-4%, var 65536x1024 4.5%;
    in the exact filter alone (its bf16 8192^2 rows loop 142 -> 123 instructions per 16 elements; H100,
    2026-11-27, bench/sweep_outer.py --op sum --modes fast,exact --dtypes bfloat16, old/new twice) exact
    moved +0.5-1% on rows and not at all over dim 0: that loop is not bound by its instructions. Nor by
    its fp32 -> fp64 conversions (ncu: the XU pipe 33-35% busy on bf16 rows): building the fp64 value
    from the bf16 bits instead (the bits shifted into an fp64 scaled by 2^-896, exact for every finite
    input, the filter's sums unscaled once a part; H100, 2026-11-27, a probe, same results) lost: bf16
    rows 8192^2 2370/2367 -> 2324/2330 GB/s, 65536x1024 2406/2408 -> 2330/2347, 1024x65536 2331/2335 ->
    2305/2312 (the ALU's extra shifts and masks)."""
    if raw.dtype == tl.int16:
        bits = raw.to(tl.uint16, bitcast=True).to(tl.uint32) << 16
        value = bits.to(tl.float32, bitcast=True).to(ACC_DTYPE)
    else:
        value = raw.to(ACC_DTYPE)
    return value
