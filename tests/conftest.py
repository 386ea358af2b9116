"""Shared fixtures: small deterministic building blocks used across test packages."""
from __future__ import annotations

import os

import pytest
from hypothesis import settings

# CI replays the same examples on every run (a red build is always reproducible); local runs explore.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

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
    a developer's exported GE_PROFILING_TO_STD_OUT cannot change their outputs."""
    from opsim.scenario.schema import ENV_VARS
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
