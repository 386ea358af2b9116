"""The fast path of a host thread's clock: spend host time without a SimPy round trip when nothing can notice.

A host thread that has spent simulated host time up to `at` normally yields a SimPy timeout and is resumed by
the environment. Most of the time the only events due before `at` are the device's own stream state machine
(a stream waking up for a queued task, a kernel ending): plain callbacks that never run application code.
`skip_to` processes exactly those events in place, in the order the environment would (time, priority,
event id), then moves the clock to `at` and lets the thread run on; at the first event that would run
anything else (another thread, the task queue, a synchronisation, `run(until=...)`) it schedules the thread's
resume with the very time, priority and event id the timeout would have had, so the event order, and with
it every output, is the one of the slow path.
"""
from __future__ import annotations

from heapq import heappop, heappush
from typing import Any

from simpy.events import NORMAL, Event

from opsim.device.device import StreamTick



class _Resume(Event):
    """An already-triggered event (like a Timeout) scheduled by `skip_to` with the timeout's event id."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.callbacks: list = []
        self._value = None
        self._ok = True


def skip_to(env: Any, delay: float) -> Event | None:
    """Advance `env` by `delay` for the calling host thread: None when done in place (the thread runs on),
    else the event to yield (scheduled exactly where `env.timeout(delay)` would be)."""
    now = env._now
    at = now + delay  # the timeout's time, rounded the same way
    eid = next(env._eid)  # the id the timeout would have taken, so later ids match the slow path too
    q = env._queue
    step = env.step
    while q:
        head = q[0]
        t = head[0]
        if t >= at and (t > at or head[1] > NORMAL or (head[1] == NORMAL and head[2] > eid)):
            break
        ev = head[3]
        if type(ev) is StreamTick:  # env.step() for the stream's own event (one callback), inline
            heappop(q)
            env._now = t
            ev.callbacks[0](ev)  # (nothing reads a processed tick's callbacks: they are left as they are)
            continue
        if ev.callbacks or not ev._ok:  # anything else that runs code: the thread's resume takes its place
            resume = _Resume(env)
            heappush(q, (at, NORMAL, eid, resume))
            return resume
        step()
    env._now = at
    return None
