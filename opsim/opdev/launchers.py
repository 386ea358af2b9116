"""Kernel launchers (opbase `common/inc/kernel_launcher.h`): the base, AI Core (two workspace paths), DSA, copy,
MemSet pre-launch.

A launcher is what phase 1 registers and phase 2 launches. Each owns its OpArgContext and destroys it in its
destructor; registration appends one launcher and one graph node to the executor.
"""
from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from opsim.acl.dtypes import DataType
from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Placement, Tensor
from opsim.errors import InvalidArgumentError
from opsim.opdev import dfx, rt
from opsim.opdev.kernel import AiCoreKernel, TilingResult, find_aicore_kernel, launch_config
from opsim.opdev.memo import find as memo_find, keep as memo_keep, value_key
from opsim.opdev.op_args import (OpArgContext, OpArgDef, OpArgType, destroy_op_arg_context, flatten_tensors,
                                 graph_lists, make_op_arg_context, op_input, op_output)
from opsim.opdev.op_def import CoreType, DsaTaskType, OpImplMode
from opsim.opdev.op_types import op_type_name, register_op_type
from opsim.opdev.repeatable import launcher_repeatable_checker
from opsim.opdev.thread_local import ProfilingInfoId, current

log = logging.getLogger("opsim.opdev")
S = AclnnStatus
DSA_WORKSPACE_SIZE = 512


def impl_mode_of(args: OpArgContext) -> int:
    """OPTION list -> impl mode: default IMPL_MODE_DEFAULT (0x1), the last OPARG_IMPLMODE wins."""
    mode = _IMPL_MODE_DEFAULT
    for a in args.kind_args(OpArgDef.OP_OPTION_ARG):
        if a.type == OpArgType.OPARG_IMPLMODE:
            mode = a.value
    return mode


_IMPL_MODE_DEFAULT = int(OpImplMode.IMPL_MODE_DEFAULT)
_T_TENSOR = OpArgType.OPARG_ACLTENSOR
_T_TENSOR_LIST = OpArgType.OPARG_ACLTENSOR_LIST


def flat_values(args_list) -> list:
    """Kernel-argument view of an OpArg list: tensors in order (null kept), tensor lists expanded."""
    out: list = []
    for tag, value in args_list:
        if tag is _T_TENSOR or tag != _T_TENSOR_LIST:
            out.append(value)
        elif value is not None:
            out.extend(value.tensors)
    return out


class KernelLauncher(ABC):
    """KernelLauncher base: op type, core type, executor, profiling ids and the DFX context at registration."""

    core_type = CoreType.AI_CORE

    def __init__(self, op_type: int, executor: Any, args: OpArgContext | None):
        ctx = current()
        self.op_type = op_type
        self.executor = executor
        self.args = args
        self.profiling_info_id = ProfilingInfoId()
        self.op_log_info = ctx.log_info.copy()
        self.destroyed = False

    @property
    def op_type_name(self) -> str:
        return op_type_name(self.op_type)

    @abstractmethod
    def launch(self) -> AclnnStatus:
        """Launch(): the launcher's phase-2 work; returns its status."""

    def get_bin(self) -> Any:
        return None

    def check_repeatable(self, relation: dict, ori_storage: set) -> bool:
        return launcher_repeatable_checker(self.args, relation, ori_storage)

    def restore_thread_local(self) -> Any:
        ctx = current()
        ctx.log_info.l0_name = self.op_log_info.l0_name
        ids = self.profiling_info_id  # copied into TLS: later TLS updates do not touch the launcher's ids
        tls = ctx.profiling_info_id
        tls.tiling_profiling_id, tls.kernel_launcher_id, tls.summary_item_id = \
            ids.tiling_profiling_id, ids.kernel_launcher_id, ids.summary_item_id
        return ctx

    def destroy(self) -> None:
        """Destructor: destroys the launcher's OpArgContext."""
        if self.destroyed:
            return
        self.destroyed = True
        destroy_op_arg_context(self.args)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.op_type_name})"


def register_launcher(executor: Any, launcher: KernelLauncher, inputs: list, outputs: list,
                      workspaces: list) -> AclnnStatus:
    """Append to the launcher list and build the graph node (same order: Run depends on it)."""
    ctx = current()
    ctx.charge("build graph")
    executor.kernel_launch_obj_list.append(launcher)
    return executor.graph.build_graph(launcher.op_type, inputs, outputs, workspaces)


# ---- AI Core --------------------------------------------------------------------------------------

class AiCoreKernelLauncher(KernelLauncher):
    """AiCoreKernelLauncher: tiling, optional MemSet pre-launch, the kernel launch, OUTSHAPE refresh."""

    core_type = CoreType.AI_CORE

    def __init__(self, op_type: int, executor: Any, args: OpArgContext, saved_ctx: TilingResult | None):
        super().__init__(op_type, executor, args)
        self.saved_ctx = saved_ctx
        self.impl_mode = impl_mode_of(args)

    def get_bin(self):
        return find_aicore_kernel(self.op_type_name)

    def launch(self) -> AclnnStatus:
        ctx = current()
        ex = self.executor
        tiling = self.saved_ctx
        repeat = ex.is_repeatable()
        self.restore_thread_local()
        dump = ctx.config.is_op_dump_enable
        if dump:
            dfx.l0_dump(ctx, self.op_log_info, self.args, inputs=True)
        ctx.impl_mode = self.impl_mode
        status, tiling = self._kernel_run(ctx, tiling)
        if dump:
            dfx.l0_dump(ctx, self.op_log_info, self.args, inputs=False)
        if ctx.process.overflow_dump:
            dfx.after_launch_overflow_check(ctx, self.args, ex.stream, self.op_log_info, status == S.ACLNN_SUCCESS)
        self.saved_ctx = tiling if repeat else None
        return status

    def _kernel_run(self, ctx, tiling: TilingResult | None) -> tuple[AclnnStatus, TilingResult | None]:
        kernel = self.get_bin()
        name = self.op_type_name
        if kernel is None:
            return S.ACLNN_ERR_INNER, tiling
        args = self.args
        ins = flat_values(args.inputs())
        outs = flat_values(args.outputs())
        attrs = [a.value for a in args.attrs()]
        memo = ctx.process.launch_memo
        memo_key = hit = None
        if memo is not None and tiling is None and kernel.tiling_by_shape:
            memo_key = _launch_key(ctx, kernel, ins, outs, attrs)
            if memo_key is not None:
                hit = memo_find(memo, memo_key, (kernel,), ins, outs)
        if tiling is None:
            ctx.charge("tiling", name)
            if hit is not None:
                tiling = hit[0]
            else:
                tiling = kernel.tiling(ins, outs, attrs)
                if not isinstance(tiling, TilingResult):
                    return S.ACLNN_ERR_INNER_NULLPTR, None
        ex = self.executor
        stream = ex.stream
        wss = flat_values(args.workspaces())
        if tiling.memset_outputs:
            targets = [outs[i] for i in tiling.memset_outputs if i < len(outs) and outs[i] is not None]
            _memset_launch(ctx, ex, stream, targets)
        if ctx.process.profiling.kernel_launch_flag:
            dfx.before_aicore_launch(ctx, name)
        launch_status = rt.fault_status(ctx, "rt.launch_kernel", name)
        if hit is not None:
            duration, info = hit[1], hit[2]
        else:
            duration = rt.kernel_duration(ctx, tiling, name, ins, outs)
            info = rt.tensor_info(ins, outs)
            if memo_key is not None:
                memo_keep(memo, memo_key, (kernel,), ins, outs, (tiling, duration, info))
        numerics = ctx.process.numerics
        if launch_status == S.ACLNN_SUCCESS:
            if numerics and kernel.compute is not None and _all_bound(ins + outs):
                kernel.compute(ins, outs, attrs, wss)
            rt.submit_kernel(ctx, stream, name, tiling.task_type, tiling.block_dim, duration)
            rt.record_tensor_info(ctx, name, info)
        cache = ctx.op_cache_context
        if cache is not None and cache is ex.op_exec_cache:
            cache.record(name, tiling.task_type, tiling.block_dim, duration, ins + outs + wss, len(ins), len(outs),
                         attrs, kernel.compute, tiling.tiling_data_size, launch_config(kernel, name, tiling))
        dfx.report_aicore_launch(ctx, name, tiling.task_type, ins, outs)
        if launch_status != S.ACLNN_SUCCESS:
            return S.ACLNN_ERR_RUNTIME_ERROR, tiling
        if args.contains_op_arg_type(OpArgDef.OP_OUTSHAPE_ARG):
            status = rt.synchronize_stream(ctx, stream)
            if status != S.ACLNN_SUCCESS:
                return status, tiling
            status = refresh_output_shapes(ctx, args, stream)
            if status != S.ACLNN_SUCCESS:
                return status, tiling
        return S.ACLNN_SUCCESS, tiling


def _launch_key(ctx, kernel: Any, ins: list, outs: list, attrs: list) -> tuple | None:
    """The launch memo's key: kernel and tensors by identity (the entry holds them), attribute values, core counts (TLS and process)."""
    values = value_key(attrs)
    if values is None:
        return None
    cfg, p = ctx.config, ctx.process
    return (id(kernel), tuple(map(id, ins)), tuple(map(id, outs)), values, cfg.aic_num, cfg.aiv_num, p.aic_num,
            p.aiv_num)


def _all_bound(tensors: list) -> bool:
    return all(t is None or not isinstance(t, Tensor) or t.has_data() for t in tensors)


def _memset_launch(ctx, executor, stream, targets: list[Tensor]) -> None:
    """MemSet pre-launch on the same stream over atomic-clean outputs (recorded like any AI Core launch)."""
    if ctx.process.numerics:
        for t in targets:
            if t.has_data():
                t.numpy()[...] = 0
    nbytes = sum(t.storage_nbytes for t in targets)
    core = memset_core(ctx.process.cost.soc)
    duration = ctx.process.cost.kernel("MemSet", core, 0.0, float(nbytes), 1)
    rt.submit_kernel(ctx, stream, "MemSet", core, 1, duration)
    dfx.report_internal_launch(ctx, "MemSet")
    cache = ctx.op_cache_context
    if cache is not None and cache is executor.op_exec_cache:
        cache.record("MemSet", core, 1, duration, list(targets), 0, len(targets), [],
                     _memset_compute, 64, launch_config(None, "MemSet", _MEMSET_TILING))


_MEMSET_TILING = TilingResult(block_dim=1, tiling_data_size=64)
"""The MemSet pre-launch as it is recorded: one block, 64 bytes of tiling data, tiling key 0."""


def memset_core(soc: Any) -> str:
    """The accelerator core a MemSet kernel runs on. The launch is part of the AI Core launcher (CoreType
    AI_CORE), but the atomic-clean kernel is a vector kernel: real 910B profiles show every MemSet
    (atomic_memset-*) on AI_VECTOR_CORE. A SoC without separate vector cores runs it on its AI Cores."""
    return "AI_VECTOR_CORE" if soc.vector_core_count else "AI_CORE"


def _memset_compute(ins, outs, attrs, wss) -> None:
    for t in outs:
        if t is not None and t.has_data():
            t.numpy()[...] = 0


def refresh_output_shapes(ctx, args: OpArgContext, stream: Any) -> AclnnStatus:
    """outshape.cpp: read pair 0's tensor (D2H), block k = elements 9k.., write output `index`'s shapes."""
    pairs = args.outshapes()
    if not pairs:
        return S.ACLNN_SUCCESS
    shape_tensor = pairs[0].value
    if shape_tensor is None:
        return S.ACLNN_ERR_INNER
    rt.submit_memcpy(ctx, stream, shape_tensor.storage_nbytes, "D2H", "OutShapeD2H")
    if shape_tensor.dtype not in (DataType.DT_INT64, DataType.DT_INT32, DataType.DT_FLOAT):
        return S.ACLNN_ERR_INNER
    if not shape_tensor.has_data():
        return S.ACLNN_SUCCESS  # numerics off: shapes keep their phase-1 values
    data = np.asarray(shape_tensor.numpy()).reshape(-1)
    outputs = args.get_op_arg(OpArgDef.OP_OUTPUT_ARG)
    for k in range(0, len(pairs) // 2):
        index = pairs[2 * k + 1].value
        block = data[9 * k:9 * k + 9]
        d = int(block[0])
        if shape_tensor.dtype == DataType.DT_INT64 and d > 0:
            d &= 0xFFFFFFFF7FFFFFFF
        dims = [int(x) for x in data[9 * k + 1:9 * k + 1 + max(d, 0)]]

        def _apply(a, dims=dims):
            if a.type == OpArgType.OPARG_ACLTENSOR and a.value is not None:
                a.value.set_shape(dims)
        outputs.visit_at(index, _apply)
    return S.ACLNN_SUCCESS


def creat_aicore_kernel_launcher(l0_name: str | None, op_type: int, executor: Any,
                                 args: OpArgContext | None) -> AclnnStatus:
    """CreatAiCoreKernelLauncher: explicit-workspace path or GetWorkspace path (tiling in phase 1)."""
    if args is None or executor is None:
        return S.ACLNN_ERR_PARAM_NULLPTR
    ctx = current()
    has_outshape = args.contains_op_arg_type(OpArgDef.OP_OUTSHAPE_ARG)
    if has_outshape:
        executor.abandon_cache(True)
    if args.contains_op_arg_type(OpArgDef.OP_WORKSPACE_ARG):
        launcher = AiCoreKernelLauncher(op_type, executor, args, None)
        register_launcher(executor, launcher, *graph_lists(args, with_outshape=False))
        return S.ACLNN_SUCCESS
    name = op_type_name(op_type)
    kernel = find_aicore_kernel(name)
    status = S.ACLNN_SUCCESS
    tiling: TilingResult | None = None
    sizes: list[int] = []
    if kernel is None:
        status = S.ACLNN_ERR_INNER
    elif not kernel.has_binaries:
        status = S.ACLNN_ERR_INNER_OPP_KERNEL_PKG_NOT_FOUND
    elif not kernel.declares_workspace and type(kernel).select is _DEFAULT_SELECT:
        pass  # the default selection accepts (the kernel has binaries) and there is no workspace to query
    else:
        ins = flat_values(args.inputs())
        outs = flat_values(args.outputs())
        attrs = [a.value for a in args.attrs()]
        if not kernel.select(ins, outs, attrs):
            status = S.ACLNN_ERR_INNER
        elif not kernel.declares_workspace:
            sizes = []
        elif kernel.static:
            sizes = list(kernel.static_workspace)
        else:
            ctx.charge("tiling", name)
            result = kernel.tiling(ins, outs, attrs)
            if isinstance(result, TilingResult):
                tiling = result
                sizes = list(result.workspace_sizes)
            else:
                status = S.ACLNN_ERR_INNER_NULLPTR
    if status != S.ACLNN_SUCCESS:
        log.error("AI Core workspace query for %s failed (%d); reported as ACLNN_ERR_INNER", name, int(status))
        status = S.ACLNN_ERR_INNER
    ws_list = None
    if status == S.ACLNN_SUCCESS and sizes:
        ctx.charge("alloc tensor", name)
        tensors = [executor.alloc_tensor([int(s)], DataType.DT_UINT8) for s in sizes]
        ws_list = executor.alloc_tensor_list(tensors)
    args.append_op_workspace_arg(ws_list)
    launcher = AiCoreKernelLauncher(op_type, executor, args, tiling)
    register_launcher(executor, launcher, *graph_lists(args, with_outshape=True))
    return status


_DEFAULT_SELECT = AiCoreKernel.select


def add_to_launcher_list_aicore(kernel_name: str, executor: Any, *groups) -> AclnnStatus:
    """ADD_TO_LAUNCHER_LIST_AICORE(KernelName, OP_INPUT(...), OP_OUTPUT(...), ...)."""
    ctx = current()
    ctx.charge("add io and attr", kernel_name)
    op_type = register_op_type(kernel_name)
    p = ctx.process
    args = None if p.faults and p.fault("op_args.make_context", kernel_name) else make_op_arg_context(*groups)
    return creat_aicore_kernel_launcher(kernel_name, op_type, executor, args)


# ---- DSA ------------------------------------------------------------------------------------------

class DsaKernelLauncher(KernelLauncher):
    """DSAKernelLauncher<Task>: tagged AI_CORE; random-number tasks read 5 inputs, gen-bit-mask 4."""

    core_type = CoreType.AI_CORE

    def __init__(self, op_type: int, executor: Any, args: OpArgContext, task_type: DsaTaskType):
        super().__init__(op_type, executor, args)
        self.task_type = task_type

    def check_repeatable(self, relation: dict, ori_storage: set) -> bool:
        return False

    def launch(self) -> AclnnStatus:
        ctx = self.restore_thread_local()
        stream = self.executor.stream
        wss = flat_values(self.args.workspaces())
        outs = flat_values(self.args.outputs())
        ins = flat_values(self.args.inputs())
        expected = 4 if self.task_type == DsaTaskType.DSA_GEN_BIT_MASK else 5
        if not wss or wss[0] is None or len(outs) != 1 or len(ins) != expected:
            return S.ACLNN_ERR_INNER
        if rt.fault_status(ctx, "rt.memcpy", "DSA") != S.ACLNN_SUCCESS:
            return S.ACLNN_ERR_INNER
        rt.submit_memcpy(ctx, stream, 256, "H2D", "DSAParam")
        if rt.fault_status(ctx, "rt.launch_kernel", "DSA") != S.ACLNN_SUCCESS:
            return S.ACLNN_ERR_INNER
        out = outs[0]
        name = self.op_log_info.l0_name or self.op_type_name
        duration = ctx.process.cost.kernel(name, "DSA", 0.0, float(out.storage_nbytes if out is not None else 0), 1)
        rt.submit_kernel(ctx, stream, name, "DSA", 1, duration)
        dfx.report_dsa_launch(ctx, ins, outs)
        return S.ACLNN_SUCCESS


def creat_dsa_kernel_launcher(l0_name: str | None, op_type: int, dsa_task_type: int, executor: Any,
                              args: OpArgContext | None) -> None:
    """CreatDSAKernelLauncher (void): 512-byte workspace, AbandonCache(true), graph node."""
    if args is None:
        log.error("DSA registration with null args (%d)", int(S.ACLNN_ERR_PARAM_NULLPTR))
        return
    try:
        task_type = DsaTaskType(dsa_task_type)
    except ValueError:
        raise InvalidArgumentError(f"unknown DSA task type {dsa_task_type}; accepted: 0..3") from None
    t = executor.alloc_tensor([DSA_WORKSPACE_SIZE], DataType.DT_UINT8)
    args.append_op_workspace_arg(executor.alloc_tensor_list([t]))
    launcher = DsaKernelLauncher(op_type, executor, args, task_type)
    executor.kernel_launch_obj_list.append(launcher)
    executor.abandon_cache(True)
    inputs, outputs, workspaces = graph_lists(args, with_outshape=False)
    executor.graph.build_graph(op_type, inputs, outputs, workspaces)


# ---- copy (NO_CALC) -------------------------------------------------------------------------------

class CopyKernelLauncher(KernelLauncher):
    """CopyToNpu (host -> device) / CopyNpuToNpu (device -> device) memcpy launchers."""

    core_type = CoreType.NO_CALC

    def __init__(self, op_type: int, executor: Any, args: OpArgContext, direction: str):
        super().__init__(op_type, executor, args)
        self.direction = direction

    def check_repeatable(self, relation: dict, ori_storage: set) -> bool:
        return False

    def launch(self) -> AclnnStatus:
        ctx = self.restore_thread_local()
        src = self.args.inputs()[0].value
        dst = self.args.outputs()[0].value
        if dst.storage_nbytes < src.storage_nbytes:
            return S.ACLNN_ERR_INNER
        if rt.fault_status(ctx, "rt.memcpy", self.direction) != S.ACLNN_SUCCESS:
            return S.ACLNN_ERR_RUNTIME_ERROR
        if ctx.process.numerics and src.has_data() and dst.has_data():
            dst.numpy()[...] = np.asarray(src.numpy()).reshape(dst.numpy().shape)
        rt.submit_memcpy(ctx, self.executor.stream, src.storage_nbytes, self.direction,
                         "CopyToNpu" if self.direction == "H2D" else "CopyNpuToNpu")
        return S.ACLNN_SUCCESS


def _add_copy_task(executor: Any, name: str, src: Tensor, dst: Tensor, direction: str) -> AclnnStatus:
    args = make_op_arg_context(op_input(src), op_output(dst))
    launcher = CopyKernelLauncher(register_op_type(name), executor, args, direction)
    executor.abandon_cache()
    return register_launcher(executor, launcher, [src], [dst], [])


def copy_to_npu(src: Tensor, executor: Any) -> Tensor | None:
    """CopyToNpu: a device workspace tensor with src's shapes, filled by an async H2D copy launcher."""
    if src is None or src.placement != Placement.ON_HOST:
        return None
    dst = executor.alloc_tensor(list(src.storage_shape), src.dtype, src.view_format)
    if dst is None:
        return None
    _add_copy_task(executor, "ViewCopy", src, dst, "H2D")
    return dst


def copy_npu_to_npu(src: Tensor, dst: Tensor, executor: Any) -> AclnnStatus:
    """CopyNpuToNpu: device -> device async copy; both must be on device."""
    if src is None or dst is None:
        return S.ACLNN_ERR_PARAM_NULLPTR
    if src.placement != Placement.ON_DEVICE_HBM or dst.placement != Placement.ON_DEVICE_HBM:
        return S.ACLNN_ERR_PARAM_INVALID
    return _add_copy_task(executor, "ViewCopy", src, dst, "D2D")
