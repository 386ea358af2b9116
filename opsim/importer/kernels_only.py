"""A profile without a host trace (a kernel_details.csv or msprof op_summary alone) as a device-side replay.

Without the host timeline there are no calls to replay: each kernel row becomes a `task` step of the
`device_replay` thread, submitted at its recorded start on its recorded stream (`Stream ID`) for its recorded
duration (communication rows, core `HCCL` or an `hcom_` name, as communication tasks; the rest as recorded
tasks keeping their accelerator core as task type, so they count as computing). Kernels that overlap on one
stream go to lanes of it, as in `opsim.importer.device_tasks`. The replay's device busy time, Computing and
kernel count are the table's.
"""
from __future__ import annotations

from typing import Any

from opsim.errors import ProfileFormatError
from opsim.importer.device_tasks import DEVICE_THREAD, DeviceItem, assign_lanes, step_of
from opsim.importer.report import ImportReport
from opsim.trace.step_breakdown import is_communication
from opsim.ingest.trace_view import us_to_ns


def _stream_name(label: Any) -> str:
    return f"stream_{label}"


COLUMNS = {"name": ("Name", "Op Name"), "core": ("Accelerator Core", "Task Type"),
           "stream": ("Stream ID", "Stream Id"), "start": ("Start Time(us)", "Task Start Time(us)"),
           "dur": ("Duration(us)", "Task Duration(us)")}
"""The columns a kernels-only replay reads (kernel_details.csv names, then msprof op_summary names)."""


def _rows(table: Any, source: str) -> list[tuple[int, str, str, int, int, int]]:
    """(line, name, core, stream, start ns, duration ns) of every row, HCCL and shape-less rows included (the
    kernel reader skips those for calibration)."""
    header = [h.strip() for h in table.header]
    col = {}
    for key, names in COLUMNS.items():
        col[key] = next((header.index(n) for n in names if n in header), None)
        if col[key] is None and key != "stream":
            raise ProfileFormatError(f"{source}: no {names[0]!r} column; a kernels-only import needs each "
                                     f"kernel's name, core, start time and duration")
    out = []
    for line, cells in zip(table.lines, table.cells):
        def cell(key: str) -> str:
            i = col[key]
            return cells[i].strip() if i is not None and i < len(cells) else ""
        field = "start"
        try:
            start = us_to_ns(cell("start"))
            field = "dur"
            dur = us_to_ns(cell("dur"))
            if dur < 0:
                raise ValueError("a duration is not negative")
            field = "stream"
            text = cell("stream")
            stream = -1 if text.upper() in ("", "N/A", "NA") else int(text)  # -1: not given (HCCL rows)
            if not -1 <= stream < 1 << 31:
                raise ValueError("a stream id is between 0 and 2^31")
        except ValueError as exc:
            raise ProfileFormatError(f"{source}: line {line}, column {COLUMNS[field][0]!r}: {exc} (got "
                                     f"{cell(field)[:40]!r}); export the kernel table again") from None
        out.append((line, cell("name")[:256], cell("core")[:64], stream, start, dur))
    return out


def build_kernels_only(table: Any, report: ImportReport, *, name: str, source: str) -> dict[str, Any]:
    """The scenario replaying the kernel table's rows on the device (see the module docstring)."""
    rows = sorted(_rows(table, source), key=lambda r: (r[4], r[0]))
    if not rows:
        raise ProfileFormatError(f"{source}: no kernel row; a kernels-only import replays the rows at their "
                                 f"start times")
    items = []
    spare = max((r[3] for r in rows), default=0) + 1  # the stream of rows that name none
    for _, kname, core, stream, start, dur in rows:
        stream = spare if stream < 0 else stream
        comm = core.upper() == "HCCL" or is_communication(core) or kname.startswith("hcom_")
        item = DeviceItem("communication" if comm else "recorded", stream, kname or "kernel",
                          core or "AI_CORE", start, dur)
        item.host_ns = item.host_end_ns = start
        items.append(item)
    assign_lanes(items)
    origin = rows[0][4]
    program: list[dict[str, Any]] = []
    prev = origin
    for item in items:
        if item.host_ns > prev:
            program.append({"sleep": round((item.host_ns - prev) / 1000.0, 3)})
            prev = item.host_ns
        program.extend(step_of(item, _stream_name))
    labels = sorted({i.label for i in items}, key=lambda s: (int(str(s).split("_")[0]), str(s)))
    report.figures.update({"calls": 0, "phase1": 0, "threads": 1, "kernels": 0, "streams": len(labels),
                           "profiled_ops": 0, "steps": 1, "kernels_only": True,
                           "device_tasks": {k: sum(1 for i in items if i.kind == k)
                                            for k in ("communication", "recorded")}})
    report.note("kernels-only profile: no host trace, the kernels are replayed at their recorded starts", 1)
    return {
        "name": name,
        "description": f"imported from {source.rsplit('/', 1)[-1]} by opsim import: {len(items)} kernel rows replayed on the device "
                       f"at their recorded starts (no host trace)",
        "seed": 0,
        "streams": [_stream_name(s) for s in labels],
        "threads": [{"name": DEVICE_THREAD, "program": [{"loop": {"count": 1, "body": program}}]}],
    }


__all__ = ["build_kernels_only"]
