"""One cell of the error report: an implementation run on a (rows, n) tensor, each result compared with
the oracle's exact value.

Per result: the error in ulps of the exact value in the output dtype (validation.oracle.ulp_error's
measure), the error divided by the op's scale (S1 for sums), whether the result is the exact value
correctly rounded, and -- for precred's modes -- the bound the mode promises for that row and plan, in
ulps, and whether the error is within it. Rows where the op is undefined (exact None) are skipped and
counted.

A cell's exact values are Fractions; comparing each result with one in Fractions costs ~100 us, which
made a GPU run's per-element cells (8192 outputs, five implementations) minutes of Python. So
`exact_arrays` turns a cell's exact values into floats once -- the value correctly rounded to the output
dtype, its ulp, and the pair hi + lo (hi the fp64 rounding, lo the fp64 rounding of the rest) -- and
`measure` compares every implementation with them in numpy:
- decisions are exact: "correctly rounded" compares with the correctly rounded value; "beyond the bound"
  compares |result - (hi + lo)| with the bound and decides in Fractions where the two are too close to
  call (_TIE_MARGIN);
- the figures (ulps, error / scale) carry the float difference's error: two fp64 roundings (2^-52 of
  the figure each) and lo's (2^-106 |exact|, below 2^-53 ulp of any output dtype);
- results the pair cannot hold go the exact way (validation.oracle, per element): exact values beyond
  fp64's range or whose rest is below fp64's normal range and not a float (lo would be off by more than
  2^-53 of it, or 0, losing the side of a tie), -inf outputs, and exact values that round to inf in
  the output dtype.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np
import torch

from validation.oracle import _fraction_to_float, round_to, ulp, ulp_error

from .ops import Impl, ReportOp, RowTruth

# Where |result - (hi + lo)| in floats and a bound are within 2^-40 of the bound plus 2^-100 |exact|,
# the bound check is redone in Fractions: the float difference is within 2^-51 of itself (two fp64
# roundings) plus 2^-106 |exact| (lo's rounding) of the exact one; the margins leave room to spare.
_TIE_MARGIN = 2.0 ** -40
_TIE_MARGIN_EXACT = 2.0 ** -100
_FP64_TINY = Fraction(2) ** -1022


class RowError(NamedTuple):
    ulps: float                # |result - exact| / ulp(exact) in the output dtype
    over_scale: float          # |result - exact| / the op's scale
    correct: bool              # the result is the exact value correctly rounded
    diff: Fraction | None      # |result - exact|, where both are finite


def row_error(value: float, truth: RowTruth, dtype: torch.dtype) -> RowError:
    """One result against its exact value (a Fraction; or -inf, a log_softmax element of -inf), in
    Fractions: the exact way, for the results `exact_arrays` leaves out of its float measure."""
    rounded = round_to(truth.exact, dtype)
    correct = value == rounded
    if math.isinf(rounded) or not math.isfinite(value):
        # The exact value overflows the format (correct rounding gives inf), or is -inf itself, or the
        # result is inf/NaN.
        err = 0.0 if correct else math.inf
        return RowError(err, err, correct, None)
    diff = abs(Fraction(value) - truth.exact)
    rel = _fraction_to_float(diff / truth.scale) if truth.scale else (0.0 if diff == 0 else math.inf)
    return RowError(ulp_error(value, truth.exact, dtype), rel, correct, diff)


class ExactArrays(NamedTuple):
    """A cell's exact values as floats for one output dtype, shared by every implementation measured on
    it. Arrays of shape (rows, k): k = 1 for the reductions, n for the per-element ops."""
    hi: np.ndarray         # exact rounded to fp64 (0 where not `fast`)
    lo: np.ndarray         # (exact - hi) rounded to fp64, nonzero where exact != hi (0 where not `fast`)
    rounded: np.ndarray    # exact correctly rounded to the output dtype (-inf where exact is -inf)
    ulp: np.ndarray        # ulp(exact) in the output dtype, a power of two
    normal: np.ndarray     # exact is finite and |exact| >= the output dtype's smallest normal
    fast: np.ndarray       # measured in floats (else the exact way: row_error)
    defined: np.ndarray    # (rows,): the op has a value on the row (truth.exact is not None)
    scale: np.ndarray      # (rows, 1): the row's scale as a float (inf beyond fp64)
    rows: list             # the cell's RowTruths (the bounds take them)
    per_element: bool      # a row's truth holds a list of exact values (else one)

    def element(self, i: int, j: int) -> RowTruth:
        """Result (i, j)'s own truth, for the exact way."""
        truth = self.rows[i]
        return RowTruth(truth.exact[j] if self.per_element else truth.exact, truth.scale, None)


def exact_arrays(truths: list[RowTruth], dtype: torch.dtype, per_row: int | None = None) -> ExactArrays:
    """The floats `measure` compares results with (module docstring), computed once per cell: per row
    one exact value, or (per-element ops) a list of `per_row` of them."""
    per_element = per_row is not None
    shape = (len(truths), per_row if per_element else 1)
    hi, lo = np.zeros(shape), np.zeros(shape)
    rounded, spacing = np.full(shape, np.nan), np.full(shape, np.nan)
    normal, fast = np.zeros(shape, bool), np.zeros(shape, bool)
    tiny = Fraction(torch.finfo(dtype).tiny)
    for i, truth in enumerate(truths):
        if truth.exact is None:
            continue
        exacts = truth.exact if per_element else [truth.exact]
        for j, e in enumerate(exacts):
            rounded[i, j], spacing[i, j] = round_to(e, dtype), float(ulp(e, dtype))
            if not isinstance(e, Fraction):
                continue                                   # -inf: the exact way
            normal[i, j] = abs(e) >= tiny
            h = _fraction_to_float(e)
            rest = e - Fraction(h) if math.isfinite(h) else None
            # The exact way where exact is beyond fp64, where its rest is below fp64's normal range and
            # not a float (lo would be off by more than 2^-53 of it, or 0: the side of a tie lost), and
            # where it rounds to inf in the output dtype.
            if (rest is not None and (abs(rest) >= _FP64_TINY or Fraction(float(rest)) == rest)
                    and math.isfinite(rounded[i, j])):
                hi[i, j], lo[i, j], fast[i, j] = h, float(rest), True
    defined = np.array([t.exact is not None for t in truths], bool)
    scale = np.array([[_fraction_to_float(t.scale)] for t in truths]).reshape(len(truths), 1)
    return ExactArrays(hi, lo, rounded, spacing, normal, fast, defined, scale, truths, per_element)


def summarize(values: list[float]) -> dict:
    """median, p99 and max of a list of floats (inf allowed); None for an empty list."""
    if not values:
        return {"median": None, "p99": None, "max": None}
    a = np.asarray(values, dtype=np.float64)
    return {"median": float(np.median(a)), "p99": float(np.percentile(a, 99, method="higher")),
            "max": float(a.max())}


class ElementErrors(NamedTuple):
    """Every result's figures against `ExactArrays`, arrays of its (rows, k) shape."""
    ulps: np.ndarray         # |result - exact| / ulp(exact) in the output dtype
    over_scale: np.ndarray   # |result - exact| / the row's scale
    correct: np.ndarray      # the result is the exact value correctly rounded
    beyond: np.ndarray       # the error exceeds the result's bound (False where no bounds were given)


def element_errors(values: np.ndarray, exact: ExactArrays, dtype: torch.dtype,
                   bounds: np.ndarray | None = None) -> ElementErrors:
    """Results (fp64 values of dtype's, exact's shape) against the exact values, and against `bounds`
    (max abs errors, inf for none) where given: the float measure (module docstring), and the exact
    way (row_error) for the results it cannot take. Undefined rows' entries are meaningless."""
    present = np.broadcast_to(exact.defined[:, None], values.shape)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = np.abs((values - exact.hi) - exact.lo)
        finite = np.isfinite(values)
        ulps = np.where(finite, diff / exact.ulp, np.inf)
        over_scale = np.where(~finite, np.inf, np.where(exact.scale > 0, diff / exact.scale,
                                                        np.where(diff == 0, 0.0, np.inf)))
    correct = values == exact.rounded
    # The exact way for what exact_arrays left out and for finite results whose float difference
    # overflowed (fp64 results of opposite sign near fp64's largest).
    fast = exact.fast & (~finite | np.isfinite(diff))
    slow = {(i, j): row_error(values[i, j], exact.element(i, j), dtype) for i, j in zip(*np.nonzero(present & ~fast))}
    for (i, j), e in slow.items():
        ulps[i, j], over_scale[i, j], correct[i, j] = e.ulps, e.over_scale, e.correct
    if bounds is None:
        return ElementErrors(ulps, over_scale, correct, np.zeros(values.shape, bool))
    # An error beyond a finite bound; an infinite error (overflow either way) breaks any finite bound.
    # Where the float difference and the bound are too close to call (_TIE_MARGIN), Fractions decide.
    held = present & ~correct & np.isfinite(bounds)
    with np.errstate(invalid="ignore"):
        beyond = held & (~finite | (diff > bounds))
        near = held & fast & finite & (np.abs(diff - bounds) <= _TIE_MARGIN * bounds
                                       + _TIE_MARGIN_EXACT * np.abs(exact.hi))
    for i, j in zip(*np.nonzero(near)):
        beyond[i, j] = abs(Fraction(values[i, j]) - exact.element(i, j).exact) > Fraction(bounds[i, j])
    for (i, j), e in slow.items():
        beyond[i, j] = held[i, j] and (e.diff is None or e.diff > Fraction(bounds[i, j]))
    return ElementErrors(ulps, over_scale, correct, beyond)


def measure(op: ReportOp, impl: Impl, x: torch.Tensor, exact: ExactArrays) -> dict:
    """Run impl on x (the device tensor) and compare every result with `exact` (exact_arrays of the
    cell's truths for x's dtype). Returns the record's numbers: ulp and error/scale statistics, the
    fraction correctly rounded, and for precred's modes the promised bound (worst row, in ulps) and the
    rows beyond it. A per-element op's row counts as its worst element: its largest ulp error and
    error / scale, correctly rounded where every element is, beyond its bound where any element is."""
    dtype = x.dtype
    out = impl.run(x)
    shape = tuple(x.shape) if op.per_element else (x.shape[0],)
    if out.dtype != dtype or tuple(out.shape) != shape:
        raise RuntimeError(f"{op.name}/{impl.label}: expected {shape} {dtype}, got {tuple(out.shape)} {out.dtype}")
    values = out.double().cpu().numpy().reshape(exact.hi.shape)
    rows = exact.defined
    plan = bounds = None
    if impl.mode is not None:
        plan = op.plan(x, impl.mode)
        bounds = np.full(values.shape, np.inf)
        for i, truth in enumerate(exact.rows):
            if truth.exact is not None:
                bounds[i] = op.bound(impl.mode, truth, x.shape[-1], dtype, plan)
    err = element_errors(values, exact, dtype, bounds)
    rec = {"ulp": summarize(err.ulps.max(axis=1)[rows].tolist()),
           "err_over_scale": summarize(err.over_scale.max(axis=1)[rows].tolist()),
           "correctly_rounded": float(err.correct.all(axis=1)[rows].mean()) if rows.any() else None,
           "rows_measured": int(rows.sum()), "rows_skipped": int((~rows).sum())}
    if impl.mode is None:
        return rec
    # The bound in ulps. Where the exact value overflows, only inf is right: no ulps to count. A
    # per-element op's outputs below the normal range (softmax's underflowing terms, log_softmax next to
    # 0) carry the bounds' absolute terms, billions of their ulps: the column shows the others'.
    counted = rows[:, None] & (exact.normal if op.per_element else np.isfinite(exact.rounded))
    with np.errstate(over="ignore"):
        bound_ulps = (bounds / exact.ulp)[counted]         # exact: ulp is a power of two
    rec.update(plan_depth=getattr(plan, "depth", None),
               bound_ulp_worst=float(bound_ulps.max()) if bound_ulps.size else None,
               rows_beyond_bound=int(err.beyond.any(axis=1)[rows].sum()))
    return rec
