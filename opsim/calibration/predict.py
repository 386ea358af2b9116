"""`opsim predict`: kernel rows in, the same rows out plus a ``Predicted Duration(us)`` column.

The prediction is ``CostModel.kernel`` — the predictor ``opsim run`` uses for device tasks — so a calibration
applies in exactly the same way to a profile's rows and to opsim's own kernels.
"""
from __future__ import annotations

from pathlib import Path

from opsim.calibration.features import record_features, record_signature
from opsim.device.cost import CostModel
from opsim.ingest.kernels import KernelRecord, KernelTable

PREDICTED_COLUMN = "Predicted Duration(us)"


def predict_record(cost: CostModel, rec: KernelRecord) -> float:
    """Predicted duration (us) of one kernel row."""
    flops, nbytes, bd = record_features(rec)
    return cost.kernel(rec.op_type, rec.core, flops, nbytes, bd, record_signature(rec))


def predict_table(cost: CostModel, table: KernelTable) -> dict[int, float]:
    """File line -> predicted duration for every kernel row (skipped rows have none)."""
    return {rec.row: predict_record(cost, rec) for rec in table.rows}


def render_predictions(table: KernelTable, predicted: dict[int, float]) -> str:
    """The file's text with every row unchanged and the prediction appended (empty for skipped rows)."""
    nl = table.newline
    lines = [f"{table.raw_header},{PREDICTED_COLUMN}"]
    for line, raw in zip(table.lines, table.raw_rows):
        value = predicted.get(line)
        lines.append(f"{raw},{'' if value is None else f'{value:.3f}'}")
    return nl.join(lines) + nl


def write_predictions(table: KernelTable, predicted: dict[int, float], out: str | Path) -> Path:
    from opsim.outputs import write_text_atomic
    return write_text_atomic(out, render_predictions(table, predicted))
