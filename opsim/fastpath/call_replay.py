"""Calls that run phase 1 in full every time, replayed from a template (part of the fast path).

Some calls never take the OpExecCache's hit path however often they are repeated: with ACLNN_CACHE_LIMIT=0
the thread's cache refuses every insertion, and an AI CPU launch abandons its executor's cache. Each such
call builds an executor, its launchers, argument contexts and graph, launches and destroys them all: a few
hundred Python calls whose only lasting effects are a few TLS fields, the sequence counter, the state of the
AI CPU tasks it found in their task cache, the records and the device tasks. After one such call has run
through the framework, `before` / `launchers_of` / `capture` keep those effects as a `CallTemplate`, and
only when the call changed nothing else (a fingerprint of the rest of the opbase state taken before and after
it must be equal: no cache insertion, eviction, task creation, overflow task, dump, warning, ...).
`find` hands the template back for a later call only when everything the call reads is unchanged: the
argument objects with every descriptor field, the process settings and per-call switches (hit_replay's
checks), the thread's cache state that made it miss (the key absent from the key container, the same
cacheHasFull), and each AI CPU task still first in its bucket, free, on the same stream, with the same task
count in its space. `replay` then applies exactly the framework's state changes and records in its order.
Anything else (a hit, a failure, profiling, dumps, numerics, faults, PTA mode, an operator from outside
opsim's library, a launcher other than AI Core or cached-task AI CPU, a synchronisation, a memcpy, an AI CPU
input tensor that is not an argument) is never captured and runs through the framework
as before.
"""
from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any

from opsim.acl.tensor import Tensor
from opsim.device.task import TaskKind
from opsim.opdev import dfx
from opsim.opdev.aicpu.key import convert_to_host_tensor, flatten_aicpu_inputs
from opsim.opdev.aicpu.launcher import AiCpuKernelLauncher
from opsim.opdev.aicpu.task import AicpuCCTask
from opsim.opdev.launchers import AiCoreKernelLauncher
from opsim.opdev.op_exec_cache import args_snapshot
from opsim.opdev.thread_local import A_CALL, A_SPAN, A_SUBMIT, CacheEventAt, OpConfigInfo, OpLogInfo
from opsim.fastpath.hit_replay import (captured_settings, host_replay, library_fn, lookup, memoised_key, plain,
                                      plain_task, record_infos, replay_workspace, store, workspace_fits)

if TYPE_CHECKING:
    from opsim.opdev.process import ProcessContext
    from opsim.opdev.thread_local import ThreadLocalContext
    from opsim.runtime.host_thread import HostThread  # (the layer above: a type-only back-reference)

_tensor_fields = attrgetter("view_shape", "strides", "storage_shape", "dtype", "view_offset", "view_format",
                            "storage", "storage_format", "origin_shape", "origin_format", "storage.placement",
                            "storage.from_workspace")
"""Every descriptor field a full call can read of an argument tensor (key, checks, tiling, cost, tensor
description, AI CPU shapes), in one C call."""

_KERNEL_KINDS = frozenset((TaskKind.AI_CORE, TaskKind.AI_VECTOR, TaskKind.AI_CPU))
_PHASE_1 = "L2 phase1 entry"
_REPLAYED_EVENTS = frozenset((("exec", "miss"), ("aicpu", "hit")))
"""The (cache, kind) of the cache records a full call's template replays."""


class Pending:
    """What `capture` compares with: the state before the call and the launchers phase 1 registered."""

    __slots__ = ("state", "seq", "infos", "full", "launchers", "inputs", "owned")


class CallTemplate:
    """What one full call did, without its times and correlation id."""

    __slots__ = ("run", "args", "snapshot", "stream", "api", "api_1", "settings", "full", "pool", "manager", "key",
                 "storages", "tensors", "config", "current_op", "aicore", "impl_mode", "ids", "tasks", "phases",
                 "ops", "durs", "busy", "submits", "events", "infos", "pre_call", "size", "clocks")


def _fingerprint(ctx: ThreadLocalContext) -> tuple:
    """The opbase state a plain full call leaves as it found it (compared by value, objects by identity): the
    thread's cache state, its PTA / overflow / pool fields, the process's AI CPU spaces and globals, DFX
    outputs, warnings and the recorder's correlation counter."""
    p = ctx.process
    m = ctx.op_cache_manager
    mgr = None if m is None else (m, len(m.container), *m.slot_state(), m.evictions, len(m.hash_map),
                                  next(reversed(m.container), None))
    spaces = tuple((s, s.task_count, s.live_launchers, s.has_init, len(s.hash_map))
                   for s in p.aicpu_spaces.values())
    return (ctx.cache_has_full, mgr, ctx.pending_overflow_task, ctx.pool_index, ctx.use_pta_hash, ctx.hash_key,
            ctx.cache_api, ctx.cached_tensor_list_size, ctx.launcher_ctx, ctx.l2_io_tensors, spaces,
            len(p.aicpu_registry), p.aicpu_kernel_lib, p.aicpu_print_index, tuple(p.aicpu_timestamps),
            len(p.warnings), len(p.dumps), len(p.overflows), len(p.profiling_reports), len(p.huge_mem.free),
            p.recorder.last_corr)


def before(thread: HostThread, gws: Any, run: Any, stream: Any) -> Pending | None:
    """The state before a call that could be captured (None when it cannot: no stream, an operator from
    outside opsim's library, or something unusual switched on)."""
    ctx = thread.ctx
    if stream is None or not library_fn(gws) or not library_fn(run) or not plain(ctx):
        return None
    p = ctx.process
    pre = Pending()
    pre.state = _fingerprint(ctx)
    pre.seq = p.l2_sequence_counter
    pre.infos = len(p.recorder.tensor_infos)
    pre.full = ctx.cache_has_full
    pre.launchers = pre.inputs = pre.owned = None
    return pre


def launchers_of(pre: Pending, executor: Any) -> None:
    """Phase 1 returned `executor`: keep its launchers, the input OpArgs of its AI CPU launchers and the objects
    it allocated (all destroyed with it in phase 2)."""
    if getattr(executor, "kind", None) == "executor":
        pre.launchers = launchers = tuple(executor.kernel_launch_obj_list)
        pre.inputs = tuple(tuple(l.args.inputs()) if type(l) is AiCpuKernelLauncher else None for l in launchers)
        pre.owned = tuple(executor.allocated_obj_list) if any(pre.inputs) else ()


def _event(fn: Any) -> tuple | None:
    """(cache, kind, op, seed, detail) of a recorded-cache-event callback of a full call: the exec-cache miss
    of phase 1 or an AI CPU task-cache hit (each a `CacheEventAt`); None for any other callback."""
    if type(fn) is not CacheEventAt or (fn.cache, fn.kind) not in _REPLAYED_EVENTS:
        return None
    return fn.cache, fn.kind, fn.op, fn.seed, fn.detail


def _aicpu_task(launcher: Any, inputs: tuple, args: tuple, owned: tuple, stream: Any) -> tuple | None:
    """What a cached-task AI CPU launcher's lookup and launch depend on and leave, or None when its task is
    not plainly reusable (not in its bucket, a tensor that is not an argument, a host input placed in the
    device region). `inputs`: the launcher's input OpArgs; each launch converts a scalar or int array among
    them (an argument, or one phase 1 allocated from the arguments: `owned`) into a new host tensor, which a
    replay makes afresh from the same object (`flatten_aicpu_inputs`)."""
    task = launcher.task
    space = task.space if task is not None else None
    if space is None or task.released or task.is_visit or task.holder is not None:
        return None
    ids = set(map(id, args))
    if any(t is not None and id(t) not in ids for t in task.outputs):
        return None
    if len(inputs) != len(task.inputs):
        return None  # a tensor list input
    sources = ids | set(map(id, owned))
    converted = False
    for (_, value), t in zip(inputs, task.inputs):
        if value is t:
            if t is not None and id(t) not in ids:
                return None
        elif value is None or id(value) not in sources or type(value) is Tensor:
            return None
        else:
            converted = True
    if any(where != "inline" for _, where, _ in task.host_input_placement):
        return None
    bucket = space.hash_map.get(task.seed)
    index = next((i for i, t in enumerate(bucket or ()) if t is task), None)
    cc = isinstance(task, AicpuCCTask)
    if index is None or (cc and task.stream is not stream):
        return None
    return (task, space, bucket, index, task.key, space.task_count, cc, inputs if converted else tuple(task.inputs),
            converted, tuple(task.outputs), task.device_cache_offset, tuple(task.host_input_placement))


def capture(thread: HostThread, pre: Pending, gws: Any, run: Any, args: tuple, stream: Any, api: str, executor: Any,
            acts: list, size: int, clocks: tuple[float, float] | None) -> None:
    """Keep a template of the call that just ran (`acts`: its host-action log, calibration applied) when it
    ran phase 1 in full with nothing but a full call's effects (see the module docstring)."""
    ctx = thread.ctx
    p = ctx.process
    if not _left_alone(ctx, pre, executor, acts):
        return
    snapshot = args_snapshot(args, _tensor_fields)
    if snapshot is None:
        return
    launches = _launches(pre, args, stream)
    if launches is None:
        return
    log = _call_log(acts, ctx.current_corr, stream)
    if log is None:
        return
    aicore, tasks = launches
    phases, ops, durs, submits, events = log
    rec = p.recorder
    if rec.enabled and (sum(e[2] == "miss" for e in events) != 1 or len(events) != 1 + len(tasks)):
        return
    infos = rec.tensor_infos[pre.infos:]
    if any(c != ctx.current_corr for c, _, _ in infos):
        return
    if ctx.config.deterministic_level != dfx.deterministic_level_from_rt(ctx):
        return
    tpl = _template(ctx, pre, run, snapshot, stream, api, acts[0][2])
    tpl.aicore, tpl.tasks = aicore, tasks
    busy = 0.0
    for d in durs:
        busy += d
    tpl.phases, tpl.ops, tpl.durs, tpl.busy = tuple(phases), tuple(ops), tuple(durs), busy
    tpl.submits, tpl.events = tuple(submits), tuple(events)
    tpl.infos = tuple((op, info) for _, op, info in infos)
    tpl.pre_call = getattr(gws, "pre_call", None)
    tpl.size, tpl.clocks = size, clocks
    store(thread.call_templates, gws, stream, args, tpl)


def _left_alone(ctx: ThreadLocalContext, pre: Pending, executor: Any, acts: list) -> bool:
    """The call ran phase 1 in full (its span first, one sequence number, a key from the key memo that its
    cache did not keep) with launchers, destroyed its executor and left the rest of opbase's state as it
    found it (`_fingerprint`, the TLS executor fields, no AI CPU timestamps)."""
    p = ctx.process
    if (not pre.launchers or getattr(executor, "kind", None) != "executor" or executor.alive
            or p.l2_sequence_counter != pre.seq + 1 or _fingerprint(ctx) != pre.state
            or ctx.op_cache_context is not None or ctx.executor is not None or p.aicpu_timestamp_enabled):
        return False
    key = ctx.key
    m = ctx.op_cache_manager
    if not key or m is None or m.has_key(key) or not acts or acts[0][0] != A_SPAN or acts[0][1] != _PHASE_1:
        return False
    return memoised_key(p, key)


def _launches(pre: Pending, args: tuple, stream: Any) -> tuple[bool, tuple] | None:
    """(an AI Core launcher among them, the AI CPU tasks' `_aicpu_task`s) of the call's launchers, or None
    when one is of another kind or its task is not plainly reusable (or is another launcher's)."""
    aicore = False
    tasks: list[tuple] = []
    for launcher, inputs in zip(pre.launchers, pre.inputs):
        kind = type(launcher)
        if kind is AiCoreKernelLauncher:
            aicore = True
        elif kind is AiCpuKernelLauncher:
            task = _aicpu_task(launcher, inputs, args, pre.owned, stream)
            if task is None or any(t[0] is task[0] for t in tasks):
                return None
            tasks.append(task)
        else:
            return None
    return aicore, tuple(tasks)


def _call_log(acts: list, corr: int, stream: Any) -> tuple | None:
    """(phases, ops, durs, submits, events) of a full call's action log: its host spans, its plain kernel
    submissions to `stream` (span index, `Stream.submit_kernel` arguments) and its replayed cache records (span
    index, `_event`), all under `corr`; None for anything else in it."""
    phases, ops, durs, submits, events = [], [], [], [], []
    for a in acts:
        k = a[0]
        if k == A_SPAN:
            if a[4] != corr:
                return None
            phases.append(a[1]), ops.append(a[2]), durs.append(a[3])
        elif k == A_SUBMIT:
            dt = a[2]
            task = plain_task(dt)
            if a[1] is not stream or dt.kind not in _KERNEL_KINDS or task is None or dt.corr_id != corr:
                return None
            submits.append((len(durs), task))
        elif k == A_CALL:
            ev = _event(a[1])
            if ev is None:
                return None
            events.append((len(durs), *ev))
        else:
            return None
    return phases, ops, durs, submits, events


def _template(ctx: ThreadLocalContext, pre: Pending, run: Any, snapshot: Any, stream: Any, api: str,
              api_1: str) -> CallTemplate:
    """A template holding what `find` checks and the TLS state `replay` writes back (the thread's settings,
    key, L2 lists, config, current op, impl mode and profiling ids as the call left them)."""
    p = ctx.process
    cfg = ctx.config
    ids = ctx.profiling_info_id
    tpl = CallTemplate()
    tpl.run, tpl.snapshot, tpl.stream, tpl.api, tpl.api_1 = run, snapshot, stream, api, api_1
    tpl.settings, tpl.full, tpl.pool, tpl.manager = captured_settings(p), pre.full, ctx.pool_index, ctx.op_cache_manager
    tpl.key, tpl.storages, tpl.tensors = ctx.key, ctx.l2_storage_list, ctx.l2_tensor_list
    tpl.config = (cfg.aic_num, cfg.aiv_num, cfg.is_deterministic_on, cfg.is_op_dump_enable, cfg.deterministic_level)
    tpl.current_op = ctx.current_op
    tpl.impl_mode = ctx.impl_mode
    tpl.ids = (ids.tiling_profiling_id, ids.summary_item_id)
    return tpl


def find(thread: HostThread, gws: Any, run: Any, args: tuple, stream: Any, api: str | None) -> CallTemplate | None:
    """The template when the call would do exactly what it recorded, else None."""
    tpl = lookup(thread.call_templates, thread, gws, run, args, stream, api)
    if tpl is None:
        return None
    ctx = thread.ctx
    p = ctx.process
    m = ctx.op_cache_manager
    if m is not tpl.manager or m.has_key(tpl.key) or ctx.cache_has_full is not tpl.full or ctx.pool_index != tpl.pool:
        return None
    if tpl.tasks:
        if p.ge_profiling:
            return None
        for task, space, bucket, index, key, count, cc, *_ in tpl.tasks:
            if (task.is_visit or task.released or space.task_count != count or space.hash_map.get(task.seed)
                    is not bucket or len(bucket) <= index or bucket[index] is not task or (cc and task.stream
                                                                                          is not stream)):
                return None
            for other in bucket[:index]:  # FindTask takes the first free task with the same key
                if not other.is_visit and other.key == key:
                    return None
    return tpl if workspace_fits(p, tpl) else None


def replay(thread: HostThread, tpl: CallTemplate, start: float) -> float:
    """The framework's full call for `tpl` (phase 1 with its miss, executor built and released, phase 2, the
    executor destroyed) and the host replay of its actions up to the clock: returns the time the thread's host
    work ends (run_op spends it and records the call). `start`: the clock now."""
    ctx = thread.ctx
    p = ctx.process
    rec = p.recorder
    corr = ctx.current_corr = rec.next_corr()
    if tpl.pre_call is not None:
        tpl.pre_call(ctx)
    # phase 1: TLS log info and config (in place), key and L2 lists; the lookup misses without a change
    li = ctx.log_info
    li.l2_api_name = tpl.api_1
    li.l0_name = None
    li.l2_sequence_counter = p.next_sequence()
    aic, aiv, det_on, dump, level = tpl.config
    cfg = ctx.config
    cfg.aic_num, cfg.aiv_num, cfg.is_op_dump_enable, cfg.deterministic_level, cfg.is_deterministic_on = (
        aic, aiv, dump, level, det_on)
    ctx.key = tpl.key
    ctx.hash_key = 0
    ctx.l2_storage_list = tpl.storages
    ctx.l2_tensor_list = tpl.tensors
    # phase 2: the executor's config copy, the launches (AI Core: TLS impl mode and profiling ids of the
    # launcher; AI CPU: GetOrCreateTask's timestamp switch, the task's launch state, released after Run), then
    # the executor's destruction (log info reset, kernel launcher id 0)
    ctx.config = OpConfigInfo(aic, aiv, det_on, dump, level)
    ctx.current_op = tpl.current_op
    ctx.op_cache_context = None
    ctx.executor = None
    ids = ctx.profiling_info_id
    if tpl.aicore:
        ctx.impl_mode = tpl.impl_mode
        ids.tiling_profiling_id, ids.summary_item_id = tpl.ids
    ids.kernel_launcher_id = 0
    ctx.log_info = OpLogInfo()
    if tpl.tasks:
        p.aicpu_timestamp_enabled = False
        stream = tpl.stream
        for task, _, _, _, _, _, cc, ins, converted, outs, offset, placement in tpl.tasks:
            task.inputs = flatten_aicpu_inputs(ins, convert_to_host_tensor) if converted else list(ins)
            task.outputs = list(outs)
            task.device_cache_offset = offset
            if cc:
                task.stream = stream
            task.host_input_placement = list(placement)
            task.launches += 1
            task.forget_shapes()
    replay_workspace(p, tpl, start)
    record_infos(rec, corr, tpl.infos)
    thread.calls += 1
    # the host replay (HostThread.spend_actions): spans back to back, submissions and cache records at their points
    starts = host_replay(thread, tpl, rec, start, corr)
    if rec.enabled:
        name = thread.name
        for i, cache, kind, op, seed, detail in tpl.events:
            rec.cache_event(starts[i], name, cache, kind, op, seed, detail)
    return starts[-1]
