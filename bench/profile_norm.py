"""Where a layer_norm / rms_norm call's time goes (GPU; one device call): per planner variant, shape and
dtype, the whole call's time (do_bench, L2 flushed) next to torch's, and each CUDA kernel's time per
call from torch.profiler -- to tell the main kernel from the merges of dweight / dbias -- and the host time of a call,
timed while the GPU is held busy (a call whose host time exceeds its kernels' is host-bound).

    python3 bench/profile_norm.py [--shapes 4096x4096,8192x8192] [--modes fast,precise]
                                  [--direction forward,backward] [--op layer_norm]
                                  [--variant "name:CONST=value;CONST=value"]

Variants set precred.plan constants (Python literals; e.g. "pps1:NORM_BACKWARD_PROGRAMS_PER_SM=1").
GB/s: forward (x + y bytes), backward (x + dy + dx bytes), as bench/norm_suite.py counts them.
"""
import argparse
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
import precred  # noqa: E402
from plan_variants import kernel_times, median_ms, parse_variant, plan_constants  # noqa: E402
from precred import norm_launch, plan  # noqa: E402


# what a change of the norms' planner constants must clear
_NORM_CACHES = (plan.plan_norm_backward, plan.plan_single_read, norm_launch._RECIPES)


def _host_us(fn, calls=20):
    """Host microseconds per call of fn, timed while the GPU is held busy by a sleep kernel (so no
    launch waits on the device): where this exceeds the kernels' time, the call is host-bound."""
    fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(2_000_000_000)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    return host


def _tuple(result):
    return result if isinstance(result, tuple) else (result,)


def _calls(op, mode, x, w, b, dy):
    """{implementation: (forward fn, backward fn)} of op."""
    n = x.shape[-1:]
    if op == "layer_norm":
        ours = lambda xs, ws, bs: precred.layer_norm(xs, n, ws, bs, 1e-5, mode=mode)  # noqa: E731
        theirs = lambda xs, ws, bs: F.layer_norm(xs, n, ws, bs, 1e-5)  # noqa: E731
    else:
        ours = lambda xs, ws, bs: precred.rms_norm(xs, n, ws, 1e-5, mode=mode)  # noqa: E731
        theirs = lambda xs, ws, bs: F.rms_norm(xs, n, ws, 1e-5)  # noqa: E731
    out = {}
    for name, fn in (("torch", theirs), ("precred", ours)):
        xs, ws, bs = (t.clone().requires_grad_() for t in (x, w, b))
        y = fn(xs, ws, bs)
        wanted = (xs, ws, bs) if op == "layer_norm" else (xs, ws)
        out[name] = (lambda fn=fn: fn(x, w, b),
                     lambda y=y, wanted=wanted: torch.autograd.grad(y, wanted, dy, retain_graph=True))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4096x4096,8192x8192,65536x1024")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--modes", default="fast,precise")
    ap.add_argument("--direction", default="forward,backward")
    ap.add_argument("--op", choices=("layer_norm", "rms_norm"), default="layer_norm")
    ap.add_argument("--variant", action="append", default=[],
                    help='planner variant "name:CONST=value;CONST=value" (the default runs first)')
    ap.add_argument("--no-profile", action="store_true", help="whole-call times only")
    args = ap.parse_args()
    variants = dict([("default", {})] + [parse_variant(spec) for spec in args.variant])
    print(torch.cuda.get_device_name(), flush=True)
    g = torch.Generator(device="cuda").manual_seed(0)
    for shape in [tuple(int(s) for s in text.split("x")) for text in args.shapes.split(",")]:
        for dtype in [getattr(torch, d) for d in args.dtypes.split(",")]:
            x = (torch.randn(shape, device="cuda", generator=g) * 2 + 3).to(dtype)
            w = (torch.rand(shape[-1], device="cuda", generator=g) + 0.5).to(dtype)
            b = torch.randn(shape[-1], device="cuda", generator=g).to(dtype)
            dy = torch.randn(shape, device="cuda", generator=g).to(dtype)
            label = f"{shape[0]}x{shape[1]} {str(dtype)[6:]}"
            for direction in args.direction.split(","):
                nbytes = (2 if direction == "forward" else 3) * x.numel() * x.element_size()
                torch_fn = _calls(args.op, "fast", x, w, b, dy)["torch"][direction == "backward"]
                torch_ms = median_ms(torch_fn)
                print(f"{label} {direction} torch: {nbytes / torch_ms / 1e6:.0f} GB/s ({torch_ms * 1e3:.1f} us)",
                      flush=True)
                for mode in args.modes.split(",") if direction == "forward" else ["fast"]:
                    for name, constants in variants.items():
                        with plan_constants(constants, _NORM_CACHES):
                            fn = _calls(args.op, mode, x, w, b, dy)["precred"][direction == "backward"]
                            ms = median_ms(fn)
                            same = all(torch.equal(a, c) for a, c in zip(_tuple(fn()), _tuple(fn())))
                            host = _host_us(fn)
                            kernels = ""
                            if not args.no_profile:
                                times = sorted(kernel_times(fn, flush=False).items(), key=lambda kv: -kv[1])
                                kernels = "  " + ", ".join(f"{k} {v:.1f}" for k, v in times)
                        print(f"  {mode:8s} {name:14s} {nbytes / ms / 1e6:6.0f} GB/s ({torch_ms / ms:4.2f}x, "
                              f"{ms * 1e3:.1f} us, host {host:.0f} us){'' if same else ' NONDET'}{kernels}", flush=True)


if __name__ == "__main__":
    main()
