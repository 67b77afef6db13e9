"""The operations the error report measures: how each one runs (precred's modes, torch's own), its exact
value per row (validation's oracle), the scale its error is normalized by, and the bound each mode promises.

Every op reduces a (rows, n) tensor over its last dim. Adding an op to the report is one `ReportOp`
entry in `OPS`; nothing else in the report knows which ops exist.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import torch

from ..bounds import error_bound, logsumexp_error_bound, moments_error_bound
from ..launch import plan_for, row_plan_for
from ..modes import DEFAULT_LOGSUMEXP_MODE, EXP_MODES, MODES, VAR_MODES, sum_mode
from ..plan import plan_logsumexp_rows, plan_moments_rows
from ..ops import logsumexp as precred_logsumexp, mean as precred_mean, std as precred_std, sum as precred_sum
from ..ops import var as precred_var
from validation.moments import exact_sqrt, reference_moments
from validation.stable_exp import reference_logsumexp
from validation.oracle import exact_abs_sum, exact_sum

# Variance and standard deviation are reported with torch's default correction (Bessel's, n - 1).
CORRECTION = 1


@dataclass(frozen=True)
class RowTruth:
    """What the oracle says about one row: the exact result (None where the op is undefined, e.g. the
    variance of one value), the scale errors are divided by for the 'error / S1' column, and what the
    op's bound needs (a sum's S1 and exact sum; var's validation.moments.RowMoments)."""
    exact: Fraction | None
    scale: Fraction
    facts: object


@dataclass(frozen=True)
class Impl:
    """One column of the report: `label` ("torch", "torch-fp64" or a precred mode) and how it reduces a
    (rows, n) tensor over dim -1. `mode` is the precred mode (None for torch's implementations)."""
    label: str
    mode: str | None
    run: Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class ReportOp:
    name: str
    modes: tuple[str, ...]                 # precred's modes of this op, in table order
    default_mode: str
    precred_run: Callable                  # (x, mode) -> result over dim -1
    torch_run: Callable                    # (x) -> torch's result over dim -1, same dtype as x
    truths: Callable                       # (x_cpu) -> list[RowTruth], one per row
    bound: Callable                        # (mode, truth, n, dtype, depth) -> max abs error promised
    run_mode: Callable                     # (name, dtype) -> the precred.modes.Mode a call runs (its plan depth)
    condition_sweep: bool                  # S1 / |result| is the op's condition number: sweep it
    scale_name: str                        # what `scale` is, for the docs
    row_planner: Callable | None = None    # the plan.plan_*_rows whose rows a call without a plan takes

    def impls(self) -> list[Impl]:
        """torch's default, torch on an fp64 copy rounded back (the usual user workaround), then precred's
        modes."""
        torch_fp64 = (lambda x, f=self.torch_run: f(x.double()).to(x.dtype))
        return ([Impl("torch", None, self.torch_run), Impl("torch-fp64", None, torch_fp64)]
                + [Impl(m, m, (lambda x, m=m, f=self.precred_run: f(x, m))) for m in self.modes])

    def plan_depth(self, x: torch.Tensor, mode: str) -> int:
        """The tree depth of the plan precred runs for x over dim -1 in `mode` (the bound depends on it):
        the single-read rows plan where the call takes one (row_planner), else plan_for's."""
        dims, m = (x.dim() - 1,), self.run_mode(mode, x.dtype)
        row_plan = row_plan_for(x, dims, m, x.dtype, self.row_planner) if self.row_planner is not None else None
        return row_plan.depth if row_plan is not None else plan_for(x, dims, m, x.dtype)[1].depth


# ------------------------------------------------------------------------------------------------ sums
def _sum_truths(x: torch.Tensor, divide: bool) -> list[RowTruth]:
    n = x.shape[-1]
    out = []
    for row in x:
        s, s1 = exact_sum(row), exact_abs_sum(row)
        if divide:
            out.append(RowTruth(s / n, s1 / n, (s1, s)))
        else:
            out.append(RowTruth(s, s1, (s1, s)))
    return out


def _sum_bound(op: str):
    def bound(mode, truth, n, dtype, depth):
        s1, s = truth.facts
        return error_bound(mode, n, float(s1), float(s), dtype, depth=depth, op=op)
    return bound


# -------------------------------------------------------------------------------------------- moments
def _moments_truths(x: torch.Tensor, take_sqrt: bool) -> list[RowTruth]:
    rows, _, _ = reference_moments(x, -1)
    out = []
    for r in rows:
        v = r.variance(CORRECTION)
        if v is None:
            out.append(RowTruth(None, Fraction(0), r))
            continue
        exact = exact_sqrt(v) if take_sqrt else v
        # Var is a sum of the nonnegative terms (x - mean)^2 / (n - 1): its S1 is the result itself.
        out.append(RowTruth(exact, exact, r))
    return out


def _moments_bound(op: str):
    def bound(mode, truth, n, dtype, depth):
        r = truth.facts
        return moments_error_bound(mode, r.n, float(r.m2), r.radius, float(r.mean), dtype, depth=depth,
                                   op=op, correction=CORRECTION)
    return bound


# -------------------------------------------------------------------------------------------- logsumexp
def _logsumexp_truths(x: torch.Tensor) -> list[RowTruth]:
    rows, _, _ = reference_logsumexp(x, -1)
    # Rows with inf / NaN have no finite exact value: skipped (counted) like an undefined variance.
    return [RowTruth(r.lse, abs(r.lse) if r.lse is not None else Fraction(0), r) for r in rows]


def _logsumexp_bound(mode, truth, n, dtype, depth):
    r = truth.facts
    return logsumexp_error_bound(mode, r.n, r.s, r.t, float(r.lse), dtype, depth=depth) + r.exact_to


OPS: dict[str, ReportOp] = {
    "sum": ReportOp("sum", tuple(MODES), "kahan", lambda x, m: precred_sum(x, dim=-1, mode=m),
                    lambda x: torch.sum(x, dim=-1), lambda x: _sum_truths(x, False), _sum_bound("sum"),
                    sum_mode, True, "S1 = sum |x_i|"),
    "mean": ReportOp("mean", tuple(MODES), "kahan", lambda x, m: precred_mean(x, dim=-1, mode=m),
                     lambda x: torch.mean(x, dim=-1), lambda x: _sum_truths(x, True), _sum_bound("mean"),
                     sum_mode, True, "S1 / n"),
    "var": ReportOp("var", tuple(VAR_MODES), "fp64", lambda x, m: precred_var(x, dim=-1, mode=m),
                    lambda x: torch.var(x, dim=-1), lambda x: _moments_truths(x, False), _moments_bound("var"),
                    lambda name, dtype: VAR_MODES[name], False, "the exact variance (the S1 of its nonnegative terms)",
                    plan_moments_rows),
    "std": ReportOp("std", tuple(VAR_MODES), "fp64", lambda x, m: precred_std(x, dim=-1, mode=m),
                    lambda x: torch.std(x, dim=-1), lambda x: _moments_truths(x, True), _moments_bound("std"),
                    lambda name, dtype: VAR_MODES[name], False, "the exact standard deviation", plan_moments_rows),
    "logsumexp": ReportOp("logsumexp", tuple(EXP_MODES), DEFAULT_LOGSUMEXP_MODE,
                          lambda x, m: precred_logsumexp(x, -1, mode=m), lambda x: torch.logsumexp(x, -1),
                          _logsumexp_truths, _logsumexp_bound, lambda name, dtype: EXP_MODES[name], False,
                          "|logsumexp| (the error is relative)", plan_logsumexp_rows),
}

