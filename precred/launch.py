"""Launcher: view -> plan -> kernel launches. Knows nothing of autograd or argument checking.

`reduce` is the one entry point of the reduction kernels: it views the input as (outer, reduce, inner),
asks the planner for a plan, and runs the plan's passes, the last of which writes the output: the sum,
or the sum divided by the element count (sum strategies), or the variance / standard deviation and
optionally the mean (Welford's strategy). `reduce_sum` and `reduce_moments` name those two uses.
"""
from dataclasses import dataclass
import math
import operator

import torch
import triton
import triton.language as tl

from . import plan as planning
from .bounds import ACCURATE_EXP_ERROR_UNITS, certified_log_sum_margin, gamma, unit_roundoff
from .layout import reduction_view
from .modes import Mode, log_softmax_split_tail, softmax_two_part_exp, split_tail_counts_maxima
# Tunable constants are read as planning.NAME at call time, not imported by value: bench/ sweeps set them
# on precred.plan.
from .plan import (LoopPlan, Plan, RowPlan, plan_exp_recompute, plan_recompute, plan_reduction, plan_row_loop,
                   plan_single_read, use_atomic)
from .schedules.accurate_columns import accurate_logsumexp_columns_kernel, accurate_logsumexp_columns_merge_kernel
from .schedules.accurate_rows import accurate_logsumexp_kernel
from .schedules.atomic import atomic_extremum_kernel, atomic_finish_kernel
from .schedules.inner import inner_kernel
from .schedules.moments_rows import moments_rows_kernel
from .schedules.normalize import normalize_kernel
from .schedules.outer import outer_kernel
from .schedules.recompute import exp_recompute_kernel, recompute_kernel
from .schedules.row_loop import row_loop_kernel
from .schedules.single_read import single_read_kernel, single_read_logsumexp_kernel
from .schedules.split_tail import split_tail_finish_kernel, split_tail_kernel
from .signature_cache import keep
from .stream_scratch import StreamScratch, with_addresses
from .strategies import (CERTIFIED_EXP, COMPENSATED, EXACT, EXTREMA, PLAIN, PRODUCT, STABLE_EXP, VALUE_EXTREMA,
                         WELFORD)
from .strategies.exact import TILE_TREE_MAX_LANES, tile_tree_bound
from .strategies.superaccumulator import INPUT_FORMATS, LIMBS

_TL_DTYPE = {torch.float32: tl.float32, torch.float64: tl.float64}

# Strategies whose long loops are software-pipelined (plan.LOOP_STAGES): measured faster with it
# (bench/sweep_stages.py; the others keep plain loops until measured). H100, 17 cases each, plain ->
# pipelined GB/s: var_mean fast 2^28 fp32 2412 -> 2801, 8192^2 dim 0 bf16 1107 -> 1783; fp64
# 262144x256 1048 -> 1984; logsumexp fast 8192^2 dim 0 fp32 1585 -> 2239, 2^28 bf16 1500 -> 2240;
# amax 2^28 fp32 2212 -> 2909, 8192^2 dim 0 fp32 1664 -> 2313 (8192^2 bf16 1932 -> 1820, the one loss).
# The product is not pipelined: not measured. logsumexp's fp32 filter is STABLE_EXP's loop.
PIPELINED_STRATEGIES = frozenset({PLAIN, COMPENSATED, EXACT, WELFORD, STABLE_EXP, CERTIFIED_EXP, *EXTREMA,
                                  *VALUE_EXTREMA})
# Strategies whose last pass is a filter: it writes each output and an int8 flag (certified or not) in
# place of a second output, and a second stage recomputes the uncertified outputs.
FILTERS = (EXACT, CERTIFIED_EXP)
# Strategies whose unsplit 16-bit rows run plain loops, their loads keeping the evict_first hint
# (precred.plan.PLAIN_16BIT_ROWS_MIN_RED; the exact filter from its own minimum, Welford with the vector
# moments and the fp32 accumulator: plan_for).
PLAIN_16BIT_ROW_STRATEGIES = frozenset({PLAIN, COMPENSATED, STABLE_EXP, CERTIFIED_EXP, *EXTREMA, *VALUE_EXTREMA})

# Stand-in SM count for the CPU interpreter: small, so that small test inputs still take the split path.
INTERPRETER_SM_COUNT = 2


def device_sm_count(device: torch.device) -> int:
    if device.type == "cuda":
        return _cuda_properties(device).multi_processor_count
    return INTERPRETER_SM_COUNT


def programmatic_dependent_launch(device: torch.device) -> bool:
    """Whether launches on `device` can be programmatic dependents of the launch before them (PDL: the
    PTX griddepcontrol instructions): GPUs of compute capability 9.0 and above; never the interpreter.
    Which launches are: precred.plan.RECOMPUTE_PROGRAMMATIC_LAUNCH, PASS_PROGRAMMATIC_LAUNCH,
    PROGRAMMATIC_MERGE_STRATEGIES."""
    if device.type != "cuda":
        return False
    properties = _cuda_properties(device)
    return (properties.major, properties.minor) >= (9, 0)


_PROPERTIES = {}


def _cuda_properties(device: torch.device):
    """The CUDA device's properties, read once per device (a driver query)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _PROPERTIES:
        _PROPERTIES[index] = torch.cuda.get_device_properties(index)
    return _PROPERTIES[index]


def _narrow_outer_tile(mode: Mode, element_size: int, accumulator_size: int) -> int:
    """The first tile (elements) of `mode`'s passes over a narrow strided axis (plan.NARROW_OUTER_MIN_INNER's
    note), or 0 where the mode keeps its own plan there: the extrema and products (not measured), pairwise
    (the registers layout already) and the fp64 logsumexp's passes (they lost)."""
    if mode.strategy == WELFORD:
        return planning.WELFORD_NARROW_OUTER_TILE
    if (mode.whole_tree or mode.strategy not in planning.NARROW_OUTER_STRATEGIES
            or (mode.strategy == STABLE_EXP and accumulator_size != 4)):
        return 0
    return planning.NARROW_OUTER_TILE_BYTES // element_size


def plan_for(x: torch.Tensor, dims: tuple, mode: Mode, out_dtype: torch.dtype | None = None,
             acc_dtype: torch.dtype | None = None, **planner_overrides) -> tuple:
    """(view, plan) for reducing non-empty x over the sorted, unique, non-negative dims into out_dtype
    (default x.dtype) in acc_dtype (default the mode's accumulator for x and out_dtype: an fp64 output
    makes it fp64), which sizes the tile.

    planner_overrides (sm_count, tile_elements, split_min_bytes) let tests force splits and long lane
    chains on small inputs; the public functions never pass them."""
    view = reduction_view(x, dims)
    acc_dtype = acc_dtype or mode.accumulator_dtype(x.dtype, out_dtype)
    options = dict(sm_count=device_sm_count(x.device), element_size=x.element_size(),
                   heavy_state=mode.strategy not in (PLAIN, PRODUCT, *EXTREMA, *VALUE_EXTREMA),
                   accumulator_size=acc_dtype.itemsize,
                   pipelined=mode.strategy in PIPELINED_STRATEGIES)
    acc = options["accumulator_size"]
    outer_schedule = view.inner > 1 and view.stride_inner == 1   # a contiguous kept axis (plan_reduction)
    if mode.strategy in (PLAIN, COMPENSATED, *EXTREMA, *VALUE_EXTREMA):
        options.update(short_part_tiles=planning.SUM_SHORT_PART_TILES,
                       # the indexed extrema count an interleaved part's indices along the row, in int32: rows
                       # of 2^31 - 1 or more keep the plan before (the one tests/test_gpu_only.py ran there)
                       wide_long_splits=not (mode.strategy in EXTREMA and view.red >= 2 ** 31 - 1),
                       interleave_long_splits=True)
    if mode.strategy in PLAIN_16BIT_ROW_STRATEGIES:
        options.update(plain_16bit_rows=True)
    if mode.strategy == PLAIN and x.element_size() == 2:
        options.update(long_row_warps=planning.LONG_SPLIT_WARPS)   # measured in plan.LONG_ROW_STAGES' note
    if mode.strategy in (COMPENSATED, *EXTREMA, *VALUE_EXTREMA) and x.element_size() == 4:
        options.update(long_row_stages=planning.LONG_ROW_STAGES)   # measured in its note
    sixteen_bit_rows = x.element_size() == 2 and not outer_schedule
    short_rows = not outer_schedule and view.red < planning.PLAIN_16BIT_ROWS_MIN_RED and x.element_size() <= 4
    if mode.strategy == PLAIN and (acc == 4 or sixteen_bit_rows or short_rows):   # fast; fp64 over 16-bit or short rows
        options.update(min_tiles_per_lane=planning.PLAIN_MIN_TILES_PER_LANE)
    if mode.strategy == COMPENSATED and not outer_schedule and x.element_size() >= 4:
        # kahan over rows: the full tile and warps (bench/sweep_outer.py --dim -1, H100, GB/s halved -> full,
        # two runs: fp32 8192^2 2554/2542 -> 2611/2613, 1024x65536 2560/2559 -> 2593/2612, 262144x256
        # 2522/2521 -> 2567/2565, 65536x1024 2622/2620 -> 2629/2645; 16-bit rows, which the public functions
        # sum in fp64 (modes.sum_mode), keep the halves: the full tile cost the 2^28 bf16 reduction 2774 ->
        # 2260 without vector sums). Dim 0 was not measured: it keeps the halving.
        options.update(heavy_state=False)
    if mode.strategy == WELFORD and not outer_schedule:
        if x.element_size() >= 4 or acc == 8:
            # Welford over rows: the full tile's warps, not the heavy state's halves -- on 2 warps the state
            # took 220-255 registers (1024x65536 fp64: 732 bytes spilled). bench/sweep_outer.py --op var
            # --dim -1, H100, GB/s halved -> full warps: fp32 fast 4096^2 1404 -> 1511, 8192^2 1918 -> 2222,
            # 1024x65536 2244 -> 2289; fp64 8192^2 1712 -> 1905, 65536x1024 1791 -> 2048, 1024x65536 2013 ->
            # 2132; bf16 fp64 1024x65536 741 -> 1301, 262144x256 1308 -> 1402 (4096^2 992 -> 949). bf16 fast
            # lost 4-13% that way and keeps the halves.
            options.update(heavy_state=False)
        small_tile_min_red = planning.WELFORD_ROWS_SMALL_TILE_MIN_RED.get(acc)
        if x.element_size() >= 4 or (small_tile_min_red is not None and view.red >= small_tile_min_red):
            options.update(acc_tile_bytes=planning.WELFORD_ROWS_ACC_TILE_BYTES[acc])   # smaller tiles (plan.py)
        if planning.WELFORD_VECTOR_MOMENTS and acc == 4:
            options.update(plain_16bit_rows=True)   # measured in plan.WELFORD_VECTOR_MOMENTS' note
    if mode.strategy == WELFORD and outer_schedule and view.red >= planning.OUTER_REGISTERS_MIN_RED:
        # Welford over a strided axis (the outer schedule): full warps and small tiles measured fastest
        # in both accumulators (bench/sweep_state.py var, bench/var_suite.py; H100: 8192x8192 dim 0 1.2-2.2x
        # the heavy default); a short reduced axis (16 x 262144 over dim 0) measured 3x slower that way.
        options.update(heavy_state=False, tile_elements=planning.WELFORD_OUTER_TILE,
                       registers_first_stages=planning.WELFORD_OUTER_STAGES.get(x.element_size()))
    if mode.strategy in (STABLE_EXP, CERTIFIED_EXP) and view.red >= planning.OUTER_REGISTERS_MIN_RED:
        # logsumexp (bench/sweep_state.py logsumexp, H100): full tiles and warps (its state is two
        # arrays, no compensation), and 1024-element tiles where there are many outputs -- except fp32 over a
        # strided axis, which measured as fast or faster with the default tile (8192^2 dim 0 bf16:
        # 1192 vs 764 GB/s). 65536x1024 fp64 went 760 -> 1315 GB/s, 8192^2 dim 0 fp64 602 -> 1536.
        options.update(heavy_state=False)
        if view.outer * view.inner >= planning.STABLE_EXP_TILE_MIN_OUTPUTS and (view.inner == 1 or acc == 8):
            long_row, long_row_tile = planning.STABLE_EXP_16BIT_LONG_ROW
            long_16bit_rows = x.element_size() == 2 and view.inner == 1 and view.red >= long_row
            options.update(tile_elements=long_row_tile if long_16bit_rows else planning.STABLE_EXP_TILE)
    if mode.strategy == CERTIFIED_EXP and x.element_size() == 2 and not outer_schedule:
        options.update(long_row_part=planning.CERTIFIED_EXP_16BIT_ROW_PART)   # measured in its note
    if mode.strategy == EXACT:
        # Measured on an H200 (bench/sweep_state.py exact; fp64 pipe and registers): contiguous rows, many of
        # them: small tiles, halved warps for fp32 (1024x65536 3009 -> 3240 GB/s, 65536x1024 2781 -> 2888),
        # not for bf16 (1024x65536 1984 -> 2166); a wide strided axis: no halving, larger tiles (8192^2 dim 0
        # fp32 1773 -> 2913); one long row: no halving (2^28: 3663 -> 3977). Narrow strided axes (262144x256
        # dim 0) keep the heavy default -- but for 16-bit input, which takes the registers layout from one
        # warp wide (plan.NARROW_OUTER_MIN_INNER, below).
        outputs = view.outer * view.inner
        options.update(state_pass_min_columns=planning.EXACT_STATE_PASS_MIN_COLUMNS)
        if outer_schedule:
            tile_moments = x.element_size() in planning.EXACT_OUTER_TILE_MOMENTS
            if view.inner >= planning.EXACT_OUTER_MIN_INNER:
                options.update(heavy_state=False, tile_elements=planning.EXACT_OUTER_TILE[x.element_size()])
                if tile_moments:   # measured in plan.EXACT_OUTER_16BIT_PROGRAMS_PER_SM's note
                    options.update(split_programs_per_sm=planning.EXACT_OUTER_16BIT_PROGRAMS_PER_SM)
        elif outputs >= planning.EXACT_ROWS_MIN_OUTPUTS and x.element_size() == 2 and planning.EXACT_PLAIN_16BIT_ROWS:
            # 16-bit rows: the plain loop (rows of at least plan.EXACT_PLAIN_16BIT_ROWS_MIN_RED) with vector
            # lanes, or word loads, and its tile (plan.EXACT_VECTOR_SUMS' and EXACT_WORD_LOADS' notes)
            tile = planning.EXACT_ROWS_TILE
            if view.red >= planning.EXACT_PLAIN_16BIT_ROWS_MIN_RED:
                tile = (planning.EXACT_VECTOR_SHORT_ROWS_TILE if view.red <= planning.EXACT_VECTOR_SHORT_ROWS_MAX_RED
                        else planning.EXACT_VECTOR_ROWS_TILE)
            options.update(heavy_state=False, plain_16bit_rows=True, tile_elements=tile,
                           plain_rows_min_red=planning.EXACT_PLAIN_16BIT_ROWS_MIN_RED)
        elif outputs >= planning.EXACT_ROWS_MIN_OUTPUTS:
            options.update(heavy_state=x.element_size() == 4, tile_elements=planning.EXACT_ROWS_TILE)
        else:
            # Few long rows (16 x 262144) keep the split measured for the filter (bench/sweep_state.py).
            # The short-parts split measured no faster: bench/sweep_outer.py --dim -1 --shapes 16x262144,
            # H100, three runs, GB/s, this split -> short parts of 8 / 16 tiles per lane: fp32 1059/1061/1061
            # -> 1030/989/1032, 995/982/1004; bf16 636/633/636 -> 643/646/646, 624/624/627.
            options.update(heavy_state=False, short_part_tiles=0, wide_long_splits=True)
    if outer_schedule and x.element_size() <= 4 and mode.strategy in planning.OUTER_SPLIT_PROGRAMS_PER_SM:
        # measured in plan.OUTER_SPLIT_PROGRAMS_PER_SM's note (fp64 input: not measured)
        options.update(split_programs_per_sm=planning.OUTER_SPLIT_PROGRAMS_PER_SM[mode.strategy])
    narrow_tile = _narrow_outer_tile(mode, x.element_size(), acc)
    # A strided axis long enough for the registers layout; from how many columns it takes it by default:
    strided_registers = outer_schedule and view.red >= planning.OUTER_REGISTERS_MIN_RED
    registers_min_inner = 32 * (16 // x.element_size()) * planning.OUTER_MIN_WARPS
    if (strided_registers and view.inner >= registers_min_inner and x.element_size() == 2
            and acc in planning.OUTER_16BIT_ACC_TILE_BYTES
            and mode.strategy in planning.OUTER_16BIT_ACC_TILE_STRATEGIES):
        # measured in plan.OUTER_16BIT_ACC_TILE_BYTES' note
        options.update(heavy_state=False, acc_tile_bytes=planning.OUTER_16BIT_ACC_TILE_BYTES[acc])
    if narrow_tile and strided_registers and planning.NARROW_OUTER_MIN_INNER <= view.inner < registers_min_inner:
        # A narrow strided axis (262144x256 over dim 0): the registers layout from one warp wide, measured in
        # plan.NARROW_OUTER_MIN_INNER's note; in place of what the strategy's branch above chose.
        options.update(heavy_state=False, tile_elements=narrow_tile, outer_min_warps=1,
                       split_programs_per_sm=planning.NARROW_OUTER_PROGRAMS_PER_SM,
                       state_pass_min_columns=planning.NARROW_STATE_PASS_MIN_COLUMNS)
    if outer_schedule and mode.strategy in planning.WIDE_LANES_STATE_STRATEGIES:
        options.update(state_pass_wide_lanes=True)   # measured in plan.WIDE_LANES_STATE_STRATEGIES' note
    if mode.strategy in planning.PROGRAMMATIC_MERGE_STRATEGIES and programmatic_dependent_launch(x.device):
        options.update(dependent_merge=True)   # measured in plan.PROGRAMMATIC_MERGE_STRATEGIES' note
        if mode.strategy in VALUE_EXTREMA:   # measured in plan.VALUE_EXTREMA_SHORT_SPLIT's note
            programs_per_sm, part_tiles = planning.VALUE_EXTREMA_SHORT_SPLIT
            options.update(short_split_programs_per_sm=programs_per_sm, short_part_tiles=part_tiles)
    if mode.strategy in EXTREMA and planning.INDEXED_EXTREMA_SHORT_SPLIT is not None:
        programs_per_sm, part_tiles = planning.INDEXED_EXTREMA_SHORT_SPLIT
        options.update(short_split_programs_per_sm=programs_per_sm, short_part_tiles=part_tiles)
    options.update(planner_overrides)
    plan = plan_reduction(view.outer, view.red, view.inner, inner_contiguous=view.stride_inner == 1,
                          whole_tree=mode.whole_tree, **options)
    return view, plan


@dataclass(frozen=True)
class Output:
    """What the last pass writes, besides the plan's numerics."""
    divide: bool = False        # sum strategies: the sum divided by the element count (mean)
    correction: float = 0.0     # Welford: m2 / max(0, n - correction)
    take_sqrt: bool = False     # Welford: the standard deviation instead of the variance
    with_mean: bool = False     # Welford: the mean as a second output; stable exp (softmax): log(s) and
                                # the maximum m as two fp64 outputs instead of m + log(s); extremum: the
                                # index as a second (int64) output

    def divisor(self, n: int, strategy: int) -> float:
        if strategy == WELFORD:
            return float(max(0.0, n - self.correction))
        if strategy == EXACT:   # the filter's error bound needs n whether or not it divides
            return float(n)
        return float(n) if self.divide else 1.0


# Launch recipes of CUDA calls already seen, by everything that decides the plan and the compiled
# kernels: shape, strides, dtypes, device, dims, mode, output, and the input's 16-byte alignment (Triton
# specializes on it). A hit skips layout analysis, planning and Triton's argument binding: the cached
# compiled kernels are launched directly. At most signature_cache.SIGNATURES_KEPT signatures, the oldest
# evicted first (signature_cache.keep: every write goes through it).
_RECIPES = {}
# Scratch kept between calls, per CUDA stream: norm_launch's replays share a buffer of at most this many
# bytes (larger needs take their own per call), and a norm forward whose statistics (16 bytes a row)
# would pass it leaves no recipe.
RECIPE_SCRATCH_MAX_BYTES = 64 << 20


def _recipe_key(x, dims, mode, out_dtype, output, acc_dtype=None):
    return (x.shape, x.stride(), x.dtype, x.device, dims, mode, out_dtype, output, acc_dtype, x.data_ptr() % 16)


def cached_recipe(x: torch.Tensor, dims: tuple, mode: Mode, out_dtype: torch.dtype, output: Output):
    """The recipe a previous reduce call on this signature left, or None."""
    return _RECIPES.get(_recipe_key(x, dims, mode, out_dtype, output)) if x.is_cuda else None


def reduce_sum(x: torch.Tensor, dims: tuple, mode: Mode, out_dtype: torch.dtype, divide: bool,
               plan: Plan | None = None) -> torch.Tensor:
    """Flat output of O*I values (row-major over the kept dims): the sum (or mean) over dims."""
    return reduce(x, dims, mode, out_dtype, Output(divide=divide), plan)[0]


def reduce_moments(x: torch.Tensor, dims: tuple, mode: Mode, out_dtype: torch.dtype, correction: float,
                   take_sqrt: bool, with_mean: bool, plan: Plan | None = None):
    """(variance or standard deviation, mean or None), flat, over dims, by a Welford mode: with no plan
    given, by the two-pass single-read kernel where plan_moments_rows takes the rows, else by the
    Welford passes (plan_reduction's, or `plan`)."""
    output = Output(correction=correction, take_sqrt=take_sqrt, with_mean=with_mean)
    if plan is None:
        replayed, key, view, row_plan = _contiguous_rows_route(x, dims, mode, out_dtype, output,
                                                               planning.plan_moments_rows)
        if replayed is not None:
            return replayed
        if row_plan is not None:
            return moments_rows(x, view, mode, out_dtype, output, row_plan, key)
    return reduce(x, dims, mode, out_dtype, output, plan)


def _contiguous_rows_route(x, dims, mode, out_dtype, output, row_planner):
    """For a call given no plan: (the result of the signature's launch recipe, replayed, or None; the
    recipe key, None off the GPU; the reduction view; row_planner's plan of its rows, or None where the
    reduced dim is not the contiguous last one or row_planner declines)."""
    key = _recipe_key(x, dims, mode, out_dtype, output) if x.is_cuda else None
    recipe = _RECIPES.get(key) if key is not None else None
    if recipe is not None:
        return recipe.run(x), key, None, None
    view = reduction_view(x, dims)
    return None, key, view, _row_plan_of_view(x, view, mode, out_dtype, row_planner)


def row_plan_for(x: torch.Tensor, dims: tuple, mode: Mode, out_dtype: torch.dtype, row_planner) -> RowPlan | None:
    """row_planner's plan (plan.plan_moments_rows, plan.plan_logsumexp_rows) of non-empty x's rows over
    dims, or None where a call without a given plan takes the passes of plan_for instead."""
    return _row_plan_of_view(x, reduction_view(x, dims), mode, out_dtype, row_planner)


def _row_plan_of_view(x, view, mode, out_dtype, row_planner):
    if view.inner == 1 and view.stride_red == 1 and not view.copied:
        return row_planner(view.outer, view.red, element_size=x.element_size(),
                           accumulator_size=mode.accumulator_dtype(x.dtype, out_dtype).itemsize)
    return None


def _reciprocal(divisor: float) -> float:
    """1 / divisor correctly rounded (Python's float division), inf for 0."""
    return 1.0 / divisor if divisor else math.inf


def moments_rows(x: torch.Tensor, view, mode: Mode, out_dtype: torch.dtype, output: Output, plan: RowPlan,
                 key=None):
    """(variance or standard deviation, mean or None), flat, of the view's contiguous fp32 rows by the
    two-pass single-read kernel (schedules/moments_rows.py: fp32 accumulator) under `plan`
    (plan_moments_rows'); a CUDA call leaves its launch recipe under key."""
    rows = view.outer
    out = torch.empty(rows, dtype=out_dtype, device=x.device)
    mean = torch.empty_like(out) if output.with_mean else None
    launch = _launch(moments_rows_kernel, (triton.cdiv(rows, plan.block_rows),),
                     [view.source, out, out if mean is None else mean],
                     [rows, view.red, view.stride_outer, 1.0 / view.red,
                      _reciprocal(output.divisor(view.red, mode.strategy))], plan.num_warps,
                     TAKE_SQRT=output.take_sqrt, WITH_MEAN=output.with_mean, BLOCK_ROWS=plan.block_rows,
                     BLOCK_N=plan.block_j, **blocked_tree_layout(x, plan.num_warps))
    if key is not None and launch[0] is not None:
        keep(_RECIPES, key, _RowsRecipe(rows, out_dtype, output.with_mean, launch))
    return out, mean


def reduce_logsumexp(x: torch.Tensor, dims: tuple, mode: Mode, plan: Plan | None = None) -> torch.Tensor:
    """Flat log(sum(exp(x))) over dims, in x's dtype, by a stable exponential mode (one pass), or, with
    no plan given, by the single-read kernel where plan_logsumexp_rows takes the rows -- and for the
    `accurate` mode over fp32 input by accurate_logsumexp_rows (contiguous rows) or
    accurate_logsumexp_columns (a strided axis of plan.ACCURATE_COLUMNS_MIN_RED or more under a contiguous
    one of ACCURATE_COLUMNS_MIN_INNER or more; elsewhere that mode is the fp64 mode's numerics:
    modes.EXP_MODES)."""
    if plan is None and mode.name == "accurate" and x.dtype == torch.float32:
        def accurate_planner(rows, red, **_sizes):   # the accurate kernel takes every contiguous fp32 row
            return planning.plan_accurate_logsumexp_rows(rows, red, sm_count=device_sm_count(x.device))
        replayed, key, view, rows_plan = _contiguous_rows_route(x, dims, mode, x.dtype, Output(), accurate_planner)
        if replayed is not None:
            return replayed[0]
        if rows_plan is not None:
            return accurate_logsumexp_rows(view, rows_plan, key=key)[0]
        columns_plan = _accurate_columns_plan(view, x.device)
        if columns_plan is not None:
            return accurate_logsumexp_columns(view, columns_plan, key=key)[0]
    if plan is None and mode.strategy != CERTIFIED_EXP:   # the certified pass keeps its filter and recompute
        replayed, key, view, row_plan = _contiguous_rows_route(x, dims, mode, x.dtype, Output(),
                                                               planning.plan_logsumexp_rows)
        if replayed is not None:
            return replayed[0]
        if row_plan is not None:
            return _logsumexp_rows(x, view, mode, row_plan, key)
    return reduce(x, dims, mode, x.dtype, Output(), plan)[0]


def accurate_logsumexp_rows(view, p: planning.AccurateExpPlan, recompute: bool = True, key=None) -> tuple:
    """(logsumexp of the view's contiguous fp32 rows, flat fp32; the rows' int8 flags) by the `accurate`
    mode under plan p (plan_accurate_logsumexp_rows'; schedules/accurate_rows.py): the kernel keeps each
    result its bound proves within 2 ulp (flag 1); held rows (p.one_tile) finish the others in fp64 in
    the same program (flag 2), streamed ones leave them (flag 0, the row's maximum in the output) to the
    fp64 recompute (exp_recompute_kernel, a programmatic dependent on sm_90), which redoes them in place
    -- unless recompute=False (tests: the first stage alone, its flags 1 or 0). A CUDA call leaves its
    launch recipe under key."""
    rows, red, device = view.outer, view.red, view.source.device
    out = torch.empty(rows, dtype=torch.float32, device=device)
    flags = torch.empty(rows, dtype=torch.int8, device=device)
    # held rows finish what their bound does not keep themselves (flag 2); streamed rows leave it (flag 0)
    # to the recompute launch
    in_place = recompute and p.one_tile
    second = recompute and not p.one_tile
    dependent = (second and programmatic_dependent_launch(device) and planning.RECOMPUTE_PROGRAMMATIC_LAUNCH
                 and red >= planning.ACCURATE_RECOMPUTE_PDL_MIN_ROW)
    exp_error, fp64_slack = _accurate_bound_constants(p.tiles, p.fp64_depth, red)
    make_parts = _accurate_parts_scratch(rows, p.parts, device)
    parts = make_parts() if make_parts is not None else (flags,) * 4   # placeholders, never touched
    launch = _launch(accurate_logsumexp_kernel, (triton.cdiv(rows, p.block_rows) * p.parts,),
                     [view.source, out, flags, *parts],
                     [rows, red, view.stride_outer, p.chunk or red, p.parts, exp_error, fp64_slack], p.num_warps,
                     BLOCK_ROWS=p.block_rows, BLOCK_N=p.block_n, ONE_TILE=p.one_tile, LOOP_STAGES=p.loop_stages,
                     **blocked_tree_layout(view.source, p.num_warps),
                     BLOCK_PARTS=triton.next_power_of_2(p.parts) if p.parts > 1 else 0, LAUNCH_DEPENDENTS=dependent,
                     FULL_TILES=_full_row_tiles(rows, red, p), PIECES=p.pieces,
                     FINISH_LANES=p.finish_lanes if in_place else 0)
    if in_place and key is not None and launch[0] is not None:
        keep(_RECIPES, key, _AccurateRecipe(rows, [(launch, ("x", "out", "flags", "parts"))],
                                            {"parts": (make_parts, 4)}))
    if second:
        recompute_launch, make_scratch, _ = _launch_exp_recompute(view, view.source, out, flags, dependent)
        if key is not None and launch[0] is not None and recompute_launch[0] is not None:
            keep(_RECIPES, key, _AccurateRecipe(rows, [(launch, ("x", "out", "flags", "parts")),
                                                       (recompute_launch, ("x", "out", "flags", "recompute"))],
                                                {"parts": (make_parts, 4), "recompute": (make_scratch, 2)}))
    return out, flags


def _accurate_bound_constants(tiles: int, fp64_depth: int, red: int) -> tuple:
    """(exp_error, fp64_slack): the accurate kernels' bound constants (schedules/accurate_rows.py) -- c u,
    padded for terms through up to tiles + 1 exps and for r's fp32 roundings; the fp64 roundings
    (libdevice's exp in the merges: 8 more u_64) and the flushed terms, relative to S >= 1."""
    u32, u64 = unit_roundoff(torch.float32), unit_roundoff(torch.float64)
    cu = ACCURATE_EXP_ERROR_UNITS * u32
    through = (tiles + 2) * cu
    exp_error = cu * (1 + 2 * gamma(fp64_depth, u32)) / (1 - through) if through < 0.5 else math.inf
    return exp_error, gamma(fp64_depth + 8, u64) + 2 * red * 2.0 ** -126


def _accurate_columns_plan(view, device) -> planning.AccurateColumnsPlan | None:
    """plan_accurate_logsumexp_columns' plan of a view reduced over a strided axis under a contiguous
    one, or None (other views, or axes too short or too narrow)."""
    if view.inner > 1 and view.stride_inner == 1:
        return planning.plan_accurate_logsumexp_columns(view.outer, view.red, view.inner,
                                                        sm_count=device_sm_count(device))
    return None


def _recompute_blocks(view, p: planning.AccurateColumnsPlan) -> int:
    """The recompute's column blocks (recompute_block_i columns of one outer index): what can be listed."""
    return view.outer * triton.cdiv(view.inner, p.recompute_block_i)


def columns_work_list(view, p: planning.AccurateColumnsPlan) -> torch.Tensor:
    """A zeroed work list for accurate_logsumexp_columns (schedules/accurate_columns.py, _CLAIMS): its
    length, its last readers' count, a claim per recompute column block, the listed blocks."""
    return torch.zeros(2 + 2 * _recompute_blocks(view, p), dtype=torch.int32, device=view.source.device)


def accurate_logsumexp_columns(view, p: planning.AccurateColumnsPlan, recompute: bool = True, key=None,
                               work: torch.Tensor | None = None) -> tuple:
    """(logsumexp over the view's strided reduced axis of fp32 input, flat fp32; the outputs' int8 flags)
    by the `accurate` mode under plan p (plan_accurate_logsumexp_columns'; schedules/accurate_columns.py):
    the column kernel (and the merge of its parts' states, split plans), which put the column blocks
    holding outputs their bound did not keep on a work list, then the same launches in fp64 on a fixed
    grid that walks that list -- unless recompute=False (tests: the first stage alone). Each launch
    after the first is a programmatic dependent of the one before where the GPU has them
    (plan.ACCURATE_COLUMNS_PDL). A CUDA call leaves its launch recipe under key. work: the work list to
    use (tests: columns_work_list's; its length, counter and claims are zero on entry and, after the
    recompute, on exit), else a new one."""
    n_out, red, device = view.outer * view.inner, view.red, view.source.device
    out = torch.empty(n_out, dtype=torch.float32, device=device)
    flags = torch.empty(n_out, dtype=torch.int8, device=device)
    split = p.parts > 1
    pdl = programmatic_dependent_launch(device) and planning.ACCURATE_COLUMNS_PDL
    exp_error, fp64_slack = _accurate_bound_constants(p.tiles, p.fp64_depth, red)
    make_parts = ((lambda: tuple(torch.empty(p.parts * n_out, dtype=torch.float64, device=device) for _ in range(3)))
                  if split else None)
    parts = make_parts() if split else (flags,) * 3   # placeholders, never touched
    listable = _recompute_blocks(view, p)

    def make_work():
        return (columns_work_list(view, p),)

    work = make_work() if work is None else (work,)
    steps = []
    for second in (False, True) if recompute else (False,):
        # the parts' scratch is the recompute's too: its launches follow the first merge's reads
        dependent = pdl and bool(steps)
        last = second or not recompute
        if second:   # a fixed grid walking the list's (block, part) pairs, recompute_batch at once
            block_i, warps = p.recompute_batch * p.recompute_block_i, p.recompute_num_warps
            grid = (min(p.recompute_programs, triton.cdiv(listable * p.parts, p.recompute_batch)),)
        else:
            block_i, warps = p.block_i, p.num_warps
            grid = (view.outer * triton.cdiv(view.inner, block_i) * p.parts,)
        steps.append((_launch(accurate_logsumexp_columns_kernel, grid, [view.source, out, flags, *parts, *work],
                              [view.inner, view.stride_outer, view.stride_red, view.stride_inner, red,
                               p.chunk or red, p.parts, n_out, exp_error, fp64_slack], warps,
                              BLOCK_R=p.block_r, BLOCK_I=block_i, LOOP_STAGES=p.loop_stages, SPLIT=split,
                              RECOMPUTE=second, RECOMPUTE_BLOCK_I=p.recompute_block_i,
                              LAUNCH_DEPENDENTS=pdl and (split or not last),
                              SPARSE_MAX=planning.ACCURATE_COLUMNS_SPARSE_MAX,
                              SPARSE_LANES=planning.ACCURATE_COLUMNS_SPARSE_LANES,
                              SPARSE_WIDTH=planning.ACCURATE_COLUMNS_SPARSE_WIDTH,
                              FULL_TILES=not second and _full_column_tiles(view, p), **_programmatic(dependent)),
                      ("x", "out", "flags", "parts", "work")))
        if split:
            block_o = min(p.merge_outputs, p.recompute_block_i) if second else p.merge_outputs
            grid = ((min(p.recompute_merge_programs, listable * (p.recompute_block_i // block_o)),) if second
                    else (triton.cdiv(n_out, block_o),))
            steps.append((_launch(accurate_logsumexp_columns_merge_kernel, grid, [*parts, out, flags, *work],
                                  [view.inner, n_out, p.parts, exp_error, fp64_slack],
                                  planning.ACCURATE_COLUMNS_MERGE_WARPS, BLOCK_P=p.merge_lanes, BLOCK_O=block_o,
                                  RECOMPUTE=second, RECOMPUTE_BLOCK_I=p.recompute_block_i,
                                  LAUNCH_DEPENDENTS=pdl and not last, **_programmatic(pdl)),
                          ("parts", "out", "flags", "work")))
    if recompute and key is not None and all(launch[0] is not None for launch, _ in steps):
        keep(_RECIPES, key, _AccurateRecipe(n_out, steps, {"parts": (make_parts, 3), "work": (make_work, 1)}))
    return out, flags


def _full_row_tiles(rows: int, red: int, p: planning.AccurateExpPlan) -> bool:
    """Whether the accurate row kernel loads its tiles unmasked: held rows (one tile) whose tile is
    the rows' block exactly. Streamed rows keep the masked loads, which measured faster even where
    every tile is whole (H200, bench/probe_accurate_columns.py --dim -1, public GB/s, two runs: unmasked
    -> masked 1024x65536 2773/2774 -> 2944/2931; held rows unmasked -> masked 8192^2 3383/3388 ->
    3065/3053, 262144x256 2448/2445 -> 2409/2390)."""
    return p.one_tile and p.block_n == red and rows % p.block_rows == 0


def _full_column_tiles(view, p: planning.AccurateColumnsPlan) -> bool:
    """Whether every tile of the column kernel's first stage lies inside the input (its loads need no
    mask): the column blocks tile the inner axis and the tiles the reduced axis (a part's chunk is whole
    tiles by construction, plan_accurate_logsumexp_columns)."""
    return view.inner % p.block_i == 0 and view.red % p.block_r == 0


def _accurate_parts_scratch(rows: int, parts: int, device):
    """The factory of a split accurate launch's scratch -- each part's (m, S, R) in fp64, written before
    read, and a zeroed int32 arrival counter per row, left zero -- or None for unsplit rows."""
    if parts <= 1:
        return None
    return lambda: (*(torch.empty(rows * parts, dtype=torch.float64, device=device) for _ in range(3)),
                    torch.zeros(rows, dtype=torch.int32, device=device))


class _AccurateRecipe:
    """The accurate mode's launches for a call signature (accurate_logsumexp_rows': the row kernel and
    the fp64 recompute; accurate_logsumexp_columns': the column kernel, the merge of split plans, the
    recompute), replayed on new tensors. Each launch takes, in its own order, the input, the output, the
    flags and scratch -- the parts' states, the recompute's chunk states and arrival counters, the
    columns' work list -- made once per stream (counters and lists are zero on entry and exit; states
    are written before read)."""

    def __init__(self, n_out, steps, makers):
        from triton.runtime import driver  # the GPU driver; never touched under the interpreter

        self.n_out = n_out
        self.steps = [(_BoundLaunch(*launch), order) for launch, order in steps]
        # scratch name: (its scratch per stream -- (tensors, addresses) -- or None, how many pointers its
        # placeholders fill where it has none)
        self.scratch = {name: (None if make is None else StreamScratch(lambda make=make: with_addresses(make())), count)
                        for name, (make, count) in makers.items()}
        self.get_stream = driver.active.get_current_stream

    def run(self, x: torch.Tensor, shape=None):
        """(the output, flat or in `shape`, None), as the reductions' recipes return."""
        out = torch.empty(self.n_out if shape is None else shape, dtype=torch.float32, device=x.device)
        flags = torch.empty(self.n_out, dtype=torch.int8, device=x.device)
        stream = self.get_stream(x.device.index)
        named = {"x": [x.data_ptr()], "out": [out.data_ptr()], "flags": [flags.data_ptr()]}
        held = []   # the scratch tensors, until the launches are queued
        for name, (scratch, count) in self.scratch.items():
            if scratch is None:   # placeholders, never touched
                named[name] = [flags.data_ptr()] * count
            else:
                tensors, named[name] = scratch.get(stream)
                held.append(tensors)
        for bound, order in self.steps:
            bound(stream, [pointer for name in order for pointer in named[name]])
        return out, None


def _logsumexp_rows(x: torch.Tensor, view, mode: Mode, plan: RowPlan, key) -> torch.Tensor:
    """logsumexp of the view's contiguous rows by the single-read kernel, into a flat output of x's
    dtype; a CUDA call leaves its launch recipe under key."""
    rows = view.outer
    out = torch.empty(rows, dtype=x.dtype, device=x.device)
    acc = mode.accumulator_dtype(x.dtype, x.dtype)
    launch = _launch(single_read_logsumexp_kernel, (triton.cdiv(rows, plan.block_rows),),
                     [_bits_if_bf16(view.source), _bits_if_bf16(out)], [rows, view.red, view.stride_outer],
                     plan.num_warps, ACC_DTYPE=_TL_DTYPE[acc], BLOCK_ROWS=plan.block_rows, BLOCK_J=plan.block_j,
                     **blocked_tree_layout(x, plan.num_warps),
                     **_register_cap(planning.single_read_register_cap(plan, acc.itemsize)))
    if key is not None and launch[0] is not None:
        keep(_RECIPES, key, _RowsRecipe(rows, x.dtype, None, launch))
    return out


class _RowsRecipe:
    """The single-read launch of a call signature whose kernel writes one value per row (logsumexp; var /
    std / var_mean), replayed on new tensors of that signature. second: None (the kernel takes the input
    and the output), False (it takes a second output, the output again: unwritten) or True (a second
    output, the mean)."""

    def __init__(self, rows, out_dtype, second, launch):
        from triton.runtime import driver  # the GPU driver; never touched under the interpreter

        self.rows, self.out_dtype, self.second = rows, out_dtype, second
        self.launch = _BoundLaunch(*launch)
        self.get_stream = driver.active.get_current_stream

    def run(self, x: torch.Tensor, shape=None):
        """(the output, flat or in `shape`, the second output or None), as the reductions' recipes return."""
        out = new_output(x, (self.rows,) if shape is None else (shape or ((),)), self.out_dtype)
        second = torch.empty_like(out) if self.second else None
        pointers = [x, out]
        if self.second is not None:
            pointers.append(out if second is None else second)
        self.launch(self.get_stream(x.device.index), pointers)
        return out, second


def reduce_extremum(x: torch.Tensor, dims: tuple, mode: Mode, with_index: bool, plan: Plan | None = None,
                    schedule: str | None = None, **planner_overrides):
    """(flat values in x's dtype, flat int64 indices along the reduced axis or None): the maximum (or
    minimum, by the mode's strategy) over dims. Indices count along the view's reduced axis, which is
    the dim itself when one dim is reduced; they need an indexed mode (MAXIMUM_MODE, MINIMUM_MODE),
    whose values are the first occurrence's. The value modes (MAXIMUM_VALUE_MODE, MINIMUM_VALUE_MODE:
    amax / amin) keep no index and follow IEEE 754-2019's maximum / minimum.

    schedule: None (the planner's choice), "atomic" (schedules/atomic.py; its first pass is the
    planned one, which must be an inner pass, split or not) or "passes" (the plan's passes, merged by
    later passes when split). plan / planner_overrides shape the passes (tests)."""
    indexed = mode.strategy in EXTREMA   # else the value alone (amax / amin: VALUE_EXTREMA)
    if with_index and not indexed:
        raise ValueError(f"mode {mode.name!r} keeps no index")
    if schedule is None:   # planning twice costs host time that small calls feel: only when it may pay
        schedule = "passes"
        if planning.ATOMIC_EXTREMA and indexed:
            view, planned = plan_for(x, dims, mode)
            schedule = "atomic" if use_atomic(planned, x.dtype, view.red) else "passes"
    if schedule == "atomic":
        if not indexed:
            raise ValueError("the atomic schedule serves the indexed extrema (max / min with indices, argmax, "
                             f"argmin); mode {mode.name!r} takes the passes")
        return _atomic_extremum(x, dims, mode, with_index, plan, planner_overrides)
    if planner_overrides:
        plan = plan_for(x, dims, mode, **planner_overrides)[1]
    first = (plan or plan_for(x, dims, mode)[1]).passes[0] if indexed and x.numel() > 2 ** 31 else None
    if first is not None and (first.red if first.interleaved else first.chunk) > 2 ** 31:
        # the first pass counts indices within its part (an interleaved one: within the row) in int32
        raise RuntimeError("extremum plan with parts of more than 2^31 elements: over int32 relative indices")
    return reduce(x, dims, mode, x.dtype, Output(with_mean=with_index), plan)


_INT64_MIN = -(2 ** 63)


def _empty_keys(rows: int, device: torch.device) -> torch.Tensor:
    """The atomic schedule's packed winners as its kernels take them: INT64_MIN, one per row (the finish
    kernel leaves them so)."""
    return torch.full((rows,), _INT64_MIN, dtype=torch.int64, device=device)


def _atomic_extremum(x, dims, mode, with_index, plan, planner_overrides):
    key = None
    if plan is None and not planner_overrides and x.is_cuda:
        key = ("atomic", *_recipe_key(x, dims, mode, x.dtype, Output(with_mean=with_index)))
        recipe = _RECIPES.get(key)
        if recipe is not None:
            return recipe.run(x)
    view, planned = plan_for(x, dims, mode, **planner_overrides)
    p = (plan or planned).passes[0]
    if p.schedule != "inner" or x.dtype == torch.float64 or view.red > planning.ATOMIC_MAX_RED:
        raise ValueError(f"the atomic schedule takes inner passes over fp32/bf16/fp16 rows of at most "
                         f"{planning.ATOMIC_MAX_RED} elements; got a {p.schedule} pass, {x.dtype}, {view.red} elements")
    rows = p.outer * p.inner
    keys = _empty_keys(rows, x.device)
    source = _bits_if_bf16(view.source)
    strides = [view.inner, view.stride_outer, view.stride_inner, view.stride_red]
    values = torch.empty(rows, dtype=x.dtype, device=x.device)
    index = torch.empty(rows, dtype=torch.int64, device=x.device) if with_index else None
    merge = _launch(atomic_extremum_kernel, (triton.cdiv(rows, p.block_kept) * p.parts,), [source, keys],
                    [rows, *strides, view.red, p.chunk, p.parts], p.num_warps, STRATEGY=mode.strategy,
                    BLOCK_M=p.block_kept, BLOCK_N=p.lanes)
    block = 1024
    finish = _launch(atomic_finish_kernel, (triton.cdiv(rows, block),),
                     [source, keys, _bits_if_bf16(values), index if with_index else keys], [rows, *strides], 4,
                     WITH_INDEX=with_index, BLOCK=block)
    if key is not None and not view.copied and merge[0] is not None and finish[0] is not None:
        keep(_RECIPES, key, _AtomicRecipe(merge, finish, rows, with_index, keys))
    return values, index


class _AtomicRecipe:
    """An atomic-schedule call signature's two launches, replayed on new tensors of that signature; the
    keys, one buffer per CUDA stream, are reused (INT64_MIN between calls: the finish kernel resets
    them; a call writes and reads them in stream order)."""

    def __init__(self, merge, finish, rows, with_index, keys):
        from triton.runtime import driver  # the GPU driver; never touched under the interpreter

        self.merge, self.finish = _BoundLaunch(*merge), _BoundLaunch(*finish)
        self.rows, self.with_index = rows, with_index
        self.get_stream = driver.active.get_current_stream
        self.keys = StreamScratch(lambda device: _empty_keys(rows, device))
        self.keys.keep(self.get_stream(keys.get_device()), keys)   # the first call's, reset by its finish

    def run(self, x: torch.Tensor):
        stream = self.get_stream(x.get_device())
        keys = self.keys.get(stream, x.device)
        values = torch.empty(self.rows, dtype=x.dtype, device=x.device)
        index = torch.empty(self.rows, dtype=torch.int64, device=x.device) if self.with_index else None
        source, key_ptr = x.data_ptr(), keys.data_ptr()
        self.merge(stream, [source, key_ptr])
        self.finish(stream, [source, key_ptr, values.data_ptr(), (index if self.with_index else keys).data_ptr()])
        return values, index


def reduce_product(x: torch.Tensor, dims: tuple, mode: Mode, out_dtype: torch.dtype,
                   plan: Plan | None = None) -> torch.Tensor:
    """Flat product over dims, accumulated in the mode's dtype, rounded once to out_dtype."""
    return reduce(x, dims, mode, out_dtype, Output(), plan)[0]


# Tile of the normalizing pass (elements), rows x reduced.
NORMALIZE_TILE = (8, 512)


def plan_softmax(x: torch.Tensor, dim: int, mode: Mode, out_dtype: torch.dtype, log: bool = False):
    """The softmax's (and log_softmax's, `log`) plan along dim of non-empty x: a RowPlan (single-read
    kernel) where rows fit on chip, else a LoopPlan (one program reads a contiguous row twice, the
    second time from L2) where rows fit in L2, else the reduction's Plan (one pass for each row's max
    and log-sum, then the normalizing pass). The first two are sized for the accumulator those kernels
    run in (_row_accumulator: log_softmax's split-tail pass's)."""
    split = log_softmax_split_tail(mode.name, x.dtype, out_dtype, log)
    row_plan = _row_plan(x, reduction_view(x, (dim,)), _row_accumulator(x, mode, out_dtype, split), split is not None)
    return row_plan if row_plan is not None else softmax_statistics_plan(x, dim, mode, out_dtype)


def _row_accumulator(x, mode: Mode, out_dtype: torch.dtype, split: torch.dtype | None) -> torch.dtype:
    """The accumulator of the single-read and row-loop kernels for this call: log_softmax's split-tail
    pass's where it runs one (`split`: precred.modes.log_softmax_split_tail, fp32 for `accurate` into 16
    bits), else the mode's."""
    return split or mode.accumulator_dtype(x.dtype, out_dtype)


def softmax_statistics_plan(x: torch.Tensor, dim: int, mode: Mode, out_dtype: torch.dtype,
                            **planner_overrides) -> Plan:
    """The plan of the one-pass reduction that gives the softmax (into out_dtype) each row's maximum
    and log(sum exp(x - max)), written in fp64 but accumulated in the mode's accumulator for x and
    out_dtype -- the one precred.softmax_error_bound's log-sum error counts (fp32 in `fast` for 16-bit
    and fp32 input), not the fp64 the outputs' dtype would make it."""
    return plan_for(x, (dim,), mode, torch.float64, mode.accumulator_dtype(x.dtype, out_dtype),
                    **planner_overrides)[1]


def _row_plan(x, view, acc_dtype, split_tail: bool) -> RowPlan | LoopPlan | None:
    rows = view.outer * view.inner
    plan = plan_single_read(rows, view.red, j_fast=view.stride_red == 1, accumulator_size=acc_dtype.itemsize,
                            element_size=x.element_size(),
                            counted_split_tail=split_tail and split_tail_counts_maxima(acc_dtype))
    if plan is None and view.inner == 1 and view.stride_red == 1:
        plan = plan_row_loop(rows, view.red, element_size=x.element_size(), accumulator_size=acc_dtype.itemsize,
                             sm_count=device_sm_count(x.device))
    return plan


def softmax_rows(x: torch.Tensor, dim: int, mode: Mode, out_dtype: torch.dtype, log: bool,
                 plan: RowPlan | Plan | None = None) -> torch.Tensor:
    """softmax (or log_softmax, `log`) of non-empty x along dim, written into a new contiguous tensor
    of out_dtype, by `plan` (default plan_softmax's): a RowPlan reads each row once (single-read
    kernel); a LoopPlan reads each contiguous row twice in one program (row-loop kernel); a Plan runs
    the one-pass reduction for each row's maximum and log(sum exp(x - max)), kept in fp64, then the
    normalizing pass, which reads x again. All compute in the mode's accumulator dtype. Planned CUDA
    calls leave a launch recipe, as `reduce` does."""
    key = None
    if plan is None and x.is_cuda:
        key = _softmax_key(x, dim, mode, out_dtype, log)
        recipe = _RECIPES.get(key)
        if recipe is not None:
            return recipe.run(x)
    src = reduction_view(x, (dim,))
    split = log_softmax_split_tail(mode.name, x.dtype, out_dtype, log)   # its accumulator, or None
    if plan is None:   # the planner's choice; a two-pass plan stays None so that `reduce` plans (and caches)
        plan = _row_plan(x, src, _row_accumulator(x, mode, out_dtype, split), split is not None)
        two_pass_plan = None
    else:
        two_pass_plan = plan
    # log_softmax's split-tail pass runs on the single-read and row-loop kernels, in its own accumulator;
    # the two-pass path keeps the mode's (fp64 where the pass would be fp32: `accurate` into 16 bits) and
    # adds the split-tail kernel.
    on_chip = isinstance(plan, (RowPlan, LoopPlan))
    split_tail = on_chip and split is not None
    acc = _row_accumulator(x, mode, out_dtype, split) if on_chip else mode.accumulator_dtype(x.dtype, out_dtype)
    out = torch.empty(x.shape, dtype=out_dtype, device=x.device)
    dst = reduction_view(out, (dim,))
    rows, red = src.outer * src.inner, src.red
    scalars = [rows, red, src.inner, src.stride_outer, src.stride_inner, src.stride_red,
               dst.inner, dst.stride_outer, dst.stride_inner, dst.stride_red]
    wire, reduction = wire_to_row_kernel, None
    if isinstance(plan, RowPlan):
        persistent = planning.single_read_persistence(plan, acc.itemsize, split_tail, rows, device_sm_count(x.device))
        launch = _launch(single_read_kernel, (persistent[0] if persistent else triton.cdiv(rows, plan.block_rows),),
                         [wire(src.source), wire(dst.source)], scalars, plan.num_warps,
                         LOG=log, ACC_DTYPE=_TL_DTYPE[acc],
                         TWO_PART_EXP=softmax_two_part_exp(acc, out_dtype, log), SPLIT_TAIL=split_tail,
                         COUNT_MAXIMA=split_tail and split_tail_counts_maxima(acc), J_FAST=plan.j_fast,
                         BLOCK_ROWS=plan.block_rows, BLOCK_J=plan.block_j, **blocked_tree_layout(x, plan.num_warps),
                         ROW_BLOCK_STAGES=persistent[1] if persistent else 0,
                         **_register_cap(planning.single_read_register_cap(plan, acc.itemsize)))
    elif isinstance(plan, LoopPlan):   # contiguous rows: (r, j) at r * stride_outer + j in both
        tree_vec = 16 // x.element_size()
        launch = _launch(row_loop_kernel, (rows,), [wire(src.source), wire(dst.source)],
                         [red, src.stride_outer, dst.stride_outer], plan.num_warps,
                         LOG=log, ACC_DTYPE=_TL_DTYPE[acc], SPLIT_TAIL=split_tail, BLOCK_N=plan.block_n,
                         TREE_VEC=tree_vec,
                         VECTORS=planning.stable_exp_vectors(acc.itemsize, x.element_size(), None)
                         and plan.block_n >= 2 * tree_vec,
                         FIRST_READ_EVICTION=planning.ROW_LOOP_FIRST_READ_EVICTION, LOOP_STAGES=plan.stages)
    else:
        output = Output(with_mean=True)
        log_s, row_max = reduce(x, (dim,), mode, torch.float64, output, two_pass_plan, acc)
        j_fast = src.stride_red == 1
        tail_launch = None
        if split is not None:
            # rows with one maximum and s < 1.5: log(s) = log1p(tail), the tail read again (split_tail.py)
            tail_launch = _launch_split_tail(_bits_if_bf16(src.source), log_s, row_max, scalars[:6], j_fast)
        block_rows, block_j = NORMALIZE_TILE if j_fast else NORMALIZE_TILE[::-1]
        block_j = min(block_j, triton.next_power_of_2(red))
        grid, flat = two_axis_grid(rows, block_rows, triton.cdiv(red, block_j))
        launch = _launch(normalize_kernel, grid, [_bits_if_bf16(src.source), log_s, row_max,
                                                  _bits_if_bf16(dst.source)], scalars, 4,
                         LOG=log, ACC_DTYPE=_TL_DTYPE[acc], J_FAST=j_fast, BLOCK_ROWS=block_rows, BLOCK_J=block_j,
                         **flat)
        wire, reduction = _bits_if_bf16, (dim, mode, output, acc, tail_launch)
    if key is not None and not src.copied and launch[0] is not None:
        keep(_RECIPES, key, _SoftmaxRecipe(wire, out_dtype, reduction, launch))
    return out


def _softmax_key(x: torch.Tensor, dim: int, mode: Mode, out_dtype: torch.dtype, log: bool) -> tuple:
    return ("softmax", x.shape, x.stride(), x.dtype, x.device, dim, mode, out_dtype, log, x.data_ptr() % 16)


def softmax_recipe(x: torch.Tensor, dim: int, mode: Mode, out_dtype: torch.dtype, log: bool):
    """The launch recipe (_SoftmaxRecipe) a planned CUDA call of softmax_rows left for this signature,
    or None (CPU, copied views, empty or 0-d inputs: none is stored)."""
    return _RECIPES.get(_softmax_key(x, dim, mode, out_dtype, log)) if x.is_cuda else None


def _launch_split_tail(source, log_s, row_max, scalars, j_fast: bool):
    """log_softmax's split-tail pass over the reduction's log(s) and maxima (schedules/split_tail.py):
    ((compiled, grid, trailing) of the kernel, that of the finish adding the parts or None for rows of
    one part, the partial sums' count: 0 for one part). scalars: rows, red, then the source view's inner
    size and strides."""
    rows, red = scalars[0], scalars[1]
    tail_rows, _ = planning.SPLIT_TAIL_TILE[j_fast]
    part_length, parts = planning.split_tail_part_length(red, j_fast), planning.split_tail_parts(red, j_fast)
    partial_count = 0 if parts == 1 else parts * rows
    partials = _split_tail_partials(log_s, partial_count)
    grid, flat = two_axis_grid(rows, tail_rows, parts)
    kernel = _launch(split_tail_kernel, grid, [source, log_s, row_max, partials],
                     [rows, red, part_length, *scalars[2:]], 4, J_FAST=j_fast, BLOCK_ROWS=tail_rows,
                     BLOCK_J=planning.split_tail_block_j(red, j_fast), PARTIAL=parts > 1, **flat)
    finish = None
    if parts > 1:
        block = planning.SPLIT_TAIL_FINISH_BLOCK
        finish = _launch(split_tail_finish_kernel, (triton.cdiv(rows, block),), [log_s, partials], [rows, parts], 4,
                         BLOCK=block)
    return kernel, finish, partial_count


def _split_tail_partials(log_s, count: int):
    """The split-tail kernel's buffer of partial tail sums (fp64), or log(s) itself, unused, for rows of
    one part (count 0)."""
    return log_s if count == 0 else log_s.new_empty(count)   # log_s: fp64, as the partials


def blocked_tree_layout(x: torch.Tensor, num_warps: int) -> dict:
    """The constexprs of the register order that tree.tree_sum_blocked_rows sums a tile of x's elements
    in: 16-byte vectors a thread (TREE_VEC elements), the program's threads (TREE_THREADS)."""
    return {"TREE_VEC": 16 // x.element_size(), "TREE_THREADS": 32 * num_warps}


def _register_cap(cap: int | None) -> dict:
    """The launch option of a register cap (maxnreg), none for None."""
    return {} if cap is None else {"maxnreg": cap}


# CUDA's cap on a grid's second dimension (schedules/grid.py).
GRID_Y_MAX = 65535


def two_axis_grid(rows: int, block_rows: int, column_blocks: int) -> tuple[tuple, dict]:
    """The grid of (row blocks, column blocks) programs and the kernel's FLAT_GRID constexpr: two
    dimensions, or one of row blocks x column blocks where column_blocks exceeds GRID_Y_MAX
    (schedules/grid.py)."""
    row_blocks = triton.cdiv(rows, block_rows)
    if column_blocks <= GRID_Y_MAX:
        return (row_blocks, column_blocks), {"FLAT_GRID": False}
    return (row_blocks * column_blocks,), {"FLAT_GRID": True}


def _launch(kernel, grid, pointers, scalars, num_warps, **consts):
    """Launch kernel; (compiled kernel or None under the interpreter, grid, the arguments after the
    pointers in the kernel's parameter order -- scalars, then constexprs -- as Triton's launcher
    takes them). consts: the kernel's constexprs and launch options (num_stages, maxnreg, launch_pdl:
    a replay launches with the compiled kernel's)."""
    compiled = kernel[grid](*pointers, *scalars, num_warps=num_warps, **consts)
    trailing = list(scalars) + [consts[name] for name in kernel.arg_names[len(pointers) + len(scalars):]]
    return (compiled if hasattr(compiled, "run") else None), grid, trailing


class _SoftmaxRecipe:
    """A softmax call signature's launches, replayed on new tensors of that signature: the single-read
    kernel, or the reduction (through reduce's own recipe), log_softmax's split-tail kernel where it
    runs, and the normalizing pass."""

    def __init__(self, wire, out_dtype, reduction, launch):
        from triton.runtime import driver  # the GPU driver; never touched under the interpreter

        self.wire, self.out_dtype = wire, out_dtype
        self.launch = _BoundLaunch(*launch)
        self.reduction = self.tail = self.finish = None
        if reduction is not None:
            *self.reduction, tail_launch = reduction   # (dim, mode, output, acc), the split tail's or None
            if tail_launch is not None:
                tail, finish, self.partial_count = tail_launch
                self.tail = _BoundLaunch(*tail)
                self.finish = None if finish is None else _BoundLaunch(*finish)
        self.get_stream = driver.active.get_current_stream

    def run(self, x: torch.Tensor) -> torch.Tensor:
        out = empty_contiguous_like(x, self.out_dtype)
        pointers = [self.wire(x), self.wire(out)]
        stream = self.get_stream(x.device.index)
        if self.reduction is not None:
            dim, mode, output, acc = self.reduction
            pointers[1:1] = reduce(x, (dim,), mode, torch.float64, output, acc_dtype=acc)
            if self.tail is not None:
                partials = _split_tail_partials(pointers[1], self.partial_count)
                self.tail(stream, pointers[:3] + [partials])
                if self.finish is not None:
                    self.finish(stream, [pointers[1], partials])
        self.launch(stream, pointers)
        return out


def new_output(x: torch.Tensor, size: tuple, dtype: torch.dtype) -> torch.Tensor:
    """A new tensor of `size` (ints, or ((),) for a 0-d one) on x's device in dtype. Host time per call
    is what a small reduction feels: x.new_empty costs about 2 us less than torch.empty(..., device=)
    on the H100's host, and sizes passed as separate ints, without a dtype where it is x's, parse
    faster than one torch.Size and a dtype (CPU host: 0.71 us against 1.54)."""
    return x.new_empty(*size) if x.dtype == dtype else x.new_empty(*size, dtype=dtype)


def empty_contiguous_like(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A new contiguous tensor of x's shape and device in dtype: empty_like parses its arguments about
    3 us faster than torch.empty(x.shape, dtype=, device=) (H100 host; 5.1 against 1.9 us on a CPU
    host), host time on every call of a softmax or a norm."""
    return torch.empty_like(x, dtype=dtype, memory_format=torch.contiguous_format)


class _BoundLaunch:
    """A compiled kernel and its grid, launched with nothing but the call's stream and arguments.

    Triton's launcher object (compiled.run) is a Python wrapper that allocates the kernel's global and
    profiling scratch, then calls its C launch function. Kernels without scratch (every precred kernel:
    the wrapper passes None for them) are launched by that C function directly, with the leading
    arguments the wrapper would pass, built once here: about a microsecond less host time per launch."""

    def __init__(self, compiled, grid, trailing):
        self.grid = tuple(grid) + (1,) * (3 - len(grid))
        self.trailing = tuple(trailing)
        runner = compiled.run
        direct = getattr(runner, "launch", None)
        if (direct is not None and getattr(runner, "global_scratch_size", None) == 0
                and getattr(runner, "profile_scratch_size", None) == 0):
            self.function = direct
            self.middle = (compiled.function, runner.launch_cooperative_grid, runner.launch_pdl, None, None,
                           compiled.packed_metadata, None, None, None)
        else:   # the wrapper, which allocates their scratch
            self.function = runner
            self.middle = (compiled.function, compiled.packed_metadata, None, None, None)
        # (stream, the arguments up to the pointers) of the last launch: one tuple, replaced whole (a
        # thread reads a stream and its head together). Unpacking it costs less host time than the
        # grid, the stream and the middle apart (CPU host: a 67-argument call 0.72 -> 0.40 us).
        self.last_head = (None, None)

    def __call__(self, stream, pointers):
        last_stream, head = self.last_head
        if stream != last_stream:
            head = (*self.grid, stream, *self.middle)
            self.last_head = (stream, head)
        self.function(*head, *pointers, *self.trailing)


def reduce(x: torch.Tensor, dims: tuple, mode: Mode, out_dtype: torch.dtype, output: Output,
           plan: Plan | None = None, acc_dtype: torch.dtype | None = None):
    """(flat output, flat mean or None) of the reduction over dims; O*I values, row-major over kept dims.

    x is non-empty; dims sorted, unique, non-negative. `plan` overrides the planner (tests use it to
    cover every schedule on small inputs); it must describe the same view. acc_dtype: the accumulator
    (default the mode's for x and out_dtype; softmax's statistics keep the softmax's own and write fp64).
    """
    key = None
    if plan is None and x.is_cuda:
        # acc_dtype stays None in the key for the mode's own accumulator: the key cached_recipe and
        # _contiguous_rows_route look up (the public functions' eager replays depend on finding it).
        key = _recipe_key(x, dims, mode, out_dtype, output, acc_dtype)
        recipe = _RECIPES.get(key)
        if recipe is not None:
            return recipe.run(x)
    acc_dtype = acc_dtype or mode.accumulator_dtype(x.dtype, out_dtype)
    view, planned = plan_for(x, dims, mode, out_dtype, acc_dtype)
    plan = planned if plan is None else plan
    # The exact mode's filter may recompute its own uncertified outputs (plan.exact_in_one_launch): then
    # no flags and no second launch.
    element_size = view.source.element_size()
    one_launch = mode.strategy == EXACT and planning.exact_in_one_launch(
        plan, view.outer * view.red * view.inner * element_size)
    # So may logsumexp's fp32 filter, in fp64 (plan.certified_exp_in_one_launch): flags 2 where it did.
    exp_finish = mode.strategy == CERTIFIED_EXP and planning.certified_exp_in_one_launch(plan)
    workspace = _Workspace(mode.strategy, acc_dtype, out_dtype, view.outer * view.inner, output.with_mean,
                           flags=not one_launch)
    out, mean = workspace.outputs(x)
    source = _bits_if_bf16(view.source)
    src = (source, source, source)
    shift = (source, view.inner, view.stride_outer, view.stride_inner)
    strides = (view.stride_outer, view.stride_red, view.stride_inner)
    divisor = output.divisor(view.red, mode.strategy)
    if mode.strategy == CERTIFIED_EXP:   # the filter's bound on |log(s_hat) - log(s)| for this plan
        divisor = certified_log_sum_margin(view.red, plan.depth)
    launches = []
    # A filter's recompute launches as a programmatic dependent of its last pass (on a GPU), and so does
    # every pass after the first for the strategies of plan.PASS_PROGRAMMATIC_LAUNCH in fp32 (in fp64 too
    # where plan.PASS_PROGRAMMATIC_LAUNCH_FP64 names them for the input's element size), and the
    # second of a plan's two inner passes where it is a dependent merge (Plan.dependent_merge).
    programmatic = programmatic_dependent_launch(x.device)
    dependent_recompute = (programmatic and mode.strategy in FILTERS and not one_launch and not exp_finish
                           and planning.RECOMPUTE_PROGRAMMATIC_LAUNCH)
    dependent_accumulator = (workspace.acc_dtype == torch.float32
                             or mode.strategy in planning.PASS_PROGRAMMATIC_LAUNCH_FP64.get(x.element_size(), ()))
    dependent_passes = programmatic and (plan.dependent_merge or (mode.strategy in planning.PASS_PROGRAMMATIC_LAUNCH
                                                                  and dependent_accumulator))
    # A fused merge (Plan.fused_merge) runs the second pass inside the first's launch.
    passes = plan.passes[:1] if plan.fused_merge else plan.passes
    for index, p in enumerate(passes):
        last = index == len(passes) - 1
        dst = workspace.destination(out, mean, last, p.parts)
        merge = None
        if plan.fused_merge:
            merge = workspace.fused_merge_scratch(out, mean, p.parts)
        launches.append(_launch_pass(p, src, dst, shift, strides, workspace, mode.strategy, output, divisor,
                                     src_is_state=index > 0, dst_is_state=not last, merge=merge,
                                     merge_lanes=plan.passes[1].lanes if plan.fused_merge else 0,
                                     merge_counter=plan.fused_merge and plan.passes[1].tile_counter,
                                     launch_dependents=dependent_recompute if last else dependent_passes,
                                     dependent=dependent_passes and index > 0,
                                     input_format=INPUT_FORMATS[view.source.dtype] if mode.strategy == EXACT else None,
                                     one_launch=one_launch,
                                     exp_finish_lanes=planning.exp_finish_lanes(p) if exp_finish else 0))
        # The next pass reads the states just written: [rows, parts] for inner, [parts, outputs] for outer.
        src = dst
        strides = (p.parts, 1, 0) if p.schedule == "inner" else (0, workspace.n_out, 1)
    recompute = None
    if mode.strategy == EXACT and not one_launch:   # `mean` holds the filter's flags
        recompute = _launch_recompute(view, source, out, mean, output, dependent_recompute)
    elif mode.strategy == CERTIFIED_EXP and not exp_finish:
        recompute = _launch_exp_recompute(view, source, out, mean, dependent_recompute)
    if key is not None and not view.copied and all(compiled is not None for compiled, _, _ in launches):
        if recompute is None or recompute[0][0] is not None:
            keep(_RECIPES, key, _Recipe(launches, plan, workspace, recompute))
    return (out, None) if mode.strategy in FILTERS else (out, mean)



def _programmatic(dependent: bool) -> dict:
    """A launch's constants as a programmatic dependent of the launch before it (PDL: it may start while
    that launch, which triggers it, still runs; it waits for that launch's writes) or not."""
    return dict(WAIT_FOR_PREVIOUS=dependent, launch_pdl=True) if dependent else dict(WAIT_FOR_PREVIOUS=False)


def _launch_recompute(view, source, out, flags, output, dependent):
    """The exact mode's second stage over the filter's output: (launch, the factory of the zeroed
    scratch its row chunks need -- None for rows of one chunk --, how many scratch pointers the kernel
    takes)."""
    n_out = view.outer * view.inner
    min_chunk = planning.RECOMPUTE_MIN_CHUNK if view.stride_red == 1 else planning.RECOMPUTE_COLUMN_MIN_CHUNK
    rp = plan_recompute(n_out, view.red, sm_count=device_sm_count(out.device), min_chunk=min_chunk)
    man_bits, exp_bits, lsb_exp = INPUT_FORMATS[view.source.dtype]
    device = out.device

    def make_scratch():   # the rows' limb sums and arrival counters: zero on entry, left zero on exit
        return (torch.zeros(n_out * LIMBS, dtype=torch.int64, device=device),
                torch.zeros(n_out, dtype=torch.int32, device=device))

    chunked = rp.chunks > 1
    scratch = make_scratch() if chunked else (flags, flags)   # placeholders, never touched
    launch = _launch(recompute_kernel, (triton.cdiv(n_out, rp.block_outputs), rp.chunks),
                     [source, _bits_if_bf16(out), flags, *scratch],
                     [n_out, view.inner, view.stride_outer, view.stride_inner, view.stride_red, view.red,
                      rp.chunk, rp.chunks, view.red], rp.num_warps,
                     MAN_BITS=man_bits, EXP_BITS=exp_bits, LSB_EXP=lsb_exp, DIVIDE=output.divide,
                     CHUNKED=chunked, BLOCK_O=rp.block_outputs, BLOCK_R=rp.block_r, **_programmatic(dependent))
    return launch, make_scratch if chunked else None, len(scratch)


def _launch_exp_recompute(view, source, out, flags, dependent):
    """logsumexp's fp64 recompute of what its fp32 filter left uncertified (see _launch_recompute):
    long rows in chunks, whose sums and arrival counters are the scratch. The filter left the row's
    maximum in each output it did not certify (the recompute's reference)."""
    n_out = view.outer * view.inner
    rp = plan_exp_recompute(n_out, view.red, sm_count=device_sm_count(out.device), strided=view.stride_red != 1)
    device = out.device

    def make_scratch():   # chunk sums (written before read) and arrival counters (zero on entry and exit)
        return (torch.empty(n_out * rp.chunks, dtype=torch.float64, device=device),
                torch.zeros(n_out, dtype=torch.int32, device=device))

    chunked = rp.chunks > 1
    scratch = make_scratch() if chunked else (flags, flags)   # placeholders, never touched
    launch = _launch(exp_recompute_kernel, (triton.cdiv(n_out, rp.block_outputs), rp.chunks),
                     [source, _bits_if_bf16(out), flags, *scratch],
                     [n_out, view.inner, view.stride_outer, view.stride_inner, view.stride_red, view.red,
                      rp.chunk if chunked else view.red, rp.chunks],
                     rp.num_warps, CHUNKED=chunked, BLOCK_O=rp.block_outputs, BLOCK_R=rp.block_r,
                     ONE_TILE=rp.one_tile, GROUP=rp.group, GROUP_R=rp.group_r, GROUP_ONE_TILE=rp.group_one_tile,
                     GROUP_MIN=rp.group_min, BLOCK_CHUNKS=rp.block_chunks,
                     **_register_cap(planning.EXP_RECOMPUTE_MAX_REGISTERS), **_programmatic(dependent))
    return launch, make_scratch if chunked else None, len(scratch)


class _Workspace:
    """The arrays one call writes: the output(s), and the partial states of every pass but the last
    (accumulator dtype; lo only for strategies that use it, fp32 for the exact filter's bound; a third
    fp64 array for Welford's counts, the stable exponential sum's maxima; int64 for the extremum's
    indices, int32 for the exact filter's smallest-magnitude keys). A filter's second output is its
    int8 certification flags (none where the exact filter recomputes in its own launch: flags=False)."""

    def __init__(self, strategy, acc_dtype, out_dtype, n_out, with_mean, flags=True):
        self.acc_dtype, self.out_dtype, self.n_out = acc_dtype, out_dtype, n_out
        self.with_mean = with_mean or (strategy in FILTERS and flags)
        self.uses_lo = strategy in (COMPENSATED, WELFORD, EXACT)
        # Welford's counts, or the stable exponential sum's running maxima (exact in fp64), or the
        # extremum's indices (int64), or the exact filter's smallest nonzero |x|.
        self.uses_cnt = strategy in (WELFORD, STABLE_EXP, CERTIFIED_EXP, EXACT, *EXTREMA)
        self.cnt_dtype = torch.int64 if strategy in EXTREMA else torch.int32 if strategy == EXACT else torch.float64
        # The exact filter's partial states: t rounded up to fp32 and the uint32 key's bits in int32 --
        # 16 bytes a state instead of 24 (strategies/exact.py, "Partial states").
        self.lo_dtype = torch.float32 if strategy == EXACT else acc_dtype
        # The second output: the extremum's indices, a filter's flags, or a second value.
        if strategy in EXTREMA:
            self.second_dtype = torch.int64
        elif strategy in FILTERS:
            self.second_dtype = torch.int8
        else:
            self.second_dtype = out_dtype

    def outputs(self, x, shape=None):
        """Fresh outputs of n_out elements on x's device: flat, or in `shape` (a replayed call's result
        shape, a tuple of ints), allocated as new_output says (host time)."""
        size = (self.n_out,) if shape is None else (shape or ((),))   # ((),): a 0-d result
        out = new_output(x, size, self.out_dtype)
        mean = x.new_empty(*size, dtype=self.second_dtype) if self.with_mean else None
        return out, mean

    def fused_merge_scratch(self, out, mean, parts):
        """(partial states hi, lo, cnt, arrival counters) of a fused merge: [rows, parts] states and
        zeroed int32 counters, one per row (the kernel uses one per row block, at most that many, and
        leaves them 0 again)."""
        return (*self.destination(out, mean, False, parts),
                torch.zeros(self.n_out, dtype=torch.int32, device=out.device))

    def destination(self, out, mean, last, parts):
        """(hi, lo, cnt) where a pass writes: the output(s) when last, else fresh partial states."""
        if last:
            dst = _bits_if_bf16(out)
            return dst, (_bits_if_bf16(mean) if mean is not None else dst), dst
        hi = torch.empty(parts * self.n_out, dtype=self.acc_dtype, device=out.device)
        lo = torch.empty(hi.shape, dtype=self.lo_dtype, device=out.device) if self.uses_lo else hi
        cnt = torch.empty(hi.shape, dtype=self.cnt_dtype, device=out.device) if self.uses_cnt else hi
        return hi, lo, cnt


def _launch_pass(p, src, dst, shift, strides, workspace, strategy, output, divisor, src_is_state,
                 dst_is_state, merge=None, merge_lanes=0, merge_counter=False, launch_dependents=False,
                 dependent=False, input_format=None, one_launch=False, exp_finish_lanes=0):
    """Launch one pass; returns (compiled kernel or None under the interpreter, grid, trailing args).
    merge: an inner pass's fused merge scratch (Workspace.fused_merge_scratch) with the merging
    pass's lanes and tile_counter, or None. launch_dependents: the next launch is a programmatic
    dependent of this pass (its programs trigger it at their start); dependent: this pass is one (it
    waits for the previous pass's writes before reading them). input_format: the exact filter's input
    format (superaccumulator.INPUT_FORMATS: its grid, for exact_finish; the superaccumulator's, where
    one_launch -- the pass recomputes its uncertified outputs itself, plan.exact_in_one_launch), else
    None. exp_finish_lanes: > 0 where logsumexp's fp32 filter finishes
    its uncertified outputs itself (plan.certified_exp_in_one_launch; an inner pass), its fp64 lanes."""
    stride_outer, stride_red, stride_inner = strides
    shift_ptr, shift_scalars = shift[0], list(shift[1:])
    consts = dict(STRATEGY=strategy, ACC_DTYPE=_TL_DTYPE[workspace.acc_dtype], SRC_IS_STATE=src_is_state,
                  DST_IS_STATE=dst_is_state, DIVIDE=output.divide, USES_LO=workspace.uses_lo,
                  TAKE_SQRT=output.take_sqrt, WRITE_MEAN=output.with_mean, LAUNCH_DEPENDENTS=launch_dependents,
                  **_programmatic(dependent))
    if p.schedule == "inner":
        kernel = inner_kernel
        rows = p.outer * p.inner
        grid = (triton.cdiv(rows, p.block_kept) * p.parts,)
        scalars = [rows, p.inner, stride_outer, stride_inner, stride_red, p.red, p.chunk, p.parts, divisor]
        state_vec = 16 // workspace.acc_dtype.itemsize
        tree_vec = state_vec if src_is_state else 16 // src[0].element_size()
        # Welford's vector part compiled without its partial-tile code (plan.WELFORD_TAIL_FREE_MIN_RED)
        tail_free_min_red = planning.WELFORD_TAIL_FREE_MIN_RED.get(workspace.acc_dtype.itemsize)
        tail_free = strategy == WELFORD and tail_free_min_red is not None and p.red >= tail_free_min_red
        vector_sums = not src_is_state and p.lanes >= 2 * tree_vec and (
            (strategy == EXACT and src[0].element_size() == 2 and p.loop_stages == 1 and planning.EXACT_VECTOR_SUMS)
            or (strategy == WELFORD and planning.WELFORD_VECTOR_MOMENTS)
            or (strategy in (STABLE_EXP, CERTIFIED_EXP) and planning.stable_exp_vectors(
                workspace.acc_dtype.itemsize, src[0].element_size(), p.red)))
        prefetch = ((strategy == EXACT or (strategy == WELFORD and planning.WELFORD_PREFETCH))
                    and not src_is_state and p.loop_stages == 1)
        # exact_word_part: the exact filter's vector lanes over contiguous 16-bit rows of even length, even
        # offsets, 4-byte aligned (measured in plan.EXACT_WORD_LOADS' note)
        word_loads = (vector_sums and prefetch and strategy == EXACT and planning.EXACT_WORD_LOADS
                      and p.red <= planning.EXACT_WORD_LOADS_MAX_RED and p.red % 2 == 0 and stride_red == 1
                      and stride_outer % 2 == 0 and stride_inner % 2 == 0 and src[0].data_ptr() % 4 == 0)
        consts.update(BLOCK_M=p.block_kept, BLOCK_N=p.lanes, LOOP_STAGES=p.loop_stages, MERGE_LANES=merge_lanes,
                      TILE_COUNTER=p.tile_counter, TREE_THREADS=32 * p.num_warps, STATE_TREE_VEC=state_vec,
                      TREE_VEC=tree_vec, MERGE_TILE_COUNTER=merge_counter, VECTOR_SUMS=vector_sums,
                      PREFETCH=prefetch, WORD_LOADS=word_loads,
                      INTERLEAVED=p.interleaved, PART_TAIL=p.part_tail or not tail_free,
                      HALVES_MIN_LANES=planning.PLAIN_HALVES_MIN_LANES,
                      WELFORD_TWO_PASS=strategy == WELFORD and planning.WELFORD_TWO_PASS_VECTORS,
                      EXP_FINISH_LANES=exp_finish_lanes)
        if strategy in (*EXTREMA, *VALUE_EXTREMA) and not src_is_state:
            cap = planning.extremum_register_cap(p, strategy in EXTREMA, src[0].element_size(),
                                                 device_sm_count(dst[0].device))
            if cap is not None:
                consts.update(maxnreg=cap)
    else:
        kernel = outer_kernel
        grid = (p.outer * triton.cdiv(p.inner, p.block_kept) * p.parts,)
        scalars = [p.outer, p.inner, stride_outer, stride_inner, stride_red, p.red, p.chunk, p.parts, divisor]
        consts.update(BLOCK_R=p.lanes, BLOCK_I=p.block_kept, TILE_COUNTER=p.tile_counter, LOOP_STAGES=p.loop_stages)
        # Tile moments (Welford, stable exp, the exact filter) where each thread holds all lanes of its columns
        # (the registers layout: a warp's 16-byte vectors span 32 * vector columns, the warps side by side;
        # plan._outer_pass) -- the exact filter's on 16-bit input and on narrow axes (fewer than
        # plan.OUTER_MIN_WARPS warps wide: plan.NARROW_OUTER_MIN_INNER's note).
        warp_columns = 32 * (16 // src[0].element_size())
        lanes_in_registers = p.block_kept >= warp_columns * p.num_warps
        narrow = p.block_kept < warp_columns * planning.OUTER_MIN_WARPS
        tile_moments = not src_is_state and lanes_in_registers and (
            (strategy == WELFORD and planning.WELFORD_OUTER_TILE_MOMENTS)
            or (strategy == EXACT and (src[0].element_size() in planning.EXACT_OUTER_TILE_MOMENTS or narrow))
            or (strategy in (STABLE_EXP, CERTIFIED_EXP) and planning.STABLE_EXP_VECTORS[workspace.acc_dtype.itemsize]))
        # plan.EXACT_TILE_MAGNITUDE_BOUND's note; tiles within tile_tree_bound's range (the planner's have 8
        # lanes), larger ones keep exact_combine's tree
        bound = (tile_moments and strategy == EXACT and planning.EXACT_TILE_MAGNITUDE_BOUND
                 and p.lanes <= TILE_TREE_MAX_LANES)
        consts.update(TILE_MOMENTS=tile_moments, EXACT_TILE_BOUND=tile_tree_bound(p.lanes) if bound else 0.0)
    # (every constexpr named: a replay passes them all; other strategies take fp32's, the kernels' default)
    man_bits, exp_bits, lsb_exp = INPUT_FORMATS[torch.float32] if input_format is None else input_format
    consts.update(MAN_BITS=man_bits, EXP_BITS=exp_bits, LSB_EXP=lsb_exp,
                  RECOMPUTE_TILE=planning.one_launch_recompute_tile(p) if one_launch else 0)
    if p.schedule == "outer":
        consts.update(RECOMPUTE_ROWS=planning.EXACT_ONE_LAUNCH_COLUMN_ROWS)
    scalars += shift_scalars
    pointers = _pass_pointers(src, dst, shift_ptr, kernel is inner_kernel, merge)
    return _launch(kernel, grid, pointers, scalars, p.num_warps, **consts)


def _pass_pointers(src, dst, shift_ptr, inner: bool, merge=None) -> tuple:
    """A pass's pointer arguments in the kernels' order (tensors at the first launch, addresses in a
    replay): the source's (hi, lo, cnt), the destination's, the shift's source and, for the inner
    kernel, its fused merge's scratch -- or placeholders it never touches."""
    if not inner:
        return (*src, *dst, shift_ptr)
    return (*src, *dst, shift_ptr, *(merge if merge is not None else (*dst, dst[0])))


class _Recipe:
    """The launches of one call signature, replayed on new tensors of that signature."""

    def __init__(self, launches, plan, workspace, recompute=None):
        from triton.runtime import driver  # the GPU driver; never touched under the interpreter

        self.launches = [_BoundLaunch(*launch) for launch in launches]
        self.parts = [p.parts for p in plan.passes]
        self.inner = [p.schedule == "inner" for p in plan.passes]
        self.fused_merge = plan.fused_merge
        self.workspace = workspace
        # A filter's second stage: (launch, the factory of its row chunks' scratch or None, how many
        # scratch pointers it takes), or None.
        self.recompute = None if recompute is None else (_BoundLaunch(*recompute[0]), *recompute[1:])
        self.get_stream = driver.active.get_current_stream
        # The partial states of the passes before the last, one set per CUDA stream, allocated by the
        # first replay on that stream and reused: a call writes and reads them in stream order, before
        # the next call on that stream starts, so reuse is safe there (not across streams, hence the key;
        # nor in a CUDA graph, which gets its own: stream_scratch.py). Each torch.empty costs
        # microseconds of host time, which a split call of a few MB feels. Each holds (tensors, their
        # addresses).
        self.partials = StreamScratch(self._make_partials)
        # a chunked recompute's scratch, per stream likewise
        self.recompute_scratch = None if recompute is None or recompute[1] is None else StreamScratch(
            lambda make=recompute[1]: with_addresses(make()))
        if len(self.launches) == 1 and recompute is None and not self.fused_merge:
            self.run = self._run_one_pass
            # The one pass's pointers from (source, out, mean): run's _pass_pointers, worked out once
            # on the positions and replayed by a C-level itemgetter.
            self.one_pass_pointers = operator.itemgetter(*_pass_pointers((0, 0, 0), (1, 2, 1), 0, self.inner[0]))

    def _run_one_pass(self, x: torch.Tensor, shape=None):
        """run() of a recipe whose one pass writes the outputs (no scratch, no second stage; most small
        calls): the same launch and pointers as run's loop builds, with less host time per call (CPU
        host, launch stubbed: 1.69 -> 1.46 us per replay)."""
        out, mean = self.workspace.outputs(x, shape)
        out_ptr = out.data_ptr()
        self.launches[0](self.get_stream(x.get_device()), self.one_pass_pointers(
            (x.data_ptr(), out_ptr, mean.data_ptr() if mean is not None else out_ptr)))
        return out, mean

    def run(self, x: torch.Tensor, shape=None):
        """The call's (output, second output or None), flat or in `shape` (contiguous either way: the
        kernels address them flat). The kernels get raw addresses: Triton's launcher asks each tensor
        for data_ptr() and the driver for its attributes (cuPointerGetAttribute), microseconds per
        call of a dozen pointers, which a small reduction's host time feels. Every address is of a
        tensor this call holds (x, the outputs) or the recipe keeps (the per-stream scratch)."""
        out, mean = self.workspace.outputs(x, shape)
        stream = self.get_stream(x.get_device())
        scratch = self.partials.get(stream, out, mean)   # held until the launches are queued
        partials = scratch[1]
        source = x.data_ptr()
        out_ptr = out.data_ptr()
        mean_ptr = mean.data_ptr() if mean is not None else out_ptr
        src = (source, source, source)
        last = len(self.launches) - 1
        merge = partials[0] if self.fused_merge else None
        for index, launch in enumerate(self.launches):
            # The last pass writes the outputs (Workspace.destination(out, mean, True, 1), as addresses).
            dst = (out_ptr, mean_ptr, out_ptr) if index == last else partials[index]
            launch(stream, _pass_pointers(src, dst, source, self.inner[index], merge))
            src = dst
        if self.recompute is not None:
            launch, make_scratch, n_scratch = self.recompute
            scratch = (mean_ptr,) * n_scratch   # placeholders: rows of one chunk need no scratch
            if make_scratch is not None:   # counters zero on entry, left zero by the kernel: reused
                tensors, scratch = self.recompute_scratch.get(stream)   # tensors held until launched
            launch(stream, [source, out_ptr, mean_ptr, *scratch])
            return out, None
        return out, mean

    def _make_partials(self, out, mean):
        """A stream's partial states (on the outputs' device): a fused merge's scratch (its counters start
        at 0 and are left at 0), or the destinations of the passes before the last -- (the tensor
        groups, their addresses)."""
        groups = ([self.workspace.fused_merge_scratch(out, mean, self.parts[0])] if self.fused_merge else
                  [self.workspace.destination(out, mean, False, parts) for parts in self.parts[:-1]])
        return groups, [tuple(t.data_ptr() for t in g) for g in groups]


def wire_to_row_kernel(t: torch.Tensor) -> torch.Tensor:
    """How a tensor travels to the kernels that hold whole rows (softmax, layer_norm / rms_norm): on the
    GPU bf16 goes as bf16 -- the hardware widens exactly and narrows with cvt.rn (round to nearest even,
    what the int16 path writes out for the interpreter), measured 3-20% faster for bf16 rows (H100,
    softmax bf16 8192^2: 2768 -> 2846 GB/s) -- and under the interpreter as its int16 bits."""
    return t if t.is_cuda else _bits_if_bf16(t)


def _bits_if_bf16(t: torch.Tensor) -> torch.Tensor:
    """bf16 tensors travel to the kernels as int16 bit patterns (a view, no copy): the kernels widen and
    round bf16 themselves, because Triton's interpreter flushes bf16 subnormals and truncates."""
    return t.view(torch.int16) if t.dtype == torch.bfloat16 else t
