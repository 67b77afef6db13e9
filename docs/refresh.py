#!/usr/bin/env python3
"""Move a bench/refresh_all.py run into docs/data/ and regenerate the pages it touches.

    python docs/refresh.py RUN_DIR [--git TEXT]

Each suite's JSON under RUN_DIR/<suite>/ goes to docs/data/<name>-<device>.json, the device (h100 or
h200) read from the JSON's own "device" field, replacing that device's file; then each page is
regenerated from every device's file of it (H100 first). --git replaces the git revision the run
recorded (the device copy's .git may differ from the commit that was run: say which, as the JSONs
before did). Only the pages whose data changed are written.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
DEVICES = ("h100", "h200")

# suite folder: (its JSON, the data file's name before -<device>.json, its generator, its page)
SUITES = {
    "var": ("var_bench.json", "var-bench", "gen_variance.py", "variance.md"),
    "extrema": ("extrema_bench.json", "extrema-bench", "gen_extrema.py", "extrema.md"),
    "norm": ("norm_bench.json", "norm-bench", "gen_norm.py", "normalization.md"),
    "exp": ("exp_bench.json", "exp-bench", "gen_logsumexp.py", "logsumexp.md"),
    "sum": ("bench.json", "bench", "gen_performance.py", "performance.md"),
    "exact": ("exact-fallback.json", "exact-fallback", None, None),   # exact.md: below, with the sum's data
    "ceiling": ("read-ceiling.json", "read-ceiling", "gen_read_ceiling.py", "read_ceiling.md"),
}


def device_of(report: dict) -> str:
    name = str(report.get("device", ""))
    for device in DEVICES:
        if device.upper() in name.upper():
            return device
    raise ValueError(f"no page section for device {name!r} (known: {', '.join(DEVICES)})")


def data_files(name: str) -> list[str]:
    return [f"data/{name}-{device}.json" for device in DEVICES if (DOCS / "data" / f"{name}-{device}.json").exists()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--git", default=None, help="the revision that ran, where the recorded one is not it")
    args = ap.parse_args(argv)
    changed = set()
    for suite, (filename, name, _, _) in SUITES.items():
        source = args.run / suite / filename
        if not source.exists():
            continue
        report = json.loads(source.read_text())
        device = device_of(report)
        if args.git and isinstance(report.get("versions"), dict):
            report["versions"]["git"] = f"{args.git} (given to docs/refresh.py; the run recorded " \
                                        f"{report['versions'].get('git')})"
        target = DOCS / "data" / f"{name}-{device}.json"
        target.write_text(json.dumps(report, indent=1))
        changed.add(suite)
        print(f"{source} -> {target.relative_to(DOCS.parent)}")
    pages = [(generator, data_files(name), page) for suite, (_, name, generator, page) in SUITES.items()
             if suite in changed and generator is not None]
    if changed & {"sum", "exact"}:   # exact.md: each device's exact_fallback run, then its sum run
        exact_inputs = []
        for device in DEVICES:
            pair = [f"data/exact-fallback-{device}.json", f"data/bench-{device}.json"]
            if all((DOCS / f).exists() for f in pair):
                exact_inputs += pair
        pages.append(("gen_exact.py", exact_inputs, "exact.md"))
    for generator, inputs, page in pages:
        subprocess.run([sys.executable, generator, *inputs, "--out", page], cwd=DOCS, check=True)
        print(f"docs/{page} <- {', '.join(inputs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
