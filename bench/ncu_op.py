"""Run one reduction a few times on the GPU, for Nsight Compute to profile (one device call).

    ncu --clock-control none -k regex:inner_kernel --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section WarpStateStats \
        python3 bench/ncu_op.py --op var --mode fast --dtype bfloat16 --shape 8192x8192 --dim -1

--set CONST=VALUE sets a precred.plan constant first. --torch runs torch's op instead (its kernels
have other names: -k regex:reduce). The ops are bench/sweep_outer.py's. Prints nothing; ncu prints
the counters.
"""
import argparse
import ast
import sys

import torch

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
from plan_variants import set_plan_constants  # noqa: E402
from sweep_outer import OPS  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--op", choices=sorted(OPS), default="sum")
    ap.add_argument("--mode", default=None, help="one of the op's modes (default: its first)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--shape", default="8192x8192")
    ap.add_argument("--dim", type=int, default=-1)
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--torch", action="store_true", help="torch's op instead of precred's")
    ap.add_argument("--set", action="append", default=[], metavar="CONST=VALUE",
                    help="a precred.plan constant for this run (a Python literal), as sweep_outer's variants")
    args = ap.parse_args()
    set_plan_constants({k: ast.literal_eval(v) for k, v in (a.split("=", 1) for a in args.set)}, ())
    ours, theirs, modes = OPS[args.op]
    mode = args.mode or modes[0]
    shape = tuple(int(s) for s in args.shape.split("x"))
    x = torch.randn(shape, device="cuda").to(getattr(torch, args.dtype))
    for _ in range(args.calls):
        if args.torch:
            theirs(x, args.dim)
        else:
            ours(x, args.dim, mode=mode)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
