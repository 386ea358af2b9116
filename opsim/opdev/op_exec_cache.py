"""OpExecCache: the per-thread phase-1 skip and device-task replay (opbase `include/nnopbase/opdev/op_cache.h`,
`common/utils/op_cache.cpp`).

The key is built by L2_DFX_PHASE_1 with opbase's exact byte layout (op_cache_key); equality is exact bytes. A
hit returns a cache wrapper; phase 2 replays the AI Core launches recorded during the first run with fresh
addresses. The thread's container, its capacity and eviction are op_cache_manager's.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Tensor
from opsim.opdev import dfx, rt
from opsim.opdev.kernel import KernelLaunchConfig
# The key's and the manager's names are re-exported: callers (the fast path, ops, tests) import them from here.
from opsim.opdev.op_cache_key import (_HEADS, _TENSOR_KEYS, K_HASH_BUF_SIZE, KEY_MEMO_MAX,  # noqa: F401
                                      args_snapshot, args_unchanged, build_l2_key, fields_unchanged)
from opsim.opdev.op_cache_manager import (K_CACHE_SHRINK_NUM, OpExecCacheManager, add_cache,  # noqa: F401
                                          get_manager, reselect_static_kernel, set_cached_tensor_list)
from opsim.opdev.thread_local import CacheEventAt, OpLogInfo, ThreadLocalContext, current

log = logging.getLogger("opsim.opdev")
S = AclnnStatus

K_INVALID_HASH_OFFSET = 8192 + 1024
K_CACHE_BUF_SIZE = 65536
K_CACHE_SIZE_ALIGN = 32
MAX_CACHE_TILING_SIZE = 65536


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
    launch_cfg: KernelLaunchConfig | None = None
    """The launch record's configuration (LaunchArgCache's launchCfg_: bin and function handles, tiling key,
    block count, fat-bin flag, schedule mode, dynamic UB size, block offset), as the launch was made."""


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
        (in PTA mode torch_npu's cacheApi_, opbase `common/utils/op_cache.cpp`)."""
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
               n_inputs: int, n_outputs: int, attrs: list, compute: Any, tiling_data_size: int,
               launch_cfg: KernelLaunchConfig | None = None) -> None:
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
                                       _tls_profiling_ids(), launch_cfg))

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
        """Replay: every recorded launch in order through its run function (RunFromCache), stopping at the
        first failure."""
        for task in self.tasks:
            status = run_from_cache(ctx, stream, task, workspace, addresses)
            if status != S.ACLNN_SUCCESS:
                return status
        return S.ACLNN_SUCCESS


def run_from_cache(ctx: ThreadLocalContext, stream: Any, task: RecordedTask | None, workspace: int = 0,
                   addresses: list | tuple = ()) -> AclnnStatus:
    """LaunchArgCache::RunFromCache(stream, cache) (rts_arg.cpp): a null launch record is ACLNN_ERR_INNER
    ("Null cache, unable to run"); otherwise the addresses are patched and the launch is resubmitted."""
    if task is None:
        log.error("Null cache, unable to run (ACLNN_ERR_INNER)")
        return S.ACLNN_ERR_INNER
    ctx.charge("cache replay", task.op_name)
    p = ctx.process
    if p.faults:
        status = rt.fault_status(ctx, "rt.launch_kernel", task.op_name)
        if status != S.ACLNN_SUCCESS:
            return status
    if p.numerics and p.device is not None and task.compute is not None:
        tensors = [None if r is None else _patched(tmpl, r, workspace, addresses)
                   for tmpl, r in zip(task.templates, task.rules)]
        n_in, n_io = task.n_inputs, task.n_inputs + task.n_outputs
        task.compute(tensors[:n_in], tensors[n_in:n_io], task.attrs, tensors[n_io:])
    rt.submit_kernel(ctx, stream, task.op_name, task.task_type, task.block_dim, task.duration, replay=True)
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

def _init_l2_phase_1_context(ctx: ThreadLocalContext, api_name: str) -> None:
    """InitL2Phase1Context: the TLS log info (L2 name, a new sequence number) and config (core counts, dump,
    deterministic level)."""
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


def l2_dfx_phase_1(api_name: str, dfx_in: tuple, dfx_out: tuple, *, with_cache: bool = True):
    """L2_DFX_PHASE_1: TLS init, key construction and lookup. Returns a cache wrapper on a hit, else None."""
    ctx = current()
    p = ctx.process
    _init_l2_phase_1_context(ctx, api_name)
    li, cfg = ctx.log_info, ctx.config
    dfx.open_l2_guard(ctx, api_name, api_name + "GetWorkspaceSize")
    if p.op_dump:
        ctx.l2_io_tensors = (list(dfx_in), list(dfx_out))
    if not with_cache:
        return None
    ctx.charge("make key")
    key, storages, tensors = build_l2_key(api_name, cfg.aic_num, cfg.aiv_num, cfg.deterministic_level,
                                          dfx_in, dfx_out, memo=p.key_memo)
    pta = ctx.use_pta_hash
    # PTA mode (opbase `common/utils/op_cache.cpp`): hash and key stay torch_npu's; only the storages and
    # addresses are opbase's
    if pta:
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
            ctx.at(CacheEventAt(rec, ctx.name, "exec", "hit", api_name))
        return OpExecCacheWrap(cache, tensors, li.copy(), ctx)
    if rec.enabled:
        ctx.at(CacheEventAt(rec, ctx.name, "exec", "miss", api_name))
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
    dfx.open_l2_guard(ctx, api_name, api_name)


def l2_dfx_phase_end() -> None:
    """The end of an L2 phase function (aclnnXxxGetWorkspaceSize or aclnnXxx) on every return path: its guard
    is destroyed, after the executor's (declared later, destroyed first)."""
    ctx = current()
    if ctx.l2_guard is not None:
        dfx.close_l2_guard(ctx)
