"""The runtime calls opbase makes (kernel launch, memcpy, stream sync), as host actions on the thread.

Every submission becomes a device task queued on the stream at the thread's simulated time; its duration
comes from the cost model. Fault injection (tests) can make a runtime call fail with its opbase status.
"""
from __future__ import annotations

from typing import Any

from opsim.acl.status import AclnnStatus
from opsim.device.fitted import signature_key
from opsim.device.task import DeviceTask, TaskKind
from opsim.opdev.thread_local import ThreadLocalContext

S = AclnnStatus
_INF = float("inf")


def fault_status(ctx: ThreadLocalContext, point: str, *args: Any) -> AclnnStatus:
    """ACLNN_ERR_RUNTIME_ERROR when a test injected a failure at `point`, else success."""
    p = ctx.process
    return S.ACLNN_ERR_RUNTIME_ERROR if p.faults and p.fault(point, *args) else S.ACLNN_SUCCESS


def _task(kind_name: str, **kw):
    return DeviceTask(TaskKind[kind_name], **kw)


_KERNEL_TASK: list = []  # [DeviceTask.trusted, TaskKind.AI_CPU, AI_VECTOR, AI_CORE] once opsim.device is loaded


def _kernel_task_parts() -> list:
    if not _KERNEL_TASK:
        _KERNEL_TASK.extend((DeviceTask.trusted, TaskKind.AI_CPU, TaskKind.AI_VECTOR, TaskKind.AI_CORE))
    return _KERNEL_TASK


_OTHER_UNIT: dict[str, TaskKind] = {"PCIE_DMA_SQE": TaskKind.MEMCPY_D2D, "SDMA_SQE": TaskKind.MEMCPY_D2D,
                                    "DSA_SQE": TaskKind.RECORDED}
"""A replayed call's non-core tasks (opsim.ops.profiled.TASK_TYPES): its MEMCPY_ASYNC copies take a copy
engine, a DSA task its stream only (opsim models no DSA unit), never an AI Core."""


def submit_kernel(ctx: ThreadLocalContext, stream: Any, op_name: str, task_type: str, block_dim: int,
                  duration: float, *, replay: bool = False, aicpu: bool = False) -> None:
    """rtKernelLaunch / aclrtLaunchKernel: one AI Core (or AI CPU) task on `stream`."""
    ctx.charge("launch" if not aicpu else "Launch", op_name)
    if stream is None:
        return
    slowdown = ctx.process.slowdown
    if slowdown != 1.0:  # a slower NPU (a cluster rank's what-if): every kernel launch takes longer
        duration = duration * slowdown
    trusted, k_aicpu, k_vector, k_core = _KERNEL_TASK or _kernel_task_parts()
    kind = k_aicpu if aicpu else (k_vector if task_type in ("AI_VECTOR_CORE", "MIX_AIV") else
                                  _OTHER_UNIT.get(task_type, k_core))
    if type(duration) is float and 0.0 <= duration < _INF and type(task_type) is str:
        task = trusted(kind, duration, max(1, int(block_dim)), op_name, task_type, ctx.current_corr)
    else:  # anything unusual goes through the checking constructor (and its error messages)
        task = _task(kind.name, duration=duration, block_dim=max(1, int(block_dim)), op_name=op_name,
                     task_type=task_type, corr_id=ctx.current_corr)
    ctx.submit(stream, task)


def submit_memcpy(ctx: ThreadLocalContext, stream: Any, nbytes: int, direction: str, op_name: str = "Memcpy") -> None:
    """aclrtMemcpyAsync: direction 'H2D', 'D2H' or 'D2D'."""
    if stream is None:
        return
    cost = ctx.process.cost
    task = _task("MEMCPY_" + direction, duration=cost.memcpy_time(nbytes, direction), block_dim=1,
                 op_name=op_name, task_type="MEMCPY_ASYNC", corr_id=ctx.current_corr, nbytes=int(nbytes))
    ctx.submit(stream, task)


def synchronize_stream(ctx: ThreadLocalContext, stream: Any) -> AclnnStatus:
    """aclrtSynchronizeStream: the thread blocks until the stream drains."""
    status = fault_status(ctx, "rt.synchronize_stream")
    if status != S.ACLNN_SUCCESS:
        return status
    ctx.charge("stream sync")
    ctx.sync(stream)
    return S.ACLNN_SUCCESS


def kernel_duration(ctx: ThreadLocalContext, tiling: Any, op_type: str, inputs: list = (),
                    outputs: list = ()) -> float:
    """Duration of a kernel from its tiling result: an explicit duration, else the cost model's predictor
    (calibration, built-in fits, roofline) keyed by op type and core; the tensors give the signature a
    calibration may have measured."""
    if tiling.duration is not None:
        return float(tiling.duration)
    cost = ctx.process.cost
    signature = None
    if cost.fitted is not None and cost.fitted.signatures:
        signature = kernel_signature(op_type, tiling.task_type, inputs, outputs)
    return cost.kernel(op_type, tiling.task_type, tiling.flops, tiling.bytes, tiling.block_dim, signature)


def kernel_signature(op_type: str, core: str, inputs: list, outputs: list) -> str:
    """The calibration signature of a launch: op type, core, view shapes and dtypes of its tensors."""
    ins = [t for t in inputs if t is not None and hasattr(t, "view_shape")]
    outs = [t for t in outputs if t is not None and hasattr(t, "view_shape")]
    return signature_key(op_type, core, [t.view_shape for t in ins], [t.dtype.short_name for t in ins],
                         [t.view_shape for t in outs], [t.dtype.short_name for t in outs])


_TENSOR_INFO: dict[tuple, dict] = {}


def _describe(tensors: list) -> tuple[str, str, str]:
    ts = [t for t in tensors if t is not None and hasattr(t, "view_shape")]
    return (";".join(",".join(str(d) for d in t.view_shape) for t in ts),
            ";".join(t.dtype.name[3:] for t in ts),
            ";".join(t.view_format.name[7:] for t in ts))


def tensor_info(inputs: list, outputs: list) -> dict:
    """torch_npu / msprof strings for one launch ("128,256;256,512", "FLOAT;FLOAT", "ND;ND"), memoised per
    signature so that every launch of one signature shares one dict."""
    sig = tuple((tuple(t.view_shape), t.dtype, t.view_format) if t is not None and hasattr(t, "view_shape")
                else None for t in inputs) + (None,) + tuple(
        (tuple(t.view_shape), t.dtype, t.view_format) if t is not None and hasattr(t, "view_shape") else None
        for t in outputs)
    info = _TENSOR_INFO.get(sig)
    if info is None:
        i_shapes, i_types, i_formats = _describe(inputs)
        o_shapes, o_types, o_formats = _describe(outputs)
        info = {"input_shapes": i_shapes, "input_data_types": i_types, "input_formats": i_formats,
                "output_shapes": o_shapes, "output_data_types": o_types, "output_formats": o_formats}
        if len(_TENSOR_INFO) > 4096:
            _TENSOR_INFO.clear()
        _TENSOR_INFO[sig] = info
    return info


def record_tensor_info(ctx: ThreadLocalContext, op_name: str, info: dict) -> None:
    """Attach the launch's tensor description to the trace (profiler kernel_details shapes)."""
    rec = ctx.process.recorder
    if rec.enabled:
        rec.tensor_info(ctx.current_corr, op_name, info)
