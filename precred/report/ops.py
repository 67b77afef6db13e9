"""The operations the error report measures: how each one runs (precred's modes, torch's own), its exact
value per row (validation's oracle), the scale its error is normalized by, and the bound each mode promises.

Every op works on a (rows, n) tensor along its last dim: the reductions (sum, mean, var, std, logsumexp)
give a value a row; softmax, log_softmax, layer_norm and rms_norm (`per_element`) a value an element,
each with its own exact value and bound, and a row's figures are those of its worst element. Adding an
op to the report is one `ReportOp` entry in `OPS`; nothing else in the report knows which ops exist.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import torch
import torch.nn.functional as F

from ..bounds import (error_bound, logsumexp_error_bound, moments_error_bound, norm_error_bound, softmax_error_bound,
                      softmax_plan_arguments)
from ..launch import device_sm_count, plan_for, plan_softmax, row_plan_for
from ..modes import EXACT_DTYPES, EXP_MODES, MODES, NORM_MODES, VAR_MODES, logsumexp_mode, sum_mode
from ..plan import (accurate_rows_fp64_depth, certified_exp_fp64_depth, plan_logsumexp_rows, plan_moments_rows,
                    plan_norm_forward)
from ..ops import layer_norm as precred_layer_norm, log_softmax as precred_log_softmax
from ..ops import logsumexp as precred_logsumexp, mean as precred_mean, rms_norm as precred_rms_norm
from ..ops import softmax as precred_softmax, std as precred_std, sum as precred_sum, var as precred_var
from ..strategies import CERTIFIED_EXP
from validation.moments import exact_sqrt, reference_moments
from validation.norms import bound_inputs, reference_norm
from validation.stable_exp import output_exact_to, reference_logsumexp, reference_softmax
from validation.oracle import _fraction_to_float, exact_abs_sum, exact_sum, mpf_to_fraction

# Variance and standard deviation are reported with torch's default correction (Bessel's, n - 1).
CORRECTION = 1


# layer_norm and rms_norm are reported without weight or bias, at this eps (rms_norm's too, whose
# torch default, the computing type's epsilon, would differ between torch's fp32 call and its fp64 one).
NORM_EPS = 1e-5


@dataclass(frozen=True)
class RowTruth:
    """What the oracle says about one row: the exact result (None where the op is undefined, e.g. the
    variance of one value; per-element ops: a list, an exact value an element, -inf or 0 where the
    element is -inf), the scale errors are divided by for the 'error / scale' column, and what the op's
    bound needs (a sum's S1 and exact sum; var's validation.moments.RowMoments; ...)."""
    exact: Fraction | list | None
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
    precred_run: Callable                  # (x, mode) -> result over dim -1
    torch_run: Callable                    # (x) -> torch's result over dim -1, same dtype as x
    truths: Callable                       # (x_cpu) -> list[RowTruth], one per row
    bound: Callable                        # (mode, truth, n, dtype, plan) -> max abs error promised (per element:
                                           # a list)
    run_mode: Callable                     # (name, dtype) -> the precred.modes.Mode a call runs (its plan)
    condition_sweep: bool                  # S1 / |result| is the op's condition number: sweep it
    scale_name: str                        # what `scale` is, for the docs
    row_planner: Callable | None = None    # the plan.plan_*_rows whose rows a call without a plan takes
    per_element: bool = False              # a result an element (shape of x), not a row
    planner: Callable | None = None        # (x, Mode) -> the plan a call takes, where not plan_for / row_planner's
    takes: Callable = lambda mode, dtype: True   # whether `mode` takes input of `dtype` (else no column)

    def impls(self, dtype: torch.dtype) -> list[Impl]:
        """torch's default, torch on an fp64 copy rounded back (the usual user workaround), then precred's
        modes that take `dtype` (`exact` sums no fp64: a TypeError by design, not a failure to report)."""
        torch_fp64 = (lambda x, f=self.torch_run: f(x.double()).to(x.dtype))
        return ([Impl("torch", None, self.torch_run), Impl("torch-fp64", None, torch_fp64)]
                + [Impl(m, m, (lambda x, m=m, f=self.precred_run: f(x, m))) for m in self.modes
                   if self.takes(m, dtype)])

    def plan(self, x: torch.Tensor, mode: str):
        """The plan precred runs for x over dim -1 in `mode` (the bound depends on it): `planner`'s where
        the op has one, else the single-read rows plan where the call takes one (row_planner), else
        plan_for's."""
        dims, m = (x.dim() - 1,), self.run_mode(mode, x.dtype)
        if self.planner is not None:
            return self.planner(x, m)
        row_plan = row_plan_for(x, dims, m, x.dtype, self.row_planner) if self.row_planner is not None else None
        return row_plan if row_plan is not None else plan_for(x, dims, m, x.dtype)[1]

    def plan_depth(self, x: torch.Tensor, mode: str) -> int | None:
        """The tree depth of that plan (None: a plan without one, layer_norm's streamed rows)."""
        return getattr(self.plan(x, mode), "depth", None)


def _finite_rows(truths: Callable) -> Callable:
    """truths(x) over x's finite rows only: a row with inf or NaN has no finite exact value (its oracle
    takes finite rows) and is skipped, counted (exact None), as logsumexp's and softmax's are."""
    def finite_truths(x: torch.Tensor) -> list[RowTruth]:
        finite = x.isfinite().all(dim=-1).tolist()
        measured = iter(truths(x[torch.tensor(finite, dtype=torch.bool)]) if any(finite) else [])
        return [next(measured) if f else RowTruth(None, Fraction(0), None) for f in finite]
    return finite_truths


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


def _sum_takes(mode: str, dtype: torch.dtype) -> bool:
    """`exact` takes fp32, bf16 and fp16 (precred.modes.EXACT_DTYPES); the other modes every float."""
    return mode != "exact" or dtype in EXACT_DTYPES


def _sum_bound(op: str):
    def bound(mode, truth, n, dtype, plan):
        s1, s = truth.facts
        return error_bound(mode, n, _fraction_to_float(s1), _fraction_to_float(s), dtype, depth=plan.depth,
                           op=op)
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
    def bound(mode, truth, n, dtype, plan):
        r = truth.facts
        return moments_error_bound(mode, r.n, _fraction_to_float(r.m2), r.radius, _fraction_to_float(r.mean),
                                   dtype, depth=plan.depth, op=op, correction=CORRECTION)
    return bound


# -------------------------------------------------------------------------------------------- logsumexp
def _logsumexp_truths(x: torch.Tensor) -> list[RowTruth]:
    rows, _, _ = reference_logsumexp(x, -1)
    # Rows with inf / NaN have no finite exact value: skipped (counted) like an undefined variance.
    return [RowTruth(r.lse, abs(r.lse) if r.lse is not None else Fraction(0), r) for r in rows]


def _logsumexp_bound(mode, truth, n, dtype, plan):
    r = truth.facts
    return logsumexp_error_bound(mode, r.n, r.s, r.t, float(r.lse), dtype, depth=plan.depth) + r.exact_to


@dataclass(frozen=True)
class FilteredDepth:
    """What the bound of a filtered call needs of its plan: the fp64 depth of the outputs its filter
    leaves (plan.certified_exp_fp64_depth, plan.accurate_rows_fp64_depth); the outputs it keeps are
    within their rounding (or 2 ulp) alone."""
    depth: int


def _logsumexp_planner(x: torch.Tensor, mode):
    """The plan of precred.logsumexp(x, -1) in `mode` (logsumexp_mode's) as its bound sees it: on 16-bit
    input in `fp64` / `accurate`, the certified filter's fp64 depth, and `accurate` on fp32 rows, the fp64
    depth of the rows its kernel does not keep (FilteredDepth both); else the single-read rows plan
    where the call takes one, or plan_for's (launch.reduce_logsumexp's routes)."""
    dims = (x.dim() - 1,)
    if mode.name == "accurate" and x.dtype == torch.float32:   # the report's rows are contiguous
        return FilteredDepth(accurate_rows_fp64_depth(x.shape[0], x.shape[-1], sm_count=device_sm_count(x.device)))
    if mode.strategy == CERTIFIED_EXP:
        view, plan = plan_for(x, dims, mode, x.dtype)
        return FilteredDepth(certified_exp_fp64_depth(plan, view.outer * view.inner, view.red,
                                                      sm_count=device_sm_count(x.device), strided=False))
    row_plan = row_plan_for(x, dims, mode, x.dtype, plan_logsumexp_rows)
    return row_plan if row_plan is not None else plan_for(x, dims, mode, x.dtype)[1]


# ----------------------------------------------------------------------------------- softmax, log_softmax
def _largest_magnitude(values) -> Fraction:
    """The largest |v| of a row's finite exact values (Fractions; -inf skipped): its scale."""
    return max((abs(v) for v in values if isinstance(v, Fraction)), default=Fraction(0))


def _softmax_truths(log: bool):
    def truths(x: torch.Tensor) -> list[RowTruth]:
        # Rows with +inf or NaN have no finite exact values: skipped (counted), as for logsumexp.
        return [RowTruth(None, Fraction(0), row) if ys is None else RowTruth(ys, _largest_magnitude(ys), (row, xs))
                for (row, ys), xs in zip(reference_softmax(x, log), x.double().tolist())]
    return truths


def _softmax_bound(log: bool):
    def bound(mode, truth, n, dtype, plan):
        """precred.softmax_error_bound of each element for the path `plan` takes (plan_softmax), plus
        four times the reference's own error (as tests/test_softmax.py); 0 for elements of -inf, whose
        output (0 or -inf) is exact."""
        row, xs = truth.facts
        path = softmax_plan_arguments(plan, row.n)
        return [0.0 if xi == -math.inf else
                softmax_error_bound(mode, row.n, row.s, row.t, row.m, xi, dtype, log=log,
                                    log_s=float(row.lse - Fraction(row.m)), **path) + 4 * output_exact_to(row, y, log)
                for xi, y in zip(xs, truth.exact)]
    return bound


def _softmax_planner(log: bool):
    return lambda x, mode: plan_softmax(x, x.dim() - 1, mode, x.dtype, log)


# -------------------------------------------------------------------------------- layer_norm, rms_norm
def _norm_truths(rms: bool):
    def truths(x: torch.Tensor) -> list[RowTruth]:
        n = x.shape[-1]
        rows, y, _, _ = reference_norm(x, [n], None, None, NORM_EPS, rms=rms)
        moments, _, _ = reference_moments(x, -1)
        out = []
        for row, ys, mom, xs in zip(rows, y, moments, x.double().tolist()):
            exact = [mpf_to_fraction(v) for v in ys]
            magnitudes = [abs(float(v)) for v in ys]   # y = xhat: no weight or bias
            facts = dict(bound_inputs(xs, row, mom, rms), xhat=magnitudes, y=magnitudes)
            out.append(RowTruth(exact, _largest_magnitude(exact), facts))
        return out
    return truths


def _norm_bound(rms: bool):
    def bound(mode, truth, n, dtype, plan):
        """precred.norm_error_bound of each output (no weight or bias: y = xhat), for the single-read
        plan's depth or, on the streamed paths (plan None), the Welford statistics'."""
        return list(norm_error_bound(mode, dtype, rms=rms, depth=None if plan is None else plan.depth,
                                     eps=NORM_EPS, **truth.facts))
    return bound


def _norm_planner(x: torch.Tensor, mode):
    """The single-read forward plan a call takes, or None (streamed rows: the row loop or the streaming
    pass, whose bounds are the same)."""
    acc = mode.accumulator_dtype(x.dtype, x.dtype)
    return plan_norm_forward(x.shape[0], x.shape[-1], accumulator_size=acc.itemsize, element_size=x.element_size())


OPS: dict[str, ReportOp] = {
    "sum": ReportOp("sum", tuple(MODES), lambda x, m: precred_sum(x, dim=-1, mode=m),
                    lambda x: torch.sum(x, dim=-1), _finite_rows(lambda x: _sum_truths(x, False)), _sum_bound("sum"),
                    sum_mode, True, "S1 = sum |x_i|", takes=_sum_takes),
    "mean": ReportOp("mean", tuple(MODES), lambda x, m: precred_mean(x, dim=-1, mode=m),
                     lambda x: torch.mean(x, dim=-1), _finite_rows(lambda x: _sum_truths(x, True)), _sum_bound("mean"),
                     sum_mode, True, "S1 / n", takes=_sum_takes),
    "var": ReportOp("var", tuple(VAR_MODES), lambda x, m: precred_var(x, dim=-1, mode=m),
                    lambda x: torch.var(x, dim=-1), _finite_rows(lambda x: _moments_truths(x, False)),
                    _moments_bound("var"),
                    lambda name, dtype: VAR_MODES[name], False, "the exact variance (the S1 of its nonnegative terms)",
                    plan_moments_rows),
    "std": ReportOp("std", tuple(VAR_MODES), lambda x, m: precred_std(x, dim=-1, mode=m),
                    lambda x: torch.std(x, dim=-1), _finite_rows(lambda x: _moments_truths(x, True)),
                    _moments_bound("std"),
                    lambda name, dtype: VAR_MODES[name], False, "the exact standard deviation", plan_moments_rows),
    "logsumexp": ReportOp("logsumexp", tuple(EXP_MODES),
                          lambda x, m: precred_logsumexp(x, -1, mode=m), lambda x: torch.logsumexp(x, -1),
                          _logsumexp_truths, _logsumexp_bound, logsumexp_mode, False,
                          "|logsumexp| (the error is relative)", planner=_logsumexp_planner),
    "softmax": ReportOp("softmax", tuple(EXP_MODES),
                        lambda x, m: precred_softmax(x, -1, mode=m), lambda x: torch.softmax(x, -1),
                        _softmax_truths(False), _softmax_bound(False), lambda name, dtype: EXP_MODES[name],
                        False, "the row's largest output", per_element=True, planner=_softmax_planner(False)),
    "log_softmax": ReportOp("log_softmax", tuple(EXP_MODES),
                            lambda x, m: precred_log_softmax(x, -1, mode=m), lambda x: torch.log_softmax(x, -1),
                            _softmax_truths(True), _softmax_bound(True), lambda name, dtype: EXP_MODES[name],
                            False, "the row's largest |output|", per_element=True, planner=_softmax_planner(True)),
    "layer_norm": ReportOp("layer_norm", tuple(NORM_MODES),
                           lambda x, m: precred_layer_norm(x, [x.shape[-1]], eps=NORM_EPS, mode=m),
                           lambda x: F.layer_norm(x, [x.shape[-1]], eps=NORM_EPS), _finite_rows(_norm_truths(False)),
                           _norm_bound(False), lambda name, dtype: NORM_MODES[name], False,
                           "the row's largest |output|", per_element=True, planner=_norm_planner),
    "rms_norm": ReportOp("rms_norm", tuple(NORM_MODES),
                         lambda x, m: precred_rms_norm(x, [x.shape[-1]], eps=NORM_EPS, mode=m),
                         lambda x: F.rms_norm(x, [x.shape[-1]], eps=NORM_EPS), _finite_rows(_norm_truths(True)),
                         _norm_bound(True), lambda name, dtype: NORM_MODES[name], False,
                         "the row's largest |output|", per_element=True, planner=_norm_planner),
}

