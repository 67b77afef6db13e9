"""`precred.prod`: public function -> torch.library custom op -> launcher.

The product runs on the sums' schedules and plans (strategies/product.py, one multiplication per element
and per merge). Its gradient is the product of the other factors, formed by exclusive cumulative
products from both ends, so zeros in the row are handled without dividing by them: torch's wherever the
row is finite. Where a row holds an inf or a NaN, torch's depends on the rest of the input: with no 0
anywhere in it, torch divides the product by each element -- NaN at an inf (inf / inf) and across a
row with a NaN --, with a 0 somewhere it takes the other factors' product as here. This one is always
the other factors' product (d/dx1 of 1 * x1 * 2 at x1 = inf is 2):
tests/test_prod.py::test_gradient_where_torch_divides.
"""
import math

import torch

from ..autocast import output_dtype
from ..checks import check_float_tensor, check_keepdim, check_out_dtype, reduced_shape, single_dim, through_custom_op
from ..device_guard import on_input_device
from ..launch import reduce_product
from ..modes import DEFAULT_PROD_MODE, get_prod_mode


@on_input_device
def _prod_impl(x: torch.Tensor, dims: list[int], keepdim: bool, out_dtype: torch.dtype, mode: str) -> torch.Tensor:
    shape = reduced_shape(x.shape, dims, keepdim)
    if x.numel() == 0 or math.prod(x.shape[d] for d in dims) == 0:
        return torch.ones(shape, dtype=out_dtype, device=x.device)   # torch: the empty product is 1
    if x.dim() == 0:
        return x.to(out_dtype).clone().reshape(shape)
    return reduce_product(x, tuple(dims), get_prod_mode(mode), out_dtype).view(shape)


_prod = torch.library.custom_op("precred::prod", _prod_impl, mutates_args=())


@_prod.register_fake
def _(x, dims, keepdim, out_dtype, mode):
    return x.new_empty(reduced_shape(x.shape, dims, keepdim), dtype=out_dtype)


def _setup_context(ctx, inputs, output):
    x, dims, keepdim, _, _ = inputs
    ctx.save_for_backward(x)
    ctx.dims, ctx.keepdim = dims, keepdim


def _others_product(x: torch.Tensor, dim: int) -> torch.Tensor:
    """prod_{j != i} x_j along dim, without division: exclusive cumulative products from both ends."""
    ones = torch.ones_like(x.narrow(dim, 0, 1))
    before = torch.cat([ones, x.narrow(dim, 0, x.shape[dim] - 1)], dim).cumprod(dim)
    after = torch.cat([x.narrow(dim, 1, x.shape[dim] - 1), ones], dim).flip(dim).cumprod(dim).flip(dim)
    return before * after


def _backward(ctx, grad):
    (x,) = ctx.saved_tensors
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    xw = x.to(wide)
    if x.dim() == 0:
        return grad.to(x.dtype), None, None, None, None
    if x.numel() == 0:   # no element to differentiate by (the empty product's gradient is empty)
        return torch.zeros_like(x), None, None, None, None
    flat = xw.movedim(ctx.dims, list(range(x.dim() - len(ctx.dims), x.dim())))
    flat = flat.reshape(*flat.shape[:x.dim() - len(ctx.dims)], -1)
    others = _others_product(flat, flat.dim() - 1)
    others = others.reshape(*flat.shape[:-1], *[x.shape[d] for d in ctx.dims])
    others = others.movedim(list(range(x.dim() - len(ctx.dims), x.dim())), ctx.dims)
    if not ctx.keepdim:
        for d in ctx.dims:
            grad = grad.unsqueeze(d)
    return (grad.to(wide) * others).to(x.dtype), None, None, None, None


_prod.register_autograd(_backward, setup_context=_setup_context)


def prod(x: torch.Tensor, dim: int | None = None, keepdim: bool = False, *, dtype: torch.dtype | None = None,
         mode: str = DEFAULT_PROD_MODE) -> torch.Tensor:
    """Product of `x` over `dim` (torch.prod's semantics: dim an int, or None for every element).

    dtype: the output dtype (default x's); unlike torch.prod, which casts x to it first, the inputs are
    never rounded to a narrower dtype: the products run in the accumulator and only the result is
    rounded to dtype (more accurate than torch's; it differs from torch's where torch's rounding shows).
    mode: "fp64" (default: fp64 products, rounded once) or "fast"
    (fp32 products for 16/32-bit inputs, fp64 for fp64) -- bound in precred.product_error_bound, valid
    while partial products stay in the accumulator's normal range; beyond it the accumulator dictates
    (overflow to +-inf, underflow to subnormals or 0; where some partial products overflow and others
    underflow, the tree's order can meet 0 * inf = NaN where torch's left-to-right product gives 0 or
    inf). The empty product is 1; 0 * inf is NaN and NaN
    propagates, as in torch. CPU tensors run the same kernels in Triton's interpreter.
    """
    check_float_tensor(x, "input")
    check_keepdim(keepdim)
    out_dtype = check_out_dtype(output_dtype("prod", x, dtype)) or x.dtype   # precred.autocast
    get_prod_mode(mode)
    if dim is None:
        dims = list(range(x.dim()))
        if keepdim:
            raise TypeError("prod: keepdim needs an int dim (torch.prod(input, dim, keepdim)), got dim=None")
    else:
        d = single_dim(dim, x.dim(), "prod: dim", "an int or None")   # an int (or int-like) in range; None is handled above
        dims = [d] if x.dim() else []
    if through_custom_op(x):
        return _prod(x, dims, keepdim, out_dtype, mode)
    return _prod_impl(x, dims, keepdim, out_dtype, mode)

