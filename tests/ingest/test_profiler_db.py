"""The SQLite export reader (ascend_pytorch_profiler_*.db): real rows, the same records as kernel_details.csv,
and every kind of damage refused naming the file, the table, the row and the column."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from db_helpers import copy_db, run_sql

from opsim.cli import EXIT_BAD_INPUT, main
from opsim.errors import ProfileFormatError
from opsim.ingest import iter_db_api_events, iter_db_kernels, read_kernels

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
DB = REAL / "ascend_pytorch_profiler_alexnet_rank0_excerpt.db"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "real-profiles" / "alexnet-910b"


def test_real_excerpt_kernels():
    skipped: dict[str, int] = {}
    rows = list(iter_db_kernels(DB, skipped))
    assert len(rows) == 35 and skipped == {}
    conv = next(r for r in rows if r.op_type == "Conv2D")
    assert conv.core == "AI_CORE" and conv.block_dim == 16 and conv.name == "Conv2D1"
    assert conv.input_shapes == ((32, 1, 224, 224, 8), (121, 4, 16, 8), (64,))
    assert conv.input_dtypes == ("float", "float", "float") and conv.input_formats == ("NC1HWC0", "FRACTAL_Z", "NCHW")
    assert conv.start_ns == 1736410576404719328 and conv.duration_us == pytest.approx(314.667)
    assert conv.wait_us == pytest.approx(93.102) and conv.stream_id == 2 and conv.task_id == 11065


def test_real_excerpt_host_calls():
    events = list(iter_db_api_events(DB))
    assert len(events) == 94  # the 120 CANN_API rows less node / hccl / runtime types
    p2 = [e for e in events if e.kind == "phase2"]
    assert {e.api for e in p2} >= {"aclnnInplaceRelu", "aclnnMaxPool2dWithMask"}
    relu = next(e for e in p2 if e.api == "aclnnInplaceRelu")
    assert relu.event.name == "AscendCL@aclnnInplaceRelu" and relu.event.dur > 0


@pytest.mark.skipif(not SHARED.is_dir(), reason="the shared real profiles are not next to this tree")
def test_db_export_gives_the_kernel_details_rows_of_the_text_export():
    """The same run is not exported twice, but a db and a text export of one script agree on the kernels."""
    db = next((SHARED / "db" / "level1" / "rank0_ascend_pt").rglob("ascend_pytorch_profiler_0.db"))
    text = SHARED / "text" / "level1" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    from_db = list(iter_db_kernels(db))
    from_csv = read_kernels(text).rows
    key = lambda r: (r.op_type, r.core, r.input_shapes, r.output_shapes, r.input_dtypes, r.block_dim)  # noqa: E731
    assert sorted(map(key, from_db)) == sorted(map(key, from_csv))


def _refused(p, match: str):
    with pytest.raises(ProfileFormatError, match=match) as info:
        list(iter_db_kernels(p))
        list(iter_db_api_events(p))
    assert "\n" not in str(info.value)
    return str(info.value)


def test_not_a_db(tmp_path):
    p = tmp_path / "x.db"
    p.write_text("startNs,endNs\n1,2\n")
    _refused(p, r"x\.db: not an SQLite database")


def test_empty_and_truncated_header(tmp_path):
    p = tmp_path / "x.db"
    p.write_bytes(b"")
    _refused(p, "not an SQLite database")
    p.write_bytes(DB.read_bytes()[:50])
    _refused(p, "not an SQLite database")


def test_truncated_db(tmp_path):
    p = tmp_path / "t.db"
    p.write_bytes(DB.read_bytes()[: DB.stat().st_size // 3])
    msg = _refused(p, r"t\.db: table \w+")
    assert "truncated or damaged" in msg or "missing" in msg


def test_damaged_pages(tmp_path):
    data = bytearray(DB.read_bytes())
    for i in range(4096, len(data), 7):  # every page after the first scribbled on
        data[i] = 0xFF
    p = tmp_path / "d.db"
    p.write_bytes(bytes(data))
    _refused(p, r"d\.db: table \w+")


def test_dev_zero_fifo_directory_and_nul_path(tmp_path):
    import os
    import stat
    if stat.S_ISCHR(os.stat("/dev/zero").st_mode):  # (a shared machine may have had it replaced by a file)
        _refused(Path("/dev/zero"), r"/dev/zero: not a regular file")
    os.mkfifo(tmp_path / "fifo.db")
    _refused(tmp_path / "fifo.db", r"fifo\.db: not a regular file")
    _refused(tmp_path, "is a directory")
    _refused(Path(str(tmp_path / "a\x00b.db")), "NUL byte")
    _refused(tmp_path / "missing.db", "no such file")


@pytest.mark.parametrize("table", ["TASK", "COMPUTE_TASK_INFO", "STRING_IDS"])
def test_missing_table(tmp_path, table):
    p = run_sql(copy_db(DB, tmp_path), f"DROP TABLE {table}")
    _refused(p, f"table {table}: missing")


@pytest.mark.parametrize("table, column", [("TASK", "startNs"), ("COMPUTE_TASK_INFO", "opType"),
                                           ("STRING_IDS", "value"), ("CANN_API", "name")])
def test_missing_column(tmp_path, table, column):
    p = run_sql(copy_db(DB, tmp_path), f"ALTER TABLE {table} DROP COLUMN {column}")
    _refused(p, f"table {table}, column '{column}': missing")


@pytest.mark.parametrize("table, column, value, what", [
    ("TASK", "startNs", "'soon'", "not an integer"),
    ("TASK", "endNs", "1.5", "not a finite integer"),
    ("TASK", "streamId", "x'00ff'", "not an integer \\(got a bytes"),
    ("TASK", "startNs", "1e300", "not a finite integer below 1e\\+20"),
    ("TASK", "taskId", "'9" + "9" * 400 + "'", "not a finite integer below 1e\\+20"),
    ("COMPUTE_TASK_INFO", "blockDim", "'lots'", "not an integer"),
    ("COMPUTE_TASK_INFO", "waitNs", "'nan'", "not a finite integer"),
])
def test_wrong_types_name_table_row_and_column(tmp_path, table, column, value, what):
    p = run_sql(copy_db(DB, tmp_path), f"UPDATE {table} SET {column} = {value} WHERE rowid = 5")
    msg = _refused(p, f"table {table}, row 5, column '{column}': {what}")
    assert str(p) in msg


def test_bad_shape_string_names_the_column(tmp_path):
    p = run_sql(copy_db(DB, tmp_path), "UPDATE STRING_IDS SET value = '\"3,x\"' WHERE id = "
                              "(SELECT inputShapes FROM COMPUTE_TASK_INFO WHERE globalTaskId = 3)")
    _refused(p, r"table COMPUTE_TASK_INFO, row \d+, column 'inputShapes'")


def test_blob_string_and_backwards_api_call(tmp_path):
    p = run_sql(copy_db(DB, tmp_path), "UPDATE STRING_IDS SET value = x'ff00' WHERE id = "
                              "(SELECT opType FROM COMPUTE_TASK_INFO WHERE globalTaskId = 3)")
    _refused(p, r"table STRING_IDS, row \d+, column 'value': not text")
    (tmp_path / "q").mkdir()
    q = run_sql(copy_db(DB, tmp_path / "q"), "UPDATE CANN_API SET endNs = startNs - 1 WHERE rowid = 3")
    with pytest.raises(ProfileFormatError, match=r"table CANN_API, row 3, column 'endNs': ends before it starts"):
        list(iter_db_api_events(q))


def test_nulls_are_missing_values_not_errors(tmp_path):
    p = run_sql(copy_db(DB, tmp_path), "UPDATE TASK SET endNs = NULL, streamId = NULL WHERE rowid = 5",
             "UPDATE COMPUTE_TASK_INFO SET blockDim = NULL, waitNs = NULL",
             "UPDATE COMPUTE_TASK_INFO SET opType = NULL WHERE globalTaskId = 6",
             "UPDATE COMPUTE_TASK_INFO SET inputShapes = NULL, outputShapes = NULL WHERE globalTaskId = 7",
             "UPDATE CANN_API SET name = NULL WHERE rowid = 2", "UPDATE CANN_API SET startNs = NULL WHERE rowid = 4")
    skipped: dict[str, int] = {}
    rows = list(iter_db_kernels(p, skipped))
    assert skipped == {"no op type or accelerator core": 1, "no shapes": 1} and len(rows) == 33
    r5 = next(r for r in rows if r.row == 5)
    assert r5.duration_us is None and r5.stream_id is None and r5.block_dim == 0 and r5.wait_us is None
    api_skipped: dict[str, int] = {}
    assert len(list(iter_db_api_events(p, api_skipped))) <= 94
    assert sum(api_skipped.values()) >= 1


def test_string_id_not_in_string_ids_is_a_missing_string(tmp_path):
    p = run_sql(copy_db(DB, tmp_path), "UPDATE COMPUTE_TASK_INFO SET taskType = 999999 WHERE globalTaskId = 3")
    skipped: dict[str, int] = {}
    assert len(list(iter_db_kernels(p, skipped))) == 34 and skipped == {"no op type or accelerator core": 1}


def test_level0_db_without_tensor_columns(tmp_path):
    p = run_sql(copy_db(DB, tmp_path), *(f"ALTER TABLE COMPUTE_TASK_INFO DROP COLUMN {c}" for c in
                                ("inputShapes", "inputDataTypes", "outputShapes", "outputDataTypes")))
    rows = list(iter_db_kernels(p))
    assert len(rows) == 35 and all(r.input_shapes == () and r.input_dtypes == () for r in rows)


def test_cli_calibrate_refuses_a_bad_db_in_one_line(tmp_path):
    import io
    bad = run_sql(copy_db(DB, tmp_path), "UPDATE TASK SET startNs = 'soon' WHERE rowid = 5")
    out, err = io.StringIO(), io.StringIO()
    code = main(["calibrate", str(bad), "-o", str(tmp_path / "c.yaml")], stdout=out, stderr=err)
    assert code == EXIT_BAD_INPUT and err.getvalue().count("\n") == 1
    assert "table TASK, row 5, column 'startNs'" in err.getvalue() and not (tmp_path / "c.yaml").exists()


def _big_db(path: Path, n: int) -> Path:
    """n kernels (TASK + COMPUTE_TASK_INFO rows sharing a handful of strings)."""
    con = sqlite3.connect(path)
    con.executescript(
        "CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT);"
        "CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, globalTaskId INTEGER, streamId INTEGER, taskId INTEGER);"
        "CREATE TABLE COMPUTE_TASK_INFO (name INTEGER, globalTaskId INTEGER PRIMARY KEY, blockDim INTEGER,"
        " taskType INTEGER, opType INTEGER, inputShapes INTEGER, inputDataTypes INTEGER, outputShapes INTEGER,"
        " outputDataTypes INTEGER);"
        "INSERT INTO STRING_IDS VALUES (1, 'Add'), (2, 'AI_VECTOR_CORE'), (3, '\"4096;4096\"'), (4, 'FLOAT16'),"
        " (5, '\"4096\"');")
    con.execute("WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
                "INSERT INTO TASK SELECT 1000 * i, 1000 * i + 700, i, 1, i FROM n", (n - 1,))
    con.execute("INSERT INTO COMPUTE_TASK_INFO SELECT 1, globalTaskId, 8, 2, 1, 3, 4, 5, 4 FROM TASK")
    con.commit()
    con.close()
    return path


def test_streams_in_bounded_memory(tmp_path):
    """Peak Python memory while reading does not grow with the rows (2k vs 20k rows: the same bound).
    benchmarks/readers.py measures 10x and 100x more rows."""
    import tracemalloc
    peaks = []
    for n in (2_000, 20_000):
        p = _big_db(tmp_path / f"big{n}.db", n)
        tracemalloc.start()
        count = sum(1 for _ in iter_db_kernels(p))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert count == n
    assert peaks[1] < 2 * peaks[0] + (1 << 20), peaks
