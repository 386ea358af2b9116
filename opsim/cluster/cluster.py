"""The cluster: ranks on one SimPy clock, their communication groups and the links between them.

A `Rank` owns one simulated NPU and its host process (a `opsim.runtime.simulation.Simulation` built on the
cluster's environment); the `Cluster` owns the ranks, the groups, the links and the rendezvous of their
collectives. Everything runs on one clock, so a run is deterministic and a slow rank delays its peers exactly
where they wait for it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import simpy

from opsim.cluster import links as links_mod
from opsim.cluster.links import resolve_link
from opsim.cluster import transfer
from opsim.cluster.collective import CollectiveCall, CollectiveSpec, Gathering, Rendezvous, member_record
from opsim.cluster.groups import POINT_TO_POINT, pair_group
from opsim.cluster.records import CollectiveRecord
from opsim.cluster.spec import DEFAULT_INTER_LINK, DEFAULT_LINK, TRANSIT_MODES, ClusterSpec
from opsim.errors import ScenarioError
from opsim.fastpath.environment import FastEnvironment
from opsim.trace.timefmt import to_ns

@dataclass
class CollectiveTotals:
    """A rank's collectives summed (integer nanoseconds, as every output rounds them)."""

    count: int = 0
    wait_ns: int = 0
    transit_ns: int = 0
    idle_ns: int = 0


class Rank:
    """One rank: its index, its simulation (device, process, host threads) and its collectives."""

    def __init__(self, index: int, sim: Any) -> None:
        self.index = index
        self.sim = sim
        self.keep = bool(sim.recorder.keeps_rows)
        """Keep every CollectiveRecord (a traced run); else only the totals, so memory stays flat."""
        self.collectives: list[CollectiveRecord] = []
        self.totals = CollectiveTotals()

    def add(self, record: CollectiveRecord) -> None:
        """One more collective of this rank: into the totals, and kept when the run keeps records."""
        t = self.totals
        t.count += 1
        t.wait_ns += to_ns(record.wait_us)
        t.transit_ns += to_ns(record.transit_us)
        t.idle_ns += to_ns(record.idle_us)
        if self.keep:
            self.collectives.append(record)

    def __repr__(self) -> str:
        return f"Rank({self.index}, collectives={len(self.collectives)})"


class Cluster:
    """Ranks on one clock; `call` makes a rank's collective, `run` runs them all."""

    def __init__(self, spec: ClusterSpec, *, fast_path: bool = True, source: str = "scenario",
                 calibrated_links: Mapping[str, Any] | None = None, horizon_us: float = math.inf) -> None:
        self.spec = spec
        self.source = source
        """The scenario's name or file, for messages."""
        self.horizon_us = horizon_us
        """The longest simulated time the outputs can express: a collective ending later is refused."""
        self.env = FastEnvironment() if fast_path else simpy.Environment()
        self.ranks: list[Rank] = []
        self.groups = {g.name: g for g in spec.groups}
        self.intra = resolve_link(spec.link, DEFAULT_LINK, calibrated_links)
        self.inter = resolve_link(spec.inter_link, DEFAULT_INTER_LINK, calibrated_links)
        self.rendezvous = Rendezvous(self)
        self._transits: dict[tuple, tuple[float, str]] = {}

    def add_rank(self, sim: Any) -> Rank:
        """Attach the next rank's simulation (built on `self.env`)."""
        if sim.env is not self.env:
            raise ScenarioError(f"{self.source}: rank {len(self.ranks)} was built on another clock")
        rank = Rank(len(self.ranks), sim)
        self.ranks.append(rank)
        return rank

    def call(self, rank: int, spec: CollectiveSpec) -> CollectiveCall:
        """A collective `rank` issues (its group resolved: a named group, or the pair of a send/recv)."""
        if spec.op in POINT_TO_POINT:
            group = pair_group(rank, int(spec.peer if spec.peer is not None else rank))
        else:
            group = self.groups[str(spec.group)]
        return CollectiveCall(self, rank, group, spec)

    def complete(self, gathering: Gathering) -> None:
        """Every member arrived: end the collective on each at the latest readiness plus its transfer (the
        model's, or with `transit: recorded` the member's own recorded transit: a replayed profile's ranks
        finish a collective at their own times)."""
        spec = gathering.first.spec
        ranks = gathering.group.ranks
        algorithm, model_us = self.transfer(spec, ranks)
        last_ready = max(m.ready for m in gathering.members.values())
        for r in ranks:
            m = gathering.members[r]
            own = m.call.spec.transit_us
            transit = float(own) if self.spec.transit == "recorded" and own is not None else model_us
            end = last_ready + transit
            if not end <= self.horizon_us:  # also NaN and inf: a link of almost no bandwidth
                raise ScenarioError(
                    f"{self.source}: {gathering.describe()} would end at {end:.4g} us, beyond the longest "
                    f"simulated time of {self.horizon_us:.4g} us (transfer {transit:.4g} us over {self.intra.name} "
                    f"at {self.intra.bandwidth_gbps:g} GB/s); fix: raise cluster.link.bandwidth_gbps or lower "
                    "the collective's bytes")
            m.stream.end_collective(end)
            scale = transit / model_us if model_us > 0.0 else 0.0
            plan = transfer.link_plan(m.call.spec.op, spec.nbytes, ranks, r, algorithm=algorithm,
                                      ranks_per_server=self.spec.ranks_per_server, intra=self.intra,
                                      inter=self.inter)
            rows = tuple((s, d, t, b, us * scale) for s, d, t, b, us in plan)
            self.ranks[r].add(member_record(
                gathering, r, end=end, last_ready=last_ready, transit=transit, algorithm=algorithm, links=rows,
                transport=_main_transport(rows, self.intra.transport)))

    def transfer(self, spec: CollectiveSpec, ranks: tuple[int, ...]) -> tuple[str, float]:
        """(algorithm, modelled transfer time) of a collective over `ranks`, memoised."""
        key = (spec.op, spec.nbytes, ranks, spec.algorithm)
        got = self._transits.get(key)
        if got is None:
            rps = self.spec.ranks_per_server
            algorithm = transfer.choose_algorithm(spec.op, len(ranks), rps, spec.algorithm or self.spec.algorithm)
            us = transfer.transfer_time_us(spec.op, spec.nbytes, len(ranks), algorithm=algorithm, intra=self.intra,
                                           inter=self.inter, ranks_per_server=rps, ranks=ranks)
            got = self._transits[key] = (algorithm, float(us))
        return got

    def run(self) -> float:
        """Run every rank to completion; returns the makespan. A collective some member never reached is a
        deadlock, reported (ScenarioError) naming the collective and the missing ranks."""
        self.env.run()
        for rank in self.ranks:
            for th in rank.sim.threads:
                if th.error is not None:
                    raise th.error
        message = self.rendezvous.deadlock_message()
        if message is not None:
            raise ScenarioError(message)
        return self.env.now


def _main_transport(rows: tuple, default: str) -> str:
    by: dict[str, int] = {}
    for _s, _d, t, b, _us in rows:
        if t != "LOCAL":
            by[t] = by.get(t, 0) + b
    return max(sorted(by), key=by.__getitem__) if by else default


__all__ = ["Cluster", "ClusterSpec", "Rank", "TRANSIT_MODES", "DEFAULT_LINK", "DEFAULT_INTER_LINK",
           "resolve_link"]
