"""How much of a reduction's distance from the copy ceiling the timing protocol makes (GPU; one call).

    python3 bench/flush_effect.py [--shapes 1024x65536,8192x8192] [--dtypes float32,bfloat16] [--mode fast]

DESIGN.md's protocol times with triton.testing.do_bench, which zeroes a 256 MB buffer before every
call to flush L2: the call then starts with L2 full of dirty lines, written back to HBM while it reads.
A copy writes as much as it reads; a reduction only reads. This prints, per case, GB/s (bytes read +
written) of torch.sum, precred.sum and a copy of the input's bytes, timed (a) by do_bench and (b) by
CUDA events around calls that cycle through enough copies of the input to miss L2 on every read,
without a flush -- no dirty lines left behind.
"""
import argparse
import sys

import torch

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
import precred  # noqa: E402
# the protocol's timing: do_bench, L2 flushed
from gpu_suite import bench_ms  # noqa: E402

L2_MISS_BYTES = 1 << 30   # copies of the input cycled through: together well beyond the 50 MB of L2


def rotating_ms(fn, args_list, rounds: int = 5) -> float:
    """Median over rounds of the mean time of one call, each round one call on every copy in turn."""
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for args in args_list:
            fn(*args)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / len(args_list))
    return sorted(times)[rounds // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1024x65536,8192x8192")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--mode", default="fast")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), "GB/s (bytes read + written): do_bench (L2 flushed) / rotating inputs")
    for shape in [tuple(int(n) for n in s.split("x")) for s in args.shapes.split(",")]:
        for dtype in [getattr(torch, d) for d in args.dtypes.split(",")]:
            x = torch.randn(shape, device="cuda", dtype=dtype)
            copies = max(2, L2_MISS_BYTES // (x.numel() * x.element_size()))
            xs = [x] + [torch.randn_like(x) for _ in range(copies - 1)]
            outs = [torch.empty_like(t) for t in xs]
            cases = {
                "torch.sum": (lambda t: torch.sum(t, -1), [(t,) for t in xs], x.numel() * x.element_size()),
                f"precred {args.mode}": (lambda t: precred.sum(t, -1, mode=args.mode), [(t,) for t in xs],
                                         x.numel() * x.element_size()),
                "copy": (lambda d, s: d.copy_(s), list(zip(outs, xs)), 2 * x.numel() * x.element_size()),
            }
            cells = []
            for name, (fn, args_list, moved) in cases.items():
                fn(*args_list[0])
                cells.append(f"{name} {moved / bench_ms(lambda: fn(*args_list[0])) / 1e6:5.0f} / "
                             f"{moved / rotating_ms(fn, args_list) / 1e6:5.0f}")
            print(f"{shape[0]}x{shape[1]} {str(dtype)[6:]:8s} " + "   ".join(cells), flush=True)
            del xs, outs


if __name__ == "__main__":
    main()
