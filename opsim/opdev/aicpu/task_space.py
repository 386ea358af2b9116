"""AicpuTaskSpace: the per-op-type cache of initialised AI CPU tasks, and aclnnAicpuFinalize.

An L0 AI CPU op declares one static space; `get_task_space` returns the current process's instance, so every
simulation has its own (opbase's function-local static, per simulated process). The space maps a 64-bit seed
to the tasks created under it, in insertion order; a lookup scans that list, skipping busy tasks and keys of
another length, and needs every key byte to match. A new task is cached while the space holds fewer than
the process's AI CPU cache limit; otherwise it becomes the thread's pending overflow (one-shot) task.

Trace: every lookup records one cache event `cache="aicpu"` of kind "hit", "miss" (created and cached),
"oneshot" (created, not cached) or "error" (Init failed), with the key seed and `detail="cached=<n>"` (tasks
in this space after the event); the counter "aicpu cached tasks" (all spaces of the process) is recorded
whenever a task is cached or a Finalize drops them.
"""
from __future__ import annotations

import logging
from typing import Any

from opsim.acl.dtypes import DataType
from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Placement, Tensor
from opsim.errors import SimulationError, UseAfterDestroyError
from opsim.opdev.aicpu import timestamps as ts
from opsim.opdev.aicpu.key import flatten_aicpu_inputs, gen_task_key_and_seed
from opsim.opdev.memo import put as memo_put, value_key
from opsim.opdev.aicpu.task import (K_MAX_TOTAL_HOST_LEN, AicpuCCTask, AicpuTask, AicpuTfTask,
                                    executor_host_tensor_factory, round_up)
from opsim.opdev.op_args import OpArg, OpArgContext, OpArgType
from opsim.opdev.op_def import UnknowShapeOpType
from opsim.opdev.thread_local import CacheEventAt, current

log = logging.getLogger("opsim.opdev.aicpu")
S = AclnnStatus
T = OpArgType
DEPEND_SHAPE_RANGE = UnknowShapeOpType.DEPEND_SHAPE_RANGE
CACHED_TASKS_COUNTER = "aicpu cached tasks"

_MASK64 = 0xFFFFFFFFFFFFFFFF


def _as_int64(v: int) -> int:
    v &= _MASK64
    return v - (1 << 64) if v >= (1 << 63) else v


def _attr_value(tag: OpArgType, value: Any) -> tuple[bool, Any]:
    """CreateAicpuAttrsImpl: the kernel-attribute value of one ATTR OpArg, (False, None) for other tags."""
    if tag == T.OPARG_INT_LIST:
        return True, [] if value is None else [int(v) for v in value.values]
    if tag == T.OPARG_FLOAT_LIST:
        return True, [] if value is None else [float(v) for v in value.values]
    if tag == T.OPARG_BOOL:
        return True, bool(value)
    if tag == T.OPARG_INT:
        return True, int(value)
    if tag == T.OPARG_UINT:
        return True, _as_int64(int(value))
    if tag == T.OPARG_FLOAT or tag == T.OPARG_DOUBLE:
        return True, float(value)
    if tag == T.OPARG_DATATYPE:
        return True, DataType(value)
    if tag == T.OPARG_STRING:
        return True, "" if value is None else str(value)
    if tag == T.OPARG_ACLTENSOR_LIST:
        return True, value  # the list object itself: its identity is what the kernel receives
    return False, None


def create_aicpu_attrs(attr_args: list[OpArg], attr_names: list[str] | tuple[str, ...]) -> dict:
    """CreateAicpuAttrs: name -> value. A count mismatch is logged (ACLNN_ERR_PARAM_INVALID) and leaves the
    map empty; GetOrCreateTask ignores that status and creates the task anyway."""
    if len(attr_args) != len(attr_names):
        log.error("attribute count %d differs from the %d attribute names %s (ACLNN_ERR_PARAM_INVALID); "
                  "the task is created without attributes", len(attr_args), len(attr_names), list(attr_names))
        return {}
    attrs: dict = {}
    for (tag, value), name in zip(attr_args, attr_names):
        ok, v = _attr_value(tag, value)
        if ok:
            attrs[name] = v
        else:
            log.error("invalid attr arg type %d for attribute %r (ACLNN_ERR_INNER)", int(tag), name)
    return attrs


def calc_host_input_data_size(inputs: list[Tensor | None], align: int) -> int:
    """CalcHostInputDataSize: sum over non-null host inputs of round_up(storage elements x dtype size, align)."""
    total = 0
    for t in inputs:
        if t is not None and t.storage.placement == Placement.ON_HOST:
            total += round_up(t.storage_nbytes, align)
    return total


def device_cache_size(rule: str, unknown_type: int, inputs: list[Tensor | None], task: AicpuTask) -> int:
    """CalcDeviceCacheSize under a behaviour profile's rule: "whole" (opbase) reserves the whole host-input
    total once it exceeds 1024 bytes, "above" (the aicpu guide) only the part above 1024 bytes."""
    size = task.device_ext_mem_size if unknown_type == DEPEND_SHAPE_RANGE else 0
    h = calc_host_input_data_size(inputs, task.host_input_align)
    if h > K_MAX_TOTAL_HOST_LEN:
        size += h if rule == "whole" else h - K_MAX_TOTAL_HOST_LEN
    return size


class AicpuTaskSpace:
    """AicpuTaskSpace(opType, unknownType = DEPEND_IN_SHAPE, isTf = false)."""

    __slots__ = ("op_type", "unknown_type", "is_tf", "has_init", "input_ref_indexes", "output_ref_indexes",
                 "hash_map", "task_count", "live_launchers", "__weakref__")

    def __init__(self, op_type: str, unknown_type: int = UnknowShapeOpType.DEPEND_IN_SHAPE, is_tf: bool = False):
        self.op_type = op_type
        self.unknown_type = UnknowShapeOpType(unknown_type)
        self.is_tf = bool(is_tf)
        self.has_init = False
        self.input_ref_indexes: set[int] = set()
        self.output_ref_indexes: set[int] = set()
        self.hash_map: dict[int, list[AicpuTask]] = {}
        self.task_count = 0          # tasks in hash_map, all seeds
        self.live_launchers = 0      # alive AiCpuKernelLaunchers holding a cached task of this space

    # ---- refs ------------------------------------------------------------------------------------------
    def set_ref(self, index: int, is_input: bool = True) -> None:
        """SetRef: ignored once the space has created a task (including one-shot tasks)."""
        if self.has_init:
            return
        (self.input_ref_indexes if is_input else self.output_ref_indexes).add(int(index))

    def is_ref(self, index: int, is_input: bool = True) -> bool:
        return index in (self.input_ref_indexes if is_input else self.output_ref_indexes)

    # ---- sizes -----------------------------------------------------------------------------------------
    def calc_host_input_data_size(self, inputs: list[Tensor | None], align: int) -> int:
        return calc_host_input_data_size(inputs, align)

    def calc_device_cache_size(self, inputs: list[Tensor | None], task: AicpuTask, process: Any = None) -> int:
        """CalcDeviceCacheSize under the process's behaviour profile."""
        process = process or current().process
        return device_cache_size(process.profile.aicpu_device_cache_rule, self.unknown_type, inputs, task)

    # ---- lookup ----------------------------------------------------------------------------------------
    def tasks(self) -> list[AicpuTask]:
        """Every cached task, bucket by bucket in insertion order."""
        return [t for bucket in self.hash_map.values() for t in bucket]

    def find_task(self, executor: Any, args: OpArgContext, inputs: list[Tensor | None]) -> AicpuTask | None:
        """FindTask(executor, args, inputs) on the current thread."""
        return self._find(current(), executor, args.attrs(), inputs)[0]

    def _find(self, ctx: Any, executor: Any, attr_args: list[OpArg], inputs: list[Tensor | None]):
        """FindTask: (task or None, (key, seed) or None when the key cannot be built)."""
        op = self.op_type
        ts.record(ctx, ts.K_FIND_TASK_START)
        ctx.charge("FindTask", op)
        invalid: list = []
        ks = _task_key_and_seed(ctx, inputs, attr_args, invalid)
        if invalid:
            log.error("%s: invalid attr arg types %s left out of the task key", op, [int(t) for t in invalid])
        if ks is None:
            ts.record(ctx, ts.K_FIND_TASK_END)
            return None, None
        key, seed = ks
        bucket = self.hash_map.get(seed)
        if bucket:
            klen = len(key)
            for task in bucket:
                if task.is_visit or len(task.key) != klen or task.key != key:
                    continue
                process = ctx.process
                mem = device_cache_size(process.profile.aicpu_device_cache_rule, self.unknown_type, inputs, task)
                if mem > executor.workspace_device_aicpu_mem:
                    executor.workspace_device_aicpu_mem = mem
                ts.record(ctx, ts.K_FIND_TASK_END)
                task.is_visit = True
                _cache_event(ctx, "hit", op, seed, self.task_count)
                return task, ks
        ts.record(ctx, ts.K_FIND_TASK_END)
        return None, ks

    def get_or_create_task(self, executor: Any, attr_names: list[str] | tuple[str, ...],
                           args: OpArgContext) -> AicpuTask | None:
        """GetOrCreateTask on the current thread: a BUSY task, or None when creation failed."""
        return self.get_or_create(current(), executor, attr_names, args)[0]

    def get_or_create(self, ctx: Any, executor: Any, attr_names: list[str] | tuple[str, ...],
                      args: OpArgContext) -> tuple[AicpuTask | None, AclnnStatus]:
        """GetOrCreateTask with the failure's status (ACLNN_ERR_PARAM_INVALID when the input descriptors
        overflow the 1024-byte key, ACLNN_ERR_INNER when Init fails)."""
        process = ctx.process
        op = self.op_type
        ts.set_enabled(process)
        make = executor_host_tensor_factory(executor)
        invalid: list = []
        inputs = flatten_aicpu_inputs(args.inputs(), make, invalid)
        if invalid:
            log.error("%s: invalid input arg types %s skipped", op, [int(t) for t in invalid])
        attr_args = args.attrs()
        task, ks = self._find(ctx, executor, attr_args, inputs)
        if task is not None:
            return task, S.ACLNN_SUCCESS
        if ks is None:
            log.error("%s: %d non-null inputs do not fit the 1024-byte task key (ACLNN_ERR_PARAM_INVALID)", op,
                      sum(t is not None for t in inputs))
            return None, S.ACLNN_ERR_PARAM_INVALID
        key, seed = ks
        ctx.charge("CreateTask", op)
        task = AicpuTfTask(op, self.unknown_type, self) if self.is_tf else AicpuCCTask(op, self.unknown_type, self)
        attrs = create_aicpu_attrs(attr_args, attr_names)
        outputs = flatten_aicpu_inputs(args.outputs(), make)
        ctx.charge("Init", op)
        status = task.init(ctx, inputs, outputs, attrs)
        if status != S.ACLNN_SUCCESS:
            log.error("AI CPU task init of %s failed (%d), ACLNN_ERR_INNER", op, int(status))
            task.released = True
            _cache_event(ctx, "error", op, seed, self.task_count)
            return None, S.ACLNN_ERR_INNER
        process.aicpu_registry[id(self)] = self
        task.key = key
        task.seed = seed
        task.is_visit = True
        mem = device_cache_size(process.profile.aicpu_device_cache_rule, self.unknown_type, inputs, task)
        if mem > executor.workspace_device_aicpu_mem:
            executor.workspace_device_aicpu_mem = mem
        self.has_init = True
        if self.task_count < process.aicpu_cache_limit:
            bucket = self.hash_map.get(seed)
            if bucket is None:
                self.hash_map[seed] = [task]
            else:
                bucket.append(task)
            self.task_count += 1
            _cache_event(ctx, "miss", op, seed, self.task_count)
            _count_event(ctx)
            return task, S.ACLNN_SUCCESS
        save_pending_overflow_task(ctx, task)
        _cache_event(ctx, "oneshot", op, seed, self.task_count)
        return task, S.ACLNN_SUCCESS

    def clear(self) -> None:
        """Clear: drop every cached task (refs stay frozen, pending and one-shot tasks are untouched)."""
        for bucket in self.hash_map.values():
            for task in bucket:
                task.released = True
        self.hash_map.clear()
        self.task_count = 0

    def __repr__(self) -> str:
        return (f"AicpuTaskSpace({self.op_type}, {self.unknown_type.name}, {'tf' if self.is_tf else 'cc'}, "
                f"tasks={self.task_count})")


def _task_key_and_seed(ctx: Any, inputs: list, attr_args: list, invalid: list) -> tuple[bytes, int] | None:
    """gen_task_key_and_seed; on the fast path memoised by its inputs: the thread id, each non-null input's
    dtype and format, the attribute tags and values (plain values only; anything else is keyed afresh)."""
    memo = ctx.process.launch_memo
    if memo is None:
        return gen_task_key_and_seed(ctx.thread_id, inputs, attr_args, invalid)
    if attr_args:
        values = value_key([v for _, v in attr_args])
        if values is None:
            return gen_task_key_and_seed(ctx.thread_id, inputs, attr_args, invalid)
        tags = tuple(tag for tag, _ in attr_args)
    else:
        values = tags = ()
    descriptors = []
    for t in inputs:
        if t is not None:
            descriptors.append(t.dtype)
            descriptors.append(t.view_format)
    memo_key = ("aicpu key", ctx.thread_id, tuple(descriptors), tags, values)
    hit = memo.get(memo_key)
    if hit is None:
        found: list = []
        hit = (gen_task_key_and_seed(ctx.thread_id, inputs, attr_args, found), tuple(found))
        memo_put(memo, memo_key, hit)
    invalid.extend(hit[1])
    return hit[0]


# ---- the thread's pending overflow slot --------------------------------------------------------------

def save_pending_overflow_task(ctx: Any, task: AicpuTask) -> AicpuTask:
    """SavePendingOverflowTask: a previously pending task is discarded with a warning."""
    old = ctx.pending_overflow_task
    if old is not None:
        log.warning("Discard stale pending overflow aicpu task (%s).", old.op_type)
        old.released = True
    ctx.pending_overflow_task = task
    return task


def take_pending_overflow_task(ctx: Any, task: AicpuTask | None) -> AicpuTask | None:
    """TakePendingOverflowTask: the thread's pending task, only if it is exactly `task`."""
    if task is None:
        return None
    pending = ctx.pending_overflow_task
    if pending is None:
        return None
    if pending is not task:
        log.warning("Take pending overflow aicpu task skipped, pending task does not match.")
        return None
    ctx.pending_overflow_task = None
    return pending


# ---- the process's spaces ----------------------------------------------------------------------------

def get_task_space(op_type: str, unknown_type: int = UnknowShapeOpType.DEPEND_IN_SHAPE, is_tf: bool = False,
                   process: Any = None) -> AicpuTaskSpace:
    """The op's static AicpuTaskSpace in the current simulated process (created on first use)."""
    spaces = (process or current().process).aicpu_spaces
    k = (op_type, int(unknown_type), bool(is_tf))
    space = spaces.get(k)
    if space is None:
        space = spaces[k] = AicpuTaskSpace(op_type, unknown_type, is_tf)
    return space


def cached_task_total(process: Any) -> int:
    """Cached tasks over every registered space of the process."""
    return sum(s.task_count for s in process.aicpu_registry.values())


def aclnn_aicpu_finalize(process: Any = None) -> None:
    """aclnnAicpuFinalize: Clear every registered space, then empty the registry.

    opbase leaves launchers of still-alive executors pointing at freed tasks; the simulator refuses instead:
    Finalize while an executor still holds a cached-task AI CPU launcher raises UseAfterDestroyError.
    """
    process = process or current().process
    spaces = {id(s): s for s in process.aicpu_spaces.values()}
    spaces.update(process.aicpu_registry)
    holding = [s for s in spaces.values() if s.live_launchers > 0]
    if holding:
        desc = ", ".join(f"{s.op_type} ({s.live_launchers})" for s in holding)
        raise UseAfterDestroyError(
            f"aclnnAicpuFinalize called while executors still hold AI CPU launchers of cached tasks: {desc}; "
            "run or destroy those executors (aclDestroyAclOpExecutor for repeatable ones) before finalizing")
    for space in process.aicpu_registry.values():
        space.clear()
    process.aicpu_registry.clear()
    rec = process.recorder
    if rec.enabled:
        try:
            ctx = current()
        except SimulationError:
            ctx = None
        if ctx is not None and ctx.process is process:
            ctx.at(lambda t: rec.counter(t, CACHED_TASKS_COUNTER, 0))
        else:
            rec.counter(process.device.env.now if process.device is not None else 0.0, CACHED_TASKS_COUNTER, 0)


# ---- trace ---------------------------------------------------------------------------------------------

def _cache_event(ctx: Any, kind: str, op: str, seed: int, cached: int) -> None:
    rec = ctx.process.recorder
    if not rec.enabled:
        return
    ctx.at(CacheEventAt(rec, ctx.name, "aicpu", kind, op, seed, f"cached={cached}"))


def _count_event(ctx: Any) -> None:
    process = ctx.process
    rec = process.recorder
    if not rec.enabled:
        return
    total = cached_task_total(process)
    ctx.at(lambda t: rec.counter(t, CACHED_TASKS_COUNTER, total))


__all__ = [
    "AicpuTaskSpace", "CACHED_TASKS_COUNTER", "create_aicpu_attrs", "calc_host_input_data_size", "device_cache_size",
    "save_pending_overflow_task", "take_pending_overflow_task", "get_task_space", "cached_task_total",
    "aclnn_aicpu_finalize",
]
