"""The streaming trace reader: same events as a whole-file parse, bounded work and memory on hostile input."""
from __future__ import annotations

import json
import resource
from pathlib import Path

import pytest

from opsim.errors import ProfileFormatError
from opsim.importer.calls import read_calls
from opsim.importer.report import ImportReport
from opsim.ingest import read_trace_view
from opsim.ingest.json_stream import MAX_DEPTH
from opsim.ingest.trace_view import KEPT_ARGS, TraceEvent, us_to_ns

REAL = Path(__file__).resolve().parents[1] / "data" / "real" / "trace_view_910b_mnist.json"


def test_stream_matches_a_whole_file_parse():
    """Every X event of the real trace, with exact nanoseconds and the kept args, in file order."""
    raw = [e for e in json.loads(REAL.read_text(), parse_float=str) if e.get("ph") == "X"]
    view = read_trace_view(REAL)
    assert [(e.name, e.ts, e.dur) for e in view.events] == [
        (r["name"], us_to_ns(r["ts"]), us_to_ns(r.get("dur", 0))) for r in raw]
    assert [e.args for e in view.events] == [
        {k: (int(v) if isinstance(v, str) and v.isdigit() and k != "Task Type" else v)
         for k, v in r.get("args", {}).items() if k in KEPT_ARGS} for r in raw]


def test_object_form_bom_and_progress(tmp_path):
    events = json.loads(REAL.read_text())
    p = tmp_path / "trace_view.json"
    p.write_bytes(b"\xef\xbb\xbf" + json.dumps({"meta": {"x": [1, {"y": 2}]}, "traceEvents": events,
                                                "tail": 1}).encode())
    seen = []
    view = read_trace_view(p, progress=lambda done, total: seen.append((done, total)))
    assert len(view.events) == 2212
    assert seen[-1] == (p.stat().st_size, p.stat().st_size)


@pytest.mark.parametrize("payload", [
    '[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "args": {"deep": ' + "[" * 200000 + "]" * 200000 + "}}]",
    '{"other": ' + "{\"a\": " * 100000 + "1" + "}" * 100000 + ', "traceEvents": []}',
])
def test_deep_nesting_is_refused_in_bounded_memory(tmp_path, payload):
    p = tmp_path / "trace_view.json"
    p.write_text(payload)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ProfileFormatError, match=f"nested too deeply \\(more than {MAX_DEPTH} levels\\)"):
        read_trace_view(p)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # KiB


def test_endless_and_empty_inputs_fail_fast(tmp_path):
    with pytest.raises(ProfileFormatError, match="/dev/zero: not a regular file"):
        read_trace_view(Path("/dev/zero"))
    empty = tmp_path / "trace_view.json"
    empty.write_text("  \n")
    with pytest.raises(ProfileFormatError, match="trace_view.json: not valid JSON at line 2, column 1 .*premature EOF"):
        read_trace_view(empty)
    trailing = tmp_path / "t2.json"
    trailing.write_text('[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1}] x')
    with pytest.raises(ProfileFormatError, match=r"t2.json: not valid JSON at line 1, column \d+"):
        read_trace_view(trailing)


def test_damaged_field_names_event_and_field(tmp_path):
    p = tmp_path / "trace_view.json"
    p.write_text('[{"ph": "X", "name": "a", "pid": {"x": 1}, "tid": 1, "ts": 1}]')
    with pytest.raises(ProfileFormatError, match=r"event 0 \('a', ph 'X'\), field 'pid': .*got '\{\.\.\.\}'"):
        read_trace_view(p)


def _flat_trace(n: int) -> list[dict]:
    """n AscendCL calls on one thread, each launching a kernel, plus n flows starting outside every call."""
    ev = [{"ph": "M", "name": "process_name", "pid": 9, "args": {"name": "Ascend Hardware"}}]
    for i in range(n):
        t = 10 * i
        ev.append({"ph": "X", "name": "AscendCL@aclnnAdd", "pid": 1, "tid": 1, "ts": t, "dur": 4})
        ev.append({"ph": "s", "cat": "HostToDevice", "id": f"a{i}", "pid": 1, "tid": 1, "ts": t + 1})
        ev.append({"ph": "f", "cat": "HostToDevice", "id": f"a{i}", "pid": 9, "tid": 2, "ts": t + 5})
        ev.append({"ph": "X", "name": "Add", "pid": 9, "tid": 2, "ts": t + 5, "dur": 1})
        ev.append({"ph": "s", "cat": "HostToDevice", "id": f"b{i}", "pid": 1, "tid": 1, "ts": t + 7})
        ev.append({"ph": "f", "cat": "HostToDevice", "id": f"b{i}", "pid": 9, "tid": 2, "ts": t + 8})
        ev.append({"ph": "X", "name": "Orphan", "pid": 9, "tid": 2, "ts": t + 8, "dur": 1})
    return ev


def test_launch_links_and_calls_do_linear_work(tmp_path, monkeypatch):
    """The old reader walked back over every earlier host event for a flow outside all of them: n^2 reads
    of TraceEvent.end. Placing the launches now reads it a bounded number of times per event."""
    n = 3000
    p = tmp_path / "trace_view.json"
    p.write_text(json.dumps(_flat_trace(n)))
    view = read_trace_view(p)
    reads = [0]
    plain = TraceEvent.end

    def counted(self):
        reads[0] += 1
        return plain.fget(self)
    monkeypatch.setattr(TraceEvent, "end", property(counted))
    links = view.launch_links()
    assert len(links) == n and all(len(link.kernels) == 1 for link in links)
    pc = read_calls(view, ImportReport())
    assert len(pc.calls) == n and all(len(c.kernels) == 1 for c in pc.calls)
    assert reads[0] <= 20 * n
