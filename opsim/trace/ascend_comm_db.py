"""A rank's collectives in the database layout: COMMUNICATION_OP and their host launches in
``ascend_pytorch_profiler_<rank>.db``, the CommAnalyzer* tables of ``analysis.db``.

msprof-analyze's ``slow_rank`` recipe (and ``hccl_sum``, ...) reads COMMUNICATION_OP joined to CANN_API by
connectionId, the rank from RANK_DEVICE_MAP; ``cluster -m all`` reads analysis.db's CommAnalyzerTime,
CommAnalyzerBandwidth and CommAnalyzerMatrix (communication.json's and communication_matrix.json's figures).
The layout is the real export's (../shared/real-profiles/alexnet-910b/db/level1, checked in
tests/profiler/test_comm_db.py):

* COMMUNICATION_OP, one row per collective of the rank (`opsim.cluster.records.CollectiveRecord`): opName
  the task's name (``hcom_allReduce__586_0_1``), startNs / endNs the COMMUNICATION task's epoch times, groupName
  the group's declared name, opId 1, 2, ... in start order, relay and retry 0, dataType msprof's
  ENUM_HCCL_DATA_TYPE id, algType HCCL's per-level names (``MESH-RING``: level 0 within a server, level 1
  across servers; a one-server group reports RING at level 1, as the real export does), count the elements
  (bytes / dtype size), opType ``hcom_allReduce_``, waitNs the record's wait (opsim's Wait Time; the real
  export's waitNs is a smaller figure whose definition is not published: 0.69 ms against 3.57 ms of
  communication.json Wait Time in the shared profile).
* CANN_API, per collective the host launch (`CollectiveRecord.launch_us` .. ``queued_us``, on the launching
  thread): an AscendCL span named by the op type and a Node ``launch`` span over the same time; the node span
  carries the op's connectionId, as do the op's TASK rows. The real export's HCCL-level span inside it
  (``Launch_Ffts``, with its own connectionId that nothing else references) has no simulated counterpart.

connectionIds continue after the largest id of the rank's calls, so they never clash. COMMUNICATION_TASK_INFO
(the op's sub-tasks: notifies, memcpys, reduce-inline) stays empty: opsim runs a collective as one task.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from opsim.acl.dtypes import DataType
from opsim.errors import InvalidArgumentError
from opsim.trace.ascend_db_schema import ENUM_API_TYPE, ENUM_TABLES
from opsim.trace.ascend_model import AscendProfile
from opsim.trace.timefmt import to_ns

__all__ = ["ANALYSIS_COMM_TABLES", "CommOp", "analysis_comm_rows", "communication_db_rows", "communication_ops",
           "hccl_data_type", "alg_type"]

_API_TYPE_ID = {name: i for i, name in ENUM_API_TYPE.items()}
_HCCL_DATA_TYPE_ID = {name: i for i, name in ENUM_TABLES["ENUM_HCCL_DATA_TYPE"].items()}
_HCCL_DTYPE = {DataType.DT_INT8: "INT8", DataType.DT_INT16: "INT16", DataType.DT_INT32: "INT32",
               DataType.DT_FLOAT16: "FP16", DataType.DT_FLOAT: "FP32", DataType.DT_INT64: "INT64",
               DataType.DT_UINT64: "UINT64", DataType.DT_UINT8: "UINT8", DataType.DT_UINT16: "UINT16",
               DataType.DT_UINT32: "UINT32", DataType.DT_DOUBLE: "FP64", DataType.DT_BF16: "BFP16"}
"""opsim's dtypes -> HCCL's names (HcclDataType; the ENUM_HCCL_DATA_TYPE rows); others are "N/A"."""
_ALG_NAMES = {"mesh": "MESH", "ring": "RING", "halving_doubling": "HD", "pairwise": "PAIRWISE"}
"""opsim's algorithm names -> HCCL's level names as msprof prints them (MESH-RING, RING-HD, ...)."""
_INTER_TRANSPORTS = frozenset({"RDMA"})
RELAY = RETRY = 0
"""No relayed or retried collectives (the real export's rows are all 0)."""


class CommOp(NamedTuple):
    """A collective the profile shows, with its epoch times, task and connectionId."""

    start_ns: int
    end_ns: int
    task: int
    """Its COMMUNICATION task's globalTaskId (index into the profile's tasks)."""
    conn: int
    rec: Any


def hccl_data_type(dtype: str) -> int:
    """The ENUM_HCCL_DATA_TYPE id of an opsim dtype name (N/A for one HCCL has no id for)."""
    try:
        name = _HCCL_DTYPE.get(DataType.parse(dtype), "N/A")
    except InvalidArgumentError:
        name = "N/A"
    return _HCCL_DATA_TYPE_ID[name]


def alg_type(algorithm: str, links: Sequence[tuple]) -> str:
    """HCCL's algType of a collective: ``<level 0>-<level 1>``; a group spanning servers (RDMA links) runs
    mesh within a server and `algorithm` across."""
    name = _ALG_NAMES.get(algorithm, algorithm.upper())
    if any(link[2] in _INTER_TRANSPORTS for link in links):
        return f"MESH-{name}"
    return f"{name}-RING"


def _count(nbytes: int, dtype: str) -> int:
    """The collective's element count (msprof's ``count``); 0 when the dtype has no size."""
    try:
        size = DataType.parse(dtype).itemsize
    except InvalidArgumentError:
        return 0
    return int(nbytes // size) if size > 0 else 0


def _first_connection_id(p: AscendProfile) -> int:
    """One past the largest connectionId the rank's calls use."""
    top = -1
    for corr in (p.op_calls.corr, p.api_spans.corr, p.tasks.corr):
        if len(corr):
            top = max(top, int(corr.max()))
    return top + 1


def communication_ops(p: AscendProfile, collectives: Sequence[Any]) -> list[CommOp]:
    """The rank's collectives that the profile shows (their COMMUNICATION task is among its tasks), in start
    order, numbered with connectionIds after those of the rank's calls."""
    epoch_ns = p.epoch_us * 1000
    t = p.tasks
    rows = np.flatnonzero(t.is_communication())
    tasks = {(t.texts[n], s): gid for gid, n, s in zip(rows.tolist(), t.name[rows].tolist(),
                                                        t.start_ns[rows].tolist())}
    shown = []
    for rec in collectives:
        start = epoch_ns + to_ns(rec.start_us)
        gid = tasks.get((rec.name, start))
        if gid is not None:
            shown.append((start, epoch_ns + to_ns(rec.end_us), gid, rec))
    shown.sort(key=lambda s: (s[0], s[1], s[2]))
    first = _first_connection_id(p)
    return [CommOp(start, end, gid, first + i, rec) for i, (start, end, gid, rec) in enumerate(shown)]


def communication_db_rows(p: AscendProfile, ops: Sequence[CommOp], sid: Callable[[str], int]
                          ) -> tuple[list[tuple], list[tuple]]:
    """(COMMUNICATION_OP rows, CANN_API launch rows without depth) of `ops`; `sid` gives a text's STRING_IDS
    id."""
    epoch_ns = p.epoch_us * 1000
    acl, node = _API_TYPE_ID["acl"], _API_TYPE_ID["node"]
    comm: list[tuple] = []
    api: list[tuple] = []
    for op_id, (start, end, _task, conn, rec) in enumerate(ops, start=1):
        comm.append((sid(rec.name), start, end, conn, sid(rec.group), op_id, RELAY, RETRY,
                     hccl_data_type(rec.dtype), sid(alg_type(rec.algorithm, rec.links)),
                     _count(rec.nbytes, rec.dtype), sid(rec.op_type), to_ns(rec.wait_us)))
        launch, queued = epoch_ns + to_ns(rec.launch_us), epoch_ns + to_ns(rec.queued_us)
        tid = p.threads.get(rec.thread, 0)
        api.append((launch, queued, acl, tid, None, sid(rec.op_type)))
        api.append((launch, queued, node, tid, conn, sid("launch")))
    return comm, api


# ---- analysis.db: CommAnalyzerTime, CommAnalyzerBandwidth, CommAnalyzerMatrix ---------------------------------

ANALYSIS_COMM_TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "CommAnalyzerTime": (("hccl_op_name", "TEXT"), ("group_name", "TEXT"), ("start_timestamp", "NUMERIC"),
                         ("elapse_time", "NUMERIC"), ("transit_time", "NUMERIC"), ("wait_time", "NUMERIC"),
                         ("synchronization_time", "NUMERIC"), ("idle_time", "NUMERIC"), ("step", "TEXT"),
                         ("type", "TEXT")),
    "CommAnalyzerBandwidth": (("hccl_op_name", "TEXT"), ("group_name", "TEXT"), ("transport_type", "TEXT"),
                              ("transit_size", "NUMERIC"), ("transit_time", "NUMERIC"), ("bandwidth", "NUMERIC"),
                              ("large_packet_ratio", "NUMERIC"), ("package_size", "NUMERIC"), ("count", "NUMERIC"),
                              ("total_duration", "NUMERIC"), ("step", "TEXT"), ("type", "TEXT")),
    "CommAnalyzerMatrix": (("hccl_op_name", "TEXT"), ("group_name", "TEXT"), ("src_rank", "TEXT"),
                           ("dst_rank", "TEXT"), ("transport_type", "TEXT"), ("transit_size", "NUMERIC"),
                           ("transit_time", "NUMERIC"), ("bandwidth", "NUMERIC"), ("step", "TEXT"), ("type", "TEXT"),
                           ("op_name", "TEXT")),
}
"""analysis.db's communication tables, columns as in the real export (its CREATE statements)."""


def analysis_comm_rows(time_data: dict[str, Any], matrix_data: dict[str, Any]) -> dict[str, list[tuple]]:
    """The analysis.db rows of a rank's communication.json and communication_matrix.json contents (the same
    figures, flattened as torch_npu does: per op its times; per op and used transport its bandwidth, one row
    per Size Distribution entry, SDMA's as one row of package size 0; per matrix key and link its row, the
    key without its "@hash" in hccl_op_name and the hash in group_name)."""
    times: list[tuple] = []
    bandwidth: list[tuple] = []
    for step, sections in time_data.items():
        for section, ops in sections.items():
            for key, op in ops.items():
                if key == "Total Op Info":
                    continue
                name, _, ghash = key.rpartition("@")
                t = op["Communication Time Info"]
                times.append((name, ghash, t["Start Timestamp(us)"], t["Elapse Time(ms)"], t["Transit Time(ms)"],
                              t["Wait Time(ms)"], t["Synchronization Time(ms)"], t["Idle Time(ms)"], step, section))
                for transport, info in op["Communication Bandwidth Info"].items():
                    if not info["Transit Size(MB)"]:
                        continue  # a transport the op did not use
                    head = (name, ghash, transport, info["Transit Size(MB)"], info["Transit Time(ms)"],
                            info["Bandwidth(GB/s)"], info["Large Packet Ratio"])
                    dist = info["Size Distribution"] or {"0": [0, 0]}
                    bandwidth.extend(head + (float(size), n, ms, step, section) for size, (n, ms) in dist.items())
    matrix: list[tuple] = []
    for step, sections in matrix_data.items():
        for section, keys in sections.items():
            for key, links in keys.items():
                kind, _, ghash = key.rpartition("@")
                for link, row in links.items():
                    src, _, dst = link.partition("-")
                    matrix.append((kind, ghash, src, dst, row["Transport Type"], row["Transit Size(MB)"],
                                   row["Transit Time(ms)"], row["Bandwidth(GB/s)"], step, section,
                                   row.get("Op Name", "")))
    return {"CommAnalyzerTime": times, "CommAnalyzerBandwidth": bandwidth, "CommAnalyzerMatrix": matrix}
