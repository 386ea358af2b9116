"""`opsim import` of torch_npu's SQLite export (ascend_pytorch_profiler_N.db): the same intermediate form as the
text export (opsim.ingest.db_view builds the TraceView), the same calls, and every kind of damage refused in one
line naming the file and the table or field."""
from __future__ import annotations

import io
import os
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from db_helpers import copy_db, run_sql

from opsim.cli import EXIT_BAD_INPUT, main
from opsim.importer import import_profile
from opsim.ingest import read_trace_view
from opsim.ingest.db_view import read_db_view

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
DB = REAL / "ascend_pytorch_profiler_alexnet_rank0_import.db"
"""Every row of the import's tables of the shared AlexNet db export, rank 0 (tests/data/real/README.md)."""
TEXT = REAL / "alexnet_910b_rank0" / "trace_view.json"
"""The text export of the same script and rank (a separate run of it)."""


@pytest.fixture(scope="module")
def db_import():
    return import_profile(DB, calibration=False)


@pytest.fixture(scope="module")
def text_import():
    return import_profile(TEXT, calibration=False)


def _per_api(view) -> Counter:
    return Counter((a.api, a.kind) for a in view.acl_api_events())


def test_db_view_is_the_text_exports_form():
    """The same AscendCL events per (API, phase) as the text export of the script (the runs differ only in how
    often one poll, aclrtQueryEventStatus, ran), the same processes, and device rows named alike."""
    db, text = read_db_view(DB), read_trace_view(TEXT)
    a, b = _per_api(db), _per_api(text)
    poll = ("aclrtQueryEventStatus", "runtime")
    assert {k: v for k, v in a.items() if k != poll} == {k: v for k, v in b.items() if k != poll}
    names = lambda v: Counter(e.name for e in v.device_kernels() if not e.name.startswith(("aclnn", "trans_")))
    for name in ("EVENT_RECORD", "EVENT_WAIT", "Notify Wait", "Write Value", "SDMA", "PROFILING_ENABLE"):
        assert names(db)[name] == names(text)[name], name
    assert db.skipped == {next(iter(db.skipped)): 4}  # the four allreduces' own tasks


def test_db_import_gives_the_text_imports_scenario_shape(db_import, text_import):
    """Every call and device task placed, nothing dropped; the same calls, phase 1s, threads, steps, profiled
    ops and device tasks by kind as the text export's import."""
    f, g = db_import.report.figures, text_import.report.figures
    for key in ("calls", "phase1", "threads", "steps", "profiled_ops", "task_queue"):
        assert f[key] == g[key], key
    for kind in ("communication", "record", "wait"):
        assert f["device_tasks"][kind] == g["device_tasks"][kind], kind
    assert db_import.report.warnings == {}
    con = sqlite3.connect(DB)
    tasks = con.execute("SELECT COUNT(*) FROM TASK").fetchone()[0]
    con.close()
    assert f["kernels"] + sum(f["device_tasks"].values()) + 4 == tasks
    assert f["kernel_details_joined"] == 187  # every COMPUTE_TASK_INFO row


def test_db_import_calls_each_api_as_often_as_the_text_import(db_import, text_import, op_steps):
    """The profiled calls (the warm-up that primes the caches, which follows each run's own variants, is a
    thread's `warmup`, outside its program)."""
    def ops(res):
        counts: Counter = Counter()
        for th in res.scenario["threads"]:
            counts.update(s["op"] for s in op_steps(th["program"]))
        return counts
    assert ops(db_import) == ops(text_import) and sum(ops(db_import).values()) == 121


def test_cli_imports_the_db_and_its_directory(tmp_path):
    d = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    d.mkdir(parents=True)
    shutil.copy(DB, d / "ascend_pytorch_profiler_0.db")
    for n, target in enumerate((d.parent, d / "ascend_pytorch_profiler_0.db")):
        out = io.StringIO()
        code = main(["import", str(target), "-o", str(tmp_path / f"s{n}.yaml")], stdout=out, stderr=io.StringIO())
        assert code == 0 and "imported 121 calls" in out.getvalue()
    assert (tmp_path / "s0.yaml").read_text().split("\n", 3)[3] == (tmp_path / "s1.yaml").read_text().split(
        "\n", 3)[3].replace("s1.calibration", "s0.calibration")


def test_cli_calibrates_the_db_through_the_kernel_rows(tmp_path):
    out = io.StringIO()
    code = main(["calibrate", str(DB), "-o", str(tmp_path / "c.yaml")], stdout=out, stderr=io.StringIO())
    assert code == 0 and "op-type fit" in out.getvalue() and "host API" in out.getvalue()


# ---- damage: exit 2, one line, naming the file and the table or field ----


def _refused(tmp_path: Path, p: Path, *needles: str) -> str:
    err = io.StringIO()
    code = main(["import", str(p), "-o", str(tmp_path / "out.yaml")], stdout=io.StringIO(), stderr=err)
    text = err.getvalue()
    assert code == EXIT_BAD_INPUT and len(text.strip().splitlines()) == 1 and "Traceback" not in text, text
    for n in needles:
        assert n in text, (n, text)
    assert not (tmp_path / "out.yaml").exists()
    return text


def test_not_sqlite(tmp_path):
    p = tmp_path / "ascend_pytorch_profiler_0.db"
    p.write_text("Step,Computing\n1,2\n" * 20)
    _refused(tmp_path, p, str(p), "not an SQLite database")


def test_truncated(tmp_path):
    p = tmp_path / "ascend_pytorch_profiler_0.db"
    p.write_bytes(DB.read_bytes()[: DB.stat().st_size // 3])
    _refused(tmp_path, p, str(p), "table ")


def test_fifo_in_place_of_the_db(tmp_path):
    """A FIFO where the profile's db belongs is refused at once (never opened for reading, so never blocks)."""
    d = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    d.mkdir(parents=True)
    os.mkfifo(d / "ascend_pytorch_profiler_0.db")
    _refused(tmp_path, d.parent, "ascend_pytorch_profiler_0.db", "not a regular file")
    _refused(tmp_path, d / "ascend_pytorch_profiler_0.db", "ascend_pytorch_profiler_0.db")


@pytest.mark.parametrize("table", ["CANN_API", "TASK", "STRING_IDS"])
def test_missing_table(tmp_path, table):
    _refused(tmp_path, run_sql(copy_db(DB, tmp_path), f"DROP TABLE {table}"), f"table {table}: missing")


@pytest.mark.parametrize("table, column", [("TASK", "streamId"), ("CANN_API", "globalTid"),
                                           ("PYTORCH_API", "type"), ("COMMUNICATION_OP", "startNs")])
def test_missing_column(tmp_path, table, column):
    _refused(tmp_path, run_sql(copy_db(DB, tmp_path), f"ALTER TABLE {table} DROP COLUMN {column}"),
             f"table {table}, column '{column}': missing")


def _third_row(p: Path, table: str) -> int:
    """The rowid of a table's third row (CANN_API's rowid is its connectionId, not its position)."""
    con = sqlite3.connect(p)
    row = con.execute(f"SELECT rowid FROM {table} ORDER BY rowid LIMIT 1 OFFSET 2").fetchone()[0]
    con.close()
    return row


@pytest.mark.parametrize("table, column, value, what", [
    ("PYTORCH_API", "startNs", "'soon'", "not an integer"),
    ("CANN_API", "globalTid", "x'00ff'", "not an integer (got a bytes"),
    ("CANN_API", "endNs", "1", "ends before it starts"),
    ("TASK", "streamId", "2.5", "not a finite integer"),
    ("TASK", "connectionId", "1e30", "not a finite integer below 1e+20"),
    ("TASK", "startNs", "'9" + "9" * 400 + "'", "not a finite integer below 1e+20"),
    ("COMMUNICATION_OP", "count", "'many'", "not an integer"),
])
def test_wrong_types_and_huge_values(tmp_path, table, column, value, what):
    p = copy_db(DB, tmp_path)
    r = _third_row(p, table)
    run_sql(p, f"UPDATE {table} SET {column} = {value} WHERE rowid = {r}")
    _refused(tmp_path, p, str(p), f"table {table}, row {r}, column '{column}': {what}")


def test_negative_thread_id(tmp_path):
    p = copy_db(DB, tmp_path)
    r = _third_row(p, "CANN_API")
    run_sql(p, f"UPDATE CANN_API SET globalTid = -5 WHERE rowid = {r}")
    _refused(tmp_path, p, f"table CANN_API, row {r}, column 'globalTid': not a thread id")


def test_nul_in_a_name(tmp_path):
    p = copy_db(DB, tmp_path)
    r = _third_row(p, "CANN_API")
    run_sql(p, "UPDATE STRING_IDS SET value = 'aclnn' || char(0) || 'Add' "
            f"WHERE id = (SELECT name FROM CANN_API WHERE rowid = {r})")
    _refused(tmp_path, p, "table CANN_API, row ", "column 'name': a name with a NUL byte")


def test_no_host_calls(tmp_path):
    """A db without AscendCL calls (profiler level 0) is refused naming what to profile."""
    p = run_sql(copy_db(DB, tmp_path), "DELETE FROM CANN_API")
    _refused(tmp_path, p, "no ACLNN or aclop call found", "Level1")


_CELLS = [("PYTORCH_API", "startNs"), ("PYTORCH_API", "globalTid"), ("PYTORCH_API", "connectionId"),
          ("PYTORCH_API", "type"), ("CANN_API", "startNs"), ("CANN_API", "endNs"), ("CANN_API", "type"),
          ("CANN_API", "globalTid"), ("CANN_API", "name"), ("TASK", "startNs"), ("TASK", "streamId"),
          ("TASK", "taskId"), ("TASK", "connectionId"), ("TASK", "taskType"), ("TASK", "globalTaskId"),
          ("COMPUTE_TASK_INFO", "name"), ("COMPUTE_TASK_INFO", "taskType"), ("CONNECTION_IDS", "connectionId"),
          ("COMMUNICATION_OP", "count"), ("COMMUNICATION_OP", "opName"), ("STRING_IDS", "value")]


def test_any_damaged_cell_imports_or_is_refused_as_bad_input(tmp_path_factory):
    """Invariant: whatever one cell of the db holds (text, blob, huge or negative number, NaN, NUL), the import
    either succeeds or raises a ProfileFormatError (exit 2, one line) - never another exception."""
    from hypothesis import HealthCheck, given, settings, strategies as st

    from opsim.errors import OpsimError
    values = st.one_of(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1), st.floats(allow_nan=True),
                       st.text(max_size=20), st.binary(max_size=8), st.none(), st.just("a\x00b"))

    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cell=st.sampled_from(_CELLS), value=values, row=st.integers(0, 30))
    def check(cell, value, row):
        p = copy_db(DB, tmp_path_factory.mktemp("cell"))
        table, column = cell
        con = sqlite3.connect(p)
        r = con.execute(f"SELECT rowid FROM {table} ORDER BY rowid LIMIT 1 OFFSET ?", (row,)).fetchone()
        if r is not None:
            con.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?", (value, r[0]))
        con.commit()
        con.close()
        try:
            import_profile(p, calibration=False)
        except OpsimError as exc:
            assert str(p) in str(exc) and "\n" not in str(exc).strip()
    check()


def test_a_folder_of_db_rank_exports_imports_each_rank(tmp_path):
    """Rank folders holding db exports import one by one (a job import of them, one multi-rank scenario, needs
    the text export's communication files)."""
    for r in (0, 1):
        d = tmp_path / "job" / f"rank{r}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        d.mkdir(parents=True)
        shutil.copy(DB, d / f"ascend_pytorch_profiler_{r}.db")
    out = io.StringIO()
    code = main(["import", str(tmp_path / "job"), "-o", str(tmp_path / "s.yaml")], stdout=out, stderr=io.StringIO())
    assert code == 0 and out.getvalue().count("imported 121 calls") == 2
    assert (tmp_path / "s_rank0_ascend_pt.yaml").exists() and (tmp_path / "s_rank1_ascend_pt.yaml").exists()


ANALYSIS = REAL / "analysis_alexnet_rank0.db"


def test_analysis_db_gives_the_communication_json_records():
    """analysis.db's CommAnalyzer tables read as communication.json's: the four allreduces of rank 0 with their
    transit, wait and idle times, and the 8-rank group of the matrix."""
    from opsim.calibration.comm_db import read_communication_db, read_groups_db
    ops = read_communication_db(ANALYSIS)
    assert [o.name for o in ops] == [f"hcom_allReduce__210_{i}_1" for i in range(4)]
    assert ops[0].transit_us == pytest.approx(228.5646) and ops[0].wait_us == pytest.approx(3568.8913)
    assert set(ops[0].transports) == {"HCCS"} and ops[0].transports["HCCS"].size_mb == pytest.approx(28.647232)
    assert read_groups_db(ANALYSIS) == {"17148521525495523210": set(range(8))}


@pytest.mark.parametrize("statement, needle", [
    ("UPDATE CommAnalyzerTime SET wait_time = 'long' WHERE rowid = 2", "table CommAnalyzerTime, row 2, column 'wait_time'"),
    ("UPDATE CommAnalyzerTime SET idle_time = -1 WHERE rowid = 2", "table CommAnalyzerTime, row 2, column 'idle_time'"),
    ("UPDATE CommAnalyzerBandwidth SET transit_size = 1e300 WHERE rowid = 2",
     "table CommAnalyzerBandwidth, row 2, column 'transit_size'"),
    ("UPDATE CommAnalyzerMatrix SET src_rank = 'x' WHERE rowid = 2", "table CommAnalyzerMatrix, row 2, column 'src_rank'"),
    ("UPDATE CommAnalyzerTime SET hccl_op_name = 'a' || char(0) WHERE rowid = 2", "column 'hccl_op_name'"),
    ("DROP TABLE CommAnalyzerMatrix", "table CommAnalyzerMatrix: missing"),
])
def test_a_damaged_analysis_db_stops_a_job_import_in_one_line(tmp_path, statement, needle):
    """A job folder of db exports (each rank's profiler db and analysis.db) imports as one scenario; a damaged
    analysis.db is refused naming the file, table, row and column."""
    for r in (0, 1):
        d = tmp_path / "job" / f"rank{r}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        d.mkdir(parents=True)
        shutil.copy(DB, d / f"ascend_pytorch_profiler_{r}.db")
        shutil.copy(ANALYSIS, d / "analysis.db")
    run_sql(tmp_path / "job" / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "analysis.db", statement)
    _refused(tmp_path, tmp_path / "job", "rank1_ascend_pt", "analysis.db", needle)


def test_a_job_folder_of_db_exports_is_one_scenario(tmp_path):
    for r in (0, 1):
        d = tmp_path / "job" / f"rank{r}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        d.mkdir(parents=True)
        shutil.copy(DB, d / f"ascend_pytorch_profiler_{r}.db")
        shutil.copy(ANALYSIS, d / "analysis.db")
    out = io.StringIO()
    code = main(["import", str(tmp_path / "job"), "-o", str(tmp_path / "job.yaml")], stdout=out, stderr=io.StringIO())
    assert code == 0 and "job: 2 observed rank(s) [0, 1] of 8; groups: world (8 ranks)" in out.getvalue()
    assert "4 collective" in out.getvalue()
