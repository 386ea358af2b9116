"""`FastEnvironment`: a SimPy environment that can spend a host thread's time in place, and that moves its own
event heap in and out for a batch (the only class of opsim that touches SimPy's private `_now`, `_eid`, `_queue`).

A second way of advancing time is a subclass, as SimPy's own `RealtimeEnvironment` (simpy/rt.py) is: the
reference path (`fast_path: false`) runs on a plain `simpy.Environment`. The SimPy versions this relies on are
pinned in pyproject.toml, and `tests/architecture/test_simpy_internals.py` fails loudly if those internals
change shape.

What `advance` replaces
    A host thread that has spent simulated host time up to `at` normally yields a SimPy timeout and is resumed
    by the environment. Most of the time the only events due before `at` are the device's own stream state
    machine (a stream waking up for a queued task, a kernel ending): plain callbacks that never run application
    code.

What it does
    `advance` processes exactly those events in place, in the order the environment would (time, priority,
    event id), then moves the clock to `at` and lets the thread run on; at the first event that would run
    anything else (another thread, the task queue, a synchronisation, `run(until=...)`) it schedules the
    thread's resume with the very time, priority and event id the timeout would have had, so the event order,
    and with it every output, is the one of the reference path.
"""
from __future__ import annotations

from heapq import heapify, heappop, heappush
from itertools import count
import simpy
from simpy.events import NORMAL, Event

from opsim.device.device import StreamTick


class Resume(Event):
    """An already-triggered event (like a Timeout) scheduled by `advance` with the timeout's event id; a batch
    (`opsim.fastpath.batch`) makes one for the thread it hands back to SimPy."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.callbacks: list = []
        self._value = None
        self._ok = True


class FastEnvironment(simpy.Environment):
    """The fast path's environment: `advance` instead of a timeout round trip, and the heap exported and
    imported whole for a batch."""

    def advance(self, delay: float) -> Event | None:
        """Advance by `delay` for the calling host thread: None when done in place (the thread runs on), else the
        event to yield (scheduled exactly where `self.timeout(delay)` would be)."""
        now = self._now
        at = now + delay  # the timeout's time, rounded the same way
        eid = next(self._eid)  # the id the timeout would have taken, so later ids match the reference path too
        q = self._queue
        step = self.step
        while q:
            head = q[0]
            t = head[0]
            if t >= at and (t > at or head[1] > NORMAL or (head[1] == NORMAL and head[2] > eid)):
                break
            ev = head[3]
            if type(ev) is StreamTick:  # self.step() for the stream's own event (one callback), inline
                heappop(q)
                self._now = t
                ev.callbacks[0](ev)  # (nothing reads a processed tick's callbacks: they are left as they are)
                continue
            if ev.callbacks or not ev._ok:  # anything else that runs code: the thread's resume takes its place
                resume = Resume(self)
                heappush(q, (at, NORMAL, eid, resume))
                return resume
            step()
        self._now = at
        return None

    def export_heap(self) -> tuple[list, float, int]:
        """(the scheduled items as (time, priority, event id, event), read-only; the clock; the next event id,
        looked at and not taken)."""
        eid = next(self._eid)
        self._eid = count(eid)
        return self._queue, self._now, eid

    def import_heap(self, items: list, now: float, next_eid: int) -> None:
        """Replace the scheduled items, the clock and the event-id counter (a batch's state handed back)."""
        heapify(items)
        self._queue = items
        self._now = now
        self._eid = count(next_eid)

