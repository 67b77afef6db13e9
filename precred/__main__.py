"""`python -m precred`: a one-screen tour -- one ill-conditioned sum in every mode, against the exact value.

Runs on the CPU (Triton interpreter) or on a GPU when one is present. The full error report, with
plots and JSON, is a separate command.
"""
import argparse

import numpy as np
import torch

import precred
from validation.generators import ill_conditioned, large_offset
from validation.oracle import exact_sum, ulp_error


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m precred", description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096, help="elements per row (default 4096)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    rows = {
        "normal": torch.from_numpy(rng.standard_normal(args.n).astype(np.float32)),
        "offset 1e4, spread 1": large_offset(args.n, 1e4, 1.0, rng, torch.float32),
        "condition 1e8": ill_conditioned(args.n, 1e8, rng, torch.float32),
    }
    print(f"precred {precred.__version__} on {args.device}: fp32 sum of {args.n} elements, "
          f"error in ulps of the exact sum (0.5 = correctly rounded)")
    header = f"{'data':<22}" + "".join(f"{name:>12}" for name in ("torch", *precred.MODES))
    print(header)
    for label, row in rows.items():
        exact = exact_sum(row)
        x = row.to(args.device)
        cells = [ulp_error(torch.sum(x).item(), exact, torch.float32)]
        cells += [ulp_error(precred.sum(x, mode=mode).item(), exact, torch.float32) for mode in precred.MODES]
        print(f"{label:<22}" + "".join(f"{c:>12.4g}" for c in cells))
    for name, m in precred.MODES.items():
        print(f"  {name:<9} {m.summary}")
    print("Each mode's guarantee: precred.error_bound(mode, n, S1, s, dtype, depth=plan depth).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
