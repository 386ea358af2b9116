"""AI CPU tasks (AicpuTask, AicpuTfTask, AicpuCCTask): Init once, then SetIoTensors + Run per launch.

A task is a fully initialised kernel invocation (argument buffer, ext info, loaded binary) cached by its
space. Init runs once at creation; every launch refreshes the ext info with the current shapes
(SetIoTensors), places host inputs inline in the launch args or in the executor's AI CPU device region,
launches one AI CPU block, and for DEPEND_SHAPE_RANGE ops synchronises the stream and copies the output
shapes back. Host time is charged under opbase's phase names; timestamps follow aicpu_utils.h.

Abstracted (fidelity policy): the ext-info and argument byte layouts. The ext-info size model below only
feeds deviceExtMemSize (DEPEND_SHAPE_RANGE), the device-region size and the shape copies.
"""
from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import Any

from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Placement, Tensor
from opsim.opdev import dfx, rt
from opsim.opdev.aicpu import kernel_lib as kl
from opsim.opdev.aicpu import timestamps as ts
from opsim.opdev.aicpu.key import convert_to_host_tensor, flatten_aicpu_inputs
from opsim.opdev.memo import find as memo_find, keep as memo_keep, value_key
from opsim.opdev.op_args import OpArgContext
from opsim.opdev.op_def import UnknowShapeOpType

log = logging.getLogger("opsim.opdev.aicpu")
S = AclnnStatus
DEPEND_SHAPE_RANGE = UnknowShapeOpType.DEPEND_SHAPE_RANGE

#: kMaxTotalHostLen: host-input bytes that can travel inline in the launch args.
K_MAX_TOTAL_HOST_LEN = 1024
#: Most dimensions a shape can have in the ext info.
K_MAX_SHAPE_DIMS = 8
#: Host-input alignment of the argument handlers.
K_CC_HOST_INPUT_ALIGN = 4
K_TF_HOST_INPUT_ALIGN = 64

# Modelled ext-info layout: items of an 8-byte header (type, length) plus a payload.
K_EXT_ITEM_HEADER = 8
K_EXT_SHAPE_TYPE = 4                         # the unknown-shape type (int32)
K_EXT_SHAPE_AND_TYPE = 4 + 8 * K_MAX_SHAPE_DIMS  # packed {int32 type; int64 dims[8]}
K_EXT_SESSION_INFO = 17                      # {u64 session id; u64 kernel id; bool flag}, packed
K_EXT_BITMAP = 8


def ext_info_size(n_inputs: int, n_outputs: int) -> int:
    """Bytes of a task's ext info (shape type, input shapes, output shapes, session info, bitmap)."""
    size = K_EXT_ITEM_HEADER + K_EXT_SHAPE_TYPE
    if n_inputs:
        size += K_EXT_ITEM_HEADER + K_EXT_SHAPE_AND_TYPE * n_inputs
    if n_outputs:
        size += K_EXT_ITEM_HEADER + K_EXT_SHAPE_AND_TYPE * n_outputs
    return size + K_EXT_ITEM_HEADER + K_EXT_SESSION_INFO + K_EXT_ITEM_HEADER + K_EXT_BITMAP


def round_up(value: int, multiple: int) -> int:
    """RoundUp: 0 when `multiple` is 0."""
    if multiple == 0:
        return 0
    return (value + multiple - 1) // multiple * multiple


def executor_host_tensor_factory(executor: Any):
    """The executor's ConvertToTensor for scalars and int arrays: a new host tensor the executor owns."""
    own = executor.own

    def make(source, dtype):
        return own(convert_to_host_tensor(source, dtype))

    return make


def flatten_outputs(args: OpArgContext, make) -> list[Tensor | None]:
    return flatten_aicpu_inputs(args.outputs(), make)


def _has_data(tensors: list) -> bool:
    for t in tensors:
        if t is not None and not t.has_data():
            return False
    return True


class AicpuTask(ABC):
    """One cached (or one-shot) AI CPU kernel invocation. Subclasses: AicpuTfTask, AicpuCCTask."""

    framework = kl.CC
    host_input_align = K_CC_HOST_INPUT_ALIGN

    __slots__ = ("op_type", "unknown_type", "space", "key", "seed", "is_visit", "device_ext_mem_size",
                 "device_cache_offset", "stream", "inputs", "outputs", "attrs", "launch_id", "summary_item_id",
                 "summary_item", "kernel", "kernel_so", "function_name", "use_new_launch", "is_custom", "kernel_id",
                 "ext_info_len", "ref_inputs", "ref_outputs", "host_input_placement", "holder", "released",
                 "launches", "_shapes")

    def __init__(self, op_type: str, unknown_type: int = UnknowShapeOpType.DEPEND_IN_SHAPE, space: Any = None):
        self.op_type = op_type
        self.unknown_type = unknown_type
        self.space = space
        self.key = b""
        self.seed = 0
        self.is_visit = False
        self.device_ext_mem_size = 0
        self.device_cache_offset = 0
        self.stream = None
        self.inputs: list[Tensor | None] = []
        self.outputs: list[Tensor | None] = []
        self.attrs: dict = {}
        self.launch_id = 0
        self.summary_item_id = 0
        self.summary_item = ""
        self.kernel: kl.AicpuKernel | None = None
        self.kernel_so = ""
        self.function_name = ""
        self.use_new_launch = False
        self.is_custom = False
        self.kernel_id = 0
        self.ext_info_len = 0
        self.ref_inputs: tuple[int, ...] = ()
        self.ref_outputs: tuple[int, ...] = ()
        self.host_input_placement: list[tuple[int, str, int]] = []
        self.holder = None        # the launcher currently occupying the task (None once released)
        self.released = False     # dropped by its space (Clear) or with its one-shot launcher
        self.launches = 0
        self._shapes = None       # output shapes the numerics produced in the current launch

    # ---- occupancy ---------------------------------------------------------------------------------------
    def set_visit(self, visit: bool) -> None:
        """SetVisit: occupancy flag (BUSY while some launcher uses the task)."""
        self.is_visit = visit

    # ---- Init ------------------------------------------------------------------------------------------
    def _init_common(self, ctx: Any, inputs: list, outputs: list) -> None:
        """launchId_, summaryItemId_ (captured at creation: a reused task keeps its creator's attribution),
        the ext info and, for DEPEND_SHAPE_RANGE, deviceExtMemSize_."""
        li = ctx.log_info
        self.launch_id = dfx.kernel_launcher_id(self.op_type)
        self.summary_item_id = dfx.summary_item_id(li.l2_api_name, li.l0_name, self.op_type)
        self.summary_item = f"{li.l2_api_name}_{li.l0_name}_{self.op_type}"
        self.ext_info_len = ext_info_size(len(inputs), len(outputs))
        if self.unknown_type == DEPEND_SHAPE_RANGE:
            self.device_ext_mem_size = self.ext_info_len

    @abstractmethod
    def init(self, ctx: Any, inputs: list, outputs: list, attrs: dict) -> AclnnStatus:
        """Init: the TF or CC step sequence (opbase `aicpu/task_handler/aicpu_task.cpp`)."""

    def _use_selection(self, status: AclnnStatus, sel: Any) -> AclnnStatus:
        """Keep what kernel-library selection chose (the last Init step of both task kinds)."""
        if status != S.ACLNN_SUCCESS:
            return status
        self.kernel = sel.kernel
        self.kernel_so = sel.kernel_so
        self.function_name = sel.function_name
        self.is_custom = sel.is_custom
        self.use_new_launch = sel.use_new_launch
        return S.ACLNN_SUCCESS

    # ---- SetIoTensors ------------------------------------------------------------------------------------
    def set_io_tensors(self, ctx: Any, executor: Any, args: OpArgContext) -> AclnnStatus:
        """Rebuild the launch's tensors (scalars / int arrays become new executor-owned host tensors again),
        write every shape into the ext info (at most 8 dims), point the scratch at the executor's AI CPU
        region and, for DEPEND_SHAPE_RANGE, copy the ext info to the start of that region."""
        ts.record(ctx, ts.K_UPDATE_SHAPE_START)
        make = executor_host_tensor_factory(executor)
        self.inputs = inputs = flatten_aicpu_inputs(args.inputs(), make)
        self.outputs = outputs = flatten_outputs(args, make)
        ctx.charge("UpdateShape", self.op_type)
        for t in inputs:
            if t is not None and len(t.origin_shape) > K_MAX_SHAPE_DIMS:
                log.error("%s input shape %s has more than %d dims (ext info), ACLNN_ERR_INNER", self.op_type,
                          list(t.origin_shape), K_MAX_SHAPE_DIMS)
                return S.ACLNN_ERR_INNER
        for t in outputs:
            if t is not None and len(t.origin_shape) > K_MAX_SHAPE_DIMS:
                log.error("%s output shape %s has more than %d dims (ext info), ACLNN_ERR_INNER", self.op_type,
                          list(t.origin_shape), K_MAX_SHAPE_DIMS)
                return S.ACLNN_ERR_INNER
        self.device_cache_offset = executor.workspace_device_aicpu_task_offset
        ts.record(ctx, ts.K_UPDATE_SHAPE_END)
        if self.unknown_type == DEPEND_SHAPE_RANGE and self.device_ext_mem_size:
            if self.device_ext_mem_size > executor.workspace_device_aicpu_mem:
                log.error("%s ext info (%d bytes) does not fit the AI CPU region (%d bytes), ACLNN_ERR_INNER",
                          self.op_type, self.device_ext_mem_size, executor.workspace_device_aicpu_mem)
                return S.ACLNN_ERR_INNER
            ctx.charge("ShapeH2D", self.op_type)
            rt.submit_memcpy(ctx, executor.stream, self.device_ext_mem_size, "H2D", "AicpuExtInfo")
            self.device_cache_offset += self.device_ext_mem_size
        ts.record(ctx, ts.K_SHAPE_H2D_END)
        return S.ACLNN_SUCCESS

    # ---- Run -------------------------------------------------------------------------------------------
    def _update_io_addr(self, ctx: Any, executor: Any, stream: Any) -> AclnnStatus:
        """UpdateIoAddr: host inputs inline while the inline total stays <= 1024 bytes, else into the device
        region (greedy, input order, sizes from the original shape); outputs must be on the device."""
        ctx.charge("UpdateArgs", self.op_type)
        placement = self.host_input_placement = []
        align = self.host_input_align
        inline = 0
        on_device = 0
        room = executor.workspace_device_aicpu_mem - self.device_ext_mem_size
        for i, t in enumerate(self.inputs):
            if t is None or t.placement != Placement.ON_HOST:
                continue
            size = round_up(t.dtype.nbytes(t.origin_shape.numel()), align)
            if inline + size <= K_MAX_TOTAL_HOST_LEN:
                placement.append((i, "inline", inline))
                inline += size
                continue
            if on_device + size > room:
                log.error("%s host input %d (%d bytes) overflows the AI CPU device region (%d of %d bytes used), "
                          "ACLNN_ERR_PARAM_INVALID", self.op_type, i, size, on_device, room)
                return S.ACLNN_ERR_PARAM_INVALID
            placement.append((i, "device", self.device_cache_offset + on_device))
            rt.submit_memcpy(ctx, stream, size, "H2D", "AicpuHostInput")
            on_device += size
        for t in self.outputs:
            if t is not None and t.placement == Placement.ON_HOST:
                log.error("%s output is on the host; AI CPU outputs must be on the device, ACLNN_ERR_INNER",
                          self.op_type)
                return S.ACLNN_ERR_INNER
        return S.ACLNN_SUCCESS

    def _before_update_args(self, stream: Any) -> None:
        """CC only: a run on a different stream gets a new kernel id in the session info."""

    def run(self, ctx: Any, executor: Any, stream: Any) -> AclnnStatus:
        """Run: update args, launch one AI CPU block, refresh output shapes (DEPEND_SHAPE_RANGE), print."""
        op = self.op_type
        ts.record(ctx, ts.K_UPDATE_ARGS_START)
        self._before_update_args(stream)
        status = self._update_io_addr(ctx, executor, stream)
        if status != S.ACLNN_SUCCESS:
            return status
        ts.record(ctx, ts.K_UPDATE_ARGS_END)
        status = self._launch(ctx, stream)
        if status != S.ACLNN_SUCCESS:
            return status
        ts.record(ctx, ts.K_LAUNCH_END)
        ts.record(ctx, ts.K_SHAPE_D2H_COPY_END)
        if self.unknown_type == DEPEND_SHAPE_RANGE:
            status = self._update_output_shapes(ctx, stream)
            if status != S.ACLNN_SUCCESS:
                return status
        ts.record(ctx, ts.K_UPDATE_OUTPUT_SHAPE_END)
        self.launches += 1
        self._report_profiling(ctx)
        ts.print_all(ctx, op)
        return S.ACLNN_SUCCESS

    def _report_profiling(self, ctx: Any) -> None:
        """Run step 10: with kernel-launch and addition-info profiling on, TLS kernelLauncherId := launchId_ and
        tensor info (task type AI_CPU) attributed to summaryItemId_, the creator's attribution even when another
        call reuses the task."""
        dfx.report_aicpu_run(ctx, self.op_type, self.launch_id, self.summary_item_id, self.inputs, self.outputs)

    def _launch(self, ctx: Any, stream: Any) -> AclnnStatus:
        """The kernel launch (new or old API): numerics when data is attached, then one AI CPU device task."""
        op = self.op_type
        dfx.report_aicpu_launch(ctx, op, self.launch_id, self.summary_item_id)  # the kernel-launch guard
        p = ctx.process
        if p.faults and p.fault("rt.launch_kernel", op):
            log.error("AI CPU launch of %s failed (%s API), ACLNN_ERR_RUNTIME_ERROR", op,
                      "new" if self.use_new_launch else "old")
            ctx.charge("Launch", op)
            return S.ACLNN_ERR_RUNTIME_ERROR
        kernel = self.kernel
        ins, outs = self.inputs, self.outputs
        self._shapes = None
        if kernel is not None and kernel.compute is not None and ctx.process.numerics \
                and _has_data(ins) and _has_data(outs):
            self._shapes = kernel.compute(ins, outs, self.attrs)
        cost_fn = kernel.cost if kernel is not None and kernel.cost is not None else kl.default_cost
        memo = ctx.process.launch_memo
        memo_key = hit = None
        if memo is not None and (cost_fn is kl.default_cost or kernel.cost_by_shape):
            memo_key = _launch_key(op, kernel, ins, outs, self.attrs)
            if memo_key is not None:
                hit = memo_find(memo, memo_key, (kernel, cost_fn), ins, outs)
        if hit is not None:
            duration, info = hit
        else:
            flops, nbytes = cost_fn(ins, outs, self.attrs)
            duration = ctx.process.cost.kernel(op, "AI_CPU", flops, nbytes, 1)
            info = rt.tensor_info(ins, outs)
            if memo_key is not None:
                memo_keep(memo, memo_key, (kernel, cost_fn), ins, outs, (duration, info))
        rt.submit_kernel(ctx, stream, op, "AI_CPU", 1, duration, aicpu=True)
        rt.record_tensor_info(ctx, op, info)
        return S.ACLNN_SUCCESS

    def forget_shapes(self) -> None:
        """Drop the output shapes of the last launch's numerics (a launch replayed without numerics starts so)."""
        self._shapes = None

    def _update_output_shapes(self, ctx: Any, stream: Any) -> AclnnStatus:
        """UpdateOutputShapeFromExtInfo: synchronise the stream, copy the output shapes device -> host
        (blocking), then overwrite every output's view, storage and original shapes."""
        status = rt.synchronize_stream(ctx, stream)
        if status != S.ACLNN_SUCCESS:
            return status
        outs = self.outputs
        rt.submit_memcpy(ctx, stream, K_EXT_SHAPE_AND_TYPE * len(outs), "D2H", "AicpuOutputShape")
        if stream is not None:
            ctx.sync(stream)
        ctx.charge("CopyShapeD2H", self.op_type)
        ts.record(ctx, ts.K_SHAPE_D2H_COPY_END)
        shapes = self._shapes
        if shapes is None and self.kernel is not None and self.kernel.output_shapes is not None:
            shapes = self.kernel.output_shapes(self.inputs, outs, self.attrs)
        if shapes is not None:
            for t, dims in zip(outs, shapes):
                if t is not None and dims is not None:
                    t.set_shape(dims)
        ctx.charge("UpdateOutputShape", self.op_type)
        return S.ACLNN_SUCCESS

    def __repr__(self) -> str:
        state = "released" if self.released else ("busy" if self.is_visit else "free")
        return f"{type(self).__name__}({self.op_type}, {state}, key={len(self.key)}B)"


def _launch_key(op: str, kernel: Any, ins: list, outs: list, attrs: dict | None) -> tuple | None:
    """The launch memo's key of an AI CPU launch: op, kernel and tensors by identity, attribute values."""
    flat: list = []
    for name, value in (attrs or {}).items():
        flat.append(name)
        flat.append(value)
    values = value_key(flat)
    if values is None:
        return None
    return ("aicpu", op, id(kernel), tuple(map(id, ins)), tuple(map(id, outs)), values)


class AicpuTfTask(AicpuTask):
    """A TensorFlow-framework kernel (tf_kernel.json): 64-byte host-input alignment, refs honoured."""

    framework = kl.TF
    host_input_align = K_TF_HOST_INPUT_ALIGN
    __slots__ = ()

    def init(self, ctx: Any, inputs: list, outputs: list, attrs: dict) -> AclnnStatus:
        """AicpuTfTask::Init: ids, ext info (ref dtypes), args, TF description once, SoC, launch API."""
        self.attrs = attrs
        self._init_common(ctx, inputs, outputs)
        space = self.space
        if space is not None:
            self.ref_inputs = tuple(i for i in range(len(inputs)) if space.is_ref(i, True))
            self.ref_outputs = tuple(i for i in range(len(outputs)) if space.is_ref(i, False))
        return self._use_selection(*kl.select_tf_kernel(ctx, self.op_type))


class AicpuCCTask(AicpuTask):
    """A CANN (CC) kernel: 4-byte host-input alignment, custom registry, libpt / libcpu kernels."""

    framework = kl.CC
    host_input_align = K_CC_HOST_INPUT_ALIGN
    __slots__ = ()

    def init(self, ctx: Any, inputs: list, outputs: list, attrs: dict) -> AclnnStatus:
        """AicpuCCTask::Init: custom registries once, ids, ext info, args, SoC, kernel library, launch API."""
        self.attrs = attrs
        kl.load_custom_registry(ctx, self.op_type)
        self._init_common(ctx, inputs, outputs)
        status = kl.set_supported_new_launch_flag(ctx, self.op_type)
        if status != S.ACLNN_SUCCESS:
            return status
        return self._use_selection(*kl.select_cc_kernel(ctx, self.op_type))

    def _before_update_args(self, stream: Any) -> None:
        if self.stream is not None and self.stream is not stream:
            self.kernel_id += 1
        self.stream = stream


__all__ = [
    "K_MAX_TOTAL_HOST_LEN", "K_MAX_SHAPE_DIMS", "K_CC_HOST_INPUT_ALIGN", "K_TF_HOST_INPUT_ALIGN", "ext_info_size",
    "round_up", "executor_host_tensor_factory", "AicpuTask", "AicpuTfTask", "AicpuCCTask",
]
