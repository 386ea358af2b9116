"""KernelGraph: one node per registered launcher, linked producer -> consumer through storages.

Mirrors opbase's kernel_graph / kernel_node / kernel_tensor and BuildKernelNodeImpl. The link is the
storage's "extend" slot (`Storage.extend`): it names the KernelTensor that last produced the storage, so
a later input of any view of that storage becomes a peer of that producer. Lifetimes for the workspace
planner (`opsim.opdev.planner`) are derived from those peers, which is why the in-place re-production
rule (the slot is repointed to the newer producer) shortens the first producer's lifetime exactly as in
the C++.
"""
from __future__ import annotations

import itertools
import logging
from enum import IntEnum
from math import prod
from typing import Iterable, Sequence

from opsim.acl.dtypes import DATA_TYPE_SIZE_BIT_OFFSET, DataType
from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Tensor
from opsim.opdev.op_args import OpArg, flatten_tensors

logger = logging.getLogger(__name__)

_graph_ids = itertools.count(0)


class SortType(IntEnum):
    """op::mem::SortType. Only USER_CUSTOM (registration order) is used by the executor."""

    USER_CUSTOM = 0
    DFS = 1
    BFS = 2
    DFS_WITH_REARRANGEMENT = 3


class TensorType(IntEnum):
    """op::mem::TensorType (debug printing only in opbase)."""

    INPUT = 0
    OUTPUT = 1
    WORKSPACE = 2
    OUTPUT_REF = 3
    USER_INPUT = 4
    USER_OUTPUT = 5
    DEFAULT = 6


class KernelTensor:
    """One tensor slot of a node: the tensor object (may be None), its peers and planner lifetime/size.

    `owner` is the owning node's index (original id = topo id); `node` is the node itself, kept so that the
    planner's "is B an input of N's owner" check needs no graph lookup.
    """

    __slots__ = ("tensor", "owner", "node", "peers", "index", "start", "end", "size")

    def __init__(self, tensor: Tensor | None, index: int = 0):
        self.tensor = tensor
        self.owner = -1
        self.node: KernelNode | None = None
        self.peers: list[KernelTensor] = []
        self.index = index
        self.start = 0
        self.end = 0
        self.size = 0

    def is_input_of(self, other: "KernelTensor") -> bool:
        """IsInputOf: this tensor object (identity; None matches a null input) is an input of other's node."""
        node = other.node
        if node is None:
            return False
        mine = self.tensor
        for inp in node.inputs:
            if inp.tensor is mine:
                return True
        return False

    def is_life_time_not_overlap(self, other: "KernelTensor") -> bool:
        """IsLifeTimeNotOverLap: equal starts always overlap (same operator)."""
        if other.start == self.start:
            return False
        if other.start > self.start:
            return self.end < other.start
        return other.end < self.start

    def __repr__(self) -> str:
        return f"KernelTensor(node={self.owner}, tensor={self.tensor!r}, life=[{self.start}, {self.end}], size={self.size})"


class KernelNode:
    """One registered launcher. `input_ids` / `has_null_input` are the planner's input-identity index."""

    __slots__ = ("op_type", "inputs", "outputs", "workspaces", "original_id", "topo_id", "input_ids",
                 "has_null_input")

    def __init__(self, op_type, inputs: Sequence[Tensor | None] = (), outputs: Sequence[Tensor] = (),
                 workspaces: Sequence[Tensor | None] = ()):
        self.op_type = op_type
        self.original_id = -1
        self.topo_id = -1
        self.inputs = _kernel_tensors(inputs, self)
        self.outputs = _kernel_tensors(outputs, self)
        self.workspaces = _kernel_tensors(workspaces, self) if workspaces else []
        ids = []
        null = False
        for t in inputs:
            if t is None:
                null = True
            else:
                ids.append(id(t))
        self.input_ids = frozenset(ids)
        self.has_null_input = null

    def _set_id(self, index: int) -> None:
        self.original_id = index
        self.topo_id = index
        for group in (self.inputs, self.outputs, self.workspaces):
            for kt in group:
                kt.owner = index

    def __repr__(self) -> str:
        return (f"KernelNode({self.op_type!r}, id={self.original_id}, in={len(self.inputs)}, "
                f"out={len(self.outputs)}, ws={len(self.workspaces)})")


def _kernel_tensors(tensors: Sequence[Tensor | None], node: KernelNode) -> list[KernelTensor]:
    """One KernelTensor per tensor, indexed in order, owned by `node`."""
    out = []
    i = 0
    for t in tensors:
        kt = KernelTensor(t, i)
        kt.node = node
        out.append(kt)
        i += 1
    return out


class KernelGraph:
    """The executor's graph: nodes in registration order (never re-sorted, SortType.USER_CUSTOM)."""

    def __init__(self) -> None:
        self.graph_id = next(_graph_ids)
        self.nodes: list[KernelNode] = []
        #: (previous producer node, new producer node) for every output that re-produced a storage (§4 step 4).
        self.reproduced_outputs: list[tuple[int, int]] = []

    def __len__(self) -> int:
        return len(self.nodes)

    def build_graph(self, op_type, inputs: Sequence[Tensor | None], outputs: Sequence[Tensor],
                    workspaces: Sequence[Tensor | None]) -> AclnnStatus:
        """BuildKernelNodeImpl + AddKernelNode over already flattened tensor lists.

        A null output is rejected with ACLNN_ERR_PARAM_INVALID before the graph is touched (opbase would
        dereference it and crash).
        """
        for i, t in enumerate(outputs):
            if t is None:
                logger.error("BuildGraph: output %d of op %r is a null tensor; outputs must be non-null", i, op_type)
                return AclnnStatus.ACLNN_ERR_PARAM_INVALID
        node = KernelNode(op_type, inputs, outputs, workspaces)
        index = len(self.nodes)
        node._set_id(index)
        for kt in node.inputs:
            t = kt.tensor
            if t is None:
                continue
            producer = t.storage.extend
            if producer is None:
                continue
            producer.peers.append(kt)
            kt.peers.append(producer)
        for out in node.outputs:
            storage = out.tensor.storage
            previous = storage.extend
            if previous is not None:
                logger.warning("The output of the previous op (node %d) is used as the output of the current op "
                               "(node %d, %r)", previous.owner, index, op_type)
                previous.peers.append(out)
                out.peers.append(previous)
                self.reproduced_outputs.append((previous.owner, index))
            storage.extend = out
        self.nodes.append(node)
        return AclnnStatus.ACLNN_SUCCESS

    def build_graph_from_args(self, op_type, input_args: Iterable[OpArg] | None,
                              output_args: Iterable[OpArg] | None, workspace_args: Iterable[OpArg] | None,
                              outshape_args: Iterable[OpArg] | None = None) -> AclnnStatus:
        """BuildGraph: flatten the OpArg lists (BuildGraph step 1), OUTSHAPE tensors joining the workspace set."""
        inputs = flatten_tensors(list(input_args or ()))
        outputs = flatten_tensors(list(output_args or ()))
        workspaces = flatten_tensors(list(workspace_args or ()))
        if outshape_args is not None:
            workspaces += flatten_tensors(list(outshape_args))
        return self.build_graph(op_type, inputs, outputs, workspaces)

    def calc_life_time_and_size(self) -> list[KernelTensor]:
        """CalcLifeTimeAndSize: the ordered planning list (§5 step 1).

        Per node k: every workspace entry with lifetime [k, k], then every from-workspace output with
        start k and end = max(k, owner of each peer). Sizes are computed now, not at registration, so a
        shape changed after registration is planned with its current value, as in opbase.
        """
        entries: list[KernelTensor] = []
        append = entries.append
        type_size = _TYPE_SIZE
        for node in self.nodes:
            k = node.topo_id
            for ws in node.workspaces:
                ws.start = k
                ws.end = k
                t = ws.tensor
                if t is None:
                    ws.size = 0
                else:
                    ts = type_size[t.dtype]
                    ws.size = prod(t.storage_shape) * ts if ts < _BIT_OFFSET else _sub_byte(ts, t.storage_shape)
                append(ws)
            for out in node.outputs:
                t = out.tensor
                if not t.storage.from_workspace:
                    continue
                end = k
                for peer in out.peers:
                    if peer.owner > end:
                        end = peer.owner
                out.start = k
                out.end = end
                ts = type_size[t.dtype]
                out.size = prod(t.storage_shape) * ts if ts < _BIT_OFFSET else _sub_byte(ts, t.storage_shape)
                append(out)
        return entries

    def destroy(self) -> None:
        """Free the graph: clear every storage extend slot that still points at one of its tensors."""
        for node in self.nodes:
            for group in (node.inputs, node.outputs, node.workspaces):
                for kt in group:
                    t = kt.tensor
                    if t is not None and t.storage.extend is kt:
                        t.storage.extend = None
        self.nodes = []
        self.reproduced_outputs = []

    def __repr__(self) -> str:
        return f"KernelGraph(id={self.graph_id}, nodes={len(self.nodes)})"


_BIT_OFFSET = DATA_TYPE_SIZE_BIT_OFFSET
#: ge TypeSize per dtype with undefined sizes (-1) mapped to 0, which is what `DataType.nbytes` plans for them.
_TYPE_SIZE = {d: max(d.type_size, 0) for d in DataType}


def _sub_byte(type_size: int, shape) -> int:
    """ceil(bits x count / 8) for the sub-byte dtypes (type size 1000 + bits)."""
    return ((type_size - _BIT_OFFSET) * prod(shape) + 7) >> 3


__all__ = ["KernelGraph", "KernelNode", "KernelTensor", "SortType", "TensorType"]
