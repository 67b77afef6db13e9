"""Exact oracle for sums and means, and correct rounding of exact rationals to IEEE formats.

Everything here is exact: sums come back as ``fractions.Fraction`` and are rounded once, by integer
arithmetic, to the output format (round to nearest, ties to even, with subnormals and overflow as IEEE 754
prescribes). Tests compare kernels against these numbers, never against another floating-point sum.

How the exact sum works (``_exact_row_sums``): every finite double is ``+-M * 2**(E - 1075)`` with ``M`` an
integer, ``M < 2**53``, and ``E`` in 1..2046, read straight from its bits. ``M`` is split into
``hi * 2**26 + lo`` with ``hi < 2**27``, ``lo < 2**26``; both pieces, signed, are integers held exactly in
float64. Summing the pieces per (row, E) bin with ``numpy.bincount`` adds integers whose partial sums stay
below ``2**53`` as long as a bin holds at most ``2**26`` entries (we feed at most ``_COL_CHUNK = 2**24``
elements at a time), so every float64 addition inside bincount is exact. The bins are then combined as
Python integers in units of 2**-1074. Cost is a few vectorised passes over the data: about a second for
2**24 float32 values on one core.

Caveat worth knowing when writing tests: ``torch.tensor(float64).to(torch.bfloat16 / torch.float16)``
rounds through float32 (double rounding) and is *not* correctly rounded for every double; ``round_to`` is.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import torch

__all__ = [
    "exact_sum", "exact_abs_sum", "exact_mean", "round_to", "ulp", "ulp_error", "unit_roundoff",
    "precision_bits", "format_info", "reference_sum", "reference_mean", "mpf_to_fraction",
]

# (precision p incl. hidden bit, emin = exponent of the smallest normal, emax = exponent of the largest binade)
_FORMATS = {
    torch.float64: (53, -1022, 1023),
    torch.float32: (24, -126, 127),
    torch.bfloat16: (8, -126, 127),
    torch.float16: (11, -14, 15),
}

_COL_CHUNK = 1 << 24      # elements (and columns) per bincount pass; must stay <= 2**26 (module docstring)


def format_info(dtype: torch.dtype) -> tuple[int, int, int]:
    """(p, emin, emax) of a floating format: precision bits incl. the hidden bit, exponent of the smallest
    normal number (2**emin) and of the top binade [2**emax, 2**(emax+1))."""
    try:
        return _FORMATS[dtype]
    except KeyError:
        raise TypeError(f"unsupported dtype {dtype}; expected one of {list(_FORMATS)}") from None


def precision_bits(dtype: torch.dtype) -> int:
    return format_info(dtype)[0]


def unit_roundoff(dtype: torch.dtype) -> float:
    """u = 2**-p: fp32 2**-24, fp64 2**-53, bf16 2**-8, fp16 2**-11."""
    return math.ldexp(1.0, -precision_bits(dtype))


# ----------------------------------------------------------------------------------------------- exact sums
def _as_float64_array(values) -> np.ndarray:
    """The values as a float64 numpy array, converted exactly (every supported format is a subset of
    float64). Raises ValueError on NaN/inf: callers handle specials themselves."""
    if isinstance(values, torch.Tensor):
        if not values.is_floating_point():
            raise TypeError(f"expected a floating tensor, got {values.dtype}")
        a = values.detach().to(device="cpu", dtype=torch.float64).numpy()
    else:
        a = np.asarray(values)
        if (a.dtype.kind not in "fiu" or a.dtype.itemsize > 8) and a.size:
            raise TypeError(f"expected floats of at most 64 bits, got numpy dtype {a.dtype}")
        if a.dtype.kind in "iu" and a.size and np.abs(a).max() > 2**53:
            raise ValueError("integers above 2**53 are not exactly representable as float64")
        a = a.astype(np.float64)
    if not np.isfinite(a).all():
        raise ValueError("exact sums need finite values (NaN/inf found)")
    return a


def _exact_row_sums(a: np.ndarray) -> list[Fraction]:
    """Exact sum of each row of a finite 2-D float64 array, as Fractions (see module docstring).
    Works on blocks of at most _COL_CHUNK elements, so temporaries stay a few times the block size."""
    rows, cols = a.shape
    totals = [0] * rows                                  # Python ints, in units of 2**-1074
    if cols:
        rows_per_pass = max(1, _COL_CHUNK // min(cols, _COL_CHUNK))
        for r0 in range(0, rows, rows_per_pass):
            r1 = min(rows, r0 + rows_per_pass)
            for c0 in range(0, cols, _COL_CHUNK):
                _add_block(a[r0:r1, c0:c0 + _COL_CHUNK], totals, r0)
    return [_units_to_fraction(t) for t in totals]


def _units_to_fraction(t: int) -> Fraction:
    """t * 2**-1074 as a Fraction; strip the common powers of two first so Fraction's gcd is cheap."""
    if t == 0:
        return Fraction(0)
    tz = min((t & -t).bit_length() - 1, 1074)
    return Fraction(t >> tz, 1 << (1074 - tz))


def _add_block(block: np.ndarray, totals: list[int], r0: int) -> None:
    """totals[r0 + i] += exact sum of block row i, in units of 2**-1074."""
    bits = block.view(np.uint64)
    field = ((bits >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64)    # biased exponent
    frac = bits & np.uint64((1 << 52) - 1)
    # |x| = M * 2**(E - 1075) with M < 2**53 an integer: E = max(field, 1); hidden bit only for normals.
    big_m = np.where(field > 0, frac | np.uint64(1 << 52), frac)
    nz = big_m != 0
    if not nz.any():
        return                                           # all zeros
    e = np.maximum(field, 1)
    e_hi = int(e.max())
    e = np.where(nz, e, e_hi)                            # zeros add nothing; keep them inside the bin range
    e_lo = int(e.min())
    nbins = e_hi - e_lo + 1
    hi = np.copysign((big_m >> np.uint64(26)).astype(np.float64), block)    # |hi| < 2**27, exact
    lo = np.copysign((big_m & np.uint64((1 << 26) - 1)).astype(np.float64), block)  # |lo| < 2**26, exact
    nrows = block.shape[0]
    idx = (np.arange(nrows)[:, None] * nbins + (e - e_lo)).ravel()
    # A bin receives at most _COL_CHUNK <= 2**26 integers of magnitude < 2**27: partial sums < 2**53, exact.
    hi_sum = np.bincount(idx, weights=hi.ravel(), minlength=nrows * nbins).reshape(nrows, nbins)
    lo_sum = np.bincount(idx, weights=lo.ravel(), minlength=nrows * nbins).reshape(nrows, nbins)
    # Bin k (exponent e_lo + k) weighs 2**(e_lo - 1 + k) units of 2**-1074. The bin sums are integers below
    # 2**53, so the int64 cast is exact; object arrays then do the big-integer weighting in numpy's C loops.
    w_lo = np.array([1 << (e_lo - 1 + k) for k in range(nbins)], dtype=object)
    w_hi = np.array([1 << (e_lo - 1 + k + 26) for k in range(nbins)], dtype=object)
    row_totals = (hi_sum.astype(np.int64).astype(object) * w_hi
                  + lo_sum.astype(np.int64).astype(object) * w_lo).sum(axis=1)
    for i, t in enumerate(row_totals.tolist()):
        totals[r0 + i] += t


def exact_sum(values) -> Fraction:
    """The exact sum of finite floats (numpy array, torch tensor of any float dtype, or list), flattened."""
    a = _as_float64_array(values).reshape(1, -1)
    return _exact_row_sums(a)[0]


def exact_abs_sum(values) -> Fraction:
    """S1 = sum of |x_i|, exact."""
    a = np.abs(_as_float64_array(values)).reshape(1, -1)
    return _exact_row_sums(a)[0]


def exact_mean(values) -> Fraction:
    """Exact arithmetic mean; ValueError for an empty input (the mean is undefined)."""
    a = _as_float64_array(values).reshape(1, -1)
    if a.size == 0:
        raise ValueError("the mean of an empty sequence is undefined")
    return _exact_row_sums(a)[0] / a.size


# ------------------------------------------------------------------------------------- rounding and ulps
def _floor_log2(num: int, den: int) -> int:
    """floor(log2(num / den)) for positive integers, exactly."""
    e = num.bit_length() - den.bit_length()              # floor(log2(num/den)) or one more
    # invariant after the test: 2**e <= num/den < 2**(e+1)
    if (num << max(-e, 0)) < (den << max(e, 0)):
        e -= 1
    return e


def _to_fraction(value) -> Fraction:
    """Fraction, int, float, numpy scalar or one-element tensor -> Fraction (exact); ValueError for NaN/inf."""
    if isinstance(value, (Fraction, int)):
        return Fraction(value)
    v = float(value.item() if isinstance(value, torch.Tensor) else value)
    if not math.isfinite(v):
        raise ValueError(f"not a finite number: {v}")
    return Fraction(v)


def round_to(value, dtype: torch.dtype) -> float:
    """Round an exact rational (Fraction, int, float) to ``dtype`` with round-to-nearest, ties-to-even,
    including subnormals, and overflow to +-inf as IEEE 754 dictates (|value| >= max_finite + ulp/2 gives
    inf). Returns a Python float whose value is exactly representable in dtype. An exact zero gives +0.0;
    a negative value too small for the format gives -0.0, as in IEEE. Infinite floats pass through."""
    p, emin, emax = format_info(dtype)
    if isinstance(value, float) and math.isinf(value):
        return value
    v = _to_fraction(value)
    if v == 0:
        return 0.0
    sign = -1.0 if v < 0 else 1.0
    num, den = abs(v.numerator), v.denominator
    e = _floor_log2(num, den)
    # Quantum (spacing) of the result: 2**q with q fixed by the binade, or by the subnormal spacing below 2**emin.
    q = max(e, emin) - (p - 1)
    n_scaled = num << -q if q < 0 else num
    d_scaled = den << q if q > 0 else den
    m, r = divmod(n_scaled, d_scaled)                    # |v| = (m + r/d_scaled) * 2**q, 0 <= r < d_scaled
    if 2 * r > d_scaled or (2 * r == d_scaled and m & 1):
        m += 1                                           # m <= 2**p: 2**p * 2**q is the next binade's start
    # Rounding as if the exponent were unbounded, then overflow: max_finite = (2**p - 1) * 2**(emax - p + 1).
    # A tie at max_finite + ulp/2 rounds to the even m = 2**p above, hence to inf, as IEEE requires.
    if q > emax - p + 1 or (q == emax - p + 1 and m >= 1 << p):
        return sign * math.inf
    return sign * math.ldexp(m, q)                       # exact: m < 2**53 and m * 2**q is a double


def ulp(value, dtype: torch.dtype) -> Fraction:
    """Spacing of dtype at |value|: 2**(e - p + 1) for |value| in [2**e, 2**(e+1)) in the normal range; the
    subnormal spacing 2**(emin - p + 1) below 2**emin and at 0; the top binade's spacing above max finite
    (including for an infinite float value)."""
    p, emin, emax = format_info(dtype)
    if isinstance(value, float) and math.isinf(value):
        return Fraction(2) ** (emax - p + 1)
    v = abs(_to_fraction(value))
    if v == 0:
        e = emin
    else:
        e = min(max(_floor_log2(v.numerator, v.denominator), emin), emax)
    return Fraction(2) ** (e - p + 1)


def mpf_to_fraction(v) -> Fraction:
    """A finite mpmath mpf as the exact Fraction it holds (sign, mantissa, binary exponent)."""
    sign, man, exp, _ = v._mpf_
    return (-1) ** sign * Fraction(int(man)) * (Fraction(2) ** int(exp))


def _fraction_to_float(v: Fraction) -> float:
    """float(v), but inf instead of OverflowError for huge ratios."""
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def ulp_error(computed, exact, dtype: torch.dtype) -> float:
    """|computed - exact| / ulp(exact, dtype) as a float; inf when computed is inf or NaN."""
    c = float(computed)
    if not math.isfinite(c):
        return math.inf
    exact = _to_fraction(exact)
    return _fraction_to_float(abs(Fraction(c) - exact) / ulp(exact, dtype))


# ------------------------------------------------------------------------------- references over tensors
def _reduced_rows(x: torch.Tensor, dim) -> tuple[np.ndarray, list[int], list[int]]:
    """x as a float64 (n_out, n_reduced) array, rows in row-major order of the kept dims, plus the output
    shape without and with keepdim. ``dim`` follows torch: int, tuple/list of ints, or None (all);
    an empty tuple also reduces over all dims, as torch.sum does."""
    nd = x.dim()
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        dims = list(range(nd))
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
        if nd == 0:
            if any(d not in (0, -1) for d in dims):
                raise IndexError(f"dim {dim} out of range for a 0-d tensor")
            dims = []
        else:
            for d in dims:
                if not -nd <= d < nd:
                    raise IndexError(f"dim {d} out of range for a {nd}-d tensor")
            dims = sorted({d % nd for d in dims})
            if len(dims) != len([dim] if isinstance(dim, int) else dim):
                raise RuntimeError(f"dim {dim} appears multiple times in the list of dims")
    kept = [d for d in range(nd) if d not in dims]
    shape = list(x.shape)
    out_shape = [shape[d] for d in kept]
    keep_shape = [1 if d in dims else shape[d] for d in range(nd)]
    a = _as_float64_array(x.permute(*kept, *dims) if nd else x)
    a = a.reshape(math.prod(out_shape), math.prod(shape[d] for d in dims))
    return a, out_shape, keep_shape


def _reference(x: torch.Tensor, dim, keepdim: bool, out_dtype, mean: bool):
    out_dtype = x.dtype if out_dtype is None else out_dtype
    format_info(out_dtype)
    a, out_shape, keep_shape = _reduced_rows(x, dim)
    n = a.shape[1]
    if mean and n == 0 and a.shape[0]:
        raise ValueError("mean over an empty reduction is undefined (torch returns NaN; handle it apart)")
    sums = _exact_row_sums(a)
    s1s = _exact_row_sums(np.abs(a))
    if mean:
        sums = [s / n for s in sums]
        s1s = [s / n for s in s1s]
    rounded = [round_to(s, out_dtype) for s in sums]
    # float64 holds every rounded value (and inf) exactly, so the cast to out_dtype is exact.
    out = torch.tensor(rounded, dtype=torch.float64).to(out_dtype)
    out = out.reshape(keep_shape if keepdim else out_shape)
    return out, list(zip(sums, s1s))


def reference_sum(x: torch.Tensor, dim=None, keepdim: bool = False, out_dtype: torch.dtype | None = None):
    """Correctly rounded sum of a finite tensor along ``dim`` (torch semantics) in ``out_dtype`` (default
    x.dtype), and a flat list, row-major over the output, of ``(exact_sum, s1)`` Fractions per element."""
    return _reference(x, dim, keepdim, out_dtype, mean=False)


def reference_mean(x: torch.Tensor, dim=None, keepdim: bool = False, out_dtype: torch.dtype | None = None):
    """Correctly rounded mean (exact sum / n, rounded once) and a flat list of ``(exact_mean, s1 / n)``:
    both entries are divided by n, so bounds stated for sums apply to means with the same ratio.
    ValueError on an empty reduced axis."""
    return _reference(x, dim, keepdim, out_dtype, mean=True)
