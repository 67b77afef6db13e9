"""The planner and the layout: pure functions, checked without launching kernels."""
import itertools
import math
from dataclasses import replace

import pytest
import torch

from precred import plan as plan_module
from precred.layout import reduction_view
from precred.plan import (LONG_ROW_STAGES, LONG_SPLIT_PROGRAMS_PER_SM, LONG_SPLIT_WARPS, LOOP_STAGES, PIPELINE_MIN_TILES,
                          PIPELINE_SMEM_BYTES, ROW_LOOP_MAX_ROW_BYTES,
                          SHORT_PART_TILES, SHORT_SPLIT_PROGRAMS_PER_SM, STATE_PASS_MIN_COLUMNS, TILE_BYTES,
                          ROW_LOOP_MIN_ROWS_PER_SM, SINGLE_READ_MAX_ROW, SINGLE_READ_MAX_STRIDED_ROW, SINGLE_READ_MIN_COLUMNS,
                          VALUE_EXTREMA_SHORT_SPLIT,
                          plan_norm_backward, plan_reduction, plan_row_loop, plan_single_read)

H100_SMS = 132
DESIGN_SHAPES = [(16, 262144), (1024, 65536), (8192, 8192), (65536, 1024), (262144, 256), (64, 4096)]


def _check_plan_invariants(plan, outer, red, inner):
    n_out = outer * inner
    prev = None
    for p in plan.passes:
        assert p.lanes & (p.lanes - 1) == 0 and p.block_kept & (p.block_kept - 1) == 0
        assert p.chunk % p.lanes == 0
        assert p.parts == -(-p.red // p.chunk), "parts must cover the reduced axis exactly once"
        assert p.outer * p.inner == n_out
        if prev is not None:
            assert p.red == prev.parts, "each later pass merges exactly the previous pass's partial states"
        prev = p
    assert plan.passes[0].red == red and plan.passes[-1].parts == 1


@pytest.mark.parametrize("shape", DESIGN_SHAPES)
@pytest.mark.parametrize("reduce_dim", [1, 0])
@pytest.mark.parametrize("pairwise", [False, True])
def test_plan_invariants_on_design_shapes(shape, reduce_dim, pairwise):
    rows, cols = shape
    if reduce_dim == 1:
        outer, red, inner, contiguous = rows, cols, 1, False
    else:
        outer, red, inner, contiguous = 1, rows, cols, True
    plan = plan_reduction(outer, red, inner, inner_contiguous=contiguous, whole_tree=pairwise,
                          sm_count=H100_SMS)
    _check_plan_invariants(plan, outer, red, inner)
    assert plan.passes[0].schedule == ("inner" if reduce_dim == 1 else "outer")
    if pairwise:
        # The whole reduction is one tree: its depth exceeds ceil(log2 n) by at most one per extra pass.
        # Counter passes over power-of-two parts (or parts of one tile) add up to one balanced tree over
        # the row or column.
        assert all(p.tile_counter or p.tiles_per_lane == 1 for p in plan.passes)
        assert plan.depth == math.ceil(math.log2(red))


def test_few_long_rows_are_split_to_fill_the_gpu():
    plan = plan_reduction(16, 262144, 1, inner_contiguous=False, whole_tree=False, sm_count=H100_SMS)
    first = plan.passes[0]
    assert len(plan.passes) == 2 and first.parts > 1
    # Short parts (plan.SHORT_PART_TILES): fewer, longer parts -- every SM busy, at most
    # SHORT_SPLIT_PROGRAMS_PER_SM programs on each, each lane running SHORT_PART_TILES tiles.
    programs = 16 * first.parts
    assert H100_SMS <= programs <= SHORT_SPLIT_PROGRAMS_PER_SM * H100_SMS
    assert first.tiles_per_lane >= SHORT_PART_TILES
    # The split asked of amax / amin with a dependent merge (plan.VALUE_EXTREMA_SHORT_SPLIT): more,
    # shorter parts -- more programs than the default's, at most that many per SM, lanes narrowed to
    # (at least) that many tiles.
    programs_per_sm, part_tiles = VALUE_EXTREMA_SHORT_SPLIT
    extrema = plan_reduction(16, 262144, 1, inner_contiguous=False, whole_tree=False, sm_count=H100_SMS,
                             short_part_tiles=part_tiles, short_split_programs_per_sm=programs_per_sm,
                             dependent_merge=True)
    assert programs < 16 * extrema.passes[0].parts <= programs_per_sm * H100_SMS, extrema
    assert extrema.passes[0].tiles_per_lane >= part_tiles and extrema.dependent_merge
    full = plan_reduction(1, 2 ** 28, 1, inner_contiguous=False, whole_tree=False, sm_count=H100_SMS)
    assert full.passes[0].parts >= 4 * H100_SMS // 2
    # Depth of the fast/kahan tree stays far below n: lanes chains plus two trees.
    assert full.depth < 2 ** 28 // 1000


def test_long_splits_run_wide_interleaved_programs_where_asked():
    # plan.LONG_SPLIT_WARPS: a long split of an inner first pass, where its strategy asks (precred.launch.
    # plan_for), runs LONG_SPLIT_PROGRAMS_PER_SM programs per SM of LONG_SPLIT_WARPS warps when its tile
    # gives each thread 16-byte vectors, its parts interleaved where asked (not pairwise: its parts are
    # power-of-two runs of tiles); the chains stay within chunk / lanes tiles, so Pass.depth holds.
    for outer, red, element_size in [(1, 2 ** 28, 4), (1, 2 ** 28, 2), (3, 10 ** 8 + 3, 4)]:
        def planned(**options):
            return plan_reduction(outer, red, 1, inner_contiguous=False, sm_count=H100_SMS,
                                  element_size=element_size, **{"whole_tree": False, **options})
        asked = planned(wide_long_splits=True, interleave_long_splits=True)
        first = asked.passes[0]
        assert first.parts > 1 and first.interleaved and not any(p.interleaved for p in asked.passes[1:])
        assert first.num_warps == LONG_SPLIT_WARPS and first.lanes * element_size >= 16 * 32 * LONG_SPLIT_WARPS
        assert outer * first.parts <= LONG_SPLIT_PROGRAMS_PER_SM * H100_SMS
        tiles = -(-red // first.lanes)
        assert -(-tiles // first.parts) <= first.tiles_per_lane   # part 0 runs the most tiles
        wide_only = planned(wide_long_splits=True).passes[0]
        assert wide_only == replace(first, interleaved=False)
        # pairwise keeps its plan (its parts: power-of-two runs of tiles; measured slower wide)
        assert planned(whole_tree=True, wide_long_splits=True, interleave_long_splits=True) == planned(whole_tree=True)
        unasked = planned().passes[0]
        assert not unasked.interleaved and unasked.num_warps <= 8
    # an fp64 accumulator over 16-bit input (2048 lanes: 8-byte vectors on 16 warps) keeps its plan
    options = dict(inner_contiguous=False, whole_tree=False, sm_count=H100_SMS, element_size=2, accumulator_size=8)
    assert plan_reduction(1, 2 ** 28, 1, **options, wide_long_splits=True) == plan_reduction(1, 2 ** 28, 1, **options)
    # the short parts of few long rows (plan.SHORT_PART_TILES, decided as without wide splits) and parts
    # of fewer than plan.LONG_SPLIT_MIN_TILES tiles per lane (the exact filter's 16x262144, never short)
    # keep their plan; unsplit passes and outer passes have nothing to split
    for shape, contiguous, inner, tile, short in [((16, 262144), False, 1, None, 8), ((16, 262144), False, 1, 2048, 8),
                                                  ((16, 262144), False, 1, 2048, 0), ((8192, 8192), False, 1, None, 8),
                                                  ((16, 262144), True, 64, None, 8)]:
        options = dict(inner_contiguous=contiguous, whole_tree=False, sm_count=H100_SMS, tile_elements=tile,
                       short_part_tiles=short)
        assert plan_reduction(*shape, inner, **options, wide_long_splits=True, interleave_long_splits=True) == \
            plan_reduction(*shape, inner, **options)


def test_unsplit_long_rows_take_wide_programs_or_fewer_stages_where_asked():
    # plan.LONG_ROW_STAGES' note: an inner first pass of one row per program, unsplit, whose lanes run at
    # least LONG_SPLIT_MIN_TILES tiles (1024 x 65536) runs long_row_warps warps where asked
    # and the tile gives every thread 16-byte vectors, and at most long_row_stages stages where asked; the
    # lanes, chunks and parts (the order of the operations) stay those of the plan not asked.
    options = dict(inner_contiguous=False, whole_tree=False, sm_count=H100_SMS, pipelined=True)
    for element_size in (4, 2):
        plain = plan_reduction(1024, 65536, 1, element_size=element_size, **options)
        wide = plan_reduction(1024, 65536, 1, element_size=element_size, long_row_warps=LONG_SPLIT_WARPS, **options)
        assert len(plain.passes) == 1 and plain.passes[0].num_warps == 8
        assert wide.passes[0] == replace(plain.passes[0], num_warps=LONG_SPLIT_WARPS)
        staged = plan_reduction(1024, 65536, 1, element_size=element_size, long_row_stages=LONG_ROW_STAGES,
                                **options)
        if element_size == 4:   # 16-bit rows of one part keep plain loops (plan_16bit_rows is not asked here)
            assert plain.passes[0].loop_stages == LOOP_STAGES["inner"] > LONG_ROW_STAGES
        assert staged.passes[0] == replace(plain.passes[0],
                                           loop_stages=min(plain.passes[0].loop_stages, LONG_ROW_STAGES))
    # an fp64 accumulator's 2048 lanes over 16-bit input give 16-byte vectors to 8 warps, not 16: 8 (the
    # tile's own are 4)
    fp64 = dict(options, element_size=2, accumulator_size=8)
    own = plan_reduction(1024, 65536, 1, **fp64)
    assert own.passes[0].lanes * 2 == 16 * 32 * 8 and own.passes[0].num_warps == 4, own
    assert (plan_reduction(1024, 65536, 1, long_row_warps=LONG_SPLIT_WARPS, **fp64)
            == replace(own, passes=(replace(own.passes[0], num_warps=8),)))
    # rows of fewer tiles per lane, several rows per program, split rows, outer passes and pairwise keep
    # their plans
    for shape, inner, contiguous, whole_tree in [((8192, 8192), 1, False, False), ((65536, 1024), 1, False, False),
                                                 ((16, 262144), 1, False, False), ((1, 2 ** 28), 1, False, False),
                                                 ((1, 1024), 65536, True, False), ((1024, 65536), 1, False, True)]:
        asked = dict(options, inner_contiguous=contiguous, whole_tree=whole_tree)
        assert plan_reduction(*shape, inner, long_row_warps=LONG_SPLIT_WARPS, long_row_stages=2, **asked) == \
            plan_reduction(*shape, inner, **asked), shape


@pytest.mark.parametrize("shape", DESIGN_SHAPES + [(1, 2 ** 28), (3, 10 ** 7)])
@pytest.mark.parametrize("reduce_dim", [1, 0])
@pytest.mark.parametrize("pairwise", [False, True])
def test_exactly_the_two_pass_inner_splits_fuse_or_depend_their_merge(shape, reduce_dim, pairwise):
    # Plan.fused_merge: the merge runs in the first launch for a split of two inner passes, and only
    # there (outer passes and longer chains keep their launches).
    rows, cols = shape
    outer, red, inner = (rows, cols, 1) if reduce_dim == 1 else (1, rows, cols)
    plan = plan_reduction(outer, red, inner, inner_contiguous=reduce_dim == 0, whole_tree=pairwise,
                          sm_count=H100_SMS)
    two_inner = len(plan.passes) == 2 and all(p.schedule == "inner" for p in plan.passes)
    assert plan.fused_merge == two_inner and not plan.dependent_merge
    # Plan.dependent_merge (plan.PROGRAMMATIC_MERGE_STRATEGIES on sm_90): the same passes, the merge a
    # second launch instead of fused, on exactly those plans.
    dependent = plan_reduction(outer, red, inner, inner_contiguous=reduce_dim == 0, whole_tree=pairwise,
                               sm_count=H100_SMS, dependent_merge=True)
    assert dependent.passes == plan.passes
    assert (dependent.dependent_merge, dependent.fused_merge) == (two_inner, False)
    if rows * cols >= 2 ** 22 and rows <= 16 and reduce_dim == 1 and not pairwise:
        assert plan.fused_merge, plan   # few long rows: the cases the fusion is for (pairwise's 2^28
                                        # tree takes three passes)


@pytest.mark.parametrize("shape", DESIGN_SHAPES)
@pytest.mark.parametrize("pairwise", [False, True])
@pytest.mark.parametrize("element_size,heavy", [(4, False), (2, False), (4, True), (2, True)])
def test_outer_merge_passes_fill_the_gpu_without_changing_their_tree(shape, pairwise, element_size, heavy,
                                                                     monkeypatch):
    # An outer pass over partial states narrows its column block (STATE_PASS_MIN_COLUMNS) until two
    # programs per SM run; its lanes, chunks and parts -- the additions and their order -- stay those
    # of the full block.
    rows, cols = shape
    options = dict(inner_contiguous=True, whole_tree=pairwise, sm_count=H100_SMS, element_size=element_size,
                   heavy_state=heavy)
    plan = plan_reduction(1, rows, cols, **options)
    monkeypatch.setattr(plan_module, "STATE_PASS_MIN_COLUMNS", 0)
    full = plan_module.plan_reduction.__wrapped__(1, rows, cols, **options)   # uncached: the full block
    assert len(plan.passes) == len(full.passes) and plan.passes[0] == full.passes[0]
    for p, f in zip(plan.passes[1:], full.passes[1:]):
        assert p.schedule == "outer"
        assert (p.lanes, p.chunk, p.parts, p.tile_counter, p.depth) == (f.lanes, f.chunk, f.parts, f.tile_counter,
                                                                       f.depth)
        programs = -(-p.inner // p.block_kept)
        assert programs >= 2 * H100_SMS or p.block_kept == min(f.block_kept, STATE_PASS_MIN_COLUMNS)
    if cols <= 8192 and len(plan.passes) > 1:
        assert plan.passes[1].block_kept < full.passes[1].block_kept   # 8192^2 .. 262144x256 narrow


@pytest.mark.parametrize("red", [256, 1024, 4096, 65536, 2 ** 20, 1999, 4097, 65536 + 8])
def test_a_part_ends_in_a_partial_tile_only_where_the_row_does(red):
    """Pass.part_tail (schedules/inner.py PART_TAIL: the Welford vector part's partial-tile code is
    compiled only where it is set) holds wherever some part of the pass ends in a partial tile: the
    parts' ends are chunk multiples (whole tiles) but the row's, so the last tile of the last part."""
    for rows, tile in ((8, None), (1, None), (4, 64)):
        plan = plan_reduction(rows, red, 1, inner_contiguous=False, whole_tree=False, sm_count=H100_SMS,
                              tile_elements=tile, split_min_bytes=0)
        for p in plan.passes:
            ends = [min((part + 1) * p.chunk, p.red) for part in range(p.parts)]
            partial = any((end - part * p.chunk) % p.lanes for part, end in enumerate(ends))
            assert p.part_tail == partial, (red, p)


def test_many_rows_are_not_split():
    plan = plan_reduction(65536, 1024, 1, inner_contiguous=False, whole_tree=False, sm_count=H100_SMS)
    assert len(plan.passes) == 1 and plan.passes[0].block_kept >= 1


@pytest.mark.parametrize("shape", DESIGN_SHAPES + [(1, 2 ** 28)])
@pytest.mark.parametrize("pairwise", [False, True])
@pytest.mark.parametrize("element_size,accumulator_size", [(4, 4), (2, 8), (4, 8)])
def test_only_long_loops_of_pipelined_plans_are_pipelined(shape, pairwise, element_size, accumulator_size):
    """loop_stages > 1 only where asked (launch.PIPELINED_STRATEGIES) and only for loops of at least
    PIPELINE_MIN_TILES tiles per lane -- pairwise's one-tile inner lanes and 16 x 262144's split (2 tiles
    per lane, measured slower pipelined) keep the plain loop -- never more than the schedule's
    LOOP_STAGES, and the tiles in flight fit PIPELINE_SMEM_BYTES (first passes read the input, later
    ones partial states: two accumulator arrays and an 8-byte one at most)."""
    outer, red = shape
    for inner, contiguous in ((1, False), (red, True)):   # dim=-1 (inner), dim=0 of the transpose
        kept = (outer, red, 1) if inner == 1 else (1, outer, red)
        kwargs = dict(inner_contiguous=contiguous, whole_tree=pairwise, sm_count=H100_SMS,
                      element_size=element_size, accumulator_size=accumulator_size)
        plain = plan_reduction(*kept, **kwargs)
        piped = plan_reduction(*kept, **kwargs, pipelined=True)
        assert all(p.loop_stages == 1 for p in plain.passes)
        for i, (p, q) in enumerate(zip(plain.passes, piped.passes)):
            assert q == p.__class__(**{**p.__dict__, "loop_stages": q.loop_stages}), "nothing else changes"
            assert 1 <= q.loop_stages <= LOOP_STAGES[q.schedule]
            tile_bytes = q.lanes * q.block_kept * (element_size if i == 0 else 8 + 2 * accumulator_size)
            if q.loop_stages > 1:
                assert q.tiles_per_lane >= PIPELINE_MIN_TILES, (kept, q)
                assert (q.loop_stages - 1) * tile_bytes <= PIPELINE_SMEM_BYTES, (kept, q)
            elif q.tiles_per_lane >= PIPELINE_MIN_TILES:
                assert tile_bytes > PIPELINE_SMEM_BYTES, ("a long loop left plain", kept, q)
    # plain_16bit_rows: unsplit 16-bit rows of PLAIN_16BIT_ROWS_MIN_RED or more run the plain loop (its
    # loads keep the evict_first hint); shorter or split ones and fp32 rows the pipeline
    for (outer, red), element_size, stages in (((1024, 65536), 2, 1), ((1024, 65536), 4, LOOP_STAGES["inner"]),
                                               ((65536, 256), 2, LOOP_STAGES["inner"]),
                                               ((1, 2 ** 28), 2, LOOP_STAGES["inner"])):
        rows = plan_reduction(outer, red, 1, inner_contiguous=False, whole_tree=False, sm_count=H100_SMS,
                              element_size=element_size, pipelined=True, plain_16bit_rows=True)
        assert rows.passes[0].loop_stages == stages, (outer, red, element_size, rows)
    # plain_rows_min_red moves that minimum (the exact filter's, plan.EXACT_PLAIN_16BIT_ROWS_MIN_RED)
    for min_red, stages in ((256, 1), (257, LOOP_STAGES["inner"])):
        rows = plan_reduction(65536, 256, 1, inner_contiguous=False, whole_tree=False, sm_count=H100_SMS,
                              element_size=2, pipelined=True, plain_16bit_rows=True, plain_rows_min_red=min_red)
        assert rows.passes[0].loop_stages == stages, (min_red, rows)
    rows = plan_reduction(1024, 65536, 1, inner_contiguous=False, whole_tree=False, sm_count=H100_SMS,
                          pipelined=True)
    assert rows.passes[0].loop_stages == LOOP_STAGES["inner"]
    split = plan_reduction(16, 262144, 1, inner_contiguous=False, whole_tree=False, sm_count=H100_SMS,
                           pipelined=True)
    # its short parts run SHORT_PART_TILES (>= PIPELINE_MIN_TILES) tiles per lane; the merge one tile
    assert [p.loop_stages for p in split.passes] == [LOOP_STAGES["inner"], 1]


def test_plan_is_pure_and_cached():
    a = plan_reduction(5, 77, 3, inner_contiguous=True, whole_tree=False, sm_count=8)
    b = plan_reduction(5, 77, 3, inner_contiguous=True, whole_tree=False, sm_count=8)
    assert a is b


def test_plan_rejects_empty():
    with pytest.raises(ValueError):
        plan_reduction(1, 0, 1, inner_contiguous=False, whole_tree=False, sm_count=8)


# ---- layout --------------------------------------------------------------------------------------

def _element(view, o, j, i):
    return view.source.as_strided((1,), (1,), view.source.storage_offset() +
                                  o * view.stride_outer + j * view.stride_red + i * view.stride_inner).item()


@pytest.mark.parametrize("shape,dims,copied", [
    ((4, 5, 6), (1,), False),          # (outer, reduce, inner) with a contiguous inner axis
    ((4, 5, 6), (2,), False),
    ((4, 5, 6), (0,), False),
    ((4, 5, 6), (0, 1), False),
    ((4, 5, 6), (1, 2), False),
    ((4, 5, 6), (0, 2), True),         # reduced dims that do not chain: one documented copy
    ((4, 5, 6), (0, 1, 2), False),
    ((3, 1, 5), (1,), False),          # size-1 reduced dim
    ((2, 3, 4, 5), (1, 3), True),
])
def test_reduction_view_addresses_every_element_once(shape, dims, copied):
    x = torch.arange(math.prod(shape), dtype=torch.float32).reshape(shape)
    view = reduction_view(x, dims)
    assert view.copied == copied
    kept = [d for d in range(len(shape)) if d not in dims]
    expected = x.permute(*kept, *dims).reshape(view.outer * view.inner, view.red)
    got = torch.tensor([[_element(view, r // view.inner, j, r % view.inner) for j in range(view.red)]
                        for r in range(view.outer * view.inner)])
    # Per output the same multiset of elements (a sum does not care about their order).
    assert torch.equal(got.sort(dim=1).values, expected.sort(dim=1).values)


def test_reduction_view_of_transposed_and_expanded_inputs_needs_no_copy():
    x = torch.randn(8, 6).t()                     # reduce dim 1 of a transpose: the outer schedule
    view = reduction_view(x, (1,))
    assert not view.copied and view.stride_inner == 1 and view.inner == 6
    e = torch.randn(5, 1).expand(5, 7)            # stride-0 reduced axis
    view = reduction_view(e, (1,))
    assert not view.copied and view.stride_red == 0


@pytest.mark.parametrize("pairwise", [False, True])
@pytest.mark.parametrize("tile", [2, 4, 16, None])
def test_every_plan_terminates_in_one_output_per_row(pairwise, tile):
    # A one-tile-per-lane pass with a single lane would never shrink the reduced axis: the planner must
    # always make progress, whatever the (test-only) tile size.
    for outer, red, inner, contiguous in [(1, 7, 2, True), (3, 300, 1, False), (1, 5000, 300, True),
                                          (2, 70000, 1, False), (1, 1, 5, True)]:
        plan = plan_reduction(outer, red, inner, inner_contiguous=contiguous, whole_tree=pairwise,
                              sm_count=64, tile_elements=tile, split_min_bytes=0)
        _check_plan_invariants(plan, outer, red, inner)


@pytest.mark.parametrize("acc", [4, 8])
@pytest.mark.parametrize("j_fast", [True, False])
def test_single_read_plans_hold_whole_rows_up_to_the_limit(j_fast, acc):
    limit = (SINGLE_READ_MAX_ROW if j_fast else SINGLE_READ_MAX_STRIDED_ROW)[acc]
    for rows in (1, 3, 16, 1000, 262144):
        for red in sorted({r for r in (1, 2, 37, 256, 1000, limit - 1, limit) if r <= limit}):
            plan = plan_single_read(rows, red, j_fast=j_fast, accumulator_size=acc)
            assert plan.j_fast == j_fast
            # A power-of-two tile holding the whole row, and a tree of depth log2(block_j) over it.
            assert plan.block_j >= red and plan.block_j & (plan.block_j - 1) == 0
            assert plan.block_j < 2 * red or red == 1 and plan.block_j == 1
            assert plan.depth == int(math.log2(plan.block_j))
            assert plan.block_rows & (plan.block_rows - 1) == 0 and plan.block_rows <= max(
                1, 2 ** math.ceil(math.log2(rows)), SINGLE_READ_MIN_COLUMNS if not j_fast else 1)
            assert 1 <= plan.num_warps <= 32 and plan.num_warps & (plan.num_warps - 1) == 0
            if not j_fast and rows >= SINGLE_READ_MIN_COLUMNS:
                assert plan.block_rows >= SINGLE_READ_MIN_COLUMNS    # coalesced loads along the rows
        assert plan_single_read(rows, limit + 1, j_fast=j_fast, accumulator_size=acc) is None
    with pytest.raises(ValueError):
        plan_single_read(0, 5, j_fast=j_fast, accumulator_size=acc)


def test_counted_split_tail_rows_plans_where_measured():
    """The fp64 accumulator's kernel with log_softmax's counted split tail (SINGLE_READ_FP64_SPLIT_TAIL_ROW_PLANS):
    contiguous rows of 4096 and 8192 at 8 elements a thread (16 and 32 warps), rows of 256 alone in a
    program; every other row, strided rows, the fp32 accumulator and the kernel without the tail as before."""
    assert plan_module.SINGLE_READ_FP64_SPLIT_TAIL_ROW_PLANS == {256: (256, 16), 4096: (512, 8), 8192: (512, 8)}
    for red, block_rows, warps in ((8192, 1, 32), (4096, 1, 16), (3000, 1, 16), (256, 1, 1), (200, 1, 1),
                                   (1024, 1, 2), (512, 1, 1), (64, 8, 1)):
        counted = plan_single_read(4096, red, j_fast=True, accumulator_size=8, counted_split_tail=True)
        plain = plan_single_read(4096, red, j_fast=True, accumulator_size=8)
        assert (counted.block_rows, counted.num_warps) == (block_rows, warps), (red, counted)
        assert replace(counted, block_rows=plain.block_rows, num_warps=plain.num_warps) == plain
        if red in (1024, 512, 64):
            assert counted == plain
        else:
            assert counted != plain
    for j_fast, acc in ((False, 8), (True, 4), (False, 4)):
        red = 64 if not j_fast else 8192
        assert (plan_single_read(4096, red, j_fast=j_fast, accumulator_size=acc, counted_split_tail=True)
                == plan_single_read(4096, red, j_fast=j_fast, accumulator_size=acc))


def test_persistent_single_read_where_measured():
    """Persistent single-read grids (SINGLE_READ_PERSISTENT) for log_softmax's split tail on contiguous
    rows of 4096 and 8192 only, as measured: programs a SM x SMs of them, where the row blocks
    outnumber those programs; a program per block elsewhere -- the same rows without the split tail
    (softmax, the fp64 and fast modes), other rows, strided rows, few rows."""
    table = {(8, 8192, True): (1, 3), (8, 4096, True): (2, 3), (4, 8192, True): (2, 3), (4, 4096, True): (8, 3)}
    assert plan_module.SINGLE_READ_PERSISTENT == table
    sms = 132
    for (acc, red, split_tail), (per_sm, stages) in table.items():
        plan = plan_single_read(8192, red, j_fast=True, accumulator_size=acc,
                                counted_split_tail=split_tail and acc == 8)
        blocks = -(-8192 // plan.block_rows)
        assert blocks > per_sm * sms
        assert plan_module.single_read_persistence(plan, acc, split_tail, 8192, sms) == (per_sm * sms, stages)
        assert plan_module.single_read_persistence(plan, acc, False, 8192, sms) is None
        few = per_sm * sms * plan.block_rows
        assert plan_module.single_read_persistence(plan, acc, split_tail, few, sms) is None
        strided = replace(plan, j_fast=False)   # the same blocks over a strided axis
        assert plan_module.single_read_persistence(strided, acc, split_tail, 8192, sms) is None
    for acc, red in ((8, 1024), (8, 256), (4, 1024), (4, 2048)):
        plan = plan_single_read(262144, red, j_fast=True, accumulator_size=acc, counted_split_tail=acc == 8)
        assert plan_module.single_read_persistence(plan, acc, True, 262144, sms) is None


@pytest.mark.parametrize("acc, limit", [(8, 1024), (4, 8192)])
def test_logsumexp_rows_plans_where_measured(acc, limit):
    """The single-read logsumexp: fp32 rows, of at most 1024 elements for the fp64 accumulator and 8192
    for fp32's (LOGSUMEXP_SINGLE_READ_MAX_ROW), with softmax's single-read plan for them; never 16-bit
    or fp64 input."""
    assert plan_module.LOGSUMEXP_SINGLE_READ_MAX_ROW[(acc, 4)] == limit
    for rows, red in [(1, 1), (3, 97), (65536, 1024), (262144, 256), (5, limit)]:
        plan = plan_module.plan_logsumexp_rows(rows, red, element_size=4, accumulator_size=acc)
        assert plan == plan_single_read(rows, red, j_fast=True, accumulator_size=acc, element_size=4)
        for element_size in (2, 8):
            assert plan_module.plan_logsumexp_rows(rows, red, element_size=element_size, accumulator_size=acc) is None
    for red in (limit + 1, 65536):
        assert plan_module.plan_logsumexp_rows(64, red, element_size=4, accumulator_size=acc) is None


def test_moments_rows_plans_where_measured():
    """var / std / var_mean's two-pass rows kernel: the fp32 accumulator over fp32 rows of 256..8192
    elements, a multiple of 16, only (plan.MOMENTS_ROWS_*), at 64 elements a thread on the layer_norm
    forward's tiles: four rows of 256 on one warp, two of 1024, one row of 8192 on four."""
    assert (plan_module.MOMENTS_ROWS_MIN_ROW, plan_module.MOMENTS_ROWS_MAX_ROW) == (256, 8192)
    expected = {256: (4, 256, 1), 304: (4, 512, 1), 1024: (2, 1024, 1), 1520: (2, 2048, 2), 4096: (1, 4096, 2),
                8192: (1, 8192, 4)}
    for red, (block_rows, block_j, warps) in expected.items():
        plan = plan_module.plan_moments_rows(65536, red, element_size=4, accumulator_size=4)
        assert (plan.block_rows, plan.block_j, plan.num_warps) == (block_rows, block_j, warps), (red, plan)
        assert plan.j_fast and plan.depth == block_j.bit_length() - 1
        for element_size, acc in ((2, 4), (4, 8), (2, 8), (8, 8)):
            assert plan_module.plan_moments_rows(65536, red, element_size=element_size, accumulator_size=acc) is None
    assert plan_module.plan_moments_rows(1, 1024, element_size=4, accumulator_size=4).block_rows == 1
    for red in (1, 240, 1000, 1500, 8200, 16384):   # too short or long, or not a multiple of 16
        assert plan_module.plan_moments_rows(64, red, element_size=4, accumulator_size=4) is None


def test_single_read_tiles_where_measured():
    """Contiguous rows: tiles of SINGLE_READ_FP64_ROW_TILE elements for the fp64 accumulator (a row
    longer than the tile alone in its program); for fp32 SINGLE_READ_FP32_ROW_PLANS' by row length and
    SINGLE_READ_TILE elsewhere; strided rows keep theirs."""
    for red in (256, 1024, 8192):
        plan = plan_single_read(65536, red, j_fast=True, accumulator_size=8)
        assert plan.block_rows == max(1, plan_module.SINGLE_READ_FP64_ROW_TILE // red)
    assert plan_module.SINGLE_READ_FP64_ROW_TILE == 512 and plan_module.SINGLE_READ_TILE == 4096
    # fp32 accumulator, contiguous rows: 256 on tiles of 1024 at 32 elements a thread, 1024 on 1024 at
    # 16, the rest of 512 .. 8192 on 2048 at 64 (one warp up to 2048); SINGLE_READ_TILE at 32 elsewhere.
    for red, rows_per_program, warps in ((128, 32, 4), (256, 4, 1), (300, 4, 1), (512, 4, 1), (1024, 1, 2),
                                         (2048, 1, 1), (4096, 1, 2), (8192, 1, 4), (16384, 1, 16)):
        plan = plan_single_read(65536, red, j_fast=True, accumulator_size=4, element_size=2)
        assert (plan.block_rows, plan.num_warps) == (rows_per_program, warps), (red, plan)
    assert plan_single_read(65536, 64, j_fast=False, accumulator_size=8).block_rows == plan_module.SINGLE_READ_TILE // 64


def test_single_read_register_cap_where_measured():
    """64 registers for the fp64 accumulator's contiguous rows (two 16-warp or four 8-warp programs per
    SM), never more than lets one program launch; none for the fp32 accumulator, strided rows or plans
    of fewer than four warps."""
    for rows, red in [(8192, 8192), (65536, 1024), (262144, 256), (16, 8192), (1000, 37), (3, 100)]:
        for j_fast in (True, False):
            for acc in (4, 8):
                plan = plan_single_read(rows, red, j_fast=j_fast, accumulator_size=acc)
                if plan is None:
                    continue
                cap = plan_module.single_read_register_cap(plan, acc)
                if acc == 8 and j_fast and plan.num_warps >= 4:
                    assert cap == min(64, plan_module.REGISTER_FILE // (32 * plan.num_warps))
                    assert cap * 32 * plan.num_warps <= plan_module.REGISTER_FILE
                else:
                    assert cap is None
    big = plan_single_read(8192, 8192, j_fast=True, accumulator_size=8)
    assert big.num_warps == 16 and plan_module.single_read_register_cap(big, 8) == 64


@pytest.mark.parametrize("acc", [4, 8])
def test_row_loop_plans_cover_rows_up_to_the_l2_limit(acc):
    for element_size in (2, 4, 8):
        longest = ROW_LOOP_MAX_ROW_BYTES // element_size
        for red in (1, 37, 4096, 5000, longest):
            plan = plan_row_loop(1024, red, element_size=element_size, accumulator_size=acc, sm_count=132)
            assert plan.red == red and plan.block_n & (plan.block_n - 1) == 0 and plan.block_n <= 2 * red
            tiles = -(-red // plan.block_n)
            assert plan.depth == tiles - 1 + int(math.log2(plan.block_n))   # the lane chain, then the tree
        assert plan_row_loop(1024, longest + 1, element_size=element_size, accumulator_size=acc,
                             sm_count=132) is None
    # Too few rows to fill the GPU: the split two-pass path instead.
    assert plan_row_loop(ROW_LOOP_MIN_ROWS_PER_SM * 132 - 1, 4096, element_size=4, accumulator_size=acc,
                         sm_count=132) is None


def test_norm_row_loop_takes_the_rows_between_on_chip_and_the_l2_limit():
    """layer_norm / rms_norm forward: rows too long for the single-read plan take the row loop up to
    ROW_LOOP_MAX_ROW_BYTES, where there are ROW_LOOP_MIN_ROWS_PER_SM rows per SM."""
    from precred.plan import (NORM_FORWARD_MAX_ROW, NORM_ROW_LOOP_SHAPE, NORM_ROW_LOOP_STAGES, plan_norm_forward,
                              plan_norm_row_loop)
    rows = ROW_LOOP_MIN_ROWS_PER_SM * 132
    for element_size in (2, 4, 8):
        longest = ROW_LOOP_MAX_ROW_BYTES // element_size
        for n in (NORM_FORWARD_MAX_ROW[8] + 1, NORM_FORWARD_MAX_ROW[4] + 1, 65536, longest):
            if n > longest:
                continue
            plan = plan_norm_row_loop(rows, n, element_size=element_size, sm_count=132)
            assert plan.red == n and plan.block_n == min(NORM_ROW_LOOP_SHAPE[0], 1 << (n - 1).bit_length())
            assert plan.stages == NORM_ROW_LOOP_STAGES and plan.num_warps == NORM_ROW_LOOP_SHAPE[1]
        assert plan_norm_row_loop(rows, longest + 1, element_size=element_size, sm_count=132) is None
        assert plan_norm_row_loop(rows - 1, 65536, element_size=element_size, sm_count=132) is None
    for acc in (4, 8):   # every row the single-read plan refuses is the row loop's or the streaming path's
        for element_size in (2, 4, 8):
            assert plan_norm_forward(rows, NORM_FORWARD_MAX_ROW[acc] + 1, accumulator_size=acc,
                                     element_size=element_size) is None


@pytest.mark.parametrize("n", [64, 256, 1024, 4096, 8192])
@pytest.mark.parametrize("element_size,accumulator_size", [(4, 4), (2, 4), (2, 8), (8, 8)])
def test_norm_backward_pipelines_within_shared_memory_and_registers(n, element_size, accumulator_size):
    """The on-chip backward's pipelined row loop: its staged x and g tiles of every program on an SM fit
    the SM's shared memory; no stages where the warp cap leaves more than NORM_BACKWARD_PER_THREAD
    elements per thread (they spilled) or where a program has one row block."""
    from precred.plan import NORM_BACKWARD_MAX_ROW, NORM_BACKWARD_PER_THREAD, NORM_BACKWARD_PROGRAMS_PER_SM
    for rows in (1, 300, 65536):
        p = plan_norm_backward(rows, n, element_size=element_size, accumulator_size=accumulator_size, sm_count=132)
        assert p.on_chip == (n <= NORM_BACKWARD_MAX_ROW[accumulator_size])
        if not p.on_chip:
            continue   # rows read twice: test_norm_backward_of_long_rows_fills_the_gpu_by_column_blocks
        tile = p.block_rows * p.block_n
        if p.loop_stages > 1:
            assert (p.loop_stages - 1) * tile * 2 * element_size * NORM_BACKWARD_PROGRAMS_PER_SM <= PIPELINE_SMEM_BYTES
            assert tile <= 32 * p.num_warps * NORM_BACKWARD_PER_THREAD
            assert p.rows_per_program > p.block_rows
        if rows == 65536 and p.on_chip and tile <= 32 * p.num_warps * NORM_BACKWARD_PER_THREAD:
            assert p.loop_stages > 1, p


@pytest.mark.parametrize("rows,n", [(1, 65536), (16, 262144), (1024, 65536), (8192, 8192), (3, 10 ** 6)])
def test_norm_backward_of_long_rows_fills_the_gpu_by_column_blocks(rows, n):
    """Rows beyond NORM_BACKWARD_MAX_ROW: the columns kernel's row blocks (each a partial row of dw / db)
    are the fewest that give NORM_BACKWARD_COLUMNS_PROGRAMS_PER_SM programs per SM with the column blocks,
    whole BLOCK_R tiles of rows each, covering the rows; its staged x and g tiles fit shared memory."""
    from precred import plan as planner
    for element_size, accumulator_size in ((2, 4), (4, 4), (4, 8)):
        p = plan_norm_backward(rows, n, element_size=element_size, accumulator_size=accumulator_size, sm_count=132)
        assert p.on_chip == (n <= planner.NORM_BACKWARD_MAX_ROW[accumulator_size])
        if p.on_chip:
            continue
        assert (p.block_rows, p.block_c) == planner.NORM_BACKWARD_COLUMNS_TILE
        assert p.block_n == min(planner.NORM_BACKWARD_LOOP_LANES, 1 << (n - 1).bit_length())
        assert p.rows_per_program % p.block_rows == 0
        row_blocks = -(-rows // p.rows_per_program)
        column_blocks = -(-n // p.block_c)
        wanted = planner.NORM_BACKWARD_COLUMNS_PROGRAMS_PER_SM * 132
        assert row_blocks * p.rows_per_program >= rows > (row_blocks - 1) * p.rows_per_program
        assert row_blocks == 1 or (row_blocks - 1) * column_blocks < wanted, (row_blocks, column_blocks)
        assert row_blocks * column_blocks >= min(wanted, column_blocks * -(-rows // p.block_rows))
        staged = (p.loop_stages - 1) * p.block_rows * p.block_c * 2 * element_size
        assert staged <= PIPELINE_SMEM_BYTES // 2


@pytest.mark.parametrize("element_size", [2, 4, 8])
def test_norm_forward_register_cap_lets_every_plan_launch(element_size, monkeypatch):
    """A maxnreg cap times the program's threads must fit the register file, or the kernel cannot launch
    (ptxas no longer fits it itself): for every forward plan, and for every warp count even where the
    configured cap would not fit it."""
    from precred import plan as planning
    for accumulator_size in (4, 8):
        for n in (1, 256, 1024, 8192, planning.NORM_FORWARD_MAX_ROW[accumulator_size]):
            p = planning.plan_norm_forward(4096, n, accumulator_size=accumulator_size, element_size=element_size)
            cap = planning.norm_forward_register_cap(element_size, p.num_warps, p.block_j)
            assert cap is None or cap * 32 * p.num_warps <= planning.REGISTER_FILE
    monkeypatch.setattr(planning, "NORM_FORWARD_MAX_REGISTERS", {element_size: 255})
    monkeypatch.setattr(planning, "NORM_FORWARD_ROW_OVERRIDES", {(element_size, 4096): (16, 255)})
    for warps, block_n in itertools.product((1, 2, 4, 8, 16, 32), (1024, 4096)):
        cap = planning.norm_forward_register_cap(element_size, warps, block_n)
        # an override's cap holds on every warp count; the default's from NORM_FORWARD_CAP_MIN_WARPS
        assert (cap is None) == (block_n != 4096 and warps < planning.NORM_FORWARD_CAP_MIN_WARPS)
        assert cap is None or cap * 32 * warps <= planning.REGISTER_FILE


@pytest.mark.parametrize("element_size", [4, 2])
def test_pairwise_rows_of_one_tile_give_each_warp_a_row(element_size):
    """pairwise rows that fit one tile (no loop): a program holds at least one row per warp, up to twice
    the tile, so that no row's tree crosses warps where that fits (65536 x 1024 fp32 was 4 rows on 8
    warps, 0.98x torch), and the programs still fill the GPU."""
    for rows, red in ((65536, 1024), (262144, 256), (65536, 512), (4096, 2048)):
        (first,) = plan_reduction(rows, red, 1, inner_contiguous=False, whole_tree=True, sm_count=H100_SMS,
                                  element_size=element_size, pipelined=True).passes
        assert first.parts == 1 and first.lanes == red
        assert first.block_kept >= min(first.num_warps, 2 * TILE_BYTES // element_size // red), (rows, red, first)
        assert first.lanes * first.block_kept <= 2 * TILE_BYTES // element_size
        assert -(-rows // first.block_kept) >= 2 * H100_SMS


@pytest.mark.parametrize("inner_contiguous", [False, True])
@pytest.mark.parametrize("element_size,accumulator_size", [(4, 4), (2, 4), (4, 8)])
def test_pairwise_plans_are_one_balanced_tree(inner_contiguous, element_size, accumulator_size):
    """pairwise: every plan -- rows or columns, split or not, pipelined -- is one balanced tree over
    the reduced axis, of depth ceil(log2 n) (README's bound for the mode): each tile's lane tree, the
    tiles of a part by the binary counter, the parts (powers of two tiles) merged the same way."""
    for outer in (1, 3, 16, 1000):
        for red in (1, 2, 3, 7, 100, 1000, 4097, 10000, 65536, 100003, 262144, 2 ** 20 + 1):
            for inner in ((1, 2, 100, 4096) if inner_contiguous else (1,)):
                plan = plan_reduction(outer, red, inner, inner_contiguous=inner_contiguous, whole_tree=True,
                                      sm_count=H100_SMS, element_size=element_size,
                                      accumulator_size=accumulator_size, pipelined=True)
                assert plan.depth == math.ceil(math.log2(red)), (outer, red, inner, plan)


def test_value_extremum_register_cap_only_where_measured():
    """amax's first pass over 16-bit rows is capped at 32 registers (8 programs per SM) only where its
    programs fit one such wave (1024 x 65536 bf16); fp32 rows, many programs or splits keep ptxas's own."""
    from precred.plan import VALUE_EXTREMUM_MAX_REGISTERS, extremum_register_cap

    def cap(rows, red, element_size):
        first = plan_reduction(rows, red, 1, inner_contiguous=False, whole_tree=False, sm_count=H100_SMS,
                               element_size=element_size, pipelined=True).passes[0]
        return extremum_register_cap(first, False, element_size, H100_SMS)

    assert cap(1024, 65536, 2) == VALUE_EXTREMUM_MAX_REGISTERS
    assert cap(1024, 65536, 4) is None
    assert cap(8192, 8192, 2) is None and cap(65536, 1024, 2) is None
    assert cap(16, 262144, 2) is None and cap(1, 2 ** 28, 2) is None


def test_norm_forward_tiles_by_row_length():
    """The norm forward's programs (plan.NORM_FORWARD_TILES, measured): rows of <= 256 elements share a
    1024-element tile, rows of <= 1024 a 2048-element one, longer rows take one program each; every
    row is still read once (the plan holds it whole)."""
    from precred.plan import plan_norm_forward
    for n, rows_per_program in ((256, 4), (200, 4), (1024, 2), (512, 4), (2048, 2), (4096, 1), (8192, 1)):
        for acc, element_size in itertools.product((4, 8), (2, 4, 8)):
            p = plan_norm_forward(100000, n, accumulator_size=acc, element_size=element_size)
            assert p.block_j >= n and p.block_rows == rows_per_program, (n, acc, element_size, p)


@pytest.mark.parametrize("constant, value", [("MIN_TILES_PER_LANE", 1), ("SHORT_PART_TILES", 4),
                                             ("SPLIT_MIN_BYTES", 1 << 40)])
def test_planner_reads_its_constants_at_call_time(constant, value, monkeypatch):
    """bench/ sweeps set precred.plan's constants by name: each must change the plans it governs
    (a constant bound as a default argument would not)."""
    args = dict(inner_contiguous=False, whole_tree=False, sm_count=132)
    shape = (262144, 256, 1) if constant == "MIN_TILES_PER_LANE" else (16, 262144, 1)
    before = plan_module.plan_reduction(*shape, **args)
    monkeypatch.setattr(plan_module, constant, value)
    plan_module.plan_reduction.cache_clear()
    after = plan_module.plan_reduction(*shape, **args)
    plan_module.plan_reduction.cache_clear()
    assert after != before


def test_plain_sums_narrow_their_lanes_to_fewer_tiles():
    """fast (fp32 accumulator) runs PLAIN_MIN_TILES_PER_LANE tiles per lane on rows; fp64 too on rows
    shorter than PLAIN_16BIT_ROWS_MIN_RED, MIN_TILES_PER_LANE on longer fp32 rows; kahan keeps
    MIN_TILES_PER_LANE on fp32 rows (its chains measured faster in the longer, pipelined loop)."""
    from precred.launch import plan_for
    from precred.modes import get_mode
    short, long = 256, plan_module.PLAIN_16BIT_ROWS_MIN_RED * 4
    for red, mode, tiles in ((short, "fast", plan_module.PLAIN_MIN_TILES_PER_LANE),
                             (long, "fast", plan_module.PLAIN_MIN_TILES_PER_LANE),
                             (short, "kahan", plan_module.MIN_TILES_PER_LANE),
                             (short, "fp64", plan_module.PLAIN_MIN_TILES_PER_LANE),
                             (long, "fp64", plan_module.MIN_TILES_PER_LANE)):
        _, p = plan_for(torch.empty(4096, red), (1,), get_mode(mode), sm_count=132)
        assert p.passes[0].tiles_per_lane == tiles, (red, mode, p)
    # an fp64 accumulator and fp64 output: fast's plain sum, short rows
    _, p = plan_for(torch.empty(4096, short), (1,), get_mode("fast"), torch.float64, sm_count=132)
    assert p.passes[0].tiles_per_lane == plan_module.PLAIN_MIN_TILES_PER_LANE


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_sixteen_bit_rows_narrow_the_lanes_of_fp64_as_measured(dtype):
    """Over 16-bit rows fp64 -- which also sums kahan's 16-bit input (modes.sum_mode) -- runs
    PLAIN_MIN_TILES_PER_LANE tiles per lane as fast does, short rows or long. Over dim 0 (the outer
    schedule) the rule does not apply."""
    from precred.launch import plan_for
    from precred.modes import get_mode, sum_mode
    assert sum_mode("kahan", dtype) is get_mode("fp64")
    short_red = plan_module.PLAIN_16BIT_ROWS_MIN_RED // 4
    for red in (short_red, 4096):
        _, p = plan_for(torch.empty(65536, red, dtype=dtype), (1,), get_mode("fp64"), sm_count=132)
        assert p.passes[0].tiles_per_lane == plan_module.PLAIN_MIN_TILES_PER_LANE, (red, p)
    fp64_cols = plan_for(torch.empty(short_red, 65536, dtype=dtype), (0,), get_mode("fp64"), sm_count=132)[1]
    assert fp64_cols.passes[0].schedule == "outer"


def test_wide_outer_first_passes_run_on_few_warps():
    """Outer first passes in the wide layout (short reduced or narrow kept axes) take at most
    OUTER_WIDE_MAX_WARPS warps; the registers layout keeps its own (65536 x 1024 over dim 0)."""
    args = dict(inner_contiguous=True, sm_count=132)
    for outer, red, inner, element_size in ((1, 16, 262144, 2), (1, 16, 262144, 4), (1, 262144, 256, 4)):
        first = plan_reduction(outer, red, inner, whole_tree=False, element_size=element_size, **args).passes[0]
        assert first.schedule == "outer" and first.num_warps <= plan_module.OUTER_WIDE_MAX_WARPS
    first = plan_reduction(1, 65536, 1024, whole_tree=False, **args).passes[0]
    assert first.num_warps > plan_module.OUTER_WIDE_MAX_WARPS


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_narrow_strided_axes_split_on_one_warp_in_the_registers_layout(dtype, monkeypatch):
    """262144 x 256 over dim 0 -- fewer columns than OUTER_MIN_WARPS warps of 16-byte vectors: the sums
    (fast, kahan, fp64), var, logsumexp's fp32 passes and the exact filter take programs one warp wide
    in the registers layout, about NARROW_OUTER_PROGRAMS_PER_SM per SM, whose states merge on
    NARROW_STATE_PASS_MIN_COLUMNS columns (plan.NARROW_OUTER_MIN_INNER); pairwise and the fp64 logsumexp
    of fp32 input keep the plans they had without it."""
    from precred.launch import plan_for
    from precred.modes import get_mode, get_var_mode, logsumexp_mode
    x = torch.empty((262144, 256), dtype=dtype, device="meta")
    modes = {"fast": get_mode("fast"), "kahan": get_mode("kahan"), "fp64": get_mode("fp64"),
             "pairwise": get_mode("pairwise"), "exact": get_mode("exact"), "var fast": get_var_mode("fast"),
             "var fp64": get_var_mode("fp64"), "logsumexp fast": logsumexp_mode("fast", dtype),
             "logsumexp fp64": logsumexp_mode("fp64", dtype)}
    keeping = {"pairwise"} | ({"logsumexp fp64"} if dtype == torch.float32 else set())

    wide = torch.empty((65536, 1024), dtype=dtype, device="meta")   # four warps of vectors and more

    def plans(t):
        return {name: plan_for(t, (0,), m, sm_count=132)[1] for name, m in modes.items()}

    narrow, wide_plans = plans(x), plans(wide)
    monkeypatch.setattr(plan_module, "NARROW_OUTER_MIN_INNER", 1 << 30)
    without = plans(x)
    assert plans(wide) == wide_plans
    for name in modes:
        if name in keeping:
            assert narrow[name] == without[name], name
            continue
        first, merge = narrow[name].passes
        programs = first.parts * (256 // first.block_kept)
        assert first.schedule == "outer" and first.num_warps == 1, (name, first)
        assert first.block_kept == 32 * (16 // x.element_size()), (name, first)   # one warp of vectors
        assert plan_module.NARROW_OUTER_PROGRAMS_PER_SM * 132 // 2 < programs <= plan_module.NARROW_OUTER_PROGRAMS_PER_SM * 132
        assert merge.block_kept == plan_module.NARROW_STATE_PASS_MIN_COLUMNS, (name, merge)
        assert narrow[name] != without[name], name


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_wide_strided_axes_of_16bit_input_take_the_larger_accumulator_tile(dtype, monkeypatch):
    """Over wide strided axes of 16-bit input, the first passes of fast, fp64, logsumexp's passes and the
    extrema hold OUTER_16BIT_ACC_TILE_BYTES of accumulators (8192 elements: each thread holds 1/256 of
    it in the registers layout, four lanes of 16-byte vectors); kahan, pairwise, var, exact, fp32 input,
    narrow axes (262144 x 256) and short reduced axes (16 x 262144) keep the plans they had without it."""
    from precred.launch import plan_for
    from precred.modes import MAXIMUM_MODE, MAXIMUM_VALUE_MODE, get_mode, get_var_mode, logsumexp_mode
    modes = {"fast": get_mode("fast"), "fp64": get_mode("fp64"), "logsumexp fast": logsumexp_mode("fast", dtype),
             "logsumexp fp64": logsumexp_mode("fp64", dtype), "amax": MAXIMUM_VALUE_MODE, "argmax": MAXIMUM_MODE,
             "kahan": get_mode("kahan"), "pairwise": get_mode("pairwise"), "var fast": get_var_mode("fast"),
             "exact": get_mode("exact")}
    taking = {"fast", "fp64", "logsumexp fast", "logsumexp fp64", "amax", "argmax"} if dtype != torch.float32 else set()
    shapes = ((8192, 8192), (65536, 1024), (1024, 65536), (262144, 256), (16, 262144))

    def plans():
        return {(name, shape): plan_for(torch.empty(shape, dtype=dtype, device="meta"), (0,), m, sm_count=132)[1]
                for name, m in modes.items() for shape in shapes}

    rule, tile_bytes = plans(), dict(plan_module.OUTER_16BIT_ACC_TILE_BYTES)
    monkeypatch.setattr(plan_module, "OUTER_16BIT_ACC_TILE_BYTES", {})
    without = plans()
    for (name, shape), p in rule.items():
        if name not in taking or shape[1] < 1024 or shape[0] < plan_module.OUTER_REGISTERS_MIN_RED:
            assert p == without[(name, shape)], (name, shape)
            continue
        first, before = p.passes[0], without[(name, shape)].passes[0]
        acc = modes[name].accumulator_dtype(dtype).itemsize

        def per_thread(q):   # the registers layout: each thread holds all lanes of its columns
            return q.lanes * q.block_kept // (32 * q.num_warps)

        assert per_thread(first) == tile_bytes[acc] // acc // 256 == 32, (name, first)   # 4 vectors of 8
        assert per_thread(before) < per_thread(first), (name, shape, before)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_certified_merges_widen_their_lanes_to_the_narrowed_block(dtype, monkeypatch):
    """logsumexp's certified pass (plan.WIDE_LANES_STATE_STRATEGIES) merges its parts on the narrowed
    block with WIDE_LANES_STATE_TILE / columns lanes, chains of at least WIDE_LANES_TILES_PER_LANE tiles
    and WIDE_LANES_PER_THREAD states a thread: a smaller depth than the narrowed block's own lanes give
    (that depth sizes the certificate's margin). Its first pass, the other modes and rows keep their plans."""
    from precred.launch import plan_for
    from precred.modes import CERTIFIED_EXP_MODE, get_mode, get_var_mode, logsumexp_mode
    modes = {"certified": CERTIFIED_EXP_MODE, "fast": get_mode("fast"), "var": get_var_mode("fast"),
             "logsumexp fast": logsumexp_mode("fast", dtype)}

    def plans():
        return {(name, shape, dim): plan_for(torch.empty(shape, dtype=dtype, device="meta"), (dim,), m, sm_count=132)[1]
                for name, m in modes.items() for shape in ((65536, 1024), (8192, 8192), (262144, 256))
                for dim in (0, 1)}

    wide = plans()
    monkeypatch.setattr(plan_module, "WIDE_LANES_STATE_STRATEGIES", frozenset())
    without = plans()
    for (name, shape, dim), p in wide.items():
        if name != "certified" or dim == 1:
            assert p == without[(name, shape, dim)], (name, shape, dim)
            continue
        first, merge = p.passes
        assert first == without[(name, shape, dim)].passes[0]
        assert merge.block_kept < plan_module.WIDE_LAYOUT_COLUMNS and merge.parts == 1, merge
        lanes = plan_module.WIDE_LANES_STATE_TILE // merge.block_kept   # then halved to chains of TILES_PER_LANE
        while lanes > 1 and first.parts < plan_module.WIDE_LANES_TILES_PER_LANE * lanes:
            lanes //= 2
        assert merge.lanes == lanes and merge.tiles_per_lane >= plan_module.WIDE_LANES_TILES_PER_LANE, merge
        assert merge.lanes * merge.block_kept == plan_module.WIDE_LANES_PER_THREAD * 32 * merge.num_warps, merge
        assert p.depth < without[(name, shape, dim)].depth, (shape, p, without[(name, shape, dim)])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_outer_splits_take_their_strategys_programs_per_sm(dtype, monkeypatch):
    """Over wide strided axes, kahan and logsumexp's certified pass (fp64 mode on 16-bit input) split
    for OUTER_SPLIT_PROGRAMS_PER_SM programs per SM, the other modes for PROGRAMS_PER_SM; rows keep theirs."""
    from precred.launch import plan_for
    from precred.modes import get_mode, logsumexp_mode
    sms = 132
    modes = {"kahan": get_mode("kahan"), "fast": get_mode("fast"), "logsumexp fp64": logsumexp_mode("fp64", dtype)}
    for shape in ((8192, 8192), (65536, 1024), (1024, 65536)):
        x = torch.empty(shape, dtype=dtype, device="meta")
        for name, m in modes.items():
            first = plan_for(x, (0,), m, sm_count=sms)[1].passes[0]
            programs = first.parts * -(-shape[1] // first.block_kept)
            wanted = plan_module.OUTER_SPLIT_PROGRAMS_PER_SM.get(m.strategy, plan_module.PROGRAMS_PER_SM)
            assert first.parts > 1 and wanted * sms // 2 < programs <= wanted * sms, (name, shape, first)
        assert plan_module.OUTER_SPLIT_PROGRAMS_PER_SM.get(modes["kahan"].strategy, 0) > plan_module.PROGRAMS_PER_SM
        assert (modes["logsumexp fp64"].strategy in plan_module.OUTER_SPLIT_PROGRAMS_PER_SM) == (dtype == torch.bfloat16)
    rows = torch.empty((16, 262144), dtype=dtype, device="meta")
    before = plan_for(rows, (1,), modes["kahan"], sm_count=sms)[1]
    monkeypatch.setattr(plan_module, "OUTER_SPLIT_PROGRAMS_PER_SM", {})
    assert plan_for(rows, (1,), modes["kahan"], sm_count=sms)[1] == before


@pytest.mark.parametrize("dtype,mode,halved", [(torch.float32, "fast", False), (torch.float32, "fp64", False),
                                               (torch.bfloat16, "fp64", False), (torch.bfloat16, "fast", True)])
def test_welford_rows_keep_full_warps_except_bf16_fast(dtype, mode, halved):
    """var over rows plans the full tile and warps, not the heavy state's halves, except 16-bit input
    with the fp32 accumulator, as measured (precred.launch.plan_for)."""
    from precred.launch import plan_for
    from precred.modes import get_var_mode
    m = get_var_mode(mode)
    acc = m.accumulator_dtype(dtype, dtype).itemsize
    _, got = plan_for(torch.empty(8192, 4096, dtype=dtype), (1,), m, sm_count=132)
    args = dict(inner_contiguous=False, whole_tree=False, sm_count=132, element_size=dtype.itemsize,
                accumulator_size=acc, pipelined=True,
                # rows of 4096: the small accumulator tile for fp32 input only
                acc_tile_bytes=plan_module.WELFORD_ROWS_ACC_TILE_BYTES[acc] if dtype.itemsize >= 4 else None,
                # the vector moments' plain loops over 16-bit rows with the fp32 accumulator
                plain_16bit_rows=acc == 4 and plan_module.WELFORD_VECTOR_MOMENTS)
    full, half = (plan_reduction(8192, 4096, 1, heavy_state=h, **args).passes[0] for h in (False, True))
    assert full.num_warps > half.num_warps
    assert got.passes[0] == (half if halved else full), got


@pytest.mark.parametrize("dtype,mode,red,small", [(torch.float32, "fast", 4096, True),
                                                  (torch.float32, "fp64", 4096, True),
                                                  (torch.bfloat16, "fp64", 4096, False),
                                                  (torch.bfloat16, "fp64", 8192, False),
                                                  (torch.bfloat16, "fp64", 32768, False),
                                                  (torch.bfloat16, "fp64", 65536, False),
                                                  (torch.float16, "fp64", 262144, False),
                                                  (torch.bfloat16, "fast", 8192, True),
                                                  (torch.bfloat16, "fast", 4096, False),
                                                  (torch.bfloat16, "fast", 65536, True)])
def test_welford_rows_take_the_small_accumulator_tile_where_measured(dtype, mode, red, small):
    """var over rows holds WELFORD_ROWS_ACC_TILE_BYTES[accumulator bytes] of accumulators per tile on fp32
    input and on 16-bit rows of at least WELFORD_ROWS_SMALL_TILE_MIN_RED[accumulator bytes] elements (no
    entry, the fp64 accumulator's: never); ACC_TILE_BYTES on the other 16-bit rows."""
    from precred.launch import plan_for
    from precred.modes import get_var_mode
    m = get_var_mode(mode)
    acc = m.accumulator_dtype(dtype, dtype).itemsize
    _, got = plan_for(torch.empty(256, red, dtype=dtype), (1,), m, sm_count=4)
    tile = (plan_module.WELFORD_ROWS_ACC_TILE_BYTES[acc] if small else plan_module.ACC_TILE_BYTES) // acc
    first = got.passes[0]
    assert first.lanes * first.block_kept == tile, got


def test_launchers_read_plan_constants_from_the_plan_module():
    """precred.launch and precred.norm_launch read precred.plan's constants as plan.NAME at call time: a
    copy imported by value would not see what a bench/ sweep sets."""
    from precred import launch, norm_launch
    constants = {name for name in dir(plan_module) if name.isupper()}
    for module in (launch, norm_launch):
        copies = sorted(name for name in constants if hasattr(module, name))
        assert not copies, (module.__name__, copies)


@pytest.mark.parametrize("n_out, red", [(1, 2 ** 28), (16, 262144), (1024, 65536), (8192, 8192), (65536, 1024),
                                        (262144, 256), (131072, 8192), (1 << 20, 8192), (1024, 4097), (3, 100)])
def test_recompute_chunks_long_rows_before_grouping_outputs(n_out, red):
    """plan_recompute: every row is covered by its chunks (whole tiles, the last one not empty); a row
    longer than RECOMPUTE_MIN_CHUNK is cut into chunks wherever the programs allow it, even where the
    output blocks alone would fill them (a lone uncertified column of 65536 is not one program's work);
    and the launch stays within RECOMPUTE_PROGRAMS_PER_SM programs per SM unless its outputs alone,
    RECOMPUTE_OUTPUTS to a program, need more."""
    sm_count = 132
    programs = plan_module.RECOMPUTE_PROGRAMS_PER_SM * sm_count
    rp = plan_module.plan_recompute(n_out, red, sm_count=sm_count)
    assert rp.chunk % rp.block_r == 0 and (rp.chunks - 1) * rp.chunk < red <= rp.chunks * rp.chunk, rp
    fewest_blocks = -(-n_out // plan_module.RECOMPUTE_OUTPUTS)
    launched = -(-n_out // rp.block_outputs) * rp.chunks
    assert launched <= max(programs, fewest_blocks), rp
    if red > plan_module.RECOMPUTE_MIN_CHUNK and 2 * fewest_blocks <= programs:
        assert rp.chunks > 1, rp
    if red <= plan_module.RECOMPUTE_MIN_CHUNK:
        assert rp.chunks == 1, rp


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64])
def test_welford_strided_first_passes_take_their_measured_stages(dtype):
    """var over dim 0: a first outer pass in the registers layout pipelines up to
    WELFORD_OUTER_STAGES[element size] stages (the default for sizes it does not name); the wide layout
    (a short reduced axis) and the sums keep LOOP_STAGES["outer"]."""
    from precred import launch, modes
    element_size = torch.empty((), dtype=dtype).element_size()
    want = plan_module.WELFORD_OUTER_STAGES.get(element_size, plan_module.LOOP_STAGES["outer"])
    x = torch.empty((8192, 8192), dtype=dtype)
    _, plan = launch.plan_for(x, (0,), modes.get_var_mode("fast"), sm_count=132)
    assert plan.passes[0].schedule == "outer" and plan.passes[0].loop_stages == want, plan
    _, plan = launch.plan_for(x, (0,), modes.get_mode("fast"), sm_count=132)
    assert plan.passes[0].loop_stages == plan_module.LOOP_STAGES["outer"], plan
    _, plan = launch.plan_for(torch.empty((16, 262144), dtype=dtype), (0,), modes.get_var_mode("fast"), sm_count=132)
    assert plan.passes[0].loop_stages in (1, plan_module.LOOP_STAGES["outer"]), plan


@pytest.mark.parametrize("n_parts, n", [(1, 1), (5, 65536), (264, 4096), (264, 8192), (263, 256), (3, 7), (64, 1000)])
def test_norm_merge_tile_covers_few_parts_without_idle_lanes(n_parts, n):
    """plan_norm_merge: the parts of a tile are a power of two, at least all the partials up to
    NORM_MERGE_MAX_PARTS (few partials leave no rows of idle lanes); the tile holds at most
    NORM_MERGE_TILE_ELEMENTS, and no more columns than n needs."""
    block_parts, block_cols, warps = plan_module.plan_norm_merge(n_parts, n)
    assert block_parts & (block_parts - 1) == 0 and block_cols & (block_cols - 1) == 0
    assert block_parts >= min(n_parts, plan_module.NORM_MERGE_MAX_PARTS) and block_parts < 2 * max(1, n_parts)
    assert block_parts * block_cols <= plan_module.NORM_MERGE_TILE_ELEMENTS and block_cols < 2 * n
    assert warps == plan_module.NORM_MERGE_WARPS


@pytest.mark.parametrize("red, tile", [(1024, "short"), (8192, "short"), (8193, "long"), (65536, "long")])
def test_exact_sixteen_bit_rows_take_the_tile_measured_for_their_length(red, tile):
    """The exact filter over many bf16 rows: rows of at most EXACT_VECTOR_SHORT_ROWS_MAX_RED elements
    are planned on EXACT_VECTOR_SHORT_ROWS_TILE elements a tile, longer ones on EXACT_VECTOR_ROWS_TILE
    (their lanes and rows a program make up the tile)."""
    from precred import launch, modes
    want = (plan_module.EXACT_VECTOR_SHORT_ROWS_TILE if tile == "short" else plan_module.EXACT_VECTOR_ROWS_TILE)
    x = torch.empty((2048, red), dtype=torch.bfloat16)
    _, plan = launch.plan_for(x, (1,), modes.get_mode("exact"), sm_count=132)
    first = plan.passes[0]
    assert first.schedule == "inner" and first.lanes * first.block_kept == want, plan


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("shape", [(1024, 65536), (8192, 8192), (16, 262144)])
def test_certified_logsumexp_splits_long_sixteen_bit_rows_alone(dtype, shape):
    """logsumexp's fp64 mode over 16-bit rows of at least twice CERTIFIED_EXP_16BIT_ROW_PART elements,
    which the rows alone would fill the GPU with, runs parts of CERTIFIED_EXP_16BIT_ROW_PART elements
    (the first pass fused with its merge); shorter rows, rows the planner splits anyway, fp32 input and
    the other strategies keep their plans."""
    from precred import launch, modes
    x = torch.empty(shape, dtype=dtype)
    part = plan_module.CERTIFIED_EXP_16BIT_ROW_PART
    _, plan = launch.plan_for(x, (1,), modes.logsumexp_mode("fp64", dtype), sm_count=132)
    first = plan.passes[0]
    if dtype != torch.float32 and shape == (1024, 65536):
        assert (first.parts, first.chunk) == (shape[1] // part, part) and plan.fused_merge, plan
    else:
        assert first.parts == 1 or shape == (16, 262144), plan
        assert first.chunk != part or shape[1] == part, plan
    for mode in (modes.get_mode("fast"), modes.get_mode("kahan"), modes.get_exp_mode("fast"), modes.get_var_mode("fast")):
        _, other = launch.plan_for(x, (1,), mode, sm_count=132)
        assert other.passes[0].parts == 1 or shape == (16, 262144), (mode, other)


def test_stable_exp_vector_states_where_measured():
    """The fp32 accumulator keeps vector states on every row; the fp64 accumulator over fp32 or 16-bit
    input on rows of at most STABLE_EXP_FP64_VECTOR_ROWS_MAX_RED elements and in softmax's row loop
    (red None), not on longer rows nor over fp64 input (plan.STABLE_EXP_VECTORS' note)."""
    longest = plan_module.STABLE_EXP_FP64_VECTOR_ROWS_MAX_RED
    for element_size in (2, 4):
        assert plan_module.stable_exp_vectors(4, element_size, 1 << 20)
        assert plan_module.stable_exp_vectors(8, element_size, longest)
        assert plan_module.stable_exp_vectors(8, element_size, 256)
        assert not plan_module.stable_exp_vectors(8, element_size, longest + 1)
        assert plan_module.stable_exp_vectors(8, element_size, None)
    assert not plan_module.stable_exp_vectors(8, 8, 256)
    assert not plan_module.stable_exp_vectors(8, 8, None)


def test_stable_exp_long_sixteen_bit_rows_take_the_larger_tile():
    """logsumexp's first pass over many rows: tiles of STABLE_EXP_TILE elements, but 16-bit rows of at
    least STABLE_EXP_16BIT_LONG_ROW[0] elements take STABLE_EXP_16BIT_LONG_ROW[1] (measured: its note)."""
    from precred.launch import plan_for
    from precred.modes import get_exp_mode
    long_row, long_tile = plan_module.STABLE_EXP_16BIT_LONG_ROW
    for dtype, red, tile in ((torch.bfloat16, long_row, long_tile), (torch.float16, 2 * long_row, long_tile),
                             (torch.bfloat16, long_row // 2, plan_module.STABLE_EXP_TILE),
                             (torch.float32, long_row, plan_module.STABLE_EXP_TILE)):
        _, p = plan_for(torch.empty(1024, red, dtype=dtype), (1,), get_exp_mode("fast"), dtype, sm_count=132)
        assert p.passes[0].lanes * p.passes[0].block_kept == tile, (dtype, red, p)


@pytest.mark.parametrize("strided", [False, True])
def test_exp_recompute_groups_count_in_the_depth(strided):
    """The fp64 recompute's plan (plan.plan_exp_recompute): outputs per program a whole number of
    groups, chunks a whole number of either tiling's tiles, and a depth -- the additions a term goes
    through, which the fp64 bound takes -- that covers the deeper of the two tilings: a lone row's and
    a group's (whose smaller tiles make a longer chain per lane)."""
    for n_out, red in [(3, 1100), (24, 1100), (8192, 8192), (1024, 65536), (262144, 16), (262144, 256)]:
        rp = plan_module.plan_exp_recompute(n_out, red, sm_count=132, strided=strided)
        assert rp.group > 1 and rp.block_outputs % rp.group == 0, rp
        if rp.chunks > 1:
            assert rp.chunk % rp.block_r == 0 and rp.chunk % rp.group_r == 0, rp
        lanes_depth = [-(-rp.span // lanes) - 1 + int(math.log2(lanes)) + int(math.log2(rp.block_chunks))
                       for lanes in (rp.block_r, rp.group_r)]
        assert rp.depth == max(lanes_depth), (rp, lanes_depth)
    # 16 chunks of 512 rows: a group's 8 tiles of 64 a lane, then the tile's and the chunks' trees
    assert plan_module.plan_exp_recompute(8192, 8192, sm_count=132, strided=True).depth == 7 + 6 + 4
