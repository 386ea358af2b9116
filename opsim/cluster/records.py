"""What a rank keeps of each collective it took part in: the figures msprof's communication.json and
communication_matrix.json report, per rank (opsim.trace writes them)."""
from __future__ import annotations

from typing import NamedTuple


class CollectiveRecord(NamedTuple):
    """One rank's part in one collective (times in simulated microseconds)."""

    rank: int
    group: str
    group_ranks: tuple[int, ...]
    index: int
    """The collective's index within its group (0, 1, ...): the order its members reach it."""
    op: str
    """allreduce | allgather | reducescatter | broadcast | alltoall | send | recv."""
    name: str
    """The task's op name as msprof spells it, e.g. "hcom_allReduce__586_0_1"."""
    op_type: str
    """"hcom_allReduce_" ..."""
    group_hash: str
    """A decimal string stable for the group's name and ranks (the "@..." suffix of msprof's keys)."""
    nbytes: int
    dtype: str
    algorithm: str
    transport: str
    """The link type this rank's transfers used most ("HCCS", "RDMA", ...)."""
    stream_id: int
    start_us: float
    """The rank's stream reached the collective."""
    ready_us: float
    """start + idle: the rank is ready to transfer."""
    end_us: float
    wait_us: float
    """Time spent waiting for the group's other members (msprof's Wait and Synchronization Time here)."""
    transit_us: float
    idle_us: float
    links: tuple[tuple[int, int, str, int, float], ...]
    """(src rank, dst rank, transport, bytes, time_us) of what this rank sent."""
    thread: str = ""
    """The host thread that launched it (its CANN_API launch row's thread)."""
    launch_us: float = 0.0
    """The host thread began launching it (the HCCL launch on the host, before the task is queued)."""
    queued_us: float = 0.0
    """The launch ended: the task entered its stream's queue (launch_us + the launch's host time)."""


RECORD_FIELDS: tuple[str, ...] = tuple(CollectiveRecord.__annotations__)
"""The record's field names in order (the columns of `Result.collectives`)."""

__all__ = ["CollectiveRecord", "RECORD_FIELDS"]
