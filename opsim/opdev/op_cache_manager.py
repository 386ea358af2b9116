"""OpExecCacheManager: a thread's OpExecCache container (opbase `include/nnopbase/opdev/op_cache_container.h`,
`common/utils/op_cache.cpp`).

Capacity comes from ACLNN_CACHE_LIMIT (read once per thread); eviction drops 30 LRU entries at a time and
happens before the duplicate check; the PTA hash map never evicts.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from opsim.acl.status import AclnnStatus
from opsim.opdev.thread_local import CacheEventAt, ThreadLocalContext, current

if TYPE_CHECKING:  # the manager holds caches; op_exec_cache imports this module
    from opsim.opdev.op_exec_cache import OpExecCache

S = AclnnStatus

K_CACHE_SHRINK_NUM = 30


class OpExecCacheManager:
    """The thread's manager: capacity from ACLNN_CACHE_LIMIT, an LRU key container, the (PTA) hash map."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.container: "OrderedDict[int, tuple[bytes, OpExecCache]]" = OrderedDict()
        """Key container in LRU order: slot -> (key at insertion, cache). A cache invalidated after insertion
        stays (dead, counted against the capacity) until evicted, but its key no longer matches."""
        self._slots: dict[bytes, int] = {}
        self._next_slot = 0
        self.hash_map: dict[int, OpExecCache] = {}
        self.evictions = 0

    def find(self, key: bytes) -> OpExecCache | None:
        """Lookup by exact bytes against the stored cache's own key; a found entry moves to the MRU end."""
        slot = self._slots.get(key)
        if slot is None:
            return None
        cache = self.container[slot][1]
        if cache.key != key:  # dead: its key was freed when it was invalidated
            del self._slots[key]
            return None
        self.container.move_to_end(slot)
        return cache

    def slot_of(self, key: bytes) -> int | None:
        """The key container's slot recorded for `key` (None when absent), without the LRU move or the dead-entry
        check of `find` (the fast path checks the entry itself)."""
        return self._slots.get(key)

    def has_key(self, key: bytes) -> bool:
        """`key` has a slot (a live or dead entry)."""
        return key in self._slots

    def slot_state(self) -> tuple[int, int]:
        """(keys with a slot, the next slot number): what a call that adds no entry leaves unchanged."""
        return len(self._slots), self._next_slot

    def _insert(self, cache: OpExecCache) -> None:
        slot = self._next_slot
        self._next_slot += 1
        self.container[slot] = (cache.key, cache)
        self._slots[cache.key] = slot
        cache.manager = self

    def add(self, ctx: ThreadLocalContext, cache: OpExecCache) -> bool:
        """AddOpExecCache (opbase `common/utils/op_cache.cpp`): returns whether the cache was accepted."""
        if not cache.valid:
            return False
        if len(self.hash_map) >= self.capacity:
            ctx.cache_has_full = True
            return False
        accepted = False
        if cache.hash_key and cache.hash_key not in self.hash_map:  # V1: no eviction, a present hash refuses
            self.hash_map[cache.hash_key] = cache
            cache.manager = self
            accepted = True
        if len(self.container) >= self.capacity:
            evicted = 0
            while self.container and evicted < K_CACHE_SHRINK_NUM:
                slot, (key, old) = self.container.popitem(last=False)
                if self._slots.get(key) == slot:
                    del self._slots[key]
                if old.manager is self and self.hash_map.get(old.hash_key) is not old:
                    old.manager = None
                evicted += 1
            self.evictions += evicted
            if evicted:
                rec = ctx.process.recorder
                op = ctx.log_info.l2_api_name or ""
                ctx.at(CacheEventAt(rec, ctx.name, "exec", "evict", op, 0, str(evicted)))
        if cache.key and self.find(cache.key) is None:
            self._insert(cache)
            return True
        return accepted

    def remove(self, cache: OpExecCache) -> None:
        """RemoveOpExecCache: the hash map by the cache's current hash (a poisoned entry, hash zeroed, stays),
        the key container by identity."""
        if cache.hash_key and self.hash_map.get(cache.hash_key) is cache:
            del self.hash_map[cache.hash_key]
        slot = self._slots.get(cache.key) if cache.key else None
        if slot is not None and self.container[slot][1] is cache:
            del self.container[slot]
            del self._slots[cache.key]
        else:
            for slot, (key, c) in list(self.container.items()):
                if c is cache:
                    del self.container[slot]
                    if self._slots.get(key) == slot:
                        del self._slots[key]
                    break
        cache.manager = None

    def clear(self) -> None:
        """aclnnReselectStaticKernel on this thread: both maps cleared, cacheHasFull reset by the caller."""
        for _, c in self.container.values():
            c.manager = None
        for c in self.hash_map.values():
            c.manager = None
        self.container.clear()
        self._slots.clear()
        self.hash_map.clear()


def set_cached_tensor_list(ctx: ThreadLocalContext, addresses: list) -> None:
    """Overwrite the TLS L2 address list from index 0 (the vector is reused, never shrunk)."""
    vec = ctx.cached_tensor_list
    n = len(addresses)
    vec[:n] = addresses
    ctx.cached_tensor_list_size = n


def get_manager(ctx: ThreadLocalContext) -> OpExecCacheManager:
    if ctx.op_cache_manager is None:
        ctx.op_cache_manager = OpExecCacheManager(ctx.process.exec_cache_limit)
    return ctx.op_cache_manager


def add_cache(ctx: ThreadLocalContext, cache: OpExecCache) -> bool:
    """Insert an executor's cache at ReleaseTo; a refused cache is deleted."""
    ok = get_manager(ctx).add(ctx, cache)
    if not ok:
        cache.drop()
    return ok


def reselect_static_kernel(ctx: ThreadLocalContext | None = None) -> AclnnStatus:
    """aclnnReselectStaticKernel: clears the calling thread's caches only and resets cacheHasFull."""
    ctx = ctx or current()
    get_manager(ctx).clear()
    ctx.cache_has_full = False
    return S.ACLNN_SUCCESS
