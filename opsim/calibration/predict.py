"""`opsim predict`: kernel rows in, the same rows out plus a ``Predicted Duration(us)`` column.

The prediction is ``CostModel.kernel`` — the predictor ``opsim run`` uses for device tasks — so a calibration
applies in exactly the same way to a profile's rows and to opsim's own kernels.
"""
from __future__ import annotations

from pathlib import Path

from opsim.calibration.features import record_signature, record_work
from opsim.device.cost import CostModel
from opsim.device.predictor import Prediction
from opsim.ingest.kernels import KernelRecord, KernelTable
from opsim.outputs import write_text_atomic

PREDICTED_COLUMN = "Predicted Duration(us)"
#: the columns `opsim predict` appends, in order.
PREDICTED_COLUMNS = (PREDICTED_COLUMN, "Predicted Low(us)", "Predicted High(us)", "Prediction Level")


_WORK: dict[tuple, tuple] = {}


def predict_full(cost: CostModel, rec: KernelRecord) -> Prediction:
    """The prediction of one kernel row: duration, p10-p90 band, level and source (the work of a row is
    memoised by its op type, core, tensors and block dim: a long profile repeats a few hundred kernels)."""
    key = (rec.op_type, rec.core, rec.block_dim, rec.input_shapes, rec.input_dtypes, rec.output_shapes,
           rec.output_dtypes, rec.input_formats, rec.output_formats)
    work = _WORK.get(key)
    if work is None:
        if len(_WORK) >= 1 << 16:
            _WORK.clear()
        _fam, flops, nbytes, bd, size = record_work(rec)
        work = _WORK[key] = (flops, nbytes, bd, record_signature(rec), size)
    flops, nbytes, bd, sig, size = work
    return cost.predict(rec.op_type, rec.core, flops, nbytes, bd, sig, size)


def predict_record(cost: CostModel, rec: KernelRecord) -> float:
    """Predicted duration (us) of one kernel row."""
    return predict_full(cost, rec).us


def predict_table(cost: CostModel, table: KernelTable) -> dict[int, Prediction]:
    """File line -> prediction for every kernel row (skipped rows have none)."""
    return {rec.row: predict_full(cost, rec) for rec in table.rows}


def render_predictions(table: KernelTable, predicted: "dict[int, Prediction | float]") -> str:
    """The file's text with every row unchanged and the predicted duration, its p10-p90 band and level
    appended (empty for skipped rows)."""
    nl = table.newline
    lines = [f"{table.raw_header}," + ",".join(PREDICTED_COLUMNS)]
    empty = "," * (len(PREDICTED_COLUMNS) - 1)
    for line, raw in zip(table.lines, table.raw_rows):
        p = predicted.get(line)
        if p is None:
            lines.append(f"{raw},{empty}")
        elif isinstance(p, Prediction):
            lines.append(f"{raw},{p.us:.3f},{p.low:.3f},{p.high:.3f},{p.level}")
        else:
            lines.append(f"{raw},{p:.3f},,,")
    return nl.join(lines) + nl


def write_predictions(table: KernelTable, predicted: "dict[int, Prediction | float]", out: str | Path) -> Path:
    return write_text_atomic(out, render_predictions(table, predicted))
