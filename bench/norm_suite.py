#!/usr/bin/env python3
"""layer_norm / rms_norm on the GPU: torch, Liger (when liger_kernel imports) and precred (every mode).

    python3 bench/norm_suite.py --out DIR [--only REGEX] [--tests [--tests-timeout S]]

--tests first runs the layer_norm / rms_norm tests on CUDA (TESTS below; DIR/tests.log), so that one
device call checks and measures the same code.

Shapes of issue 3, fp32 and bf16, normalized over the last dim: forward of layer_norm and rms_norm
(weight and bias), and layer_norm's backward (dx, dweight, dbias from a given dy). Each result is
checked against torch in fp64 (max abs error, a garbage catch) before it is timed. An accuracy row
compares the max abs error of every implementation's fp32 layer_norm at mean offset 1e4 (n = 8192)
against an fp64 reference. Writes DIR/norm_bench.json.

Bandwidth: forward GB/s = (x + y bytes) / median do_bench time (L2 flushed); backward (x + dy + dx).
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
from gpu_suite import checked_timing, log, measure_copy, run_tests, suite_args  # noqa: E402
from report_versions import versions  # noqa: E402

SHAPES = [(4096, 4096), (8192, 8192), (65536, 1024), (262144, 256), (1024, 65536), (16, 262144)]
# --tests: the norms' test files, the fixed trees', and the GPU-only tests of the norms and their replays
TESTS = ("tests/test_norm_accuracy.py", "tests/test_norm_semantics.py", "tests/test_norm_oracle.py",
         "tests/test_tree.py", "tests/test_gpu_only.py", "-k",
         "test_norm_accuracy or test_norm_semantics or test_norm_oracle or test_tree or norm or replay")


def _options(ap) -> None:
    ap.add_argument("--tests", action="store_true", help="run the norm tests on CUDA first")
    ap.add_argument("--tests-timeout", type=float, default=300.0)


def implementations():
    """{(op, impl, mode): fn(x, w, b, eps) -> y} and {impl: backward fn(x, w, b, dy) -> (dx, dw, db)}."""
    import torch
    import torch.nn.functional as F
    import precred
    fwd = {("layer_norm", "torch", None): lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b, 1e-5),
           ("rms_norm", "torch", None): lambda x, w, b: F.rms_norm(x, x.shape[-1:], w, 1e-5)}
    for mode in precred.NORM_MODES:
        fwd[("layer_norm", "precred", mode)] = lambda x, w, b, m=mode: precred.layer_norm(x, x.shape[-1:], w, b, 1e-5,
                                                                                           mode=m)
        fwd[("rms_norm", "precred", mode)] = lambda x, w, b, m=mode: precred.rms_norm(x, x.shape[-1:], w, 1e-5, mode=m)
    bwd = {"torch": lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b, 1e-5),
           "precred": lambda x, w, b: precred.layer_norm(x, x.shape[-1:], w, b, 1e-5)}
    try:
        from liger_kernel.ops.layer_norm import LigerLayerNormFunction
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
        fwd[("layer_norm", "liger", None)] = lambda x, w, b: LigerLayerNormFunction.apply(x, w, b, 1e-5)
        fwd[("rms_norm", "liger", None)] = lambda x, w, b: LigerRMSNormFunction.apply(x, w, 1e-5, 0.0, "llama", False)
        bwd["liger"] = lambda x, w, b: LigerLayerNormFunction.apply(x, w, b, 1e-5)
    except Exception as e:  # noqa: BLE001 -- a missing peer is reported, not fatal
        log(f"[liger] unavailable: {e}"[:300])
    return fwd, bwd


def reference(op, x, w, b):
    import torch.nn.functional as F
    if op == "layer_norm":
        return F.layer_norm(x.double(), x.shape[-1:], w.double(), b.double(), 1e-5)
    return F.rms_norm(x.double(), x.shape[-1:], w.double(), 1e-5)


def offset_accuracy(fwd) -> dict:
    """Max abs error of fp32 layer_norm at mean offset 1e4 (64 rows of 8192, spread 1), each impl."""
    import torch
    g = torch.Generator(device="cuda").manual_seed(5)
    x = (torch.randn(64, 8192, device="cuda", generator=g, dtype=torch.float64) + 1e4).float()
    w = torch.ones(8192, device="cuda")
    b = torch.zeros(8192, device="cuda")
    ref = reference("layer_norm", x, w, b)
    return {f"{impl}{' ' + mode if mode else ''}": (fn(x, w, b).double() - ref).abs().max().item()
            for (op, impl, mode), fn in fwd.items() if op == "layer_norm"}


def main(argv=None) -> int:
    import torch
    args = suite_args(__doc__.splitlines()[1], argv, _options)
    tests = run_tests(args.out, args.tests_timeout, TESTS) if args.tests else None
    fwd, bwd = implementations()
    report = {"device": torch.cuda.get_device_name(), "versions": versions(), "copy": measure_copy(),
              "cases": [], "started": time.strftime("%Y-%m-%d %H:%M:%S"), "tests": tests}
    report["offset_accuracy"] = offset_accuracy(fwd)
    log(f"[accuracy] fp32 layer_norm, offset 1e4, n 8192, max abs error: {report['offset_accuracy']}")
    for shape in SHAPES:
        for dtype_name in ("float32", "bfloat16"):
            label = f"{'x'.join(map(str, shape))} {'f32' if dtype_name == 'float32' else 'bf16'}"
            if args.only and not re.search(args.only, label):
                continue
            dtype = getattr(torch, dtype_name)
            g = torch.Generator(device="cuda").manual_seed(3)
            x = (torch.randn(shape, device="cuda", generator=g) * 2 + 3).to(dtype)
            w = (torch.rand(shape[-1], device="cuda", generator=g) + 0.5).to(dtype)
            b = torch.randn(shape[-1], device="cuda", generator=g).to(dtype)
            io_bytes = 2 * x.numel() * x.element_size()
            tolerance = 1e-4 if dtype == torch.float32 else 6e-2
            for op in ("layer_norm", "rms_norm"):
                ref = reference(op, x, w, b)
                torch_ms = None
                for (o, impl, mode), fn in fwd.items():
                    if o != op:
                        continue

                    def check(y, ref=ref):
                        err = (y.double() - ref).abs().max().item()
                        return {"max_abs_err": err}, err <= tolerance * max(1.0, ref.abs().max().item()), 0
                    rec = checked_timing(lambda fn=fn: fn(x, w, b), check, io_bytes, torch_ms)
                    if impl == "torch":
                        torch_ms = rec.get("median_ms")
                    rec.update(label=label, op=op, impl=impl, mode=mode, direction="forward")
                    report["cases"].append(rec)
                    log(f"{label:>16} {op:>10} fwd {impl:>7} {mode or '':>7}: {rec.get('gbps') or 0:7.0f} GB/s "
                        f"x{rec.get('ratio_to_torch') or 0:.2f} {rec['ok']}")
                del ref
            # layer_norm backward: dx, dw, db from dy (x, dy read; dx written)
            dy = torch.randn(shape, device="cuda", generator=g).to(dtype)
            torch_ms = None
            for impl, fn in bwd.items():
                xs, ws, bs = (t.clone().requires_grad_() for t in (x, w, b))
                try:
                    y = fn(xs, ws, bs)
                    run = lambda y=y, xs=xs, ws=ws, bs=bs: torch.autograd.grad(y, (xs, ws, bs), dy, retain_graph=True)

                    def check(grads, xs=xs):
                        xr, wr, br = (t.detach().double().requires_grad_() for t in (x, w, b))
                        refs = torch.autograd.grad(reference("layer_norm", xr, wr, br), (xr, wr, br), dy.double())
                        errs = [((a.double() - r).abs().max() / r.abs().max().clamp_min(1)).item()
                                for a, r in zip(grads, refs)]
                        return {"rel_err_dx_dw_db": errs}, max(errs) <= (1e-3 if dtype == torch.float32 else 1e-1), 0
                    rec = checked_timing(run, check, 3 * x.numel() * x.element_size(), torch_ms)
                except Exception as e:  # noqa: BLE001
                    rec = {"ok": "ERROR", "note": f"{type(e).__name__}: {e}"[:300], "gbps": None}
                if impl == "torch":
                    torch_ms = rec.get("median_ms")
                rec.update(label=label, op="layer_norm", impl=impl, mode=None, direction="backward")
                report["cases"].append(rec)
                log(f"{label:>16} layer_norm bwd {impl:>7}        : {rec.get('gbps') or 0:7.0f} GB/s "
                    f"x{rec.get('ratio_to_torch') or 0:.2f} {rec['ok']}")
                del xs, ws, bs
            del x, dy
            torch.cuda.empty_cache()
    (args.out / "norm_bench.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
