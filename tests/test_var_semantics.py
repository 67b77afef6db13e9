"""precred.var / std / var_mean / std_mean follow torch's semantics: dims, keepdim, correction, dtypes,
empty and length-1 reductions, NaN/inf, errors, layouts, autograd, torch.compile, determinism.
Values are held to precred.moments_error_bound against the exact oracle (test_var_accuracy)."""
import math
import warnings

import numpy as np
import pytest
import torch

import precred
from precred.launch import plan_for
from precred.modes import get_var_mode
from test_var_accuracy import assert_rows_within_bound

from conftest import assert_training_step_compiles_to_eagers_bits, equal_with_nan

VAR_MODES = list(precred.VAR_MODES)


def _randn(shape, device, dtype=torch.float32, seed=0, offset=0.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float64) + offset).to(dtype).to(device)


def _check_public(x, dim, keepdim, correction, mode):
    """var_mean and std_mean through the public functions: torch's shapes and dtype, values in bound."""
    var, mean = precred.var_mean(x, dim, correction=correction, keepdim=keepdim, mode=mode)
    std, mean2 = precred.std_mean(x, dim, correction=correction, keepdim=keepdim, mode=mode)
    ref_var, _ = torch.var_mean(x.cpu().double(), dim, correction=correction, keepdim=keepdim)
    for t in (var, mean, std, mean2):
        assert t.shape == ref_var.shape and t.dtype == x.dtype and t.device == x.device
    assert torch.equal(mean, mean2)
    dims = tuple(range(x.dim())) if dim is None or dim == () else \
        tuple(sorted(d % x.dim() for d in ((dim,) if isinstance(dim, int) else dim)))
    _, plan = plan_for(x, dims, get_var_mode(mode), x.dtype)
    results = {"var": var.cpu().reshape(-1).tolist(), "std": std.cpu().reshape(-1).tolist(),
               "mean": mean.cpu().reshape(-1).tolist()}
    assert_rows_within_bound(results, x.cpu(), dims, mode, correction, plan)


@pytest.mark.parametrize("mode", VAR_MODES)
@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), (-1, False), ((0, 2), False),
                                         ((2, 0), True), ([1, 2], False)])
def test_dims_and_keepdim_match_torch(device, mode, dim, keepdim):
    _check_public(_randn((5, 33, 17), device, offset=100.0), dim, keepdim, 1, mode)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("correction", [0, 1, 2, 0.5])
def test_dtypes_and_corrections(device, dtype, correction):
    _check_public(_randn((7, 300), device, dtype, offset=3.0), 1, False, correction, "fp64")
    _check_public(_randn((7, 300), device, dtype, offset=3.0), 0, True, correction, "fast")


def test_torchs_unbiased_signature(device):
    """torch.var's older signature (dim, unbiased, keepdim), unbiased by keyword, and a bool in dim's
    place: the same call as correction 0 / 1, bit for bit, with torch's shapes."""
    x = _randn((6, 40), device, offset=5.0)
    calls = [((0, False), {}, dict(dim=0, correction=0)),
             ((1, True, True), {}, dict(dim=1, correction=1, keepdim=True)),
             ((False,), {}, dict(correction=0)), ((True,), {}, dict(correction=1)),
             ((), dict(unbiased=False), dict(correction=0)),
             ((), dict(dim=-1, unbiased=False, keepdim=True), dict(dim=-1, correction=0, keepdim=True)),
             (((0, 1), False), {}, dict(dim=(0, 1), correction=0)), ((None, False), {}, dict(correction=0))]
    for name in ("var", "std", "var_mean", "std_mean"):
        ours, theirs = getattr(precred, name), getattr(torch, name)
        for args, kwargs, same in calls:
            got, want = ours(x, *args, **kwargs), ours(x, **same)
            ref = theirs(x.cpu().double(), *args, **kwargs)
            for g, w, r in zip(*(t if isinstance(t, tuple) else (t,) for t in (got, want, ref))):
                assert torch.equal(g, w) and g.shape == r.shape, (name, args, kwargs)
    with pytest.raises(TypeError, match="unbiased or correction"):
        precred.var(x, 0, unbiased=True, correction=1)
    with pytest.raises(TypeError, match="unbiased must be a bool"):
        precred.std(x, 0, 1)
    with pytest.raises(TypeError, match="unbiased given twice"):
        precred.var_mean(x, True, False)


def test_length_one_and_degrees_of_freedom_follow_torch(device):
    x = torch.tensor([[2.5], [-1.0]], device=device)
    for correction in (0, 1, 2):
        got = precred.var(x, 1, correction=correction).cpu()
        want = torch.var(x.cpu(), 1, correction=correction)   # 0, then 0/0 = NaN twice
        assert equal_with_nan(got, want)
    y = torch.tensor([1.0, 2.0, 4.0], device=device)
    assert precred.var(y, correction=3).item() == math.inf      # m2 > 0 over max(0, n - 3) = 0
    assert math.isnan(precred.var(torch.full((3,), 7.0, device=device), correction=5).item())
    z = torch.tensor(3.5, device=device)
    v, m = precred.var_mean(z, correction=0)
    assert v.shape == () and v.item() == 0.0 and m.item() == 3.5


@pytest.mark.parametrize("correction", [1024, 2000])
def test_no_degrees_of_freedom_on_the_two_pass_rows_follow_torch(device, correction):
    """Rows of 1024 fp32 (`fast`: the two-pass rows kernel, which multiplies by the host's 1 / divisor,
    inf for 0): max(0, n - correction) = 0 gives inf for a spread row and NaN for a constant one, as
    torch."""
    x = torch.randn(3, 1024, generator=torch.Generator().manual_seed(0))
    x[1] = 7.0
    assert precred.plan.plan_moments_rows(3, 1024, element_size=4, accumulator_size=4) is not None
    for fn in (precred.var, precred.std):
        got = fn(x.to(device), 1, correction=correction, mode="fast").cpu()
        want = getattr(torch, fn.__name__)(x.double(), 1, correction=correction).float()
        for result in (got, want):   # spread, constant, spread
            assert result[0] == math.inf and math.isnan(result[1]) and result[2] == math.inf, (got, want)


def test_no_degrees_of_freedom_warn_as_torch(device):
    # torch warns "degrees of freedom is <= 0" where n - correction <= 0 (the result is inf or NaN);
    # each such call warns (none is replayed without its checks), and no other call does.
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(1)).to(device)
    for fn, dim, correction in [(precred.var, 1, 4), (precred.std_mean, 1, 5), (precred.var_mean, None, 12),
                                (precred.std, 0, 3.5)]:
        for _ in range(2):
            with pytest.warns(UserWarning, match=f"^{fn.__name__}\\(\\): degrees of freedom is <= 0"):
                fn(x, dim, correction=correction)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*degrees of freedom")
        precred.var(x, 1, correction=3)
        precred.std_mean(x, 0, correction=2.5)


def test_constant_rows_have_zero_variance_exactly(device):
    x = torch.full((4, 1000), 123456.789, device=device)
    for mode in VAR_MODES:
        v, m = precred.var_mean(x, 1, mode=mode)
        assert torch.all(v == 0) and torch.all(m == x[:, 0])
        assert torch.all(precred.var(x, 0, mode=mode) == 0)


def test_empty_reductions_follow_torch(device):
    for shape, dim in [((0, 3), 0), ((3, 0), 1), ((0, 3), 1), ((0,), None)]:
        x = torch.zeros(shape, device=device)
        v, m = precred.var_mean(x, dim)
        tv, tm = torch.var_mean(x.cpu(), dim)
        assert v.shape == tv.shape and m.shape == tm.shape
        assert torch.equal(v.cpu().isnan(), tv.isnan()) and torch.equal(m.cpu().isnan(), tm.isnan())


@pytest.mark.parametrize("mode", VAR_MODES)
def test_nan_and_inf_follow_torch(device, mode):
    inf, nan = math.inf, math.nan
    rows = [[1.0, inf, 2.0], [inf, inf, 2.0], [-inf, 1.0, -inf], [inf, -inf, 0.0], [1.0, nan, 2.0],
            [inf, 2.0, 3.0], [2.0, 3.0, 4.0]]
    short = torch.tensor(rows, device=device)
    # The same rows padded to 1024 elements: fast takes the two-pass rows kernel there (plan_moments_rows).
    padded = torch.cat([short, torch.full((len(rows), 1021), 0.5, device=device)], 1)
    for x in (short, padded):
        for fn in (precred.var_mean, precred.std_mean):
            got_v, got_m = fn(x, 1, mode=mode)
            want_v = getattr(torch, fn.__name__)(x.cpu(), 1)[0]
            # The mean is torch.mean's (+inf for a row with +inf and no -inf or NaN), where torch.var_mean's
            # own Welford mean turns NaN: a documented, deliberate difference.
            want_m = torch.mean(x.cpu(), 1)
            for got, want in ((got_v.cpu(), want_v), (got_m.cpu(), want_m)):
                assert torch.equal(got.isnan(), want.isnan()), (fn.__name__, got, want)
                assert torch.equal(got.isinf() & (got > 0), want.isinf() & (want > 0)), (got, want)
                assert torch.equal(got.isinf() & (got < 0), want.isinf() & (want < 0)), (got, want)
    # dim 0 (outer schedule): the same rows as columns.
    columns = short.t().contiguous()
    got_v, got_m = precred.var_mean(columns, 0, mode=mode)
    want_v, want_m = torch.var(columns.cpu(), 0), torch.mean(columns.cpu(), 0)
    assert torch.equal(got_v.cpu().isnan(), want_v.isnan()) and torch.equal(got_m.cpu().isnan(), want_m.isnan())


@pytest.mark.parametrize("two_pass", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("mode", VAR_MODES)
def test_finite_rows_near_the_largest_fp32_keep_a_finite_mean(device, mode, dtype, two_pass, monkeypatch):
    """Rows of values near +-5e37 (shifted by the first, |x - K| = 1e38: no bound is claimed there) over
    Welford's vector lanes: var_mean's mean stays finite as torch's does, the variance inf (torch's too),
    never NaN -- with each vector's moments by two passes (plan.WELFORD_TWO_PASS_VECTORS, whose
    fp32 sums are of values scaled first: summed unscaled, 4 x -1e38 overflowed to a mean of -inf) and
    by the merges."""
    from precred import launch, plan
    monkeypatch.setattr(plan, "WELFORD_TWO_PASS_VECTORS", two_pass)
    monkeypatch.setattr(launch, "_RECIPES", {})
    x = torch.tensor([[5e37] + [-5e37] * 16383, [-5e37] * 8191 + [5e37] * 8193], dtype=dtype, device=device)
    var, mean = precred.var_mean(x, dim=-1, mode=mode)
    want_var, want_mean = torch.var_mean(x.cpu().double(), dim=-1)
    assert torch.isfinite(mean).all() and not var.isnan().any(), (var, mean)
    assert torch.isinf(want_var.to(dtype)).all() and torch.isinf(var).all(), (var, want_var)
    if mode == "fp64":   # its mean is the exact one rounded here (fast's fp32 cancels on the second row)
        assert torch.equal(mean.cpu(), want_mean.to(dtype)), (mean, want_mean)


@pytest.mark.parametrize("mode", VAR_MODES)
def test_non_contiguous_and_expanded_inputs(device, mode):
    base = _randn((40, 64), device, offset=10.0)
    for x, dim in [(base.t(), 1), (base.t(), 0), (base[:, ::3], 1), (base[::2, 5:], 0),
                   (base[3:4].expand(9, 64), 1), (base[:, 7:8].expand(40, 11), 1),
                   (base.reshape(40, 8, 8).permute(2, 0, 1), (0, 2)), (base.reshape(4, 10, 64), (0, 2))]:
        _check_public(x, dim, False, 1, mode)


def test_caller_tensor_is_not_modified(device):
    x = _randn((16, 1000), device, offset=5.0)
    before = x.clone()
    precred.var_mean(x, 1)
    precred.std(x.t(), 0, mode="fast")
    assert torch.equal(x, before)


@pytest.mark.parametrize("mode", VAR_MODES)
def test_two_runs_are_bitwise_identical(device, mode):
    x = _randn((9, 2001), device, seed=3, offset=1e3)
    for dim in (1, 0, None):
        a, b = precred.var_mean(x, dim, mode=mode), precred.var_mean(x, dim, mode=mode)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_errors_name_the_argument(device):
    x = _randn((3, 4), device)
    with pytest.raises(TypeError, match="input"):
        precred.var(torch.ones(3, dtype=torch.int32, device=device))
    with pytest.raises(TypeError, match="input"):
        precred.std_mean([1.0, 2.0])
    with pytest.raises(IndexError, match="dim"):
        precred.var(x, 2)
    with pytest.raises(RuntimeError, match="dim"):
        precred.var_mean(x, (1, -1))
    with pytest.raises(ValueError, match="mode"):
        precred.var(x, mode="kahan")
    with pytest.raises(TypeError, match="correction"):
        precred.var(x, correction="1")
    with pytest.raises(TypeError, match="correction"):
        precred.std(x, correction=True)
    with pytest.raises(ValueError, match="correction"):
        precred.std(x, correction=math.inf)
    with pytest.raises(TypeError, match="keepdim"):
        precred.var(x, 0, keepdim=1)


@pytest.mark.parametrize("name", ["var", "std", "var_mean", "std_mean"])
def test_autograd_gradcheck(device, name):
    fn = getattr(precred, name)
    x = (_randn((2, 3, 2), device, torch.float64) + 2.0).requires_grad_()

    def f(t, **kw):
        out = fn(t, **kw)
        return out if isinstance(out, torch.Tensor) else out[0] * 1.5 + out[1]

    assert torch.autograd.gradcheck(lambda t: f(t, dim=(0, 2)), (x,))
    assert torch.autograd.gradcheck(lambda t: f(t, dim=1, keepdim=True, correction=0, mode="fast"), (x,))
    assert torch.autograd.gradcheck(lambda t: f(t), (x,))


@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
@pytest.mark.parametrize("correction", [3, 5, 4.5])
@pytest.mark.parametrize("name", ["var", "std"])
def test_gradient_where_correction_reaches_n(device, name, correction):
    """correction >= n: the forward is inf (or NaN), the gradient torch's: 2 (x - mean) / (n - correction)
    for var (finite where correction > n), 0 for std."""
    x = torch.tensor([[1.0, 2.0, 4.0]], dtype=torch.float64, device=device, requires_grad=True)
    xt = x.detach().clone().requires_grad_()
    out = getattr(precred, name)(x, 1, correction=correction)
    expected = getattr(torch, name)(xt, 1, correction=correction)
    torch.testing.assert_close(out, expected, equal_nan=True)
    out.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(x.grad, xt.grad, rtol=1e-15, atol=1e-15, equal_nan=True)


def test_gradient_of_bf16_input_is_its_fp64_value_rounded(device):
    x = _randn((4, 64), device, torch.bfloat16, offset=2.0).requires_grad_()
    precred.std(x, 1).sum().backward()
    x64 = x.detach().cpu().double().requires_grad_()
    torch.std(x64, 1).sum().backward()
    assert x.grad.dtype == torch.bfloat16
    # Formed in fp32 (a few fp32 roundings, relative ~1e-6) and rounded once to bf16: within one bf16
    # ulp of the exact gradient (half an ulp from the rounding, the fp32 error far below the other half).
    ulp = torch.frexp(x64.grad)[1].double().sub(8).exp2()   # spacing of bf16 at |g|: 2^(e - 8)
    assert torch.all((x.grad.cpu().double() - x64.grad).abs() <= ulp)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("name", ["var", "std"])
def test_second_derivative_flows_through_the_statistics(device, dtype, name):
    # Rows [-1, 1, -1, 1] with correction 0: mean 0, variance and std 1, exact in every dtype; the
    # Hessians 2 (I - 1/n) / n (var) and (I - 1/n) / n - d d^T / n^2 (std, d = x - mean) are multiples
    # of 1/16, exact too. A 16-bit input's backward once recomputed its statistics in fp32 outside the
    # graph under create_graph: the terms through the mean were lost ([0.668, 0, 0, 0] for var's
    # first row of the Hessian of [0, 1, 2, 3]).
    x = torch.tensor([[-1.0, 1.0, -1.0, 1.0]], dtype=dtype, device=device, requires_grad=True)
    (g,) = torch.autograd.grad(getattr(precred, name)(x, 1, correction=0).sum(), x, create_graph=True)
    got = torch.cat([torch.autograd.grad(g[0, i], x, retain_graph=True)[0] for i in range(4)])
    want = torch.autograd.functional.hessian(lambda t: getattr(torch, name)(t, 1, correction=0).sum(),
                                             x.detach().cpu().double()).reshape(4, 4)
    assert got.dtype == dtype and torch.equal(got.cpu().double(), want), (got, want)


def test_torch_compile_fullgraph_traces_the_custom_op(device):
    def f(t):
        v, m = precred.var_mean(t * 2.0, dim=1)
        return v + m + precred.std(t, dim=0).sum()

    x = _randn((4, 50), device, offset=1.0)
    compiled = torch.compile(f, fullgraph=True, backend="eager")
    assert torch.equal(compiled(x), f(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_torch_compile_traces_a_training_step(dtype, device):
    """aot_eager traces the backward with fake tensors (as inductor does for a training step): the
    16-bit backward's fp32 statistics go through their own custom op (precred::moments_fp32) --
    launched directly, they failed ("invalid python storage"). Output and gradient as eager's, bits."""
    def f(t):
        v, m = precred.var_mean(t, dim=1)
        return v * 3 + m + precred.std(t, dim=0).sum()

    x = _randn((4, 50), device, offset=1.0).to(dtype)
    assert_training_step_compiles_to_eagers_bits(f, x)
