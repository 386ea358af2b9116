"""`opsim predict` and `opsim calibrate` read kernel tables as a stream: predict holds one row whatever the
table's length, calibrate keeps a small typed record per kernel (never the rows' text or cells). Measured with
tracemalloc at 1x and 10x (benchmarks/calibrate_scale.py measures 10k to 1M rows)."""
from __future__ import annotations

import io
import tracemalloc
from pathlib import Path

from opsim.cli import main

SRC = Path(__file__).resolve().parents[1] / "data" / "real" / "kernel_details_910b_training.csv"


def _table(path: Path, rows: int) -> Path:
    lines = SRC.read_text(encoding="utf-8-sig").splitlines()
    with open(path, "w", encoding="utf-8") as f:
        f.write(lines[0] + "\n")
        for i in range(rows):
            f.write(lines[1 + i % (len(lines) - 1)] + "\n")
    return path


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_predict_memory_does_not_grow_with_the_table(tmp_path):
    """It held every row's text, cells and record (1.29 GB for a 1M-row table)."""
    small, big = _table(tmp_path / "small.csv", 600), _table(tmp_path / "big.csv", 6000)

    def predict(p):
        return lambda: main(["predict", str(p), "-o", str(tmp_path / "o.csv")], stdout=io.StringIO(),
                            stderr=io.StringIO())
    predict(small)()  # imports and memo tables made once, outside the measurement
    peak_small, peak_big = _peak(predict(small)), _peak(predict(big))
    assert peak_big < 1.5 * peak_small + (1 << 20), (peak_small, peak_big)


def test_calibrate_keeps_a_small_record_per_kernel(tmp_path):
    from opsim.calibration import _stream_kernels
    path = _table(tmp_path / "k.csv", 6000)
    _stream_kernels(_table(tmp_path / "warm.csv", 50))
    tracemalloc.start()
    try:
        records, skipped, _ev = _stream_kernels(path)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(records) + sum(skipped.values()) == 6000
    assert held / len(records) < 600, held / len(records)  # bytes per kernel (it was ~1,500 with the text)
