#!/usr/bin/env python3
"""What the exact mode's second stage costs: precred.sum(mode="exact") on ordinary data (the filter
certifies every output) and on cancelling rows (no output can be certified: every one is recomputed by
the integer superaccumulator), next to mode="fast" and torch.sum, in GB/s of input read, on the GPU.

Cancelling rows: a * 2^k (a ~ N(0, 1), k uniform in 0..60 per element) for half the row, the same
values negated in the other half, and the last pair replaced by (1, 0). The exact sum is 1; the values
span ~85 bits, so fp64 sums round, and the filter's bound (2^-53 times the sum of its partial sums'
magnitudes, ~2^62 here) is far above fp32's half-ulp of 1 on every row. The table says how many outputs the filter left to the
recompute launch (counted by spying on the launcher once, outside the timings). One cancelling: ordinary
data but for one output, a cancelling row (or column): the price of a lone uncertified output, which
the recompute spreads over chunks of its row (precred.plan.plan_recompute).

    python bench/exact_fallback.py [--json OUT.json] [--set CONST=VALUE ...] [--only REGEX]

--set sets a precred.plan constant first (a Python literal); --only keeps the cases whose
"shape dim dtype" label matches.
"""
import argparse
import json
import re
import sys

import torch
import triton.testing

import precred
from plan_variants import parse_assignments, set_plan_constants  # bench/, beside this script
from precred import launch

CASES = [((1024, 65536), -1, torch.float32), ((65536, 1024), -1, torch.float32), ((8192, 8192), 0, torch.float32),
         ((65536, 1024), 0, torch.float32),
         ((2 ** 28,), None, torch.float32), ((16, 262144), -1, torch.float32), ((16, 262144), 0, torch.float32),
         ((65536, 1024), -1, torch.bfloat16),
         ((8192, 8192), 0, torch.bfloat16)]


def cancelling_rows(rows: int, n: int, generator) -> torch.Tensor:
    """(rows, n) fp32 whose every row sums exactly to 1 through cancellation of values up to ~2^62."""
    half = n // 2
    a = torch.randn(rows, half, generator=generator) * 2.0 ** torch.randint(0, 61, (rows, half), generator=generator)
    x = torch.zeros(rows, n)
    x[:, :half], x[:, half:2 * half] = a, -a
    x[:, half - 1], x[:, 2 * half - 1] = 1.0, 0.0
    return x


def _exact_with_flags(data, dim):
    """precred.sum(mode="exact") once through the full launch path (no cached recipe), with the number
    of outputs the filter did not certify, read once the call has run from the flags the recompute
    launch was built with (None: no recompute launch, the filter recomputed in its own launch)."""
    original, seen = launch._launch_recompute, []

    def spy(view, source, out, flags, *rest):
        seen.append(flags)
        return original(view, source, out, flags, *rest)

    launch._launch_recompute, saved = spy, dict(launch._RECIPES)
    launch._RECIPES.clear()
    try:
        from precred import eager
        eager._CALLS.clear()
        got = precred.sum(data, dim, mode="exact")
        torch.cuda.synchronize()
    finally:
        launch._launch_recompute = original
        launch._RECIPES.update(saved)
    return got, (int((seen[-1] == 0).sum()) if seen else None)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--set", action="append", default=[], metavar="CONST=VALUE")
    ap.add_argument("--only", default=None, help='regex on "shape dim dtype", e.g. "(8192, 8192) 0 bfloat16"')
    args = ap.parse_args(argv)
    set_plan_constants(parse_assignments(args.set), ())
    g = torch.Generator().manual_seed(0)
    records = []
    print(f"device: {torch.cuda.get_device_name(0)}")
    print(f"{'shape':<16} {'dim':>4} {'dtype':<9} {'data':<14} {'torch':>7} {'fast':>7} {'exact':>7}  exact/fast (GB/s)")
    for shape, dim, dtype in CASES:
        if args.only and not re.search(args.only, f"{shape} {dim} {str(dtype)[6:]}"):
            continue
        ordinary = torch.randn(shape, generator=g).to(dtype).cuda()
        n = shape[dim] if dim is not None else ordinary.numel()
        outputs = ordinary.numel() // n
        hard = cancelling_rows(outputs, n, g)
        one = torch.randn(outputs, n, generator=g)
        one[outputs // 2] = hard[outputs // 2]
        hard, one = ((t.t().contiguous() if dim == 0 else t.reshape(shape)).to(dtype).cuda() for t in (hard, one))
        for label, data in (("ordinary", ordinary), ("one cancelling", one), ("cancelling", hard)):
            calls = {"torch": (lambda: torch.sum(data, dim)) if dim is not None else (lambda: torch.sum(data)),
                     "fast": lambda: precred.sum(data, dim, mode="fast"),
                     "exact": lambda: precred.sum(data, dim, mode="exact")}
            gbps = {}
            for impl, fn in calls.items():
                fn()
                gbps[impl] = data.numel() * data.element_size() / (triton.testing.do_bench(fn) * 1e-3) / 1e9
            got, uncertified = _exact_with_flags(data, dim)
            note = (f"{uncertified}/{got.numel()} recomputed" if uncertified is not None
                    else "recomputed in the filter's launch")
            if label == "cancelling":
                note += ", all exactly 1.0" if bool((got == 1.0).all()) else ", WRONG RESULTS"
            elif label == "one cancelling":
                note += ", exactly 1.0" if float(got.flatten()[outputs // 2]) == 1.0 else ", WRONG RESULT"
            records.append({"shape": list(shape), "dim": dim, "dtype": str(dtype)[6:], "data": label, "gbps": gbps,
                            "note": note, "recomputed": uncertified, "outputs": got.numel()})
            print(f"{str(shape):<16} {str(dim):>4} {str(dtype)[6:]:<9} {label:<14} {gbps['torch']:7.0f} {gbps['fast']:7.0f} "
                  f"{gbps['exact']:7.0f}  {gbps['exact'] / gbps['fast']:.2f}  {note}", flush=True)
        del ordinary, hard, one
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "records": records}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
