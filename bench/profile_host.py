"""Where the host time of a small eager precred call goes (GPU; one device call).

    python3 bench/profile_host.py [--op sum] [--mode fast] [--shape 64x4096] [--dim -1] [--dtype float32] [--calls 2000]
    python3 bench/profile_host.py --op layer_norm_backward [--dtype bfloat16] [--shape 64x4096]

Prints microseconds per call of a Python loop (torch's op, precred's), then the same loop's steps timed
apart -- the call key, the replay lookup, the output allocation, the stream query, the launch -- and the
top of a cProfile of precred's loop (tottime): what DESIGN.md's latency goal (the (64, 4096) loop time per
call within 1.5x torch's) is spent on. layer_norm_backward: the same for torch.autograd.grad of a
layer_norm's output (dx, dweight, dbias), torch's and precred's, and a cProfile of precred's.
"""
import argparse
import cProfile
import pstats
import sys

import torch

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
import precred  # noqa: E402
from gpu_suite import loop_us  # noqa: E402
from precred import eager  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--op", default="sum")
    ap.add_argument("--mode", default="fast")
    ap.add_argument("--shape", default="64x4096")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--dim", type=int, default=-1)
    args = ap.parse_args()
    if args.op == "layer_norm_backward":
        return norm_backward_host(args)
    x = torch.randn(*(int(n) for n in args.shape.split("x")), device="cuda").to(getattr(torch, args.dtype))
    ours, theirs = getattr(precred, args.op), getattr(torch, args.op)
    print(torch.cuda.get_device_name(), args.op, args.mode, tuple(x.shape))
    ours(x, args.dim, mode=args.mode)   # compiles, plans and leaves the replay
    key = eager.call_key(args.op, x, args.dim, False, None, args.mode, False)
    steps = {
        f"torch.{args.op}": lambda: theirs(x, args.dim),
        f"precred.{args.op}": lambda: ours(x, args.dim, mode=args.mode),
        "call_key": lambda: eager.call_key(args.op, x, args.dim, False, None, args.mode, False),
        "replay lookup": lambda: eager._CALLS.get(key),
        "x.new_empty": lambda: x.new_empty(64),
        "torch.compiler.is_compiling": torch.compiler.is_compiling,
        "x.data_ptr": x.data_ptr,
        "x.device": lambda: x.device,
        "x.stride": x.stride,
    }
    time_and_profile(steps, lambda: ours(x, args.dim, mode=args.mode), args.calls, top=14)


def time_and_profile(steps: dict, profiled, calls: int, top: int) -> None:
    """Print each step's microseconds per call (a Python loop), then the top of a cProfile (tottime) of a
    loop of `profiled`."""
    for name, fn in steps.items():
        print(f"{name:32s} {loop_us(fn, calls, repeats=5):7.2f} us")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        profiled()
    torch.cuda.synchronize()
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(top)


def norm_backward_host(args):
    """Host time of layer_norm's backward: autograd.grad loops (torch's, precred's) and their steps."""
    shape = tuple(int(n) for n in args.shape.split("x"))
    dtype = getattr(torch, args.dtype)
    x = torch.randn(shape, device="cuda", dtype=dtype).requires_grad_()
    w, b = (torch.rand(shape[-1], device="cuda", dtype=dtype).requires_grad_() for _ in range(2))
    dy = torch.randn(shape, device="cuda", dtype=dtype)
    y_torch = torch.nn.functional.layer_norm(x, shape[-1:], w, b)
    y_ours = precred.layer_norm(x, shape[-1:], w, b)
    print(torch.cuda.get_device_name(), "layer_norm backward", args.dtype, shape)
    steps = {
        "torch autograd.grad": lambda: torch.autograd.grad(y_torch, (x, w, b), dy, retain_graph=True),
        "precred autograd.grad": lambda: torch.autograd.grad(y_ours, (x, w, b), dy, retain_graph=True),
        "torch.empty_like(x)": lambda: torch.empty_like(x),
        "dy.contiguous()": dy.contiguous,
    }
    time_and_profile(steps, steps["precred autograd.grad"], args.calls, top=18)


if __name__ == "__main__":
    main()
