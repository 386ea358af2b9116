"""`opsim predict` predicts once per distinct kernel (its kernel cells as written and its block dim) and maps
the text back to every row, and the kernel reader parses a row's kernel cells once per distinct text and reads
plain numbers by a fast path. Both must change nothing: the file predict writes is byte for byte the one made
by parsing and predicting every row on its own (`_per_row` below), on the real tables and on generated ones,
and every bad row gives the same first error."""
from __future__ import annotations

import io
import random
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opsim.calibration.features import record_signature, record_work
from opsim.calibration.predict import PREDICTED_COLUMNS, _appended, predict_file
from opsim.calibration.soc_evidence import EvidenceReader, match_preset, table_evidence
from opsim.cli import main
from opsim.device.cost import CostModel
from opsim.device.soc import get_soc
from opsim.errors import ProfileFormatError
from opsim.ingest.csv_stream import iter_csv
from opsim.ingest.kernels import _RowReader, _column_index, _parse_row


def iter_records(path):
    """(line, raw text with its newline, cells) of each CSV record of a kernel table."""
    for r in iter_csv(path, "kernel_details.csv or op_summary_*.csv"):
        yield r.line, r.text, r.cells

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "data" / "real"
SHARED = ROOT.parents[1] / "shared" / "real-profiles"
TABLES = sorted([*REAL.glob("kernel_details_*.csv"), REAL / "alexnet_910b_rank0" / "kernel_details.csv",
                 *(ROOT / "data" / "formats").glob("*.csv"), *SHARED.glob("**/kernel_details.csv")])
TRAINING = REAL / "kernel_details_910b_training.csv"


def _per_row(path: Path, soc: str | None = None, fitted=None) -> tuple[str, str]:
    """(SoC, text of the predicted table) with every row parsed on its own (`_parse_row`, no memo across rows)
    and predicted from its own record's work, as predict did before it memoised anything."""
    recs = iter_records(path)
    _line, raw_header, header = next(recs)
    columns = _column_index(path, header)
    nl = "\r\n" if raw_header.endswith("\r\n") else "\n"
    rows, evidence = [], EvidenceReader(header)
    for line, raw, cells in recs:
        if not cells or all(c.strip() == "" for c in cells):
            continue
        rec, _reason = _parse_row(path, header, columns, line, cells)
        rows.append((raw, rec))
        if rec is not None:
            evidence.add(rec, cells)
    soc = soc or match_preset(evidence.evidence())
    cost = CostModel(get_soc(soc), fitted=fitted)
    out = [raw_header.rstrip("\r\n") + "," + ",".join(PREDICTED_COLUMNS) + nl]
    for raw, rec in rows:
        p = None
        if rec is not None:
            _fam, flops, nbytes, bd, size = record_work(rec)
            p = cost.predict(rec.op_type, rec.core, flops, nbytes, bd, record_signature(rec), size)
        out.append(f"{raw.rstrip(chr(13) + chr(10))},{_appended(p)}{nl}")
    return soc, "".join(out)


def _cli(path: Path, out: Path, *extra: str) -> tuple[int, str]:
    err = io.StringIO()
    return main(["predict", str(path), "-o", str(out), *extra], stdout=io.StringIO(), stderr=err), err.getvalue()


@pytest.mark.parametrize("path", TABLES, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_predict_writes_the_per_row_prediction_of_every_real_table(path, tmp_path):
    soc, expected = _per_row(path)
    code, err = _cli(path, tmp_path / "p.csv")
    assert code == 0, err
    assert (tmp_path / "p.csv").read_bytes() == expected.encode("utf-8")
    assert match_preset(table_evidence(path)) == soc


def test_predict_with_a_calibration_writes_the_per_row_prediction(real_calibration, calibration_file, tmp_path):
    for path in (TRAINING, REAL / "kernel_details_910b_alexnet_level2_rank0.csv"):
        _soc, expected = _per_row(path, real_calibration.soc, real_calibration.timing)
        code, err = _cli(path, tmp_path / "p.csv", "--calibration", str(calibration_file))
        assert code == 0, err
        assert (tmp_path / "p.csv").read_bytes().decode("utf-8") == expected


# ---- generated tables ----------------------------------------------------------------------------------------

_LINES = TRAINING.read_text(encoding="utf-8").splitlines()
_HEADER = next(iter_records(TRAINING))[2]
_POOL = [cells for _l, _r, cells in list(iter_records(TRAINING))[1:]]
_NUMBER_COLUMNS = ("Block Dim", "Mix Block Dim", "Start Time(us)", "Duration(us)", "Wait Time(us)", "Task ID",
                   "Stream ID", "Step Id")
_KERNEL_COLUMNS = ("Type", "Accelerator Core", "Input Shapes", "Input Data Types", "Input Formats",
                   "Output Shapes", "Output Data Types", "Output Formats")
_odd_numbers = st.sampled_from(["", "N/A", " 7", "7\t", "+3", "-3", "-0", "0", "007", "4.5", "1e3", "1E+2", ".5",
                                "5.", "1_000", "١٢", "inf", "nan", "1e20", "1e21", "99999999999999999999",
                                "100000000000000000001", "1699529622790614.8\t", "1699529622790614.87654", "x",
                                "12..3", "0x10"])
_plain_numbers = st.one_of(st.integers(0, 10 ** 21).map(str),
                           st.decimals(0, 10 ** 17, places=4, allow_nan=False).map(str))
_odd_kernel_cells = st.sampled_from(["", "N/A", "HCCL", "AI_CPU", "MIX_AIC", "MatMulV2", '"1,a;2"', '"4,4;4,4"',
                                     "WEIRD", "FLOAT16;INT64", "DT_BF16", "FRACTAL_NZ;ND", "UNDEFINED", '";"'])


@st.composite
def _tables(draw) -> list[list[str]]:
    rows = []
    for _ in range(draw(st.integers(1, 40))):
        cells = list(draw(st.sampled_from(_POOL)))
        for col in draw(st.lists(st.sampled_from(_NUMBER_COLUMNS), max_size=3)):
            cells[_HEADER.index(col)] = draw(st.one_of(_plain_numbers, _odd_numbers))
        for col in draw(st.lists(st.sampled_from(_KERNEL_COLUMNS), max_size=2)):
            cells[_HEADER.index(col)] = draw(_odd_kernel_cells)
        if draw(st.integers(0, 20)) == 0:
            cells = cells[:draw(st.integers(1, len(cells)))]  # a short row
        rows.append(cells)
    return rows


def _write(path: Path, rows: list[list[str]]) -> Path:
    def cell(c: str) -> str:
        return f'"{c.replace(chr(34), chr(34) * 2)}"' if any(ch in c for ch in ',"') else c
    path.write_text("\n".join([_LINES[0]] + [",".join(cell(c) for c in r) for r in rows]) + "\n", encoding="utf-8")
    return path


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=_tables())
def test_predict_equals_the_per_row_prediction_on_generated_tables(rows, tmp_path):
    path = _write(tmp_path / "k.csv", rows)
    (tmp_path / "p.csv").unlink(missing_ok=True)  # one tmp_path for every example
    try:
        _soc, expected = _per_row(path)
    except ProfileFormatError as exc:  # the same first error, and nothing written
        code, err = _cli(path, tmp_path / "p.csv")
        assert code == 2 and str(exc) in err and not (tmp_path / "p.csv").exists()
        return
    code, err = _cli(path, tmp_path / "p.csv")
    assert code == 0, err
    assert (tmp_path / "p.csv").read_bytes().decode("utf-8") == expected


def test_many_distinct_kernels_beyond_the_memo_bounds(tmp_path, monkeypatch):
    """More distinct kernels than the memos hold (they are cleared and refilled): still the per-row text."""
    import opsim.calibration.predict as predict_mod
    import opsim.ingest.kernels as kernels_mod
    monkeypatch.setattr(kernels_mod, "_SEEN_LIMIT", 16)
    monkeypatch.setattr(predict_mod, "_TAILS_LIMIT", 16)
    rng = random.Random(7)
    i_shape, i_block = _HEADER.index("Input Shapes"), _HEADER.index("Block Dim")
    rows = []
    for k in range(600):
        cells = list(_POOL[k % len(_POOL)])
        if rng.random() < 0.5:
            cells[i_shape] = f"{rng.randint(1, 64)},{rng.randint(1, 64)}"
        cells[i_block] = str(rng.randint(1, 48))
        rows.append(cells)
    path = _write(tmp_path / "k.csv", rows)
    soc, expected = _per_row(path)
    predict_file(CostModel(get_soc(soc)), path, tmp_path / "p.csv")
    assert (tmp_path / "p.csv").read_bytes().decode("utf-8") == expected


def test_one_prediction_per_distinct_kernel(tmp_path, monkeypatch):
    """A table of the training rows ten times over is predicted once per distinct kernel, not once per row."""
    import opsim.calibration.predict as predict_mod
    calls = []
    real = predict_mod.predict_full
    monkeypatch.setattr(predict_mod, "predict_full", lambda cost, rec: calls.append(rec) or real(cost, rec))
    path = _write(tmp_path / "k.csv", _POOL * 10)
    predict_file(CostModel(get_soc("Ascend910B2")), path, tmp_path / "p.csv")
    distinct = {(r.op_type, r.core, r.block_dim, r.input_shapes, r.input_dtypes, r.input_formats, r.output_shapes,
                 r.output_dtypes, r.output_formats) for r in calls}
    assert len(calls) == len(distinct) < len(_POOL)


# ---- the fast paths for plain numbers ------------------------------------------------------------------------

def _exact(kind: str, value: str):
    """The reader's Decimal path alone: (value) or ("error", message)."""
    r = _RowReader(Path("t.csv"), ["c"], {"c": 0}, 2, [value])
    try:
        d = r._decimal("c", "an integer" if kind == "integer" else "a number")
    except ProfileFormatError as exc:
        return ("error", str(exc))
    if d is None:
        return None
    return {"integer": int, "number": float, "ns": lambda x: int((x * 1000).to_integral_value())}[kind](d)


def _fast(kind: str, value: str):
    r = _RowReader(Path("t.csv"), ["c"], {"c": 0}, 2, [value])
    try:
        return getattr(r, kind)("c")
    except ProfileFormatError as exc:
        return ("error", str(exc))


_number_text = st.one_of(
    _odd_numbers, _plain_numbers, st.floats(allow_nan=True).map(repr),
    st.text(alphabet="0123456789.eE+-_ \t", max_size=25),
    st.builds(lambda a, b: f"{a}.{b}", st.integers(0, 10 ** 20), st.integers(0, 10 ** 6)))


@settings(max_examples=400, deadline=None)
@given(value=_number_text, kind=st.sampled_from(["integer", "number", "ns"]))
def test_the_fast_number_paths_give_the_exact_paths_value_or_error(value, kind):
    fast, exact = _fast(kind, value), _exact(kind, value)
    assert fast == exact and type(fast) is type(exact), (value, fast, exact)


def test_the_fast_paths_decide_the_common_spellings_without_decimal(monkeypatch):
    """Real tables' numbers (ids, block dims, times with a few decimals) never reach the Decimal path."""
    def refuse(*_a, **_k):
        raise AssertionError("Decimal path used")
    monkeypatch.setattr(_RowReader, "_decimal", refuse)
    for kind, value, want in (("integer", "48", 48), ("number", "1699529622790614.8", 1699529622790614.8),
                              ("ns", "1699529622790614.8", 1699529622790614800), ("number", "607.98", 607.98),
                              ("ns", "5.", 5000)):
        assert _fast(kind, value) == want
    assert Decimal("1699529622790614.8") * 1000 == 1699529622790614800
