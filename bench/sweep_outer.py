"""Sweep the outer schedule's planner constants on the dim=0 DESIGN.md shapes (GPU; one device call).

    python3 bench/sweep_outer.py [--op logsumexp|var|amax|argmax] [--variants NAME,...] [--dim -1]
                                 [--variant "name:CONST=value;CONST=value"] [--shapes 16x262144,...]
                                 [--dtypes float32,bfloat16] [--modes fast,kahan] [--copy]
Prints GB/s and the ratio to torch's op per planner variant (constants of precred.plan set as VARIANTS
lists them), case and mode, to choose the outer schedule's constants from measurements: the layout of
chained first passes and the column floor of the passes that merge partial states (add variants for
others with --variant, e.g. "tile8k:TILE_BYTES=8192"). --dim -1 times the same shapes over their
contiguous axis (the inner schedule's constants). Each result is also checked to repeat bitwise.
"""
import argparse
import sys

import torch

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
import precred  # noqa: E402
from plan_variants import median_ms, parse_variant, plan_constants  # noqa: E402

SHAPES = [(16, 262144), (1024, 65536), (8192, 8192), (65536, 1024), (262144, 256)]
# The ops it times (precred's and torch's call, x and dim given) and their modes.
OPS = {
    "sum": (precred.sum, torch.sum, ("fast", "pairwise", "kahan", "fp64")),
    "logsumexp": (precred.logsumexp, torch.logsumexp, ("fast", "fp64")),
    "var": (precred.var, torch.var, ("fast", "fp64")),
    # The extrema have no modes: "planned" is the planner's schedule.
    "amax": (lambda x, dim, mode: precred.amax(x, dim), torch.amax, ("planned",)),
    "argmax": (lambda x, dim, mode: precred.argmax(x, dim), torch.argmax, ("planned",)),
    # GB/s of the input alone, as the reductions' (the output is as large: double it for input + output)
    "softmax": (lambda x, dim, mode: precred.softmax(x, dim, mode=mode), lambda x, dim: torch.softmax(x, dim),
                ("fast", "fp64")),
    "log_softmax": (lambda x, dim, mode: precred.log_softmax(x, dim, mode=mode),
                    lambda x, dim: torch.log_softmax(x, dim), ("fast", "fp64")),
}
# Each variant: the precred.plan constants it sets (the rest keep their defaults).
# Variants measured on the H100 and dropped (stop note of 2026-11-24's sixth session): wide-layout
# rows of 512 bytes (256 bf16 columns: kahan bf16 1024x65536 1820 -> 1231 GB/s), pairwise first
# passes in the wide layout on narrow kept axes (262144x256 bf16 1613 -> 105), wide-layout lanes
# narrowed to 1 or 2 tiles (16x262144 bf16 fast 641 -> 136).
VARIANTS = {
    "default": {},
    "state0": {"STATE_PASS_MIN_COLUMNS": 0},
    "state64": {"STATE_PASS_MIN_COLUMNS": 64},
    "chains-wide": {"OUTER_CHAINS_IN_REGISTERS": False},
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--op", choices=sorted(OPS), default="sum")
    ap.add_argument("--modes", help="comma-separated modes of --op (default: all of them)")
    ap.add_argument("--variant", action="append", default=[],
                    help='extra variant "name:CONST=value;CONST=value" (values: Python literals)')
    ap.add_argument("--dim", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1, help="times each variant runs (noise check)")
    ap.add_argument("--shapes", help="comma-separated RxC shapes (default: DESIGN.md's five)")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--copy", action="store_true", help="also time a copy of each case's size")
    args = ap.parse_args()
    ours, theirs, all_modes = OPS[args.op]
    modes = args.modes.split(",") if args.modes else list(all_modes)
    variants = dict(VARIANTS)
    for spec in args.variant:
        name, constants = parse_variant(spec)
        variants[name] = constants
    dim = args.dim
    print(torch.cuda.get_device_name())
    shapes = [tuple(int(n) for n in s.split("x")) for s in args.shapes.split(",")] if args.shapes else SHAPES
    cases = [(s, getattr(torch, d)) for d in args.dtypes.split(",") for s in shapes]
    inputs = {c: torch.randn(c[0], device="cuda", dtype=c[1]) for c in cases}
    base = {c: median_ms(lambda c=c: theirs(inputs[c], dim)) for c in cases}
    print("torch GB/s: " + " ".join(f"{c[0][0]}x{c[0][1]}{str(c[1])[6:]}="
                                    f"{inputs[c].numel() * inputs[c].element_size() / base[c] / 1e6:.0f}"
                                    for c in cases))
    if args.copy:   # the copy ceiling at each case's size (bytes read + written), beside the 1 GiB one
        sizes = sorted({inputs[c].numel() * inputs[c].element_size() for c in cases} | {1 << 30})
        cells = []
        for size in sizes:
            src = torch.empty(size // 4, device="cuda").normal_()
            dst = torch.empty_like(src)
            cells.append(f"{size >> 20} MiB {2 * size / median_ms(lambda: dst.copy_(src)) / 1e6:.0f}")
            del src, dst
        print("copy GB/s: " + ", ".join(cells))
    names = args.variants.split(",") + [spec.partition(":")[0] for spec in args.variant]
    for name in names * args.repeat:
        with plan_constants(variants[name]):
            for c in cases:
                x = inputs[c]
                cells = []
                for mode in modes:
                    reference = ours(x, dim, mode=mode)
                    ms = median_ms(lambda: ours(x, dim, mode=mode))
                    gbps = x.numel() * x.element_size() / ms / 1e6
                    ok = torch.equal(reference, ours(x, dim, mode=mode))
                    cells.append(f"{mode[:4]} {gbps:5.0f} ({base[c] / ms:4.2f}){'' if ok else ' NONDET'}")
                print(f"{name:22s} {c[0][0]:6d}x{c[0][1]:<6d} {str(c[1])[6:]:8s} " + "  ".join(cells), flush=True)


if __name__ == "__main__":
    main()
