"""The first hour with opsim: --quiet is quiet, a file given to the wrong command says which command to use, and
a --set that an output switch overrides says so."""
from __future__ import annotations

import pytest

from scenario_helpers import AICORE_ONLY, SCENARIOS, cli
from opsim.cli import EXIT_BAD_INPUT, EXIT_OK
from opsim.errors import ScenarioError

SWEEP = SCENARIOS / "sweeps" / "quickstart_socs.yaml"


def _light(tmp_path, extra: str = "") -> str:
    path = tmp_path / "light.yaml"
    path.write_text(AICORE_ONLY + extra)
    return str(path)


def test_quiet_prints_no_ge_profiling_text_but_writes_its_file(tmp_path):
    path = _light(tmp_path)
    code, out, err = cli("run", path, "--out", tmp_path / "o", "--quiet", "--set", "env.GE_PROFILING_TO_STD_OUT=1")
    assert code == EXIT_OK, err
    assert out == ""
    assert (tmp_path / "o" / "ge_profiling_stdout.txt").read_text().startswith("test case opType: Add, index: 0")
    code, out, _ = cli("run", path, "--out", tmp_path / "o", "--set", "env.GE_PROFILING_TO_STD_OUT=1")
    assert out.startswith("test case opType: Add, index: 0") and "opsim run summary" in out


@pytest.mark.parametrize("command", ["run"])
def test_a_sweep_file_given_to_run_names_opsim_sweep(command, tmp_path):
    code, out, err = cli(command, SWEEP, "--out", tmp_path)
    assert code == EXIT_BAD_INPUT and out == ""
    assert err.count("\n") == 1 and "is a sweep file" in err and f"opsim sweep {SWEEP}" in err


def test_validate_recognises_both_kinds():
    code, out, _ = cli("validate", SWEEP)
    assert code == EXIT_OK and "(sweep quickstart_socs:" in out
    code, out, _ = cli("validate", SCENARIOS / "quickstart.yaml")
    assert code == EXIT_OK and "ok (quickstart:" in out


def test_a_scenario_given_to_sweep_names_opsim_run(tmp_path):
    scenario = SCENARIOS / "quickstart.yaml"
    code, out, err = cli("sweep", scenario, "-o", tmp_path / "s", "--workers", "0", "--no-progress")
    assert code == EXIT_BAD_INPUT and out == ""
    assert err.count("\n") == 1 and "is a scenario, not a sweep file" in err and f"opsim run {scenario}" in err
    assert not (tmp_path / "s").exists()
    import opsim
    with pytest.raises(ScenarioError, match="opsim run"):
        opsim.sweep(str(scenario), workers=0)


def test_a_bad_file_given_to_run_keeps_its_own_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nthreads: 3\n")
    code, _, err = cli("run", bad, "--out", tmp_path / "o")
    assert code == EXIT_BAD_INPUT and "sweep" not in err and "threads" in err


def test_set_trace_true_under_an_output_switch_says_what_is_not_written(tmp_path):
    path = _light(tmp_path, "trace: false\noutputs:\n  trace: false\n")
    code, out, err = cli("run", path, "--out", tmp_path / "o", "--quiet", "--set", "trace=true")
    assert code == EXIT_OK
    assert ("opsim: note: --set trace=true, but outputs.trace is false, so trace.json is not written "
            "(add --set outputs.trace=true)") in err
    assert not (tmp_path / "o" / "trace.json").exists() and (tmp_path / "o" / "op_summary.csv").exists()
    code, _, err = cli("run", path, "--out", tmp_path / "o2", "--quiet", "--set", "trace=true",
                       "--set", "outputs.trace=true")
    assert code == EXIT_OK and "note" not in err and (tmp_path / "o2" / "trace.json").exists()


def test_set_notes_for_the_timestamp_file_and_dumps(tmp_path):
    path = _light(tmp_path, "outputs:\n  timestamps: false\n")
    code, _, err = cli("run", path, "--out", tmp_path / "o", "--quiet", "--set", "env.GE_PROFILING_TO_STD_OUT=1",
                       "--set", "dump.op_dump=true")
    assert code == EXIT_OK
    assert "ge_profiling_stdout.txt is not written (add --set outputs.timestamps=true)" in err
    assert "--set dump.op_dump=true, but numerics is false" in err
    assert not (tmp_path / "o" / "ge_profiling_stdout.txt").exists()
    code, _, err = cli("run", path, "--out", tmp_path / "o", "--quiet", "--set", "env.GE_PROFILING_TO_STD_OUT=0")
    assert code == EXIT_OK and err == ""
