"""The device-call tools' own logic, on the CPU: bench/gpu_suite.py's test phases and docs/refresh.py's
device sections (what they run on the GPU is timed there, not here)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "docs"))

import gpu_suite  # noqa: E402
import probe_accurate_columns  # noqa: E402
import refresh  # noqa: E402
import refresh_all  # noqa: E402

SAMPLE = '''import pytest

@pytest.mark.large_memory
def test_large():
    pass

@pytest.mark.parametrize("i", range(3))
def test_small(i):
    pass

def test_failing():
    assert False
'''


def test_large_memory_tests_run_in_a_process_after_the_workers(tmp_path):
    """With workers, the tests marked large_memory run alone after the rest (one pytest each); the
    counts add up over both and a failure in either sets the return code."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_sample.py").write_text(SAMPLE)
    out = tmp_path / "out"
    out.mkdir()
    result = gpu_suite.run_tests(out, 120, selection=(str(tmp_path / "tests"),), workers=2)
    log = (out / "tests.log").read_text()
    assert result["passed"] == 4 and result["failed"] == 1 and result["returncode"] == 1
    assert not result["timed_out"]
    first, second = result["summary"].split(" | ")
    assert "3 passed" in first and "1 failed" in first and "1 passed" in second
    assert log.count("short test summary") == 1   # the failure, in the workers' phase


def test_without_workers_one_process_runs_everything(tmp_path):
    (tmp_path / "test_sample.py").write_text(SAMPLE.replace("def test_failing():\n    assert False\n", ""))
    result = gpu_suite.run_tests(tmp_path, 120, selection=(str(tmp_path / "test_sample.py"),), workers=0)
    assert result["passed"] == 4 and result["returncode"] == 0 and " | " not in result["summary"]


@pytest.mark.parametrize("name,device", [("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"),
                                         ("nvidia h100 pcie", "h100")])
def test_refresh_files_each_run_under_its_device(name, device):
    assert refresh.device_of({"device": name}) == device


def test_refresh_refuses_a_device_without_a_section():
    with pytest.raises(ValueError, match="A100"):
        refresh.device_of({"device": "NVIDIA A100-SXM4-80GB"})


def test_refresh_knows_every_suite_that_refresh_all_runs():
    assert set(refresh_all.SUITES) == set(refresh.SUITES)
    # exact_fallback is told its file's name; the other suites name theirs (var_bench.json, ...)
    command = refresh_all.SUITES["exact"][0](Path("run/exact"), 100)
    assert str(Path("run/exact") / refresh.SUITES["exact"][0]) in map(str, command)


@pytest.mark.parametrize("suite", ["var", "extrema", "norm", "exp", "sum", "exact", "ceiling"])
def test_refresh_all_passes_each_suite_options_it_takes(suite):
    """Every option refresh_all gives a suite is one that suite's command line declares (its --help)."""
    command = [str(a) for a in refresh_all.SUITES[suite][0](Path("run") / suite, 100)]
    script, options = command[0], [a for a in command[1:] if a.startswith("--")]
    shown = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, timeout=120).stdout
    assert options and all(option in shown for option in options), (options, shown)


def test_refresh_all_keeps_every_log_in_its_record(tmp_path, monkeypatch):
    """A run's files are each suite's JSON and refresh.json alone (the device tool brings back 8 files a
    call): each suite's output, exit code and seconds sit in refresh.json -- here stand-in suites (the real
    ones run on the GPU, where they would be timed: this test must not depend on the device) that write
    their JSON, raise, overrun the budget, then one the budget left no time for."""
    def script(code):
        return lambda out, left: ["-c", code, out]
    writes = "import sys, pathlib; print('wrote'); pathlib.Path(sys.argv[1], 'its.json').write_text('{}')"
    monkeypatch.setattr(refresh_all, "SUITES", {
        "writes": (script(writes), 0),
        "raises": (script("raise RuntimeError('no GPU here')"), 0),
        "overruns": (script("import time; print('started', flush=True); time.sleep(60)"), 0),
        "waits": (script("print('never')"), 60)})
    code = refresh_all.main(["--out", str(tmp_path), "--suites", "writes,raises,overruns,waits", "--budget-s", "8"])
    ran = json.loads((tmp_path / "refresh.json").read_text())
    assert code == 1 and [r["suite"] for r in ran] == ["writes", "raises", "overruns", "waits"]
    assert ran[0]["returncode"] == 0 and ran[0]["output"].strip() == "wrote"
    assert ran[1]["returncode"] not in (0, None) and "RuntimeError: no GPU here" in ran[1]["output"]
    assert ran[2]["returncode"] == "killed at the budget's end" and "started" in ran[2]["output"]
    assert "skipped" in ran[3] and "output" not in ran[3]
    files = sorted(str(f.relative_to(tmp_path)) for f in tmp_path.rglob("*") if f.is_file())
    assert files == ["refresh.json", str(Path("writes", "its.json"))]


@pytest.mark.parametrize("suites", ["", "var,nosuch"])
def test_refresh_all_refuses_no_suite_or_an_unknown_one(suites, tmp_path, capsys):
    with pytest.raises(SystemExit):
        refresh_all.main(["--out", str(tmp_path), "--suites", suites])
    assert ("nosuch" if suites else "no suite given") in capsys.readouterr().err
    assert not (tmp_path / "refresh.json").exists()


def test_probe_flags_a_wrong_logsumexp_and_takes_torchs_specials():
    """bench/probe_accurate_columns.py's check of a result against torch's on an fp64 copy: in ulps of
    max(|y|, 1) of the output's format; a value one step off in a column of log-probabilities reads as
    many, a non-finite result must be torch's (NaN where torch's is NaN)."""
    import torch

    x = torch.log_softmax(torch.randn(16, 40, generator=torch.Generator().manual_seed(3)), 0).to(torch.bfloat16)
    x[:, 5] = float("-inf")
    x[2, 7], x[3, 9] = float("nan"), float("inf")
    right = torch.logsumexp(x.double(), 0).to(torch.bfloat16)
    assert probe_accurate_columns._worst_error(right, x, 0) <= 0.5
    off = right.clone()
    off[0] += 2.0 ** -6    # near 0: a step of 2 ulps of 1 in bf16 (eps 2^-7)
    assert probe_accurate_columns._worst_error(off, x, 0) > 1
    off = right.clone()
    off[7] = 0.0           # torch's NaN answered by a number
    assert probe_accurate_columns._worst_error(off, x, 0) == float("inf")
