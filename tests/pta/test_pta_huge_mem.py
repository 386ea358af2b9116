"""torch_npu's miss path runs phase 1 with a huge-memory pool active (pta-cache-mode.md §2.1 step 4):
InitHugeMemThreadLocal before GetWorkspaceSize, ReleaseHugeMem in the queued job after aclnnXxx,
UnInitHugeMemThreadLocal after queueing. The executor records the pool index (executor-and-memory.md §3, §10);
a hit's wrapper carries the thread's index at lookup (§6)."""
from __future__ import annotations

import pytest

from opsim.acl import Scalar
from opsim.opdev.huge_mem import K_INVALID_HUGE_MEM_INDEX, K_MAX_HUGE_MEM_OBJECT_NUM
from opsim.opdev.op_exec_cache import OpExecCacheWrap

from pta_helpers import ADD, Harness


def _traced(h: Harness, seen: list):
    gws, run = ADD

    def gws_traced(*args):
        status, size, executor = gws(*args)
        seen.append(("executor", executor.huge_mem_pool_index))
        return status, size, executor

    def run_traced(ws, size, executor, stream):
        if isinstance(executor, OpExecCacheWrap):
            seen.append(("wrapper", executor.pool_index))
        return run(ws, size, executor, stream)

    def body(th, stream):
        for _ in range(2):
            a, b, o = h.tensors()
            yield from h.call(th, stream, (gws_traced, run_traced), (a, b, Scalar(1, "int64"), o), "aclnnAdd")
            yield from h.npu.drain(th)
    return body


@pytest.mark.parametrize("tqe, consumer", [("0", "py"), ("1", "task_queue"), ("2", "task_queue")])
def test_a_miss_executor_records_the_pool_and_the_job_releases_it(tqe, consumer):
    h = Harness(env={"TASK_QUEUE_ENABLE": tqe})
    seen: list = []
    h.run(_traced(h, seen))
    top = K_MAX_HUGE_MEM_OBJECT_NUM - 1
    assert h.hits == [False, True]
    assert seen == [("executor", top), ("wrapper", K_INVALID_HUGE_MEM_INDEX)]
    mem = h.sim.recorder.records("memory")
    rows = [(k, a) for k, a in zip(mem["kind"], mem["address"]) if k.startswith("huge_pool")]
    assert rows == [("huge_pool_acquire", top), ("huge_pool_release", top)]
    assert not h.sim.process.huge_mem.in_use  # released (on the thread that ran phase 2)
    assert h.ctx("py").pool_index == K_INVALID_HUGE_MEM_INDEX  # UnInit after the call
    if consumer != "py":
        assert h.ctx("queue").pool_index == K_INVALID_HUGE_MEM_INDEX


def test_an_ordinary_call_takes_no_pool():
    from opsim.ops.elementwise import aclnn_add, aclnn_add_get_workspace_size
    from opsim.runtime.host_thread import run_op
    h = Harness(env={"TASK_QUEUE_ENABLE": "0"})

    def body(th, stream):
        a, b, o = h.tensors()
        yield from run_op(th, aclnn_add_get_workspace_size, aclnn_add, (a, b, Scalar(1, "int64"), o), stream)
    h.run(body)
    mem = h.sim.recorder.records("memory")
    assert not [k for k in mem["kind"] if k.startswith("huge_pool")]
