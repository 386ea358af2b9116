"""opbase's PTA entry points on one thread, without torch_npu (pta-cache-mode.md §4, §10 cases 11 and 12)."""
from __future__ import annotations

import pytest

from opsim.acl.status import AclnnStatus
from opsim.opdev import pta_cache as pta
from opsim.opdev.op_exec_cache import OpExecCache, get_manager
from opsim.opdev.process import ProcessContext
from opsim.opdev.thread_local import set_current


@pytest.fixture
def ctx():
    c = ProcessContext().new_thread("t0")
    prev = set_current(c)
    yield c
    set_current(prev)


def _usable(key: bytes, hash_key: int, api: str) -> OpExecCache:
    c = OpExecCache(key, api, [], hash_key)
    c.recording = True
    c.finalize()
    assert c.usable
    return c


def test_case_12_address_list_is_a_reused_vector_and_keys_are_stored(ctx):
    pta.init_pta_cache_thread_local()
    for a in range(6):
        pta.add_tensor_addr_to_cached_list(0x1000 + a)
    pta.init_pta_cache_thread_local()
    pta.add_tensor_addr_to_cached_list(0x9000)
    pta.add_tensor_addr_to_cached_list(0x9001)
    assert ctx.cached_tensor_list_size == 2 and len(ctx.cached_tensor_list) == 6
    assert ctx.cached_tensor_list[:2] == [0x9000, 0x9001]
    pta.set_pta_hash_key(12345)
    assert ctx.hash_key == 12345
    pta.set_pta_cache_hash_key(b"hello111", 8)
    assert ctx.key == b"hello111"
    assert pta.set_op_cache_key() == b"hello111"  # exactly the PTA bytes: no aliasing labels appended


def test_init_uninit_and_reset_touch_exactly_their_fields(ctx):
    ctx.cache_api = "aclnnAdd"
    pta.init_pta_cache_thread_local()
    assert ctx.use_pta_hash and ctx.hash_key == 0 and ctx.key == b"" and ctx.cache_api == "aclnnAdd"
    pta.set_pta_hash_key(7)
    pta.add_tensor_addr_to_cached_list(1)
    pta.un_init_pta_cache_thread_local()
    assert not ctx.use_pta_hash and ctx.hash_key == 7 and ctx.cached_tensor_list_size == 1
    pta.set_pta_hash_key(7)
    pta.reset_cache_thread_local()
    assert not ctx.use_pta_hash and ctx.hash_key == 0 and ctx.cached_tensor_list_size == 0


def test_can_use_pta_cache_sets_the_api_and_sequence_or_marks_the_thread_full(ctx):
    assert pta.can_use_pta_cache("aclnnMul") is True
    seq = ctx.log_info.l2_sequence_counter
    assert pta.can_use_pta_cache("aclnnAdd") is True
    assert ctx.cache_api == ctx.log_info.l2_api_name == "aclnnAdd"
    assert ctx.log_info.l2_sequence_counter == seq + 1
    ctx.process.op_dump = True
    ctx.config.is_op_dump_enable = True
    assert pta.can_use_pta_cache("aclnnMul") is False
    assert ctx.cache_has_full and ctx.cache_api == "aclnnAdd"


def test_case_11_reselect_static_kernel_clears_both_maps(ctx):
    pta.can_use_pta_cache("api1")
    pta.init_pta_cache_thread_local()
    m = get_manager(ctx)
    c111, c222 = _usable(b"", 111, "api1"), _usable(b"", 222, "api1")
    k111, k222 = _usable(b"hello111", 0, "api1"), _usable(b"hello222", 0, "api1")
    for c in (c111, c222, k111, k222):
        assert m.add(ctx, c)
    wrap, ws = pta.pta_get_exec_cache(222, 0)
    assert wrap.cache is c222
    wrap, ws = pta.pta_find_exec_cache(b"hello222", 8, 0)
    assert wrap.cache is k222
    ctx.cache_has_full = True
    assert pta.aclnn_reselect_static_kernel() == AclnnStatus.ACLNN_SUCCESS
    assert not ctx.cache_has_full
    assert pta.pta_get_exec_cache(111, 5) == (None, 5)  # a miss leaves the workspace size untouched
    assert pta.pta_get_exec_cache(222, 5) == (None, 5)
    assert pta.pta_find_exec_cache(b"hello111", 8, 5) == (None, 5)
    assert pta.pta_find_exec_cache(b"hello222", 8, 5) == (None, 5)


def test_lookup_checks_the_cache_api_not_the_hash_alone(ctx):
    pta.can_use_pta_cache("api1")
    m = get_manager(ctx)
    m.add(ctx, _usable(b"", 42, "api1"))
    pta.can_use_pta_cache("api2")  # same hash, another API: "may be hash conflict", a miss
    assert pta.pta_get_exec_cache(42)[0] is None
    other = OpExecCache(b"", "api2", [], 42)
    assert not m.add(ctx, other)  # refused: the hash is present
    pta.can_use_pta_cache("api1")
    assert pta.pta_get_exec_cache(42)[0] is not None


def test_v2_lookup_is_exact_length_and_bytes(ctx):
    pta.can_use_pta_cache("api1")
    m = get_manager(ctx)
    m.add(ctx, _usable(b"abcdef", 0, "api1"))
    assert pta.pta_find_exec_cache(b"abcdefg", 6)[0] is not None
    assert pta.pta_find_exec_cache(b"abcdef", 5)[0] is None
    assert pta.pta_find_exec_cache(b"abcdeF", 6)[0] is None
    assert pta.pta_find_exec_cache(b"abcdef", 9216)[0] is None  # called with the overflow length: no match
    assert pta.pta_find_exec_cache(None, 0)[0] is None


def test_hit_wrapper_snapshots_this_calls_addresses(ctx):
    pta.can_use_pta_cache("api1")
    get_manager(ctx).add(ctx, _usable(b"", 9, "api1"))
    pta.init_pta_cache_thread_local()
    for a in (0xA0, 0xB0, 0xC0):
        pta.add_tensor_addr_to_cached_list(a)
    wrap, _ = pta.pta_get_exec_cache(9)
    assert wrap.addresses == [0xA0, 0xB0, 0xC0]
    assert wrap.log_info.l2_api_name == "api1"
    pta.init_pta_cache_thread_local()
    assert wrap.addresses == [0xA0, 0xB0, 0xC0]


def test_v1_map_has_no_eviction_and_fills_sticky(ctx):
    ctx.process.env["ACLNN_CACHE_LIMIT"] = "2"
    m = get_manager(ctx)
    assert m.add(ctx, OpExecCache(b"", "a", [], 1)) and m.add(ctx, OpExecCache(b"", "a", [], 2))
    assert not m.add(ctx, OpExecCache(b"", "a", [], 3))
    assert ctx.cache_has_full and set(m.hash_map) == {1, 2} and m.evictions == 0


def test_a_dead_container_entry_keeps_its_slot_but_no_longer_matches(ctx):
    ctx.process.env["ACLNN_CACHE_LIMIT"] = "2"
    m = get_manager(ctx)
    first = _usable(b"k1", 0, "a")
    assert m.add(ctx, first)
    first.usable = False
    first.invalidate()  # e.g. a later run failed
    assert m.find(b"k1") is None and len(m.container) == 1
    second = OpExecCache(b"k1", "a", [])
    assert m.add(ctx, second)  # not a duplicate: the dead entry cannot match
    assert m.find(b"k1") is second and len(m.container) == 2
    third = OpExecCache(b"k3", "a", [])
    assert m.add(ctx, third) and m.evictions == 2  # the dead entry counted against the capacity
