#!/usr/bin/env python3
"""Generate docs/performance.md from one or more bench.json files written by bench/gpu_suite.py.

    python docs/gen_performance.py RUN/bench.json [MORE.json ...] [--out docs/performance.md]

Needs only the JSON (no GPU, no precred). One section per JSON file (one device run each): device, versions,
date, copy ceiling, tests, one table per dtype x reduced dim, the goals and the latency table.
"""
from __future__ import annotations

import sys

from page_cli import page_main, render_page  # docs/page_cli.py: the scripts run from docs/

DTYPE_NAMES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def dim_title(dim) -> str:
    if dim is None:
        return "full reduction (dim=None)"
    if dim == -1:
        return "dim=-1 (contiguous reduced axis)"
    if dim == 0:
        return "dim=0 (strided reduced axis)"
    return f"dim={dim}"


def shape_str(shape) -> str:
    if len(shape) == 1 and shape[0] & (shape[0] - 1) == 0:
        return f"({shape[0]},) = 2^{shape[0].bit_length() - 1}"
    return "(" + ", ".join(str(s) for s in shape) + ")"


def mib(nbytes) -> str:
    return f"{nbytes / 2**20:.4g}"


def cell(r, with_ratio=True) -> str:
    if r is None:
        return "–"
    if not r.get("median_ms"):
        return r.get("ok") or "–"
    s = f"{r['gbps']:.0f}" if r["gbps"] >= 10 else f"{r['gbps']:.3g}"
    if with_ratio and r.get("ratio_to_torch"):
        s += f" ({r['ratio_to_torch']:.2f}×)"
    if r.get("ok") != "ok":
        s += f" **{r.get('ok')}**"
    return s


def escape(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def section(report: dict, path: str) -> list[str]:
    out: list[str] = []
    v = report.get("versions", {})
    copy = report.get("copy") or {}
    copy_gbps = copy.get("gbps")
    modes = report.get("modes") or sorted({r["mode"] for r in report["records"] if r["impl"] == "precred"})
    out.append(f"## {report.get('device', 'unknown device')}")
    out.append("")
    out.append(f"- Source: `{path}`, run of {report.get('date', '?')}"
               + (f", label `{report['label']}`" if report.get("label") else "")
               + (" (quick smoke run)" if report.get("quick") else ""))
    out.append("- Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val is not None))
    if report.get("sm_count"):
        out.append(f"- SMs: {report['sm_count']}")
    if copy_gbps:
        out.append(f"- Copy ceiling (device-to-device copy of {copy.get('bytes', 0) / 2 / 2**30:g} GiB, "
                   f"bytes read + written): **{copy_gbps:.0f} GB/s**")
    t = report.get("tests")
    if t:
        out.append(f"- Tests on this device: {escape(t.get('summary', '?'))}"
                   + (" (**timed out**)" if t.get("timed_out") else "")
                   + (f" (exit code {t['returncode']})" if t.get("returncode") not in (0, None) else ""))
    gems = report.get("flaggems") or {}
    if gems.get("error"):
        out.append(f"- FlagGems: not measured ({escape(gems['error'])})")
    elif gems:
        out.append(f"- FlagGems {gems.get('version')}: `flag_gems.enable()` once, after all torch and precred "
                   f"timings; then `torch.sum` dispatches to FlagGems")
    out.append(f"- Method: {report.get('protocol', 'GB/s = (input + output bytes) / median time')}. "
               "Cells: GB/s (ratio of torch.sum's time to this one's; > 1 is faster than torch). "
               "**WRONG**/**ERROR** marks a case that failed the pre-timing sanity check or raised.")
    out.append("")

    recs = report.get("records", [])
    has_gems = any(r["impl"] == "flaggems" for r in recs)
    groups: dict = {}
    for r in recs:
        groups.setdefault((r["dtype"], r["dim"]), []).append(r)
    dim_order = {-1: 0, None: 1, 0: 2}
    for (dtype, dim) in sorted(groups, key=lambda k: (k[0] != "float32", dim_order.get(k[1], 3), str(k[1]))):
        rs = groups[(dtype, dim)]
        out.append(f"### {DTYPE_NAMES.get(dtype, dtype)}, {dim_title(dim)}")
        out.append("")
        head = ["shape", "input MiB", "torch GB/s"] + [f"{m}" for m in modes] + (["FlagGems"] if has_gems else [])
        if copy_gbps:
            head.append("best % of copy")
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|")
        shapes = list(dict.fromkeys(tuple(r["shape"]) for r in rs))
        for shape in shapes:
            by = {(r["impl"], r["mode"]): r for r in rs if tuple(r["shape"]) == shape}
            torch_r = by.get(("torch", None))
            any_r = next(iter(by.values()))
            row = [shape_str(shape), mib(any_r["in_bytes"]), cell(torch_r, with_ratio=False)]
            row += [cell(by.get(("precred", m))) for m in modes]
            if has_gems:
                row.append(cell(by.get(("flaggems", None))))
            if copy_gbps:
                best = max((r["gbps"] for (impl, _), r in by.items()
                            if impl == "precred" and r.get("gbps") and r.get("ok") == "ok"), default=None)
                row.append(f"{100 * best / copy_gbps:.0f}%" if best else "–")
            out.append("| " + " | ".join(row) + " |")
        out.append("")

    goals = report.get("goals") or []
    out.append("### Goals")
    out.append("")
    if goals:
        out.append("| goal | status | detail |")
        out.append("|---|---|---|")
        for g in goals:
            detail = escape(g.get("detail", ""))
            failing = g.get("failing") or []
            if failing:
                shown = ", ".join(f"{f['where']}: " + ("missing/wrong" if f["value"] is None else f"{f['value']:.3f}")
                                  for f in failing[:6])
                detail += f". Misses: {escape(shown)}" + (f", … {len(failing) - 6} more" if len(failing) > 6 else "")
            out.append(f"| {escape(g['goal'])} | **{g['status']}** | {detail} |")
    else:
        out.append("No goals recorded in this JSON.")
    out.append("")

    lat = report.get("latency") or []
    if lat:
        first = lat[0]
        out.append(f"### Host latency: {shape_str(first.get('shape', [64, 4096]))} "
                   f"{DTYPE_NAMES.get(first.get('dtype', 'float32'), '')}, dim={first.get('dim', -1)}")
        out.append("")
        if first.get("rounds_us"):
            out.append(f"Wall time per call of a Python loop of {first.get('calls', 2000)} calls, synchronized "
                       f"before and after, in {len(first['rounds_us'])} rounds that run every implementation once "
                       "in turn: the median of the rounds, and × torch the median of each round's ratio to "
                       "torch's loop of that round (the device host's load drifts between seconds).")
        else:   # runs before the interleaved rounds
            out.append(f"Wall time per call of a Python loop of {first.get('calls', 2000)} calls, synchronized "
                       "before and after (median of 3 loops).")
        out.append("")
        out.append("| impl | mode | µs per call | × torch |")
        out.append("|---|---|---:|---:|")
        for r in lat:
            us = f"{r['us_per_call']:.2f}" if r.get("us_per_call") else ("ERROR" if r.get("error") else "–")
            ratio = f"{r['ratio_to_torch']:.2f}" if r.get("ratio_to_torch") else ("1.00" if r["impl"] == "torch" else "–")
            out.append(f"| {r['impl']} | {r.get('mode') or ''} | {us} | {ratio} |")
        out.append("")

    notes = {}
    for r in recs + lat:
        note = r.get("note") or r.get("error")
        if note and r.get("ok") != "ok":
            key = (r["impl"], r.get("mode"), note)
            notes.setdefault(key, []).append(r.get("case", ""))
    if notes:
        out.append("### Failures")
        out.append("")
        for (impl, mode, note), where in list(notes.items())[:12]:
            out.append(f"- {impl} {mode or ''} ({len(where)} case{'s' if len(where) > 1 else ''}, first "
                       f"{escape(where[0])}): `{escape(note).replace('`', '')}`")
        out.append("")
    return out


def render(paths: list[str]) -> str:
    return render_page("precred performance: sum", "docs/gen_performance.py", "bench/gpu_suite.py", section, paths)


def main(argv=None) -> int:
    return page_main(render, __doc__.split("\n")[0], "bench.json files from bench/gpu_suite.py", argv)


if __name__ == "__main__":
    sys.exit(main())
