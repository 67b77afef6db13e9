"""The per-tile and per-output steps every schedule shares: fold a loaded tile into the state, and write
a merged state out (as a partial state, or finished into the output)."""
import triton
import triton.language as tl

from ..strategies import state_combine, state_update
from .finish import finish, to_accumulator


@triton.jit
def accumulate_tile(hi, lo, hi_ptrs, lo_ptrs, mask, ACC_DTYPE: tl.constexpr, STRATEGY: tl.constexpr,
                    SRC_IS_STATE: tl.constexpr, USES_LO: tl.constexpr):
    """Fold one tile into the tile-shaped state: input elements by `update`, partial states (a later
    pass of the split schedule) by `combine`. Masked lanes load the identity 0, which every strategy
    adds exactly."""
    x_hi = to_accumulator(tl.load(hi_ptrs, mask=mask, other=0), ACC_DTYPE)
    if SRC_IS_STATE:
        if USES_LO:
            x_lo = tl.load(lo_ptrs, mask=mask, other=0.0)
        else:
            x_lo = tl.zeros(x_hi.shape, ACC_DTYPE)
        hi, lo = state_combine(hi, lo, x_hi, x_lo, STRATEGY)
    else:
        hi, lo = state_update(hi, lo, x_hi, STRATEGY)
    return hi, lo


@triton.jit
def write_result(hi, lo, dst_hi_ptr, dst_lo_ptr, out_index, state_index, mask, divisor,
                 STRATEGY: tl.constexpr, DST_IS_STATE: tl.constexpr, DIVIDE: tl.constexpr,
                 USES_LO: tl.constexpr):
    """Store merged states: as partial states at state_index (accumulator dtype, never rounded to the
    input dtype), or finished and rounded into the output at out_index."""
    if DST_IS_STATE:
        tl.store(dst_hi_ptr + state_index, hi, mask=mask)
        if USES_LO:
            tl.store(dst_lo_ptr + state_index, lo, mask=mask)
    else:
        value = finish(hi, lo, divisor, dst_hi_ptr.dtype.element_ty, STRATEGY, DIVIDE)
        tl.store(dst_hi_ptr + out_index, value, mask=mask)
