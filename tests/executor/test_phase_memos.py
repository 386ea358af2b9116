"""The fast path's launch memos (opsim.opdev.memo) give what the reference path computes afresh.

Every call runs once in a fast-path process and once in a reference-path process, on the same argument
objects, between random mutations of those objects (shapes, dtypes, formats, offsets, storages, placement,
scalar values, core counts): the statuses, workspace sizes, host spans, submitted device tasks, recorded
tensor descriptions and callbacks must be identical, and an unchanged argument set must hit the memo."""
from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.acl import Scalar, Tensor
from opsim.acl.dtypes import DataType, Format
from opsim.acl.tensor import Placement, Storage
from opsim.opdev import memo
from opsim.opdev.thread_local import A_CALL, A_SPAN, A_SUBMIT, set_current
from opsim.ops.aicpu_ops import (aclnn_reduce_sum_aicpu, aclnn_reduce_sum_aicpu_get_workspace_size,
                                 aclnn_sigmoid_aicpu, aclnn_sigmoid_aicpu_get_workspace_size)
from opsim.ops.elementwise import (aclnn_add, aclnn_add_get_workspace_size, aclnn_mul, aclnn_mul_get_workspace_size,
                                   aclnn_relu, aclnn_relu_get_workspace_size)
from opsim.acl.tensor import IntArray
from opsim.runtime.simulation import Simulation

SHAPES = ([4, 8], [8, 4], [32], [64, 1024], [2, 1, 40960])
DTYPES = (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_INT32)
FORMATS = (Format.FORMAT_ND, Format.FORMAT_NCHW)


class Side:
    """One simulation (fast or reference path) with one thread and one stream."""

    def __init__(self, fast: bool, env: dict | None):
        self.sim = Simulation(soc="Ascend910B2", trace=True, numerics=False, env=env, fast_path=fast)
        self.ctx = self.sim.process.new_thread("t")
        self.stream = self.sim.device.create_stream()

    def call(self, phase1, phase2, args) -> list:
        """Phase 1 and phase 2 of one call: what they left (status, size, actions, tensor descriptions)."""
        ctx = self.ctx
        rec = self.sim.recorder
        n_info = len(rec.tensor_infos)
        prev = set_current(ctx)
        try:
            status, size, ex = phase1(*args)
            out = [int(status), size]
            if status == 0:
                out.append(int(phase2(0, size, ex, self.stream)))
        finally:
            set_current(prev)
        for a in ctx.take_actions():
            if a[0] == A_SPAN:
                out.append(a)
            elif a[0] == A_SUBMIT:
                t = a[2]
                out.append((A_SUBMIT, t.kind, t.duration, t.block_dim, t.op_name, t.task_type, t.corr_id))
            elif a[0] == A_CALL:
                n = len(rec.records("cache")["kind"])
                a[1](0.0)
                out.append((A_CALL, tuple(rec.records("cache")[c][-1] for c in ("cache", "kind", "op")))
                           if len(rec.records("cache")["kind"]) > n else (A_CALL,))
        out.append([(op, info) for _, op, info in rec.tensor_infos[n_info:]])
        return out


def _mutate(action: int, tensors: list, ti: int, i: int, side_procs: list) -> None:
    """Shapes and dtypes change on every tensor at once (so that the calls mostly pass their checks), the
    other fields on one tensor."""
    t = tensors[ti]
    if action == 0:
        for u in tensors:
            u.set_shape(SHAPES[i % len(SHAPES)])
    elif action == 1:
        for u in tensors:
            u.dtype = DTYPES[i % len(DTYPES)]
    elif action == 2:
        t.view_format = FORMATS[i % 2]
    elif action == 3:
        t.storage = Storage()
    elif action == 4:
        t.storage_format = FORMATS[i % 2]
    elif action == 5:
        t.origin_shape = Tensor(SHAPES[i % len(SHAPES)]).view_shape
    elif action == 6:
        t.storage.placement = Placement.ON_HOST if i % 3 == 0 else Placement.ON_DEVICE_HBM
    elif action == 7:
        for p in side_procs:  # the core counts tiling reads (TLS config is refreshed from these at phase 1)
            p.aiv_num = (48, 40, 8)[i % 3]


@settings(max_examples=40, deadline=None)
@given(st.booleans(), st.lists(st.tuples(st.integers(0, 10), st.integers(0, 3), st.integers(0, 9),
                                         st.sampled_from([1.0, 2.0, 0.0, -0.0, 0.5]), st.integers(0, 3)),
                               min_size=1, max_size=25))
def test_aicore_launch_memo_equals_the_reference(cache_off, steps):
    env = {"ACLNN_CACHE_LIMIT": "0"} if cache_off else None
    fast, ref = Side(True, env), Side(False, env)
    tensors = [Tensor([4, 8]) for _ in range(3)]
    alpha = Scalar(1.0)
    for action, ti, i, value, pick in steps:
        if action < 8:
            _mutate(action, tensors, ti % 3, i, [fast.sim.process, ref.sim.process])
        elif action == 8:
            alpha = Scalar(value, DataType.DT_FLOAT if i % 2 else DataType.DT_FLOAT16)
        a, b, o = tensors[0], tensors[1], tensors[2 if pick < 3 else 0]  # out aliased with self at times
        op = pick % 3
        if op == 0:
            calls = (aclnn_add_get_workspace_size, aclnn_add, (a, b, alpha, o))
        elif op == 1:
            calls = (aclnn_mul_get_workspace_size, aclnn_mul, (a, b, o))
        else:
            calls = (aclnn_relu_get_workspace_size, aclnn_relu, (a, o))
        for _ in range(2):  # the second call of the same arguments is a memo hit on the fast side
            assert fast.call(*calls) == ref.call(*calls)
    assert ref.sim.process.launch_memo is None


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 8), st.integers(0, 1), st.integers(0, 9)), min_size=1, max_size=20))
def test_aicpu_launch_and_key_memos_equal_the_reference(steps):
    fast, ref = Side(True, None), Side(False, None)
    tensors = [Tensor([4, 8]), Tensor([4, 8])]
    for action, ti, i in steps:
        if action < 8:
            _mutate(action, tensors, ti, i, [fast.sim.process, ref.sim.process])
        x, out = tensors[ti], tensors[1 - ti]
        if i % 2:
            calls = (aclnn_sigmoid_aicpu_get_workspace_size, aclnn_sigmoid_aicpu, (x, out))
        else:  # an attribute (keep_dims) in the task key; the int array of axes becomes a host input
            calls = (aclnn_reduce_sum_aicpu_get_workspace_size, aclnn_reduce_sum_aicpu,
                     (x, IntArray([0]), bool(i % 4), out))
        for _ in range(2):
            assert fast.call(*calls) == ref.call(*calls)


def test_unchanged_arguments_hit_the_memo_and_changed_ones_do_not():
    side = Side(True, {"ACLNN_CACHE_LIMIT": "0"})
    a, b, out = Tensor([4, 8]), Tensor([4, 8]), Tensor([4, 8])
    args = (a, b, Scalar(1.0), out)
    calls = (aclnn_add_get_workspace_size, aclnn_add, args)
    side.call(*calls)
    table = side.sim.process.launch_memo
    (entry,) = table.values()
    side.call(*calls)
    assert list(table.values()) == [entry]  # reused, not recomputed
    a.set_shape([8, 4])
    b.set_shape([8, 4])
    out.set_shape([8, 4])
    side.call(*calls)
    assert len(table) == 1 and next(iter(table.values())) is not entry  # same objects, new fields: recomputed


def test_core_counts_are_part_of_the_launch_memo():
    """The elementwise tiling asks for min(vector cores, blocks): other core counts, other block dims."""
    fast, ref = Side(True, {"ACLNN_CACHE_LIMIT": "0"}), Side(False, {"ACLNN_CACHE_LIMIT": "0"})
    a, out = Tensor([64, 1024]), Tensor([64, 1024])
    calls = (aclnn_relu_get_workspace_size, aclnn_relu, (a, out))
    dims = []
    for cores in (48, 8, 48):
        fast.sim.process.aiv_num = ref.sim.process.aiv_num = cores
        result = fast.call(*calls)
        assert result == ref.call(*calls)
        dims += [x[3] for x in result if isinstance(x, tuple) and x[0] == A_SUBMIT]
    assert dims == [16, 8, 16]


def test_value_key_tells_signed_zeros_and_types_apart():
    assert memo.value_key([0.0]) != memo.value_key([-0.0])
    assert memo.value_key([1]) != memo.value_key([1.0])
    assert memo.value_key([1]) != memo.value_key([True]) or memo.value_key([True]) is None
    assert memo.value_key([[1, 2]]) is None
    nan = math.nan
    assert memo.value_key([nan]) == memo.value_key([nan])  # the same object: equal keys


def test_tensor_state_sees_every_descriptor_field():
    t = Tensor([4, 8])
    state = memo.tensor_state(t)
    assert memo.same_state(state, t)
    for change in (lambda: t.set_shape([8, 4]), lambda: setattr(t, "dtype", DataType.DT_FLOAT16),
                   lambda: setattr(t, "view_format", Format.FORMAT_NCHW),
                   lambda: setattr(t, "storage_format", Format.FORMAT_NCHW), lambda: setattr(t, "view_offset", 3),
                   lambda: setattr(t, "origin_format", Format.FORMAT_NCHW), lambda: setattr(t, "storage", Storage()),
                   lambda: setattr(t.storage, "placement", Placement.ON_HOST),
                   lambda: setattr(t.storage, "from_workspace", True)):
        change()
        assert not memo.same_state(state, t)
        state = memo.tensor_state(t)
        assert memo.same_state(state, t)
    assert not memo.same_state(state, Tensor([4, 8]))
    assert memo.same_state(None, None) and not memo.same_state(None, t)


def test_memos_are_bounded():
    table: dict = {}
    for i in range(memo.MEMO_MAX + 5):
        memo.put(table, i, i)
    assert len(table) <= memo.MEMO_MAX
