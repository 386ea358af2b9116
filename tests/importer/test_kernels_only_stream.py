"""The kernels-only import streams: the text written step by step is the one `yaml.safe_dump` writes for the
whole scenario (built the way the import built it before it streamed), whatever the row order, overlaps,
ties and names; a replay larger than the scenario file limit is refused, nothing written."""
from __future__ import annotations

import csv
import io
from pathlib import Path

import yaml
from hypothesis import given, settings, strategies as st

from opsim.cli import main
from opsim.importer import import_profile, write_import
from opsim.importer import spill_sort
from opsim.importer.device_tasks import DeviceItem, assign_lanes, step_of
from opsim.importer.kernels_only import DUMP
from opsim.trace.step_breakdown import is_communication

HEADER = ["Step Id", "Stream ID", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)"]


def _reference(rows: list[tuple], name: str, source: str) -> str:
    """The whole-table replay (the import before it streamed): rows sorted, lanes, steps, one safe_dump."""
    rows = sorted(rows, key=lambda r: (r[4], r[0]))
    spare = max((r[3] for r in rows), default=0) + 1
    items = []
    for _, kname, core, stream, start, dur in rows:
        stream = spare if stream < 0 else stream
        comm = core.upper() == "HCCL" or is_communication(core) or kname.startswith("hcom_")
        item = DeviceItem("communication" if comm else "recorded", stream, kname or "kernel", core or "AI_CORE",
                          start, dur)
        item.host_ns = item.host_end_ns = start
        items.append(item)
    assign_lanes(items)
    program, prev = [], rows[0][4]
    for item in items:
        if item.host_ns > prev:
            program.append({"sleep": round((item.host_ns - prev) / 1000.0, 3)})
            prev = item.host_ns
        program.extend(step_of(item, lambda s: f"stream_{s}"))
    labels = sorted({i.label for i in items}, key=lambda s: (int(str(s).split("_")[0]), str(s)))
    scenario = {"name": name, "description": f"imported from {source} by opsim import: {len(items)} kernel rows "
                "replayed on the device at their recorded starts (no host trace)", "seed": 0,
                "streams": [f"stream_{s}" for s in labels],
                "threads": [{"name": "device_replay", "program": [{"loop": {"count": 1, "body": program}}]}]}
    return yaml.safe_dump(scenario, **DUMP)


def _table(path: Path, rows: list[tuple]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(HEADER)
        for _, kname, core, stream, start, dur in rows:
            w.writerow([1, "N/A" if stream < 0 else stream, kname, "T", core, f"{start / 1000:.3f}",
                        f"{dur / 1000:.3f}"])
    return path


NAMES = st.sampled_from(["MatMul1", "hcom_allReduce_1", ("a kernel with spaces " * 6).strip(), "Ünïcode", "x" * 300, "",
                         "Cast", "n: colon", "'quoted'", "-dash"])
ROW = st.tuples(NAMES, st.sampled_from(["AI_CORE", "HCCL", "AI_VECTOR_CORE", "MIX_AIC", "", "AI CPU"]),
                st.integers(-1, 3), st.integers(0, 40) .map(lambda t: t * 500),
                st.sampled_from([0, 1, 500, 1500, 2000, 123456, 10 ** 13]))


@settings(max_examples=40, deadline=None)
@given(st.lists(ROW, min_size=1, max_size=60), st.sampled_from([None, 3, 7]))
def test_streamed_text_is_the_whole_scenario_dump(tmp_path_factory, rows, run):
    tmp = tmp_path_factory.mktemp("k")
    numbered = [(i + 2, n, c, s, t, d) for i, (n, c, s, t, d) in enumerate(rows)]
    table = _table(tmp / "kernel_details.csv", numbered)
    old = spill_sort.RUN
    spill_sort.RUN = run or old  # small runs: the rows are spilled and merged
    try:
        res = write_import(import_profile(table, name="k"), tmp / "s.yaml")
    finally:
        spill_sort.RUN = old
    text = (tmp / "s.yaml").read_text()
    assert text.split("\n", 2)[2] == _reference(numbered, "k", "kernel_details.csv")
    assert res.report.figures["device_tasks"]["communication"] + res.report.figures["device_tasks"]["recorded"] \
        == len(rows)


def test_spill_sort_orders_runs_merged_in_levels(monkeypatch):
    monkeypatch.setattr(spill_sort, "FAN_IN", 3)
    s = spill_sort.SpillSort(run=4)
    values = [(v * 7919) % 1000 for v in range(200)]
    for v in values:
        s.add((v, str(v)))
    assert list(s.sorted()) == sorted((v, str(v)) for v in values)


def test_a_replay_beyond_the_scenario_file_limit_is_refused_nothing_written(tmp_path, monkeypatch):
    """The 4 MiB limit `opsim run` reads (here lowered): an import never writes a scenario validate refuses."""
    from opsim.yamlio import limits
    monkeypatch.setattr(limits, "MAX_FILE_BYTES", 4096)
    rows = [(i + 2, f"Kernel{i}", "AI_CORE", 0, i * 1000, 500) for i in range(200)]
    table = _table(tmp_path / "kernel_details.csv", rows)
    err = io.StringIO()
    code = main(["import", str(table), "-o", str(tmp_path / "s.yaml")], stdout=io.StringIO(), stderr=err)
    text = err.getvalue().strip()
    assert code == 2 and len(text.splitlines()) == 1 and "200 kernel rows" in text and "s.yaml" in text, text
    assert not list(tmp_path.glob("s*.yaml")) and not list(tmp_path.glob(".s.yaml*"))


def test_many_overlapping_tasks_on_one_stream_stay_linear(tmp_path):
    """Every task overlapping every other on one stream: one lane each, found by heap (was a scan per task)."""
    rows = [(i + 2, "K", "AI_CORE", 0, i, 10 ** 9) for i in range(3000)]
    res = import_profile(_table(tmp_path / "kernel_details.csv", rows))
    assert res.report.figures["streams"] == 3000


def test_more_streams_than_a_scenario_file_can_list_are_refused_while_placing(tmp_path, monkeypatch):
    """Every row on its own stream id: the lanes kept are bounded by what the `streams:` list can hold."""
    from opsim.importer import kernels_only
    monkeypatch.setattr(kernels_only, "MAX_STREAMS", 100)
    rows = [(i + 2, "K", "AI_CORE", i, i * 1000, 500) for i in range(300)]
    err = io.StringIO()
    table = _table(tmp_path / "kernel_details.csv", rows)
    code = main(["import", str(table), "-o", str(tmp_path / "s.yaml")], stdout=io.StringIO(), stderr=err)
    text = err.getvalue().strip()
    assert code == 2 and "more than 100 streams" in text and str(table) in text and len(text.splitlines()) == 1
