"""The device: AI Core / vector / AI CPU / copy-engine pools, HBM, streams and events, on one SimPy clock.

Speed matters here (every simulated op call ends in one or more device tasks), so the model avoids SimPy
Store/Resource round trips. Queues are deques, unit availability is an integer per pool with a FIFO of
waiting streams, and a stream is a small state machine driven by callbacks: it is woken only when it has
work (a submission to an idle stream, a wake-up at a future submission time, a grant of units, a recorded
event, the end of its running task). A task costs one SimPy timeout for its duration, plus one wake-up
when the stream was idle and the task's submission time lies in the future.

Semantics:

- ``Stream.submit(task, at)``: the host submits ``task`` at simulated time ``at`` (>= env.now; a host
  thread charges its costs ahead of env.now). The task does not start before ``at``. Tasks on one stream
  run one at a time in arrival order (``at``, then submission order); different streams run concurrently
  as units allow.
- AI Core tasks take min(block_dim, AI Core count) cores for their whole duration, AI_VECTOR tasks the same
  on the vector cores, AI CPU tasks one AI CPU, memcpy tasks one copy engine. A task waits on its stream,
  holding nothing, until all its units are free; waiting streams are served first come, first served.
- ``EVENT_RECORD``/``EVENT_WAIT``: a wait captures the event's most recent record submitted before it (none:
  the wait passes at once) and holds its stream exactly until that record completes.
- ``HOST_FUNC`` tasks take no units and run their callback in stream order.
- ``COLLECTIVE`` tasks take no units: the stream reaching one is its rank's arrival (``task.event.arrive``),
  and the group's rendezvous ends it on every member (``Stream.end_collective``); opsim.cluster.
- Every finished task records one "device" row in the recorder.

Compiled twin: `opsim.fastpath.batch_kernel` ports `Stream.submit`, `_schedule_wake`, `_advance`, `_begin`,
`_finish` and `UnitPool.acquire` / `release` operation by operation (same floating-point operations, same
event ids) for batched steady state; a change of behaviour here is made there too, and
tests/scenario/test_batch.py compares the two.
"""
from __future__ import annotations

import math
from collections import deque
from heapq import heappush
from typing import Any, Callable, NamedTuple, NoReturn

import simpy
from simpy.events import NORMAL

from opsim.device.cost import CostModel
from opsim.device.memory import DeviceMemory
from opsim.device.soc import SocSpec
from opsim.device.task import DeviceTask, TaskKind
from opsim.errors import InvalidArgumentError
from opsim.trace.recorder import Recorder

__all__ = ["Device", "Stream", "StreamEvent", "DeviceTask", "TaskKind", "UnitPool"]


class StreamTick:
    """A stream's own wake-up or kernel end: `env.timeout(delay)` with one callback, scheduled at the same
    time, priority and event id, without the Timeout's generic set-up (two of these per kernel). Only the
    stream that made it holds it, so its one callback is always the stream's (what the fast path of a
    host thread relies on to run it in place). SimPy's `Environment.step` needs of a queued event only its
    `callbacks` and `_ok`, so a tick is a two-slot object, not an `Event` with its dict. The stream makes it
    without a constructor call (`Stream._schedule_wake`, `Stream._begin`): its `callbacks` is one of the
    stream's own one-callback lists, shared by its ticks and never changed, and a stream's end tick is one
    object reused (a stream has at most one pending: its running task's)."""

    __slots__ = ("callbacks",)
    _ok = True  # it never fails; `_value` as a processed Timeout's
    _value = None


_AI_CORE = TaskKind.AI_CORE
_AI_VECTOR = TaskKind.AI_VECTOR
_EVENT_RECORD = TaskKind.EVENT_RECORD
_EVENT_WAIT = TaskKind.EVENT_WAIT
_COLLECTIVE = TaskKind.COLLECTIVE
_INF = math.inf
_NAN = math.nan
_new_task = object.__new__
_new_tick = object.__new__


class UnitPool:
    """``capacity`` identical units (cores, AI CPUs or copy engines): a free count and a FIFO of waiters."""

    __slots__ = ("name", "capacity", "free", "_waiters")

    def __init__(self, name: str, capacity: int) -> None:
        self.name = name
        self.capacity = capacity
        self.free = capacity
        self._waiters: deque[tuple[int, Stream]] = deque()

    def acquire(self, n: int, stream: Stream) -> bool:
        """Take ``n`` units now (True) or queue ``stream`` to be granted them later (False)."""
        if self.free >= n and not self._waiters:
            self.free -= n
            return True
        self._waiters.append((n, stream))
        return False

    def release(self, n: int) -> None:
        """Return ``n`` units and grant waiting streams, in order, while the first one fits."""
        self.free += n
        waiters = self._waiters
        while waiters and waiters[0][0] <= self.free:
            need, stream = waiters.popleft()
            self.free -= need
            stream._granted()

    @property
    def busy(self) -> int:
        return self.capacity - self.free

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def export_state(self) -> tuple[int, tuple[tuple[int, Stream], ...]]:
        """(free units, the waiting streams in order as (units, stream)): a batch of the fast path
        (opsim.fastpath.batch_state) takes them into arrays and hands them back through `import_state`."""
        return self.free, tuple(self._waiters)

    def import_state(self, free: int, waiters: Any) -> None:
        """The free count and the FIFO of (units, stream) waiters, as a batch left them."""
        self.free = free
        self._waiters = deque(waiters)


class StreamEvent:
    """aclrtEvent: recorded on one stream, waited on by others, or synchronised on by the host."""

    __slots__ = ("device", "event_id", "name", "_recorded", "_completed", "time", "_waiters", "_syncs")

    def __init__(self, device: Device, event_id: int, name: str = "") -> None:
        self.device = device
        self.event_id = event_id
        self.name = name or f"event{event_id}"
        self._recorded = 0   # records submitted
        self._completed = 0  # highest record (by submission count) completed
        self.time = math.nan  # simulated time the latest completed record completed
        self._waiters: list[Stream] = []
        self._syncs: list[tuple[int, simpy.Event]] = []

    def query(self) -> bool:
        """aclrtQueryEvent: True when every record submitted so far has completed."""
        return self._completed >= self._recorded

    def synchronize(self) -> simpy.Event:
        """A SimPy event that fires (value: the time) when the most recent record submitted so far completes."""
        ev = self.device.env.event()
        if self._completed >= self._recorded:
            ev.succeed(self.device.env.now)
        else:
            self._syncs.append((self._recorded, ev))
        return ev

    def _complete(self, target: int, now: float) -> None:
        if target > self._completed:
            self._completed = target
        self.time = now
        done = self._completed
        if self._waiters:
            ready = [s for s in self._waiters if s._current._target <= done]
            if ready:
                self._waiters = [s for s in self._waiters if s._current._target > done]
                for stream in ready:
                    stream._finish(stream._current)
                    stream._advance()
        if self._syncs:
            fire = [ev for t, ev in self._syncs if t <= done]
            if fire:
                self._syncs = [(t, ev) for t, ev in self._syncs if t > done]
                for ev in fire:
                    ev.succeed(now)


class Stream:
    """One aclrtStream: a FIFO of device tasks run one at a time on the device's units."""

    def __init__(self, device: Device, stream_id: int) -> None:
        self.device = device
        self.env = device.env
        self.stream_id = stream_id
        self.depth = device.soc.stream_depth
        self.pending = 0
        """Tasks submitted and not yet finished (queued, waiting or running)."""
        self._queue: deque[DeviceTask] = deque()
        self._current: DeviceTask | None = None
        self._pool: UnitPool | None = None
        self._wake_at = _INF
        self._next_task_id = 0
        self._sync_waits: dict[int, list[simpy.Event]] = {}
        self._space_waiters: list[simpy.Event] = []
        self._record = device.recorder.device_task
        self._device_id = device.device_id
        self._pools = device._pools
        self._on_end_cb = self._finish  # the running task's end (see `_finish`)
        self._on_wake_cb = self._advance  # a wake-up (see `_advance`)
        self._end_cbs = [self._on_end_cb]  # the callbacks of the stream's ticks (see StreamTick)
        self._wake_cbs = [self._on_wake_cb]
        self._end_tick = _new_tick(StreamTick)

    def __repr__(self) -> str:
        return f"Stream({self.stream_id}, pending={self.pending})"

    # --- host side -----------------------------------------------------------------------------------------
    def submit(self, task: DeviceTask, at: float) -> DeviceTask:
        """Put ``task`` on this stream at simulated time ``at`` (>= env.now); returns the task."""
        env = self.env
        if not at >= env._now:
            self._too_early(at)
        if task.task_id >= 0:
            raise InvalidArgumentError(f"{task!r} was already submitted; create a new DeviceTask for each launch")
        task.stream_id = self.stream_id
        task.task_id = self._next_task_id
        self._next_task_id += 1
        task.queued = at + 0.0
        kind = task.kind
        if kind is _EVENT_RECORD:
            event = task.event
            event._recorded += 1
            task._target = event._recorded
        elif kind is _EVENT_WAIT:
            task._target = task.event._recorded
        self._enqueue(task, at)
        return task

    def submit_kernel(self, at: float, kind: TaskKind, duration: float, block_dim: int, op_name: str,
                      task_type: str, corr_id: int) -> DeviceTask:
        """``submit(DeviceTask.trusted(kind, duration, block_dim, op_name, task_type, corr_id), at)``: a plain
        kernel task (no callback, event or bytes) of values already checked, made here with each field
        written once (a replayed template's launches)."""
        env = self.env
        if not at >= env._now:
            self._too_early(at)
        task = _new_task(DeviceTask)
        task.kind = kind
        task.duration = duration
        task.block_dim = block_dim
        task.op_name = op_name
        task.task_type = task_type
        task.corr_id = corr_id
        task.nbytes = 0
        task.callback = task.on_done = task.event = None
        task.stream_id = self.stream_id
        task.task_id = n = self._next_task_id
        self._next_task_id = n + 1
        task.queued = at + 0.0
        task.start = task.end = _NAN
        task.units = task._target = 0
        self._enqueue(task, at)
        return task

    def _too_early(self, at: float) -> NoReturn:
        raise InvalidArgumentError(
            f"submit time at={at!r} is before the simulation clock ({self.env._now}); "
            "submit at the host thread's current time or later")

    def _enqueue(self, task: DeviceTask, at: float) -> None:
        """Count a submitted task, queue it in arrival order and start it, or wake the stream at ``at``."""
        self.pending += 1
        q = self._queue
        if not q or q[-1].queued <= at:
            q.append(task)
        else:  # an earlier arrival from another host thread: keep the queue in arrival order
            i = len(q) - 1
            while i > 0 and q[i - 1].queued > at:
                i -= 1
            q.insert(i, task)
        if self._current is None and q[0] is task:
            if at <= self.env._now:
                self._advance()
            elif at < self._wake_at:
                self._schedule_wake(at)

    def record_event(self, event: StreamEvent, at: float, corr_id: int = -1) -> DeviceTask:
        """aclrtRecordEvent: mark ``event`` when the work queued so far on this stream is done."""
        return self.submit(DeviceTask(TaskKind.EVENT_RECORD, event=event, op_name=event.name, corr_id=corr_id), at)

    def wait_event(self, event: StreamEvent, at: float, corr_id: int = -1) -> DeviceTask:
        """aclrtStreamWaitEvent: hold this stream until the latest record of ``event`` submitted so far completes."""
        return self.submit(DeviceTask(TaskKind.EVENT_WAIT, event=event, op_name=event.name, corr_id=corr_id), at)

    def synchronize(self) -> simpy.Event:
        """A SimPy event that fires (value: the time) once every task submitted so far has finished."""
        ev = self.env.event()
        q = self._queue
        last = q[-1] if q else self._current
        if last is None:
            ev.succeed(self.env._now)
        else:
            self._sync_waits.setdefault(id(last), []).append(ev)
        return ev

    def query(self) -> bool:
        """aclrtStreamQuery: True when the stream has no unfinished task."""
        return self.pending == 0

    @property
    def full(self) -> bool:
        """True when ``depth`` tasks are outstanding (a real submit would block)."""
        return self.pending >= self.depth

    def space_available(self) -> simpy.Event:
        """A SimPy event that fires once fewer than ``depth`` tasks are outstanding."""
        ev = self.env.event()
        if self.pending < self.depth:
            ev.succeed(self.env._now)
        else:
            self._space_waiters.append(ev)
        return ev

    # --- the stream's state machine ---------------------------------------------------------------------------
    def _schedule_wake(self, at: float) -> None:
        """A wake-up at `at`: `env.timeout(at - now)` with `_advance` (as a wake-up) as its callback."""
        env = self.env
        self._wake_at = at
        tick = _new_tick(StreamTick)
        tick.callbacks = self._wake_cbs
        heappush(env._queue, (env._now + (at - env._now), NORMAL, next(env._eid), tick))

    def _advance(self, wake: Any = None) -> None:
        """Start queued tasks until one has to wait (for time, units, an event) or the queue is empty. Called
        with its tick as `wake`, it is the stream's wake-up (one call less per wake-up than a wrapper)."""
        if wake is not None:
            # Any wake clears the mark: `now + (at - now)` can land one ulp short of `at`, and a stale wake only
            # costs a duplicate (harmless) wake-up that `_advance` schedules again if still needed.
            self._wake_at = _INF
        if self._current is not None:
            return
        q = self._queue
        env = self.env
        while q:
            task = q[0]
            if task.queued > env._now:
                if task.queued < self._wake_at:
                    self._schedule_wake(task.queued)
                return
            q.popleft()
            self._current = task
            kind = task.kind
            pool = self._pools[kind]
            if pool is not None:
                if kind is _AI_CORE or kind is _AI_VECTOR:
                    n = task.block_dim
                    if n >= pool.capacity:
                        n = pool.capacity
                else:
                    n = 1
                task.units = n
                self._pool = pool
                if pool.free >= n and not pool._waiters:  # UnitPool.acquire's immediate grant, inline
                    pool.free -= n
                elif not pool.acquire(n, self):
                    return  # `_granted` starts it
                if not self._begin(task):
                    return
            elif kind is _EVENT_WAIT and task.event._completed < task._target:
                # The wait starts now (the stream reached it) and ends when the record completes.
                task.start = env._now + 0.0
                if task.callback is not None:
                    task.callback(task)
                task.event._waiters.append(self)
                return  # `StreamEvent._complete` finishes it
            elif kind is _COLLECTIVE:
                # The stream reached the collective: its rank arrives; the group's rendezvous ends it
                # (`end_collective`) once every member has arrived and the transfer is done.
                task.start = env._now + 0.0
                if task.callback is not None:
                    task.callback(task)
                task.event.arrive(self, task)
                return
            elif not self._begin(task):
                return

    def _granted(self) -> None:
        self._begin(self._current)

    def _begin(self, task: DeviceTask) -> bool:
        """The task starts now; True when it also finished now (zero-length and holding no units)."""
        task.start = self.env._now + 0.0
        if task.callback is not None:
            task.callback(task)
        if task.duration > 0.0 or task.units:  # its end: `env.timeout(duration)` with `_finish`
            env = self.env
            tick = self._end_tick
            tick.callbacks = self._end_cbs
            heappush(env._queue, (env._now + task.duration, NORMAL, next(env._eid), tick))
            return False
        self._finish(task)
        return True

    def _finish(self, task: DeviceTask | StreamTick) -> None:
        """`task` completes now. Called with its end tick, it is the end of the running task, and the stream
        then advances (one call less per task end than a wrapper)."""
        ended = task.__class__ is StreamTick
        if ended:
            task = self._current
        now = self.env._now + 0.0
        task.end = now
        self._current = None
        self.pending -= 1
        pool = self._pool
        self._record(self.stream_id, pool.name if pool is not None else "none", task.units, task.task_id,
                     task.op_name, task.task_type, task.block_dim, task.queued, task.start, now, task.corr_id,
                     self._device_id)
        if pool is not None:
            self._pool = None
            if pool._waiters:
                pool.release(task.units)
            else:  # UnitPool.release with nobody waiting, inline
                pool.free += task.units
        if task.kind is _EVENT_RECORD:
            task.event._complete(task._target, now)
        if task.on_done is not None:
            task.on_done(task)
        if self._sync_waits:
            for ev in self._sync_waits.pop(id(task), ()):
                ev.succeed(now)
        if self._space_waiters and self.pending < self.depth:
            waiters, self._space_waiters = self._space_waiters, []
            for ev in waiters:
                ev.succeed(now)
        if ended:
            self._advance()

    def end_collective(self, at: float) -> None:
        """The collective this stream holds ends at `at` (>= now; its group has gathered): its end tick."""
        env = self.env
        if self._current is None or self._current.kind is not _COLLECTIVE or not at >= env._now:
            raise InvalidArgumentError(f"{self!r} holds no collective to end at {at!r}")
        tick = self._end_tick
        tick.callbacks = self._end_cbs
        heappush(env._queue, (at, NORMAL, next(env._eid), tick))

    # --- the fast path's batches (opsim.fastpath.batch_state; opsim.fastpath.batch_kernel is the compiled twin
    # of submit, _schedule_wake, _advance, _begin and _finish) -------------------------------------------------
    def export_state(self) -> StreamState:
        """The stream's scheduling state, for a batch to take into arrays (read-only; see `import_state`)."""
        return StreamState(self._queue, self._current, self._pool, self._wake_at, self._next_task_id, self.pending,
                           bool(self._sync_waits or self._space_waiters))

    def import_state(self, queue: Any, current: DeviceTask | None, pool: UnitPool | None, wake_at: float,
                     next_task_id: int, pending: int) -> None:
        """Take back the state a batch left: queued tasks, the running or waiting task, the pool it holds or waits
        for, the pending wake-up time, the next task id and the count of unfinished tasks."""
        self._queue = deque(queue)
        self._current = current
        self._pool = pool
        self._wake_at = wake_at
        self._next_task_id = next_task_id
        self.pending = pending

    def tick_callbacks(self) -> tuple[Callable, Callable]:
        """(wake-up, task end): the callbacks of this stream's ticks, by which a batch tells its events apart."""
        return self._on_wake_cb, self._on_end_cb

    def new_tick(self, end: bool) -> StreamTick:
        """A tick of this stream (its running task's end, else a wake-up) for a batch to schedule."""
        tick = _new_tick(StreamTick)
        tick.callbacks = [self._on_end_cb if end else self._on_wake_cb]
        return tick


class StreamState(NamedTuple):
    """A stream's state as `Stream.export_state` gives it."""

    queue: deque
    current: DeviceTask | None
    pool: UnitPool | None
    wake_at: float
    next_task_id: int
    pending: int
    blocked: bool
    """A synchronisation or a producer waits on the stream (a batch leaves such a stream to SimPy)."""


class Device:
    """One NPU: unit pools, HBM, streams and events, driven by ``env``."""

    def __init__(self, env: simpy.Environment, soc: SocSpec, recorder: Recorder, cost: CostModel | None = None,
                 numerics: bool = False, device_id: int = 0, memory_strategy: str = "first_fit") -> None:
        self.env = env
        self.soc = soc
        self.recorder = recorder
        self.cost = cost if cost is not None else CostModel(soc)
        self.numerics = bool(numerics)
        self.device_id = device_id
        self.aicore = UnitPool("aicore", soc.aicore_count)
        self.vector = UnitPool("vector", soc.vector_core_count) if soc.vector_core_count > 0 else self.aicore
        self.aicpu = UnitPool("aicpu", soc.aicpu_count)
        self.dma = UnitPool("dma", soc.memcpy_engines)
        pools: list[UnitPool | None] = [None] * len(TaskKind)
        pools[TaskKind.AI_CORE] = self.aicore
        pools[TaskKind.AI_VECTOR] = self.vector
        pools[TaskKind.AI_CPU] = self.aicpu
        pools[TaskKind.MEMCPY_H2D] = pools[TaskKind.MEMCPY_D2H] = pools[TaskKind.MEMCPY_D2D] = self.dma
        self._pools = pools
        self.memory = DeviceMemory(soc.hbm_bytes, recorder, env, numerics=self.numerics,
                                   strategy=memory_strategy, device_id=device_id)
        self.streams: list[Stream] = []
        self._events = 0

    def __repr__(self) -> str:
        return f"Device({self.device_id}, {self.soc.name}, streams={len(self.streams)})"

    @property
    def pools_by_kind(self) -> tuple[UnitPool | None, ...]:
        """The unit pool of each TaskKind (None: a task of that kind takes no units)."""
        return tuple(self._pools)

    def create_stream(self) -> Stream:
        """aclrtCreateStream: a new stream with the next id (0, 1, 2, ...)."""
        if len(self.streams) >= self.soc.max_streams:
            raise InvalidArgumentError(
                f"{self.soc.name} supports {self.soc.max_streams} streams and all are in use; "
                "create fewer streams or raise max_streams in the SoC overrides")
        stream = Stream(self, len(self.streams))
        self.streams.append(stream)
        return stream

    def stream(self, stream_id: int) -> Stream:
        """The stream with id ``stream_id``."""
        if type(stream_id) is int and 0 <= stream_id < len(self.streams):
            return self.streams[stream_id]
        existing = f"0..{len(self.streams) - 1}" if self.streams else "none (call create_stream first)"
        raise InvalidArgumentError(f"unknown stream id {stream_id!r}; existing stream ids: {existing}")

    def create_event(self, name: str = "") -> StreamEvent:
        """aclrtCreateEvent."""
        self._events += 1
        return StreamEvent(self, self._events - 1, name)

    def synchronize(self) -> simpy.Event:
        """aclrtSynchronizeDevice: fires (value: the time) once every task on every stream has finished."""
        env = self.env
        done = env.event()
        waits = [s.synchronize() for s in self.streams if s.pending]
        if not waits:
            done.succeed(env.now)
            return done
        remaining = [len(waits)]

        def _one(_ev: Any) -> None:
            remaining[0] -= 1
            if remaining[0] == 0:
                done.succeed(env.now)

        for w in waits:
            w.callbacks.append(_one)
        return done

    def idle(self) -> bool:
        """True when no stream has unfinished work."""
        return all(s.pending == 0 for s in self.streams)
