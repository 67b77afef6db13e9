"""Argument checks shared by the public functions: torch's semantics, clear errors naming the argument."""
import numbers
import operator
import os

import torch

# Triton decides when a kernel is defined whether it runs compiled or interpreted (TRITON_INTERPRET,
# which precred/__init__ sets on machines without a GPU before the kernels are defined).
KERNELS_INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"

FLOAT_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def check_float_tensor(x, name: str = "input") -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.layout != torch.strided:
        raise TypeError(f"{name} must be a dense (strided) tensor, got layout {x.layout}; convert it with .to_dense()")
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must have a floating dtype among float32, float64, bfloat16, float16; "
                        f"got {x.dtype}")
    if x.device.type not in ("cuda", "cpu"):
        raise RuntimeError(f"{name} is on {x.device}; precred runs on CUDA devices and on the CPU interpreter")
    if x.device.type == "cpu" and not KERNELS_INTERPRETED:
        raise RuntimeError(f"{name} is a CPU tensor, but precred's kernels were compiled for the GPU in this "
                           "process; set TRITON_INTERPRET=1 before importing precred to run them on the CPU")


def check_keepdim(keepdim, name: str = "keepdim") -> None:
    if not isinstance(keepdim, bool):
        raise TypeError(f"{name} must be a bool, got {type(keepdim).__name__}")


def through_custom_op(x) -> bool:
    """Whether a public call must go through its torch.library custom op: when torch.compile traces it
    (dynamo sees the op, not the launcher), when x is a tracing stand-in (AOT autograd's fake /
    functional tensors: _stand_in) or when autograd records it. Otherwise the eager path calls the
    op's implementation directly, without the dispatcher's per-call cost."""
    return torch.compiler.is_compiling() or (isinstance(x, torch.Tensor) and (
        (x.requires_grad and torch.is_grad_enabled()) or (type(x) is not torch.Tensor and _stand_in(x))))


def traced(t: torch.Tensor) -> bool:
    """Whether a backward runs on tracing stand-ins (torch.compile's AOT autograd traces it with fake /
    functional tensors, subclasses of torch.Tensor) rather than on tensors with storage: its kernel
    launches must then go through their custom ops, whose fakes AOT autograd can trace.
    torch.compiler.is_compiling() alone is not enough: under torch 2.11 it is False while AOT autograd
    traces a backward (layer_norm's backward read a FakeTensor's data_ptr on an H100 there)."""
    return torch.compiler.is_compiling() or (type(t) is not torch.Tensor and _stand_in(t))


def _stand_in(t) -> bool:
    """A tensor of a torch.Tensor subclass other than nn.Parameter (a real tensor, an nn module's weight):
    AOT autograd's fake / functional stand-ins (a user's own subclass is taken for one too: it then
    goes through the custom ops, which dispatch it)."""
    cls = type(t)
    return cls is not torch.Tensor and cls is not torch.nn.Parameter and isinstance(t, torch.Tensor)


def as_int_dim(d):
    """d as a Python int where torch takes it for one through __index__ -- a NumPy integer, an integer
    tensor of one element (torch.sum(x, np.int64(1)), torch.softmax(x, torch.tensor(1))) -- else d as
    it came: bools (torch rejects them), floats, anything else, for the caller's TypeError."""
    if type(d) is int or isinstance(d, bool):
        return d
    if isinstance(d, numbers.Integral) or (isinstance(d, torch.Tensor) and d.numel() == 1 and not (
            d.dtype == torch.bool or d.dtype.is_floating_point or d.dtype.is_complex)):
        return operator.index(d)
    return d


def single_dim(dim, ndim: int, name: str = "dim", expected: str = "an int") -> int:
    """torch's one-dim argument (softmax, argmax, max(x, dim), prod): an int (or an int-like:
    as_int_dim; of tensors only 0-d ones, as torch.softmax takes) in [-ndim, ndim) -> that dim in
    [0, ndim); 0 for a 0-d tensor."""
    if not (isinstance(dim, torch.Tensor) and dim.dim() != 0):
        dim = as_int_dim(dim)
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{name} must be {expected}, got {type(dim).__name__}")
    dims = normalize_dims(dim, ndim, name)
    return dims[0] if dims else 0


def normalize_dims(dim, ndim: int, name: str = "dim") -> tuple:
    """torch's reduction `dim`: None, an int, or a tuple/list of ints -> sorted tuple of unique dims.

    None and an empty tuple/list mean every dimension (as torch.sum). A 0-d tensor accepts 0 and -1.
    Int-likes (NumPy integers, one-element integer tensors) count as ints, as in torch (as_int_dim).
    """
    if dim is None:
        return tuple(range(ndim))
    dim = as_int_dim(dim)
    if isinstance(dim, bool) or not isinstance(dim, (int, tuple, list, torch.Size)):
        raise TypeError(f"{name} must be None, an int or a tuple of ints, got {type(dim).__name__}")
    dims = [dim] if isinstance(dim, int) else [as_int_dim(d) for d in dim]
    if not dims:
        return tuple(range(ndim))
    bound = max(ndim, 1)
    out = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int):
            raise TypeError(f"{name} must contain ints, got {type(d).__name__}")
        if not -bound <= d < bound:
            raise IndexError(f"{name}={d} is out of range for a tensor of {ndim} dimension(s) "
                             f"(expected to be in range of [{-bound}, {bound - 1}])")
        d = d % bound
        if d in out:
            raise RuntimeError(f"{name}: dimension {d} appears multiple times in the list of dims")
        out.append(d)
    if ndim == 0:
        return ()
    # Sorted by comparisons (insertion): torch.compile makes a dim that changes between calls symbolic,
    # and dynamo cannot sort symbolic keys (its comparisons it can).
    ordered = []
    for d in out:
        i = len(ordered)
        while i > 0 and ordered[i - 1] > d:
            i -= 1
        ordered.insert(i, d)
    return tuple(ordered)


def check_out_dtype(dtype, name: str = "dtype"):
    if dtype is None:
        return None
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{name} must be a torch.dtype, got {type(dtype).__name__}")
    if dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be a floating dtype among float32, float64, bfloat16, float16; got {dtype}")
    return dtype


def reduced_shape(shape, dims: tuple, keepdim: bool) -> list:
    if keepdim:
        return [1 if d in dims else s for d, s in enumerate(shape)]
    return [s for d, s in enumerate(shape) if d not in dims]
