"""Launcher: view -> plan -> kernel launches. Knows nothing of autograd or argument checking.

`reduce_sum` is the one entry point of the sum/mean kernels: it views the input as
(outer, reduce, inner), asks the planner for a plan, and runs the plan's passes, the last of which
writes the output (the sum, or the sum divided by the element count).
"""
import torch
import triton.language as tl

from .layout import reduction_view
from .modes import Mode
from .plan import Plan, plan_reduction
from .schedules.inner import inner_kernel
from .schedules.outer import outer_kernel
from .strategies import COMPENSATED

_TL_DTYPE = {torch.float32: tl.float32, torch.float64: tl.float64}

# Stand-in SM count for the CPU interpreter: small, so that small test inputs still take the split path.
INTERPRETER_SM_COUNT = 2


def device_sm_count(device: torch.device) -> int:
    if device.type == "cuda":
        return _cuda_sm_count(device.index if device.index is not None else torch.cuda.current_device())
    return INTERPRETER_SM_COUNT


_SM_COUNTS = {}


def _cuda_sm_count(index: int) -> int:
    if index not in _SM_COUNTS:
        _SM_COUNTS[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return _SM_COUNTS[index]


def plan_for(x: torch.Tensor, dims: tuple, mode: Mode, **planner_overrides) -> tuple:
    """(view, plan) for reducing non-empty x over the sorted, unique, non-negative dims.

    planner_overrides (sm_count, tile_elements) let tests force splits and long lane chains on small
    inputs; the public functions never pass them."""
    view = reduction_view(x, dims)
    options = dict(sm_count=device_sm_count(x.device))
    options.update(planner_overrides)
    plan = plan_reduction(view.outer, view.red, view.inner, inner_contiguous=view.stride_inner == 1,
                          one_tile_per_lane=mode.one_tile_per_lane, **options)
    return view, plan


def reduce_sum(x: torch.Tensor, dims: tuple, mode: Mode, out_dtype: torch.dtype, divide: bool,
               plan: Plan | None = None) -> torch.Tensor:
    """Flat output of O*I values (row-major over the kept dims): the sum (or mean) over dims.

    x is non-empty; dims sorted, unique, non-negative. `plan` overrides the planner (tests use it to
    cover every schedule on small inputs); it must describe the same view.
    """
    view, planned = plan_for(x, dims, mode)
    plan = planned if plan is None else plan
    acc_dtype = mode.accumulator_dtype(x.dtype, out_dtype)
    uses_lo = mode.strategy == COMPENSATED
    n_out = view.outer * view.inner
    out = torch.empty(n_out, dtype=out_dtype, device=x.device)

    src_hi = src_lo = view.source
    strides = (view.stride_outer, view.stride_red, view.stride_inner)
    for index, p in enumerate(plan.passes):
        last = index == len(plan.passes) - 1
        if last:
            dst_hi = dst_lo = out
        else:
            dst_hi = torch.empty(p.parts * n_out, dtype=acc_dtype, device=x.device)
            dst_lo = torch.empty_like(dst_hi) if uses_lo else dst_hi
        _launch_pass(p, src_hi, src_lo, dst_hi, dst_lo, strides, acc_dtype, mode.strategy, uses_lo,
                     src_is_state=index > 0, dst_is_state=not last, divisor=view.red if divide else 0)
        # The next pass reads the states just written: [rows, parts] for inner, [parts, outputs] for outer.
        src_hi, src_lo = dst_hi, dst_lo
        strides = (p.parts, 1, 0) if p.schedule == "inner" else (0, n_out, 1)
    return out


def _launch_pass(p, src_hi, src_lo, dst_hi, dst_lo, strides, acc_dtype, strategy, uses_lo,
                 src_is_state, dst_is_state, divisor):
    stride_outer, stride_red, stride_inner = strides
    common = dict(STRATEGY=strategy, ACC_DTYPE=_TL_DTYPE[acc_dtype], SRC_IS_STATE=src_is_state,
                  DST_IS_STATE=dst_is_state, DIVIDE=divisor > 0, USES_LO=uses_lo, num_warps=p.num_warps)
    if p.schedule == "inner":
        rows = p.outer * p.inner
        grid = (triton_cdiv(rows, p.block_kept) * p.parts,)
        inner_kernel[grid](src_hi, src_lo, dst_hi, dst_lo, rows, p.inner,
                           stride_outer, stride_inner, stride_red, p.red, p.chunk, p.parts, max(divisor, 1),
                           BLOCK_M=p.block_kept, BLOCK_N=p.lanes, **common)
    else:
        grid = (p.outer * triton_cdiv(p.inner, p.block_kept) * p.parts,)
        outer_kernel[grid](src_hi, src_lo, dst_hi, dst_lo, p.outer, p.inner,
                           stride_outer, stride_inner, stride_red, p.red, p.chunk, p.parts, max(divisor, 1),
                           BLOCK_R=p.lanes, BLOCK_I=p.block_kept, **common)


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)
