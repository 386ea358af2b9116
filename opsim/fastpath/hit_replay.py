"""Steady-state executor-cache hits replayed from a template (part of the fast path).

A call that hits the thread's OpExecCache does the same work every time it is repeated with the same
arguments: phase 1 finds the same cache entry, phase 2 resubmits the same recorded tasks, and the host
spans have the same durations. Running the framework for it again costs several times more than the
simulation it drives. After one such hit has run through the framework, `capture` keeps what it did as a
`HitTemplate`; `find` hands the template back for a later call only when everything the hit path reads is
unchanged (the argument objects and every field that enters the key, the process settings the hit path
branches on, the cache entry still in the thread's key container and usable); `replay` then applies exactly
the state changes and records of the framework's hit path (sequence counter, TLS log info and config, LRU
order, profiling ids, the hit record, the host spans, the device tasks) and spends the host time like
`HostThread.spend_actions`. A workspace is allocated and freed as `run_op` does it. Anything unusual (profiling
reports, dumps, numerics, faults, the PTA path, an operator from outside opsim's library, a call whose action
log is not the plain hit pattern) is never captured, and such a call runs through the framework as before.
"""
from __future__ import annotations

from itertools import accumulate
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from opsim.device.task import DeviceTask
from opsim.opdev import dfx
from opsim.opdev.op_exec_cache import args_snapshot, fields_unchanged
from opsim.opdev.thread_local import A_CALL, A_SPAN, A_SUBMIT, CacheEventAt, OpLogInfo
from opsim.ops.profiled import PROFILED_HOST

if TYPE_CHECKING:
    from opsim.opdev.process import ProcessContext
    from opsim.opdev.thread_local import ThreadLocalContext
    from opsim.runtime.host_thread import HostThread  # (the layer above: a type-only back-reference)

TEMPLATES_MAX = 4096
"""Templates kept per thread (distinct argument sets in use) before the thread's table is emptied."""

_PHASE_1 = ("L2 phase1 entry", "make key", "match cache")
_PHASE_2 = "L2 phase2 entry"


class HitTemplate:
    """What one executor-cache hit did, without its times and correlation id."""

    __slots__ = ("run", "args", "snapshot", "stream", "api", "api_1", "cache", "tasks", "key", "storages",
                 "tensors", "aic", "aiv", "level", "settings", "phases", "ops", "durs", "busy", "hit_at", "submits",
                 "infos", "profiling", "pre_call", "size", "clocks", "rows")


def exec_hit_record(fn: Any) -> bool:
    """`fn` is phase 1's record of an exec-cache hit (l2_dfx_phase_1's `CacheEventAt`)."""
    return type(fn) is CacheEventAt and fn.cache == "exec" and fn.kind == "hit"


def library_fn(fn: Any) -> bool:
    """An operator of opsim's own library (the L2 skeleton of opsim.ops._common; a profiled op adds at most
    its host-time top-up span), possibly wrapped with a `pre_call(ctx)` hook (the scenario runner's
    correlation tagging)."""
    if hasattr(fn, "pre_call"):
        fn = fn.__wrapped__
    mod = getattr(fn, "__module__", None) or ""
    return mod.startswith("opsim.ops.")


THREAD_SWITCHES = ("use_pta_hash", "pending_overflow_task")
PROCESS_SWITCHES = ("faults", "profiling.report_flag", "profiling.kernel_launch_flag")
"""The per-call switches (of the thread's context, of the process) that make the hit path do more than a
template records: PTA mode, a pending overflow task, faults, profiling reports."""
switches = attrgetter(*THREAD_SWITCHES, *(f"process.{name}" for name in PROCESS_SWITCHES))
"""The switches of a thread's context and its process, in one C call."""


def switched_on(ctx: ThreadLocalContext) -> bool:
    """One of `switches` is on."""
    return any(switches(ctx))


SETTINGS = ("aic_num", "aiv_num", "deterministic_level", "strong_consistency", "cost", "op_dump", "numerics",
            "exception_dump", "overflow_dump", "profiling.record_op_arg_flag", "profiling.level2_profiling_flag",
            "disable_l2_cache")
"""The process settings a hit (or a repeated phase 2) reads (`record_op_args` and `level2_profiling` are
properties reading the two profiling flags): equal to a template's captured ones (taken while `plain` held)
and with no per-call switch on, the path is the template's."""


class CapturedSettings(NamedTuple):
    """SETTINGS and PROCESS_SWITCHES of a process as a template keeps them (taken while `plain` held: the switches
    all off, the faults table as a copy), each under its attribute's name (a test holds the names together)."""

    aic_num: Any
    aiv_num: Any
    deterministic_level: Any
    strong_consistency: Any
    cost: Any
    op_dump: Any
    numerics: Any
    exception_dump: Any
    overflow_dump: Any
    record_op_arg_flag: Any
    level2_profiling_flag: Any
    disable_l2_cache: Any
    faults: Any
    report_flag: Any
    kernel_launch_flag: Any


process_settings = attrgetter(*SETTINGS, *PROCESS_SWITCHES)
"""The settings and the process's switches in one C call, in CapturedSettings' order."""


def settings_unchanged(p: ProcessContext, s: CapturedSettings) -> bool:
    """Every setting and switch of `p` equals the captured one of the same name, stopping at the first difference
    (quicker than building a CapturedSettings and comparing); a call whose values differ in any way is not the
    template's (stricter than `switched_on`)."""
    prof = p.profiling
    return (p.aic_num == s.aic_num and p.aiv_num == s.aiv_num and p.deterministic_level == s.deterministic_level
            and p.strong_consistency == s.strong_consistency and p.cost == s.cost and p.op_dump == s.op_dump
            and p.numerics == s.numerics and p.exception_dump == s.exception_dump
            and p.overflow_dump == s.overflow_dump and prof.record_op_arg_flag == s.record_op_arg_flag
            and prof.level2_profiling_flag == s.level2_profiling_flag and p.disable_l2_cache == s.disable_l2_cache
            and p.faults == s.faults and prof.report_flag == s.report_flag
            and prof.kernel_launch_flag == s.kernel_launch_flag)


def captured_settings(p: ProcessContext) -> CapturedSettings:
    """The settings and switches of `p` as a template keeps them: a table (the faults) as a copy of its items."""
    return CapturedSettings(*(v.copy() if type(v) is dict else v for v in process_settings(p)))


def plain(ctx: ThreadLocalContext) -> bool:
    """Nothing makes the hit path do more than the template records (checked once, at capture)."""
    p = ctx.process
    return not (switched_on(ctx) or p.op_dump or (p.numerics and p.device is not None) or p.exception_dump
                or p.overflow_dump or p.record_op_args or p.level2_profiling or p.disable_l2_cache)


def plain_task(dt: DeviceTask) -> tuple | None:
    """A submitted kernel task's `Stream.submit_kernel` arguments (those between its time and its correlation
    id), or None when it carries more than a plain kernel (a callback, an event, bytes)."""
    if dt.callback is not None or dt.on_done is not None or dt.event is not None or dt.nbytes:
        return None
    return dt.kind, dt.duration, dt.block_dim, dt.op_name, dt.task_type


def memoised_key(p: ProcessContext, key: bytes) -> bool:
    """`key` came from the process's phase-1 key memo, i.e. from arguments whose key bytes are fully known
    (what makes a template's argument checks cover its key)."""
    return any(v[1][0] is key for v in p.key_memo.values())


def workspace_fits(p: ProcessContext, tpl: Any) -> bool:
    """A template's workspace (none, or `tpl.size` bytes) can be allocated now (else the framework path runs
    and records the failed allocation)."""
    return not tpl.size or p.device.memory.can_malloc(tpl.size)


def replay_workspace(p: ProcessContext, tpl: Any, start: float) -> None:
    """run_op's aclrtMalloc of a template's workspace and its stream-ordered free, at the times the framework's
    clock gave them (`tpl.clocks`, from the call's start)."""
    if tpl.size:
        memory = p.device.memory
        workspace = memory.malloc(tpl.size, at=start + tpl.clocks[0])[1]
        memory.free_async(workspace, tpl.stream, start + tpl.clocks[1])


def memo_key(gws: Any, stream: Any, args: tuple) -> tuple:
    """A template's place in its thread's table: callee, stream and the arguments' identities (the template
    holds every argument, so a matching key means the very same objects)."""
    return (gws, stream, *map(id, args))


def tuple_key(gws: Any, stream: Any, args: tuple) -> tuple:
    """A template's second place in its table: callee, stream and the identity of the argument tuple itself
    (the template holds it), found without reading the arguments when a caller passes the same tuple again;
    its last item tells it from a `memo_key`."""
    return (gws, stream, id(args), None)


def capture(thread: HostThread, gws: Any, run: Any, args: tuple, stream: Any, api: str, executor: Any, acts: list,
            size: int, clocks: tuple[float, float] | None) -> None:
    """Keep a template of the call that just ran when it was a plain executor-cache hit (`acts`: its whole
    host-action log, calibration applied; `size`: its workspace; `clocks`: with a workspace, the host time
    charged before its malloc and before its stream-ordered free, as acl_rt's clock summed it)."""
    ctx = thread.ctx
    p = ctx.process
    if getattr(executor, "kind", None) != "wrap" or not library_fn(gws) or not library_fn(run) or not plain(ctx):
        return
    cache = executor.cache
    key = ctx.key
    p1 = acts[0][2] if acts and acts[0][0] == A_SPAN else None  # phase 1's API name (a profiled op's may differ)
    if not key or p1 is None or ctx.log_info.l2_api_name != p1 or not cache.can_use(p1):
        return
    if not memoised_key(p, key):
        return
    snapshot = args_snapshot(args)
    if snapshot is None:
        return
    log = _hit_log(acts, p1, api, cache.tasks, stream, size, p.recorder.enabled)
    if log is None:
        return
    tpl = HitTemplate()
    tpl.run, tpl.snapshot, tpl.stream, tpl.api, tpl.api_1 = run, snapshot, stream, api, p1
    tpl.cache, tpl.tasks = cache, cache.tasks
    tpl.key, tpl.storages, tpl.tensors = key, ctx.l2_storage_list, ctx.l2_tensor_list
    tpl.aic, tpl.aiv, tpl.settings = p.aic_num, p.aiv_num, captured_settings(p)
    tpl.level = dfx.deterministic_level_from_rt(ctx)  # no faults here: the plain query
    log.fill(tpl)
    tpl.infos, tpl.profiling = cache_run_effects(cache.tasks)
    tpl.pre_call = getattr(gws, "pre_call", None)
    tpl.size, tpl.clocks = size, clocks
    tpl.rows = None
    store(thread.hit_templates, gws, stream, args, tpl)


def _hit_log(acts: list, p1: str, api: str, tasks: list, stream: Any, size: int, recorded: bool) -> ActionLog | None:
    """The action log of a plain hit, read (None when it is not one): 3 phase-1 spans, the hit record (when
    recording), the workspace malloc (with one) and the phase-2 entry, then per recorded task the replay and
    launch spans and (with a stream) its submission, then a profiled op's top-up to its recorded host time and
    the workspace's free."""
    log = ActionLog(acts)
    if not all(log.span(phase, p1) for phase in _PHASE_1):
        return None
    log.hit_at = len(log.durs)
    if recorded and not log.call(exec_hit_record):
        return None
    if (size and not log.span("rt malloc", p1)) or not log.span(_PHASE_2, api):
        return None
    for task in tasks:
        if not (log.span("cache replay", task.op_name) and log.span("launch", task.op_name)):
            return None
        if stream is not None and not log.submit(stream):
            return None
    log.span(PROFILED_HOST, api)
    if size and (stream is None or not log.span("rt free", api)):
        return None
    return log if log.at_end() else None


class ActionLog:
    """A call's host-action log read in order against the pattern a template repeats, keeping what the
    template replays: its host spans (`phases`, `ops`, `durs`) and its submissions (span index and the task's
    `Stream.submit_kernel` arguments)."""

    __slots__ = ("acts", "i", "phases", "ops", "durs", "submits", "hit_at")

    def __init__(self, acts: list) -> None:
        self.acts, self.i = acts, 0
        self.phases: list[str] = []
        self.ops: list[str] = []
        self.durs: list[float] = []
        self.submits: list[tuple] = []
        self.hit_at = 0

    def span(self, phase: str, op: str) -> bool:
        """The next action is the host span `phase` of `op`: kept, and stepped over."""
        acts, i = self.acts, self.i
        if i >= len(acts) or acts[i][0] != A_SPAN or acts[i][1] != phase or acts[i][2] != op:
            return False
        self.phases.append(phase), self.ops.append(op), self.durs.append(acts[i][3])
        self.i = i + 1
        return True

    def call(self, test: Callable[[Any], bool]) -> bool:
        """The next action is a callback for which `test` holds: stepped over."""
        acts, i = self.acts, self.i
        if i >= len(acts) or acts[i][0] != A_CALL or not test(acts[i][1]):
            return False
        self.i = i + 1
        return True

    def submit(self, stream: Any) -> bool:
        """The next action submits a plain kernel task to `stream`: kept at the current span, and stepped over."""
        acts, i = self.acts, self.i
        if i >= len(acts) or acts[i][0] != A_SUBMIT or acts[i][1] is not stream:
            return False
        task = plain_task(acts[i][2])
        if task is None:
            return False
        self.submits.append((len(self.durs), task))
        self.i = i + 1
        return True

    def at_end(self) -> bool:
        """Every action was read."""
        return self.i == len(self.acts)

    def fill(self, tpl: Any) -> None:
        """The template's host spans (`phases`, `ops`, `durs`, `busy`: their sum, added in order), its
        submissions and the span index of its cache hit."""
        busy = 0.0
        for d in self.durs:
            busy += d
        tpl.phases, tpl.ops, tpl.durs, tpl.busy = tuple(self.phases), tuple(self.ops), tuple(self.durs), busy
        tpl.submits, tpl.hit_at = tuple(self.submits), self.hit_at


def store(table: dict, gws: Any, stream: Any, args: tuple, tpl: Any) -> None:
    """Keep `tpl` (a template of a call of `gws` with `args` on `stream`) in one of a thread's template tables,
    under its `memo_key` and its `tuple_key` (the table is emptied when it holds TEMPLATES_MAX keys)."""
    if len(table) >= TEMPLATES_MAX:
        table.clear()
    tpl.args = args
    table[memo_key(gws, stream, args)] = table[tuple_key(gws, stream, args)] = tpl


def lookup(table: dict, thread: HostThread, gws: Any, run: Any, args: tuple, stream: Any, api: str | None) -> Any:
    """The template of `table` for this call when its callee and API are the captured ones, the thread has no
    pending actions, the process settings and per-call switches are as captured (the thread's two,
    THREAD_SWITCHES, read inline) and every field of the arguments is unchanged; else None (what each kind of
    template checks besides is its own)."""
    tpl = table.get((gws, stream, id(args), None))  # tuple_key, inline
    if tpl is None or tpl.args is not args:
        tpl = table.get(memo_key(gws, stream, args))
        if tpl is None:
            return None
    if tpl.run is not run or tpl.api != api:
        return None
    ctx = thread.ctx
    if (ctx.actions or ctx.use_pta_hash or ctx.pending_overflow_task
            or not settings_unchanged(ctx.process, tpl.settings) or not fields_unchanged(tpl.snapshot)):
        return None
    return tpl


def find(thread: HostThread, gws: Any, run: Any, args: tuple, stream: Any, api: str | None, fit: bool = True) -> tuple | None:
    """(template, key-container slot) when the call would take exactly the template's hit path, else None
    (`fit=False`: whatever the workspace, which a batched run checks call by call)."""
    tpl = lookup(thread.hit_templates, thread, gws, run, args, stream, api)
    if tpl is None:
        return None
    ctx = thread.ctx
    p = ctx.process
    cache = tpl.cache
    m = ctx.op_cache_manager
    slot = m.slot_of(tpl.key) if m is not None else None
    if (slot is None or m.container[slot][1] is not cache or cache.key != tpl.key or not cache.can_use(tpl.api_1)
            or cache.tasks is not tpl.tasks):
        return None
    return (tpl, slot) if not fit or workspace_fits(p, tpl) else None


def replay(thread: HostThread, tpl: HitTemplate, slot: int, start: float, deferred: bool = False) -> list[float]:
    """The framework's hit path for `tpl` (l2_dfx_phase_1 on a hit, l2_dfx_phase_2, OpExecCache.run, the
    wrapper's deletion) and the host replay of its actions (`HostThread.spend_actions`) up to the clock:
    returns the starts of its host spans and the time the thread's host work ends (run_op spends it and records
    the call). `start`: the clock now. `deferred`: its tensor descriptions, host spans and cache hit are left to
    the caller's `Recorder.hit` with the template's `rows` (no device task runs code that records those kinds, so
    taking them after the device model has caught up keeps every kind's record order).

    Compiled twin: the call in `opsim.fastpath.batch_kernel._call` (a batched loop's hits)."""
    ctx = thread.ctx
    p = ctx.process
    rec = p.recorder
    corr = ctx.current_corr = rec.next_corr()
    if tpl.pre_call is not None:
        tpl.pre_call(ctx)
    seq = p.next_sequence()
    enter_phase_1(ctx, tpl, seq)
    ctx.op_cache_manager.container.move_to_end(slot)
    replay_workspace(p, tpl, start)
    enter_phase_2(ctx, tpl, seq)
    if not deferred:
        record_infos(rec, corr, tpl.infos)
    thread.calls += 1
    starts = host_replay(thread, tpl, rec, start, corr, not deferred)
    if not deferred and rec.enabled:
        rec.cache_event(starts[tpl.hit_at], thread.name, "exec", "hit", tpl.api_1, 0, "")
    return starts


def keep_rows(rec: Any, thread: HostThread, tpl: HitTemplate) -> None:
    """Keep the template's records as `Recorder.hit` takes them (False: it cannot), once a replay has recorded
    them all (so that finding their codes gives out none)."""
    tpl.rows = rec.hit_rows(thread.name, tpl.phases, tpl.ops, tpl.durs, tpl.api, tpl.api_1, tpl.infos) or False


def enter_phase_1(ctx: ThreadLocalContext, tpl: HitTemplate, seq: int) -> None:
    """Phase 1's TLS writes on a hit: log info and config, key and L2 lists (the current op is phase 1's API
    name until phase 2 names its own, which nothing here reads in between)."""
    ctx.current_op = tpl.api
    li = ctx.log_info
    li.l2_api_name = tpl.api_1
    li.l0_name = None
    li.l2_sequence_counter = seq
    cfg = ctx.config
    cfg.aic_num, cfg.aiv_num = tpl.aic, tpl.aiv
    cfg.is_op_dump_enable = False
    cfg.deterministic_level = level = tpl.level
    cfg.is_deterministic_on = level >= 1
    ctx.key = tpl.key
    ctx.hash_key = 0
    ctx.l2_storage_list = tpl.storages
    ctx.l2_tensor_list = tpl.tensors


def enter_phase_2(ctx: ThreadLocalContext, tpl: HitTemplate, seq: int) -> None:
    """Phase 2's TLS writes: the log info restored from the wrapper's copy, the profiling ids of the last
    recorded task."""
    ctx.log_info = OpLogInfo(tpl.api_1, None, seq)
    set_profiling_ids(ctx, tpl.profiling)


def cache_run_effects(tasks: list) -> tuple[tuple, tuple | None]:
    """What `OpExecCache.run` over `tasks` leaves besides its actions: the tensor descriptions it records
    ((op, info) per task that has one) and the profiling ids of its last task (None: no task)."""
    return tuple((t.op_name, t.info) for t in tasks if t.info is not None), tasks[-1].profiling if tasks else None


def apply_cache_run(ctx: ThreadLocalContext, rec: Any, corr: int, infos: tuple,
                    profiling: tuple | None) -> None:
    """Those effects again."""
    set_profiling_ids(ctx, profiling)
    record_infos(rec, corr, infos)


def set_profiling_ids(ctx: ThreadLocalContext, profiling: tuple | None) -> None:
    """What `report_replayed_task` leaves with profiling reports off: the two TLS ids of the last recorded
    task (none: unchanged)."""
    if profiling is not None:
        ids = ctx.profiling_info_id
        ids.kernel_launcher_id, ids.summary_item_id = profiling


def record_infos(rec: Any, corr: int, infos: tuple) -> None:
    """A template's tensor descriptions ((op, info) per launch) under the call's correlation id."""
    if infos and rec.enabled:
        for op, info in infos:
            rec.tensor_info(corr, op, info)


def host_replay(thread: HostThread, tpl: Any, rec: Any, start: float, corr: int, spans: bool = True) -> list[float]:
    """`HostThread.spend_actions` of a template's action log from `start`: its host spans back to back (`phases`,
    `ops`, `durs`; recorded unless `spans` is off), its device tasks (`submits`: span index and the task's
    `Stream.submit_kernel` arguments) submitted to `stream` at their points, its busy time added. Returns the
    span starts and the end."""
    durs = tpl.durs
    starts = list(accumulate(durs, initial=start))
    if spans and rec.enabled:
        rec.host_spans(thread.name, tpl.phases, tpl.ops, start, durs, corr)
    if tpl.submits:
        submit = tpl.stream.submit_kernel
        for i, (kind, dur, block_dim, op, task_type) in tpl.submits:
            submit(starts[i], kind, dur, block_dim, op, task_type, corr)
    thread.busy_us += tpl.busy
    return starts
