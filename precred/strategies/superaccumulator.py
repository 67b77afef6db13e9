"""`exact` mode, second stage: an integer superaccumulator (fixed-point limbs), order-free and exact.

Every finite fp32 / bf16 / fp16 value is an integer multiple of its format's smallest subnormal
2^LSB_EXP (fp32 2^-149, bf16 2^-133, fp16 2^-24): x = +-M * 2^(LSB_EXP + P) with M < 2^(mantissa bits + 1)
and P = max(biased exponent, 1) - 1. The value is cut at 26-bit digit boundaries: M << (P % 26) < 2^50
goes to limb P // 26 (its low 26 bits) and the next limb (the rest, < 2^24). Limbs are int64, so each
can take 2^37 such addends before it could overflow: rows of up to 2^37 elements. Integer addition is
exact and associative, so any order, any split and integer atomics give the same limbs.

LIMBS = 16 slots: fp32 values reach bit 277 (limb 10), n <= 2^37 adds 37 bits (limb 12), and a mean's
quotient is taken two limbs further down (limb 14); slot 15 keeps the sign's carry.

Finishing: carries are propagated into digits in [0, 2^26) (the sign taken first, so the digits hold
|V|); a mean is a long division of those digits by n (remainder < n <= 2^37, so remainder * 2^26 +
digit < 2^63); then the top two nonzero digits form a window W < 2^52 that is exact in fp64, and a
nonzero rest (lower digits or the division's remainder) is recorded as W + 1/2 (a sticky bit).
(W + 1/2) * 2^L is exact in fp64 and lies strictly between the same two neighbours of the output
grid as V does -- the grid's half-spacing there is at least 2^L (module notes in schedules/recompute.py
and the tests check this for every format pair) -- so rounding it once rounds V correctly.
"""
import torch
import triton
import triton.language as tl

from .exact import power_of_two, round_to_output_format

LIMBS = tl.constexpr(16)
DIGIT_BITS = tl.constexpr(26)
DIGIT_MASK = tl.constexpr(2 ** 26 - 1)
MEAN_SHIFT_LIMBS = tl.constexpr(2)   # a mean's quotient keeps two digits below the input's smallest subnormal
MAX_COUNT = 2 ** 37                  # elements per row the limbs and the long division can take

# Input formats by torch dtype: (bits of the stored mantissa, exponent bits, LSB_EXP = log2 of the
# smallest subnormal).
INPUT_FORMATS = {torch.float32: (23, 8, -149), torch.bfloat16: (7, 8, -133), torch.float16: (10, 5, -24)}


@triton.jit
def limb_addends(bits, MAN_BITS: tl.constexpr, EXP_BITS: tl.constexpr):
    """(limb index k, signed addend for limb k, signed addend for limb k + 1) of each value, from its
    raw bits (int32, zero-extended for 16-bit formats). inf / NaN contribute 0 (the filter answers
    those rows)."""
    exponent_ones = 2 ** EXP_BITS - 1
    implicit_bit = 2 ** MAN_BITS
    biased = (bits >> MAN_BITS) & exponent_ones
    mantissa = (bits & (implicit_bit - 1)) | tl.where(biased != 0, implicit_bit, 0)
    mantissa = tl.where(biased == exponent_ones, 0, mantissa).to(tl.int64)
    position = tl.maximum(biased, 1) - 1
    k = position // DIGIT_BITS
    shifted = mantissa << (position % DIGIT_BITS).to(tl.int64)
    low = shifted & DIGIT_MASK
    high = shifted >> DIGIT_BITS
    negative = ((bits >> (MAN_BITS + EXP_BITS)) & 1) != 0
    return k, tl.where(negative, -low, low), tl.where(negative, -high, high)


@triton.jit
def accumulate_limbs(acc, bits, MAN_BITS: tl.constexpr, EXP_BITS: tl.constexpr):
    """acc: [BLOCK, LIMBS] int64 limb sums per lane; bits: [BLOCK] raw values (masked lanes: 0)."""
    k, low, high = limb_addends(bits, MAN_BITS, EXP_BITS)
    slot = tl.arange(0, LIMBS)[None, :]
    acc += tl.where(slot == k[:, None], low[:, None], 0)
    acc += tl.where(slot == (k + 1)[:, None], high[:, None], 0)
    return acc


@triton.jit
def accumulate_limb_columns(acc, bits, MAN_BITS: tl.constexpr, EXP_BITS: tl.constexpr):
    """accumulate_limbs with the limbs down the first axis: acc [LIMBS, BLOCK], one output's limb sums a
    column (each thread holds its columns' limbs: the finish's sums along the limbs stay in registers)."""
    k, low, high = limb_addends(bits, MAN_BITS, EXP_BITS)
    slot = tl.arange(0, LIMBS)[:, None]
    acc += tl.where(slot == k[None, :], low[None, :], 0)
    acc += tl.where(slot == (k + 1)[None, :], high[None, :], 0)
    return acc


@triton.jit
def _normalize(limbs):
    """Propagate carries in each column of [LIMBS, B] limb sums: (digits in [0, 2^26), the carry out of
    each column's top slot, [B])."""
    slot = tl.arange(0, LIMBS)[:, None]
    digits = tl.zeros_like(limbs)
    carry = tl.sum(digits, axis=0)
    for j in tl.static_range(LIMBS):
        v = tl.sum(tl.where(slot == j, limbs, 0), axis=0) + carry
        digits = tl.where(slot == j, (v & DIGIT_MASK)[None, :], digits)
        carry = v >> DIGIT_BITS          # arithmetic shift: floor division, also for negative v
    return digits, carry


@triton.jit
def _digit(digits, j):
    """Digit j of each column of [LIMBS, B] digits ([B]); j a constant or a [1, B] row of indices."""
    return tl.sum(tl.where(tl.arange(0, LIMBS)[:, None] == j, digits, 0), axis=0)


@triton.jit
def finish_limbs(limbs, n, DIVIDE: tl.constexpr, LSB_EXP: tl.constexpr, OUT_DTYPE: tl.constexpr):
    """The exact sums held in `limbs` ([LIMBS, B] int64 limb sums, a column per output), or those sums
    divided by n (int64) when DIVIDE, correctly rounded to the output format: returned as the [B] fp64
    values they round to."""
    slot = tl.arange(0, LIMBS)[:, None]
    _, carry = _normalize(limbs)
    negative = carry < 0                  # the digits are >= 0, so the sign is the top carry's
    limbs = tl.where(negative[None, :], -limbs, limbs)
    digits, _ = _normalize(limbs)         # |V|: the carry out is now 0
    lsb_exp = LSB_EXP
    sticky = tl.zeros_like(carry)
    if DIVIDE:
        # Long division of |V| * 2^(26 * MEAN_SHIFT_LIMBS) by n, top digit first.
        quotient = tl.zeros_like(limbs)
        remainder = tl.zeros_like(carry)
        for j in tl.static_range(LIMBS - 1, -1, -1):
            if j >= MEAN_SHIFT_LIMBS:
                current = (remainder << DIGIT_BITS) + _digit(digits, j - MEAN_SHIFT_LIMBS)
            else:
                current = remainder << DIGIT_BITS
            q = current // n
            remainder = current - q * n
            quotient = tl.where(slot == j, q[None, :], quotient)
        digits = quotient
        lsb_exp = LSB_EXP - DIGIT_BITS * MEAN_SHIFT_LIMBS
        sticky = (remainder != 0).to(tl.int64)
    top = tl.maximum(tl.max(tl.where(digits != 0, slot, -1), axis=0), 1)
    window = (_digit(digits, top[None, :]) << DIGIT_BITS) + _digit(digits, top[None, :] - 1)
    below = tl.where(slot < top[None, :] - 1, digits, 0)
    sticky = sticky | (tl.max(below, axis=0) != 0).to(tl.int64)
    value = ((window << 1) + sticky).to(tl.float64) * power_of_two((top - 1) * DIGIT_BITS + lsb_exp - 1)
    rounded = round_to_output_format(value, OUT_DTYPE)
    return tl.where(negative, rounded * -1.0, rounded)   # not unary minus: keeps -0.0 (exact.py)
