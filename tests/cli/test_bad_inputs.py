"""Every file of tests/data/bad/ (the inputs that once crashed, hung or were silently wrong) is refused by both
`opsim validate` and `opsim run` with exit 2 and a one-line message naming the file, before any output is
written. benchmarks/bad_inputs.py runs the same corpus in subprocesses and measures time and memory."""
from __future__ import annotations

import io
import subprocess
import sys

import pytest

from cpu_clock import cpu_seconds  # bounds in CPU seconds: a loaded machine stretches wall time
from scenario_helpers import ROOT, SCENARIOS
from opsim.cli import EXIT_BAD_INPUT, main
from opsim.yamlio.limits import MAX_FILE_BYTES

BAD = sorted((ROOT / "tests" / "data" / "bad").glob("*.yaml"))
SET_CASES = [
    "threads.0.program.0.loop=&a [*a]",
    "threads.0.program.0.loop.count=.inf",
    "threads.0.program.0.loop.count=1.0e+308",
    "threads.0.program.0.loop.count=1000000000000",
    "threads.0.program.0.loop=" + "[" * 500 + "]" * 500,
    "description={a: &a [x,x,x,x,x,x,x,x,x], b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a], c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b],"
    " d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c], e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d], f: [*e,*e,*e,*e,*e,*e,*e,*e,*e]}",
    "soc_overrides.hbm_bytes=.nan",
    "cost_overrides.aicore_launch_us=.inf",
    "epoch_us=-1",
]


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(map(str, argv)), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _refused(code: int, err: str, label: str) -> None:
    assert code == EXIT_BAD_INPUT, err
    assert err.startswith("opsim: error: ") and "Traceback" not in err
    assert label in err


def test_corpus_is_not_empty():
    assert len(BAD) >= 30


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_file_refused_by_validate_and_run(path, tmp_path):
    code, out, err = cli("validate", path)
    _refused(code, err, str(path))
    code, out, err = cli("run", path, "--out", tmp_path / "out", "--no-progress", "--quiet")
    _refused(code, err, str(path))
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("override", SET_CASES, ids=range(len(SET_CASES)))
def test_bad_set_value_refused(override):
    code, out, err = cli("validate", SCENARIOS / "quickstart.yaml", "--set", override)
    _refused(code, err, "--set")


def test_file_above_the_size_limit_refused(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("name: big\ndescription: '" + "x" * MAX_FILE_BYTES + "'\nthreads: []\n")
    code, out, err = cli("validate", big)
    _refused(code, err, "MiB")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["deep_nesting", "alias_bomb_12", "loop_count_huge_empty"])
def test_bad_input_in_a_subprocess_exits_2_fast(name):
    t0 = cpu_seconds()
    res = subprocess.run([sys.executable, "-m", "opsim.cli", "validate", str(ROOT / "tests/data/bad" / f"{name}.yaml")],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == EXIT_BAD_INPUT and "Traceback" not in res.stderr, res.stderr
    assert cpu_seconds() - t0 < 30  # generous on a loaded CI machine; benchmarks/bad_inputs.py measures


@pytest.mark.parametrize("summary", ['{"threads": 3}', '{"memory": "x"}', '{"streams": {"s": {"busy_us": "1"}}}',
                                     '{"errors": [1]}', '{"wall": {"wall_seconds": "slow"}}', '[]', '"text"',
                                     '{"leaks": {"count": "2"}}', "[" * 100000 + "]" * 100000])
def test_report_refuses_a_summary_with_wrong_types(tmp_path, summary):
    (tmp_path / "summary.json").write_text(summary)
    code, out, err = cli("report", tmp_path)
    _refused(code, err, "summary.json")


def test_report_reads_a_real_summary(tmp_path):
    code, out, err = cli("run", SCENARIOS / "memory_pressure.yaml", "--out", tmp_path, "--quiet")
    assert cli("report", tmp_path)[0] == code


@pytest.mark.parametrize("name", ["deep_nesting", "alias_bomb_12", "self_alias"])
def test_sweep_over_a_bad_scenario_is_refused(tmp_path, name):
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"sweep: s\nscenario: {ROOT / 'tests' / 'data' / 'bad' / (name + '.yaml')}\n"
                     "seeds: 2\ngrid:\n  soc: [Ascend910B2]\n")
    code, out, err = cli("validate", sweep)
    _refused(code, err, str(sweep))
