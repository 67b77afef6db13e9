"""Every schedule computes the right thing: on small-integer data (every partial sum exact in the
accumulator) each mode and each plan must return the exact sum bitwise, and a row must give the same
bits alone and inside a batch (its plan's per-row order does not depend on the batch size)."""
from dataclasses import replace

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import precred
from precred.launch import Output, plan_for, reduce, reduce_sum
from precred.modes import get_mode
from precred.schedules.grid import block_indices
from precred.strategies import EXTREMA, VALUE_EXTREMA
from validation import generators as gen
from validation.oracle import reference_sum

from conftest import mode_takes

MODES = list(precred.MODES)
# Each setting drives the planner to a different schedule mix on small inputs.
PLANNERS = {
    "default": {},
    "split": dict(sm_count=64, split_min_bytes=0),     # few outputs: the split schedule, 2 passes
    "chains": dict(tile_elements=16, sm_count=1),      # long lane chains, no split
    "split+chains": dict(tile_elements=16, sm_count=64, split_min_bytes=0),
}


def _run(x, dims, mode, planner, out_dtype=None):
    m = get_mode(mode)
    _, plan = plan_for(x, dims, m, **PLANNERS[planner])
    return reduce_sum(x, dims, m, out_dtype or x.dtype, False, plan=plan).cpu(), plan


@pytest.mark.parametrize("planner", list(PLANNERS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_small_integer_sums_are_exact_on_every_schedule(device, planner, dtype):
    rng = np.random.default_rng(1)
    x = torch.stack([gen.small_integers(300, rng, dtype, -3, 3) for _ in range(3)])  # (3, 300)
    cases = [(x, (1,)), (x.t().contiguous(), (0,)), (x, (0, 1)), (x.t(), (1,)),
             (x.reshape(3, 3, 100), (1,)), (x.reshape(3, 3, 100), (0, 2))]
    seen = set()
    for source, dims in cases:
        want, _ = reference_sum(source, dim=dims)
        for mode in MODES:
            if not mode_takes(mode, dtype):
                continue
            got, plan = _run(source.to(device), dims, mode, planner)
            assert torch.equal(got.view(want.shape), want), (mode, dims, plan)
            seen.add(plan.schedule)
    if planner == "split+chains":
        assert {"inner+split", "outer+split"} <= seen, seen
    elif planner == "split":
        assert "inner+split" in seen, seen
    else:
        assert {"inner", "outer"} <= seen, seen


@pytest.mark.parametrize("mode", ["fast", "fp64"])
def test_outer_registers_layout_is_exact_on_small_integers(device, mode):
    # A kept axis >= 4 warps of 16-byte vectors wide and a reduced axis >= 64 long: chained plain passes
    # take the outer layout whose lane tree stays in registers (every thread holds all lanes).
    x = gen.small_integers(64 * 600, np.random.default_rng(4), torch.float32, -3, 3).view(64, 600)
    want, _ = reference_sum(x, dim=(0,))
    got, plan = _run(x.to(device), (0,), mode, "default")
    first = plan.passes[0]
    assert first.schedule == "outer" and first.block_kept == first.num_warps * 32 * 4, plan
    assert torch.equal(got.view(want.shape), want)


@pytest.mark.parametrize("mode", MODES)
def test_row_gives_same_bits_alone_and_in_a_batch(device, mode):
    rng = np.random.default_rng(2)
    batch = torch.stack([gen.normal(513, rng, torch.float32) for _ in range(6)]).to(device)
    together = precred.sum(batch, 1, mode=mode).cpu()
    for r in range(6):
        alone = precred.sum(batch[r:r + 1], 1, mode=mode).cpu()
        assert torch.equal(alone[0], together[r])


def test_pairwise_plans_are_whole_trees_on_the_device(device):
    x = torch.ones(3, 10000, device=device)
    _, plan = plan_for(x, (1,), get_mode("pairwise"))
    # every tile one balanced tree, the tiles merged by the binary counter: depth ceil(log2 10000) = 14
    assert all(p.tile_counter or p.tiles_per_lane == 1 for p in plan.passes)
    assert plan.depth == 14
    assert torch.equal(precred.sum(x, 1, mode="pairwise").cpu(), torch.full((3,), 10000.0))


FUSED_MERGE_CASES = {   # (mode, output, out dtype or None for the input's) of every strategy
    "fast": (precred.modes.MODES["fast"], Output(divide=True), None),
    "pairwise": (precred.modes.MODES["pairwise"], Output(), None),
    "kahan": (precred.modes.MODES["kahan"], Output(), None),
    "fp64": (precred.modes.MODES["fp64"], Output(), torch.float64),
    "exact": (precred.modes.MODES["exact"], Output(divide=True), None),
    "var fast": (precred.modes.VAR_MODES["fast"], Output(correction=1.0, with_mean=True), None),
    "var fp64": (precred.modes.VAR_MODES["fp64"], Output(correction=0.0, take_sqrt=True), None),
    "logsumexp": (precred.modes.EXP_MODES["fast"], Output(), None),
    "softmax's reduction": (precred.modes.EXP_MODES["fp64"], Output(with_mean=True), torch.float64),
    "argmax": (precred.modes.MAXIMUM_MODE, Output(with_mean=True), None),
    "argmin": (precred.modes.MINIMUM_MODE, Output(with_mean=True), None),
    "amax": (precred.modes.MAXIMUM_VALUE_MODE, Output(), None),
    "amin": (precred.modes.MINIMUM_VALUE_MODE, Output(), None),
    "prod": (precred.modes.PROD_MODES["fast"], Output(), None),
}


@pytest.mark.parametrize("case", list(FUSED_MERGE_CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_merge_gives_the_bits_of_the_merging_pass(device, case, dtype):
    # A split of two inner passes runs as one launch whose last program per row merges the parts
    # (Plan.fused_merge); it must reproduce the second launch's bits -- values, means, indices, the
    # exact filter's flags -- for every strategy, every time. (Replayed CUDA calls reuse the arrival
    # counters, which the kernel leaves at 0: test_gpu_only's replay tests see a stale counter as a
    # missing output.)
    mode, output, out_dtype = FUSED_MERGE_CASES[case]
    rng = np.random.default_rng(7)
    x = torch.from_numpy(rng.standard_normal((3, 700)) * 4 + 1).to(dtype)
    x[1, 555] = x[1, 100] = x.max() + 1   # ties: the first index wins
    if case == "prod":
        x = (1 + x.float() / 64).to(dtype)
    x = x.to(device)
    overrides = dict(sm_count=64, split_min_bytes=0)
    if case == "pairwise":   # its lanes would span the whole row: smaller tiles and fewer SMs make it split
        overrides.update(tile_elements=64, sm_count=4)   # into parts of several tiles (the binary counter)
    if case in ("fast", "fp64", "kahan"):   # short rows narrow their lanes to 2 tiles (PLAIN_MIN_TILES_PER_LANE):
        overrides.update(tile_elements=64)   # 256 lanes, too wide to split 700
    _, plan = plan_for(x, (1,), mode, out_dtype, **overrides)
    # amax / amin on sm_90 merge in a dependent launch instead (Plan.dependent_merge); the fused merge
    # stays their kernel elsewhere (the interpreter, older GPUs), so it is tested for them too.
    assert (plan.fused_merge or plan.dependent_merge) and plan.passes[0].parts > 1, plan
    plan = replace(plan, fused_merge=True, dependent_merge=False)
    assert plan.passes[0].tile_counter == (case == "pairwise"), plan
    two_launches = reduce(x, (1,), mode, out_dtype or x.dtype, output, replace(plan, fused_merge=False))
    for _ in range(2):
        fused = reduce(x, (1,), mode, out_dtype or x.dtype, output, plan)
        for got, want in zip(fused, two_launches):
            assert (got is None) == (want is None)
            if got is not None:
                assert torch.equal(got.view(torch.uint8), want.view(torch.uint8)) if got.dtype.is_floating_point \
                    else torch.equal(got, want), (case, got, want)


INTERLEAVED_CASES = {
    "fast": get_mode("fast"),
    "kahan": get_mode("kahan"),
    "fp64": get_mode("fp64"),
    "argmax": precred.modes.MAXIMUM_MODE,
    "argmin": precred.modes.MINIMUM_MODE,
    "amax": precred.modes.MAXIMUM_VALUE_MODE,
    "amin": precred.modes.MINIMUM_VALUE_MODE,
}


@pytest.mark.parametrize("case", list(INTERLEAVED_CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_interleaved_parts_give_what_consecutive_parts_give(device, case, dtype):
    # A long split of the sums and the extrema interleaves its parts' tiles (plan.Pass.interleaved: part
    # p reads tiles p, p + parts, ...). The extrema are exact in any order: values and first indices must
    # be the consecutive parts' bits -- with ties whose smaller index lies in a later part, a NaN, and the
    # row's partial last tile in a part other than the first. The sums, on small integers, must be exact.
    # (Small rows and tiles, the split forced and its parts interleaved by hand; which plans the planner
    # interleaves: test_long_splits_interleave_for_the_chained_strategies.)
    if case == "kahan" and dtype.itemsize == 2:
        pytest.skip("kahan over 16-bit input runs the fp64 mode (modes.sum_mode): the fp64 case")
    mode = INTERLEAVED_CASES[case]
    rng = np.random.default_rng(11)
    red = 1000   # a partial last tile
    first_tie, second_tie, nan_at = 150, 800, 333
    if mode.strategy in EXTREMA + VALUE_EXTREMA:
        x = torch.from_numpy(rng.standard_normal((4, red)) * 4).to(dtype)
        top = float(x.abs().max()) + 1
        x[1, second_tie] = x[1, first_tie] = top    # the first index sits in a later part than the second
        x[2, second_tie] = x[2, first_tie] = -top   # the same for the minima
        x[3, nan_at] = float("nan")
    else:
        x = gen.small_integers(4 * red, rng, dtype, -3, 3).reshape(4, red)
    x = x.to(device)
    _, consecutive = plan_for(x, (1,), mode, sm_count=4, split_min_bytes=0, tile_elements=64, short_part_tiles=0)
    first = consecutive.passes[0]
    assert first.parts > 1 and first.chunk > first.lanes and not first.interleaved, consecutive
    assert (-(-red // first.lanes) - 1) % first.parts != 0, first   # the partial last tile is not part 0's
    assert (first_tie // first.lanes) % first.parts > (second_tie // first.lanes) % first.parts, first
    interleaved = replace(consecutive, passes=(replace(first, interleaved=True), *consecutive.passes[1:]))
    with_index = mode.strategy in EXTREMA
    output = Output(with_mean=with_index)
    want = reduce(x, (1,), mode, x.dtype, output, consecutive)
    bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[dtype.itemsize]
    for _ in range(2):
        got = reduce(x, (1,), mode, x.dtype, output, interleaved)
        if mode.strategy in EXTREMA + VALUE_EXTREMA:
            assert torch.equal(got[0].view(bits), want[0].view(bits))
            if with_index:
                assert torch.equal(got[1], want[1])
                tie_row = 1 if mode.strategy == precred.modes.MAXIMUM else 2
                assert int(got[1][tie_row]) == first_tie and int(got[1][3]) == nan_at, got[1]
        else:
            exact, _ = reference_sum(x.cpu(), dim=(1,))
            assert torch.equal(got[0].cpu().view(exact.shape), exact), (case, got[0], exact)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_long_splits_interleave_for_the_chained_strategies(dtype):
    # Which plans the planner interleaves (plan.LONG_SPLIT_WARPS' note): the long splits of the sums and
    # the extrema, not pairwise (power-of-two runs of tiles) or the exact filter (its own loop), neither of
    # which the kernels interleave. Planning only.
    x = torch.empty((1, 40 * 4096 - 100), dtype=dtype)
    for case, mode in [*INTERLEAVED_CASES.items(), ("pairwise", get_mode("pairwise")), ("exact", get_mode("exact"))]:
        first = plan_for(x, (1,), mode, sm_count=1, split_min_bytes=0, tile_elements=4096)[1].passes[0]
        expected = case not in ("pairwise", "exact")
        assert first.parts > 1 and first.interleaved == expected, (case, first)


def test_unsplit_long_rows_take_the_measured_warps_and_stages():
    # plan.LONG_ROW_STAGES' note: unsplit rows of at least LONG_SPLIT_MIN_TILES tiles per lane run the plain
    # sums over 16-bit input on LONG_SPLIT_WARPS warps, and kahan and the extrema over 4-byte input with
    # at most LONG_ROW_STAGES stages; the fp32 plain sums keep 8 warps and LOOP_STAGES["inner"]. Planning
    # only (the kernels run these plans in test_pipelined_loops_give_the_same_bits and on the GPU).
    rows = {dtype: torch.empty((4, 65536), dtype=dtype) for dtype in (torch.float32, torch.bfloat16)}
    def first(dtype, mode):
        return plan_for(rows[dtype], (1,), mode, sm_count=1)[1].passes[0]
    assert first(torch.bfloat16, get_mode("fast")).num_warps == precred.plan.LONG_SPLIT_WARPS
    plain_fp32 = first(torch.float32, get_mode("fast"))
    assert (plain_fp32.num_warps, plain_fp32.loop_stages) == (8, precred.plan.LOOP_STAGES["inner"])
    for mode in (get_mode("kahan"), precred.modes.MAXIMUM_MODE, precred.modes.MAXIMUM_VALUE_MODE):
        p = first(torch.float32, mode)
        assert p.parts == 1 and p.num_warps == 8 and p.loop_stages == precred.plan.LONG_ROW_STAGES, (mode, p)


def test_indexed_extrema_past_2_pow_31_keep_consecutive_parts():
    # An interleaved part counts its indices along the whole row in int32 (schedules/steps.py): the
    # indexed extrema of rows of 2^31 - 1 elements or more keep the plan before the long splits
    # (consecutive parts, whose indices count within a part; test_gpu_only runs such a row); the value
    # alone, and the sums, interleave.
    x = torch.zeros(1, dtype=torch.bfloat16).expand(2 ** 31 + 17)
    planned = {name: plan_for(x, (0,), mode, sm_count=132)[1].passes[0]
               for name, mode in [("argmax", precred.modes.MAXIMUM_MODE), ("amax", precred.modes.MAXIMUM_VALUE_MODE),
                                  ("fast", get_mode("fast"))]}
    assert all(p.parts > 1 for p in planned.values()), planned
    assert not planned["argmax"].interleaved and planned["amax"].interleaved and planned["fast"].interleaved
    assert planned["argmax"].chunk < 2 ** 31 - 1 and planned["argmax"].num_warps <= 8   # the plan before


@triton.jit
def _block_indices_kernel(out_ptr, block, count, BLOCK: tl.constexpr):
    tl.store(out_ptr + tl.arange(0, BLOCK), block_indices(block, BLOCK, count))


@pytest.mark.parametrize("count,wraps", [(2 ** 31 + 16, False), (2 ** 33, False), (2 ** 31 - 1, True), (1, True)])
def test_block_indices_take_the_type_of_their_count(device, count, wraps):
    # Every schedule's row / output / column indices (schedules/grid.py): int64 where the count they run
    # to is 2^31 or more (Triton types such an argument int64), so the indices of a call of 2^31 rows or
    # more do not wrap (test_gpu_only runs such calls); below, int32, the type they had (no register
    # more): block 2^29 of 8 wraps there, in the interpreter as on the GPU.
    out = torch.zeros(8, dtype=torch.int64, device=device)
    _block_indices_kernel[(1,)](out, 2 ** 29, count, BLOCK=8)
    want = torch.arange(8, dtype=torch.int64) + 2 ** 32
    assert torch.equal(out.cpu(), want - 2 ** 32 if wraps else want)
