"""The hot-path shortcuts behave exactly like the code they shortcut: memoised key bytes, the trusted task
constructor, the memoised profiler hash."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.acl import Scalar, Tensor
from opsim.acl.dtypes import DataType
from opsim.device.task import DeviceTask, TaskKind
from opsim.errors import InvalidArgumentError
from opsim.opdev import op_exec_cache as oec
from opsim.opdev import rt
from opsim.opdev.dfx import profiler_hash
from opsim.opdev.process import ProcessContext


def _fresh_key(*args):
    """The key with empty memo tables (every part computed from the fields)."""
    oec._TENSOR_KEYS.clear()
    oec._HEADS.clear()
    return oec.build_l2_key("aclnnAdd", 24, 48, 0, args[:-1], args[-1:])[0]


def test_memoised_key_bytes_follow_the_tensor_fields():
    a, b, out = Tensor([4, 8]), Tensor([4, 8]), Tensor([4, 8])
    first = oec.build_l2_key("aclnnAdd", 24, 48, 0, (a, b, Scalar(1.0)), (out,))[0]
    assert first == oec.build_l2_key("aclnnAdd", 24, 48, 0, (a, b, Scalar(1.0)), (out,))[0]
    oec._TENSOR_KEYS.clear()
    assert first == oec.build_l2_key("aclnnAdd", 24, 48, 0, (a, b, Scalar(1.0)), (out,))[0]
    a.set_shape([8, 4])  # the same tensor object with other fields: other bytes, as computed afresh
    changed = oec.build_l2_key("aclnnAdd", 24, 48, 0, (a, b, Scalar(1.0)), (out,))[0]
    assert changed != first
    assert changed == _fresh_key(Tensor([8, 4]), b, Scalar(1.0), out)
    h16 = Tensor([4, 8], DataType.DT_FLOAT16)
    assert oec.build_l2_key("aclnnAdd", 24, 48, 0, (h16, b, Scalar(1.0)), (out,))[0] != first
    assert oec.build_l2_key("aclnnAdd", 24, 40, 0, (Tensor([4, 8]), b, Scalar(1.0)), (out,))[0] != first


def test_aliasing_labels_are_not_memoised():
    a, b = Tensor([4]), Tensor([4])
    same = oec.build_l2_key("aclnnAdd", 24, 48, 0, (a, a), (b,))[0]
    other = oec.build_l2_key("aclnnAdd", 24, 48, 0, (a, b), (a,))[0]
    assert same != other


_POOL_SHAPES = ([4, 8], [8, 4], [32])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 3), st.sampled_from(["float", "float16"]),
                          st.sampled_from([1, True, 1.0, -0.0, 0.0, "x", None])), min_size=1, max_size=30))
def test_key_memo_equals_the_reference_key(steps):
    """Calls with argument objects reused, swapped, reshaped, retyped or rebound: the memoised key, storages
    and tensors are always those built from scratch."""
    tensors = [Tensor(_POOL_SHAPES[i % 3]) for i in range(4)]
    scalar = Scalar(1.0)
    memo_table: dict = {}
    pick = (0, 1, 2, None)
    for action, i, dtype, value in steps:
        t = tensors[i]
        if action == 0:
            t.set_shape(_POOL_SHAPES[(len(t.view_shape) + i) % 3])
        elif action == 1:
            t.dtype = DataType.parse(dtype)
        elif action == 2:
            t.storage = Tensor([1]).storage
        elif action == 3:
            scalar = Scalar(float(i), dtype)
        elif action == 4:
            t.view_offset = i
        elif action == 5:  # other argument objects (aliasing included)
            pick = (i, (i + 1) % 4, (i * 3) % 4, value)
        a, b, o, v = pick
        dfx_in, dfx_out = (tensors[a], tensors[b], scalar, v), (tensors[o],)
        memo = oec.build_l2_key("aclnnAdd", 24, 48, 0, dfx_in, dfx_out, memo=memo_table)
        ref = oec.build_l2_key("aclnnAdd", 24, 48, 0, dfx_in, dfx_out)
        assert memo[0] == ref[0]
        assert all(x is y for x, y in zip(memo[1], ref[1])) and len(memo[1]) == len(ref[1])
        assert all(x is y for x, y in zip(memo[2], ref[2])) and len(memo[2]) == len(ref[2])


def test_key_memo_is_reused_for_the_same_arguments():
    a, b, out, alpha = Tensor([4, 8]), Tensor([4, 8]), Tensor([4, 8]), Scalar(1.0)
    memo: dict = {}
    first = oec.build_l2_key("aclnnMemo", 24, 48, 0, (a, b, alpha), (out,), memo=memo)
    other = oec.build_l2_key("aclnnMemo", 24, 48, 0, (b, a, alpha), (out,), memo=memo)
    assert oec.build_l2_key("aclnnMemo", 24, 48, 0, (a, b, alpha), (out,), memo=memo) is first
    assert oec.build_l2_key("aclnnMemo", 24, 48, 0, (b, a, alpha), (out,), memo=memo) is other
    assert oec.build_l2_key("aclnnMemo", 24, 48, 0, (a, b, Scalar(1.0)), (out,), memo=memo) is not first
    assert oec.build_l2_key("aclnnMemo", 24, 48, 0, (a, b, 0.0), (out,), memo=memo)[0] != \
        oec.build_l2_key("aclnnMemo", 24, 48, 0, (a, b, -0.0), (out,), memo=memo)[0]
    assert len(memo) == 5


def test_key_memo_belongs_to_one_simulation():
    from opsim.runtime.simulation import Simulation
    assert Simulation().process.key_memo == {} and Simulation(fast_path=False).process.key_memo is None


def test_trusted_task_equals_the_checked_constructor():
    slots = DeviceTask.__slots__
    a = DeviceTask(TaskKind.AI_VECTOR, 3.5, 8, "Add", "AI_VECTOR_CORE", 7)
    b = DeviceTask.trusted(TaskKind.AI_VECTOR, 3.5, 8, "Add", "AI_VECTOR_CORE", 7)
    for name in slots:
        x, y = getattr(a, name), getattr(b, name)
        assert x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y)), name


def test_submit_kernel_checks_unusual_values():
    p = ProcessContext()
    ctx = p.new_thread()

    class Sink:
        pass

    stream = Sink()
    rt.submit_kernel(ctx, stream, "Add", "AI_CORE", 4, 2)  # an int duration: the checking constructor
    task = ctx.actions[-1][2]
    assert task.duration == 2.0 and type(task.duration) is float and task.kind is TaskKind.AI_CORE
    with pytest.raises(InvalidArgumentError, match="duration"):
        rt.submit_kernel(ctx, stream, "Add", "AI_CORE", 4, -1.0)
    rt.submit_kernel(ctx, stream, "Add", "AI_VECTOR_CORE", 0, 1.5)
    task = ctx.actions[-1][2]
    assert task.kind is TaskKind.AI_VECTOR and task.block_dim == 1 and task.duration == 1.5


def test_profiler_hash_memo_matches_the_kernel():
    from opsim.kernels.hashing import murmur_hash3_x64_h2
    for text in ("Add", "aclnnAdd_Add_Add", "é"):
        assert profiler_hash(text) == int(murmur_hash3_x64_h2(text.encode()))
        assert profiler_hash(text) == int(murmur_hash3_x64_h2(text.encode()))
