"""GPU time of each kernel a precred call launches (GPU; one device call): where a mode's time goes
between its passes (the first pass over the input, the merge of partial states, a recompute launch).

    python3 bench/kernel_times.py [--calls 20] [--set CONST=VALUE ...] OP/MODE:DTYPE:SHAPE:DIM ...
    e.g. sum/exact:bfloat16:8192x8192:0 sum/fast:bfloat16:8192x8192:0 var/fast:float32:65536x1024:-1

The ops are bench/sweep_outer.py's. The L2 cache is flushed before every call, as bench/gpu_suite.py's
timings do (the flush kernel is left out of the table). Prints per case each kernel's mean microseconds
per call (torch.profiler's CUDA times), their total, and the GB/s of the input read over that total.
--set CONST=VALUE sets a precred.plan constant first (a Python literal), as sweep_outer's variants.
"""
import argparse
import ast
import sys
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
from plan_variants import set_plan_constants  # noqa: E402
from sweep_outer import OPS  # noqa: E402


def parse_case(text):
    op_mode, dtype, shape, dim = text.split(":")
    op, _, mode = op_mode.partition("/")
    return op, mode or OPS[op][2][0], dtype, tuple(int(s) for s in shape.split("x")), int(dim)


def kernel_times(fn, calls, flush):
    """Mean microseconds per call of each CUDA kernel fn launches (the flush's kernel excluded)."""
    fn()   # compile and plan outside the profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            flush.zero_()
            fn()
        torch.cuda.synchronize()
    per_kernel = defaultdict(float)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA and "FillFunctor<signed char>" not in event.name:
            per_kernel[event.name] += event.device_time / calls
    return per_kernel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="+", help="OP/MODE:DTYPE:SHAPE:DIM")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--set", action="append", default=[], metavar="CONST=VALUE")
    args = ap.parse_args()
    set_plan_constants({k: ast.literal_eval(v) for k, v in (a.split("=", 1) for a in args.set)}, ())
    flush = torch.empty(256 * 2 ** 20, dtype=torch.int8, device="cuda")
    print(f"device: {torch.cuda.get_device_name()}; {args.calls} calls each, L2 flushed before every call")
    for text in args.cases:
        op, mode, dtype, shape, dim = parse_case(text)
        ours = OPS[op][0]
        x = torch.randn(shape, device="cuda").to(getattr(torch, dtype))
        times = kernel_times(lambda: ours(x, dim, mode=mode), args.calls, flush)
        total = sum(times.values())
        gbs = x.numel() * x.element_size() / (total * 1e3) if total else float("nan")
        print(f"{text}: {total:.1f} us, {gbs:.0f} GB/s of input over the kernels' time")
        for name, us in sorted(times.items(), key=lambda kv: -kv[1]):
            print(f"    {us:8.1f} us  {name[:90]}")


if __name__ == "__main__":
    main()
