"""The fast path changes no output byte: every bundled scenario run both ways writes identical files."""
from __future__ import annotations

import json

import pytest

from scenario_helpers import BUNDLED, SCENARIOS
from opsim.cli import EXIT_OK, main
from opsim.scenario.loader import load_scenario
from opsim.scenario.runner import run_scenario

# large.yaml cut to 600 calls, with the full trace and the CSVs written
_CUT = {"large.yaml": {"threads.0.program.0.loop.count": 75, "threads.1.program.0.loop.count": 75,
                       "trace": True, "outputs.trace": True, "outputs.csv": True}}


def _files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _comparable(name: str, data: bytes):
    if name.endswith("summary.json"):  # everything but the wall-clock section
        summary = json.loads(data)
        summary.pop("wall")
        return summary
    return data


@pytest.mark.parametrize("name", BUNDLED)
def test_fast_and_reference_paths_write_the_same_bytes(tmp_path, name):
    outs = {}
    for fast in (True, False):
        res = run_scenario(SCENARIOS / name, out_dir=tmp_path / str(fast), overrides=_CUT.get(name),
                           profiler_output="both", fast_path=fast)
        assert res.sim.fast_path is fast
        outs[fast] = _files(tmp_path / str(fast))
    assert {"trace.json", "summary.json", "op_summary.csv", "task_time.csv"} <= set(outs[True])
    assert any("ASCEND_PROFILER_OUTPUT" in k for k in outs[True]) and any(k.endswith(".db") for k in outs[True])
    assert "records.json.gz" in outs[True]
    assert sorted(outs[True]) == sorted(outs[False])
    for key in outs[True]:
        assert _comparable(key, outs[True][key]) == _comparable(key, outs[False][key]), key


MIXED = """\
name: mixed
seed: 3
env: {TASK_QUEUE_ENABLE: "2", GE_PROFILING_TO_STD_OUT: "1", ACLNN_CACHE_LIMIT: "3"}
dump: {overflow_dump: true}
threads:
  - name: py
    cache_mode: pta
    streams: [s0]
    program:
      - loop:
          count: 6
          body:
            - {op: Add, shape_choices: [[64, 64], [32, 64]], dtype: float16}
            - {op: Softmax, shape: [32, 64], dtype: float16}
            - sleep: 3
      - sync: s0
  - name: app
    streams: [s1, s2]
    program:
      - profiling: {start: [acl_api, task_time, task_time_l1]}
      - loop:
          count: 5
          body:
            - {op: Add, shape_choices: [[64], [128], [256], [512]], dtype: float}
            - {op: Mul, shape: [64, 64], dtype: float16, stream: s2, repeat: 3}
            - {op: Sigmoid, shape: [16, 16], dtype: float}
      - profiling: {stop: true}
      - {op: Add, shape: [64], dtype: float}
      - sync_device: true
"""


def test_mixed_switches_write_the_same_bytes(tmp_path):
    """PTA V2 with its task queue, profiling started and stopped, overflow dump, cache evictions, repeatable
    executors, AI CPU, several streams: both paths, the same bytes."""
    src = tmp_path / "mixed.yaml"
    src.write_text(MIXED)
    outs = {}
    for fast in (True, False):
        res = run_scenario(src, out_dir=tmp_path / str(fast), profiler_output="both", fast_path=fast)
        assert not res.summary["errors"]
        outs[fast] = _files(tmp_path / str(fast))
    assert res.summary["profiling_reports"] and res.summary["op_calls"] > 30
    assert sorted(outs[True]) == sorted(outs[False])
    for key in outs[True]:
        assert _comparable(key, outs[True][key]) == _comparable(key, outs[False][key]), key


def test_imported_profile_replayed_three_times_writes_the_same_bytes(tmp_path):
    """A real torch_npu profile imported and replayed for three iterations through opbase's own cache (profiled
    ops hitting the executor cache from the second iteration, replayed from templates from the third): both
    paths, the same bytes."""
    from pathlib import Path

    import opsim.fastpath.hit_replay as hit_replay
    real = Path(__file__).resolve().parents[1] / "data" / "real" / "trace_view_910b_mnist.json"
    scenario = tmp_path / "imported" / "scenario.yaml"
    assert main(["import", str(real), "-o", str(scenario)]) == EXIT_OK
    import yaml
    program = yaml.safe_load(scenario.read_text())["threads"][0]["program"]
    at = next(i for i, step in enumerate(program) if "loop" in step)
    overrides = {f"threads.0.program.{at}.loop.count": 3, "threads.0.cache_mode": "ordinary",
                 "threads.1.cache_mode": "ordinary", "outputs.csv": True}
    outs, replays = {}, []
    real_replay = hit_replay.replay

    def counting(*args, **kwargs):
        replays.append(1)
        return real_replay(*args, **kwargs)

    for fast in (True, False):
        hit_replay.replay = counting
        try:
            res = run_scenario(scenario, out_dir=tmp_path / str(fast), overrides=overrides, fast_path=fast)
        finally:
            hit_replay.replay = real_replay
        assert not res.summary["errors"]
        outs[fast] = _files(tmp_path / str(fast))
    assert len(replays) > 20  # the template path was taken (by the fast run only)
    assert sorted(outs[True]) == sorted(outs[False])
    for key in outs[True]:
        assert _comparable(key, outs[True][key]) == _comparable(key, outs[False][key]), key


def test_scenario_option_selects_the_reference_path():
    assert load_scenario(SCENARIOS / "quickstart.yaml").fast_path is True
    assert load_scenario(SCENARIOS / "quickstart.yaml", {"fast_path": False}).fast_path is False
    res = run_scenario(SCENARIOS / "quickstart.yaml", overrides={"fast_path": False}, write=False)
    assert res.sim.fast_path is False


def test_cli_no_fast_path_flag(tmp_path, monkeypatch):
    from opsim.runtime.simulation import Simulation
    seen = []
    real_run = Simulation.run
    monkeypatch.setattr(Simulation, "run", lambda self, *a, **k: (seen.append(self.fast_path), real_run(self, *a, **k))[1])
    for extra, want in (((), True), (("--no-fast-path",), False)):
        code = main(["run", str(SCENARIOS / "quickstart.yaml"), "--out", str(tmp_path / str(want)), "--quiet",
                     "--no-progress", *extra])
        assert code == EXIT_OK
        assert seen[-1] is want
