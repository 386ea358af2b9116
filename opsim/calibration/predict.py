"""`opsim predict`: kernel rows in, the same rows out plus a ``Predicted Duration(us)`` column.

The prediction is ``CostModel.kernel`` — the predictor ``opsim run`` uses for device tasks — so a calibration
applies in exactly the same way to a profile's rows and to opsim's own kernels.
"""
from __future__ import annotations

from pathlib import Path

from opsim.calibration.features import record_signature, record_work
from opsim.device.cost import CostModel
from opsim.device.predictor import Prediction
from opsim.ingest.kernels import KernelRecord, KernelTable, open_table
from opsim.outputs import atomic_text_file, write_text_atomic

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
    for line, raw in zip(table.lines, table.raw_rows):
        lines.append(f"{raw},{_appended(predicted.get(line))}")
    return nl.join(lines) + nl


def _appended(p: "Prediction | float | None") -> str:
    """The columns appended to one row (empty for a skipped row)."""
    if p is None:
        return "," * (len(PREDICTED_COLUMNS) - 1)
    if isinstance(p, Prediction):
        return f"{p.us:.3f},{p.low:.3f},{p.high:.3f},{p.level}"
    return f"{p:.3f},,,"


#: distinct kernels whose appended text is kept (a long profile repeats a few hundred).
_TAILS_LIMIT = 1 << 16
#: rows written to the output at a time (some 64 KB of text: one write call per chunk, memory still bounded).
_WRITE_ROWS = 256


def predict_file(cost: CostModel, path: str | Path, out: str | Path) -> tuple[Path, int, dict[str, int]]:
    """`render_predictions` of the table at `path` written to `out` as a stream, so memory stays that of a few
    hundred rows whatever the table's length: (written file, kernels predicted, skipped rows by reason).

    Every row is checked as `iter_kernels` checks it (`RowParser.check`, the same first error), but the
    prediction is made once per distinct kernel (its kernel cells as written and its block dim: all a
    prediction reads) and its text reused for every row that repeats it."""
    parse, header, rows = open_table(path)
    nl = "\r\n" if header.endswith("\r\n") else "\n"
    n, skipped = 0, {}
    tails: dict[tuple, str] = {}  # (kernel cells, block dim) -> the columns appended
    empty = "," * len(PREDICTED_COLUMNS)
    with atomic_text_file(out) as fh:
        fh.write(f"{header.rstrip(chr(13) + chr(10))}," + ",".join(PREDICTED_COLUMNS) + nl)
        chunk: list[str] = []
        for line, raw, cells in rows:
            key = parse.kernel_key(cells)
            kernel, block_dim = parse.check(line, cells, key)
            if kernel.reason:
                skipped[kernel.reason] = skipped.get(kernel.reason, 0) + 1
                tail = empty
            else:
                tail = tails.get((key, block_dim))
                if tail is None:
                    if len(tails) >= _TAILS_LIMIT:
                        tails.clear()
                    rec, _reason = parse(line, cells, key)
                    tail = tails[(key, block_dim)] = "," + _appended(predict_full(cost, rec))
                n += 1
            chunk.append(f"{raw.rstrip(chr(13) + chr(10))}{tail}{nl}")
            if len(chunk) >= _WRITE_ROWS:
                fh.write("".join(chunk))
                chunk.clear()
        fh.write("".join(chunk))
    return Path(out), n, skipped


def write_predictions(table: KernelTable, predicted: "dict[int, Prediction | float]", out: str | Path) -> Path:
    return write_text_atomic(out, render_predictions(table, predicted))
