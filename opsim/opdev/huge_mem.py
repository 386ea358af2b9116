"""The per-thread huge host-memory pool (opbase `composite_op/mem_mgr/huge_mem.cpp`).

A framework adapter (torch_npu) activates a pool on the calling thread around phase 1 so that every framework
object of that call is bump-allocated from it, and releases the whole pool once the call is done. opsim does
not model host object sizes; it keeps what changes behaviour — which pool index a thread holds, that an
executor records it at construction (and then cannot be made repeatable), that executor destruction puts it
back into the thread's TLS for the release — and shows pool use in the memory table.
"""
from __future__ import annotations

from typing import Any

from opsim.opdev.thread_local import ThreadLocalContext, current

K_INVALID_HUGE_MEM_INDEX = -1
K_MAX_HUGE_MEM_OBJECT_NUM = 4096
"""Pool count (kMaxHugeMemObjectNum; unit-test builds use 16)."""
K_HUGE_BLOCK_SIZE = 64 * 1024
"""Huge block size (64 KiB)."""
HOST_MEMORY_DEVICE = -1
"""`device` column of host-pool rows in the memory table (device rows carry the device id, >= 0)."""


class HugeMemPools:
    """Process-wide pool bookkeeping: the free index list (handed out from its back) and pools in use."""

    def __init__(self, count: int = K_MAX_HUGE_MEM_OBJECT_NUM):
        self.free: list[int] = list(range(count))
        self.in_use: set[int] = set()
        self.count = count

    def acquire(self) -> int:
        if not self.free:
            return K_INVALID_HUGE_MEM_INDEX
        idx = self.free.pop()
        self.in_use.add(idx)
        return idx

    def release(self, idx: int) -> bool:
        if idx == K_INVALID_HUGE_MEM_INDEX or idx >= self.count or idx not in self.in_use:
            return False
        self.in_use.discard(idx)
        self.free.append(idx)
        return True


def _record(ctx: ThreadLocalContext, kind: str, idx: int) -> None:
    rec = ctx.process.recorder
    if rec.enabled:
        n = len(ctx.process.huge_mem.in_use)
        ctx.at(lambda t: rec.memory_event(t, kind, idx, K_HUGE_BLOCK_SIZE, n, HOST_MEMORY_DEVICE))


def init_huge_mem_thread_local(ctx: ThreadLocalContext | None = None) -> int:
    """InitHugeMemThreadLocal: the thread takes an available pool index (-1 when none is left); returns 0."""
    ctx = ctx or current()
    idx = ctx.process.huge_mem.acquire()
    ctx.pool_index = idx
    if idx != K_INVALID_HUGE_MEM_INDEX:
        _record(ctx, "huge_pool_acquire", idx)
    return 0


def uninit_huge_mem_thread_local(ctx: ThreadLocalContext | None = None) -> None:
    """UnInitHugeMemThreadLocal: the thread stops allocating from its pool (the pool itself stays taken)."""
    ctx = ctx or current()
    ctx.pool_index = K_INVALID_HUGE_MEM_INDEX


def release_huge_mem(ctx: ThreadLocalContext | None = None) -> None:
    """ReleaseHugeMem (FreeHugeMem): frees the pool the thread's TLS names and returns its index to the list."""
    ctx = ctx or current()
    idx = ctx.pool_index
    ctx.pool_index = K_INVALID_HUGE_MEM_INDEX
    if ctx.process.huge_mem.release(idx):
        _record(ctx, "huge_pool_release", idx)


def get_pool_index(ctx: Any = None) -> int:
    """GetPoolIndex: the calling thread's active pool (-1 when none)."""
    return (ctx or current()).pool_index


__all__ = ["HugeMemPools", "init_huge_mem_thread_local", "uninit_huge_mem_thread_local", "release_huge_mem",
           "get_pool_index", "K_INVALID_HUGE_MEM_INDEX", "K_MAX_HUGE_MEM_OBJECT_NUM", "HOST_MEMORY_DEVICE"]
