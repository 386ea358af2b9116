"""The `profiling` program step: the profiler starts (with a switch mask) or stops at a point of a program;
reports appear in the trace and the summary counts them (docs/scenarios.md)."""
from __future__ import annotations

import pytest

from opsim.errors import ScenarioError
from opsim.scenario.loader import load_scenario
from opsim.scenario.runner import run_scenario

PROGRAM = """\
name: prof
seed: 3
threads:
  - name: t0
    program:
      - {op: Add, shape: [64]}
      - profiling: {start: [acl_api, task_time, task_time_l1]}
      - {op: Add, shape: [32]}
      - profiling: {stop: true}
      - {op: Add, shape: [16]}
"""


def write(tmp_path, text):
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return p


def test_reports_only_between_start_and_stop(tmp_path):
    """Given start/stop around one call (a new shape: a cache miss), then exactly that call reports host exec for
    both phases, a kernel launch, basic and tensor info; the summary counts them by kind and the trace has the
    instants."""
    res = run_scenario(write(tmp_path, PROGRAM), out_dir=tmp_path / "out")
    assert res.ok
    assert res.summary["profiling_reports"] == {"basic_info": 1, "host_exec": 2, "kernel_launch": 1,
                                                "tensor_info": 2}  # one record for the inputs, one for the outputs
    inst = res.sim.recorder.records("instant")
    names = list(inst["name"])
    assert names.count("profiling_start") == 1 and names.count("profiling_stop") == 1
    assert names.count("prof_kernel_launch") == 1
    start = names.index("profiling_start")
    stop = names.index("profiling_stop")
    assert start < names.index("prof_kernel_launch") < stop
    assert res.sim.process.profiling_commands[-1] == ("stop", 0)


def test_integer_mask(tmp_path):
    cfg = load_scenario(write(tmp_path, PROGRAM.replace("[acl_api, task_time, task_time_l1]", "2050")))
    step = cfg.threads[0].program[1]
    assert (step.start, step.mask) == (True, 0x802)


@pytest.mark.parametrize("bad", ["{start: [task_tme]}", "{stop: false}", "{start: -1}", "{}"])
def test_bad_step_is_a_scenario_error(tmp_path, bad):
    with pytest.raises(ScenarioError) as exc:
        load_scenario(write(tmp_path, PROGRAM.replace("{start: [acl_api, task_time, task_time_l1]}", bad)))
    assert "profiling" in str(exc.value)
