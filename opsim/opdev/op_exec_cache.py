"""OpExecCache: the per-thread phase-1 skip and device-task replay (op-exec-cache.md).

The key is built by L2_DFX_PHASE_1 with opbase's exact byte layout; equality is exact bytes. A hit returns
a cache wrapper; phase 2 replays the AI Core launches recorded during the first run with fresh addresses.
Capacity comes from ACLNN_CACHE_LIMIT (read once per thread), eviction drops 30 LRU entries at a time and
happens before the duplicate check.
"""
from __future__ import annotations

import logging
import struct
from collections import OrderedDict
from dataclasses import dataclass
from operator import attrgetter, call, is_
from typing import Any

import numpy as np

from opsim.acl.dtypes import DataType
from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import (ASSIGNMENTS, BoolArray, FloatArray, Fp16Array, IntArray, Scalar, ScalarList, Tensor,
                              TensorList)
from opsim.opdev import dfx, rt
from opsim.opdev.op_args import Null
from opsim.opdev.thread_local import OpLogInfo, ThreadLocalContext, current

log = logging.getLogger("opsim.opdev")
S = AclnnStatus

K_HASH_BUF_SIZE = 8192
K_INVALID_HASH_OFFSET = 8192 + 1024
K_CACHE_BUF_SIZE = 65536
K_CACHE_SHRINK_NUM = 30
K_CACHE_SIZE_ALIGN = 32
MAX_CACHE_TILING_SIZE = 65536
_COMMA = b","
_Q = struct.Struct("<q")
_I = struct.Struct("<i")


# ---- key construction (§4) -----------------------------------------------------------------------

_TENSOR_KEYS: dict[tuple, bytes] = {}
"""Key bytes of one tensor, memoised on the fields that enter them (a cache hit rebuilds the same bytes)."""
_TENSOR_KEYS_MAX = 4096
_HEADS: dict[tuple, bytes] = {}
"""Key prefix (API name, its length, aicNum, aivNum, deterministic level) per tuple of those values."""


def _tensor_key(fields: tuple) -> bytes:
    vs, strides, ss, dtype, view_offset, view_format = fields
    nd = len(vs)
    part = b"".join((
        struct.pack(f"<{nd}q", *vs), _COMMA, struct.pack(f"<{nd}q", *strides), _COMMA,
        struct.pack(f"<{len(ss)}q", *ss), _COMMA, _I.pack(int(dtype)), _COMMA, _Q.pack(view_offset),
        _COMMA, _I.pack(int(view_format))))
    if len(_TENSOR_KEYS) >= _TENSOR_KEYS_MAX:
        _TENSOR_KEYS.clear()
    _TENSOR_KEYS[fields] = part
    return part


class _KeyBuilder:
    """Appends DFX_IN / DFX_OUT elements to a key, collecting L2 storages, tensors and aliasing labels."""

    __slots__ = ("parts", "storages", "tensors", "labels", "_seen")

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.storages: list = []
        self.tensors: list[Tensor] = []
        self.labels: list[int] = []
        self._seen: dict[int, int] = {}

    def tensor(self, t: Tensor | None) -> None:
        if t is None:
            self.parts.append(_COMMA)
            return
        fields = (t.view_shape, t.strides, t.storage_shape, t.dtype, t.view_offset, t.view_format)
        part = _TENSOR_KEYS.get(fields)
        if part is None:
            part = _tensor_key(fields)
        self.parts.append(part)
        self.storages.append(t.storage)
        self.tensors.append(t)
        label = self._seen.setdefault(id(t), len(self._seen))
        self.labels.append(label)

    def scalar(self, s: Scalar | None) -> None:
        if s is None:
            self.parts.append(_COMMA)
            return
        self.parts.append(s.raw + _COMMA + _I.pack(int(s.dtype)) + _COMMA)

    def value(self, v: Any) -> None:
        p = self.parts
        if v is None:
            p.append(_COMMA)
        elif isinstance(v, Tensor):
            self.tensor(v)
        elif isinstance(v, Scalar):
            self.scalar(v)
        elif isinstance(v, (IntArray, BoolArray, FloatArray, Fp16Array)):
            p.append(v.values.tobytes() + _Q.pack(len(v.values)))
        elif isinstance(v, TensorList):
            for t in v.tensors:
                self.tensor(t)
            p.append(_Q.pack(len(v.tensors)))
        elif isinstance(v, ScalarList):
            for s in v.scalars:
                self.scalar(s)
            p.append(_Q.pack(len(v.scalars)))
        elif isinstance(v, Null):
            p.append(_COMMA)
        elif isinstance(v, str):  # const char*: characters then length
            b = v.encode()
            p.append(b + _Q.pack(len(b)))
        elif isinstance(v, (bool, np.bool_)):
            p.append(b"\x01" if v else b"\x00")
        elif isinstance(v, DataType):
            p.append(_I.pack(int(v)))
        elif isinstance(v, np.generic):
            p.append(v.tobytes())
        elif isinstance(v, int) and type(v) is not int:  # other enums: 4-byte C enums
            p.append(_I.pack(int(v)))
        elif isinstance(v, int):
            p.append(_Q.pack(v))
        elif isinstance(v, float):
            p.append(struct.pack("<d", v))
        else:
            p.append(struct.pack("<Q", id(v) & 0xFFFFFFFFFFFFFFFF))  # unlisted pointers: keyed by identity


def build_l2_key(api_name: str, aic_num: int, aiv_num: int, deterministic_level: int,
                 dfx_in: tuple, dfx_out: tuple, *, memo: dict | None = None) -> tuple[bytes, list, list]:
    """The L2 key bytes (empty when longer than 8192 bytes), the L2 storages and the L2 tensors.

    `memo` (the fast path; one dict per simulation, `ProcessContext.key_memo`): a result is reused for the
    same (API, aicNum, aivNum, deterministic level) and the same argument objects while every field that
    enters the key is unchanged. The memo holds the arguments, so their ids cannot be reused meanwhile."""
    head_fields = (api_name, aic_num, aiv_num, deterministic_level)
    if memo is None:
        return _build_l2_key(head_fields, dfx_in, dfx_out)
    args = dfx_in + dfx_out
    memo_key = (head_fields, tuple(map(id, args)))
    last = memo.get(memo_key)
    if last is not None and args_unchanged(last[0], args):
        return last[1]
    result = _build_l2_key(head_fields, dfx_in, dfx_out)
    snapshot = args_snapshot(args)
    if snapshot is not None:
        if len(memo) >= KEY_MEMO_MAX:
            memo.clear()
        memo[memo_key] = (snapshot, result)
    return result


KEY_MEMO_MAX = 4096
"""Entries of a simulation's phase-1 key memo before it is emptied (distinct argument sets in use)."""
_VALUE_TYPES = (type(None), int, bool, str, DataType, np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_)
_ARRAY_TYPES = (IntArray, BoolArray, FloatArray, Fp16Array)
_tensor_key_fields = attrgetter("view_shape", "strides", "storage_shape", "dtype", "view_offset", "view_format",
                                "storage")
"""A tensor's fields that enter the key, in one C call: the shapes and strides are immutable tuples and the
enums and offset plain values, so equal fields give equal key bytes; the storage compares by identity."""
_scalar_key_fields = attrgetter("raw", "dtype")
_version = attrgetter("version")


def _array_key_fields(v: Any) -> tuple:
    """A host array's values array, their dtype and bytes (the array can be changed in place)."""
    return v.values, v.values.dtype, v.values.tobytes()


def args_snapshot(args: tuple, tensor_fields: Any = None) -> tuple | None:
    """What the key bytes and storages of `args` come from: (number of arguments, the positions, objects,
    field readers and fields of the tensors, scalars and host arrays, the immutable values with their
    positions and types, the objects' versions); None when an argument's key bytes could change without such a
    change (an unlisted object: not memoised). `tensor_fields`: a reader of more tensor fields than the key's
    (a caller that depends on more of each tensor). The versions (a list, None when a host array or
    `tensor_fields` reaches beyond what a version covers: the count of assignments, then one per object) let
    `fields_unchanged` skip reading the fields."""
    pos, objs, getters, values = [], [], [], []
    tensor_getter = tensor_fields or _tensor_key_fields
    versioned = tensor_fields is None
    for i, v in enumerate(args):
        tv = type(v)
        if tv is Tensor:
            getter = tensor_getter
        elif tv is Scalar:
            getter = _scalar_key_fields
        elif tv in _ARRAY_TYPES:
            getter = _array_key_fields
            versioned = False
        elif tv in _VALUE_TYPES or tv is float:
            values.append((i, tv, v))
            continue
        else:
            return None
        pos.append(i)
        objs.append(v)
        getters.append(getter)
    getters_t = tuple(getters)
    objs_t = tuple(objs)
    versions = [ASSIGNMENTS[0], *map(_version, objs_t)] if versioned else None
    return (len(args), tuple(pos), objs_t, getters_t, tuple(map(call, getters_t, objs_t)), tuple(values), versions)


def fields_unchanged(snapshot: tuple) -> bool:
    """The snapshot's tensors, scalars and host arrays still have the fields they had: at once when no field of
    any tensor or scalar was assigned since the snapshot last matched (its versions: the count of assignments
    then, the objects' versions) or none of its own objects', else by comparing the fields (C calls only),
    after which the versions of a match are the snapshot's."""
    versions = snapshot[6]
    if versions is not None:
        if versions[0] == ASSIGNMENTS[0]:
            return True
        if versions[1:] == list(map(_version, snapshot[2])):
            versions[0] = ASSIGNMENTS[0]
            return True
    if tuple(map(call, snapshot[3], snapshot[2])) != snapshot[4]:
        return False
    if versions is not None:
        versions[:] = [ASSIGNMENTS[0], *map(_version, snapshot[2])]
    return True


def args_unchanged(snapshot: tuple, args: tuple) -> bool:
    """The arguments are the snapshot's objects with the same fields, and its immutable values (equal values of
    the same type; floats only as the same object: 0.0 == -0.0 but their bytes differ)."""
    n, pos, objs, _, _, values, _ = snapshot
    if len(args) != n or not all(map(is_, objs, map(args.__getitem__, pos))):
        return False
    for i, tv, v in values:
        a = args[i]
        if a is not v and (type(a) is not tv or tv is float or a != v):
            return False
    return fields_unchanged(snapshot)


def _build_l2_key(head_fields: tuple, dfx_in: tuple, dfx_out: tuple) -> tuple[bytes, list, list]:
    kb = _KeyBuilder()
    parts = kb.parts
    head = _HEADS.get(head_fields)
    if head is None:
        api_name, aic_num, aiv_num, deterministic_level = head_fields
        name = api_name.encode()
        head = _HEADS[head_fields] = name + _Q.pack(len(name)) + struct.pack(
            "<IIB", aic_num & 0xFFFFFFFF, aiv_num & 0xFFFFFFFF, deterministic_level & 0xFF)
        if len(_HEADS) > _TENSOR_KEYS_MAX:
            _HEADS.clear()
    parts.append(head)
    storages, tensors, labels, seen = kb.storages, kb.tensors, kb.labels, kb._seen
    for args in (dfx_in, dfx_out):
        for v in args:
            if type(v) is Tensor:  # the common case, inlined (KeyBuilder.tensor)
                fields = (v.view_shape, v.strides, v.storage_shape, v.dtype, v.view_offset, v.view_format)
                part = _TENSOR_KEYS.get(fields)
                parts.append(part if part is not None else _tensor_key(fields))
                storages.append(v.storage)
                tensors.append(v)
                labels.append(seen.setdefault(id(v), len(seen)))
            else:
                kb.value(v)
    if labels:
        parts.append(struct.pack(f"<{len(labels)}q", *labels))
    key = b"".join(parts)
    if len(key) > K_HASH_BUF_SIZE:
        key = b""
    return key, kb.storages, kb.tensors


def tls_api_name(ctx: ThreadLocalContext) -> str | None:
    """The name CanUse() compares: cacheApi_ in PTA mode, else the TLS L2 API name."""
    return ctx.cache_api if ctx.use_pta_hash else ctx.log_info.l2_api_name


def check_cacheable(ctx: ThreadLocalContext) -> bool:
    """CheckCacheable: dump, exception dump, overflow dump, op-arg recording, level-2 profiling or
    DISABLE_L2_CACHE disable the OpExecCache."""
    p = ctx.process
    return not (ctx.config.is_op_dump_enable or p.exception_dump or p.overflow_dump or p.record_op_args
                or p.level2_profiling or p.disable_l2_cache)


# ---- cache objects ---------------------------------------------------------------------------------

@dataclass
class AddrRule:
    """How a recorded address argument is re-patched: workspace offset, or L2 tensor index + byte offset."""

    is_workspace: bool
    workspace_offset: int = 0
    l2_index: int = -1
    byte_offset: int = 0
    host_tensor: Tensor | None = None


@dataclass
class RecordedTask:
    """One recorded AI Core launch: enough to resubmit it and, with numerics on, recompute it."""

    op_name: str
    task_type: str
    block_dim: int
    duration: float
    templates: list  # Tensor templates (dtype, shapes, strides) in kernel-argument order
    rules: list      # AddrRule per template
    n_inputs: int
    n_outputs: int
    attrs: list
    compute: Any
    size: int
    info: dict | None = None  # torch_npu tensor strings of the launch (profiler shapes)
    profiling: tuple = (0, 0)  # TLS (kernelLauncherId, summaryItemId) when the launch was recorded


class OpExecCache:
    """One executor's cache: key, recorded tasks and address rules, workspace size, validity."""

    __slots__ = ("key", "hash_key", "l2_name", "storage_index", "relation", "tasks", "workspace_size", "usable",
                 "recording", "finalized", "manager", "record_offset", "dead", "__weakref__")

    def __init__(self, key: bytes, l2_name: str | None, storages: list, hash_key: int = 0):
        self.key = key
        self.hash_key = hash_key
        self.l2_name = l2_name
        self.storage_index = {}
        for i, st in enumerate(storages):
            self.storage_index.setdefault(id(st), i)
        self.relation: dict[int, int] = {}
        self.tasks: list[RecordedTask] = []
        self.workspace_size = 0
        self.usable = False
        self.recording = False
        self.finalized = False
        self.manager: "OpExecCacheManager | None" = None
        self.record_offset = 0
        self.dead = False

    @classmethod
    def from_thread(cls, ctx: ThreadLocalContext) -> "OpExecCache":
        """Snapshot of the TLS at CREATE_EXECUTOR: key bytes, hash (PTA V1), storages, and the API name
        (in PTA mode torch_npu's cacheApi_, pta-cache-mode.md §5 step 6)."""
        return cls(ctx.key, tls_api_name(ctx), ctx.l2_storage_list, ctx.hash_key)

    @property
    def valid(self) -> bool:
        """IsOpCacheValid: hashKey_ != 0 or key_ non-empty."""
        return bool(self.key) or self.hash_key != 0

    def can_use(self, api_name: str | None) -> bool:
        return self.usable and api_name == self.l2_name

    def invalidate(self) -> None:
        """Zero hashKey_ and free key_ (a stored entry stays where it is, dead)."""
        self.key = b""
        self.hash_key = 0

    def mark_invalid(self, ctx: ThreadLocalContext | None = None) -> None:
        """MarkOpCacheInvalid: refused exactly while CanUse() holds."""
        if self.can_use(tls_api_name(ctx or current())):
            return
        self.invalidate()

    def add_relation(self, middle_storage, out_storage) -> None:
        if self.valid and not self.usable:
            self.relation[id(middle_storage)] = id(out_storage)

    def _rule_for(self, t: Tensor) -> AddrRule | None:
        st = t.storage
        esize = t.dtype.itemsize
        if st.from_workspace:
            return AddrRule(True, st.workspace_offset + int(t.view_offset * esize))
        if st.placement != 0:  # host data is copied into the record
            return AddrRule(False, host_tensor=t)
        idx = self.storage_index.get(id(st))
        if idx is None:
            rel = self.relation.get(id(st))
            if rel is not None:
                idx = self.storage_index.get(rel)
        if idx is None:
            return None
        return AddrRule(False, l2_index=idx, byte_offset=int((t.view_offset + st.offset) * esize))

    def record(self, op_name: str, task_type: str, block_dim: int, duration: float, tensors: list,
               n_inputs: int, n_outputs: int, attrs: list, compute: Any, tiling_data_size: int) -> None:
        """Record one AI Core launch (only while valid, recording and not yet usable)."""
        if not self.valid or self.usable or not self.recording:
            return
        if tiling_data_size <= 0 or tiling_data_size >= MAX_CACHE_TILING_SIZE:
            self.invalidate()
            return
        rules, templates = [], []
        for t in tensors:
            if t is None:
                rules.append(None)
                templates.append(None)
                continue
            rule = self._rule_for(t)
            if rule is None:
                log.info("op cache invalid: %s argument is neither workspace nor an L2 tensor", op_name)
                self.invalidate()
                return
            rules.append(rule)
            templates.append(t)
        size = 64 + 16 * len(tensors) + _round_up(tiling_data_size, K_CACHE_SIZE_ALIGN)
        if self.record_offset + size > K_CACHE_BUF_SIZE:
            self.invalidate()
            return
        self.record_offset += size
        self.tasks.append(RecordedTask(op_name, task_type, block_dim, duration, templates, rules, n_inputs,
                                       n_outputs, attrs, compute, size,
                                       rt.tensor_info(tensors[:n_inputs], tensors[n_inputs:n_inputs + n_outputs]),
                                       _tls_profiling_ids()))

    def finalize(self) -> None:
        """End of the first run: copy the record (needs a recording buffer), usable := valid."""
        if self.finalized:
            return
        self.finalized = True
        if self.valid and not self.recording:
            self.invalidate()
        self.usable = self.valid
        self.storage_index = {k: v for k, v in self.storage_index.items()} if self.usable else {}
        self.relation = {}

    def drop(self) -> None:
        """Delete the cache object (refused insertion, repeatable executor destroyed, error path)."""
        self.dead = True
        if self.manager is not None:
            self.manager.remove(self)

    def run(self, ctx: ThreadLocalContext, workspace: int, stream: Any, addresses: list, l2_storages: list | None = None,
            l2_tensors: list | None = None) -> AclnnStatus:
        """Replay: patch every address, resubmit every recorded task in order."""
        numerics = ctx.process.numerics and ctx.process.device is not None
        faults = ctx.process.faults
        for task in self.tasks:
            ctx.charge("cache replay", task.op_name)
            if faults:
                status = rt.fault_status(ctx, "rt.launch_kernel", task.op_name)
                if status != S.ACLNN_SUCCESS:
                    return status
            if numerics and task.compute is not None:
                tensors = [None if r is None else _patched(tmpl, r, workspace, addresses)
                           for tmpl, r in zip(task.templates, task.rules)]
                ins = tensors[:task.n_inputs]
                outs = tensors[task.n_inputs:task.n_inputs + task.n_outputs]
                wss = tensors[task.n_inputs + task.n_outputs:]
                task.compute(ins, outs, task.attrs, wss)
            rt.submit_kernel(ctx, stream, task.op_name, task.task_type, task.block_dim, task.duration,
                             replay=True)
            if task.info is not None:
                rt.record_tensor_info(ctx, task.op_name, task.info)
            dfx.report_replayed_task(ctx, task)
        return S.ACLNN_SUCCESS


def _tls_profiling_ids() -> tuple[int, int]:
    ids = current().profiling_info_id
    return ids.kernel_launcher_id, ids.summary_item_id


def _patched(tmpl: Tensor, rule: AddrRule, workspace: int, addresses: list) -> Tensor:
    if rule.host_tensor is not None:
        return rule.host_tensor
    addr = workspace + rule.workspace_offset if rule.is_workspace else addresses[rule.l2_index] + rule.byte_offset
    t = Tensor(tmpl.view_shape, tmpl.dtype, tmpl.view_format, strides=tmpl.strides,
               storage_shape=tmpl.storage_shape, storage_format=tmpl.storage_format, address=addr)
    t.storage.memory = tmpl.storage.memory
    return t


def _round_up(n: int, a: int) -> int:
    return max(a, (n + a - 1) // a * a)


class OpExecCacheManager:
    """The thread's manager: capacity from ACLNN_CACHE_LIMIT, an LRU key container, the (PTA) hash map."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.container: "OrderedDict[int, tuple[bytes, OpExecCache]]" = OrderedDict()
        """Key container in LRU order: slot -> (key at insertion, cache). A cache invalidated after insertion
        stays (dead, counted against the capacity) until evicted, but its key no longer matches."""
        self._slots: dict[bytes, int] = {}
        self._next_slot = 0
        self.hash_map: dict[int, OpExecCache] = {}
        self.evictions = 0

    def find(self, key: bytes) -> OpExecCache | None:
        """Lookup by exact bytes against the stored cache's own key; a found entry moves to the MRU end."""
        slot = self._slots.get(key)
        if slot is None:
            return None
        cache = self.container[slot][1]
        if cache.key != key:  # dead: its key was freed when it was invalidated
            del self._slots[key]
            return None
        self.container.move_to_end(slot)
        return cache

    def _insert(self, cache: OpExecCache) -> None:
        slot = self._next_slot
        self._next_slot += 1
        self.container[slot] = (cache.key, cache)
        self._slots[cache.key] = slot
        cache.manager = self

    def add(self, ctx: ThreadLocalContext, cache: OpExecCache) -> bool:
        """AddOpExecCache (§8; pta-cache-mode.md §5 step 8): returns whether the cache was accepted."""
        if not cache.valid:
            return False
        if len(self.hash_map) >= self.capacity:
            ctx.cache_has_full = True
            return False
        accepted = False
        if cache.hash_key and cache.hash_key not in self.hash_map:  # V1: no eviction, a present hash refuses
            self.hash_map[cache.hash_key] = cache
            cache.manager = self
            accepted = True
        if len(self.container) >= self.capacity:
            evicted = 0
            while self.container and evicted < K_CACHE_SHRINK_NUM:
                slot, (key, old) = self.container.popitem(last=False)
                if self._slots.get(key) == slot:
                    del self._slots[key]
                if old.manager is self and self.hash_map.get(old.hash_key) is not old:
                    old.manager = None
                evicted += 1
            self.evictions += evicted
            if evicted:
                rec = ctx.process.recorder
                op = ctx.log_info.l2_api_name or ""
                ctx.at(lambda t, n=evicted: rec.cache_event(t, ctx.name, "exec", "evict", op, 0, str(n)))
        if cache.key and self.find(cache.key) is None:
            self._insert(cache)
            return True
        return accepted

    def remove(self, cache: OpExecCache) -> None:
        """RemoveOpExecCache: the hash map by the cache's current hash (a poisoned entry, hash zeroed, stays),
        the key container by identity."""
        if cache.hash_key and self.hash_map.get(cache.hash_key) is cache:
            del self.hash_map[cache.hash_key]
        slot = self._slots.get(cache.key) if cache.key else None
        if slot is not None and self.container[slot][1] is cache:
            del self.container[slot]
            del self._slots[cache.key]
        else:
            for slot, (key, c) in list(self.container.items()):
                if c is cache:
                    del self.container[slot]
                    if self._slots.get(key) == slot:
                        del self._slots[key]
                    break
        cache.manager = None

    def clear(self) -> None:
        """aclnnReselectStaticKernel on this thread: both maps cleared, cacheHasFull reset by the caller."""
        for _, c in self.container.values():
            c.manager = None
        for c in self.hash_map.values():
            c.manager = None
        self.container.clear()
        self._slots.clear()
        self.hash_map.clear()


def set_cached_tensor_list(ctx: ThreadLocalContext, addresses: list) -> None:
    """Overwrite the TLS L2 address list from index 0 (the vector is reused, never shrunk)."""
    vec = ctx.cached_tensor_list
    n = len(addresses)
    vec[:n] = addresses
    ctx.cached_tensor_list_size = n


def get_manager(ctx: ThreadLocalContext) -> OpExecCacheManager:
    if ctx.op_cache_manager is None:
        ctx.op_cache_manager = OpExecCacheManager(ctx.process.exec_cache_limit)
    return ctx.op_cache_manager


def add_cache(ctx: ThreadLocalContext, cache: OpExecCache) -> bool:
    """Insert an executor's cache at ReleaseTo; a refused cache is deleted."""
    ok = get_manager(ctx).add(ctx, cache)
    if not ok:
        cache.drop()
    return ok


def reselect_static_kernel(ctx: ThreadLocalContext | None = None) -> AclnnStatus:
    """aclnnReselectStaticKernel: clears the calling thread's caches only and resets cacheHasFull."""
    ctx = ctx or current()
    get_manager(ctx).clear()
    ctx.cache_has_full = False
    return S.ACLNN_SUCCESS


class OpExecCacheWrap:
    """What phase 1 returns on a hit: the cache, this call's L2 tensors/addresses and log info."""

    kind = "wrap"
    __slots__ = ("cache", "tensors", "addresses", "log_info", "alive", "thread", "pool_index")

    def __init__(self, cache: OpExecCache, tensors: list, log_info: OpLogInfo, thread: ThreadLocalContext,
                 addresses: list | None = None):
        self.cache = cache
        self.pool_index = thread.pool_index  # the thread's huge-memory pool index at lookup (-1: none)
        self.tensors = tensors
        self.addresses = [t.storage.address for t in tensors] if addresses is None else addresses
        self.log_info = log_info
        self.alive = True
        self.thread = thread

    def replay(self, workspace: int, stream: Any) -> AclnnStatus:
        return self.cache.run(current(), workspace, stream, self.addresses)

    def delete(self) -> None:
        self.alive = False

    def get_workspace_size(self) -> int:
        return self.cache.workspace_size


# ---- the L2 DFX macros ----------------------------------------------------------------------------

def l2_dfx_phase_1(api_name: str, dfx_in: tuple, dfx_out: tuple, *, with_cache: bool = True):
    """L2_DFX_PHASE_1: TLS init, key construction and lookup. Returns a cache wrapper on a hit, else None."""
    ctx = current()
    p = ctx.process
    ctx.current_op = api_name
    ctx.charge("L2 phase1 entry")
    li = ctx.log_info
    li.l2_api_name = api_name
    li.l0_name = None
    li.l2_sequence_counter = p.next_sequence()
    cfg = ctx.config
    cfg.aic_num, cfg.aiv_num = p.aic_num, p.aiv_num
    cfg.is_op_dump_enable = p.op_dump
    cfg.deterministic_level = dfx.deterministic_level_from_rt(ctx)
    cfg.is_deterministic_on = cfg.deterministic_level >= 1
    if p.profiling.report_flag:
        dfx.report_host_exec(ctx, api_name)
    if p.op_dump:
        ctx.l2_io_tensors = (list(dfx_in), list(dfx_out))
    if not with_cache:
        return None
    ctx.charge("make key")
    key, storages, tensors = build_l2_key(api_name, cfg.aic_num, cfg.aiv_num, cfg.deterministic_level,
                                          dfx_in, dfx_out, memo=p.key_memo)
    pta = ctx.use_pta_hash
    if pta:  # pta-cache-mode.md §5: hash and key stay torch_npu's; only the storages and addresses are opbase's
        key = ctx.key
        set_cached_tensor_list(ctx, [t.storage.address for t in tensors])
    else:
        ctx.key = key
        ctx.hash_key = 0
    ctx.l2_storage_list = storages
    ctx.l2_tensor_list = tensors
    rec = p.recorder
    if not check_cacheable(ctx):
        ctx.cache_has_full = True
        return None
    if not key:
        return None
    ctx.charge("match cache")
    cache = get_manager(ctx).find(key)
    if pta:  # V2's repeated lookup (§5 step 5): counted at PTAFindExecCache, not here
        if cache is not None and cache.can_use(ctx.cache_api):
            return OpExecCacheWrap(cache, tensors, li.copy(), ctx)
        return None
    if cache is not None and cache.can_use(api_name):
        if rec.enabled:
            name = ctx.name
            ctx.at(lambda t: rec.cache_event(t, name, "exec", "hit", api_name, 0, ""))
        return OpExecCacheWrap(cache, tensors, li.copy(), ctx)
    if rec.enabled:
        name = ctx.name
        ctx.at(lambda t: rec.cache_event(t, name, "exec", "miss", api_name, 0, ""))
    return None


def l2_dfx_phase_2(api_name: str, executor: Any) -> None:
    """L2_DFX_PHASE_2: restore the TLS log info (and config) from the executor or wrapper."""
    ctx = current()
    ctx.current_op = api_name
    ctx.charge("L2 phase2 entry")
    if isinstance(executor, OpExecCacheWrap):
        ctx.log_info = executor.log_info.copy()
    elif executor is not None and getattr(executor, "kind", "") == "executor":
        ctx.log_info = executor.log_info.copy()
        ctx.config = executor.config.copy()
    ctx.log_info.l0_name = None
    if ctx.process.profiling.report_flag:
        dfx.report_host_exec(ctx, api_name)
