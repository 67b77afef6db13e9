"""amax / amin / max / min / argmax / argmin: the exact extremum and its first index on every schedule
(inner, outer, split, atomic), bitwise, against a reference written here from the definition (NaN is
the largest value, ties -- -0.0 == 0.0 included -- go to the smallest index), amax / amin's value
alone against IEEE 754-2019's maximum / minimum (NaN wins, +0.0 > -0.0), and against torch;
torch's semantics for dims, keepdim, empty dims, scalars and bad arguments; autograd; compile."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import precred
from precred.launch import plan_for, reduce_extremum
from precred.modes import MAXIMUM_MODE, MAXIMUM_VALUE_MODE, MINIMUM_MODE, MINIMUM_VALUE_MODE
from validation import generators as gen

from conftest import equal_with_nan

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
# Planner settings that reach every schedule on small inputs: the default plan, long lane chains split
# across programs (tiny tiles), and the atomic schedule over that split (not for fp64).
SCHEDULES = {
    "default": dict(schedule="passes"),
    "split": dict(schedule="passes", tile_elements=16, sm_count=64, split_min_bytes=0),
    "atomic": dict(schedule="atomic", tile_elements=16, sm_count=64, split_min_bytes=0),
}
LENGTHS = [1, 2, 15, 16, 17, 63, 64, 65, 257]


def reference(rows: np.ndarray, minimum: bool):
    """(index, value) of each row's first extremum, by the definition, in float64 (which holds every
    element exactly)."""
    out = []
    for row in rows:
        best = None
        for j, v in enumerate(row.tolist()):
            key = -v if minimum else v
            if best is None:
                best = (j, key)
                continue
            b = best[1]
            better = (math.isnan(key) and not math.isnan(b)) or (not math.isnan(b) and key > b)
            if better:
                best = (j, key)
        out.append(best[0])
    index = np.array(out, dtype=np.int64)
    return index, rows[np.arange(len(rows)), index]


def ieee_reference(rows: np.ndarray, minimum: bool) -> np.ndarray:
    """Each row's IEEE 754-2019 maximum (minimum): NaN if the row holds one, else the largest (smallest)
    value, +0.0 over -0.0 (-0.0 under +0.0) -- whatever the elements' order."""
    out = []
    for row in rows:
        if np.isnan(row).any():
            out.append(np.nan)
            continue
        best = row.min() if minimum else row.max()
        if best == 0:
            zero_signs = np.signbit(row[row == 0])
            best = -0.0 if (zero_signs.any() if minimum else zero_signs.all()) else 0.0
        out.append(best)
    return np.array(out, dtype=np.float64)


def same_bits_or_nan(got: np.ndarray, want: np.ndarray) -> bool:
    same = (got == want) & (np.signbit(got) == np.signbit(want))
    return bool(np.all(same | (np.isnan(got) & np.isnan(want))))


def family(name: str, rows: int, n: int, rng, dtype) -> torch.Tensor:
    if name == "normal":
        a = rng.standard_normal((rows, n))
    elif name == "ties":            # small integers: many equal maxima and minima
        a = rng.integers(-3, 4, (rows, n)).astype(np.float64)
    elif name == "zeros":           # -0.0 and 0.0 mixed: they tie, the first wins
        a = np.where(rng.random((rows, n)) < 0.5, -0.0, 0.0)
    elif name == "nan":             # NaNs at random places (some rows none, some several)
        a = rng.standard_normal((rows, n))
        a[rng.random((rows, n)) < 1.5 / n] = np.nan
    elif name == "inf":             # +-inf present, and rows entirely -inf or +inf
        a = rng.standard_normal((rows, n))
        a[rng.random((rows, n)) < 2.0 / n] = np.inf
        a[rng.random((rows, n)) < 2.0 / n] = -np.inf
        a[0, :] = -np.inf
        if rows > 1:
            a[1, :] = np.inf
    elif name == "infinite_start":  # each row opens with a run of -inf (even rows) or +inf (odd rows), of
        # random length, before ordinary values (one row also holds a NaN after it): lanes that meet
        # only -inf (for minima: +inf) before their first larger element, or to their end
        a = rng.standard_normal((rows, n))
        for r in range(rows):
            start = int(rng.integers(1, n + 1))
            a[r, :start] = -np.inf if r % 2 == 0 else np.inf
            if r == rows - 1 and start < n:
                a[r, int(rng.integers(start, n))] = np.nan
    elif name == "equal":           # every element equal
        a = np.full((rows, n), 1.5)
    elif name == "subnormals":      # the format's subnormals (and a few smallest normals): no flush to zero
        return torch.stack([gen.subnormals(n, rng, dtype) for _ in range(rows)])
    else:
        raise ValueError(name)
    return torch.from_numpy(a).to(dtype)


FAMILIES = ["normal", "ties", "zeros", "nan", "inf", "infinite_start", "equal", "subnormals"]


def check_rows(x: torch.Tensor, device, minimum: bool, schedule: dict, dim: int = -1):
    """Run the extremum of x (2-d) over dim under `schedule`; values bitwise the reference's element,
    indices equal."""
    mode = MINIMUM_MODE if minimum else MAXIMUM_MODE
    xd = x.to(device)
    d = dim % 2
    values, index = reduce_extremum(xd, (d,), mode, True, **schedule)
    rows = (x if d == 1 else x.t()).double().numpy()
    want_index, want_value = reference(rows, minimum)
    assert index.cpu().numpy().tolist() == want_index.tolist()
    assert same_bits_or_nan(values.cpu().double().numpy(), want_value)
    # The indexed strategy without its index gives the same bits.
    only = reduce_extremum(xd, (d,), mode, False, **schedule)[0]
    assert torch.equal(only.view(torch.uint8), values.view(torch.uint8))
    # amax / amin's value alone (no atomic schedule: it serves the indexed extrema).
    if schedule["schedule"] != "atomic":
        value_mode = MINIMUM_VALUE_MODE if minimum else MAXIMUM_VALUE_MODE
        alone = reduce_extremum(xd, (d,), value_mode, False, **schedule)[0]
        assert same_bits_or_nan(alone.cpu().double().numpy(), ieee_reference(rows, minimum))


@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("minimum", [False, True], ids=["max", "min"])
def test_every_schedule_matches_the_definition(device, schedule, dtype, minimum):
    if schedule == "atomic" and dtype == torch.float64:
        pytest.skip("the atomic schedule keys hold 32-bit values (fp64 takes the split)")
    rng = np.random.default_rng(1 + DTYPES.index(dtype))
    for name in FAMILIES:
        check_rows(family(name, 3, 70, rng, dtype), device, minimum, SCHEDULES[schedule])


def test_strided_dim_takes_the_outer_schedule(device):
    rng = np.random.default_rng(7)
    cases = [(torch.float32, "ties", False), (torch.bfloat16, "zeros", True), (torch.float64, "nan", False)]
    for dtype, name, minimum in cases:
        x = family(name, 100, 40, rng, dtype)        # reduce over dim 0: 100 long, 40 contiguous columns
        for planner in ({}, dict(tile_elements=64, sm_count=64, split_min_bytes=0)):
            _, plan = plan_for(x.to(device), (0,), MAXIMUM_MODE, **planner)
            assert plan.passes[0].schedule == "outer"
            check_rows(x, device, minimum, dict(schedule="passes", **planner), dim=0)


@pytest.mark.parametrize("n", LENGTHS)
def test_lengths_around_block_sizes(device, n):
    rng = np.random.default_rng(n)
    x = family("ties", 2, n, rng, torch.float32)
    for schedule in SCHEDULES.values():
        check_rows(x, device, False, schedule)
        check_rows(x, device, True, schedule)


@settings(max_examples=10, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=40),
                  elements=st.floats(width=32, allow_nan=True, allow_infinity=True)))
def test_hypothesis_arrays(device, a):
    x = torch.from_numpy(a.copy())
    for minimum in (False, True):
        check_rows(x, device, minimum, SCHEDULES["default"])
        check_rows(x, device, minimum, SCHEDULES["atomic"])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_public_functions_agree_with_torch(device, dtype):
    rng = np.random.default_rng(3)
    x = family("ties", 6, 50, rng, dtype).reshape(2, 3, 50).to(device)
    x[0, 1, 7] = float("nan")
    for dim in (0, 1, 2, -1):
        for keepdim in (False, True):
            for ours, theirs in ((precred.max, torch.max), (precred.min, torch.min)):
                v, i = ours(x, dim, keepdim)
                tv, ti = theirs(x, dim, keepdim)
                assert torch.equal(i, ti) and torch.equal(v.isnan(), tv.isnan())
                assert equal_with_nan(v, tv)
            assert torch.equal(precred.argmax(x, dim, keepdim), torch.argmax(x, dim, keepdim))
            assert torch.equal(precred.argmin(x, dim, keepdim), torch.argmin(x, dim, keepdim))
    for dim in ((), None, (0, 2), (2, 0), 1, (-1,)):
        for keepdim in (False, True):
            for ours, theirs in ((precred.amax, torch.amax), (precred.amin, torch.amin)):
                got, want = ours(x, dim, keepdim), theirs(x, dim if dim is not None else (), keepdim)
                assert got.shape == want.shape and equal_with_nan(got, want)
    for keepdim in (False, True):
        assert torch.equal(precred.argmax(x, keepdim=keepdim), torch.argmax(x, keepdim=keepdim))
        assert torch.equal(precred.argmin(x, keepdim=keepdim), torch.argmin(x, keepdim=keepdim))
    # Flattened indices follow the row-major order of a non-contiguous input too.
    t = x.transpose(0, 2)
    assert torch.equal(precred.argmax(t), torch.argmax(t)) and torch.equal(precred.argmin(t), torch.argmin(t))
    assert equal_with_nan(precred.max(x), torch.max(x))


def test_zero_signs(device):
    """max / min along a dim return the first occurrence; amax / amin IEEE's maximum / minimum, whatever
    the order (torch's amax leaves it to its kernel's order)."""
    x = torch.tensor([[0.0, -0.0], [-0.0, 0.0], [-0.0, -0.0]], device=device)
    assert precred.max(x, 1).values.signbit().tolist() == [False, True, True]
    assert precred.min(x, 1).values.signbit().tolist() == [False, True, True]
    assert precred.max(x, 1).indices.tolist() == [0, 0, 0]
    assert precred.amax(x, 1).signbit().tolist() == [False, False, True]
    assert precred.amin(x, 1).signbit().tolist() == [True, True, True]
    assert precred.max(x).signbit().item() is False and precred.min(x).signbit().item() is True
    with pytest.raises(ValueError, match="atomic"):
        reduce_extremum(x, (1,), MAXIMUM_VALUE_MODE, False, schedule="atomic")
    with pytest.raises(ValueError, match="index"):
        reduce_extremum(x, (1,), MAXIMUM_VALUE_MODE, True)


@pytest.mark.parametrize("with_index", [True, False])
def test_atomic_schedule_leaves_its_keys_empty(device, with_index, monkeypatch):
    # The finish kernel resets every key to INT64_MIN (schedules/atomic.py), the state the merge kernel
    # needs on entry: a CUDA call's launch recipe reuses the keys (precred.launch._AtomicRecipe).
    from precred import launch
    made = []
    empty_keys = launch._empty_keys
    monkeypatch.setattr(launch, "_empty_keys", lambda rows, dev: made.append(empty_keys(rows, dev)) or made[-1])
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3, 700, generator=g).to(device)
    options = {k: v for k, v in SCHEDULES["atomic"].items() if k != "schedule"}
    values, index = reduce_extremum(x, (1,), MAXIMUM_MODE, with_index, schedule="atomic", **options)
    assert len(made) == 1 and torch.all(made[0] == -(2 ** 63))
    want = torch.max(x, 1)
    assert torch.equal(values, want.values) and (index is None) == (not with_index)
    if with_index:
        assert torch.equal(index, want.indices)


def test_edge_cases_follow_torch(device):
    scalar = torch.tensor(2.5, device=device)
    assert precred.amax(scalar).item() == 2.5 and precred.argmax(scalar).item() == 0
    v, i = precred.max(scalar, 0)
    assert v.item() == 2.5 and i.item() == 0
    empty_rows = torch.empty(0, 4, device=device)
    assert precred.amax(empty_rows, 1).shape == (0,)
    assert precred.max(empty_rows, 1).indices.shape == (0,)
    strided = torch.empty_strided((3, 0, 1), (2, 2, 2), device=device)   # an empty output keeps no strides
    for op in (lambda t: precred.amax(t, 2, keepdim=True), lambda t: precred.amin(t, 2, keepdim=True),
               lambda t: precred.max(t, 2, keepdim=True).values):
        assert op(strided).stride() == torch.amax(strided, 2, keepdim=True).stride() == (1, 1, 1)
    with pytest.raises(IndexError, match="non-zero size"):
        precred.amax(empty_rows, 0)
    with pytest.raises(IndexError, match="non-zero size"):
        precred.max(empty_rows, 0)
    with pytest.raises(IndexError, match="numel"):
        precred.argmax(empty_rows)
    for whole in (lambda t: precred.amax(t), lambda t: precred.amin(t, ()), lambda t: precred.max(t),
                  lambda t: precred.min(t)):
        with pytest.raises(RuntimeError, match="numel"):   # torch's error where no dim is named
            whole(empty_rows)
    with pytest.raises(TypeError, match="input"):
        precred.amax(torch.arange(4, device=device))
    with pytest.raises(TypeError, match="dim"):
        precred.max(empty_rows, (0, 1))
    rows = torch.tensor([[0.5, 2.0], [3.0, -1.0]], device=device)
    for op, name in ((precred.max, "maximum"), (precred.min, "minimum")):
        for other in (torch.tensor(1), torch.tensor(-1, dtype=torch.int16), torch.tensor([1.0])):
            # torch reads a tensor there as `other`: the elementwise extremum, not a reduction along dim 1
            assert getattr(torch, op.__name__)(rows.cpu(), other).shape == rows.shape
            with pytest.raises(TypeError, match=f"elementwise {name}"):
                op(rows, other.to(device))
    with pytest.raises(IndexError, match="dim"):
        precred.argmax(empty_rows, 2)
    with pytest.raises(TypeError, match="keepdim"):
        precred.amax(empty_rows, 1, keepdim=1)
    for op in (precred.max, precred.min):
        for keep in (False, True):   # torch.max(x, keepdim=...) is a TypeError too: no overload takes it
            with pytest.raises(TypeError):
                getattr(torch, op.__name__)(rows.cpu(), keepdim=keep)
            with pytest.raises(TypeError, match="keepdim needs a dim"):
                op(rows, keepdim=keep)
        assert op(rows, 1, keepdim=True).values.shape == (2, 1)


def test_input_untouched_and_deterministic(device):
    rng = np.random.default_rng(11)
    x = family("ties", 8, 300, rng, torch.float32).to(device)
    before = x.clone()
    first = precred.max(x, 1)
    second = precred.max(x, 1)
    assert torch.equal(x, before)
    assert torch.equal(first.values, second.values) and torch.equal(first.indices, second.indices)


def test_gradients_follow_torch(device):
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0], [0.5, -1.0, 0.25, 0.5]], device=device, requires_grad=True)
    xt = x.detach().clone().requires_grad_(True)
    g = torch.tensor([2.0, 4.0], device=device)
    (precred.amax(x, 1) * g).sum().backward()
    (torch.amax(xt, 1) * g).sum().backward()
    assert torch.equal(x.grad, xt.grad)
    x.grad = None
    xt.grad = None
    (precred.min(x, 1).values * g).sum().backward()
    (torch.min(xt, 1).values * g).sum().backward()
    assert torch.equal(x.grad, xt.grad)


def test_gradients_at_nan_follow_torch(device):
    # torch: max(x) / min(x) spread the gradient over the NaN elements when the result is NaN
    # (evenly_distribute_backward); amax / amin over those equal to it: none, so NaN everywhere.
    x = torch.tensor([1.0, math.nan, 3.0, math.nan], device=device, requires_grad=True)
    for name in ("max", "min", "amax", "amin"):
        xt = x.detach().cpu().requires_grad_(True)
        getattr(precred, name)(x).backward()
        getattr(torch, name)(xt).backward()
        assert equal_with_nan(x.grad.cpu(), xt.grad), (name, x.grad, xt.grad)
        x.grad = None


def test_torch_compile_traces_the_ops(device):
    def f(x):
        return precred.amax(x, 1) + precred.max(x, 0).values.sum() + precred.argmax(x, 1)

    x = torch.randn(4, 33, device=device)
    compiled = torch.compile(f, fullgraph=True, backend="eager")
    assert torch.equal(compiled(x), f(x))
