"""precred-report end to end on tiny sizes: the table, the PNG, the CSV and the JSON exist and agree, and
the reported errors match a direct computation (Python Fractions, not the report's oracle path)."""
import csv
import json
import math
from fractions import Fraction

import numpy as np
import pytest
import torch

import precred
from precred.report.cli import main, parse_args, cell_input
from precred.report.inputs import family_generator
from precred.report.render import CSV_FIELDS, cell_text, fmt
from validation.oracle import round_to

from conftest import DEVICE

RUN = ["--ops", "sum,var", "--families", "normal,offset:1e3", "--lengths", "16,45", "--rows", "3",
       "--conds", "1e5,1e9", "--cond-n", "24", "--seed", "7", "--device", DEVICE]


@pytest.fixture(scope="module")
def report_run(tmp_path_factory):
    """One run of the command; returns (exit code, printed text, out folder, report)."""
    out = tmp_path_factory.mktemp("report")
    import io
    from contextlib import redirect_stdout
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(RUN + ["--out", str(out)])
    return code, buf.getvalue(), out, json.loads((out / "report.json").read_text())


def test_run_writes_agreeing_table_png_csv_json(report_run):
    code, text, out, report = report_run
    assert code == 0, text
    recs = report["records"]
    # sum: 2 families x 2 lengths + 2 condition numbers; var: 2 x 2 (no condition sweep); each cell has
    # torch, torch-fp64 and every mode of the op.
    n_sum, n_var = 2 + len(precred.MODES), 2 + len(precred.VAR_MODES)
    assert len(recs) == 6 * n_sum + 4 * n_var
    assert not [r for r in recs if r.get("error")]
    assert {r["sweep"] for r in recs if r["op"] == "var"} == {"length"}
    # CSV: the same records, the same numbers.
    with open(out / "report.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == CSV_FIELDS and len(rows) == len(recs)
    for row, rec in zip(rows, recs):
        assert (row["op"], row["impl"], int(row["n"])) == (rec["op"], rec["impl"], rec["n"])
        assert float(row["ulp_max"]) == rec["ulp"]["max"]
        assert float(row["ulp_median"]) == rec["ulp"]["median"]
        assert float(row["err_over_scale_max"]) == rec["err_over_scale"]["max"]
    # The printed table shows every record's cell, and the bound check passed.
    for rec in recs:
        assert cell_text(rec) in text, cell_text(rec)
        if rec["mode"] is not None:
            assert rec["rows_beyond_bound"] == 0 and rec["bound_ulp_worst"] > 0
    assert str(out / "report.png") in text
    # The PNG is an image matplotlib can read back.
    import matplotlib.image
    img = matplotlib.image.imread(out / "report.png")
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100


def _independent_ulp(exact: Fraction, dtype) -> Fraction:
    """Spacing of fp32/bf16 at |exact| by integer arithmetic on the Fraction (not validation.oracle.ulp)."""
    p = {torch.float32: 24, torch.bfloat16: 8}[dtype]
    a = abs(exact)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    return Fraction(2) ** (max(e, -126) - p + 1)


def _direct(op, impl, x):
    """Per-row ulp errors, computed here from Python Fractions of the row and of the result."""
    xd = x.to(DEVICE)
    if op == "sum":
        out = torch.sum(xd, -1) if impl == "torch" else precred.sum(xd, dim=-1, mode=impl)
    else:
        out = torch.var(xd, -1) if impl == "torch" else precred.var(xd, dim=-1, mode=impl)
    errs, correct = [], []
    for row, value in zip(x.double().tolist(), out.double().cpu().tolist()):
        fr = [Fraction(v) for v in row]
        s = sum(fr, Fraction(0))
        if op == "sum":
            exact = s
        else:
            mu = s / len(fr)
            exact = sum(((v - mu) ** 2 for v in fr), Fraction(0)) / (len(fr) - 1)
        errs.append(float(abs(Fraction(value) - exact) / _independent_ulp(exact, x.dtype)))
        correct.append(value == round_to(exact, x.dtype))
    return errs, sum(correct) / len(correct)


@pytest.mark.parametrize("op", ["sum", "var"])
def test_reported_errors_match_a_direct_computation(report_run, op):
    _, _, _, report = report_run
    args = parse_args(RUN)
    impls = ["torch"] + list(precred.MODES if op == "sum" else precred.VAR_MODES)
    checked = 0
    for rec in report["records"]:
        if rec["op"] != op or rec["impl"] not in impls:
            continue
        cell = {k: rec[k] for k in ("op", "sweep", "family", "n", "cond")}
        x = cell_input(cell, args, torch.float32, None)
        errs, frac = _direct(op, rec["impl"], x)
        assert rec["ulp"]["max"] == max(errs), (rec, errs)
        assert rec["ulp"]["median"] == float(np.median(errs)), (rec, errs)
        assert rec["correctly_rounded"] == frac
        checked += 1
    assert checked == (6 if op == "sum" else 4) * len(impls)


def test_user_tensor_from_npy_and_pt(tmp_path):
    rng = np.random.default_rng(3)
    a = (1e3 + rng.standard_normal((2, 3, 20))).astype(np.float32)
    np.save(tmp_path / "mine.npy", a)
    torch.save(torch.from_numpy(a[0]).to(torch.bfloat16), tmp_path / "mine.pt")
    for name, dtype, rows in (("mine.npy", "float32", 6), ("mine.pt", "bfloat16", 3)):
        out = tmp_path / name.replace(".", "_")
        code = main(["--ops", "var", "--families", "normal", "--lengths", "8", "--rows", "2", "--conds", "",
                     "--input", str(tmp_path / name), "--out", str(out), "--device", DEVICE])
        assert code == 0
        recs = json.loads((out / "report.json").read_text())["records"]
        mine = [r for r in recs if r["family"] == f"file:{name}"]
        assert mine and all(r["dtype"] == dtype and r["rows"] == rows and r["n"] == 20 for r in mine)
        assert all(r["rows_beyond_bound"] == 0 for r in mine if r["mode"])


def test_page_from_runs(report_run, tmp_path):
    _, _, out, report = report_run
    page = tmp_path / "accuracy.md"
    assert main(["--page", str(page), "--from", str(out / "report.json")]) == 0
    text = page.read_text()
    assert "report.png)" in text and report["device"] in text
    for rec in report["records"]:
        assert cell_text(rec) in text
    assert "| sum | float32 | ill-conditioned sweep | kahan |" in text


@pytest.mark.parametrize("argv, match", [
    (["--ops", "median"], "--ops: unknown op 'median'"),
    (["--families", "gaussian"], "unknown family 'gaussian'"),
    (["--families", "ill:abc"], "'abc' is not a number"),
    (["--dtypes", "int32"], "--dtypes: 'int32'"),
    (["--lengths", "1"], "--lengths: rows need at least 2"),
    (["--input", "/nonexistent/x.pt"], "--input /nonexistent/x.pt: no such file"),
])
def test_bad_arguments_name_themselves(argv, match, tmp_path):
    with pytest.raises((ValueError, TypeError), match=match):
        main(argv + ["--out", str(tmp_path), "--device", DEVICE])


def test_page_needs_sources(tmp_path):
    with pytest.raises(SystemExit):
        main(["--page", str(tmp_path / "x.md")])


def test_family_specs():
    rng = np.random.default_rng(0)
    x = family_generator("offset:1e3")(64, rng, torch.float32)
    assert abs(float(x.double().mean()) - 1e3) < 1
    from validation.generators import condition_number
    c = condition_number(family_generator("ill:1e6")(64, rng, torch.float32))
    assert 1e5 <= c <= 1e7
    assert fmt(math.inf) == "inf" and fmt(None) == "–" and fmt(0.0) == "0"


def test_bound_depth_is_the_plan_that_runs():
    """The report holds each mode to its bound at the depth of the plan the call runs: the two-pass rows
    kernel's for var / std `fast` over fp32 rows it takes (plan.plan_moments_rows), the single-read
    logsumexp's for `fp64` and `fast` over short fp32 rows (plan.plan_logsumexp_rows), plan_for's
    elsewhere (bf16 rows among them)."""
    from precred.launch import plan_for
    from precred.modes import get_exp_mode, get_var_mode
    from precred.plan import plan_logsumexp_rows, plan_moments_rows
    from precred.report.ops import OPS
    rows = torch.zeros(3, 1024)
    for op in ("var", "std"):
        assert OPS[op].plan_depth(rows, "fast") == plan_moments_rows(3, 1024, element_size=4, accumulator_size=4).depth
        assert OPS[op].plan_depth(rows, "fp64") == plan_for(rows, (1,), get_var_mode("fp64"), torch.float32)[1].depth
    short = torch.zeros(3, 100)
    assert OPS["logsumexp"].plan_depth(short, "fp64") == plan_logsumexp_rows(3, 100, element_size=4,
                                                                           accumulator_size=8).depth
    assert OPS["logsumexp"].plan_depth(short, "fast") == plan_logsumexp_rows(3, 100, element_size=4,
                                                                           accumulator_size=4).depth
    short16 = short.to(torch.bfloat16)
    assert OPS["logsumexp"].plan_depth(short16, "fast") == plan_for(short16, (1,), get_exp_mode("fast"),
                                                                    torch.bfloat16)[1].depth
    assert OPS["var"].plan_depth(short, "fast") == plan_for(short, (1,), get_var_mode("fast"), torch.float32)[1].depth
