"""Launcher of layer_norm / rms_norm: [rows, n] contiguous tensors -> plans -> kernel launches.

Knows nothing of autograd or argument checking (precred/ops/normalization.py). Forward: rows that fit
on chip go to the single-read kernel (schedules/norm_rows.py); longer rows get their statistics from
the Welford reduction (fp64 accumulator, the split schedule for few rows) and then one normalizing
pass (schedules/norm_stream.py). Backward: rows on chip are read once per program
(norm_backward_kernel), longer rows twice (norm_backward_loop_kernel); both leave per-program dw / db
partials that `_merge_partials` sums over programs with precred's own compensated reduction, in a
fixed order.
"""
from dataclasses import dataclass
import math
import struct

import torch
import triton

from .launch import _TL_DTYPE, _bits_if_bf16, device_sm_count, reduce_moments, reduce_sum
from .modes import MODES, VAR_MODES, Mode
from .plan import NORM_APPLY_TILE, plan_norm_backward, plan_norm_forward
from .schedules.norm_rows import norm_backward_kernel, norm_forward_kernel
from .schedules.norm_stream import norm_apply_kernel, norm_backward_loop_kernel

_STATISTICS_MODE = VAR_MODES["fp64"]   # long rows: Welford in fp64 (no overflow, ~2^-50 relative)
_PARTIALS_MODE = MODES["kahan"]        # dw / db: compensated sum of the per-program partials


@dataclass(frozen=True)
class NormStats:
    """Per-row statistics the forward pass leaves for the backward pass (fp64, [rows])."""
    mean: torch.Tensor     # 0 for rms_norm
    rstd: torch.Tensor     # 1 / sqrt(var + eps), or 1 / sqrt(mean(x^2) + eps)


def _float64_bits(value: float) -> int:
    """A float's fp64 bit pattern as an int: how eps reaches a kernel exactly."""
    return struct.unpack("<q", struct.pack("<d", float(value)))[0]


def _wire(t):
    """How a tensor travels to the kernels: bf16 as int16 bits under the interpreter (see launch.py),
    as itself on the GPU."""
    return t if t is None or t.is_cuda else _bits_if_bf16(t)


def norm_forward(x: torch.Tensor, weight, bias, eps: float, rms: bool, mode: Mode, out_dtype: torch.dtype):
    """(y, NormStats) of x: [rows, n] contiguous and non-empty; weight / bias: [n] contiguous or None."""
    rows, n = x.shape
    acc = mode.accumulator_dtype(x.dtype, out_dtype)
    y = torch.empty((rows, n), dtype=out_dtype, device=x.device)
    plan = plan_norm_forward(rows, n, accumulator_size=acc.itemsize)
    consts = dict(RMS=rms, HAS_W=weight is not None, HAS_B=bias is not None, ACC_DTYPE=_TL_DTYPE[acc])
    w, b = _wire(weight) if weight is not None else x, _wire(bias) if bias is not None else x
    if plan is not None:
        mean = torch.empty(rows, dtype=torch.float64, device=x.device)
        rstd = torch.empty_like(mean)
        norm_forward_kernel[(triton.cdiv(rows, plan.block_rows),)](
            _wire(x), w, b, _wire(y), mean, rstd, rows, n, _float64_bits(eps), num_warps=plan.num_warps,
            BLOCK_ROWS=plan.block_rows, BLOCK_N=plan.block_j, **consts)
        return y, NormStats(mean, rstd)
    mean, rstd = long_row_statistics(x, eps, rms)
    block_rows, block_j = NORM_APPLY_TILE
    grid = (triton.cdiv(rows, block_rows), triton.cdiv(n, block_j))
    norm_apply_kernel[grid](_wire(x), w, b, mean, rstd, _wire(y), rows, n, num_warps=4,
                            BLOCK_ROWS=block_rows, BLOCK_J=block_j, **consts)
    return y, NormStats(mean, rstd)


def long_row_statistics(x: torch.Tensor, eps: float, rms: bool):
    """(mean, rstd) per row of [rows, n] x by the Welford reduction in fp64: var is the biased variance
    (m2 / n); rms_norm's mean of squares is var + mean^2 (a sum of two non-negative fp64 values)."""
    var, mean = reduce_moments(x, (1,), _STATISTICS_MODE, torch.float64, 0.0, False, with_mean=True)
    if rms:
        # An infinite mean (an inf in the row, no NaN) makes mean(x^2) inf, as torch (Welford's variance is
        # NaN there). A row holding both +inf and -inf has a NaN mean: it comes out NaN throughout, where
        # torch gives 0 at its finite elements (documented in precred.rms_norm).
        var = torch.where(mean.isinf(), math.inf, var + mean * mean)
        mean = torch.zeros_like(mean)
    # Per-row fp64 arithmetic on [rows] values (IEEE sqrt and division, correctly rounded on either device).
    return mean, 1.0 / torch.sqrt(var + eps)


def norm_backward(grad: torch.Tensor, x: torch.Tensor, weight, stats: NormStats, rms: bool, mode: Mode,
                  weight_grad_dtype: torch.dtype | None, bias_grad_dtype: torch.dtype | None):
    """(dx, dweight or None, dbias or None): grad and x [rows, n] contiguous, non-empty; dweight (dbias)
    is computed, in the given dtype, when its dtype is not None."""
    weight_grad, bias_grad = weight_grad_dtype is not None, bias_grad_dtype is not None
    rows, n = x.shape
    acc = mode.accumulator_dtype(x.dtype, grad.dtype)
    plan = plan_norm_backward(rows, n, accumulator_size=acc.itemsize, sm_count=device_sm_count(x.device))
    programs = triton.cdiv(rows, plan.rows_per_program)
    dx = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    dw_part = torch.empty((programs, n), dtype=acc, device=x.device) if weight_grad else stats.mean
    db_part = torch.empty((programs, n), dtype=acc, device=x.device) if bias_grad else stats.mean
    w = _wire(weight) if weight is not None else x
    pointers = (_wire(x), w, _wire(grad), stats.mean, stats.rstd, _wire(dx), dw_part, db_part)
    consts = dict(RMS=rms, HAS_W=weight is not None, WEIGHT_GRAD=weight_grad, BIAS_GRAD=bias_grad,
                  ACC_DTYPE=_TL_DTYPE[acc])
    if plan.on_chip:
        norm_backward_kernel[(programs,)](*pointers, rows, n, plan.rows_per_program, num_warps=plan.num_warps,
                                          BLOCK_ROWS=plan.block_rows, BLOCK_N=plan.block_n, **consts)
    else:
        norm_backward_loop_kernel[(programs,)](*pointers, rows, n, plan.rows_per_program,
                                               num_warps=plan.num_warps, BLOCK_N=plan.block_n, **consts)
    dweight = _merge_partials(dw_part, weight_grad_dtype) if weight_grad else None
    dbias = _merge_partials(db_part, bias_grad_dtype) if bias_grad else None
    return dx, dweight, dbias


def _merge_partials(partials: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """Sum of [programs, n] partials over programs: precred's compensated sum, a fixed order."""
    return reduce_sum(partials, (0,), _PARTIALS_MODE, out_dtype, divide=False)
