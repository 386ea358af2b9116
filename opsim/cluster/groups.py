"""Communication groups: a name and its ranks, with the stable hash msprof's keys carry."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

OP_TYPES = {
    "allreduce": "hcom_allReduce_", "allgather": "hcom_allGather_", "reducescatter": "hcom_reduceScatter_",
    "broadcast": "hcom_broadcast_", "alltoall": "hcom_alltoall_", "send": "hcom_send_", "recv": "hcom_receive_",
}
"""Collective -> the op type HCCL reports it under (kernel_details' Type column, the task name's stem)."""

POINT_TO_POINT = frozenset({"send", "recv"})


@dataclass(frozen=True)
class CommGroup:
    """A communication group: its name and member ranks (sorted, distinct)."""

    name: str
    ranks: tuple[int, ...]

    @property
    def group_hash(self) -> str:
        """A 20-digit decimal identifier of the group (name and ranks), like HCCL's group hash: stable across
        runs and platforms (sha256, not Python's salted hash)."""
        text = f"{self.name}:{','.join(map(str, self.ranks))}".encode()
        return str(int.from_bytes(hashlib.sha256(text).digest()[:8], "big") % 10 ** 20).rjust(20, "1")

    def task_name(self, op_type: str, index: int) -> str:
        """The collective's task name as msprof spells it: "hcom_allReduce__586_<index>_1"."""
        return f"{op_type}_{int(self.group_hash) % 1000}_{index}_1"


def pair_group(a: int, b: int) -> CommGroup:
    """The implicit group of a send/recv pair."""
    lo, hi = sorted((a, b))
    return CommGroup(f"p2p_{lo}_{hi}", (lo, hi))


__all__ = ["CommGroup", "OP_TYPES", "POINT_TO_POINT", "pair_group"]
