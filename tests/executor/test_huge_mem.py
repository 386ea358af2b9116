"""The per-thread huge host-memory pool (executor-and-memory.md §2, §8, §10, §11; op_executor.cpp,
mem_mgr/huge_mem.cpp, common/utils/bridge_pool.cpp)."""
from __future__ import annotations

from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Scalar, Tensor
from opsim.opdev.executor import AclOpExecutor, destroy_executor, set_repeatable
from opsim.opdev.huge_mem import (HOST_MEMORY_DEVICE, K_MAX_HUGE_MEM_OBJECT_NUM, HugeMemPools,
                                  init_huge_mem_thread_local, release_huge_mem, uninit_huge_mem_thread_local)
from opsim.opdev.op_def import RepeatMode
from opsim.opdev.process import ProcessContext
from opsim.opdev.thread_local import A_CALL, set_current
from opsim.ops.elementwise import aclnn_add, aclnn_add_get_workspace_size
from opsim.trace.recorder import Recorder

S = AclnnStatus
WS = 0x100000


def add_phase1():
    a, b, out = Tensor([8], address=0x80), Tensor([8], address=0x100), Tensor([8], address=0x200)
    return aclnn_add_get_workspace_size(a, b, Scalar(1.0), out)


def test_pool_indices_come_from_the_back_and_return_on_release(ctx):
    """InitHugeMemThreadLocal pops the last free index (4095 first); ReleaseHugeMem frees the TLS pool and
    pushes its index back; UnInit only forgets it."""
    assert init_huge_mem_thread_local(ctx) == 0
    assert ctx.pool_index == K_MAX_HUGE_MEM_OBJECT_NUM - 1
    uninit_huge_mem_thread_local(ctx)
    assert ctx.pool_index == -1 and K_MAX_HUGE_MEM_OBJECT_NUM - 1 in ctx.process.huge_mem.in_use
    ctx.pool_index = K_MAX_HUGE_MEM_OBJECT_NUM - 1
    release_huge_mem(ctx)
    assert ctx.pool_index == -1 and not ctx.process.huge_mem.in_use
    assert ctx.process.huge_mem.free[-1] == K_MAX_HUGE_MEM_OBJECT_NUM - 1


def test_no_pool_left_gives_minus_one():
    pools = HugeMemPools(count=1)
    assert pools.acquire() == 0 and pools.acquire() == -1
    assert not pools.release(-1) and pools.release(0) and not pools.release(0)


def test_executor_records_the_pool_index_and_cannot_be_made_repeatable(ctx):
    """Given a thread with an active pool, when an L2 phase 1 builds an executor, then it records the index and
    aclSetAclOpExecutorRepeatable returns ACLNN_ERR_INNER (561000), leaving it in Default mode."""
    init_huge_mem_thread_local(ctx)
    idx = ctx.pool_index
    status, size, ex = add_phase1()
    assert status == S.ACLNN_SUCCESS and ex.huge_mem_pool_index == idx
    assert set_repeatable(ex) == S.ACLNN_ERR_INNER and ex.repeat_mode == RepeatMode.DEFAULT
    uninit_huge_mem_thread_local(ctx)
    status, size, plain = add_phase1()
    assert plain.kind == "executor" and plain.huge_mem_pool_index == -1
    assert set_repeatable(plain) == S.ACLNN_SUCCESS
    destroy_executor(plain)
    destroy_executor(ex)


def test_unrepeatable_is_checked_before_the_pool(ctx):
    init_huge_mem_thread_local(ctx)
    ex = AclOpExecutor(ctx)
    ex.abandon_cache(True)
    assert ex.set_repeatable() == S.ACLNN_ERR_INNER and ex.repeat_mode == RepeatMode.UNREPEATABLE


def test_tensor_relation_is_not_recorded_with_a_pool(ctx):
    init_huge_mem_thread_local(ctx)
    ex = AclOpExecutor(ctx)
    ex.add_tensor_relation(Tensor([2]), Tensor([2]))
    assert ex.tensor_relation == []
    uninit_huge_mem_thread_local(ctx)
    ex = AclOpExecutor(ctx)
    ex.add_tensor_relation(Tensor([2]), Tensor([2]))
    assert len(ex.tensor_relation) == 2


def test_executor_destruction_puts_its_pool_index_back_into_tls(ctx):
    """The torch_npu sequence: Init, phase 1, UnInit, then phase 2 on the same thread (the executor dies there)
    and ReleaseHugeMem, which finds the pool through the TLS index the destructor restored."""
    init_huge_mem_thread_local(ctx)
    idx = ctx.pool_index
    status, size, ex = add_phase1()
    uninit_huge_mem_thread_local(ctx)
    assert aclnn_add(WS if size else 0, size, ex, None) == S.ACLNN_SUCCESS
    assert not ex.alive and ctx.pool_index == idx
    release_huge_mem(ctx)
    assert ctx.pool_index == -1 and idx not in ctx.process.huge_mem.in_use


def test_pool_use_is_in_the_memory_table():
    p = ProcessContext(recorder=Recorder(enabled=True))
    ctx = p.new_thread("t0")
    prev = set_current(ctx)
    try:
        init_huge_mem_thread_local(ctx)
        idx = ctx.pool_index
        release_huge_mem(ctx)
        for a in ctx.take_actions():
            if a[0] == A_CALL:
                a[1](1.0)
    finally:
        set_current(prev)
    mem = p.recorder.records("memory")
    rows = list(zip(mem["kind"], mem["address"], mem["device"], mem["in_use"]))
    assert rows == [("huge_pool_acquire", idx, HOST_MEMORY_DEVICE, 1), ("huge_pool_release", idx,
                                                                         HOST_MEMORY_DEVICE, 0)]
