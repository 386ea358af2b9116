"""The profiler output has the real torch_npu export's layout: the db's tables and columns, and the memory CSVs'
headers, diffed against the schema of a real export (tests/data/real_profile_schema: CREATE statements and
header lines copied from ../shared/real-profiles/alexnet-910b, no data), and against that export itself when
it is present."""
from __future__ import annotations

import csv
import re
import sqlite3
from pathlib import Path

import pytest

from opsim.scenario.runner import run_scenario
from opsim.trace.ascend_db_schema import PROFILER_DB_TABLES

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "tests" / "data" / "real_profile_schema"
REAL = ROOT.parent / "shared" / "real-profiles" / "alexnet-910b"
REAL_DB = REAL / "db/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"
REAL_TEXT = REAL / "text/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT"
EXTRA_COLUMNS = {"COMPUTE_TASK_INFO": {"opState", "hf32Eligible"}}
"""Columns opsim writes beyond the real export (see opsim/trace/ascend_db_schema.py)."""
MEMORY_CSVS = ("memory_record.csv", "operator_memory.csv", "npu_module_mem.csv")


def _columns(conn: sqlite3.Connection) -> dict[str, set[str]]:
    names = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return {n: {row[1] for row in conn.execute(f"PRAGMA table_info({n})")} for n in names}


def _schema_columns() -> dict[str, set[str]]:
    conn = sqlite3.connect(":memory:")
    conn.executescript("\n".join(line for line in (SCHEMA / "ascend_pytorch_profiler_0.db.sql").read_text()
                                 .splitlines() if not line.startswith("--")))
    return _columns(conn)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("prof")
    run_scenario(ROOT / "scenarios" / "quickstart.yaml", out_dir=out, profiler_output="both")
    return next(out.glob("*_ascend_pt")) / "ASCEND_PROFILER_OUTPUT"


def _diff(ours: dict[str, set[str]], real: dict[str, set[str]]) -> list[str]:
    problems = [f"table {t} missing" for t in sorted(set(real) - set(ours))]
    problems += [f"table {t} not in the real export" for t in sorted(set(ours) - set(real))]
    for t in sorted(set(real) & set(ours)):
        if real[t] - ours[t]:
            problems.append(f"{t}: columns missing {sorted(real[t] - ours[t])}")
        if ours[t] - real[t] - EXTRA_COLUMNS.get(t, set()):
            problems.append(f"{t}: extra columns {sorted(ours[t] - real[t])}")
    return problems


def test_db_tables_and_columns_match_the_real_schema(written):
    ours = _columns(sqlite3.connect(written / "ascend_pytorch_profiler_0.db"))
    assert _diff(ours, _schema_columns()) == []
    assert {t: {c for c, _ in cols} for t, cols in PROFILER_DB_TABLES.items()} == \
        {t: c for t, c in ours.items() if t != "sqlite_sequence"}


@pytest.mark.skipif(not REAL_DB.is_file(), reason="the shared real profiles are not checked out")
def test_schema_copy_is_the_real_export():
    assert _columns(sqlite3.connect(f"file:{REAL_DB}?mode=ro", uri=True)) == _schema_columns()
    for name in MEMORY_CSVS:
        with open(REAL_TEXT / name, newline="", encoding="utf-8-sig") as f:
            assert next(csv.reader(f)) == _real_header(name)


def _real_header(name: str) -> list[str]:
    for line in (SCHEMA / "text_headers.csv").read_text().splitlines():
        if line.startswith(name + "|"):
            return line.split("|", 1)[1].split(",")
    raise AssertionError(f"no header for {name}")


@pytest.mark.parametrize("name", MEMORY_CSVS)
def test_memory_csvs_have_the_real_columns_and_the_allocator_figures(written, name):
    with open(written / name, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == _real_header(name)
    assert len(rows) > 1
    ts = rows[0].index("Allocation Time(us)" if name == "operator_memory.csv" else "Timestamp(us)")
    for row in rows[1:]:
        assert re.fullmatch(r"\d+\.\d{3}\t", row[ts])  # epoch microseconds with torch_npu's trailing tab


def test_memory_tables_follow_the_allocator(written):
    conn = sqlite3.connect(written / "ascend_pytorch_profiler_0.db")
    sizes = [s for (s,) in conn.execute("SELECT size FROM OP_MEMORY")]
    totals = [t for (t,) in conn.execute("SELECT totalAllocated FROM MEMORY_RECORD ORDER BY rowid")]
    assert sizes and totals and totals[-1] == 0  # quickstart frees everything it allocates
    assert max(totals) <= sum(sizes)
    released = conn.execute("SELECT COUNT(*) FROM OP_MEMORY WHERE releaseTime - allocationTime != duration").fetchone()
    assert released == (0,)
    assert conn.execute("SELECT id, name FROM NPU_INFO").fetchall() == [(0, "Ascend910B2")]
    depth = dict(conn.execute("SELECT depth, COUNT(*) FROM PYTORCH_API GROUP BY depth").fetchall())
    assert depth[0] > 0 and depth[1] > 0  # calls nest in their ProfilerStep
