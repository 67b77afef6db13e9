#!/usr/bin/env python3
"""var_mean on the GPU: torch.var_mean, precred.var_mean (every mode in precred.VAR_MODES) and FlagGems.

    python3 bench/var_suite.py --out DIR [--no-gems] [--only REGEX]

Shapes of issue 3, fp32 and bf16, dim=-1 and dim=0; each result is checked against an fp64 reference
(relative error of the variance and of the mean, printed per case as ulps of the input dtype at the
worst row) before it is timed; an accuracy row at mean offset 1e3 (n = 8192 fp32) compares the
relative error of torch's, FlagGems' and precred's variance. Writes DIR/var_bench.json.

Bandwidth: GB/s = (input bytes + 2 outputs) / median do_bench time (L2 flushed), as bench/gpu_suite.py.
"""
from __future__ import annotations

import json
import math
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for _path in (REPO, REPO / "bench"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
from gpu_suite import checked_timing, log, measure_copy, suite_args  # noqa: E402
from report_versions import versions  # noqa: E402

SHAPES = [(4096, 4096), (8192, 8192), (65536, 1024), (262144, 256), (1024, 65536), (16, 262144)]
BIG_INPUT_BYTES = 64 * 2**20   # "inputs >= 64 MB": the copy-ceiling goal


def label(shape, dim, dtype) -> str:
    return f"{'x'.join(map(str, shape))} d{dim} {'f32' if dtype == 'float32' else 'bf16'}"


def worst_relative_error(var, mean, ref) -> tuple[float, float]:
    """max |var - var64| / var64 and max |mean - mean64| / sqrt(var64) over the outputs."""
    v64, m64 = ref
    rel_var = ((var.double() - v64).abs() / v64.clamp_min(1e-300)).max().item()
    rel_mean = ((mean.double() - m64).abs() / v64.sqrt().clamp_min(1e-300)).max().item()
    return rel_var, rel_mean


def input_for(inputs: dict, shape, dtype: str):
    """The case's input: 2 N(0, 1) + 3, the same for a shape and dtype; only one kept on the GPU at a time."""
    import torch
    key = (shape, dtype)
    if key not in inputs:
        inputs.clear()
        g = torch.Generator(device="cuda").manual_seed(11)
        inputs[key] = (torch.randn(shape, device="cuda", generator=g) * 2.0 + 3.0).to(getattr(torch, dtype))
    return inputs[key]


def run_case(impl, mode, fn, x, ref, torch_ms, eps) -> dict:
    def check(result):
        var, mean = result
        rel_var, rel_mean = worst_relative_error(var, mean, ref)
        return ({"rel_err_var_ulps": rel_var / eps, "rel_err_mean_ulps": rel_mean / eps},
                rel_var <= 64 * eps and rel_mean <= 64 * eps, 2 * var.numel() * var.element_size())
    return dict(checked_timing(fn, check, x.numel() * x.element_size(), torch_ms), impl=impl, mode=mode)


def offset_accuracy(with_precred=True, dtype_name="float32", n=8192, offset=1e3) -> dict:
    """The issue's accuracy row: relative error of var at mean offset 1e3, n = 8192 (torch.var's, which
    is FlagGems' once it is enabled, and each precred mode's unless with_precred is False)."""
    import torch
    import precred
    g = torch.Generator(device="cuda").manual_seed(7)
    x = (torch.randn(64, n, device="cuda", generator=g, dtype=torch.float64) + offset).to(getattr(torch, dtype_name))
    v64 = torch.var(x.double(), dim=1)
    out = {}
    impls = [("torch", lambda: torch.var(x, dim=1))]
    if with_precred:
        impls += [(f"precred {m}", lambda m=m: precred.var(x, dim=1, mode=m)) for m in precred.VAR_MODES]
    for name, fn in impls:
        out[name] = ((fn().double() - v64).abs() / v64).max().item()
    return out


def main(argv=None) -> int:
    args = suite_args(__doc__.split("\n")[0], argv)

    import torch
    import precred
    modes = list(precred.VAR_MODES)
    report = {"device": torch.cuda.get_device_name(0), "versions": versions(), "modes": modes,
              "protocol": "GB/s = (input bytes + 2 output bytes) / median do_bench time (L2 flushed)",
              "records": []}
    start = time.monotonic()
    report["copy"] = measure_copy()
    cases = [(s, d, t) for t in ("float32", "bfloat16") for d in (-1, 0) for s in SHAPES]
    if args.only:
        cases = [c for c in cases if re.search(args.only, label(*c))]
    inputs, refs = {}, {}
    for shape, dim, dtype in cases:
        x = input_for(inputs, shape, dtype)
        eps = torch.finfo(x.dtype).eps / 2
        refs[label(shape, dim, dtype)] = ref = torch.var_mean(x.double(), dim=dim)
        t = run_case("torch", None, lambda: torch.var_mean(x, dim=dim), x, ref, None, eps)
        line = [f"[var] {label(shape, dim, dtype):<22} torch {t['gbps'] or 0:.0f}"]
        recs = [t]
        for m in modes:
            r = run_case("precred", m, lambda m=m: precred.var_mean(x, dim=dim, mode=m), x, ref, t["median_ms"], eps)
            recs.append(r)
            line.append(f"{m} {r['gbps'] or 0:.0f} ({(r.get('ratio_to_torch') or 0):.2f}x, "
                        f"{r.get('rel_err_var_ulps', math.nan):.2g} ulp)" + ("" if r["ok"] == "ok" else f" {r['ok']}"))
        for r in recs:
            r.update(case=label(shape, dim, dtype), shape=list(shape), dim=dim, dtype=dtype,
                     in_bytes=x.numel() * x.element_size())
        report["records"] += recs
        log("  ".join(line) + f"  [torch {t.get('rel_err_var_ulps', math.nan):.2g} ulp]")
    report["offset_accuracy"] = offset_accuracy()
    log(f"[var] relative error of var, fp32, mean offset 1e3, n=8192: " +
        ", ".join(f"{k} {v:.2e}" for k, v in report["offset_accuracy"].items()))

    if not args.no_gems:
        try:
            import flag_gems
            flag_gems.enable()
            for shape, dim, dtype in cases:
                x = input_for(inputs, shape, dtype)
                torch_ms = next(r["median_ms"] for r in report["records"]
                                if r["impl"] == "torch" and r["case"] == label(shape, dim, dtype))
                r = run_case("flaggems", None, lambda: torch.var_mean(x, dim=dim), x,
                             refs[label(shape, dim, dtype)], torch_ms, torch.finfo(x.dtype).eps / 2)
                r.update(case=label(shape, dim, dtype), shape=list(shape), dim=dim, dtype=dtype,
                         in_bytes=x.numel() * x.element_size())
                report["records"].append(r)
                log(f"[gems] {r['case']:<22} {r['gbps'] or 0:.0f} ({(r.get('ratio_to_torch') or 0):.2f}x) {r['ok']}")
            report["offset_accuracy"]["flaggems"] = offset_accuracy(with_precred=False)["torch"]
            log(f"[gems] var relative error at offset 1e3: {report['offset_accuracy']['flaggems']:.2e}")
        except Exception as e:
            log(f"[gems] unavailable: {type(e).__name__}: {e}"[:300])
    report["seconds"] = round(time.monotonic() - start, 1)
    (args.out / "var_bench.json").write_text(json.dumps(report, indent=1, default=str))
    log(f"[done] {report['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
