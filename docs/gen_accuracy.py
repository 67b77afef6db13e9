#!/usr/bin/env python3
"""Generate docs/accuracy.md from one or more accuracy.json files written by bench/accuracy.py.

    python docs/gen_accuracy.py RUN/accuracy.json [MORE.json ...] [--out docs/accuracy.md]

Needs only the JSON (no GPU, no precred). One section per JSON file, one table per input family:
rows are the lengths n, columns torch.sum and each precred mode, cells "median / max ulp, % correctly rounded".
"""
from __future__ import annotations

import math
import sys

from page_cli import page_main, render_page  # docs/page_cli.py: the scripts run from docs/


def fmt_ulp(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, str) or (isinstance(v, float) and (math.isinf(v) or math.isnan(v))):
        return str(v)
    if v == 0:
        return "0"
    if v >= 100:
        return f"{v:.3g}"
    return f"{v:.2f}"


def cell(r) -> str:
    if r is None:
        return "–"
    if r.get("error"):
        return "ERROR"
    frac = r.get("frac_correctly_rounded")
    pct = f"{100 * frac:.0f}%" if frac is not None else "–"
    return f"{fmt_ulp(r.get('median_ulp'))} / {fmt_ulp(r.get('max_ulp'))}, {pct}"


def log2_str(n: int) -> str:
    return f"2^{n.bit_length() - 1}" if n > 0 and n & (n - 1) == 0 else str(n)


def section(report: dict, path: str) -> list[str]:
    out: list[str] = []
    recs = report.get("records", [])
    impls = list(dict.fromkeys((r["impl"], r["mode"]) for r in recs))
    v = report.get("versions", {})
    out.append(f"## {report.get('device', 'unknown device')}")
    out.append("")
    out.append(f"- Source: `{path}`, run of {report.get('date', '?')}")
    out.append("- Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val is not None))
    out.append(f"- Input dtype {report.get('dtype', 'float32')}, output the same; each row of a (rows, n) tensor is "
               "reduced over dim=-1 and compared with its exact sum (validation.oracle, exact rational "
               "arithmetic) rounded to the output format.")
    if report.get("device_kind") == "cpu":
        out.append("- **CPU run (Triton interpreter)**: GPU-only rounding (fma contraction, approximate "
                   "division) does not show here.")
    out.append("- Cells: median ulp / max ulp over the rows, then the % of rows whose result equals the "
               "correctly rounded sum.")
    out.append("")
    errors = [r for r in recs if r.get("error")]
    for family in dict.fromkeys(r["family"] for r in recs):
        rs = [r for r in recs if r["family"] == family]
        out.append(f"### {family}")
        out.append("")
        head = ["n", "rows"] + [("torch.sum" if impl == "torch" else f"{mode}") for impl, mode in impls]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "|".join(["---:"] * len(head)) + "|")
        for n in sorted({r["n"] for r in rs}):
            by = {(r["impl"], r["mode"]): r for r in rs if r["n"] == n}
            rows = next(iter(by.values())).get("rows", "")
            out.append("| " + " | ".join([log2_str(n), str(rows)] + [cell(by.get(k)) for k in impls]) + " |")
        out.append("")
    if errors:
        out.append("Errors:")
        out.append("")
        for r in errors[:10]:
            out.append(f"- {r['family']} n={r['n']} {r['impl']} {r.get('mode') or ''}: "
                       f"`{str(r['error']).replace('`', '')}`")
        out.append("")
    return out


def render(paths: list[str]) -> str:
    return render_page("precred accuracy: sum", "docs/gen_accuracy.py", "bench/accuracy.py", section, paths)


def main(argv=None) -> int:
    return page_main(render, __doc__.split("\n")[0], "accuracy.json files from bench/accuracy.py", argv)


if __name__ == "__main__":
    sys.exit(main())
