"""GPU-only checks: sizes the interpreter cannot reach (run with PRECRED_TEST_DEVICE=cuda)."""
from dataclasses import replace
from fractions import Fraction
import math

import numpy as np

import pytest
import torch

import precred
from precred.launch import (PIPELINED_STRATEGIES, plan_for, reduce_extremum, reduce_logsumexp, reduce_moments,
                            reduce_sum)
from precred.modes import (CERTIFIED_EXP_MODE, MAXIMUM_MODE, MAXIMUM_VALUE_MODE, MINIMUM_MODE, MINIMUM_VALUE_MODE,
                           get_exp_mode, get_mode, get_var_mode)
from conftest import equal_with_nan, same_bits

pytestmark = pytest.mark.gpu

# Tests marked large_memory hold tens of GB of GPU memory (2^31-element inputs, their outputs and torch's
# references). bench/gpu_suite.py runs them in a process of their own after the rest, which it spreads over
# xdist workers (-m "not large_memory"): beside the workers they ran the H100 out of memory and failed tests
# there (2026-12-06), and a worker's caching allocator keeps their memory after them.


@pytest.mark.large_memory
def test_more_than_2_pow_31_elements_use_64_bit_offsets(device):
    n = 2 ** 31 + 17
    x = torch.ones(n, dtype=torch.bfloat16, device=device)
    x[-1] = 1024.0                     # an element past 2^31 that a 32-bit offset would miss or alias
    exact = (n - 1) + 1024
    for mode in precred.MODES:
        if mode == "exact":   # rounds to fp32 at most: the exact sum correctly rounded there
            got = precred.sum(x, mode=mode, dtype=torch.float32).item()
            assert got == torch.tensor(float(exact), dtype=torch.float64).float().item(), got
            continue
        got = precred.sum(x, mode=mode, dtype=torch.float64).item()
        if mode in ("kahan", "fp64"):
            assert got == exact, (mode, got, exact)   # both carry more than fp32's 24 bits to the end
        else:
            _, plan = plan_for(x, (0,), get_mode(mode), torch.float64)
            bound = precred.error_bound(mode, n, exact, exact, x.dtype, depth=plan.depth, out_dtype=torch.float64)
            assert abs(got - exact) <= bound, (mode, got, exact, bound)
    # A strided reduction whose offsets pass 2^31: dim 0 of a (2^16, 2^15) view (outer schedule).
    m = x[: 2 ** 31].view(2 ** 16, 2 ** 15)
    col = precred.sum(m, 0, mode="kahan", dtype=torch.float64)
    assert torch.equal(col, torch.full((2 ** 15,), float(2 ** 16), dtype=torch.float64, device=device))
    del x, m


def assert_means_within_bound(x, got):
    """Each row mean of x (fp32, [rows, n]) in got within precred.error_bound's fp64 mean bound of the
    exact mean: math.fsum's sum is the exact one correctly rounded to fp64 (2^-53 relative), divided
    exactly (Fraction)."""
    n = x.shape[1]
    for row, value in zip(x.double().numpy(), got.cpu().double().tolist()):
        total = math.fsum(row)
        exact = Fraction(total) / n
        slack = 2.0 ** -53 * abs(total) / n                      # fsum's rounding
        bound = precred.error_bound("fp64", n, float(np.abs(row).sum()), float(exact) * n, torch.float32, op="mean")
        assert abs(Fraction(value) - exact) <= Fraction(bound) + Fraction(slack), (value, float(exact), bound)


def test_mean_of_fp32_is_rounded_once_on_the_gpu(device):
    """fp32 `/` is approximate on the GPU (div.full.f32, up to 2 ulps); the kernels divide in fp64,
    correctly rounded, and round to fp32 once: every mean within the fp64 mode's bound (about half an
    ulp) of the exact mean."""
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(4096, 3000, generator=g)
    assert_means_within_bound(x, precred.mean(x.to(device), 1, mode="fp64"))


def test_cpu_tensors_in_a_gpu_process_get_a_clear_error(device):
    # The kernels of this process are compiled for the GPU (TRITON_INTERPRET unset): a CPU tensor
    # cannot run them, and says how to run them interpreted instead.
    x = torch.ones(4, 8)
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        precred.sum(x, 1)


@pytest.mark.large_memory
def test_var_of_more_than_2_pow_31_elements(device):
    from fractions import Fraction
    n = 2 ** 31 + 17
    x = torch.ones(n, dtype=torch.bfloat16, device=device)
    x[-1] = 1024.0
    var, mean = precred.var_mean(x, mode="fp64", correction=0)
    # n - 1 ones and one 1024: mean = 1 + 1023/n, m2 = 1023^2 (n - 1) / n.
    exact_mean = 1 + Fraction(1023, n)
    exact_var = Fraction(1023 ** 2 * (n - 1), n) / n
    _, plan = plan_for(x, (0,), get_var_mode("fp64"), x.dtype)
    for op, got, exact in (("var", var, exact_var), ("mean", mean, exact_mean)):
        bound = precred.moments_error_bound("fp64", n, exact_var * n, 1023.0, exact_mean, x.dtype,
                                            depth=plan.depth, op=op, correction=0)
        assert abs(Fraction(got.item()) - exact) <= Fraction(bound), (op, got.item(), float(exact), bound)
    del x


@pytest.mark.parametrize("shape,dim", [((16, 262144), 1), ((4096, 4096), 0), ((262144, 16), 0)])
def test_var_mean_within_bound_on_gpu_sized_plans(device, shape, dim):
    # Sizes that take the split schedule and the planner's GPU tile choices, on offset data.
    from test_var_accuracy import check_moments_within_bound
    g = torch.Generator().manual_seed(5)
    x = torch.randn(shape, generator=g) * 0.5 + 1e3
    for mode in precred.VAR_MODES:
        check_moments_within_bound(x, (dim,), mode, device=device, std=False)


@pytest.mark.large_memory
def test_extrema_past_2_pow_31_elements(device):
    """argmax / argmin / amax of a 2^31 + 17 element bf16 tensor whose extremes sit past 2^31, on the
    planner's schedule and on the atomic one (ties before them must not win: they come later in the
    order only by value)."""
    n = 2 ** 31 + 17
    x = torch.zeros(n, dtype=torch.bfloat16, device=device)
    x[5] = 3.0
    x[-3] = 4.0
    x[-2] = -4.0
    x[-1] = 4.0                        # a tie of the maximum: the first (n - 3) wins
    assert precred.argmax(x).item() == n - 3 and precred.argmin(x).item() == n - 2
    assert precred.amax(x).item() == 4.0 and precred.amin(x).item() == -4.0
    for schedule in ("atomic", "passes"):
        values, index = reduce_extremum(x, (0,), MAXIMUM_MODE, True, schedule=schedule)
        assert index.item() == n - 3 and values.item() == 4.0
        values, index = reduce_extremum(x, (0,), MINIMUM_MODE, True, schedule=schedule)
        assert index.item() == n - 2 and values.item() == -4.0
    del x


@pytest.mark.parametrize("shape,dim", [((16, 262144), 1), ((4096, 4096), 0), ((64, 1 << 20), 1)])
def test_extrema_on_gpu_sized_plans_match_torch(device, shape, dim):
    """Sizes that take the split (and, forced, the atomic) schedule with the GPU's tiles: values and
    indices equal torch's on data with many ties and a NaN."""
    g = torch.Generator(device=device).manual_seed(3)
    x = torch.randint(-50, 51, shape, generator=g, device=device).float()
    x[1, 77] = float("nan")
    for ours, theirs in ((precred.max, torch.max), (precred.min, torch.min)):
        v, i = ours(x, dim)
        tv, ti = theirs(x, dim)
        assert torch.equal(i, ti) and equal_with_nan(v, tv)
    for ours, theirs in ((precred.amax, torch.amax), (precred.amin, torch.amin)):
        assert equal_with_nan(ours(x, dim), theirs(x, dim))
    # amax / amin of signed zeros: IEEE's maximum / minimum on every plan of these sizes.
    zeros = torch.where(torch.rand(shape, generator=g, device=device) < 0.5, -0.0, 0.0)
    zeros.select(1 - dim, 0).fill_(-0.0)   # one output all -0.0
    want_max = torch.ones(zeros.shape[1 - dim], dtype=torch.bool, device=device)
    want_max[0] = False
    assert torch.equal(precred.amax(zeros, dim).signbit(), ~want_max)
    assert bool(precred.amin(zeros, dim).signbit().all())
    if dim == 1:
        for mode, theirs in ((MAXIMUM_MODE, torch.max), (MINIMUM_MODE, torch.min)):
            v, i = reduce_extremum(x, (1,), mode, True, schedule="atomic")
            tv, ti = theirs(x, 1)
            assert torch.equal(i, ti) and equal_with_nan(v, tv)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_atomic_schedule_replays_see_their_keys_empty(device, dtype):
    """A CUDA call on the atomic schedule leaves a launch recipe (precred.launch._AtomicRecipe) that
    reuses its keys per stream: each replay must find them at INT64_MIN again (the finish kernel's
    reset) -- inputs of decreasing maxima, so a key left by the call before would win."""
    from precred import launch
    launch._RECIPES.clear()
    g = torch.Generator(device=device).manual_seed(11)
    base = torch.randn(16, 262144, generator=g, device=device)
    for step in range(4):
        x = (base - 8 * step).to(dtype)
        for mode, theirs in ((MAXIMUM_MODE, torch.max), (MINIMUM_MODE, torch.min)):
            for with_index in (True, False):
                values, index = reduce_extremum(x, (1,), mode, with_index, schedule="atomic")
                want = theirs(x, 1)
                assert torch.equal(values, want.values) and (index is None) == (not with_index)
                if with_index:
                    assert torch.equal(index, want.indices)
    assert sum(1 for key in launch._RECIPES if key[0] == "atomic") == 4   # replayed, not planned anew


@pytest.mark.parametrize("shape,dim,dtype", [((1, 2 ** 24), 1, torch.float32), ((16384, 512), 1, torch.bfloat16),
                                             ((8192, 1024), 1, torch.float32), ((512, 65536), 1, torch.float32),
                                             ((4096, 4096), 0, torch.float32),
                                             ((1024, 8192), 0, torch.bfloat16), ((65536, 1024), 0, torch.float32)])
def test_pipelined_loops_give_the_same_bits(device, shape, dim, dtype):
    """Software-pipelined loops (plan.LOOP_STAGES; the interpreter ignores them) only move the loads:
    every pipelined strategy's result is the plain loop's, bit for bit, on both schedules -- every sum
    mode (sum and mean), every var mode (variance and mean), every logsumexp mode, max and min with
    their indices."""
    x, runs = _reductions_by_plan(shape, dim, dtype, device)
    compared = 0
    for mode, run in runs:
        assert mode.strategy in PIPELINED_STRATEGIES
        _, piped = plan_for(x, (dim,), mode, x.dtype)
        _, plain = plan_for(x, (dim,), mode, x.dtype, pipelined=False)
        if piped == plain:   # loops the planner keeps plain (pairwise's one-tile lanes, fast's 2 tiles per
            continue         # lane, 16-bit rows of plan.PLAIN_16BIT_ROWS_MIN_RED): nothing to compare
        compared += 1
        _assert_same_bits(run(piped, mode), run(plain, mode), mode)
    assert compared >= len(runs) // 2, compared


def _reductions_by_plan(shape, dim, dtype, device):
    """(x, [(mode, run(plan, mode) -> outputs)]): every sum mode (sum and mean), every var mode (variance
    and mean), every logsumexp mode (and the fp64 mode's certified fp32 pass), max and min with their indices and amax / amin, over dim of normal
    data."""
    g = torch.Generator(device="cpu").manual_seed(5)
    x = (torch.randn(shape, generator=g) * 3 + 1).to(dtype).to(device)
    runs = [(get_mode(name), lambda plan, m, divide=divide: [reduce_sum(x, (dim,), m, x.dtype, divide, plan=plan)])
            for name in precred.MODES for divide in (False, True)]
    runs += [(get_var_mode(name), lambda plan, m: reduce_moments(x, (dim,), m, x.dtype, 1.0, False, True, plan=plan))
             for name in precred.VAR_MODES]
    runs += [(m, lambda plan, m: [reduce_logsumexp(x, (dim,), m, plan=plan)])
             for m in [get_exp_mode(name) for name in precred.EXP_MODES] + [CERTIFIED_EXP_MODE]]
    runs += [(m, lambda plan, m: reduce_extremum(x, (dim,), m, True, plan=plan, schedule="passes"))
             for m in (MAXIMUM_MODE, MINIMUM_MODE)]
    runs += [(m, lambda plan, m: reduce_extremum(x, (dim,), m, False, plan=plan)[:1])
             for m in (MAXIMUM_VALUE_MODE, MINIMUM_VALUE_MODE)]
    return x, runs


def _assert_same_bits(got, want, mode):
    def as_bits(t):   # NaN-safe equality
        return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]) if t.is_floating_point() else t
    for a, b in zip(got, want):
        assert torch.equal(as_bits(a), as_bits(b)), mode


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_warps_of_a_pass_do_not_change_its_bits(device, dtype):
    """The lanes' tree is fixed (schedules/tree.py), whatever the warps that hold it: plans the planner
    runs wide (plan.LONG_SPLIT_WARPS' and LONG_ROW_STAGES' notes: 16 warps on long rows and long splits)
    give the bits of the same plan on 4 warps: the sum modes and the extrema, the strategies those plans
    are for. Not pairwise: its binary counter sums each thread's share of a tile first (TREE_THREADS
    = 32 * num_warps, schedules/inner.py), so its tree follows the warps -- the planner never widens it."""
    for shape in [(512, 65536), (1, 2 ** 24)]:
        x, runs = _reductions_by_plan(shape, 1, dtype, device)
        for mode, run in runs[:2 * len(precred.MODES):2] + runs[-4:]:   # sums (not means) and extrema
            if mode.whole_tree:
                continue
            _, planned = plan_for(x, (1,), mode, x.dtype)
            narrower = replace(planned, passes=(replace(planned.passes[0], num_warps=4), *planned.passes[1:]))
            _assert_same_bits(run(narrower, mode), run(planned, mode), mode)


@pytest.mark.parametrize("shape,dtype", [((16, 262144), torch.float32), ((16, 262144), torch.bfloat16),
                                         ((1, 2 ** 24), torch.float32)])
def test_fused_and_dependent_merges_give_the_bits_of_two_launches(device, shape, dtype):
    """Plan.fused_merge: the split's merge run by the last program of each row (schedules/inner.py),
    and Plan.dependent_merge: the merging pass launched as a programmatic dependent of the first (amax,
    amin on sm_90: plan.PROGRAMMATIC_MERGE_STRATEGIES), return the bits of two ordinary launches for
    every strategy, on the GPU's own plans -- three times in a row, so a counter left non-zero or a
    merge that read the partial states before they were written would show."""
    from precred import launch, plan as planning
    x, runs = _reductions_by_plan(shape, 1, dtype, device)
    programmatic = launch.programmatic_dependent_launch(torch.device(device))
    merged_seen = 0
    for mode, run in runs:
        _, plan = plan_for(x, (1,), mode, x.dtype)
        assert plan.dependent_merge == (programmatic and mode.strategy in planning.PROGRAMMATIC_MERGE_STRATEGIES)
        if not (plan.fused_merge or plan.dependent_merge):
            continue
        merged_seen += 1
        want = run(replace(plan, fused_merge=False, dependent_merge=False), mode)
        for _ in range(3):
            _assert_same_bits(run(plan, mode), want, mode)
    assert merged_seen == len(runs)


@pytest.mark.parametrize("shape", [(65536, 1024), (262144, 256), (8192, 8192)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_narrowed_outer_merge_gives_the_bits_of_the_full_block(device, shape, dtype, monkeypatch):
    """plan.STATE_PASS_MIN_COLUMNS: an outer pass over partial states split into more, narrower
    programs returns the bits of the unnarrowed pass, on the GPU's plans: the same tree in the same
    order (but for plan.WIDE_LANES_STATE_STRATEGIES, whose narrowed merges take more lanes). Welford
    included: its products and sums are explicit FMAs (strategies/welford.py), where
    contractible mul.f32 / add.f32 had let ptxas fuse them differently per column block (1 ulp of
    fp32 var on 65536x1024 and 262144x256)."""
    from precred import plan as plan_module

    x, runs = _reductions_by_plan(shape, 0, dtype, device)
    plans = [plan_for(x, (0,), mode, x.dtype)[1] for mode, _ in runs]
    monkeypatch.setattr(plan_module, "STATE_PASS_MIN_COLUMNS", 0)
    plan_module.plan_reduction.cache_clear()
    try:
        full_plans = [plan_for(x, (0,), mode, x.dtype)[1] for mode, _ in runs]
    finally:
        plan_module.plan_reduction.cache_clear()
    narrowed_seen = 0
    for (mode, run), plan, full in zip(runs, plans, full_plans):
        if full == plan or mode.strategy in plan_module.WIDE_LANES_STATE_STRATEGIES:
            continue   # (the latter widen a narrowed merge's lanes: another tree by design, test_plan.py)
        narrowed_seen += 1
        assert all(p.block_kept <= f.block_kept for p, f in zip(plan.passes, full.passes))
        _assert_same_bits(run(plan, mode), run(full, mode), mode)
    assert narrowed_seen > 0


def test_exact_mode_on_gpu_sizes_both_stages(device):
    # 2^24 normal values, their negatives (shuffled) and two tiny ones: the exact sum is the tiny pair,
    # far below what the fp64 filter can resolve against S1 ~ 2^24, so the split rows are recomputed by
    # the superaccumulator in chunks merged by integer atomics; a second row of plain data is certified.
    from fractions import Fraction
    from validation.oracle import reference_sum, round_to

    g = torch.Generator(device="cpu").manual_seed(5)
    a = torch.randn(2 ** 24, generator=g)
    tiny = torch.tensor([2.0 ** -100, 3 * 2.0 ** -120])
    hard = torch.cat([a, -a[torch.randperm(2 ** 24, generator=g)], tiny])
    exact = Fraction(2) ** -100 + 3 * Fraction(2) ** -120
    n = hard.numel()
    got = precred.sum(hard.to(device), mode="exact").item()
    assert got == round_to(exact, torch.float32)
    assert precred.mean(hard.to(device), mode="exact").item() == round_to(exact / n, torch.float32)
    rows = torch.stack([hard[: 2 ** 20 + 2], a[: 2 ** 20 + 2]])   # (2, 2^20 + 2)
    for dtype in (torch.float32, torch.bfloat16):
        r = rows.to(dtype)
        want, _ = reference_sum(r, dim=(1,))
        for _ in range(3):   # replays reuse the chunked recompute's scratch, which the kernel leaves zeroed
            assert torch.equal(precred.sum(r.to(device), 1, mode="exact").cpu(), want.to(dtype))
        assert torch.equal(precred.sum(r.t().contiguous().to(device), 0, mode="exact").cpu(), want.to(dtype))


def test_exact_recompute_launched_early_waits_for_the_filter(device, monkeypatch):
    """On sm_90 the exact mode's recompute is a programmatic dependent launch of the filter's last pass
    (precred.launch.programmatic_dependent_launch), which may start while the filter runs: rows the
    filter cannot certify, placed early, midway and in its last program, still come back correctly
    rounded, and every output equals the ordinary launch's bits, replays included."""
    from fractions import Fraction
    from precred import eager, launch, plan
    from validation.oracle import round_to

    if not launch.programmatic_dependent_launch(torch.device(device)):
        pytest.skip("programmatic dependent launch needs a GPU of compute capability 9.0")
    g = torch.Generator(device="cpu").manual_seed(21)
    x = torch.randn(1024, 8192, generator=g)
    a = torch.randn(4095, generator=g)
    hard = torch.cat([a, -a[torch.randperm(4095, generator=g)], torch.tensor([2.0 ** -100, 3 * 2.0 ** -120])])
    want = round_to(Fraction(2) ** -100 + 3 * Fraction(2) ** -120, torch.float32)
    hard_rows = [3, 500, 1023]
    x[hard_rows] = hard
    constants = []
    original = launch._launch

    def spy(kernel, grid, pointers, scalars, num_warps, **consts):
        constants.append((kernel.__name__, consts))
        return original(kernel, grid, pointers, scalars, num_warps, **consts)

    monkeypatch.setattr(launch, "_launch", spy)
    eager._CALLS.clear()
    launch._RECIPES.clear()
    early = [precred.sum(x.to(device), 1, mode="exact").cpu() for _ in range(3)]   # the first, two replays
    names = [name for name, _ in constants]
    assert names[-1] == "recompute_kernel"
    assert constants[-1][1]["launch_pdl"] and constants[-1][1]["WAIT_FOR_PREVIOUS"]
    assert constants[-2][1]["LAUNCH_DEPENDENTS"]
    monkeypatch.setattr(plan, "RECOMPUTE_PROGRAMMATIC_LAUNCH", False)
    eager._CALLS.clear()
    launch._RECIPES.clear()
    ordinary = precred.sum(x.to(device), 1, mode="exact").cpu()
    assert "launch_pdl" not in constants[-1][1] and not constants[-2][1]["LAUNCH_DEPENDENTS"]
    assert ordinary[hard_rows].tolist() == [want] * 3
    for got in early:
        assert torch.equal(got, ordinary)


@pytest.mark.parametrize("op", ["sum", "var_mean", "var_mean fp64 bf16"])
def test_later_passes_launched_early_wait_for_the_states(device, op, monkeypatch):
    """A plan of two passes (8192 x 8192 over dim 0) launches its second pass as a programmatic
    dependent of the first (plan.PASS_PROGRAMMATIC_LAUNCH: fp32 plain sums and Welford; fp64 Welford on
    16-bit input, plan.PASS_PROGRAMMATIC_LAUNCH_FP64), which may start while the first runs: the results
    equal the ordinary launches' bits, replays included."""
    from precred import eager, launch, plan

    if not launch.programmatic_dependent_launch(torch.device(device)):
        pytest.skip("programmatic dependent launch needs a GPU of compute capability 9.0")
    f = {"sum": lambda t: (precred.sum(t, 0, mode="fast"),),
         "var_mean": lambda t: precred.var_mean(t, 0, mode="fast"),
         "var_mean fp64 bf16": lambda t: precred.var_mean(t.bfloat16(), 0, mode="fp64")}[op]
    g = torch.Generator(device="cpu").manual_seed(22)
    x = (torch.randn(8192, 8192, generator=g) * 3 + 1).to(device)
    constants = []
    original = launch._launch

    def spy(kernel, grid, pointers, scalars, num_warps, **consts):
        constants.append(consts)
        return original(kernel, grid, pointers, scalars, num_warps, **consts)

    monkeypatch.setattr(launch, "_launch", spy)
    eager._CALLS.clear()
    launch._RECIPES.clear()
    early = [f(x) for _ in range(3)]   # the first call, two replays
    assert len(constants) == 2, "a plan of two passes"
    assert constants[0]["LAUNCH_DEPENDENTS"] and not constants[0]["WAIT_FOR_PREVIOUS"]
    assert constants[1]["WAIT_FOR_PREVIOUS"] and constants[1]["launch_pdl"]
    monkeypatch.setattr(plan, "PASS_PROGRAMMATIC_LAUNCH", frozenset())
    eager._CALLS.clear()
    launch._RECIPES.clear()
    ordinary = f(x)
    assert not constants[-1]["WAIT_FOR_PREVIOUS"] and "launch_pdl" not in constants[-1]
    for got in early:
        assert all(torch.equal(a, b) for a, b in zip(got, ordinary))


REPLAYED_CALLS = {
    "sum": lambda t: precred.sum(t, -1),
    "mean fp64": lambda t: precred.mean(t, (0, 1), mode="fp64"),
    "sum bf16 to fp32": lambda t: precred.sum(t.bfloat16(), 0, keepdim=True, dtype=torch.float32),
    "sum exact": lambda t: precred.sum(t, 0, mode="exact"),
    "var_mean": lambda t: precred.var_mean(t, -1),
    "var_mean fast rows": lambda t: precred.var_mean(t.view(-1)[:t.numel() // 1024 * 1024].view(-1, 1024), -1,
                                                     mode="fast"),   # the two-pass rows kernel
    "std fast": lambda t: precred.std(t, 0, correction=0, keepdim=True, mode="fast"),
    "logsumexp": lambda t: precred.logsumexp(t, -1),
    "logsumexp bf16": lambda t: precred.logsumexp(t.bfloat16(), 0),
    "amax": lambda t: precred.amax(t, 0),
    "max(dim)": lambda t: precred.max(t, -1),
    "argmin flat": lambda t: precred.argmin(t),
    "softmax": lambda t: precred.softmax(t, -1),
    "softmax bf16 to fp32": lambda t: precred.softmax(t.bfloat16(), 0, dtype=torch.float32),
    "log_softmax bf16": lambda t: precred.log_softmax(t.bfloat16(), -1),   # `accurate`: its split tail
    "log_softmax fast dim 0": lambda t: precred.log_softmax(t, 0, mode="fast"),
}


@pytest.mark.parametrize("shape", [(16, 262144), (300, 70)])
@pytest.mark.parametrize("op", list(REPLAYED_CALLS))
def test_repeated_eager_calls_replay_what_the_full_path_computes(device, op, shape):
    """precred.eager: the first eager call of a signature stores a replay of its launch recipe; later
    calls on new data (twice: the second reuses the stream's partial states) return exactly what the
    full path returns for that data."""
    from precred import eager, launch

    f = REPLAYED_CALLS[op]
    g = torch.Generator(device="cpu").manual_seed(11)
    inputs = [(torch.randn(shape, generator=g) * 5 + k).to(device) for k in range(3)]
    eager._CALLS.clear()
    f(inputs[0])
    assert len(eager._CALLS) == 1, "the call left no replay"
    replayed = [f(x) for x in inputs[1:]]
    for x, got in zip(inputs[1:], replayed):
        eager._CALLS.clear()
        launch._RECIPES.clear()
        fresh = f(x)
        for a, b in zip(*(t if isinstance(t, tuple) else (t,) for t in (got, fresh))):
            assert a.shape == b.shape and a.dtype == b.dtype
            assert equal_with_nan(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape,dim", [((16, 65536), 1), ((256, 8192), 1), ((8192, 1024), 0), ((16384, 256), 0)])
def test_logsumexp_within_bound_on_gpu_sized_plans(device, shape, dim, dtype):
    """The planner's GPU plans -- rows split, rows of vector states, columns of tile states with the
    lanes in registers -- keep every logsumexp mode within its bound on adversarial families. Rows of
    more than validation.stable_exp.MPMATH_MAX_N values: the oracle's numpy path (mpmath per element
    took ~40 s for 4096 x 1024)."""
    from test_logsumexp import assert_within_bound, family
    rng = np.random.default_rng(23)
    for name in ("normal", "spread1e4", "close"):
        x = family(name, shape[1 - dim], shape[dim], rng, dtype)   # rows of the reduced length
        x = x if dim == 1 else x.t().contiguous()
        for mode in precred.EXP_MODES:
            assert_within_bound(x, dim, mode, device)


@pytest.mark.parametrize("shape", [(16, 262144), (600, 16384), (4096, 1024), (8192, 256)])
def test_accurate_logsumexp_on_gpu_sized_rows(device, shape):
    """logsumexp's accurate mode on the GPU's own plans -- few long rows split into parts, streamed rows
    (the recompute a programmatic dependent), held rows -- within its bound (2 ulp; the fp64 mode's
    where that is larger, next to 0) on adversarial families and on log-probability rows (logsumexp ~
    0: every row left to the fp64 finish of held rows or the recompute of streamed ones, the bound at
    that path's depth, plan.accurate_rows_fp64_depth)."""
    from precred.plan import accurate_rows_fp64_depth, plan_accurate_logsumexp_rows
    from test_logsumexp import _log_probability_rows, family, rows_within_bound
    from precred.launch import device_sm_count

    plan = plan_accurate_logsumexp_rows(*shape, sm_count=device_sm_count(torch.device(device)))
    assert (plan.parts > 1) == (shape == (16, 262144)) and plan.one_tile == (shape[1] <= 8192), plan
    rng = np.random.default_rng(31)
    rows = min(shape[0], 64)   # the oracle's time; the plan is the whole shape's
    for name in ("normal", "spread1e4", "close", "one_finite", "logprob"):
        if name == "logprob":
            x = _log_probability_rows(shape[0], shape[1], rng)
        else:
            x = family(name, shape[0], shape[1], rng, torch.float32)
        got = precred.logsumexp(x.to(device), -1).cpu()[:rows].double().tolist()
        depth = accurate_rows_fp64_depth(shape[0], shape[1], sm_count=device_sm_count(torch.device(device)))
        rows_within_bound(x[:rows], -1, got, "accurate", depth, name)


@pytest.mark.parametrize("shape,parts", [((1024, 65536), "split"), ((8192, 8192), "split"), ((65536, 1024), "split"),
                                         ((262144, 256), "split"), ((1024, 65536), "one")], ids=str)
def test_accurate_logsumexp_on_gpu_sized_columns(device, shape, parts, monkeypatch):
    """logsumexp's accurate mode over dim 0 on the GPU's own column plans -- split into parts merged by
    the second launch (5 to 1024 parts), or in one part (a plan asking for one warp per SM) -- and the
    fp64 recompute in the same launches, within its bound on adversarial families and on
    log-probability columns (every output left to the recompute); a sample of 16 columns is checked
    against the oracle, the call repeats bitwise, and the recipe's work list is left empty."""
    from precred import launch, plan as plan_module
    from precred.layout import reduction_view
    from test_logsumexp import _fresh_recipes, _log_probability_rows, family, rows_within_bound

    if parts == "one":
        monkeypatch.setattr(plan_module, "ACCURATE_COLUMNS_WARPS_PER_SM", 1)
        _fresh_recipes(monkeypatch)   # the split case's recipe has this signature
    rows, columns = shape
    view = reduction_view(torch.empty(shape, device=device), (0,))
    plan = launch._accurate_columns_plan(view, torch.device(device))
    assert plan is not None and (plan.parts > 1) == (parts == "split"), plan
    rng = np.random.default_rng(47)
    sample = 16
    for name in ("normal", "spread1e4", "close", "one_finite", "logprob"):
        if name == "logprob":
            x = _log_probability_rows(columns, rows, rng).t().contiguous()
        else:
            x = family(name, columns, rows, rng, torch.float32).t().contiguous()
        xd = x.to(device)
        got = precred.logsumexp(xd, 0)
        assert torch.equal(got, precred.logsumexp(xd, 0)), name
        rows_within_bound(x[:, :sample].contiguous(), 0, got.cpu()[:sample].double().tolist(), "accurate",
                          plan.recompute_depth, name)
        # the replayed recipe's work list: length, counter and claims back to zero after each call
        lists = [tensors[0] for recipe in launch._RECIPES.values()
                 if isinstance(recipe, launch._AccurateRecipe) and "work" in recipe.scratch
                 for tensors, _ in recipe.scratch["work"][0].kept.values()]
        assert lists, "no launch recipe kept a work list"
        assert all(work[:2 + (work.numel() - 2) // 2].count_nonzero() == 0 for work in lists), name


def test_ex2_approx_within_its_documented_error(device):
    """ex2.approx.ftz.f32 (libdevice.exp2 of fp32, what exp_of_exact_gap and exp_flushed call) within
    2^-22 of 2^y relative -- PTX's stated bound, which precred.bounds.ACCURATE_EXP_ERROR_UNITS builds on
    -- for every fp32 y in [-126, 16] (all results normal; exhaustively, against the fp64 exp2), and
    2^0 = 1 exactly."""
    import triton
    import triton.language as tl
    from triton.language.extra import libdevice

    @triton.jit
    def worst_kernel(out_ptr, first_bits, count, negative: tl.constexpr, BLOCK: tl.constexpr):
        offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        bits = (first_bits + offsets).to(tl.int32)
        if negative:
            bits = bits | -2147483648   # the sign bit
        y = bits.to(tl.float32, bitcast=True)
        approx = libdevice.exp2(y).to(tl.float64)
        exact = libdevice.exp2(y.to(tl.float64))
        error = tl.where(offsets < count, tl.abs(approx - exact) / exact, 0.0)
        tl.store(out_ptr + tl.program_id(0), tl.max(error, 0))

    block = 1 << 16
    worst = 0.0
    for negative, top in ((True, -126.0), (False, 16.0)):
        count = int(np.array([abs(top)], dtype=np.float32).view(np.int32)[0]) + 1   # |y| from 0 to |top|
        out = torch.empty(triton.cdiv(count, block), dtype=torch.float64, device=device)
        worst_kernel[(out.numel(),)](out, 0, count, negative=negative, BLOCK=block)
        worst = max(worst, out.max().item())
    assert worst <= 2.0 ** -22, worst


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("path", ["row-loop", "two-pass-split"])
def test_softmax_within_bound_on_gpu_sized_plans(device, path, dtype):
    """softmax / log_softmax as called, on GPU-sized rows the planner sends to the row loop (2 rows per
    SM of 65536, more than the single-read limit) or to the split two-pass path (16 rows of 262144),
    every mode: elements of three rows (normal, spread1e4, close families) within their bound. A
    sample of columns (the first and last 64, 2048 spread over the row, each row's maximum): the exact
    outputs take mpmath per element; each row's reference reads the whole row."""
    from precred import launch
    from precred.launch import plan_softmax
    from precred.modes import get_exp_mode
    from precred.plan import LoopPlan, Plan
    from test_logsumexp import family
    from test_softmax import assert_rows_within_bound, reference
    rows, n = (2 * launch.device_sm_count(torch.device(device)) + 1, 65536) if path == "row-loop" else (16, 262144)
    rng = np.random.default_rng(31)
    x = family("normal", rows, n, rng, dtype)
    picked = [0, rows // 2, rows - 1]
    x[picked[1]] = family("spread1e4", 1, n, rng, dtype)[0]
    x[picked[2]] = family("close", 1, n, rng, dtype)[0]
    columns = sorted(set(range(64)) | set(range(n - 64, n)) | set(range(0, n, n // 2048))
                     | {int(j) for j in x[picked].argmax(1)})
    xd = x.to(device)
    for mode in precred.EXP_MODES:
        for log in (False, True):   # the plan of the kernel that runs (log_softmax's split-tail pass: fp32's)
            plan = plan_softmax(xd, 1, get_exp_mode(mode), dtype, log)
            assert isinstance(plan, LoopPlan if path == "row-loop" else Plan), plan
            assert path == "row-loop" or plan.passes[0].parts > 1 or not xd.is_cuda, plan   # split on a GPU
            got = (precred.log_softmax if log else precred.softmax)(xd, 1, mode=mode)[picked]
            assert_rows_within_bound(x[picked], got, plan, reference(x[picked], log, columns), mode, log, dtype,
                                     f"{path} {rows}x{n}", columns)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_row_loop_stages_keep_the_bits(device, dtype):
    """The row-loop kernel's software pipelining (LoopPlan.stages, plan.ROW_LOOP_STAGES) moves loads,
    not arithmetic: softmax / log_softmax of rows it takes give the same bits at 1 to 4 stages, in
    every mode (a peaked row included, for accurate log_softmax's split tail)."""
    from precred.launch import _row_accumulator, softmax_rows
    from precred.modes import log_softmax_split_tail
    from precred.plan import plan_row_loop
    x = (torch.randn(6, 20000, device=device) * 4).to(dtype)
    x[1] = -60.0
    x[1, 77] = 0.0   # one maximum, tail ~2e4 e^-60: the split-tail read
    for mode in precred.EXP_MODES:
        for log in (False, True):
            m = get_exp_mode(mode)
            acc = _row_accumulator(x, m, dtype, log_softmax_split_tail(mode, dtype, dtype, log))
            plan = plan_row_loop(x.shape[0], x.shape[1], element_size=x.element_size(),
                                 accumulator_size=acc.itemsize, sm_count=1)
            plan = replace(plan, stages=1)
            first = softmax_rows(x, 1, m, dtype, log, plan)
            for stages in (2, 3, 4):
                assert same_bits(softmax_rows(x, 1, m, dtype, log, replace(plan, stages=stages)), first), \
                    (mode, log, stages)


@pytest.mark.parametrize("width", [300, 9000])
def test_certified_logsumexp_replays_its_recompute(device, width):
    """logsumexp's fp64 mode on bf16: rows next to a rounding boundary (padded with -inf, which leaves
    the result alone) are left to the fp64 recompute -- rows of 9000 in chunks (plan.ExpRecomputePlan),
    whose counters the replays reuse --; replayed calls return the full path's bits, and every output
    is within the mode's bound (certified ones correctly rounded)."""
    from precred.plan import plan_exp_recompute
    from precred import eager, launch
    from test_logsumexp import _near_midpoint_rows, assert_within_bound

    pairs = _near_midpoint_rows(torch.bfloat16, 40)
    x = torch.full((pairs.shape[0], width), float("-inf"), dtype=torch.bfloat16)
    x[:, 7], x[:, width - 50] = pairs[:, 0], pairs[:, 1]
    x = torch.cat([x, (torch.randn(200, width) * 4).bfloat16()])
    assert (plan_exp_recompute(x.shape[0], width, sm_count=1, strided=False).chunks > 1) == (width > 4096)
    eager._CALLS.clear()
    launch._RECIPES.clear()
    calls = [precred.logsumexp(x.to(device), 1) for _ in range(3)]
    assert len(eager._CALLS) == 1
    for got in calls[1:]:
        assert torch.equal(got, calls[0])
    assert_within_bound(x, 1, "fp64", device)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_split_tail_in_parts_replays(device, dtype):
    """`accurate` log_softmax over dim 0 of 65536 x 64 (the two-pass path; its split-tail kernel walks
    each column in 64 parts, plan.split_tail_parts, and a second launch adds them): randn * 5 columns
    with s < 1.5 among them; calls replaying the launch recipe (a fresh partial-sums buffer each) give
    the bits of calls that plan afresh, and every column's maximum's -log1p(tail) is within 1.01 ulp
    of the fp64 reference's (1.01 ulp: the mode's bound, precred.softmax_error_bound; the reference's
    own error is ~2^-52 absolute, far below an ulp of these y, |y| > 1e-3)."""
    from validation.oracle import ulp_error
    from precred import eager, launch, plan as planning
    assert planning.split_tail_parts(65536, False) == 64
    g = torch.Generator(device="cpu").manual_seed(31)
    inputs = [(torch.randn(65536, 64, generator=g) * 5).to(dtype).to(device) for _ in range(3)]
    x64 = inputs[0].double()
    assert bool((torch.exp(x64 - x64.amax(0)).sum(0) < 1.5).any())
    launch._RECIPES.clear()
    eager._CALLS.clear()
    replayed = [precred.log_softmax(x, 0, mode="accurate") for x in inputs]
    for x, got in zip(inputs, replayed):
        launch._RECIPES.clear()
        eager._CALLS.clear()
        assert torch.equal(got, precred.log_softmax(x, 0, mode="accurate"))
    top = x64.argmax(0)
    exact = torch.log_softmax(x64, 0).gather(0, top[None])[0]
    got = replayed[0].gather(0, top.to(replayed[0].device)[None])[0].double().cpu()
    assert float(exact.abs().min()) > 1e-3
    worst = max(ulp_error(a, b, dtype) for a, b in zip(got.tolist(), exact.cpu().tolist()))
    assert worst <= 1.01, worst


def test_replayed_calls_still_check_their_arguments(device):
    """A replay is keyed on the arguments' types too: keepdim=1 after keepdim=True is still a TypeError."""
    x = torch.randn(64, 4096, device=device)
    precred.sum(x, 1, keepdim=True)
    precred.sum(x, 1, keepdim=True)
    with pytest.raises(TypeError, match="keepdim"):
        precred.sum(x, 1, keepdim=1)
    precred.amax(x, (1,))
    with pytest.raises(TypeError, match="dim"):
        precred.amax(x, (True,))
    precred.softmax(x, 1, dtype=torch.float64)
    precred.softmax(x, 1, dtype=torch.float64)
    with pytest.raises(TypeError, match="dim"):
        precred.softmax(x, True, dtype=torch.float64)
    with pytest.raises(TypeError, match="dtype"):
        precred.softmax(x, 1, dtype="float64")


def _norm_forward_backward(x, w, b, g, mode="fast", wanted=(True, True, True)):
    """y and the gradients of the inputs `wanted` marks (x, w, b)."""
    xs, ws, bs = (t.clone().requires_grad_(need) for t, need in zip((x, w, b), wanted))
    y = precred.layer_norm(xs, x.shape[-1:], ws, bs, mode=mode)
    return (y, *torch.autograd.grad(y, [t for t, need in zip((xs, ws, bs), wanted) if need], g))


def _norm_inputs(shape, dtype, device, seed=3):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    x, g = ((torch.randn(shape, generator=gen) * 2 + 1).to(dtype).to(device) for _ in range(2))
    w, b = ((torch.rand(shape[-1], generator=gen) + 0.5).to(dtype).to(device) for _ in range(2))
    return x, w, b, g


@pytest.mark.parametrize("shape", [(4096, 4096), (65536, 1024), (300, 70), (1000, 20000)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pipelined_norm_backward_gives_the_bits_of_the_plain_loop(device, shape, dtype, monkeypatch):
    """The backward's software-pipelined loops (plan.NORM_BACKWARD_STAGES on chip,
    NORM_BACKWARD_COLUMNS_STAGES for rows read twice: 1000 x 20000) only move the loads: dx, dweight and
    dbias are the plain loops', bit for bit."""
    from precred import norm_launch, plan

    x, w, b, g = _norm_inputs(shape, dtype, device)
    stages = plan.plan_norm_backward(shape[0], shape[1], element_size=x.element_size(), accumulator_size=4,
                                     sm_count=precred.launch.device_sm_count(x.device)).loop_stages
    assert stages > 1 or shape == (300, 70)   # 300 rows: one row block per program, nothing to pipeline
    piped = _norm_forward_backward(x, w, b, g)
    monkeypatch.setattr(plan, "NORM_BACKWARD_STAGES", 1)
    monkeypatch.setattr(plan, "NORM_BACKWARD_COLUMNS_STAGES", 1)
    plan.plan_norm_backward.cache_clear()
    norm_launch._RECIPES.clear()
    plain = _norm_forward_backward(x, w, b, g)
    plan.plan_norm_backward.cache_clear()
    norm_launch._RECIPES.clear()
    _assert_same_bits(piped, plain, "layer_norm")


@pytest.mark.parametrize("wanted", [(True, True, True), (True, False, False)], ids=["x,w,b", "x alone"])
@pytest.mark.parametrize("shape", [(4096, 4096), (64, 100000)])
def test_norm_replays_on_two_streams_give_the_bits_of_the_full_path(device, shape, wanted):
    """layer_norm's launch recipes (norm_launch._Replay) replay on raw addresses, with the backward's
    partials reused per stream: calls on new data, on the default stream and on a second stream, with
    and without autograd, return what the full path (no recipe) returns for that data -- rows on chip
    and rows read twice, with the dweight / dbias merge and (x alone) without it."""
    from precred import norm_launch

    inputs = [_norm_inputs(shape, torch.float32, device, seed) for seed in range(3)]
    norm_launch._RECIPES.clear()
    _norm_forward_backward(*inputs[0], wanted=wanted)   # leaves the recipes
    side = torch.cuda.Stream()
    got = [_norm_forward_backward(*inputs[1], wanted=wanted)]
    with torch.cuda.stream(side):
        got.append(_norm_forward_backward(*inputs[2], wanted=wanted))
        got.append(_norm_forward_backward(*inputs[2], wanted=wanted))   # the side stream's partials, reused
        inference = precred.layer_norm(inputs[2][0], shape[-1:], *inputs[2][1:3])
    torch.cuda.synchronize()
    for k, result in ((1, got[0]), (2, got[1]), (2, got[2])):
        norm_launch._RECIPES.clear()
        _assert_same_bits(result, _norm_forward_backward(*inputs[k], wanted=wanted), "layer_norm")
    norm_launch._RECIPES.clear()
    _assert_same_bits([inference], [precred.layer_norm(inputs[2][0], shape[-1:], *inputs[2][1:3])], "layer_norm")


def test_many_signatures_keep_bounded_caches_and_the_same_bits(device, monkeypatch):
    """A process meeting many call signatures (a server's token counts): the recipe caches hold at most
    signature_cache.SIGNATURES_KEPT of them (4 here, of 12), a signature evicted and met again gives
    the bits it gave, and the norms' replays keep one scratch buffer for the stream, not one per
    signature -- before, each signature's recipe kept its forward statistics (16 bytes a row) and its
    backward partials (programs x n elements, ~2 MB each here), 12 signatures ~20 MB past the bound
    asserted below."""
    from precred import eager, launch, norm_launch, signature_cache

    monkeypatch.setattr(signature_cache, "SIGNATURES_KEPT", 4)
    caches = (eager._CALLS, launch._RECIPES, norm_launch._RECIPES)
    for cache in (*caches, norm_launch._STREAM_SCRATCH):
        cache.clear()
    n = 1024
    gen = torch.Generator(device="cpu").manual_seed(11)
    w, b = (torch.rand(n, generator=gen).add(0.5).to(device) for _ in range(2))
    row_counts = range(1000, 1000 + 12 * 64, 64)
    data = {rows: (torch.randn(rows, n, generator=gen), torch.randn(rows, n, generator=gen)) for rows in row_counts}

    def calls(rows):
        """Each call twice: the second replays the recipe the first left."""
        x, g = (t.to(device) for t in data[rows])
        results = []
        for _ in range(2):
            with torch.no_grad():
                inference = precred.layer_norm(x, (n,), w, b)   # the forward's statistics to the scratch
            trained = _norm_forward_backward(x, w, b, g)         # the backward's partials to the scratch
            results.append([t.detach().cpu() for t in (precred.sum(x, -1), inference, *trained)])
        _assert_same_bits(results[1], results[0], "replay")
        return results[1]

    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    first = {rows: calls(rows) for rows in row_counts}
    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated() - before
    assert all(len(cache) <= 4 for cache in caches), [len(cache) for cache in caches]
    assert len(norm_launch._STREAM_SCRATCH) == 1   # the default stream's
    scratch = norm_launch._STREAM_SCRATCH.popitem()[1][0]
    assert held <= scratch.numel() + (1 << 20), (held, scratch.numel())
    for rows in row_counts:   # all but the last 4 evicted
        _assert_same_bits(calls(rows), first[rows], "signature met again")


def test_grids_past_cudas_second_dimension_launch(device):
    """Launches whose column blocks pass CUDA's 65535 cap on a grid's second dimension take a flat grid
    (schedules/grid.py; the interpreter has no cap, test_softmax / test_norm_semantics check the flat
    grid's bits there): softmax / log_softmax over dim 0 of a (10^6, 16) matrix (the normalizing pass:
    125000 column blocks), softmax over 2^26 contiguous elements (131072), layer_norm of one row of
    2^25 + 512 (the streamed apply pass: 65537) -- these failed to launch before. A block the grid
    missed or mapped twice would leave its outputs unwritten or wrong by O(1); the check is that every
    output is within 2^-12 relative of torch's on an fp64 copy, far above the modes' bounds (held in
    test_softmax / test_norm_accuracy), far below such an error."""
    g = torch.Generator(device="cpu").manual_seed(5)
    tol = 2.0 ** -12

    def close(got, want, scale):
        assert torch.isfinite(got).all() and ((got.double() - want).abs() <= tol * scale).all()

    x = torch.randn(10 ** 6, 16, generator=g).to(device)
    want = torch.softmax(x.double(), 0)
    close(precred.softmax(x, 0, mode="fast"), want, want.abs())
    want = torch.log_softmax(x.double(), 0)
    close(precred.log_softmax(x, 0, mode="accurate"), want, want.abs().clamp_min(1.0))
    v = torch.randn(2 ** 26, generator=g).to(device)
    want = torch.softmax(v.double(), 0)
    close(precred.softmax(v, 0, mode="fast"), want, want.abs())
    row = torch.randn(1, 2 ** 25 + 512, generator=g).to(device)
    want = torch.nn.functional.layer_norm(row.double(), [row.shape[1]])
    close(precred.layer_norm(row, [row.shape[1]]), want, want.abs().max())


def _rows_past_2_pow_31(dtype, device):
    """A (2^31 + 16, 2) matrix whose row r is [r % 61 - 30, r % 7]: small integers (exact in bf16, their
    sums, means and variances exact in fp32), rows told apart by their index, so that an output
    written to or read from a wrapped 32-bit row index is wrong by O(1). Filled a slice at a time
    (the int64 row indices of the whole would take 16 GiB)."""
    n = 2 ** 31 + 16
    x = torch.empty(n, 2, dtype=dtype, device=device)
    for first in range(0, n, _SLICE):
        r = torch.arange(first, min(first + _SLICE, n), device=device)
        x[first:first + _SLICE, 0] = r % 61 - 30
        x[first:first + _SLICE, 1] = r % 7
    return x


_SLICE = 2 ** 27


def _assert_outputs_close(got, reference, tol):
    """|got - want| <= tol * max(1, |want|) everywhere (equal where tol is 0), NaN nowhere; want =
    reference(first, last), torch's outputs [first, last) along got's first axis, a slice at a time
    (torch's whole outputs and the temporaries beside precred's would not fit in 80 GB)."""
    for first in range(0, got.shape[0], _SLICE):
        last = min(first + _SLICE, got.shape[0])
        want = reference(first, last)
        assert want.dtype == got.dtype
        g, w = got[first:last].double(), want.double()
        assert ((g - w).abs() <= tol * w.abs().clamp_min(1.0)).all(), first


@pytest.mark.large_memory
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_calls_of_2_pow_31_rows_or_more(device, dtype):
    """Calls of 2^31 or more rows (outputs), and of as many columns: their row, output and column
    indices are int64 there (schedules/grid.py block_indices: Triton types such a count int64); they
    were int32 and wrapped. Every output is checked against torch's on the same rows: exactly where the
    integer input makes the result exact (sum, mean, var, amax, argmax), within a few of the output's
    ulps elsewhere -- far below the O(1) error of a wrapped row."""
    x = _rows_past_2_pow_31(dtype, device)
    ulps = 4 * torch.finfo(dtype).eps
    F = torch.nn.functional
    cases = [
        (lambda: precred.sum(x, -1), lambda t: torch.sum(t, -1), 0),
        (lambda: precred.mean(x, -1), lambda t: torch.mean(t, -1), 0),
        (lambda: precred.var_mean(x, -1)[0], lambda t: torch.var(t, -1), 0),
        (lambda: precred.var_mean(x, -1)[1], lambda t: torch.mean(t, -1), 0),
        (lambda: precred.amax(x, -1), lambda t: torch.amax(t, -1), 0),
        (lambda: precred.argmax(x, -1), lambda t: torch.argmax(t, -1), 0),
        (lambda: precred.logsumexp(x, -1), lambda t: torch.logsumexp(t, -1), ulps),
        (lambda: precred.softmax(x, -1), lambda t: torch.softmax(t, -1), ulps),
        (lambda: precred.log_softmax(x, -1, mode="accurate"), lambda t: torch.log_softmax(t, -1), ulps),
        (lambda: precred.layer_norm(x, (2,)), lambda t: F.layer_norm(t, (2,)), ulps),
        (lambda: precred.rms_norm(x, (2,)), lambda t: F.rms_norm(t, (2,)), ulps),
    ]
    for call, reference, tol in cases:
        got = call()
        _assert_outputs_close(got, lambda first, last: reference(x[first:last]), tol)
        del got
    # 2^31 + 16 columns of two rows, reduced over the rows (the outer schedule: column indices).
    columns = x.view(2, -1)
    for call, reference, tol in [(precred.sum, torch.sum, 0), (precred.logsumexp, torch.logsumexp, ulps)]:
        got = call(columns, 0)
        _assert_outputs_close(got, lambda first, last: reference(columns[:, first:last], 0), tol)
        del got
    del x, columns


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                    reason="needs two CUDA devices")
def test_calls_on_a_device_other_than_the_current_one(device):
    """An input on cuda:1 while cuda:0 is current: every op launches on cuda:1 (precred.device_guard),
    its result on cuda:1 and bitwise equal to the same call made with cuda:1 current -- on the first
    call (planning, launching; the caches cleared before it) and on the eager replays after it; the
    norm's backward too."""
    assert torch.cuda.current_device() == 0
    x = torch.randn(64, 1000, device="cuda:1")
    w = torch.randn(1000, device="cuda:1")
    calls = {
        "sum": lambda t: precred.sum(t, -1), "sum exact": lambda t: precred.sum(t, 0, mode="exact"),
        "mean": lambda t: precred.mean(t), "var_mean": lambda t: torch.stack(precred.var_mean(t, -1)),
        "logsumexp": lambda t: precred.logsumexp(t, -1), "softmax": lambda t: precred.softmax(t, 0),
        "log_softmax bf16": lambda t: precred.log_softmax(t.bfloat16(), -1),
        "amax": lambda t: precred.amax(t, 0), "argmax": lambda t: precred.argmax(t, -1),
        "prod": lambda t: precred.prod(t[:, :8], -1),
        "layer_norm": lambda t: precred.layer_norm(t, (1000,), w, w),
        "rms_norm": lambda t: precred.rms_norm(t, (1000,), w),
    }

    def forget_calls():   # the next call plans and launches afresh (no eager replay, no launch recipe)
        precred.eager._CALLS.clear()
        precred.launch._RECIPES.clear()
        precred.norm_launch._RECIPES.clear()

    for name, call in calls.items():
        forget_calls()
        with torch.cuda.device(1):
            expected = call(x)
        forget_calls()
        for _ in range(3):   # the full path with cuda:0 current, then its replays
            got = call(x)
            assert got.device == x.device, name
            torch.cuda.synchronize(1)
            assert same_bits(got, expected), name
        assert torch.cuda.current_device() == 0, name
    # backward: autograd's engine runs it on cuda:1's worker thread
    grads = []
    for current in (1, 0):
        xg = x.clone().requires_grad_()
        with torch.cuda.device(current):
            y = precred.layer_norm(xg, (1000,), w, w)
        y.backward(torch.ones_like(y))
        grads.append(xg.grad)
    assert torch.equal(grads[0], grads[1])
