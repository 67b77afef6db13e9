"""precred.sum / precred.mean follow torch's semantics: shapes, dims, dtypes, errors, specials, autograd."""
import math

import numpy as np
import pytest
import torch

import precred
from precred.launch import plan_for, reduce_sum
from precred.modes import get_mode
from conftest import same_bits
from test_sum_accuracy import check_within_bound

MODES = list(precred.MODES)


def _within_bound(x, dim, mode, device, mean=False):
    """The accuracy side of a semantics case: every output within the mode's bound against the exact
    oracle (test_sum_accuracy.check_within_bound, on x's own layout), dim in any of torch's spellings."""
    if dim is None or dim == ():
        dims = tuple(range(x.dim()))
    else:
        dims = tuple(sorted(d % x.dim() for d in ((dim,) if isinstance(dim, int) else dim)))
    check_within_bound(x, dims, mode, mean=mean, device=device)


def _randn(shape, device, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype).to(device)


def _close_to_torch(got, x, dim, keepdim, dtype=None, mean=False):
    ref = (torch.mean if mean else torch.sum)(x.double().cpu(), dim=dim, keepdim=keepdim)
    assert got.shape == ref.shape
    assert got.dtype == (dtype or x.dtype)
    s1 = torch.sum(x.double().cpu().abs(), dim=dim, keepdim=keepdim) if dim != () else x.double().cpu().abs()
    if mean:
        s1 = s1 / (x.numel() // max(ref.numel(), 1))
    # A sanity tolerance only (the error budgets are asserted against the oracle in test_sum_accuracy):
    # 8 units of the output's roundoff relative to sum |x|.
    tol = 8 * precred.unit_roundoff(got.dtype) * s1 + 1e-30
    assert torch.all((got.double().cpu() - ref).abs() <= tol), (got, ref)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), (-1, False), ((0, 2), False),
                                         ((2, 0), True), ((), False), ([1, 2], False)])
def test_dims_and_keepdim_match_torch(device, mode, dim, keepdim):
    x = _randn((5, 33, 17), device)
    got = precred.sum(x, dim, keepdim, mode=mode)
    _close_to_torch(got, x, dim if dim != () else None, keepdim)
    got = precred.mean(x, dim=dim, keepdim=keepdim, mode=mode)
    _close_to_torch(got, x, dim if dim != () else None, keepdim, mean=True)
    _within_bound(x, dim, mode, device)
    _within_bound(x, dim, mode, device, mean=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("mode", MODES)
def test_input_dtypes_and_output_dtype(device, dtype, mode):
    x = _randn((7, 300), device, dtype)
    if mode == "exact":   # fp64 in or out is refused, naming the limit (test_exact.py)
        for call in (lambda: precred.sum(x, 1, mode=mode, dtype=torch.float64),
                     lambda: precred.sum(x.double(), 1, mode=mode)):
            with pytest.raises(TypeError, match="exact"):
                call()
        if dtype == torch.float64:
            return
    got = precred.sum(x, 1, mode=mode)
    _close_to_torch(got, x, 1, False)
    if mode != "exact":
        got = precred.sum(x, 1, mode=mode, dtype=torch.float64)
        _close_to_torch(got, x, 1, False, dtype=torch.float64)
    got = precred.mean(x, 0, mode=mode, dtype=torch.float32)
    _close_to_torch(got, x, 0, False, dtype=torch.float32, mean=True)


def test_zero_dim_and_length_one(device):
    x = torch.tensor(3.5, device=device)
    for dim in (None, 0, -1):
        assert precred.sum(x, dim).item() == 3.5 and precred.sum(x, dim).shape == ()
    y = torch.tensor([[2.25]], device=device)
    assert precred.mean(y, 1).tolist() == [2.25]


@pytest.mark.parametrize("mode", MODES)
def test_empty_reductions_follow_torch(device, mode):
    x = torch.empty(3, 0, device=device)
    assert torch.equal(precred.sum(x, 1, mode=mode).cpu(), torch.zeros(3))
    assert torch.isnan(precred.mean(x, 1, mode=mode)).all() and precred.mean(x, 1).shape == (3,)
    assert precred.sum(x, 0, mode=mode).shape == (0,)
    assert precred.sum(x, mode=mode).item() == 0.0
    assert math.isnan(precred.mean(x, mode=mode).item())
    assert precred.sum(x, 1, keepdim=True).shape == (3, 1)


@pytest.mark.parametrize("mode", MODES)
def test_nan_and_inf_propagate_like_torch(device, mode):
    rows = torch.tensor([[1.0, float("inf"), 2.0, 3.0],
                         [1.0, float("-inf"), 2.0, 3.0],
                         [float("inf"), float("-inf"), 1.0, 0.0],
                         [float("nan"), 1.0, 2.0, 3.0],
                         [1.0, 2.0, float("inf"), float("inf")],
                         [1.0, 2.0, 3.0, 4.0]])
    got = precred.sum(rows.to(device), 1, mode=mode).cpu()
    want = torch.sum(rows, 1)
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    assert torch.equal(got[~torch.isnan(got)], want[~torch.isnan(want)])
    # Specials in a long row spread over lanes, chunks and the split merge.
    long = torch.ones(2, 5000)
    long[0, 4321] = float("inf")
    long[1, 17] = float("nan")
    got = precred.sum(long.to(device), 1, mode=mode).cpu()
    assert got[0].item() == float("inf") and math.isnan(got[1].item())
    m = get_mode(mode)
    _, plan = plan_for(long.to(device), (1,), m, tile_elements=64, sm_count=64, split_min_bytes=0)
    assert len(plan.passes) > 1
    got = reduce_sum(long.to(device), (1,), m, torch.float32, False, plan=plan).cpu()
    assert got[0].item() == float("inf") and math.isnan(got[1].item())


@pytest.mark.parametrize("mode", MODES)
def test_non_contiguous_and_expanded_inputs(device, mode):
    base = _randn((40, 64), device)
    for x, dim in [(base.t(), 1), (base.t(), 0), (base[:, ::3], 1), (base[::2, 5:], 0),
                   (base[3:4].expand(9, 64), 1), (base[:, 7:8].expand(40, 11), 1),
                   (base.reshape(40, 8, 8).permute(2, 0, 1), (0, 2)), (base.reshape(4, 10, 64), (0, 2))]:
        _close_to_torch(precred.sum(x, dim, mode=mode), x, dim, False)
        _within_bound(x, dim, mode, device)


def test_caller_tensor_is_not_modified(device):
    x = _randn((16, 1000), device)
    before = x.clone()
    precred.sum(x, 1)
    precred.mean(x.t(), 0, mode="fp64")
    assert torch.equal(x, before)


@pytest.mark.parametrize("mode", MODES)
def test_two_runs_are_bitwise_identical(device, mode):
    x = _randn((33, 5001), device, seed=3) * 1e3
    for dim in (1, 0, None):
        a, b = precred.sum(x, dim, mode=mode), precred.sum(x, dim, mode=mode)
        assert torch.equal(a, b)


def test_errors_name_the_argument(device):
    x = _randn((3, 4), device)
    with pytest.raises(TypeError, match="input"):
        precred.sum(torch.ones(3, dtype=torch.int32, device=device))
    with pytest.raises(TypeError, match="input"):
        precred.sum(torch.ones(3, dtype=torch.bool, device=device))
    with pytest.raises(TypeError, match="input"):
        precred.mean(torch.ones(3, dtype=torch.complex64, device=device))
    with pytest.raises(TypeError, match="input"):
        precred.sum(np.ones(3))
    with pytest.raises(IndexError, match="dim"):
        precred.sum(x, 2)
    with pytest.raises(IndexError, match="dim"):
        precred.sum(x, (0, -3))
    with pytest.raises(RuntimeError, match="dim"):
        precred.sum(x, (1, -1))
    with pytest.raises(TypeError, match="dim"):
        precred.sum(x, 1.0)
    with pytest.raises(ValueError, match="mode"):
        precred.sum(x, mode="exactish")
    with pytest.raises(TypeError, match="dtype"):
        precred.sum(x, dtype=torch.int64)
    with pytest.raises(TypeError, match="dtype"):
        precred.sum(x, dtype="float32")
    with pytest.raises(TypeError, match="keepdim"):
        precred.sum(x, 0, keepdim=1)


# Every op taking a dim, as (precred call, torch call), each called with one dim argument.
DIM_CALLS = {
    "sum": (precred.sum, torch.sum), "var": (precred.var, torch.var),
    "logsumexp": (precred.logsumexp, torch.logsumexp), "softmax": (precred.softmax, torch.softmax),
    "log_softmax": (precred.log_softmax, torch.log_softmax), "amax": (precred.amax, torch.amax),
    "argmax": (precred.argmax, torch.argmax), "max": (lambda x, d: precred.max(x, d).values,
                                                       lambda x, d: torch.max(x, d).values),
    "prod": (precred.prod, torch.prod),
}


@pytest.mark.parametrize("name", list(DIM_CALLS))
def test_int_like_dims_are_taken_as_torch_takes_them(device, name):
    """A NumPy integer or a one-element integer tensor as dim is that int (torch takes them through
    __index__: torch.sum(x, np.int64(1))); bools, floats and float tensors are TypeErrors naming dim.
    The int-like call returns the int call's result bit for bit, twice (the second call: the eager
    replay's key must not keep the tensor). But max: torch.max(x, tensor) is the elementwise maximum,
    so max takes no tensor there (tests/test_extrema.py::test_edge_cases_follow_torch)."""
    ours, theirs = DIM_CALLS[name]
    x = _randn((3, 5), device)
    expected = ours(x, 1)
    tensors = () if name == "max" else (torch.tensor(1), torch.tensor(-1, dtype=torch.int16))
    for like in (np.int64(1), np.int32(-1)) + tensors:
        for _ in range(2):
            got = ours(x, like)
            assert same_bits(got, expected), like
        assert got.shape == theirs(x.cpu(), like if not isinstance(like, torch.Tensor) else int(like)).shape
    bools = () if name == "var" else (True,)   # var: a bool in dim's place is unbiased, as torch.var(x, True)
    for bad in bools + (1.0, torch.tensor(1.0), torch.tensor(True), np.float64(1.0)):
        with pytest.raises(TypeError, match="dim"):
            ours(x, bad)
    if name in ("sum", "var", "logsumexp", "amax"):   # tuples of int-likes
        got = ours(x, (np.int64(0), torch.tensor(1)))
        assert torch.equal(got, ours(x, (0, 1)))


@pytest.mark.parametrize("op", [precred.sum, precred.mean])
def test_autograd_gradcheck(device, op):
    x = _randn((3, 5, 4), device, torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: op(t, (0, 2), mode="kahan"), (x,))
    assert torch.autograd.gradcheck(lambda t: op(t, 1, keepdim=True, mode="fast"), (x,))
    assert torch.autograd.gradcheck(lambda t: op(t, mode="pairwise"), (x,))


def test_gradient_of_bf16_input_has_input_dtype(device):
    x = _randn((4, 8), device, torch.bfloat16).requires_grad_()
    precred.mean(x, 1, dtype=torch.float32).sum().backward()
    assert x.grad.dtype == torch.bfloat16 and torch.all(x.grad == 0.125)


def test_torch_compile_fullgraph_traces_the_custom_op(device):
    # The eager backend: the op itself runs the kernels inside the compiled graph.
    def f(t):
        return precred.sum(t * 2.0, dim=1, mode="kahan") + precred.mean(t, dim=1)

    x = _randn((4, 50), device)
    compiled = torch.compile(f, fullgraph=True, backend="eager")
    assert torch.equal(compiled(x), f(x))


def test_torch_compile_with_arguments_that_change_between_calls(device):
    """A scalar argument that changes between calls becomes symbolic in torch.compile's recompile:
    precred's checks must trace it -- dims sorted by comparisons (dynamo sorts no symbolic keys), eps
    and correction checked by comparisons (math.isfinite of a symbolic float broke the graph). sum /
    softmax / max over changing dims, layer_norm's eps, var's correction, and a dynamic=True
    layer_norm: each call as eager's, bits."""
    x = _randn((4, 6), device)
    cases = [(lambda t, d: precred.sum(t, d), [0, 1, -1, (0, 1)]),
             (lambda t, d: precred.softmax(t, d), [0, 1]),
             (lambda t, d: precred.max(t, d).values, [0, 1]),
             (lambda t, e: precred.layer_norm(t, 6, eps=e), [1e-5, 1e-6, 1e-3]),
             (lambda t, c: precred.var(t, 1, correction=c), [1.0, 0.5, 0, 2])]
    for f, arguments in cases:
        torch._dynamo.reset()
        compiled = torch.compile(f, fullgraph=True, backend="eager")
        for a in arguments:
            assert torch.equal(compiled(x, a), f(x, a)), a
    torch._dynamo.reset()
    compiled = torch.compile(lambda t: precred.layer_norm(t, 6), fullgraph=True, backend="eager", dynamic=True)
    assert torch.equal(compiled(x), precred.layer_norm(x, 6))


SPARSE_CALLS = {
    "sum": lambda t: precred.sum(t, 1), "mean": lambda t: precred.mean(t), "var": lambda t: precred.var(t, 1),
    "logsumexp": lambda t: precred.logsumexp(t, 1), "softmax": lambda t: precred.softmax(t, 1),
    "amax": lambda t: precred.amax(t, 1), "argmax": lambda t: precred.argmax(t, 1),
    "prod": lambda t: precred.prod(t, 1), "layer_norm": lambda t: precred.layer_norm(t, [4]),
    "layer_norm weight": lambda t: precred.layer_norm(t.to_dense(), [4], t[0]),
}


@pytest.mark.parametrize("name", list(SPARSE_CALLS))
def test_sparse_input_is_rejected_by_name(name, device):
    """Sparse tensors get a TypeError naming the argument (not an error from deep inside)."""
    x = torch.randn(3, 4, device=device).to_sparse()
    with pytest.raises(TypeError, match="weight must be a dense" if "weight" in name else "input must be a dense"):
        SPARSE_CALLS[name](x)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # numpy's overflow, under the interpreter
def test_partial_sums_beyond_fp32s_range(device):
    """3e38 + 3e38 - 3e38: the fp32 modes overflow to inf on the way (documented, as torch.sum); fp64 and
    exact keep the exact sum (3e38 in fp32), and the mean of (3e38, 3e38, 1) likewise."""
    x = torch.tensor([3e38, 3e38, -3e38], device=device)
    y = torch.tensor([3e38, 3e38, 1.0], device=device)
    for mode in ("fast", "pairwise", "kahan"):
        assert precred.sum(x, mode=mode).item() == math.inf
    for mode in ("fp64", "exact"):
        assert precred.sum(x, mode=mode).item() == torch.tensor(3e38).item()
        assert precred.mean(y, mode=mode).item() == torch.tensor((2 * torch.tensor(3e38).double().item() + 1) / 3).item()
