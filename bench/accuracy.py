#!/usr/bin/env python3
"""Accuracy of sum in ulps against the exact, correctly rounded result, for every mode and torch.sum.

    python3 bench/accuracy.py --out DIR --device cuda|cpu [--max-log2 24]

For n = 2^12, 2^14, ..., 2^max and the families normal and uniform (validation.generators), float32:
a (rows, n) tensor with rows = max(1, 2^22 // n) capped at 64 is reduced over dim=-1 by torch.sum and
by precred.sum in every mode of precred.MODES. Each row's result is compared with the exact sum of that
row (validation.oracle.exact_sum) rounded to float32: error in ulps (ulp_error), and whether the result
equals the correctly rounded sum. Per (family, n, impl): median and max ulp over rows, fraction of rows
correctly rounded. Writes DIR/accuracy.json and prints a short table.

On the CPU (--device cpu) the kernels run under Triton's interpreter (TRITON_INTERPRET=1 is set here before
triton is imported): it cannot show GPU-only rounding (fma contraction, approximate division), so numbers
that are to be published come from --device cuda.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for _path in (REPO, REPO / "bench"):   # precred, and the bench helpers
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
from report_versions import versions  # noqa: E402

ROW_ELEMS = 2**22  # rows = max(1, ROW_ELEMS // n), capped at MAX_ROWS
MAX_ROWS = 64


def log(*args) -> None:
    print(*args, flush=True)


def rows_for(n: int, max_rows: int = MAX_ROWS, row_elems: int = ROW_ELEMS) -> int:
    return min(max_rows, max(1, row_elems // n))


def device_name(device: str) -> str:
    import torch
    if device == "cuda":
        return torch.cuda.get_device_name(0)
    return f"CPU ({platform.processor() or platform.machine()}), Triton interpreter"


def summarize(ulps: list[float], correct: list[bool]) -> dict:
    return {"median_ulp": statistics.median(ulps), "max_ulp": max(ulps),
            "frac_correctly_rounded": sum(correct) / len(correct), "rows": len(ulps)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--min-log2", type=int, default=12)
    ap.add_argument("--max-log2", type=int, default=None, help="default 16 on cpu, 24 on cuda")
    ap.add_argument("--step", type=int, default=2, help="log2 step between sizes (default 2)")
    ap.add_argument("--families", default="normal,uniform", help="comma-separated validation.generators names")
    ap.add_argument("--max-rows", type=int, default=MAX_ROWS)
    ap.add_argument("--row-elems", type=int, default=ROW_ELEMS, help="rows = max(1, ROW_ELEMS // n), capped")
    ap.add_argument("--seed", type=int, default=12345)
    args = ap.parse_args(argv)
    if args.max_log2 is None:
        args.max_log2 = 24 if args.device == "cuda" else 16
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # must precede the first import of triton

    import numpy as np
    import torch

    import precred
    from validation import generators
    from validation.oracle import exact_sum, round_to, ulp_error

    if args.device == "cuda" and not torch.cuda.is_available():
        log("no CUDA device (use --device cpu)")
        return 2
    modes = list(precred.MODES)
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    impls = [("torch", None)] + [("precred", m) for m in modes]
    out_dir = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {"device": device_name(args.device), "device_kind": args.device, "versions": versions(),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "dtype": "float32", "modes": modes, "families": families,
              "definition": "ulp error of each row's sum against the exact row sum (validation.oracle), "
                            "correctly rounded = result equals the exact sum rounded to float32",
              "records": []}
    t_start = time.monotonic()
    log(f"[accuracy] {report['device']}: families {families}, n = 2^{args.min_log2}..2^{args.max_log2}, "
        f"impls torch + {modes}; cells: median ulp / max ulp / % of rows correctly rounded")

    for fi, family in enumerate(families):
        gen = getattr(generators, family)
        for log2n in range(args.min_log2, args.max_log2 + 1, args.step):
            n = 2**log2n
            rows = rows_for(n, args.max_rows, args.row_elems)
            rng = np.random.default_rng([args.seed, fi, log2n])
            x_cpu = torch.stack([gen(n, rng, torch.float32).reshape(-1) for _ in range(rows)])
            assert x_cpu.dtype == torch.float32 and x_cpu.shape == (rows, n), (x_cpu.dtype, x_cpu.shape)
            t0 = time.monotonic()
            exact = [exact_sum(x_cpu[r]) for r in range(rows)]
            rounded = [round_to(e, torch.float32) for e in exact]
            t_exact = time.monotonic() - t0
            x = x_cpu.to(args.device)
            line = [f"{family:<8} n=2^{log2n:<2} rows={rows:<3}"]
            for impl, mode in impls:
                rec = {"family": family, "n": n, "impl": impl, "mode": mode, "rows": rows}
                try:
                    if impl == "torch":
                        out = torch.sum(x, dim=-1)
                    else:
                        out = precred.sum(x, dim=-1, mode=mode)
                    rec["out_dtype"] = str(out.dtype).replace("torch.", "")
                    vals = out.to(torch.float32).cpu().tolist()  # ulps are float32's, whatever came back
                    ulps = [float(ulp_error(float(v), e, torch.float32)) for v, e in zip(vals, exact)]
                    correct = [float(v) == float(rr) for v, rr in zip(vals, rounded)]
                    rec.update(summarize(ulps, correct))
                    line.append(f"{mode or impl} {rec['median_ulp']:.2g}/{rec['max_ulp']:.2g}"
                                f"/{100 * rec['frac_correctly_rounded']:.0f}%")
                except Exception as e:  # one broken mode must not hide the others' numbers
                    rec.update({"median_ulp": None, "max_ulp": None, "frac_correctly_rounded": None,
                                "error": f"{type(e).__name__}: {e}"[:300]})
                    line.append(f"{mode or impl} ERROR")
                report["records"].append(rec)
            log("  ".join(line) + f"  (exact {t_exact:.1f} s)")
            del x
    report["seconds"] = round(time.monotonic() - t_start, 1)
    (out_dir / "accuracy.json").write_text(json.dumps(report, indent=1))
    log(f"[accuracy] done in {report['seconds']} s: cells are median/max ulp/% correctly rounded; "
        f"wrote {out_dir / 'accuracy.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
