"""trace_view.json reader: exact nanoseconds, flows, AscendCL selectors and broken files."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from opsim.errors import ProfileFormatError
from opsim.ingest import read_trace_view
from opsim.ingest.trace_view import classify_acl_name, us_to_ns

REAL = Path(__file__).resolve().parents[1] / "data" / "real" / "trace_view_910b_mnist.json"


@pytest.fixture(scope="module")
def real():
    return read_trace_view(REAL)


def test_real_counts(real):
    assert len(real.events) == 2212
    assert Counter(f.cat for f in real.flows) == {"HostToDevice": 274, "async_npu": 274,
                                                 "async_task_queue": 148, "fwdbwd": 17}
    assert real.process_names[800] == "Ascend Hardware"
    assert real.thread_names[(800, 3)] == "Stream 3"


def test_exact_nanoseconds(real):
    first = real.events[0]
    assert (first.name, first.ts, first.dur) == ("aten::empty", 1704161511420306491, 13080)
    acl = next(e for e in real.events if e.name == "AscendCL@aclnnInplaceZero")
    assert acl.ts == 1704161511422896956 and acl.dur == 21100  # dur 21.100210791105802 us


def test_acl_api_events(real):
    events = real.acl_api_events()
    kinds = Counter(a.kind for a in events)
    assert kinds == {"other": 165, "phase2": 137, "phase1": 34, "tiling": 32, "runtime": 14}
    p1 = [a for a in events if a.kind == "phase1"]
    assert {a.api for a in p1} >= {"aclnnAdd", "aclnnDivs", "aclnnAddcdiv", "aclnnInplaceCopy"}


@pytest.mark.parametrize("name, expected", [
    ("aclnnAddGetWorkspaceSize", ("aclnnAdd", "phase1")), ("aclnnInplaceAdd", ("aclnnInplaceAdd", "phase2")),
    ("aclrtMemcpy", ("aclrtMemcpy", "runtime")), ("Add_Tiling", ("Add", "tiling")),
    ("aclopCompileAndExecute", ("aclopCompileAndExecute", "other")),
])
def test_classify(name, expected):
    assert classify_acl_name(name) == expected


def test_device_kernels_and_launch_links(real):
    kernels = real.device_kernels()
    assert len(kernels) == 276 and {real.stream_id(k) for k in kernels} == {3}
    links = real.launch_links()
    assert len(links) == 146
    first = links[0]
    assert first.host.name == "AscendCL@aclnnInplaceZero"
    assert [k.name for k in first.kernels] == ["aclnnInplaceZero_ZerosLikeAiCore_ZerosLike"]
    device = set(id(k) for k in kernels)
    assert all(id(k) in device for link in links for k in link.kernels)
    assert all(link.host.name.startswith("AscendCL@") for link in links)


def _trace(tmp_path, payload) -> Path:
    p = tmp_path / "trace_view.json"
    p.write_text(payload if isinstance(payload, str) else json.dumps(payload))
    return p


def test_trace_events_wrapper_and_flows(tmp_path):
    events = [
        {"ph": "M", "name": "process_name", "pid": 9, "tid": 0, "args": {"name": "Ascend Hardware"}},
        {"ph": "M", "name": "thread_name", "pid": 9, "tid": 5, "args": {"name": "Stream 5"}},
        {"ph": "X", "name": "AscendCL@aclnnMul", "pid": 1, "tid": 2, "ts": "100.0015", "dur": 10},
        {"ph": "s", "cat": "HostToDevice", "id": "7", "name": "HostToDevice7", "pid": 1, "tid": 2, "ts": "105"},
        {"ph": "f", "cat": "HostToDevice", "id": "7", "pid": 9, "tid": 5, "ts": "120.5", "bp": "e"},
        {"ph": "X", "name": "Mul", "pid": 9, "tid": 5, "ts": "120.5", "dur": 0.25},
    ]
    tv = read_trace_view(_trace(tmp_path, {"traceEvents": events}))
    assert tv.events[0].ts == 100002  # 100.0015 us, half-even
    (link,) = tv.launch_links()
    assert link.host.name == "AscendCL@aclnnMul" and [k.dur for k in link.kernels] == [250]
    assert tv.stream_id(link.kernels[0]) == 5


def test_deeply_nested_json_is_a_format_error(tmp_path):
    p = _trace(tmp_path, "[" * 100000 + "]" * 100000)
    with pytest.raises(ProfileFormatError, match="nested too deeply"):
        read_trace_view(p)


def test_damaged_metadata_and_flows_are_ignored(tmp_path):
    """Metadata whose args are not an object and flows without an id carry nothing usable: skipped."""
    events = [{"ph": "M", "name": "process_name", "pid": 1, "args": "x"},
              {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": [1]},
              {"ph": "s", "cat": "HostToDevice", "name": "f", "pid": 1, "tid": 2, "ts": 1},
              {"ph": "X", "name": "a", "pid": 1, "tid": 2, "ts": "1.5", "dur": 1, "args": [1, 2], "cat": 7}]
    view = read_trace_view(_trace(tmp_path, events))
    assert view.process_names == {} and view.thread_names == {} and view.flows == []
    assert [(e.ts, e.args, e.cat) for e in view.events] == [(1500, {}, None)]


def test_non_utf8_names_line_and_byte(tmp_path):
    p = tmp_path / "trace_view.json"
    p.write_bytes(b'[\n{"ph": "X", "name": "caf\xe9"}]')
    with pytest.raises(ProfileFormatError, match=r"trace_view\.json: line 2, byte 26: not UTF-8"):
        read_trace_view(p)


def test_truncated_json_names_position(tmp_path):
    text = REAL.read_text()[:5000]
    p = _trace(tmp_path, text)
    with pytest.raises(ProfileFormatError, match=r"trace_view\.json: not valid JSON at line 1, column \d+"):
        read_trace_view(p)


@pytest.mark.parametrize("payload, match", [
    ({"foo": 1}, "not a Chrome trace"),
    ([{"ph": "X", "name": "a", "pid": 1, "tid": 1}], "no 'ts' field"),
    ([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": "soon"}], "field 'ts': 'soon' is not a number"),
    ([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": "1e99999999"}], "field 'ts': .* not a finite time"),
    ([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": "Infinity"}], "field 'dur': .* not a finite"),
    ([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": -3}], "field 'dur': a duration is not negative"),
    ([{"ph": "X", "name": "a", "pid": [1], "tid": 1, "ts": 1}], "field 'pid': .* not a process or thread id"),
    ([{"ph": "M", "name": "thread_name", "pid": 1, "tid": {}, "args": {"name": "x"}}], "field 'tid'"),
    ([3], "event 0 is not a JSON object"),
])
def test_not_a_trace(tmp_path, payload, match):
    with pytest.raises(ProfileFormatError, match=match):
        read_trace_view(_trace(tmp_path, payload))


@given(st.integers(min_value=0, max_value=10**19), st.integers(min_value=0, max_value=999))
def test_us_to_ns_exact_for_decimal_strings(us, frac):
    assert us_to_ns(f"{us}.{frac:03d}") == us * 1000 + frac
