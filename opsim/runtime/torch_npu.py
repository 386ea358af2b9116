"""torch_npu's side of an ACLNN call: op-plugin's EXEC_NPU_CMD, its argument hash, and the task queue.

torch_npu serialises a call's arguments into a thread-local 8192-byte buffer and asks opbase for a cached executor
by that key (op-plugin `op_plugin/utils/op_api_common.h`): V1 hashes the bytes (gen_hash, the MurmurHash3 variant
opbase uses for its buckets) and looks up on the calling thread, queueing only phase 2; V2 hands opbase the bytes
and runs the whole call on the task-queue consumer thread. TASK_QUEUE_ENABLE picks the variant and the queue. A hit
skips phase 1 (no aclnnXxxGetWorkspaceSize); a miss runs phase 1 in PTA mode.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Mapping

import numpy as np

from opsim.acl.dtypes import DataType
from opsim.acl.tensor import BoolArray, FloatArray, Fp16Array, IntArray, Scalar, ScalarList, Tensor, TensorList
from opsim.errors import InvalidArgumentError
from opsim.fastpath import pta_key
from opsim.kernels.hashing import murmur_hash3_x64_h2
from opsim.opdev import huge_mem, pta_cache as pta
from opsim.opdev.op_args import Null
from opsim.opdev.thread_local import ThreadLocalContext, current, set_current
import simpy
from opsim.runtime import acl_rt

G_HASH_BUF_MAX_SIZE = 8192
"""torch_npu's g_hash_buf size (op_api_common.cpp kHashBufSize)."""
G_HASH_OVERFLOW_OFFSET = 8192 + 1024
"""The sticky offset that marks an overflowed (uncacheable) key (kHashBufMaxSize)."""
UINT32_MAX = 0xFFFFFFFF

# c10::ScalarType numbering (c10/core/ScalarType.h) for the dtypes opsim tensors can carry.
AT_SCALAR_TYPE: Mapping[DataType, int] = {
    DataType.DT_UINT8: 0, DataType.DT_INT8: 1, DataType.DT_INT16: 2, DataType.DT_INT32: 3, DataType.DT_INT64: 4,
    DataType.DT_FLOAT16: 5, DataType.DT_FLOAT: 6, DataType.DT_DOUBLE: 7, DataType.DT_COMPLEX32: 8,
    DataType.DT_COMPLEX64: 9, DataType.DT_COMPLEX128: 10, DataType.DT_BOOL: 11, DataType.DT_QINT8: 12,
    DataType.DT_QUINT8: 13, DataType.DT_QINT32: 14, DataType.DT_BF16: 15, DataType.DT_FLOAT8_E5M2: 23,
    DataType.DT_FLOAT8_E4M3FN: 24, DataType.DT_UINT16: 27, DataType.DT_UINT32: 28, DataType.DT_UINT64: 29,
}
AT_LONG, AT_DOUBLE, AT_COMPLEX_DOUBLE, AT_BOOL = 4, 7, 10, 11
_FLOATING = {DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16, DataType.DT_DOUBLE}
_COMPLEX = {DataType.DT_COMPLEX32, DataType.DT_COMPLEX64, DataType.DT_COMPLEX128}
_Q = struct.Struct("<q")


def gen_hash(data: bytes) -> int:
    """op-plugin's gen_hash: MurmurHash3-x64 (seed 0xdeadb0d7), second half; opbase's bucket hash."""
    return murmur_hash3_x64_h2(bytes(data))


def at_scalar_type(dtype: DataType) -> int:
    """The c10::ScalarType byte of a tensor dtype."""
    try:
        return AT_SCALAR_TYPE[dtype]
    except KeyError:
        raise InvalidArgumentError(f"{dtype.name} has no torch ScalarType; a torch_npu call cannot carry it") from None


@dataclass
class HashBuffer:
    """g_hash_buf + g_hash_offset: appends fail once the 8192 bytes would be exceeded (sticky)."""

    v2: bool = False
    buf: bytearray = field(default_factory=bytearray)
    offset: int = 0
    addresses: list[int] = field(default_factory=list)
    add_address: Callable[[int], None] | None = None

    def put(self, data: bytes) -> None:
        """MemcpyToBufImpl."""
        if self.offset + len(data) > G_HASH_BUF_MAX_SIZE:
            self.offset = G_HASH_OVERFLOW_OFFSET
            return
        self.buf += data
        self.offset += len(data)

    @property
    def overflowed(self) -> bool:
        return self.offset == G_HASH_OVERFLOW_OFFSET

    def _address(self, addr: int) -> None:
        self.addresses.append(addr)
        if self.add_address is not None:
            self.add_address(addr)

    # ---- encoders (§3.3) ---------------------------------------------------------------------------
    def tensor(self, t: Tensor | None) -> None:
        if t is None:
            self.put(b",")
            return
        fields = (self.v2, t.view_shape, t.strides, t.view_offset, t.storage_shape, t.dtype, t.storage_format)
        data = _TENSOR_BYTES.get(fields)
        if data is None:
            data = _tensor_bytes(fields)
        self.put(data)
        self._address(t.storage.address)

    def scalar(self, s: Scalar | None) -> None:
        if s is None:
            self.put(b",")
            return
        if s.dtype == DataType.DT_BOOL:
            self.put(bytes([1 if s.value else 0, AT_BOOL]))
        elif s.dtype in _COMPLEX:
            v = complex(s.value)
            self.put(struct.pack("<dd", v.real, v.imag) + bytes([AT_COMPLEX_DOUBLE]))
        elif s.dtype in _FLOATING:
            self.put(struct.pack("<d", float(s.value)) + bytes([AT_DOUBLE]))
        else:
            self.put(_Q.pack(int(s.value)) + bytes([AT_LONG]))

    def value(self, v: Any) -> None:
        if v is None or isinstance(v, Null):
            self.put(b",")
        elif isinstance(v, Tensor):
            self.tensor(v)
        elif isinstance(v, TensorList):
            for t in v.tensors:
                self.tensor(t)
            self.put(_Q.pack(len(v.tensors)))
        elif isinstance(v, Scalar):
            self.scalar(v)
        elif isinstance(v, ScalarList):
            for s in v.scalars:
                self.scalar(s)
            self.put(_Q.pack(len(v.scalars)) + b",")
        elif isinstance(v, IntArray):
            self.put(np.asarray(v.values, dtype="<i8").tobytes() + _Q.pack(len(v.values)))
        elif isinstance(v, BoolArray):
            if self.v2:  # vector<bool>: size x 8 bytes copied from a size-byte block: undefined key bytes
                self.put(_undefined_bytes(8 * len(v.values)))
            else:
                self.put(np.asarray(v.values, dtype=np.bool_).tobytes() + _Q.pack(len(v.values)))
        elif isinstance(v, (FloatArray, Fp16Array)):  # at::ArrayRef<double>: elements as doubles, then count
            self.put(np.asarray(v.values, dtype="<f8").tobytes() + _Q.pack(len(v.values)))
        elif isinstance(v, DataType):
            self.put(bytes([at_scalar_type(v)]))
        elif isinstance(v, str):  # const char*: characters then length
            b = v.encode()
            self.put(b + _Q.pack(len(b)))
        elif isinstance(v, (bool, np.bool_)):
            self.put(b"\x01" if v else b"\x00")
        elif isinstance(v, np.generic):
            self.put(v.tobytes())
        elif isinstance(v, int) and type(v) is not int:  # C enums: 4 bytes
            self.put(struct.pack("<i", int(v)))
        elif isinstance(v, int):
            self.put(_Q.pack(v))
        elif isinstance(v, float):
            self.put(struct.pack("<d", v))
        else:
            raise InvalidArgumentError(f"torch_npu cannot serialise an argument of type {type(v).__name__}")


_TENSOR_BYTES: dict[tuple, bytes] = {}
"""Key bytes of one tensor, memoised on exactly the fields that enter them (every hit rebuilds the same bytes)."""
_TENSOR_BYTES_MAX = 4096


def _tensor_bytes(fields: tuple) -> bytes:
    """sizes, dtype (V1 at::ScalarType 1 B, V2 aclDataType 4 B), ',', strides, storage offset, storage dim
    (omitted for strings), NPU format."""
    v2, shape, strides, offset, storage_shape, dtype, fmt = fields
    nd = len(shape)
    parts = [struct.pack(f"<{nd}q", *shape), struct.pack("<i", int(dtype)) if v2 else bytes([at_scalar_type(dtype)]),
             b",", struct.pack(f"<{nd}q", *strides), _Q.pack(offset)]
    if dtype != DataType.DT_STRING:
        parts.append(_Q.pack(storage_shape.numel()))
    parts.append(struct.pack("<i", int(fmt)))
    data = b"".join(parts)
    if len(_TENSOR_BYTES) >= _TENSOR_BYTES_MAX:
        _TENSOR_BYTES.clear()
    _TENSOR_BYTES[fields] = data
    return data


_UNDEFINED = [0]


def _undefined_bytes(n: int) -> bytes:
    """Stand-in for bytes read past a heap block: unique per call, so such a key never matches again."""
    _UNDEFINED[0] += 1
    return (_UNDEFINED[0].to_bytes(8, "little") * (n // 8 + 1))[:n]


def serialise(api: str, args: tuple, *, v2: bool = False, deterministic_level: int = 0, device: int = 0,
              stream: int = 0, core_control: tuple[int, int] | None = None, deterministic_bool: bool = False,
              add_address: Callable[[int], None] | None = None) -> HashBuffer:
    """The key torch_npu builds for `EXEC_NPU_CMD(api, *args)` (§3.2). V1 (master): [aic, aiv], deterministic
    level u32, API name, arguments, device byte, stream pointer. V2: deterministic level, [aic, aiv], API name,
    arguments, stream (no device). `deterministic_bool` gives releases 7.0.0-26.1.0's 1-byte bool field."""
    hb = HashBuffer(v2=v2, add_address=add_address)
    det = bytes([1 if deterministic_level else 0]) if deterministic_bool else struct.pack("<I", deterministic_level)
    core = struct.pack("<II", *core_control) if core_control is not None else b""
    if v2:
        hb.put(det)
        if core_control is not None and UINT32_MAX not in core_control:
            hb.put(core)
    else:
        hb.put(core)
        hb.put(det)
    hb.put(api.encode())
    for a in args:
        hb.value(a)
    if not v2:
        hb.put(struct.pack("<b", device))
    hb.put(struct.pack("<Q", stream & 0xFFFFFFFFFFFFFFFF))
    return hb


def calc_hash_id(hb: HashBuffer) -> int:
    """calc_hash_id: 0 after an overflow, else gen_hash over the whole buffer."""
    return 0 if hb.overflowed else gen_hash(hb.buf)


def task_queue_setting(env: Mapping[str, str]) -> tuple[int, bool]:
    """(variant 1 or 2, queue on) from TASK_QUEUE_ENABLE (default 1; ASCEND_LAUNCH_BLOCKING=1 forces 0)."""
    raw = str(env.get("TASK_QUEUE_ENABLE", "1")).strip()
    if raw not in ("0", "1", "2"):
        raise InvalidArgumentError(f"TASK_QUEUE_ENABLE={raw!r} is not supported; use 0, 1 or 2")
    value = 0 if str(env.get("ASCEND_LAUNCH_BLOCKING", "")).strip() == "1" else int(raw)
    return (2 if value == 2 else 1), value != 0


def stream_pointer(stream: Any) -> int:
    """A stable stand-in for the aclrtStream handle torch_npu hashes (one per stream id)."""
    return 0 if stream is None else 0x10000 + 0x100 * int(getattr(stream, "stream_id", 0))


# ---- the task queue ---------------------------------------------------------------------------------------

class TaskQueue:
    """torch_npu's task queue: one consumer host thread running queued jobs in order."""

    def __init__(self, sim: Any, name: str):
        self.sim = sim
        self.store = simpy.Store(sim.env)
        self.pending: dict[str, int] = {}
        self._waiters: dict[str, list] = {}
        self.thread = sim.add_thread(self._consume, name)

    def put(self, producer: str, job: Callable[[], Any], corr: int, on_done: Callable[[Any], None] | None,
            api: str | None = None) -> None:
        self.pending[producer] = self.pending.get(producer, 0) + 1
        self.store.put((producer, job, corr, on_done, api))

    def drain(self, producer: str) -> Generator:
        """Wait until every job `producer` queued has run (torch_npu empties the queue before a sync)."""
        while self.pending.get(producer, 0) > 0:
            ev = self.sim.env.event()
            self._waiters.setdefault(producer, []).append(ev)
            yield ev

    def _consume(self, th: Any) -> Generator:
        """Per job: the ``dequeue`` phase (the Dequeue@ event's own time around the call), the job, then the
        ``dequeue gap`` before the consumer can take the next job."""
        ctx = th.ctx
        while True:
            producer, job, corr, on_done, api = yield self.store.get()
            ctx.current_corr = corr
            ctx.charge("dequeue", api)
            result = yield from th.call(job)
            ctx.current_corr = -1
            ctx.charge("dequeue gap", api)
            yield from th.spend_actions()
            if on_done is not None:
                on_done(result)
            self.pending[producer] -= 1
            if not self.pending[producer]:
                for ev in self._waiters.pop(producer, []):
                    ev.succeed()


# ---- EXEC_NPU_CMD -----------------------------------------------------------------------------------------

@dataclass
class CallOutcome:
    """What one EXEC_NPU_CMD did: phase-2 status (None while queued), workspace size, PTA hit or miss."""

    status: int | None = 0
    workspace_size: int = 0
    hit: bool | None = None
    """True: PTA hit; False: PTA miss (phase 1 ran); None: no PTA lookup (gated off or forced-off form)."""
    corr: int = -1
    """The call's correlation id."""


class TorchNpu:
    """torch_npu in one simulated process: variant and queue from the environment, the task queue, the hash
    options. `pta_symbols=False` models a CANN without the PTA entry points (ordinary opbase cache only)."""

    def __init__(self, sim: Any, *, env: Mapping[str, str] | None = None, queue_thread: str = "task_queue",
                 device: int = 0, core_control: tuple[int, int] | None = None, deterministic_bool: bool = False,
                 pta_symbols: bool = True):
        self.sim = sim
        self.variant, self.queue_on = task_queue_setting(env if env is not None else sim.process.env)
        self.device = device
        self.core_control = core_control
        self.deterministic_bool = deterministic_bool
        self.pta_symbols = pta_symbols
        self.queue = TaskQueue(sim, queue_thread) if self.queue_on else None
        self.key_memo: dict | None = {} if sim.process.key_memo is not None else None
        """The fast path's memo of argument keys (opsim.fastpath.pta_key); None on the reference path."""

    # ---- hit_cache / hit_cache_v2 ------------------------------------------------------------------
    def hit_cache(self, ctx: ThreadLocalContext, api: str, args: tuple, stream: Any, v2: bool
                  ) -> tuple[bool, Any, int]:
        """(gated in, wrapper or None, workspace size). Gated in means PTA mode is on (a miss leaves it on)."""
        if not self.pta_symbols:
            return False, None, 0
        if not pta.can_use_pta_cache(api, ctx):
            return False, None, 0
        pta.init_pta_cache_thread_local(ctx)
        ctx.charge("make key", api)
        buf, offset, h = self._key(ctx, api, args, stream, v2)
        if v2:
            if offset == G_HASH_OVERFLOW_OFFSET:
                pta.set_pta_cache_hash_key(None, 0, ctx)
            else:
                pta.set_pta_cache_hash_key(buf, offset, ctx)
            # called even after an overflow, with the overflow offset as length: never matches
            wrap, ws = pta.pta_find_exec_cache(buf, offset, 0, ctx)
        else:
            pta.set_pta_hash_key(h, ctx)
            wrap, ws = pta.pta_get_exec_cache(h, 0, ctx)
        return True, wrap, ws

    def _key(self, ctx: ThreadLocalContext, api: str, args: tuple, stream: Any, v2: bool
             ) -> tuple[bytes, int, int | None]:
        """The call's key bytes, their offset and (V1) hash, with its tensors' addresses added to the cached
        list; on the fast path from the key memo (opsim.fastpath.pta_key) when the arguments are unchanged."""
        memo = self.key_memo
        head = (api, v2, ctx.process.deterministic_level, self.device, stream_pointer(stream), self.core_control,
                self.deterministic_bool)
        found = None if memo is None else pta_key.find(memo, head, args)
        if found is not None:
            for addr in pta_key.addresses(args):
                pta.add_tensor_addr_to_cached_list(addr, ctx)
            return found
        hb = serialise(api, args, v2=v2, deterministic_level=head[2], device=self.device, stream=head[4],
                       core_control=self.core_control, deterministic_bool=self.deterministic_bool,
                       add_address=lambda a: pta.add_tensor_addr_to_cached_list(a, ctx))
        key = (bytes(hb.buf), hb.offset, None if v2 else calc_hash_id(hb))
        if memo is not None:
            pta_key.keep(memo, head, args, v2, key)
        return key

    def _whole_call(self, ctx: ThreadLocalContext, gws: Callable, run: Callable, args: tuple, stream: Any,
                    api: str, form: str, v2: bool, queue_phase_2: bool) -> tuple[CallOutcome, Callable | None]:
        """One call up to (queue_phase_2) or through phase 2; returns the outcome and the phase-2 job if queued."""
        # lazy: keeps opsim.opdev out of importing opsim.runtime.torch_npu
        from opsim.opdev.executor import destroy_executor
        out = CallOutcome()
        executor = None
        if form == "cmd":
            gated, executor, size = self.hit_cache(ctx, api, args, stream, v2)
            out.hit = (executor is not None) if gated else None
        else:  # EXEC_NPU_CMD_SYNC / EXEC_NPU_NO_FORMAT_CHECK_CMD: PTA mode with an empty key, never cached
            pta.init_pta_cache_thread_local(ctx)
            if form == "sync" or not v2:
                pta.set_pta_hash_key(0, ctx)
            if form == "sync" or v2:
                pta.set_pta_cache_hash_key(None, 0, ctx)
        miss = executor is None
        if miss:  # a miss runs phase 1 with a huge-memory pool active (op-plugin `op_api_common.h`, EXEC_NPU_CMD_V1)
            huge_mem.init_huge_mem_thread_local(ctx)
            status, size, executor = gws(*args)
            if status != 0:
                huge_mem.uninit_huge_mem_thread_local(ctx)
                pta.un_init_pta_cache_thread_local(ctx)
                out.status = int(status)
                return out, None
        out.workspace_size = size
        workspace = 0
        if size:
            status, workspace = acl_rt.malloc(size)
            if status != 0:
                destroy_executor(executor)
                if miss:
                    huge_mem.release_huge_mem(ctx)
                    huge_mem.uninit_huge_mem_thread_local(ctx)
                pta.un_init_pta_cache_thread_local(ctx)
                out.status = int(status)
                return out, None

        def phase_2() -> int:
            out.status = int(run(workspace, size, executor, stream))
            if workspace:
                acl_rt.free_async(workspace, stream)
            if miss:  # ReleaseHugeMem in the same job: the destroyed executor put its pool index back into TLS
                huge_mem.release_huge_mem(current())
            return out.status

        if queue_phase_2:
            if miss:
                huge_mem.uninit_huge_mem_thread_local(ctx)
            pta.un_init_pta_cache_thread_local(ctx)
            out.status = None
            return out, phase_2
        phase_2()
        if form == "sync":
            acl_rt.synchronize_stream(stream)
        if miss:
            huge_mem.uninit_huge_mem_thread_local(ctx)
        pta.un_init_pta_cache_thread_local(ctx)
        return out, None

    def exec_npu_cmd(self, th: Any, gws: Callable, run: Callable, args: tuple, stream: Any, api: str, *,
                     form: str = "cmd", on_done: Callable[[CallOutcome], None] | None = None
                     ) -> Generator[Any, Any, CallOutcome]:
        """EXEC_NPU_CMD(api, args) on host thread `th` (`form`: "cmd", "sync" for EXEC_NPU_CMD_SYNC, or
        "no_format_check"). Returns the outcome as known on the calling thread; `on_done` gets the final one
        (after the queued part ran). One `op_call` span on the calling thread, one correlation id throughout."""
        if form not in ("cmd", "sync", "no_format_check"):
            raise InvalidArgumentError(f"unknown EXEC_NPU_CMD form {form!r}; use cmd, sync or no_format_check")
        ctx = th.ctx
        rec = self.sim.recorder
        env = self.sim.env
        queue = self.queue
        if form == "sync" and queue is not None:
            yield from queue.drain(th.name)
        corr = ctx.current_corr = rec.next_corr()
        start = env.now
        v2 = self.variant == 2
        job = None
        prev = set_current(ctx)
        try:
            if v2 and form != "sync" and queue is not None:
                ctx.charge("make key", api)  # CopyTypesV2: the argument snapshot taken before queueing
                out = CallOutcome(status=None)

                def job(out: CallOutcome = out) -> int | None:
                    done, _ = self._whole_call(current(), gws, run, args, stream, api, form, True, False)
                    out.status, out.workspace_size, out.hit = done.status, done.workspace_size, done.hit
                    return out.status
            else:
                out, job = self._whole_call(ctx, gws, run, args, stream, api, form, v2,
                                            queue is not None and form != "sync")
        finally:
            set_current(prev)
        if job is not None:
            ctx.charge("enqueue", api)  # the Enqueue event on the issuing thread
        th.calls += 1
        if ctx.actions:
            yield from th.spend_actions()
        out.corr = corr
        if job is not None:
            queue.put(th.name, job, corr, (lambda _r: on_done(out)) if on_done is not None else None, api)
        elif on_done is not None:
            on_done(out)
        if rec.enabled:
            rec.host_span(th.name, "op_call", api, start, env.now - start, corr)
        ctx.current_corr = -1
        return out

    def drain(self, th: Any) -> Generator:
        """Before a synchronisation on a PTA thread: wait for the queue to run everything it queued."""
        if self.queue is not None:
            yield from self.queue.drain(th.name)


__all__ = ["TorchNpu", "TaskQueue", "CallOutcome", "HashBuffer", "serialise", "calc_hash_id", "gen_hash",
           "task_queue_setting", "stream_pointer", "AT_SCALAR_TYPE", "G_HASH_BUF_MAX_SIZE",
           "G_HASH_OVERFLOW_OFFSET"]
