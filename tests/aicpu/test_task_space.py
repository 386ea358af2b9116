"""AicpuTaskSpace: lookup and reuse rules, creation steps, the cache limit under both behaviour profiles, the
pending overflow slot, SetRef freezing, the device cache size rule and aclnnAicpuFinalize
(aicpu-tasks.md §5, §6, §8, §11, §13, §14)."""
from __future__ import annotations

import logging

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.acl import DataType, IntArray, Tensor, host_tensor
from opsim.acl.status import AclnnStatus
from opsim.errors import UseAfterDestroyError
from opsim.opdev.aicpu.kernel_lib import CC, TF, AicpuKernel, register_aicpu_kernel
from opsim.opdev.aicpu.key import gen_task_key_and_seed
from opsim.opdev.aicpu.task import AicpuCCTask, AicpuTask, AicpuTfTask, round_up
from opsim.opdev.aicpu.task_space import (CACHED_TASKS_COUNTER, AicpuTaskSpace, aclnn_aicpu_finalize,
                                          calc_host_input_data_size, create_aicpu_attrs, get_task_space,
                                          save_pending_overflow_task, take_pending_overflow_task)
from opsim.opdev.executor import AclOpExecutor
from opsim.opdev.op_args import make_op_arg_context, op_attr, op_input, op_output
from opsim.opdev.op_def import UnknowShapeOpType
from opsim.opdev.process import ProcessContext
from opsim.opdev.thread_local import set_current
from opsim.trace.recorder import Recorder

S = AclnnStatus
OP = "AicpuSpaceTestOp"
OP_TF = "AicpuSpaceTestTfOp"
register_aicpu_kernel(AicpuKernel(OP, CC))
register_aicpu_kernel(AicpuKernel(OP_TF, TF))


@pytest.fixture
def proc():
    p = ProcessContext()
    ctx = p.new_thread()
    prev = set_current(ctx)
    yield p
    set_current(prev)


def thread(p: ProcessContext, n: int = 0):
    ctx = p.threads[n] if n < len(p.threads) else p.new_thread()
    set_current(ctx)
    return ctx


def args(*inputs, attrs=(np.int64(1),), outputs=None):
    outs = outputs if outputs is not None else (Tensor([2, 3]),)
    return make_op_arg_context(op_input(*inputs), op_output(*outs), op_attr(*attrs))


def x(dtype="float32"):
    return Tensor([2, 3], dtype)


# ---- reuse and occupancy ----------------------------------------------------------------------------

def test_same_thread_reuses_a_released_task(proc):
    space = AicpuTaskSpace(OP)
    ex = AclOpExecutor()
    t1 = space.get_or_create_task(ex, ["n"], args(x()))
    assert isinstance(t1, AicpuCCTask) and t1.is_visit and space.task_count == 1
    t1.set_visit(False)
    t2 = space.get_or_create_task(AclOpExecutor(), ["n"], args(x()))
    assert t2 is t1 and t2.is_visit and space.task_count == 1


def test_shapes_values_and_placement_are_not_in_the_key(proc):
    space = AicpuTaskSpace(OP)
    t1 = space.get_or_create_task(AclOpExecutor(), ["n"], args(Tensor([2, 3])))
    t1.set_visit(False)
    t2 = space.get_or_create_task(AclOpExecutor(), ["n"], args(Tensor([7, 1, 5])))
    assert t2 is t1
    t2.set_visit(False)
    t3 = space.get_or_create_task(AclOpExecutor(), ["n"], args(x(), attrs=(np.int64(2),)))
    assert t3 is not t1 and space.task_count == 2


def test_other_thread_never_finds_the_task(proc):
    space = AicpuTaskSpace(OP)
    t1 = space.get_or_create_task(AclOpExecutor(), ["n"], args(x()))
    t1.set_visit(False)
    thread(proc, 1)
    t2 = space.get_or_create_task(AclOpExecutor(), ["n"], args(x()))
    assert t2 is not t1 and space.task_count == 2
    assert t1.key[8:] == t2.key[8:] and t1.key[:8] != t2.key[:8]


def test_busy_task_is_skipped_then_first_inserted_free_task_wins(proc):
    space = AicpuTaskSpace(OP)
    a = space.get_or_create_task(AclOpExecutor(), ["n"], args(x()))
    b = space.get_or_create_task(AclOpExecutor(), ["n"], args(x()))
    assert a is not b and a.key == b.key and space.hash_map[a.seed] == [a, b]
    a.set_visit(False)
    b.set_visit(False)
    assert space.get_or_create_task(AclOpExecutor(), ["n"], args(x())) is a
    assert space.get_or_create_task(AclOpExecutor(), ["n"], args(x())) is b


def test_bucket_scan_needs_exact_length_and_bytes(proc):
    ctx = thread(proc)
    space = AicpuTaskSpace(OP)
    inputs = [x()]
    attrs = args(x()).attrs()
    key, seed = gen_task_key_and_seed(ctx.thread_id, inputs, attrs)
    longer, other = AicpuCCTask(OP), AicpuCCTask(OP)
    longer.key = key + b"\x00"
    other.key = key[:-1] + bytes([key[-1] ^ 1])
    space.hash_map[seed] = [longer, other]     # same bucket, not equal keys
    space.task_count = 2
    assert space.find_task(AclOpExecutor(), args(x()), inputs) is None
    match = AicpuCCTask(OP)
    match.key = key
    space.hash_map[seed].append(match)
    assert space.find_task(AclOpExecutor(), args(x()), inputs) is match and match.is_visit


def test_new_task_fields(proc):
    ctx = thread(proc)
    ctx.log_info.l2_api_name, ctx.log_info.l0_name = "aclnnCreator", "CreatorL0"
    space = AicpuTaskSpace(OP)
    ex = AclOpExecutor()
    t = space.get_or_create_task(ex, ["n"], args(x()))
    assert t.space is space and t.attrs == {"n": 1} and t.is_visit
    assert t.key == gen_task_key_and_seed(ctx.thread_id, [x()], args(x()).attrs())[0]
    assert t.summary_item == f"aclnnCreator_CreatorL0_{OP}"
    assert proc.aicpu_registry == {id(space): space} and space.has_init
    assert isinstance(AicpuTaskSpace(OP_TF, is_tf=True).get_or_create_task(ex, ["n"], args(x())), AicpuTfTask)


def test_attribute_count_mismatch_is_logged_and_ignored(proc, caplog):
    space = AicpuTaskSpace(OP)
    with caplog.at_level(logging.ERROR, "opsim.opdev.aicpu"):
        t = space.get_or_create_task(AclOpExecutor(), ["a", "b"], args(x()))
    assert t is not None and t.attrs == {} and space.task_count == 1
    assert "attribute count 1 differs from the 2 attribute names" in caplog.text


def test_attribute_map_by_tag():
    ctx = make_op_arg_context(op_attr(IntArray([1, 2]), True, np.int64(-3), np.uint32(7), np.float32(0.5), 2.5,
                                      DataType.DT_FLOAT16, "mode"))
    attrs = create_aicpu_attrs(ctx.attrs(), list("abcdefgh"))
    assert attrs == {"a": [1, 2], "b": True, "c": -3, "d": 7, "e": 0.5, "f": 2.5, "g": DataType.DT_FLOAT16,
                     "h": "mode"}


def test_unknown_op_init_fails_and_nothing_is_kept(proc):
    space = AicpuTaskSpace("NoSuchAicpuKernel")
    ex = AclOpExecutor()
    task, status = space.get_or_create(thread(proc), ex, ["n"], args(x()))
    assert task is None and status == S.ACLNN_ERR_INNER
    assert space.task_count == 0 and not space.has_init and proc.aicpu_registry == {}


def test_key_overflowing_1024_bytes_is_rejected(proc):
    space = AicpuTaskSpace(OP)
    many = [x() for _ in range(508)]
    task, status = space.get_or_create(thread(proc), AclOpExecutor(), ["n"], args(*many))
    assert task is None and status == S.ACLNN_ERR_PARAM_INVALID
    ok, status = space.get_or_create(thread(proc), AclOpExecutor(), ["n"], args(*many[:507]))
    assert ok is not None and status == S.ACLNN_SUCCESS


def test_get_task_space_is_static_per_process():
    p1, p2 = ProcessContext(), ProcessContext()
    a = get_task_space("Foo", process=p1)
    assert get_task_space("Foo", process=p1) is a
    assert get_task_space("Foo", process=p2) is not a
    assert get_task_space("Foo", UnknowShapeOpType.DEPEND_SHAPE_RANGE, process=p1) is not a
    assert get_task_space("Foo", is_tf=True, process=p1) is not a


# ---- the cache limit ----------------------------------------------------------------------------------

def fill(p, space, n, start=0):
    """n distinct keys on the current thread; returns the tasks (left busy)."""
    return [space.get_or_create_task(AclOpExecutor(), ["n"], args(x(), attrs=(np.int64(start + i),)))
            for i in range(n)]


def test_full_space_makes_pending_overflow_tasks():
    p = ProcessContext(env={"ACLNN_AICPU_CACHE_LIMIT": "2"})
    ctx = p.new_thread()
    set_current(ctx)
    space = AicpuTaskSpace(OP)
    cached = fill(p, space, 2)
    assert space.task_count == 2 and ctx.pending_overflow_task is None
    over = fill(p, space, 1, start=10)[0]
    assert over is not None and ctx.pending_overflow_task is over and over.is_visit
    assert space.task_count == 2 and over not in space.tasks() and over.key  # fully initialised
    for t in cached:
        t.set_visit(False)
    assert fill(p, space, 1)[0] is cached[0]   # cached tasks still hit


def test_limit_zero_never_caches():
    p = ProcessContext(env={"ACLNN_AICPU_CACHE_LIMIT": "0"})
    set_current(p.new_thread())
    space = AicpuTaskSpace(OP)
    t = fill(p, space, 1)[0]
    assert space.task_count == 0 and p.threads[0].pending_overflow_task is t and space.has_init


def test_limit_is_per_space():
    p = ProcessContext(env={"ACLNN_AICPU_CACHE_LIMIT": "1"})
    ctx = p.new_thread()
    set_current(ctx)
    a, b = AicpuTaskSpace(OP), AicpuTaskSpace(OP_TF, is_tf=True)
    fill(p, a, 1)
    fill(p, b, 1)
    assert a.task_count == b.task_count == 1 and ctx.pending_overflow_task is None


OPBASE_LIMITS = [
    (None, 32768), ("64", 64), ("0", 0), ("100000000", 100000000), ("007", 7),
    ("+5", 32768), ("-1", 32768), (" 5", 32768), ("5 ", 32768), ("1e3", 32768), ("", 32768), ("0x10", 32768),
    ("1" * 32, 32768), ("9" * 31, 32768), ("18446744073709551615", 18446744073709551615),
    ("18446744073709551616", 32768),
]


@pytest.mark.parametrize("value,expected", OPBASE_LIMITS)
def test_opbase_profile_limit_parsing(value, expected):
    env = {} if value is None else {"ACLNN_AICPU_CACHE_LIMIT": value}
    env["ACLNN_CACHE_LIMIT"] = "5"   # the OpExecCache variable is not read for AI CPU tasks
    p = ProcessContext(env=env)
    assert p.profile.name == "opbase" and p.aicpu_cache_limit == expected and not p.warnings


GUIDE_LIMITS = [
    (None, 10000, False), ("64", 64, False), ("0", 0, False), ("20000000", 10000000, False),
    (" 5", 5, False), ("abc", 10000, True), ("+5", 10000, True), ("-1", 10000, True), ("1e3", 10000, True),
    ("", 10000, True),
]


@pytest.mark.parametrize("value,expected,warned", GUIDE_LIMITS)
def test_guide_profile_limit_parsing(value, expected, warned):
    env = {"ACLNN_AICPU_CACHE_LIMIT": "3"}   # ignored under the guide's rule
    if value is not None:
        env["ACLNN_CACHE_LIMIT"] = value
    p = ProcessContext(env=env, profile="aicpu-guide")
    assert p.aicpu_cache_limit == expected and bool(p.warnings) == warned


def test_guide_profile_limit_applies_to_spaces():
    p = ProcessContext(env={"ACLNN_CACHE_LIMIT": "1", "ACLNN_AICPU_CACHE_LIMIT": "5"}, profile="aicpu-guide")
    ctx = p.new_thread()
    set_current(ctx)
    space = AicpuTaskSpace(OP)
    fill(p, space, 2)
    assert space.task_count == 1 and ctx.pending_overflow_task is not None


# ---- pending overflow slot ---------------------------------------------------------------------------

def test_take_pending_only_the_same_task(proc, caplog):
    ctx = thread(proc)
    a, b = AicpuCCTask(OP), AicpuCCTask(OP)
    assert take_pending_overflow_task(ctx, a) is None and take_pending_overflow_task(ctx, None) is None
    save_pending_overflow_task(ctx, a)
    with caplog.at_level(logging.WARNING, "opsim.opdev.aicpu"):
        assert take_pending_overflow_task(ctx, b) is None
    assert "pending task does not match" in caplog.text and ctx.pending_overflow_task is a
    with caplog.at_level(logging.WARNING, "opsim.opdev.aicpu"):
        save_pending_overflow_task(ctx, b)
    assert "Discard stale pending overflow" in caplog.text and a.released
    assert take_pending_overflow_task(ctx, b) is b and ctx.pending_overflow_task is None


# ---- SetRef -----------------------------------------------------------------------------------------------

def test_set_ref_frozen_after_first_task(proc):
    space = AicpuTaskSpace(OP_TF, is_tf=True)
    space.set_ref(0)
    space.set_ref(1, is_input=False)
    assert space.is_ref(0) and space.is_ref(1, False) and not space.is_ref(1)
    t = space.get_or_create_task(AclOpExecutor(), ["n"], args(x(), x()))
    assert t.ref_inputs == (0,) and t.ref_outputs == ()   # refs shape TF tasks only (one output here)
    space.set_ref(1)
    assert not space.is_ref(1)


def test_set_ref_frozen_by_a_one_shot_creation():
    p = ProcessContext(env={"ACLNN_AICPU_CACHE_LIMIT": "0"})
    set_current(p.new_thread())
    space = AicpuTaskSpace(OP)
    fill(p, space, 1)
    space.set_ref(0)
    assert not space.is_ref(0)


def test_failed_creation_does_not_freeze_refs(proc):
    space = AicpuTaskSpace("NoSuchAicpuKernel")
    space.get_or_create_task(AclOpExecutor(), ["n"], args(x()))
    space.set_ref(2)
    assert space.is_ref(2)


# ---- device cache size (both profiles) --------------------------------------------------------------------

def host(n_int64: int) -> Tensor:
    return host_tensor(np.arange(n_int64, dtype=np.int64))


def test_host_input_data_size_aligns_each_host_input():
    ins = [host(3), None, x(), host(1)]
    assert calc_host_input_data_size(ins, 4) == 24 + 8
    assert calc_host_input_data_size(ins, 64) == 64 + 64
    assert calc_host_input_data_size(ins, 0) == 0
    assert round_up(0, 64) == 0 and round_up(65, 64) == 128


@pytest.mark.parametrize("profile,expected", [("opbase", 2400), ("aicpu-guide", 2400 - 1024)])
def test_device_cache_size_rule(profile, expected):
    p = ProcessContext(profile=profile)
    set_current(p.new_thread())
    space = AicpuTaskSpace(OP)
    ex = AclOpExecutor()
    t = space.get_or_create_task(ex, ["n"], args(host(300), x()))
    assert ex.workspace_device_aicpu_mem == expected
    assert space.calc_device_cache_size([host(128)], t) == 0        # exactly 1024 bytes: inline, nothing
    assert space.calc_device_cache_size([host(129)], t) == (1032 if profile == "opbase" else 8)


def test_device_cache_size_counts_ext_info_for_shape_range_ops(proc):
    space = AicpuTaskSpace(OP, UnknowShapeOpType.DEPEND_SHAPE_RANGE)
    ex = AclOpExecutor()
    t = space.get_or_create_task(ex, ["n"], args(x()))
    assert t.device_ext_mem_size == t.ext_info_len > 0
    assert ex.workspace_device_aicpu_mem == t.device_ext_mem_size


def test_executor_keeps_the_maximum_also_on_a_hit(proc):
    space = AicpuTaskSpace(OP)
    t = space.get_or_create_task(AclOpExecutor(), ["n"], args(x(), host(10)))
    t.set_visit(False)
    ex = AclOpExecutor()
    ex.workspace_device_aicpu_mem = 5000
    assert space.get_or_create_task(ex, ["n"], args(x(), host(200))) is t
    assert ex.workspace_device_aicpu_mem == 5000
    t.set_visit(False)
    ex2 = AclOpExecutor()
    assert space.get_or_create_task(ex2, ["n"], args(x(), host(200))) is t and ex2.workspace_device_aicpu_mem == 1600


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(0, 400)), max_size=6), st.sampled_from([4, 64]))
def test_device_cache_size_property(sizes, align):
    """Whole-total rule: 0 while the aligned host total fits inline, the whole total beyond; the guide's rule
    reserves exactly 1024 bytes less."""
    from opsim.opdev.aicpu.task_space import device_cache_size
    ins = [None if n is None else host(n) for n in sizes]
    task = AicpuTfTask(OP_TF) if align == 64 else AicpuCCTask(OP)
    h = sum(round_up(8 * n, align) for n in sizes if n is not None)
    whole = device_cache_size("whole", UnknowShapeOpType.DEPEND_IN_SHAPE, ins, task)
    above = device_cache_size("above", UnknowShapeOpType.DEPEND_IN_SHAPE, ins, task)
    assert whole == (h if h > 1024 else 0)
    assert above == max(0, h - 1024)


# ---- trace ---------------------------------------------------------------------------------------------

def replay(ctx, t0: float = 0.0) -> float:
    t = t0
    for a in ctx.take_actions():
        if a[0] == 0:
            t += a[3]
        elif a[0] == 3:
            a[1](t)
    return t


def test_cache_events_and_counter():
    p = ProcessContext(env={"ACLNN_AICPU_CACHE_LIMIT": "1"}, recorder=Recorder())
    ctx = p.new_thread()
    set_current(ctx)
    space = AicpuTaskSpace(OP)
    a = fill(p, space, 1)[0]
    a.set_visit(False)
    fill(p, space, 1)
    fill(p, space, 1, start=5)
    AicpuTaskSpace("NoSuchAicpuKernel").get_or_create_task(AclOpExecutor(), ["n"], args(x()))
    replay(ctx)
    cache = p.recorder.records("cache")
    assert cache["kind"] == ["miss", "hit", "oneshot", "error"] and set(cache["cache"]) == {"aicpu"}
    assert cache["detail"][:3] == ["cached=1"] * 3 and cache["key_hash"][0] == a.seed
    counter = p.recorder.records("counter")
    assert counter["name"] == [CACHED_TASKS_COUNTER] and counter["value"] == [1]


# ---- finalize ------------------------------------------------------------------------------------------

def test_finalize_clears_registered_spaces(proc):
    ctx = thread(proc)
    a = get_task_space(OP)
    b = get_task_space(OP_TF, is_tf=True)
    ta = a.get_or_create_task(AclOpExecutor(), ["n"], args(x()))
    b.get_or_create_task(AclOpExecutor(), ["n"], args(x()))
    a.set_ref(0)
    pending = AicpuCCTask(OP)
    save_pending_overflow_task(ctx, pending)
    assert len(proc.aicpu_registry) == 2
    aclnn_aicpu_finalize(proc)
    assert proc.aicpu_registry == {} and a.task_count == b.task_count == 0 and ta.released
    assert a.has_init and not a.is_ref(0)              # refs stay frozen
    assert ctx.pending_overflow_task is pending and not pending.released
    t = a.get_or_create_task(AclOpExecutor(), ["n"], args(x()))
    assert t is not ta and proc.aicpu_registry == {id(a): a}   # re-registered on the next creation


def test_finalize_with_a_live_launcher_is_an_error(proc):
    from opsim.opdev.aicpu.launcher import creat_aicpu_kernel_launcher
    space = get_task_space(OP)
    ex = AclOpExecutor()
    assert creat_aicpu_kernel_launcher(OP, space, ex, ["n"], args(x())) == S.ACLNN_SUCCESS
    with pytest.raises(UseAfterDestroyError, match="AicpuSpaceTestOp"):
        aclnn_aicpu_finalize(proc)
    from opsim.opdev.executor import delete_executor
    delete_executor(ex)
    aclnn_aicpu_finalize(proc)
    assert space.task_count == 0


def test_task_repr_states(proc):
    t = AicpuTaskSpace(OP).get_or_create_task(AclOpExecutor(), ["n"], args(x()))
    assert "busy" in repr(t)
    t.set_visit(False)
    assert "free" in repr(t) and isinstance(t, AicpuTask)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2), st.booleans()), max_size=25))
def test_lookup_matches_a_reference_model(ops):
    """Each step looks up (thread, attr) and optionally releases the task it got. Model: the first free cached
    task with that key in creation order, else a new task, cached while fewer than 3 are cached."""
    p = ProcessContext(env={"ACLNN_AICPU_CACHE_LIMIT": "3"})
    ctxs = [p.new_thread(), p.new_thread()]
    space = AicpuTaskSpace(OP)
    model: list[list] = []      # [key, busy, task]
    for tid, attr, release in ops:
        set_current(ctxs[tid])
        task = space.get_or_create_task(AclOpExecutor(), ["n"], args(x(), attrs=(np.int64(attr),)))
        free = [m for m in model if m[0] == (tid, attr) and not m[1]]
        if free:
            assert task is free[0][2]
            free[0][1] = True
        elif len(model) < 3:
            assert task not in [m[2] for m in model] and space.task_count == len(model) + 1
            model.append([(tid, attr), True, task])
        else:
            assert ctxs[tid].pending_overflow_task is task and space.task_count == 3
            take_pending_overflow_task(ctxs[tid], task)
        if release:
            task.set_visit(False)
            for m in model:
                if m[2] is task:
                    m[1] = False
    assert {id(t) for t in space.tasks()} == {id(m[2]) for m in model}
    for seed, bucket in space.hash_map.items():     # each bucket keeps creation order
        assert bucket == [m[2] for m in model if m[2].seed == seed]


def test_aclnn_finalize_calls_aicpu_finalize():
    from opsim.opdev.aclnn_init import aclnn_finalize
    from opsim.opdev.aicpu.task_space import get_task_space
    from opsim.opdev.process import ProcessContext
    from opsim.opdev.thread_local import set_current
    p = ProcessContext()
    prev = set_current(p.new_thread())
    try:
        space = get_task_space("Sigmoid", process=p)
        p.aicpu_registry[id(space)] = space
        assert aclnn_finalize() == 0
        assert p.aicpu_registry == {}
    finally:
        set_current(prev)
