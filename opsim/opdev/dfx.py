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
from opsim.opdev.thread_local import OpLogInfo, ThreadLocalContext, current

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


def tensor_descriptor(t: Tensor) -> dict:
    return {"size": t.storage_nbytes, "format": t.storage_format.name, "dtype": t.dtype.name,
            "address": t.data_address, "placement": int(t.placement), "storage_dims": list(t.storage_shape),
            "origin_dims": list(t.origin_shape)}


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


def _dump(ctx: ThreadLocalContext, name: str, op_type: str, kind: str, tensors: list[Tensor]) -> DumpRecord:
    p = ctx.process
    rec = DumpRecord(name, op_type, kind, [tensor_descriptor(t) for t in tensors])
    ctx.charge("dump")
    if p.dump_dir and p.numerics:
        os.makedirs(p.dump_dir, exist_ok=True)
        for i, t in enumerate(tensors):
            if not t.has_data():
                continue
            path = os.path.join(p.dump_dir, f"{name}.{op_type}.{kind}.{i}.npy")
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
        _dump(ctx, name, op_type, "overflow", ins + candidates)
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
