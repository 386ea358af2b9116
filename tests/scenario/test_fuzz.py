"""Mutated bundled scenarios are accepted or refused with a ScenarioError, never a traceback, and `validate`
(which imports no user code) decides exactly as `load_scenario` (what `run` uses) does.
benchmarks/fuzz_scenarios.py runs the same mutations 5000 times and also runs the accepted ones."""
from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from mutations import BASES, mutate, mutate_cluster
from opsim.errors import ScenarioError
from opsim.scenario.loader import load_scenario, validate


def _outcome(fn, data):
    try:
        fn(data)
    except ScenarioError as exc:
        return "refused", str(exc).split(":", 1)[0]
    return "accepted", ""


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), base=st.sampled_from(sorted(BASES)))
def test_mutated_scenarios_never_traceback(seed, base):
    data = mutate(random.Random(seed), base)
    assert _outcome(load_scenario, data) == _outcome(validate, data)


def test_mutations_reach_both_outcomes():
    outcomes = {_outcome(load_scenario, mutate(random.Random(s)))[0] for s in range(60)}
    assert outcomes == {"accepted", "refused"}


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1))
def test_mutated_jobs_never_traceback(seed):
    """The job fields (cluster, groups, ranks, collective steps) with huge, negative, boolean, NUL-holding and
    enormous values: refused or accepted alike by validate and load_scenario, never a traceback."""
    data = mutate_cluster(random.Random(seed))
    assert _outcome(load_scenario, data) == _outcome(validate, data)


def test_job_mutations_reach_both_outcomes():
    outcomes = {_outcome(load_scenario, mutate_cluster(random.Random(s)))[0] for s in range(60)}
    assert outcomes == {"accepted", "refused"}
