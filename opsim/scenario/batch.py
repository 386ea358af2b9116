"""Batched steady state: the top loops of a scenario's threads run by the compiled event loop of
`opsim.runtime.batch_kernel` while every call they make is an executor-cache hit replayed from a template.

A top loop whose body is plain op calls (no `choose`, syncs, events, sleeps, PTA mode, repeats or
device-computed output shapes) in a run of at least `MIN_CALLS` planned calls (numerics off, fast path on) is
run by `batched_loop`. Its thread yields only between two calls (the loop's position and the call it waits
for kept in `ThreadWorkload.loop`, nothing of the call left on its stack), so it can be *parked* there. At
such a point `run_batch` takes over every parked thread: it reads the opbase, device and SimPy state into
arrays, runs the kernel until it has to stop (another thread's or the task queue's event is due, a call has no
template, a workspace does not fit, a loop ends), and writes everything back: stream queues and running
tasks, unit pools, the allocator and its live workspaces, the event queue with every event id, the
correlation and sequence counters, each thread's TLS state and LRU order, the summary's totals (trace off) or
the recorder's rows (full trace), the loops' positions and the choosers. The outputs are those of the SimPy
path byte for byte (`tests/scenario/test_batch.py` runs scenarios three ways).
"""
from __future__ import annotations

from collections import deque
from heapq import heapify
from itertools import count as counter
from typing import Any, Generator

import numpy as np
from simpy.events import NORMAL

from opsim.device.device import StreamTick
from opsim.device.memory import Allocation, StreamFree, free_task
from opsim.device.task import DeviceTask, TaskKind
from opsim.runtime import hit_replay
from opsim.runtime.fast_clock import _Resume, skip_to


class _LazyKernel:
    """Stands for opsim.runtime.batch_kernel until a loop is first run in batches: the first attribute read
    imports it (and Numba) and puts the module itself in `K`, so runs that batch nothing never load Numba."""

    def __getattr__(self, name: str) -> Any:
        global K
        from opsim.runtime import batch_kernel
        K = batch_kernel
        return getattr(batch_kernel, name)


K: Any = _LazyKernel()

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
MIN_CALLS = 100_000
"""A run plans at least this many calls before its loops run in batches: the compiled loop is compiled once per
machine (about 25 s, then kept in Numba's cache) and loaded once per process (about half a second), which a
short run would not win back."""
MIN_BATCH = 32
"""A batch shorter than this makes its thread try again only after `BACKOFF` calls."""
BACKOFF = 256


def loop_batchable(wl: Any, step: Any) -> bool:
    """Whether a top loop of `wl` can run in batches (decided once, when the program is compiled)."""
    run = wl.run
    sim = wl.sim
    if not sim.fast_path or sim.process.numerics or not step.body:
        return False
    if run.config.planned_calls() < MIN_CALLS:
        return False
    from opsim.scenario.config import OpStep
    for s in step.body:
        if not isinstance(s, OpStep) or s.repeat != 1 or (s.cache_mode or wl.cfg.cache_mode) == "pta":
            return False
        if s.spec.output_shape_from_device:
            return False
    return True


def batched_loop(wl: Any, th: Any, plans: list, count: int) -> Generator:
    """The thread's top loop: calls replayed from templates by the thread itself or by a batch, any other
    call through the runner as `ThreadWorkload._top_loop` makes it."""
    from opsim.scenario.workload import LoopState
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
                rec.host_span(name, "op_call", api, start, env._now - start, corr)
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
            start = env._now
            t = replay(th, *found)[-1]
            run._count(th, found[0].size)
            state.pending = (plan.api, start, ctx.current_corr)
            if t > env._now:
                ev = skip_to(env, t - env._now)
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


class _Tables:
    """Codes of the op names and task types of a batch's tasks (the compiled loop holds codes, not strings)."""

    def __init__(self) -> None:
        self.values: list = []
        self.codes: dict = {}

    def code(self, value: Any) -> int:
        c = self.codes.get(value)
        if c is None:
            c = self.codes[value] = len(self.values)
            self.values.append(value)
        return c


def _plain_kernel(task: DeviceTask) -> bool:
    return (task.callback is None and task.on_done is None and task.event is None and not task.nbytes
            and type(task.corr_id) is int and task.kind < TaskKind.EVENT_RECORD)


def run_batch(wl: Any) -> tuple[int, Any]:
    """Run every parked batched loop, and `wl`'s (whose thread is running now), in the compiled loop as far as
    it can go. Returns (calls made, the event `wl`'s thread waits on next or None to carry on at once)."""
    b = _Batch.build(wl)
    if b is None:
        return 0, None
    return b.execute()


class _Batch:
    @classmethod
    def build(cls, wl: Any) -> "_Batch | None":
        run = wl.run
        sim = wl.sim
        env = sim.env
        p = sim.process
        rec = sim.recorder
        stats = run.stats
        owner = getattr(rec.device_task, "__self__", None)
        if p.numerics or not rec.enabled or (owner is not stats and owner is not rec):
            return None
        full = owner is rec  # the full trace: every record as a row (else only the summary's totals)
        self = cls()
        self.full = full
        self.run, self.env, self.p, self.rec, self.stats = run, env, p, rec, stats
        self.shown = run.calls
        device = sim.device
        self.memory = memory = device.memory
        # the threads: `wl` (running now) and every parked batched loop
        wls = [wl] + [w for w in run.workloads if w is not wl and w.loop is not None and w.loop.parked is not None]
        self.wls = wls
        names = _Tables()
        types = _Tables()
        self.names, self.types = names, types
        missing = []

        def rec_code(value: Any) -> int:
            """The recorder's code of a name (with the full trace; 0 otherwise)."""
            if not full:
                return 0
            c = rec._code(value)
            if c is None:
                missing.append(value)
                return 0
            return c

        streams: list = []
        stream_ix: dict = {}
        pools: list = []
        pool_ix: dict = {}
        for pool in device._pools:
            if pool is not None and id(pool) not in pool_ix:
                pool_ix[id(pool)] = len(pools)
                pools.append(pool)
        kind_pool = [pool_ix[id(pool)] if pool is not None else -1 for pool in device._pools]
        # templates of every (step, variant) of every thread's loop body
        tpls: list = []
        slots: list = []
        tpl_ix: dict = {}
        step_nvar, step_var0, var_tpl, body0, nbody = [], [], [], [], []
        self.steps = steps = []
        for w in wls:
            th = w.thread
            body0.append(len(step_nvar))
            plans = w.loop.plans
            nbody.append(len(plans))
            for plan in plans:
                steps.append(plan.config)
                step_nvar.append(plan.variants)
                step_var0.append(len(var_tpl))
                for variant in range(plan.variants):
                    args = plan.cache.get(variant)
                    found = None if args is None else hit_replay.find(th, plan.gws, plan.run_fn, args, plan.stream,
                                                                      plan.api, fit=False)
                    code = -1
                    if found is not None and _eligible(found[0], kind_pool, rec if full else None, run):
                        tpl = found[0]
                        code = tpl_ix.get(id(tpl))
                        if code is None:
                            code = tpl_ix[id(tpl)] = len(tpls)
                            tpls.append((tpl, th))
                            slots.append(found[1])
                            if id(tpl.stream) not in stream_ix:
                                stream_ix[id(tpl.stream)] = len(streams)
                                streams.append(tpl.stream)
                    var_tpl.append(code)
        if not tpls:
            return None
        self.tpls, self.slots, self.streams, self.pools = tpls, slots, streams, pools
        # the streams' state
        S = len(streams)
        st = np.zeros((K.S_SIZE, S), np.int64)
        stf = np.zeros((2, S), np.float64)
        sq = np.empty((S, QUEUE_SLOTS), np.int64)  # (every array the loop writes before it reads: not cleared)
        ext = sum(len(stream._queue) + (stream._current is not None) for stream in streams)
        N = min(S * QUEUE_SLOTS, TASK_SLOTS) + ext + 64
        tk = np.empty((K.K_SIZE, N), np.int64)
        tkf = np.empty((K.KF_SIZE, N), np.float64)
        ext_tasks: list = []
        ext_allocs: list = []
        A = ALLOC_SLOTS + len(memory._live)
        al = np.empty((K.A_ROWS, A), np.int64)
        alf = np.empty((1, A), np.float64)
        alloc_ix: dict = {}
        used = 0

        def task_in(task: DeviceTask, state: int) -> int | None:
            nonlocal used
            a = -1
            cb = task.callback
            if type(cb) is StreamFree and cb.memory is memory and task.on_done is None and task.event is None:
                alloc = cb.alloc
                if id(alloc) in alloc_ix or alloc.address not in memory._live:
                    return None
                a = alloc_ix[id(alloc)] = len(ext_allocs)
                ext_allocs.append(alloc)
                al[K.A_ADDR, a], al[K.A_SIZE, a], al[K.A_REQ, a] = alloc.address, alloc.size, alloc.requested
                al[K.A_EXT, a], al[K.A_STATE, a] = a, K.A_LIVE
                alf[K.AF_TIME, a] = alloc.time
            elif not _plain_kernel(task):
                return None
            i = used
            used += 1
            tk[K.K_KIND, i], tk[K.K_BLOCK, i], tk[K.K_OP, i] = int(task.kind), task.block_dim, names.code(task.op_name)
            tk[K.K_TYPE, i], tk[K.K_CORR, i], tk[K.K_POOL, i] = types.code(task.task_type), task.corr_id, \
                kind_pool[task.kind]
            tk[K.K_ALLOC, i], tk[K.K_EXT, i], tk[K.K_STATE, i] = a, len(ext_tasks), state
            tk[K.K_UNITS, i], tk[K.K_TID, i] = task.units, task.task_id
            tkf[K.KF_DUR, i], tkf[K.KF_QUEUED, i], tkf[K.KF_START, i] = task.duration, task.queued, task.start
            ext_tasks.append(task)
            return i

        waiting: dict = {}
        pl = np.zeros((K.L_SIZE, len(pools)), np.int64)
        plf = np.zeros((1, len(pools)), np.float64)
        WC = 2 * S + 8
        pw = np.zeros((len(pools), WC), np.int64)
        pn = np.zeros((len(pools), WC), np.int64)
        for j, pool in enumerate(pools):
            pl[K.L_CAP, j], pl[K.L_FREE, j], pl[K.L_WN, j] = pool.capacity, pool.free, len(pool._waiters)
            if len(pool._waiters) > WC:
                return None
            for w, (n, stream) in enumerate(pool._waiters):
                s = stream_ix.get(id(stream))
                if s is None:
                    return None  # a stream outside the batch waits for units it would be granted
                pw[j, w], pn[j, w] = s, n
                waiting[id(stream)] = True
            pl[K.L_TASKS, j] = stats.pool_tasks.get(pool.name, 0)
            plf[K.LF_US, j] = stats.pool_unit_us.get(pool.name, 0.0)
        for s, stream in enumerate(streams):
            if stream._sync_waits or stream._space_waiters or len(stream._queue) > QUEUE_SLOTS - 8:
                return None
            cur = stream._current
            if cur is None:
                st[K.S_CUR, s] = -1
                if id(stream) in waiting:
                    return None
            else:
                i = task_in(cur, K.K_WAITING if id(stream) in waiting else K.K_RUNNING)
                if i is None:  # (an event wait, or any task carrying more than a kernel or a free)
                    return None
                st[K.S_CUR, s] = i
            st[K.S_POOL, s] = pool_ix[id(stream._pool)] if stream._pool is not None else -1
            st[K.S_PENDING, s], st[K.S_NEXT, s] = stream.pending, stream._next_task_id
            for q, task in enumerate(stream._queue):
                i = task_in(task, K.K_QUEUED)
                if i is None:
                    return None
                sq[s, q] = i
            st[K.S_QN, s] = len(stream._queue)
            st[K.S_TASKS, s] = stats.stream_tasks.get(stream.stream_id, 0)
            st[K.S_SID, s] = stream.stream_id
            stf[K.SF_WAKE, s] = stream._wake_at
            stf[K.SF_BUSY, s] = stats.stream_busy.get(stream.stream_id, 0.0)
        tfree = np.arange(N - 1, used - 1, -1, dtype=np.int64)
        # the event queue: the participating streams' ticks and parked threads' resumes are the batch's; the
        # earliest of everything else is the barrier it stops before
        ticks: dict = {}
        for s, stream in enumerate(streams):
            ticks[id(stream._on_wake_cb)] = (K.EV_WAKE, s)
            ticks[id(stream._on_end_cb)] = (K.EV_END, s)
        parked = {id(w.loop.parked): t for t, w in enumerate(wls) if t}
        H = 2 * N + len(wls) + 64
        ht = np.empty(H, np.float64)
        hi = np.empty((4, H), np.int64)
        g = np.zeros(K.G_SIZE, np.int64)
        gf = np.zeros(K.GF_SIZE, np.float64)
        rest = []
        barrier = None
        found_parked = 0
        ends = [0] * S
        for item in env._queue:
            ev = item[3]
            kind = None
            if type(ev) is StreamTick and ev.callbacks:
                kind = ticks.get(id(ev.callbacks[0]))
            elif id(ev) in parked and type(ev) is _Resume and item[1] == NORMAL:
                kind = (K.EV_RESUME, parked[id(ev)])
                found_parked += 1
            if kind is None:
                rest.append(item)
                if barrier is None or item[:3] < barrier:
                    barrier = item[:3]
            else:
                if kind[0] == K.EV_END:
                    ends[kind[1]] += 1
                K.push(g, ht, hi, float(item[0]), item[1], item[2], kind[0], kind[1])
        if found_parked != len(wls) - 1:
            return None
        for s in range(S):  # a running task has exactly one end tick pending
            running = st[K.S_CUR, s] >= 0 and tk[K.K_STATE, st[K.S_CUR, s]] == K.K_RUNNING
            if ends[s] != (1 if running else 0):
                return None
        K.push(g, ht, hi, float(env._now), NORMAL, -1, K.EV_RESUME, 0)  # `wl`'s thread, running now
        self.rest = rest
        if barrier is not None:
            gf[K.BAR_T], g[K.BAR_P], g[K.BAR_E], g[K.HAS_BAR] = barrier[0], barrier[1], barrier[2], 1
        gf[K.NOW] = env._now
        gf[K.DEV_END] = stats.device_end
        g[K.EID] = eid0 = next(env._eid)
        env._eid = counter(eid0)  # looked at, not taken
        g[K.CORR], g[K.SEQ], g[K.CALLS], g[K.PEAK_WS] = rec._corr, p.l2_sequence_counter, run.calls, run.peak_workspace
        g[K.IN_USE], g[K.PEAK], g[K.BEST_FIT] = memory.in_use, memory.peak, int(memory._best_fit)
        # the allocator: its free list, room for one more block per allocation that may be released
        nf = len(memory._free_addr)
        fa = np.empty(nf + len(memory._live) + ALLOC_SLOTS + 2, np.int64)
        fs = np.empty_like(fa)
        fa[:nf] = memory._free_addr
        fs[:nf] = memory._free_size
        g[K.FN] = nf
        free_slots = np.arange(A - 1, len(ext_allocs) - 1, -1, dtype=np.int64)
        al[K.A_FREE_ROW, :len(free_slots)] = free_slots
        g[K.AFREE] = len(free_slots)
        g[K.TFREE] = len(tfree)
        tfree_full = np.empty(N, np.int64)
        tfree_full[:len(tfree)] = tfree
        # the threads
        T = len(wls)
        th = np.zeros((K.T_SIZE, T), np.int64)
        thf = np.zeros((2, T), np.float64)
        draws = np.zeros((T, K.NDRAW), np.float64)
        for t, w in enumerate(wls):
            th[K.T_I, t], th[K.T_J, t], th[K.T_COUNT, t] = w.loop.i, w.loop.j, w.loop.count
            th[K.T_NB, t], th[K.T_BODY0, t], th[K.T_STEPNO, t] = nbody[t], body0[t], w.step_no
            th[K.T_CHI, t] = w.chooser._i
            thf[K.TF_BUSY, t] = w.thread.busy_us
            draws[t, :len(w.chooser._buf)] = w.chooser._buf
            if w.loop.pending is not None:
                api, start, corr = w.loop.pending
                if type(corr) is not int or type(start) is not float:
                    return None
                th[K.T_PENDING, t], th[K.T_P_API, t], th[K.T_P_CORR, t] = 1, rec_code(api), corr
                thf[K.TF_P_START, t] = start
            th[K.T_NAME, t] = rec_code(w.thread.name)
        # the templates
        P = len(tpls)
        tp = np.zeros((K.P_ROWS, P), np.int64)
        tpf = np.zeros((3, P), np.float64)
        durs: list = []
        subs: list = []
        infos: list = []
        self.infos = []
        for i, (tpl, _th) in enumerate(tpls):
            tp[K.P_API, i], tp[K.P_API1, i], tp[K.P_HITAT, i] = rec_code(tpl.api), rec_code(tpl.api_1), tpl.hit_at
            tp[K.P_TAG, i] = tpl.pre_call is not None
            if full:
                group = _span_group(rec, tpl)
                tp[K.P_MARKER, i], tp[K.P_EXTRA, i] = group[3], group[4]
            tp[K.P_I0, i], tp[K.P_IN, i] = len(infos), len(tpl.infos)
            for op, info in tpl.infos:
                infos.append(rec_code(op))
                self.infos.append(info)
            tp[K.P_STREAM, i], tp[K.P_SIZE, i] = stream_ix[id(tpl.stream)], tpl.size
            tp[K.P_D0, i], tp[K.P_DN, i] = len(durs), len(tpl.durs)
            tp[K.P_S0, i], tp[K.P_SN, i], tp[K.P_LAST, i] = len(subs), len(tpl.submits), -1
            if tpl.size:
                tpf[K.PF_C0, i], tpf[K.PF_C1, i] = tpl.clocks
            tpf[K.PF_BUSY, i] = tpl.busy
            durs.extend(tpl.durs)
            for span, (kind, dur, block_dim, op, task_type) in tpl.submits:
                subs.append((span, int(kind), block_dim, names.code(op), types.code(task_type), kind_pool[kind], dur))
        sb = np.array([x[:6] for x in subs], np.int64).T.copy() if subs else np.zeros((K.B_SIZE, 0), np.int64)
        sbf = np.array([[x[6] for x in subs]], np.float64)
        free_type, free_op = types.code("HOST_FUNC"), names.code("free_async")
        for j in set(tk[K.K_POOL, :used].tolist()) | {x[5] for x in subs}:  # the pools of the batch's tasks
            if j >= 0:
                pl[K.L_CODE, j] = rec_code(pools[j].name)
        cc = np.zeros(K.C_SIZE + len(names.values) + len(types.values), np.int64)
        for slot, value in ((K.C_NONE, "none"), (K.C_OP_CALL, "op_call"), (K.C_STEP, "step"), (K.C_EXEC, "exec"),
                            (K.C_HIT, "hit"), (K.C_EMPTY, ""), (K.C_ALLOC, "alloc"), (K.C_FREE, "free")):
            cc[slot] = rec_code(value)
        cc[K.C_DEVICE] = memory.device_id
        cc[K.C_NAMES_AT], cc[K.C_TYPES_AT] = K.C_SIZE, K.C_SIZE + len(names.values)
        cc[K.C_SIZE:K.C_SIZE + len(names.values)] = [rec_code(v) for v in names.values]
        cc[K.C_SIZE + len(names.values):] = [rec_code(v) for v in types.values]
        if missing:  # a name the recorder has not coded yet: its first record is the reference path's to make
            return None
        rows = ROWS if full else 1
        self.cc = cc
        self.ri = np.empty((K.RK_KINDS, K.RI_FIELDS, rows), np.int64)
        self.rf = np.empty((K.RK_KINDS, K.RF_FIELDS, rows), np.float64)
        g[K.REC] = int(full)
        self.arrays = (g, gf, ht, hi, st, stf, sq, pl, plf, pw, pn, tk, tkf, tfree_full, al, alf, fa, fs)
        self.th, self.thf, self.draws = th, thf, draws
        self.kernel_rest = (np.array(step_nvar, np.int64), np.array(step_var0, np.int64), np.array(var_tpl, np.int64),
                            tp, tpf, np.array(durs, np.float64), sb, sbf,
                            np.array([infos], np.int64).reshape(1, len(infos)), free_type, free_op)
        self.ext_tasks, self.ext_allocs = ext_tasks, ext_allocs
        return self

    def execute(self) -> tuple[int, Any]:
        g = self.arrays[0]
        th = self.th
        types = self.types
        made = 0
        while True:
            type_count = np.zeros(len(types.values) + 1, np.int64)
            g[K.NCALLS] = 0
            K.run(*self.arrays, type_count, self.ri, self.rf, self.cc, th, self.thf, self.draws, *self.kernel_rest,
                  CALLS_PER_ENTRY)
            made += int(g[K.NCALLS])
            self._fold_counts(type_count)
            reason = int(g[K.REASON])
            if self.full:
                self._flush()
            if reason == K.R_FOLD:  # Recorder.next_corr's fold, before the call that takes the next id
                self.rec._fold()
                g[K.FOLD_OK] = 1
                continue
            if reason == K.R_FLUSH:
                continue
            if reason == K.R_DRAWS:  # the chooser's next batch of draws, as Chooser.pick draws it
                t = int(g[K.RTH])
                ch = self.wls[t].chooser
                ch._buf = ch.rng.random(len(ch._buf)).tolist()
                ch._i = 0
                th[K.T_CHI, t] = 0
                self.draws[t, :] = ch._buf
                continue
            if reason == K.R_LIMIT:
                self._progress()
                continue
            break
        if not made:  # nothing changed (a chooser refill is the one its next pick would make)
            return 0, None
        return made, self._write_back()

    def _flush(self) -> None:
        """Hand the rows the compiled loop filled to the recorder, as its record methods append them."""
        g, ri, rf, rec, cc = self.arrays[0], self.ri, self.rf, self.rec, self.cc
        rec._settle()  # device rows the Python path took before the batch's
        cols = rec._cols
        counts = [int(g[K.NROWS + kind]) for kind in range(K.RK_KINDS)]
        g[K.NROWS:K.NROWS + K.RK_KINDS] = 0
        n = counts[K.RK_HOST]
        if n:
            c = cols["host"]
            i, f = ri[K.RK_HOST, :, :n], rf[K.RK_HOST, :, :n]
            for name, values in (("thread", i[0]), ("phase", i[1]), ("op", i[2]), ("start", f[0]), ("dur", f[1]),
                                 ("corr", i[3])):
                c[name].extend(values.tolist())
            rec._host_grouped += int(g[K.HGROUPED])
            rec._host_extra += int(g[K.HEXTRA])
            g[K.HGROUPED] = g[K.HEXTRA] = 0
        n = counts[K.RK_DEVICE]
        if n:
            c = cols["device"]
            i, f = ri[K.RK_DEVICE, :, :n], rf[K.RK_DEVICE, :, :n]
            for name, values in (("device", i[0]), ("stream", i[1]), ("unit_kind", i[2]), ("units", i[3]),
                                 ("task_id", i[4]), ("op", i[5]), ("task_type", i[6]), ("block_dim", i[7]),
                                 ("queued", f[0]), ("start", f[1]), ("end", f[2]), ("corr", i[8])):
                c[name].extend(values.tolist())
        n = counts[K.RK_MEMORY]
        if n:
            c = cols["memory"]
            i, f = ri[K.RK_MEMORY, :, :n], rf[K.RK_MEMORY, :, :n]
            for name, values in (("time", f[0]), ("device", i[0]), ("kind", i[1]), ("address", i[2]), ("size", i[3]),
                                 ("in_use", i[4])):
                c[name].extend(values.tolist())
        n = counts[K.RK_CACHE]
        if n:
            c = cols["cache"]
            c["time"].extend(rf[K.RK_CACHE, 0, :n].tolist())
            c["thread"].extend(ri[K.RK_CACHE, 0, :n].tolist())
            c["cache"].extend([int(cc[K.C_EXEC])] * n)
            c["kind"].extend([int(cc[K.C_HIT])] * n)
            c["op"].extend(ri[K.RK_CACHE, 1, :n].tolist())
            c["key_hash"].extend([0] * n)
            c["detail"].extend([int(cc[K.C_EMPTY])] * n)
        n = counts[K.RK_INSTANT]
        if n:
            c = cols["instant"]
            c["time"].extend(rf[K.RK_INSTANT, 0, :n].tolist())
            c["name"].extend([int(cc[K.C_STEP])] * n)
            c["track"].extend(ri[K.RK_INSTANT, 0, :n].tolist())
            c["args"].extend({"step": step, "phase": "end" if phase else "begin"}
                             for step, phase in zip(ri[K.RK_INSTANT, 1, :n].tolist(), ri[K.RK_INSTANT, 2, :n].tolist()))
        n = counts[K.RK_INFO]
        if n:
            ti = rec.tensor_infos
            ti.corr.extend(ri[K.RK_INFO, 0, :n].tolist())
            ti.op.extend(ri[K.RK_INFO, 1, :n].tolist())
            infos = self.infos
            ti.info.extend(infos[k] for k in ri[K.RK_INFO, 2, :n].tolist())
        n = counts[K.RK_TAG]
        if n:  # what the runner's call tagging records: the call's (op step, variant)
            steps, corr_variant = self.steps, self.run.corr_variant
            for corr, k, v in zip(*ri[K.RK_TAG, :3, :n].tolist()):
                corr_variant[corr] = (steps[k], v)

    def _fold_totals(self) -> None:
        """SummaryStats' totals as its record methods would have left them."""
        g, gf, st, stf, pl, plf = (self.arrays[i] for i in (0, 1, 4, 5, 7, 8))
        stats = self.stats
        if g[K.HITS]:
            stats.cache[("exec", "hit")] += int(g[K.HITS])
        if g[K.INSTANTS]:
            stats.instants["step"] += int(g[K.INSTANTS])
        if g[K.NALLOC]:
            stats.memory_kinds["alloc"] += int(g[K.NALLOC])
        if g[K.NFREE]:
            stats.memory_kinds["free"] += int(g[K.NFREE])
        if gf[K.DEV_END] > stats.device_end:
            stats.device_end = float(gf[K.DEV_END])
        for s, stream in enumerate(self.streams):
            if st[K.S_REC, s]:
                stats.stream_tasks[stream.stream_id] = int(st[K.S_TASKS, s])
                stats.stream_busy[stream.stream_id] = float(stf[K.SF_BUSY, s])
        for j, pool in enumerate(self.pools):
            if pl[K.L_TASKS, j] != stats.pool_tasks.get(pool.name, 0):
                stats.pool_tasks[pool.name] = int(pl[K.L_TASKS, j])
                stats.pool_unit_us[pool.name] = float(plf[K.LF_US, j])

    def _fold_counts(self, type_count: np.ndarray) -> None:
        task_types = self.stats.task_types
        for code in np.flatnonzero(type_count):
            task_types[self.types.values[code]] += int(type_count[code])

    def _progress(self) -> None:
        """The progress callback, called as `_Run._count` calls it: with every multiple of 1024 calls reached."""
        run = self.run
        calls = int(self.arrays[0][K.CALLS])
        if run.progress is not None:
            for n in range((self.shown >> 10) + 1, (calls >> 10) + 1):
                run.progress(n << 10)
        self.shown = calls

    def _write_back(self) -> Any:
        (g, gf, ht, hi, st, stf, sq, pl, plf, pw, pn, tk, tkf, tfree, al, alf, fa, fs) = self.arrays
        env, run, memory, rec, p = self.env, self.run, self.memory, self.rec, self.p
        th, thf = self.th, self.thf
        # counters and totals
        run.calls = int(g[K.CALLS])
        run.peak_workspace = int(g[K.PEAK_WS])
        rec._corr = int(g[K.CORR])  # its folds were made at their points (R_FOLD)
        p.l2_sequence_counter = int(g[K.SEQ])
        if not self.full:  # the summary's totals (with the full trace, the rows were handed to the recorder)
            self._fold_totals()
        # the allocator and its allocations
        memory.in_use, memory.peak = int(g[K.IN_USE]), int(g[K.PEAK])
        n = int(g[K.FN])
        memory._free_addr = fa[:n].tolist()
        memory._free_size = fs[:n].tolist()
        live = memory._live
        allocs: dict[int, Allocation] = {}
        for a, alloc in enumerate(self.ext_allocs):
            if al[K.A_STATE, a] == K.A_RELEASED:
                del live[alloc.address]
            allocs[a] = alloc

        def alloc_of(a: int) -> Allocation:
            alloc = allocs.get(a)
            if alloc is None:
                addr = int(al[K.A_ADDR, a])
                alloc = allocs[a] = live[addr] = Allocation(addr, int(al[K.A_SIZE, a]), int(al[K.A_REQ, a]),
                                                            float(alf[K.AF_TIME, a]), None)
                alloc.free_pending = True
            return alloc

        # the tasks still on the streams
        kinds = list(TaskKind)

        def task_out(i: int, stream: Any) -> DeviceTask:
            e = tk[K.K_EXT, i]
            if e >= 0:
                task = self.ext_tasks[e]
            elif tk[K.K_ALLOC, i] >= 0:
                task = free_task(memory, alloc_of(int(tk[K.K_ALLOC, i])))
            else:
                task = DeviceTask.trusted(kinds[tk[K.K_KIND, i]], float(tkf[K.KF_DUR, i]), int(tk[K.K_BLOCK, i]),
                                          self.names.values[tk[K.K_OP, i]], self.types.values[tk[K.K_TYPE, i]],
                                          int(tk[K.K_CORR, i]))
            task.stream_id = stream.stream_id
            task.task_id = int(tk[K.K_TID, i])
            task.queued = float(tkf[K.KF_QUEUED, i])
            task.start = float(tkf[K.KF_START, i])
            task.units = int(tk[K.K_UNITS, i])
            return task

        for s, stream in enumerate(self.streams):
            cur = int(st[K.S_CUR, s])
            stream._current = task_out(cur, stream) if cur >= 0 else None
            stream._pool = self.pools[st[K.S_POOL, s]] if st[K.S_POOL, s] >= 0 else None
            stream.pending = int(st[K.S_PENDING, s])
            stream._next_task_id = int(st[K.S_NEXT, s])
            stream._wake_at = float(stf[K.SF_WAKE, s])
            h = int(st[K.S_QH, s])
            stream._queue = deque(task_out(int(i), stream) for i in sq[s, h:h + st[K.S_QN, s]])
        for j, pool in enumerate(self.pools):
            pool.free = int(pl[K.L_FREE, j])
            h = int(pl[K.L_WH, j])
            pool._waiters = deque((int(pn[j, w]), self.streams[pw[j, w]]) for w in range(h, h + pl[K.L_WN, j]))
        # the event queue, with the threads' resumes
        queue = self.rest
        mine = None
        for i in range(int(g[K.HN])):
            t, prio, eid, kind, idx = float(ht[i]), int(hi[K.H_P, i]), int(hi[K.H_E, i]), hi[K.H_KIND, i], hi[K.H_IDX, i]
            if kind == K.EV_RESUME:
                if idx == 0:
                    if eid < 0:  # `wl`'s thread did not get to run in the batch: it carries on now
                        continue
                    ev = mine = _Resume(env)
                else:
                    ev = self.wls[idx].loop.parked
            else:
                stream = self.streams[idx]
                ev = StreamTick.__new__(StreamTick)
                ev.callbacks = [stream._on_wake_cb if kind == K.EV_WAKE else stream._on_end_cb]
            queue.append((t, prio, eid, ev))
        heapify(queue)
        env._queue = queue
        env._now = float(gf[K.NOW])
        env._eid = counter(int(g[K.EID]))
        # each thread: its loop, chooser, counters, the call it waits for, TLS state and LRU order
        for t, w in enumerate(self.wls):
            ncalls = int(th[K.T_NCALLS, t])
            loop = w.loop
            loop.i, loop.j, w.step_no = int(th[K.T_I, t]), int(th[K.T_J, t]), int(th[K.T_STEPNO, t])
            w.chooser._i = int(th[K.T_CHI, t])
            thread = w.thread
            ctx = thread.ctx
            if not th[K.T_PENDING, t]:
                loop.pending = None
            elif ncalls:  # else still the one it waited for before the batch
                loop.pending = (self.tpls[th[K.T_LAST_TPL, t]][0].api, float(thf[K.TF_P_START, t]),
                                int(th[K.T_P_CORR, t]))
            ctx.current_corr = loop.pending[2] if loop.pending is not None else -1
            if not ncalls:
                continue
            thread.calls += ncalls
            thread.busy_us = float(thf[K.TF_BUSY, t])
            run.calls_by_thread[thread.name] = run.calls_by_thread.get(thread.name, 0) + ncalls
            for which, seq in ((K.T_FIRST_TPL, K.T_FIRST_SEQ), (K.T_LAST_TPL, K.T_LAST_SEQ)):
                tpl = self.tpls[th[which, t]][0]
                hit_replay.enter_phase_1(ctx, tpl, int(th[seq, t]))
                hit_replay.enter_phase_2(ctx, tpl, int(th[seq, t]))
            container = ctx.op_cache_manager.container
            tp = self.kernel_rest[3]
            used = [(tp[K.P_LAST, i], self.slots[i]) for i, (_tpl, owner) in enumerate(self.tpls)
                    if owner is thread and tp[K.P_LAST, i] >= 0]
            for _last, slot in sorted(used):
                container.move_to_end(slot)
        self._progress()
        return mine


def _eligible(tpl: Any, kind_pool: list, rec: Any, run: Any) -> bool:
    """A hit template the compiled loop replays: no pre-call hook but the runner's call tagging, a stream, kernels that take units, the
    profiling ids of a last task (so that the last call's TLS state is its own) and, with the full trace, host
    spans the recorder keeps as one group row."""
    if (tpl.pre_call is not None and tpl.pre_call not in run.call_tags) or tpl.stream is None or tpl.profiling is None:
        return False
    if rec is not None and _span_group(rec, tpl)[3] is None:
        return False
    return all(kind_pool[task[0]] >= 0 for _span, task in tpl.submits)


def _span_group(rec: Any, tpl: Any) -> tuple:
    """The recorder's span group of a template's host spans (as `Recorder.host_spans` finds or makes it)."""
    g = rec._groups.get(id(tpl.durs))
    if g is None or g[0] is not tpl.durs or g[1] is not tpl.phases or g[2] is not tpl.ops:
        g = rec._span_group(tpl.phases, tpl.ops, tpl.durs)
    return g
