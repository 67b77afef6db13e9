"""`precred.logsumexp`, `softmax`, `log_softmax`: public function -> torch.library custom op -> launcher.

logsumexp reads the data once in every schedule: the online (max, sum of exp) state of
strategies/stable_exp.py. softmax / log_softmax read rows that fit on chip once (schedules/single_read.py),
longer contiguous rows twice in one program (schedules/row_loop.py), and otherwise run that reduction
(its result kept in fp64), then one normalizing pass (launch.plan_softmax chooses). The custom ops (`precred::logsumexp`, `precred::softmax`) let
torch.compile trace calls; their autograd formulas are torch's, evaluated in fp32 (fp64 for fp64).
"""
import math

import torch

from .. import eager
from ..autocast import output_dtype, runs_in_fp32
from ..checks import (check_float_tensor, check_keepdim, check_out_dtype, normalize_dims, reduced_shape, single_dim,
                      through_custom_op, traced)
from ..device_guard import on_input_device
from ..launch import Output, cached_recipe, reduce, reduce_logsumexp, softmax_recipe, softmax_rows
from ..modes import DEFAULT_LOGSUMEXP_MODE, get_exp_mode, logsumexp_mode, softmax_mode


@on_input_device
def _logsumexp_impl(x: torch.Tensor, dims: list[int], keepdim: bool, mode: str) -> torch.Tensor:
    shape = reduced_shape(x.shape, dims, keepdim)
    n = math.prod(x.shape[d] for d in dims)
    if x.numel() == 0 or n == 0:
        # torch: log of an empty sum is log(0) = -inf; an empty output stays empty.
        return torch.full(shape, -math.inf, dtype=x.dtype, device=x.device)
    return reduce_logsumexp(x, tuple(dims), logsumexp_mode(mode, x.dtype)).view(shape)


_logsumexp = torch.library.custom_op("precred::logsumexp", _logsumexp_impl, mutates_args=())


@_logsumexp.register_fake
def _(x, dims, keepdim, mode):
    return x.new_empty(reduced_shape(x.shape, dims, keepdim))


@on_input_device
def _logsumexp_fp32_impl(x: torch.Tensor, dims: list[int], keepdim: bool, mode: str) -> torch.Tensor:
    """logsumexp of a non-empty 16-bit x in `mode`, rounded to fp32 (the backward's exp(x - lse))."""
    return reduce(x, tuple(dims), get_exp_mode(mode), torch.float32, Output())[0].view(
        reduced_shape(x.shape, dims, keepdim))


# The backward's fp32 logsumexp as a custom op of its own: torch.compile traces a training step's
# backward with fake tensors (AOT autograd), which a Triton launch cannot take; eager backward calls
# launch it directly.
_logsumexp_fp32 = torch.library.custom_op("precred::logsumexp_fp32", _logsumexp_fp32_impl, mutates_args=())


@_logsumexp_fp32.register_fake
def _(x, dims, keepdim, mode):
    return x.new_empty(reduced_shape(x.shape, dims, keepdim), dtype=torch.float32)


def _setup_context(ctx, inputs, output):
    x, dims, keepdim, mode = inputs
    ctx.save_for_backward(x, output)
    ctx.dims = dims
    ctx.keepdim = keepdim
    ctx.mode = mode


def _backward(ctx, grad):
    x, result = ctx.saved_tensors
    if x.dtype in (torch.bfloat16, torch.float16) and x.numel() > 0 and not torch.is_grad_enabled():
        # exp(x - lse) from the 16-bit result would be off by a factor exp(|lse| 2^-9) (about 7 at
        # lse = 1000, torch's own bf16 backward): the result again, rounded to fp32 this time. Not
        # under create_graph: the kernel's result has no graph, the saved output does (torch's way)
        fp32_logsumexp = _logsumexp_fp32 if traced(x) else _logsumexp_fp32_impl
        result = fp32_logsumexp(x, ctx.dims, ctx.keepdim, ctx.mode)
    if not ctx.keepdim:
        for d in ctx.dims:
            grad = grad.unsqueeze(d)
            result = result.unsqueeze(d)
    # torch's formula (all -inf rows give NaN gradients there too); 16-bit inputs in fp32, from an fp32
    # logsumexp.
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    g = grad.to(wide) * (x.to(wide) - result.to(wide)).exp()
    return g.to(x.dtype), None, None, None


_logsumexp.register_autograd(_backward, setup_context=_setup_context)


def logsumexp(x: torch.Tensor, dim, keepdim: bool = False, *, mode: str = DEFAULT_LOGSUMEXP_MODE) -> torch.Tensor:
    """log(sum(exp(x))) over `dim` (torch.logsumexp's semantics), reading the data once.

    dim: an int or a tuple of ints (required, as torch's; an empty tuple means every dim); keepdim as
    torch. The output has x's dtype; bf16/fp16 inputs are computed in fp32 or fp64. Rows of -inf give
    -inf, a +inf gives +inf, a NaN gives NaN; an empty reduction gives -inf. mode: "accurate" (default:
    within 2 ulp, or the fp64 mode's ~1e-14 absolute bound where that is larger: results within ~1e-7
    of 0), "fp64" (exp and sum in fp64, about 0.5 ulp) or "fast" (fp32, the GPU's approximate
    exp) -- bounds in precred.logsumexp_error_bound. "accurate" over contiguous fp32 rows (dim=-1 of a
    contiguous tensor; few long rows are split across programs) or a strided axis of 1024 or more
    under a contiguous one of 128 or more (dim=0 of a matrix) takes fp32 exponentials of exact gaps
    summed in fp64 and keeps each result whose own error bound proves it within 2 ulp, recomputing the
    others (results near 0, where an ulp is tiny) in fp64; everywhere else it is the "fp64" mode. On
    bf16 / fp16 input "fp64" first runs the fp32 pass and keeps the outputs whose rounding its error
    bound certifies (those are correctly rounded), recomputing the others in fp64.
    Gradient: softmax(x) in fp32 (fp64 for fp64 input); for bf16 / fp16 input from the
    logsumexp computed again, rounded to fp32 instead of the input's format (one more read of x): from
    the 16-bit result, exp would be off by up to a factor exp(|lse| 2^-9) (with create_graph=True it is
    formed from that result, as torch's, so that it can be differentiated again). CPU tensors run the
    same kernels in Triton's interpreter.
    """
    if runs_in_fp32("logsumexp", x):   # torch.autocast's cast to fp32 (precred.autocast)
        x = x.float()
    key = eager.call_key("logsumexp", x, dim, keepdim, mode)
    result = eager.replay(key, x)
    if result is not None:
        return result
    check_float_tensor(x, "input")
    if dim is None:
        raise TypeError("logsumexp: dim must be an int or a tuple of ints (torch requires it), got None")
    get_exp_mode(mode)
    check_keepdim(keepdim)
    dims = list(normalize_dims(dim, x.dim()))
    if through_custom_op(x):
        return _logsumexp(x, dims, keepdim, mode)
    result = _logsumexp_impl(x, dims, keepdim, mode)
    eager.remember(key, cached_recipe(x, tuple(dims), logsumexp_mode(mode, x.dtype), x.dtype, Output()), result.shape)
    return result


@on_input_device
def _softmax_impl(x: torch.Tensor, dim: int, out_dtype: torch.dtype, mode: str, log: bool) -> torch.Tensor:
    if x.numel() == 0:
        return torch.empty(x.shape, dtype=out_dtype, device=x.device)
    if x.dim() == 0:   # torch: the softmax of a scalar is 1, its log_softmax 0 (NaN / inf propagate)
        return _softmax_impl(x.reshape(1), 0, out_dtype, mode, log).reshape(())
    return softmax_rows(x, dim, get_exp_mode(mode), out_dtype, log)


_softmax = torch.library.custom_op("precred::softmax", _softmax_impl, mutates_args=())


@_softmax.register_fake
def _(x, dim, out_dtype, mode, log):
    return x.new_empty(x.shape, dtype=out_dtype)


def _softmax_setup_context(ctx, inputs, output):
    x, dim, _, _, log = inputs
    ctx.save_for_backward(output)
    ctx.dim, ctx.log, ctx.input_dtype = dim, log, x.dtype


def _softmax_backward(ctx, grad):
    (y,) = ctx.saved_tensors
    wide = torch.float64 if torch.float64 in (y.dtype, ctx.input_dtype) else torch.float32
    g, y = grad.to(wide), y.to(wide)
    if ctx.log:      # d log_softmax: g - softmax * sum(g)
        gx = g - y.exp() * g.sum(ctx.dim, keepdim=True)
    else:            # d softmax: y * (g - sum(g * y))
        gx = y * (g - (g * y).sum(ctx.dim, keepdim=True))
    return gx.to(ctx.input_dtype), None, None, None, None


_softmax.register_autograd(_softmax_backward, setup_context=_softmax_setup_context)


def _softmax_call(x, dim, dtype, mode, log: bool):
    op = "log_softmax" if log else "softmax"
    dtype = output_dtype(op, x, dtype)   # precred.autocast: fp32 where it runs op in fp32, else the call's
    key = eager.call_key(op, x, dim, dtype, mode)
    result = eager.replay(key, x)
    if result is not None:
        return result
    check_float_tensor(x, "input")
    d = single_dim(dim, x.dim())
    out_dtype = check_out_dtype(dtype) or x.dtype
    mode = softmax_mode(mode, out_dtype, log)
    if through_custom_op(x):
        return _softmax(x, d, out_dtype, mode, log)
    result = _softmax_impl(x, d, out_dtype, mode, log)
    eager.remember_run(key, softmax_recipe(x, d, get_exp_mode(mode), out_dtype, log))
    return result


def softmax(x: torch.Tensor, dim: int, dtype: torch.dtype | None = None, *,
            mode: str | None = None) -> torch.Tensor:
    """exp(x - logsumexp(x, dim)) along `dim` (torch.softmax's semantics; the output is contiguous).

    dtype: the output dtype (default x's; positional too, as torch.softmax's); the computation runs in
    the mode's accumulator (fp64 for "fp64"; fp32 for "fast", fp64 when x or dtype is fp64) on x's own
    values: where torch casts x to a narrower dtype first (an fp32 70000 becomes fp16's inf, and its row
    NaN), precred rounds only the output, as precred.sum with dtype. mode None
    (the default): "fp64" into fp32 / fp64 outputs (about 0.5 ulp), "fast" into bf16 / fp16 ones, where
    its bound is at most 1/16 ulp above fp64's plus 2^-124: within 2 ulp (precred.modes.softmax_mode;
    the bound: precred.softmax_error_bound).
    Rows holding +inf, NaN, or only -inf give NaN, as torch. Rows that fit on chip are read once (schedules/single_read.py); longer
    contiguous rows, where there are enough of them, twice by one program (schedules/row_loop.py);
    otherwise the row's max m and log(s) come from precred.logsumexp's one-pass reduction, kept in fp64,
    then one pass reads x again and writes the output. CPU tensors run in Triton's interpreter.
    """
    return _softmax_call(x, dim, dtype, mode, log=False)


def log_softmax(x: torch.Tensor, dim: int, dtype: torch.dtype | None = None, *,
                mode: str | None = None) -> torch.Tensor:
    """x - logsumexp(x, dim) along `dim` (torch.log_softmax's semantics); arguments as precred.softmax.
    mode None (the default): "fp64" into fp32 / fp64 outputs, "accurate" into bf16 / fp16 ones
    (precred.modes.softmax_mode). "accurate", through the single-read and row-loop kernels, keeps the
    sum of the terms below the maximum apart (in fp32 into 16 bits, else fp64), so y = (x - m) -
    log1p(tail) keeps its relative error next to y = 0 -- where fast's fp32 sum (and torch's) rounds the
    tail away and fp64's once it is below 2^-53 -- within 1.01 ulp (precred.softmax_error_bound;
    precred.modes.log_softmax_split_tail); on the two-pass path the fp64 reduction, then a kernel that
    reads again only rows with s < 1.5 for their tail (schedules/split_tail.py).

    The gradient, as torch's, is formed from the output alone (g - exp(y) sum(g), in fp32): for a
    16-bit output exp(y) then carries a relative error up to about |y| 2^-9 (|y| 2^-12 for fp16), more
    than the output's own rounding where |y| > 1."""
    return _softmax_call(x, dim, dtype, mode, log=True)
