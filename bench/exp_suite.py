#!/usr/bin/env python3
"""logsumexp, softmax and log_softmax on the GPU: torch's, precred's (every mode in precred.EXP_MODES),
FlagGems' (where it has one) and Liger's (softmax over dim=-1; when liger_kernel imports), on
DESIGN.md's shapes, fp32 and bf16, dim=-1 and dim=0. Inputs: randn * 4; the op `logsumexp_logprobs` is
logsumexp of log-probabilities (log_softmax of randn * 4 along the reduced dim, so every result is
near 0: where the certified fp32 pass of `fp64` / `accurate` certifies nothing and every output is
recomputed in fp64, the slow case of those modes).

    python3 bench/exp_suite.py --out DIR [--ops logsumexp,softmax,log_softmax,logsumexp_logprobs] [--no-gems]
                               [--only REGEX] [--tests [--tests-timeout S]]

--tests first runs the exponentials' tests on CUDA (TESTS below; DIR/tests.log), so that one device
call checks the kernels and times them.

Each result is checked against torch's op on an fp64 copy (worst error in ulps of the output, relative
to max(|reference|, eps) -- log_softmax and logsumexp_logprobs: max(|reference|, 1); printed) before it
is timed.
GB/s = (input + output bytes) / median do_bench time (L2 flushed), as bench/gpu_suite.py; the copy
ceiling is measured in the same run.
Writes DIR/exp_bench.json (cases labelled with the op).
"""
from __future__ import annotations

import contextlib
import json
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for _path in (REPO, REPO / "bench"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
from gpu_suite import SHAPES_2D, checked_timing, log, measure_copy, run_tests, suite_args  # noqa: E402
from report_versions import versions  # noqa: E402

# --tests: softmax / log_softmax's test file, and logsumexp's and the GPU-only tests of the exponentials
# (the recompute, the filters, the accurate kernels, the replays)
TESTS = ("tests/test_softmax.py", "tests/test_logsumexp.py", "tests/test_gpu_only.py", "tests/test_plan.py", "-k",
         "test_softmax or softmax or recompute or filter or certified or accurate or specials or determin or replay")


def label(op, shape, dim, dtype) -> str:
    return f"{op} {'x'.join(map(str, shape))} d{dim} {'f32' if dtype == 'float32' else 'bf16'}"


def ops():
    import torch
    import precred
    return {"logsumexp": (torch.logsumexp, precred.logsumexp), "softmax": (torch.softmax, precred.softmax),
            "log_softmax": (torch.log_softmax, precred.log_softmax),
            "logsumexp_logprobs": (torch.logsumexp, precred.logsumexp)}


def make_input(op, shape, dim, dtype):
    """The case's input (seeded): randn * 4, or for logsumexp_logprobs its log_softmax along dim."""
    import torch
    g = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(shape, device="cuda", generator=g) * 4
    if op == "logsumexp_logprobs":
        x = torch.log_softmax(x, dim)
    return x.to(getattr(torch, dtype))


def run_case(fn, x, ref, torch_ms, op) -> dict:
    import torch

    def check(out):
        # ulps of the reference (a garbage catch): softmax values below eps count in units of eps^2;
        # log_softmax and logsumexp of log-probabilities in ulps of max(|y|, 1) -- the absolute error of
        # log(sum exp), whatever the size of y (values near 0 would read as thousands of ulps for torch too)
        eps = torch.finfo(x.dtype).eps
        ulp = eps * ref.abs().clamp_min(1.0 if op in ("log_softmax", "logsumexp_logprobs") else eps)
        worst = ((out.double() - ref).abs() / ulp).max().item()
        return {"worst_ulps": worst}, worst <= 64, out.numel() * out.element_size()
    return checked_timing(fn, check, x.numel() * x.element_size(), torch_ms)


def peer_cases(report, cases, fns, torch_ms, impl, peer_fn, context):
    """Time a peer library's op on each case (inside `context`, e.g. FlagGems' use_gems), checked
    against torch's op on an fp64 copy made outside it (FlagGems has no fp64 softmax); records appended
    to the report. The context is entered once per case around the whole timing, never per call (each
    entry re-registers every FlagGems op)."""
    import torch
    for op, shape, dim, dtype in cases:
        x = make_input(op, shape, dim, dtype)
        ref = fns[op][0](x.double(), dim)
        fn = peer_fn(op)
        with context():
            r = run_case(lambda: fn(x, dim), x, ref, torch_ms[label(op, shape, dim, dtype)], op)
        r.update(impl=impl, mode=None, op=op, case=label(op, shape, dim, dtype), shape=list(shape), dim=dim,
                 dtype=dtype, in_bytes=x.numel() * x.element_size())
        report["records"].append(r)
        log(f"[{impl}] {r['case']:<34} {r['gbps'] or 0:.0f} ({(r.get('ratio_to_torch') or 0):.2f}x) {r['ok']}"
            + (f" {r.get('note', '')}" if r["ok"] != "ok" else ""))
        del x, ref


def main(argv=None) -> int:
    def options(ap) -> None:
        ap.add_argument("--ops", default="logsumexp,softmax,log_softmax,logsumexp_logprobs", help="comma-separated")
        ap.add_argument("--tests", action="store_true", help="run the exponentials' tests on CUDA first")
        ap.add_argument("--tests-timeout", type=float, default=360.0)

    args = suite_args(__doc__.split("\n")[0], argv, extra=options)

    import torch
    import precred
    tests = run_tests(args.out, args.tests_timeout, TESTS) if args.tests else None
    modes = list(precred.EXP_MODES)
    report = {"device": torch.cuda.get_device_name(0), "versions": versions(), "modes": modes,
              "protocol": "GB/s = (input + output bytes) / median do_bench time (L2 flushed)", "records": [],
              "tests": tests}
    start = time.monotonic()
    report["copy"] = measure_copy()
    cases = [(op, s, d, t) for op in args.ops.split(",") for t in ("float32", "bfloat16") for d in (-1, 0)
             for s in SHAPES_2D]
    if args.only:
        cases = [c for c in cases if re.search(args.only, label(*c))]
    keep = {}
    fns = ops()
    for op, shape, dim, dtype in cases:
        torch_fn, precred_fn = fns[op]
        x = make_input(op, shape, dim, dtype)
        ref = torch_fn(x.double(), dim)
        t = run_case(lambda: torch_fn(x, dim), x, ref, None, op)
        recs = [dict(t, impl="torch", mode=None)]
        line = [f"[exp] {label(op, shape, dim, dtype):<34} torch {t['gbps'] or 0:.0f} "
                f"({t.get('worst_ulps', 0):.2g} ulp)"]
        for m in modes:
            if m == "accurate" and op == "softmax":   # softmax's `accurate` is the fp64 mode (modes.EXP_MODES)
                continue
            r = run_case(lambda m=m: precred_fn(x, dim, mode=m), x, ref, t["median_ms"], op)
            recs.append(dict(r, impl="precred", mode=m))
            line.append(f"{m} {r['gbps'] or 0:.0f} ({(r.get('ratio_to_torch') or 0):.2f}x, "
                        f"{r.get('worst_ulps', 0):.2g} ulp)"
                        + ("" if r["ok"] == "ok" else f" {r['ok']} {r.get('note', '')}"))
        for r in recs:
            r.update(case=label(op, shape, dim, dtype), op=op, shape=list(shape), dim=dim, dtype=dtype,
                     in_bytes=x.numel() * x.element_size())
        report["records"] += recs
        keep[label(op, shape, dim, dtype)] = t["median_ms"]
        log("  ".join(line))
        del x, ref
    if not args.no_gems:
        try:
            import flag_gems
            peer_cases(report, cases, fns, keep, "flaggems", lambda op: fns[op][0], flag_gems.use_gems)
        except Exception as e:
            log(f"[flaggems] unavailable: {type(e).__name__}: {e}"[:300])
    try:   # Liger: softmax over the last dim only (it has no logsumexp / log_softmax, no other dim)
        from liger_kernel.ops.softmax import LigerSoftmaxFunction
        peer_cases(report, [c for c in cases if c[0] == "softmax" and c[2] == -1], fns, keep, "liger",
                   lambda op: lambda x, dim: LigerSoftmaxFunction.apply(x), contextlib.nullcontext)
    except ImportError as e:
        log(f"[liger] unavailable: {e}"[:300])
    report["seconds"] = round(time.monotonic() - start, 1)
    (args.out / "exp_bench.json").write_text(json.dumps(report, indent=1, default=str))
    log(f"[done] {report['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
