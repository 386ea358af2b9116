"""What the differential tests of the fast path share: device tensors, and the program steps that change
what a template depends on between calls (the same steps run on the fast and on the reference path)."""
from __future__ import annotations

from typing import Any, Generator

from opsim.acl import Tensor
from opsim.acl.dtypes import DataType
from opsim.opdev import profiling
from opsim.runtime import acl_rt

F16, F32 = DataType.DT_FLOAT16, DataType.DT_FLOAT
SHARED_STEPS = ("reshape", "retype", "level", "profile", "hog", "sync", "sleep")
"""The steps `shared_step` runs."""
RECORD_KINDS = ("host", "device", "memory", "cache", "instant", "counter")


def all_records(rec: Any) -> dict[str, dict]:
    """Every record of every kind, for comparing the two paths."""
    return {kind: rec.records(kind) for kind in RECORD_KINDS}


def thread_state(th: Any) -> tuple:
    """What a call leaves on its thread that the two paths must agree on: calls, busy time, TLS log info and
    config, profiling ids, key, hash key, current op, the L2 lists' agreement and the key container's LRU order."""
    ctx = th.ctx
    m = ctx.op_cache_manager
    return (th.calls, th.busy_us, ctx.log_info, ctx.config, ctx.profiling_info_id, ctx.key, ctx.hash_key,
            ctx.current_op, [t.storage for t in ctx.l2_tensor_list] == ctx.l2_storage_list,
            None if m is None else [k for k, _ in m.container.values()])


def device_tensor(sim: Any, shape: list[int], dtype: DataType = F32) -> Tensor:
    """A tensor with its storage in the simulation's device memory."""
    x = Tensor(shape, dtype)
    x.set_storage_address(sim.device.memory.malloc(max(x.storage_nbytes, 1))[1])
    return x


def shared_step(sim: Any, th: Any, kind: str, j: int, x: Tensor, stream: Any, hog: list) -> Generator:
    """One of `SHARED_STEPS` on thread `th` (`x`: the tensor to reshape or retype; `j`: 0 or 1, the variant;
    `hog`: the addresses taken by "hog", shared by the threads)."""
    if kind == "reshape":  # a new shape object with the same dims, or the dims reversed
        x.set_shape(list(x.view_shape) if j else list(reversed(x.view_shape)))
    elif kind == "retype":
        x.dtype = F16 if x.dtype == F32 else F32
    elif kind == "level":
        sim.process.deterministic_level = j
    elif kind == "profile":
        if j:
            profiling.start_profiling(sim.process, profiling.mask_of(["acl_api", "task_time"]))
        else:
            profiling.stop_profiling(sim.process)
    elif kind == "hog":  # take (or give back) nearly all device memory: workspaces then fail
        if hog:
            yield from th.call(acl_rt.free, hog.pop())
        else:
            free = sim.device.memory.capacity - sim.device.memory.in_use
            status, addr = yield from th.call(acl_rt.malloc, free - 512)
            if status == 0:
                hog.append(addr)
    elif kind == "sync":
        yield from th.call(acl_rt.synchronize_stream, stream)
    elif kind == "sleep":
        yield from th.sleep(3.0 * (j + 1))
    else:
        raise ValueError(f"not a shared step: {kind}")


def count_calls(monkeypatch: Any, module: Any, name: str) -> list[int]:
    """Replace `module.name` by a wrapper that counts its calls; the one-item list holds the count."""
    count = [0]
    real = getattr(module, name)

    def counting(*a: Any, **k: Any) -> Any:
        count[0] += 1
        return real(*a, **k)

    monkeypatch.setattr(module, name, counting)
    return count
