"""A small harness: one simulation with torch_npu, producer threads calling aclnnAdd (and friends) through
EXEC_NPU_CMD, and accessors for what the run recorded."""
from __future__ import annotations

from typing import Any, Callable, Generator

from opsim.acl import Scalar, Tensor
from opsim.ops.elementwise import aclnn_add, aclnn_add_get_workspace_size
from opsim.opdev.op_exec_cache import get_manager
from opsim.runtime.simulation import Simulation
from opsim.runtime.torch_npu import TorchNpu

ADD = (aclnn_add_get_workspace_size, aclnn_add)


class Harness:
    """Simulation + TorchNpu; `run(body, ...)` runs one producer thread per body."""

    def __init__(self, env: dict | None = None, **npu_kw: Any):
        self.sim = Simulation(env=env or {}, **npu_kw.pop("sim_kw", {}))
        self.npu = TorchNpu(self.sim, **npu_kw)
        self.outcomes: list = []
        self.threads: dict[str, Any] = {}
        self._addr = 0x100000

    def tensors(self, shape=(2, 3), n=3, dtype="float", **kw) -> list[Tensor]:
        """`n` fresh tensors, each at its own (fake) device address."""
        out = []
        for _ in range(n):
            self._addr += 0x1000
            out.append(Tensor(shape, dtype, address=self._addr, **kw))
        return out

    def add(self, th: Any, stream: Any, ts: list[Tensor] | None = None, alpha: int = 1, form: str = "cmd",
            **kw: Any) -> Generator:
        a, b, o = ts if ts is not None else self.tensors(**kw)
        return (yield from self.npu.exec_npu_cmd(th, *ADD, (a, b, Scalar(alpha, "int64"), o), stream, "aclnnAdd",
                                                 form=form, on_done=self.outcomes.append))

    def call(self, th: Any, stream: Any, fns: tuple, args: tuple, api: str, form: str = "cmd") -> Generator:
        return (yield from self.npu.exec_npu_cmd(th, *fns, args, stream, api, form=form,
                                                 on_done=self.outcomes.append))

    def run(self, *bodies: Callable[[Any, Any], Generator], names: tuple[str, ...] = ("py", "py2")) -> "Harness":
        for body, name in zip(bodies, names):
            def program(th, body=body):
                self.threads[th.name] = th
                stream = self.sim.device.create_stream()
                yield from body(th, stream)
                yield from self.npu.drain(th)
            self.sim.add_thread(program, name)
        self.sim.run()
        return self

    # ---- what happened --------------------------------------------------------------------------
    def ctx(self, name: str = "py"):
        if name == "queue":
            return self.npu.queue.thread.ctx
        return self.threads[name].ctx

    def manager(self, name: str = "py"):
        return get_manager(self.ctx(name))

    def phase_spans(self, phase: str, thread: str | None = None) -> list[tuple[str, str, int]]:
        host = self.sim.recorder.records("host")
        return [(t, op, c) for t, p, op, c in zip(host["thread"], host["phase"], host["op"], host["corr"])
                if p == phase and (thread is None or t == thread)]

    def phase1_count(self, thread: str | None = None) -> int:
        return len(self.phase_spans("L2 phase1 entry", thread))

    def cache_events(self, cache: str = "pta") -> list[str]:
        rec = self.sim.recorder.records("cache")
        return [k for c, k in zip(rec["cache"], rec["kind"]) if c == cache]

    @property
    def hits(self) -> list:
        return [o.hit for o in self.outcomes]

    @property
    def statuses(self) -> list:
        return [o.status for o in self.outcomes]
