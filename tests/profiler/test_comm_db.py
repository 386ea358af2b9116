"""A job's db layout: COMMUNICATION_OP, the collectives' host launches in CANN_API and analysis.db's
CommAnalyzer* tables match the ranks' CollectiveRecords (what msprof-analyze's slow_rank and -m all read)."""
from __future__ import annotations

import copy
import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from opsim.scenario.runner import run_scenario
from opsim.trace.ascend_build import build_profile
from opsim.trace.ascend_profiler_db import profiler_db_rows
from opsim.trace.ascend_comm_db import alg_type, hccl_data_type
from opsim.trace.ascend_model import DEFAULT_EPOCH_US, timestamp_17
from opsim.trace.timefmt import to_ns

EPOCH_NS = DEFAULT_EPOCH_US * 1000
STAMP = timestamp_17(DEFAULT_EPOCH_US)
MIB = 1 << 20
REAL_DB = (Path(__file__).resolve().parents[3] / "shared" / "real-profiles" / "alexnet-910b" / "db" / "level1"
           / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db")
SLOW_RANK_QUERY = """
    SELECT RANK_DEVICE_MAP.rankId, si_group.value AS groupName, si_op.value AS opName,
           COMMUNICATION_OP.startNs AS startNs,
           (COMMUNICATION_OP.endNs - COMMUNICATION_OP.startNs) / 1000.0 AS communication_time
    FROM COMMUNICATION_OP
    CROSS JOIN RANK_DEVICE_MAP
    JOIN STRING_IDS si_group ON COMMUNICATION_OP.groupName = si_group.id
    JOIN STRING_IDS si_op ON COMMUNICATION_OP.opName = si_op.id
    JOIN CANN_API ON CANN_API.connectionId = COMMUNICATION_OP.connectionId
    WHERE CANN_API.startNs >= ? and CANN_API.startNs <= ?
"""
"""msprof-analyze 26.2's CommunicationTimeExport.QUERY (prof_exports/cluster_time_summary_export.py), the rows
its slow_rank recipe votes on."""


def job(size: int = 4, slowdowns: tuple[float, ...] = (1.0, 1.01, 1.02, 1.5), count: int = 3) -> dict:
    """A data-parallel job: per step a MatMul on `compute`, then an allreduce of its gradients on `comm`."""
    body = [{"op": "Matmul", "stream": "compute", "shapes": [[1024, 1024], [1024, 1024]], "dtype": "float16"},
            {"record_event": {"event": "grads", "stream": "compute"}},
            {"wait_event": {"event": "grads", "stream": "comm"}},
            {"collective": "allreduce", "group": "world", "bytes": 4 * MIB, "dtype": "float16", "stream": "comm"}]
    return {"name": "dp", "cluster": {"size": size}, "groups": [{"name": "world", "ranks": "all"}],
            "events": ["grads"], "ranks": [{"slowdown": s} for s in slowdowns],
            "threads": [{"name": "train", "streams": ["compute", "comm"],
                         "program": [{"loop": {"count": count, "body": body}}, {"sync_device": True}]}],
            "outputs": {"records": False, "trace": False, "csv": False}}


@pytest.fixture(scope="module")
def job_db(tmp_path_factory):
    out = tmp_path_factory.mktemp("job")
    res = run_scenario(copy.deepcopy(job()), out_dir=out, profiler_output="both")
    return res, out


def rank_out(out: Path, rank: int) -> Path:
    return out / f"dp_rank{rank}_{STAMP}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"


def connect(out: Path, rank: int) -> sqlite3.Connection:
    return sqlite3.connect(rank_out(out, rank) / f"ascend_pytorch_profiler_{rank}.db")


def strings(db: sqlite3.Connection) -> dict[int, str]:
    return dict(db.execute("SELECT id, value FROM STRING_IDS"))


def test_communication_op_rows_are_the_ranks_collectives(job_db):
    res, out = job_db
    for rank, run in enumerate(res.ranks):
        recs = sorted(run.rank.collectives, key=lambda c: c.start_us)
        assert len(recs) == 3
        db = connect(out, rank)
        s = strings(db)
        ops = db.execute("SELECT * FROM COMMUNICATION_OP ORDER BY opId").fetchall()
        assert len(ops) == len(recs)
        for op_id, (row, rec) in enumerate(zip(ops, recs), start=1):
            name, start, end, conn, group, oid, relay, retry, dtype, alg, count, op_type, wait = row
            assert (s[name], s[group], s[op_type], oid) == (rec.name, "world", "hcom_allReduce_", op_id)
            assert (start, end) == (EPOCH_NS + to_ns(rec.start_us), EPOCH_NS + to_ns(rec.end_us))
            assert wait == to_ns(rec.wait_us) and (relay, retry) == (0, 0)
            assert (dtype, s[alg], count) == (3, "MESH-RING", 2 * MIB)  # FP16: 4 MiB is 2 Mi elements
        assert db.execute("SELECT * FROM RANK_DEVICE_MAP").fetchall() == [(rank, rank)]
        assert db.execute("SELECT count(*) FROM COMMUNICATION_TASK_INFO").fetchone() == (0,)


def test_each_op_joins_one_host_launch_and_its_task(job_db):
    res, out = job_db
    for rank, run in enumerate(res.ranks):
        db = connect(out, rank)
        s = strings(db)
        calls = {c for (c,) in db.execute("SELECT connectionId FROM CONNECTION_IDS")}
        recs = {r.name: r for r in run.rank.collectives}
        conns = set()
        for name, conn, start, end in db.execute("SELECT opName, connectionId, startNs, endNs FROM COMMUNICATION_OP"):
            rec = recs[s[name]]
            assert conn not in calls and conn not in conns  # its own id, never an op call's
            conns.add(conn)
            (api,) = db.execute("SELECT startNs, endNs, type, globalTid, name FROM CANN_API WHERE connectionId = ?",
                                (conn,)).fetchall()
            launch, queued = EPOCH_NS + to_ns(rec.launch_us), EPOCH_NS + to_ns(rec.queued_us)
            assert api[:3] == (launch, queued, 10000) and s[api[4]] == "launch"
            # the launch: on the host thread that issued it, before the task is queued and runs
            assert rec.thread == "train" and rec.launch_us < rec.queued_us <= rec.start_us
            acl = db.execute("SELECT connectionId FROM CANN_API WHERE type = 20000 AND startNs = ? AND endNs = ? "
                             "AND name = (SELECT id FROM STRING_IDS WHERE value = 'hcom_allReduce_')",
                             (launch, queued)).fetchall()
            assert acl == [(None,)]
            task = db.execute("SELECT startNs, endNs, taskType FROM TASK WHERE connectionId = ?", (conn,)).fetchall()
            assert [(a, b, s[t]) for a, b, t in task] == [(start, end, "COMMUNICATION")]
        # slow_rank's own query: one row per collective, this rank's
        rows = db.execute(SLOW_RANK_QUERY, (0, 2 ** 63 - 1)).fetchall()
        assert sorted((r[0], r[2]) for r in rows) == sorted((rank, name) for name in recs)
        assert {r[1] for r in rows} == {"world"}
    # the slowed rank (3) reaches the first allreduce last: its communication time is the shortest (the later
    # ones wait for the one before on the comm stream, which outlasts every rank's MatMul)
    times: dict[str, dict[int, float]] = {}
    for rank in range(4):
        for _, _, name, _, t in connect(out, rank).execute(SLOW_RANK_QUERY, (0, 2 ** 63 - 1)):
            times.setdefault(name, {})[rank] = t
    first = times[min(times)]
    assert sorted(first, key=first.get) == [3, 2, 1, 0] and len(set(first.values())) == 4
    assert all(per_rank[3] == min(per_rank.values()) for per_rank in times.values())


def test_analysis_db_holds_the_communication_files_figures(job_db):
    res, out = job_db
    for rank in range(4):
        folder = rank_out(out, rank)
        comm = json.loads((folder / "communication.json").read_text())
        db = sqlite3.connect(folder / "analysis.db")
        rows = db.execute("SELECT * FROM CommAnalyzerTime").fetchall()
        want = []
        for step, sections in comm.items():
            for key, op in sections["collective"].items():
                if key != "Total Op Info":
                    t = op["Communication Time Info"]
                    name, _, ghash = key.partition("@")
                    want.append((name, ghash, t["Start Timestamp(us)"], t["Elapse Time(ms)"], t["Transit Time(ms)"],
                                 t["Wait Time(ms)"], t["Synchronization Time(ms)"], t["Idle Time(ms)"], step,
                                 "collective"))
        assert rows == want and len(rows) == 3
        bw = db.execute("SELECT hccl_op_name, transport_type, package_size, count FROM CommAnalyzerBandwidth").fetchall()
        assert {(n, tr) for n, tr, _, _ in bw} == {(w[0], tr) for w in want for tr in ("HCCS", "SDMA")}
        assert all(size == 0 and n == 0 for _, tr, size, n in bw if tr == "SDMA")  # as the real export writes SDMA
        matrix = db.execute("SELECT hccl_op_name, src_rank, dst_rank, transport_type FROM CommAnalyzerMatrix "
                            "WHERE hccl_op_name = 'allreduce-total'").fetchall()
        # per step the links this rank sent (local ranks: the group is 0-3): its LOCAL copy and 3 HCCS peers
        assert sorted(matrix) == sorted(("allreduce-total", str(rank), str(d), "LOCAL" if d == rank else "HCCS")
                                        for d in range(4) for _ in comm)


def test_the_tables_have_the_real_exports_columns():
    """COMMUNICATION_OP and the analysis.db tables as the shared real export creates them."""
    from opsim.trace.ascend_comm_db import ANALYSIS_COMM_TABLES
    from opsim.trace.ascend_db_schema import PROFILER_DB_TABLES
    if not REAL_DB.is_file():
        pytest.skip("the shared real profiles are not here")
    real = sqlite3.connect(REAL_DB)
    cols = [r[1] for r in real.execute("PRAGMA table_info(COMMUNICATION_OP)")]
    assert cols == [c for c, _ in PROFILER_DB_TABLES["COMMUNICATION_OP"]]
    analysis = sqlite3.connect(REAL_DB.parent / "analysis.db")
    for table, columns in ANALYSIS_COMM_TABLES.items():
        assert [r[1] for r in analysis.execute(f"PRAGMA table_info({table})")] == [c for c, _ in columns]
    s = dict(real.execute("SELECT id, value FROM STRING_IDS"))
    # the real allreduce: FP32 (4) of 4,097,000 elements, MESH-RING on one 8-NPU server, relay and retry 0
    row = real.execute("SELECT dataType, algType, count, relay, retry FROM COMMUNICATION_OP WHERE opId = 1").fetchone()
    assert (row[0], s[row[1]], row[2], row[3], row[4]) == (hccl_data_type("float32"), "MESH-RING", 4097000, 0, 0)
    # its connectionId is a Node launch's, as opsim writes it
    (api,) = real.execute("SELECT type, name FROM CANN_API WHERE connectionId = "
                          "(SELECT connectionId FROM COMMUNICATION_OP WHERE opId = 1)").fetchall()
    assert (api[0], s[api[1]]) == (10000, "launch")


def test_data_and_algorithm_types():
    assert [hccl_data_type(d) for d in ("int8", "float16", "float", "bf16", "int64", "complex64", "nonsense")] == [
        0, 3, 4, 11, 5, 65534, 65534]
    hccs = ((0, 1, "HCCS", 8, 1.0),)
    rdma = hccs + ((0, 8, "RDMA", 8, 1.0),)
    assert [alg_type("mesh", hccs), alg_type("ring", hccs), alg_type("halving_doubling", rdma),
            alg_type("pairwise", rdma)] == ["MESH-RING", "RING-RING", "MESH-HD", "MESH-PAIRWISE"]


def test_a_single_rank_db_keeps_communication_op_empty(tmp_path):
    data = job(1, (1.0,), count=1)
    for key in ("cluster", "groups", "ranks"):
        data.pop(key)
    data["threads"][0]["program"][0]["loop"]["body"] = data["threads"][0]["program"][0]["loop"]["body"][:1]
    run_scenario(data, out_dir=tmp_path, profiler_output="db")
    (db_path,) = tmp_path.glob("dp_*_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db")
    db = sqlite3.connect(db_path)
    assert db.execute("SELECT count(*) FROM COMMUNICATION_OP").fetchone() == (0,)
    tables = {t for (t,) in sqlite3.connect(db_path.parent / "analysis.db").execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"StepTraceTime"}


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.floats(min_value=0.5, max_value=3.0), min_size=2, max_size=4), st.integers(1, 3))
def test_every_rank_joins_each_collective_to_exactly_one_launch(slowdowns, count):
    """Whatever the ranks' speeds and the step count: one COMMUNICATION_OP row per CollectiveRecord with its
    times, and each joins one Node launch in CANN_API and its one task (what slow_rank's query relies on)."""
    res = run_scenario(job(len(slowdowns), tuple(slowdowns), count=count), write=False)
    for rank, run in enumerate(res.ranks):
        p = build_profile(run.sim)
        rows = profiler_db_rows(p, rank, run.rank.collectives)
        recs = sorted(run.rank.collectives, key=lambda c: c.start_us)
        ops = rows["COMMUNICATION_OP"]
        assert [(o[1], o[2], o[12]) for o in ops] == [
            (EPOCH_NS + to_ns(c.start_us), EPOCH_NS + to_ns(c.end_us), to_ns(c.wait_us)) for c in recs]
        for op in ops:
            assert [r[2] for r in rows["CANN_API"] if r[4] == op[3]] == [10000]
            assert len([t for t in rows["TASK"] if t[3] == op[3]]) == 1
