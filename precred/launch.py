"""Launcher: view -> plan -> kernel launches. Knows nothing of autograd or argument checking.

`reduce_sum` is the one entry point of the sum/mean kernels: it views the input as
(outer, reduce, inner), asks the planner for a plan, and runs the plan's passes, the last of which
writes the output (the sum, or the sum divided by the element count).
"""
import torch
import triton
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


def plan_for(x: torch.Tensor, dims: tuple, mode: Mode, out_dtype: torch.dtype | None = None,
             **planner_overrides) -> tuple:
    """(view, plan) for reducing non-empty x over the sorted, unique, non-negative dims into out_dtype
    (default x.dtype; an fp64 output makes the accumulator fp64, which sizes the tile).

    planner_overrides (sm_count, tile_elements, split_min_bytes) let tests force splits and long lane
    chains on small inputs; the public functions never pass them."""
    view = reduction_view(x, dims)
    options = dict(sm_count=device_sm_count(x.device), element_size=x.element_size(),
                   heavy_state=mode.strategy == COMPENSATED,
                   accumulator_size=mode.accumulator_dtype(x.dtype, out_dtype).itemsize)
    options.update(planner_overrides)
    plan = plan_reduction(view.outer, view.red, view.inner, inner_contiguous=view.stride_inner == 1,
                          whole_tree=mode.whole_tree, **options)
    return view, plan


# Launch recipes of CUDA calls already seen, by everything that decides the plan and the compiled
# kernels: shape, strides, dtypes, device, dims, mode, and the input's 16-byte alignment (Triton
# specializes on it). A hit skips layout analysis, planning and Triton's argument binding: the cached
# compiled kernels are launched directly. Unbounded only in the number of distinct call signatures.
_RECIPES = {}


def _recipe_key(x, dims, mode, out_dtype, divide):
    return (x.shape, x.stride(), x.dtype, x.device, dims, mode.name, out_dtype, divide, x.data_ptr() % 16)


def cached_recipe(x: torch.Tensor, dims: tuple, mode: Mode, out_dtype: torch.dtype, divide: bool):
    """The recipe a previous reduce_sum call on this signature left, or None."""
    return _RECIPES.get(_recipe_key(x, dims, mode, out_dtype, divide)) if x.is_cuda else None


def reduce_sum(x: torch.Tensor, dims: tuple, mode: Mode, out_dtype: torch.dtype, divide: bool,
               plan: Plan | None = None) -> torch.Tensor:
    """Flat output of O*I values (row-major over the kept dims): the sum (or mean) over dims.

    x is non-empty; dims sorted, unique, non-negative. `plan` overrides the planner (tests use it to
    cover every schedule on small inputs); it must describe the same view.
    """
    key = None
    if plan is None and x.is_cuda:
        key = _recipe_key(x, dims, mode, out_dtype, divide)
        recipe = _RECIPES.get(key)
        if recipe is not None:
            return recipe.run(x)
    view, planned = plan_for(x, dims, mode, out_dtype)
    plan = planned if plan is None else plan
    acc_dtype = mode.accumulator_dtype(x.dtype, out_dtype)
    uses_lo = mode.strategy == COMPENSATED
    n_out = view.outer * view.inner
    out = torch.empty(n_out, dtype=out_dtype, device=x.device)

    src_hi = src_lo = _bits_if_bf16(view.source)
    strides = (view.stride_outer, view.stride_red, view.stride_inner)
    launches = []
    for index, p in enumerate(plan.passes):
        last = index == len(plan.passes) - 1
        dst_hi, dst_lo = _destination(out, last, p.parts * n_out, acc_dtype, uses_lo)
        launches.append(_launch_pass(p, src_hi, src_lo, dst_hi, dst_lo, strides, acc_dtype, mode.strategy,
                                     uses_lo, src_is_state=index > 0, dst_is_state=not last,
                                     divisor=view.red if divide else 0))
        # The next pass reads the states just written: [rows, parts] for inner, [parts, outputs] for outer.
        src_hi, src_lo = dst_hi, dst_lo
        strides = (p.parts, 1, 0) if p.schedule == "inner" else (0, n_out, 1)
    if key is not None and not view.copied and all(compiled is not None for compiled, _, _ in launches):
        _RECIPES[key] = _Recipe(launches, plan, n_out, out_dtype, acc_dtype, uses_lo)
    return out


def _launch_pass(p, src_hi, src_lo, dst_hi, dst_lo, strides, acc_dtype, strategy, uses_lo,
                 src_is_state, dst_is_state, divisor):
    """Launch one pass; returns (compiled kernel or None under the interpreter, grid, trailing args)."""
    stride_outer, stride_red, stride_inner = strides
    consts = dict(STRATEGY=strategy, ACC_DTYPE=_TL_DTYPE[acc_dtype], SRC_IS_STATE=src_is_state,
                  DST_IS_STATE=dst_is_state, DIVIDE=divisor > 0, USES_LO=uses_lo)
    if p.schedule == "inner":
        kernel = inner_kernel
        rows = p.outer * p.inner
        grid = (triton.cdiv(rows, p.block_kept) * p.parts,)
        scalars = [rows, p.inner, stride_outer, stride_inner, stride_red, p.red, p.chunk, p.parts, max(divisor, 1)]
        consts.update(BLOCK_M=p.block_kept, BLOCK_N=p.lanes)
    else:
        kernel = outer_kernel
        grid = (p.outer * triton.cdiv(p.inner, p.block_kept) * p.parts,)
        scalars = [p.outer, p.inner, stride_outer, stride_inner, stride_red, p.red, p.chunk, p.parts,
                   max(divisor, 1)]
        consts.update(BLOCK_R=p.lanes, BLOCK_I=p.block_kept, TILE_COUNTER=p.tile_counter)
    compiled = kernel[grid](src_hi, src_lo, dst_hi, dst_lo, *scalars, num_warps=p.num_warps, **consts)
    # Everything after the four pointers, in the kernel's parameter order, as Triton's launcher takes it.
    trailing = scalars + [consts[name] for name in kernel.arg_names[4 + len(scalars):]]
    return (compiled if hasattr(compiled, "run") else None), grid, trailing


class _Recipe:
    """The launches of one call signature, replayed on new tensors of that signature."""

    def __init__(self, launches, plan, n_out, out_dtype, acc_dtype, uses_lo):
        from triton.runtime import driver  # the GPU driver; never touched under the interpreter

        self.launches = launches
        self.parts = [p.parts for p in plan.passes]
        self.n_out, self.out_dtype, self.acc_dtype, self.uses_lo = n_out, out_dtype, acc_dtype, uses_lo
        self.get_stream = driver.active.get_current_stream

    def run(self, x: torch.Tensor) -> torch.Tensor:
        device = x.device
        out = torch.empty(self.n_out, dtype=self.out_dtype, device=device)
        stream = self.get_stream(device.index)
        src_hi = src_lo = _bits_if_bf16(x)
        last = len(self.launches) - 1
        for index, (compiled, grid, trailing) in enumerate(self.launches):
            dst_hi, dst_lo = _destination(out, index == last, self.parts[index] * self.n_out, self.acc_dtype,
                                          self.uses_lo)
            compiled.run(grid[0], 1, 1, stream, compiled.function, compiled.packed_metadata, None, None, None,
                         src_hi, src_lo, dst_hi, dst_lo, *trailing)
            src_hi, src_lo = dst_hi, dst_lo
        return out


def _destination(out: torch.Tensor, last: bool, n_states: int, acc_dtype: torch.dtype, uses_lo: bool):
    """Where a pass writes: the output (last pass), else fresh partial-state workspaces in the
    accumulator dtype (a lo array only for strategies that use it)."""
    if last:
        dst = _bits_if_bf16(out)
        return dst, dst
    hi = torch.empty(n_states, dtype=acc_dtype, device=out.device)
    return hi, (torch.empty_like(hi) if uses_lo else hi)


def _bits_if_bf16(t: torch.Tensor) -> torch.Tensor:
    """bf16 tensors travel to the kernels as int16 bit patterns (a view, no copy): the kernels widen and
    round bf16 themselves, because Triton's interpreter flushes bf16 subnormals and truncates."""
    return t.view(torch.int16) if t.dtype == torch.bfloat16 else t
