"""The writers' bulk forms agree with their one-value references: `us_texts` with `us_text`, the compiled
``us_text`` template part, the records file written a column at a time with ``json.dumps`` of the whole
document, the numpy nesting depths and span order with the plain Python ones, the column-at-a-time CSV times."""
from __future__ import annotations

import io
import json
from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.scenario.result import _json_default, _json_pieces
from opsim.trace.ascend_host import _sorted_spans
from opsim.trace.ascend_model import API_KINDS, ApiSpan
from opsim.trace.ascend_profiler_db import with_depth
from opsim.trace.json_rows import Pieces, Template
from opsim.trace.msprof_csv import write_task_time
from opsim.trace.timefmt import us_text, us_texts

INT64 = st.integers(-(2**63) + 1, 2**63 - 1)


@settings(max_examples=200, deadline=None)
@given(st.lists(INT64, max_size=40), st.sampled_from([3, 6]))
def test_us_texts_is_us_text_of_each(values, decimals):
    assert us_texts(np.array(values, dtype=np.int64), decimals) == [us_text(v, decimals) for v in values]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-(10**17), 10**18), min_size=1, max_size=30))
def test_the_us_text_template_part_writes_us_text(values):
    out = Template(('"', ("us_text", "t"), '"')).render(len(values), {"t": np.array(values)}, Pieces())
    assert out.tobytes().decode() == "".join(f',\n"{us_text(v)}"' for v in values)


def test_pieces_may_hold_any_text_as_utf8():
    pieces = Pieces(encoding="utf-8")
    c = pieces.code('"näme"')
    out = Template((("piece", "n", 0),)).render(1, {"n": np.array([c])}, pieces)
    assert out.tobytes().decode("utf-8") == ',\n"näme"'


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=4) | st.integers(), json_values, max_size=4), st.integers(0, 3))
def test_the_records_file_pieces_join_to_json_dumps(doc, depth):
    want = json.dumps(doc, separators=(",", ":"), default=_json_default, allow_nan=True)
    assert "".join(_json_pieces(doc, depth)) == want


def _reference_depth(rows, track):
    """with_depth as it was written before numpy: a sort by key and a stack per track."""
    order = sorted(range(len(rows)), key=lambda i: (rows[i][track], rows[i][0], -rows[i][1], i))
    depth, stack, key = [0] * len(rows), [], None
    for i in order:
        s, e, k = rows[i][0], rows[i][1], rows[i][track]
        if k != key:
            stack, key = [], k
        while stack and stack[-1] <= s:
            stack.pop()
        depth[i] = len(stack)
        stack.append(e)
    return [r + (d,) for r, d in zip(rows, depth)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 10), st.integers(0, 2)), max_size=30))
def test_with_depth_is_the_stack_reference(spec):
    rows = [(s, s + d, "x", k) for s, d, k in spec]
    assert with_depth(list(rows), track=3) == _reference_depth(rows, 3)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 4), st.integers(1, 3), st.sampled_from(["acl", "node"]),
                          st.sampled_from(["b", "a", "launch", "aclnnAdd"])), max_size=25))
def test_spans_are_ordered_as_the_stable_sort_orders_them(spec):
    spans = [ApiSpan(kind, name, tid, s, s + d, i) for i, (s, d, tid, kind, name) in enumerate(spec)]
    want = sorted(spans, key=lambda a: (a.start_ns, -a.end_ns, a.tid, a.kind, a.name))
    names: dict[str, int] = {}
    n = len(spans)
    part = (np.array([API_KINDS.index(a.kind) for a in spans], np.int8),
            np.array([names.setdefault(a.name, len(names)) for a in spans], np.int64),
            *(np.array([getattr(a, f) for a in spans], np.int64) for f in ("tid", "start_ns", "end_ns", "corr")),
            np.zeros(n, np.int64), np.arange(n), np.zeros(n, np.int64))  # ties: list order
    assert [a.corr for a in _sorted_spans([part], names)] == [a.corr for a in want]


def test_task_time_past_int64_epochs_is_still_exact():
    dev = {"stream": [1, 1], "task_id": [0, 1], "op": ["Add", "Mul"], "task_type": ["AI_CORE"] * 2,
           "start": [1.25, 3.0], "end": [2.5, 4.0004], "device": [0, 0]}
    rec = SimpleNamespace(records=lambda kind: dev)
    for epoch_us in (1_700_000_000_000_000, 10**19):
        fh = io.StringIO()
        write_task_time(rec, fh, epoch_us=epoch_us)
        rows = fh.getvalue().splitlines()[1:]
        base = epoch_us * 1000
        assert rows[1].split(",")[5:] == ["1.000", us_text(base + 3000), us_text(base + 4000)]


def _reference_kernel_rows(p):
    """kernel_details.csv rows as they were built before the shared cells: one list of strings per kernel."""
    from opsim.trace.ascend_model import MODEL_ID_NONE, us_str
    from opsim.trace.ascend_pmu import MIX_TYPES, pmu_csv_values
    from opsim.trace.ascend_tables import quoted_shape
    rows = []
    for t in p.kernels:
        ti = t.tensors
        mix = t.block_dim if t.task_type in MIX_TYPES else 0
        rows.append([
            "" if t.step is None else str(t.step), str(MODEL_ID_NONE), str(t.task_id), str(t.stream), t.name, t.op,
            "static", t.task_type, us_str(t.start_ns), us_str(t.dur_ns), us_str(t.wait_ns), str(t.block_dim),
            str(mix), "NO",
            quoted_shape(ti.get("input_shapes", "")), ti.get("input_data_types", ""), ti.get("input_formats", ""),
            quoted_shape(ti.get("output_shapes", "")), ti.get("output_data_types", ""), ti.get("output_formats", ""),
            "N/A"] + pmu_csv_values(t.pmu))
    return rows


def test_kernel_details_blocks_are_the_csv_writer_rows():
    from pathlib import Path

    from opsim.scenario.runner import run_scenario
    from opsim.trace.ascend_build import build_profile
    from opsim.trace.ascend_model import KERNEL_DETAILS_HEADER
    from opsim.trace.ascend_tables import csv_text, kernel_details_blocks
    res = run_scenario(Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml", write=False)
    p = build_profile(res.sim)
    kernels = p.kernels
    kernels[0].name = 'na,"me\nx'  # cells that need quoting
    kernels[1].step = None
    assert "".join(kernel_details_blocks(p, block_rows=2)) == csv_text(KERNEL_DETAILS_HEADER,
                                                                       _reference_kernel_rows(p))


def test_records_written_from_the_recorder_chunks_are_the_same_bytes(tmp_path):
    from pathlib import Path

    from opsim.scenario.result import Result
    from opsim.scenario.runner import run_scenario
    scenario = Path(__file__).resolve().parents[2] / "scenarios" / "large.yaml"
    res = run_scenario(scenario, write=False, overrides={"threads.0.program.0.loop.count": 40,
                                                         "threads.1.program.0.loop.count": 40, "trace": True})
    res.sim.recorder._fold(force=True)  # several chunks, as a large run has
    eager = Result.from_run(res).write_records(tmp_path / "a.json.gz", relative_to=tmp_path)
    lazy = Result.from_run(res, lazy=True).write_records(tmp_path / "b.json.gz", relative_to=tmp_path)
    assert eager.read_bytes() == lazy.read_bytes()
