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
from precred.report.cli import main, parse_args, cell_input, cell_rows
from precred.report.inputs import family_generator
from precred.report.render import CSV_FIELDS, cell_text, fmt
from validation.oracle import format_info, mpf_to_fraction, round_to, ulp

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
        # The report's figures carry two fp64 roundings (precred.report.measure's float measure).
        assert rec["ulp"]["max"] == pytest.approx(max(errs), rel=2 ** -50, abs=0), (rec, errs)
        assert rec["ulp"]["median"] == pytest.approx(float(np.median(errs)), rel=2 ** -50, abs=0), (rec, errs)
        assert rec["correctly_rounded"] == frac
        checked += 1
    assert checked == (6 if op == "sum" else 4) * len(impls)


ELEMENT_RUN = ["--ops", "softmax,log_softmax,layer_norm,rms_norm", "--families", "normal,offset:1e3,wide",
               "--lengths", "16,45", "--rows", "3", "--dtypes", "float32,bfloat16", "--seed", "5", "--device", DEVICE]
ELEMENT_OPS = {"softmax": precred.EXP_MODES, "log_softmax": precred.EXP_MODES, "layer_norm": precred.NORM_MODES,
               "rms_norm": precred.NORM_MODES}


@pytest.fixture(scope="module")
def element_run(tmp_path_factory):
    """One run over the per-element ops (an output an element); returns (exit code, out folder, report)."""
    out = tmp_path_factory.mktemp("element_report")
    import io
    from contextlib import redirect_stdout
    with redirect_stdout(io.StringIO()):
        code = main(ELEMENT_RUN + ["--out", str(out)])
    return code, out, json.loads((out / "report.json").read_text())


def test_per_element_ops_run_within_their_bounds(element_run):
    """Every cell of softmax, log_softmax, layer_norm and rms_norm ran (torch, torch-fp64, each mode) at
    the lengths given, and every precred mode kept every element within its bound."""
    code, _, report = element_run
    assert code == 0
    recs = report["records"]
    assert not [r for r in recs if r.get("error")]
    # 4 ops x 2 dtypes x 3 families x 2 lengths, each with torch, torch-fp64 and every mode of the op
    assert len(recs) == 2 * 3 * 2 * sum(2 + len(modes) for modes in ELEMENT_OPS.values())
    assert {r["n"] for r in recs} == {16, 45} and {r["rows"] for r in recs} == {3}
    for r in recs:
        assert r["rows_measured"] == 3 and r["rows_skipped"] == 0
        if r["mode"] is not None:
            assert r["rows_beyond_bound"] == 0, r
            assert r["bound_ulp_worst"] is not None and r["bound_ulp_worst"] > 0, r
    # "bound (ulp)" counts outputs of normal magnitude only: on wide rows, whose underflowing outputs
    # carry the bounds' absolute terms (2^24 and more of their ulps), it stays at the normal outputs'
    # relative bounds, tens of ulps at these lengths.
    wide = [r for r in recs if r["family"] == "wide" and r["mode"] is not None and r["op"] in ("softmax", "log_softmax")]
    assert wide and all(r["bound_ulp_worst"] < 2 ** 10 for r in wide), wide
    # the fp64 modes round once: within half an ulp of the exact value, plus what the bound allows
    fp64_like = [r for r in recs if r["impl"] in ("fp64", "accurate", "precise") and r["family"] == "normal"]
    assert fp64_like and all(r["ulp"]["max"] <= r["bound_ulp_worst"] for r in fp64_like)


def _element_exact(op: str, row: list[float]) -> list[Fraction]:
    """The exact outputs of one row, here from mpmath at 200 bits (not validation's references)."""
    import mpmath
    with mpmath.workprec(200):
        xs = [mpmath.mpf(v) for v in row]
        if op in ("softmax", "log_softmax"):
            m = max(xs)
            lse = m + mpmath.log(mpmath.fsum(mpmath.exp(v - m) for v in xs))
            ys = [v - lse if op == "log_softmax" else mpmath.exp(v - lse) for v in xs]
        else:
            n = len(xs)
            mean = mpmath.fsum(xs) / n if op == "layer_norm" else 0
            var = mpmath.fsum((v - mean) ** 2 for v in xs) / n
            rstd = 1 / mpmath.sqrt(var + mpmath.mpf(1e-5))
            ys = [(v - mean) * rstd for v in xs]
        return [mpf_to_fraction(mpmath.mpf(y)) for y in ys]


def _element_direct(op, impl, x):
    """Per-row worst ulp error and whether the row is correctly rounded, from _element_exact."""
    xd = x.to(DEVICE)
    if impl == "torch":
        out = {"softmax": lambda: torch.softmax(xd, -1), "log_softmax": lambda: torch.log_softmax(xd, -1),
               "layer_norm": lambda: torch.nn.functional.layer_norm(xd, [x.shape[-1]], eps=1e-5),
               "rms_norm": lambda: torch.nn.functional.rms_norm(xd, [x.shape[-1]], eps=1e-5)}[op]()
    else:
        out = {"softmax": lambda: precred.softmax(xd, -1, mode=impl),
               "log_softmax": lambda: precred.log_softmax(xd, -1, mode=impl),
               "layer_norm": lambda: precred.layer_norm(xd, [x.shape[-1]], eps=1e-5, mode=impl),
               "rms_norm": lambda: precred.rms_norm(xd, [x.shape[-1]], eps=1e-5, mode=impl)}[op]()
    worst, correct = [], []
    for row, values in zip(x.double().tolist(), out.double().cpu().tolist()):
        exact = _element_exact(op, row)
        worst.append(max(float(abs(Fraction(v) - e) / _independent_ulp(e, x.dtype)) if e else
                         (0.0 if v == 0 else math.inf) for v, e in zip(values, exact)))
        correct.append(all(v == round_to(e, x.dtype) for v, e in zip(values, exact)))
    return worst, sum(correct) / len(correct)


@pytest.mark.parametrize("op", list(ELEMENT_OPS))
def test_reported_element_errors_match_a_direct_computation(element_run, op):
    """The normal and offset cells' worst ulp error per row (max and median over rows) and fraction of
    rows correctly rounded, recomputed from mpmath here: equal up to the two references' own
    difference (2^-190 relative, far below the 1e-9 the comparison allows)."""
    _, _, report = element_run
    args = parse_args(ELEMENT_RUN)
    checked = 0
    for rec in report["records"]:
        if rec["op"] != op or rec["impl"] == "torch-fp64" or rec["family"] == "wide" or rec["dtype"] != "float32":
            continue
        cell = {k: rec[k] for k in ("op", "sweep", "family", "n", "cond")}
        x = cell_input(cell, args, torch.float32, None)
        worst, frac = _element_direct(op, rec["impl"], x)
        assert rec["ulp"]["max"] == pytest.approx(max(worst), rel=1e-9, abs=1e-12), (rec, worst)
        assert rec["ulp"]["median"] == pytest.approx(float(np.median(worst)), rel=1e-9, abs=1e-12), (rec, worst)
        assert rec["correctly_rounded"] == frac
        checked += 1
    assert checked == 2 * 2 * (1 + len(ELEMENT_OPS[op]))


def test_an_element_beyond_its_bound_fails_the_run(tmp_path, monkeypatch):
    """A mode whose outputs were off by more than its bound (here softmax's fp64 mode scaled by 1 + 2^-12,
    ~2000 fp32 ulps) is reported: rows beyond the bound, exit code 1."""
    import dataclasses
    from precred.report.ops import OPS
    wrong = dataclasses.replace(OPS["softmax"], precred_run=lambda x, m: precred.softmax(x, -1, mode=m)
                                * (1 + 2.0 ** -12) if m == "fp64" else precred.softmax(x, -1, mode=m))
    monkeypatch.setitem(OPS, "softmax", wrong)
    import io
    from contextlib import redirect_stdout
    with redirect_stdout(io.StringIO()):
        code = main(["--ops", "softmax", "--families", "normal", "--lengths", "16", "--rows", "2",
                     "--out", str(tmp_path), "--device", DEVICE])
    recs = json.loads((tmp_path / "report.json").read_text())["records"]
    assert code == 1
    assert [r["rows_beyond_bound"] for r in recs if r["mode"] == "fp64"] == [2]
    assert all(r["rows_beyond_bound"] == 0 for r in recs if r["mode"] not in (None, "fp64"))


# ------------------------------------------------------------- the float measure against Fractions
def _neighbors(v: float, dtype, k: int) -> list[float]:
    """v and the k representable values of dtype on each side of it (inf past the largest)."""
    out, up, down = [v], torch.tensor([v], dtype=dtype), torch.tensor([v], dtype=dtype)
    for _ in range(k):
        up, down = torch.nextafter(up, up.new_full((1,), math.inf)), torch.nextafter(down, down.new_full((1,), -math.inf))
        out += [up.item(), down.item()]
    return out


def _adversarial_elements(dtype, rng) -> list[tuple]:
    """(exact, result) pairs where a float measure could go wrong: ties of the output dtype and values
    just off them (2^-200 and 2^-1100 away: the second's rest underflows fp64), binade edges, subnormals
    of the dtype and of fp64, exact values beyond fp64 and rounding to inf, -inf, zero, NaN and inf
    results, results whose difference overflows fp64, and random values across the exponent range."""
    p, emin, emax = format_info(dtype)
    F = Fraction
    exacts = [F(0), F(2) ** (emin - p + 1) * F(3, 2), F(2) ** (emin - p), F(2) ** (emin - p + 1) * F(1, 3),
              F(2) ** -1074 * F(5, 2), F(2) ** -1100, F(2) ** 1100, -F(2) ** 1100,
              (2 - F(2) ** (1 - p)) * F(2) ** emax + F(2) ** (emax - p),         # max finite + ulp/2: inf
              (2 - F(2) ** (1 - p)) * F(2) ** emax + F(2) ** (emax - p) * F(99, 100),
              F(10) ** 308, -F(10) ** 308]
    for e in (0, emin, emax - 1, -20, 30):
        base = F(2) ** e
        mid = base * (1 + F(2) ** -p)                                         # a tie of the dtype
        odd = base * (1 + F(3) * F(2) ** -p)                                  # a tie that rounds up
        for m in (mid, odd):
            exacts += [m, m * (1 + F(2) ** -200), m * (1 - F(2) ** -200), m + F(2) ** -1100, m - F(2) ** -1100]
        exacts += [base * (1 - F(2) ** -60), base * (1 - F(2) ** -200), base * (1 + F(2) ** -200),
                   base * (1 - F(2) ** -p) * (1 - F(2) ** -70), -base * F(7, 3)]
    for _ in range(300):                                                      # random, 100-bit mantissas
        e = int(rng.integers(emin - p - 2, emax + 1))
        exacts.append((-1) ** int(rng.integers(2)) * F(int(rng.integers(1 << 62)) << 38 | 1, 1 << 99) * F(2) ** e)
    pairs = []
    for ex in exacts:
        r = round_to(ex, dtype)
        base = r if math.isfinite(r) else math.copysign(torch.finfo(dtype).max, r)
        pairs += [(ex, v) for v in _neighbors(base, dtype, 2)]
        pairs += [(ex, math.nan), (ex, math.inf), (ex, -math.inf)]
    pairs += [(-math.inf, v) for v in (-math.inf, 0.0, math.nan, 1.0)]
    if dtype == torch.float64:
        pairs += [(F(10) ** 308, -1.7e308), (-F(10) ** 308, 1.7e308)]        # result - hi overflows fp64
    return pairs


def _bounds_around(ex, v, dtype) -> list[float]:
    """Bounds at the error exactly (where a float holds it), a float on either side of it, and far off."""
    if not (isinstance(ex, Fraction) and math.isfinite(v)):
        return [0.0, 1.0, math.inf]
    d = abs(Fraction(v) - ex)
    try:
        f = float(d)
    except OverflowError:
        return [1e308, math.inf]
    return [f, math.nextafter(f, 0), math.nextafter(f, math.inf), 2 * f + 1e-300, f / 2, math.inf]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_float_measure_decides_as_fractions_do(dtype):
    """precred.report.measure's float measure (exact_arrays + element_errors) against the exact way,
    each result in Fractions (row_error; beyond the bound where the exact |result - exact| exceeds it,
    as the report did before the float measure): the same 'correctly rounded' and 'beyond the bound'
    on every adversarial pair, and the same figures up to the float measure's stated error (two fp64
    roundings, 2^-50 of the figure, and lo's, 2^-100 |exact| / the divisor)."""
    from precred.report.measure import element_errors, exact_arrays, row_error
    from precred.report.ops import RowTruth
    rng = np.random.default_rng(11)
    triples = [(ex, v, b) for ex, v in _adversarial_elements(dtype, rng) for b in _bounds_around(ex, v, dtype)]
    scale = Fraction(3, 7)
    for row_scale in (scale, Fraction(0)):
        exact = exact_arrays([RowTruth([t[0] for t in triples], row_scale, None)], dtype, len(triples))
        assert exact.fast.sum() > len(triples) // 2          # most pairs take the float measure
        assert (~exact.fast).sum() > 20                      # and the exact way is exercised too
        got = element_errors(np.array([[t[1] for t in triples]]), exact, dtype, np.array([[t[2] for t in triples]]))
        for j, (ex, v, b) in enumerate(triples):
            ref = row_error(v, RowTruth(ex, row_scale, None), dtype)
            ref_beyond = math.isfinite(b) and not ref.correct and (ref.diff is None or ref.diff > Fraction(b))
            where = (dtype, ex, v, b)
            assert bool(got.correct[0, j]) == ref.correct, where
            assert bool(got.beyond[0, j]) == ref_beyond, where
            # |exact| in lo's term; 0 beyond fp64, where the exact way measures (no float error).
            size = abs(float(ex)) if isinstance(ex, Fraction) and abs(ex) <= Fraction(torch.finfo(torch.float64).max) else 0.0
            for figure, want, divisor in ((got.ulps[0, j], ref.ulps, ulp(ex, dtype)), (got.over_scale[0, j],
                                          ref.over_scale, row_scale)):
                if not math.isfinite(want) or want == 0:
                    assert figure == want, where
                else:
                    slack = 2 ** -100 * size / float(divisor) if divisor else 0.0
                    assert abs(figure - want) <= 2 ** -50 * want + slack, (where, figure, want)


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


def test_user_tensor_with_masked_elements(tmp_path):
    """A tensor of attention-like rows for softmax / log_softmax: -inf elements (output 0 / -inf, exact),
    a row of one finite value among -inf, and a row with NaN (skipped, counted: no finite exact value)."""
    x = torch.randn(4, 12, generator=torch.Generator().manual_seed(2))
    x[0, 3:7] = -math.inf
    x[1, :] = -math.inf
    x[1, 5] = 2.0
    x[2, 4] = math.nan
    torch.save(x, tmp_path / "masked.pt")
    code = main(["--ops", "softmax,log_softmax", "--families", "normal", "--lengths", "8", "--rows", "1",
                 "--input", str(tmp_path / "masked.pt"), "--out", str(tmp_path / "out"), "--device", DEVICE])
    assert code == 0
    recs = [r for r in json.loads((tmp_path / "out" / "report.json").read_text())["records"]
            if r["family"] == "file:masked.pt"]
    assert len(recs) == 2 * (2 + len(precred.EXP_MODES))
    for r in recs:
        assert (r["rows_measured"], r["rows_skipped"]) == (3, 1), r
        if r["mode"] is not None:
            assert r["rows_beyond_bound"] == 0, r   # the -inf elements' bound is 0: exactly 0 / -inf


@pytest.mark.parametrize("finite_rows", [0, 1])
def test_user_rows_with_inf_or_nan_are_skipped(finite_rows, tmp_path):
    """Rows with NaN or inf have no finite exact value: each op skips and counts them (every row such, or
    all but the first), measures the others, and no cell fails."""
    x = torch.randn(3, 10, generator=torch.Generator().manual_seed(4))
    x[finite_rows:, 2] = math.nan
    x[2, 7] = math.inf
    torch.save(x, tmp_path / "specials.pt")
    ops = ["sum", "mean", "var", "std", "logsumexp", "softmax", "log_softmax", "layer_norm", "rms_norm"]
    code = main(["--ops", ",".join(ops), "--families", "normal", "--lengths", "8", "--rows", "1",
                 "--input", str(tmp_path / "specials.pt"), "--out", str(tmp_path / "out"), "--device", DEVICE])
    recs = [r for r in json.loads((tmp_path / "out" / "report.json").read_text())["records"]
            if r["family"] == "file:specials.pt"]
    assert code == 0 and not [r for r in recs if r.get("error")]
    assert {r["op"] for r in recs} == set(ops)
    for r in recs:
        assert (r["rows_measured"], r["rows_skipped"]) == (finite_rows, 3 - finite_rows), r
        assert (r["ulp"]["max"] is None) == (finite_rows == 0), r


def test_float64_rows_over_the_exponent_range(tmp_path):
    """fp64 input: sum has no `exact` column (its TypeError is by design, not a failure to report), and
    rows over fp64's whole exponent range -- whose S1, variance and second-order bound terms leave fp64
    -- are measured: no record fails (before: OverflowError in the bounds' arguments), none beyond its
    bound."""
    code = main(["--ops", "sum,var,layer_norm", "--dtypes", "float64", "--families", "wide", "--lengths", "40",
                 "--rows", "2", "--conds", "1e3", "--cond-n", "24", "--out", str(tmp_path), "--device", DEVICE])
    recs = json.loads((tmp_path / "report.json").read_text())["records"]
    assert code == 0 and recs and not [r for r in recs if r.get("error")]
    assert {r["impl"] for r in recs if r["op"] == "sum"} == {"torch", "torch-fp64"} | set(precred.MODES) - {"exact"}
    assert all(r["rows_beyond_bound"] == 0 and r["rows_measured"] == 2 for r in recs if r["mode"] is not None)


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


def test_cuda_run_cells_span_issue_2s_lengths_with_a_median_of_rows():
    """The cuda run's one-value-a-row cells run n = 2^12 .. 2^24 (issue 2's sum figures), each cell at
    least two rows (a median, not one row's error); the per-element ops' long rows may come one a cell;
    --rows still caps them."""
    args = parse_args(["--device", "cuda"])
    lengths = [int(v) for v in args.lengths.split(",")]
    assert min(lengths) == 2 ** 12 and max(lengths) == 2 ** 24
    for op in ("sum", "var", "logsumexp"):
        assert [cell_rows(op, n, args.rows) for n in lengths] == [64, 64, 4, 2]
    assert [cell_rows("softmax", n, args.rows) for n in (1024, 8192)] == [8, 1]
    assert cell_rows("sum", 2 ** 24, 1) == 1
    cpu = parse_args([])
    assert all(cell_rows(op, int(n), cpu.rows) == 8 for op in ("sum", "softmax") for n in cpu.lengths.split(","))


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


def test_filtered_logsumexp_bounds_take_their_fp64_paths_depth():
    """logsumexp's filtered calls are held to the fp64 bound at the depth of the fp64 path that makes the
    outputs their filter leaves (their kept outputs are within the rounding or 2 ulp alone): `accurate`
    over fp32 rows, the accurate rows kernel's finish or recompute; `fp64` / `accurate` over 16-bit rows,
    the certified pass's own finish (rows of 256: plan.certified_exp_in_one_launch) or the recompute
    launch (rows of 100) -- not the plan of another mode's kernel."""
    from precred.launch import device_sm_count, plan_for
    from precred.modes import CERTIFIED_EXP_MODE
    from precred.plan import (certified_exp_in_one_launch, exp_finish_depth, plan_accurate_logsumexp_rows,
                              plan_exp_recompute)
    from precred.report.ops import OPS
    sm_count = device_sm_count(torch.device("cpu"))
    rows = torch.zeros(3, 100)
    accurate = plan_accurate_logsumexp_rows(3, 100, sm_count=sm_count)
    assert accurate.one_tile and OPS["logsumexp"].plan_depth(rows, "accurate") == accurate.finish_depth
    for n, one_launch in ((100, False), (256, True)):
        for dtype in (torch.bfloat16, torch.float16):
            x = torch.zeros(3, n, dtype=dtype)
            plan = plan_for(x, (1,), CERTIFIED_EXP_MODE, dtype)[1]
            assert certified_exp_in_one_launch(plan) == one_launch
            expected = (exp_finish_depth(plan.passes[0]) if one_launch
                        else plan_exp_recompute(3, n, sm_count=sm_count, strided=False).depth)
            for mode in ("fp64", "accurate"):
                assert OPS["logsumexp"].plan_depth(x, mode) == expected, (n, dtype, mode)


def test_per_element_ops_bound_the_plan_that_runs():
    """softmax / log_softmax: the path precred.launch.plan_softmax picks (the single-read kernel's RowPlan
    for short rows, else the row loop's LoopPlan or the two passes' Plan); layer_norm / rms_norm: the
    single-read forward plan, or None where rows stream (the Welford statistics' bound)."""
    from precred.launch import plan_softmax
    from precred.modes import get_exp_mode, get_norm_mode
    from precred.plan import RowPlan, plan_norm_forward
    from precred.report.ops import OPS
    short, long = torch.zeros(3, 100), torch.zeros(2, 1 << 17)
    for op, log in (("softmax", False), ("log_softmax", True)):
        for mode in precred.EXP_MODES:
            assert isinstance(OPS[op].plan(short, mode), RowPlan)
            assert OPS[op].plan(long, mode) == plan_softmax(long, 1, get_exp_mode(mode), torch.float32, log)
        assert not isinstance(OPS[op].plan(long, "fast"), RowPlan)   # the row loop's or the two passes'
    for op in ("layer_norm", "rms_norm"):
        for mode in precred.NORM_MODES:
            acc = get_norm_mode(mode).accumulator_dtype(torch.float32, torch.float32)
            assert OPS[op].plan(short, mode) == plan_norm_forward(3, 100, accumulator_size=acc.itemsize,
                                                                  element_size=4)
            assert OPS[op].plan_depth(short, mode) == OPS[op].plan(short, mode).depth
        assert OPS[op].plan(long, "fast") is None and OPS[op].plan_depth(long, "fast") is None
