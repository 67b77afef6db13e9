#!/usr/bin/env python3
"""The whole GPU session in one process: tests on CUDA, copy ceiling, sum benchmarks, latency, goals.

    python3 bench/gpu_suite.py --out DIR [--skip-tests] [--quick] [--accuracy] [--no-gems]

Meant for one device call (well under 9 minutes on an H100). Phases, in this order:
  1. device and versions;
  2. the test suite on CUDA (PRECRED_TEST_DEVICE=cuda), log in DIR/tests.log;
  3. the HBM ceiling: a 1 GiB device-to-device copy, bytes read + written / median time;
  4. torch.sum and precred.sum (every mode in precred.MODES) on the shapes of DESIGN.md's performance
     protocol, fp32 and bf16, each case checked against an fp64 reference before it is timed;
  5. host latency of (64, 4096) fp32 dim=-1: a Python loop of 2000 calls, in 5 interleaved rounds;
  6. with --accuracy, precred-report --device cuda into DIR/accuracy (before FlagGems, which reroutes
     torch.sum process-wide);
  7. FlagGems: flag_gems.enable() once, then torch.sum again (now FlagGems' kernel) on every case.
DIR/bench.json is rewritten after every phase, so a run cut short still leaves its numbers.
The last thing printed is the GOALS block, the latency lines and one table line per case.

Bandwidth: GB/s = (input bytes + output bytes) / median time of triton.testing.do_bench (warmup 25 ms,
rep 100 ms, L2 flushed between runs). Inputs are random normal, never zeros.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for _path in (REPO, REPO / "bench"):   # precred, and the bench helpers
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
from report_versions import versions  # noqa: E402

SHAPES_2D = [(16, 262144), (1024, 65536), (8192, 8192), (65536, 1024), (262144, 256)]
FULL_NUMEL = 2**28
LATENCY_SHAPE = (64, 4096)
LATENCY_CALLS = 2000
LATENCY_ROUNDS = 5
BIG_INPUT_BYTES = 16 * 2**20  # "shapes with >= 16 MB of input" in the goals
DEVICE = "cuda"  # a module constant, so that a CPU dry run of the suite's logic can swap it


def log(*args) -> None:
    print(*args, flush=True)


@dataclass(frozen=True)
class Case:
    shape: tuple
    dim: int | None  # None: full reduction
    dtype: str  # "float32" | "bfloat16"

    @property
    def label(self) -> str:
        shape = "x".join(str(s) for s in self.shape) if len(self.shape) > 1 else f"2^{int(math.log2(self.shape[0]))}"
        dim = "full" if self.dim is None else f"d{self.dim}"
        return f"{shape} {dim} {'f32' if self.dtype == 'float32' else 'bf16'}"

    @property
    def in_bytes(self) -> int:
        return math.prod(self.shape) * (4 if self.dtype == "float32" else 2)


def make_cases(quick: bool) -> list[Case]:
    if quick:
        return [Case((1024, 65536), -1, "float32"), Case((8192, 8192), 0, "float32"),
                Case(LATENCY_SHAPE, -1, "float32")]
    cases = []
    for dtype in ("float32", "bfloat16"):
        cases += [Case(s, -1, dtype) for s in SHAPES_2D]
        cases.append(Case((FULL_NUMEL,), None, dtype))
        cases += [Case(s, 0, dtype) for s in SHAPES_2D]
        cases.append(Case(LATENCY_SHAPE, -1, dtype))
    return cases


# --------------------------------------------------------------------------------------------- tests
def run_tests(out_dir: Path, timeout_s: float, selection=("tests",), workers: int = 0) -> dict:
    """pytest on CUDA in child processes over `selection` (paths and options), output teed to
    out_dir/tests.log; killed after timeout_s in all. workers > 0: that many pytest-xdist workers (the
    image's xdist crashed its workers once; pytest-xdist 3.8.0 carried as a wheel in .whl/ ran the whole
    suite on 14 workers in 122 s on a warm H100, 2026-12-06) for every test but those marked
    large_memory (tests/test_gpu_only.py: 2^31-element inputs, tens of GB each), which then run in one
    process of their own: beside the workers they ran the H100 out of memory (2026-12-06: 3 failures
    spread over the workers; 670 with them on one worker by --dist loadgroup, its caching allocator
    keeping their memory for the rest of the run; 5 passed in 48 s alone)."""
    # No -x: every failure is listed. pytest-benchmark is never used.
    base = [sys.executable, "-m", "pytest", *selection, "-q", "-rf", "-p", "no:cacheprovider", "-p", "no:benchmark"]
    if workers > 0:
        phases = [base + ["-n", str(workers), "-m", "not large_memory"], base + ["-p", "no:xdist", "-m", "large_memory"]]
    else:
        phases = [base + ["-p", "no:xdist"]]
    env = {**os.environ, "PRECRED_TEST_DEVICE": "cuda", "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    t0 = time.monotonic()
    results = []
    with open(out_dir / "tests.log", "w") as f:
        for cmd in phases:
            left = timeout_s - (time.monotonic() - t0)
            if left <= 0:
                results.append({"returncode": None, "timed_out": True, "summary": "not run: no time left"})
                continue
            results.append(_run_pytest(cmd, env, left, f))
    counts: dict = {}
    for r in results:
        for word in ("passed", "failed", "errors", "skipped", "xfailed", "xpassed", "warnings"):   # not deselected
            if r.get(word):
                counts[word] = counts.get(word, 0) + r[word]
    codes = [0 if r["returncode"] == 5 else r["returncode"] for r in results]   # 5: a phase selected no test
    result = {"returncode": next((c for c in codes if c != 0), 0), "timed_out": any(r["timed_out"] for r in results),
              "seconds": round(time.monotonic() - t0, 1), **counts,
              "summary": " | ".join(r["summary"] for r in results)}
    log(f"[tests] rc={result['returncode']} passed={counts.get('passed', 0)} failed={counts.get('failed', 0)} "
        f"errors={counts.get('errors', 0)} skipped={counts.get('skipped', 0)} in {result['seconds']} s"
        + (" (TIMED OUT)" if result["timed_out"] else ""))
    return result


def _run_pytest(cmd, env, timeout_s: float, f) -> dict:
    """One pytest child process, its output teed to f and stdout, killed after timeout_s: its return code,
    whether it was killed and its counts (parse_pytest_summary)."""
    log(f"[tests] {' '.join(cmd[1:])} (PRECRED_TEST_DEVICE=cuda, timeout {timeout_s:.0f} s)")
    lines: list[str] = []
    killed = threading.Event()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1)

    def kill() -> None:
        killed.set()
        proc.kill()

    timer = threading.Timer(timeout_s, kill)
    timer.start()
    try:
        for line in proc.stdout:
            f.write(line)
            f.flush()
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line.rstrip("\n"))
        rc = proc.wait()
    finally:
        timer.cancel()
    if killed.is_set():
        msg = f"[tests] KILLED after {timeout_s:.0f} s"
        f.write(msg + "\n")
        log(msg)
    return {"returncode": rc, "timed_out": killed.is_set(), **parse_pytest_summary(lines)}


def parse_pytest_summary(lines: list[str]) -> dict:
    """Counts from pytest's final line, e.g. '2 failed, 130 passed, 4 skipped, 1 warning in 31.2s'."""
    for line in reversed(lines):
        if re.search(r"\b(passed|failed|errors?|no tests ran)\b", line) and re.search(r" in [\d.]+s", line):
            counts = {}
            for num, word in re.findall(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected"
                                        r"|warnings?)", line):
                word = {"error": "errors", "warning": "warnings"}.get(word, word)
                counts[word] = counts.get(word, 0) + int(num)
            counts["summary"] = line.strip(" =")
            return counts
    # No final line (pytest killed): count the progress characters of -q output, e.g. "..F.s  [ 42%]".
    counts: dict = {}
    for line in lines:
        m = re.fullmatch(r"([.FEsxX]+)\s*(\[\s*\d+%\])?", line.strip())
        if m:
            for ch, word in ((".", "passed"), ("F", "failed"), ("E", "errors"), ("s", "skipped"),
                             ("x", "xfailed"), ("X", "xpassed")):
                if m.group(1).count(ch):
                    counts[word] = counts.get(word, 0) + m.group(1).count(ch)
    counts["summary"] = ("incomplete: " + ", ".join(f"{v} {k}" for k, v in counts.items()) if counts
                         else (lines[-1].strip() if lines else "(no output)"))
    return counts


# ------------------------------------------------------------------------------------------ timing
def bench_ms(fn) -> float:
    from triton.testing import do_bench
    return float(do_bench(fn, warmup=25, rep=100, return_mode="median"))


def gbps(nbytes: int, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9


def checked_timing(fn, check, in_bytes: int, torch_ms) -> dict:
    """Run fn once and check its result -- check(result) -> (error fields, ok, output bytes); a garbage
    catch, not the accuracy test -- then time it: median ms, GB/s of in_bytes + output bytes, ratio to
    torch_ms. A failure is recorded (ok = ERROR), never raised, so one case cannot hide the others."""
    import torch
    rec = {}
    try:
        result = fn()
        torch.cuda.synchronize()
        fields, ok, out_bytes = check(result)
        rec.update(fields, ok="ok" if ok else "WRONG")
        del result
        ms = bench_ms(fn)
        rec.update(median_ms=ms, gbps=gbps(in_bytes + out_bytes, ms),
                   ratio_to_torch=(torch_ms / ms) if torch_ms else 1.0)
    except Exception as e:
        rec.update(ok="ERROR", note=f"{type(e).__name__}: {e}"[:300], median_ms=None, gbps=None)
    return rec


def suite_args(description: str, argv, extra=None):
    """The op suites' command line: --out DIR (created), --no-gems, --only REGEX, and extra(ap)'s."""
    ap = argparse.ArgumentParser(description=description)
    if extra is not None:
        extra(ap)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--no-gems", action="store_true")
    ap.add_argument("--only", default=None, help="regex on case labels")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    return args


def measure_copy() -> dict:
    import torch
    n = 2**28  # 1 GiB of fp32
    src = torch.randn(n, device=DEVICE, dtype=torch.float32)
    dst = torch.empty_like(src)
    ms = bench_ms(lambda: dst.copy_(src))
    ok = bool(torch.equal(dst, src))
    nbytes = 2 * src.numel() * src.element_size()
    res = {"bytes": nbytes, "median_ms": ms, "gbps": gbps(nbytes, ms), "ok": ok}
    del src, dst
    torch.cuda.empty_cache()
    log(f"[copy] 1 GiB fp32 device-to-device: {ms:.3f} ms, {res['gbps']:.0f} GB/s (read + write)")
    return res


# ------------------------------------------------------------------------------------------- cases
class Inputs:
    """One random-normal tensor per (shape, dtype), shared by its dim=-1 / dim=0 / full cases."""

    def __init__(self) -> None:
        self._cache: dict = {}
        self._seed = 20240601

    def get(self, case: Case):
        import torch
        key = (case.shape, case.dtype)
        if key not in self._cache:
            self._seed += 1
            g = torch.Generator(device=DEVICE).manual_seed(self._seed)
            self._cache[key] = torch.randn(case.shape, device=DEVICE, dtype=getattr(torch, case.dtype),
                                           generator=g)
        return self._cache[key]


def torch_sum_fn(x, dim):
    import torch
    if dim is None:
        return lambda: torch.sum(x)
    return lambda: torch.sum(x, dim=dim)


def precred_sum_fn(x, dim, mode):
    import precred
    return lambda: precred.sum(x, dim=dim, mode=mode)


def reference(x, dim):
    """fp64 sum and a garbage-catching tolerance: 1e-3 * sum|x| (+ the output format's own rounding)."""
    import torch
    xd = x.double()
    if dim is None:
        ref, s1 = xd.sum(), xd.abs().sum()
    else:
        ref, s1 = xd.sum(dim=dim), xd.abs().sum(dim=dim)
    del xd
    return ref, s1


def check(out, ref, s1) -> tuple[bool, str]:
    import torch
    if not isinstance(out, torch.Tensor):
        return False, f"returned {type(out).__name__}"
    if tuple(out.shape) != tuple(ref.shape):
        return False, f"shape {tuple(out.shape)} != {tuple(ref.shape)}"
    o = out.double()
    if not bool(torch.isfinite(o).all()):
        return False, "non-finite output"
    tol = 1e-3 * s1 + torch.finfo(out.dtype).eps * ref.abs()
    err = (o - ref).abs()
    bad = int((err > tol).sum())
    if bad:
        return False, f"{bad} outputs off by more than 1e-3*S1 (max err {float(err.max()):.3g})"
    return True, ""


def record(case: Case, impl: str, mode, ms, out_bytes, torch_ms, ok, note="") -> dict:
    nbytes = case.in_bytes + (out_bytes or 0)
    rec = {"op": "sum", "case": case.label, "shape": list(case.shape), "dim": case.dim, "dtype": case.dtype,
           "impl": impl, "mode": mode, "in_bytes": case.in_bytes, "out_bytes": out_bytes,
           "median_ms": ms, "gbps": gbps(nbytes, ms) if ms else None,
           "ratio_to_torch": (torch_ms / ms) if (ms and torch_ms) else None, "ok": ok}
    if note:
        rec["note"] = note
    return rec


def time_one(case, impl, mode, fn, ref, s1, torch_ms) -> dict:
    """Warm (compile) and check one implementation, then time it. Never raises."""
    import torch
    try:
        out = fn()
        torch.cuda.synchronize()
        ok, why = check(out, ref, s1)
        out_bytes = out.numel() * out.element_size()
        del out
        ms = bench_ms(fn)
        return record(case, impl, mode, ms, out_bytes, torch_ms, "ok" if ok else "WRONG", why)
    except Exception as e:  # a missing mode or dtype must not end the run
        try:
            torch.cuda.synchronize()
        except Exception:
            pass  # a sticky CUDA error: every later case will report it too
        return record(case, impl, mode, None, None, torch_ms, "ERROR", f"{type(e).__name__}: {e}"[:300])


def bench_torch_precred(cases, inputs, modes, deadline, refs) -> list[dict]:
    import torch
    recs = []
    for case in cases:
        if time.monotonic() > deadline:
            log(f"[bench] {case.label}: SKIPPED (time budget)")
            recs.append(record(case, "torch", None, None, None, None, "SKIPPED", "time budget"))
            continue
        x = inputs.get(case)
        ref, s1 = reference(x, case.dim)
        refs[case] = (ref, s1)
        t = time_one(case, "torch", None, torch_sum_fn(x, case.dim), ref, s1, None)
        torch_ms = t["median_ms"]
        t["ratio_to_torch"] = 1.0 if torch_ms else None
        recs.append(t)
        line = [f"[bench] {case.label:<20} torch {fmt_gbps(t)}"]
        for mode in modes:
            r = time_one(case, "precred", mode, precred_sum_fn(x, case.dim, mode), ref, s1, torch_ms)
            recs.append(r)
            line.append(f"{mode} {fmt_gbps(r)}")
        if torch_ms:  # torch timed twice per case: the spread says how much noise to expect
            t["median_ms_repeat"] = bench_ms(torch_sum_fn(x, case.dim))
            line.append(f"(torch again {t['median_ms_repeat'] / torch_ms:.3f}x)")
        log("  ".join(line))
        for r in recs[-(1 + len(modes)):]:
            if r["ok"] != "ok":
                log(f"        {r['impl']} {r['mode'] or ''}: {r['ok']} {r.get('note', '')}")
        torch.cuda.synchronize()
    return recs


def bench_gems(cases, inputs, refs, torch_ms_by_case, deadline) -> tuple[list[dict], dict]:
    """flag_gems.enable() once, then torch.sum (now routed to FlagGems) on every case."""
    info: dict = {}
    try:
        import flag_gems
        info["version"] = getattr(flag_gems, "__version__", None)
        flag_gems.enable()
        info["enabled"] = "flag_gems.enable()"
    except Exception as e:
        info["error"] = f"{type(e).__name__}: {e}"[:300]
        log(f"[gems] unavailable: {info['error']}")
        return [], info
    log(f"[gems] flag_gems {info['version']} enabled")
    recs = []
    for case in cases:
        if case not in refs or time.monotonic() > deadline:
            log(f"[gems] {case.label}: SKIPPED")
            continue
        x = inputs.get(case)
        ref, s1 = refs[case]
        r = time_one(case, "flaggems", None, torch_sum_fn(x, case.dim), ref, s1, torch_ms_by_case.get(case))
        recs.append(r)
        log(f"[gems] {case.label:<20} {fmt_gbps(r)}" + (f"  {r['ok']} {r.get('note', '')}" if r["ok"] != "ok" else ""))
    info["kernels"] = gems_kernel_names(inputs, cases)
    return recs, info


def gems_kernel_names(inputs, cases) -> list[str]:
    """Names of the GPU kernels one torch.sum launches now: shows that FlagGems really took over."""
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
        case = next(c for c in cases if c.dim == -1)
        x = inputs.get(case)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            torch.sum(x, dim=-1)
            torch.cuda.synchronize()
        return sorted({e.key for e in prof.key_averages()})[:8]
    except Exception as e:
        return [f"(profiler failed: {type(e).__name__})"]


# ----------------------------------------------------------------------------------------- latency
def loop_us(fn, calls=None, repeats=3) -> float:
    """Wall time per call of a Python loop (synchronized at both ends), median of `repeats` loops."""
    import torch
    calls = calls or LATENCY_CALLS
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    per_call = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        per_call.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(per_call)


def measure_latency(inputs, modes, impls=("torch", "precred")) -> list[dict]:
    """Wall time per call of each implementation's loop of LATENCY_CALLS calls, in LATENCY_ROUNDS
    rounds that each run every implementation once, one after another. The device host's load drifts
    over seconds (torch's own loop read 8.7 us in one run and 29 us in the next, minutes apart), so a
    ratio to torch is the median of the rounds' ratios -- each against torch's loop of the same round --
    and a time the median of its rounds."""
    case = Case(LATENCY_SHAPE, -1, "float32")
    x = inputs.get(case)
    todo = [("torch" if "torch" in impls else "flaggems", None, torch_sum_fn(x, -1))]
    if "precred" in impls:
        todo += [("precred", m, precred_sum_fn(x, -1, m)) for m in modes]
    rounds: list[list] = [[] for _ in todo]
    errors: dict = {}
    for _ in range(LATENCY_ROUNDS):
        for k, (impl, mode, fn) in enumerate(todo):
            if k in errors:
                continue
            try:
                rounds[k].append(loop_us(fn, repeats=1))
            except Exception as e:
                errors[k] = f"{type(e).__name__}: {e}"[:300]
    out = []
    for k, (impl, mode, _) in enumerate(todo):
        if k in errors:
            out.append({"case": case.label, "impl": impl, "mode": mode, "us_per_call": None, "error": errors[k]})
            continue
        r = {"case": case.label, "shape": list(case.shape), "dim": -1, "dtype": "float32", "impl": impl,
             "mode": mode, "us_per_call": statistics.median(rounds[k]), "rounds_us": rounds[k],
             "calls": LATENCY_CALLS}
        if "torch" in impls and 0 not in errors:
            r["ratio_to_torch"] = statistics.median(a / b for a, b in zip(rounds[k], rounds[0]))
        out.append(r)
        log(f"[latency] {impl} {mode or '':<9} "
            + (f"{r['us_per_call']:.2f} us/call (rounds {', '.join(f'{u:.1f}' for u in rounds[k])})"))
    for k in errors:
        log(f"[latency] {todo[k][0]} {todo[k][1] or ''}: {errors[k]}")
    return out


# ------------------------------------------------------------------------------------------- goals
def evaluate_goals(report: dict) -> list[dict]:
    """The performance goals, each PASS/FAIL with its worst number. Missing or wrong results fail."""
    recs = report["records"]
    modes = report["modes"]
    copy_gbps = (report.get("copy") or {}).get("gbps")
    by_key = {(r["impl"], r["case"], r["mode"]): r for r in recs}

    def usable(impl, label, mode=None):
        r = by_key.get((impl, label, mode))
        return r if (r is not None and r["ok"] == "ok" and r["median_ms"]) else None

    goals = []

    def goal(name, items, target, higher_is_better, unit="x"):
        """items: [(where, value)]; value None (missing, failed or wrong) counts as a failure."""
        meets = (lambda v: v >= target) if higher_is_better else (lambda v: v <= target)
        failing = [(w, v) for w, v in items if v is None or not meets(v)]
        vals = [(w, v) for w, v in items if v is not None]
        if not items:
            status, detail = "FAIL", "no data"
        else:
            status = "FAIL" if failing else "PASS"
            pick = min if higher_is_better else max
            worst = pick(vals, key=lambda wv: wv[1]) if vals else None
            detail = f"worst {worst[1]:.3f}{unit} ({worst[0]})" if worst else "no usable numbers"
            detail += f"; {len(failing)}/{len(items)} miss" if failing else f"; all {len(items)} meet it"
        goals.append({"goal": name, "target": target, "status": status, "detail": detail,
                      "failing": [{"where": w, "value": v} for w, v in failing]})

    def ratio(label, mode):
        r = usable("precred", label, mode)
        return r["ratio_to_torch"] if r else None

    torch_labels = [r["case"] for r in recs if r["impl"] == "torch"]
    big = [lab for lab in torch_labels if by_key[("torch", lab, None)]["in_bytes"] >= BIG_INPUT_BYTES]

    goal("every mode >= 1.0x torch.sum (inputs >= 16 MiB)",
         [(f"{m} {lab}", ratio(lab, m)) for lab in big for m in modes], 1.0, True)

    items = []
    for lab in big:
        fast = usable("precred", lab, "fast")
        for m in ("kahan", "fp64"):
            if m in modes:
                r = usable("precred", lab, m)
                items.append((f"{m} {lab}", r["median_ms"] / fast["median_ms"] if (r and fast) else None))
    goal("kahan, fp64 time <= 1.1x fast's (inputs >= 16 MiB)", items, 1.1, False)

    if "exact" in modes:   # issue 7: exact >= 90% of fast's throughput
        items = []
        for lab in big:
            fast, exact = usable("precred", lab, "fast"), usable("precred", lab, "exact")
            items.append((f"exact {lab}", exact["gbps"] / fast["gbps"] if (fast and exact) else None))
        goal("exact >= 0.9x fast's GB/s (inputs >= 16 MiB)", items, 0.9, True)

    streaming = [lab for lab in torch_labels if by_key[("torch", lab, None)]["dim"] is None
                 or (by_key[("torch", lab, None)]["shape"] == [1024, 65536]
                     and by_key[("torch", lab, None)]["dim"] == -1)]
    items = []
    for lab in streaming:
        for m in modes:
            r = usable("precred", lab, m)
            items.append((f"{m} {lab}", r["gbps"] / copy_gbps if (r and copy_gbps) else None))
    goal(">= 90% of copy GB/s on 2^28 full and 1024x65536 d-1 (every mode)", items, 0.9, True, " of copy")

    lab = Case((16, 262144), -1, "float32").label
    items = [(f"{m} {lab}", ratio(lab, m)) for m in modes] if lab in torch_labels else []
    goal("16x262144 f32 d-1 >= 1.2x torch.sum (every mode)", items, 1.2, True)

    lat = report.get("latency") or []
    items = [(f"{r['mode']}", r.get("ratio_to_torch")) for r in lat if r["impl"] == "precred"]
    goal("64x4096 f32 d-1 loop time per call <= 1.5x torch's (every mode)", items, 1.5, False)
    return goals


# ------------------------------------------------------------------------------------------ output
def fmt_gbps(r) -> str:
    if r is None:
        return "-"
    if not r["median_ms"]:
        return r["ok"]
    s = f"{r['gbps']:.0f}" if r["gbps"] >= 10 else f"{r['gbps']:.3g}"
    if r["ok"] != "ok":
        s += "!"
    return s


def print_final(report: dict) -> None:
    recs = report["records"]
    modes = report["modes"]
    log("")
    log("=" * 100)
    t = report.get("tests")
    if t:
        log(f"TESTS: {t.get('summary')}  (rc={t['returncode']}{', TIMED OUT' if t['timed_out'] else ''})")
    log("GOALS")
    for g in report.get("goals", []):
        log(f"  {g['status']}  {g['goal']}: {g['detail']}")
        for f in g["failing"][:4]:
            v = "missing/wrong" if f["value"] is None else f"{f['value']:.3f}"
            log(f"          {f['where']}: {v}")
        if len(g["failing"]) > 4:
            log(f"          ... {len(g['failing']) - 4} more")
    lat = report.get("latency") or []
    if lat:
        log(f"LATENCY ({lat[0]['case']}, us per call, Python loop of {LATENCY_CALLS}): " + "  ".join(
            f"{r['impl'] if r['impl'] != 'precred' else r['mode']}={r['us_per_call']:.1f}"
            if r.get("us_per_call") else f"{r['mode']}=ERR" for r in lat))
    copy = report.get("copy") or {}
    log(f"{report['device']} | copy {copy.get('gbps', 0):.0f} GB/s | GB/s (ratio to torch); ! = wrong result")
    head = f"{'case':<20} {'torch':>6}" + "".join(f" {m:>11}" for m in modes) + f" {'flaggems':>11}"
    log(head)
    labels = list(dict.fromkeys(r["case"] for r in recs))
    for label in labels:
        by = {(r["impl"], r["mode"]): r for r in recs if r["case"] == label}
        line = f"{label:<20} {fmt_gbps(by.get(('torch', None))):>6}"
        for impl, mode in [("precred", m) for m in modes] + [("flaggems", None)]:
            r = by.get((impl, mode))
            if r is None:
                cell = "-"
            elif r["median_ms"] and r["ratio_to_torch"]:
                cell = f"{fmt_gbps(r)} {r['ratio_to_torch']:.2f}"
            else:
                cell = fmt_gbps(r)
            line += f" {cell:>11}"
        log(line)


def write_json(out_dir: Path, report: dict) -> None:
    tmp = out_dir / "bench.json.tmp"
    tmp.write_text(json.dumps(report, indent=1, default=str))
    tmp.replace(out_dir / "bench.json")


def run_accuracy(out_dir: Path) -> None:
    """The error report on this GPU at its default cuda sizes, float32 and bfloat16."""
    from precred.report.cli import main as report_main
    report_main(["--device", "cuda", "--dtypes", "float32,bfloat16", "--out", str(out_dir / "accuracy")])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="folder for bench.json, tests.log, accuracy/")
    ap.add_argument("--skip-tests", action="store_true")
    ap.add_argument("--quick", action="store_true", help="smoke run: 3 fp32 cases")
    ap.add_argument("--accuracy", action="store_true", help="also run precred-report --device cuda (before FlagGems)")
    ap.add_argument("--no-gems", action="store_true", help="skip the FlagGems column")
    ap.add_argument("--only", default=None, help="regex on case labels, e.g. 'f32' or '8192x8192'")
    ap.add_argument("--budget-s", type=float, default=500.0,
                    help="soft limit for the whole run: later cases are skipped past it (default 500)")
    ap.add_argument("--tests-timeout", type=float, default=360.0, help="kill pytest after this (default 360)")
    ap.add_argument("--test-workers", type=int, default=0,
                    help="pytest-xdist workers for the tests (default 0: one process; needs xdist importable)")
    ap.add_argument("--label", default=None, help="free text stored in bench.json (e.g. the commit)")
    args = ap.parse_args(argv)

    start = time.monotonic()
    deadline = start + args.budget_s
    out_dir = args.out
    out_dir.mkdir(parents=True, exist_ok=True)

    import torch
    if not torch.cuda.is_available():
        log("no CUDA device: this suite needs a GPU")
        return 2
    props = torch.cuda.get_device_properties(0)
    report: dict = {"device": torch.cuda.get_device_name(0), "sm_count": props.multi_processor_count,
                    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                    "label": args.label, "versions": versions(), "quick": args.quick,
                    "protocol": "GB/s = (input bytes + output bytes) / median do_bench time "
                                "(warmup=25 ms, rep=100 ms, L2 flushed)",
                    "modes": [], "records": [], "latency": [], "goals": []}
    log(f"[device] {report['device']} ({report['sm_count']} SMs) | " +
        " ".join(f"{k} {v}" for k, v in report["versions"].items()))

    # Tests first, before this process holds GPU memory.
    if not args.skip_tests:
        reserve = 200 if not args.quick else 60  # seconds kept for the benchmarks
        timeout = max(30.0, min(args.tests_timeout, deadline - time.monotonic() - reserve))
        report["tests"] = run_tests(out_dir, timeout, workers=args.test_workers)
        write_json(out_dir, report)

    try:
        import precred
        modes = list(precred.MODES)
    except Exception as e:
        log(f"[precred] import failed: {type(e).__name__}: {e}")
        modes = []
    report["modes"] = modes

    report["copy"] = measure_copy()
    write_json(out_dir, report)

    cases = make_cases(args.quick)
    if args.only:
        cases = [c for c in cases if re.search(args.only, c.label)]
    inputs = Inputs()
    refs: dict = {}
    gems_reserve = 0 if args.no_gems else 45
    acc_reserve = 150 if args.accuracy else 0
    report["records"] = bench_torch_precred(cases, inputs, modes, deadline - gems_reserve - acc_reserve, refs)
    write_json(out_dir, report)

    report["latency"] = measure_latency(inputs, modes)
    write_json(out_dir, report)

    if args.accuracy:
        if time.monotonic() < deadline - gems_reserve:
            try:
                run_accuracy(out_dir)
            except Exception as e:
                log(f"[accuracy] failed: {type(e).__name__}: {e}")
        else:
            log("[accuracy] SKIPPED (time budget)")

    if not args.no_gems:
        torch_ms = {c: r["median_ms"] for c in cases for r in report["records"]
                    if r["impl"] == "torch" and r["case"] == c.label}
        gems_recs, info = bench_gems(cases, inputs, refs, torch_ms, deadline)
        report["records"] += gems_recs
        report["flaggems"] = info
        if gems_recs:
            try:
                gl = measure_latency(inputs, modes, impls=("flaggems",))
                torch_us = next((r["us_per_call"] for r in report["latency"] if r["impl"] == "torch"), None)
                for r in gl:
                    if torch_us and r.get("us_per_call"):
                        r["ratio_to_torch"] = r["us_per_call"] / torch_us
                report["latency"] += gl
            except Exception as e:
                log(f"[gems] latency failed: {type(e).__name__}: {e}")

    report["goals"] = evaluate_goals(report)
    report["seconds"] = round(time.monotonic() - start, 1)
    write_json(out_dir, report)
    log(f"[done] {report['seconds']} s; wrote {out_dir / 'bench.json'}")
    print_final(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
