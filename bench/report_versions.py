"""The software versions a benchmark records: precred-report's list (precred/report/cli.py) plus the git
revision of this checkout (shared by gpu_suite.py and var_suite.py)."""
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
            v["git"] = rev.stdout.strip()
    except Exception:
        pass
    return v
