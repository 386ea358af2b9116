"""OpExecCache: key bytes, ACLNN_CACHE_LIMIT, hit/miss rules, eviction, invalidation, thread scope."""
from __future__ import annotations

import struct

import pytest

from opsim.acl import AclnnStatus as S, DataType, Format, Scalar, Tensor, TensorList
from opsim.opdev.env import parse_aclnn_cache_limit, parse_strtoull
from opsim.opdev.executor import set_repeatable
from opsim.opdev.op_exec_cache import OpExecCacheWrap, build_l2_key, get_manager, reselect_static_kernel
from opsim.opdev.process import ProcessContext
from opsim.opdev.thread_local import set_current
from opsim.ops.elementwise import aclnn_add, aclnn_add_get_workspace_size, aclnn_abs_get_workspace_size

from .conftest import phases


@pytest.mark.parametrize("text, value", [
    (None, 10000), ("12abc", 12), ("abc", 10000), ("10000001", 10000000), ("0", 0), ("  +7", 7),
    ("-1", 10000000), ("0x10", 0), ("99999999999999999999999", 10000), ("", 10000), ("5000", 5000),
])
def test_aclnn_cache_limit_parsing(text, value):
    assert parse_aclnn_cache_limit(text) == value


def test_strtoull_negative_wraps():
    assert parse_strtoull("-1") == 2 ** 64 - 1
    assert parse_strtoull("18446744073709551616") is None


def test_add_key_worked_example():
    t = lambda: Tensor([2, 3], DataType.DT_FLOAT, Format.FORMAT_ND)
    key, storages, tensors = build_l2_key("aclnnAdd", 24, 48, 0, (t(), t(), Scalar(1.0, DataType.DT_FLOAT)), (t(),))
    assert len(key) == 266
    assert key[:16] == b"aclnnAdd" + struct.pack("<q", 8)
    assert key[16:25] == struct.pack("<IIB", 24, 48, 0)
    assert key[-24:] == struct.pack("<3q", 0, 1, 2)
    assert len(storages) == 3


def test_aliasing_labels_change_the_key():
    a, b = Tensor([2, 3]), Tensor([2, 3])
    k1, _, _ = build_l2_key("aclnnAdd", 24, 48, 0, (a, b, Scalar(1.0)), (Tensor([2, 3]),))
    k2, _, _ = build_l2_key("aclnnAdd", 24, 48, 0, (a, b, Scalar(1.0)), (a,))  # in place: labels 0,1,0
    assert len(k1) == len(k2) and k1 != k2
    assert k2[-24:] == struct.pack("<3q", 0, 1, 0)


def test_key_over_8192_bytes_is_empty():
    big = TensorList([Tensor([1, 1, 1, 1, 1, 1, 1, 1]) for _ in range(80)])
    key, _, _ = build_l2_key("aclnnCat", 24, 48, 0, (big,), (Tensor([80]),))
    assert key == b""


def _add_call(ctx, shape=(2, 3), run=True):
    a, b, out = Tensor(shape), Tensor(shape), Tensor(shape)
    st, size, ex = aclnn_add_get_workspace_size(a, b, Scalar(1.0), out)
    assert st == S.ACLNN_SUCCESS
    if run:
        assert aclnn_add(0, size, ex, None) == S.ACLNN_SUCCESS
    return ex


def test_hit_skips_phase1_after_first_run(ctx):
    ex1 = _add_call(ctx)
    assert not isinstance(ex1, OpExecCacheWrap)
    phases(ctx)
    ex2 = _add_call(ctx, run=False)
    assert isinstance(ex2, OpExecCacheWrap)
    p1 = phases(ctx)
    assert "create executor" not in p1 and "tiling" not in p1 and "add io and attr" not in p1
    assert p1 == ["L2 phase1 entry", "make key", "match cache"]
    assert aclnn_add(0, 0, ex2, None) == S.ACLNN_SUCCESS
    assert phases(ctx) == ["L2 phase2 entry", "cache replay", "launch"]


def test_not_usable_before_first_phase2(ctx):
    _add_call(ctx, run=False)
    ex2 = _add_call(ctx, run=False)  # same key, first not run yet: miss, its cache refused as duplicate
    assert not isinstance(ex2, OpExecCacheWrap)
    assert ex2.op_exec_cache is None
    assert len(get_manager(ctx).container) == 1


def test_other_thread_never_hits(process, ctx):
    _add_call(ctx)
    other = process.new_thread("t1")
    set_current(other)
    ex = _add_call(other, run=False)
    assert not isinstance(ex, OpExecCacheWrap)
    set_current(ctx)


def test_different_api_same_shapes_no_hit(ctx):
    _add_call(ctx)
    x, out = Tensor([2, 3]), Tensor([2, 3])
    st, size, ex = aclnn_abs_get_workspace_size(x, out)
    assert not isinstance(ex, OpExecCacheWrap)


def test_eviction_of_30_lru_entries_before_duplicate_check():
    p = ProcessContext(env={"ACLNN_CACHE_LIMIT": "2"})
    ctx = p.new_thread()
    set_current(ctx)
    _add_call(ctx, (1,))
    _add_call(ctx, (2,))
    assert len(get_manager(ctx).container) == 2
    _add_call(ctx, (3,))  # at capacity: both LRU entries evicted, then inserted
    assert len(get_manager(ctx).container) == 1
    assert not isinstance(_add_call(ctx, (1,), run=False), OpExecCacheWrap)
    set_current(None)


def test_find_moves_to_mru():
    p = ProcessContext(env={"ACLNN_CACHE_LIMIT": "40"})
    ctx = p.new_thread()
    set_current(ctx)
    for n in range(1, 41):
        _add_call(ctx, (n,))
    assert isinstance(_add_call(ctx, (1,)), OpExecCacheWrap)  # shape 1 becomes MRU
    _add_call(ctx, (99,))  # evicts the 30 LRU: shapes 2..31
    assert isinstance(_add_call(ctx, (1,)), OpExecCacheWrap)
    assert not isinstance(_add_call(ctx, (2,), run=False), OpExecCacheWrap)
    set_current(None)


def test_capacity_zero_sets_cache_full_sticky():
    p = ProcessContext(env={"ACLNN_CACHE_LIMIT": "0"})
    ctx = p.new_thread()
    set_current(ctx)
    ex = _add_call(ctx, run=False)
    assert ctx.cache_has_full and ex.op_exec_cache is None
    ex2 = _add_call(ctx, run=False)
    assert ex2.op_exec_cache is None  # no OpExecCache object is created any more
    assert reselect_static_kernel(ctx) == S.ACLNN_SUCCESS and not ctx.cache_has_full
    set_current(None)


@pytest.mark.parametrize("kwargs", [{"env": {"DISABLE_L2_CACHE": ""}}, {"op_dump": True}, {"overflow_dump": True},
                                    {"level2_profiling": True}, {"exception_dump": True}])
def test_cache_disabling_conditions(kwargs):
    p = ProcessContext(**kwargs)
    ctx = p.new_thread()
    set_current(ctx)
    _add_call(ctx)
    assert ctx.cache_has_full
    assert not isinstance(_add_call(ctx, run=False), OpExecCacheWrap)
    set_current(None)


def test_failed_run_invalidates(ctx, process):
    process.faults["rt.launch_kernel"] = lambda name: True
    a, b, out = Tensor([5]), Tensor([5]), Tensor([5])
    st, size, ex = aclnn_add_get_workspace_size(a, b, Scalar(1.0), out)
    assert aclnn_add(0, size, ex, None) == S.ACLNN_ERR_RUNTIME_ERROR
    process.faults.clear()
    assert not isinstance(_add_call(ctx, (5,), run=False), OpExecCacheWrap)


def test_abandon_cache_makes_uncacheable(ctx):
    a, b, out = Tensor([6]), Tensor([6]), Tensor([6])
    st, size, ex = aclnn_add_get_workspace_size(a, b, Scalar(1.0), out)
    ex.abandon_cache()
    aclnn_add(0, size, ex, None)
    assert not isinstance(_add_call(ctx, (6,), run=False), OpExecCacheWrap)


def test_repeatable_executor_replays_from_second_run(ctx):
    a, b, out = Tensor([7]), Tensor([7]), Tensor([7])
    st, size, ex = aclnn_add_get_workspace_size(a, b, Scalar(1.0), out)
    assert set_repeatable(ex) == S.ACLNN_SUCCESS
    assert len(get_manager(ctx).container) == 0  # SetRepeatable takes the cache out of the container
    phases(ctx)
    aclnn_add(0, size, ex, None)
    first = phases(ctx)
    assert "tiling" in first and "update tensor addr" in first
    aclnn_add(0, size, ex, None)
    second = phases(ctx)
    assert "cache replay" in second and "update tensor addr" not in second


def test_run_from_cache_of_a_null_launch_record_is_inner(ctx):
    """rts_arg.cpp LaunchArgCache::RunFromCache(stream, cache): `if (cache == nullptr)` logs "Null cache, unable
    to run" and returns ACLNN_ERR_INNER, before any work."""
    from opsim.opdev.op_exec_cache import run_from_cache
    assert run_from_cache(ctx, None, None) == S.ACLNN_ERR_INNER
    assert phases(ctx) == []


def test_a_cache_holding_a_null_launch_record_stops_its_replay_with_inner(ctx):
    """OpExecCache::Run calls each launch record's run function in order and stops at the first failure."""
    _add_call(ctx)
    wrap = _add_call(ctx, run=False)
    wrap.cache.tasks.insert(0, None)
    phases(ctx)
    assert aclnn_add(0, 0, wrap, None) == S.ACLNN_ERR_INNER
    assert "launch" not in phases(ctx)


def test_the_launch_record_keeps_the_launch_configuration(ctx):
    """rts_arg.h: the launch record keeps KernelLaunchConfig (bin and function handles, tiling key, block count,
    fat-bin flag, schedule mode, dynamic UB size, block offset) as the first run launched with it."""
    from opsim.opdev.kernel import AiCoreKernel, TilingResult, find_aicore_kernel, register_aicore_kernel
    add = find_aicore_kernel("Add")
    tiled = TilingResult(block_dim=3, tiling_data_size=64, tiling_key=42, schedule_mode=1, local_memory_size=4096)
    register_aicore_kernel(AiCoreKernel("Add", lambda i, o, a: tiled, add.compute, is_fat_bin=True))
    try:
        _add_call(ctx)
        wrap = _add_call(ctx, run=False)
    finally:
        register_aicore_kernel(add)
    (task,) = wrap.cache.tasks
    cfg = task.launch_cfg
    assert cfg.bin_handle.op_type == "Add" and cfg.func_handle == ("Add", 42)
    assert (cfg.tiling_key, cfg.num_blocks, cfg.is_fat_bin, cfg.schedule_mode, cfg.dyn_ubuf_size,
            cfg.block_dim_offset) == (42, 3, True, 1, 4096, 0)
