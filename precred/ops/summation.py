"""`precred.sum` and `precred.mean`: public function -> torch.library custom op -> launcher.

The custom op (`precred::sum_reduce`) lets torch.compile trace calls without graph breaks; its
autograd formula is registered with it (the gradient of a sum is the broadcast upstream gradient,
exact; a mean's is that divided by n, rounded once).
"""
import math

import torch

from .. import eager
from ..autocast import output_dtype
from ..checks import (check_float_tensor, check_keepdim, check_out_dtype, normalize_dims, reduced_shape,
                      through_custom_op)
from ..device_guard import on_input_device
from ..launch import Output, cached_recipe, reduce_sum
from ..modes import DEFAULT_MODE, EXACT_DTYPES, get_mode, sum_mode
from ..strategies.superaccumulator import MAX_COUNT


@on_input_device
def _sum_reduce_impl(x: torch.Tensor, dims: list[int], keepdim: bool, out_dtype: torch.dtype, mode: str,
                     divide: bool) -> torch.Tensor:
    shape = reduced_shape(x.shape, dims, keepdim)
    n = math.prod(x.shape[d] for d in dims)
    if x.numel() == 0 or n == 0:
        # torch: the empty sum is 0 and the empty mean is NaN (0/0); an empty output stays empty.
        fill = math.nan if divide else 0.0
        return torch.full(shape, fill, dtype=out_dtype, device=x.device)
    flat = reduce_sum(x, tuple(dims), sum_mode(mode, x.dtype, out_dtype), out_dtype, divide)
    return flat.view(shape)


_sum_reduce = torch.library.custom_op("precred::sum_reduce", _sum_reduce_impl, mutates_args=())


@_sum_reduce.register_fake
def _(x, dims, keepdim, out_dtype, mode, divide):
    return x.new_empty(reduced_shape(x.shape, dims, keepdim), dtype=out_dtype)


def _setup_context(ctx, inputs, output):
    x, dims, keepdim, _, _, divide = inputs
    ctx.input_shape = x.shape
    ctx.input_dtype = x.dtype
    ctx.dims = dims
    ctx.keepdim = keepdim
    ctx.count = math.prod(x.shape[d] for d in dims) if divide else None


def _backward(ctx, grad):
    if not ctx.keepdim:
        for d in ctx.dims:
            grad = grad.unsqueeze(d)
    grad = grad.expand(ctx.input_shape)
    if ctx.count is not None:
        grad = grad / ctx.count
    return grad.to(ctx.input_dtype), None, None, None, None, None


_sum_reduce.register_autograd(_backward, setup_context=_setup_context)


def _reduce(x, dim, keepdim, dtype, mode, divide: bool):
    key = eager.call_key("sum", x, dim, keepdim, dtype, mode, divide)
    result = eager.replay(key, x)
    if result is not None:
        return result
    check_float_tensor(x, "input")
    get_mode(mode)
    check_keepdim(keepdim)
    out_dtype = check_out_dtype(dtype) or x.dtype
    dims = normalize_dims(dim, x.dim())
    if mode == "exact":
        _check_exact(x, dims, out_dtype)
    if through_custom_op(x):
        return _sum_reduce(x, list(dims), keepdim, out_dtype, mode, divide)
    # Plain eager call: the same implementation, without the dispatcher's per-call cost.
    result = _sum_reduce_impl(x, list(dims), keepdim, out_dtype, mode, divide)
    eager.remember(key, cached_recipe(x, dims, sum_mode(mode, x.dtype, out_dtype), out_dtype, Output(divide=divide)),
                   result.shape)
    return result


def _check_exact(x, dims, out_dtype):
    names = "float32, bfloat16 and float16"
    if x.dtype not in EXACT_DTYPES:
        raise TypeError(f"mode='exact' takes {names} inputs (its integer superaccumulator spans their "
                        f"exponent range; float64's would need 81 limbs), got input of dtype {x.dtype}")
    if out_dtype not in EXACT_DTYPES:
        raise TypeError(f"mode='exact' rounds to {names}; got dtype={out_dtype}")
    n = 1
    for d in dims:   # a plain loop: dynamo traces it (not a generator handed to math.prod)
        n *= x.shape[d]
    if n > MAX_COUNT:
        raise ValueError(f"mode='exact' sums at most 2^37 elements per output (its int64 limbs), got {n}")


def sum(x: torch.Tensor, dim=None, keepdim: bool = False, *, dtype: torch.dtype | None = None,  # noqa: A001
        mode: str = DEFAULT_MODE) -> torch.Tensor:
    """Sum of `x` over `dim` with a chosen, bounded precision (torch.sum's semantics).

    dim: None (all dims), an int, or a tuple of ints; keepdim as torch. dtype: the output dtype
    (default x.dtype; float dtypes only); like torch, the sum is accumulated in at least its precision,
    but the inputs are never rounded to a narrower dtype first. mode: "fast", "pairwise", "kahan"
    (default), "fp64", "exact" -- see precred.MODES and precred.error_bound for what each guarantees.
    "exact" returns the exact sum rounded once (to nearest, ties to even): the same bits on every device,
    plan and batch size; it takes fp32/bf16/fp16 inputs and outputs and up to 2^37 elements per output. bf16/fp16 inputs always accumulate in
    at least fp32; "kahan" sums them in fp64 (unless the output is fp64: precred.modes.sum_mode), which
    meets its bound and is the faster route there. Empty reductions give 0; NaN and inf propagate as in
    torch. The fp32 modes (fast, pairwise, kahan on fp32 input) overflow to +-inf where a partial sum
    leaves fp32's range, even if the exact sum is representable (as torch.sum); fp64 and exact do not
    on fp32 and 16-bit input, nor kahan on 16-bit input.

    CUDA tensors run compiled Triton kernels. CPU tensors run the same kernels through Triton's
    interpreter (TRITON_INTERPRET=1, set automatically on import when no GPU is present): the same
    numerics, slowly.
    """
    return _reduce(x, dim, keepdim, output_dtype("sum", x, dtype), mode, divide=False)   # precred.autocast


def mean(x: torch.Tensor, dim=None, keepdim: bool = False, *, dtype: torch.dtype | None = None,
         mode: str = DEFAULT_MODE) -> torch.Tensor:
    """Mean of `x` over `dim`: the sum in `mode`, divided by the count in fp64, rounded to the output
    dtype (once for fp32 / fp64 outputs; 16-bit outputs through fp32, as precred.bounds counts; "exact":
    the exact mean, rounded once). Same arguments as precred.sum; an empty
    reduction gives NaN, as torch.mean."""
    return _reduce(x, dim, keepdim, dtype, mode, divide=True)

