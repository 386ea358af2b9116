"""A scenario's `cluster`, `groups` and `ranks`: the job's shape, checked the way a run would use it.

Checks that need every rank at once live here: group members inside the cluster, `like` references that lead
to a rank with threads, and each rank's collectives naming a group it belongs to (or a partner that exists).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from opsim.cluster.spec import DEFAULT_INTER_LINK, DEFAULT_LINK, ClusterSpec
from opsim.cluster.groups import CommGroup
from opsim.errors import InvalidArgumentError
from opsim.scenario import config
from opsim.scenario.checks import scenario_horizon
from opsim.scenario.messages import Path_
from opsim.scenario.schema import MAX_RANKS
from opsim.cluster.links import get_link, resolve_link

CLUSTER_KEYS = ("cluster", "groups", "ranks")
"""A scenario with any of these is a multi-rank job."""

Add = Callable[[Path_, str], None]
BuildThread = Callable[[Path_, Mapping[str, Any]], "config.ThreadConfig | None"]


def is_cluster(data: Mapping[str, Any]) -> bool:
    return any(k in data for k in CLUSTER_KEYS)


def oversized_lists(data: Mapping[str, Any]) -> list[tuple[Path_, str]]:
    """`ranks`, `groups` and a group's `ranks` longer than a job can be (MAX_RANKS): reported before the schema
    walks them item by item (a 4 MiB file holds 800,000 `- {}` ranks; checking each took a minute)."""
    out: list[tuple[Path_, str]] = []
    groups = data.get("groups")
    lists: list[tuple[Path_, Any]] = [(("ranks",), data.get("ranks")), (("groups",), groups)]
    if isinstance(groups, list) and len(groups) <= MAX_RANKS:
        lists += [(("groups", i, "ranks"), g.get("ranks")) for i, g in enumerate(groups) if isinstance(g, dict)]
    for where, value in lists:
        if isinstance(value, list) and len(value) > MAX_RANKS:
            out.append((where, f"{len(value)} items, more than the {MAX_RANKS} ranks a job can have; list at most "
                               f"{MAX_RANKS}"))
    return out


def build_cluster(data: Mapping[str, Any], threads: tuple[config.ThreadConfig, ...], build_thread: BuildThread,
                  add: Add) -> tuple[ClusterSpec | None, tuple[config.RankConfig, ...]]:
    """The ClusterSpec and per-rank settings of a scenario (None, () when it declares no cluster)."""
    if not is_cluster(data):
        return None, ()
    cl = data.get("cluster") if isinstance(data.get("cluster"), dict) else {}
    raw_ranks = data.get("ranks") if isinstance(data.get("ranks"), list) else []
    size = _int(cl.get("size"), max(len(raw_ranks), 1))  # a malformed value is the schema's to report
    if len(raw_ranks) > size:
        add(("ranks",), f"{len(raw_ranks)} ranks are listed but cluster.size is {size}; list at most cluster.size "
                        "ranks or raise cluster.size")
    ranks = tuple(_rank(i, r, size, build_thread, add) for i, r in enumerate(raw_ranks))
    groups = _groups(data.get("groups"), size, add)
    for key, default in (("link", DEFAULT_LINK), ("inter_link", DEFAULT_INTER_LINK)):
        _check_link(_map(cl.get(key)), default, ("cluster", key), add)
    spec = ClusterSpec(size=size, ranks_per_server=_int(cl.get("ranks_per_server"), 8),
                       link=_map(cl.get("link")), inter_link=_map(cl.get("inter_link")),
                       algorithm=str(cl.get("algorithm", "auto")), transit=str(cl.get("transit", "recorded")),
                       groups=groups)
    _check_likes(ranks, add)
    if _check_members(spec, ranks, threads, add):
        _check_counts(spec, ranks, threads, add)
    return spec, ranks


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_RANKS \
        else default


def _map(value: Any) -> dict:
    return dict(value) if isinstance(value, dict) else {}


def _rank(i: int, raw: Any, size: int, build_thread: BuildThread, add: Add) -> config.RankConfig:
    if not isinstance(raw, dict):
        return config.RankConfig()
    threads = None
    if isinstance(raw.get("threads"), list):
        built = [build_thread(("ranks", i, "threads", j), th) for j, th in enumerate(raw["threads"])]
        threads = tuple(t for t in built if t is not None)
    like = raw.get("like")
    if isinstance(like, int) and not 0 <= like < size:
        add(("ranks", i, "like"), f"rank {like} is outside the cluster (ranks 0..{size - 1})")
        like = None  # reported: the later checks follow only `like`s inside the cluster
    if like is not None and threads is not None:
        add(("ranks", i), "a rank has its own `threads` or runs another's (`like`), not both")
    slowdown = raw.get("slowdown", 1.0)
    return config.RankConfig(threads=threads, like=like if isinstance(like, int) and not isinstance(like, bool)
                             else None,
                        slowdown=float(slowdown) if isinstance(slowdown, (int, float)) else 1.0)


def _groups(raw: Any, size: int, add: Add) -> tuple[CommGroup, ...]:
    out: list[CommGroup] = []
    seen: dict[str, int] = {}
    for i, g in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(g, dict) or not isinstance(g.get("name"), str):
            continue
        name, members = g["name"], g.get("ranks")
        if name in seen:
            add(("groups", i, "name"), f"group {name!r} is already declared by groups[{seen[name]}]; group names "
                                       "must be unique")
        seen.setdefault(name, i)
        if members == "all":
            members = list(range(size))
        if not isinstance(members, list) or not all(isinstance(r, int) for r in members):
            continue
        outside = [r for r in members if r >= size]
        if outside:
            add(("groups", i, "ranks"), f"rank(s) {', '.join(map(str, outside[:8]))} are outside the cluster "
                                        f"(ranks 0..{size - 1}); raise cluster.size or drop them")
            continue
        out.append(CommGroup(name, tuple(sorted(set(members)))))
    return tuple(out)


def _check_link(link: Mapping[str, Any], default: str, path: Path_, add: Add) -> None:
    try:
        get_link(str(link.get("preset", default)), **{k: v for k, v in link.items() if k != "preset"})
    except (InvalidArgumentError, ValueError, TypeError) as exc:
        add(path, str(exc))


def _check_likes(ranks: tuple[config.RankConfig, ...], add: Add) -> None:
    for i, rc in enumerate(ranks):
        seen, r = {i}, rc.like
        while r is not None and r < len(ranks):
            if r in seen:
                add(("ranks", i, "like"), f"rank {i}'s `like` chain returns to rank {r}; point it at a rank with "
                                          "its own threads (or none: the scenario's threads)")
                break
            seen.add(r)
            r = ranks[r].like


def _check_members(spec: ClusterSpec, ranks: tuple[config.RankConfig, ...], threads: tuple[config.ThreadConfig, ...],
                   add: Add) -> bool:
    """Each rank's collectives: a group it belongs to, a partner inside the cluster other than itself."""
    members = {g.name: set(g.ranks) for g in spec.groups}
    uses: dict[int, set] = {}  # the (op, group, peer) a set of threads issues, once per distinct set
    for r in range(spec.size):
        own = config.rank_threads(threads, ranks, r)
        if id(own) not in uses:
            uses[id(own)] = {(s.spec.op, s.spec.group, s.spec.peer) for s in _collectives(own)}
        for op, group, peer in sorted(uses[id(own)], key=repr):
            if group is not None and group in members and r not in members[group]:
                add(_where(ranks, r), f"rank {r} issues a {op} on group {group!r} but is not one of its ranks "
                                      f"({_short(sorted(members[group]))}); add it to the group or give the rank "
                                      "its own threads")
                return False
            if peer is not None and (peer >= spec.size or peer == r):
                add(_where(ranks, r), f"rank {r}'s {op} names peer {peer}: the partner must be another rank of "
                                      f"the cluster (0..{spec.size - 1})")
                return False
    return True


def _check_counts(spec: ClusterSpec, ranks: tuple[config.RankConfig, ...], threads: tuple[config.ThreadConfig, ...],
                  add: Add) -> None:
    """Every member of a group issues as many of its collectives (a send as many as its partner's receives):
    otherwise the run would end in a deadlock, so validation refuses it first. Programs whose count depends on
    a `choose` are left to the run's deadlock check."""
    counted: dict[int, dict | None] = {}
    per_rank = []
    for r in range(spec.size):
        own = config.rank_threads(threads, ranks, r)
        if id(own) not in counted:
            counted[id(own)] = _counts(tuple(step for th in own for step in th.steps()))
        per_rank.append(counted[id(own)])
    for g in spec.groups:
        got = [(r, per_rank[r].get(g.name, 0)) for r in g.ranks if per_rank[r] is not None]
        odd = next(((r, n) for r, n in got if n != got[0][1]), None)
        if odd is not None:
            add(("groups",), f"group {g.name!r}: rank {odd[0]} issues {odd[1]} of its collectives but rank "
                             f"{got[0][0]} issues {got[0][1]}; the run would deadlock; fix: every rank of the group "
                             "must issue the same collectives")
            return
    for r, c in enumerate(per_rank):
        for key, n in sorted((c or {}).items(), key=repr):
            if isinstance(key, tuple) and key[0] == "send" and per_rank[key[1]] is not None:
                got = per_rank[key[1]].get(("recv", r), 0)
                if got != n:
                    add(_where(ranks, r), f"rank {r} sends {n} time(s) to rank {key[1]}, which receives {got} "
                                          f"time(s) from it; the run would deadlock; match every send with a recv")
                    return


def _counts(program: tuple) -> dict | None:
    """Collectives per group name (and per ("send"/"recv", peer)) of a program; None when a `choose` decides."""
    out: dict = {}
    for step in program:
        if isinstance(step, config.CollectiveStep):
            s = step.spec
            key = s.group if s.peer is None else (s.op, s.peer)
            out[key] = out.get(key, 0) + 1
        elif isinstance(step, config.LoopStep):
            inner = _counts(step.body)
            if inner is None:
                return None
            for k, n in inner.items():
                out[k] = out.get(k, 0) + n * step.count
        elif isinstance(step, config.ChooseStep):
            if _collectives(step.options):
                return None
    return out


def _collectives(program: Any) -> list[config.CollectiveStep]:
    out: list[config.CollectiveStep] = []
    for item in program:
        steps = item.steps() if isinstance(item, config.ThreadConfig) else (item,)
        for step in steps:
            if isinstance(step, config.CollectiveStep):
                out.append(step)
            elif isinstance(step, config.LoopStep):
                out.extend(_collectives(step.body))
            elif isinstance(step, config.ChooseStep):
                out.extend(_collectives(step.options))
    return out


class _Refused(Exception):
    def __init__(self, where: Path_, message: str):
        super().__init__(message)
        self.where, self.message = where, message


def check_collective_time(data: Mapping[str, Any], spec: ClusterSpec, ranks: tuple[config.RankConfig, ...],
                          threads: tuple[config.ThreadConfig, ...], add: Add,
                          calibrated_links: Mapping[str, Any] | None = None) -> None:
    """A rank's collectives last at least their idle_us plus their transfer times (the link model's, or a
    recorded `transit_us`):
    a link of almost no bandwidth or huge buffers make them outlast what the outputs can express, which the run
    refuses only when it reaches them; refused here first. The links are the run's: the scenario's over the
    scenario calibration's fitted links (`opsim.cluster.links.resolve_link`)."""
    from opsim.cluster import transfer  # lazy: the transfer model is needed only for a job
    from opsim.cluster.groups import pair_group  # lazy: as above
    bound, why = scenario_horizon(data)
    links = [resolve_link(_map(spec.link), DEFAULT_LINK, calibrated_links),
             resolve_link(_map(spec.inter_link), DEFAULT_INTER_LINK, calibrated_links)]
    members = {g.name: g.ranks for g in spec.groups}
    memo: dict[tuple, float] = {}

    def step_us(r: int, s: Any) -> float:
        return float(s.idle_us or 0.0) + transit_us(r, s)  # a member is ready idle_us after it starts

    def transit_us(r: int, s: Any) -> float:
        if spec.transit == "recorded" and s.transit_us is not None:
            return float(s.transit_us)
        group = pair_group(r, int(s.peer)).ranks if s.peer is not None else members.get(s.group, (r,))
        key = (s.op, s.nbytes, group, s.algorithm)
        if key not in memo:
            try:
                alg = transfer.choose_algorithm(s.op, len(group), spec.ranks_per_server,
                                                s.algorithm or spec.algorithm)
            except ValueError as exc:  # `cluster.algorithm: pairwise` over an allreduce (a step's own is checked)
                raise _Refused(("cluster", "algorithm"), f"{exc}; set the algorithm on the alltoall steps instead")
            memo[key] = transfer.transfer_time_us(s.op, s.nbytes, len(group), algorithm=alg, intra=links[0],
                                                  inter=links[1], ranks_per_server=spec.ranks_per_server,
                                                  ranks=group)
        return memo[key]

    def total(r: int, program: Any) -> float:
        out = 0.0
        for step in program:
            if isinstance(step, config.CollectiveStep):
                out += step_us(r, step.spec)
            elif isinstance(step, config.LoopStep):
                out += step.count * total(r, step.body)
        return out

    for r in range(spec.size):
        for th in config.rank_threads(threads, ranks, r):
            try:
                t = total(r, th.program)
            except _Refused as exc:
                add(exc.where, exc.message)
                return
            if not t <= bound:
                add(_where(ranks, r), f"rank {r}'s thread {th.name!r}: its collectives alone take {t:.4g} us "
                                      f"(transfers and idle_us), beyond {why}; raise cluster.link.bandwidth_gbps, "
                                      "lower the collectives' bytes, idle_us or the loop counts")
                return


def _where(ranks: tuple[config.RankConfig, ...], r: int) -> Path_:
    return ("ranks", r) if r < len(ranks) else ("threads",)


def _short(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:8])) + (f" ... ({len(ranks)} ranks)" if len(ranks) > 8 else "")


__all__ = ["build_cluster", "oversized_lists", "check_collective_time", "is_cluster", "CLUSTER_KEYS"]
