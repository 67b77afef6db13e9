"""Kernels launch on their input's GPU, whichever device is current.

Triton launches on the current CUDA device (its launcher takes the current device's stream and loads
the kernel there); torch's own ops switch to their tensors' device first. A precred call on a tensor
of cuda:1 while cuda:0 is current must therefore make cuda:1 current for its launches.
`on_input_device` does that around the ops' implementations (the functions the custom ops wrap, which
the eager paths call too; layer_norm / rms_norm's forward) and precred.eager around its replays. What
it costs a call on the current device: reading the input's device index and the current one (a few
hundred ns of host time).
Backward kernels run on autograd's worker thread of the gradient's device (current there), through
the same decorated implementations.
"""
import functools

import torch


def run_on_device_of(x, fn, *args, **kwargs):
    """fn(*args, **kwargs) with x's CUDA device current (a plain call where it already is, or x is
    not a CUDA tensor). Cheapest test first: get_device() is -1 off CUDA; torch.compile's tracing (no
    launch to guard) is asked only where the devices differ."""
    index = x.get_device() if isinstance(x, torch.Tensor) else -1
    if index >= 0 and index != torch.cuda.current_device() and not torch.compiler.is_compiling():
        with torch.cuda.device(index):
            return fn(*args, **kwargs)
    return fn(*args, **kwargs)


def on_input_device(impl):
    """impl run with its first argument's CUDA device current (run_on_device_of). functools.wraps keeps
    impl's signature visible, from which torch.library.custom_op infers the op's schema."""
    @functools.wraps(impl)
    def on_device(x, *args, **kwargs):
        return run_on_device_of(x, impl, x, *args, **kwargs)
    return on_device
