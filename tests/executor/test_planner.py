"""Workspace planner: Align, the MaxAllocator rules and worked examples, LinearAllocator, and the fast
planner against two independent transcriptions on random graphs."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.acl.dtypes import DataType
from opsim.acl.tensor import Tensor, TensorList
from opsim.errors import InvalidArgumentError
from opsim.opdev.graph import KernelGraph, KernelTensor
from opsim.opdev.op_args import NULL_TENSOR_LIST, to_op_arg
from opsim.opdev.planner import (OFFSET_PLACEHOLDER, align, find_aliasing_hazards, plan_graph,
                                 plan_max, plan_max_reference, plan_workspace)

U8 = DataType.DT_UINT8


def ws(nbytes: int, name: str | None = None) -> Tensor:
    return Tensor([nbytes], U8, from_workspace=True, name=name)


def user(nbytes: int = 16) -> Tensor:
    return Tensor([nbytes], U8)


def view(t: Tensor, numel: int) -> Tensor:
    return Tensor([numel], t.dtype, storage=t.storage)


def off(t: Tensor) -> int:
    return t.storage.workspace_offset


def worked_example():
    g = KernelGraph()
    w0, t0, w1, t1, w2 = ws(100), ws(4096), ws(1000), ws(2048), ws(4096)
    g.build_graph("N0", [], [t0], [w0])
    g.build_graph("N1", [t0], [t1], [w1])
    g.build_graph("N2", [t1], [user()], [w2])
    return g, (w0, t0, w1, t1, w2)


@pytest.mark.parametrize("n, aligned", [(0, 512), (480, 512), (481, 1024), (4096, 4608), (512, 1024)])
def test_align(n, aligned):
    assert align(n) == aligned


def test_worked_example():
    g, (w0, t0, w1, t1, w2) = worked_example()
    result = plan_graph(g)
    assert result.total == 8704
    assert [(b.offset, b.size, b.entries) for b in result.buckets] == [
        (0, 1536, [0, 2]), (1536, 4608, [1, 4]), (6144, 2560, [3])]
    assert [off(t) for t in (w0, w1, t0, w2, t1)] == [0, 0, 1536, 1536, 6144]
    assert result.offsets == [0, 1536, 0, 6144, 1536]
    assert find_aliasing_hazards(g, result) == []


def test_in_place_example_reuses_memory_still_read_later_and_is_flagged():
    g = KernelGraph()
    t, w = ws(1000), ws(1000)
    g.build_graph("N0", [], [t], [])
    g.build_graph("N1", [t], [t], [])
    g.build_graph("N2", [], [user()], [w])
    g.build_graph("N3", [t], [user()], [])
    result = plan_graph(g)
    assert result.total == 1536
    assert off(t) == 0 and off(w) == 0
    assert result.skipped == [1]
    assert [(h.earlier, h.later, h.last_use) for h in find_aliasing_hazards(g, result)] == [(0, 2, 3)]


def test_replanning_is_deterministic_and_empty_graph_plans_zero():
    g, tensors = worked_example()
    first = plan_graph(g)
    again = plan_graph(g)
    assert first.offsets == again.offsets and first.total == again.total
    assert all(off(t) != OFFSET_PLACEHOLDER for t in tensors)
    assert plan_workspace(KernelGraph()) == 0


def test_non_overlapping_lifetimes_reuse_and_one_nodes_tensors_never_share():
    g = KernelGraph()
    a, b, c = ws(100), ws(100), ws(100)
    g.build_graph("N0", [], [user()], [a, b])
    g.build_graph("N1", [], [user()], [c])
    assert plan_workspace(g) == 1024
    assert off(a) != off(b)
    assert off(c) == off(b)  # both a and b are reusable; the last bucket wins


def test_equal_start_never_shares():
    g = KernelGraph()
    w, out = ws(100), ws(100)
    g.build_graph("N0", [], [out], [w])  # out is never consumed: lifetime [0, 0], like w
    assert plan_workspace(g) == 1024 and off(w) != off(out)


def test_last_reusable_bucket_wins():
    g = KernelGraph()
    a, b, c, d = ws(5000), ws(100), ws(2000), ws(10)
    g.build_graph("N0", [], [user()], [a, b, c])
    g.build_graph("N1", [], [user()], [d])
    result = plan_graph(g)
    assert [bk.size for bk in result.buckets] == [5120, 512, 2048]
    assert off(d) == off(c) == 5632


def test_input_identity_blocks_reuse_but_another_view_of_the_storage_does_not():
    blocked = KernelGraph()
    w, w1 = ws(100), ws(100)
    blocked.build_graph("N0", [], [user()], [w])
    blocked.build_graph("N1", [w], [user()], [w1])  # the same tensor object is N1's input
    assert plan_workspace(blocked) == 1024 and off(w1) != off(w)

    allowed = KernelGraph()
    v, v1 = ws(100), ws(100)
    allowed.build_graph("N0", [], [user()], [v])
    allowed.build_graph("N1", [view(v, 10)], [user()], [v1])
    assert plan_workspace(allowed) == 512 and off(v1) == off(v) == 0


def test_only_the_buckets_last_tensor_is_compared_for_the_input_rule():
    g = KernelGraph()
    a, b, c = ws(100), ws(100), ws(100)
    g.build_graph("N0", [], [user()], [a])
    g.build_graph("N1", [], [user()], [b])  # reuses a's bucket, becomes its last tensor
    g.build_graph("N2", [a], [user()], [c])  # a is N2's input, but a is no longer the bucket's last tensor
    assert plan_workspace(g) == 512 and off(a) == off(b) == off(c) == 0


def test_views_are_sized_by_their_own_storage_shape():
    g = KernelGraph()
    big = Tensor([1000], DataType.DT_FLOAT, from_workspace=True)
    g.build_graph("N0", [], [Tensor([200], DataType.DT_FLOAT, storage=big.storage)], [])
    assert plan_workspace(g) == align(800) == 1024


def test_first_listed_tensor_of_a_storage_wins_and_repeats_are_skipped():
    g = KernelGraph()
    s = ws(100)
    g.build_graph("N0", [], [user()], [s, view(s, 5000), s])
    result = plan_graph(g)
    assert result.total == 512 and result.skipped == [1, 2]
    assert result.offsets == [0, 0, 0]


def test_null_workspace_list_element_costs_512_and_null_list_costs_nothing():
    g = KernelGraph()
    g.build_graph_from_args("N0", [], [to_op_arg(user())], [to_op_arg(TensorList([None]))])
    assert plan_workspace(g) == 512
    empty = KernelGraph()
    empty.build_graph_from_args("N0", [], [to_op_arg(user())], [to_op_arg(NULL_TENSOR_LIST)])
    assert plan_workspace(empty) == 0


def test_null_workspace_bucket_is_not_reused_by_a_node_with_a_null_input():
    """IsInputOf compares tensor pointers, so a null bucket tail matches a null input element."""
    with_null_input = KernelGraph()
    w = ws(100)
    with_null_input.build_graph("N0", [], [user()], [None])
    with_null_input.build_graph("N1", [None], [user()], [w])
    assert plan_workspace(with_null_input) == 1024 and off(w) == 512

    without = KernelGraph()
    w2 = ws(100)
    without.build_graph("N0", [], [user()], [None])
    without.build_graph("N1", [user()], [user()], [w2])
    assert plan_workspace(without) == 512 and off(w2) == 0


def test_explicit_user_workspace_tensors_are_planned():
    g = KernelGraph()
    u, w = user(3000), ws(100)
    g.build_graph("N0", [], [user()], [u, w])
    assert plan_workspace(g) == align(3000) + 512
    assert off(u) == 0 and off(w) == align(3000)


def test_linear_strategy():
    g, (w0, t0, w1, t1, w2) = worked_example()
    result = plan_graph(g, "linear")
    assert result.total == 512 + 4608 + 1536 + 2560 + 4608
    assert result.offsets == [0, 512, 5120, 6656, 9216]
    assert [off(t) for t in (w0, t0, w1, t1, w2)] == [0, 512, 5120, 6656, 9216]

    twice = KernelGraph()
    s = ws(100)
    twice.build_graph("N0", [], [user()], [s, None, s])
    assert plan_workspace(twice, "linear") == 1536 and off(s) == 1024


def test_unknown_strategy_names_the_choices():
    with pytest.raises(InvalidArgumentError, match="'max'.*'linear'"):
        plan_workspace(KernelGraph(), "best")


def test_out_of_order_entries_fall_back_to_the_exact_scan():
    def entry(start, end, size):
        kt = KernelTensor(ws(size))
        kt.start, kt.end, kt.size = start, end, size
        return kt

    specs = [(0, 0, 100), (2, 3, 2000), (1, 1, 700), (1, 4, 100), (4, 4, 3000), (3, 3, 10)]
    fast = plan_max([entry(*s) for s in specs])
    ref = plan_max_reference([entry(*s) for s in specs])
    assert fast.offsets == ref.offsets and fast.total == ref.total
    assert [b.entries for b in fast.buckets] == [b.entries for b in ref.buckets]


# --- random graphs ------------------------------------------------------------------------------------

_DTYPES = (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_INT8, DataType.DT_INT4, DataType.DT_UINT1)


def random_graph(rng: random.Random) -> KernelGraph:
    """Chains, fan-in, views, in-place re-production, repeated and null workspaces, user tensors."""
    g = KernelGraph()
    produced: list[Tensor] = [user(64)]
    for _ in range(rng.randint(1, 25)):
        inputs: list[Tensor | None] = []
        for _ in range(rng.randint(0, 3)):
            src = rng.choice(produced[-6:])
            inputs.append(view(src, rng.randint(1, 300)) if rng.random() < 0.2 else src)
        if rng.random() < 0.1:
            inputs.append(None)
        workspaces: list[Tensor | None] = []
        for _ in range(rng.randint(0, 3)):
            r = rng.random()
            if r < 0.1:
                workspaces.append(None)
            elif r < 0.2:
                workspaces.append(user(rng.randint(0, 2000)))
            elif r < 0.3 and workspaces and workspaces[-1] is not None:
                workspaces.append(workspaces[-1])
            elif r < 0.35 and inputs and inputs[0] is not None:
                workspaces.append(inputs[0])  # a consumed tensor listed as workspace
            else:
                workspaces.append(Tensor([rng.randint(0, 3000)], rng.choice(_DTYPES), from_workspace=True))
        outputs: list[Tensor] = []
        for _ in range(rng.randint(1, 2)):
            r = rng.random()
            if r < 0.15 and inputs and inputs[0] is not None:
                outputs.append(inputs[0])  # in place
            elif r < 0.25:
                outputs.append(user())
            elif r < 0.3 and outputs:
                outputs.append(outputs[-1])
            else:
                outputs.append(Tensor([rng.randint(0, 40), rng.randint(0, 40)], rng.choice(_DTYPES),
                                      from_workspace=True))
        assert g.build_graph("Op", inputs, outputs, workspaces).name == "ACLNN_SUCCESS"
        produced.extend(outputs)
    return g


def brute_force_max(entries: list[KernelTensor]) -> tuple[int, list[int | None]]:
    """§5 step 2 in plain data: offsets of placed entries (None for skipped ones) and the total."""
    placed_storages: set[int] = set()
    buckets: list[dict] = []
    where: list[int | None] = []
    for e in entries:
        if e.tensor is not None and id(e.tensor.storage) in placed_storages:
            where.append(None)
            continue
        chosen = None
        for index, bucket in enumerate(buckets):
            last = bucket["last"]
            if e.start == last.start:
                disjoint = False
            elif e.start > last.start:
                disjoint = last.end < e.start
            else:
                disjoint = e.end < last.start
            is_input = any(inp.tensor is last.tensor for inp in e.node.inputs)
            if disjoint and not is_input:
                chosen = index
        if chosen is None:
            buckets.append({"size": 0})
            chosen = len(buckets) - 1
        bucket = buckets[chosen]
        bucket["size"] = max(bucket["size"], (e.size + 32 + 511) // 512 * 512)
        bucket["last"] = e
        where.append(chosen)
        if e.tensor is not None:
            placed_storages.add(id(e.tensor.storage))
    starts, total = [], 0
    for bucket in buckets:
        starts.append(total)
        total += bucket["size"]
    return total, [None if b is None else starts[b] for b in where]


@settings(max_examples=300, deadline=None)
@given(st.randoms(use_true_random=False))
def test_fast_planner_equals_reference_and_brute_force(rng):
    g = random_graph(rng)
    entries = g.calc_life_time_and_size()
    total, placed = brute_force_max(entries)
    fast = plan_max(entries)
    fast_storage_offsets = [None if e.tensor is None else off(e.tensor) for e in entries]
    ref = plan_max_reference(entries)
    assert fast.total == ref.total == total
    assert fast.offsets == ref.offsets
    assert [b.entries for b in fast.buckets] == [b.entries for b in ref.buckets]
    assert fast.skipped == ref.skipped == [i for i, o in enumerate(placed) if o is None]
    assert [fast.offsets[i] for i, o in enumerate(placed) if o is not None] == [o for o in placed if o is not None]
    assert fast_storage_offsets == [None if e.tensor is None else off(e.tensor) for e in entries]


@settings(max_examples=300, deadline=None)
@given(st.randoms(use_true_random=False))
def test_planned_tensors_with_overlapping_lifetimes_never_overlap_in_memory(rng):
    g = random_graph(rng)
    result = plan_graph(g)
    entries = result.entries
    skipped = set(result.skipped)
    placed = [i for i in range(len(entries)) if i not in skipped]
    for i in placed:
        assert result.offsets[i] + align(entries[i].size) <= result.total
    assert result.total % 512 == 0
    for x in placed:
        for y in placed:
            if y <= x:
                continue
            a, b = entries[x], entries[y]
            if a.start <= b.end and b.start <= a.end:
                lo_a, lo_b = result.offsets[x], result.offsets[y]
                assert lo_a + align(a.size) <= lo_b or lo_b + align(b.size) <= lo_a, (x, y)


@settings(max_examples=100, deadline=None)
@given(st.randoms(use_true_random=False))
def test_linear_planner_gives_every_entry_its_own_slot(rng):
    g = random_graph(rng)
    result = plan_graph(g, "linear")
    expected, cursor = [], 0
    for e in result.entries:
        expected.append(cursor)
        cursor += align(e.size)
    assert result.offsets == expected and result.total == cursor
    for i, e in enumerate(result.entries):
        if e.tensor is not None:
            last = max(j for j, f in enumerate(result.entries) if f.tensor is not None
                       and f.tensor.storage is e.tensor.storage)
            assert off(e.tensor) == expected[last]
