"""What Ascend engineers do from a shell: exported opbase variables, the timestamp text on stdout, --set values,
python -m opsim, --json listings, --profiler-output formats, completion, and the CLI -> notebook path."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from scenario_helpers import AICORE_ONLY, ROOT, SCENARIOS, cli
from opsim.cli import EXIT_BAD_INPUT, EXIT_OK
from opsim.scenario.loader import load_scenario, parse_override


def _light(tmp_path, extra: str = "") -> str:
    path = tmp_path / "light.yaml"
    path.write_text(AICORE_ONLY + extra)
    return str(path)


# --- the process environment ---------------------------------------------------------------------------------

def test_shell_variables_apply_under_the_scenario_and_set(tmp_path):
    path = _light(tmp_path, "env:\n  ACLNN_CACHE_LIMIT: 5\n  DISABLE_L2_CACHE: ''\n")
    shell = {"ACLNN_CACHE_LIMIT": "1", "ACLNN_AICPU_CACHE_LIMIT": "7", "NOT_AN_OPBASE_VARIABLE": "x"}
    cfg = load_scenario(path, {"env.DISABLE_L2_CACHE": "yes"}, environ=shell)
    assert cfg.env == {"ACLNN_AICPU_CACHE_LIMIT": "7", "ACLNN_CACHE_LIMIT": "5", "DISABLE_L2_CACHE": "yes"}
    assert cfg.env_sources == {"ACLNN_AICPU_CACHE_LIMIT": "shell", "ACLNN_CACHE_LIMIT": "scenario",
                               "DISABLE_L2_CACHE": "--set"}
    assert load_scenario(path, environ={}).env_sources == {"ACLNN_CACHE_LIMIT": "scenario",
                                                           "DISABLE_L2_CACHE": "scenario"}


def test_an_exported_cache_limit_changes_the_run_and_is_reported(tmp_path, monkeypatch):
    scenario = SCENARIOS / "aicpu_cache_pressure.yaml"
    code, out, err = cli("run", scenario, "--out", tmp_path / "base", "--quiet", "--set",
                         "env.GE_PROFILING_TO_STD_OUT=0")
    assert code == EXIT_OK, err
    base = json.loads((tmp_path / "base" / "summary.json").read_text())
    monkeypatch.setenv("ACLNN_AICPU_CACHE_LIMIT", "0")
    # the scenario sets ACLNN_AICPU_CACHE_LIMIT itself: the scenario wins over the shell
    cli("run", scenario, "--out", tmp_path / "same", "--quiet", "--set", "env.GE_PROFILING_TO_STD_OUT=0")
    same = json.loads((tmp_path / "same" / "summary.json").read_text())
    assert same["aicpu_cache"] == base["aicpu_cache"]
    assert same["env"]["ACLNN_AICPU_CACHE_LIMIT"] == {"value": "3", "source": "scenario", "shell": "0"}
    # without the scenario's value the shell's applies: nothing is cached
    monkeypatch.setenv("ACLNN_AICPU_CACHE_LIMIT", "0")
    code, out, err = cli("run", scenario, "--out", tmp_path / "shell", "--set", "env.GE_PROFILING_TO_STD_OUT=0",
                         "--set", "env={}")
    assert code == EXIT_OK, err
    shell = json.loads((tmp_path / "shell" / "summary.json").read_text())
    assert shell["env"] == {"ACLNN_AICPU_CACHE_LIMIT": {"value": "0", "source": "shell"}}
    assert shell["aicpu_cache"]["hits"] == 0 < base["aicpu_cache"]["hits"]
    assert "environment            ACLNN_AICPU_CACHE_LIMIT=0 (shell)" in out


def test_ge_profiling_from_the_shell_prints_on_stdout_and_writes_the_file(tmp_path, monkeypatch):
    path = _light(tmp_path)
    code, out, _ = cli("run", path, "--out", tmp_path / "off", "--quiet")
    assert code == EXIT_OK and out == "" and not (tmp_path / "off" / "ge_profiling_stdout.txt").exists()
    monkeypatch.setenv("GE_PROFILING_TO_STD_OUT", "1")
    code, out, _ = cli("run", path, "--out", tmp_path / "on")
    text = (tmp_path / "on" / "ge_profiling_stdout.txt").read_text()
    assert code == EXIT_OK and text.startswith("test case opType: Add, index: 0\nNnopbase time add io and attr")
    assert out.startswith(text) and "opsim run summary" in out[len(text):]
    assert "GE_PROFILING_TO_STD_OUT=1 (shell)" in out


# --- --set values ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, value", [
    ("seed=010", 10), ("seed=0o10", 8), ("seed=0x1f", 31), ("x=-3", -3), ("x=1.5", 1.5), ("x=1e3", 1000.0),
    ("x=true", True), ("x=False", False), ("x=on", "on"), ("x=yes", "yes"), ("x=null", None), ("x=~", None),
    ("x=[1, 2]", [1, 2]), ("x={a: 1}", {"a": 1}), ("x=abc", "abc"), ("x=", ""), ("x=.inf", float("inf")),
    ("x=1_000", "1_000"), ("x=0b11", "0b11"),
    ("env.ACLNN_CACHE_LIMIT=010", "010"), ("env.DISABLE_L2_CACHE=on", "on"), ("env.X=true", "true"),
    ("env.X=", ""), ("env.X=1.50", "1.50"), ("env={A: 010, B: on, C: 1.50}", {"A": "010", "B": "on", "C": "1.50"}),
    ("x={a: , b: [1, yes]}", {"a": None, "b": [1, "yes"]}),
])
def test_set_values_are_yaml_1_2_core_scalars_and_env_values_strings(text, value):
    assert parse_override(text)[1] == value


def test_set_env_octal_looking_value_reaches_opbase_as_written(tmp_path):
    cfg = load_scenario(_light(tmp_path), dict([parse_override("env.ACLNN_CACHE_LIMIT=010"),
                                                parse_override("env.DISABLE_L2_CACHE=on")]), environ={})
    assert cfg.env == {"ACLNN_CACHE_LIMIT": "010", "DISABLE_L2_CACHE": "on"}


# --- commands --------------------------------------------------------------------------------------------------

def test_list_commands_print_json():
    code, out, _ = cli("list-ops", "--json")
    ops = json.loads(out)
    assert code == EXIT_OK and {"Add", "Matmul"} <= {o["op"] for o in ops}
    add = next(o for o in ops if o["op"] == "Add")
    assert add["api"] == "aclnnAdd" and add["inputs"] and isinstance(add["attributes"], dict)
    code, out, _ = cli("list-socs", "--json")
    socs = json.loads(out)
    assert code == EXIT_OK and [s["name"] for s in socs if s["default"]] == ["Ascend910B2"]
    assert all(isinstance(s["aicore_count"], int) for s in socs)


def test_python_dash_m_opsim():
    proc = subprocess.run([sys.executable, "-m", "opsim", "list-socs", "--json"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["name"]


@pytest.mark.parametrize("line, expected", [("opsim list-", {"list-ops", "list-socs"}),
                                            ("opsim run x.yaml --profiler-output ", {"text", "db", "both"})])
def test_shell_completion_answers_through_argcomplete(tmp_path, line, expected):
    answer = tmp_path / "completions.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "_ARGCOMPLETE": "1", "_ARGCOMPLETE_IFS": "\n",
           "COMP_LINE": line, "COMP_POINT": str(len(line)), "_ARGCOMPLETE_STDOUT_FILENAME": str(answer)}
    proc = subprocess.run([sys.executable, "-m", "opsim"], env=env, cwd=ROOT, timeout=120, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    assert expected <= {w.strip() for w in answer.read_text().split("\n")}


@pytest.mark.parametrize("fmt, text_files, db_files", [
    (None, True, False), ("text", True, False), ("db", False, True), ("both", True, True)])
def test_profiler_output_formats(tmp_path, fmt, text_files, db_files):
    args = ["run", _light(tmp_path), "--out", tmp_path / "o", "--quiet", "--profiler-output"]
    code, _, err = cli(*args, *([fmt] if fmt else []))
    assert code == EXIT_OK, err
    out = next((tmp_path / "o").glob("light_*_ascend_pt")) / "ASCEND_PROFILER_OUTPUT"
    assert (out / "trace_view.json").exists() is text_files and (out / "kernel_details.csv").exists() is text_files
    assert (out / "ascend_pytorch_profiler_0.db").exists() is db_files and (out / "analysis.db").exists() is db_files


def test_profiler_output_rejects_an_unknown_format(tmp_path):
    code, _, err = cli("run", _light(tmp_path), "--profiler-output", "xml")
    assert code == EXIT_BAD_INPUT and "invalid choice" in err
    from opsim.errors import InvalidArgumentError
    from opsim.scenario.runner import run_scenario
    with pytest.raises(InvalidArgumentError, match="use one of text, db, both"):
        run_scenario(_light(tmp_path), profiler_output="xml", write=False)


def test_load_result_reads_a_cli_output_directory(tmp_path):
    import opsim
    code, _, err = cli("run", SCENARIOS / "quickstart.yaml", "--out", tmp_path, "--quiet")
    assert code == EXIT_OK, err
    res = opsim.load_result(tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert res.summary["op_calls"] == summary["op_calls"] and res.count("host") > 0
    assert len(res.op_calls) == summary["op_calls"]


@pytest.mark.parametrize("shapes, where", [
    ("shape: [2, -1]", "shape[1]"), ("shapes: [[2, -1], [2, 2]]", "shapes[0][1]"),
    ("shapes: {self: [2, 2], other: [-4, 2]}", "shapes.other[0]"), ("shape_choices: [[2, 2], [2, -1]]",
                                                                     "shape_choices[1][1]"),
    ("shape_choices: [[[2, 2], [2, -1]]]", "shape_choices[0][1][1]")])
def test_a_negative_dimension_anywhere_in_shapes_is_reported_as_such(tmp_path, shapes, where):
    path = tmp_path / "neg.yaml"
    path.write_text(f"name: n\nthreads:\n  - name: a\n    program:\n      - {{op: Add, {shapes}, dtype: float16}}\n")
    code, _, err = cli("validate", path)
    assert code == EXIT_BAD_INPUT
    assert err.count("\n") == 1 and f"threads[0].program[0].{where}: negative dimension" in err, err


def test_records_can_be_left_out_and_profiler_formats_match_the_schema(tmp_path):
    from opsim import cli as cli_module
    from opsim.scenario.schema import PROFILER_FORMATS
    assert cli_module.PROFILER_FORMATS == PROFILER_FORMATS
    code, _, err = cli("run", _light(tmp_path), "--out", tmp_path / "o", "--quiet", "--set", "outputs.records=false")
    assert code == EXIT_OK, err
    assert (tmp_path / "o" / "summary.json").exists() and not (tmp_path / "o" / "records.json.gz").exists()


def test_scenario_env_values_are_the_text_as_written(tmp_path):
    path = _light(tmp_path, "env:\n  ACLNN_CACHE_LIMIT: 010\n  DISABLE_L2_CACHE: on\n  NPU_COLLECT_PATH: 1.50\n")
    cfg = load_scenario(path, environ={})
    assert cfg.env == {"ACLNN_CACHE_LIMIT": "010", "DISABLE_L2_CACHE": "on", "NPU_COLLECT_PATH": "1.50"}


def test_a_shell_value_is_validated_like_a_scenario_value(tmp_path):
    from opsim.errors import ScenarioError
    with pytest.raises(ScenarioError, match="TASK_QUEUE_ENABLE='5' is not supported"):
        load_scenario(_light(tmp_path), environ={"TASK_QUEUE_ENABLE": "5"})
