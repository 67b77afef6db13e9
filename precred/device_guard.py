"""Kernels launch on their input's GPU, whichever device is current.

Triton launches on the current CUDA device (its launcher takes the current device's stream and loads
the kernel there); torch's own ops switch to their tensors' device first. A precred call on a tensor
of cuda:1 while cuda:0 is current must therefore make cuda:1 current for its launches.
`on_input_device` does that around the ops' implementations (the functions the custom ops wrap, which
the eager paths call too; layer_norm / rms_norm's forward) and precred.eager around its replays. What
it costs a call on the current device: reading the input's device index and the current one (a few
hundred ns of host time; the current one by torch._C._cuda_getDevice, which torch.cuda.current_device
wraps with a Python-level lazy-init check: 0.25 -> 0.13 us on an H100's host, bench/profile_host.py;
the C function initializes CUDA itself where needed).
Backward kernels run on autograd's worker thread of the gradient's device (current there), through
the same decorated implementations.
"""
import functools

import torch


# torch.cuda.current_device() less its Python wrapper. CPU builds of torch lack the C function; there no
# tensor is on CUDA, so nothing asks for the current device.
current_cuda_device = getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)


def run_on_device_of(x, fn, *args, **kwargs):
    """fn(*args, **kwargs) with x's CUDA device current (a plain call where it already is, or x is
    not a CUDA tensor). Cheapest test first: get_device() is -1 off CUDA; torch.compile's tracing (no
    launch to guard) is asked only where the devices differ."""
    index = x.get_device() if isinstance(x, torch.Tensor) else -1
    if index >= 0 and index != current_cuda_device() and not torch.compiler.is_compiling():
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
