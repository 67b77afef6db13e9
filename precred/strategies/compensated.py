"""Compensated accumulation (Kahan–Babuška–Neumaier, written with Knuth's TwoSum).

State (hi, lo): `hi` is exactly the plain floating-point sum of everything seen (the same value the
plain strategy would hold) and `lo` accumulates the exact rounding error of every addition that
formed `hi`. Invariant: hi + (exact errors) == exact sum; `lo` approximates the errors with
relative error of a plain sum of them (see precred.bounds).

TwoSum is branch-free and correct for any ordering of magnitudes in round-to-nearest arithmetic;
Triton never contracts additions into FMAs, so it survives compilation (DESIGN.md, fast-math table).
"""
import triton
import triton.language as tl


@triton.jit
def two_sum(a, b):
    """s + e == a + b exactly, with s = fl(a + b) (Knuth, 6 flops, no magnitude test)."""
    s = a + b
    b_virtual = s - a
    a_virtual = s - b_virtual
    e = (a - a_virtual) + (b - b_virtual)
    return s, e


@triton.jit
def compensated_update(hi, lo, x):
    s, e = two_sum(hi, x)
    return s, lo + e


@triton.jit
def compensated_combine(hi_a, lo_a, hi_b, lo_b):
    s, e = two_sum(hi_a, hi_b)
    return s, (lo_a + lo_b) + e


@triton.jit
def compensated_finalize(hi, lo):
    # hi + lo is formed in fp64: for an fp32 accumulator that sum is (nearly always) exact, so the only
    # rounding left is the one to the output dtype. When hi is inf/NaN the error terms are NaN
    # (inf - inf inside TwoSum); the plain sum `hi` then already carries torch's answer.
    hi64 = hi.to(tl.float64)
    total = hi64 + lo.to(tl.float64)
    hi_is_finite = (hi64 - hi64) == 0.0  # false for inf and NaN
    return tl.where(hi_is_finite, total, hi64)
