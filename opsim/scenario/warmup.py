"""Warm-up outside the profiling window: a thread's `warmup` steps run with the profiler stopped.

torch_npu's profiler collects only while it runs (`prof.start()` .. `prof.stop()`, or the active steps of its
schedule after `wait` and `warmup`), and it is process-wide: a cache-priming pass before it starts leaves no
trace. A scenario says so with a thread's `warmup:` steps. Each thread runs its warm-up, waits for its queued
work and for the device (as `sync_device` does), then waits for every other thread (of every rank of a job)
to finish its own; at that instant the profiler starts (a `profiler_start` instant on each rank's recorder)
and every thread runs its `program`. The profiler outputs (`--profiler-output`, the summary's step breakdown)
keep only what happened from then on (opsim.trace.ascend_build); opsim's own trace.json keeps everything.
"""
from __future__ import annotations

from typing import Any, Generator

from opsim.trace.profiler_window import PROFILER_START, PROFILER_TRACK


class WarmupBarrier:
    """Where every thread of a run (or of every rank of a job) meets after its warm-up."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.waiting = 0
        self.warmed = 0
        self.recorders: list[Any] = []
        self._parked: list[Any] = []

    def join(self, recorder: Any, threads: int) -> None:
        """A run's `threads` will arrive; the profiler start is stamped on its `recorder`."""
        self.recorders.append(recorder)
        self.waiting += threads

    def arrive(self, warmed: bool) -> Generator:
        """One thread done with its warm-up (`warmed`: it had one): wait for the others (use `yield from`).
        Each waiting thread waits on its own event, scheduled on its own when the last one arrives (the fast
        path's in-place advance sees every resume in the event queue, opsim.fastpath.environment)."""
        self.waiting -= 1
        self.warmed += warmed
        if self.waiting:
            ev = self.env.event()
            self._parked.append(ev)
            yield ev
            return
        now = self.env.now
        for rec in self.recorders:
            if rec.enabled:
                rec.instant(now, PROFILER_START, PROFILER_TRACK, {"warmed_threads": self.warmed})
        for ev in self._parked:
            ev.succeed()
        self._parked.clear()


def warmup_barrier(config: Any, env: Any) -> WarmupBarrier | None:
    """A barrier on `env` when a thread of any rank of `config` warms up, else None (the profiler runs
    throughout)."""
    return WarmupBarrier(env) if config.has_warmup() else None


__all__ = ["WarmupBarrier", "warmup_barrier"]
