#!/usr/bin/env python3
"""Generate docs/variance.md from var_bench.json files written by bench/var_suite.py.

    python docs/gen_variance.py RUN/var_bench.json [--out docs/variance.md]

Needs only the JSON. Per run: device, versions, copy ceiling, one table per dtype x dim with GB/s and the
ratio to torch.var_mean for each precred mode and FlagGems, the worst relative error of each result
(in units of the dtype's u), the goals of issue 3 for var_mean, and the offset-1e3 accuracy row.
"""
from __future__ import annotations

import sys

from page_cli import dtype_dim_tables, page_main, render_page, speed_goal_lines  # docs/page_cli.py: the scripts run from docs/


def _cell(r) -> str:
    if r is None or not r.get("median_ms"):
        return "–" if r is None else r.get("ok", "–")
    text = f"{r['gbps']:.0f} ({r['ratio_to_torch']:.2f}×)"
    return text + (" **wrong**" if r["ok"] != "ok" else "")


def _err(r) -> str:
    return "–" if r is None or "rel_err_var_ulps" not in r else f"{r['rel_err_var_ulps']:.2g}"


def section(report: dict, path: str) -> list[str]:
    modes = report["modes"]
    recs = report["records"]
    copy = report.get("copy") or {}
    lines = [f"## {report['device']}", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in report.get("versions", {}).items()) + ".",
             f"Copy ceiling (1 GiB device-to-device, read + write): {copy.get('gbps', 0):.0f} GB/s. "
             f"{report['protocol']}. Cells: GB/s (ratio to torch.var_mean); "
             "err = worst relative error of the variance over the rows, in units of u of the input dtype, "
             "against torch.var_mean in fp64 (\"wrong\": beyond 64 u).", ""]
    impls = [("precred", m) for m in modes] + [("flaggems", None)]

    def cells(by):
        t = by.get(("torch", None))
        return ([f"{t['gbps']:.0f}" if t and t.get("gbps") else "–"] + [_cell(by.get(k)) for k in impls]
                + [_err(t)] + [_err(by.get(k)) for k in impls])
    columns = (["torch"] + [f"precred {m}" for m in modes] + ["FlagGems", "err torch"]
               + [f"err {m}" for m in modes] + ["err FlagGems"])
    lines += dtype_dim_tables(recs, columns, cells)
    # Issue 3's var_mean goals.
    lines += ["### Goals (issue 3, var_mean)", ""]
    lines += speed_goal_lines(recs, modes, copy.get("gbps"), "torch.var_mean", 1.0)
    acc = report.get("offset_accuracy") or {}
    if acc:
        lines += ["", "### Accuracy at a mean offset of 1e3 (fp32, 64 rows of n = 8192, spread 1)", "",
                  "| implementation | max relative error of var |", "|---|---|"]
        lines += [f"| {k} | {v:.2e} |" for k, v in acc.items()]
        lines += ["", "(fp32's u = 5.96e-08; the issue's goal for the default mode: ≤ 4 ulp, 2.4e-07.)"]
    return lines + [""]


def render(paths: list[str]) -> str:
    return render_page("var_mean performance and accuracy", "docs/gen_variance.py", "bench/var_suite.py",
                       section, paths)


if __name__ == "__main__":
    sys.exit(page_main(render, __doc__.split("\n")[0], "var_bench.json files from bench/var_suite.py"))
