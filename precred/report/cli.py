"""`precred-report` / `python -m precred.report`: what each mode buys on data like yours, in ulps
against the exact oracle.

    precred-report                                   # CPU, small sizes, under a minute on 2 cores
    precred-report --device cuda                     # a GPU, larger sizes
    precred-report --ops sum --families ill:1e12 --lengths 4096 --dtypes float32,bfloat16
    precred-report --input my_tensor.pt --ops sum,var,softmax   # a tensor of yours, over its last dim
    precred-report --page docs/accuracy.md --from RUN1/report.json RUN2/report.json   # a page from runs

For each op, dtype, input family and length (and, for sums, condition number), rows of that family are
reduced (or, for softmax, log_softmax, layer_norm and rms_norm, normalized) over their last dim by
torch, by torch on an fp64 copy, and by precred in each of its modes; each row's result -- each
element's, for the normalizations, the row counting as its worst -- is compared with the exact value.
Writes report.json, report.csv and report.png into --out (default ./precred-report) and prints the
tables.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time
import warnings
from pathlib import Path

DEFAULT_OPS = "sum,var,logsumexp,softmax,log_softmax,layer_norm,rms_norm"
DEFAULTS = {   # per device: the CPU's sizes finish in under a minute on 2 cores under the interpreter
    "cpu": dict(ops=DEFAULT_OPS, lengths="64,256,1024", element_lengths="64,256,1024", rows=8,
                families="normal,uniform,offset:1e4,wide", conds="1e2,1e6,1e10,1e14", cond_n=256),
    "cuda": dict(ops=DEFAULT_OPS, lengths="4096,65536,1048576,16777216", element_lengths="1024,8192", rows=64,
                 families="normal,uniform,offset:1e4,wide", conds="1e2,1e5,1e8,1e11,1e14,1e17,1e20",
                 cond_n=4096),
}
# Rows per cell = min(--rows, ROW_ELEMENTS // n), but at least MIN_ROWS: long rows come fewer at a time,
# and no median is one row's (the cuda run's rows of 2^24 -- issue 2's sum figures run from n = 2^12 to
# 2^24 -- come two at a time: 2^25 elements a cell, ~0.15 us each for the sum's, var's and logsumexp's
# oracles, numpy, on two cores here). The per-element ops take ELEMENT_ROW_ELEMENTS, and may take one
# row: each element costs its oracle (mpmath's exp, 256-bit arithmetic) and the exact value's floats
# (measure.exact_arrays), ~0.1 ms of Python with the five columns' bounds -- 2^13 elements are ~1 s a
# cell, the cuda run's 64 such cells ~1 min -- and their default lengths are shorter (element_lengths;
# --lengths sets both); a row of 8192 is 8192 measurements already.
ROW_ELEMENTS = 1 << 22
ELEMENT_ROW_ELEMENTS = 1 << 13
MIN_ROWS = 2


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="precred-report", description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="cpu (default: the kernels run in Triton's interpreter) or cuda")
    ap.add_argument("--ops", help="comma-separated: sum, mean, var, std, logsumexp, softmax, log_softmax, "
                                  "layer_norm, rms_norm (default all but mean and std)")
    ap.add_argument("--dtypes", help="comma-separated: float32, bfloat16, float16, float64 (default float32, "
                                     "or the --input tensor's dtype)")
    ap.add_argument("--lengths", help="comma-separated row lengths (cpu default 64,256,1024; cuda 2^12, 2^16, 2^20, "
                                      "2^24, and 2^10, 2^13 for softmax, log_softmax, layer_norm, rms_norm)")
    ap.add_argument("--rows", type=int, help="rows per cell (cpu default 8, cuda 64; fewer for long rows)")
    ap.add_argument("--families", help="comma-separated input families (default normal,uniform,offset:1e4,wide): "
                                       "normal, uniform, offset:X, ill:COND, wide, alternating")
    ap.add_argument("--conds", help="condition numbers of the sum/mean sweep ('' to skip it)")
    ap.add_argument("--cond-n", type=int, help="row length of the condition-number sweep (cpu 256, cuda 4096)")
    ap.add_argument("--input", type=Path, help="a .pt or .npy tensor of yours: its rows are measured too")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("precred-report"), help="folder for the files "
                    "(default ./precred-report)")
    ap.add_argument("--page", type=Path, help="with --from: write a markdown page from earlier runs' JSON")
    ap.add_argument("--from", dest="sources", nargs="+", type=Path, help="report.json files for --page")
    args = ap.parse_args(argv)
    if (args.page is None) != (args.sources is None):
        ap.error("--page and --from go together")
    if args.dtypes is None:
        args.dtypes = "float32" if args.input is None else ""   # "": the input's own dtype (run())
    args.element_lengths = args.lengths
    for key, value in DEFAULTS[args.device].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def _interpreter_needed(args) -> bool:
    """CPU tensors need Triton's interpreter, which must be chosen before precred is imported."""
    return args.page is None and args.device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if _interpreter_needed(args):
        # precred (our parent package) was imported on a machine with a GPU without the interpreter:
        # run again in a child that has it, rather than half-configured.
        env = dict(os.environ, TRITON_INTERPRET="1")
        return subprocess.call([sys.executable, "-m", "precred.report", *argv], env=env)
    if args.page is not None:
        return write_page(args.page, args.sources)
    return run(args, argv)


def write_page(page: Path, sources: list[Path]) -> int:
    from .render import markdown_page
    runs = []
    for src in sources:
        report = json.loads(Path(src).read_text())
        png = Path(src).with_name("report.png")
        rel = os.path.relpath(png, page.parent) if png.exists() else None
        runs.append((report, os.path.relpath(src, page.parent), rel))
    page.write_text(markdown_page(runs))
    print(f"wrote {page}")
    return 0


def _device_name(device: str) -> str:
    import torch
    if device == "cuda":
        return torch.cuda.get_device_name(0)
    return f"CPU ({platform.processor() or platform.machine()}), Triton interpreter"


def software_versions() -> dict:
    """python, torch (and its CUDA), triton, numpy, mpmath and precred versions."""
    import mpmath
    import numpy
    import torch
    import triton

    from .. import __version__
    return {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "triton": triton.__version__, "numpy": numpy.__version__, "mpmath": mpmath.__version__,
            "precred": __version__}


def cells(args, dtypes) -> list[dict]:
    """Every (op, dtype, sweep, family, n, cond) cell of the run, in report order."""
    from .ops import OPS
    out = []
    for op in _csv(args.ops):
        if op not in OPS:
            raise ValueError(f"--ops: unknown op {op!r}; expected some of {sorted(OPS)}")
        for dtype in dtypes:
            for family in _csv(args.families):
                lengths = args.element_lengths if OPS[op].per_element else args.lengths
                for n in (int(v) for v in _csv(lengths)):
                    if n < 2:
                        raise ValueError(f"--lengths: rows need at least 2 elements, got {n}")
                    out.append(dict(op=op, dtype=dtype, sweep="length", family=family, n=n, cond=None))
            if args.input is not None:
                out.append(dict(op=op, dtype=dtype, sweep="length", family=f"file:{args.input.name}",
                                n=None, cond=None))
            if OPS[op].condition_sweep:
                for cond in (float(v) for v in _csv(args.conds)):
                    out.append(dict(op=op, dtype=dtype, sweep="condition", family=f"ill:{cond:g}",
                                    n=args.cond_n, cond=cond))
    return out


def cell_rows(op: str, n: int, max_rows: int) -> int:
    """The rows of a cell of rows of n elements (ROW_ELEMENTS' note), at most max_rows (--rows)."""
    from .ops import OPS
    per_element = OPS[op].per_element
    budget = ELEMENT_ROW_ELEMENTS if per_element else ROW_ELEMENTS
    return min(max_rows, max(1 if per_element else MIN_ROWS, budget // n))


def cell_input(cell: dict, args, dtype, user_rows):
    """The (rows, n) CPU tensor of a cell; the same seed gives the same tensor on every device."""
    from .inputs import generate_rows
    if cell["family"].startswith("file:"):
        return user_rows.to(dtype)
    n = cell["n"]
    rows = cell_rows(cell["op"], n, args.rows)
    seed = [args.seed, sum(map(ord, cell["family"])), n, int(cell["cond"] or 0) % (1 << 62)]
    return generate_rows(cell["family"], rows, n, dtype, seed)


def run(args, argv) -> int:
    import torch
    from rich.console import Console
    from rich.progress import Progress

    from validation.generators import condition_number
    from .inputs import family_generator, load_rows
    from .measure import exact_arrays, measure
    from .ops import OPS
    from .render import print_tables, write_csv, write_png

    # Triton's interpreter evaluates kernels with numpy, which warns on inf arithmetic (overflowing rows).
    warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\..*")
    console = Console() if sys.stdout.isatty() else Console(width=400)   # logs: no wrapped cells
    if args.device == "cuda" and not torch.cuda.is_available():
        console.print("[red]--device cuda: no CUDA device here (run without it: the CPU interpreter)[/red]")
        return 2
    user_rows = load_rows(args.input, None) if args.input is not None else None
    dtypes = []
    for name in _csv(args.dtypes) or [str(user_rows.dtype).replace("torch.", "")]:
        dtype = getattr(torch, name, None)
        if dtype not in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
            raise ValueError(f"--dtypes: {name!r} is not one of float32, bfloat16, float16, float64")
        dtypes.append(dtype)
    for family in _csv(args.families):
        family_generator(family)          # a bad spec fails before any work
    todo = cells(args, dtypes)
    report = {"tool": "precred-report", "command": shlex.join(["precred-report", *argv]),
              "device": _device_name(args.device), "device_kind": args.device, "versions": software_versions(),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "definitions": {
                  "ulp": "|result - exact| / ulp(exact) in the output dtype (validation.oracle.ulp_error)",
                  "err_over_scale": {op: OPS[op].scale_name for op in _csv(args.ops)},
                  "correctly_rounded": "result == the exact value rounded to the output dtype",
                  "bound_ulp_worst": "the largest bound the mode promises over the cell's rows, in ulps "
                                     "(per-element ops: over outputs of normal magnitude)",
                  "per_element": "softmax, log_softmax, layer_norm, rms_norm: a row's error is its worst "
                                 "element's; correctly rounded where every element is; beyond its bound where "
                                 "any element is. layer_norm / rms_norm: no weight or bias, eps "
                                 "precred.report.ops.NORM_EPS",
                  "rows_beyond_bound": "rows whose error exceeds the promised bound (must be 0)",
                  "torch-fp64": "torch's op on an fp64 copy of the input, rounded back to the input dtype"},
              "records": []}
    t0 = time.monotonic()
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("measuring", total=len(todo))
        for cell in todo:
            op = OPS[cell["op"]]
            x_cpu = cell_input(cell, args, cell["dtype"], user_rows)
            exact = exact_arrays(op.truths(x_cpu), cell["dtype"],                  # shared by the columns
                                 x_cpu.shape[-1] if op.per_element else None)
            x = x_cpu.to(args.device)
            base = dict(cell, dtype=str(cell["dtype"]).replace("torch.", ""), n=x_cpu.shape[-1],
                        rows=x_cpu.shape[0])
            if op.condition_sweep and x_cpu.isfinite().all():
                conds = sorted(condition_number(r) for r in x_cpu)
                base["measured_cond"] = conds[len(conds) // 2]
            for impl in op.impls(cell["dtype"]):
                rec = dict(base, impl=impl.label, mode=impl.mode)
                try:
                    rec.update(measure(op, impl, x, exact))
                except Exception as e:   # one failing implementation must not hide the others' numbers
                    rec["error"] = f"{type(e).__name__}: {e}"[:300]
                report["records"].append(rec)
            progress.advance(task)
    report["seconds"] = round(time.monotonic() - t0, 1)

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(json.dumps(report, indent=1))
    write_csv(report["records"], args.out / "report.csv")
    write_png(report, args.out / "report.png")
    console.print(f"precred-report on {report['device']} in {report['seconds']} s")
    print_tables(report, console)
    beyond = sum(r.get("rows_beyond_bound") or 0 for r in report["records"])
    errors = [r for r in report["records"] if r.get("error")]
    for r in errors:
        console.print(f"[red]{r['op']} {r['dtype']} {r['family']} n={r['n']} {r['impl']}: {r['error']}[/red]")
    console.print(f"wrote {args.out / 'report.json'}, {args.out / 'report.csv'}, {args.out / 'report.png'}")
    if beyond:
        console.print(f"[red]{beyond} rows beyond their mode's bound: a bug in precred or in its bound; "
                      f"please report it with report.json[/red]")
    return 1 if beyond or errors else 0
