"""The compiled core of batched steady-state runs: host threads replaying executor-cache hits, their streams,
unit pools and the workspace allocator, all in one event loop over arrays.

This is a line-by-line port of what the SimPy path does for such calls, with the same floating-point
operations in the same order, so that every time, task id, event id and running total comes out as the
SimPy path makes it:

- the thread's call: `hit_replay.replay` (correlation id, sequence number, workspace malloc at the time the
  framework's clock gives it, its stream-ordered free submitted, the kernels submitted at their span starts,
  host busy time) and `FastEnvironment.advance`'s resume at `now + (end - now)` with the next event id;
- the stream: `Stream.submit` (arrival-order insertion), `_schedule_wake`, `_advance` (also as a wake-up),
  `_begin`, `_finish` (also as a task's end); a unit pool's immediate grant, FIFO of waiting streams and release;
- the allocator: `DeviceMemory.malloc` (first or best fit) and `_release` (merge with both neighbours);
- the summary's totals: `SummaryStats.device_task`, in record order.

The state travels as four NamedTuples of arrays (opsim.fastpath.batch_layout): `ev` (EventArrays: g, gf, the
int and float scalars; ht, hi, the event heap), `dev` (DeviceArrays: st, stf, sq, streams and their queues; pl,
plf, pw, pn, unit pools and their waiting streams; tk, tkf, tfree, task slots; al, alf, allocations, the last row
of `al` the stack of free slots; fa, fs, the free list), `rows` (RowArrays: ri, rf, the record rows; cc, the
recorder's codes; type_count) and `calls` (CallArrays: the threads and their templates). A function unpacks the
arrays it reads by name; the small helpers take just those arrays.

Events are ordered as SimPy orders them: (time, priority, event id). The loop stops, leaving every state
consistent, before the first event it does not own (the barrier) and before any call it cannot replay
(`opsim.scenario.batch` turns the arrays back into the Python objects and hands over to SimPy).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from opsim.fastpath.batch_layout import *  # noqa: F403 (the compiled loop reads the layout's rows as constants)
from opsim.fastpath.batch_memory import _fits, _malloc, _release



@njit(cache=True)
def _less(t1, p1, e1, t2, p2, e2):
    return t1 < t2 or (t1 == t2 and (p1 < p2 or (p1 == p2 and e1 < e2)))


@njit(cache=True)
def _put(ht, hi, i, t, p, e, kind, idx):
    ht[i] = t
    hi[H_P, i] = p
    hi[H_E, i] = e
    hi[H_KIND, i] = kind
    hi[H_IDX, i] = idx


@njit(cache=True)
def push(g, ht, hi, t, p, e, kind, idx):
    """heapq.heappush of (t, p, e, event) (twin: `FastEnvironment.advance`'s and SimPy's heap pushes)."""
    i = g[HN]
    g[HN] = i + 1
    while i > 0:
        parent = (i - 1) >> 1
        if _less(t, p, e, ht[parent], hi[H_P, parent], hi[H_E, parent]):
            ht[i] = ht[parent]
            hi[:, i] = hi[:, parent]
            i = parent
        else:
            break
    _put(ht, hi, i, t, p, e, kind, idx)


@njit(cache=True)
def _pop(g, ht, hi):
    n = g[HN] - 1
    g[HN] = n
    if n == 0:
        return
    t, p, e, kind, idx = ht[n], hi[H_P, n], hi[H_E, n], hi[H_KIND, n], hi[H_IDX, n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _less(ht[c + 1], hi[H_P, c + 1], hi[H_E, c + 1], ht[c], hi[H_P, c], hi[H_E, c]):
            c += 1
        if _less(ht[c], hi[H_P, c], hi[H_E, c], t, p, e):
            ht[i] = ht[c]
            hi[:, i] = hi[:, c]
            i = c
        else:
            break
    _put(ht, hi, i, t, p, e, kind, idx)


@njit(cache=True)
def _row(g, kind):
    """The next row of `kind` in the record buffers."""
    n = g[NROWS + kind]
    g[NROWS + kind] = n + 1
    return n


@njit(cache=True)
def _memory_row(g, ri, rf, cc, time, kind, address, size):
    """Recorder.memory_event (in use: the total after it); twin of `opsim.trace.recorder.Recorder.memory_event`."""
    n = _row(g, RK_MEMORY)
    ri[RK_MEMORY, 0, n] = cc[C_DEVICE]
    ri[RK_MEMORY, 1, n] = cc[kind]
    ri[RK_MEMORY, 2, n] = address
    ri[RK_MEMORY, 3, n] = size
    ri[RK_MEMORY, 4, n] = g[IN_USE]
    rf[RK_MEMORY, 0, n] = time


@njit(cache=True)
def _host_row(g, ri, rf, thread, phase, op, corr, start, dur):
    n = _row(g, RK_HOST)
    ri[RK_HOST, 0, n] = thread
    ri[RK_HOST, 1, n] = phase
    ri[RK_HOST, 2, n] = op
    ri[RK_HOST, 3, n] = corr
    rf[RK_HOST, 0, n] = start
    rf[RK_HOST, 1, n] = dur


@njit(cache=True)
def _instant(g, ri, rf, th, t, phase, now):
    """The loop's "step" instant (begin 0, end 1) on the thread's track, or its count."""
    if g[REC]:
        n = _row(g, RK_INSTANT)
        ri[RK_INSTANT, 0, n] = th[T_NAME, t]
        ri[RK_INSTANT, 1, n] = th[T_STEPNO, t]
        ri[RK_INSTANT, 2, n] = phase
        rf[RK_INSTANT, 0, n] = now
    else:
        g[INSTANTS] += 1


@njit(cache=True)
def _schedule_wake(g, gf, ht, hi, stf, s, at):
    """Stream._schedule_wake: a tick at `now + (at - now)`; twin of `opsim.device.device.Stream._schedule_wake`."""
    now = gf[NOW]
    stf[SF_WAKE, s] = at
    e = g[EID]
    g[EID] = e + 1
    push(g, ht, hi, now + (at - now), NORMAL, e, EV_WAKE, s)


@njit(cache=True)
def _tick_end(g, gf, ht, hi, s, dur):
    e = g[EID]
    g[EID] = e + 1
    push(g, ht, hi, gf[NOW] + dur, NORMAL, e, EV_END, s)


@njit(cache=True)
def _finish(ev, dev, rows, s):
    """Stream._finish of the stream's current task: recorded (a device row, or SummaryStats.device_task's
    totals), its units given back (UnitPool.release: waiting streams granted in order while the first one
    fits); its slot is free again.

    Twin of `opsim.device.device.Stream._finish` (and `UnitPool.release`, `SummaryStats.device_task`)."""
    g, gf, ht, hi = ev
    st, stf, sq, pl, plf, pw, pn, tk, tkf, tfree, al, alf, fa, fs = dev
    ri, rf, cc, type_count = rows
    task = st[S_CUR, s]
    now = gf[NOW] + 0.0
    st[S_CUR, s] = -1
    st[S_PENDING, s] -= 1
    pool = st[S_POOL, s]
    units = tk[K_UNITS, task]
    if g[REC]:
        n = _row(g, RK_DEVICE)
        ri[RK_DEVICE, 0, n] = cc[C_DEVICE]
        ri[RK_DEVICE, 1, n] = st[S_SID, s]
        ri[RK_DEVICE, 2, n] = pl[L_CODE, pool] if pool >= 0 else cc[C_NONE]
        ri[RK_DEVICE, 3, n] = units
        ri[RK_DEVICE, 4, n] = tk[K_TID, task]
        ri[RK_DEVICE, 5, n] = cc[cc[C_NAMES_AT] + tk[K_OP, task]]
        ri[RK_DEVICE, 6, n] = cc[cc[C_TYPES_AT] + tk[K_TYPE, task]]
        ri[RK_DEVICE, 7, n] = tk[K_BLOCK, task]
        ri[RK_DEVICE, 8, n] = tk[K_CORR, task]
        rf[RK_DEVICE, 0, n] = tkf[KF_QUEUED, task]
        rf[RK_DEVICE, 1, n] = tkf[KF_START, task]
        rf[RK_DEVICE, 2, n] = now
    else:
        type_count[tk[K_TYPE, task]] += 1
        if now > gf[DEV_END]:
            gf[DEV_END] = now
    if pool >= 0:
        if not g[REC]:
            dur = now - tkf[KF_START, task]
            st[S_TASKS, s] += 1
            stf[SF_BUSY, s] += dur
            st[S_REC, s] = 1
            pl[L_TASKS, pool] += 1
            plf[LF_US, pool] += dur * units
        st[S_POOL, s] = -1
        pl[L_FREE, pool] += units
        while pl[L_WN, pool] > 0 and pn[pool, pl[L_WH, pool]] <= pl[L_FREE, pool]:
            w = pl[L_WH, pool]
            need = pn[pool, w]
            ws = pw[pool, w]
            pl[L_WH, pool] = w + 1
            pl[L_WN, pool] -= 1
            if pl[L_WN, pool] == 0:
                pl[L_WH, pool] = 0
            pl[L_FREE, pool] -= need
            # Stream._granted -> _begin(current): a task holding units always ends by a tick
            cur = st[S_CUR, ws]
            tkf[KF_START, cur] = gf[NOW] + 0.0
            tk[K_STATE, cur] = K_RUNNING
            _tick_end(g, gf, ht, hi, ws, tkf[KF_DUR, cur])
    tk[K_STATE, task] = K_DONE
    g[TFREE] += 1
    tfree[g[TFREE] - 1] = task


@njit(cache=True)
def _advance(ev, dev, rows, s):
    """Stream._advance: start queued tasks until one has to wait (for time or units) or the queue is empty.

    Twin of `opsim.device.device.Stream._advance` and `_begin` (and `UnitPool.acquire`)."""
    g, gf, ht, hi = ev
    st, stf, sq, pl, plf, pw, pn, tk, tkf, tfree, al, alf, fa, fs = dev
    ri, rf, cc, type_count = rows
    if st[S_CUR, s] >= 0:
        return
    while st[S_QN, s] > 0:
        h = st[S_QH, s]
        task = sq[s, h]
        if tkf[KF_QUEUED, task] > gf[NOW]:
            if tkf[KF_QUEUED, task] < stf[SF_WAKE, s]:
                _schedule_wake(g, gf, ht, hi, stf, s, tkf[KF_QUEUED, task])
            return
        st[S_QH, s] = h + 1
        st[S_QN, s] -= 1
        if st[S_QN, s] == 0:
            st[S_QH, s] = 0
        st[S_CUR, s] = task
        pool = tk[K_POOL, task]
        if pool >= 0:
            kind = tk[K_KIND, task]
            cap = pl[L_CAP, pool]
            if kind == AI_CORE or kind == AI_VECTOR:
                n = tk[K_BLOCK, task] if tk[K_BLOCK, task] < cap else cap
            else:
                n = 1
            tk[K_UNITS, task] = n
            st[S_POOL, s] = pool
            if pl[L_FREE, pool] >= n and pl[L_WN, pool] == 0:
                pl[L_FREE, pool] -= n
            else:  # UnitPool.acquire queues the stream; `_granted` starts it
                w = pl[L_WH, pool] + pl[L_WN, pool]
                if w >= pw.shape[1]:  # compact the FIFO to the front of its row
                    wh = pl[L_WH, pool]
                    for i in range(pl[L_WN, pool]):
                        pw[pool, i] = pw[pool, wh + i]
                        pn[pool, i] = pn[pool, wh + i]
                    pl[L_WH, pool] = 0
                    w = pl[L_WN, pool]
                pn[pool, w] = n
                pw[pool, w] = s
                pl[L_WN, pool] += 1
                tk[K_STATE, task] = K_WAITING
                return
        # Stream._begin
        tkf[KF_START, task] = gf[NOW] + 0.0
        tk[K_STATE, task] = K_RUNNING
        a = tk[K_ALLOC, task]
        if a >= 0:  # the stream-ordered free's callback: DeviceMemory._release at the task's start
            _release(g, fa, fs, al[A_ADDR, a], al[A_SIZE, a])
            if g[REC]:
                _memory_row(g, ri, rf, cc, tkf[KF_START, task], C_FREE, al[A_ADDR, a], al[A_SIZE, a])
            if al[A_EXT, a] < 0:  # the slot is free again (its free stack is the last row of `al`)
                al[A_STATE, a] = A_FREE
                al[A_FREE_ROW, g[AFREE]] = a
                g[AFREE] += 1
            else:  # an allocation made before the batch: deleted from DeviceMemory._live afterwards
                al[A_STATE, a] = A_RELEASED
        if tkf[KF_DUR, task] > 0.0 or tk[K_UNITS, task]:
            _tick_end(g, gf, ht, hi, s, tkf[KF_DUR, task])
            return
        _finish(ev, dev, rows, s)


@njit(cache=True)
def _submit(ev, dev, s, task, at):
    """Stream.submit (the caller checked `at >= now` and the queue's room). True when the stream has to start
    its work now (`_advance`, which the caller runs: one call site keeps the compiled code small).

    Twin of `opsim.device.device.Stream.submit`."""
    g, gf, ht, hi = ev
    st, stf, sq, pl, plf, pw, pn, tk, tkf, tfree, al, alf, fa, fs = dev
    tk[K_TID, task] = st[S_NEXT, s]
    st[S_NEXT, s] += 1
    tkf[KF_QUEUED, task] = at + 0.0
    st[S_PENDING, s] += 1
    h = st[S_QH, s]
    n = st[S_QN, s]
    if h + n >= sq.shape[1]:  # compact the queue to the front of its row
        for i in range(n):
            sq[s, i] = sq[s, h + i]
        h = 0
        st[S_QH, s] = 0
    if n == 0 or tkf[KF_QUEUED, sq[s, h + n - 1]] <= at:
        sq[s, h + n] = task
    else:  # an earlier arrival from another host thread: keep the queue in arrival order
        i = n - 1
        while i > 0 and tkf[KF_QUEUED, sq[s, h + i - 1]] > at:
            i -= 1
        for j in range(n, i, -1):
            sq[s, h + j] = sq[s, h + j - 1]
        sq[s, h + i] = task
    st[S_QN, s] = n + 1
    if st[S_CUR, s] < 0 and sq[s, h] == task:
        if at <= gf[NOW]:
            return True
        if at < stf[SF_WAKE, s]:
            _schedule_wake(g, gf, ht, hi, stf, s, at)
    return False


@njit(cache=True)
def _new_task(g, tk, tkf, tfree, kind, dur, block, op, typ, corr, pool, alloc):
    top = g[TFREE] - 1
    g[TFREE] = top
    t = tfree[top]
    tk[K_KIND, t] = kind
    tk[K_BLOCK, t] = block
    tk[K_OP, t] = op
    tk[K_TYPE, t] = typ
    tk[K_CORR, t] = corr
    tk[K_POOL, t] = pool
    tk[K_ALLOC, t] = alloc
    tk[K_EXT, t] = -1
    tk[K_STATE, t] = K_QUEUED
    tk[K_UNITS, t] = 0
    tk[K_TID, t] = -1
    tkf[KF_DUR, t] = dur
    tkf[KF_QUEUED, t] = np.nan
    tkf[KF_START, t] = np.nan
    return t


@njit(cache=True)
def _peek(ev, dev, rows, calls, t, now, qc, hcap, ncap, mcap, rcap):
    """0 when thread `t`'s next call can be made now, else why not (a stop reason)."""
    g, gf, ht, hi = ev
    st, stf, sq, pl, plf, pw, pn, tk, tkf, tfree, al, alf, fa, fs = dev
    ri, rf, cc, type_count = rows
    th, thf, draws, step_nvar, step_var0, var_tpl, tp, tpf, durs, sb, sbf, infos, free_type, free_op = calls
    if th[T_J, t] == 0 and th[T_I, t] >= th[T_COUNT, t]:
        return R_LOOP_END
    k = th[T_BODY0, t] + th[T_J, t]
    nv = step_nvar[k]
    v = 0
    if nv > 1:
        ci = th[T_CHI, t]
        if ci == NDRAW:
            return R_DRAWS
        v = int(draws[t, ci] * nv)
    p = var_tpl[step_var0[k] + v]
    if p < 0:
        return R_NO_TEMPLATE
    size = tp[P_SIZE, p]
    if size > 0 and not _fits(g, fs, (size + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT):
        return R_NO_FIT
    end = now
    for i in range(tp[P_DN, p]):
        end += durs[tp[P_D0, p] + i]
    if not end > now:
        return R_ZERO
    s = tp[P_STREAM, p]
    ns = tp[P_SN, p] + (1 if size > 0 else 0)
    if g[TFREE] < ns or st[S_QN, s] + ns > qc or g[HN] + 2 * ns + 2 > hcap or (size > 0 and g[AFREE] == 0):
        return R_CAPACITY
    if ((g[CORR] + 1) & 1023) == 0 and not g[FOLD_OK]:  # Recorder.next_corr folds here
        return R_FOLD
    if g[REC]:  # room for the call's rows, every thread's pending ones and every task and free still to end
        nt = th.shape[1]
        if (g[NROWS + RK_HOST] + 2 + nt > rcap or g[NROWS + RK_INSTANT] + 2 + nt > rcap
                or g[NROWS + RK_CACHE] + 1 > rcap or g[NROWS + RK_INFO] + tp[P_IN, p] > rcap
                or g[NROWS + RK_TAG] + 1 > rcap or g[NROWS + RK_DEVICE] + ncap - g[TFREE] + ns > rcap
                or g[NROWS + RK_MEMORY] + mcap - g[AFREE] + 2 > rcap):
            for kind in range(RK_KINDS):
                if g[NROWS + kind]:
                    return R_FLUSH
            return R_CAPACITY  # (empty buffers that still lack room: more tasks in flight than rows)
    return 0


@njit(cache=True)
def _workspace(ev, dev, rows, size, at):
    """run_op's workspace malloc of `size` bytes at `at` (DeviceMemory.malloc with its memory row): the
    allocation's row."""
    g, gf, ht, hi = ev
    st, stf, sq, pl, plf, pw, pn, tk, tkf, tfree, al, alf, fa, fs = dev
    ri, rf, cc, type_count = rows
    need = (size + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
    addr = _malloc(g, fa, fs, need)
    if g[REC]:
        _memory_row(g, ri, rf, cc, at, C_ALLOC, addr, need)
    top = g[AFREE] - 1
    g[AFREE] = top
    a = al[A_FREE_ROW, top]
    al[A_ADDR, a] = addr
    al[A_SIZE, a] = need
    al[A_REQ, a] = size
    al[A_EXT, a] = -1
    al[A_STATE, a] = A_LIVE
    alf[AF_TIME, a] = at
    return a


@njit(cache=True)
def _call(ev, dev, rows, calls, t, now):
    """Thread `t`'s next call, replayed from its template at `now`, and the thread's resume at its end.

    Twin of `opsim.fastpath.hit_replay.replay` with run_op's workspace and `FastEnvironment.advance`."""
    g, gf, ht, hi = ev
    st, stf, sq, pl, plf, pw, pn, tk, tkf, tfree, al, alf, fa, fs = dev
    ri, rf, cc, type_count = rows
    th, thf, draws, step_nvar, step_var0, var_tpl, tp, tpf, durs, sb, sbf, infos, free_type, free_op = calls
    if th[T_J, t] == 0:
        th[T_STEPNO, t] += 1
        _instant(g, ri, rf, th, t, 0, now)
    k = th[T_BODY0, t] + th[T_J, t]
    nv = step_nvar[k]
    v = 0
    if nv > 1:
        v = int(draws[t, th[T_CHI, t]] * nv)
        th[T_CHI, t] += 1
    p = var_tpl[step_var0[k] + v]
    size = tp[P_SIZE, p]
    d0 = tp[P_D0, p]
    s = tp[P_STREAM, p]
    g[FOLD_OK] = 0
    g[CORR] += 1
    corr = g[CORR]
    seq = g[SEQ]
    g[SEQ] = seq + 1
    if th[T_NCALLS, t] == 0:
        th[T_FIRST_TPL, t] = p
        th[T_FIRST_SEQ, t] = seq
    th[T_LAST_TPL, t] = p
    th[T_LAST_SEQ, t] = seq
    th[T_NCALLS, t] += 1
    g[NCALLS] += 1
    tp[P_LAST, p] = g[GCALL]
    g[GCALL] += 1
    a = -1
    if size > 0:  # run_op's workspace: malloc at the framework clock's time, then its stream-ordered free
        a = _workspace(ev, dev, rows, size, now + tpf[PF_C0, p])
    if tp[P_TAG, p]:  # the runner's call tagging (`pre_call`): this call's step and variant
        n = _row(g, RK_TAG)
        ri[RK_TAG, 0, n] = corr
        ri[RK_TAG, 1, n] = k
        ri[RK_TAG, 2, n] = v
    if g[REC]:  # its tensor descriptions, its host spans (one group row), its cache hit
        for q in range(tp[P_IN, p]):
            n = _row(g, RK_INFO)
            ri[RK_INFO, 0, n] = corr
            ri[RK_INFO, 1, n] = infos[0, tp[P_I0, p] + q]
            ri[RK_INFO, 2, n] = tp[P_I0, p] + q
        _host_row(g, ri, rf, th[T_NAME, t], tp[P_MARKER, p], 0, corr, now, 0.0)
        g[HGROUPED] += 1
        g[HEXTRA] += tp[P_EXTRA, p]
    # the workspace's stream-ordered free (submitted first, at its later time), then host_replay's
    # kernels, each at the start of its span
    b0 = tp[P_S0, p]
    for q in range(-1 if size > 0 else 0, tp[P_SN, p]):
        if q < 0:
            task = _new_task(g, tk, tkf, tfree, HOST_FUNC, 0.0, 1, free_op, free_type, -1, -1, a)
            at = now + tpf[PF_C1, p]
        else:
            b = b0 + q
            at = now
            for i in range(sb[B_SPAN, b]):
                at += durs[d0 + i]
            task = _new_task(g, tk, tkf, tfree, sb[B_KIND, b], sbf[BF_DUR, b], sb[B_BLOCK, b], sb[B_OP, b],
                             sb[B_TYPE, b], corr, sb[B_POOL, b], -1)
        if _submit(ev, dev, s, task, at):
            _advance(ev, dev, rows, s)
    thf[TF_BUSY, t] += tpf[PF_BUSY, p]
    if g[REC]:
        at = now
        for i in range(tp[P_HITAT, p]):
            at += durs[d0 + i]
        n = _row(g, RK_CACHE)
        ri[RK_CACHE, 0, n] = th[T_NAME, t]
        ri[RK_CACHE, 1, n] = tp[P_API1, p]
        rf[RK_CACHE, 0, n] = at
    else:
        g[HITS] += 1
    g[CALLS] += 1
    if size > g[PEAK_WS]:
        g[PEAK_WS] = size
    th[T_PENDING, t] = 1
    th[T_P_API, t] = tp[P_API, p]
    th[T_P_CORR, t] = corr
    thf[TF_P_START, t] = now
    # FastEnvironment.advance: the thread resumes at now + (end - now) with the next event id
    end = now
    for i in range(tp[P_DN, p]):
        end += durs[d0 + i]
    e = g[EID]
    g[EID] = e + 1
    push(g, ht, hi, now + (end - now), NORMAL, e, EV_RESUME, t)


@njit(cache=True)
def run(ev, dev, rows, calls, max_calls):
    """Run the event loop until it has to stop; g[REASON] and g[RTH] say why (and for which thread)."""
    g, gf, ht, hi = ev
    st, stf, sq, pl, plf, pw, pn, tk, tkf, tfree, al, alf, fa, fs = dev
    ri, rf, cc, type_count = rows
    th, thf, draws, step_nvar, step_var0, var_tpl, tp, tpf, durs, sb, sbf, infos, free_type, free_op = calls
    qc = sq.shape[1]
    hcap = ht.shape[0]
    ncap = tfree.shape[0]
    mcap = al.shape[1]
    rcap = ri.shape[2]
    while True:
        if g[HN] == 0:
            g[REASON] = R_EMPTY
            return
        t0 = ht[0]
        p0 = hi[H_P, 0]
        e0 = hi[H_E, 0]
        kind = hi[H_KIND, 0]
        idx = hi[H_IDX, 0]
        if g[HAS_BAR] and not _less(t0, p0, e0, gf[BAR_T], g[BAR_P], g[BAR_E]):
            g[REASON] = R_BARRIER
            return
        _pop(g, ht, hi)
        gf[NOW] = t0
        if kind == EV_RESUME:
            t = idx
            now = t0
            if th[T_PENDING, t]:  # the previous call ends: run_op's "op_call" span, the loop's bookkeeping
                if g[REC]:
                    _host_row(g, ri, rf, th[T_NAME, t], cc[C_OP_CALL], th[T_P_API, t], th[T_P_CORR, t],
                              thf[TF_P_START, t], now - thf[TF_P_START, t])
                th[T_PENDING, t] = 0
                th[T_J, t] += 1
                if th[T_J, t] == th[T_NB, t]:
                    _instant(g, ri, rf, th, t, 1, now)
                    th[T_J, t] = 0
                    th[T_I, t] += 1
            reason = R_LIMIT if g[NCALLS] >= max_calls else _peek(ev, dev, rows, calls, t, now, qc, hcap, ncap, mcap,
                                                                  rcap)
            if reason:  # the thread goes on later, or in SimPy, from this very event
                push(g, ht, hi, t0, p0, e0, EV_RESUME, t)
                g[REASON] = reason
                g[RTH] = t
                return
            _call(ev, dev, rows, calls, t, now)
        else:  # a stream's wake-up (Stream._advance with its tick) or its task's end (Stream._finish with its tick)
            if kind == EV_WAKE:
                stf[SF_WAKE, idx] = np.inf
            else:
                _finish(ev, dev, rows, idx)
            if st[S_CUR, idx] < 0:
                _advance(ev, dev, rows, idx)
