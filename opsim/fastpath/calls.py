"""The fast path's one way into an ACLNN call (`run_op`) and its one hook in the reference half.

`replay` is what `run_op` tries first on the fast path: a call that a template of the thread repeats (an
executor-cache hit, `hit_replay`; or a call that runs phase 1 in full, `call_replay`) has its state changes and
records applied, and its host time spent, here. `Capture` is what the reference half tells when a call runs
through the framework: the state before it, the executor phase 1 returned, the clock offsets of its workspace,
and the finished call, from which templates are kept.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from opsim.fastpath import call_replay, hit_replay
from opsim.opdev.thread_local import charged_us

if TYPE_CHECKING:
    from simpy.events import Event

    from opsim.runtime.host_thread import HostThread  # (the layer above: a type-only back-reference)


def replay(thread: HostThread, gws: Callable, run: Callable, args: tuple, stream: Any, api: str | None) -> tuple | None:
    """A template's state changes and records, then the host time (in place when nothing else is due).

    Returns None when no template applies (the framework runs the call); (None, workspace size) when the call
    is finished (the clock moved in place, its records written); else (the event to wait for, what `finish`
    takes once the wait is over)."""
    found = hit_replay.find(thread, gws, run, args, stream, api)
    full = None if found is not None else call_replay.find(thread, gws, run, args, stream, api)
    if found is None and full is None:
        return None
    env = thread.env
    start = env.now
    rec = thread.sim.recorder
    rows = None
    if full is None:
        tpl = found[0]
        if rec.enabled:
            rows = tpl.rows
        starts = hit_replay.replay(thread, tpl, found[1], start, bool(rows))
        t = starts[-1]
    else:
        tpl = full
        t = call_replay.replay(thread, full, start)
    ev: Event | None = env.advance(t - start) if t > start else None
    if rows:  # the hit's records in one call, run_op's span with them when the clock moved in place
        ctx = thread.ctx
        call_end = ev is None and type(start) is float
        rec.hit(rows, start, starts[tpl.hit_at], ctx.current_corr, call_end)
        if call_end:
            ctx.current_corr = -1
            return None, tpl.size
    if ev is None:  # `finish` inline (one call less on the most common path)
        ctx = thread.ctx
        if rec.enabled:
            rec.host_span(thread.name, "op_call", api, start, env.now - start, ctx.current_corr)
            if full is None and tpl.rows is None:
                hit_replay.keep_rows(rec, thread, tpl)
        ctx.current_corr = -1
        return None, tpl.size
    return ev, (start, tpl, full is None)


def finish(thread: HostThread, api: str | None, state: tuple) -> tuple[int, int]:
    """After the host time is spent: run_op's call span (its records written) and the call's result."""
    start, tpl, hit = state
    rec = thread.sim.recorder
    ctx = thread.ctx
    if rec.enabled:
        rec.host_span(thread.name, "op_call", api, start, thread.env.now - start, ctx.current_corr)
        if hit and tpl.rows is None:
            hit_replay.keep_rows(rec, thread, tpl)
    ctx.current_corr = -1
    return 0, tpl.size


class Capture:
    """What the reference half of `run_op` tells the fast path about a call it runs through the framework."""

    __slots__ = ("thread", "gws", "run", "stream", "pre", "clocks")

    def __init__(self, thread: HostThread, gws: Callable, run: Callable, stream: Any) -> None:
        self.thread, self.gws, self.run, self.stream = thread, gws, run, stream
        self.pre = call_replay.before(thread, gws, run, stream)
        self.clocks: tuple[float, float] | None = None

    def phase_1(self, executor: Any) -> None:
        """Phase 1 succeeded with `executor`."""
        if self.pre is not None:
            call_replay.launchers_of(self.pre, executor)

    def workspace(self, actions: list, before_phase_2: int) -> None:
        """The workspace was freed after a successful phase 2: the offsets acl_rt's clock gave its malloc and free
        (before any calibration rescales the spans)."""
        self.clocks = (charged_us(actions[:before_phase_2]), charged_us(actions))

    def done(self, status: int, size: int, executor: Any, args: tuple, api: str | None, actions: list) -> None:
        """The call finished: keep its templates when it can be repeated from one."""
        if status == 0 and (size == 0 or self.clocks is not None):
            thread = self.thread
            hit_replay.capture(thread, self.gws, self.run, args, self.stream, api, executor, actions, size,
                               self.clocks)
            if self.pre is not None:
                call_replay.capture(thread, self.pre, self.gws, self.run, args, self.stream, api, executor, actions,
                                    size, self.clocks)
