"""Fixtures for executor tests: a thread context without SimPy (stream None) and helpers."""
from __future__ import annotations

import pytest

from opsim.opdev.process import ProcessContext
from opsim.opdev.thread_local import set_current


@pytest.fixture
def process():
    return ProcessContext()


@pytest.fixture
def ctx(process):
    c = process.new_thread("t0")
    prev = set_current(c)
    yield c
    set_current(prev)


def phases(ctx) -> list[str]:
    """Host phases charged so far (and clear the log)."""
    return [a[1] for a in ctx.take_actions() if a[0] == 0]
