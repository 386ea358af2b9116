"""Exact output times on every bundled scenario: slices nest and tasks never overlap, compared without tolerance
(trace.json as a reader adds doubles, trace_view.json and the CSVs as exact decimals)."""
from __future__ import annotations

import csv
import json
import math
import sys
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scenario"))
from scenario_helpers import SCENARIOS, TESTED  # noqa: E402

from opsim.scenario.runner import run_scenario  # noqa: E402
from opsim.trace.chrome_trace import check_nesting  # noqa: E402
from opsim.trace.timefmt import dur_float, json_ts, nest_durations, us_text  # noqa: E402

_OUT: dict[str, Path] = {}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    if not _OUT:
        base = tmp_path_factory.mktemp("exact")
        for name in TESTED:
            res = run_scenario(SCENARIOS / name, out_dir=base / name, profiler_output=True)
            _OUT[name] = res.out_dir
    return _OUT


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _no_overlap(intervals: dict, what: str) -> None:
    for key, ivs in intervals.items():
        ivs.sort()
        for (s0, e0), (s1, e1) in zip(ivs, ivs[1:]):
            assert s0 <= e0 and s1 >= e0, f"{what} {key}: [{s0}, {e0}] overlaps [{s1}, {e1}]"


@pytest.mark.parametrize("name", TESTED)
def test_trace_json_nests_exactly(outputs, name):
    events = json.loads((outputs[name] / "trace.json").read_text())["traceEvents"]
    assert check_nesting(events) == []


@pytest.mark.parametrize("name", TESTED)
def test_trace_view_json_nests_exactly(outputs, name):
    view = next(outputs[name].glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"))
    events = json.loads(view.read_text())
    assert any(e.get("ph") == "X" for e in events)
    assert check_nesting(events) == []


@pytest.mark.parametrize("name", TESTED)
def test_csv_tasks_never_overlap_on_a_stream(outputs, name):
    out = outputs[name]
    per_stream = defaultdict(list)
    for r in _csv(out / "task_time.csv"):
        s, e = Decimal(r["task_start(us)"]), Decimal(r["task_stop(us)"])
        assert e - s == Decimal(r["task_time(us)"])
        per_stream[r["stream_id"]].append((s, e))
    _no_overlap(per_stream, "task_time.csv stream")
    per_stream = defaultdict(list)
    for r in _csv(out / "op_summary.csv"):
        s = Decimal(r["Task Start Time(us)"].strip())
        per_stream[r["Stream ID"]].append((s, s + Decimal(r["Task Duration(us)"])))
    _no_overlap(per_stream, "op_summary.csv stream")
    details = next(out.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))
    per_stream = defaultdict(list)
    for r in _csv(details):
        s = Decimal(r["Start Time(us)"])
        per_stream[r["Stream ID"]].append((s, s + Decimal(r["Duration(us)"])))
    _no_overlap(per_stream, "kernel_details.csv stream")


@pytest.mark.parametrize("name", TESTED)
def test_both_csvs_give_one_cycle_count_per_kernel(outputs, name):
    out = outputs[name]
    summary = {(r["Stream ID"], r["Task ID"]): r for r in _csv(out / "op_summary.csv")}
    details = next(out.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))
    compared = 0
    for r in _csv(details):
        s = summary[(r["Stream ID"], r["Task ID"])]
        for col in ("aic_total_cycles", "aiv_total_cycles"):
            if s[col] != "N/A" and r[col] not in ("N/A", "0"):
                assert s[col] == r[col], (col, s, r)
                compared += 1
    assert compared or name == "aicpu_cache_pressure.yaml"


def test_the_reported_overlap_case_is_exact():
    # ts 1.1 + dur 0.3 is 1.4000000000000001 in doubles: the written dur makes the sum land on 1.4
    ts = float(json_ts(1100))
    dur = float(repr(dur_float(1100, 1400)))
    assert ts + dur == 1.4 and abs(dur - 0.3) < 1e-12
    assert repr(dur_float(1000, 1300)) == "0.3"  # the plain quotient when it lands
    # a short slice late in a run: one cheap step, not a walk over every double below the end
    assert 1_000_000.0 + dur_float(10**9, 10**9 + 300) == (10**9 + 300) / 1000.0


@given(st.integers(0, 10**13), st.integers(0, 10**13))
def test_dur_float_never_ends_past_the_end(a, b):
    s, e = min(a, b), max(a, b)
    d = dur_float(s, e)
    end = e / 1000.0
    assert 0.0 <= d and s / 1000.0 + d <= end
    assert s / 1000.0 + d >= math.nextafter(end, 0.0)  # on the end, or one step short of it (a tie)


@given(st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 10**9)), min_size=1, max_size=40))
def test_placed_slices_nest_exactly_as_a_reader_adds_them(pairs):
    items = sorted(([min(a, b), max(a, b), i] for i, (a, b) in enumerate(pairs)), key=lambda x: (x[0], -x[1], x[2]))
    _ends, durs = nest_durations([it[0] for it in items], [it[1] for it in items])
    durs = durs.tolist()
    events = [{"ph": "X", "pid": 1, "tid": 1, "ts": float(json_ts(it[0])), "dur": float(repr(d)), "name": str(it[2])}
              for it, d in zip(items, durs)]
    assert check_nesting(events) == []


@given(st.integers(-10**15, 10**15))
def test_us_text_is_exact(ns):
    assert Decimal(us_text(ns)) * 1000 == ns
    assert Decimal(us_text(ns, 6)) * 1000 == ns and len(us_text(ns, 6).partition(".")[2]) == 6


@settings(deadline=None)  # the first example compiles
@given(st.integers(-(10**15) + 1, 10**15 - 1))
def test_compiled_json_us_is_json_ts(ns):
    import numpy as np

    from opsim.trace.timefmt import compiled
    buf = np.zeros(32, dtype=np.uint8)
    end = compiled().put_json_us(buf, 0, ns)
    assert buf[:end].tobytes().decode() == json_ts(ns) == repr(ns / 1000.0)


@given(st.one_of(st.floats(0, 1e13), st.integers(0, 10**12).map(lambda k: k / 1000 + 0.0005),
                 st.integers(0, 10**9).map(lambda k: k / 1000)))
def test_round3_ns_is_pythons_round_where_it_claims_so(x):
    import numpy as np

    from opsim.trace.timefmt import round3_ns
    k, ok = round3_ns(np.array([x]))
    if ok[0]:
        assert json_ts(int(k[0])) == repr(round(x, 3))


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), max_size=60))
def test_track_order_is_start_then_longest_then_record_order(pairs):
    import numpy as np

    from opsim.trace.chrome_rows import track_order as _track_order
    s = np.array([a for a, _b in pairs], dtype=np.int64)
    e = s + np.array([b for _a, b in pairs], dtype=np.int64)
    rid = np.arange(len(pairs), dtype=np.int64) - 3  # record order, steps (negative) first
    assert _track_order(s, e, rid).tolist() == np.lexsort((rid, -e, s)).tolist()
