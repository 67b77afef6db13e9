"""The error report (`precred-report`, `python -m precred.report`): ulp error of every mode of every op
against the exact oracle, on input families of your choice or on your own tensor.

ops.py says what is measured (one entry per op), inputs.py which data, measure.py how one cell is
measured, render.py what is written (console tables, JSON, CSV, PNG, markdown), cli.py the command.
Not imported by `import precred` (it pulls in rich and matplotlib).
"""
from .cli import main

__all__ = ["main"]
