"""Repeated phase-2 runs of a repeatable executor replayed from a template (part of the fast path).

An application that makes an executor repeatable (aclSetAclOpExecutorRepeatable) calls phase 2 of the same
executor again and again, with the same workspace and stream. For an operator of opsim's own library every
such run does the same work: `l2_dfx_phase_2` restores the TLS log info and config from the executor, then
`common_op_executor_run` either resubmits the executor's usable OpExecCache (AI Core launches recorded on its
first run) or, for an executor of DirectInvoke tasks (which abandon the cache), binds the workspace and runs
every launcher, whose launch callback submits device tasks computed from its launch state and its argument
descriptors. Running the framework for it again costs several times more than the simulation it drives.

After one such run has gone through the framework (`HostThread.call`), `capture` keeps what it did as a
`Phase2Template` of the thread: its host spans and device tasks and the state the run leaves. `find` hands
the template back for a later call only when everything the run reads is unchanged: the same function,
executor, workspace, size and stream objects; the process settings and per-call switches the hit templates
check (`opsim.fastpath.hit_replay`); the executor's fields phase 2 decides on (alive, repeatable, its
launchers, graph, tensor relations, cache, planned workspace size, API name, core counts, dump switch; what
it only copies or binds is read afresh by `replay`); for a cache run the cache (usable, its API name, its recorded tasks); for a launcher
run every launcher (not destroyed, its callback, launch state and argument context), every field of each
launch state (a dataclass of plain values) and the descriptor fields of every argument (unless the callback
declares `state_only`: what it submits depends on its launch state alone). `replay` applies the
run's state changes in the framework's order, records its host spans and submits its device tasks with the
caller's correlation id (set by the caller, not by the call), and returns the end of its host time. Only
launch callbacks of opsim's own operators are accepted: they submit through `rt.submit_kernel` and read
nothing else. A call the template does not cover runs through the framework as before.
"""
from __future__ import annotations

import dataclasses
from operator import attrgetter, call
from types import FunctionType
from typing import TYPE_CHECKING, Any

from opsim.acl.tensor import TensorList
from opsim.opdev.direct_invoke import DirectInvokeKernelLauncher
from opsim.opdev.executor import AclOpExecutor
from opsim.opdev.op_args import OpArgDef
from opsim.opdev.op_def import RepeatMode
from opsim.opdev.op_exec_cache import args_snapshot, fields_unchanged
from opsim.opdev.thread_local import A_SPAN, A_SUBMIT, OpLogInfo
from opsim.fastpath.hit_replay import (TEMPLATES_MAX, apply_cache_run, cache_run_effects, captured_settings,
                                      host_replay, library_fn, plain, plain_task, settings_unchanged)

if TYPE_CHECKING:
    from opsim.runtime.host_thread import HostThread  # (the layer above: a type-only back-reference)

PHASE_2_ENTRY = "L2 phase2 entry"
"""The first host span of every L2 phase 2 (`l2_dfx_phase_2`): what makes `HostThread.call` offer a call to
`capture`."""
_BIND = "update tensor addr"  # the span of a launcher run's address binding (a cache run has none)
_CACHE_REPLAY = "cache replay"

_executor = attrgetter("alive", "repeat_mode", "op_exec_cache", "graph", "kernel_launch_obj_list", "tensor_relation",
                       "planned_workspace_size", "log_info.l2_api_name", "config.aic_num", "config.aiv_num",
                       "config.is_op_dump_enable")
"""What phase 2 decides on of a repeatable executor (what it only copies or binds, the rest of its log info
and config and its workspace tensors, `replay` reads afresh)."""
_nodes = attrgetter("nodes")
_cache = attrgetter("usable", "l2_name", "tasks")
_launcher = attrgetter("destroyed", "launch_fn", "launch_state", "args", "args.destroy_count")
_tensors = attrgetter("tensors")
_PLAIN_VALUES = (int, float, str, bool, type(None))


class Phase2Template:
    """What one phase-2 run of a repeatable executor did, without its time and correlation id."""

    __slots__ = ("fn", "workspace", "size", "executor", "stream", "api", "settings", "readers", "objects", "values",
                 "snapshots", "launcher", "cache", "infos", "profiling", "phases", "ops", "durs", "submits",
                 "busy", "result")


def _plain_value(v: Any) -> bool:
    tv = type(v)
    return tv in _PLAIN_VALUES or (tv is tuple and all(type(x) in _PLAIN_VALUES for x in v))


class _Checks:
    """What a template checks on every call: readers of objects (each an attrgetter: its result at capture is
    kept, lists and dicts as copies of their items, and compared by identity, then by equality) and argument
    snapshots (`op_exec_cache.args_snapshot`)."""

    def __init__(self) -> None:
        self.readers: list = []
        self.objects: list = []
        self.snapshots: list = []

    def add(self, reader: Any, obj: Any) -> None:
        self.readers.append(reader)
        self.objects.append(obj)

    def values(self) -> tuple:
        return tuple(_kept(v) for v in map(call, self.readers, self.objects))


def _kept(v: Any) -> Any:
    """A value as a template keeps it: lists and dicts (also inside a tuple) by a copy of their items."""
    tv = type(v)
    if tv is list or tv is dict:
        return v.copy()
    if tv is tuple:
        return tuple(map(_kept, v))
    return v


def _launcher_checks(launchers: list, checks: _Checks) -> bool:
    """Add the checks of a launcher run (each launcher, its launch state, its arguments); False when a
    launcher's run could depend on something they do not cover."""
    for launcher in launchers:
        if type(launcher) is not DirectInvokeKernelLauncher or launcher.args is None:
            return False
        fn = launcher.launch_fn
        if type(fn) is not FunctionType or not (fn.__module__ or "").startswith("opsim.ops."):
            return False
        checks.add(_launcher, launcher)
        state = launcher.launch_state
        if state is not None:  # a dataclass of plain values: all of its fields, by value
            if not dataclasses.is_dataclass(state) or isinstance(state, type) or not hasattr(state, "__dict__"):
                return False
            if not all(map(_plain_value, vars(state).values())):
                return False
            checks.add(vars, state)
        values = []
        for kind in (OpArgDef.OP_INPUT_ARG, OpArgDef.OP_OUTPUT_ARG, OpArgDef.OP_ATTR_ARG, OpArgDef.OP_WORKSPACE_ARG,
                     OpArgDef.OP_OUTSHAPE_ARG):
            for arg in launcher.args.kind_args(kind):
                v = arg.value
                if type(v) is TensorList:
                    checks.add(_tensors, v)
                    values.extend(v.tensors)
                else:
                    values.append(v)
        if getattr(fn, "state_only", False):  # its submissions depend on the launch state alone
            continue
        snapshot = args_snapshot(tuple(values))
        if snapshot is None:
            return False
        checks.snapshots.append(snapshot)
    return True


def capture(thread: HostThread, fn: Any, args: tuple, kwargs: dict, result: Any) -> None:
    """Keep a template of the call that just ran (its action log still on the thread's context, starting
    with the phase-2 entry span) when it was a successful phase 2 of a repeatable executor that a template
    covers."""
    if kwargs or len(args) != 4 or result != 0 or type(fn) is not FunctionType or not library_fn(fn):
        return
    workspace, size, ex, stream = args
    ctx = thread.ctx
    if (type(ex) is not AclOpExecutor or not ex.alive or ex.repeat_mode != RepeatMode.REPEAT
            or type(workspace) is not int or type(size) is not int or not plain(ctx) or ex.config.is_op_dump_enable):
        return
    acts = ctx.actions
    p = ctx.process
    checks = _Checks()
    checks.add(_executor, ex)
    cache = ex.op_exec_cache
    launcher = None
    if len(acts) > 1 and acts[1][0] == A_SPAN and acts[1][1] == _BIND:  # a launcher run
        graph = ex.graph
        if (cache is not None or ex.tensor_relation or size < ex.planned_workspace_size or graph is None
                or p.numerics):
            return
        launchers = ex.kernel_launch_obj_list
        if any(node.original_id >= len(launchers) for node in graph.nodes):
            return
        order = [launchers[node.original_id] for node in graph.nodes]
        checks.add(_nodes, graph)
        if not _launcher_checks(order, checks):
            return
        launcher = order[-1] if order else None
        infos, profiling = (), None
    else:  # a cache run
        if cache is None or not cache.usable or cache.l2_name != ex.log_info.l2_api_name:
            return
        if len(acts) > 1 and not (acts[1][0] == A_SPAN and acts[1][1] == _CACHE_REPLAY):
            return
        checks.add(_cache, cache)
        infos, profiling = cache_run_effects(cache.tasks)
    # the action log: host spans and plain kernel tasks on `stream`, all with the caller's correlation id
    corr = ctx.current_corr
    phases, ops, durs, submits = [], [], [], []
    busy = 0.0
    for a in acts:
        if a[0] == A_SPAN:
            if a[4] != corr:
                return
            phases.append(a[1]), ops.append(a[2]), durs.append(a[3])
            busy += a[3]
        elif a[0] == A_SUBMIT and a[1] is stream and a[2].corr_id == corr:
            task = plain_task(a[2])
            if task is None:
                return
            submits.append((len(durs), task))
        else:
            return
    tpl = Phase2Template()
    tpl.fn, tpl.workspace, tpl.size, tpl.executor, tpl.stream = fn, workspace, size, ex, stream
    tpl.api = acts[0][2]
    tpl.settings = captured_settings(p)  # the switches all off (plain): compared by value, as the hit templates'
    tpl.readers, tpl.objects, tpl.values = tuple(checks.readers), tuple(checks.objects), checks.values()
    tpl.snapshots = tuple(checks.snapshots)
    tpl.launcher, tpl.cache, tpl.infos, tpl.profiling = launcher, cache if launcher is None else None, infos, profiling
    tpl.phases, tpl.ops, tpl.durs, tpl.submits, tpl.busy = tuple(phases), tuple(ops), tuple(durs), tuple(submits), busy
    tpl.result = result
    table = thread.phase2_templates
    if sum(map(len, table.values())) >= TEMPLATES_MAX:
        table.clear()
    table.setdefault(fn, {})[id(ex)] = tpl


def find(thread: HostThread, fn: Any, args: tuple) -> Phase2Template | None:
    """The template of `fn` for these arguments when the call would do exactly what it did, else None (the
    thread's host-action log is empty: checked by the caller)."""
    by_executor = thread.phase2_templates.get(fn)
    if by_executor is None or len(args) != 4:
        return None
    tpl = by_executor.get(id(args[2]))
    if tpl is None or args[0] is not tpl.workspace or args[1] is not tpl.size or args[3] is not tpl.stream:
        return None
    ctx = thread.ctx
    if (ctx.use_pta_hash or ctx.pending_overflow_task or not settings_unchanged(ctx.process, tpl.settings)
            or tuple(map(call, tpl.readers, tpl.objects)) != tpl.values):
        return None
    for snapshot in tpl.snapshots:
        if not fields_unchanged(snapshot):
            return None
    return tpl


def replay(thread: HostThread, tpl: Phase2Template) -> float:
    """The framework's phase 2 for `tpl` (l2_dfx_phase_2, then common_op_executor_run's cache run or launcher
    run) and the host replay of its actions (`HostThread.spend_actions`) up to the clock: returns the time the
    thread's host work ends (the caller spends it)."""
    ctx = thread.ctx
    ex = tpl.executor
    rec = ctx.process.recorder
    corr = ctx.current_corr
    ctx.current_op = tpl.api
    li = ex.log_info
    ctx.config = ex.config.copy()
    launcher = tpl.launcher
    if tpl.cache is not None:  # OpExecCache.run of the usable cache
        ctx.log_info = OpLogInfo(li.l2_api_name, None, li.l2_sequence_counter)
        apply_cache_run(ctx, rec, corr, tpl.infos, tpl.profiling)
    else:  # the workspace bound, every launcher run: the last one's DFX context is left in the TLS
        ctx.log_info = OpLogInfo(li.l2_api_name, launcher.op_log_info.l0_name if launcher is not None else None,
                                 li.l2_sequence_counter)
        ctx.op_cache_context = None
        ex.stream = tpl.stream
        ex.update_tensor_addr(tpl.workspace, tpl.size)
        if launcher is not None:
            ids, tls = launcher.profiling_info_id, ctx.profiling_info_id
            tls.tiling_profiling_id, tls.kernel_launcher_id, tls.summary_item_id = \
                ids.tiling_profiling_id, ids.kernel_launcher_id, ids.summary_item_id
        ctx.executor = None
    ex.runs += 1
    thread.calls += 1
    return host_replay(thread, tpl, rec, thread.env.now, corr)[-1]
