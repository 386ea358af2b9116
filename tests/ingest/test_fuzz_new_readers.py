"""Fuzz: arbitrary damage to a db export or an api_statistic.csv never raises anything but ProfileFormatError,
through the readers and what calibration does with their records."""
from __future__ import annotations

import csv
import io
import shutil
import sqlite3
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opsim.calibration import fit_device
from opsim.calibration.host import HostCalls, host_table, host_table_from_statistics
from opsim.errors import ProfileFormatError
from opsim.ingest import iter_api_statistic, iter_db_api_events, iter_db_kernels

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
DB = REAL / "ascend_pytorch_profiler_alexnet_rank0_excerpt.db"
STATS = list(csv.reader(io.StringIO((REAL / "api_statistic_alexnet_rank0.csv").read_text())))
FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

VALUE = st.one_of(st.none(), st.integers(-2 ** 63, 2 ** 63 - 1), st.floats(allow_nan=True), st.text(max_size=20),
                  st.binary(max_size=8), st.sampled_from(["N/A", '"4,x"', "1e400", "DT_BF16;", "", "\x00", "HCCL"]))
TARGET = st.sampled_from([("TASK", "startNs"), ("TASK", "endNs"), ("TASK", "streamId"), ("TASK", "globalTaskId"),
                          ("COMPUTE_TASK_INFO", "blockDim"), ("COMPUTE_TASK_INFO", "opType"),
                          ("COMPUTE_TASK_INFO", "inputShapes"), ("COMPUTE_TASK_INFO", "waitNs"),
                          ("STRING_IDS", "value"), ("STRING_IDS", "id"), ("CANN_API", "startNs"),
                          ("CANN_API", "name"), ("CANN_API", "type"), ("ENUM_API_TYPE", "id")])


@FUZZ
@given(st.lists(st.tuples(TARGET, st.integers(1, 40), VALUE), min_size=1, max_size=5))
def test_db_mutations_raise_only_profile_format_error(tmp_path_factory, edits):
    p = tmp_path_factory.mktemp("db") / "ascend_pytorch_profiler_0.db"
    shutil.copy(DB, p)
    con = sqlite3.connect(p)
    for (table, column), rowid, value in edits:
        con.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?", (value, rowid))
    con.commit()
    con.close()
    try:
        rows = list(iter_db_kernels(p))
        events = list(iter_db_api_events(p))
    except ProfileFormatError:
        return
    fit_device(rows)
    host_table(HostCalls(p, events))


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(STATS) - 1), st.integers(0, len(STATS[0]) - 1),
                          st.one_of(st.text(max_size=20), st.sampled_from(["NaN", "-1", "1e400", "9" * 300, "N/A",
                                                                           '"', "aclnnX", "\t"]))),
                min_size=1, max_size=6), st.sampled_from(["\n", "\r\n"]))
def test_api_statistic_mutations_raise_only_profile_format_error(tmp_path_factory, edits, newline):
    rows = [list(r) for r in STATS]
    for r, c, value in edits:
        rows[r][c] = value
    buf = io.StringIO()
    csv.writer(buf, lineterminator=newline).writerows(rows)
    p = tmp_path_factory.mktemp("a") / "api_statistic.csv"
    p.write_bytes(buf.getvalue().encode("utf-8", "surrogatepass"))
    try:
        got = list(iter_api_statistic(p))
    except ProfileFormatError:
        return
    host_table_from_statistics(got)
