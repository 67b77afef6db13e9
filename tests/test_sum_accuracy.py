"""Error budgets: every mode x dtype x schedule stays within its bound from theory (precred.bounds),
measured exactly against the oracle on adversarial inputs and on hypothesis-drawn arrays.

The bound is evaluated with the depth of the plan that actually ran. Small tiles (tile_elements)
force long lane chains, splits and multi-pass trees on inputs small enough for the interpreter.
"""
import math
import zlib
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import precred
from precred.launch import plan_for, reduce_sum
from precred.modes import MODES as SUM_MODES, sum_mode
from validation import generators as gen
from validation.oracle import reference_mean, reference_sum

from conftest import DEVICE as _DEVICE  # hypothesis tests cannot take function-scoped fixtures
from conftest import mode_takes

MODES = list(precred.MODES)
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]

# Planner settings that cover every schedule on small inputs:
#   default -- what precred.sum does on this device; tiny tiles -- long lane chains + split merges.
PLANNER_SETTINGS = {"default": {}, "tiny-tiles": dict(tile_elements=16, sm_count=64, split_min_bytes=0)}


def check_within_bound(x, dims, mode, *, out_dtype=None, mean=False, device="cpu", planner=None):
    """Run the reduction with the plan chosen under `planner` and assert every output is in bound."""
    out_dtype = out_dtype or x.dtype
    m = sum_mode(mode, x.dtype, out_dtype)   # the Mode precred.sum runs (kahan over 16-bit input: fp64's)
    xd = x.to(device)
    _, plan = plan_for(xd, dims, m, out_dtype, **(planner or {}))
    if not mode_takes(mode, x.dtype, out_dtype):
        return plan, 0.0
    got = reduce_sum(xd, dims, m, out_dtype, divide=mean, plan=plan).cpu()
    ref, exact_list = (reference_mean if mean else reference_sum)(x, dim=dims, out_dtype=out_dtype)
    n = x.numel() // ref.numel()
    worst = 0.0
    for value, correctly_rounded, (exact, s1) in zip(got.reshape(-1).tolist(), ref.reshape(-1).tolist(), exact_list):
        if math.isinf(correctly_rounded):
            # The exact result overflows the output format: correct rounding says inf, so must we.
            assert value == correctly_rounded, f"{mode}: exact result overflows to {correctly_rounded}, got {value}"
            continue
        s, S1 = (exact * n, s1 * n) if mean else (exact, s1)
        bound = precred.error_bound(mode, n, S1, s, x.dtype, depth=plan.depth,
                                    op="mean" if mean else "sum", out_dtype=out_dtype)
        err = abs(Fraction(value) - exact)
        assert err <= Fraction(bound), (
            f"{mode} {x.dtype}->{out_dtype} n={n} plan={plan.schedule} depth={plan.depth}: "
            f"error {float(err):.3e} > bound {bound:.3e} (exact {float(exact):.9e}, got {value!r})")
        worst = max(worst, float(err) / bound if bound else 0.0)
    return plan, worst


def _rows(family, n, rows, dtype, seed):
    rng = np.random.default_rng(seed)
    return torch.stack([gen.FAMILIES[family](n, rng, dtype) for _ in range(rows)])


@pytest.mark.parametrize("planner", list(PLANNER_SETTINGS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("family", list(gen.FAMILIES))
def test_every_mode_within_bound_on_adversarial_rows(device, family, dtype, planner):
    if family == "ill_conditioned" and dtype == torch.float16:
        pytest.skip("fp16's exponent range cannot hold a cond-1e12 vector (generator limit ~2e9)")
    x = _rows(family, 300, 3, dtype, seed=zlib.crc32(f"{family} {dtype}".encode()))   # stable across processes
    for mode in MODES:
        # dim -1: inner schedule; dim 0 of the transpose-free layout: outer schedule.
        check_within_bound(x, (1,), mode, device=device, planner=PLANNER_SETTINGS[planner])
        check_within_bound(x.t().contiguous(), (0,), mode, device=device, planner=PLANNER_SETTINGS[planner])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("family", ["ill_conditioned", "wide_range"])
def test_narrow_strided_axis_within_bound(device, family, dtype):
    """Fewer columns than four warps of 16-byte vectors (plan.NARROW_OUTER_MIN_INNER): the first pass
    runs one-warp programs with the lanes in registers, split into parts here (a merging pass on
    narrowed column blocks); every mode within its bound at the plan's depth."""
    x = _rows(family, 70, 264, dtype, seed=zlib.crc32(f"narrow {family} {dtype}".encode())).t().contiguous()
    for mode in MODES:
        plan, _ = check_within_bound(x, (0,), mode, device=device, planner=dict(split_min_bytes=0))
        if mode in ("fast", "kahan", "fp64"):
            first = plan.passes[0]
            assert first.num_warps == 1 and first.block_kept == 32 * 16 // x.element_size() and first.parts > 1, plan


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_kahan_over_16_bit_input_runs_the_fp64_mode_within_its_own_bound(device, dtype):
    """kahan over 16-bit input into a non-fp64 output is summed by the fp64 mode (modes.sum_mode): the
    public functions give the fp64 mode's bits, rows and columns, sums and means; an fp64 output keeps
    the compensated fp64 pair; and kahan's bound dominates the fp64 mode's at every depth, for every
    output, so kahan's contract holds on that route (the error-budget tests above assert it on data)."""
    assert sum_mode("kahan", dtype) is SUM_MODES["fp64"]
    assert sum_mode("kahan", dtype, torch.float32) is SUM_MODES["fp64"]
    assert sum_mode("kahan", dtype, torch.float64) is SUM_MODES["kahan"]
    assert sum_mode("kahan", torch.float32) is SUM_MODES["kahan"]
    x = _rows("wide_range", 1500, 3, dtype, seed=zlib.crc32(f"kahan route {dtype}".encode())).to(device)
    bits = torch.int16 if dtype.itemsize == 2 else torch.int32
    for t, dim in ((x, 1), (x.t().contiguous(), 0)):
        for op in (precred.sum, precred.mean):
            for out in (None, torch.float32):
                got, want = op(t, dim, mode="kahan", dtype=out), op(t, dim, mode="fp64", dtype=out)
                assert torch.equal(got.view(bits if out is None else torch.int32),
                                   want.view(bits if out is None else torch.int32)), (op, dim, out)
    rng = np.random.default_rng(5)
    for n in (2, 3, 300, 2 ** 16, 2 ** 30):
        for depth in sorted({1, 2, 8, n - 1, min(n - 1, 4096)}):
            s1 = float(rng.uniform(1e-30, 1e30))
            for s in (0.0, s1 * 1e-9, -s1 / 3, s1):
                for out, op in ((dtype, "sum"), (torch.float32, "sum"), (torch.float32, "mean"), (dtype, "mean")):
                    kahan = precred.error_bound("kahan", n, s1, s, dtype, depth=depth, op=op, out_dtype=out)
                    fp64 = precred.error_bound("fp64", n, s1, s, dtype, depth=depth, op=op, out_dtype=out)
                    assert fp64 <= kahan, (n, depth, s1, s, out, op, fp64, kahan)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("cond", [1e4, 1e10, 1e20])
def test_ill_conditioned_sums_and_means(device, mode, cond):
    rng = np.random.default_rng(7)
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        x = torch.stack([gen.ill_conditioned(200, cond, rng, dtype) for _ in range(2)])
        check_within_bound(x, (1,), mode, device=device, planner=PLANNER_SETTINGS["tiny-tiles"])
        check_within_bound(x, (1,), mode, device=device, mean=True)
        check_within_bound(x, (1,), mode, device=device, out_dtype=torch.float64)


@pytest.mark.parametrize("mode", MODES)
def test_lengths_around_block_sizes(device, mode):
    rng = np.random.default_rng(11)
    for n in gen.lengths_around([16, 64, 256]):
        x = torch.stack([gen.large_offset(n, 1e4, 1.0, rng, torch.float32) for _ in range(2)])
        check_within_bound(x, (1,), mode, device=device, planner=PLANNER_SETTINGS["tiny-tiles"])


@pytest.mark.parametrize("mode", MODES)
def test_full_reduction_split_and_mean_in_bound(device, mode):
    rng = np.random.default_rng(5)
    x = gen.wide_range(5000, rng, torch.float32).reshape(50, 100)
    split = dict(sm_count=64, split_min_bytes=0)    # the split a large input gets, on a small one
    if mode in ("pairwise", "fast"):   # their lanes would span the 5000 elements in one or two tiles (pairwise,
        split.update(tile_elements=256)   # PLAIN_MIN_TILES_PER_LANE): smaller tiles split
    plan, _ = check_within_bound(x, (0, 1), mode, device=device, planner=split)
    assert len(plan.passes) >= 2, "a full reduction on few programs must take the split schedule"
    check_within_bound(x, (0, 1), mode, device=device, mean=True, out_dtype=torch.bfloat16, planner=split)
    check_within_bound(x, (0, 1), mode, device=device)


def test_kahan_stays_near_one_rounding_on_long_lane_chains(device):
    # Large offset, tiny spread, chains of ~500 sequential updates per lane: the fast bound grows with
    # the chain (gamma_d * S1), the compensated one stays about one rounding of the result.
    rng = np.random.default_rng(3)
    x = torch.stack([gen.large_offset(4096, 1e4, 1.0, rng, torch.float32) for _ in range(2)])
    forced = dict(tile_elements=4, sm_count=1)
    plan, _ = check_within_bound(x, (1,), "kahan", device=device, planner=forced)
    check_within_bound(x, (1,), "fast", device=device, planner=forced)
    assert 500 < plan.depth < 1100
    _, exact = reference_sum(x, dim=1)
    u = precred.unit_roundoff(torch.float32)
    for s, s1 in exact:
        kahan = precred.error_bound("kahan", 4096, s1, s, torch.float32, depth=plan.depth)
        fast = precred.error_bound("fast", 4096, s1, s, torch.float32, depth=plan.depth)
        # All inputs are positive, so S1 = |s|. kahan: u|s| + gamma_2d gamma_d S1 <= u|s| (1 + 0.15) for
        # d < 1100 (gamma_2200 gamma_1100 = 8.6e-9 = 0.144 u); fast: gamma_d S1 >= 500 u |s|.
        assert kahan < 1.2 * u * abs(float(s)) < fast / 100


_FLOATS = st.floats(allow_nan=False, allow_infinity=False, width=32, min_value=-2.0 ** 100, max_value=2.0 ** 100)


@settings(max_examples=30, deadline=None)
@given(arr=hnp.arrays(np.float32, st.tuples(st.integers(1, 4), st.integers(1, 70)), elements=_FLOATS),
       mode=st.sampled_from(MODES), dim=st.sampled_from([0, 1, None]), mean=st.booleans(),
       tiny=st.booleans())
def test_hypothesis_arrays_within_bound(arr, mode, dim, mean, tiny):
    x = torch.from_numpy(arr)
    dims = (0, 1) if dim is None else (dim,)
    check_within_bound(x, dims, mode, mean=mean, device=_DEVICE,
                       planner=PLANNER_SETTINGS["tiny-tiles" if tiny else "default"])




@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # numpy's overflow, under the interpreter
def test_no_bound_is_claimed_where_a_rounding_may_overflow(device):
    """fp16 65504 + 16 - 2^-24: the exact sum rounds to 65504, but through fp32 it is the tie 65520,
    which rounds on to inf; fp32 3e38 + 3e38 - 3e38: a partial sum overflows. error_bound claims
    nothing there (inf), and the modes do give inf; `exact` rounds once and gives 65504."""
    x16 = torch.tensor([65504.0, 16.0, 2.0 ** -24], dtype=torch.float16)
    x16[2] = -x16[2]
    exact16 = Fraction(65504) + 16 - Fraction(2) ** -24
    x32 = torch.tensor([3e38, 3e38, -3e38])
    for mode in ("fast", "pairwise", "kahan", "fp64"):
        assert math.isinf(precred.error_bound(mode, 3, 65520.0, float(exact16), torch.float16, depth=2))
        assert precred.sum(x16.to(device), mode=mode).item() == math.inf
    for mode in ("fast", "pairwise", "kahan"):
        assert math.isinf(precred.error_bound(mode, 3, 9e38, 3e38, torch.float32, depth=2))
        assert precred.sum(x32.to(device), mode=mode).item() == math.inf
    assert precred.sum(x16.to(device), mode="exact").item() == 65504.0
