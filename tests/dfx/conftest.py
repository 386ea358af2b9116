"""Fixtures for DFX tests: one simulated thread of a fresh process, no SimPy (stream None)."""
from __future__ import annotations

import pytest

from opsim.opdev.process import ProcessContext
from opsim.opdev.thread_local import set_current


@pytest.fixture
def world(request):
    """(process, thread context); parametrize indirectly with ProcessContext keyword arguments."""
    process = ProcessContext(**getattr(request, "param", {}))
    ctx = process.new_thread("t0")
    prev = set_current(ctx)
    yield process, ctx
    set_current(prev)
