"""Where a reduction call's time goes, kernel by kernel (GPU; one device call).

    python3 bench/profile_kernels.py sum/exact:bfloat16:65536x1024:0 var/fp64:float32:8192x8192:0 ...
                                     [--variant "name:CONST=value;CONST=value"] [--scale S] ...

Each case (bench/kernel_resources.py's spelling: op/mode:dtype:RxC:dim, ops of bench/sweep_outer.py)
prints the whole call's median time and GB/s (do_bench, L2 flushed: the protocol's), each CUDA kernel's
device time per call from torch.profiler over calls with L2 flushed before each (as under the protocol),
and what is left: the call's time not spent in its kernels (launch gaps, host time the GPU waited for).
Variants set precred.plan constants with every plan cache cleared (bench/plan_variants.py).
"""
import argparse
import sys

import torch

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
from plan_variants import kernel_times, median_ms, parse_variant, plan_constants  # noqa: E402
from sweep_outer import OPS  # noqa: E402


def parse_case(spec: str):
    """(op, mode, dtype, shape, dim) of "op/mode:dtype:RxC:dim"."""
    head, dtype, shape, dim = spec.split(":")
    op, _, mode = head.partition("/")
    return op, mode, getattr(torch, dtype), tuple(int(s) for s in shape.split("x")), int(dim)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="+", help="op/mode:dtype:RxC:dim")
    ap.add_argument("--variant", action="append", default=[], help='"name:CONST=value;CONST=value"')
    ap.add_argument("--scale", type=float, default=1.0, help="input = randn * scale (bench/exp_suite.py: 4)")
    args = ap.parse_args()
    variants = [("default", {})] + [parse_variant(v) for v in args.variant]
    print(f"device: {torch.cuda.get_device_name()}")
    for spec in args.cases:
        op, mode, dtype, shape, dim = parse_case(spec)
        ours, theirs, modes = OPS[op]
        x = (torch.randn(shape, device="cuda") * args.scale).to(dtype)
        out_bytes = x.numel() // shape[dim] * x.element_size()
        nbytes = x.numel() * x.element_size() + out_bytes
        torch_ms = median_ms(lambda: theirs(x, dim))
        print(f"\n{spec}  torch {torch_ms * 1e3:.1f} us ({nbytes / torch_ms / 1e6:.0f} GB/s)")
        for name, constants in variants:
            with plan_constants(constants):
                fn = lambda: ours(x, dim, mode=mode or modes[0])   # noqa: E731
                first = fn()
                ms = median_ms(fn)
                repeat = fn()
                same = torch.equal(first.view(torch.uint8) if first.dtype != torch.bool else first,
                                   repeat.view(torch.uint8) if repeat.dtype != torch.bool else repeat)
                times = kernel_times(fn)
            total_us = ms * 1e3
            kernels = "  ".join(f"{k.split('_kernel')[0]} {v:.1f}" for k, v in times.items())
            print(f"  {name:<12} {total_us:7.1f} us {nbytes / ms / 1e6:6.0f} GB/s  x{torch_ms / ms:.2f} torch"
                  f"  kernels: {kernels}  | rest {total_us - sum(times.values()):.1f} us"
                  + ("" if same else "  NOT BITWISE REPEATED"))


if __name__ == "__main__":
    main()
