"""A batch's state in and out of arrays: streams and their tasks, unit pools, the event heap, the workspace
allocator (read from and written back to their owners through `export_state` / `import_state`).

`read_*` fill the arrays of a `Batch` (opsim.fastpath.batch) and return False when the batch cannot take the
state over (the SimPy path carries on); `write_back` hands the arrays' state back after the compiled loop ran.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from simpy.events import NORMAL

from opsim.device.device import StreamTick
from opsim.device.memory import Allocation, StreamFree, free_task
from opsim.device.task import DeviceTask, TaskKind
from opsim.fastpath import batch_layout as layout
from opsim.fastpath.batch_kernel import push
from opsim.fastpath.environment import Resume

if TYPE_CHECKING:
    from opsim.fastpath.batch import Batch



def _plain_kernel(task: DeviceTask) -> bool:
    return (task.callback is None and task.on_done is None and task.event is None and not task.nbytes
            and type(task.corr_id) is int and task.kind < TaskKind.EVENT_RECORD)


def alloc_arrays(b: Batch) -> None:
    """The arrays of streams, tasks and allocations, sized for the streams' current tasks."""
    S = len(b.streams)
    b.st = np.zeros((layout.S_SIZE, S), np.int64)
    b.stf = np.zeros((2, S), np.float64)
    b.sq = np.empty((S, b.limits.queue_slots), np.int64)  # (every array the loop writes before it reads: not cleared)
    states = b.stream_states = [stream.export_state() for stream in b.streams]
    ext = sum(len(state.queue) + (state.current is not None) for state in states)
    b.N = N = min(S * b.limits.queue_slots, b.limits.task_slots) + ext + 64
    b.tk = np.empty((layout.K_SIZE, N), np.int64)
    b.tkf = np.empty((layout.KF_SIZE, N), np.float64)
    b.ext_tasks, b.ext_allocs = [], []
    b.mem_state = b.memory.export_state()
    b.A = A = b.limits.alloc_slots + len(b.mem_state.live)
    b.al = np.empty((layout.A_ROWS, A), np.int64)
    b.alf = np.empty((1, A), np.float64)
    b.alloc_ix = {}
    b.used = 0


def _task_in(b: Batch, task: DeviceTask, state: int) -> int | None:
    """A task on a stream as a row of the task arrays (None: a task the compiled loop does not model)."""
    tk, tkf, al, alf = b.tk, b.tkf, b.al, b.alf
    a = -1
    cb = task.callback
    if type(cb) is StreamFree and cb.memory is b.memory and task.on_done is None and task.event is None:
        alloc = cb.alloc
        if id(alloc) in b.alloc_ix or alloc.address not in b.mem_state.live:
            return None
        a = b.alloc_ix[id(alloc)] = len(b.ext_allocs)
        b.ext_allocs.append(alloc)
        al[layout.A_ADDR, a], al[layout.A_SIZE, a], al[layout.A_REQ, a] = alloc.address, alloc.size, alloc.requested
        al[layout.A_EXT, a], al[layout.A_STATE, a] = a, layout.A_LIVE
        alf[layout.AF_TIME, a] = alloc.time
    elif not _plain_kernel(task):
        return None
    i = b.used
    b.used += 1
    tk[layout.K_KIND, i], tk[layout.K_BLOCK, i] = int(task.kind), task.block_dim
    tk[layout.K_OP, i] = b.names.code(task.op_name)
    tk[layout.K_TYPE, i], tk[layout.K_CORR, i] = b.types.code(task.task_type), task.corr_id
    tk[layout.K_POOL, i] = b.kind_pool[task.kind]
    tk[layout.K_ALLOC, i], tk[layout.K_EXT, i], tk[layout.K_STATE, i] = a, len(b.ext_tasks), state
    tk[layout.K_UNITS, i], tk[layout.K_TID, i] = task.units, task.task_id
    tkf[layout.KF_DUR, i], tkf[layout.KF_QUEUED, i], tkf[layout.KF_START, i] = task.duration, task.queued, task.start
    b.ext_tasks.append(task)
    return i


def read_pools(b: Batch) -> bool:
    """The unit pools: capacity, free units, waiting streams (each one of the batch's), the summary's totals."""
    pools, stats = b.pools, b.stats
    b.waiting = waiting = {}
    b.pl = pl = np.zeros((layout.L_SIZE, len(pools)), np.int64)
    b.plf = plf = np.zeros((1, len(pools)), np.float64)
    WC = 2 * len(b.streams) + 8
    b.pw = pw = np.zeros((len(pools), WC), np.int64)
    b.pn = pn = np.zeros((len(pools), WC), np.int64)
    for j, pool in enumerate(pools):
        free, waiters = pool.export_state()
        pl[layout.L_CAP, j], pl[layout.L_FREE, j], pl[layout.L_WN, j] = pool.capacity, free, len(waiters)
        if len(waiters) > WC:
            return False
        for w, (n, stream) in enumerate(waiters):
            s = b.stream_ix.get(id(stream))
            if s is None:
                return False  # a stream outside the batch waits for units it would be granted
            pw[j, w], pn[j, w] = s, n
            waiting[id(stream)] = True
        pl[layout.L_TASKS, j] = stats.pool_tasks.get(pool.name, 0)
        plf[layout.LF_US, j] = stats.pool_unit_us.get(pool.name, 0.0)
    return True


def read_streams(b: Batch) -> bool:
    """Each stream: its running or waiting task, the pool it holds, its queue, its counters and totals."""
    st, stf, sq, stats, waiting = b.st, b.stf, b.sq, b.stats, b.waiting
    for s, (stream, state) in enumerate(zip(b.streams, b.stream_states)):
        if state.blocked or len(state.queue) > b.limits.queue_slots - 8:
            return False
        cur = state.current
        if cur is None:
            st[layout.S_CUR, s] = -1
            if id(stream) in waiting:
                return False
        else:
            i = _task_in(b, cur, layout.K_WAITING if id(stream) in waiting else layout.K_RUNNING)
            if i is None:  # (an event wait, or any task carrying more than a kernel or a free)
                return False
            st[layout.S_CUR, s] = i
        st[layout.S_POOL, s] = b.pool_ix[id(state.pool)] if state.pool is not None else -1
        st[layout.S_PENDING, s], st[layout.S_NEXT, s] = state.pending, state.next_task_id
        for q, task in enumerate(state.queue):
            i = _task_in(b, task, layout.K_QUEUED)
            if i is None:
                return False
            sq[s, q] = i
        st[layout.S_QN, s] = len(state.queue)
        st[layout.S_TASKS, s] = stats.stream_tasks.get(stream.stream_id, 0)
        st[layout.S_SID, s] = stream.stream_id
        stf[layout.SF_WAKE, s] = state.wake_at
        stf[layout.SF_BUSY, s] = stats.stream_busy.get(stream.stream_id, 0.0)
    return True


def read_heap(b: Batch) -> bool:
    """The event heap: the streams' ticks and the parked threads' resumes are the batch's; the earliest of
    everything else is the barrier it stops before."""
    ticks: dict = {}
    for s, stream in enumerate(b.streams):
        on_wake, on_end = stream.tick_callbacks()
        ticks[id(on_wake)] = (layout.EV_WAKE, s)
        ticks[id(on_end)] = (layout.EV_END, s)
    parked = {id(w.loop.parked): t for t, w in enumerate(b.wls) if t}
    H = 2 * b.N + len(b.wls) + 64
    b.ht = ht = np.empty(H, np.float64)
    b.hi = hi = np.empty((4, H), np.int64)
    b.g = g = np.zeros(layout.G_SIZE, np.int64)
    b.gf = gf = np.zeros(layout.GF_SIZE, np.float64)
    b.rest = rest = []
    barrier = None
    found_parked = 0
    ends = [0] * len(b.streams)
    heap, now, eid = b.env.export_heap()
    for item in heap:
        ev = item[3]
        kind = None
        if type(ev) is StreamTick and ev.callbacks:
            kind = ticks.get(id(ev.callbacks[0]))
        elif id(ev) in parked and type(ev) is Resume and item[1] == NORMAL:
            kind = (layout.EV_RESUME, parked[id(ev)])
            found_parked += 1
        if kind is None:
            rest.append(item)
            if barrier is None or item[:3] < barrier:
                barrier = item[:3]
        else:
            if kind[0] == layout.EV_END:
                ends[kind[1]] += 1
            push(g, ht, hi, float(item[0]), item[1], item[2], kind[0], kind[1])
    if found_parked != len(b.wls) - 1:
        return False
    st, tk = b.st, b.tk
    for s in range(len(b.streams)):  # a running task has exactly one end tick pending
        running = st[layout.S_CUR, s] >= 0 and tk[layout.K_STATE, st[layout.S_CUR, s]] == layout.K_RUNNING
        if ends[s] != (1 if running else 0):
            return False
    push(g, ht, hi, float(now), NORMAL, -1, layout.EV_RESUME, 0)  # `wl`'s thread, running now
    if barrier is not None:
        gf[layout.BAR_T], g[layout.BAR_P], g[layout.BAR_E], g[layout.HAS_BAR] = barrier[0], barrier[1], barrier[2], 1
    gf[layout.NOW] = now
    g[layout.EID] = eid
    return True


def read_allocator(b: Batch) -> None:
    """The allocator's free list (room for one more block per allocation that may be released) and counters,
    the free rows of the task and allocation arrays."""
    g, al, mem = b.g, b.al, b.mem_state
    g[layout.IN_USE], g[layout.PEAK], g[layout.BEST_FIT] = mem.in_use, mem.peak, int(mem.best_fit)
    nf = len(mem.free_addr)
    b.fa = fa = np.empty(nf + len(mem.live) + b.limits.alloc_slots + 2, np.int64)
    b.fs = fs = np.empty_like(fa)
    fa[:nf] = mem.free_addr
    fs[:nf] = mem.free_size
    g[layout.FN] = nf
    free_slots = np.arange(b.A - 1, len(b.ext_allocs) - 1, -1, dtype=np.int64)
    al[layout.A_FREE_ROW, :len(free_slots)] = free_slots
    g[layout.AFREE] = len(free_slots)
    tfree = np.arange(b.N - 1, b.used - 1, -1, dtype=np.int64)
    g[layout.TFREE] = len(tfree)
    b.tfree = np.empty(b.N, np.int64)
    b.tfree[:len(tfree)] = tfree


def _alloc_out(b: Batch, a: int, made: list) -> Allocation:
    """Allocation row `a` as the Python object (one made in the batch is new, freed on its stream later)."""
    alloc = b.allocs.get(a)
    if alloc is None:
        al, alf = b.al, b.alf
        alloc = b.allocs[a] = Allocation(int(al[layout.A_ADDR, a]), int(al[layout.A_SIZE, a]),
                                         int(al[layout.A_REQ, a]), float(alf[layout.AF_TIME, a]), None)
        alloc.free_pending = True
        made.append(alloc)
    return alloc


_KINDS = list(TaskKind)


def _task_out(b: Batch, i: int, stream: Any, made: list) -> DeviceTask:
    """Task row `i` as the Python task on `stream` (the one it came from, or a new one)."""
    tk, tkf = b.tk, b.tkf
    e = tk[layout.K_EXT, i]
    if e >= 0:
        task = b.ext_tasks[e]
    elif tk[layout.K_ALLOC, i] >= 0:
        task = free_task(b.memory, _alloc_out(b, int(tk[layout.K_ALLOC, i]), made))
    else:
        task = DeviceTask.trusted(_KINDS[tk[layout.K_KIND, i]], float(tkf[layout.KF_DUR, i]),
                                  int(tk[layout.K_BLOCK, i]), b.names.values[tk[layout.K_OP, i]],
                                  b.types.values[tk[layout.K_TYPE, i]], int(tk[layout.K_CORR, i]))
    task.stream_id = stream.stream_id
    task.task_id = int(tk[layout.K_TID, i])
    task.queued = float(tkf[layout.KF_QUEUED, i])
    task.start = float(tkf[layout.KF_START, i])
    task.units = int(tk[layout.K_UNITS, i])
    return task


def write_devices(b: Batch) -> None:
    """The allocator, the tasks still on the streams, the unit pools, as the batch left them."""
    g, al, st, stf, sq, pl, pw, pn = b.g, b.al, b.st, b.stf, b.sq, b.pl, b.pw, b.pn
    b.allocs = {}
    released = []
    for a, alloc in enumerate(b.ext_allocs):
        if al[layout.A_STATE, a] == layout.A_RELEASED:
            released.append(alloc.address)
        b.allocs[a] = alloc
    made: list = []
    states = []
    for s, stream in enumerate(b.streams):
        cur = int(st[layout.S_CUR, s])
        current = _task_out(b, cur, stream, made) if cur >= 0 else None
        h = int(st[layout.S_QH, s])
        queue = [_task_out(b, int(i), stream, made) for i in sq[s, h:h + st[layout.S_QN, s]]]
        pool = b.pools[st[layout.S_POOL, s]] if st[layout.S_POOL, s] >= 0 else None
        states.append((queue, current, pool, float(stf[layout.SF_WAKE, s]), int(st[layout.S_NEXT, s]),
                       int(st[layout.S_PENDING, s])))
    n = int(g[layout.FN])
    b.memory.import_state(int(g[layout.IN_USE]), int(g[layout.PEAK]), b.fa[:n].tolist(), b.fs[:n].tolist(),
                          released, made)
    for stream, (queue, current, pool, wake_at, next_id, pending) in zip(b.streams, states):
        stream.import_state(queue, current, pool, wake_at, next_id, pending)
    for j, pool in enumerate(b.pools):
        h = int(pl[layout.L_WH, j])
        pool.import_state(int(pl[layout.L_FREE, j]),
                          ((int(pn[j, w]), b.streams[pw[j, w]]) for w in range(h, h + pl[layout.L_WN, j])))


def write_heap(b: Batch) -> Resume | None:
    """The event heap with the threads' resumes and the streams' ticks; returns the resume of `wl`'s thread
    (None: it did not get to run in the batch and carries on now)."""
    g, ht, hi = b.g, b.ht, b.hi
    queue = b.rest
    mine = None
    for i in range(int(g[layout.HN])):
        t, prio, eid = float(ht[i]), int(hi[layout.H_P, i]), int(hi[layout.H_E, i])
        kind, idx = hi[layout.H_KIND, i], hi[layout.H_IDX, i]
        if kind == layout.EV_RESUME:
            if idx == 0:
                if eid < 0:  # `wl`'s thread did not get to run in the batch: it carries on now
                    continue
                ev = mine = Resume(b.env)
            else:
                ev = b.wls[idx].loop.parked
        else:
            ev = b.streams[idx].new_tick(kind == layout.EV_END)
        queue.append((t, prio, eid, ev))
    b.env.import_heap(queue, float(b.gf[layout.NOW]), int(g[layout.EID]))
    return mine
