"""opbase's PTA entry points: a framework adapter (torch_npu) keys the OpExecCache with its own hash or bytes.

All are `extern "C"` in opbase and act on the calling thread only (opbase `common/utils/op_cache.cpp`). The V1 store
is the
manager's hash map (`cache_`: no eviction, a full map sets the sticky cacheHasFull_, an entry invalidated after
insertion stays as a poisoned hash); the V2 store is the ordinary LRU key container (`cache2_`). A hit returns
a cache wrapper whose phase 2 replays the recorded launches with the addresses the adapter pushed, by index.
Nothing here raises: lookups return a wrapper or None, the rest return nothing or a status.
"""
from __future__ import annotations

import logging

from opsim.acl.status import AclnnStatus
from opsim.opdev.op_exec_cache import (OpExecCache, OpExecCacheWrap, check_cacheable, get_manager,
                                       reselect_static_kernel)
from opsim.opdev.thread_local import CacheEventAt, ThreadLocalContext, current

log = logging.getLogger("opsim.opdev")
S = AclnnStatus


def can_use_pta_cache(api: str, ctx: ThreadLocalContext | None = None) -> bool:
    """CanUsePTACache(api): False (and cacheHasFull_ := true, sticky) when caching is disabled; else
    l2ApiName := api, cacheApi_ := api, next sequence number."""
    ctx = ctx or current()
    # the TLS copy of the op-dump switch is refreshed only by phase 1; the switch itself is the process's
    if ctx.process.op_dump or not check_cacheable(ctx):
        ctx.cache_has_full = True
        return False
    ctx.log_info.l2_api_name = api
    ctx.cache_api = api
    ctx.log_info.l2_sequence_counter = ctx.process.next_sequence()
    return True


def _reset(ctx: ThreadLocalContext, use_pta_hash: bool) -> None:
    ctx.key = b""
    ctx.hash_key = 0
    ctx.use_pta_hash = use_pta_hash
    ctx.cached_tensor_list_size = 0
    ctx.l2_storage_list = []
    ctx.l2_tensor_list = []


def init_pta_cache_thread_local(ctx: ThreadLocalContext | None = None) -> None:
    """InitPTACacheThreadLocal: empty key and hash, usePTAHash_ := true, address and storage lists emptied
    (cacheApi_ untouched)."""
    _reset(ctx or current(), True)


def reset_cache_thread_local(ctx: ThreadLocalContext | None = None) -> None:
    """ResetCacheThreadLocal: as InitPTACacheThreadLocal but leaves PTA mode."""
    _reset(ctx or current(), False)


def un_init_pta_cache_thread_local(ctx: ThreadLocalContext | None = None) -> None:
    """UnInitPTACacheThreadLocal: usePTAHash_ := false only (hash, key and address list stay)."""
    (ctx or current()).use_pta_hash = False


def add_tensor_addr_to_cached_list(addr: int, ctx: ThreadLocalContext | None = None) -> None:
    """AddTensorAddrToCachedList: append at the logical end (the vector is reused, never shrunk)."""
    ctx = ctx or current()
    vec = ctx.cached_tensor_list
    n = ctx.cached_tensor_list_size
    if n < len(vec):
        vec[n] = addr
    else:
        vec.append(addr)
    ctx.cached_tensor_list_size = n + 1


def set_pta_hash_key(hash_key: int, ctx: ThreadLocalContext | None = None) -> None:
    """SetPTAHashKey: hashKey_ := h."""
    (ctx or current()).hash_key = int(hash_key) & 0xFFFFFFFFFFFFFFFF


def set_pta_cache_hash_key(buf: bytes | None, length: int, ctx: ThreadLocalContext | None = None) -> None:
    """SetPTACacheHashKey: the TLS key := the adapter's first `length` bytes (null or 0: empty)."""
    ctx = ctx or current()
    ctx.key = bytes(buf[:length]) if buf is not None and length > 0 else b""


def set_op_cache_key(ctx: ThreadLocalContext | None = None) -> bytes:
    """SetOpCacheKey in PTA mode: the adapter's key bytes, as they are (no aliasing labels appended)."""
    return (ctx or current()).key


def _wrap(ctx: ThreadLocalContext, cache: OpExecCache | None, lookup: str, key_hash: int) -> OpExecCacheWrap | None:
    api = ctx.cache_api
    usable = cache is not None and cache.can_use(api)
    if cache is not None and cache.usable and not usable:
        log.info("%s: cached executor belongs to %s, may be hash conflict", api, cache.l2_name)
    rec = ctx.process.recorder
    if rec.enabled:
        ctx.at(CacheEventAt(rec, ctx.name, "pta", "hit" if usable else "miss", api or "", key_hash, lookup))
    if not usable:
        return None
    addresses = ctx.cached_tensor_list[:ctx.cached_tensor_list_size]
    return OpExecCacheWrap(cache, [], ctx.log_info.copy(), ctx, addresses)


def pta_get_exec_cache(hash_key: int, workspace_size: int = 0,
                       ctx: ThreadLocalContext | None = None) -> tuple[OpExecCacheWrap | None, int]:
    """PTAGetExecCache(h, &ws): the usable V1 entry for `h` as a wrapper and its workspace size, or
    (None, `workspace_size` unchanged)."""
    ctx = ctx or current()
    ctx.charge("match cache")
    cache = get_manager(ctx).hash_map.get(int(hash_key) & 0xFFFFFFFFFFFFFFFF)
    wrap = _wrap(ctx, cache, "PTAGetExecCache", hash_key)
    return (wrap, cache.workspace_size) if wrap is not None else (None, workspace_size)


def pta_find_exec_cache(buf: bytes | None, length: int, workspace_size: int = 0,
                        ctx: ThreadLocalContext | None = None) -> tuple[OpExecCacheWrap | None, int]:
    """PTAFindExecCache(buf, len, &ws): the V2 lookup by exact bytes (a found entry moves to MRU, usable or
    not)."""
    ctx = ctx or current()
    ctx.charge("match cache")
    # a length beyond the buffer (torch_npu passes 9216 after an overflow) can equal no stored key
    key = bytes(buf[:length]) if buf is not None and 0 < length <= len(buf) else b""
    cache = get_manager(ctx).find(key) if key else None
    wrap = _wrap(ctx, cache, "PTAFindExecCache", 0)
    return (wrap, cache.workspace_size) if wrap is not None else (None, workspace_size)


def aclnn_reselect_static_kernel(ctx: ThreadLocalContext | None = None) -> AclnnStatus:
    """aclnnReselectStaticKernel: both maps of the calling thread cleared, cacheHasFull_ reset."""
    return reselect_static_kernel(ctx)


__all__ = ["can_use_pta_cache", "init_pta_cache_thread_local", "un_init_pta_cache_thread_local",
           "add_tensor_addr_to_cached_list", "set_pta_hash_key", "set_pta_cache_hash_key", "pta_get_exec_cache",
           "pta_find_exec_cache", "reset_cache_thread_local", "aclnn_reselect_static_kernel", "set_op_cache_key"]
