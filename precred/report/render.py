"""What the error report writes: the console tables (rich), report.json, report.csv, report.png
(matplotlib) and a markdown page (docs/accuracy.md is one).

All of it is rendered from the same list of records, so the table, the plot and the files agree by
construction; tests/test_report.py checks that they do.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

CSV_FIELDS = ["op", "dtype", "sweep", "family", "n", "cond", "measured_cond", "impl", "mode", "rows_measured",
              "rows_skipped", "ulp_median", "ulp_p99", "ulp_max", "err_over_scale_median", "err_over_scale_max",
              "correctly_rounded", "plan_depth", "bound_ulp_worst", "rows_beyond_bound"]

PROMISE_COLUMNS = ("op", "dtype", "inputs", "impl", "worst ulp error", "worst error / scale", "bound (ulp)",
                   "rows beyond bound")
CELL_LEGEND = "cells: ulp error median / p99 / max over the rows, then % of rows correctly rounded"


def fmt(v) -> str:
    """A number for a table cell: '-' for missing, 'inf', '0', else 3 significant digits."""
    if v is None:
        return "–"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    if v == 0:
        return "0"
    return f"{v:.3g}"


def sci(v: float) -> str:
    """1e+06 -> 1e6."""
    return f"{v:.0e}".replace("e+0", "e").replace("e+", "e")


def pct(frac) -> str:
    return "–" if frac is None else f"{100 * frac:.0f}%"


def cell_text(rec: dict | None) -> str:
    if rec is None:
        return "–"
    if rec.get("error"):
        return "ERROR"
    u = rec["ulp"]
    return f"{fmt(u['median'])} / {fmt(u['p99'])} / {fmt(u['max'])}, {pct(rec['correctly_rounded'])}"


def row_label(rec: dict) -> str:
    if rec["sweep"] == "condition":
        return f"ill n={rec['n']} cond {sci(rec['cond'])}"
    return f"{rec['family']} n={rec['n']}"


def flat_row(rec: dict) -> dict:
    """The CSV row of a record."""
    u, r = rec.get("ulp") or {}, rec.get("err_over_scale") or {}
    row = {k: rec.get(k) for k in CSV_FIELDS}
    row.update(ulp_median=u.get("median"), ulp_p99=u.get("p99"), ulp_max=u.get("max"),
               err_over_scale_median=r.get("median"), err_over_scale_max=r.get("max"))
    return row


def write_csv(records: list[dict], path: Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for rec in records:
            w.writerow(flat_row(rec))


def groups(records: list[dict]):
    """(op, dtype) -> (row labels in order, impl labels in order, {(row label, impl): record})."""
    out: dict = {}
    for rec in records:
        key = (rec["op"], rec["dtype"])
        labels, impls, cells = out.setdefault(key, ([], [], {}))
        label = row_label(rec)
        if label not in labels:
            labels.append(label)
        if rec["impl"] not in impls:
            impls.append(rec["impl"])
        cells[(label, rec["impl"])] = rec
    return out


def promises(records: list[dict]) -> list[dict]:
    """Per (op, dtype, sweep, impl): the worst measured ulp error and error / scale, the worst promised
    bound (precred modes) and the rows beyond it, over the sweep's families, lengths or condition numbers."""
    out: dict = {}
    for rec in records:
        if rec.get("error"):
            continue
        inputs = "ill-conditioned sweep" if rec["sweep"] == "condition" else "length sweep"
        key = (rec["op"], rec["dtype"], inputs, rec["impl"])
        p = out.setdefault(key, {"op": rec["op"], "dtype": rec["dtype"], "inputs": inputs, "impl": rec["impl"],
                                 "worst_ulp": 0.0, "worst_err_over_scale": 0.0, "bound_ulp_worst": None,
                                 "rows_beyond_bound": None})
        if rec["ulp"]["max"] is not None:
            p["worst_ulp"] = max(p["worst_ulp"], rec["ulp"]["max"])
            p["worst_err_over_scale"] = max(p["worst_err_over_scale"], rec["err_over_scale"]["max"])
        if rec.get("bound_ulp_worst") is not None:
            p["bound_ulp_worst"] = max(p["bound_ulp_worst"] or 0.0, rec["bound_ulp_worst"])
            p["rows_beyond_bound"] = (p["rows_beyond_bound"] or 0) + rec["rows_beyond_bound"]
    return list(out.values())


# ----------------------------------------------------------------------------------------------- console
def print_tables(report: dict, console) -> None:
    from rich.table import Table

    for (op, dtype), (labels, impls, cells) in groups(report["records"]).items():
        table = Table(title=f"{op}, {dtype}: ulp error median / p99 / max, % correctly rounded",
                      title_justify="left")
        table.add_column("input", style="bold")
        for impl in impls:
            table.add_column(impl, justify="right")
        for label in labels:
            row = []
            for impl in impls:
                rec = cells.get((label, impl))
                text = cell_text(rec)
                if rec is not None and (rec.get("error") or rec.get("rows_beyond_bound")):
                    text = f"[red]{text}[/red]"
                row.append(text)
            table.add_row(label, *row)
        console.print(table)
    table = Table(title="What each mode promises (worst row of the run, in ulps) and what it did",
                  title_justify="left")
    for name in PROMISE_COLUMNS:
        table.add_column(name, justify="left" if name in ("op", "dtype", "inputs", "impl") else "right")
    for p in promises(report["records"]):
        beyond = p["rows_beyond_bound"]
        table.add_row(p["op"], p["dtype"], p["inputs"], p["impl"], fmt(p["worst_ulp"]),
                      fmt(p["worst_err_over_scale"]),
                      "none (torch)" if p["bound_ulp_worst"] is None else fmt(p["bound_ulp_worst"]),
                      "–" if beyond is None else (f"[red]{beyond}[/red]" if beyond else "0"))
    console.print(table)


# ------------------------------------------------------------------------------------------------- plot
FLOOR = 1e-2   # zero errors are drawn here on the log axis


def write_png(report: dict, path: Path) -> None:
    """One row of panels per (op, dtype): max ulp error vs length for each family, then vs condition
    number where the op has that sweep; one line per implementation."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = [r for r in report["records"] if not r.get("error")]
    keys = list(dict.fromkeys((r["op"], r["dtype"]) for r in records))
    panels = []
    for op, dtype in keys:
        rs = [r for r in records if (r["op"], r["dtype"]) == (op, dtype)]
        row = [("length", fam, [r for r in rs if r["sweep"] == "length" and r["family"] == fam])
               for fam in dict.fromkeys(r["family"] for r in rs if r["sweep"] == "length")]
        cond = [r for r in rs if r["sweep"] == "condition"]
        if cond:
            row.append(("condition", f"ill, n={cond[0]['n']}", cond))
        panels.append((op, dtype, row))
    # One color per implementation across every panel.
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = {impl: palette[i % len(palette)] for i, impl in enumerate(dict.fromkeys(r["impl"] for r in records))}
    ncols = max([len(row) for _, _, row in panels] + [1])
    fig, axes = plt.subplots(max(len(panels), 1), ncols, figsize=(3.6 * ncols, 2.9 * max(len(panels), 1)),
                             squeeze=False)
    for i, (op, dtype, row) in enumerate(panels):
        for j in range(ncols):
            ax = axes[i][j]
            if j >= len(row):
                ax.axis("off")
                continue
            sweep, title, rs = row[j]
            xkey = "n" if sweep == "length" else "cond"
            for impl in dict.fromkeys(r["impl"] for r in rs):
                pts = sorted((r[xkey], r["ulp"]["max"]) for r in rs
                             if r["impl"] == impl and r["ulp"]["max"] is not None)
                xs = [p[0] for p in pts]
                ys = [max(p[1], FLOOR) if math.isfinite(p[1]) else float("nan") for p in pts]
                style = "--" if impl.startswith("torch") else "-"
                ax.plot(xs, ys, style, marker="o", markersize=3, label=impl, color=colors[impl])
            ax.set_xscale("log", base=2 if sweep == "length" else 10)
            ax.set_yscale("log")
            ax.axhline(0.5, color="grey", linewidth=0.6, linestyle=":")
            ax.set_title(f"{op} {dtype}: {title}", fontsize=9)
            ax.set_xlabel("n" if sweep == "length" else "condition number", fontsize=8)
            ax.set_ylabel("max ulp error", fontsize=8)
            ax.tick_params(labelsize=7)
            if j == 0:
                ax.legend(fontsize=6)
    fig.suptitle(f"precred-report on {report['device']} (dotted: 0.5 ulp; 0 drawn at {FLOOR})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------------------------- markdown
def markdown_section(report: dict, json_path: str, png_path: str | None) -> list[str]:
    """The markdown of one run: where it ran, the plot, one table per (op, dtype), the promises."""
    v = report.get("versions", {})
    lines = [f"## {report['device']}", "",
             f"- Command: `{report['command']}` ({report['date']}, {report['seconds']} s); data: `{json_path}`",
             "- Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val is not None),
             f"- Error of each row's result (softmax, log_softmax, layer_norm, rms_norm: of its worst element) "
             f"against the exact value (validation's oracle: exact rationals, mpmath for square roots, "
             f"exponentials and logarithms) in ulps of the exact value in the output dtype; {CELL_LEGEND}.",
             "- torch-fp64: torch's op on an fp64 copy, rounded back to the input dtype."]
    if report.get("device_kind") == "cpu":
        lines.append("- **CPU run (Triton interpreter)**: GPU-only rounding (fma contraction, approximate "
                     "division) does not show here.")
    lines.append("")
    if png_path:
        lines += [f"![max ulp error vs length and condition number]({png_path})", ""]
    for (op, dtype), (labels, impls, cells) in groups(report["records"]).items():
        lines += [f"### {op}, {dtype}", "", "| input | " + " | ".join(impls) + " |",
                  "|---|" + "---:|" * len(impls)]
        for label in labels:
            lines.append(f"| {label} | " + " | ".join(cell_text(cells.get((label, i))) for i in impls) + " |")
        lines.append("")
    lines += ["### What each mode promises", "",
              "Worst error (in ulps, and divided by the op's scale: S1 = sum |x_i| for sums, the row's "
              "largest |output| for softmax, log_softmax, layer_norm and rms_norm, whose row counts as its "
              "worst element), worst bound over the run's rows (precred.error_bound / moments_error_bound / "
              "logsumexp_error_bound / softmax_error_bound / norm_error_bound for the plan that ran, in ulps "
              "of the exact value; per element, over outputs of normal magnitude) and the rows beyond it "
              "(must be 0).", "",
              "| " + " | ".join(PROMISE_COLUMNS) + " |", "|---|---|---|---|---:|---:|---:|---:|"]
    for p in promises(report["records"]):
        lines.append(f"| {p['op']} | {p['dtype']} | {p['inputs']} | {p['impl']} | {fmt(p['worst_ulp'])} | "
                     f"{fmt(p['worst_err_over_scale'])} | "
                     f"{'none (torch)' if p['bound_ulp_worst'] is None else fmt(p['bound_ulp_worst'])} | "
                     f"{'–' if p['rows_beyond_bound'] is None else p['rows_beyond_bound']} |")
    lines.append("")
    return lines


def markdown_page(runs: list[tuple[dict, str, str | None]], title: str = "precred accuracy") -> str:
    """A page from several runs: (report, json path as shown, png path relative to the page)."""
    lines = [f"# {title}", "",
             "<!-- Generated by precred-report --page; do not edit by hand. -->", "",
             "Generated by `precred-report --page` from the JSON its runs wrote; do not edit by hand, "
             "regenerate instead.", ""]
    for report, json_path, png_path in runs:
        lines += markdown_section(report, json_path, png_path)
    return "\n".join(lines).rstrip() + "\n"
