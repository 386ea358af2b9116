"""Fuzz: arbitrary damage to a kernel table or a trace never raises anything but ProfileFormatError, through
the readers and what the commands do with their result (predict, fit, import)."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opsim.calibration import fit_device
from opsim.calibration.predict import predict_table
from opsim.device.cost import CostModel
from opsim.device.soc import get_soc
from opsim.errors import ProfileFormatError
from opsim.importer.calls import read_calls
from opsim.importer.report import ImportReport
from opsim.ingest import read_kernels, read_trace_view

FORMATS = Path(__file__).resolve().parents[1] / "data" / "formats"
TABLE = list(csv.reader(io.StringIO((FORMATS / "kernel_details_no_pmu_no_step_reordered.csv").read_text())))
EVENTS = json.loads((FORMATS / "trace_view_queue_two_threads.json").read_text())
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

CELL = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["NaN", "inf", "-inf", "-1", "0", "1e400", "9" * 400, "N/A", '"', '""', "\t", ";;", ",",
                     "AI_CPU", "MIX_AIV", "HCCL", "DT_BF16", "UNKNOWN_T", "1,2;3", "-4,0", "\x00", "é"]))


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(TABLE) - 1), st.integers(0, len(TABLE[0]) - 1), CELL),
                min_size=1, max_size=6),
       st.sampled_from(["\n", "\r\n"]), st.booleans())
def test_kernel_table_mutations_raise_only_profile_format_error(tmp_path_factory, edits, newline, bom):
    rows = [list(r) for r in TABLE]
    for r, c, value in edits:
        rows[r][c] = value
    buf = io.StringIO()
    csv.writer(buf, lineterminator=newline).writerows(rows)
    p = tmp_path_factory.mktemp("k") / "kernel_details.csv"
    p.write_bytes((("\ufeff" if bom else "") + buf.getvalue()).encode("utf-8", "surrogatepass"))
    try:
        table = read_kernels(p)
    except ProfileFormatError:
        return
    predict_table(CostModel(get_soc()), table)
    fit_device(table.rows)


JSON = st.recursive(st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats() | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                   max_size=3), max_leaves=8)
FIELDS = st.sampled_from(["ph", "name", "pid", "tid", "ts", "dur", "args", "cat", "id", "bp"])


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(EVENTS) - 1), FIELDS, JSON), min_size=1, max_size=6),
       st.booleans())
def test_trace_mutations_raise_only_profile_format_error(tmp_path_factory, edits, wrapped):
    events = json.loads(json.dumps(EVENTS))
    for i, key, value in edits:
        events[i][key] = value
    p = tmp_path_factory.mktemp("t") / "trace_view.json"
    p.write_text(json.dumps({"traceEvents": events} if wrapped else events))
    try:
        view = read_trace_view(p)
    except ProfileFormatError:
        return
    read_calls(view, ImportReport(source=str(p)))
