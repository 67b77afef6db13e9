"""python -m precred.report: the error report (see precred/report/cli.py)."""
from .cli import main

raise SystemExit(main())
