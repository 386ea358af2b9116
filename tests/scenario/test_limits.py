"""Bounds and budgets: YAML limits, strict counts, finite numbers, SoC/cost overrides, streams, the call and
numerics budgets, where dumps go, and `validate` never importing user code."""
from __future__ import annotations

import io
import json
import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.cli import EXIT_BAD_INPUT, EXIT_OK, main
from opsim.device.soc import get_soc
from opsim.errors import InvalidArgumentError, ScenarioError
from opsim.scenario.limits import Limits
from opsim.yamlio.limits import MAX_ALIASES, MAX_DEPTH, MAX_NODES, LimitError, check_data
from opsim.scenario.loader import load_scenario, module_findable, validate
from opsim.yamlio.reader import check_yaml_events
from opsim.scenario.runner import run_scenario


def small(**top):
    data = {"name": "s", "threads": [{"name": "a", "program": [{"op": "Add", "shape": [8, 8], "dtype": "float"}]}]}
    data.update(top)
    return data


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(map(str, argv)), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


# ---- YAML and data limits ---------------------------------------------------------------------------------

def test_yaml_limits():
    check_yaml_events("a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))
    with pytest.raises(LimitError, match="nested"):
        check_yaml_events("a: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    with pytest.raises(LimitError, match="inside the collection"):
        check_yaml_events("a: &t [1, [*t]]")
    check_yaml_events("a: &t [1]\nb: [*t, *t]")  # an alias after its anchor closed is fine
    with pytest.raises(LimitError, match="aliases"):
        check_yaml_events("a: &a 1\nb: [" + ", ".join(["*a"] * (MAX_ALIASES + 1)) + "]")
    bomb = "a: &a [" + ", ".join(["x"] * 10) + "]\n" + "".join(
        f"b{i}: &b{i} [" + ", ".join([f"*{'a' if i == 0 else f'b{i - 1}'}"] * 10) + "]\n" for i in range(5))
    with pytest.raises(LimitError, match=str(MAX_NODES)):
        check_yaml_events(bomb)


def test_check_data_limits():
    loop: list = []
    loop.append(loop)
    with pytest.raises(LimitError, match="contains itself"):
        check_data({"x": [1, loop]})
    shared = list(range(100))
    wide = [shared] * 100
    check_data(wide)  # 10,101 values
    with pytest.raises(LimitError, match="expanded"):
        check_data([wide] * 100)
    deep: list = []
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(LimitError, match="nested"):
        check_data(deep)


def test_dict_source_with_a_cycle_is_refused():
    data = small()
    data["threads"][0]["program"].append(data["threads"][0]["program"])
    with pytest.raises(ScenarioError, match="contains itself"):
        load_scenario(data)


# ---- numbers ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("count", [1.0, 1.0e308, float("inf"), float("nan"), True])
def test_counts_are_integers(count):
    data = small()
    data["threads"][0]["program"] = [{"loop": {"count": count, "body": []}}]
    with pytest.raises(ScenarioError, match="count"):
        load_scenario(data)


@pytest.mark.parametrize("field, value, match", [
    ("soc_overrides", {"aicore_count": 0.5}, "whole number"),
    ("soc_overrides", {"aicore_count": 1e18}, "opsim's bound"),
    ("soc_overrides", {"clock_mhz": float("inf")}, "finite"),
    ("soc_overrides", {"hbm_bytes": 0}, "> 0"),
    ("cost_overrides", {"aicore_launch_us": float("nan")}, "finite"),
    ("cost_overrides", {"bandwidth_efficiency": 1.5}, r"\(0, 1\]"),
    ("epoch_us", 1 << 62, "<="),
])
def test_overrides_out_of_range_are_refused_before_running(field, value, match):
    with pytest.raises(ScenarioError, match=match):
        validate(small(**{field: value}))


def test_soc_bounds_live_in_get_soc():
    with pytest.raises(InvalidArgumentError, match="finite"):
        get_soc("Ascend910B2", memcpy_latency_us=float("inf"))
    with pytest.raises(InvalidArgumentError, match="<="):
        get_soc("Ascend910B2", aicore_count=10 ** 6)
    assert get_soc("Ascend910B2", aicore_count=48).aicore_count == 48


def test_attribute_integers_fit_their_types():
    data = small()
    data["threads"][0]["program"] = [{"op": "Matmul", "shapes": [[4, 4], [4, 4]], "dtype": "float16",
                                      "attrs": {"cube_math_type": 128}}]
    with pytest.raises(ScenarioError, match=r"\[-128, 127\]"):
        load_scenario(data)
    data["threads"][0]["program"][0]["attrs"] = {"cube_math_type": 127}
    load_scenario(data)
    data["threads"][0]["program"] = [{"op": "Softmax", "shape": [4, 4], "dtype": "float16", "attrs": {"dim": 1 << 63}}]
    with pytest.raises(ScenarioError, match="int64"):
        load_scenario(data)


def test_streams_beyond_max_streams_are_refused():
    data = small(soc_overrides={"max_streams": 2})
    data["threads"][0]["streams"] = ["a", "b", "c"]
    data["threads"][0]["program"][0]["stream"] = "a"
    with pytest.raises(ScenarioError, match="supports 2"):
        validate(data)


# ---- budgets ----------------------------------------------------------------------------------------------

def test_call_budget_counts_empty_loop_iterations():
    data = small()
    data["threads"][0]["program"] = [{"loop": {"count": 1000, "body": [{"sleep": 1.0}]}},
                                     {"loop": {"count": 10, "body": [{"op": "Add", "shape": [4], "repeat": 5}]}}]
    cfg = load_scenario(data)
    assert cfg.planned_calls() == 50 and cfg.estimated_calls() == 1050
    with pytest.raises(ScenarioError, match=r"estimated 1050 calls .* budget of 1000"):
        load_scenario(data, limits=Limits(max_calls=1000))


def test_max_calls_option(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nthreads:\n  - name: a\n    program:\n      - loop: {count: 5000, body: []}\n")
    code, out, err = cli("validate", path, "--max-calls", "1000")
    assert code == EXIT_BAD_INPUT and "estimated 5000 calls" in err and "--max-calls" in err
    assert cli("validate", path, "--max-calls", "10000")[0] == EXIT_OK
    assert cli("validate", path, "--max-calls", "0")[0] == EXIT_BAD_INPUT


def test_sleep_horizon_bound():
    data = small()
    data["threads"][0]["program"] = [{"loop": {"count": 10 ** 6, "body": [{"sleep": 1.0e9}]}}]
    with pytest.raises(ScenarioError, match="longest simulated time"):
        load_scenario(data)


def test_numerics_budget(tmp_path):
    data = small(numerics=True)
    data["threads"][0]["program"][0]["shape"] = [1024, 1024]  # 3 x 4 MiB tensors + 12 MiB scratch
    load_scenario(data)
    with pytest.raises(ScenarioError, match="MiB of host memory"):
        load_scenario(data, limits=Limits(numerics_bytes=8 << 20))
    load_scenario(dict(data, numerics=False), limits=Limits(numerics_bytes=8 << 20))  # timing only: no data


# ---- paths and modules ------------------------------------------------------------------------------------

def test_relative_dump_dir_lands_inside_the_output_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = small(numerics=True, dump={"op_dump": True, "dir": "dumps/npy"})
    res = run_scenario(data, out_dir=tmp_path / "out")
    files = list((tmp_path / "out" / "dumps" / "npy").glob("*.npy"))
    assert files and np.load(files[0]).size > 0
    assert not (tmp_path / "dumps").exists()
    assert res.ok
    for escape in ("../x", "a/../../x", "."):
        with pytest.raises(ScenarioError, match="leaves the output directory"):
            validate(small(dump={"op_dump": True, "dir": escape}))


def test_validate_finds_the_module_without_importing_it(tmp_path, monkeypatch):
    pkg = tmp_path / "userpkg"
    (pkg / "sub").mkdir(parents=True)
    marker = tmp_path / "imported"
    code = f"open({str(marker)!r}, 'w').write('yes')\n"
    (pkg / "__init__.py").write_text(code)
    (pkg / "sub" / "__init__.py").write_text(code)
    (pkg / "sub" / "ops.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert module_findable("userpkg.sub.ops") and not module_findable("userpkg.sub.nothing")
    assert not module_findable("userpkg_missing.x")
    cfg = validate(small(direct_invoke_module="userpkg.sub.ops"))
    assert cfg.name == "s" and not marker.exists()
    assert "userpkg" not in sys.modules
    with pytest.raises(ScenarioError, match="not found"):
        validate(small(direct_invoke_module="userpkg.sub.nothing"))


def test_numerics_host_budget_bounds_every_backing_buffer():
    """With numerics on, device memory has host copies: an allocation beyond the budget fails (as out of
    memory, with the reason), it is never requested from the host."""
    import simpy

    from opsim.device.memory import DeviceMemory
    from opsim.trace.recorder import Recorder
    env = simpy.Environment()
    memory = DeviceMemory(1 << 30, Recorder(), env, numerics=True)
    memory.host_budget = 4096
    status, addr = memory.malloc(2048)
    assert status == 0 and addr
    status, addr = memory.malloc(4096)
    assert status != 0 and addr == 0 and "--max-numerics-mib" in memory.last_error
    assert memory.in_use == 2048


def test_run_passes_the_numerics_budget_to_the_device():
    data = small(numerics=True, on_error="continue")
    res = run_scenario(data, write=False, limits=Limits(numerics_bytes=1024 * 1024))
    assert res.sim.device.memory.host_budget == 1024 * 1024


def test_validate_reads_the_calibration_file_as_run_does(tmp_path):
    bad = tmp_path / "cal.yaml"
    bad.write_text("not: a calibration\n")
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: s\ncalibration: cal.yaml\nthreads:\n  - name: a\n    program:\n"
                        "      - {op: Add, shape: [8], dtype: float}\n")
    code, out, err = cli("validate", scenario)
    assert code == EXIT_BAD_INPUT and "calibration" in err and "opsim_calibration" in err
    code, out, err = cli("run", scenario, "--out", tmp_path / "out", "--quiet")
    assert code == EXIT_BAD_INPUT and "opsim_calibration" in err


_LEAF = st.one_of(st.floats(), st.integers(), st.booleans(), st.none(), st.text(max_size=3), st.just({1, 2}))
_TREE = st.recursive(_LEAF, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.lists(kids, max_size=3).map(tuple),
    st.dictionaries(st.one_of(st.text(max_size=3), st.integers(), st.floats()), kids, max_size=4)), max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(_TREE)
def test_the_quick_non_finite_check_misses_nothing_the_walk_finds(data):
    """The json pass before the path walk of `non_finite`: every NaN or infinite value the walk finds, it
    finds (a non-finite float key, which the walk does not read, may only make it look for nothing)."""
    from opsim.yamlio.limits import _any_non_finite, _walk_non_finite, non_finite
    walk = _walk_non_finite(data)
    assert not walk or _any_non_finite(data)
    assert bool(list(non_finite(data))) == walk


def test_limits_imports_no_opsim_module():
    """Both limits modules are bottoms: the YAML reader imports the YAML limits, never the other way round (no
    import cycle reader <-> limits), and the scenario's budgets import nothing of opsim."""
    import ast
    import opsim.scenario.limits as budgets_module
    import opsim.yamlio.limits as limits_module
    for module in (limits_module, budgets_module):
        tree = ast.parse(open(module.__file__, encoding="utf-8").read())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | \
            {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not {m for m in imported if m and m.startswith("opsim.")}, module.__name__


def test_scenario_loader_modules_stay_small():
    """The loader's steps are split into modules of one job each, each under 500 lines."""
    from pathlib import Path
    import opsim.scenario.loader as loader_module
    folder = Path(loader_module.__file__).parent
    for name in ("loader", "source", "overrides", "messages", "builder", "limits", "../yamlio/reader",
                 "../yamlio/document", "../yamlio/aliases", "../yamlio/files", "../yamlio/limits", "../yamlio/messages"):
        assert len((folder / f"{name}.py").read_text(encoding="utf-8").splitlines()) < 500, name


@pytest.mark.parametrize("name, message", [
    ("a" * 300, "above the file system's limit"),
    ("out\0put", "NUL byte"),
    ("loop/inside", "cannot be used"),
])
def test_an_outputs_dir_no_file_system_can_hold_is_refused_by_validate_and_load(tmp_path, monkeypatch, name,
                                                                                  message):
    monkeypatch.chdir(tmp_path)
    os.symlink("loop", tmp_path / "loop")  # a link to itself: looking inside it fails with ELOOP
    for check in (validate, load_scenario):
        with pytest.raises(ScenarioError, match=f"outputs.dir: .*{message}"):
            check(small(outputs={"dir": name}))


def test_a_dump_dir_no_file_system_can_hold_is_refused_before_the_run(tmp_path):
    with pytest.raises(ScenarioError, match="dump.dir: a name in the path is 300 bytes long"):
        validate(small(numerics=True, dump={"op_dump": True, "dir": "a" * 300}))
    (tmp_path / "file").write_text("x")
    with pytest.raises(ScenarioError, match="dump.dir: .* is a file"):
        validate(small(numerics=True, dump={"op_dump": True, "dir": str(tmp_path / "file" / "d")}))


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc, where no directory can be made")
def test_an_absolute_dump_dir_that_cannot_be_made_fails_in_one_line_before_the_run(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(small(numerics=True, dump={"op_dump": True, "dir": "/proc/opsim-dumps"})))
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--no-progress", "--quiet"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("opsim: error: dump.dir /proc/opsim-dumps: cannot be created") and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_a_file_of_many_empty_collections_is_refused_as_the_reader_reaches_the_budget(monkeypatch):
    """4 MiB of `- {}` ranks (600,000 mappings) took 15 s to refuse: every mapping was read and built, then
    walked, before the schema refused the list. The reader now counts lists and mappings as it goes and stops
    at the budget: with a budget of 1,000, a file of 20,000 is refused after about 1,000 of them (events
    counted, not wall time)."""
    from opsim.yamlio import limits, reader
    from opsim.yamlio.limits import LimitError

    events = [0]

    class Counting(reader.LOADER):
        def get_event(self):
            events[0] += 1
            return super().get_event()

    monkeypatch.setattr(reader, "LOADER", Counting)
    monkeypatch.setattr(reader, "MAX_COLLECTIONS", 1000)
    text = "name: r\nranks:\n" + "  - {}\n" * 20_000
    with pytest.raises(LimitError, match="more than 1000 lists and mappings") as err:
        reader.read_document(text)
    assert err.value.line is not None and err.value.line <= 1003
    assert events[0] < 2 * 1000 + 20  # a mapping is two events: the rest of the file is never parsed
    monkeypatch.setattr(reader, "MAX_COLLECTIONS", limits.MAX_COLLECTIONS)
    assert reader.read_document(text).data["ranks"] == [{}] * 20_000  # within the real budget: read as before
    with pytest.raises(LimitError):  # the budget scales with the file budget, as the node count's does
        reader._Pass(Counting("[" + "[]," * 3000 + "]"), 10 ** 6, 2000).read()


def test_a_4_mib_file_of_empty_ranks_is_refused_in_one_line(tmp_path):
    from opsim.cli import main
    import io
    path = tmp_path / "ranks.yaml"
    path.write_text("name: r\nthreads:\n  - name: t\n    program: []\nranks:\n" + "  - {}\n" * ((4 << 20) // 8))
    err = io.StringIO()
    assert main(["validate", str(path)], stdout=io.StringIO(), stderr=err) == 2
    assert "more than 160000 lists and mappings" in err.getvalue() and err.getvalue().count("\n") == 1
