#!/usr/bin/env python3
"""Generate docs/extrema.md from extrema_bench.json files written by bench/extrema_suite.py.

    python docs/gen_extrema.py RUN/extrema_bench.json [--out docs/extrema.md]

Needs only the JSON. Per run and op (amax, argmax, prod): device, versions, copy ceiling, one table per
dtype x dim with GB/s and the ratio to torch's op for each precred variant (extrema: the planner's
schedule and the atomic one where it applies; prod: each mode), and issue 5's speed goals.
"""
from __future__ import annotations

import sys

from page_cli import dtype_dim_tables, page_main, render_page  # docs/page_cli.py: run from docs/


def _cell(r) -> str:
    if r is None or not r.get("median_ms"):
        return "–" if r is None else r.get("ok", "–")
    return f"{r['gbps']:.0f} ({r['ratio_to_torch']:.2f}×)" + (" **wrong**" if r["ok"] != "ok" else "")


def goal_lines(recs: list[dict], copy_gbps) -> list[str]:
    """Issue 5's goals for the planned extrema: >= 1.0x torch everywhere, >= 1.3x on (16, 262144) fp32
    dim=-1, >= 90% of the copy on the 2^28 full reduction."""
    planned = [r for r in recs if r["impl"] == "precred" and r["mode"] == "planned" and r.get("ratio_to_torch")]
    lines = []
    for op in dict.fromkeys(r["op"] for r in planned):
        mine = [r for r in planned if r["op"] == op]
        miss = [r for r in mine if r["ratio_to_torch"] < 1.0]
        worst = min(mine, key=lambda r: r["ratio_to_torch"])
        lines.append(f"- `{op}` ≥ 1.0× torch everywhere: {'PASS' if not miss else 'FAIL'} — {len(miss)}/{len(mine)} "
                     f"miss, worst {worst['ratio_to_torch']:.2f}× ({worst['case']})")
        for r in mine:
            if r["case"] == f"{op} 16x262144 d-1 f32":
                lines.append(f"- `{op}` (16, 262144) fp32 dim=-1 ≥ 1.3× torch: "
                             f"{'PASS' if r['ratio_to_torch'] >= 1.3 else 'FAIL'} — {r['ratio_to_torch']:.2f}×")
            if "full" in r["case"] and copy_gbps:
                frac = r["gbps"] / copy_gbps
                lines.append(f"- `{op}` {r['case']}: ≥ 90% of copy: {'PASS' if frac >= 0.9 else 'FAIL'} — {frac:.2f}")
    return lines


def section(report: dict, path: str) -> list[str]:
    recs, copy = report["records"], report.get("copy") or {}
    lines = [f"## {report['device']}", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in report.get("versions", {}).items()) + ".",
             f"Copy ceiling (1 GiB device-to-device, read + write): {copy.get('gbps', 0):.0f} GB/s. "
             f"{report['protocol']}. Cells: GB/s (ratio to torch's op). Extrema: `planned` is the planner's "
             "schedule (inner / outer / split), `atomic` the atomic schedule forced where the plan splits an "
             f"inner pass (the planner takes it: {report.get('atomic_extrema')}). The 2^28-element full "
             "reduction is listed under dim=-1.", ""]
    for op in dict.fromkeys(r["op"] for r in recs):
        mine = [r for r in recs if r["op"] == op]
        modes = report["modes"][op]
        impls = [("precred", m) for m in modes]

        def cells(by, impls=impls):
            t = by.get(("torch", None))
            return [f"{t['gbps']:.0f}" if t and t.get("gbps") else "–"] + [_cell(by.get(k)) for k in impls]
        lines += [f"### {op}", ""] + [line.replace("### ", "#### ") for line in
                                      dtype_dim_tables(mine, ["torch"] + [f"precred {m}" for m in modes], cells)]
    lines += ["### Goals (issue 5)", ""] + goal_lines(recs, copy.get("gbps")) + [""]
    return lines


def render(paths: list[str]) -> str:
    return render_page("amax, argmax, prod performance", "docs/gen_extrema.py", "bench/extrema_suite.py", section, paths)


if __name__ == "__main__":
    sys.exit(page_main(render, __doc__.split("\n")[0], "extrema_bench.json files from bench/extrema_suite.py"))
