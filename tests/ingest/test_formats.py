"""The readers and the three commands on the synthetic format fixtures of tests/data/formats and on damaged
copies of them: every variant either reads correctly or fails with exit 2, one line naming the file, and no
output written."""
from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from opsim.cli import main
from opsim.ingest import read_kernels, read_trace_view

FORMATS = Path(__file__).resolve().parents[1] / "data" / "formats"
KERNEL_FILES = ["kernel_details_pmu_multistep_crlf.csv", "kernel_details_no_pmu_no_step_reordered.csv",
                "op_summary_0_1_1.csv"]
TRACES = ["trace_view_no_queue_multi_device.json", "trace_view_queue_two_threads.json"]


def cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _key(r):
    return (r.name, r.op_type, r.core, r.block_dim, r.mix_block_dim, r.duration_us, r.start_ns, r.stream_id,
            r.task_id, r.input_shapes, r.input_dtypes, r.output_shapes, r.output_dtypes)


@pytest.mark.parametrize("name", KERNEL_FILES)
def test_every_kernel_table_layout_reads_the_same_kernels(name):
    ref = read_kernels(FORMATS / KERNEL_FILES[0])
    table = read_kernels(FORMATS / name)
    assert [_key(r) for r in table.rows] == [_key(r) for r in ref.rows]
    assert table.skipped == {"HCCL (communication): 1"} or table.skipped == {"HCCL (communication)": 1}
    cores = {r.core for r in table.rows}
    assert cores == {"AI_VECTOR_CORE", "AI_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU"}
    assert {r.mix_block_dim for r in table.rows if r.core.startswith("MIX")} == {40, 20}
    assert {r.stream_id for r in table.rows} == {3, 5}
    steps = {r.step_id for r in table.rows}
    assert steps == ({1, 2} if name == KERNEL_FILES[0] else {None})


def test_level0_table_without_tensor_columns_is_read_fitted_and_predicted(tmp_path):
    table = read_kernels(FORMATS / "kernel_details_level0_no_tensors.csv")
    ref = read_kernels(FORMATS / KERNEL_FILES[0])
    assert [(r.name, r.core, r.duration_us, r.block_dim) for r in table.rows] == \
        [(r.name, r.core, r.duration_us, r.block_dim) for r in ref.rows]
    assert all(r.input_shapes == () and r.bytes_moved == 0 for r in table.rows)
    src = FORMATS / "kernel_details_level0_no_tensors.csv"
    code, out, err = cli("calibrate", src, "-o", tmp_path / "c.yaml")
    assert code == 0 and "5 core fit(s)" in out, err
    code, out, err = cli("predict", src, "--calibration", tmp_path / "c.yaml", "-o", tmp_path / "p.csv")
    assert code == 0 and "8 kernel(s) predicted" in out, err


def test_crlf_table_is_predicted_row_for_row_with_crlf(tmp_path):
    src = FORMATS / KERNEL_FILES[0]
    code, _, err = cli("predict", src, "-o", tmp_path / "p.csv")
    assert code == 0, err
    out = (tmp_path / "p.csv").read_bytes().decode()
    src_lines = src.read_bytes().decode().split("\r\n")[:-1]
    out_lines = out.split("\r\n")[:-1]
    assert len(out_lines) == len(src_lines) and out.endswith("\r\n") and "\n" not in out.replace("\r\n", "")
    assert all(o.startswith(s + ",") for s, o in zip(src_lines, out_lines))
    assert out_lines[-1].endswith(",")  # the HCCL row has no prediction


@pytest.mark.parametrize("name", KERNEL_FILES)
def test_calibrate_fits_every_core_of_every_layout(tmp_path, name):
    code, out, err = cli("calibrate", FORMATS / name, "-o", tmp_path / "c.yaml")
    assert code == 0, err
    assert "5 core fit(s)" in out


@pytest.mark.parametrize("trace, queued", [(TRACES[0], False), (TRACES[1], True)])
def test_import_places_every_call_of_two_threads_two_streams_two_devices(tmp_path, trace, queued):
    out_dir = tmp_path / "run_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out_dir.mkdir(parents=True)
    shutil.copy(FORMATS / trace, out_dir / "trace_view.json")
    shutil.copy(FORMATS / KERNEL_FILES[0], out_dir / "kernel_details.csv")
    code, out, err = cli("import", tmp_path / "run_ascend_pt", "-o", tmp_path / "s.yaml")
    assert code == 0, err
    report = json.loads((tmp_path / "s.import-report.json").read_text())
    figures = report["figures"]
    assert (figures["calls"], figures["threads"], figures["kernels"], figures["streams"], figures["steps"],
            figures["kernel_details_joined"], figures["task_queue"]) == (8, 2, 8, 2, 2, 8, queued)
    assert report["warnings"] == []
    code, _, err = cli("run", tmp_path / "s.yaml", "--out", tmp_path / "out")
    assert code == 0, err


def test_trace_view_object_form_and_extra_processes_are_read():
    view = read_trace_view(FORMATS / TRACES[0])
    assert len(view.device_pids()) == 2  # one "Ascend Hardware" process per device
    assert {view.stream_id(k) for k in view.device_kernels()} == {3, 5}
    assert not any(k.name.startswith("hcom_") for k in view.device_kernels())  # the HCCL process is not a device row


def _damaged_tables() -> dict[str, str]:
    text = (FORMATS / KERNEL_FILES[1]).read_text()
    header, first, *rest = text.splitlines()
    cells = first.split(",")
    dur = header.split(",").index("Duration(us)")

    def with_duration(value: str) -> str:
        c = list(cells)
        c[dur] = value
        return "\n".join([header, ",".join(c), *rest]) + "\n"
    return {
        "empty": "",
        "nan_duration": with_duration("NaN"),
        "inf_duration": with_duration("inf"),
        "huge_duration": with_duration("9" * 400),
        "exponent_duration": with_duration("1e99999999"),
        "no_required_column": text.replace("Accelerator Core", "Core"),
        "unterminated_quote": header + "\n" + first[:40] + '"' + "x" * 50 + "\n",
    }


@pytest.mark.parametrize("case", sorted(_damaged_tables()))
@pytest.mark.parametrize("command", ["calibrate", "predict"])
def test_damaged_table_exits_2_with_one_line_and_writes_nothing(tmp_path, case, command):
    p = tmp_path / "kernel_details.csv"
    p.write_text(_damaged_tables()[case])
    out = tmp_path / "out.file"
    code, _, err = cli(command, p, "-o", out)
    assert code == 2 and str(p) in err and len(err.strip().splitlines()) <= 2 and "Traceback" not in err
    assert not out.exists() and list(tmp_path.iterdir()) == [p]


def test_negative_durations_are_not_fitted_but_predicted(tmp_path):
    text = (FORMATS / KERNEL_FILES[1]).read_text()
    p = tmp_path / "kernel_details.csv"
    p.write_text(text.replace(",4.5,", ",-4.5,", 1))
    table = read_kernels(p)
    assert [r.duration_us for r in table.rows][0] == -4.5
    code, _, err = cli("predict", p, "-o", tmp_path / "p.csv")
    assert code == 0, err


def _damaged_traces() -> dict[str, str]:
    events = json.loads((FORMATS / TRACES[1]).read_text())
    text = json.dumps(events)

    def edit(fn) -> str:
        ev = json.loads(text)
        fn(ev)
        return json.dumps(ev)

    def first_x(ev):
        return next(e for e in ev if e["ph"] == "X")
    return {
        "truncated": text[: len(text) // 2],
        "nested": "[" * 50000 + "]" * 50000,
        "top_level_string": '"trace"',
        "infinite_ts": edit(lambda ev: first_x(ev).__setitem__("ts", "Infinity")),
        "huge_dur": edit(lambda ev: first_x(ev).__setitem__("dur", "1e999999999")),
        "negative_dur": edit(lambda ev: first_x(ev).__setitem__("dur", -1)),
        "list_pid": edit(lambda ev: first_x(ev).__setitem__("pid", [1])),
    }


@pytest.mark.parametrize("case", sorted(_damaged_traces()))
@pytest.mark.parametrize("command", ["calibrate", "import"])
def test_damaged_trace_exits_2_with_one_line_and_writes_nothing(tmp_path, case, command):
    p = tmp_path / "trace_view.json"
    p.write_text(_damaged_traces()[case])
    code, _, err = cli(command, p, "-o", tmp_path / "out.yaml")
    assert code == 2 and str(p) in err and len(err.strip().splitlines()) <= 2 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == [p]


def test_bad_correlation_ids_are_counted_not_fatal(tmp_path):
    events = json.loads((FORMATS / TRACES[1]).read_text())
    for e in events:
        if e.get("name") == "Enqueue":
            e["args"]["correlation_id"] = "not-a-number"
            break
    p = tmp_path / "trace_view.json"
    p.write_text(json.dumps(events))
    code, _, err = cli("import", p, "-o", tmp_path / "s.yaml")
    assert code == 0, err
    report = json.loads((tmp_path / "s.import-report.json").read_text())
    reasons = {w["reason"]: w["count"] for w in report["warnings"]}
    assert reasons["Enqueue/Dequeue whose correlation_id is not an integer (not replayed)"] == 1
