"""KernelGraph: BuildGraph linking through storage extend slots, destroy, and the lifetime pass."""
from __future__ import annotations

import logging

from opsim.acl.dtypes import DataType
from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Tensor, TensorList
from opsim.opdev.graph import KernelGraph
from opsim.opdev.op_args import NULL_TENSOR_LIST, OpArg, OpArgType, to_op_arg

U8 = DataType.DT_UINT8


def ws(nbytes: int, name: str | None = None) -> Tensor:
    """A from-workspace tensor of `nbytes` bytes (AllocTensor)."""
    return Tensor([nbytes], U8, from_workspace=True, name=name)


def user(nbytes: int = 16, name: str | None = None) -> Tensor:
    """A user device tensor (aclCreateTensor): not from workspace."""
    return Tensor([nbytes], U8, name=name)


def view(t: Tensor, numel: int) -> Tensor:
    """CreateView(t, [numel], 0): another tensor object over t's storage with its own storage shape."""
    return Tensor([numel], t.dtype, storage=t.storage)


def lifetimes(entries):
    return [(e.tensor, e.start, e.end) for e in entries]


def test_ids_are_registration_order():
    g = KernelGraph()
    for name in ("A", "B", "C"):
        assert g.build_graph(name, [], [user()], []) == AclnnStatus.ACLNN_SUCCESS
    assert [(n.op_type, n.original_id, n.topo_id) for n in g.nodes] == [("A", 0, 0), ("B", 1, 1), ("C", 2, 2)]
    assert all(kt.owner == 1 for kt in g.nodes[1].outputs)


def test_output_takes_the_empty_extend_slot_and_consumers_become_peers():
    g = KernelGraph()
    t = ws(64)
    g.build_graph("A", [], [t], [])
    producer = g.nodes[0].outputs[0]
    assert t.storage.extend is producer
    g.build_graph("B", [t], [user()], [])
    consumer = g.nodes[1].inputs[0]
    assert producer.peers == [consumer] and consumer.peers == [producer]


def test_a_view_of_the_produced_storage_links_too():
    g = KernelGraph()
    t = ws(64)
    g.build_graph("A", [], [t], [])
    g.build_graph("B", [view(t, 8)], [user()], [])
    assert g.nodes[0].outputs[0].peers == [g.nodes[1].inputs[0]]


def test_inputs_without_producer_and_null_inputs_are_not_linked():
    g = KernelGraph()
    a = user()
    g.build_graph("A", [a, None], [user()], [])
    node = g.nodes[0]
    assert [kt.tensor for kt in node.inputs] == [a, None]
    assert all(not kt.peers for kt in node.inputs)
    assert node.has_null_input and node.input_ids == frozenset({id(a)})


def test_reproduced_output_peers_previous_producer_and_repoints_slot(caplog):
    g = KernelGraph()
    t = ws(1000)
    g.build_graph("A", [], [t], [])
    with caplog.at_level(logging.WARNING, logger="opsim.opdev.graph"):
        g.build_graph("Inplace", [t], [t], [])
    first, second = g.nodes[0].outputs[0], g.nodes[1].outputs[0]
    inplace_input = g.nodes[1].inputs[0]
    assert first.peers == [inplace_input, second]
    assert second.peers == [first]
    assert t.storage.extend is second
    assert g.reproduced_outputs == [(0, 1)]
    assert "output of the previous op" in caplog.text
    g.build_graph("Reader", [t], [user()], [])
    assert second.peers == [first, g.nodes[2].inputs[0]]  # later consumers link to the newer producer only
    assert first.peers == [inplace_input, second]


def test_null_output_is_rejected_without_touching_the_graph():
    g = KernelGraph()
    t = ws(32)
    assert g.build_graph("A", [], [t, None], []) == AclnnStatus.ACLNN_ERR_PARAM_INVALID
    assert len(g) == 0 and t.storage.extend is None


def test_build_graph_from_args_flattens_like_build_graph():
    g = KernelGraph()
    a, b, o, w1, s = user(), user(), ws(8), ws(8), ws(8)
    inputs = [to_op_arg(a), to_op_arg(None), to_op_arg(TensorList([b, None])), to_op_arg(NULL_TENSOR_LIST),
              to_op_arg(3), to_op_arg(1.5)]
    outputs = [to_op_arg(o)]
    workspaces = [OpArg(OpArgType.OPARG_ACLTENSOR_LIST, TensorList([w1, None])),
                  OpArg(OpArgType.OPARG_ACLTENSOR_LIST, None)]
    outshape = [to_op_arg(s), OpArg(OpArgType.OPARG_INT, 0)]
    assert g.build_graph_from_args("Op", inputs, outputs, workspaces, outshape) == AclnnStatus.ACLNN_SUCCESS
    node = g.nodes[0]
    assert [kt.tensor for kt in node.inputs] == [a, b, None]
    assert [kt.tensor for kt in node.outputs] == [o]
    assert [kt.tensor for kt in node.workspaces] == [w1, None, s]


def test_destroy_clears_only_slots_pointing_at_this_graph():
    g1, g2 = KernelGraph(), KernelGraph()
    a, b = ws(8), ws(8)
    g1.build_graph("A", [], [a, b], [])
    g2.build_graph("B", [], [b], [])  # b's slot now points at g2's tensor
    g1.destroy()
    assert a.storage.extend is None
    assert b.storage.extend is g2.nodes[0].outputs[0]
    assert len(g1) == 0
    g2.destroy()
    assert b.storage.extend is None


def test_lifetime_pass_order_and_lifetimes_of_the_worked_example():
    g = KernelGraph()
    w0, t0, w1, t1, w2 = ws(100), ws(4096), ws(1000), ws(2048), ws(4096)
    g.build_graph("N0", [], [t0], [w0])
    g.build_graph("N1", [t0], [t1], [w1])
    g.build_graph("N2", [t1], [user()], [w2])
    entries = g.calc_life_time_and_size()
    assert lifetimes(entries) == [(w0, 0, 0), (t0, 0, 1), (w1, 1, 1), (t1, 1, 2), (w2, 2, 2)]
    assert [e.size for e in entries] == [100, 4096, 1000, 2048, 4096]


def test_lifetime_pass_in_place_example():
    g = KernelGraph()
    t, w = ws(1000), ws(1000)
    g.build_graph("N0", [], [t], [])
    g.build_graph("N1", [t], [t], [])
    g.build_graph("N2", [], [user()], [w])
    g.build_graph("N3", [t], [user()], [])
    assert lifetimes(g.calc_life_time_and_size()) == [(t, 0, 1), (t, 1, 3), (w, 2, 2)]


def test_user_outputs_and_input_only_workspace_tensors_are_not_listed():
    g = KernelGraph()
    only_input = ws(64)
    g.build_graph("A", [only_input], [user()], [])
    assert g.calc_life_time_and_size() == []


def test_unconsumed_workspace_output_lives_one_node():
    g = KernelGraph()
    t = ws(64)
    g.build_graph("A", [], [t], [])
    g.build_graph("B", [], [user()], [])
    assert lifetimes(g.calc_life_time_and_size()) == [(t, 0, 0)]


def test_sizes_use_each_tensor_objects_own_storage_shape():
    g = KernelGraph()
    big = Tensor([1000], DataType.DT_FLOAT, from_workspace=True)
    small_view = Tensor([200], DataType.DT_FLOAT, storage=big.storage)
    nz = Tensor([4, 4], DataType.DT_FLOAT16, storage_shape=[1, 1, 16, 16], from_workspace=True)
    int4 = Tensor([3], DataType.DT_INT4, from_workspace=True)
    g.build_graph("A", [], [small_view, nz, int4], [None, user(10)])
    sizes = [(e.tensor, e.size) for e in g.calc_life_time_and_size()]
    assert sizes == [(None, 0), (g.nodes[0].workspaces[1].tensor, 10), (small_view, 800), (nz, 512), (int4, 2)]


def test_shape_changed_after_registration_is_planned_with_the_current_shape():
    g = KernelGraph()
    t = ws(10)
    g.build_graph("A", [], [user()], [t])
    t.set_shape([300])
    assert g.calc_life_time_and_size()[0].size == 300
