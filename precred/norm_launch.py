"""Launcher of layer_norm / rms_norm: [rows, n] contiguous tensors -> plans -> kernel launches.

Knows nothing of autograd or argument checking (precred/ops/normalization.py). Forward: rows that fit
on chip go to the single-read kernel (schedules/norm_rows.py); longer rows get their statistics from
the Welford reduction (fp64 accumulator, the split schedule for few rows) and then one normalizing
pass (schedules/norm_stream.py), which also turns the Welford moments into mean and rstd. Backward:
rows on chip are read once per program (norm_backward_kernel), longer rows twice
(norm_backward_loop_kernel); both leave per-program dw / db partials that `_merge_partials` sums over
programs with precred's own compensated reduction, in a fixed order.

CUDA calls leave launch recipes, as precred.launch's reductions do: a later call with the same
signature (shapes, dtypes, device, eps, mode, the tensors' 16-byte alignment) replays the compiled
kernel directly, without planning or Triton's argument binding -- the host time that a training step's
many mid-sized norms feel.
"""
from dataclasses import dataclass
import struct

import torch
import triton

from .launch import (_TL_DTYPE, _launch, _replay, device_sm_count, reduce_moments, reduce_sum,
                     wire_to_row_kernel as _wire)
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


# Launch recipes of CUDA calls, by signature (see the module docstring): (compiled kernel, grid,
# trailing arguments) plus what rebuilds the pointers. Unbounded only in the number of signatures;
# tests that patch the planner's limits clear it.
_RECIPES = {}


def _recipe_key(direction, *tensors_and_options):
    """A call signature: each tensor's shape, dtype, device and 16-byte alignment (Triton specializes
    the compiled kernel on it), None for a missing one, and the options as given."""
    key = [direction]
    for item in tensors_and_options:
        if isinstance(item, torch.Tensor):
            key.append((item.shape, item.dtype, item.device, item.data_ptr() % 16))
        else:
            key.append(item)
    return tuple(key)


class _Replay:
    """A compiled kernel launch replayed on new pointers of the same signature; on_chip: which path it
    is (rows on chip or streamed: the pointers differ), whatever the planner says now."""

    def __init__(self, launch, on_chip: bool):
        from triton.runtime import driver  # the GPU driver; never touched under the interpreter

        self.compiled, self.grid, self.trailing = launch
        self.on_chip = on_chip
        self.get_stream = driver.active.get_current_stream

    def __call__(self, device, pointers):
        _replay(self.compiled, self.grid, self.get_stream(device.index), pointers, self.trailing)


def norm_forward(x: torch.Tensor, weight, bias, eps: float, rms: bool, mode: Mode, out_dtype: torch.dtype):
    """(y, NormStats) of x: [rows, n] contiguous and non-empty; weight / bias: [n] contiguous or None."""
    key = _recipe_key("forward", x, weight, bias, eps, rms, mode, out_dtype) if x.is_cuda else None
    recipe = _RECIPES.get(key)
    if recipe is not None:
        y, stats, pointers = _forward_buffers(x, weight, bias, rms, out_dtype, on_chip=recipe.on_chip)
        recipe(x.device, pointers)
        return y, stats
    rows, n = x.shape
    acc = mode.accumulator_dtype(x.dtype, out_dtype)
    plan = plan_norm_forward(rows, n, accumulator_size=acc.itemsize)
    y, stats, pointers = _forward_buffers(x, weight, bias, rms, out_dtype, on_chip=plan is not None)
    consts = dict(RMS=rms, HAS_W=weight is not None, HAS_B=bias is not None, ACC_DTYPE=_TL_DTYPE[acc])
    if plan is not None:
        launch = _launch(norm_forward_kernel, (triton.cdiv(rows, plan.block_rows),), pointers,
                         [rows, n, _float64_bits(eps)], plan.num_warps,
                         BLOCK_ROWS=plan.block_rows, BLOCK_N=plan.block_j, **consts)
    else:
        block_rows, block_j = NORM_APPLY_TILE
        launch = _launch(norm_apply_kernel, (triton.cdiv(rows, block_rows), triton.cdiv(n, block_j)), pointers,
                         [rows, n, _float64_bits(eps)], 4, BLOCK_ROWS=block_rows, BLOCK_J=block_j, **consts)
    if key is not None and launch[0] is not None:
        _RECIPES[key] = _Replay(launch, on_chip=plan is not None)
    return y, stats


def _forward_buffers(x, weight, bias, rms, out_dtype, on_chip: bool):
    """(y, NormStats, the forward kernel's pointers): fresh outputs; for rows too long to sit on chip,
    the Welford reduction's fp64 biased variance and mean first (the normalizing pass reads them)."""
    rows, n = x.shape
    y = torch.empty((rows, n), dtype=out_dtype, device=x.device)
    mean = torch.empty(rows, dtype=torch.float64, device=x.device)
    rstd = torch.empty_like(mean)
    w, b = _wire(weight) if weight is not None else x, _wire(bias) if bias is not None else x
    if on_chip:
        return y, NormStats(mean, rstd), [_wire(x), w, b, _wire(y), mean, rstd]
    var, welford_mean = reduce_moments(x, (1,), _STATISTICS_MODE, torch.float64, 0.0, False, with_mean=True)
    return y, NormStats(mean, rstd), [_wire(x), w, b, var, welford_mean, _wire(y), mean, rstd]


def norm_backward(grad: torch.Tensor, x: torch.Tensor, weight, stats: NormStats, rms: bool, mode: Mode,
                  weight_grad_dtype: torch.dtype | None, bias_grad_dtype: torch.dtype | None):
    """(dx, dweight or None, dbias or None): grad and x [rows, n] contiguous, non-empty; dweight (dbias)
    is computed, in the given dtype, when its dtype is not None."""
    weight_grad, bias_grad = weight_grad_dtype is not None, bias_grad_dtype is not None
    rows, n = x.shape
    acc = mode.accumulator_dtype(x.dtype, grad.dtype)
    key = None
    if x.is_cuda:
        key = _recipe_key("backward", grad, x, weight, rms, mode, weight_grad_dtype, bias_grad_dtype)
    recipe = _RECIPES.get(key)
    if recipe is not None:
        programs, on_chip = recipe.grid[0], recipe.on_chip
    else:
        plan = plan_norm_backward(rows, n, accumulator_size=acc.itemsize, sm_count=device_sm_count(x.device))
        programs, on_chip = triton.cdiv(rows, plan.rows_per_program), plan.on_chip
    dx = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    dw_part = torch.empty((programs, n), dtype=acc, device=x.device) if weight_grad else stats.mean
    db_part = torch.empty((programs, n), dtype=acc, device=x.device) if bias_grad else stats.mean
    w = _wire(weight) if weight is not None else x
    pointers = [_wire(x), w, _wire(grad), stats.mean, stats.rstd, _wire(dx), dw_part, db_part]
    if not on_chip:   # the loop's per-row scratch: mean(g w xhat) and mean(g w)
        pointers += [torch.empty(rows, dtype=acc, device=x.device), torch.empty(rows, dtype=acc, device=x.device)]
    if recipe is not None:
        recipe(x.device, pointers)
    else:
        consts = dict(RMS=rms, HAS_W=weight is not None, WEIGHT_GRAD=weight_grad, BIAS_GRAD=bias_grad,
                      ACC_DTYPE=_TL_DTYPE[acc])
        if plan.on_chip:
            launch = _launch(norm_backward_kernel, (programs,), pointers, [rows, n, plan.rows_per_program],
                             plan.num_warps, BLOCK_ROWS=plan.block_rows, BLOCK_N=plan.block_n, **consts)
        else:
            launch = _launch(norm_backward_loop_kernel, (programs,), pointers, [rows, n, plan.rows_per_program],
                             plan.num_warps, BLOCK_N=plan.block_n, **consts)
        if key is not None and launch[0] is not None:
            _RECIPES[key] = _Replay(launch, on_chip=plan.on_chip)
    dweight = _merge_partials(dw_part, weight_grad_dtype) if weight_grad else None
    dbias = _merge_partials(db_part, bias_grad_dtype) if bias_grad else None
    return dx, dweight, dbias


def _merge_partials(partials: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """Sum of [programs, n] partials over programs: precred's compensated sum, a fixed order."""
    return reduce_sum(partials, (0,), _PARTIALS_MODE, out_dtype, divide=False)
