"""The software versions a benchmark or accuracy report records (shared by gpu_suite.py and accuracy.py)."""
import platform
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def versions() -> dict:
    """python, torch (and its CUDA), triton, numpy, mpmath, precred and the git revision, where present."""
    import torch
    import triton
    v = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
         "triton": triton.__version__}
    for name in ("numpy", "mpmath"):
        try:
            v[name] = __import__(name).__version__
        except Exception:
            pass
    try:
        import precred
        v["precred"] = getattr(precred, "__version__", None)
    except Exception as e:
        v["precred"] = f"import failed: {type(e).__name__}: {e}"[:200]
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                             text=True, timeout=10)
        if rev.returncode == 0:
            v["git"] = rev.stdout.strip()
    except Exception:
        pass
    return v
