"""Cache pressure: 10 000 IndexPut calls from 4 threads over 50 dtype/attribute combinations with
ACLNN_AICPU_CACHE_LIMIT=64. The trace's AI CPU cache events (hits, misses, one-shot tasks) and the cached-task
peak must agree with a hand computation: keys are (thread, combination); each call finishes before the next
starts, so no task is busy at lookup time; the first 64 distinct keys get cached and hit afterwards, every
other key is a one-shot task on every call."""
from __future__ import annotations

from collections import Counter

import numpy as np

from opsim.acl import DataType, Tensor, TensorList
from opsim.opdev.aicpu.launcher import AiCpuOneShotKernelLauncher
from opsim.opdev.aicpu.task_space import CACHED_TASKS_COUNTER
from opsim.opdev.process import ProcessContext
from opsim.opdev.thread_local import A_CALL, A_SPAN, set_current
from opsim.ops import aicpu_ops as A
from opsim.trace.recorder import Recorder

CALLS = 10_000
THREADS = 4
LIMIT = 64
DTYPES = (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_INT32, DataType.DT_INT64, DataType.DT_INT8)
I32, I64 = DataType.DT_INT32, DataType.DT_INT64
INDEX_CONFIGS = ((I32,), (I64,), (I32, I32), (I64, I64), (I32, I64))
COMBOS = [(dt, idx, acc) for dt in DTYPES for idx in INDEX_CONFIGS for acc in (False, True)]


def combo_args(dt, idx_dtypes, accumulate):
    """Fresh tensors per call (the key ignores shapes and identities of tensors, only dtypes/formats count)."""
    k = len(idx_dtypes)
    self_t = Tensor([8, 4, 3], dt)
    indices = TensorList([Tensor([2], d) for d in idx_dtypes])
    values = Tensor([2] + [4, 3][k - 1:], dt)
    return self_t, indices, values, accumulate, False


def expected_counts(sequence):
    cached: set = set()
    counts: Counter = Counter()
    for key in sequence:
        if key in cached:
            counts["hit"] += 1
        elif len(cached) < LIMIT:
            cached.add(key)
            counts["miss"] += 1
        else:
            counts["oneshot"] += 1
    return counts, len(cached)


def test_cache_pressure_matches_hand_computation():
    assert len(COMBOS) == 50
    p = ProcessContext(env={"ACLNN_AICPU_CACHE_LIMIT": str(LIMIT)}, recorder=Recorder())
    threads = [p.new_thread(f"t{i}") for i in range(THREADS)]
    clocks = [0.0] * THREADS
    rng = np.random.default_rng(2024)
    sequence = [(int(t), int(c)) for t, c in zip(rng.integers(0, THREADS, CALLS), rng.integers(0, len(COMBOS), CALLS))]
    one_shot_seen = 0
    for t, c in sequence:
        ctx = threads[t]
        set_current(ctx)
        status, size, ex = A.aclnn_index_put_impl_get_workspace_size(*combo_args(*COMBOS[c]))
        assert status == 0
        if type(ex.kernel_launch_obj_list[0]) is AiCpuOneShotKernelLauncher:
            one_shot_seen += 1
            assert ex.set_repeatable() != 0           # a one-shot task makes the executor unrepeatable
        assert A.aclnn_index_put_impl(0x1000 if size else 0, size, ex, None) == 0
        for a in ctx.take_actions():                  # the host replay, per thread clock
            if a[0] == A_SPAN:
                clocks[t] += a[3]
            elif a[0] == A_CALL:
                a[1](clocks[t])
        assert ctx.pending_overflow_task is None
    set_current(None)

    want, cached = expected_counts(sequence)
    cache = p.recorder.records("cache")
    rows = [(k, op, d) for c, k, op, d in zip(cache["cache"], cache["kind"], cache["op"], cache["detail"])
            if c == "aicpu"]
    got = Counter(k for k, _, _ in rows)
    assert got == want and sum(got.values()) == CALLS
    assert got["oneshot"] == one_shot_seen > 0 and got["miss"] == LIMIT == cached
    peak = max(int(d.split("=")[1]) for _, op, d in rows if op == "IndexPut")
    assert peak == LIMIT
    counter = p.recorder.records("counter")
    values = [v for n, v in zip(counter["name"], counter["value"]) if n == CACHED_TASKS_COUNTER]
    assert values == list(range(1, LIMIT + 1))
    space = p.aicpu_spaces[("IndexPut", 1, False)]
    assert space.task_count == LIMIT and all(not t.is_visit for t in space.tasks())
    assert len({t.key[:8] for t in space.tasks()}) <= THREADS
