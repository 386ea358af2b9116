"""A job folder (several `*_ascend_pt`, one per rank) as ONE multi-rank scenario (docs/import.md, "A job").

Each observed rank is imported as a single-rank import would (opsim.importer), except that each HCCL op
becomes a `collective` step with the rank's recorded Transit and Idle times (opsim.importer.collectives) and
`cluster.transit: recorded`. The lowest observed rank's threads are the scenario's `threads` (its `ranks`
entry is `{}`); every other observed rank lists its own `threads`, its profiled ops renamed `r<rank>_<op>`.
All ranks share one clock: each rank's threads start with a sleep of its profile's start after the earliest
rank's (torch_npu's timestamps of one job share the host clock).

Groups come from the ranks' communication_matrix.json: every rank a group's links name ("0-1" .. "0-7") is a
member, so `cluster.size` covers ranks the folder does not hold. Those missing ranks are filled (see
`fill_ranks`): a missing rank runs the threads of the observed rank nearest in arrival times, and arrives at
each collective when the group's last member did as that rank's communication.json shows. "Nearest": an
observed rank ready at r that waited w (its Wait Time) saw the last member ready at r + w, so the rank with the
least total Wait Time over the step's collectives is the one whose arrivals are nearest the last arrivals (ties:
the lower rank). Its threads are copied with each collective's `idle_us` raised by that rank's recorded Wait
Time of the op, so the missing ranks are ready when its profile says the last member was. The first missing
rank holds those threads, the others are `{like: <first missing rank>}` (when the waits are all below LATE_US
every missing rank is simply `{like: <nearest rank>}`). With 2 observed ranks of 8, ranks 2..7 arrive as the
observed rank that waited less, plus its recorded waits; the import report says so per filled rank.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

from opsim.errors import ProfileFormatError
from opsim.scenario.schema import MAX_RANKS
from opsim.importer.job import RankFolder, rank_folders
from opsim.importer.report import LATE_US, ImportReport
from opsim.calibration.comm_read import CommOp, read_communication, read_groups
from opsim.importer.calls import stream_order
from opsim.importer.collectives import collapse, read_hccl_ops



def group_table(folders: list[RankFolder]) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Group hash -> (group name, member ranks), the union over the observed ranks' matrices. The group of
    every rank of the job is named `world`; others `group_<hash % 1000>` (the suffix the op names carry)."""
    members: dict[str, set[int]] = {}
    for f in folders:
        source = f.output / ("communication_matrix.json" if "communication_matrix.json" in f.files
                             or "analysis.db" not in f.files else "analysis.db")
        for ghash, ranks in _groups_of(f).items():
            if ranks and max(ranks) >= MAX_RANKS:  # before anything is built per rank
                raise ProfileFormatError(f"{source}: field collective: group {ghash[:40]!r} names rank {max(ranks)}, "
                                         f"beyond the {MAX_RANKS} ranks a scenario holds; import a job of at most "
                                         f"{MAX_RANKS} ranks")
            members.setdefault(ghash, set()).update(ranks | {f.rank})
    if not members:
        f = folders[0]
        raise ProfileFormatError(f"{f.output / 'communication_matrix.json'}: field collective: no communication "
                                 f"group; a job import needs the HCCL ops' groups")
    size = max(max(m) for m in members.values()) + 1
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    names: set[str] = set()
    for ghash, ranks in sorted(members.items()):
        name = "world" if len(ranks) == size and "world" not in names else f"group_{_short(ghash)}"
        while name in names:
            name += "_"
        names.add(name)
        out[ghash] = (name, tuple(sorted(ranks)))
    return out


def _groups_of(f: RankFolder) -> dict[str, set[int]]:
    """A rank's groups: its communication_matrix.json, else (the db export) its analysis.db."""
    if "communication_matrix.json" in f.files or "analysis.db" not in f.files:
        return read_groups(f.output / "communication_matrix.json")
    from opsim.calibration.comm_db import read_groups_db  # lazy: only a db export needs it
    return read_groups_db(f.output / "analysis.db")


def _comm_of(f: RankFolder) -> list[CommOp]:
    """A rank's communication ops: its communication.json, else (the db export) its analysis.db."""
    if "communication.json" in f.files or "analysis.db" not in f.files:
        return read_communication(f.output / "communication.json")
    from opsim.calibration.comm_db import read_communication_db  # lazy: only a db export needs it
    return read_communication_db(f.output / "analysis.db")


def _short(ghash: str) -> str:
    return str(int(ghash) % 1000) if ghash.isdigit() else "".join(c for c in ghash if c.isalnum())[:20] or "x"


def nearest_rank(comm: dict[int, list[CommOp]]) -> int:
    """The observed rank whose readiness is nearest the last arrivals: the least total Wait Time (ties: the lower
    rank)."""
    return min(comm, key=lambda r: (round(sum(o.wait_us or 0.0 for o in comm[r]), 3), r))


def fill_ranks(size: int, observed: list[int], comm: dict[int, list[CommOp]], threads_of: dict[int, list],
               report: ImportReport, groups: dict[int, frozenset] | None = None) -> dict[int, dict[str, Any]]:
    """The `ranks` entries of the ranks the folder does not hold (see the module docstring). `groups`: each
    rank's group names; a missing rank is modelled on an observed rank of the same groups only."""
    missing = [r for r in range(size) if r not in observed]
    member = (lambda r: groups.get(r, frozenset())) if groups is not None else (lambda r: frozenset())
    classes: dict[frozenset, list[int]] = {}
    for r in missing:
        classes.setdefault(member(r), []).append(r)
    entries: dict[int, dict[str, Any]] = {}
    filled: list[dict[str, Any]] = []
    for names, ranks in classes.items():
        peers = {r: comm[r] for r in observed if member(r) == names}
        if not peers:
            raise ProfileFormatError(f"rank {ranks[0]} is in group(s) {', '.join(sorted(names)) or 'none'} but no "
                                     f"rank folder of the job is; field ranks: import a folder holding a rank of "
                                     f"each group")
        entries.update(_fill_class(ranks, nearest_rank(peers), peers, threads_of, filled))
    report.figures["filled_ranks"] = sorted(filled, key=lambda f: f["rank"])
    return entries


def _fill_class(missing: list[int], model: int, comm: dict[int, list[CommOp]], threads_of: dict[int, list],
                filled: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    late = {o.name: o.wait_us or 0.0 for o in comm[model]}  # the last member was ready `wait` after the model
    entries: dict[int, dict[str, Any]] = {}
    if max(late.values(), default=0.0) > LATE_US:
        own = copy.deepcopy(threads_of[model])
        _raise_idle(own, late)
        entries[missing[0]] = {"threads": own}
        head = missing[0]
    else:
        entries[missing[0]] = {"like": model}
        head = model
    for r in missing[1:]:
        entries[r] = {"like": head}
    waits = {r: round(sum(o.wait_us or 0.0 for o in comm[r]), 3) for r in sorted(comm)}
    filled += [
        {"rank": r, "like": model, "extra_idle_us": round(sum(max(v, 0.0) for v in late.values()), 3),
         "why": f"not in the folder; runs rank {model}'s threads (the observed rank nearest in arrival times: least "
                f"total Wait Time, {waits}) and arrives at each collective when its profile says the group's last "
                f"member did"}
        for r in missing]
    return entries


def _raise_idle(program: Any, late: dict[str, float]) -> None:
    """Each collective step's idle_us raised by the time its op's last member arrived after this rank."""
    if isinstance(program, list):
        for item in program:
            _raise_idle(item, late)
    elif isinstance(program, dict):
        if "collective" in program and isinstance(program.get("_op"), str):
            extra = max(late.get(program["_op"], 0.0), 0.0)
            program["idle_us"] = round(float(program.get("idle_us", 0.0)) + extra, 3)
        for v in program.values():
            if isinstance(v, (list, dict)):
                _raise_idle(v, late)


def strip_op_names(program: Any) -> None:
    """Drop the `_op` marks (each collective's profile op name, used while filling) before writing."""
    if isinstance(program, list):
        for item in program:
            strip_op_names(item)
    elif isinstance(program, dict):
        program.pop("_op", None)
        for v in program.values():
            if isinstance(v, (list, dict)):
                strip_op_names(v)


def rename_ops(program: Any, mapping: dict[str, str]) -> None:
    """Op steps of a rank's threads renamed to the rank's profiled-op names."""
    if isinstance(program, list):
        for item in program:
            rename_ops(item, mapping)
    elif isinstance(program, dict):
        if isinstance(program.get("op"), str) and program["op"] in mapping:
            program["op"] = mapping[program["op"]]
        for v in program.values():
            if isinstance(v, (list, dict)):
                rename_ops(v, mapping)


def shift(threads: list[dict[str, Any]], offset_us: float) -> None:
    """Start every thread `offset_us` later (its rank's profile began that much after the earliest rank's)."""
    if offset_us > 0:
        for th in threads:
            th["program"].insert(0, {"sleep": round(offset_us, 3)})


def merge_in_order(lists: list[list[str]]) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for items in lists:
        for x in items:
            if x not in seen:
                seen.add(x)
                out.append(x)
    return out


def build_job(path: str | Path, *, name: str, progress: bool, import_rank: Callable[..., Any],
              single: bool = False) -> tuple[dict[str, Any], ImportReport, Any]:
    """(scenario, report, calibration) of a job folder: one scenario for all its ranks, each rank read by
    `import_rank` (opsim.importer.import_profile); raises ProfileFormatError naming the folder and field when the
    rank folders disagree. `single`: `path` is one rank's folder, the job's only observed rank."""
    folders = rank_folders(path, single=single)
    if not folders:
        raise ProfileFormatError(f"{path}: no *_ascend_pt rank folder; give the folder of a job's rank folders")
    for f in folders:
        if f.rank >= MAX_RANKS:
            raise ProfileFormatError(f"{f.path}: field rank_id: rank {f.rank} is beyond the {MAX_RANKS} ranks a "
                                     f"scenario holds; import a job of at most {MAX_RANKS} ranks")
    groups = group_table(folders)
    size = max(max(r for _, rs in groups.values() for r in rs), max(f.rank for f in folders)) + 1
    comm = {f.rank: _comm_of(f) for f in folders}
    report = ImportReport(source=str(path))
    ranks = [_import_rank(f, comm[f.rank], groups, report, progress, first=(i == 0), import_rank=import_rank)
             for i, f in enumerate(folders)]
    origin = min(r["origin_ns"] for r in ranks)
    for r in ranks:
        shift(r["scenario"]["threads"], (r["origin_ns"] - origin) / 1000.0)
    return _assemble(folders, ranks, groups, size, comm, report, name, path), report, ranks[0]["calibration"]


def _import_rank(f: RankFolder, ops: list[CommOp], groups: dict, report: ImportReport, progress: bool,
                 first: bool, import_rank: Callable[..., Any]) -> dict[str, Any]:
    """One rank imported with its HCCL ops as collective steps."""
    by_name = {o.name: o for o in ops}
    by_hash3 = {_short(h): v for h, v in groups.items()}
    origin: list[int] = []

    def step_of_op(op: Any) -> dict[str, Any]:
        rec = by_name.get(op.name)
        group = groups.get(rec.group_hash) if rec is not None else by_hash3.get(op.hash3)
        if group is None:
            raise ProfileFormatError(f"{f.output / 'communication_matrix.json'}: field collective: no group for "
                                     f"HCCL op {op.name!r} (group hash ...{op.hash3}); export every rank's files")
        step: dict[str, Any] = {"collective": op.op, "group": group[0], "bytes": op.nbytes, "dtype": op.dtype,
                                "name": op.op_type, "_op": op.name}
        if rec is not None:
            for key in ("transit_us", "idle_us"):
                if getattr(rec, key) is not None:
                    step[key] = round(getattr(rec, key), 3)
        else:
            report.warn(f"rank {f.rank}: HCCL op not in communication.json (transfer time modelled)", 1, op.name)
        return step

    def hook(pc: Any, view: Any, rank_report: ImportReport) -> None:
        if pc.device is not None:
            collapse(pc.device, read_hccl_ops(view), step_of_op, rank_report)
            pc.streams = stream_order(pc.calls, pc.device.streams)
        origin.append(pc.origin_ns)

    res = import_rank(f.path, progress=progress, device_hook=hook, calibration=first)
    for reason, n in res.report.warnings.items():
        report.warn(f"rank {f.rank}: {reason}", n, res.report.examples.get(reason))
    for reason, n in res.report.notes.items():
        report.note(f"rank {f.rank}: {reason}", n)
    report.figures.setdefault("ranks", {})[f.rank] = res.report.figures
    return {"rank": f.rank, "scenario": res.scenario, "origin_ns": origin[0], "calibration": res.calibration}


def _assemble(folders: list[RankFolder], ranks: list[dict[str, Any]], groups: dict, size: int,
              comm: dict[int, list[CommOp]], report: ImportReport, name: str | None, path: Any) -> dict[str, Any]:
    base = ranks[0]["scenario"]
    for r in ranks:
        if r["scenario"].get("env") != base.get("env"):
            raise ProfileFormatError(f"{folders[ranks.index(r)].path}: field env: {r['scenario'].get('env')} but "
                                     f"rank {ranks[0]['rank']} has {base.get('env')}; import rank folders of one run")
    profiled = dict(base["profiled_ops"])
    threads_of: dict[int, list] = {ranks[0]["rank"]: base["threads"]}
    for r in ranks[1:]:
        mapping = {op: f"r{r['rank']}_{op}" for op in r["scenario"]["profiled_ops"]}
        profiled.update({mapping[op]: entry for op, entry in r["scenario"]["profiled_ops"].items()})
        rename_ops(r["scenario"]["threads"], mapping)
        threads_of[r["rank"]] = r["scenario"]["threads"]
    observed = [r["rank"] for r in ranks]
    membership: dict[int, set] = {}
    for gname, rs in groups.values():
        for r in rs:
            membership.setdefault(r, set()).add(gname)
    entries = fill_ranks(size, observed, comm, threads_of, report,
                         {r: frozenset(g) for r, g in membership.items()})
    entries.update({r: {"threads": threads_of[r]} for r in observed[1:]})
    entries[observed[0]] = {}
    for th in threads_of.values():
        strip_op_names(th)
    for e in entries.values():
        strip_op_names(e)
    out: dict[str, Any] = {}
    for key, value in base.items():
        if key == "streams":
            value = merge_in_order([r["scenario"]["streams"] for r in ranks])
        elif key == "events":
            value = merge_in_order([r["scenario"].get("events", []) for r in ranks])
        elif key == "profiled_ops":
            value = profiled
        elif key == "name":
            value = name
        elif key == "description":
            kind = "rank folder" if Path(path).name.endswith("_ascend_pt") else "job folder"
            value = (f"imported from the {kind} {Path(path).name} by opsim import: ranks {observed} observed "
                     f"of {size}; each HCCL op is a collective step with its recorded transit and idle times")
        out[key] = value
    if "events" not in out and any(r["scenario"].get("events") for r in ranks):
        out["events"] = merge_in_order([r["scenario"].get("events", []) for r in ranks])
    out["cluster"] = {"size": size, "transit": "recorded"}
    out["groups"] = [{"name": g, "ranks": "all" if len(rs) == size else list(rs)} for g, rs in groups.values()]
    out["ranks"] = [entries.get(i, {}) for i in range(size)]
    report.figures["job"] = {"observed": observed, "size": size,
                             "groups": [{"name": g, "ranks": list(rs)} for g, rs in groups.values()]}
    return out


__all__ = ["build_job", "group_table", "fill_ranks", "nearest_rank", "rename_ops", "shift", "strip_op_names",
           "merge_in_order"]

