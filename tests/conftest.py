"""Shared fixtures: small deterministic building blocks used across test packages."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

sys.path.insert(0, str(Path(__file__).resolve().parent))  # db_helpers, shared by tests/ingest and tests/importer

# Every run of the test command replays the same examples, so a red build is always reproducible and a fresh
# machine sees what CI saw (the examples depend on the Hypothesis release too: pyproject.toml pins it exactly).
# `OPSIM_HYPOTHESIS=explore` draws new examples (as benchmarks/fuzz_*.py do at scale).
settings.register_profile("replay", derandomize=True, print_blob=True, deadline=None)  # no flaky deadline on a loaded machine
settings.register_profile("explore", print_blob=True)
settings.load_profile(os.environ.get("OPSIM_HYPOTHESIS", "replay"))

from opsim.acl import DataType, Tensor
from opsim.opdev.op_types import OpTypeDict


@pytest.fixture
def make_tensor():
    """Factory for device tensors: make_tensor([2, 3], "fp16", name="x")."""

    def _make(shape=(2, 3), dtype=DataType.DT_FLOAT, fmt="ND", **kwargs) -> Tensor:
        return Tensor(shape, dtype, fmt, **kwargs)

    return _make


@pytest.fixture
def op_type_dict() -> OpTypeDict:
    """A fresh op type dictionary, so tests never depend on registrations made elsewhere."""
    return OpTypeDict()


@pytest.fixture(autouse=True)
def _no_opbase_variables_from_the_shell(monkeypatch):
    """opsim reads the documented opbase variables from the process environment: tests start without them, so
    a developer's exported GE_PROFILING_TO_STD_OUT cannot change their outputs. OPSIM_TRACEBACK likewise: it
    turns the one-line internal error the tests expect into a traceback."""
    from opsim.scenario.schema import ENV_VARS
    for name in (*ENV_VARS, "OPSIM_TRACEBACK"):
        monkeypatch.delenv(name, raising=False)
