"""`precred.var`, `std`, `var_mean`, `std_mean`: public function -> torch.library custom op -> launcher.

One custom op (`precred::moments`) returns (variance or standard deviation, mean) -- the kernel writes
both at the cost of one extra output row -- so torch.compile traces calls without graph breaks, and
one autograd formula serves all four functions.
"""
import math
import numbers
import warnings

import torch

from .. import eager
from ..checks import check_float_tensor, check_keepdim, normalize_dims, reduced_shape, through_custom_op, traced
from ..device_guard import on_input_device
from ..launch import Output, cached_recipe, reduce_moments
from ..modes import DEFAULT_VAR_MODE, get_var_mode


@on_input_device
def _moments_impl(x: torch.Tensor, dims: list[int], keepdim: bool, correction: float, mode: str,
                  take_sqrt: bool) -> tuple[torch.Tensor, torch.Tensor]:
    shape = reduced_shape(x.shape, dims, keepdim)
    n = math.prod(x.shape[d] for d in dims)
    if x.numel() == 0 or n == 0:
        # torch: an empty reduction gives NaN for the mean and the variance (0 / max(0, -correction));
        # an empty output stays empty.
        nan = torch.full(shape, math.nan, dtype=x.dtype, device=x.device)
        return nan, nan.clone()
    out, mean = reduce_moments(x, tuple(dims), get_var_mode(mode), x.dtype, correction, take_sqrt,
                               with_mean=True)
    return out.view(shape), mean.view(shape)


_moments = torch.library.custom_op("precred::moments", _moments_impl, mutates_args=())


@_moments.register_fake
def _(x, dims, keepdim, correction, mode, take_sqrt):
    shape = reduced_shape(x.shape, dims, keepdim)
    return x.new_empty(shape), x.new_empty(shape)


@on_input_device
def _moments_fp32_impl(x: torch.Tensor, dims: list[int], correction: float, mode: str,
                       take_sqrt: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(variance or standard deviation, mean) of a non-empty 16-bit x in `mode`, rounded to fp32 and
    shaped as keepdim (the backward's statistics)."""
    out, mean = reduce_moments(x, tuple(dims), get_var_mode(mode), torch.float32, correction, take_sqrt,
                               with_mean=True)
    shape = reduced_shape(x.shape, dims, True)
    return out.reshape(shape), mean.reshape(shape)


# The backward's fp32 statistics as a custom op of their own: torch.compile traces a training step's
# backward with fake tensors (AOT autograd), which a Triton launch cannot take; eager backward calls
# launch it directly.
_moments_fp32 = torch.library.custom_op("precred::moments_fp32", _moments_fp32_impl, mutates_args=())


@_moments_fp32.register_fake
def _(x, dims, correction, mode, take_sqrt):
    shape = reduced_shape(x.shape, dims, True)
    return x.new_empty(shape, dtype=torch.float32), x.new_empty(shape, dtype=torch.float32)


def _setup_context(ctx, inputs, output):
    x, dims, keepdim, correction, mode, take_sqrt = inputs
    out, mean = output
    ctx.save_for_backward(x, out, mean)
    ctx.dims, ctx.keepdim, ctx.correction, ctx.mode, ctx.take_sqrt = dims, keepdim, correction, mode, take_sqrt


def _backward(ctx, grad_out, grad_mean):
    """d var / dx = 2 (x - mean) / (n - correction); d std / dx = (x - mean) / ((n - correction) std),
    0 where std == 0 (as torch); d mean / dx = 1 / n. Evaluated in fp32 for 16-bit inputs, with the
    statistics recomputed in fp32 (the saved 16-bit mean would cost ~2^-9 of |mean| in x - mean) --
    but under create_graph, from the saved statistics, through which the second derivative flows."""
    x, out, mean = ctx.saved_tensors
    n = math.prod(x.shape[d] for d in ctx.dims)
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    kept_shape = reduced_shape(x.shape, ctx.dims, True)

    def expand(t):
        return t.reshape(kept_shape).to(compute)

    grad = torch.zeros(x.shape, dtype=compute, device=x.device)
    if grad_out is not None and x.numel() > 0:
        if x.dtype != compute and not torch.is_grad_enabled():   # 16-bit input: fp32 statistics
            # Not under create_graph: the kernel's fp32 statistics have no graph, the saved outputs
            # do (torch's way; the recomputed ones lost the second derivative's terms through them)
            fp32_moments = _moments_fp32 if traced(x) else _moments_fp32_impl
            out, mean = fp32_moments(x, ctx.dims, ctx.correction, ctx.mode, ctx.take_sqrt)
        # n - correction as it is, torch's backward: where correction > n the forward is inf (its
        # divisor is max(0, n - correction)) and this gradient finite, as torch's (std's is 0)
        scale = 2.0 * expand(grad_out) / (n - ctx.correction)
        if ctx.take_sqrt:
            std = expand(out)
            scale = (scale / (2.0 * std)).masked_fill(std == 0, 0.0)
        grad = grad + scale * (x.to(compute) - expand(mean))
    if grad_mean is not None:
        grad = grad + expand(grad_mean) / n
    return grad.to(x.dtype), None, None, None, None, None


_moments.register_autograd(_backward, setup_context=_setup_context)


def _check_correction(correction) -> float:
    if correction is None:
        return 1.0
    if isinstance(correction, bool) or not isinstance(correction, numbers.Real):
        raise TypeError(f"correction must be a real number, got {type(correction).__name__}")
    if not -math.inf < correction < math.inf:   # comparisons (NaN fails them): torch.compile may make it symbolic
        raise ValueError(f"correction must be finite, got {correction}")
    return float(correction)


def _torch_signature(dim, unbiased, correction):
    """(dim, correction) from torch.var's two signatures: (dim, unbiased, keepdim) and (dim, *,
    correction, keepdim). A bool in dim's place is `unbiased` (torch.var(x, False)); unbiased False is
    correction 0, True 1; the two together are a TypeError, as torch's."""
    if isinstance(dim, bool):
        if unbiased is not None:
            raise TypeError("unbiased given twice: a bool in dim's place is unbiased (torch.var(x, False))")
        dim, unbiased = None, dim
    if unbiased is None:
        return dim, correction
    if not isinstance(unbiased, bool):
        raise TypeError(f"unbiased must be a bool, got {type(unbiased).__name__}")
    if correction is not None:
        raise TypeError("pass unbiased or correction, not both")
    return dim, 1 if unbiased else 0


def _moments_call(x, dim, unbiased, correction, keepdim, mode, take_sqrt, name):
    dim, correction = _torch_signature(dim, unbiased, correction)
    key = eager.call_key("moments", x, dim, correction, keepdim, mode, take_sqrt)
    result = eager.replay(key, x)
    if result is not None:
        return result
    check_float_tensor(x, "input")
    get_var_mode(mode)
    check_keepdim(keepdim)
    correction = _check_correction(correction)
    dims = normalize_dims(dim, x.dim())
    n = 1
    for d in dims:   # a loop, not math.prod of a generator: dynamo traces this
        n = n * x.shape[d]
    no_degrees_of_freedom = n - correction <= 0
    if no_degrees_of_freedom:   # torch's warning; such calls are not remembered, so each one warns
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than the "
                      "reduction factor (input numel divided by output numel).", UserWarning, stacklevel=3)
    if through_custom_op(x):
        return _moments(x, list(dims), keepdim, correction, mode, take_sqrt)
    # Plain eager call: the same implementation, without the dispatcher's per-call cost.
    result = _moments_impl(x, list(dims), keepdim, correction, mode, take_sqrt)
    if not no_degrees_of_freedom:
        output = Output(correction=correction, take_sqrt=take_sqrt, with_mean=True)
        eager.remember(key, cached_recipe(x, dims, get_var_mode(mode), x.dtype, output), result[0].shape, pair=True)
    return result


def var(x: torch.Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *, correction=None,
        mode: str = DEFAULT_VAR_MODE) -> torch.Tensor:
    """Variance of `x` over `dim` (torch.var's semantics): sum (x - mean)^2 / max(0, n - correction).

    dim: None (all dims), an int or a tuple of ints; correction: a real number (None means 1), as
    torch's, or torch's older unbiased (False: correction 0; also positional, torch.var(x, dim,
    unbiased, keepdim), and in dim's place, torch.var(x, False)); keepdim as torch. The output has x's
    dtype. mode: "fp64" (default: Welford/Chan in fp64, relative error ~0.5 ulp whatever the mean's
    offset) or "fast" (fp32 Welford; contiguous fp32 rows of 256..8192 elements take the shifted
    two-pass algorithm, each row read once) -- see
    precred.VAR_MODES and precred.moments_error_bound. Never the sum(x^2) - n*mean^2 form: the
    values are shifted by the row's first element and merged by Chan's formula. Empty reductions and
    n - correction <= 0 give NaN or inf, and NaN/inf inputs give NaN, as torch. "fast" holds the sum of
    squared deviations in fp32: it overflows to inf once it passes fp32's range (deviations beyond
    ~1.8e19 -- precred.moments_error_bound is inf there), even for a std that fp32 holds; "fp64" does not.

    CUDA tensors run compiled Triton kernels; CPU tensors run the same kernels through Triton's
    interpreter (slowly).
    """
    return _moments_call(x, dim, unbiased, correction, keepdim, mode, take_sqrt=False, name="var")[0]


def std(x: torch.Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *, correction=None,
        mode: str = DEFAULT_VAR_MODE) -> torch.Tensor:
    """Standard deviation: the square root of precred.var (taken in fp64, rounded once); arguments as
    precred.var's."""
    return _moments_call(x, dim, unbiased, correction, keepdim, mode, take_sqrt=True, name="std")[0]


def var_mean(x: torch.Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *, correction=None,
             mode: str = DEFAULT_VAR_MODE) -> tuple[torch.Tensor, torch.Tensor]:
    """(variance, mean) in one pass over x, as torch.var_mean. One deliberate difference: the mean is
    torch.mean's also for rows with infinities (+inf for a row holding +inf and no -inf or NaN), where
    torch.var_mean's own Welford mean turns NaN. The variance of such rows is NaN, as torch's. Arguments
    as precred.var's."""
    return _moments_call(x, dim, unbiased, correction, keepdim, mode, take_sqrt=False, name="var_mean")


def std_mean(x: torch.Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *, correction=None,
             mode: str = DEFAULT_VAR_MODE) -> tuple[torch.Tensor, torch.Tensor]:
    """(standard deviation, mean) in one pass over x, as torch.std_mean (the mean as in var_mean)."""
    return _moments_call(x, dim, unbiased, correction, keepdim, mode, take_sqrt=True, name="std_mean")
