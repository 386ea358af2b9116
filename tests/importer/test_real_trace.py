"""opsim import on the real torch_npu trace (tests/data/real/trace_view_910b_mnist.json) and its replay."""
from __future__ import annotations

import dataclasses
import glob
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from opsim.importer import import_profile
from opsim.importer.compare import DEVICE_TOLERANCE, HOST_TOLERANCE
from opsim.importer.replay import replay_and_compare
from opsim.ingest import read_trace_view
from opsim.errors import ScenarioError
from opsim.scenario.loader import load_scenario

REAL = Path(__file__).resolve().parents[1] / "data" / "real" / "trace_view_910b_mnist.json"


@pytest.fixture(scope="module")
def imported():
    return import_profile(REAL)


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    return replay_and_compare(REAL, tmp_path_factory.mktemp("replay"))



def test_every_call_and_kernel_is_placed(imported):
    f = imported.report.figures
    view = read_trace_view(REAL)
    phase2 = [a for a in view.acl_api_events() if a.kind == "phase2" or a.api == "aclopCompileAndExecute"]
    assert f["calls"] == len(phase2) == 148
    assert f["phase1"] == sum(a.kind == "phase1" for a in view.acl_api_events()) == 34
    assert f["task_queue"] and imported.scenario["task_queue_thread"] == "thread_439084"
    # the two memcpys no host event launched are replayed as recorded tasks: nothing is dropped
    assert imported.report.warnings == {}
    assert f["kernels"] + sum(f["device_tasks"].values()) == len(view.device_kernels())


def test_the_scenario_calls_each_api_as_often_as_the_profile(imported, op_steps):
    view = read_trace_view(REAL)
    real = Counter(a.api for a in view.acl_api_events() if a.kind == "phase2")
    steps = [s for th in imported.scenario["threads"] for s in op_steps(th["program"])]
    warm = imported.report.figures["warmup_calls"]
    in_program = Counter(s["op"] for th in imported.scenario["threads"] for s in op_steps(th["program"]))
    assert {op: n for op, n in in_program.items() if op.startswith("aclnn")} == dict(real)
    assert len(steps) == 148 and warm > 0
    assert sum(len(th.get("warmup", ())) for th in imported.scenario["threads"]) == warm


def test_the_imported_scenario_validates(imported, tmp_path):
    from opsim.importer import write_import
    out = write_import(imported, tmp_path / "mnist.yaml")
    cfg = load_scenario(out.scenario_path)
    assert cfg.env["TASK_QUEUE_ENABLE"] == "1"
    assert {t.name for t in cfg.threads} == {"thread_437675", "thread_439228", "device_replay"}
    assert out.report_path.exists()


def test_a_replay_above_the_file_budget_is_refused_and_nothing_is_written(imported, tmp_path, capsys):
    """A scenario above the file budget `opsim run` reads (a long profile) is never written; with the budget
    raised (--max-file-mib) on import and run, it is written, validated and run."""
    import yaml
    from opsim.cli import main
    from opsim.errors import ProfileFormatError
    from opsim.importer import write_import
    from opsim.scenario.limits import Limits
    imported = dataclasses.replace(imported, scenario={**imported.scenario, "description": "x" * (5 << 20)})  # a long replay's size, in one field
    with pytest.raises(ProfileFormatError, match=r"mnist.yaml: the replay is 5\.0 MiB of scenario YAML, above the 4 "
                                                 r"MiB file budget.*nothing was written: import and run it with "
                                                 r"--max-file-mib 6, or import"):
        write_import(imported, tmp_path / "mnist.yaml")
    assert list(tmp_path.iterdir()) == []
    out = write_import(imported, tmp_path / "mnist.yaml", max_bytes=6 << 20)
    assert out.scenario_path.read_text().startswith("# Imported by `opsim import` from a real profile. Replay: "
                                                    "opsim run mnist.yaml --profiler-output --max-file-mib 6\n")
    with pytest.raises(ScenarioError, match="larger than the limit of 4 MiB.*runs with --max-file-mib"):
        load_scenario(out.scenario_path)
    assert load_scenario(out.scenario_path, limits=Limits(file_bytes=6 << 20)).name
    assert main(["validate", str(out.scenario_path)]) == 2
    assert "--max-file-mib" in capsys.readouterr().err
    assert main(["validate", str(out.scenario_path), "--max-file-mib", "6"]) == 0
    assert main(["validate", str(out.scenario_path), "--max-file-mib", "1025"]) == 2
    assert yaml.safe_load(out.scenario_path.read_text())["description"] == "x" * (5 << 20)


def test_replay_makes_the_same_aclnn_calls_per_api_phase_and_thread(replay):
    assert replay["count_mismatches"] == {}
    assert replay["calls_real"] == replay["calls_replay"] == 171


def test_warm_up_calls_stay_out_of_the_replayed_profile(replay):
    """Over the whole replayed trace_view.json (not only its first step) each ACLNN API is called as often as
    in the real profile: the warm-up calls that prime the cache run with the profiler stopped."""
    def calls(path):
        return Counter(a.api for a in read_trace_view(path).acl_api_events() if a.kind == "phase2")
    assert calls(replay["replay_trace"]) == calls(REAL)


def test_replay_device_time_is_within_10_percent(replay):
    assert replay["busy_rel"] <= DEVICE_TOLERANCE, replay["busy_us"]
    assert replay["span_rel"] <= DEVICE_TOLERANCE, replay["span_us"]
    assert replay["kernels"][1] == replay["kernels"][0]  # the two unlinked memcpys are replayed too


def test_replay_kernel_span_counts_the_task_queue_costs(replay):
    # 8.3% short while the task queue charged neither Enqueue nor Dequeue time
    assert replay["span_rel"] <= 0.06, replay["span_us"]


def test_replay_host_medians_of_both_phases_are_within_20_percent(replay):
    assert len(replay["medians"]) == 28
    for key, m in replay["medians"].items():
        assert m["rel"] is not None and m["rel"] <= HOST_TOLERANCE, (key, m)
    assert replay["ok"]


def test_msprof_analyze_compare_reads_real_baseline_and_replay(replay, tmp_path):
    pytest.importorskip("msprof_analyze", reason="msprof-analyze is not installed (pip install opsim[test])")
    comparison = str(Path(replay["replay_trace"]).parents[1])
    cli = ("import sys; sys.argv[0] = 'msprof-analyze'; "
           "from msprof_analyze.cli.entrance import msprof_analyze_cli; msprof_analyze_cli()")
    proc = subprocess.run([sys.executable, "-c", cli, "compare", "-d", comparison, "-bp", str(REAL), "-o",
                           str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert not [line for line in log.splitlines() if "[ERROR]" in line], log
    assert glob.glob(str(tmp_path / "performance_comparison_result_*.xlsx"))


def test_what_if_through_set_and_opsim_what_if(imported, tmp_path, capsys):
    from opsim.analysis.what_if import what_if
    from opsim.cli import main
    from opsim.importer import write_import
    path = write_import(imported, tmp_path / "mnist.yaml").scenario_path
    assert main(["run", str(path), "--out", str(tmp_path / "off"), "--quiet", "--no-progress",
                 "--set", "env.ACLNN_CACHE_LIMIT=0", "--set", "trace=false"]) == 0
    off = json.loads((tmp_path / "off" / "summary.json").read_text())
    table = what_if(str(path), "env.ACLNN_CACHE_LIMIT", ["10000", "0"], overrides={"trace": False})
    hits = table["summary.pta_cache.hits"].tolist()
    assert hits[0] > 0 and hits[1] == 0 == off["pta_cache"]["hits"]
    makespan = table["summary.simulated_makespan_us"].tolist()
    assert makespan[1] > makespan[0]


def test_import_and_replay_are_deterministic(tmp_path):
    from opsim.importer import write_import
    (tmp_path / "b").mkdir()
    a = write_import(import_profile(REAL), tmp_path / "a.yaml").scenario_path.read_text()
    b = write_import(import_profile(REAL), tmp_path / "b" / "a.yaml").scenario_path.read_text()
    assert a == b
    from opsim.scenario.runner import run_scenario
    run_scenario(tmp_path / "a.yaml", out_dir=tmp_path / "ra")
    run_scenario(tmp_path / "a.yaml", out_dir=tmp_path / "rb")
    assert (tmp_path / "ra" / "trace.json").read_bytes() == (tmp_path / "rb" / "trace.json").read_bytes()


def test_the_docs_second_stream_override_moves_one_call(imported, tmp_path):
    # docs/import.md: --set 'streams=[stream_3, side]' --set threads.0.program.0.loop.body.9.stream=side
    from opsim.importer import write_import
    from opsim.scenario.loader import parse_override
    path = write_import(imported, tmp_path / "imported.yaml").scenario_path
    overrides = dict(parse_override(s) for s in ("streams=[stream_3, side]",
                                                 "threads.0.program.0.loop.body.9.stream=side"))
    cfg = load_scenario(path, overrides)
    moved = cfg.threads[0].program[0].body[9]
    assert moved.op == "aclnnInplaceZero" and moved.stream == "side"
