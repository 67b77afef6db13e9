"""The software versions a benchmark records: precred-report's list (precred/report/cli.py) plus the git
revision of this checkout (shared by gpu_suite.py and var_suite.py), marked "+changes" where tracked files
differ from it: the device tool runs a copy of the working tree whose git metadata may be older than
the code it holds (norm-bench-h100.json of 2026-11-25 says 4a8465a; its code was d582ff9's)."""
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def versions() -> dict:
    from precred.report.cli import software_versions
    v = software_versions()
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                             text=True, timeout=10)
        if rev.returncode == 0:
            changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                                     capture_output=True, text=True, timeout=30).stdout.strip()
            v["git"] = rev.stdout.strip() + ("+changes" if changed else "")
    except Exception:
        pass
    return v
