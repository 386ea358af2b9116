"""The scenario surface of the PTA cache mode: `cache_mode` per thread and per op, TASK_QUEUE_ENABLE,
the task-queue thread's name; bad values are reported with the field and the fix."""
from __future__ import annotations

import textwrap

import pytest

from opsim.errors import ScenarioError
from opsim.scenario.loader import load_scenario

BASE = """\
name: t
threads:
  - name: py
    cache_mode: pta
    program:
      - {op: Add, shape: [2, 3]}
      - {op: Abs, shape: [4], cache_mode: ordinary}
  - name: app
    program:
      - {op: Add, shape: [2, 3]}
"""


def write(tmp_path, text):
    p = tmp_path / "s.yaml"
    p.write_text(textwrap.dedent(text))
    return p


def test_cache_mode_per_thread_and_per_op(tmp_path):
    cfg = load_scenario(write(tmp_path, BASE))
    py, app = cfg.threads
    assert (py.cache_mode, app.cache_mode) == ("pta", "ordinary")
    assert [s.cache_mode for s in py.program] == [None, "ordinary"]
    assert cfg.task_queue_thread == "task_queue"


def test_unknown_cache_mode_names_the_field(tmp_path):
    with pytest.raises(ScenarioError) as exc:
        load_scenario(write(tmp_path, BASE.replace("cache_mode: pta", "cache_mode: hash")))
    assert "threads[0].cache_mode" in str(exc.value) and "pta" in str(exc.value)


@pytest.mark.parametrize("value", ["3", "yes", "-1"])
def test_task_queue_enable_outside_0_1_2_is_an_error(tmp_path, value):
    with pytest.raises(ScenarioError) as exc:
        load_scenario(write(tmp_path, BASE + f"env: {{TASK_QUEUE_ENABLE: \"{value}\"}}\n"))
    msg = str(exc.value)
    assert "env.TASK_QUEUE_ENABLE" in msg and '"2"' in msg


def test_task_queue_thread_name_must_be_free(tmp_path):
    with pytest.raises(ScenarioError) as exc:
        load_scenario(write(tmp_path, BASE + "task_queue_thread: app\n"))
    assert "task_queue_thread" in str(exc.value) and "another name" in str(exc.value)
    cfg = load_scenario(write(tmp_path, BASE + "task_queue_thread: acl_thread\nenv: {TASK_QUEUE_ENABLE: 2}\n"))
    assert cfg.task_queue_thread == "acl_thread" and cfg.env["TASK_QUEUE_ENABLE"] == "2"


def test_repeat_needs_the_ordinary_mode(tmp_path):
    bad = BASE.replace("      - {op: Add, shape: [2, 3]}\n      - {op: Abs",
                       "      - {op: Add, shape: [2, 3], repeat: 3}\n      - {op: Abs", 1)
    with pytest.raises(ScenarioError) as exc:
        load_scenario(write(tmp_path, bad))
    assert "threads[0].program[0].repeat" in str(exc.value) and "cache_mode: ordinary" in str(exc.value)
    ok = bad.replace("repeat: 3}", "repeat: 3, cache_mode: ordinary}")
    assert load_scenario(write(tmp_path, ok)).threads[0].program[0].repeat == 3
