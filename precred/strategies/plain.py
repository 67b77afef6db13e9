"""Plain accumulation: `acc = acc + x` in the accumulator dtype ("upcast" in DESIGN.md).

Used by the `fast` (fp32 accumulator for 16/32-bit inputs), `fp64` (fp64 accumulator) and `pairwise`
modes; those differ only in accumulator dtype and in the evaluation tree the plan builds.
The state is the pair (hi, lo) shared by every strategy; this strategy never touches `lo`, which stays
at its identity 0 so that states of either strategy have one layout in workspaces.
"""
import triton
import triton.language as tl


@triton.jit
def plain_update(hi, lo, x):
    # Adding the identity 0 is exact, so masked lanes (loaded as 0) never add error.
    return hi + x, lo


@triton.jit
def plain_combine(hi_a, lo_a, hi_b, lo_b):
    # lo is identically 0 under this strategy; returning lo_a keeps the combine symmetric.
    return hi_a + hi_b, lo_a


@triton.jit
def plain_finalize(hi, lo):
    return hi.to(tl.float64)
