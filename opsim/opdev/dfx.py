"""DFX: the L0 scope, operator dumps, overflow detection and stream-capture awareness (opbase
`composite_op/aclnn_engine/op_dfx.cpp`).

Dumps are structured records (name, op type, tensor descriptors) kept on the process and, when a dump
directory is configured and numerics are on, `.npy` files named after opbase's dump names. Overflow detection
checks non-finite values in DT_FLOAT / DT_FLOAT16 / DT_BF16 outputs (INFNAN mode) and costs the stream
synchronisations opbase performs.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opsim.acl.dtypes import FLOATING_CHECK_TYPES, DataType, bf16_to_float32
from opsim.acl.tensor import Tensor
from opsim.errors import InvalidArgumentError
from opsim.kernels.hashing import murmur_hash3_x64_h2
from opsim.opdev import rt
from opsim.opdev.op_args import OpArgContext, flatten_tensors
from opsim.opdev.op_def import CoreType
from opsim.opdev.thread_local import OpLogInfo, ProfilingInfoId, ThreadLocalContext, current
from opsim.outputs import atomic_file

log = logging.getLogger("opsim.opdev")

L2_ABSENT = "L2DfxAbscent"
L0_ABSENT = "L0DfxAbscent"


@dataclass
class DumpRecord:
    """One dump: opbase's name and op type, the direction and the tensor descriptors."""

    name: str
    op_type: str
    kind: str  # "input", "output" or "overflow"
    tensors: list = field(default_factory=list)
    files: list = field(default_factory=list)


def tensor_descriptor(t: Tensor, kind: str = "input") -> dict:
    """One dumped tensor (§2): kind, storage bytes, storage format, dtype, view-adjusted data address, address
    type, placement, storage and origin dims."""
    return {"kind": kind, "size": t.storage_nbytes, "format": t.storage_format.name, "dtype": t.dtype.name,
            "address": t.data_address, "address_type": "traditional", "placement": int(t.placement),
            "storage_dims": list(t.storage_shape), "origin_dims": list(t.origin_shape)}


class l0_dfx:
    """L0_DFX(name): launchers registered inside carry (l2ApiName, l0Name, sequence) of this scope.

    A small class rather than a generator-based context manager: phase 1 enters one scope per L0 call."""

    __slots__ = ("ctx",)

    def __init__(self, name: str, executor: Any = None):
        ctx = self.ctx = current()
        if executor is not None:
            executor.l0_name = name
            ctx.log_info = executor.log_info.copy()
        ctx.log_info.l0_name = name

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        self.ctx.log_info.l0_name = None


def dump_file_name(op_type: str, name: str, dump_id: int, kind: str, index: int) -> str:
    """`<opType>.<opName>.<dumpId>.<input|output>.<i>.npy`: the adump file name (op type first, then opbase's dump
    name) as the dump-to-npy conversion writes it; the process-wide dump id stands in for task id and timestamp."""
    return f"{op_type}.{name}.{dump_id}.{kind}.{index}.npy"


def _dump(ctx: ThreadLocalContext, name: str, op_type: str, kind: str, tensors: list[Tensor],
          kinds: list[str] | None = None) -> DumpRecord:
    """One dump of `tensors` (each tagged input/output) under opbase's name and op type."""
    p = ctx.process
    kinds = kinds if kinds is not None else [kind] * len(tensors)
    rec = DumpRecord(name, op_type, kind, [tensor_descriptor(t, k) for t, k in zip(tensors, kinds)])
    ctx.charge("dump")
    dump_id = len(p.dumps)
    if p.dump_dir and p.numerics:
        os.makedirs(p.dump_dir, exist_ok=True)
        per_kind: dict[str, int] = {}
        for t, k in zip(tensors, kinds):
            i = per_kind.get(k, 0)
            per_kind[k] = i + 1
            if not t.has_data():
                continue
            path = os.path.join(p.dump_dir, dump_file_name(op_type, name, dump_id, k, i))
            with atomic_file(path, "wb") as fh:
                np.save(fh, np.array(t.numpy()))
            rec.files.append(path)
    p.dumps.append(rec)
    return rec


def l0_dump(ctx: ThreadLocalContext, log_info: OpLogInfo, args: OpArgContext, inputs: bool) -> DumpRecord:
    """L0 dump of a launcher's flattened INPUT or OUTPUT list (null tensors dropped)."""
    lists = args.inputs() if inputs else args.outputs()
    tensors = [t for t in flatten_tensors(lists) if t is not None]
    name = f"{log_info.l2_api_name or L2_ABSENT}_{log_info.l2_sequence_counter}_L0"
    return _dump(ctx, name, log_info.l0_name or L0_ABSENT, "input" if inputs else "output", tensors)


def l2_dump(ctx: ThreadLocalContext, executor: Any, inputs: bool) -> DumpRecord | None:
    """L2 dump around the whole executor run (inputs before Run, outputs after, even on failure)."""
    if not executor.config.is_op_dump_enable:
        return None
    ins, outs = executor.l2_io_tensors
    tensors = [t for t in (ins if inputs else outs) if isinstance(t, Tensor)]
    li = executor.log_info
    name = f"{li.l2_api_name or L2_ABSENT}_{li.l2_sequence_counter}_L2"
    return _dump(ctx, name, li.l2_api_name or L2_ABSENT, "input" if inputs else "output", tensors)


def is_capturing(stream: Any) -> bool:
    """Whether the stream is being captured into a model (capture status ACTIVE)."""
    return bool(getattr(stream, "capturing", False))


def capture_status(ctx: ThreadLocalContext, stream: Any) -> tuple[bool, bool]:
    """aclmdlRICaptureGetInfo: (query succeeded, capture ACTIVE). The query can fail (fault point
    'rt.capture_get_info'); the status is then unknown and callers treat the stream as not captured."""
    if ctx.process.fault("rt.capture_get_info", stream):
        log.info("aclmdlRICaptureGetInfo failed; the stream is treated as not being captured")
        return False, False
    return True, is_capturing(stream)


def begin_capture(stream: Any) -> None:
    """aclmdlRICaptureBegin: the stream's capture status becomes ACTIVE (overflow checks are skipped on it)."""
    if stream is None:
        raise InvalidArgumentError("begin_capture needs a stream (sim.device.create_stream()), got None")
    stream.capturing = True


def end_capture(stream: Any) -> None:
    """aclmdlRICaptureEnd: the stream is no longer being captured."""
    if stream is None:
        raise InvalidArgumentError("end_capture needs a stream (sim.device.create_stream()), got None")
    stream.capturing = False


def overflow_candidates(args: OpArgContext) -> list[Tensor]:
    """Non-null, non-empty DT_FLOAT / DT_FLOAT16 / DT_BF16 tensors of the OUTPUT list."""
    return [t for t in flatten_tensors(args.outputs())
            if t is not None and not t.is_empty() and t.dtype in FLOATING_CHECK_TYPES]


def has_non_finite(t: Tensor) -> bool:
    if not t.has_data():
        return False
    arr = t.numpy()
    if t.dtype == DataType.DT_BF16:
        arr = bf16_to_float32(arr)
    return bool(not np.all(np.isfinite(arr)))


def overflow_dump_process(ctx: ThreadLocalContext, args: OpArgContext, stream: Any, log_info: OpLogInfo) -> bool:
    """OverflowDumpProcess in INFNAN mode: sync, check outputs, combined dump on overflow. Returns overflow."""
    rt.synchronize_stream(ctx, stream)
    ctx.charge("overflow check")
    candidates = overflow_candidates(args)
    for _dtype in dict.fromkeys(t.dtype for t in candidates):  # one NonFiniteCheck launch per dtype group
        report_non_finite_check(ctx)
    overflow = any(has_non_finite(t) for t in candidates)
    rt.synchronize_stream(ctx, stream)
    if overflow:
        name = f"{log_info.l2_api_name or L2_ABSENT}_{log_info.l2_sequence_counter}_L0"
        op_type = log_info.l0_name or L0_ABSENT
        ins = [t for t in flatten_tensors(args.inputs()) if t is not None]
        outs = [t for t in flatten_tensors(args.outputs()) if t is not None]
        _dump(ctx, name, op_type, "overflow", ins + outs, ["input"] * len(ins) + ["output"] * len(outs))
        ctx.process.overflows.append((name, op_type))
        log.warning("overflow detected in %s (%s)", name, op_type)
        rec = ctx.process.recorder
        if rec.enabled:
            track = ctx.name
            ctx.at(lambda t: rec.instant(t, "overflow", track, {"name": name, "op_type": op_type}))
    return overflow


def after_launch_overflow_check(ctx: ThreadLocalContext, args: OpArgContext, stream: Any, log_info: OpLogInfo,
                                ok: bool) -> None:
    """Launch step 8 (AI Core) / 6 (DirectInvoke): only on success, only with overflow dump on, skipped only
    when the capture-status query succeeds and reports ACTIVE (a failed query does not skip the check)."""
    if ok and ctx.process.overflow_dump:
        queried, active = capture_status(ctx, stream)
        if not (queried and active):
            overflow_dump_process(ctx, args, stream, log_info)


def deterministic_level_from_rt(ctx: ThreadLocalContext) -> int:
    """GetDeterministicLevelFromRt (op_executor.cpp) at phase-1 entry: ACL_OPT_DETERMINISTIC (a failed query gives
    0); only a reported 1 asks ACL_OPT_STRONG_CONSISTENCY, and only a value of exactly 1 (a failed query reads 0)
    upgrades it to 2. One path: a fault registered at another point changes nothing."""
    p = ctx.process
    faults = p.faults
    if faults and p.fault("rt.get_sys_param", "ACL_OPT_DETERMINISTIC"):
        log.warning("cannot get system param deterministic; level 0")
        return 0
    level = int(p.deterministic_level)
    if level == 1:
        consistency_failed = faults and p.fault("rt.get_sys_param", "ACL_OPT_STRONG_CONSISTENCY")
        if not consistency_failed and int(p.strong_consistency) == 1:
            return 2
    return level


# ---- profiling reports and their attribution (§5) ---------------------------------------------------

NON_FINITE_CHECK = "NonFiniteCheck"
MIX_TASK_TYPES = ("MIX_AIC", "MIX_AIV")


@dataclass
class ProfilingReport:
    """One record handed to the profiler. kind: "host_exec" (ACL API level), "kernel_launch" (the launch guard),
    "basic_info" and "tensor_info" (addition info), "attr_info" (level 2), "context_id" (mix kernels)."""

    kind: str
    op_type: str
    kernel_launcher_id: int
    summary_item_id: int
    l2_api_name: str | None
    l0_name: str | None
    task_type: str = ""
    tensor_num: int = 0
    tensor_type: str = ""  # tensor_info: "input" or "output" (MsprofGeTensorType); "" for the task-info form
    type_id: int = 0  # host_exec: the ACL-level type CollectProfilingStr registered for the guard's function name


_PROFILER_HASHES: dict[str, int] = {}
"""profiler_hash results by string (a pure function of the text, asked for twice per launcher built)."""


def profiler_hash(text: str) -> int:
    """The profiler's string hash (abstracted as MurmurHash3_x64_128, second half, of the UTF-8 bytes)."""
    h = _PROFILER_HASHES.get(text)
    if h is None:
        h = int(murmur_hash3_x64_h2(text.encode()))
        if len(_PROFILER_HASHES) >= 65536:
            _PROFILER_HASHES.clear()
        _PROFILER_HASHES[text] = h
    return h


def kernel_launcher_id(name: str | None) -> int:
    """GenKernelLauncherId(name): hash of the name, 0 for null."""
    return profiler_hash(name) if name else 0


def summary_item_id(l2_api_name: str | None, l0_name: str | None, op_type: str | None = None,
                    *, with_op_type: bool = True) -> int:
    """GenSummaryItemId: hash of "l2_l0_opType" (or "l2_l0" for the two-argument form), 0 if a part is null."""
    if not l2_api_name or not l0_name:
        return 0
    if not with_op_type:
        return profiler_hash(f"{l2_api_name}_{l0_name}")
    if not op_type:
        return 0
    return profiler_hash(f"{l2_api_name}_{l0_name}_{op_type}")


def launcher_profiling_ids(core_type: int, op_type: str, log_info: OpLogInfo, *, dsa: bool = False):
    """Attribution per task type (§5): AI Core hashes its op type, DSA its l0 name, DirectInvoke stays 0."""
    if core_type == CoreType.DIRECT_INVOKE:
        return ProfilingInfoId()
    l2, l0 = log_info.l2_api_name, log_info.l0_name
    if dsa:
        return ProfilingInfoId(0, kernel_launcher_id(l0), summary_item_id(l2, l0, l0))
    return ProfilingInfoId(0, kernel_launcher_id(op_type), summary_item_id(l2, l0, op_type))


def _emit(ctx: ThreadLocalContext, kind: str, op_type: str, launcher_id: int, summary_id: int,
          log_info: OpLogInfo, task_type: str = "", tensor_num: int = 0, tensor_type: str = "",
          type_id: int = 0) -> None:
    """Hand one record to the profiler: kept on the process and, with a trace, an instant "prof_<kind>"."""
    rep = ProfilingReport(kind, op_type, launcher_id, summary_id, log_info.l2_api_name, log_info.l0_name,
                          task_type, tensor_num, tensor_type, type_id)
    p = ctx.process
    p.profiling_reports.append(rep)
    rec = p.recorder
    if rec.enabled:
        track = ctx.name
        args = {"op_type": op_type, "summary_item_id": summary_id, "kernel_launcher_id": launcher_id}
        if task_type:
            args["task_type"] = task_type
        if type_id:
            args["type"] = type_id
        ctx.at(lambda t: rec.instant(t, f"prof_{kind}", track, args))


def kernel_launch_guard(ctx: ThreadLocalContext, summary_id: int, op_type: str, launcher_id: int = 0,
                        log_info: OpLogInfo | None = None) -> bool:
    """OpDfxGuard(id, DfxProfilingKernelLaunch): records only if (reportFlag or kernelLaunchFlag) and the id
    is not kInvalidProfilingId (0)."""
    sw = ctx.process.profiling
    if not (sw.report_flag or sw.kernel_launch_flag) or summary_id == 0:
        return False
    _emit(ctx, "kernel_launch", op_type, launcher_id, summary_id, log_info or ctx.log_info)
    return True


ACL_API_TYPE_BASE = 0x50000
"""The first type id CollectProfilingStr hands out (op_dfx.cpp: opProfilingCounter = 0x50000)."""


def collect_profiling_str(process: Any, name: str) -> int:
    """CollectProfilingStr: a process-wide id per distinct string, counted from 0x50000 in registration order
    (registered with the profiler as an ACL-level type, MsprofRegTypeInfo)."""
    table = process.profiling_strs
    type_id = table.get(name)
    if type_id is None:
        type_id = table[name] = ACL_API_TYPE_BASE + len(table)
    return type_id


class L2Guard:
    """The OpDfxProfiler of an L2 phase guard (OpDfxGuard, op_dfx.cpp): made at phase entry with reportFlag on,
    reported (MsprofReportApi, ACL level, type = the registered id of the guard's function name) when the guard
    is destroyed at the end of the phase function, so after everything the phase did."""

    __slots__ = ("api_name", "type_id", "log_info")

    def __init__(self, api_name: str, type_id: int, log_info: OpLogInfo):
        self.api_name, self.type_id, self.log_info = api_name, type_id, log_info


def open_l2_guard(ctx: ThreadLocalContext, api_name: str, func_name: str) -> None:
    """An L2 phase guard's constructor. `func_name` is the C function (`__func__`): "<API>GetWorkspaceSize" for
    phase 1, "<API>" for phase 2. A guard its caller left open (a caller that never ends the phase) is
    reported first."""
    if ctx.l2_guard is not None:
        close_l2_guard(ctx)
    if ctx.process.profiling.report_flag:
        ctx.l2_guard = L2Guard(api_name, collect_profiling_str(ctx.process, func_name), ctx.log_info.copy())


def close_l2_guard(ctx: ThreadLocalContext) -> bool:
    """An L2 phase guard's destructor: its host-exec record, whatever reportFlag says by now (the profiler was
    made at entry). False when no profiler was made."""
    guard = ctx.l2_guard
    if guard is None:
        return False
    ctx.l2_guard = None
    _emit(ctx, "host_exec", guard.api_name, 0, 0, guard.log_info, type_id=guard.type_id)
    return True


MSPROF_GE_TENSOR_DATA_NUM = 5
"""Tensors one tensor-info record holds (the CANN profiler header, prof_common.h: MSPROF_GE_TENSOR_DATA_NUM)."""


def report_addition_info(ctx: ThreadLocalContext, op_type: str, launcher_id: int, summary_id: int,
                         task_type: str, inputs: list | None, outputs: list = ()) -> None:
    """ReportAdditionInfo (op_dfx.cpp): a basic-info record, then the tensor info. `inputs` None is the task-info
    form: one empty record (tensorNum 0). Otherwise ReportTensorAdditionInfo per list, inputs then outputs: one
    record per MSPROF_GE_TENSOR_DATA_NUM tensors and one for the tail, none for an empty list. The callers filter
    the lists as opbase does."""
    li = ctx.log_info
    _emit(ctx, "basic_info", op_type, launcher_id, summary_id, li, task_type)
    if inputs is None:
        _emit(ctx, "tensor_info", op_type, launcher_id, summary_id, li, task_type, 0)
        return
    for tensor_type, tensors in (("input", inputs), ("output", outputs)):
        for start in range(0, len(tensors), MSPROF_GE_TENSOR_DATA_NUM):
            n = min(MSPROF_GE_TENSOR_DATA_NUM, len(tensors) - start)
            _emit(ctx, "tensor_info", op_type, launcher_id, summary_id, li, task_type, n, tensor_type)


def _non_null(tensors: list) -> list:
    """GetProfilingTensors (op_dfx_internal.h): the OpArgList form keeps tensors only; AddToList drops null ones."""
    return [t for t in tensors if isinstance(t, Tensor)]


def report_aicore_launch(ctx: ThreadLocalContext, op_type: str, task_type: str, inputs: list,
                         outputs: list) -> None:
    """DoLaunchWithDfx around one AI Core launch. The summary id was put in TLS before the launch (only with
    kernelLaunchFlag; otherwise the launcher's zero id stays and the guard records nothing)."""
    sw = ctx.process.profiling
    if not (sw.report_flag or sw.kernel_launch_flag):
        return  # the guard records nothing and nothing else is reported
    ids = ctx.profiling_info_id
    kernel_launch_guard(ctx, ids.summary_item_id, op_type, kernel_launcher_id(op_type))
    if not sw.kernel_launch_flag:
        return
    li = ctx.log_info
    if task_type in MIX_TASK_TYPES:
        _emit(ctx, "context_id", op_type, 0, ids.summary_item_id, li, task_type)
    ids.kernel_launcher_id = kernel_launcher_id(op_type)
    if sw.addition_info_flag:
        report_addition_info(ctx, op_type, ids.kernel_launcher_id, ids.summary_item_id, task_type,
                             _non_null(inputs), _non_null(outputs))
    if sw.level2_profiling_flag:  # reported with or without ATTR arguments (the inputs are summarised too)
        _emit(ctx, "attr_info", op_type, ids.kernel_launcher_id, ids.summary_item_id, li, task_type)


def before_aicore_launch(ctx: ThreadLocalContext, op_type: str) -> None:
    """With kernelLaunchFlag, TLS summaryItemId := hash("l2_l0_opType") from the restored TLS names."""
    if ctx.process.profiling.kernel_launch_flag:
        li = ctx.log_info
        ctx.profiling_info_id.summary_item_id = summary_item_id(li.l2_api_name, li.l0_name, op_type)


def report_internal_launch(ctx: ThreadLocalContext, op_type: str) -> None:
    """MemSet / MemSetV2 / NonFiniteCheck launches: summary id only with kernelLaunchFlag (else 0, so the guard
    stays silent), then the task-info addition report with kernelLaunchFlag and additionInfoFlag."""
    sw = ctx.process.profiling
    li = ctx.log_info
    sid = summary_item_id(li.l2_api_name, li.l0_name, op_type) if sw.kernel_launch_flag else 0
    lid = kernel_launcher_id(op_type)
    kernel_launch_guard(ctx, sid, op_type, lid)
    if sw.kernel_launch_flag and sw.addition_info_flag:
        report_addition_info(ctx, op_type, lid, sid, "AI_CORE", None)


def report_non_finite_check(ctx: ThreadLocalContext) -> None:
    """One NonFiniteCheck kernel of the INFNAN overflow check."""
    report_internal_launch(ctx, NON_FINITE_CHECK)


def report_aicpu_launch(ctx: ThreadLocalContext, op_type: str, launch_id: int, summary_id: int) -> None:
    """The kernel-launch guard around an AI CPU launch, with the summary id captured at task creation."""
    kernel_launch_guard(ctx, summary_id, op_type, launch_id)


def report_aicpu_run(ctx: ThreadLocalContext, op_type: str, launch_id: int, summary_id: int,
                     inputs: list, outputs: list) -> bool:
    """End of an AI CPU Run: with kernelLaunchFlag and additionInfoFlag, TLS kernelLauncherId := the task's
    launch id and tensor info is reported with task type AI_CPU: the non-null inputs (GetValidInputVec) and
    every output, null ones included (GetConstVec) (aicpu_task.cpp)."""
    sw = ctx.process.profiling
    if not (sw.kernel_launch_flag and sw.addition_info_flag):
        return False
    ctx.profiling_info_id.kernel_launcher_id = launch_id
    report_addition_info(ctx, op_type, launch_id, summary_id, "AI_CPU", _non_null(inputs), list(outputs))
    return True


def report_dsa_launch(ctx: ThreadLocalContext, inputs: list, outputs: list) -> None:
    """DSA Distribute: TLS summaryItemId := hash("l2_l0_l0") for the guard; tensor info (task type DSA) with
    kernelLaunchFlag and additionInfoFlag, attributed to hash(l0)."""
    li = ctx.log_info
    ids = ctx.profiling_info_id
    ids.summary_item_id = summary_item_id(li.l2_api_name, li.l0_name, li.l0_name)
    kernel_launch_guard(ctx, ids.summary_item_id, li.l0_name or "", kernel_launcher_id(li.l0_name))
    sw = ctx.process.profiling
    if sw.kernel_launch_flag and sw.addition_info_flag:
        ids.kernel_launcher_id = kernel_launcher_id(li.l0_name)
        report_addition_info(ctx, li.l0_name or "", ids.kernel_launcher_id, ids.summary_item_id, "DSA",
                             _non_null(inputs), _non_null(outputs))


def report_replayed_task(ctx: ThreadLocalContext, task: Any) -> None:
    """One replayed OpExecCache task (an op_exec_cache.RecordedTask): TLS ids := those recorded with it, the
    guard with them (a task recorded with profiling off keeps summary id 0 and stays silent), then with
    kernelLaunchFlag the context id of mix kernels and, with additionInfoFlag, the addition info."""
    ids = ctx.profiling_info_id
    launcher_id, summary_id = ids.kernel_launcher_id, ids.summary_item_id = task.profiling
    sw = ctx.process.profiling
    if not (sw.report_flag or sw.kernel_launch_flag):
        return
    op_type, task_type = task.op_name, task.task_type
    kernel_launch_guard(ctx, summary_id, op_type, launcher_id)
    if not sw.kernel_launch_flag:
        return
    if task_type in MIX_TASK_TYPES:
        _emit(ctx, "context_id", op_type, 0, summary_id, ctx.log_info, task_type)
    if sw.addition_info_flag:
        n_in = task.n_inputs
        report_addition_info(ctx, op_type, launcher_id, summary_id, task_type, _non_null(task.templates[:n_in]),
                             _non_null(task.templates[n_in:n_in + task.n_outputs]))
