"""The product (prod): state p, updated and merged by one multiplication, identity 1.

Placement in the schedules' (hi, lo, cnt) state: hi = p; lo is unused (passed through).
Every element of a product of n factors goes through exactly n - 1 multiplications in total, whatever
the tree: each rounds with relative error at most u of the accumulator, so the relative error is at
most gamma_(n-1) (precred.bounds.product_error_bound) while no partial product leaves the accumulator's
normal range. Outside it the accumulator dictates: overflow gives +-inf, underflow a subnormal or 0
(fp32 for 16/32-bit inputs in `fast`; fp64 in `fp64`, whose range holds any product of a few thousand
fp32 values). 0 * inf is NaN, and NaN propagates, as in torch.
"""
import triton
import triton.language as tl


@triton.jit
def product_combine(p_a, lo_a, p_b, lo_b):
    return p_a * p_b, lo_a
