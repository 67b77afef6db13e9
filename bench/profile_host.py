"""Where the host time of a small eager precred call goes (GPU; one device call).

    python3 bench/profile_host.py [--op sum] [--mode fast] [--shape 64x4096] [--dim -1] [--dtype float32] [--calls 2000]
    python3 bench/profile_host.py --op layer_norm_backward [--dtype bfloat16] [--shape 64x4096]

Prints microseconds per call of a Python loop (torch's op, precred's), then the same loop's steps timed
apart -- the call key, the replay lookup, the output allocation, the stream query, the launch -- and the
top of a cProfile of precred's loop (tottime): what DESIGN.md's latency goal (the (64, 4096) loop time per
call within 1.5x torch's) is spent on. layer_norm_backward: the same for torch.autograd.grad of a
layer_norm's output (dx, dweight, dbias), torch's and precred's, and a cProfile of precred's; then
backward_timeline: where each call's host time goes (before / inside / after precred's Python backward)
with the GPU idle, busy and as under do_bench, and the GPU time of a call with its host time hidden.
"""
import argparse
import cProfile
import pstats
import statistics
import sys
import time

import torch
import triton
import triton.language as tl

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
        "x.get_device": x.get_device,
        "torch.cuda.current_device": torch.cuda.current_device,
        "torch._C._cuda_getDevice": torch._C._cuda_getDevice,
        "hash(call key)": lambda: hash(key),
        "replay (guard + recipe run)": lambda: eager.replay(key, x),
    }
    # The recipe's bound run, from the replay eager.remember stored (a closure over it).
    cells = [c.cell_contents for c in getattr(eager._CALLS.get(key), "__closure__", None) or ()]
    run = next((c for c in cells if hasattr(getattr(c, "__self__", None), "launches")), None)
    bound = getattr(run, "__self__", None)
    if hasattr(bound, "one_pass_pointers"):   # a one-pass recipe (launch._Recipe._run_one_pass)
        launch, out = bound.launches[0], bound.workspace.outputs(x)[0]
        stream = bound.get_stream(x.get_device())
        pointers = bound.one_pass_pointers((x.data_ptr(), out.data_ptr(), out.data_ptr()))
        steps["recipe run (outputs + launch)"] = lambda: run(x)
        steps["launch alone (C launcher)"] = lambda: launch(stream, pointers)
        steps["get_stream"] = lambda: bound.get_stream(0)
        print("kernel arguments passed:", 3 + 1 + len(launch.middle) + len(pointers) + len(launch.trailing))
        # The floor: a one-pointer Triton kernel through the same direct C launch, and a small torch op.
        touch = _touch[(1,)](out)
        one = type(launch)(touch, (1,), ())
        address = (out.data_ptr(),)
        steps["one-pointer kernel launch"] = lambda: one(stream, address)
        steps["torch out.zero_()"] = out.zero_
    time_and_profile(steps, lambda: ours(x, args.dim, mode=args.mode), args.calls, top=14)


@triton.jit
def _touch(ptr):
    tl.store(ptr, 1.0)


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
    backward_timeline(steps, x, dy)


class _PythonIdentity(torch.autograd.Function):
    """A Python autograd node doing nothing but one torch op: the engine's cost of a Python backward."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad.clone()


def backward_timeline(steps: dict, x, dy, calls: int = 40) -> None:
    """Host microseconds of each autograd.grad call (median), split for precred into: before its Python
    backward starts (the engine, its worker thread, the GIL), inside it, and after it returns -- under
    three conditions of the GPU: idle (synchronized before each call), busy (a sleep kernel ahead of the
    calls), and do_bench's (each call after a 256 MiB zero_, no synchronization): a call that takes
    longer when the GPU is busy waits on something."""
    from precred.ops import normalization
    stamps = []
    inner = normalization._backward

    def stamped(*args):
        stamps.append(time.perf_counter())
        result = inner(*args)
        stamps.append(time.perf_counter())
        return result

    y_identity = _PythonIdentity.apply(x)
    steps = dict(steps, **{"python identity node": lambda: torch.autograd.grad(y_identity, (x,), dy,
                                                                              retain_graph=True)})
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    normalization._backward = stamped
    try:
        for condition in ("idle", "busy", "do_bench"):
            for name in ("torch autograd.grad", "precred autograd.grad", "python identity node"):
                fn = steps[name]
                fn()
                torch.cuda.synchronize()
                stamps.clear()
                totals = []
                if condition == "busy":
                    torch.cuda._sleep(1_000_000_000)
                for _ in range(calls):
                    if condition == "idle":
                        torch.cuda.synchronize()
                    elif condition == "do_bench":
                        flush.zero_()
                    start = time.perf_counter()
                    fn()
                    totals.append((start, time.perf_counter()))
                torch.cuda.synchronize()
                total = statistics.median(end - start for start, end in totals)
                line = f"{condition:9s} {name:24s} total {total * 1e6:7.1f} us"
                if name.startswith("precred") and len(stamps) == 2 * calls:
                    parts = [(enter - start, leave - enter, end - leave) for (start, end), enter, leave
                             in zip(totals, stamps[0::2], stamps[1::2])]
                    before, inside, after = (statistics.median(p[i] for p in parts) * 1e6 for i in range(3))
                    line += f"  (engine to backward {before:.1f}, backward {inside:.1f}, after {after:.1f})"
                print(line, flush=True)
    finally:
        normalization._backward = inner
    print(f"GPU time of a call (CUDA events, median of {calls}): after a 256 MiB zero_ (do_bench's), and after the "
          "zero_ and a 300 us sleep kernel (the host's time hidden: the kernels' own)")
    for name in ("torch autograd.grad", "precred autograd.grad", "python identity node"):
        fn = steps[name]
        row = []
        for sleep in (False, True):
            times = []
            for _ in range(calls):
                flush.zero_()
                if sleep:
                    torch.cuda._sleep(600_000)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                times.append((start, end))
            torch.cuda.synchronize()
            row.append(statistics.median(s.elapsed_time(e) for s, e in times) * 1e3)
        print(f"  {name:24s} {row[0]:7.1f} us   host hidden {row[1]:7.1f} us", flush=True)
    _inside_steps(x, dy)


def _inside_steps(x, dy, calls: int = 200) -> None:
    """Host microseconds per call of the steps inside precred's backward (busy GPU), each timed apart."""
    from precred import launch, norm_launch
    w = torch.rand(x.shape[-1], device="cuda", dtype=x.dtype)
    steps = {   # beside norm_backward_host's own steps (empty_like, contiguous), timed there
        "torch.empty(x.shape)": lambda: torch.empty(x.shape, dtype=x.dtype, device=x.device),
        "launch.empty_contiguous_like(x)": lambda: launch.empty_contiguous_like(x, x.dtype),
        "torch.empty(n) x2": lambda: (torch.empty(x.shape[-1:], dtype=x.dtype, device=x.device),
                                      torch.empty(x.shape[-1:], dtype=x.dtype, device=x.device)),
        "_backward_key": lambda: norm_launch._backward_key(dy, x, x.shape[-1], w, False, None, x.dtype, x.dtype),
        "torch.cuda.current_device": torch.cuda.current_device,
    }
    torch.cuda._sleep(2_000_000_000)
    for name, fn in steps.items():
        fn()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        print(f"  {name:28s} {(time.perf_counter() - start) / calls * 1e6:6.2f} us", flush=True)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
