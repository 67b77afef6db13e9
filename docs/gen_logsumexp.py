#!/usr/bin/env python3
"""Generate docs/logsumexp.md from exp_bench.json files written by bench/exp_suite.py.

    python docs/gen_logsumexp.py RUN/exp_bench.json [--out docs/logsumexp.md]

Needs only the JSON. Per run: device, versions, copy ceiling, one table per dtype x dim with GB/s and the
ratio to torch.logsumexp for each precred mode and FlagGems, the worst error of each result in ulps of
the output (against torch.logsumexp in fp64), and issue 4's speed goals for logsumexp.
"""
from __future__ import annotations

import sys

from page_cli import dtype_dim_tables, page_main, render_page, speed_goal_lines  # docs/page_cli.py: run from docs/


def _cell(r) -> str:
    if r is None or not r.get("median_ms"):
        return "–" if r is None else r.get("ok", "–")
    return f"{r['gbps']:.0f} ({r['ratio_to_torch']:.2f}×)" + (" **wrong**" if r["ok"] != "ok" else "")


def _ulps(r) -> str:
    return "–" if r is None or "worst_ulps" not in r else f"{r['worst_ulps']:.2g}"


def section(report: dict, path: str) -> list[str]:
    modes, recs, copy = report["modes"], report["records"], report.get("copy") or {}
    impls = [("torch", None)] + [("precred", m) for m in modes] + [("flaggems", None)]
    names = ["torch"] + [f"precred {m}" for m in modes] + ["FlagGems"]
    lines = [f"## {report['device']}", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in report.get("versions", {}).items()) + ".",
             f"Copy ceiling (1 GiB device-to-device, read + write): {copy.get('gbps', 0):.0f} GB/s. "
             f"{report['protocol']}. Cells: GB/s (ratio to torch.logsumexp); ulp = worst error over the "
             "rows in ulps of the output, against torch.logsumexp of an fp64 copy (\"wrong\": beyond 64).", ""]

    def cells(by):
        t = by.get(("torch", None))
        return ([f"{t['gbps']:.0f}" if t and t.get("gbps") else "–"] + [_cell(by.get(k)) for k in impls[1:]]
                + [_ulps(by.get(k)) for k in impls])
    lines += dtype_dim_tables(recs, names + [f"ulp {n}" for n in names], cells)
    lines += ["### Goals (issue 4, logsumexp)", ""]
    lines += speed_goal_lines(recs, modes, copy.get("gbps"), "torch.logsumexp", 5.0)
    return lines + [""]


def render(paths: list[str]) -> str:
    return render_page("logsumexp performance", "docs/gen_logsumexp.py", "bench/exp_suite.py", section, paths)


if __name__ == "__main__":
    sys.exit(page_main(render, __doc__.split("\n")[0], "exp_bench.json files from bench/exp_suite.py"))
