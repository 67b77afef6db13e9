"""Every benchmark suite behind docs/, in one device call (GPU): each suite a child process of its own,
in the order asked, for as long as the budget lasts, without their tests (run those apart: bench/README.md).

    python3 bench/refresh_all.py --out DIR [--suites var,extrema,norm,exp,sum,exact,ceiling] [--budget-s 540]

What each writes, under DIR/<suite>/, and the page docs/refresh.py then regenerates from it:
var_bench.json (variance.md), extrema_bench.json (extrema.md), norm_bench.json (normalization.md),
exp_bench.json (logsumexp.md), bench.json (performance.md), exact-fallback.json (exact.md, with
bench.json's exact column), read-ceiling.json (read_ceiling.md: the fastest read the protocol allows, the
measure of the goals stated as a share of the copy). A suite starts only if the budget left covers its
usual time (SUITES, measured on an H100 with a cold Triton cache) and is killed when the budget ends;
DIR/refresh.json records what ran, its exit code, seconds and whole output -- one file for all the logs,
as the device tool brings back at most 8 files from a call: the seven suites' JSONs and this one.
FlagGems is timed only with --gems (its wheel and those of its dependencies carried: bench/README.md; the
usual times are without it); Liger is, where the suite knows it and it imports (carried as a wheel).
"""
import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent

# suite: (its command after the interpreter, given its output folder and the seconds left; the usual
# seconds of a run: H100, fresh machine, 2026-12-06 -- var 40.5, extrema 52.1, norm 57.9, exp 135.6-138.0,
# ceiling 42.9 -- plus ~10%; sum and exact from their runs of 2026-12-05/06). gpu_suite gets a budget of its
# own, which skips its last cases rather than be killed.
SUITES = {
    "var": (lambda out, left: [BENCH / "var_suite.py", "--out", out, "--no-gems"], 45),
    "extrema": (lambda out, left: [BENCH / "extrema_suite.py", "--out", out, "--no-gems"], 60),
    "norm": (lambda out, left: [BENCH / "norm_suite.py", "--out", out, "--no-gems"], 65),
    "exp": (lambda out, left: [BENCH / "exp_suite.py", "--out", out, "--no-gems"], 150),
    "sum": (lambda out, left: [BENCH / "gpu_suite.py", "--out", out, "--skip-tests", "--no-gems",
                               "--budget-s", f"{max(left - 15, 1):.0f}"], 90),
    "exact": (lambda out, left: [BENCH / "exact_fallback.py", "--json", out / "exact-fallback.json"], 75),
    "ceiling": (lambda out, left: [BENCH / "read_ceiling.py", "--out", out], 50),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--suites", default=",".join(SUITES), help="comma-separated, in the order to run")
    ap.add_argument("--budget-s", type=float, default=540.0, help="seconds for all of them")
    ap.add_argument("--gems", action="store_true", help="time FlagGems too, where the suite does")
    args = ap.parse_args(argv)
    names = [s for s in args.suites.split(",") if s]
    unknown = [s for s in names if s not in SUITES]
    if unknown or not names:
        ap.error(f"unknown suites {unknown}; known: {', '.join(SUITES)}" if unknown else "no suite given")
    t0 = time.monotonic()
    ran = []
    for name in names:
        command, usual = SUITES[name]
        left = args.budget_s - (time.monotonic() - t0)
        if left < usual:
            ran.append({"suite": name, "skipped": f"{left:.0f} s left, it usually takes {usual} s"})
            print(f"[refresh] {name}: skipped ({ran[-1]['skipped']})", flush=True)
        else:
            argv = [str(a) for a in command(args.out / name, left) if not (args.gems and a == "--no-gems")]
            ran.append(run_suite(name, argv, args.out / name, left))
        # rewritten after each suite: a call cut short keeps the record of what ran
        (args.out / "refresh.json").write_text(json.dumps(ran, indent=1))
    return 0 if all(r.get("returncode") in (0, None) for r in ran) else 1


def run_suite(name: str, argv: list, out: Path, left: float) -> dict:
    """One suite's child process (its output folder made first), killed after `left` seconds: its record
    -- exit code (or why it was killed), seconds and whole output."""
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    print(f"[refresh] {name}: running (at most {left:.0f} s)", flush=True)
    try:   # the output as bytes either way: TimeoutExpired keeps what came before the kill (or None)
        done = subprocess.run([sys.executable, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=left)
        rc, output = done.returncode, done.stdout
    except subprocess.TimeoutExpired as e:
        rc, output = "killed at the budget's end", e.stdout
    seconds = round(time.monotonic() - start, 1)
    log = (output or b"").decode(errors="replace")
    tail = log.splitlines()[-3:]
    print(f"[refresh] {name}: exit {rc} in {seconds} s; " + " / ".join(line.strip() for line in tail), flush=True)
    return {"suite": name, "returncode": rc, "seconds": seconds, "output": log}


if __name__ == "__main__":
    sys.exit(main())
