"""Batched steady state: the top loops of a scenario's threads that run in batches (`opsim.fastpath.batch`) while
every call they make is an executor-cache hit replayed from a template.

A top loop whose body is plain op calls (no `choose`, syncs, events, sleeps, PTA mode, repeats or
device-computed output shapes) in a run of at least `MIN_CALLS` planned calls (numerics off, fast path on) is
run by `batched_loop`. Its thread yields only between two calls (the loop's position and the call it waits
for kept in `LoopState`, nothing of the call left on its stack), so it can be *parked* there. At such a point
`run_batch` takes over every parked thread and runs them in the compiled loop as far as it can go.
"""
from __future__ import annotations

from typing import Any, Generator

from opsim.fastpath import hit_replay
from opsim.scenario.config import OpStep

MIN_CALLS = 100_000
"""A run plans at least this many calls before its loops run in batches: the compiled loop is compiled once per
machine (about 25 s, then kept in Numba's cache) and loaded once per process (about half a second), which a
short run would not win back."""
QUEUE_SLOTS = 4096
"""Tasks a stream may hold queued in a batch (beyond it the batch stops and SimPy carries on)."""
TASK_SLOTS = 16384
"""Tasks on all of a batch's streams at once (beyond it the batch stops)."""
ALLOC_SLOTS = 4096
"""Stream-ordered workspace frees pending at once in a batch."""
CALLS_PER_ENTRY = 65536
"""Calls per entry into the compiled loop (the progress bar moves between entries)."""
ROWS = 16384
"""Rows of each record kind the compiled loop fills before they are handed to the recorder (full trace)."""
MIN_BATCH = 32
"""A batch shorter than this makes its thread try again only after `BACKOFF` calls."""
BACKOFF = 256


class LoopState:
    """Where a batched top loop is: iteration `i`, body index `j`; `pending` is the call the thread is waiting
    for (API, start, correlation id: what is left to record when the wait ends); `parked` is the event it waits
    on between two calls (None while it runs), which a batch started by another thread may take over."""

    __slots__ = ("i", "j", "count", "plans", "pending", "parked", "wait")

    def __init__(self, count: int, plans: list) -> None:
        self.i = 0
        self.j = 0
        self.count = count
        self.plans = plans
        self.pending: tuple | None = None
        self.parked: Any = None
        self.wait = 0


def run_batch(wl: Any) -> tuple[int, Any]:
    """A batch of every parked batched loop and `wl`'s (opsim.fastpath.batch.run_batch) with this module's
    array sizes; returns (calls made, the event `wl`'s thread waits on next or None to carry on at once)."""
    from opsim.fastpath import batch as fast_batch  # lazy: runs that batch nothing never load Numba
    return fast_batch.run_batch(wl, fast_batch.BatchLimits(QUEUE_SLOTS, TASK_SLOTS, ALLOC_SLOTS, CALLS_PER_ENTRY,
                                                           ROWS))


def loop_batchable(wl: Any, step: Any) -> bool:
    """Whether a top loop of `wl` can run in batches (decided once, when the program is compiled)."""
    run = wl.run
    sim = wl.sim
    if not sim.fast_path or sim.process.numerics or not step.body:
        return False
    for s in step.body:
        if not isinstance(s, OpStep) or s.repeat != 1 or (s.cache_mode or wl.cfg.cache_mode) == "pta":
            return False
        if s.spec.output_shape_from_device:
            return False
    # last: it walks the whole scenario (an imported one has a top loop per profiled step)
    return run.config.planned_calls() >= MIN_CALLS


def batched_loop(wl: Any, th: Any, plans: list, count: int) -> Generator:
    """The thread's top loop: calls replayed from templates by the thread itself or by a batch, any other
    call through the runner as `ThreadWorkload._top_loop` makes it."""
    state = wl.loop = LoopState(count, plans)
    run = wl.run
    env = wl.sim.env
    rec = wl.sim.recorder
    name = th.name
    ctx = th.ctx
    nb = len(plans)
    pick = wl.chooser.pick
    find = hit_replay.find
    replay = hit_replay.replay
    try:
        while True:
            if state.pending is not None:  # the call made before the wait ends: run_op's span, the loop's count
                api, start, corr = state.pending
                state.pending = None
                rec.host_span(name, "op_call", api, start, env.now - start, corr)
                ctx.current_corr = -1
                _next(state, nb, wl, rec, env, name)
            if state.j == 0 and state.i >= count:
                break
            if state.wait:
                state.wait -= 1
            else:
                made, ev = run_batch(wl)
                if made < MIN_BATCH:
                    state.wait = BACKOFF
                if made:
                    if ev is not None:
                        state.parked = ev
                        yield ev
                        state.parked = None
                    continue
            if state.j == 0:
                wl.step_no += 1
                rec.instant(env.now, "step", name, {"step": wl.step_no, "phase": "begin"})
            plan = plans[state.j]
            variant = pick(plan.variants)
            args = plan.cache.get(variant)
            found = None if args is None else find(th, plan.gws, plan.run_fn, args, plan.stream, plan.api)
            if found is None:
                yield from plan.call(th, variant)
                _next(state, nb, wl, rec, env, name)
                continue
            # run_op's template path, with the thread's wait at this loop's level (the rest of the call is
            # `state.pending`, so that a batch can take the thread over while it waits)
            run.current_variant = (plan.config, variant)
            start = env.now
            t = replay(th, found[0], found[1], start)[-1]
            run.count_call(th, found[0].size)
            state.pending = (plan.api, start, ctx.current_corr)
            if t > env.now:
                ev = env.advance(t - env.now)
                if ev is not None:
                    state.parked = ev
                    yield ev
                    state.parked = None
    finally:
        wl.loop = None


def _next(state: Any, nb: int, wl: Any, rec: Any, env: Any, name: str) -> None:
    state.j += 1
    if state.j == nb:
        rec.instant(env.now, "step", name, {"step": wl.step_no, "phase": "end"})
        state.j = 0
        state.i += 1


__all__ = ["BACKOFF", "LoopState", "MIN_BATCH", "MIN_CALLS", "batched_loop", "loop_batchable", "run_batch"]
