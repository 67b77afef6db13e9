"""Repeated eager CUDA calls: the public call's raw arguments and the input's layout -> a replay.

Small reductions are bound by host time (about 16 MB or less moves in a few microseconds; Python's
checks, planning and argument binding cost tens). For a plain eager CUDA call, everything between the
public function and the kernels -- the argument checks, dim normalization, planning, the launch
recipe's lookup -- is a function of the key built here: the op, the input's shape, strides, dtype,
device and 16-byte alignment (Triton specializes on it), and the raw arguments with their types (so
that `keepdim=1` still reaches check_keepdim's TypeError, though 1 == True). A hit replays the launch
recipe the first call left (launch._Recipe), which allocates its outputs in the result's shape.

Calls that torch.compile traces or autograd records go through the custom ops and never come here;
nor do CPU tensors (the interpreter has no recipes) or unhashable arguments (a list as dim).
Invariant: an entry is stored only after a call with that key passed every check and launched the
recipe, so a replay raises nothing that the full path would have raised.
"""
import torch

from .checks import through_custom_op
from .device_guard import current_cuda_device, run_on_device_of
from .signature_cache import keep

# Replays by call key, at most signature_cache.SIGNATURES_KEPT (the oldest evicted first).
_CALLS = {}


def call_key(op: str, x, dim, *args):
    """The key of an eager CUDA call, or None when the call must take the full path. The types ride
    along by C-level maps (this runs on every call): dim's, its elements' when it is a tuple, and the
    other arguments'."""
    if through_custom_op(x):   # first: dynamo must not trace data_ptr
        return None
    try:
        if not x.is_cuda:
            return None
        dim_types = tuple(map(type, dim)) if type(dim) is tuple else type(dim)
        if isinstance(dim, torch.Tensor) or (type(dim) is tuple and torch.Tensor in dim_types):
            return None   # a tensor as dim (an int-like: checks.as_int_dim) would sit in the key, hashed by identity
        return (op, x.shape, x.stride(), x.dtype, x.get_device(), x.data_ptr() % 16, dim, dim_types, args,
                tuple(map(type, args)))   # the device as its index (x is on CUDA): no torch.device made
    except (AttributeError, RuntimeError):   # not a tensor, or a sparse one (no strides): the full path,
        return None                           # whose checks raise the TypeError


def replay(key, x):
    """The result of the call remembered under key, run on x; None when there is none."""
    if key is None:
        return None
    try:
        run = _CALLS.get(key)
    except TypeError:   # an unhashable argument (a list as dim): the full path
        return None
    if run is None:
        return None
    if x.get_device() != current_cuda_device():   # another GPU's tensor: its device current first
        return run_on_device_of(x, run, x)
    return run(x)   # (eager replays run only outside torch.compile: call_key)


def remember(key, recipe, shape, pair: bool = False) -> None:
    """Replay `recipe` for later calls with this key: its outputs allocated in the result's `shape`
    (no view per call), the first alone or (pair) both. Nothing is stored without a key or a recipe
    (CPU, copied views, the atomic schedule, empty inputs)."""
    if recipe is not None:
        run = recipe.run
        _store(key, (lambda x: run(x, shape)) if pair else (lambda x: run(x, shape)[0]))


def remember_run(key, recipe) -> None:
    """Replay `recipe` (its run(x) returns the call's result: softmax's) for later calls with this key;
    as remember, nothing is stored without a key or a recipe."""
    if recipe is not None:
        _store(key, recipe.run)


def _store(key, run) -> None:
    if key is not None:
        try:
            keep(_CALLS, key, run)
        except TypeError:   # unhashable: never replayed
            pass
