"""Adversarial inputs for reductions.

Every generator takes a ``numpy.random.Generator`` (so a test's seed fixes its data) and a torch dtype
(float32, bfloat16, float16, float64) and returns a 1-D CPU tensor of that dtype. Values are drawn in
float64 and rounded to the dtype; every stated property (condition number, exactness of partial sums, range)
holds for the ROUNDED values, which are exactly the values returned.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch

from validation.oracle import _fraction_to_float, exact_abs_sum, exact_sum, format_info

__all__ = [
    "condition_number", "ill_conditioned", "large_offset", "wide_range", "subnormals", "alternating",
    "all_equal", "normal", "uniform", "small_integers", "with_specials", "lengths_around", "FAMILIES",
]


def _to_dtype(values: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """float64 values -> 1-D tensor of dtype (torch rounds to nearest; through float32 for bf16/fp16, which
    is fine here: whatever comes out is what we then reason about)."""
    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64)).to(dtype)


def _round_float(v: float, p: int, emin: int) -> float:
    """Round a double to p significant bits (subnormals below 2**emin), ties to even; no overflow check.
    Exact because every step is a power-of-two scaling or Python's round() of a double."""
    if v == 0.0:
        return 0.0
    _, e = math.frexp(v)                                 # |v| in [2**(e-1), 2**e)
    shift = p - max(e, emin + 1)                         # keep bits down to 2**(max(e, emin+1) - p)
    return math.ldexp(round(math.ldexp(v, shift)), -shift)


def _round_scaled_int(t: int, unit: int, p: int, emin: int) -> float:
    """t * 2**unit rounded to p significant bits (subnormal spacing below 2**emin), ties to even, all in
    integers: t may be far too large for a float even when t * 2**unit is not."""
    mag = abs(t)
    if mag == 0:
        return 0.0
    shift = max(mag.bit_length() - p, emin - p + 1 - unit, 0)   # bits of t below the result's spacing
    if shift:
        q, r = divmod(mag, 1 << shift)
        half = 1 << (shift - 1)
        mag = q + (r > half or (r == half and q & 1))
    v = math.ldexp(mag, unit + shift)                    # mag <= 2**p: exact
    return -v if t < 0 else v


def condition_number(x) -> float:
    """S1 / |exact sum|, from the exact oracle; inf when the exact sum is 0 (or the ratio exceeds float64)."""
    s = exact_sum(x)
    if s == 0:
        return math.inf
    return _fraction_to_float(exact_abs_sum(x) / abs(s))


def _log2_condition(x) -> float:
    """log2 of the condition number, finite even where the ratio itself would overflow a float."""
    s = exact_sum(x)
    if s == 0:
        return math.inf
    r = exact_abs_sum(x) / abs(s)
    return math.log2(r.numerator) - math.log2(r.denominator)     # math.log2 takes ints of any size


# ------------------------------------------------------------------------------------ ill-conditioned sums
def _gen_sum(n: int, b: float, e_bot: int, rng: np.random.Generator, dtype: torch.dtype) -> np.ndarray:
    """One draw of the Ogita-Rump-Oishi construction (GenDot, Algorithm 6.1 of "Accurate sum and dot
    product", 2005) adapted to sums, with exponents in [e_bot, e_bot + b]:
      * first half: random signs, mantissas in [1, 2), integer exponents uniform in [e_bot, e_top], the first
        one forced to e_top and the last to e_bot: S1 is about 2**e_top times a modest factor;
      * second half, sequentially: x_i = fl(r_i - S_{i-1}) with S_{i-1} the EXACT sum so far and r_i a random
        number of exponent decreasing linearly from e_top to e_bot. Then S_i = r_i + (rounding of x_i), so
        the running sum shrinks step by step to r_n, |r_n| in [1, 2) * 2**e_bot.
    The final exact sum is r_n plus one rounding error of size u * 2**(e_bot + step), with step the exponent
    drop per element: the caller keeps step <= p - 4 so that error is at most 1/8 of |r_n| (sum != 0).
    All values are multiples of 2**(e_bot - p + 1), so the exact sum is tracked as a Python int in that unit.
    """
    p, emin, _ = format_info(dtype)
    e_top = e_bot + int(round(b))
    n1 = n // 2
    unit = e_bot - p + 1                                 # every value is an integer multiple of 2**unit

    def to_units(v: float) -> int:
        """v / 2**unit as an exact int (v is a multiple of 2**unit by the invariant above)."""
        num, den = v.as_integer_ratio()                  # den = 2**k
        shift = -unit - (den.bit_length() - 1)
        assert shift >= 0 or num % (1 << -shift) == 0, "value is not a multiple of 2**unit"
        return num << shift if shift >= 0 else num >> -shift

    exps = rng.integers(e_bot, e_top + 1, size=n1)
    if n1:
        exps[0] = e_top
        exps[-1] = e_bot
    first = np.ldexp(rng.uniform(1.0, 2.0, n1), exps) * rng.choice([-1.0, 1.0], n1)
    first = _to_dtype(first, dtype).to(torch.float64).numpy()
    total = sum(to_units(float(v)) for v in first)

    m = n - n1
    chain_exps = np.linspace(e_top, e_bot, m) if m > 1 else np.array([float(e_bot)])
    r = np.ldexp(rng.uniform(1.0, 2.0, m), np.rint(chain_exps).astype(int)) * rng.choice([-1.0, 1.0], m)
    chain = np.empty(m)
    for i in range(m):
        ri = _round_float(float(r[i]), p, emin)
        xi = _round_scaled_int(to_units(ri) - total, unit, p, emin)    # fl(r_i - S_{i-1}), S exact
        chain[i] = xi
        total += to_units(xi)
    values = np.concatenate([first, chain])
    return values[rng.permutation(n)]


def ill_conditioned(n: int, cond: float, rng: np.random.Generator, dtype: torch.dtype) -> torch.Tensor:
    """A length-n vector whose condition number S1 / |sum| is close to ``cond`` (typically within a factor
    2; tests hold it to 10) with a nonzero exact sum for n >= 2, by the Ogita-Rump-Oishi construction
    (see ``_gen_sum``).

    The exponent spread b ~ log2(cond) is calibrated: draw, measure the exact condition number, shift b by
    the log2 of the miss, redraw (at most 6 rounds; the rng stream keeps it deterministic).
    Reach (out of it, the closest vector found comes back: check ``condition_number``):
      * top: values live in [2**(emin - p + 3), max_finite / (8 n)], so about cond <= 2**(emax - emin + p - log2 n):
        for n = 1000, fp32 ~1e79, bf16 ~1e74, fp16 ~2e9, fp64 anything below float64's max;
      * short vectors: the chain drops at most p - 4 bits per element, so log2(cond) <~ (n//2) * (p - 4) + log2 n:
        fp32 needs n >= 12 for 1e30, bf16 n >= 22 for 1e12;
      * bottom: S1 >~ n * |sum| in this construction, so cond below about n is out of reach (gives ~n).
    """
    if n == 0:
        return torch.empty(0, dtype=dtype)
    if n == 1:
        return _to_dtype(rng.uniform(1.0, 2.0, 1), dtype)
    p, emin, emax = format_info(dtype)
    target = math.log2(max(cond, 1.0))
    # Exponent window [e_bot, e_top]: e_top + 3 + ceil(log2 n) <= emax keeps every partial sum and S1 finite.
    # e_bot may dip into the subnormals (fp16 needs it for large cond) but no lower than emin - p + 3, so the
    # final sum r_n (>= 2**e_bot) stays 4x above the subnormal quantum 2**(emin - p + 1) and above the last
    # rounding error. Values stay multiples of 2**(e_bot - p + 1) (subnormals: of a coarser power of two).
    e_cap = emax - 3 - math.ceil(math.log2(n))
    e_floor = emin - p + 3
    b_max = min(e_cap - e_floor, (n - n // 2 - 1) * (p - 4))
    b = min(max(target, 0.0), b_max)
    best, best_miss = None, math.inf
    for _ in range(6):
        bi = int(round(min(max(b, 0.0), b_max)))
        e_bot = max(e_floor, min(0, e_cap - bi))         # around 1 when the format allows, shifted otherwise
        values = _gen_sum(n, bi, e_bot, rng, dtype)
        miss = _log2_condition(values) - target
        if math.isinf(miss):                             # exact sum 0: cannot happen by construction; be safe
            b -= 4
            continue
        if abs(miss) < best_miss:
            best, best_miss = values, abs(miss)
        if abs(miss) <= 1.0:
            break
        b -= miss
    return _to_dtype(best, dtype)


# ------------------------------------------------------------------------------------ other families
def large_offset(n: int, offset: float, spread: float, rng: np.random.Generator,
                 dtype: torch.dtype) -> torch.Tensor:
    """offset + spread * N(0, 1): the trap for one-pass variance and for sums of big, nearly equal terms.

    The spread is at least 4 ulps of the offset in dtype: a finer one would round every value to the
    same number (bf16 holds offset / spread up to about 2^6, fp16 2^8, fp32 2^21), and a constant row
    tests nothing of the trap."""
    p, _, _ = format_info(dtype)
    if offset != 0:
        spread = max(spread, 4 * 2.0 ** (math.floor(math.log2(abs(offset))) - p + 1))
    return _to_dtype(offset + spread * rng.standard_normal(n), dtype)


def wide_range(n: int, rng: np.random.Generator, dtype: torch.dtype) -> torch.Tensor:
    """Random signs, mantissas in [1, 2), integer exponents uniform over [emin, E]: the whole normal range
    but its top ceil(log2 n) + 1 binades, with n * 2**(E+1) <= 2**emax <= max_finite, so no partial sum
    (nor S1) can overflow, in any order."""
    _, emin, emax = format_info(dtype)
    top = emax - 1 - math.ceil(math.log2(max(n, 1)))
    exps = rng.integers(emin, max(top, emin) + 1, size=n)
    return _to_dtype(np.ldexp(rng.uniform(1.0, 2.0, n), exps) * rng.choice([-1.0, 1.0], n), dtype)


def subnormals(n: int, rng: np.random.Generator, dtype: torch.dtype) -> torch.Tensor:
    """Nonzero subnormals k * 2**(emin - p + 1), 1 <= k < 2**(p-1), random signs; about one in eight is
    instead one of the smallest normals, in [2**emin, 2**(emin+1)). Every value is exact in dtype."""
    p, emin, _ = format_info(dtype)
    k = rng.integers(1, 1 << (p - 1), size=n, dtype=np.int64)                   # subnormal: k < 2**(p-1)
    k_normal = (1 << (p - 1)) + rng.integers(0, 1 << (p - 1), size=n, dtype=np.int64)  # 2**(p-1) <= k < 2**p
    k = np.where(rng.random(n) < 0.125, k_normal, k)
    values = np.ldexp(k.astype(np.float64), emin - p + 1) * rng.choice([-1.0, 1.0], n)
    return _to_dtype(values, dtype)


def alternating(n: int, rng: np.random.Generator, dtype: torch.dtype) -> torch.Tensor:
    """x_i = (-1)**i * (1 + d_i), d_i uniform in [-1/64, 1/64): neighbours nearly cancel, S1 ~ n while the
    sum is ~ sqrt(n) / 100 (heavy cancellation; in bf16 many magnitudes round to exactly 1)."""
    signs = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    return _to_dtype(signs * (1.0 + rng.uniform(-1 / 64, 1 / 64, n)), dtype)


def all_equal(n: int, value: float, dtype: torch.dtype) -> torch.Tensor:
    """n copies of value rounded to dtype."""
    return torch.full((n,), value, dtype=torch.float64).to(dtype)


def normal(n: int, rng: np.random.Generator, dtype: torch.dtype) -> torch.Tensor:
    return _to_dtype(rng.standard_normal(n), dtype)


def uniform(n: int, rng: np.random.Generator, dtype: torch.dtype) -> torch.Tensor:
    """Uniform on [0, 1); draws that round up to 1 become the largest dtype value below 1 (1 - 2**-p)."""
    p = format_info(dtype)[0]
    x = _to_dtype(rng.random(n), dtype)
    return torch.where(x >= 1, torch.tensor(1.0 - 2.0 ** -p, dtype=dtype), x)


def small_integers(n: int, rng: np.random.Generator, dtype: torch.dtype,
                   low: int = -8, high: int = 8) -> torch.Tensor:
    """Integers in [low, high] (both inclusive) with S1 = sum |x_i| <= 2**p (bf16 256, fp16 2048, fp32
    2**24, fp64 2**53): every subset sum, hence every partial sum in ANY order, tree or lane split, is an
    integer of magnitude <= 2**p and exact in dtype, so any schedule must give bitwise the same result.
    Where n * max(|low|, |high|) exceeds 2**p, entries beyond the budget (in a random order) are set to 0."""
    budget = 1 << format_info(dtype)[0]
    if low > high or max(abs(low), abs(high)) > budget:
        raise ValueError(f"need low <= high and |low|, |high| <= {budget} for {dtype}")
    x = rng.integers(low, high + 1, size=n).astype(np.float64)
    order = rng.permutation(n)
    over = np.cumsum(np.abs(x[order])) > budget
    x[order[over]] = 0.0
    return _to_dtype(x, dtype)


def with_specials(x: torch.Tensor, kind: str, rng: np.random.Generator) -> torch.Tensor:
    """A copy of x (any shape; positions drawn over its flattened elements, n = numel) with 1 to
    max(1, n // 8) entries replaced by specials at random positions.
    kind: "nan", "inf", "-inf", or "inf_and_-inf" (at least one of each; needs n >= 2)."""
    n = x.numel()
    if kind not in ("nan", "inf", "-inf", "inf_and_-inf"):
        raise ValueError(f"unknown kind {kind!r}")
    need = 2 if kind == "inf_and_-inf" else 1
    if n < need:
        raise ValueError(f"need at least {need} element(s) for kind {kind!r}")
    y = x.clone(memory_format=torch.contiguous_format)
    count = int(rng.integers(need, max(need, n // 8) + 1))
    pos = torch.from_numpy(rng.choice(n, size=count, replace=False))
    if kind == "inf_and_-inf":
        vals = np.where(np.arange(count) % 2 == 0, np.inf, -np.inf)     # both signs present, count >= 2
    else:
        vals = np.full(count, {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}[kind])
    y.view(-1)[pos] = torch.from_numpy(vals).to(x.dtype)
    return y


def lengths_around(sizes: list[int]) -> list[int]:
    """Sorted unique lengths s - 1, s, s + 1 for each s, plus 1; only lengths >= 1."""
    out = {1}
    for s in sizes:
        out.update(v for v in (s - 1, s, s + 1) if v >= 1)
    return sorted(out)


FAMILIES: dict[str, Callable[[int, np.random.Generator, torch.dtype], torch.Tensor]] = {
    "normal": normal,
    "uniform": uniform,
    "large_offset": lambda n, rng, dtype: large_offset(n, 1e4, 1.0, rng, dtype),
    "ill_conditioned": lambda n, rng, dtype: ill_conditioned(n, 1e12, rng, dtype),
    "wide_range": wide_range,
    "subnormals": subnormals,
    "alternating": alternating,
}
