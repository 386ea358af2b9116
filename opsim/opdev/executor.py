"""aclOpExecutor and the two-phase flow (opbase `composite_op/aclnn_engine/op_executor.cpp`).

Phase 1 builds an executor (CREATE_EXECUTOR, allocation APIs, launcher registration with one graph node per
launcher, GetWorkspaceSize running the planner, ReleaseTo). Phase 2 is `common_op_executor_run`: validation,
address binding, launch in registration order stopping at the first failure, and the release of a
non-repeatable executor after every run, whether it succeeded or failed.
"""
from __future__ import annotations

import logging
from typing import Any, Sequence

import numpy as np

from opsim.acl.dtypes import DataType, Format
from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import (BoolArray, FloatArray, Fp16Array, IntArray, Placement, Scalar, ScalarList, Storage,
                              Tensor, TensorList, host_tensor)
from opsim.errors import UseAfterDestroyError
from opsim.opdev import dfx
from opsim.opdev.graph import KernelGraph
from opsim.opdev.huge_mem import K_INVALID_HUGE_MEM_INDEX
from opsim.opdev.op_args import OpArgDef, OpArgType, graph_lists
from opsim.opdev.op_def import RepeatMode
from opsim.opdev.op_exec_cache import OpExecCache, OpExecCacheWrap, add_cache, check_cacheable
from opsim.opdev.planner import plan_workspace
from opsim.opdev.repeatable import launcher_repeatable_checker  # noqa: F401  (callers import it from here)
from opsim.opdev.thread_local import OpConfigInfo, OpLogInfo, current

log = logging.getLogger("opsim.opdev")

S = AclnnStatus


class AclOpExecutor:
    """aclOpExecutor + OpExecutorImpl: launchers, allocated objects, graph, workspace plan, repeat state."""

    kind = "executor"

    def __init__(self, ctx=None):
        ctx = ctx or current()
        self.thread = ctx
        self.huge_mem_pool_index = ctx.pool_index  # hugeMemPoolIndex_: recorded first, -1 when no pool
        self.workspace_offsets: list[int] = []     # SetWorkspaceOffsets / GetWorkspaceOffsets
        self.kernel_launch_obj_list: list = []
        self.allocated_obj_list: list = []
        self.allocated_tensor_list: list[Tensor] = []
        self.workspace_device_aicpu_task_offset = 0
        self.workspace_device_aicpu_mem = 0
        self.graph: KernelGraph | None = KernelGraph()
        self.stream = None
        self.workspace = 0
        self.workspace_size = 0
        self.planned_workspace_size = 0  # what GetWorkspaceSize last planned (diagnostics only)
        self.log_info: OpLogInfo = ctx.log_info.copy()
        self.config: OpConfigInfo = ctx.config.copy()
        self.l0_name: str | None = None
        self.tensor_relation: list[Tensor] = []
        self.cached_storage_list: list[Storage] = []
        self.repeat_mode = RepeatMode.DEFAULT
        self.alive = True
        self.runs = 0
        self.manager_ref = False
        self.l2_io_tensors: tuple[list, list] = ([], [])
        # OpExecCache: created unless the thread's cache is full (opbase `common/utils/op_cache.cpp`)
        self.op_exec_cache = None
        if not ctx.cache_has_full:
            self.op_exec_cache = OpExecCache.from_thread(ctx)

    # ---- allocation APIs (all register in the allocated-object list) -----------------------------
    def own(self, obj):
        """Register an object made elsewhere in the allocated-object list (freed with the executor)."""
        return self._own(obj)

    def _own(self, obj):
        self.allocated_obj_list.append(obj)
        if isinstance(obj, Tensor):
            self.allocated_tensor_list.append(obj)
        return obj

    def alloc_tensor(self, shape: Sequence[int], dtype: DataType | str = DataType.DT_FLOAT,
                     fmt: Format | str = Format.FORMAT_ND, *, origin_shape: Sequence[int] | None = None,
                     origin_format: Format | str | None = None) -> Tensor | None:
        """AllocTensor: a device tensor from workspace; its address is bound in phase 2."""
        if self.thread.process.fault("executor.alloc_tensor", shape):
            log.error("AllocTensor failed (injected), ACLNN_ERR_INNER")
            return None
        view = origin_shape if origin_shape is not None else shape
        t = Tensor(view, dtype, origin_format if origin_format is not None else fmt, storage_shape=shape,
                   storage_format=fmt, origin_shape=view, from_workspace=True)
        t.storage.memory = self._memory()
        return self._own(t)

    def alloc_host_tensor(self, shape_or_values, dtype: DataType | str = DataType.DT_INT64,
                          fmt: Format | str = Format.FORMAT_ND) -> Tensor:
        """AllocHostTensor(shape) or AllocHostTensor(values, n, dtype): a host tensor (not from workspace)."""
        if isinstance(shape_or_values, (list, tuple)) and all(isinstance(d, int) for d in shape_or_values) \
                and not isinstance(shape_or_values, IntArray):
            dt = DataType.parse(dtype)
            t = Tensor(shape_or_values, dt, fmt, placement=Placement.ON_HOST)
            t.storage.host_data = np.zeros(dt.nbytes(t.storage_numel()), dtype=np.uint8)
            return self._own(t)
        return self._own(host_tensor(list(shape_or_values), dtype, fmt))

    def convert_to_tensor(self, value, dtype: DataType | str | None = None) -> Tensor:
        """ConvertToTensor(array or scalar, dtype): a host tensor holding the values."""
        if isinstance(value, Scalar):
            dt = DataType.parse(dtype) if dtype is not None else value.dtype
            return self._own(host_tensor([value.value], dt))
        if isinstance(value, (IntArray, FloatArray, BoolArray, Fp16Array)):
            dt = DataType.parse(dtype) if dtype is not None else {
                IntArray: DataType.DT_INT64, FloatArray: DataType.DT_FLOAT, BoolArray: DataType.DT_BOOL,
                Fp16Array: DataType.DT_FLOAT16}[type(value)]
            return self._own(host_tensor(value.values, dt))
        return self._own(host_tensor(value, dtype))

    def create_view(self, t: Tensor, shape: Sequence[int], offset: int = 0) -> Tensor:
        """CreateView(t, shape, offset): shares t's storage; its own storage/origin shape is `shape`."""
        v = Tensor(shape, t.dtype, t.view_format, view_offset=offset, storage=t.storage,
                   storage_format=t.storage_format)
        return self._own(v)

    def alloc_tensor_list(self, tensors: Sequence[Tensor | None]) -> TensorList | None:
        if self.thread.process.fault("executor.alloc_tensor_list", len(tensors)):
            log.error("AllocTensorList failed (injected), ACLNN_ERR_INNER")
            return None
        return self._own(TensorList(tensors))

    def alloc_scalar(self, value, dtype: DataType | str = DataType.DT_FLOAT) -> Scalar:
        return self._own(Scalar(value, dtype))

    def alloc_int_array(self, values) -> IntArray:
        return self._own(IntArray(values))

    def alloc_float_array(self, values) -> FloatArray:
        return self._own(FloatArray(values))

    def alloc_bool_array(self, values) -> BoolArray:
        return self._own(BoolArray(values))

    def alloc_scalar_list(self, scalars) -> ScalarList:
        return self._own(ScalarList(scalars))

    def _memory(self):
        dev = self.thread.process.device
        return dev.memory if (dev is not None and self.thread.process.numerics) else None

    # ---- workspace -------------------------------------------------------------------------------
    def get_workspace_size(self, strategy: str = "max") -> int:
        """GetWorkspaceSize: the caller's last phase-2 size if any, else plan (MaxAllocator) + AI CPU region."""
        if self.workspace_size:
            return self.workspace_size
        total = plan_workspace(self.graph, strategy) if self.graph is not None else 0
        self.workspace_device_aicpu_task_offset = total
        size = total + self.workspace_device_aicpu_mem
        self.planned_workspace_size = size
        if self.op_exec_cache is not None:
            self.op_exec_cache.workspace_size = size
        return size

    def get_linear_workspace_size(self) -> int:
        """GetLinearWorkspaceSize (deprecated; aclnnContiguous still calls it)."""
        return self.get_workspace_size("linear")

    def set_workspace_offsets(self, offsets: Sequence[int]) -> None:
        """SetWorkspaceOffsets: record a list of workspace offsets (a copy) for a later reader."""
        self.workspace_offsets = [int(o) for o in offsets]

    def get_workspace_offsets(self) -> list[int]:
        """GetWorkspaceOffsets: the recorded list (empty until set); the non-contiguous path of an
        individual-op executor reads where each contiguous copy of its inputs sits in the workspace."""
        return self.workspace_offsets

    def update_tensor_addr(self, workspace: int, size: int) -> None:
        """Phase-2 binding: every from-workspace tensor's storage := workspace base."""
        self.workspace = workspace
        for t in self.allocated_tensor_list:
            st = t.storage
            if st.from_workspace:
                st.address = workspace
        self.workspace_size = size
        cache = self.op_exec_cache
        if cache is not None and not cache.usable:
            cache.recording = True

    # ---- cache and repeat ------------------------------------------------------------------------
    def abandon_cache(self, disable_repeat: bool = False) -> None:
        """AbandonCache: no replay / no phase-1 hit; with True, also SetRepeatable fails (sticky)."""
        if disable_repeat:
            self.repeat_mode = RepeatMode.UNREPEATABLE
        cache = self.op_exec_cache
        if cache is not None:
            cache.mark_invalid(self.thread)

    def add_to_kernel_launcher_list_aicpu(self, op_type: int, launcher: Any, args: Any) -> AclnnStatus:
        """AddToKernelLauncherListAiCpu(opType, obj, args): the AI CPU registration entry point beside
        CreatAicpuKernelLauncher. AbandonCache(true) (no replay, and SetRepeatable will fail), append the
        launcher, one graph node over its INPUT / OUTPUT / WORKSPACE lists."""
        current().charge("build graph")
        self.abandon_cache(True)
        self.kernel_launch_obj_list.append(launcher)
        return self.graph.build_graph(op_type, *graph_lists(args, with_outshape=False))

    def add_tensor_relation(self, l2_out: Tensor, middle: Tensor) -> None:
        """Recorded only with no huge-memory pool and not unrepeatable; always forwarded to the cache."""
        if self.huge_mem_pool_index == K_INVALID_HUGE_MEM_INDEX and self.repeat_mode != RepeatMode.UNREPEATABLE:
            self.tensor_relation.extend((l2_out, middle))
        if self.op_exec_cache is not None:
            self.op_exec_cache.add_relation(middle.storage, l2_out.storage)

    def is_repeatable(self) -> bool:
        return self.repeat_mode == RepeatMode.REPEAT

    def check_launcher_repeatable(self) -> bool:
        """Every launcher's checker with an empty relation and storage list."""
        return all(l.check_repeatable({}, set()) for l in self.kernel_launch_obj_list)

    def set_repeatable(self) -> AclnnStatus:
        """SetRepeatable: ACLNN_ERR_INNER on every failure."""
        if self.repeat_mode == RepeatMode.UNREPEATABLE:
            log.warning("executor is unrepeatable")
            return S.ACLNN_ERR_INNER
        if self.huge_mem_pool_index != K_INVALID_HUGE_MEM_INDEX:
            log.warning("cannot set an executor repeatable when it was created with a huge-memory pool")
            return S.ACLNN_ERR_INNER
        if len(self.tensor_relation) % 2:
            return S.ACLNN_ERR_INNER
        ctx = current()
        self.cached_storage_list = list(ctx.l2_storage_list)
        ori = {id(s) for s in self.cached_storage_list}
        relation = {}
        for i in range(0, len(self.tensor_relation), 2):
            relation[id(self.tensor_relation[i + 1].storage)] = id(self.tensor_relation[i].storage)
        for launcher in self.kernel_launch_obj_list:
            if not launcher.check_repeatable(relation, ori):
                log.warning("launcher %s is not repeatable", launcher)
                return S.ACLNN_ERR_INNER
        self.repeat_mode = RepeatMode.REPEAT
        cache = self.op_exec_cache
        if cache is not None:
            if cache.manager is not None:
                cache.manager.remove(cache)
            self.manager_ref = False
        return S.ACLNN_SUCCESS

    # ---- running ---------------------------------------------------------------------------------
    def run(self) -> AclnnStatus:
        """Run(): launch every launcher in graph order, stop at the first failure."""
        if self.graph is None:
            return S.ACLNN_ERR_PARAM_NULLPTR
        ctx = current()
        status = S.ACLNN_SUCCESS
        n = len(self.kernel_launch_obj_list)
        for node in self.graph.nodes:
            if node.original_id >= n:
                return S.ACLNN_ERR_INNER
            launcher = self.kernel_launch_obj_list[node.original_id]
            ctx.log_info.l0_name = launcher.op_log_info.l0_name
            status = launcher.launch()
            if status != S.ACLNN_SUCCESS:
                log.error("launch of %s failed with %s; later launchers are not run", launcher, int(status))
                break
        return status

    def __repr__(self) -> str:
        return (f"AclOpExecutor({self.log_info.l2_api_name}, launchers={len(self.kernel_launch_obj_list)}, "
                f"repeat={self.repeat_mode.name}, alive={self.alive})")


def delete_executor(executor: AclOpExecutor) -> None:
    """Executor destruction in opbase's order: graph, launchers (in list order), objects, TLS, cache."""
    if not executor.alive:
        return
    ctx = current()
    ctx.charge("destroy executor")
    if executor.graph is not None:
        executor.graph.destroy()
        executor.graph = None
    for launcher in executor.kernel_launch_obj_list:
        launcher.destroy()
    executor.kernel_launch_obj_list = []
    executor.allocated_obj_list = []
    executor.allocated_tensor_list = []
    ctx.log_info = OpLogInfo()
    ctx.profiling_info_id.kernel_launcher_id = 0
    ctx.pool_index = executor.huge_mem_pool_index  # TLS reset, then the executor's pool index put back
    cache = executor.op_exec_cache
    if cache is not None:
        if executor.repeat_mode == RepeatMode.REPEAT:
            cache.drop()
        else:
            cache.finalize()
    executor.alive = False


class UniqueExecutor:
    """CREATE_EXECUTOR(): owns the executor until ReleaseTo; freeing it otherwise is the phase-1 error path."""

    __slots__ = ("executor", "func_name")

    def __init__(self, func_name: str = ""):
        ctx = current()
        self.func_name = func_name
        ctx.charge("create executor")
        self.executor = AclOpExecutor(ctx)
        if ctx.config.is_op_dump_enable:
            self.executor.l2_io_tensors = (list(ctx.l2_io_tensors[0]), list(ctx.l2_io_tensors[1]))

    def get(self) -> AclOpExecutor:
        return self.executor

    def __getattr__(self, name):
        return getattr(self.executor, name)

    def release_to(self, want: bool = True) -> AclOpExecutor | None:
        """ReleaseTo(&out): hand the executor out and insert its OpExecCache into the thread's container.
        `want=False` models a null out-pointer: nothing happens and the UniqueExecutor keeps ownership."""
        ex = self.executor
        if not want or ex is None:
            return None
        ctx = current()
        ctx.charge("release to")
        self.executor = None
        cache = ex.op_exec_cache
        if cache is not None:
            if add_cache(ctx, cache):
                ex.manager_ref = True
            else:
                ex.op_exec_cache = None
        return ex

    def close(self) -> None:
        """Destructor: still owning the executor means phase 1 failed (ACLNN_ERR_INNER_NOT_TRANS_EXECUTOR)."""
        ex = self.executor
        if ex is None:
            return
        self.executor = None
        if ex.op_exec_cache is not None:
            ex.op_exec_cache.drop()
            ex.op_exec_cache = None
        log.error("executor not transferred out of phase 1 (%d)", int(S.ACLNN_ERR_INNER_NOT_TRANS_EXECUTOR))
        delete_executor(ex)

    def __enter__(self) -> "UniqueExecutor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def create_executor(func_name: str = "") -> UniqueExecutor:
    """CREATE_EXECUTOR()."""
    return UniqueExecutor(func_name)


# ---- public C APIs --------------------------------------------------------------------------------

def set_repeatable(executor: Any) -> AclnnStatus:
    """aclSetAclOpExecutorRepeatable."""
    if executor is None:
        return S.ACLNN_ERR_INNER_NULLPTR
    if isinstance(executor, AclOpExecutor):
        if not executor.alive:
            raise UseAfterDestroyError("aclSetAclOpExecutorRepeatable on a destroyed executor")
        return executor.set_repeatable()
    return S.ACLNN_ERR_INNER


acl_set_acl_op_executor_repeatable = set_repeatable


def destroy_executor(executor: Any) -> AclnnStatus:
    """aclDestroyAclOpExecutor: how repeatable executors (and unused cache wrappers) are freed."""
    if executor is None:
        return S.ACLNN_ERR_INNER_NULLPTR
    if isinstance(executor, AclOpExecutor):
        if executor.alive:
            delete_executor(executor)
        return S.ACLNN_SUCCESS
    if isinstance(executor, OpExecCacheWrap):
        executor.delete()
        return S.ACLNN_SUCCESS
    return S.ACLNN_ERR_INNER


acl_destroy_acl_op_executor = destroy_executor


def set_tensor_addr(executor: Any, tensor: Tensor | None, address: int) -> AclnnStatus:
    """aclSetInputTensorAddr / aclSetOutputTensorAddr / aclSetTensorAddr (index arguments are ignored)."""
    if tensor is None:
        return S.ACLNN_ERR_INNER_NULLPTR
    tensor.set_storage_address(address)
    if executor is None:
        return S.ACLNN_ERR_INNER_NULLPTR
    return S.ACLNN_SUCCESS


def set_dynamic_tensor_addr(executor: Any, tensor_list: TensorList | None, relative_index: int,
                            address: int) -> AclnnStatus:
    """aclSetDynamicInputTensorAddr & co."""
    if tensor_list is None:
        return S.ACLNN_ERR_INNER_NULLPTR
    if relative_index >= len(tensor_list):
        return S.ACLNN_ERR_PARAM_INVALID
    t = tensor_list[relative_index]
    if t is None:
        return S.ACLNN_ERR_INNER_NULLPTR
    t.set_storage_address(address)
    if executor is None:
        return S.ACLNN_ERR_INNER_NULLPTR
    return S.ACLNN_SUCCESS


def _warn_small_workspace(ctx, executor: AclOpExecutor, workspace_size: int) -> None:
    """opbase does not check the caller's size against the plan; the simulator says so, and runs on."""
    api = executor.log_info.l2_api_name
    msg = (f"{api}: phase 2 got a {workspace_size}-byte workspace but phase 1 planned "
           f"{executor.planned_workspace_size} bytes; opbase does not check this and kernels would write past "
           "the buffer")
    log.warning(msg)
    ctx.process.warn(msg)
    rec = ctx.process.recorder
    if rec.enabled:
        name = ctx.name
        ctx.at(lambda t: rec.instant(t, "workspace too small", name, {"api": api, "given": workspace_size,
                                                                     "planned": executor.planned_workspace_size}))


def common_op_executor_run(workspace: int, workspace_size: int, executor: Any, stream: Any) -> AclnnStatus:
    """CommonOpExecutorRun(workspace, workspaceSize, executor, stream), in opbase's exact order."""
    if executor is None:
        return S.ACLNN_ERR_PARAM_NULLPTR
    ctx = current()
    if workspace_size > 0 and not workspace:
        if isinstance(executor, OpExecCacheWrap):
            executor.delete()
        else:
            if executor.op_exec_cache is not None:
                executor.op_exec_cache.mark_invalid(ctx)
            delete_executor(executor)
        return S.ACLNN_ERR_PARAM_NULLPTR
    if isinstance(executor, OpExecCacheWrap):
        status = executor.replay(workspace, stream)
        executor.delete()
        return status
    if not executor.alive:
        raise UseAfterDestroyError(f"phase 2 called with a destroyed executor ({executor.log_info.l2_api_name}); "
                                   "a non-repeatable executor is freed after its first run")
    if executor.repeat_mode == RepeatMode.REPEAT:
        cache = executor.op_exec_cache
        if cache is not None and cache.usable and cache.l2_name == ctx.log_info.l2_api_name \
                and check_cacheable(ctx):
            addresses = [st.address for st in executor.cached_storage_list]
            status = cache.run(ctx, workspace, stream, addresses, executor.cached_storage_list)
            if status == S.ACLNN_SUCCESS:
                executor.runs += 1
                return S.ACLNN_SUCCESS
    if executor.repeat_mode == RepeatMode.REPEAT:
        rel = executor.tensor_relation
        for i in range(0, len(rel), 2):
            rel[i + 1].storage.address = rel[i].storage.address
    ctx.op_cache_context = executor.op_exec_cache
    executor.stream = stream
    ctx.charge("update tensor addr")
    if workspace_size < executor.planned_workspace_size:
        _warn_small_workspace(ctx, executor, workspace_size)
    executor.update_tensor_addr(workspace, workspace_size)
    ctx.executor = executor
    dump = executor.config.is_op_dump_enable
    if dump:
        dfx.l2_dump(ctx, executor, inputs=True)
    status = executor.run()
    if dump:
        dfx.l2_dump(ctx, executor, inputs=False)
    executor.runs += 1
    if status != S.ACLNN_SUCCESS and executor.op_exec_cache is not None:
        executor.op_exec_cache.mark_invalid(ctx)
    if executor.repeat_mode == RepeatMode.REPEAT:
        if executor.op_exec_cache is not None and not executor.op_exec_cache.finalized:
            executor.op_exec_cache.finalize()
    else:
        delete_executor(executor)
    ctx.executor = None
    return status
