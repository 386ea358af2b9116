"""Profiler databases for tests: a copy to damage, and SQL run on it (tests/ingest, tests/importer)."""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path


def copy_db(src: Path, into: Path) -> Path:
    """`src` copied into the directory `into` under the name torch_npu gives rank 0's database."""
    p = into / "ascend_pytorch_profiler_0.db"
    shutil.copy(src, p)
    return p


def run_sql(p: Path, *statements: str) -> Path:
    """Each statement run on the database `p`, committed; returns `p`."""
    con = sqlite3.connect(p)
    for s in statements:
        con.execute(s)
    con.commit()
    con.close()
    return p
