"""The last step every schedule shares: finalize the merged state and round it to the output."""
import triton
import triton.language as tl

from ..strategies import state_finalize


@triton.jit
def finish(hi, lo, divisor, OUT_DTYPE: tl.constexpr, STRATEGY: tl.constexpr, DIVIDE: tl.constexpr):
    """The output value: the state's value (fp64), divided by `divisor` when DIVIDE, rounded to OUT_DTYPE.

    fp64 division is correctly rounded on the GPU (div.rn.f64) and in numpy, and an element count is
    exact in fp64. 16-bit outputs go through fp32 (two roundings, counted by precred.bounds), the same
    way on every device.
    """
    value = state_finalize(hi, lo, STRATEGY)
    if DIVIDE:
        value = value / divisor.to(tl.float64)
    if OUT_DTYPE == tl.float64:
        out = value
    elif OUT_DTYPE == tl.bfloat16:
        out = fp32_to_bf16_rne(value.to(tl.float32))
    else:
        out = value.to(tl.float32).to(OUT_DTYPE)
    return out


@triton.jit
def fp32_to_bf16_rne(x):
    """fp32 -> bf16, round to nearest, ties to even, written out in integer arithmetic.

    The GPU's cvt.rn.bf16.f32 already does this, but Triton's interpreter truncates instead, and the
    CPU run must give the same numbers: so the rounding is done here, where both compute it alike.
    Adding 0x7FFF plus the lowest kept bit to the bit pattern and clearing the low 16 bits is RNE
    (overflow carries into the exponent, up to inf, as IEEE rounding does); NaN is kept as is.
    """
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + (0x7FFF + ((bits >> 16) & 1))) & 0xFFFF0000
    rounded = bits.to(tl.float32, bitcast=True)
    # The low 16 bits are now zero, so this conversion is exact whatever its rounding mode.
    return tl.where(x != x, x, rounded).to(tl.bfloat16)
