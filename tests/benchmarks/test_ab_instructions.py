"""`benchmarks/ab_instructions.py` measures what run.py measures: every call-rate figure of run.py has its
workload here, each workload runs against the opsim of the tree it is given, and the counts are read from
cachegrind's summary."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import ab_instructions  # noqa: E402


def test_every_call_rate_of_run_py_has_a_figure():
    import run
    import inspect
    source = inspect.getsource(run.measure)
    for key in ("exec_cache_hit", "exec_cache_miss", "aicpu_task_cache_hit", "direct_invoke_repeat"):
        assert f'"{key}"' in source, key  # still a figure of run.py
        assert key in ab_instructions.FIGURES and f"{key}_reference" in ab_instructions.FIGURES
    assert "skeleton" in ab_instructions.FIGURES and "workspace_plan" in ab_instructions.FIGURES
    assert "batched_loop" in ab_instructions.FIGURES  # run.py's million-call path


def test_batched_figure_batches_in_both_runs_and_in_its_warm_up():
    """The batched loops run only from MIN_CALLS planned calls: N, 2N and the warm-up (which fills Numba's cache;
    without it a counted run compiles the loop, or loads what the other run just saved) must all reach it."""
    from opsim.scenario import batch
    n = ab_instructions.FIGURES["batched_loop"][0]
    assert n >= batch.MIN_CALLS and "batched_loop" in ab_instructions.WARM_FULL
    assert ab_instructions.warm_calls("batched_loop") == n
    assert ab_instructions.warm_calls("skeleton") < ab_instructions.FIGURES["skeleton"][0]


def test_batched_workload_refuses_a_count_that_would_not_batch(monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(SystemExit, match="do not batch"):
        ab_instructions.child(str(ROOT), "batched_loop", 3)


def test_batched_workload_simulates_without_writing(monkeypatch, tmp_path):
    """Only the simulation is counted: run_scenario is called with write=False on large.yaml, both loops cut."""
    from opsim.scenario import batch, runner
    seen = {}
    monkeypatch.setattr(batch, "MIN_CALLS", 0)
    monkeypatch.setattr(runner, "run_scenario", lambda path, **kw: seen.update(kw, path=path))
    ab_instructions.child(str(ROOT), "batched_loop", 16)
    assert seen["write"] is False and seen["path"].name == "large.yaml"
    assert seen["overrides"] == {"threads.0.program.0.loop.count": 2, "threads.1.program.0.loop.count": 2}


@pytest.mark.parametrize("name", [x for x in ab_instructions.FIGURES if x != "batched_loop"])
def test_each_workload_runs_against_the_given_tree(name, monkeypatch):
    """A few calls of each figure, in this process, against this tree (the counted runs make N and 2N; the
    batched figure needs 100 000 calls and is checked above without simulating)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(ab_instructions, "PLAN_TENSORS", 200)
    ab_instructions.child(str(ROOT), name, 3)


def test_a_tree_that_is_not_opsim_s_is_refused(tmp_path, monkeypatch):
    """The child binds `opsim` first: when the tree given has none, another one would be measured."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(SystemExit, match="not from"):
        ab_instructions.child(str(tmp_path), "skeleton", 1)


def test_table_and_counts_parsing():
    summary = "==1== \n==1== I   refs:      2,534,920,967\n"
    assert int(ab_instructions._IREFS.search(summary).group(1).replace(",", "")) == 2_534_920_967
    text = ab_instructions.table(["skeleton"], ["old", "."], {"old": {"skeleton": 100.0}, ".": {"skeleton": 99.0}})
    assert text.splitlines()[2].split() == ["skeleton", "100", "99", "0.9900"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_counts_are_repeatable():
    """Two counted runs of the same figure and count give the same number of instructions (no thread spins
    in them, hash seeds fixed): the A/B can read a 1% difference."""
    runs = {ab_instructions.count(ROOT, "skeleton", 200, None, "t") for _ in range(2)}
    assert len(runs) == 1
