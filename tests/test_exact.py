"""mode="exact": every output is the exact sum (or mean) correctly rounded -- compared bitwise with the
oracle's correct rounding (validation.oracle.round_to: ties to even, subnormals, overflow to inf).

Both stages are tested on their own: the filter (strategies/exact.py) must certify well-conditioned
rows and be right wherever it certifies; the superaccumulator (schedules/recompute.py) must be right on
every row when the filter's flags are cleared, with rows in one chunk and split into chunks merged by
integer atomics. The tests spy on the launcher's second stage to see (or clear) the flags.
"""
import math
import zlib

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import precred
from precred import launch
from precred.launch import plan_for, reduce_sum
from precred.modes import get_mode
from precred.strategies import bound_up_to_fp32
from precred.strategies.exact import tile_tree_bound
from validation import generators as gen
from validation.oracle import reference_mean, reference_sum

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# "plain loops": the filter's plain loop over the input (exact_input_part: a tile loaded ahead; 16-bit
# input in lanes of vectors), which GPU plans take for 16-bit rows and short split parts.
PLANNERS = {"default": {}, "split+chains": dict(tile_elements=16, sm_count=64, split_min_bytes=0),
            "plain loops": dict(tile_elements=64, pipelined=False)}
EXACT = get_mode("exact")


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The bit patterns: -0.0 and 0.0 differ, as they must."""
    return t.contiguous().view({2: torch.int16, 4: torch.int32}[t.element_size()])


def _exact(x, dims, *, mean=False, out_dtype=None, device="cpu", planner=None):
    """(precred's exact result, the oracle's correctly rounded one), both on the CPU, flat."""
    out_dtype = out_dtype or x.dtype
    xd = x.to(device)
    _, plan = plan_for(xd, dims, EXACT, out_dtype, **(planner or {}))
    got = reduce_sum(xd, dims, EXACT, out_dtype, divide=mean, plan=plan).cpu()
    want, _ = (reference_mean if mean else reference_sum)(x, dim=dims, out_dtype=out_dtype)
    return got.reshape(-1), want.to(out_dtype).reshape(-1)


def assert_correctly_rounded(x, dims, **kwargs):
    got, want = _exact(x, dims, **kwargs)
    assert torch.equal(_bits(got), _bits(want)), (
        f"{x.dtype} dims={dims} {kwargs}: got {got.tolist()} want {want.tolist()}")


@pytest.fixture
def stage_flags(monkeypatch):
    """Record the filter's flags at each call of the second stage (as the filter left them); then, with
    `clear=True`, zero them, so that the superaccumulator recomputes every output. Every plan runs the
    two launches here (plan.EXACT_ONE_LAUNCH_MAX_BYTES and EXACT_ONE_LAUNCH_MAX_COLUMN = 0: the filter
    writes flags)."""
    seen = []
    settings = {"clear": False}
    original = launch._launch_recompute
    monkeypatch.setattr(precred.plan, "EXACT_ONE_LAUNCH_MAX_BYTES", 0)
    monkeypatch.setattr(precred.plan, "EXACT_ONE_LAUNCH_MAX_COLUMN", 0)

    def spy(view, source, out, flags, output, dependent):
        seen.append(flags.cpu().clone())
        if settings["clear"]:
            flags.zero_()
        return original(view, source, out, flags, output, dependent)

    monkeypatch.setattr(launch, "_launch_recompute", spy)
    return seen, settings


def _family(name, n, rng, dtype):
    if name.startswith("cond:"):
        return gen.ill_conditioned(n, float(name[5:]), rng, dtype)
    return gen.FAMILIES[name](n, rng, dtype)


FAMILIES = ["normal", "large_offset", "wide_range", "subnormals", "alternating", "cond:1e8", "cond:1e30",
            "cond:1e70"]


def _adversarial_cases():
    """(family, dtype, planner): every family on the default plan, three of them also on splits and
    lane chains (the interpreter is slow); vectors beyond the generator's reach for a format left out."""
    for family in FAMILIES:
        for dtype in DTYPES:
            cond = float(family[5:]) if family.startswith("cond:") else 0.0
            if (dtype == torch.float16 and (cond > 1e9 or family == "large_offset")
                    or dtype == torch.bfloat16 and cond > 1e60):
                continue   # fp16's range holds cond <~ 2e9 and no 1e4 offset at spread 1; bf16 reaches ~1e74 at n=300
            for planner in PLANNERS:
                if planner == "default" or family in ("wide_range", "cond:1e8", "cond:1e30"):
                    yield family, dtype, planner


@pytest.mark.parametrize("family,dtype,planner", list(_adversarial_cases()))
def test_correctly_rounded_on_adversarial_rows(device, family, dtype, planner):
    rng = np.random.default_rng(zlib.crc32(f"{family} {dtype}".encode()))   # stable across processes
    x = torch.stack([_family(family, 300, rng, dtype) for _ in range(3)])
    settings = PLANNERS[planner]
    for out_dtype in (dtype, torch.float32) if dtype != torch.float32 else (dtype, torch.bfloat16):
        # dim 1: the inner schedule; dim 0 of the transposed copy: the outer one; planner: splits.
        assert_correctly_rounded(x, (1,), out_dtype=out_dtype, device=device, planner=settings)
        assert_correctly_rounded(x.t().contiguous(), (0,), out_dtype=out_dtype, device=device, planner=settings)
    assert_correctly_rounded(x, (1,), mean=True, device=device, planner=settings)
    assert_correctly_rounded(x, (0, 1), device=device, planner=settings)
    assert_correctly_rounded(x, (0, 1), mean=True, device=device, planner=settings)


def test_filter_certifies_well_conditioned_rows_and_leaves_the_rest(device, stage_flags):
    seen, _ = stage_flags
    rng = np.random.default_rng(3)
    easy = torch.stack([gen.normal(1000, rng, torch.float32) for _ in range(4)])
    assert_correctly_rounded(easy, (1,), device=device)
    assert bool(seen[-1].all()), "the filter must certify rows of condition ~sqrt(n)"
    hard = torch.stack([gen.ill_conditioned(300, 1e40, rng, torch.float32) for _ in range(4)])
    assert_correctly_rounded(hard, (1,), device=device)
    assert not bool(seen[-1].any()), "cond 1e40 is far beyond what fp64 accumulation can certify: recomputed"


def test_filter_knows_exact_ties_and_leaves_lost_bits_to_the_superaccumulator(device, stage_flags):
    seen, _ = stage_flags
    # 256 + 1 = 257 lies halfway between the bf16 neighbours 256 and 258: ties to even give 256; 259 -> 260.
    # Every input is a multiple of 2^-7 (bf16's ulp of 1, the smallest |x|) and the error bound is far below half of
    # it: no fp64 addition rounded, the filter knows the tie exactly and rounds it to even itself.
    x = torch.tensor([[256.0, 1.0], [258.0, 1.0], [-256.0, -1.0]], dtype=torch.bfloat16)
    got, want = _exact(x, (1,), device=device)
    assert got.tolist() == [256.0, 260.0, -256.0] and torch.equal(_bits(got), _bits(want))
    assert bool(seen[-1].all()), "an exactly known tie is the filter's"
    # The same tie next to a tiny element: the bound (~2^-45) is no longer below half the quantum
    # (2^-73), and an interval around a tie cannot be certified: the superaccumulator rounds it.
    x = torch.tensor([[256.0, 1.0, 2.0 ** -50, -2.0 ** -50]], dtype=torch.float32)
    got, want = _exact(x, (1,), out_dtype=torch.bfloat16, device=device)
    assert got.item() == 256.0 and torch.equal(_bits(got), _bits(want))
    assert not bool(seen[-1].any()), "a tie the filter cannot prove exact must go to the superaccumulator"
    # fp64 accumulation loses 2^-24 and 2^-60 next to 2^40 and returns exactly 1, but the exact sum
    # 1 + 2^-24 + 2^-60 lies just above fp32's tie at 1 + 2^-24: it rounds up, to 1 + 2^-23.
    lost = torch.tensor([[2.0 ** 40, 1.0, 2.0 ** -24, 2.0 ** -60, -2.0 ** 40]], dtype=torch.float32)
    got, want = _exact(lost, (1,), device=device)
    assert got.item() == 1.0 + 2.0 ** -23 and torch.equal(_bits(got), _bits(want))
    assert not bool(seen[-1].any()), "the bits fp64 lost decide the rounding: not certifiable"
    # Rows of zeros are known exactly (every partial sum is 0); the sum of zeros is +0.0, as torch's.
    zeros = torch.tensor([[-0.0, -0.0, -0.0], [-0.0, 0.0, -0.0]], dtype=torch.float32)
    got, want = _exact(zeros, (1,), device=device)
    assert torch.equal(_bits(got), _bits(torch.sum(zeros, 1))) and torch.equal(_bits(got), _bits(want))
    assert bool(seen[-1].all()), "rows of zeros are certified by the filter"


@pytest.mark.parametrize("planner", ["default", "split+chains"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_sixteen_bit_ties_are_known_on_their_own_grid(device, dtype, planner, stage_flags):
    """A 16-bit input is a multiple of its own format's ulp of the row's smallest magnitude m -- 2^16
    (bf16) or 2^13 (fp16) times fp32's --, and so is every partial sum: the filter's bound need only be
    below half of that to know the sum exactly (strategies/exact.py, "Exactly known"). Rows: 1, 2^-24
    (m) and 500 N(0, 1) values with their negations, shuffled: the exact sum 1 + 2^-24 is fp32's tie
    between 1 and 1 + 2^-23 (ties to even: 1), and the bound (2^-53 times the partial sums' magnitudes,
    ~2^-40) is below half of bf16's 2^-31 and fp16's 2^-24 but not of fp32's 2^-47. So the 16-bit rows are
    the filter's -- over dim 1 and dim 0, in one pass and split (the grid reaches the merging pass) --,
    and the same values given as fp32 go to the superaccumulator (an interval around a tie certifies
    nothing), the same answer either way."""
    seen, _ = stage_flags
    rng = np.random.default_rng(12)
    rows = []
    for _ in range(3):
        noise = torch.from_numpy(rng.standard_normal(500)).to(dtype).double()
        row = torch.cat([torch.tensor([1.0, 2.0 ** -24], dtype=torch.float64), noise, -noise])
        rows.append(row[torch.from_numpy(rng.permutation(row.numel()))])
    x = torch.stack(rows).to(dtype)
    assert torch.equal(x.double(), torch.stack(rows)), "every value is exact in the 16-bit format"
    settings = PLANNERS[planner]
    for data, dims in ((x, (1,)), (x.t().contiguous(), (0,))):
        got, want = _exact(data, dims, out_dtype=torch.float32, device=device, planner=settings)
        assert got.tolist() == [1.0] * 3 and torch.equal(_bits(got), _bits(want)), got.tolist()
        assert bool(seen[-1].all()), f"{dtype} dims={dims}: an exactly known tie on the 16-bit grid is the filter's"
        got, want = _exact(data.float(), dims, device=device, planner=settings)
        assert got.tolist() == [1.0] * 3 and torch.equal(_bits(got), _bits(want)), got.tolist()
        assert not bool(seen[-1].any()), f"fp32 dims={dims}: its grid at 2^-24 is too fine to know the tie"


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_superaccumulator_alone_on_every_row(device, dtype, chunked, stage_flags, monkeypatch):
    seen, settings = stage_flags
    settings["clear"] = True
    if chunked:   # rows and strided columns split into chunks of 256 elements, merged by integer atomics
        monkeypatch.setattr(precred.plan, "RECOMPUTE_MIN_CHUNK", 256)
        monkeypatch.setattr(precred.plan, "RECOMPUTE_COLUMN_MIN_CHUNK", 256)
    rng = np.random.default_rng(9)
    for family in ("normal", "wide_range", "subnormals", "cond:1e8"):
        x = torch.stack([_family(family, 1000, rng, dtype) for _ in range(2)])
        assert_correctly_rounded(x, (1,), device=device)
        assert_correctly_rounded(x, (1,), mean=True, device=device)
        assert_correctly_rounded(x.t().contiguous(), (0,), out_dtype=torch.float32, device=device)
    assert any(bool(f.any()) for f in seen), "the filter certified outputs that the superaccumulator then redid"
    n_out, red = 2, 1000
    rp = precred.plan.plan_recompute(n_out, red, sm_count=launch.device_sm_count(torch.device(device)),
                                     min_chunk=precred.plan.RECOMPUTE_MIN_CHUNK)
    assert (rp.chunks > 1) == chunked, rp


def test_strided_columns_take_their_own_chunk_floor(device, stage_flags, monkeypatch):
    """The recompute cuts rows along a strided axis from plan.RECOMPUTE_COLUMN_MIN_CHUNK elements on,
    contiguous rows from RECOMPUTE_MIN_CHUNK: with the first at 256 and the second at its default, a
    1000-element column is chunked (limb sums merged by atomics), the same values as a row are not --
    and both are correctly rounded with every output recomputed."""
    seen, settings = stage_flags
    settings["clear"] = True
    monkeypatch.setattr(precred.plan, "RECOMPUTE_COLUMN_MIN_CHUNK", 256)
    assert precred.plan.RECOMPUTE_MIN_CHUNK >= 1000
    chunks = []
    original = launch.plan_recompute

    def spy(n_out, red, **kwargs):
        rp = original(n_out, red, **kwargs)
        chunks.append(rp.chunks)
        return rp

    monkeypatch.setattr(launch, "plan_recompute", spy)
    x = torch.stack([gen.normal(1000, np.random.default_rng(r), torch.float32) for r in range(2)])
    assert_correctly_rounded(x, (1,), device=device)
    assert chunks[-1] == 1, chunks
    assert_correctly_rounded(x.t().contiguous(), (0,), device=device)
    assert chunks[-1] > 1, chunks


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_one_launch_recomputes_its_own_uncertified_outputs(device, dtype, stage_flags, monkeypatch):
    """Below plan.EXACT_ONE_LAUNCH_MAX_BYTES a one-pass inner filter recomputes the rows it cannot
    certify in its own programs (schedules/recompute.py certify_or_recompute): no second launch, the
    same bits as the two launches, correctly rounded -- with certified and uncertified rows in one
    program's block (the interpreter's SM count: 4 rows a program on any device). (fp16 is left out:
    fp64 holds any short fp16 sum exactly, so the filter certifies every row and the recompute is not
    reached without clearing flags; the superaccumulator's fp16 path is the recompute launch's, tested
    above with cleared flags.) Over dim 0: test_one_launch_recomputes_its_own_uncertified_columns."""
    seen, _ = stage_flags
    rng = np.random.default_rng(31)
    x = torch.stack([gen.ill_conditioned(48, 1e40, rng, dtype) if r % 3 == 0 else gen.normal(48, rng, dtype)
                     for r in range(24)])
    planner = dict(sm_count=launch.INTERPRETER_SM_COUNT)
    _, plan = plan_for(x.to(device), (1,), EXACT, **planner)
    assert len(plan.passes) == 1 and plan.passes[0].block_kept > 1, plan
    _assert_one_launch_as_two(x, (1,), device, planner, seen,
                              lambda: monkeypatch.setattr(precred.plan, "EXACT_ONE_LAUNCH_MAX_BYTES", 4 << 20))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_one_launch_recomputes_its_own_uncertified_columns(device, dtype, stage_flags, monkeypatch):
    """One outer pass over columns of at most plan.EXACT_ONE_LAUNCH_MAX_COLUMN elements recomputes the
    columns it cannot certify in its own programs (schedules/recompute.py certify_or_recompute_columns):
    no second launch, the same bits as the two launches, correctly rounded -- certified and uncertified
    columns in both column groups of a program's block and in the last, partial block, a column length
    that is not a multiple of the rows a step (plan.EXACT_ONE_LAUNCH_COLUMN_ROWS)."""
    seen, _ = stage_flags
    rng = np.random.default_rng(41)
    x = torch.stack([gen.ill_conditioned(37, 1e40, rng, dtype) if c % 7 == 0 else gen.normal(37, rng, dtype)
                     for c in range(600)], dim=1)
    planner = dict(sm_count=launch.INTERPRETER_SM_COUNT)
    _, plan = plan_for(x.to(device), (0,), EXACT, **planner)
    (p,) = plan.passes
    assert p.schedule == "outer" and p.inner % p.block_kept != 0, plan
    assert p.block_kept >= 2 * precred.plan.one_launch_recompute_tile(p), "two column groups a program"
    assert p.red % precred.plan.EXACT_ONE_LAUNCH_COLUMN_ROWS != 0
    _assert_one_launch_as_two(x, (0,), device, planner, seen,
                              lambda: monkeypatch.setattr(precred.plan, "EXACT_ONE_LAUNCH_MAX_COLUMN", p.red))


def _assert_one_launch_as_two(x, dims, device, planner, seen, one_launch):
    """The sum and the mean of x over dims, and the sum into another output dtype, by two launches (the
    stage_flags fixture's plan constants: the filter's flags, some set and some not, recorded in
    `seen`), then, after one_launch() lets the filter recompute in its own launch, by one: correctly
    rounded, the same bits, no recompute launch."""
    calls = [dict(mean=False), dict(mean=True),
             dict(mean=False, out_dtype=torch.bfloat16 if x.dtype == torch.float32 else torch.float32)]
    two_launches = []
    for kwargs in calls:
        two_launches.append(_exact(x, dims, device=device, planner=planner, **kwargs)[0])
        assert bool(seen[-1].any()) and not bool(seen[-1].all()), "certified and uncertified outputs"
    one_launch()
    launches = len(seen)
    for kwargs, two in zip(calls, two_launches):
        got, want = _exact(x, dims, device=device, planner=planner, **kwargs)
        assert torch.equal(_bits(got), _bits(want)), (kwargs, got.tolist(), want.tolist())
        assert torch.equal(_bits(got), _bits(two))
    assert len(seen) == launches, "one launch: no recompute launch"


@pytest.mark.parametrize("dtype", DTYPES)
def test_ties_round_to_even(device, dtype, stage_flags):
    seen, settings = stage_flags
    p = {torch.float32: 24, torch.bfloat16: 8, torch.float16: 11}[dtype]
    half = 2.0 ** -p                      # half an ulp of 1
    rows = [[1.0, half, 0.0, 0.0],        # 1 + ulp/2: tie, down to the even 1
            [1.0, 3 * half, 0.0, 0.0],    # 1 + 3 ulp/2: tie, up to the even 1 + 2 ulp
            [1.0, half, half / 8, -half / 8],   # still exactly the tie
            [1.0, half, half / 8, 0.0]]   # just above the tie: up
    x = torch.tensor(rows, dtype=torch.float64).to(dtype)
    for clear in (False, True):           # the filter and the superaccumulator
        settings["clear"] = clear
        got, want = _exact(x, (1,), device=device)
        assert torch.equal(_bits(got), _bits(want)), (clear, got.tolist(), want.tolist())
        assert got.tolist() == [1.0, 1.0 + 4 * half, 1.0, 1.0 + 2 * half]
        # Means: (1 + (1 + ulp)) / 2 = 1 + ulp/2, a tie: down to 1; (1 + (1 + 2 ulp)) / 2 = 1 + ulp, exact.
        pairs = torch.tensor([[1.0, 1.0 + 2 * half], [1.0, 1.0 + 4 * half]], dtype=torch.float64).to(dtype)
        got, want = _exact(pairs, (1,), mean=True, device=device)
        assert torch.equal(_bits(got), _bits(want)) and got.tolist() == [1.0, 1.0 + 2 * half]


@pytest.mark.parametrize("dtype", DTYPES)
def test_overflow_rounds_to_inf_as_correct_rounding_says(device, dtype, stage_flags):
    _, settings = stage_flags
    top = torch.finfo(dtype).max
    mantissa_bits = {torch.float32: 23, torch.bfloat16: 7, torch.float16: 10}[dtype]
    ulp = 2.0 ** (math.frexp(top)[1] - 1 - mantissa_bits)
    rows = [[top, ulp / 2],               # max + ulp/2: the tie goes to the even 2^(emax+1), i.e. inf
            [top, ulp / 4],               # below the tie: max
            [-top, -ulp],                 # -inf
            [top, -top]]                  # 0
    x = torch.tensor(rows, dtype=torch.float64).to(dtype)
    assert x[0, 1].item() == ulp / 2 and x[1, 1].item() == ulp / 4
    for clear in (False, True):
        settings["clear"] = clear
        got, want = _exact(x, (1,), device=device)
        assert got.tolist() == [math.inf, top, -math.inf, 0.0] and torch.equal(_bits(got), _bits(want))
    # An fp32 sum beyond fp16's range, rounded into fp16.
    x32 = torch.tensor([[65504.0, 16.0], [65504.0, 15.99]], dtype=torch.float32)
    got, want = _exact(x32, (1,), out_dtype=torch.float16, device=device)
    assert got.tolist() == [math.inf, 65504.0] and torch.equal(_bits(got), _bits(want))


@triton.jit
def _bound_up_kernel(t_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    t = tl.load(t_ptr + offsets, mask=offsets < n)
    tl.store(out_ptr + offsets, bound_up_to_fp32(t), mask=offsets < n)


def test_partial_states_bound_rounds_up_to_the_next_fp32(device):
    """A split's partial states keep the filter's bound t in fp32 rounded up (strategies/exact.py,
    "Partial states"): the result is the smallest fp32 value >= t -- exact where t is one, one step
    above where rounding to nearest fell below t, subnormals included, inf beyond fp32's range."""
    tiny, top = 2.0 ** -149, float(torch.finfo(torch.float32).max)
    values = [0.0, 1.0, 1.0 + 2.0 ** -30, 1.0 - 2.0 ** -30, 1.0 + 2.0 ** -24, 3.0 * tiny, 2.5 * tiny, 0.4 * tiny,
              2.0 ** -126 * (1 - 2.0 ** -30), 1e30 / 3, top, top * (1 + 2.0 ** -30), 1e300]
    t = torch.tensor(values, dtype=torch.float64, device=device)
    out = torch.empty(len(values), dtype=torch.float32, device=device)
    _bound_up_kernel[(1,)](t, out, len(values), BLOCK=16)
    got = out.cpu().double().numpy()
    below = np.nextafter(out.cpu().numpy(), np.float32(-np.inf)).astype(np.float64)
    for v, r, b in zip(values, got, below):
        assert r >= v and b < v or (v == 0.0 and r == 0.0), f"{v!r} -> {r!r} (one step below: {b!r})"
    assert got[-1] == math.inf and got[-2] == math.inf and got[-3] == top


def test_split_parts_whose_bound_leaves_fp32_are_recomputed(device, stage_flags):
    """A part's bound beyond fp32's range is stored as inf: its row is not certified, and the
    superaccumulator rounds it (here: +-max cancelling in every part, and one 1.0 -- exactly 1)."""
    seen, _ = stage_flags
    top = float(torch.finfo(torch.float32).max)
    row = [top, -top] * 64 + [1.0]
    x = torch.tensor([row, row[::-1]], dtype=torch.float32)
    got, want = _exact(x, (1,), device=device, planner=PLANNERS["split+chains"])
    assert got.tolist() == [1.0, 1.0] and torch.equal(_bits(got), _bits(want))
    assert not bool(seen[-1].any()), "a bound of inf certifies nothing"


@pytest.mark.parametrize("tile_bound", [False, True], ids=["tile-tree", "tile-bound"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("columns", [264, 1024], ids=["narrow", "wide"])
def test_strided_axes_in_the_registers_layout(device, monkeypatch, columns, dtype, tile_bound):
    """Strided axes whose tiles' lanes merge in registers (schedules/outer.py exact_tile_part), split
    into parts here: columns fewer than four warps of 16-byte vectors take that layout from one warp
    (plan.NARROW_OUTER_MIN_INNER); wider 16-bit ones on four warps and plan.EXACT_OUTER_TILE's tile
    (plan.EXACT_OUTER_TILE_MOMENTS) -- each tile's tree merged by exact_combine, or summed plainly with
    its bound from the tile's largest magnitude (plan.EXACT_TILE_MAGNITUDE_BOUND). Still the correctly
    rounded sums and means."""
    monkeypatch.setattr(precred.plan, "EXACT_TILE_MAGNITUDE_BOUND", tile_bound)
    narrow = columns < 1024
    if not narrow and dtype == torch.float32:
        pytest.skip("fp32's wide strided axes keep the lane chains (plan.EXACT_OUTER_TILE_MOMENTS)")
    rng = np.random.default_rng(11 if narrow else 12)
    rows = 100 if narrow else 64   # the interpreter merges the wide tiles' lanes slowly
    wide = 8.0 if dtype == torch.float16 else 40.0   # exponents within the format's range
    values = rng.standard_normal((rows, columns)) * np.exp2(rng.uniform(-wide, wide, (rows, columns)))
    x = torch.tensor(values).to(dtype)
    _, plan = plan_for(x.to(device), (0,), EXACT, dtype, split_min_bytes=0)
    first = plan.passes[0]
    assert first.schedule == "outer" and first.parts > 1, plan
    if narrow:   # one warp of vectors
        assert first.block_kept == 32 * 16 // x.element_size() and first.num_warps == 1, plan
    else:
        assert first.block_kept == 1024 and first.num_warps == 4 and first.lanes >= 4, plan
    assert_correctly_rounded(x, (0,), device=device, planner=dict(split_min_bytes=0))
    assert_correctly_rounded(x, (0,), mean=True, device=device, planner=dict(split_min_bytes=0))


@pytest.mark.parametrize("lanes", [2, 4, 8, 16, 32, 64])
def test_tile_tree_bound_covers_the_tree(lanes):
    """strategies/exact.py: the plain fp64 tree over a tile's lanes forms partial sums s_k whose |s_k| add
    up to at most fl(M * tile_tree_bound(lanes)), M the largest |x| -- checked exactly (math.fsum of the
    fp64 partial sums the tree rounded) on tiles built to fill it -- equal magnitudes: every partial sum as
    large as its level allows, the bound tight to its 2^-40 (a factor one level short fails) -- and on
    random ones: exponents across fp32's range (fp64 additions that round) or close, signs that cancel."""
    rng = np.random.default_rng(lanes)
    c = tile_tree_bound(lanes)
    top = float(torch.finfo(torch.float32).max)
    tiles = [np.full(lanes, 1.0 - 2.0 ** -24), np.full(lanes, top), np.full(lanes, 2.0 ** -149)]
    for _ in range(200):
        exponents = rng.integers(-149, 127, lanes) if rng.random() < 0.5 else rng.integers(-3, 3, lanes)
        signs = rng.choice([-1.0, 1.0], lanes) if rng.random() < 0.5 else np.ones(lanes)
        tiles.append(signs * np.ldexp(rng.uniform(1, 2, lanes), exponents))
    for tile in tiles:
        level = tile.astype(np.float32).astype(np.float64)   # the kernel's inputs: fp32 values
        largest = float(np.max(np.abs(level)))
        terms = []
        while level.size > 1:
            level = level[0::2] + level[1::2]   # fp64 additions, one tree level
            terms.extend(np.abs(level).tolist())
        assert math.fsum(terms) <= largest * c, (lanes, tile)
    assert tile_tree_bound(1) == 0.0   # one lane: no tree (the kernel's bound off, t_tile = 0 either way)
    for bad in (12, 128):
        with pytest.raises(ValueError, match="lanes"):
            tile_tree_bound(bad)


def test_tile_bound_certifies_ordinary_columns(device, stage_flags, monkeypatch):
    """With each tile's bound from its largest magnitude (plan.EXACT_TILE_MAGNITUDE_BOUND), the looser
    bound still certifies every column of N(0, 1) data over a narrow strided axis (split into parts)."""
    seen, _ = stage_flags
    monkeypatch.setattr(precred.plan, "EXACT_TILE_MAGNITUDE_BOUND", True)
    x = torch.randn(512, 264, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
    _, plan = plan_for(x.to(device), (0,), EXACT, x.dtype, split_min_bytes=0)
    assert plan.passes[0].parts > 1 and plan.passes[0].num_warps == 1, plan
    assert_correctly_rounded(x, (0,), device=device, planner=dict(split_min_bytes=0))
    assert bool(seen[-1].all()), "an ordinary column left uncertified"


def test_specials_follow_torch(device):
    rows = torch.tensor([[1.0, float("inf"), 2.0], [float("inf"), float("-inf"), 0.0],
                         [float("nan"), 1.0, 2.0], [-float("inf"), 1.0, 1e30]])
    for op in (precred.sum, precred.mean):
        got = op(rows.to(device), 1, mode="exact").cpu()
        want = getattr(torch, op.__name__)(rows, 1)
        assert torch.equal(torch.isnan(got), torch.isnan(want))
        assert torch.equal(got[~torch.isnan(got)], want[~torch.isnan(want)])


def test_same_bits_alone_in_a_batch_transposed_permuted_and_on_any_plan(device):
    rng = np.random.default_rng(21)
    rows = torch.stack([gen.ill_conditioned(700, c, rng, torch.float32) for c in (1e3, 1e12, 1e25, 1e35)])
    want, _ = reference_sum(rows, dim=(1,))
    d = rows.to(device)
    results = [precred.sum(d, 1, mode="exact"), precred.sum(d.t().contiguous(), 0, mode="exact"),
               precred.sum(d.t(), 0, mode="exact"), torch.cat([precred.sum(d[r:r + 1], 1, mode="exact")
                                                               for r in range(4)]),
               precred.sum(d[:, torch.from_numpy(rng.permutation(700)).to(device)], 1, mode="exact"),
               precred.sum(torch.cat([d, d.flip(1)]), 1, mode="exact")[4:]]
    for planner in PLANNERS.values():
        _, plan = plan_for(d, (1,), EXACT, **planner)
        results.append(reduce_sum(d, (1,), EXACT, torch.float32, divide=False, plan=plan))
    for got in results:
        assert torch.equal(_bits(got.cpu()), _bits(want)), (got, want)


def test_exact_refuses_what_it_cannot_round_exactly(device):
    x = torch.ones(4, 8, device=device)
    with pytest.raises(TypeError, match="exact.*float64"):
        precred.sum(x.double(), 1, mode="exact")
    with pytest.raises(TypeError, match="dtype"):
        precred.mean(x, 1, mode="exact", dtype=torch.float64)
    huge = torch.ones(1, device=device).expand(2 ** 38)   # 2^38 elements, one in memory
    with pytest.raises(ValueError, match="2\\^37"):
        precred.sum(huge, mode="exact")


def test_exact_through_torch_compile(device):
    x = torch.randn(4, 50, device=device)

    def f(t):
        return precred.sum(t, 1, mode="exact") + precred.mean(t, 1, mode="exact")

    assert torch.equal(torch.compile(f, fullgraph=True, backend="eager")(x), f(x))
