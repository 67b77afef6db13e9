#!/usr/bin/env python3
"""Generate docs/exact.md from bench/exact_fallback.py's JSON and bench/gpu_suite.py's bench.json.

    cd docs && python gen_exact.py data/exact-fallback-h100.json data/bench-h100.json --out exact.md

Needs only the JSON. First file: the cost of the exact mode's two stages (ordinary rows, which the filter
certifies, cancelling rows, which the superaccumulator recomputes, and ordinary data with one cancelling
output). Second: the exact column of the
sum benchmark, as a ratio to `fast` (issue goal: >= 0.9 on inputs of 16 MiB and more).
"""
from __future__ import annotations

import sys

from page_cli import page_main, render_page  # docs/page_cli.py: the scripts run from docs/


def section(report: dict, path: str) -> list[str]:
    """exact_fallback.py's JSON (records carry "data") or gpu_suite.py's bench.json."""
    if report["records"] and "data" in report["records"][0]:
        return fallback_section(report)
    return bench_section(report)


def fallback_section(fallback: dict) -> list[str]:
    lines = ["`precred.sum(x, mode=\"exact\")` returns the exact sum rounded once (ties to even). Stage 1, on the "
             "shared schedules, is a filter: fp64 accumulation with a proven a-posteriori error bound, which "
             "certifies most outputs (and knows the exact sum outright when no addition could have rounded); "
             "stage 2, a launch after it, recomputes the others with an integer superaccumulator (16 int64 "
             "limbs) -- or, where the filter is one pass over small inputs' rows or over short columns "
             "(`precred.plan.exact_in_one_launch`), the filter's own programs do, in the same launch.", "",
             f"## Both stages, {fallback['device']}", "",
             "GB/s of input read (median `do_bench`). *ordinary*: N(0, 1) data. *cancelling*: each row is "
             "a·2^k (k = 0..60) and the same values negated, with one pair replaced by (1, 0): the exact sum "
             "is 1, which fp64 accumulation (torch on a float64 copy included) loses entirely. *one cancelling*: "
             "ordinary data but for one such output, the price of a lone uncertified row or column. The last "
             "column says how many outputs the filter left to the superaccumulator and checks the cancelling "
             "results.", "",
             "| shape | dim | dtype | data | torch | fast | exact | exact / fast | check |",
             "|---|---:|---|---|---:|---:|---:|---:|---|"]
    for r in fallback["records"]:
        g = r["gbps"]
        lines.append(f"| {tuple(r['shape'])} | {r['dim']} | {r.get('dtype', 'float32')} | {r['data']} | {g['torch']:.0f} | {g['fast']:.0f} | "
                     f"{g['exact']:.0f} | {g['exact'] / g['fast']:.2f} | {r['note'] or '–'} |")
    return lines + [""]


def bench_section(bench: dict) -> list[str]:
    # The run's label, else the tree it timed (refresh_all runs pass no label; docs/refresh.py files the git).
    label = bench.get("label") or bench.get("versions", {}).get("git", "").split(" ")[0]
    lines = [f"## Sum benchmark, {bench['device']} (`bench/gpu_suite.py`" + (f", `{label}`" if label else "") + ")", "",
             "| case | input MiB | fast GB/s | exact GB/s | exact / fast |", "|---|---:|---:|---:|---:|"]
    recs = {(r["case"], r["mode"]): r for r in bench["records"] if r["impl"] == "precred"}
    for r in bench["records"]:
        if r["impl"] == "torch":
            fast, exact = recs.get((r["case"], "fast")), recs.get((r["case"], "exact"))
            if fast and exact and fast.get("gbps") and exact.get("gbps"):
                lines.append(f"| {r['case']} | {r['in_bytes'] / 2**20:.4g} | {fast['gbps']:.0f} | {exact['gbps']:.0f} | "
                             f"{exact['gbps'] / fast['gbps']:.2f} |")
    goals = [g for g in bench.get("goals", []) if "exact" in g["goal"]]
    if goals:
        lines += ["", "Goal: " + "; ".join(f"{g['goal']}: **{g['status']}** ({g['detail']})" for g in goals)]
    return lines + [""]


def render(paths: list[str]) -> str:
    return render_page('precred performance: mode="exact"', "docs/gen_exact.py",
                       "bench/exact_fallback.py and bench/gpu_suite.py", section, paths)


def main(argv=None) -> int:
    return page_main(render, __doc__.split("\n")[0], "exact_fallback JSON, then bench.json", argv)


if __name__ == "__main__":
    sys.exit(main())
