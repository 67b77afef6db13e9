#!/usr/bin/env python3
"""Generate docs/logsumexp.md from exp_bench.json files written by bench/exp_suite.py.

    python docs/gen_logsumexp.py RUN/exp_bench.json [--out docs/logsumexp.md]

Needs the JSON and precred (the mode each case's default runs). Per run and op (logsumexp, softmax,
log_softmax, logsumexp of log-probabilities where the run has it): device, versions, copy ceiling, one table per dtype x dim with GB/s and the ratio to torch's op for each precred mode, FlagGems and Liger, the
worst error of each result in ulps (against torch's op in fp64), and issue 4's speed goals.
"""
from __future__ import annotations

import sys

import torch

from precred.modes import DEFAULT_LOGSUMEXP_MODE, softmax_mode
from page_cli import dtype_dim_tables, page_main, render_page, speed_goal_lines  # docs/page_cli.py: run from docs/


def _cell(r) -> str:
    if r is None or not r.get("median_ms"):
        return "–" if r is None else r.get("ok", "–")
    return f"{r['gbps']:.0f} ({r['ratio_to_torch']:.2f}×)" + (" **wrong**" if r["ok"] != "ok" else "")


def _ulps(r) -> str:
    return "–" if r is None or "worst_ulps" not in r else f"{r['worst_ulps']:.2g}"


PEERS = [("flaggems", "FlagGems"), ("liger", "Liger")]


DEFAULT = "default"   # the pseudo-mode of the goal lines: per case, the mode a call without `mode` runs


def default_mode(r: dict) -> str:
    """The mode precred's op runs without `mode` on record r's case (precred.modes.softmax_mode; logsumexp's
    default is DEFAULT_LOGSUMEXP_MODE)."""
    if r.get("op") in ("softmax", "log_softmax"):
        return softmax_mode(None, getattr(torch, r["dtype"]), r["op"] == "log_softmax")
    return DEFAULT_LOGSUMEXP_MODE


def best_peer_goal_lines(recs: list[dict], modes: list[str]) -> list[str]:
    """Per mode (and for DEFAULT, the default's per case): cases where precred's GB/s reaches the best
    of torch and the peers measured there."""
    lines = []
    cases = list(dict.fromkeys(r["case"] for r in recs))
    for m in modes:
        miss, worst = [], None
        for c in cases:
            mine = [r for r in recs if r["case"] == c and r["impl"] == "precred"
                    and r["mode"] == (default_mode(r) if m == DEFAULT else m)]
            others = [r for r in recs if r["case"] == c and r["impl"] != "precred" and r.get("gbps")
                      and r.get("ok") == "ok"]
            if not mine or not mine[0].get("gbps") or not others:
                continue
            best = max(others, key=lambda r: r["gbps"])
            ratio = mine[0]["gbps"] / best["gbps"]
            if ratio < 1.0:
                miss.append(c)
            if worst is None or ratio < worst[0]:
                worst = (ratio, c, best["impl"])
        name = f"`{m}`" if m != DEFAULT else "the default (precred.modes.softmax_mode per case)"
        lines.append(f"- {name} ≥ max(torch, FlagGems, Liger) everywhere: {'PASS' if not miss else 'FAIL'} — "
                     f"{len(miss)}/{len(cases)} miss" + (f", worst {worst[0]:.2f}× {worst[2]} ({worst[1]})"
                                                         if worst else ""))
    return lines


def section(report: dict, path: str) -> list[str]:
    modes, recs, copy = report["modes"], report["records"], report.get("copy") or {}
    peers = [(impl, name) for impl, name in PEERS if any(r["impl"] == impl for r in recs)]
    lines = [f"## {report['device']}", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in report.get("versions", {}).items()) + ".",
             f"Copy ceiling (1 GiB device-to-device, read + write): {copy.get('gbps', 0):.0f} GB/s. "
             f"{report['protocol']}. Cells: GB/s (ratio to torch's op); ulp = worst error in ulps of the output "
             "(log_softmax, logsumexp_logprobs: of max(|y|, 1)), against torch's op on an fp64 copy (\"wrong\": "
             "beyond 64)." + (" logsumexp_logprobs: logsumexp of log-probabilities (log_softmax of the randn "
                              "input along the reduced dim): every result near 0, where the fp32 pass of `fp64` "
                              "/ `accurate` certifies nothing (all recomputed in fp64)."
                              if any(r.get("op") == "logsumexp_logprobs" for r in recs) else ""), ""]

    def cells_of(impls):
        def cells(by):
            t = by.get(("torch", None))
            return ([f"{t['gbps']:.0f}" if t and t.get("gbps") else "–"] + [_cell(by.get(k)) for k in impls[1:]]
                    + [_ulps(by.get(k)) for k in impls])
        return cells
    for op in dict.fromkeys(r.get("op", "logsumexp") for r in recs):
        mine = [r for r in recs if r.get("op", "logsumexp") == op]
        timed = [m for m in modes if any(r.get("mode") == m for r in mine)]   # softmax: no `accurate`
        impls = [("torch", None)] + [("precred", m) for m in timed] + [(impl, None) for impl, _ in peers]
        names = ["torch"] + [f"precred {m}" for m in timed] + [name for _, name in peers]
        lines += [f"### {op}", ""] + [line.replace("### ", "#### ") for line in
                                      dtype_dim_tables(mine, names + [f"ulp {n}" for n in names], cells_of(impls))]
        lines += [f"#### Goals (issue 4, {op})", ""]
        if op.startswith("logsumexp"):
            lines += speed_goal_lines(mine, timed, copy.get("gbps"), "torch.logsumexp", 5.0)
            lines.append(f"- (the default is `{DEFAULT_LOGSUMEXP_MODE}`)" if DEFAULT_LOGSUMEXP_MODE in timed else "")
        else:   # softmax / log_softmax: >= max(torch, FlagGems, Liger) on every case
            lines += best_peer_goal_lines(mine, timed + [DEFAULT])
        lines.append("")
    return lines + [""]


def render(paths: list[str]) -> str:
    return render_page("logsumexp, softmax, log_softmax performance", "docs/gen_logsumexp.py", "bench/exp_suite.py", section, paths)


if __name__ == "__main__":
    sys.exit(page_main(render, __doc__.split("\n")[0], "exp_bench.json files from bench/exp_suite.py"))
