"""Collectives: what a rank's program issues, and the rendezvous that ends it on every member.

A collective is a device task (TaskKind.COLLECTIVE) on a communication stream. The stream reaching it is its
rank's arrival; the rank is ready `idle_us` later (time inside the op that is neither waiting nor
transferring, a replayed profile's Idle Time). The k-th collective of a group (k counted per rank in the order
its streams reach the group's collectives) ends on every member at the latest member's readiness plus the
transfer time. Each member then records a CollectiveRecord: its wait (msprof's Wait and Synchronization Time
here), transit and idle times.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from opsim.cluster.groups import OP_TYPES, POINT_TO_POINT, CommGroup
from opsim.cluster.records import CollectiveRecord
from opsim.errors import ScenarioError

if TYPE_CHECKING:  # annotations only: the cluster owns the ranks that hold calls
    from opsim.cluster.cluster import Cluster


class CollectiveSpec(NamedTuple):
    """A collective as a program step gives it (validated by the scenario layer)."""

    op: str
    nbytes: int
    dtype: str = "float32"
    group: str | None = None
    """The group's name (None for send/recv: the pair with `peer`)."""
    peer: int | None = None
    op_type: str | None = None
    """The msprof op type (default from `op`: hcom_allReduce_ ...)."""
    algorithm: str | None = None
    transit_us: float | None = None
    """A recorded transfer time, used when the cluster's `transit` is "recorded"."""
    idle_us: float = 0.0
    root: int = 0

    @property
    def type_name(self) -> str:
        return self.op_type or OP_TYPES[self.op]


class CollectiveCall:
    """A rank's collective step (one per program step, issued on every pass through it)."""

    __slots__ = ("cluster", "rank", "group", "spec")

    def __init__(self, cluster: "Cluster", rank: int, group: CommGroup, spec: CollectiveSpec) -> None:
        self.cluster, self.rank, self.group, self.spec = cluster, rank, group, spec

    def issue(self, thread: str, launch_us: float) -> "Issue":
        """One issue of the step by host thread `thread`, whose launch takes `launch_us` of host time."""
        return Issue(self, thread, launch_us)


class Issue(NamedTuple):
    """One issue of a collective: the COLLECTIVE task's `event`, told when its stream reaches it."""

    call: CollectiveCall
    thread: str
    launch_us: float
    """The host time of the launch (it ends when the task is queued: `task.queued`)."""

    def arrive(self, stream: Any, task: Any) -> None:
        """The rank's stream reached the collective (Stream._advance)."""
        self.call.cluster.rendezvous.arrive(self, stream, task)


class _Member(NamedTuple):
    call: CollectiveCall
    stream: Any
    task: Any
    ready: float
    issue: Issue


class Gathering:
    """The k-th collective of a group while its members arrive."""

    __slots__ = ("group", "index", "first", "members")

    def __init__(self, group: CommGroup, index: int, first: CollectiveCall) -> None:
        self.group, self.index, self.first = group, index, first
        self.members: dict[int, _Member] = {}

    def describe(self) -> str:
        s = self.first.spec
        return (f"collective {self.index} of group {self.group.name!r} ({s.op}, {s.nbytes} bytes, "
                f"{self.group.task_name(s.type_name, self.index)})")


class Rendezvous:
    """The cluster's open gatherings by (group, index), and the per-rank counters that number them."""

    def __init__(self, cluster: "Cluster") -> None:
        self.cluster = cluster
        self.open: dict[tuple[str, int], Gathering] = {}
        self.reached: dict[tuple[str, int], int] = {}
        """(group, rank) -> collectives of the group the rank's streams have reached."""

    def arrive(self, issue: Issue, stream: Any, task: Any) -> None:
        call = issue.call
        group, rank = call.group, call.rank
        index = self.reached.get((group.name, rank), 0)
        self.reached[(group.name, rank)] = index + 1
        key = (group.name, index)
        gathering = self.open.get(key)
        if gathering is None:
            gathering = self.open[key] = Gathering(group, index, call)
        else:
            _check_match(gathering, call, self.cluster.source)
        task.op_name = group.task_name(call.spec.type_name, index)
        gathering.members[rank] = _Member(call, stream, task, task.start + call.spec.idle_us, issue)
        if len(gathering.members) == len(group.ranks):
            del self.open[key]
            self.cluster.complete(gathering)

    def deadlock_message(self) -> str | None:
        """What is left open once the simulation ran dry: the first stuck collective and who never came."""
        if not self.open:
            return None
        gathering = min(self.open.values(), key=lambda g: (g.index, g.group.name))
        missing = [r for r in gathering.group.ranks if r not in gathering.members]
        arrived = sorted(gathering.members)
        reached = ", ".join(f"rank {r} reached {self.reached.get((gathering.group.name, r), 0)}" for r in missing[:8])
        more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        return (f"{self.cluster.source}: deadlock: {gathering.describe()} waits for rank(s) "
                f"{', '.join(map(str, missing[:8]))}{more}, which never arrived (ranks {_span(arrived)} did; "
                f"{reached} of the group's collectives); fix: every rank of group {gathering.group.name!r} must "
                "issue the same collectives in the same order")


def _check_match(gathering: Gathering, call: CollectiveCall, source: str) -> None:
    a, b = gathering.first.spec, call.spec
    ops_ok = a.op == b.op if a.op not in POINT_TO_POINT else {a.op, b.op} == POINT_TO_POINT
    if ops_ok and a.nbytes == b.nbytes and a.dtype == b.dtype and a.root == b.root:
        return
    raise ScenarioError(
        f"{source}: mismatched collectives: {gathering.describe()} is {a.op} of {a.nbytes} bytes {a.dtype} on "
        f"rank {gathering.first.rank} but {b.op} of {b.nbytes} bytes {b.dtype} on rank {call.rank}; fix: every "
        f"rank of group {gathering.group.name!r} must issue the same collectives in the same order")


def _span(ranks: list[int]) -> str:
    if not ranks:
        return "none"
    return ", ".join(map(str, ranks[:8])) + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")


def member_record(gathering: Gathering, rank: int, *, end: float, last_ready: float, transit: float,
                  algorithm: str, links: tuple, transport: str) -> CollectiveRecord:
    """The CollectiveRecord of one member of a completed gathering."""
    m = gathering.members[rank]
    spec, group, task = m.call.spec, gathering.group, m.task
    return CollectiveRecord(
        rank=rank, group=group.name, group_ranks=group.ranks, index=gathering.index, op=spec.op,
        name=task.op_name, op_type=spec.type_name, group_hash=group.group_hash, nbytes=spec.nbytes,
        dtype=spec.dtype, algorithm=algorithm, transport=transport, stream_id=m.stream.stream_id,
        start_us=task.start, ready_us=m.ready, end_us=end, wait_us=last_ready - m.ready, transit_us=transit,
        idle_us=spec.idle_us, links=links, thread=m.issue.thread, launch_us=task.queued - m.issue.launch_us,
        queued_us=task.queued)


__all__ = ["CollectiveSpec", "CollectiveCall", "Issue", "Gathering", "Rendezvous", "member_record"]
