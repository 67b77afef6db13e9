#!/usr/bin/env python3
"""amax, argmax and prod on the GPU: torch's and precred's on DESIGN.md's shapes and the 2^28-element
full reduction, fp32 and bf16, dim=-1 and dim=0. precred's extrema run twice where the plan splits an
inner pass: on the planner's schedule ("planned") and forced onto the atomic schedule ("atomic"), which
is what sets precred.plan.ATOMIC_EXTREMA; prod in each mode of precred.PROD_MODES.

    python3 bench/extrema_suite.py --out DIR [--ops amax,argmax,prod] [--only REGEX]

Each result is checked before it is timed: extrema bitwise equal to torch's (values; indices for
argmax), prod against torch's op on an fp64 copy (a garbage catch, not the accuracy test; prod: within the relative bound of fp32 products, product_error_bound("fast")). GB/s = (input + output bytes) / median do_bench time (L2 flushed), as bench/gpu_suite.py; the
copy ceiling is measured in the same run. Writes DIR/extrema_bench.json (-> docs/gen_extrema.py).
"""
from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for _path in (REPO, REPO / "bench"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
from gpu_suite import SHAPES_2D, checked_timing, log, measure_copy, suite_args  # noqa: E402
from report_versions import versions  # noqa: E402

FULL = (2**28,)


def label(op, shape, dim, dtype) -> str:
    dims = "full" if shape == FULL else f"d{dim}"
    return f"{op} {'x'.join(map(str, shape))} {dims} {'f32' if dtype == 'float32' else 'bf16'}"


def implementations(op: str, x, dim):
    """[(mode, fn)] of precred for op on x over dim: the planner's choice, the atomic schedule where
    it applies (extrema), or each prod mode."""
    import precred
    from precred.launch import plan_for, reduce_extremum
    from precred.modes import MAXIMUM_MODE
    from precred.plan import ATOMIC_MAX_RED
    if op == "prod":
        return [(m, lambda m=m: precred.prod(x, dim, mode=m)) for m in precred.PROD_MODES]
    fn = precred.amax if op == "amax" else precred.argmax
    impls = [("planned", lambda: fn(x, dim))]
    d = dim % x.dim()
    _, plan = plan_for(x, (d,), MAXIMUM_MODE)
    if plan.passes[0].schedule == "inner" and len(plan.passes) > 1 and x.shape[d] <= ATOMIC_MAX_RED:
        with_index = op == "argmax"
        out_shape = [s for i, s in enumerate(x.shape) if i != d]

        def atomic():
            values, index = reduce_extremum(x, (d,), MAXIMUM_MODE, with_index, schedule="atomic")
            return (index if with_index else values).view(out_shape)
        impls.append(("atomic", atomic))
    return impls


def make_input(op, shape, dtype):
    import torch
    g = torch.Generator(device="cuda").manual_seed(11)
    if op == "prod":   # factors near 1: the product of a long row stays finite
        x = 1.0 + 1e-4 * torch.randn(shape, device="cuda", generator=g)
    else:
        x = torch.randn(shape, device="cuda", generator=g)
    return x.to(getattr(torch, dtype))


def torch_fn(op):
    import torch
    return {"amax": torch.amax, "argmax": torch.argmax, "prod": torch.prod}[op]


def run_case(op, fn, x, want, torch_ms) -> dict:
    import torch

    def check(out):
        if op == "prod":   # within the fp32 products' relative bound (torch multiplies in fp32 too)
            import precred
            rel = ((out.double() - want) / want.abs()).abs().max().item()
            n = x.numel() // out.numel()
            return {"worst_rel": rel}, rel <= precred.product_error_bound("fast", n, 1.0, x.dtype), \
                out.numel() * out.element_size()
        same = torch.equal(out, want)
        return {}, same, out.numel() * out.element_size()
    return checked_timing(fn, check, x.numel() * x.element_size(), torch_ms)


def main(argv=None) -> int:
    args = suite_args(__doc__.split("\n")[0], argv, extra=lambda ap: ap.add_argument(
        "--ops", default="amax,argmax,prod", help="comma-separated"))
    import torch
    import precred
    from precred.plan import ATOMIC_EXTREMA
    report = {"device": torch.cuda.get_device_name(0), "versions": versions(),
              "modes": {"amax": ["planned", "atomic"], "argmax": ["planned", "atomic"],
                        "prod": list(precred.PROD_MODES)},
              "atomic_extrema": ATOMIC_EXTREMA,
              "protocol": "GB/s = (input + output bytes) / median do_bench time (L2 flushed)", "records": []}
    start = time.monotonic()
    report["copy"] = measure_copy()
    cases = []
    for op in args.ops.split(","):
        for dtype in ("float32", "bfloat16"):
            cases += [(op, s, d, dtype) for d in (-1, 0) for s in SHAPES_2D]
            if op != "prod":
                cases.append((op, FULL, 0, dtype))
    if args.only:
        cases = [c for c in cases if re.search(args.only, label(*c))]
    for op, shape, dim, dtype in cases:
        x = make_input(op, shape, dtype)
        tfn = torch_fn(op)
        want = tfn(x.double(), dim) if op == "prod" else tfn(x, dim)
        t = run_case(op, lambda: tfn(x, dim), x, want, None)
        recs = [dict(t, impl="torch", mode=None)]
        line = [f"[{op}] {label(op, shape, dim, dtype):<30} torch {t['gbps'] or 0:.0f}"]
        for mode, fn in implementations(op, x, dim):
            r = run_case(op, fn, x, want, t["median_ms"])
            recs.append(dict(r, impl="precred", mode=mode))
            line.append(f"{mode} {r['gbps'] or 0:.0f} ({(r.get('ratio_to_torch') or 0):.2f}x)"
                        + ("" if r["ok"] == "ok" else f" {r['ok']} {r.get('note', '')}"))
        for r in recs:
            r.update(case=label(op, shape, dim, dtype), op=op, shape=list(shape), dim=-1 if shape == FULL else dim,
                     dtype=dtype, in_bytes=x.numel() * x.element_size())
        report["records"] += recs
        log("  ".join(line))
        del x, want
        torch.cuda.empty_cache()
    report["seconds"] = round(time.monotonic() - start, 1)
    (args.out / "extrema_bench.json").write_text(json.dumps(report, indent=1, default=str))
    log(f"[done] {report['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
