"""The opsim command: exit codes, one clear message for every bad input, never a traceback."""
from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenario_helpers import AICORE_ONLY, ROOT, SCENARIOS, cli
from opsim.cli import EXIT_BAD_INPUT, EXIT_OK, EXIT_SIM_ERRORS

QUICKSTART_TEXT = (SCENARIOS / "quickstart.yaml").read_text()


def test_run_quickstart(tmp_path):
    code, out, err = cli("run", SCENARIOS / "quickstart.yaml", "--out", tmp_path, "--no-progress")
    assert code == EXIT_OK, err
    for figure in ("simulated makespan", "wall time", "calls per wall-second", "host trainer", "device Stream 0",
                   "unit pool aicore", "executor cache", "AI CPU task cache", "one-shot AI CPU tasks",
                   "peak HBM in use", "peak workspace", "leaks found            none"):
        assert figure in out
    assert "ui.perfetto.dev" in out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["op_calls"] > 0 and summary["wall"]["wall_seconds"] >= 0
    code, out2, _ = cli("report", tmp_path)
    assert code == EXIT_OK and "simulated makespan" in out2 and "trace.json" in out2


def test_run_with_set_and_profiler_output(tmp_path):
    code, out, err = cli("run", SCENARIOS / "quickstart.yaml", "--out", tmp_path, "--quiet",
                         "--set", "threads.0.program.0.loop.count=1", "--set", "env.GE_PROFILING_TO_STD_OUT=0",
                         "--profiler-output")
    assert code == EXIT_OK, err
    assert out == ""
    assert not (tmp_path / "ge_profiling_stdout.txt").exists()
    profiler_dirs = list(tmp_path.glob("quickstart_*_ascend_pt"))
    assert len(profiler_dirs) == 1
    assert (profiler_dirs[0] / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").is_file()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["threads"]["trainer"]["op_calls"] == 4


def test_oom_exits_1_with_a_message_and_no_traceback(tmp_path):
    code, out, err = cli("run", SCENARIOS / "memory_pressure.yaml", "--out", tmp_path, "--no-progress")
    assert code == EXIT_SIM_ERRORS
    assert err.startswith("opsim: the simulation found 1 error(s); first: grower at ")
    assert "out of device memory" in err and len(err.splitlines()) == 1
    assert "Traceback" not in out + err
    code, _, _ = cli("report", tmp_path)
    assert code == EXIT_SIM_ERRORS


BAD_INPUTS = {
    "typo": ("seed: 7", "sede: 7", "unknown field 'sede' (did you mean 'seed'?)"),
    "wrong type": ("count: 4", "count: four", "expected an integer, got str 'four'"),
    "unknown op": ("op: Matmul", "op: MatMool", "unknown op 'MatMool'"),
    "negative dimension": ("shape: [128, 512]", "shape: [128, -512]", "negative dimension -512"),
    "yaml syntax": ("events: [normed]", "events: [normed", "YAML syntax error"),
    "python tag": ("seed: 7", "seed: !!python/object/apply:os.getcwd []", "the tag !!python/object/apply:os.getcwd "
                   "is not allowed"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
@pytest.mark.parametrize("command", ["validate", "run"])
def test_bad_scenarios_give_one_message_and_exit_2(tmp_path, case, command):
    old, new, expected = BAD_INPUTS[case]
    assert old in QUICKSTART_TEXT
    path = tmp_path / "bad.yaml"
    path.write_text(QUICKSTART_TEXT.replace(old, new, 1))
    code, out, err = cli(command, path, "--out", tmp_path / "o") if command == "run" else cli(command, path)
    assert code == EXIT_BAD_INPUT
    assert err.startswith(f"opsim: error: {path}:") and expected in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err and out == ""
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", ["validate", "run"])
def test_several_problems_print_the_first_and_how_to_list_all_in_two_lines(tmp_path, command):
    path = tmp_path / "bad.yaml"
    path.write_text(QUICKSTART_TEXT.replace("op: Matmul", "op: MatMool", 1).replace("seed: 7", "seed: -7", 1))
    code, out, err = cli(command, path, "--out", tmp_path / "o") if command == "run" else cli(command, path)
    lines = err.splitlines()
    assert code == EXIT_BAD_INPUT and out == "" and len(lines) == 2
    assert lines[0].startswith(f"opsim: error: {path}:") and "seed: -7 is out of range" in lines[0]
    assert lines[1] == f"opsim: 1 more error(s) in {path}; `opsim validate --all-errors {path}` lists them all"
    code, _, err = cli("validate", "--all-errors", path)
    assert code == EXIT_BAD_INPUT and "2 errors in the scenario" in err and "unknown op 'MatMool'" in err


def test_missing_file_and_bad_usage(tmp_path):
    code, out, err = cli("run", tmp_path / "nope.yaml")
    assert code == EXIT_BAD_INPUT and "scenario file not found" in err and "Traceback" not in err
    code, out, err = cli("report", tmp_path / "nope")
    assert code == EXIT_BAD_INPUT and "not a directory" in err
    code, out, err = cli("run", SCENARIOS / "quickstart.yaml", "--set", "seed")
    assert code == EXIT_BAD_INPUT and "expected key=value" in err
    code, out, err = cli("frobnicate")
    assert code == EXIT_BAD_INPUT and "invalid choice" in err


def test_validate_list_ops_list_socs():
    code, out, _ = cli("validate", SCENARIOS / "quickstart.yaml")
    assert code == EXIT_OK and out.startswith(f"{SCENARIOS / 'quickstart.yaml'}: ok (quickstart:")
    code, out, _ = cli("list-ops")
    assert code == EXIT_OK
    names = [line.split()[0] for line in out.splitlines()[1:]]
    assert {"Add", "Matmul", "Addmm", "Sigmoid", "AddRmsNorm"} <= set(names)
    code, out, _ = cli("list-socs")
    assert code == EXIT_OK and "Ascend910B2" in out


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_help_and_validate_do_not_import_numba(tmp_path):
    path = tmp_path / "light.yaml"
    path.write_text(AICORE_ONLY)
    probe = ("import sys, io\nfrom opsim.cli import main\n"
             "o = io.StringIO()\n"
             f"codes = [main(['--help'], stdout=o, stderr=o), main(['validate', {str(path)!r}], stdout=o, stderr=o)]\n"
             "print(codes, 'numba' in sys.modules)\n")
    proc = _python(probe)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("[0, 0] False")


def test_console_script_exit_codes(tmp_path):
    exe = [sys.executable, "-m", "opsim.cli"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nthreads: 3\n")
    proc = subprocess.run(exe + ["validate", str(bad)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == EXIT_BAD_INPUT and "Traceback" not in proc.stderr
    assert "threads: expected a list, got int 3" in proc.stderr
    proc = subprocess.run(exe + ["--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "validate" in proc.stdout


# ---- fuzzing: mutated scenario files never produce a traceback ------------------------------------------

_LINES = QUICKSTART_TEXT.splitlines(keepends=True)
_TOKENS = ["-1", "0", "3.5", "true", "null", "[]", "{}", "!!python/name:os.system", "'x'", "[1, -2]", ":", "- ",
           "  ", "\t", "&a", "*a", "{op: Add}", "Nope", "float17", "[[1,2],[3]]", "\"", "#", "? ", "|", "%"]


@st.composite
def mutated(draw):
    lines = list(_LINES)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["replace_value", "delete_line", "dup_line", "insert_token", "delete_char",
                                     "swap_lines"]))
        i = draw(st.integers(0, len(lines) - 1))
        if kind == "replace_value" and ":" in lines[i]:
            key = lines[i].split(":", 1)[0]
            lines[i] = f"{key}: {draw(st.sampled_from(_TOKENS))}\n"
        elif kind == "delete_line" and len(lines) > 1:
            del lines[i]
        elif kind == "dup_line":
            lines.insert(i, lines[i])
        elif kind == "insert_token":
            pos = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:pos] + draw(st.sampled_from(_TOKENS)) + lines[i][pos:]
        elif kind == "delete_char" and lines[i]:
            pos = draw(st.integers(0, len(lines[i]) - 1))
            lines[i] = lines[i][:pos] + lines[i][pos + 1:]
        elif kind == "swap_lines":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines)


@given(text=mutated())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_fuzzed_scenarios_never_produce_a_traceback(tmp_path, text):
    path = tmp_path / "fuzz.yaml"
    path.write_text(text)
    code, out, err = cli("validate", path)
    assert code in (EXIT_OK, EXIT_BAD_INPUT)
    assert "Traceback" not in out + err
    if code == EXIT_BAD_INPUT:
        assert err.startswith("opsim: error: ")


def test_fuzzed_valid_scenarios_run(tmp_path):
    """Valid mutations (random shapes, dtypes, counts) run to completion or report a clean failure."""
    rng = random.Random(1)
    for k in range(6):
        text = QUICKSTART_TEXT.replace("count: 4", f"count: {rng.randint(0, 3)}") \
            .replace("[64, 64], [256, 256]", f"[{rng.randint(0, 9)}, {rng.randint(1, 70)}], [0, 3]") \
            .replace("shape: [32, 32]", f"shape: [{rng.randint(0, 40)}, {rng.randint(0, 40)}]")
        path = tmp_path / f"v{k}.yaml"
        path.write_text(text)
        code, out, err = cli("run", path, "--out", tmp_path / f"o{k}", "--quiet", "--no-progress")
        assert code in (EXIT_OK, EXIT_SIM_ERRORS), err
        assert "Traceback" not in out + err


def test_a_simulator_bug_is_one_line_not_a_traceback(tmp_path, monkeypatch):
    import opsim.scenario.runner as runner

    def broken(*_a, **_k):
        raise RuntimeError("boom")

    monkeypatch.setattr(runner, "run_scenario", broken)
    code, out, err = cli("run", SCENARIOS / "quickstart.yaml", "--out", tmp_path)
    assert code == EXIT_SIM_ERRORS and "Traceback" not in err
    assert err.startswith("opsim: internal error while simulating") and "RuntimeError: boom" in err
    monkeypatch.setenv("OPSIM_TRACEBACK", "1")
    with pytest.raises(RuntimeError, match="boom"):
        cli("run", SCENARIOS / "quickstart.yaml", "--out", tmp_path)


def test_validate_of_every_bundled_scenario_does_not_import_numba():
    """Validation simulates one call of each op (opsim.scenario.end_bound); torch_npu's hash of a long cache key
    (`cache_mode: pta`) is a Numba kernel, so the PTA scenarios are left out."""
    probe = ("import sys, io, glob\nfrom opsim.cli import main\n"
             "o = io.StringIO()\n"
             "codes = [main(['validate', p], stdout=o, stderr=o) for p in sorted(glob.glob('scenarios/*.yaml'))\n"
             "         if 'cache_mode: pta' not in open(p).read()]\n"
             "print(set(codes), 'numba' in sys.modules)\n")
    proc = _python(probe)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("{0} False")


@pytest.mark.parametrize("value", ["-1", "7", "{a: 1}", "[1, [2]]", "'x'"])
def test_malformed_events_field_is_a_clean_error(tmp_path, value):
    path = tmp_path / "ev.yaml"
    path.write_text(f"name: x\nevents: {value}\nthreads:\n  - name: t\n    program: []\n")
    code, out, err = cli("validate", path)
    assert code == EXIT_BAD_INPUT and "Traceback" not in err and "events" in err


def test_validate_does_not_import_the_calibration_package():
    """Building the parser and validating a scenario leave the calibration fit (and what it pulls in) unloaded:
    every CLI command but calibrate and predict starts without it."""
    code = ("import sys; from opsim.cli import main; rc = main(['validate', 'scenarios/quickstart.yaml']); "
            "sys.exit(rc if 'opsim.calibration' not in sys.modules else 9)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
