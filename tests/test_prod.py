"""prod: every mode x dtype x schedule within precred.product_error_bound against the exact product
(Python fractions), on rows whose partial products stay in range; the accumulator's range decides
overflow and underflow (documented); torch's semantics for zeros, inf, NaN, empty and dims; autograd."""
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import precred
from precred.launch import plan_for, reduce_product
from precred.modes import get_prod_mode

from conftest import DEVICE as _DEVICE, equal_with_nan  # hypothesis tests cannot take function-scoped fixtures

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
PLANNER_SETTINGS = {"default": {}, "split": dict(tile_elements=16, sm_count=64, split_min_bytes=0)}


def exact_products(rows: np.ndarray) -> list:
    out = []
    for row in rows:
        p = Fraction(1)
        for v in row.tolist():
            p *= Fraction(v)
        out.append(p)
    return out


def family(name: str, rows: int, n: int, rng, dtype) -> torch.Tensor:
    if name == "near_one":          # partial products stay near 1 whatever the order
        a = rng.uniform(0.5, 2.0, (rows, n))
    elif name == "signs":           # mixed signs, factors from 1/8 to 8 whose powers of two cancel over the row
        k = rng.integers(-3, 4, (rows, n // 2))
        k = rng.permuted(np.concatenate([k, -k, np.zeros((rows, n % 2), dtype=k.dtype)], axis=1), axis=1)
        a = rng.choice([-1.0, 1.0], (rows, n)) * 2.0 ** k * 2.0 ** rng.uniform(-0.5, 0.5, (rows, n))
    elif name == "zeros":           # an exact zero in some rows
        a = rng.uniform(0.5, 2.0, (rows, n))
        a[0, n // 2] = 0.0
    else:
        raise ValueError(name)
    return torch.from_numpy(a).to(dtype)


def assert_within_bound(x: torch.Tensor, dim: int, mode: str, device, planner: dict):
    xd = x.to(device)
    m = get_prod_mode(mode)
    d = dim % 2
    _, plan = plan_for(xd, (d,), m, **planner)
    got = reduce_product(xd, (d,), m, x.dtype, plan=plan).cpu().double().tolist()
    rows = (x if d == 1 else x.t()).double().numpy()
    n = rows.shape[1]
    for value, p in zip(got, exact_products(rows)):
        bound = precred.product_error_bound(mode, n, float(p), x.dtype)
        assert abs(Fraction(value) - p) <= Fraction(bound), (mode, x.dtype, value, float(p), bound)


@pytest.mark.parametrize("planner", list(PLANNER_SETTINGS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mode", list(precred.PROD_MODES))
def test_within_bound_on_every_schedule(device, mode, dtype, planner):
    rng = np.random.default_rng(5 + DTYPES.index(dtype))
    n = 40 if dtype in (torch.bfloat16, torch.float16) else 200   # 16-bit: partial products stay in range
    for name in ("near_one", "signs", "zeros"):
        x = family(name, 3, n, rng, dtype)
        assert_within_bound(x, -1, mode, device, PLANNER_SETTINGS[planner])
    assert_within_bound(family("signs", 50, 8, rng, dtype), 0, mode, device, PLANNER_SETTINGS[planner])


@settings(max_examples=20, deadline=None)
@given(hnp.arrays(np.float32, st.tuples(st.integers(1, 3), st.integers(1, 60)),
                  elements=st.floats(0.5, 2.0, width=32) | st.floats(-2.0, -0.5, width=32)),
       st.sampled_from(list(precred.PROD_MODES)), st.sampled_from(list(PLANNER_SETTINGS)))
def test_hypothesis_arrays_within_bound(a, mode, planner):
    """Factors of magnitude in [0.5, 2] (60 of them keep every partial product in range), any signs
    and lengths, every mode, over dim -1 and dim 0, on the default plan and the split."""
    x = torch.from_numpy(a.copy())
    assert_within_bound(x, -1, mode, _DEVICE, PLANNER_SETTINGS[planner])
    assert_within_bound(x, 0, mode, _DEVICE, PLANNER_SETTINGS[planner])


def test_default_mode_rounds_once(device):
    """fp64 products of 200 fp32 factors, rounded once to fp32: |error| <= u_fp32 |p| plus gamma_199 in
    fp64 (product_error_bound)."""
    rng = np.random.default_rng(9)
    x = family("near_one", 4, 200, rng, torch.float32)
    got = precred.prod(x.to(device), 1).cpu().double().tolist()
    for value, p in zip(got, exact_products(x.double().numpy())):
        bound = precred.bounds.product_error_bound("fp64", 200, float(p), torch.float32)
        assert abs(Fraction(value) - p) <= Fraction(bound)


def test_the_accumulator_decides_overflow(device):
    """1e30 * 1e30 * 1e-30 * 1e-30 = 1: fp64 products keep it, fp32 products overflow first (as
    torch's fp32 prod does)."""
    x = torch.tensor([1e30, 1e30, 1e-30, 1e-30], device=device)
    (p,) = exact_products(x.cpu().double().numpy()[None, :])
    bound = precred.bounds.product_error_bound("fp64", 4, float(p), torch.float32)
    assert abs(Fraction(precred.prod(x, mode="fp64").item()) - p) <= Fraction(bound)
    assert not torch.isfinite(precred.prod(x, mode="fast")).item()
    assert not torch.isfinite(torch.prod(x.cpu())).item()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_the_accumulator_decides_underflow_and_subnormal_factors(dtype, device):
    """1e-30 * 1e-30 * 1e30 * 1e30 = 1: fp64 products keep it; fp32 products leave fp32's range both
    ways, and the tree's order multiplies the underflowed 0 by the overflowed inf (NaN, documented;
    torch's left-to-right product gives 0). Factors subnormal in the input format (normal in fp64)
    stay within the fp64 mode's bound."""
    x = torch.tensor([1e-30, 1e-30, 1e30, 1e30], dtype=dtype, device=device)
    (p,) = exact_products(x.cpu().double().numpy()[None, :])
    assert abs(Fraction(precred.prod(x, mode="fp64").item()) - p) <= Fraction(
        precred.bounds.product_error_bound("fp64", 4, float(p), dtype))
    assert math.isnan(precred.prod(x, mode="fast").item())
    tiny = 2.0 ** -140                                  # subnormal in fp32 and bf16
    y = torch.tensor([tiny, 2.0 ** 70, 3.0, 2.0 ** 60, 1.25], dtype=dtype, device=device)
    (q,) = exact_products(y.cpu().double().numpy()[None, :])
    assert abs(Fraction(precred.prod(y, mode="fp64").item()) - q) <= Fraction(
        precred.bounds.product_error_bound("fp64", 5, float(q), dtype))


def test_no_bound_is_claimed_outside_the_normal_range():
    """product_error_bound checks the product itself against the accumulator's normal range (the
    partial products stay the caller's to keep in range): a subnormal or overflowing product gets no
    claim (the fast mode gave 1.4999919e-40 for 1e-20 * 1e-20 * 1.5, 5e4 bounds off)."""
    assert math.isinf(precred.product_error_bound("fast", 3, 1.5e-40, torch.float32))
    assert math.isinf(precred.product_error_bound("fast", 3, 9e-50, torch.float32))
    assert math.isinf(precred.product_error_bound("fast", 3, torch.finfo(torch.float32).max, torch.float32))
    assert math.isfinite(precred.product_error_bound("fp64", 3, 1.5e-40, torch.float32))
    assert precred.product_error_bound("fast", 3, 0.0, torch.float32) == 0.0


def test_specials_and_shapes_follow_torch(device):
    x = torch.tensor([[2.0, float("inf"), 0.5], [0.0, float("inf"), 1.0], [float("nan"), 1.0, 2.0],
                      [-1.0, -2.0, -0.0]], device=device)
    got, want = precred.prod(x, 1), torch.prod(x, 1)
    assert torch.equal(got.isnan(), want.isnan())
    assert equal_with_nan(got, want)
    finite = ~want.isnan()   # a NaN's sign bit carries no meaning (the GPU's 0 * inf sets it)
    assert torch.equal(got.signbit()[finite], want.signbit()[finite])
    assert precred.prod(torch.empty(0, 3, device=device), 0).tolist() == [1.0, 1.0, 1.0]
    assert precred.prod(torch.empty(0, device=device)).item() == 1.0
    assert precred.prod(torch.tensor(3.0, device=device)).item() == 3.0
    y = torch.rand(2, 3, 4, device=device) + 0.5
    for dim in (None, 0, 1, 2, -1):
        for keepdim in ((False, True) if dim is not None else (False,)):
            want = torch.prod(y, dim, keepdim) if dim is not None else torch.prod(y)
            got = precred.prod(y, dim, keepdim)
            assert got.shape == want.shape and torch.allclose(got, want, rtol=1e-6)
    assert precred.prod(y, 1, dtype=torch.float64).dtype == torch.float64
    with pytest.raises(TypeError, match="dim"):
        precred.prod(y, (0, 1))
    with pytest.raises(IndexError, match="dim"):
        precred.prod(y, 3)
    with pytest.raises(ValueError, match="mode"):
        precred.prod(y, 0, mode="kahan")
    with pytest.raises(TypeError, match="input"):
        precred.prod(torch.ones(3, dtype=torch.int32, device=device))


def test_gradient_handles_zeros(device):
    x = torch.tensor([[2.0, 0.0, 3.0], [1.5, -2.0, 4.0], [0.0, 0.0, 1.0]], dtype=torch.float64, device=device,
                     requires_grad=True)
    xt = x.detach().clone().requires_grad_(True)
    precred.prod(x, 1).sum().backward()
    torch.prod(xt, 1).sum().backward()
    assert torch.equal(x.grad, xt.grad)
    z = (torch.rand(3, 4, dtype=torch.float64, device=device) + 0.5).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: precred.prod(t), (z,))
    assert torch.autograd.gradcheck(lambda t: precred.prod(t, 0, keepdim=True), (z,))


def test_gradient_where_torch_divides(device):
    """Rows holding inf or NaN: the gradient is the other factors' product (precred/ops/product.py), which
    torch gives too when a 0 is somewhere in the input, but not without one (the product over each
    element: NaN at the inf, and across the NaN's row)."""
    inf, nan = float("inf"), float("nan")
    rows = [[1.0, inf, 2.0], [1.0, nan, 2.0], [3.0, -inf, 0.5]]
    want = torch.tensor([[inf, 2.0, inf], [nan, 2.0, nan], [-inf, 1.5, -inf]], dtype=torch.float64)
    for extra in ([], [[0.0, 1.0, 2.0]]):   # without, and with, a 0 elsewhere in the input
        x = torch.tensor(rows + extra, dtype=torch.float64, device=device, requires_grad=True)
        precred.prod(x, 1).sum().backward()
        assert equal_with_nan(x.grad[:3].cpu(), want)
        xt = x.detach().cpu().requires_grad_(True)
        torch.prod(xt, 1).sum().backward()
        assert torch.isnan(xt.grad[0, 1]).item() != bool(extra)   # torch's own, for the docstring's claim
    x = torch.tensor(rows[0], dtype=torch.float64, device=device, requires_grad=True)
    precred.prod(x).backward()
    assert x.grad.tolist() == [inf, 2.0, inf]


@pytest.mark.parametrize("shape, dim", [((0, 3), 0), ((3, 0), 1), ((0, 3), None), ((0,), None), ((0, 3), 1),
                                        ((2, 0, 3), 2), ((2, 0, 3), 0)])
def test_gradient_of_empty_input(shape, dim, device):
    """An empty input's gradient is empty (or zeros of its shape), as torch's -- also where the empty
    dim is a kept one."""
    x = torch.randn(shape, dtype=torch.float64, device=device, requires_grad=True)
    xt = x.detach().clone().requires_grad_(True)
    (precred.prod(x) if dim is None else precred.prod(x, dim)).sum().backward()
    (torch.prod(xt) if dim is None else torch.prod(xt, dim)).sum().backward()
    assert torch.equal(x.grad, xt.grad)


def test_torch_compile_traces_prod_and_its_gradient(device):
    """precred.prod is a torch.library custom op: torch.compile(fullgraph=True) traces it, forward and
    backward (aot_eager runs the registered autograd), with eager's bits."""
    def f(t):
        return precred.prod(t, 1).sum() + precred.prod(t[:, :3])

    x = (torch.rand(4, 9, dtype=torch.float64, device=device) + 0.5).requires_grad_(True)
    xc = x.detach().clone().requires_grad_(True)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    got, want = compiled(xc), f(x)
    assert torch.equal(got, want)
    got.backward()
    want.backward()
    assert torch.equal(xc.grad, x.grad)


def test_deterministic(device):
    x = (torch.rand(16, 999, device=device) + 0.5)
    assert torch.equal(precred.prod(x, 1, mode="fast"), precred.prod(x, 1, mode="fast"))
