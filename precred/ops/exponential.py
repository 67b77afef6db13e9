"""`precred.logsumexp`: public function -> torch.library custom op -> launcher.

One pass over the data in every schedule: the online (max, sum of exp) state of
strategies/stable_exp.py. The custom op (`precred::logsumexp`) lets torch.compile trace calls; its
autograd formula is torch's: d/dx_i = exp(x_i - logsumexp) (the softmax), times the upstream gradient.
"""
import math

import torch

from ..checks import check_float_tensor, check_keepdim, normalize_dims, reduced_shape, through_custom_op
from ..launch import reduce_logsumexp
from ..modes import DEFAULT_EXP_MODE, get_exp_mode


def _logsumexp_impl(x: torch.Tensor, dims: list[int], keepdim: bool, mode: str) -> torch.Tensor:
    shape = reduced_shape(x.shape, dims, keepdim)
    n = math.prod(x.shape[d] for d in dims)
    if x.numel() == 0 or n == 0:
        # torch: log of an empty sum is log(0) = -inf; an empty output stays empty.
        return torch.full(shape, -math.inf, dtype=x.dtype, device=x.device)
    return reduce_logsumexp(x, tuple(dims), get_exp_mode(mode)).view(shape)


_logsumexp = torch.library.custom_op("precred::logsumexp", _logsumexp_impl, mutates_args=())


@_logsumexp.register_fake
def _(x, dims, keepdim, mode):
    return x.new_empty(reduced_shape(x.shape, dims, keepdim))


def _setup_context(ctx, inputs, output):
    x, dims, keepdim, _ = inputs
    ctx.save_for_backward(x, output)
    ctx.dims = dims
    ctx.keepdim = keepdim


def _backward(ctx, grad):
    x, result = ctx.saved_tensors
    if not ctx.keepdim:
        for d in ctx.dims:
            grad = grad.unsqueeze(d)
            result = result.unsqueeze(d)
    # torch's formula (all -inf rows give NaN gradients there too); 16-bit inputs in fp32.
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    g = grad.to(wide) * (x.to(wide) - result.to(wide)).exp()
    return g.to(x.dtype), None, None, None


_logsumexp.register_autograd(_backward, setup_context=_setup_context)


def logsumexp(x: torch.Tensor, dim, keepdim: bool = False, *, mode: str = DEFAULT_EXP_MODE) -> torch.Tensor:
    """log(sum(exp(x))) over `dim` (torch.logsumexp's semantics), reading the data once.

    dim: an int or a tuple of ints (required, as torch's; an empty tuple means every dim); keepdim as
    torch. The output has x's dtype; bf16/fp16 inputs are computed in fp32 or fp64. Rows of -inf give
    -inf, a +inf gives +inf, a NaN gives NaN; an empty reduction gives -inf. mode: "fp64" (default:
    exp and sum in fp64, about 0.5 ulp) or "fast" (fp32, the GPU's approximate exp) -- bounds in
    precred.logsumexp_error_bound. CPU tensors run the same kernels in Triton's interpreter.
    """
    check_float_tensor(x, "input")
    if dim is None:
        raise TypeError("logsumexp: dim must be an int or a tuple of ints (torch requires it), got None")
    get_exp_mode(mode)
    check_keepdim(keepdim)
    dims = list(normalize_dims(dim, x.dim()))
    if through_custom_op(x):
        return _logsumexp(x, dims, keepdim, mode)
    return _logsumexp_impl(x, dims, keepdim, mode)
