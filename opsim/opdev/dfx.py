"""DFX: the L0 scope, operator dumps, overflow detection and stream-capture awareness (dfx-and-profiling.md).

Dumps are structured records (name, op type, tensor descriptors) kept on the process and, when a dump
directory is configured and numerics are on, `.npy` files named after opbase's dump names. Overflow detection
checks non-finite values in DT_FLOAT / DT_FLOAT16 / DT_BF16 outputs (INFNAN mode) and costs the stream
synchronisations opbase performs.
"""
from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from opsim.acl.dtypes import FLOATING_CHECK_TYPES, DataType
from opsim.acl.tensor import Tensor
from opsim.opdev.op_args import OpArgContext, flatten_tensors
from opsim.opdev.op_def import CoreType
from opsim.opdev.thread_local import OpLogInfo, ProfilingInfoId, ThreadLocalContext, current

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


@contextmanager
def l0_dfx(name: str, executor: Any = None) -> Iterator[None]:
    """L0_DFX(name): launchers registered inside carry (l2ApiName, l0Name, sequence) of this scope."""
    ctx = current()
    if executor is not None:
        executor.l0_name = name
        ctx.log_info = executor.log_info.copy()
    ctx.log_info.l0_name = name
    try:
        yield
    finally:
        ctx.log_info.l0_name = None


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
            np.save(path, np.array(t.numpy()))
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


def begin_capture(stream: Any) -> None:
    """aclmdlRICaptureBegin: the stream's capture status becomes ACTIVE (overflow checks are skipped on it)."""
    if stream is None:
        from opsim.errors import InvalidArgumentError
        raise InvalidArgumentError("begin_capture needs a stream (sim.device.create_stream()), got None")
    stream.capturing = True


def end_capture(stream: Any) -> None:
    """aclmdlRICaptureEnd: the stream is no longer being captured."""
    if stream is None:
        from opsim.errors import InvalidArgumentError
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
        from opsim.acl.dtypes import bf16_to_float32
        arr = bf16_to_float32(arr)
    return bool(not np.all(np.isfinite(arr)))


def overflow_dump_process(ctx: ThreadLocalContext, args: OpArgContext, stream: Any, log_info: OpLogInfo) -> bool:
    """OverflowDumpProcess in INFNAN mode: sync, check outputs, combined dump on overflow. Returns overflow."""
    from opsim.opdev import rt
    rt.synchronize_stream(ctx, stream)
    ctx.charge("overflow check")
    candidates = overflow_candidates(args)
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
    """Launch step 8 (AI Core) / 6 (DirectInvoke): only on success, only with overflow dump on, skipped while
    the stream is being captured."""
    if ok and ctx.process.overflow_dump and not is_capturing(stream):
        overflow_dump_process(ctx, args, stream, log_info)


# ---- profiling attribution (§5) -------------------------------------------------------------------

@dataclass
class ProfilingReport:
    """One profiling record a launcher emits (kind: "kernel_launch", ...), with its attribution ids."""

    kind: str
    op_type: str
    kernel_launcher_id: int
    summary_item_id: int
    l2_api_name: str | None
    l0_name: str | None


_PROFILER_HASHES: dict[str, int] = {}
"""profiler_hash results by string (a pure function of the text, asked for twice per launcher built)."""


def profiler_hash(text: str) -> int:
    """The profiler's string hash (abstracted as MurmurHash3_x64_128, second half, of the UTF-8 bytes)."""
    h = _PROFILER_HASHES.get(text)
    if h is None:
        from opsim.kernels.hashing import murmur_hash3_x64_h2
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


def report_profiling(ctx: ThreadLocalContext, kind: str, ids: Any, op_type: str, log_info: OpLogInfo) -> bool:
    """The profiling guard: records only with profiling on (level-2 task-time switch) and a non-zero id."""
    p = ctx.process
    if not p.level2_profiling or ids.kernel_launcher_id == 0:
        return False
    p.profiling_reports.append(ProfilingReport(kind, op_type, ids.kernel_launcher_id, ids.summary_item_id,
                                               log_info.l2_api_name, log_info.l0_name))
    return True


def report_kernel_launch(ctx: ThreadLocalContext, launcher: Any) -> bool:
    """The kernel-launch report of an AI Core launch, attributed from its op type and captured DFX context."""
    ids = launcher_profiling_ids(launcher.core_type, launcher.op_type_name, launcher.op_log_info)
    return report_profiling(ctx, "kernel_launch", ids, launcher.op_type_name, launcher.op_log_info)
