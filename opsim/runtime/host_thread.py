"""Host threads: SimPy processes that run an application program against the opbase API.

A framework call is synchronous Python; it leaves an action log on the thread's context (host-cost spans,
device submissions, stream synchronisations). `HostThread.call` makes the thread's context current, runs the
call, then replays the log in simulated time: spans are recorded back to back from the thread's clock,
submissions are queued on their stream at the moment they are reached, and a synchronisation blocks the
thread until the stream drains.
"""
from __future__ import annotations

from typing import Any, Callable, Generator

from opsim.fastpath import calls as fast_calls, phase2_replay
from opsim.fastpath.phase2_replay import PHASE_2_ENTRY
from opsim.opdev.thread_local import A_CALL, A_SPAN, A_SUBMIT, A_SYNC, ThreadLocalContext, set_current
from opsim.opdev.executor import destroy_executor
from opsim.runtime import acl_rt
from opsim.runtime.host_calibration import apply_host_calibration


class HostThread:
    """One application thread: its opbase TLS (`ctx`) and its SimPy process."""

    def __init__(self, sim: Any, program: Callable[["HostThread"], Generator], name: str | None = None):
        self.sim = sim
        self.env = sim.env
        self.ctx: ThreadLocalContext = sim.process.new_thread(name)
        self.name = self.ctx.name
        self.program = program
        self.busy_us = 0.0
        self.calls = 0
        self.result: Any = None
        self.error: BaseException | None = None
        self.fast_path: bool = bool(sim.settings.fast_path)
        """Spend host time in place when only the device model could run meanwhile (`FastEnvironment.advance`),
        and replay repeated executor-cache hits, full calls and phase-2 runs of repeatable executors from
        templates (opsim.fastpath.hit_replay, call_replay, phase2_replay)."""
        self.spend: Callable[[float], Any] = self.env.advance if self.fast_path else self.env.timeout
        """Spend host time: the event to wait for, or None when it was spent in place (fast path only)."""
        self.hit_templates: dict = {}
        """Executor-cache hit templates of this thread (opsim.fastpath.hit_replay), by callee, stream and arguments."""
        self.call_templates: dict = {}
        """Templates of calls that run phase 1 in full (opsim.fastpath.call_replay), keyed like `hit_templates`."""
        self.phase2_templates: dict = {}
        """Phase-2 templates of repeatable executors run on this thread (opsim.fastpath.phase2_replay), by
        function and executor; empty on the reference path."""
        self.proc = self.env.process(self._main())

    @property
    def thread_id(self) -> int:
        return self.ctx.thread_id

    def _main(self):
        try:
            self.result = yield from self.program(self)
        except BaseException as exc:  # surfaced by Simulation.run
            self.error = exc
            raise

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        """Run one framework call on this thread, then spend its simulated host time (use `yield from`)."""
        ctx = self.ctx
        fresh = not ctx.actions
        if fresh and self.phase2_templates:  # a repeated phase 2 of a repeatable executor (fast path only)
            tpl = phase2_replay.find(self, fn, args) if not kwargs else None
            if tpl is not None:
                env = self.env
                t = phase2_replay.replay(self, tpl)
                if t > env.now:
                    ev = env.advance(t - env.now)
                    if ev is not None:
                        yield ev
                return tpl.result
        prev = set_current(ctx)
        try:
            result = fn(*args, **kwargs)
        finally:
            set_current(prev)
        self.calls += 1
        acts = ctx.actions
        if acts:
            if fresh and acts[0][1] == PHASE_2_ENTRY and self.fast_path:
                phase2_replay.capture(self, fn, args, kwargs, result)
            yield from self.spend_actions()
        return result

    def spend_actions(self) -> Generator:
        """Replay the context's pending host-action log in simulated time (spans, submissions, syncs, callbacks)
        and spend its host time (use `yield from`)."""
        ctx = self.ctx
        acts = ctx.take_actions()
        env = self.env
        rec = self.sim.recorder
        record = rec.enabled
        host_span = rec.host_span
        name = self.name
        t = env.now
        busy = 0.0
        for a in acts:
            kind = a[0]
            if kind == A_SPAN:
                dur = a[3]
                if record:
                    host_span(name, a[1], a[2], t, dur, a[4])
                t += dur
                busy += dur
            elif kind == A_SUBMIT:
                a[1].submit(a[2], t)
            elif kind == A_SYNC:
                if t > env.now:
                    ev = self.spend(t - env.now)
                    if ev is not None:
                        yield ev
                ev = a[1].synchronize() if a[1] is not None else self.sim.device.synchronize()
                if not ev.processed:
                    yield ev
                t = env.now
            elif kind == A_CALL:
                a[1](t)
        self.busy_us += busy
        if t > env.now:
            ev = self.spend(t - env.now)
            if ev is not None:
                yield ev

    def sleep(self, us: float):
        """Idle host time (not busy)."""
        if us > 0:
            ev = self.spend(us)
            if ev is not None:
                yield ev


_ACL_RT: list = []  # opsim.runtime.acl_rt, imported on the first run_op


def _load_acl_rt() -> Any:
    _ACL_RT.append(acl_rt)
    return acl_rt


_HOST_CAL: list = []  # opsim.runtime.host_calibration.apply_host_calibration, imported on first use


def _load_host_calibration() -> Callable[..., None]:
    _HOST_CAL.append(apply_host_calibration)
    return apply_host_calibration


def run_op(thread: HostThread, get_workspace_size: Callable[..., Any], run: Callable[..., Any], args: tuple,
           stream: Any, api: str | None = None) -> Generator[Any, Any, tuple[int, int]]:
    """The application side of one ACLNN call: phase 1, workspace malloc, phase 2, stream-ordered free.

    The four calls run back to back as one synchronous host step and their host-action log is replayed once
    (one SimPy timeout per ACLNN call; a stream synchronisation inside still blocks at its point). The whole
    call is recorded as one host span of phase "op_call" named `api`, and every host span and device task
    it causes carries the same correlation id. Returns (status, workspace size). A workspace allocation
    failure destroys the executor (nothing leaks)."""
    if thread.fast_path:
        replayed = fast_calls.replay(thread, get_workspace_size, run, args, stream, api)
        if replayed is not None:
            ev, rest = replayed
            if ev is None:  # finished in place: `rest` is its workspace size
                return 0, rest
            yield ev
            return fast_calls.finish(thread, api, rest)
    acl_rt = _ACL_RT[0] if _ACL_RT else _load_acl_rt()
    ctx = thread.ctx
    rec = thread.sim.recorder
    ctx.current_corr = rec.next_corr()
    start = thread.env.now
    size = 0
    prev = set_current(ctx)
    host = ctx.process.cost.host_api(api) if api is not None else None  # a calibration's measured timing
    n0 = len(ctx.actions)
    phase2 = None
    capture = fast_calls.Capture(thread, get_workspace_size, run, stream) if thread.fast_path and n0 == 0 else None
    try:
        status, size, executor = get_workspace_size(*args)
        n1 = len(ctx.actions)
        if status == 0:
            if capture is not None:
                capture.phase_1(executor)
            workspace = 0
            if size:
                status, workspace = acl_rt.malloc(size)
                if status != 0:
                    destroy_executor(executor)
            if status == 0:
                n2 = len(ctx.actions)
                status = run(workspace, size, executor, stream)
                phase2 = (n2, len(ctx.actions))
                if workspace:
                    acl_rt.free_async(workspace, stream)
                    if capture is not None and status == 0:
                        capture.workspace(ctx.actions, n2)
        if host is not None:
            apply = _HOST_CAL[0] if _HOST_CAL else _load_host_calibration()
            apply(ctx.actions, (n0, n1), phase2, host, getattr(executor, "kind", None) == "wrap")
    finally:
        set_current(prev)
    thread.calls += 1
    if capture is not None:
        capture.done(status, size, executor, args, api, ctx.actions)
    if ctx.actions:
        yield from thread.spend_actions()
    if rec.enabled:
        rec.host_span(thread.name, "op_call", api or getattr(get_workspace_size, "__name__", "op"), start,
                      thread.env.now - start, ctx.current_corr)
    ctx.current_corr = -1
    return int(status), size
