"""One cell of the error report: an implementation run on a (rows, n) tensor, each row's result compared
with the oracle's exact value.

Per row: the error in ulps of the exact value in the output dtype (validation.oracle.ulp_error), the
error divided by the op's scale (S1 for sums), whether the result is the correctly rounded value, and --
for precred's modes -- the bound the mode promises for that row and plan, in ulps, and whether the error
is within it. Rows where the op is undefined (exact None) or the input is not finite are skipped and
counted.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np
import torch

from validation.oracle import round_to, ulp, ulp_error

from .ops import Impl, ReportOp, RowTruth


class RowError(NamedTuple):
    ulps: float                # |result - exact| / ulp(exact) in the output dtype
    over_scale: float          # |result - exact| / the op's scale
    correct: bool              # the result is the exact value correctly rounded
    diff: Fraction | None      # |result - exact|, where both are finite
    exact_overflows: bool      # correct rounding of the exact value gives inf


def row_error(value: float, truth: RowTruth, dtype: torch.dtype) -> RowError:
    """One result against its exact value (a Fraction; or -inf, a log_softmax element of -inf)."""
    rounded = round_to(truth.exact, dtype)
    correct = value == rounded
    if math.isinf(rounded) or not math.isfinite(value):
        # The exact value overflows the format (correct rounding gives inf), or is -inf itself, or the
        # result is inf/NaN.
        err = 0.0 if correct else math.inf
        return RowError(err, err, correct, None, math.isinf(rounded) and isinstance(truth.exact, Fraction))
    diff = abs(Fraction(value) - truth.exact)
    rel = float(diff / truth.scale) if truth.scale else (0.0 if diff == 0 else math.inf)
    return RowError(ulp_error(value, truth.exact, dtype), rel, correct, diff, False)


def summarize(values: list[float]) -> dict:
    """median, p99 and max of a list of floats (inf allowed); None for an empty list."""
    if not values:
        return {"median": None, "p99": None, "max": None}
    a = np.asarray(values, dtype=np.float64)
    return {"median": float(np.median(a)), "p99": float(np.percentile(a, 99, method="higher")),
            "max": float(a.max())}


def measure(op: ReportOp, impl: Impl, x: torch.Tensor, truths: list[RowTruth]) -> dict:
    """Run impl on x (the device tensor) and compare every row with its truth. Returns the record's
    numbers: ulp and error/scale statistics, the fraction correctly rounded, and for precred's modes the
    promised bound (worst row, in ulps) and the rows beyond it. A per-element op's row counts as its
    worst element: its largest ulp error and error / scale, correctly rounded where every element is,
    beyond its bound where any element is."""
    dtype = x.dtype
    out = impl.run(x)
    shape = tuple(x.shape) if op.per_element else (x.shape[0],)
    if out.dtype != dtype or tuple(out.shape) != shape:
        raise RuntimeError(f"{op.name}/{impl.label}: expected {shape} {dtype}, got {tuple(out.shape)} {out.dtype}")
    values = out.double().cpu().tolist()
    plan = op.plan(x, impl.mode) if impl.mode is not None else None
    ulps, rels, correct, bounds_ulp = [], [], [], []
    beyond = skipped = 0
    for value, truth in zip(values, truths):
        if truth.exact is None:
            skipped += 1
            continue
        if op.per_element:
            pairs = [(v, RowTruth(e, truth.scale, None)) for v, e in zip(value, truth.exact)]
            bounds = op.bound(impl.mode, truth, x.shape[-1], dtype, plan) if impl.mode is not None else None
        else:
            pairs = [(value, truth)]
            bounds = [op.bound(impl.mode, truth, x.shape[-1], dtype, plan)] if impl.mode is not None else None
        errors = [row_error(v, t, dtype) for v, t in pairs]
        ulps.append(max(e.ulps for e in errors))
        rels.append(max(e.over_scale for e in errors))
        correct.append(all(e.correct for e in errors))
        if bounds is not None:
            for e, (_, t), bound in zip(errors, pairs, bounds):
                # Where the exact value overflows, only inf is right; a per-element op's outputs below
                # the normal range (softmax's underflowing terms, log_softmax next to 0) carry the bounds'
                # absolute terms, billions of their ulps: the column shows the others'.
                if not e.exact_overflows and (not op.per_element or _normal(t.exact, dtype)):
                    bounds_ulp.append(_in_ulps(bound, t.exact, dtype))
            # An infinite error (overflow one way or the other) breaks any finite bound.
            beyond += any(math.isfinite(bound) and not e.correct and (e.diff is None or e.diff > Fraction(bound))
                          for e, bound in zip(errors, bounds))
    rec = {"ulp": summarize(ulps), "err_over_scale": summarize(rels),
           "correctly_rounded": (sum(correct) / len(correct)) if correct else None,
           "rows_measured": len(ulps), "rows_skipped": skipped}
    if impl.mode is not None:
        rec.update(plan_depth=getattr(plan, "depth", None), bound_ulp_worst=max(bounds_ulp) if bounds_ulp else None,
                   rows_beyond_bound=beyond)
    return rec


def _normal(exact, dtype) -> bool:
    """Whether an exact value (a Fraction, or -inf) is finite and at least dtype's smallest normal."""
    return isinstance(exact, Fraction) and abs(exact) >= Fraction(torch.finfo(dtype).tiny)


def _in_ulps(bound: float, exact: Fraction, dtype) -> float:
    """A bound in ulps of the exact value (inf for an infinite bound)."""
    return float(Fraction(bound) / ulp(exact, dtype)) if math.isfinite(bound) else math.inf
