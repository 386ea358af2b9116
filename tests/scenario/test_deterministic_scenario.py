"""The runtime's deterministic options in a scenario: a top-level `deterministic: {level, strong_consistency}`
(process-wide, as ACL_OPT_DETERMINISTIC is) and a `deterministic` program step that changes them mid-run. The
level is part of opbase's executor-cache key and of torch_npu's PTA key: a change is a miss."""
from __future__ import annotations

import pytest

from opsim.errors import ScenarioError
from opsim.scenario.loader import load_scenario
from opsim.scenario.runner import run_scenario

from scenario_helpers import SCENARIOS


def _write(tmp_path, text):
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return p


def test_bundled_scenario_a_level_change_is_a_cache_miss():
    """Given deterministic.yaml, when app changes the level (0 -> 1), then turns strong consistency on (1 reads as
    2), each change makes the next Add miss; python's PTA key changes with the level too."""
    res = run_scenario(SCENARIOS / "deterministic.yaml", write=False)
    c = res.sim.recorder.records("cache")
    kinds = [(t, cache, k) for t, cache, k in zip(c["thread"], c["cache"], c["kind"])]
    assert [k for t, cache, k in kinds if t == "app"] == ["miss", "hit"] * 3
    assert [k for t, cache, k in kinds if t == "python" and cache == "pta"] == ["miss", "hit", "miss"]
    inst = res.sim.recorder.records("instant")
    changes = [a for n, a in zip(inst["name"], inst["args"]) if n == "deterministic"]
    assert changes == [{"level": 1, "strong_consistency": False}, {"level": 1, "strong_consistency": True},
                       {"level": 0, "strong_consistency": True}]


def test_without_level_changes_every_repeat_hits():
    res = run_scenario(SCENARIOS / "deterministic.yaml", write=False, overrides={
        "threads.0.program": [{"loop": {"count": 6, "body": [{"op": "Add", "shape": [64, 64]}]}}]})
    c = res.sim.recorder.records("cache")
    assert [k for t, k in zip(c["thread"], c["kind"]) if t == "app"] == ["miss"] + ["hit"] * 5


def test_top_level_options_reach_the_runtime(tmp_path):
    cfg = load_scenario(SCENARIOS / "deterministic.yaml",
                        overrides={"deterministic.level": 1, "deterministic.strong_consistency": True})
    assert (cfg.deterministic_level, cfg.strong_consistency) == (1, True)
    res = run_scenario(_write(tmp_path, "name: d\ndeterministic: {level: 3}\nthreads:\n"
                                        "  - {name: t, program: [{op: Add, shape: [4]}]}\n"), write=False)
    assert (res.sim.process.deterministic_level, res.sim.process.strong_consistency) == (3, False)


@pytest.mark.parametrize("where, bad, message", [
    ("top", "{level: 5}", "deterministic.level: 5 is not allowed; use one of: 0, 1, 2, 3"),
    ("top", "{strong: true}", "deterministic.strong: unknown field 'strong'"),
    ("top", "{strong_consistency: 1}", "deterministic.strong_consistency"),
    ("step", "{level: -1}", "program[0].deterministic.level"),
    ("step", "{}", "program[0].deterministic"),
])
def test_bad_options_name_the_field(tmp_path, where, bad, message):
    top = f"deterministic: {bad}\n" if where == "top" else ""
    step = f"{{deterministic: {bad}}}" if where == "step" else "{op: Add, shape: [4]}"
    text = f"name: d\n{top}threads:\n  - name: t\n    program:\n      - {step}\n"
    with pytest.raises(ScenarioError) as exc:
        load_scenario(_write(tmp_path, text))
    assert message in str(exc.value)
