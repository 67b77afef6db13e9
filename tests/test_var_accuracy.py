"""Error budgets of var / std / var_mean: every Welford mode x dtype x schedule stays within
precred.moments_error_bound, measured against the exact oracle (validation.moments) on adversarial
rows: mean offsets 1e2..1e6 times the spread, tiny and huge scales, constant rows, wide ranges.

The bound is evaluated with the depth of the plan that actually ran; tiny tiles force long lane
chains, split schedules and merges of partial states on inputs small enough for the interpreter.
"""
import math
import zlib
from fractions import Fraction

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import precred
from precred.launch import _TL_DTYPE, plan_for, reduce_moments
from precred.modes import get_var_mode
from precred.schedules.steps import tile_weights
from precred.strategies import WELFORD
from validation import generators as gen
from validation.moments import exact_sqrt, reference_moments
from validation.oracle import format_info, ulp_error

from conftest import DEVICE as _DEVICE  # hypothesis tests cannot take function-scoped fixtures

VAR_MODES = list(precred.VAR_MODES)
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
PLANNER_SETTINGS = {"default": {}, "tiny-tiles": dict(tile_elements=16, sm_count=64, split_min_bytes=0)}


def check_moments_within_bound(x, dims, mode, *, correction=1.0, device="cpu", planner=None, std=True):
    """Run var and mean (and std, a second launch, when `std`) under the plan `planner` picks and assert
    every output is within its bound. Returns (plan, the largest error / bound ratio seen)."""
    m = get_var_mode(mode)
    xd = x.to(device)
    _, plan = plan_for(xd, dims, m, x.dtype, **(planner or {}))
    var, mean = (t.cpu() for t in reduce_moments(xd, dims, m, x.dtype, correction, False, True, plan=plan))
    results = {"var": var.tolist(), "mean": mean.tolist()}
    if std:
        results["std"] = reduce_moments(xd, dims, m, x.dtype, correction, True, False, plan=plan)[0].cpu().tolist()
    return plan, assert_rows_within_bound(results, x, dims, mode, correction, plan)


def assert_rows_within_bound(results, x, dims, mode, correction, plan):
    """results: {"var" | "std" | "mean": flat list of outputs}; asserts each within moments_error_bound
    for the plan that ran, against the exact oracle; where the exact result overflows the format, that
    it is inf; where no bound is claimed (the accumulator may overflow), that it is inf or finite, never
    NaN. At least one output must be held to a bound or to inf (else the data tested nothing). Returns
    the largest error / bound ratio."""
    rows, _, _ = reference_moments(x, dims)
    worst, checked = 0.0, 0
    for index, row in enumerate(rows):
        exact_var = row.variance(correction)
        exacts = {"var": exact_var, "std": exact_sqrt(exact_var) if exact_var is not None else None,
                  "mean": row.mean}
        for op, values in results.items():
            value = values[index]
            exact = exacts[op]
            if exact is None:   # n <= correction: torch's inf / NaN, the semantics tests' business
                continue
            if abs(exact) >= _overflow_threshold(x.dtype):
                # The exact result overflows the format: correct rounding says inf, so must we.
                assert value == math.inf, f"{mode} {op}: exact {float(exact):.3e} overflows, got {value!r}"
                checked += 1
                continue
            bound = precred.moments_error_bound(mode, row.n, row.m2, row.radius, row.mean, x.dtype,
                                                depth=plan.depth, op=op, correction=correction)
            if math.isinf(bound):
                assert not math.isnan(value), f"{mode} {op}: NaN where no bound is claimed (exact {float(exact):.3e})"
                continue
            checked += 1
            err = abs(Fraction(value) - exact)
            assert err <= Fraction(bound), (
                f"{mode} {op} {x.dtype} n={row.n} plan={plan} depth={plan.depth}: error "
                f"{float(err):.3e} > bound {bound:.3e} (exact {float(exact):.9e}, got {value!r})")
            worst = max(worst, float(err) / bound if bound else 0.0)
    assert checked > 0, f"{mode} {x.dtype}: no output was held to a bound"
    return worst


def _overflow_threshold(dtype):
    """max_finite + half an ulp: the smallest magnitude that rounds to inf."""
    p, _, emax = format_info(dtype)
    return Fraction(2) ** (emax + 1) - Fraction(2) ** (emax - p)


def _family(name, n, rng, dtype):
    """Variance-adversarial rows: offsets of 1e2..1e6 spreads, tiny and huge scales, constant rows."""
    _, emin, emax = format_info(dtype)
    if name.startswith("offset"):   # mean = offset x spread; fp16's range scales the spread down
        offset = float(name[len("offset"):])
        spread = min(1.0, 2.0 ** emax / (4 * offset))
        return gen.large_offset(n, offset * spread, spread, rng, dtype)
    if name == "tiny":       # spread near the bottom of the normal range
        return gen.large_offset(n, 3.0 * 2.0 ** (emin + 8), 2.0 ** (emin + 6), rng, dtype)
    if name == "huge":       # near 1e19 for fp32 (torch's fp32 var overflows there on CUDA)
        scale = 2.0 ** min(63, emax - 12)
        return gen.large_offset(n, scale, scale / 8, rng, dtype)
    if name == "constant":
        return gen.all_equal(n, 1.0 + 2.0 ** -5, dtype)
    return gen.FAMILIES[name](n, rng, dtype)


FAMILIES = ["normal", "uniform", "alternating", "wide_range", "subnormals", "offset1e2", "offset1e4",
            "offset1e6", "tiny", "huge", "constant"]


@pytest.mark.parametrize("planner", list(PLANNER_SETTINGS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("family", FAMILIES)
def test_every_var_mode_within_bound(device, family, dtype, planner):
    rng = np.random.default_rng(zlib.crc32(f"{family} {dtype}".encode()))   # the same data in every run
    # Tiny tiles run many interpreted loop steps: fewer, shorter rows there (still chains and splits).
    tiny = planner == "tiny-tiles"
    x = torch.stack([_family(family, 120 if tiny else 300, rng, dtype) for _ in range(2 if tiny else 3)])
    for mode in VAR_MODES:
        # dim -1: inner schedule; dim 0 of the transposed copy: outer schedule.
        check_moments_within_bound(x, (1,), mode, device=device, planner=PLANNER_SETTINGS[planner], std=not tiny)
        check_moments_within_bound(x.t().contiguous(), (0,), mode, device=device,
                                   planner=PLANNER_SETTINGS[planner], std=not tiny)


def _record_vector_launches(monkeypatch, const: str) -> list:
    """The list that each launch of Welford's vector part over the input appends its `const` to."""
    from precred import launch
    seen = []
    original = launch._launch

    def spy(kernel, grid, pointers, scalars, num_warps, **consts):
        if consts.get("STRATEGY") == WELFORD and consts.get("VECTOR_SUMS"):
            seen.append(consts[const])
        return original(kernel, grid, pointers, scalars, num_warps, **consts)

    monkeypatch.setattr(launch, "_launch", spy)
    return seen


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("family", FAMILIES)
def test_vector_moments_within_bound(device, family, dtype, monkeypatch):
    """Welford's first passes over the input keep lanes of 16-byte vectors' (mean, m2)
    (plan.WELFORD_VECTOR_MOMENTS, schedules/inner.py welford_vector_part): with and without them, rows of
    several tiles per lane and a partial last tile (1999 elements) stay within every mode's bound at the
    plan's depth; with them also split (one tile per lane, a partial tile in the last part) and plain
    loops, which load a tile ahead (plan.WELFORD_PREFETCH; the last load is the partial tile). Each
    vector's own (mean, m2) both ways: two passes in registers (plan.WELFORD_TWO_PASS_VECTORS,
    strategies/welford.py welford_vector_moments) and the merges of equal counts."""
    from precred import launch, plan
    rng = np.random.default_rng(zlib.crc32(f"vector {family} {dtype}".encode()))
    x = torch.stack([_family(family, 1999, rng, dtype) for _ in range(2)])
    split = dict(tile_elements=256, sm_count=64, split_min_bytes=0)
    plain = dict(tile_elements=256, pipelined=False)
    prefetched = _record_vector_launches(monkeypatch, "PREFETCH")
    two_pass = _record_vector_launches(monkeypatch, "WELFORD_TWO_PASS")
    for vector_moments, two_passes, planners in ((True, True, ({}, split, plain)), (True, False, ({}, split)),
                                                 (False, False, ({},))):
        monkeypatch.setattr(plan, "WELFORD_VECTOR_MOMENTS", vector_moments)
        monkeypatch.setattr(plan, "WELFORD_TWO_PASS_VECTORS", two_passes)
        launch._RECIPES.clear()
        for mode in VAR_MODES:
            for planner in planners:
                check_moments_within_bound(x, (1,), mode, device=device, planner=planner, std=False)
    launch._RECIPES.clear()
    assert True in prefetched and False in prefetched, prefetched   # both loops ran
    assert True in two_pass and False in two_pass, two_pass         # both vector moments ran


def _two_pass_rows(monkeypatch) -> list:
    """The list that each call of the two-pass rows kernel's launcher appends its plan to."""
    from precred import launch
    seen = []
    original = launch.moments_rows

    def spy(x, view, mode, out_dtype, output, plan, key=None):
        seen.append(plan)
        return original(x, view, mode, out_dtype, output, plan, key)

    monkeypatch.setattr(launch, "moments_rows", spy)
    monkeypatch.setattr(launch, "_RECIPES", {})   # a replayed recipe would not call it
    return seen


@pytest.mark.parametrize("family", FAMILIES)
def test_two_pass_rows_within_bound(device, family, monkeypatch):
    """fp32 rows the planner gives the two-pass single-read kernel (precred.plan.plan_moments_rows,
    schedules/moments_rows.py: `fast`): var, std and mean within moments_error_bound at that plan's
    depth (its module docstring derives why the Welford bound covers it), on every adversarial family:
    rows of a power of two, two a program (the third program's second row masked), padded rows (304
    in tiles of 512, four a program: the fourth masked), and on the GPU rows of 8192 (a row on four
    warps)."""
    from precred.plan import plan_moments_rows
    seen = _two_pass_rows(monkeypatch)
    rng = np.random.default_rng(zlib.crc32(f"two-pass {family}".encode()))
    lengths = [(304, 1.0), (1024, 1.0), (1520, 0.0)] + ([(8192, 1.0)] if device == "cuda" else [])
    for n, correction in lengths:
        x = torch.stack([_family(family, n, rng, torch.float32) for _ in range(3)])
        plan = plan_moments_rows(3, n, element_size=4, accumulator_size=4)
        assert plan is not None and plan.block_rows == (4 if n < 1024 else 2 if n < 4096 else 1), plan
        seen.clear()
        mode = get_var_mode("fast")
        var, mean = (t.cpu() for t in reduce_moments(x.to(device), (1,), mode, x.dtype, correction, False, True))
        std = reduce_moments(x.to(device), (1,), mode, x.dtype, correction, True, False)[0].cpu()
        assert seen == [plan, plan], seen
        assert_rows_within_bound({"var": var.tolist(), "std": std.tolist(), "mean": mean.tolist()}, x, (1,),
                                 "fast", correction, plan)


def test_two_pass_rows_bits_are_the_rows_own(device, monkeypatch):
    """A row's outputs from the two-pass rows kernel depend on that row alone: the same bits computed
    alone (a one-row program), as either row of a two-row program, in a batch of three, in views whose
    rows lie 2048 elements apart, and in a second run."""
    seen = _two_pass_rows(monkeypatch)
    rng = np.random.default_rng(5)
    rows = torch.stack([gen.large_offset(1024, 1e4, 1.0, rng, torch.float32) for _ in range(3)]).to(device)
    batch = precred.var_mean(rows, -1, mode="fast")
    assert [p.block_rows for p in seen] == [2], seen
    assert all(torch.equal(a, b) for a, b in zip(batch, precred.var_mean(rows, -1, mode="fast")))
    for i in range(3):
        other = (i + 1) % 3
        alone = precred.var_mean(rows[i:i + 1], -1, mode="fast")
        first = precred.var_mean(rows[[i, other]], -1, mode="fast")
        second = precred.var_mean(rows[[other, i]], -1, mode="fast")
        for whole, one, a, b in zip(batch, alone, first, second):
            assert torch.equal(whole[i:i + 1], one) and whole[i] == a[0] and whole[i] == b[1], i
    wide = torch.cat([rows, rows], 1)   # rows 2048 apart: the views' stride, not their length
    for view in (wide[:, :1024], wide[:, 1024:]):
        assert all(torch.equal(a, b) for a, b in zip(batch, precred.var_mean(view, -1, mode="fast")))
    assert {p.block_rows for p in seen} == {1, 2}, seen


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_whole_tile_parts_leave_out_the_tail_code_with_the_same_bits(device, dtype, monkeypatch):
    """Passes whose parts are whole tiles run without the vector part's partial-tile code where the
    planner says so (plan.WELFORD_TAIL_FREE_MIN_RED: the fp64 accumulator's longer rows), as the
    PART_TAIL constexpr tells the launch: the same bits as the kernel with that code (never run there),
    within the bound; a row with a partial tile keeps the code."""
    from precred import launch, plan
    seen = _record_vector_launches(monkeypatch, "PART_TAIL")
    rng = np.random.default_rng(zlib.crc32(f"whole tiles {dtype}".encode()))
    for n, tail in ((2048, False), (2047, True)):
        x = torch.stack([_family("offset1e4", n, rng, dtype) for _ in range(2)])
        results = {}
        for specialized in (True, False):
            monkeypatch.setattr(plan, "WELFORD_TAIL_FREE_MIN_RED", {8: 1024} if specialized else {})
            launch._RECIPES.clear()
            seen.clear()
            plan_run, _ = check_moments_within_bound(x, (1,), "fp64", device=device,
                                                     planner=dict(tile_elements=256), std=False)
            assert seen and all(part_tail == (tail or not specialized) for part_tail in seen), (n, seen)
            results[specialized] = [t.cpu() for t in reduce_moments(x.to(device), (1,), get_var_mode("fp64"),
                                                                   x.dtype, 1.0, False, True, plan=plan_run)]
        for a, b in zip(results[True], results[False]):
            assert torch.equal(a, b), (n, a, b)
    launch._RECIPES.clear()


@pytest.mark.parametrize("tile", [8192, 1024])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("family", ["normal", "offset1e6", "huge"])
def test_outer_tile_moments_within_bound(device, family, dtype, tile):
    """Over a strided axis with the lanes in registers (schedules/outer.py welford_tile_part: each tile's
    lanes merged first, a partial last tile counted), every mode stays within its bound at the plan's
    depth. 77 values per column: full tiles and a partial last one -- of 8 lanes (fp32; 4 for bf16's
    wider columns) from 8192-element tiles, or of 2 from 1024-element ones (plan.WELFORD_OUTER_TILE's
    size), whose fp32 pairs merge into the columns in one step (strategies/welford.py welford_merge_pairs)."""
    rng = np.random.default_rng(zlib.crc32(f"outer tiles {family} {dtype}".encode()))
    columns = 512 if dtype == torch.float32 else 1024
    x = torch.stack([_family(family, 77, rng, dtype) for _ in range(columns)], dim=1)
    planner = dict(tile_elements=tile)
    first = plan_for(x, (0,), get_var_mode("fast"), dtype, **planner)[1].passes[0]
    assert first.schedule == "outer" and (first.lanes >= 4 if tile == 8192 else first.lanes == 2)
    assert first.block_kept >= 32 * (16 // x.element_size()) * first.num_warps, "lanes not in registers"
    for mode in VAR_MODES:
        check_moments_within_bound(x, (0,), mode, device=device, planner=planner, std=False)


@pytest.mark.parametrize("family,dtype", [("offset1e6", torch.bfloat16), ("offset1e6", torch.float32),
                                          ("huge", torch.float32)], ids=str)
def test_narrow_strided_axis_within_bound(device, family, dtype):
    """Fewer columns than four warps of 16-byte vectors (plan.NARROW_OUTER_MIN_INNER): one-warp programs
    with each tile's lanes merged in registers, split into parts here; every mode within its bound."""
    rng = np.random.default_rng(zlib.crc32(f"narrow {family} {dtype}".encode()))
    x = torch.stack([_family(family, 70, rng, dtype) for _ in range(264)], dim=1)
    planner = dict(split_min_bytes=0)
    first = plan_for(x, (0,), get_var_mode("fast"), dtype, **planner)[1].passes[0]
    assert first.num_warps == 1 and first.block_kept == 32 * 16 // x.element_size() and first.parts > 1
    for mode in VAR_MODES:
        check_moments_within_bound(x, (0,), mode, device=device, planner=planner, std=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_lengths_around_block_sizes(device, dtype):
    """Rows around the tiny tiles' sizes (16-element tiles: chains, splits and merges of partial
    states of every length), over dim -1 and over dim 0 of the transposed copy, in every mode."""
    rng = np.random.default_rng(13)
    for n in gen.lengths_around([16, 64]):
        x = torch.stack([gen.large_offset(n, 1e3, 1.0, rng, dtype) for _ in range(2)])
        for mode in VAR_MODES:
            check_moments_within_bound(x, (1,), mode, device=device, planner=PLANNER_SETTINGS["tiny-tiles"],
                                       std=False)
            check_moments_within_bound(x.t().contiguous(), (0,), mode, device=device,
                                       planner=PLANNER_SETTINGS["tiny-tiles"], std=False)


@pytest.mark.parametrize("correction", [0, 1, 2.5])
def test_corrections_and_multi_dim_reductions_within_bound(device, correction):
    rng = np.random.default_rng(11)
    x = gen.large_offset(4 * 5 * 60, 1e3, 1.0, rng, torch.float32).view(4, 5, 60)
    for dims in [(2,), (0,), (1,), (0, 2), (0, 1, 2)]:
        for mode in VAR_MODES:
            check_moments_within_bound(x, dims, mode, correction=correction, device=device)


@pytest.mark.parametrize("offset", [1e2, 1e3, 1e4, 1e6])
def test_default_mode_fp32_var_is_within_4_ulp_whatever_the_offset(device, offset):
    # The goal: relative error <= 4 ulp (fp32) independent of the mean's offset, at n = 8192.
    rng = np.random.default_rng(int(offset))
    x = gen.large_offset(8192, offset, 1.0, rng, torch.float32)
    plan, _ = check_moments_within_bound(x.view(1, -1), (1,), precred.DEFAULT_VAR_MODE, device=device)
    exact = reference_moments(x, None)[0][0].variance(1)
    got = precred.var(x.to(device)).item()
    assert ulp_error(got, exact, torch.float32) <= 4.0, (offset, got, float(exact), plan)


@settings(max_examples=25, deadline=None)
@given(data=hnp.arrays(np.float32, st.tuples(st.integers(1, 4), st.integers(1, 200)),
                       elements=st.floats(-1e6, 1e6, width=32)),
       mode=st.sampled_from(VAR_MODES), correction=st.sampled_from([0, 1]))
def test_hypothesis_arrays_within_bound(data, mode, correction):
    x = torch.from_numpy(data)
    check_moments_within_bound(x, (1,), mode, correction=correction, device=_DEVICE)


@triton.jit
def _tile_weights_kernel(g_ptr, reciprocal_ptr, complement_ptr, ACC_DTYPE: tl.constexpr):
    g = tl.load(g_ptr + tl.program_id(0))
    reciprocal, complement = tile_weights(g, 0, 1, ACC_DTYPE)
    tl.store(reciprocal_ptr + tl.program_id(0), reciprocal.to(tl.float64))
    tl.store(complement_ptr + tl.program_id(0), complement.to(tl.float64))


@pytest.mark.parametrize("acc_dtype", [torch.float32, torch.float64], ids=str)
def test_tile_weights_within_their_bound(device, acc_dtype):
    """Welford's tile weights (precred.schedules.steps.tile_weights: 1/k and (k - 1)/k of a part's k-th
    tile, which moments_error_bound counts at 2u each) against the exact fractions: the reciprocal within
    u (1 + 2^-19) -- fp32's correctly rounded division, refined in fp64 -- the complement, 1 minus it,
    within 1.51 u, exact for k <= 2; k from 1 to 3000, scattered up to 2^24 and beyond it (fp64's
    division there)."""
    rng = np.random.default_rng(7)
    ks = sorted({*range(1, 3001), *rng.integers(3001, 2 ** 24, 500).tolist(), 2 ** 24 - 1, 2 ** 24, 2 ** 24 + 1,
                 2 ** 30 + 7, 2 ** 40 + 3})
    g = torch.tensor([k - 1 for k in ks], dtype=torch.int64, device=device)
    reciprocal = torch.empty(len(ks), dtype=torch.float64, device=device)
    complement = torch.empty_like(reciprocal)
    _tile_weights_kernel[(len(ks),)](g, reciprocal, complement, ACC_DTYPE=_TL_DTYPE[acc_dtype])
    u = 2.0 ** -24 if acc_dtype == torch.float32 else 2.0 ** -53
    for k, r, c in zip(ks, reciprocal.cpu().tolist(), complement.cpu().tolist()):
        exact_r, exact_c = Fraction(1, k), Fraction(k - 1, k)
        assert abs(Fraction(r) - exact_r) <= Fraction(u * (1 + 2.0 ** -19)) * exact_r, (k, r)
        assert abs(Fraction(c) - exact_c) <= Fraction(1.51 * u) * exact_c, (k, c)
        if k <= 2:
            assert Fraction(r) == exact_r and Fraction(c) == exact_c, (k, r, c)
