"""`precred.layer_norm`, `rms_norm`: public function -> torch.library custom op -> launcher.

One custom op (`precred::norm`) serves both (the `rms` flag) and returns (y, mean, rstd): the per-row
statistics in fp64, which the backward pass reuses instead of recomputing them (they are
non-differentiable outputs; the public functions return y alone). The backward is precred's own
kernels (precred/norm_launch.py): dx per row, dw / db as per-program partials merged in a fixed order.
"""
import math
import numbers
from typing import Optional

import torch

from ..autocast import fp32_if_sixteen_bit, runs_in_fp32
from ..checks import check_float_tensor, through_custom_op, traced
from ..device_guard import on_input_device
from ..modes import DEFAULT_NORM_MODE, get_norm_mode
from ..norm_launch import NormStats, norm_backward, norm_forward
from ..signature_cache import keep


def _rows(x: torch.Tensor, normalized_ndim: int) -> tuple[int, int]:
    n = math.prod(x.shape[x.dim() - normalized_ndim:])
    return (x.numel() // n if n else 0), n


@on_input_device
def _norm_forward(x: torch.Tensor, normalized_ndim: int, weight: Optional[torch.Tensor], bias: Optional[torch.Tensor],
                  eps: float, rms: bool, mode: str, keep_stats: bool) -> tuple[torch.Tensor, Optional[NormStats]]:
    """(y, the per-row statistics, or None when not keep_stats: calls that autograd does not record)."""
    rows, n = _rows(x, normalized_ndim)
    if x.numel() == 0:
        stat = torch.empty(rows, dtype=torch.float64, device=x.device)
        return torch.empty(x.shape, dtype=x.dtype, device=x.device), NormStats(stat, stat.clone())
    return norm_forward(x.contiguous(), rows, n, _contiguous(weight), _contiguous(bias), eps, rms, get_norm_mode(mode),
                        x.dtype, keep_stats=keep_stats)


def _norm_impl(x: torch.Tensor, normalized_ndim: int, weight: Optional[torch.Tensor], bias: Optional[torch.Tensor],
               eps: float, rms: bool, mode: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    y, stats = _norm_forward(x, normalized_ndim, weight, bias, eps, rms, mode, keep_stats=True)
    return y, stats.mean, stats.rstd


def _contiguous(t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    return t.contiguous() if t is not None else None


_norm = torch.library.custom_op("precred::norm", _norm_impl, mutates_args=())


@_norm.register_fake
def _(x, normalized_ndim, weight, bias, eps, rms, mode):
    rows, _ = _rows(x, normalized_ndim)
    stat = x.new_empty((rows,), dtype=torch.float64)
    return x.new_empty(x.shape), stat, stat.clone()


def _setup_context(ctx, inputs, output):
    x, normalized_ndim, weight, bias, eps, rms, mode = inputs
    _, mean, rstd = output
    ctx.save_for_backward(x, weight, mean, rstd)
    ctx.normalized_ndim, ctx.rms, ctx.mode, ctx.eps = normalized_ndim, rms, mode, eps
    ctx.bias_dtype = bias.dtype if bias is not None else None
    ctx.mark_non_differentiable(mean, rstd)
    # The statistics' gradients stay None instead of zero tensors: an allocation and a fill each, host
    # time on the autograd thread that a mid-sized norm's backward feels.
    ctx.set_materialize_grads(False)


@on_input_device
def _backward_kernels(grad_y: torch.Tensor, x: torch.Tensor, weight: Optional[torch.Tensor], mean: torch.Tensor,
                      rstd: torch.Tensor, normalized_ndim: int, rms: bool, mode: str,
                      weight_grad_dtype: Optional[torch.dtype],
                      bias_grad_dtype: Optional[torch.dtype]) -> list[torch.Tensor]:
    """[dx] + [dweight] where weight_grad_dtype is given + [dbias] where bias_grad_dtype is: precred's
    backward kernels (norm_launch.norm_backward) on a non-empty x."""
    rows, n = _rows(x, normalized_ndim)
    dx, dw, db = norm_backward(grad_y.contiguous(), x.contiguous(), rows, n, _contiguous(weight),
                               NormStats(mean, rstd), rms, get_norm_mode(mode), x.shape[x.dim() - normalized_ndim:],
                               weight_grad_dtype, bias_grad_dtype)
    return [t for t in (dx, dw, db) if t is not None]


# The backward kernels as a custom op of their own: torch.compile traces a training step's backward
# with fake tensors (AOT autograd), which a Triton launch cannot take ("invalid python storage"); eager
# backward calls launch them directly, without the dispatcher's host time.
_norm_backward_op = torch.library.custom_op("precred::norm_backward", _backward_kernels, mutates_args=())


@_norm_backward_op.register_fake
def _(grad_y, x, weight, mean, rstd, normalized_ndim, rms, mode, weight_grad_dtype, bias_grad_dtype):
    shape = x.shape[x.dim() - normalized_ndim:]
    return [x.new_empty(x.shape)] + [x.new_empty(shape, dtype=d) for d in (weight_grad_dtype, bias_grad_dtype)
                                     if d is not None]


def _backward(ctx, grad_y, _grad_mean, _grad_rstd):
    """The gradients of precred::norm (x, weight, bias; None for the others): the backward kernels,
    through the custom op precred::norm_backward while torch.compile traces the backward."""
    if grad_y is None:   # y took no part in what is differentiated (grads are not materialized)
        return None, None, None, None, None, None, None
    x, weight, mean, rstd = ctx.saved_tensors
    if torch.is_grad_enabled():   # create_graph: the gradient must itself be differentiable
        return _differentiable_backward(ctx, grad_y, x, weight)
    weight_dtype = weight.dtype if weight is not None and ctx.needs_input_grad[2] else None
    bias_dtype = ctx.bias_dtype if ctx.needs_input_grad[3] else None
    if x.numel() == 0:
        zeros = lambda dtype: None if dtype is None else torch.zeros(x.shape[x.dim() - ctx.normalized_ndim:],  # noqa: E731
                                                                     dtype=dtype, device=x.device)
        return torch.zeros_like(x), None, zeros(weight_dtype), zeros(bias_dtype), None, None, None
    kernels = _norm_backward_op if traced(grad_y) else _backward_kernels
    grads = iter(kernels(grad_y, x, weight, mean, rstd, ctx.normalized_ndim, ctx.rms, ctx.mode, weight_dtype,
                         bias_dtype))
    dx = next(grads)
    dw = next(grads) if weight_dtype is not None else None
    db = next(grads) if bias_dtype is not None else None
    return dx, None, dw, db, None, None, None


def _differentiable_backward(ctx, grad_y, x, weight):
    """The gradients as functions of x, weight and grad_y that autograd can differentiate again
    (torch.autograd.grad(..., create_graph=True): gradient penalties, higher derivatives). precred's
    backward kernels are not differentiable, so this path, on purpose, is torch's own layer_norm /
    rms_norm autograd, in fp32 for 16-bit inputs (fp64 for fp64): its values carry torch's rounding,
    not precred's bounds."""
    shape = x.shape[x.dim() - ctx.normalized_ndim:]
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    xw = x.to(wide) if x.requires_grad else x.detach().to(wide).requires_grad_()
    ww = None
    if weight is not None:
        ww = weight.to(wide) if weight.requires_grad else weight.detach().to(wide).requires_grad_()
    with torch.enable_grad():
        if ctx.rms:
            y = torch.nn.functional.rms_norm(xw, shape, ww, ctx.eps)
        else:
            y = torch.nn.functional.layer_norm(xw, shape, ww, None, ctx.eps)
        wanted = [t for t, needed in ((xw, ctx.needs_input_grad[0]), (ww, ctx.needs_input_grad[2])) if needed]
        grads = iter(torch.autograd.grad(y, wanted, grad_y.to(wide), create_graph=True))
    dx = next(grads).to(x.dtype) if ctx.needs_input_grad[0] else None
    dw = next(grads).to(weight.dtype) if ctx.needs_input_grad[2] else None
    db = None
    if ctx.needs_input_grad[3]:
        db = grad_y.to(wide).sum(tuple(range(x.dim() - ctx.normalized_ndim))).to(ctx.bias_dtype)
    return dx, None, dw, db, None, None, None


_norm.register_autograd(_backward, setup_context=_setup_context)


class _EagerNorm(torch.autograd.Function):
    """The same forward, context and backward as the custom op's, for eager calls that autograd records:
    torch.library's dispatch costs about 100 us of host time per call (H100 host, measured with
    cProfile), more than the kernels of a mid-sized norm; torch.compile still traces the custom op."""

    @staticmethod
    def forward(ctx, x, normalized_ndim, weight, bias, eps, rms, mode):
        output = _norm_impl(x, normalized_ndim, weight, bias, eps, rms, mode)
        _setup_context(ctx, (x, normalized_ndim, weight, bias, eps, rms, mode), output)
        return output

    @staticmethod
    def backward(ctx, grad_y, grad_mean, grad_rstd):
        return _backward(ctx, grad_y, grad_mean, grad_rstd)


def _check_normalized_shape(x: torch.Tensor, normalized_shape) -> int:
    if isinstance(normalized_shape, bool) or not isinstance(normalized_shape, (int, tuple, list, torch.Size)):
        raise TypeError(f"normalized_shape must be an int or a sequence of ints, got {type(normalized_shape).__name__}")
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    if any(isinstance(s, bool) or not isinstance(s, int) for s in shape):
        raise TypeError(f"normalized_shape must contain ints, got {normalized_shape!r}")
    if not shape:
        raise ValueError("normalized_shape must name at least one trailing dimension, got ()")
    if len(shape) > x.dim() or list(x.shape[x.dim() - len(shape):]) != shape:
        raise RuntimeError(f"normalized_shape={tuple(shape)} does not match the trailing dimensions of the input "
                           f"of shape {tuple(x.shape)}")
    return len(shape)


def _check_parameter(t, name: str, x: torch.Tensor, normalized_ndim: int) -> None:
    if t is None:
        return
    check_float_tensor(t, name)
    expected = x.shape[x.dim() - normalized_ndim:]
    if t.shape != expected:
        raise RuntimeError(f"{name} must have the normalized shape {tuple(expected)}, got {tuple(t.shape)}")
    if t.device != x.device:
        raise RuntimeError(f"{name} is on {t.device} but the input is on {x.device}")


def _check_eps(eps) -> float:
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise TypeError(f"eps must be a real number, got {type(eps).__name__}")
    if not 0 <= eps < math.inf:   # comparisons (NaN fails them): torch.compile may make eps symbolic
        raise ValueError(f"eps must be finite and >= 0, got {eps}")
    return float(eps)


# Call signatures whose arguments passed the checks, with what the checks resolved (normalized_ndim,
# eps): the checks read nothing but what the signature holds, so a signature seen before skips them --
# about 15 us of host time per call on an H100 host, as much as a mid-sized norm's kernel. At most
# signature_cache.SIGNATURES_KEPT signatures, the oldest evicted first.
_CHECKED = {}


def _parameter_signature(t):
    return None if t is None else (t.shape, t.dtype, t.device, t.layout) if isinstance(t, torch.Tensor) else t


def _signature(x, normalized_shape, weight, bias, eps, mode, rms: bool):
    """A hashable key of every argument the checks read, or None where the key could not tell two
    arguments apart that the checks do (then the checks run): normalized_shape other than an int, a
    torch.Size or a tuple / list of ints (bools hash as ints), a mode other than a str, inputs that are
    not tensors."""
    kind = type(normalized_shape)
    if kind is list or kind is tuple:
        if not all(type(s) is int for s in normalized_shape):
            return None
        normalized_shape = tuple(normalized_shape)
    elif kind is not int and kind is not torch.Size:
        return None
    if type(mode) is not str or not isinstance(x, torch.Tensor) or (weight is not None and not isinstance(
            weight, torch.Tensor)) or (bias is not None and not isinstance(bias, torch.Tensor)):
        return None
    return (x.shape, x.dtype, x.device, x.layout, normalized_shape, _parameter_signature(weight),
            _parameter_signature(bias), type(eps), eps, mode, rms)


def rms_norm_default_eps(dtype: torch.dtype) -> float:
    """rms_norm's eps when the caller passes None: the machine epsilon of the type torch computes in --
    fp32's for fp32, bf16 and fp16 inputs (2^-23), fp64's for fp64 (2^-52). That is what torch does, on
    the CPU (layer_norm.cpp rms_norm_composite: numeric_limits<float>::epsilon() for every opmath-float
    input) and on CUDA (_fused_rms_norm_cuda: the accumulate type's); torch's docstring says
    finfo(x.dtype).eps, which for bf16 would be 2^-7 and changes the output of rows whose mean square is
    not far above it (checked: torch 2.13 CPU, bf16 row [0.0062] -> 1.0, with 2^-7 -> 0.0698)."""
    return torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32).eps


def _check_call(x, normalized_shape, weight, bias, eps, mode) -> tuple[int, float]:
    """(normalized_ndim, eps) of a call whose arguments pass the checks; else the error naming one."""
    check_float_tensor(x, "input")
    normalized_ndim = _check_normalized_shape(x, normalized_shape)
    _check_parameter(weight, "weight", x, normalized_ndim)
    _check_parameter(bias, "bias", x, normalized_ndim)
    get_norm_mode(mode)
    if eps is None:
        eps = rms_norm_default_eps(x.dtype)
    return normalized_ndim, _check_eps(eps)


def _norm_call(x, normalized_shape, weight, bias, eps, mode, rms: bool) -> torch.Tensor:
    if runs_in_fp32("rms_norm" if rms else "layer_norm", x):   # torch.autocast's cast (precred.autocast)
        x, weight, bias = (fp32_if_sixteen_bit(t) for t in (x, weight, bias))
    if traced(x):   # dynamo / AOT autograd trace the checks and the custom op, no caches
        normalized_ndim, eps = _check_call(x, normalized_shape, weight, bias, eps, mode)
        return _norm(x, normalized_ndim, weight, bias, eps, rms, mode)[0]
    signature = _signature(x, normalized_shape, weight, bias, eps, mode, rms)
    try:
        checked = _CHECKED.get(signature) if signature is not None else None
    except TypeError:   # an unhashable argument (eps as a list), as eager.replay: the checks name it
        signature = checked = None
    if checked is None:
        checked = _check_call(x, normalized_shape, weight, bias, eps, mode)
        if signature is not None:
            keep(_CHECKED, signature, checked)
    normalized_ndim, eps = checked
    if any(through_custom_op(t) for t in (x, weight, bias)):   # autograd records the call
        return _EagerNorm.apply(x, normalized_ndim, weight, bias, eps, rms, mode)[0]
    return _norm_forward(x, normalized_ndim, weight, bias, eps, rms, mode, keep_stats=False)[0]


def layer_norm(x: torch.Tensor, normalized_shape, weight: torch.Tensor | None = None,
               bias: torch.Tensor | None = None, eps: float = 1e-5, *, mode: str = DEFAULT_NORM_MODE) -> torch.Tensor:
    """(x - mean) / sqrt(var + eps) * weight + bias over the trailing `normalized_shape` dims
    (torch.nn.functional.layer_norm's semantics; var is the biased variance; the output is contiguous,
    of x's dtype). weight and bias may be of any float dtype, not only x's (torch's CUDA kernel takes fp32
    ones for 16-bit x, its CPU kernel x's alone): they are read as they are, and their gradients come
    back in their own dtypes. normalized_shape may be an int, as torch.nn.LayerNorm's.

    mode: "fast" (default: fp32 statistics and arithmetic, fp64 for fp64 input) or "precise" (fp64; the
    output rounded once; for bf16/fp16 outputs the last steps, * w + b, run in fp32, and on bf16/fp16
    rows held on chip the steps before them too: rms_norm's from the fp64 statistics on rows of 256 and
    more, plan.norm_fp32_pass; layer_norm's from the fp64 mean, plan.norm_fp64_mean) -- bounds in
    precred.norm_error_bound. Each row is shifted by one of its own elements before it is summed, so a
    mean far larger than the spread costs no accuracy in either mode. bf16/fp16 inputs compute in fp32
    or fp64. Rows holding NaN or inf give NaN, as torch. Limit of `fast` (fp32 arithmetic) on fp32 /
    bf16 input: a finite row whose differences x - x_0, or their sum, leave fp32's range (values within
    a factor of about n of fp32's largest, 3.4e38) gives NaN too; `precise` normalizes it (torch's fp32
    layer_norm gives 0 or NaN there). Rows up to 16384 elements (8192 for an fp64 accumulator) are read
    once; longer rows are read twice (the Welford statistics in fp64, then the normalizing pass; by
    one program per row, the second read from L2, where rows are at most 256 KB and at least 2 per SM).
    Backward: precred's kernels, dweight / dbias merged in a fixed order (bitwise reproducible).
    Gradients taken with create_graph=True (to be differentiated again) come instead, on purpose, from
    torch's own layer_norm autograd, in fp32 (fp64 for fp64 input): precred's kernels are not
    differentiable. CPU tensors run in Triton's interpreter. Non-contiguous inputs are copied once,
    contiguous.
    """
    return _norm_call(x, normalized_shape, weight, bias, eps, mode, rms=False)


def rms_norm(x: torch.Tensor, normalized_shape, weight: torch.Tensor | None = None, eps: float | None = None, *,
             mode: str = DEFAULT_NORM_MODE) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the trailing `normalized_shape` dims
    (torch.nn.functional.rms_norm's semantics; eps=None means the epsilon of the type torch computes
    in, as torch's kernels do: fp32's for fp32 / bf16 / fp16 input, fp64's for fp64 --
    rms_norm_default_eps). Modes, bounds, parameter dtypes,
    specials and paths as precred.layer_norm; an inf in a row makes its finite outputs 0 and its inf
    outputs NaN, as torch -- except for rows longer than 16384 (8192 in fp64), which take the Welford
    statistics: there a row holding both +inf and -inf comes out NaN throughout."""
    return _norm_call(x, normalized_shape, weight, None, eps, mode, rms=True)
