"""A rank's communication files in the torch_npu layout: communication.json and communication_matrix.json.

msprof-analyze's cluster analysis (``msprof-analyze cluster -d DIR -m all``) reads these two files from every
rank's ``ASCEND_PROFILER_OUTPUT``; MindStudio Insight shows them. Both are written from the rank's
`opsim.cluster.records.CollectiveRecord` list, in the exact shape of the torch_npu profiler's files (checked
field by field against the shared 910B profile, ../shared/real-profiles/alexnet-910b, in
tests/trace/test_ascend_comm.py): one compact JSON line, keys in msprof's order, raw float milliseconds,
ratios and bandwidths rounded to 4 decimals as msprof does.

communication.json: ``{"step<N>": {"p2p": {...}, "collective": {...}}}``; each op is keyed
``<name>@<group hash>``:

* Communication Time Info: Start Timestamp(us) (epoch, a double as msprof writes it), Elapse Time (end -
  start), Transit Time (the record's transit), Wait and Synchronization Time (the record's wait: in opsim's
  model a rank waits only for its peers before it transfers), Idle Time (Elapse - Transit - Wait, as msprof
  derives it, so the three add up exactly), Wait Time Ratio = Wait / (Wait + Transit), Synchronization Time
  Ratio = Sync / (Sync + Transit).
* Communication Bandwidth Info, per transport RDMA, HCCS, PCIE, SDMA, SIO: the links this rank sent on
  (the record's ``links``; LOCAL copies are not a transport here, as in msprof): Transit Size(MB) (10^6
  bytes) and Transit Time(ms) summed over the links (they run in parallel, so this exceeds the op's transit),
  Bandwidth(GB/s) = size / time. SDMA is the intra-server DMA engine: HCCS + PCIE + SIO together, with an
  empty Size Distribution, as msprof writes it. Size Distribution maps a packet size (MB) to [count, total
  ms]; opsim's link plan gives one aggregate row per peer, so each link row counts as one packet (HCCL sends
  a mesh allreduce as two messages per peer: the sizes are per peer, not per message). Large Packet Ratio
  is 0.0 (opsim models no packet sizes; the shared profile's ratios are all 0.0).
* "Total Op Info" (in a section with ops): the sums of the ops' times (ratios recomputed from the sums) and
  per transport the summed Transit Time, Transit Size and merged Size Distribution.

communication_matrix.json: the same steps and sections; per op kind and group the ops' links ranked by
bandwidth, as torch_npu writes it (its simplified form, which msprof-analyze's
MsprofCommunicationMatrixAdapter also builds): ``<kind>-top1@<hash>``, ``-middle``, ``-bottom1``,
``-total``, ``-bottom2``, ``-bottom3``; each maps a link ``"<src>-<dst>"`` (local ranks: the index in the
sorted group, how HCCL numbers a communicator's ranks) to Transport Type, Transit Size(MB), Transit
Time(ms), Bandwidth(GB/s) and the Op Name of the op at that rank (``-total``: the sums, no Op Name).
msprof-analyze (26.2) maps local ranks back to global ones only through each rank's own ``r-r`` (LOCAL) row:
a group whose ranks send no LOCAL row (opsim's link plan has one for mesh stages only) gets an empty cluster
matrix (its ``profiler_metadata.json`` ``parallel_group_info`` path compares an integer hash with the string
after the "@" and never matches, so writing that file would not help).

An op belongs to the step `step_of` gives it (the profile's: the step whose window holds its launch); ops
outside every step are left out, as torch_npu leaves out what its schedule did not record.
"""
from __future__ import annotations

import bisect
import json
import re
from collections import defaultdict
from typing import Any, Callable, Iterable, Mapping, Sequence

from opsim.trace.timefmt import to_ns

TRANSPORTS = ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")
"""communication.json's transports, in msprof's order."""
SDMA_PARTS = ("HCCS", "PCIE", "SIO")
"""The links the SDMA engine carries (its figures are their sums)."""
P2P_OPS = frozenset({"send", "recv"})
EPS = 1e-15
"""msprof-analyze's Constant.EPS: a divisor below it gives a ratio of 0."""
BYTES_PER_MB = 1_000_000
NS_PER_MS = 1_000_000

_KIND_RE = re.compile(r"send|reduce|invalid|broadcast|allreduce|receive|allgather|reducescatter|scatter|alltoall|"
                      r"alltoallv|alltoallvc|batchsendrecv")
"""How msprof names an op's kind in the matrix (MsprofCommunicationMatrixAdapter.HCCL_PATTERN, searched in the
lower-cased op name: hcom_reduceScatter_ gives "reduce", as msprof's does)."""

StepOf = Callable[[Any], "int | None | bool"]
"""A record -> its step number (None: the run has no steps, key "step"; False: outside every step)."""


def ratio(dividend: float, divisor: float) -> float:
    """msprof's ratio: rounded to 4 decimals, the integer 0 when the divisor is (almost) zero."""
    return 0 if abs(divisor) < EPS else round(dividend / divisor, 4)


def step_key(step: int | None) -> str:
    return "step" if step is None else f"step{step}"


def window_step_finder(windows: Sequence[tuple[int, int, int]], epoch_us: int) -> StepOf:
    """A `StepOf` by start time: the step ``(step, start_ns, end_ns)`` (epoch ns, sorted, apart) whose window
    holds the record's start; no windows: every record in the unnamed step."""
    if not windows:
        return lambda rec: None
    starts = [w[1] for w in windows]
    base = epoch_us * 1000

    def step_of(rec: Any) -> int | bool:
        t = base + to_ns(rec.start_us)
        i = bisect.bisect_right(starts, t) - 1
        return windows[i][0] if i >= 0 and t < windows[i][2] else False
    return step_of


# ---- communication.json --------------------------------------------------------------------------------------

def _ms(ns: int) -> float:
    return ns / NS_PER_MS


def _time_info(rec: Any, epoch_ns: int) -> dict[str, float]:
    start = epoch_ns + to_ns(rec.start_us)
    elapse = max(0, epoch_ns + to_ns(rec.end_us) - start)
    transit, wait = to_ns(rec.transit_us), to_ns(rec.wait_us)
    idle = elapse - transit - wait
    return {"Start Timestamp(us)": start / 1000.0, "Elapse Time(ms)": _ms(elapse), "Transit Time(ms)": _ms(transit),
            "Wait Time(ms)": _ms(wait), "Synchronization Time(ms)": _ms(wait), "Idle Time(ms)": _ms(idle),
            "Wait Time Ratio": ratio(_ms(wait), _ms(wait) + _ms(transit)),
            "Synchronization Time Ratio": ratio(_ms(wait), _ms(wait) + _ms(transit))}


def _unused() -> dict[str, Any]:
    return {"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0, "Large Packet Ratio": 0,
            "Size Distribution": {}}


def _bandwidth_info(links: Iterable[tuple]) -> dict[str, dict[str, Any]]:
    sizes: dict[str, int] = {}
    times: dict[str, int] = {}
    packets: dict[str, dict[str, list]] = {}
    for _src, _dst, transport, nbytes, time_us in links:
        if transport not in TRANSPORTS or transport == "SDMA":
            continue
        t = to_ns(time_us)
        sizes[transport] = sizes.get(transport, 0) + int(nbytes)
        times[transport] = times.get(transport, 0) + t
        entry = packets.setdefault(transport, {}).setdefault(str(int(nbytes) / BYTES_PER_MB), [0, 0])
        entry[0] += 1
        entry[1] += t
    sdma = [p for p in SDMA_PARTS if p in sizes]
    if sdma:
        sizes["SDMA"] = sum(sizes[p] for p in sdma)
        times["SDMA"] = sum(times[p] for p in sdma)
    out = {}
    for tr in TRANSPORTS:
        if tr not in sizes:
            out[tr] = _unused()
            continue
        mb, ms = sizes[tr] / BYTES_PER_MB, _ms(times[tr])
        dist = {k: [n, _ms(t)] for k, (n, t) in packets.get(tr, {}).items()}
        out[tr] = {"Transit Size(MB)": mb, "Transit Time(ms)": ms, "Bandwidth(GB/s)": ratio(mb, ms),
                   "Large Packet Ratio": 0 if tr == "SDMA" else 0.0, "Size Distribution": dist}
    return out


_TIME_SUMS = ("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)", "Idle Time(ms)")


def total_op_info(ops: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A section's "Total Op Info": msprof's sums over its ops (in order), ratios from the sums."""
    time = dict.fromkeys(_TIME_SUMS, 0.0)
    bw: dict[str, dict[str, Any]] = {tr: {"Transit Time(ms)": 0, "Transit Size(MB)": 0, "Size Distribution": {}}
                                     for tr in TRANSPORTS}
    for op in ops:
        for k in _TIME_SUMS:
            time[k] += op["Communication Time Info"][k]
        for tr, info in op["Communication Bandwidth Info"].items():
            tot = bw[tr]
            tot["Transit Time(ms)"] += info["Transit Time(ms)"]
            tot["Transit Size(MB)"] += info["Transit Size(MB)"]
            for size, (n, ms) in info["Size Distribution"].items():
                cur = tot["Size Distribution"].setdefault(size, [0, 0])
                cur[0] += n
                cur[1] += ms
    time["Wait Time Ratio"] = ratio(time["Wait Time(ms)"], time["Wait Time(ms)"] + time["Transit Time(ms)"])
    time["Synchronization Time Ratio"] = ratio(time["Synchronization Time(ms)"],
                                               time["Synchronization Time(ms)"] + time["Transit Time(ms)"])
    return {"Communication Time Info": time, "Communication Bandwidth Info": bw}


def _by_step(records: Iterable[Any], step_of: StepOf) -> dict[str, dict[str, list]]:
    """Records per step key and section, each section in start order (the order msprof lists ops in)."""
    steps: dict[Any, list] = {}
    for rec in records:
        s = step_of(rec)
        if s is not False:
            steps.setdefault(s, []).append(rec)
    out = {}
    for s in sorted(steps, key=lambda v: (v is not None, v or 0)):
        recs = sorted(steps[s], key=lambda r: (r.start_us, r.group, r.index))
        out[step_key(s)] = {"p2p": [r for r in recs if r.op in P2P_OPS],
                            "collective": [r for r in recs if r.op not in P2P_OPS]}
    return out


def communication_data(records: Iterable[Any], step_of: StepOf, epoch_us: int) -> dict[str, Any]:
    """communication.json's content for one rank's records."""
    epoch_ns = epoch_us * 1000
    out: dict[str, Any] = {}
    # a step's collectives repeat the last step's links: each distinct link plan is summed once (the dicts are
    # shared in the output, which nothing changes)
    bandwidth: dict[tuple, dict] = {}
    for key, sections in _by_step(records, step_of).items():
        step: dict[str, Any] = {}
        for section, recs in sections.items():
            ops = {}
            for r in recs:
                bw = bandwidth.get(r.links)
                if bw is None:
                    bw = bandwidth[r.links] = _bandwidth_info(r.links)
                ops[f"{r.name}@{r.group_hash}"] = {"Communication Time Info": _time_info(r, epoch_ns),
                                                   "Communication Bandwidth Info": bw}
            if ops:
                ops["Total Op Info"] = total_op_info(list(ops.values()))
            step[section] = ops
        out[key] = step
    return out


# ---- communication_matrix.json -------------------------------------------------------------------------------

def op_kind(name: str) -> str:
    """The op's kind as the matrix keys name it ("allreduce" for hcom_allReduce__586_0_1)."""
    m = _KIND_RE.search(name.lower())
    return m.group() if m else name.split("__")[0]


def _local(group_ranks: Sequence[int]) -> dict[int, int]:
    return {g: i for i, g in enumerate(sorted(group_ranks))}


def _link_rows(rec: Any) -> list[tuple[str, dict[str, Any]]]:
    local = _local(rec.group_ranks)
    rows = []
    for src, dst, transport, nbytes, time_us in rec.links:
        if src not in local or dst not in local:
            raise ValueError(f"collective {rec.name} of group {rec.group!r}: link {src}-{dst} leaves the group's "
                             f"ranks {list(rec.group_ranks)[:8]}")
        mb, ms = int(nbytes) / BYTES_PER_MB, _ms(to_ns(time_us))
        rows.append((f"{local[src]}-{local[dst]}", {"Transport Type": transport, "Transit Size(MB)": mb,
                                                    "Transit Time(ms)": ms, "Bandwidth(GB/s)": ratio(mb, ms),
                                                    "Op Name": rec.name}))
    return rows


def matrix_section(records: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """One section of communication_matrix.json from its records (see `rank_links`)."""
    by_link: dict[tuple[str, str, str], list] = defaultdict(list)
    for rec in records:
        kind = op_kind(rec.name)
        for link, row in _link_rows(rec):
            by_link[(kind, rec.group_hash, link)].append(row)
    return rank_links(by_link)


def rank_links(by_link: Mapping[tuple[str, str, str], list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per (kind, group hash, link) the ops' rows ranked by bandwidth: top1, middle, bottom1, total, bottom2,
    bottom3, keyed and ordered as msprof writes them (a stable sort: ties keep the ops' order)."""
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    for (kind, ghash, link), rows in by_link.items():
        rows = sorted(rows, key=lambda x: x["Bandwidth(GB/s)"], reverse=True)
        size = sum(x["Transit Size(MB)"] for x in rows)
        time = sum(x["Transit Time(ms)"] for x in rows)
        out[f"{kind}-top1@{ghash}"][link] = rows[0]
        out[f"{kind}-middle@{ghash}"][link] = rows[len(rows) // 2]
        out[f"{kind}-bottom1@{ghash}"][link] = rows[-1]
        out[f"{kind}-total@{ghash}"][link] = {"Transport Type": rows[0]["Transport Type"], "Transit Size(MB)": size,
                                             "Transit Time(ms)": time, "Bandwidth(GB/s)": ratio(size, time)}
        if len(rows) >= 2:
            out[f"{kind}-bottom2@{ghash}"][link] = rows[-2]
        if len(rows) >= 3:
            out[f"{kind}-bottom3@{ghash}"][link] = rows[-3]
    return dict(out)


def communication_matrix_data(records: Iterable[Any], step_of: StepOf) -> dict[str, Any]:
    """communication_matrix.json's content for one rank's records."""
    return {key: {section: matrix_section(recs) for section, recs in sections.items()}
            for key, sections in _by_step(records, step_of).items()}


def dumps(data: Any) -> str:
    """msprof's JSON text: one line, ``json.dumps``'s default separators, no trailing newline."""
    return json.dumps(data, ensure_ascii=False)


__all__ = ["communication_data", "communication_matrix_data", "matrix_section", "rank_links", "total_op_info",
           "window_step_finder", "op_kind", "ratio", "step_key", "dumps",
           "TRANSPORTS", "StepOf"]
