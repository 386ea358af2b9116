"""`opsim predict` on torch_npu's host API table: api_statistic.csv in, the same rows out plus
``Predicted Avg(us)`` for every ACLNN row (``aclnnXxx``: phase 2 over all calls, hits and misses together, as
the table averages them; ``aclnnXxxGetWorkspaceSize``: phase 1). Other rows get an empty cell.

The prediction is a calibration's measured median for the API when it has one, else the default host model
(``opsim.device.host_model``: the API, its family, or all APIs). Rows are written back byte for byte.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from opsim.device.fitted import FittedTiming
from opsim.device.host_model import HostModel, default_host_model
from opsim.ingest.api_statistic import ApiStatistic, read_api_statistic
from opsim.outputs import write_text_atomic

PREDICTED_AVG_COLUMN = "Predicted Avg(us)"


def is_api_statistic(path: str | Path) -> bool:
    """Whether `path` is an api_statistic.csv: by its name, else by an ``API Name`` column in its first line."""
    p = Path(path)
    if p.name.lower().startswith("api_statistic"):
        return True
    try:
        if not stat.S_ISREG(os.stat(p).st_mode):  # a FIFO would block; the kernel reader names the problem
            return False
        with open(p, "rb") as f:
            head = f.readline(4096)
    except (OSError, ValueError):
        return False
    return b"API Name" in head and b"Avg(us)" in head


def predict_statistic(row: ApiStatistic, fitted: FittedTiming | None = None,
                      model: HostModel | None = None) -> float | None:
    """Predicted mean host time (us) of one api_statistic row, None for rows that are not ACLNN calls."""
    if not row.is_aclnn:
        return None
    measured = fitted.host_api(row.api) if fitted is not None else None
    if measured is not None:
        got = measured.phase1_us() if row.kind == "phase1" else measured.phase2_us()
        if got is not None:
            return got
    model = model if model is not None else default_host_model()
    got = model.predict(row.api, "phase1" if row.kind == "phase1" else "phase2")
    return got[0] if got is not None else None


def predict_api_statistic(path: str | Path, out: str | Path, fitted: FittedTiming | None = None) -> tuple[Path, int]:
    """Write `path`'s rows with the prediction appended; (written file, ACLNN rows predicted)."""
    records, rows = read_api_statistic(path)
    newline = "\r\n" if records[0].raw and _crlf(path) else "\n"
    lines = [f"{records[0].raw},{PREDICTED_AVG_COLUMN}"]
    n = 0
    for rec, row in zip(records[1:], rows):
        value = predict_statistic(row, fitted) if row is not None else None
        n += value is not None
        lines.append(f"{rec.raw},{'' if value is None else f'{value:.3f}'}")
    return write_text_atomic(out, newline.join(lines) + newline), n


def _crlf(path: str | Path) -> bool:
    with open(path, "rb") as f:
        return b"\r\n" in f.readline(1 << 20)


__all__ = ["PREDICTED_AVG_COLUMN", "is_api_statistic", "predict_api_statistic", "predict_statistic"]
