"""The array layout of a batch (opsim.fastpath.batch_kernel): the rows of each state array, the event kinds, the
record kinds, the stop reasons, and the constants the compiled loop repeats from the Python model.

Each name is a row index (or a size) of one array; `batch_state` and `batch_rows` fill and read the arrays with
them, and the compiled loop reads them as compile-time constants. The arrays travel to the compiled loop as four
NamedTuples (Numba passes them as structs): `EventArrays`, `DeviceArrays`, `RowArrays` and `CallArrays`.
"""
from typing import Any, NamedTuple

# g: int64 scalars
(HN, EID, CORR, SEQ, CALLS, PEAK_WS, HITS, INSTANTS, NALLOC, NFREE, FN, IN_USE, PEAK, REASON, RTH, TFREE, AFREE,
 GCALL, BEST_FIT, BAR_P, BAR_E, HAS_BAR, NCALLS, REC, FOLD_OK, HGROUPED, HEXTRA, NROWS) = range(28)
G_SIZE = NROWS + 7  # NROWS + kind: the rows of each kind in the buffers

# gf: float64 scalars
NOW, DEV_END, BAR_T = range(3)
GF_SIZE = 3

# heap: hi[field, slot] (ht holds the times)
H_P, H_E, H_KIND, H_IDX = range(4)
EV_RESUME, EV_WAKE, EV_END = range(3)

# threads: th[field, thread], thf[field, thread]
(T_I, T_J, T_COUNT, T_NB, T_BODY0, T_STEPNO, T_CHI, T_NCALLS, T_FIRST_TPL, T_FIRST_SEQ, T_LAST_TPL,
 T_LAST_SEQ, T_NAME, T_PENDING, T_P_API, T_P_CORR) = range(16)
T_SIZE = 16
TF_BUSY, TF_P_START = range(2)

# templates: tp[field, template], tpf[field, template]
(P_STREAM, P_SIZE, P_D0, P_DN, P_S0, P_SN, P_LAST, P_API, P_API1, P_MARKER, P_EXTRA, P_HITAT, P_I0, P_IN,
 P_TAG) = range(15)
P_ROWS = 15
PF_C0, PF_C1, PF_BUSY = range(3)
# submits: sb[field, submit], sbf[field, submit]
B_SPAN, B_KIND, B_BLOCK, B_OP, B_TYPE, B_POOL = range(6)
B_SIZE = 6
BF_DUR = 0

# streams: st[field, stream], stf[field, stream]; queues sq[stream, slot]
S_CUR, S_POOL, S_PENDING, S_NEXT, S_QH, S_QN, S_TASKS, S_REC, S_SID = range(9)
S_SIZE = 9
SF_WAKE, SF_BUSY = range(2)

# pools: pl[field, pool], plf[field, pool]; waiters pw[pool, slot] (stream), pn[pool, slot] (units)
L_CAP, L_FREE, L_WH, L_WN, L_TASKS, L_CODE = range(6)
L_SIZE = 6
LF_US = 0

# tasks: tk[field, task], tkf[field, task]; free slots tfree
K_KIND, K_BLOCK, K_OP, K_TYPE, K_CORR, K_POOL, K_ALLOC, K_EXT, K_STATE, K_UNITS, K_TID = range(11)
K_SIZE = 11
KF_DUR, KF_QUEUED, KF_START = range(3)
KF_SIZE = 3
# task states
K_QUEUED, K_WAITING, K_RUNNING, K_DONE = range(4)

# allocations: al[field, alloc], alf[field, alloc]; free slots afree
A_ADDR, A_SIZE, A_REQ, A_EXT, A_STATE, A_FREE_ROW = range(6)
A_ROWS = 6
AF_TIME = 0
A_FREE, A_LIVE, A_RELEASED = range(3)

# record rows (a full trace): ri[kind, field, row], rf[kind, field, row]
RK_HOST, RK_DEVICE, RK_MEMORY, RK_CACHE, RK_INSTANT, RK_INFO, RK_TAG = range(7)
RK_KINDS = 7
# ints: host thread, phase, op, corr / device device, stream, unit_kind, units, task_id, op, task_type, block_dim,
# corr / memory device, kind, address, size, in_use / cache thread, op / instant track, step, phase (0 begin,
# 1 end) / info corr, op, info index / tag corr, step, variant (the CSVs' call tagging); floats: host start,
# dur / device queued, start, end / memory, cache, instant time
RI_FIELDS, RF_FIELDS = 9, 3

# cc: recorder codes of constant names, then of the batch's op names and task types (from cc[C_NAMES_AT],
# cc[C_TYPES_AT])
C_NONE, C_OP_CALL, C_STEP, C_EXEC, C_HIT, C_EMPTY, C_ALLOC, C_FREE, C_DEVICE, C_NAMES_AT, C_TYPES_AT = range(11)
C_SIZE = 11

# stop reasons
(R_BARRIER, R_LOOP_END, R_DRAWS, R_NO_TEMPLATE, R_NO_FIT, R_ZERO, R_CAPACITY, R_EMPTY, R_LIMIT, R_FOLD,
 R_FLUSH) = range(11)

NORMAL = 1  # simpy.events.NORMAL
HOST_FUNC = 8  # TaskKind.HOST_FUNC
AI_CORE, AI_VECTOR = 0, 1
ALIGNMENT = 512  # opsim.device.memory.ALIGNMENT
NDRAW = 4096  # opsim.scenario.workload._BATCH


class EventArrays(NamedTuple):
    """The batch's scalars and SimPy's event heap."""

    g: Any
    """int64 scalars (rows HN ... NROWS + kind)."""
    gf: Any
    """float64 scalars (NOW, DEV_END, BAR_T)."""
    ht: Any
    """Event times of the heap."""
    hi: Any
    """hi[H_P / H_E / H_KIND / H_IDX, slot]: priority, event id, kind and index of each heap entry."""


class DeviceArrays(NamedTuple):
    """The device model's state: streams and their queues, unit pools and their waiting streams, task slots and
    the workspace allocator (its allocations and free list)."""

    st: Any
    stf: Any
    sq: Any
    pl: Any
    plf: Any
    pw: Any
    pn: Any
    tk: Any
    tkf: Any
    tfree: Any
    al: Any
    """al[field, alloc]; its last row is the stack of free slots."""
    alf: Any
    fa: Any
    fs: Any


class RowArrays(NamedTuple):
    """What the loop records: rows for the recorder (a full trace), the recorder's codes, and the summary's task
    counts per type (a summary-only run)."""

    ri: Any
    rf: Any
    cc: Any
    type_count: Any


class CallArrays(NamedTuple):
    """The host threads and what their calls replay: the loops' steps and variants, the templates, their span
    durations and submitted tasks, their tensor descriptions, and the workspace free's op and task type codes."""

    th: Any
    thf: Any
    draws: Any
    step_nvar: Any
    step_var0: Any
    var_tpl: Any
    tp: Any
    tpf: Any
    durs: Any
    sb: Any
    sbf: Any
    infos: Any
    free_type: int
    free_op: int
