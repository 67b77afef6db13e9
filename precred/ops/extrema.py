"""`precred.amax`, `amin`, `max`, `min`, `argmax`, `argmin`: public function -> custom op -> launcher.

max / min along a dim and argmax / argmin are one strategy (strategies/extremum.py: the value and its
first index under a total order in which NaN is largest and ties go to the smaller index); amax / amin
(and max / min over every dim) keep the value alone (strategies/extremum_value.py: IEEE 754-2019's
maximum / minimum, a NaN anywhere wins, +0.0 > -0.0), which takes half the registers. Both are exact
and bitwise the same on every schedule and device. Values come back in the input dtype, indices as
int64 along the reduced dim (the flattened row-major index when argmax/argmin reduce every dim, as
torch).

The custom ops (`precred::extremum_values`, `precred::extremum_with_index`) let torch.compile trace
calls. Gradients are torch's: amax/amin share the upstream gradient evenly among the elements equal to
the result; max/min(dim) send it to the element at the returned index.
"""
import torch

from .. import eager
from ..checks import check_float_tensor, check_keepdim, normalize_dims, reduced_shape, single_dim, through_custom_op
from ..device_guard import on_input_device
from ..launch import Output, cached_recipe, reduce_extremum
from ..modes import MAXIMUM_MODE, MAXIMUM_VALUE_MODE, MINIMUM_MODE, MINIMUM_VALUE_MODE


def _check_reducible(x: torch.Tensor, dims, op: str) -> None:
    """torch's rule: an extremum of no elements has no identity, so a reduced dim of size 0 is an error."""
    for d in dims:
        if x.shape[d] == 0:
            raise IndexError(f"{op}(): Expected reduction dim {d} to have non-zero size.")


def _mode(minimum: bool, with_index: bool):
    if with_index:
        return MINIMUM_MODE if minimum else MAXIMUM_MODE
    return MINIMUM_VALUE_MODE if minimum else MAXIMUM_VALUE_MODE


def _extremum(x: torch.Tensor, dims: list[int], keepdim: bool, minimum: bool, with_index: bool):
    """(values, indices or None) in the reduced shape; dims non-empty unless x is 0-d."""
    shape = reduced_shape(x.shape, dims, keepdim)
    if x.dim() == 0 or x.numel() == 0:   # a scalar is its own extremum; an empty output stays empty
        # (contiguous, as the fake's and torch's: a clone would keep an empty input's strides)
        values = x.clone().reshape(shape) if x.dim() == 0 else torch.empty(shape, dtype=x.dtype, device=x.device)
        return values, (torch.zeros(shape, dtype=torch.int64, device=x.device) if with_index else None)
    values, index = reduce_extremum(x, tuple(dims), _mode(minimum, with_index), with_index)
    return values.view(shape), (index.view(shape) if with_index else None)


@on_input_device
def _values_impl(x: torch.Tensor, dims: list[int], keepdim: bool, minimum: bool,
                 nan_takes_gradient: bool) -> torch.Tensor:
    """nan_takes_gradient: the backward's (_values_backward); the values do not depend on it."""
    return _extremum(x, dims, keepdim, minimum, with_index=False)[0]


@on_input_device
def _with_index_impl(x: torch.Tensor, dim: int, keepdim: bool, minimum: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return _extremum(x, [dim] if x.dim() else [], keepdim, minimum, with_index=True)


_values = torch.library.custom_op("precred::extremum_values", _values_impl, mutates_args=())
_with_index = torch.library.custom_op("precred::extremum_with_index", _with_index_impl, mutates_args=())


@_values.register_fake
def _(x, dims, keepdim, minimum, nan_takes_gradient):
    return x.new_empty(reduced_shape(x.shape, dims, keepdim))


@_with_index.register_fake
def _(x, dim, keepdim, minimum):
    shape = reduced_shape(x.shape, [dim] if x.dim() else [], keepdim)
    return x.new_empty(shape), x.new_empty(shape, dtype=torch.int64)


def _unsqueeze(t: torch.Tensor, dims, keepdim: bool) -> torch.Tensor:
    if not keepdim:
        for d in sorted(dims):
            t = t.unsqueeze(d)
    return t


def _values_setup(ctx, inputs, output):
    x, dims, keepdim, _, nan_takes_gradient = inputs
    ctx.save_for_backward(x, output)
    ctx.dims, ctx.keepdim, ctx.nan_takes_gradient = dims, keepdim, nan_takes_gradient


def _values_backward(ctx, grad):
    """torch's: the gradient spread evenly over the elements equal to the result -- for amax / amin
    (amax_backward), none where the result is NaN, so NaN everywhere; for max(x) / min(x)
    (nan_takes_gradient: evenly_distribute_backward), the NaN elements where the result is NaN."""
    x, result = ctx.saved_tensors
    grad = _unsqueeze(grad, ctx.dims, ctx.keepdim)
    result = _unsqueeze(result, ctx.dims, ctx.keepdim)
    hits = x == result
    if ctx.nan_takes_gradient:
        hits = hits | (x.isnan() & result.isnan())
    hits = hits.to(grad.dtype)
    dims = ctx.dims if ctx.dims else None
    return hits * grad / hits.sum(dim=dims, keepdim=True), None, None, None, None


def _with_index_setup(ctx, inputs, output):
    x, dim, keepdim, _ = inputs
    ctx.save_for_backward(output[1])
    ctx.shape, ctx.dtype, ctx.dim, ctx.keepdim = x.shape, x.dtype, dim, keepdim


def _with_index_backward(ctx, grad_values, grad_index):
    (index,) = ctx.saved_tensors
    if len(ctx.shape) == 0:
        return grad_values.to(ctx.dtype), None, None, None
    grad = _unsqueeze(grad_values, [ctx.dim], ctx.keepdim)
    index = _unsqueeze(index, [ctx.dim], ctx.keepdim)
    out = torch.zeros(ctx.shape, dtype=ctx.dtype, device=grad.device)
    return out.scatter(ctx.dim, index, grad.to(ctx.dtype)), None, None, None


_values.register_autograd(_values_backward, setup_context=_values_setup)
_with_index.register_autograd(_with_index_backward, setup_context=_with_index_setup)


def _amax_call(x, dim, keepdim, minimum: bool, op: str) -> torch.Tensor:
    key = eager.call_key(op, x, dim, keepdim, minimum)
    result = eager.replay(key, x)
    if result is not None:
        return result
    check_float_tensor(x, "input")
    check_keepdim(keepdim)
    dims = list(normalize_dims(dim, x.dim()))
    if x.numel() == 0 and (dim is None or (isinstance(dim, (tuple, list)) and not dim)):   # torch's, for no dim
        raise RuntimeError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                           "reduction dim with the 'dim' argument.")
    _check_reducible(x, dims, op)
    nan_takes_gradient = op in ("max", "min")   # max(x) / min(x): torch's evenly_distribute_backward
    if through_custom_op(x):
        return _values(x, dims, keepdim, minimum, nan_takes_gradient)
    result = _values_impl(x, dims, keepdim, minimum, nan_takes_gradient)
    _remember(key, x, dims, minimum, False, (result,))
    return result


def _with_index_call(x, dim, keepdim, minimum: bool, op: str):
    key = eager.call_key(op + "(dim)", x, dim, keepdim, minimum)
    result = eager.replay(key, x)
    if result is not None:
        return result
    check_float_tensor(x, "input")
    check_keepdim(keepdim)
    d = single_dim(dim, x.dim())
    _check_reducible(x, [d] if x.dim() else [], op)
    if through_custom_op(x):
        return _with_index(x, d, keepdim, minimum)
    result = _with_index_impl(x, d, keepdim, minimum)
    _remember(key, x, [d] if x.dim() else [], minimum, True, result)
    return result


def _remember(key, x, dims, minimum: bool, with_index: bool, result) -> None:
    """Let eager.replay repeat this call (the recipe `reduce` left; none for scalars, empty or atomic)."""
    shape = result[0].shape
    recipe = cached_recipe(x, tuple(dims), _mode(minimum, with_index), x.dtype, Output(with_mean=with_index))
    eager.remember(key, recipe, shape, pair=with_index)


def _arg_call(x, dim, keepdim, minimum: bool, op: str) -> torch.Tensor:
    check_float_tensor(x, "input")
    check_keepdim(keepdim)
    if dim is None:   # torch: the index into the flattened (row-major) tensor
        if x.numel() == 0:
            raise IndexError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0.")
        index = _with_index_call(x.reshape(-1), 0, False, minimum, op)[1]
        return index.reshape([1] * x.dim()) if keepdim else index
    return _with_index_call(x, dim, keepdim, minimum, op)[1]


def amax(x: torch.Tensor, dim=(), keepdim: bool = False) -> torch.Tensor:
    """The largest element over `dim` (torch.amax's semantics): dim an int or tuple of ints, () or None
    for every dim; a NaN anywhere gives NaN; a reduced dim of size 0 is an IndexError, and no dim on
    an empty tensor a RuntimeError (as torch). Exact (no rounding). Between zeros, +0.0 is the larger
    (IEEE 754-2019's maximum: the result does not depend on the elements' order, where torch's sign of
    a zero does); amin returns -0.0 over +0.0. CPU tensors run the same kernels in Triton's
    interpreter."""
    return _amax_call(x, dim, keepdim, minimum=False, op="amax")


def amin(x: torch.Tensor, dim=(), keepdim: bool = False) -> torch.Tensor:
    """The smallest element over `dim`; as precred.amax."""
    return _amax_call(x, dim, keepdim, minimum=True, op="amin")


def max(x: torch.Tensor, dim=None, keepdim: bool | None = None):  # noqa: A001 -- mirrors torch.max
    """torch.max's reductions: `max(x)` is amax over every dim (a 0-d tensor; keepdim without a dim is a
    TypeError, as torch's -- precred.amax(x, keepdim=True) keeps the dims); `max(x, dim)` returns
    torch.return_types.max(values, indices), the index being the first occurrence of the maximum along
    dim (a NaN is the maximum when present). dim is an int: a tensor there is a TypeError, as torch
    reads a tensor in that place as `other` (torch.max(x, other): the elementwise maximum, not a
    reduction precred computes)."""
    if dim is None:
        _check_no_keepdim(keepdim, "max", "amax")
        return _amax_call(x, None, False, minimum=False, op="max")
    _check_not_other(dim, "max", "maximum")
    keepdim = False if keepdim is None else keepdim
    return torch.return_types.max(_with_index_call(x, dim, keepdim, minimum=False, op="max"))


def min(x: torch.Tensor, dim=None, keepdim: bool | None = None):  # noqa: A001 -- mirrors torch.min
    """torch.min's reductions; as precred.max."""
    if dim is None:
        _check_no_keepdim(keepdim, "min", "amin")
        return _amax_call(x, None, False, minimum=True, op="min")
    _check_not_other(dim, "min", "minimum")
    keepdim = False if keepdim is None else keepdim
    return torch.return_types.min(_with_index_call(x, dim, keepdim, minimum=True, op="min"))


def _check_no_keepdim(keepdim, op: str, kept: str) -> None:
    """torch.max(x) / torch.min(x) take no keepdim (torch has no such overload: a TypeError, False or True);
    precred would otherwise have to pick a meaning for it."""
    if keepdim is not None:
        raise TypeError(f"{op}(): keepdim needs a dim: {op}(x) reduces every element to a 0-d tensor, as "
                        f"torch.{op}; precred.{kept}(x, keepdim=True) keeps x's dims as size 1")


def _check_not_other(dim, op: str, elementwise: str) -> None:
    """torch.max / torch.min read a tensor as their second argument as `other` -- the elementwise
    extremum of two tensors, torch.maximum / torch.minimum -- so a one-element integer tensor there is not
    a dim as it is for the other reductions (checks.as_int_dim): refused, rather than reduced along it."""
    if isinstance(dim, torch.Tensor):
        raise TypeError(f"{op}(): dim must be an int, got a tensor; torch.{op}(input, other) with a tensor "
                        f"is the elementwise {elementwise} (torch.{elementwise}), which precred does not compute")


def argmax(x: torch.Tensor, dim=None, keepdim: bool = False) -> torch.Tensor:
    """The index of the first maximum (torch.argmax's semantics): along dim, or into the flattened tensor
    when dim is None. int64, not differentiable."""
    return _arg_call(x, dim, keepdim, minimum=False, op="argmax")


def argmin(x: torch.Tensor, dim=None, keepdim: bool = False) -> torch.Tensor:
    """The index of the first minimum; as precred.argmax."""
    return _arg_call(x, dim, keepdim, minimum=True, op="argmin")
