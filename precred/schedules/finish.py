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
    else:
        out = value.to(tl.float32).to(OUT_DTYPE)
    return out
