"""The SimPy internals `opsim.fastpath.environment.FastEnvironment` relies on still have the shape it expects.

FastEnvironment (the fast path's clock) reads and replaces SimPy's private `_now`, `_eid` and `_queue`, and
builds a triggered event the way `Timeout` does. pyproject.toml pins the SimPy versions tested; when a SimPy
release changes any of this, these tests fail here, loudly, instead of the fast path going quietly wrong.
"""
from __future__ import annotations

import inspect
from itertools import count

import simpy
from simpy.core import Environment
from simpy.events import NORMAL, URGENT, Event, Timeout

from opsim.fastpath.environment import FastEnvironment, Resume


def test_simpy_version_is_a_tested_one():
    """pyproject.toml pins simpy>=4.1,<4.2: the versions whose internals the checks below describe."""
    major, minor = (int(x) for x in simpy.__version__.split(".")[:2])
    assert (major, minor) == (4, 1), f"SimPy {simpy.__version__} is not a tested version; rerun these checks"


def test_environment_keeps_clock_counter_and_heap_as_expected():
    """`_now` is the clock, `_eid` an itertools.count, `_queue` a heap list of (time, priority, eid, event)."""
    env = Environment()
    assert env._now == 0 and type(env._eid) is count and env._queue == []
    t = env.timeout(2.5)
    assert len(env._queue) == 1
    item = env._queue[0]
    assert type(item) is tuple and len(item) == 4
    assert item[0] == 2.5 and item[1] == NORMAL and type(item[2]) is int and item[3] is t
    assert NORMAL == 1 and URGENT == 0  # batch_layout.NORMAL repeats it for the compiled loop


def test_schedule_and_step_are_the_heap_operations_advance_mirrors():
    """`schedule` pushes (now + delay, priority, next eid, event); `step` pops the heap head and sets `_now`."""
    src = inspect.getsource(Environment.schedule)
    assert "heappush(self._queue, (self._now + delay, priority, next(self._eid), event))" in src
    step = inspect.getsource(Environment.step)
    assert "self._now, _, _, event = heappop(self._queue)" in step
    assert "callbacks, event.callbacks = event.callbacks, None" in step


def test_timeout_is_a_triggered_event_like_resume():
    """A Timeout is triggered at creation (`_ok` True, `_value` set, a callbacks list): Resume copies that."""
    env = Environment()
    t = Timeout(env, 1.0)
    assert t._ok is True and t._value is None and t.callbacks == []
    fast = FastEnvironment()
    r = Resume(fast)
    assert isinstance(r, Event) and r._ok is True and r._value is None and r.callbacks == [] and r.triggered


def test_advance_matches_a_timeout():
    """advance() with nothing due moves the clock in place; with a callback due first it schedules the resume
    where `timeout` would have put it (same time, priority and event id)."""
    fast, ref = FastEnvironment(), Environment()
    assert fast.advance(0.0) is None and fast.now == 0.0
    ref.timeout(0.0)
    ref.step()
    for env in (fast, ref):
        ev = Event(env)
        ev.callbacks.append(lambda e: None)
        ev.succeed()  # scheduled now, with a callback: code the thread's resume must not overtake
    resume = fast.advance(2.0)
    timeout = ref.timeout(2.0)
    assert isinstance(resume, Resume)
    assert [item[:3] for item in sorted(fast._queue)] == [item[:3] for item in sorted(ref._queue)]
    assert sorted(fast._queue)[-1][3] is resume and sorted(ref._queue)[-1][3] is timeout


def test_export_and_import_heap_round_trip():
    """export_heap looks at the next event id without taking it; import_heap puts a heap, clock and counter back."""
    env = FastEnvironment()
    env.timeout(1.0)
    items, now, eid = env.export_heap()
    assert now == 0 and eid == 1 and len(items) == 1
    assert env.export_heap()[2] == 1  # looked at, not taken
    env.import_heap(list(items), 0.5, 7)
    assert env.now == 0.5 and env.export_heap()[2] == 7
    env.run()
    assert env.now == 1.0

