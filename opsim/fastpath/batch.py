"""A batch: the parked batched loops of a scenario's threads, and the one running now, run in the compiled event
loop (`batch_kernel`) as far as it can go.

`run_batch` reads the opbase, device and SimPy state into arrays (`batch_state`), runs the kernel until it has
to stop (another thread's or the task queue's event is due, a call has no template, a workspace does not fit,
a loop ends), and writes everything back: stream queues and running tasks, unit pools, the allocator and its
live workspaces, the event heap with every event id, the correlation and sequence counters, each thread's TLS
state and LRU order, the summary's totals (trace off) or the recorder's rows (full trace, `batch_rows`), the
loops' positions and the choosers. The outputs are those of the SimPy path byte for byte
(`tests/scenario/test_batch.py` runs scenarios three ways).
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from opsim.fastpath import batch_kernel, batch_rows, batch_state, hit_replay
from opsim.fastpath import batch_layout as layout
from opsim.fastpath.batch_rows import Tables

_KERNEL_SOURCES = ("batch_layout.py", "batch_memory.py", "batch_kernel.py")


def refresh_kernel_cache(folder: Path | None = None) -> bool:
    """Drop the compiled loop's cached machine code when any of its source files changed; True when it did.

    Numba's cache keys a kernel by its own file only, not by the modules it reads (batch_layout's constants,
    batch_memory's functions), so a change there would otherwise run stale code until batch_kernel.py changed.
    A digest of the three files is kept beside the cache; a different digest removes the cached kernels (they
    are compiled afresh on first use). A read-only installation is left as it is."""
    folder = Path(__file__).parent if folder is None else folder
    digest = hashlib.sha256(b"".join((folder / name).read_bytes() for name in _KERNEL_SOURCES)).hexdigest()
    cache = folder / "__pycache__"
    stamp = cache / "batch_kernel.sources"
    try:
        if stamp.read_text() == digest:
            return False
    except OSError:
        pass  # no digest yet: whatever is cached may be stale
    try:
        for stale in [*cache.glob("batch_kernel.*.nb[ic]"), *cache.glob("batch_memory.*.nb[ic]")]:
            stale.unlink(missing_ok=True)
        cache.mkdir(exist_ok=True)
        stamp.write_text(digest)
    except OSError:
        return False
    return True


refresh_kernel_cache()


class BatchLimits(NamedTuple):
    """The sizes of a batch's arrays (the scenario's batched loops choose them: opsim.scenario.batch)."""

    queue_slots: int
    """Tasks a stream may hold queued in a batch (beyond it the batch stops and SimPy carries on)."""
    task_slots: int
    """Tasks on all of a batch's streams at once (beyond it the batch stops)."""
    alloc_slots: int
    """Stream-ordered workspace frees pending at once in a batch."""
    calls_per_entry: int
    """Calls per entry into the compiled loop (the progress bar moves between entries)."""
    rows: int
    """Rows of each record kind the compiled loop fills before they are handed to the recorder (full trace)."""


def run_batch(wl: Any, limits: BatchLimits) -> tuple[int, Any]:
    """Run every parked batched loop, and `wl`'s (whose thread is running now), in the compiled loop as far as
    it can go. Returns (calls made, the event `wl`'s thread waits on next or None to carry on at once)."""
    b = Batch.build(wl, limits)
    if b is None:
        return 0, None
    return b.execute()


def _eligible(tpl: Any, kind_pool: list, rec: Any, run: Any) -> bool:
    """A hit template the compiled loop replays: no pre-call hook but the runner's call tagging, a stream,
    kernels that take units, the profiling ids of a last task (so that the last call's TLS state is its own)
    and, with the full trace, host spans the recorder keeps as one group row."""
    if (tpl.pre_call is not None and tpl.pre_call not in run.call_tags) or tpl.stream is None or tpl.profiling is None:
        return False
    if rec is not None and rec.span_group(tpl.phases, tpl.ops, tpl.durs)[3] is None:
        return False
    return all(kind_pool[task[0]] >= 0 for _span, task in tpl.submits)


class Batch:
    """The state of one batch: the Python objects it takes over and the arrays the compiled loop runs on."""

    @classmethod
    def build(cls, wl: Any, limits: BatchLimits) -> Batch | None:
        """The batch `wl`'s thread can start now, or None when the compiled loop cannot take the state over."""
        run = wl.run
        sim = wl.sim
        rec = sim.recorder
        if sim.process.numerics or not rec.enabled or (rec.sink is not None and rec.sink is not run.stats):
            return None
        b = cls()
        b.limits = limits
        b.full = rec.keeps_rows  # the full trace: every record as a row (else only the summary's totals)
        b.run, b.env, b.p, b.rec, b.stats = run, sim.env, sim.process, rec, run.stats
        b.shown = run.calls
        b.memory = sim.device.memory
        b.wls = [wl] + [w for w in run.workloads
                        if w is not wl and w.loop is not None and w.loop.parked is not None]
        b.names, b.types = Tables(), Tables()
        b.missing = []
        b.take_pools(sim.device.pools_by_kind)
        if not b.take_templates():
            return None
        batch_state.alloc_arrays(b)
        if not (batch_state.read_pools(b) and batch_state.read_streams(b) and batch_state.read_heap(b)):
            return None
        b.gf[layout.DEV_END] = b.stats.device_end
        b.g[layout.CORR], b.g[layout.SEQ] = rec.last_corr, b.p.l2_sequence_counter
        b.g[layout.CALLS], b.g[layout.PEAK_WS] = run.calls, run.peak_workspace
        batch_state.read_allocator(b)
        if not b.read_threads():
            return None
        b.read_templates()
        if not b.read_codes():
            return None
        return b

    def code(self, value: Any) -> int:
        """The recorder's code of a name (with the full trace; 0 otherwise); a name not coded yet is noted in
        `missing` (its first record is the reference path's to make)."""
        if not self.full:
            return 0
        c = self.rec.existing_code(value)
        if c is None:
            self.missing.append(value)
            return 0
        return c

    def take_pools(self, by_kind: tuple) -> None:
        """The distinct unit pools, and the pool of each task kind as an index (-1: none)."""
        self.pools, self.pool_ix = pools, pool_ix = [], {}
        for pool in by_kind:
            if pool is not None and id(pool) not in pool_ix:
                pool_ix[id(pool)] = len(pools)
                pools.append(pool)
        self.kind_pool = [pool_ix[id(pool)] if pool is not None else -1 for pool in by_kind]

    def take_templates(self) -> bool:
        """The hit templates of every (step, variant) of every thread's loop body, and their streams."""
        self.tpls, self.slots, self.streams, self.steps = tpls, slots, streams, steps = [], [], [], []
        self.stream_ix = stream_ix = {}
        tpl_ix: dict = {}
        self.step_nvar, self.step_var0, self.var_tpl, self.body0, self.nbody = [], [], [], [], []
        rec = self.rec if self.full else None
        for w in self.wls:
            th = w.thread
            self.body0.append(len(self.step_nvar))
            plans = w.loop.plans
            self.nbody.append(len(plans))
            for plan in plans:
                steps.append(plan.config)
                self.step_nvar.append(plan.variants)
                self.step_var0.append(len(self.var_tpl))
                for variant in range(plan.variants):
                    args = plan.cache.get(variant)
                    found = None if args is None else hit_replay.find(th, plan.gws, plan.run_fn, args, plan.stream,
                                                                      plan.api, fit=False)
                    code = -1
                    if found is not None and _eligible(found[0], self.kind_pool, rec, self.run):
                        tpl = found[0]
                        code = tpl_ix.get(id(tpl))
                        if code is None:
                            code = tpl_ix[id(tpl)] = len(tpls)
                            tpls.append((tpl, th))
                            slots.append(found[1])
                            if id(tpl.stream) not in stream_ix:
                                stream_ix[id(tpl.stream)] = len(streams)
                                streams.append(tpl.stream)
                    self.var_tpl.append(code)
        return bool(tpls)

    def read_threads(self) -> bool:
        """Each thread: its loop's position, its chooser's draws, its busy time and the call it waits for."""
        T = len(self.wls)
        self.th = th = np.zeros((layout.T_SIZE, T), np.int64)
        self.thf = thf = np.zeros((2, T), np.float64)
        self.draws = draws = np.zeros((T, layout.NDRAW), np.float64)
        for t, w in enumerate(self.wls):
            loop = w.loop
            th[layout.T_I, t], th[layout.T_J, t], th[layout.T_COUNT, t] = loop.i, loop.j, loop.count
            th[layout.T_NB, t], th[layout.T_BODY0, t], th[layout.T_STEPNO, t] = self.nbody[t], self.body0[t], w.step_no
            buf, i = w.chooser.export_state()
            th[layout.T_CHI, t] = i
            thf[layout.TF_BUSY, t] = w.thread.busy_us
            draws[t, :len(buf)] = buf
            if loop.pending is not None:
                api, start, corr = loop.pending
                if type(corr) is not int or type(start) is not float:
                    return False
                th[layout.T_PENDING, t], th[layout.T_P_API, t], th[layout.T_P_CORR, t] = 1, self.code(api), corr
                thf[layout.TF_P_START, t] = start
            th[layout.T_NAME, t] = self.code(w.thread.name)
        return True

    def read_templates(self) -> None:
        """The templates: their API codes, spans, submissions, tensor descriptions, workspace and clocks."""
        P = len(self.tpls)
        self.tp = tp = np.zeros((layout.P_ROWS, P), np.int64)
        self.tpf = tpf = np.zeros((3, P), np.float64)
        durs: list = []
        subs: list = []
        info_codes: list = []
        self.infos = []
        names, types, kind_pool = self.names, self.types, self.kind_pool
        for i, (tpl, _th) in enumerate(self.tpls):
            tp[layout.P_API, i], tp[layout.P_API1, i] = self.code(tpl.api), self.code(tpl.api_1)
            tp[layout.P_HITAT, i], tp[layout.P_TAG, i] = tpl.hit_at, tpl.pre_call is not None
            if self.full:
                group = self.rec.span_group(tpl.phases, tpl.ops, tpl.durs)
                tp[layout.P_MARKER, i], tp[layout.P_EXTRA, i] = group[3], group[4]
            tp[layout.P_I0, i], tp[layout.P_IN, i] = len(info_codes), len(tpl.infos)
            for op, info in tpl.infos:
                info_codes.append(self.code(op))
                self.infos.append(info)
            tp[layout.P_STREAM, i], tp[layout.P_SIZE, i] = self.stream_ix[id(tpl.stream)], tpl.size
            tp[layout.P_D0, i], tp[layout.P_DN, i] = len(durs), len(tpl.durs)
            tp[layout.P_S0, i], tp[layout.P_SN, i], tp[layout.P_LAST, i] = len(subs), len(tpl.submits), -1
            if tpl.size:
                tpf[layout.PF_C0, i], tpf[layout.PF_C1, i] = tpl.clocks
            tpf[layout.PF_BUSY, i] = tpl.busy
            durs.extend(tpl.durs)
            for span, (kind, dur, block_dim, op, task_type) in tpl.submits:
                subs.append((span, int(kind), block_dim, names.code(op), types.code(task_type), kind_pool[kind], dur))
        self.subs = subs
        sb = np.array([x[:6] for x in subs], np.int64).T.copy() if subs else np.zeros((layout.B_SIZE, 0), np.int64)
        sbf = np.array([[x[6] for x in subs]], np.float64)
        free_type, free_op = types.code("HOST_FUNC"), names.code("free_async")
        self.kernel_rest = (np.array(self.step_nvar, np.int64), np.array(self.step_var0, np.int64),
                            np.array(self.var_tpl, np.int64), tp, tpf, np.array(durs, np.float64), sb, sbf,
                            np.array([info_codes], np.int64).reshape(1, len(info_codes)), free_type, free_op)

    def read_codes(self) -> bool:
        """The recorder's codes of the pools, the constant names, the op names and task types (full trace);
        False when one is not coded yet."""
        pl, names, types = self.pl, self.names, self.types
        for j in set(self.tk[layout.K_POOL, :self.used].tolist()) | {x[5] for x in self.subs}:
            if j >= 0:  # the pools of the batch's tasks
                pl[layout.L_CODE, j] = self.code(self.pools[j].name)
        cc = np.zeros(layout.C_SIZE + len(names.values) + len(types.values), np.int64)
        for slot, value in ((layout.C_NONE, "none"), (layout.C_OP_CALL, "op_call"), (layout.C_STEP, "step"),
                            (layout.C_EXEC, "exec"), (layout.C_HIT, "hit"), (layout.C_EMPTY, ""),
                            (layout.C_ALLOC, "alloc"), (layout.C_FREE, "free")):
            cc[slot] = self.code(value)
        cc[layout.C_DEVICE] = self.memory.device_id
        cc[layout.C_NAMES_AT], cc[layout.C_TYPES_AT] = layout.C_SIZE, layout.C_SIZE + len(names.values)
        cc[layout.C_SIZE:layout.C_SIZE + len(names.values)] = [self.code(v) for v in names.values]
        cc[layout.C_SIZE + len(names.values):] = [self.code(v) for v in types.values]
        if self.missing:  # a name the recorder has not coded yet: its first record is the reference path's to make
            return False
        rows = self.limits.rows if self.full else 1
        self.cc = cc
        self.ri = np.empty((layout.RK_KINDS, layout.RI_FIELDS, rows), np.int64)
        self.rf = np.empty((layout.RK_KINDS, layout.RF_FIELDS, rows), np.float64)
        self.g[layout.REC] = int(self.full)
        return True

    def execute(self) -> tuple[int, Any]:
        """Run the compiled loop, entry by entry, until it stops for good; returns (calls made, the event the
        running thread waits on next or None)."""
        g, th = self.g, self.th
        ev = layout.EventArrays(g, self.gf, self.ht, self.hi)
        dev = layout.DeviceArrays(self.st, self.stf, self.sq, self.pl, self.plf, self.pw, self.pn, self.tk, self.tkf,
                                  self.tfree, self.al, self.alf, self.fa, self.fs)
        calls = layout.CallArrays(th, self.thf, self.draws, *self.kernel_rest)
        made = 0
        while True:
            type_count = np.zeros(len(self.types.values) + 1, np.int64)
            g[layout.NCALLS] = 0
            batch_kernel.run(ev, dev, layout.RowArrays(self.ri, self.rf, self.cc, type_count), calls,
                             self.limits.calls_per_entry)
            made += int(g[layout.NCALLS])
            batch_rows.fold_counts(self, type_count)
            reason = int(g[layout.REASON])
            if self.full:
                batch_rows.flush(self)
            if reason == layout.R_FOLD:  # Recorder.next_corr's fold, before the call that takes the next id
                self.rec.fold_due()
                g[layout.FOLD_OK] = 1
                continue
            if reason == layout.R_FLUSH:
                continue
            if reason == layout.R_DRAWS:  # the chooser's next batch of draws, as Chooser.pick draws it
                t = int(g[layout.RTH])
                th[layout.T_CHI, t] = 0
                self.draws[t, :] = self.wls[t].chooser.refill()
                continue
            if reason == layout.R_LIMIT:
                self.progress()
                continue
            break
        if not made:  # nothing changed (a chooser refill is the one its next pick would make)
            return 0, None
        return made, self.write_back()

    def progress(self) -> None:
        """The progress callback, called as `_Run.count_call` calls it: with every multiple of 1024 calls reached."""
        run = self.run
        calls = int(self.g[layout.CALLS])
        if run.progress is not None:
            for n in range((self.shown >> 10) + 1, (calls >> 10) + 1):
                run.progress(n << 10)
        self.shown = calls

    def write_back(self) -> Any:
        """Everything back to the Python objects; returns the event the running thread waits on (or None)."""
        g, run = self.g, self.run
        run.calls = int(g[layout.CALLS])
        run.peak_workspace = int(g[layout.PEAK_WS])
        self.rec.continue_corr(int(g[layout.CORR]))  # its folds were made at their points (R_FOLD)
        self.p.l2_sequence_counter = int(g[layout.SEQ])
        if not self.full:  # the summary's totals (with the full trace, the rows were handed to the recorder)
            batch_rows.fold_totals(self)
        batch_state.write_devices(self)
        mine = batch_state.write_heap(self)
        self.write_threads()
        self.progress()
        return mine

    def write_threads(self) -> None:
        """Each thread: its loop, chooser, counters, the call it waits for, TLS state and LRU order."""
        th, thf, run = self.th, self.thf, self.run
        for t, w in enumerate(self.wls):
            ncalls = int(th[layout.T_NCALLS, t])
            loop = w.loop
            loop.i, loop.j, w.step_no = int(th[layout.T_I, t]), int(th[layout.T_J, t]), int(th[layout.T_STEPNO, t])
            w.chooser.import_state(int(th[layout.T_CHI, t]))
            thread = w.thread
            ctx = thread.ctx
            if not th[layout.T_PENDING, t]:
                loop.pending = None
            elif ncalls:  # else still the one it waited for before the batch
                loop.pending = (self.tpls[th[layout.T_LAST_TPL, t]][0].api, float(thf[layout.TF_P_START, t]),
                                int(th[layout.T_P_CORR, t]))
            ctx.current_corr = loop.pending[2] if loop.pending is not None else -1
            if not ncalls:
                continue
            thread.calls += ncalls
            thread.busy_us = float(thf[layout.TF_BUSY, t])
            run.calls_by_thread[thread.name] = run.calls_by_thread.get(thread.name, 0) + ncalls
            for which, seq in ((layout.T_FIRST_TPL, layout.T_FIRST_SEQ), (layout.T_LAST_TPL, layout.T_LAST_SEQ)):
                tpl = self.tpls[th[which, t]][0]
                hit_replay.enter_phase_1(ctx, tpl, int(th[seq, t]))
                hit_replay.enter_phase_2(ctx, tpl, int(th[seq, t]))
            container = ctx.op_cache_manager.container
            tp = self.tp
            used = [(tp[layout.P_LAST, i], self.slots[i]) for i, (_tpl, owner) in enumerate(self.tpls)
                    if owner is thread and tp[layout.P_LAST, i] >= 0]
            for _last, slot in sorted(used):
                container.move_to_end(slot)
