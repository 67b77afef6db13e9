"""`exact` mode, first stage: an error-free-transformation filter with a certified error bound.

State (hi, lo, err) in fp64, for fp32 / bf16 / fp16 inputs (each exact in fp64):
- `hi` is the plain fp64 sum of everything seen (TwoSum's rounded sum);
- `lo` sums TwoSum's exact error terms e_i (in fp64, so with its own roundings);
- `err` sums |e_i| (in fp64).
Invariant: exact sum V = hi + sum(e_i), each e_i exact. `lo` is a floating-point sum of the e_i in
some tree; an addition whose operands are both nonzero happens at most 2n - 2 times in the whole
reduction (n updates, n - 1 merges of nonempty states), so every e_i passes through at most m = 2n + 64
inexact additions and |lo - sum(e_i)| <= gamma_m * sum|e_i| <= m * u64 * (1 + 2^-16) * err for
n <= 2^32 (err carries the same kind of error, relative gamma_m).

At the end (f, g) = TwoSum(hi, lo) and V lies in [f + g - E, f + g + E] with E the bound above. The
result is certified when both ends of that interval, widened for the fp64 roundings of the check
itself, round to the same value of the output format: rounding is monotonic, so every point between
them, V included, rounds there too. E == 0 and g == 0 means V == f exactly (every TwoSum was exact),
which certifies ties as well. Rows the filter cannot certify are recomputed exactly by the integer
superaccumulator (strategies/superaccumulator.py, schedules/recompute.py).

hi is finite whenever every input is (no fp32 sum reaches fp64's range), so a non-finite hi means an
inf or NaN input: torch's answer (inf, or NaN for inf + -inf or a NaN) is hi itself, certified.
"""
import triton
import triton.language as tl

from .compensated import two_sum



@triton.jit
def exact_update(hi, lo, err, x):
    s, e = two_sum(hi, x)
    return s, lo + e, err + tl.abs(e)


@triton.jit
def exact_combine(hi_a, lo_a, err_a, hi_b, lo_b, err_b):
    """Symmetric: TwoSum's sum and (exact) error do not depend on the operand order."""
    s, e = two_sum(hi_a, hi_b)
    return s, (lo_a + lo_b) + e, (err_a + err_b) + tl.abs(e)


@triton.jit
def power_of_two(k):
    """2^k in fp64 for integer k in [-1022, 1023], built from its bits (exact on every device)."""
    return ((k.to(tl.int64) + 1023) << 52).to(tl.float64, bitcast=True)


@triton.jit
def round_to_format(v, P: tl.constexpr, EMIN: tl.constexpr, EMAX: tl.constexpr):
    """fp64 v correctly rounded (to nearest, ties to even) to the binary format of precision P and
    exponent range [EMIN, EMAX], subnormals included; returned as the fp64 value it rounds to (exactly
    representable there), or +-inf beyond the largest finite value. v finite, |v| < 2^1023.

    v / ulp is exact (ulp a power of two, the quotient < 2^P) and (y + 2^52) - 2^52 rounds y >= 0 to
    an integer with ties to even (the sum lies in [2^52, 2^53), where the fp64 spacing is 1)."""
    a = tl.abs(v)
    exponent = ((a.to(tl.int64, bitcast=True) >> 52) - 1023).to(tl.int32)
    exponent = tl.maximum(exponent, EMIN)
    ulp = power_of_two(exponent - (P - 1))
    magic = 4503599627370496.0   # 2^52
    r = ((a / ulp + magic) - magic) * ulp
    # Beyond the largest finite value, 2^(EMAX+1) - 2^(EMAX+1-P), rounding reached 2^(EMAX+1): inf.
    r = tl.where(r >= power_of_two(exponent * 0 + (EMAX + 1)), float("inf"), r)
    # * -1.0, not unary minus: Triton negates as 0 - r, which turns -0.0 (a tiny negative v) into +0.0.
    return tl.where(v < 0, r * -1.0, r)


@triton.jit
def round_to_output_format(v, OUT_DTYPE: tl.constexpr):
    """round_to_format for the output pointer's element type: fp32, fp16, or bf16 (its int16 bits)."""
    if OUT_DTYPE == tl.float32:
        r = round_to_format(v, 24, -126, 127)
    elif OUT_DTYPE == tl.float16:
        r = round_to_format(v, 11, -14, 15)
    else:
        r = round_to_format(v, 8, -126, 127)
    return r


@triton.jit
def exact_finish(hi, lo, err, n, DIVIDE: tl.constexpr, OUT_DTYPE: tl.constexpr):
    """(value, certified): the sum (or, DIVIDE, the mean: sum / n) rounded to the output format as an
    fp64 value, and whether the filter proves it correctly rounded. n: the element count (fp64)."""
    # Constants: 2^-53 (u64), 1 + 2^-16, 1 + 2^-48, 2^-49, 2^-50.
    f, g = two_sum(hi, lo)
    bound = err * ((2.0 * n + 64.0) * 1.1102230246251565e-16 * 1.0000152587890625)
    # An inf or NaN input: hi (or hi / n) is torch's answer (f is NaN there: lo holds inf - inf).
    special = (hi - hi) != 0.0
    if DIVIDE:
        # V / n = f / n + (g +- E) / n, and q = fl(f / n) is within u64 * |q| * (1 + 2 u64) of f / n.
        center = f / n
        margin = ((tl.abs(g) + bound) / n) * 1.0000000000000036 + tl.abs(center) * 1.7763568394002505e-15
        special_value = hi / n
    else:
        center = f
        margin = (tl.abs(g) + bound) * 1.0000000000000036 + tl.abs(f) * 8.881784197001252e-16
        special_value = hi
    # The margin also covers the roundings of the check itself (its own products and center -/+ margin),
    # so the fp64 ends enclose every possible V (or V / n).
    low = round_to_output_format(center - margin, OUT_DTYPE)
    high = round_to_output_format(center + margin, OUT_DTYPE)
    value = high
    # Compared as bits: ends of -0.0 and +0.0 do not tell V's sign, which the zero must carry.
    certified = low.to(tl.int64, bitcast=True) == high.to(tl.int64, bitcast=True)
    if not DIVIDE:
        # Every TwoSum was exact: V == f, ties included.
        exactly_known = (bound == 0.0) & (g == 0.0)
        value = tl.where(exactly_known, round_to_output_format(f, OUT_DTYPE), value)
        certified = certified | exactly_known
    return tl.where(special, special_value, value), certified | special
