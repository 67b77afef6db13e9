"""Launcher of layer_norm / rms_norm: contiguous inputs of rows x n elements -> plans -> kernel launches.

Knows nothing of autograd or argument checking (precred/ops/normalization.py). Forward: rows that fit
on chip go to the single-read kernel (schedules/norm_rows.py); longer rows, where there are enough of
them and they fit L2, to the row loop (schedules/norm_row_loop.py: one program per row, Welford
statistics, then the normalizing pass over the row again); the rest get their statistics from the
Welford reduction (fp64 accumulator, the split schedule for few rows) and then one normalizing pass
(schedules/norm_stream.py), which also turns the Welford moments into mean and rstd. Backward:
rows on chip are read once per program (norm_backward_kernel), longer rows twice (a program per row
for their sums, norm_backward_row_terms_kernel, then dx by column blocks, norm_backward_columns_kernel);
both leave dw / db partials (a row per program, or per row block) that one more launch
(schedules/norm_merge.py) sums with the compensated strategy, in a fixed order.

The tensors keep their callers' shapes (the kernels address them flat, as rows x n): no views, whose
host time a mid-sized norm feels. CUDA calls leave launch recipes, as precred.launch's reductions do: a
later call with the same signature (shapes, dtypes, device, eps, mode, the tensors' 16-byte alignment)
replays the compiled kernels directly on raw addresses, without planning or Triton's argument binding.
"""
from dataclasses import dataclass

import torch
import triton

from .launch import (RECIPE_SCRATCH_MAX_BYTES, _TL_DTYPE, _BoundLaunch, _launch, blocked_tree_layout, device_sm_count,
                     empty_contiguous_like, reduce_moments, two_axis_grid, wire_to_row_kernel as _wire)
from .modes import VAR_MODES, Mode, norm_affine_dtype
from . import plan as planner
from .plan import norm_forward_register_cap, plan_norm_backward, plan_norm_forward, plan_norm_row_loop
from .schedules.norm_merge import norm_merge_kernel
from .schedules.norm_row_loop import norm_row_loop_kernel
from .schedules.norm_rows import norm_backward_kernel, norm_forward_kernel
from .schedules.norm_stream import (norm_apply_kernel, norm_backward_columns_kernel,
                                    norm_backward_row_terms_kernel)
from .signature_cache import keep
from .stream_scratch import stream_is_capturing

_STATISTICS_MODE = VAR_MODES["fp64"]   # long rows: Welford in fp64 (no overflow, ~2^-50 relative)


@dataclass(frozen=True)
class NormStats:
    """Per-row statistics the forward pass leaves for the backward pass (fp64, [rows])."""
    mean: torch.Tensor     # 0 for rms_norm
    rstd: torch.Tensor     # 1 / sqrt(var + eps), or 1 / sqrt(mean(x^2) + eps)


# Launch recipes of CUDA calls, by signature (see the module docstring), at most
# signature_cache.SIGNATURES_KEPT of them; tests that patch the planner's limits clear it.
_RECIPES = {}
# The replays' scratch -- the forward's statistics where nothing reads them, the backward's partials --
# one byte buffer per (device, CUDA stream), shared by every signature and grown to the largest call's
# need, at most RECIPE_SCRATCH_MAX_BYTES (larger needs take a buffer of their own per call). Sharing is
# safe because a stream runs its calls in order: a call's kernels write and read the buffer before the
# next call's start. Kept per recipe (until 2026-12-06), the backward's partials (programs x n elements,
# ~2 MB for rows of 1024, more for longer ones) stayed allocated once for every token count a process met.
_STREAM_SCRATCH = {}


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
    """A signature's compiled launches (precred.launch._BoundLaunch), replayed on the raw addresses of
    new tensors; on_chip: which path they are, whatever the planner says now (the pointers differ):
    forward, the kernel computes its statistics itself (rows on chip, or the row loop) or a Welford
    launch comes first (streamed); backward, rows on chip or read twice. programs: the backward's partial
    rows. Their scratch is the stream's (_stream_scratch), not the recipe's."""

    def __init__(self, launches, on_chip: bool, programs: int = 0):
        from triton.runtime import driver  # the GPU driver; never touched under the interpreter

        self.launches = [_BoundLaunch(*launch) for launch in launches]
        self.on_chip, self.programs = on_chip, programs
        self.get_stream = driver.active.get_current_stream

    def __call__(self, stream, *pointer_lists):
        for index, pointers in enumerate(pointer_lists):
            self.launch(index, stream, pointers)

    def launch(self, index: int, stream, pointers) -> None:
        """The index-th launch alone (the backward allocates dweight / dbias between its launches)."""
        self.launches[index](stream, [p.data_ptr() if isinstance(p, torch.Tensor) else p for p in pointers])


def _stream_scratch(device: torch.device, stream, nbytes: int):
    """(address of at least nbytes of scratch for work queued on `stream` of `device`, the tensor that
    holds it). The stream's shared buffer (_STREAM_SCRATCH), made or grown on the first need of that
    size -- while `stream` is current, so torch's caching allocator ties the buffer to it and hands a
    replaced one only to later work there -- or, past RECIPE_SCRATCH_MAX_BYTES, a buffer for this call
    alone; under a CUDA graph capture, a buffer for this call too (stream_scratch.py: the graph's own,
    from its memory pool -- the stream's would be shared with other graphs and eager calls, and freed
    under the graph when a larger need replaces it). The caller holds the tensor until its launches
    are queued: another thread may replace the stream's buffer in between, and the freed block must
    not go to other work queued before them."""
    if nbytes > RECIPE_SCRATCH_MAX_BYTES or stream_is_capturing(stream):
        buffer = torch.empty(nbytes, dtype=torch.uint8, device=device)
        return buffer.data_ptr(), buffer
    key = (device.index, stream)
    held = _STREAM_SCRATCH.get(key)   # (buffer, its bytes, its address): no tensor method calls on a hit
    if held is None or held[1] < nbytes:
        buffer = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=device)
        held = _STREAM_SCRATCH[key] = (buffer, buffer.numel(), buffer.data_ptr())
    return held[2], held[0]


def norm_forward(x: torch.Tensor, rows: int, n: int, weight, bias, eps: float, rms: bool, mode: Mode,
                 out_dtype: torch.dtype, keep_stats: bool = True):
    """(y, NormStats or None) of x: contiguous and non-empty, rows x n elements (each row the n elements
    of the normalized dims, which are the last ones); weight / bias: contiguous n elements, or None. y
    has x's shape. keep_stats=False (calls autograd does not record): the kernel writes its statistics
    to the recipe's scratch, which nothing reads, and None is returned for them."""
    # n in the key: x's shape does not tell it (layer_norm of (4, 8, 16) over (16,) or over (8, 16)), nor
    # does anything else where there is no weight or bias.
    key = _recipe_key("forward", x, n, weight, bias, eps, rms, mode, out_dtype) if x.is_cuda else None
    recipe = _RECIPES.get(key)
    if recipe is not None:
        stream = recipe.get_stream(x.device.index)
        stats_at = scratch = None
        if not keep_stats:   # the statistics nothing reads: mean then rstd, fp64, in the stream's scratch
            rstd_offset = -(-8 * rows // 16) * 16   # 16-byte aligned, as the compiled kernel assumes of rstd
            base, scratch = _stream_scratch(x.device, stream, rstd_offset + 8 * rows)   # held until launched
            stats_at = (base, base + rstd_offset)
        y, stats, pointers = _forward_buffers(x, rows, n, weight, bias, out_dtype, recipe.on_chip, stats_at)
        recipe(stream, pointers)
        return y, stats
    acc = mode.accumulator_dtype(x.dtype, out_dtype)
    plan = plan_norm_forward(rows, n, accumulator_size=acc.itemsize, element_size=x.element_size())
    loop = None
    if plan is None:
        loop = plan_norm_row_loop(rows, n, element_size=x.element_size(), sm_count=device_sm_count(x.device))
    streamed = plan is None and loop is None
    y, stats, pointers = _forward_buffers(x, rows, n, weight, bias, out_dtype, not streamed)
    pointers = [_wire(p) for p in pointers]
    parameter_dtypes = [t.dtype for t in (weight, bias) if t is not None]
    consts = dict(RMS=rms, HAS_W=weight is not None, HAS_B=bias is not None, ACC_DTYPE=_TL_DTYPE[acc],
                  AFFINE_DTYPE=_TL_DTYPE[norm_affine_dtype(acc, out_dtype, parameter_dtypes)])
    if plan is not None:
        fp64_mean = planner.norm_fp64_mean(acc, x.dtype, out_dtype, parameter_dtypes, rms)
        kernel_acc = torch.float32 if fp64_mean else acc   # the mean alone in fp64 (norm_fp64_mean)
        launch = _launch(norm_forward_kernel, (triton.cdiv(rows, plan.block_rows),), pointers,
                         [rows, n, float(eps), 1.0 / n], plan.num_warps,
                         BLOCK_ROWS=plan.block_rows, BLOCK_N=plan.block_j, **blocked_tree_layout(x, plan.num_warps),
                         FP32_PASS=planner.norm_fp32_pass(kernel_acc, x.dtype, out_dtype, parameter_dtypes, n),
                         FP32_RSTD=planner.norm_fp32_rstd(kernel_acc, x.dtype, out_dtype, n), FP64_MEAN=fp64_mean,
                         maxnreg=norm_forward_register_cap(x.element_size(), plan.num_warps, plan.block_j),
                         **dict(consts, ACC_DTYPE=_TL_DTYPE[kernel_acc]))
    elif loop is not None:
        launch = _launch(norm_row_loop_kernel, (rows,), pointers, [rows, n, float(eps)], loop.num_warps,
                         BLOCK_N=loop.block_n, LOOP_STAGES=loop.stages, **consts)
    else:
        block_rows, block_j = planner.NORM_APPLY_TILE   # read at call time (bench/ sweeps set it)
        grid, flat = two_axis_grid(rows, block_rows, triton.cdiv(n, block_j))
        launch = _launch(norm_apply_kernel, grid, pointers, [rows, n, float(eps)], 4, BLOCK_ROWS=block_rows,
                         BLOCK_J=block_j, **flat, **consts)
    # No recipe for calls whose statistics (16 bytes a row) would pass RECIPE_SCRATCH_MAX_BYTES in the
    # stream's scratch -- a (2^31, 2) input's 32 GiB once stayed allocated (an H100 ran out of memory) --
    # whose kernels take milliseconds, where a replay's saved microseconds are lost.
    if key is not None and launch[0] is not None and 16 * rows <= RECIPE_SCRATCH_MAX_BYTES:
        keep(_RECIPES, key, _Replay([launch], on_chip=not streamed))
    return y, (stats if keep_stats else None)


def _forward_buffers(x, rows, n, weight, bias, out_dtype, on_chip: bool, stats_at: tuple | None = None):
    """(y, the statistics -- fresh, or None where `stats_at` gives the addresses of (mean, rstd) to write
    them to instead -- and the forward kernel's pointers, tensors or addresses); for rows too long to sit
    on chip, the Welford reduction's fp64 biased variance and mean first (the normalizing pass reads
    them); on_chip also for the row loop, which computes its statistics itself. A missing weight / bias
    passes x in its place (never read)."""
    y = empty_contiguous_like(x, out_dtype)
    stats = None
    if stats_at is None:
        mean = x.new_empty(rows, dtype=torch.float64)
        stats = NormStats(mean, torch.empty_like(mean))
        stats_at = (stats.mean, stats.rstd)
    w = weight if weight is not None else x
    b = bias if bias is not None else x
    if on_chip:
        pointers = [x, w, b, y, *stats_at]
    else:
        var, welford_mean = reduce_moments(x.view(rows, n), (1,), _STATISTICS_MODE, torch.float64, 0.0, False,
                                           with_mean=True)
        pointers = [x, w, b, var, welford_mean, y, *stats_at]
    return y, stats, pointers


def norm_backward(grad: torch.Tensor, x: torch.Tensor, rows: int, n: int, weight, stats: NormStats, rms: bool,
                  mode: Mode, param_shape, weight_grad_dtype: torch.dtype | None,
                  bias_grad_dtype: torch.dtype | None):
    """(dx shaped like x, dweight or None, dbias or None shaped param_shape): grad and x contiguous,
    non-empty, rows x n elements; weight contiguous n elements or None. dweight (dbias) is computed, in
    the given dtype, when its dtype is not None."""
    weight_grad, bias_grad = weight_grad_dtype is not None, bias_grad_dtype is not None
    acc = mode.accumulator_dtype(x.dtype, grad.dtype)
    key = _backward_key(grad, x, n, weight, rms, mode, weight_grad_dtype, bias_grad_dtype) if x.is_cuda else None
    recipe = _RECIPES.get(key)
    if recipe is not None:
        return _replay_backward(recipe, grad, x, rows, n, weight, stats, acc, param_shape, weight_grad_dtype,
                                bias_grad_dtype)
    plan = plan_norm_backward(rows, n, element_size=x.element_size(), accumulator_size=acc.itemsize,
                              sm_count=device_sm_count(x.device))
    programs, on_chip = triton.cdiv(rows, plan.rows_per_program), plan.on_chip
    device = x.device
    dx = empty_contiguous_like(x, x.dtype)
    dweight = _parameter_grad(weight, x, param_shape, weight_grad_dtype) if weight_grad else None
    dbias = _parameter_grad(weight, x, param_shape, bias_grad_dtype) if bias_grad else None
    scratch = torch.empty(_scratch_elements(weight_grad, bias_grad, programs, rows, n, on_chip), dtype=acc,
                          device=device)
    parts = [scratch[offset:] for offset in _scratch_offsets(weight_grad, bias_grad, programs, rows, n, on_chip)]
    pointer_lists = _backward_pointers(grad, x, weight, stats, dx, dweight, dbias, parts, on_chip)
    pointer_lists = [[_wire(p) for p in pointer_list] for pointer_list in pointer_lists]
    row_consts = dict(RMS=rms, HAS_W=weight is not None, ACC_DTYPE=_TL_DTYPE[acc])   # the row terms kernel's
    consts = dict(row_consts, WEIGHT_GRAD=weight_grad, BIAS_GRAD=bias_grad)
    if plan.on_chip:
        launches = [_launch(norm_backward_kernel, (programs,), pointer_lists[0],
                            [rows, n, plan.rows_per_program, 1.0 / n],
                            plan.num_warps, BLOCK_ROWS=plan.block_rows, BLOCK_N=plan.block_n,
                            LOOP_STAGES=plan.loop_stages, **blocked_tree_layout(x, plan.num_warps),
                            **consts)]
    else:
        launches = [_launch(norm_backward_row_terms_kernel, (rows,), pointer_lists[0], [n],
                            planner.NORM_BACKWARD_ROW_TERMS_WARPS, BLOCK_N=plan.block_n, **row_consts),
                    _launch(norm_backward_columns_kernel, (triton.cdiv(n, plan.block_c), programs), pointer_lists[1],
                            [rows, n, plan.rows_per_program], plan.num_warps, BLOCK_R=plan.block_rows,
                            BLOCK_C=plan.block_c, LOOP_STAGES=plan.loop_stages, **consts)]
    if weight_grad or bias_grad:
        block_parts, block_cols, warps = planner.plan_norm_merge(programs, n)
        launches.append(_launch(norm_merge_kernel, (triton.cdiv(n, block_cols),), pointer_lists[-1], [programs, n],
                                warps, WEIGHT_GRAD=weight_grad, BIAS_GRAD=bias_grad, BLOCK_P=block_parts,
                                BLOCK_C=block_cols))
    if key is not None and all(launch[0] is not None for launch in launches):
        keep(_RECIPES, key, _Replay(launches, on_chip=plan.on_chip, programs=programs))
    return dx, dweight, dbias


def _backward_key(grad, x, n, weight, rms, mode, weight_grad_dtype, bias_grad_dtype):
    """_recipe_key's signature of a backward call, written out: x has grad's shape and device, weight
    x's normalized shape and device (norm_backward's contract), so only their dtypes and alignments
    are read -- and n, the normalized elements a row, which grad's shape does not tell (a (B, 8, 16)
    input normalized over (16,) or (8, 16)). Host time on autograd's thread, where a mid-sized backward
    is host-bound."""
    return ("backward", grad.shape, n, grad.dtype, grad.device, grad.data_ptr() % 16, x.dtype, x.data_ptr() % 16,
            None if weight is None else (weight.dtype, weight.data_ptr() % 16), rms, mode, weight_grad_dtype,
            bias_grad_dtype)


def _parameter_grad(weight, x: torch.Tensor, param_shape, dtype: torch.dtype) -> torch.Tensor:
    """A new tensor for dweight or dbias: the normalized shape, on x's device, in dtype -- like weight
    (contiguous here: launch.empty_contiguous_like's host time) where there is one."""
    if weight is not None:
        return empty_contiguous_like(weight, dtype)
    return x.new_empty(param_shape, dtype=dtype)


def _scratch_elements(weight_grad: bool, bias_grad: bool, programs: int, rows: int, n: int, on_chip: bool) -> int:
    """The backward's scratch, one buffer: the partials of dw and db ([programs, n] each, as needed), then
    for rows read twice the per-row mean(g w xhat) and mean(g w) ([rows] each). Never empty (a null
    address)."""
    return max(1, (int(weight_grad) + int(bias_grad)) * programs * n + (0 if on_chip else 2 * rows))


def _scratch_offsets(weight_grad: bool, bias_grad: bool, programs: int, rows: int, n: int, on_chip: bool) -> list:
    """Element offsets into the scratch of dw_part, db_part (a placeholder where unused) and, for rows read
    twice, the two per-row arrays."""
    partials = (int(weight_grad) + int(bias_grad)) * programs * n
    offsets = [0, (programs * n if weight_grad else 0)]
    return offsets if on_chip else offsets + [partials, partials + rows]


def _backward_pointers(grad, x, weight, stats, dx, dweight, dbias, parts, on_chip: bool) -> list:
    """The backward launches' pointer lists, in launch order: rows read twice take the row terms launch
    first (its outputs: parts[2:]); then dx and the partials; the merge of the partials last. A missing
    weight, dweight or dbias passes x or dx in its place (never read or written)."""
    w_or_x = weight if weight is not None else x
    pointers = [x, w_or_x, grad, stats.mean, stats.rstd, dx, *parts]
    merge = _merge_pointers(parts, dx, dweight, dbias)
    if on_chip:
        return [pointers, merge]
    return [[x, w_or_x, grad, stats.mean, stats.rstd, *parts[2:]], pointers, merge]


def _merge_pointers(parts, dx, dweight, dbias) -> list:
    """The merge launch's pointers: the partials of dw and db, then dweight and dbias (dx in place of a
    missing one, never written)."""
    return [*parts[:2], dweight if dweight is not None else dx, dbias if dbias is not None else dx]


def _replay_backward(recipe: _Replay, grad, x, rows, n, weight, stats, acc, param_shape, weight_grad_dtype,
                     bias_grad_dtype):
    """norm_backward through a recipe, on the stream's scratch (_stream_scratch) as raw addresses. dx's
    launches go first and dweight / dbias are allocated while the GPU runs them (the merge, which writes
    them, launches last): host time on autograd's thread that the GPU no longer waits out."""
    device = x.device
    weight_grad, bias_grad = weight_grad_dtype is not None, bias_grad_dtype is not None
    programs, on_chip = recipe.programs, recipe.on_chip
    stream = recipe.get_stream(device.index)
    itemsize = acc.itemsize
    base, scratch = _stream_scratch(   # scratch: held until the launches are queued
        device, stream, _scratch_elements(weight_grad, bias_grad, programs, rows, n, on_chip) * itemsize)
    parts = [base + offset * itemsize for offset in _scratch_offsets(weight_grad, bias_grad, programs, rows, n,
                                                                     on_chip)]
    dx = empty_contiguous_like(x, x.dtype)
    pointer_lists = _backward_pointers(grad, x, weight, stats, dx, None, None, parts, on_chip)
    for index, pointers in enumerate(pointer_lists[:-1]):   # the last list is the merge's
        recipe.launch(index, stream, pointers)
    if not (weight_grad or bias_grad):
        return dx, None, None
    dweight = _parameter_grad(weight, x, param_shape, weight_grad_dtype) if weight_grad else None
    dbias = _parameter_grad(weight, x, param_shape, bias_grad_dtype) if bias_grad else None
    recipe.launch(len(pointer_lists) - 1, stream, _merge_pointers(parts, dx, dweight, dbias))
    return dx, dweight, dbias
