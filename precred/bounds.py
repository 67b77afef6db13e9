"""Error bounds of every mode: the contract the tests hold each result to (DESIGN.md).

`error_bound` returns an upper bound on |computed - exact| for one output, where exact is the exact
sum (op="sum") or the exact sum divided by n (op="mean") of the n inputs, S1 = sum |x_i| (exact), and
`depth` is the depth of the evaluation tree the plan built (precred.plan.Plan.depth: the largest
number of additions any element goes through). Without `depth` the bound holds for any order
(depth n - 1, recursive summation). Derivations, with u the accumulator's unit roundoff and
gamma_k = k u / (1 - k u):

* plain accumulation (fast, pairwise, fp64): any summation tree of depth d gives
  |s_hat - s| <= gamma_d * S1 (Higham, Accuracy and Stability, eq. 4.6 generalised to trees).
* compensated (kahan): `hi` is that same plain sum and every addition's exact error e_k is captured
  by TwoSum, so hi + sum(e_k) = s exactly, with sum |e_k| <= gamma_d * S1. `lo` sums the e_k through
  at most 2d additions (a merge adds lo_a + lo_b, then e), so |hi + lo - s| <= gamma_2d*gamma_d*S1.
  hi + lo is then formed in fp64 (one rounding, u_64).
* mean: the value is divided by n in fp64 (correctly rounded; n is exact in fp64): one more u_64.
* the result is rounded once to the output dtype unless it is already representable there
  (a plain sum whose accumulator is the output dtype). 16-bit outputs are reached through fp32 --
  two roundings, both counted. Results in the subnormal range add half the format's smallest
  subnormal.
"""
import math

import torch

from .modes import get_mode

_UNIT_ROUNDOFF = {torch.float64: 2.0 ** -53, torch.float32: 2.0 ** -24,
                  torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}
# Half of the smallest positive subnormal: the absolute error floor of rounding into the format.
_HALF_TINY = {torch.float64: 2.0 ** -1075, torch.float32: 2.0 ** -150,
              torch.bfloat16: 2.0 ** -134, torch.float16: 2.0 ** -25}


def unit_roundoff(dtype: torch.dtype) -> float:
    return _UNIT_ROUNDOFF[dtype]


def gamma(k: int, u: float) -> float:
    """gamma_k = k u / (1 - k u); infinite when k u >= 1 (no bound)."""
    if k <= 0:
        return 0.0
    ku = k * u
    return math.inf if ku >= 1.0 else ku / (1.0 - ku)


def error_bound(mode: str, n: int, S1: float, s: float, dtype: torch.dtype, *,
                depth: int | None = None, op: str = "sum", out_dtype: torch.dtype | None = None) -> float:
    """Upper bound on |computed - exact| of `precred.sum`/`precred.mean` in `mode`.

    mode: a precred mode; n: number of summed elements; S1: sum of |x_i|; s: the exact sum;
    dtype: the input dtype; depth: the plan's tree depth (default n - 1, valid for every plan);
    op: "sum" or "mean"; out_dtype: the output dtype (default dtype).
    """
    if op not in ("sum", "mean"):
        raise ValueError(f"op must be 'sum' or 'mean', got {op!r}")
    m = get_mode(mode)
    out_dtype = dtype if out_dtype is None else out_dtype
    acc_dtype = m.accumulator_dtype(dtype, out_dtype)
    u = _UNIT_ROUNDOFF[acc_dtype]
    u64 = _UNIT_ROUNDOFF[torch.float64]
    S1, s = abs(float(S1)), float(s)
    d = max(n - 1, 0) if depth is None else depth

    # Error of the fp64 value the kernel finalizes, before the division of a mean.
    if m.strategy == 1:  # compensated
        err = gamma(2 * d, u) * gamma(d, u) * S1
        err += u64 * (abs(s) + err)
    else:
        err = gamma(d, u) * S1

    exact = s
    if op == "mean":
        exact = s / n
        err = err / n + u64 * (abs(exact) + err / n)

    # Final rounding into the output dtype, when the value may not be representable there.
    already_exact = (m.strategy == 0 and op == "sum"
                     and _UNIT_ROUNDOFF[acc_dtype] >= _UNIT_ROUNDOFF[out_dtype])
    if not already_exact and out_dtype != torch.float64:
        u_out = _UNIT_ROUNDOFF[out_dtype]
        if out_dtype in (torch.bfloat16, torch.float16):
            u_out = u_out + _UNIT_ROUNDOFF[torch.float32] * (1.0 + u_out)  # fp64 -> fp32 -> 16-bit
        # Rounding into the subnormal range adds at most half a subnormal spacing per rounding (two at most).
        err = u_out * abs(exact) + (1.0 + u_out) * err + 2 * _HALF_TINY[out_dtype]
    # The bound itself is evaluated in binary64: pad it by a few of its own roundings.
    return err * (1.0 + 16 * u64)
