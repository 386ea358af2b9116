"""A profile without a host trace (a kernel_details.csv or msprof op_summary alone) as a device-side replay.

Without the host timeline there are no calls to replay: each kernel row becomes a `task` step of the
`device_replay` thread, submitted at its recorded start on its recorded stream (`Stream ID`) for its recorded
duration (communication rows, core `HCCL` or an `hcom_` name, as communication tasks; the rest as recorded
tasks keeping their accelerator core as task type, so they count as computing). Kernels that overlap on one
stream go to lanes of it, as in `opsim.importer.device_tasks`. The replay's device busy time, Computing and
kernel count are the table's.

A table of millions of rows is imported in bounded memory: the rows are read as a stream
(`opsim.ingest.kernels.iter_kernels`), ordered by start on disk (`opsim.importer.spill_sort`), given their
lanes in one pass and written as YAML text step by step (`KernelReplay.write`), each distinct step dumped by
PyYAML once and reused as a template, so the file is the one `yaml.safe_dump` of the whole scenario writes.
"""
from __future__ import annotations

import heapq
from pathlib import Path
from typing import IO, Any, Callable, Iterator

from opsim.errors import ProfileFormatError
from opsim.importer.device_tasks import DEVICE_THREAD, DeviceItem, step_of
from opsim.importer.report import ImportReport
from opsim.importer.spill_sort import SpillSort
from opsim.trace.step_breakdown import is_communication
from opsim.yamlio.limits import MAX_FILE_BYTES
from opsim.ingest.trace_view import us_to_ns


def _stream_name(label: Any) -> str:
    return f"stream_{label}"


COLUMNS = {"name": ("Name", "Op Name"), "core": ("Accelerator Core", "Task Type"),
           "stream": ("Stream ID", "Stream Id"), "start": ("Start Time(us)", "Task Start Time(us)"),
           "dur": ("Duration(us)", "Task Duration(us)")}
"""The columns a kernels-only replay reads (kernel_details.csv names, then msprof op_summary names)."""

DUMP = {"sort_keys": False, "width": 120, "default_flow_style": None}
"""How `opsim import` dumps a scenario with PyYAML (`opsim.importer.write_import`)."""
TEMPLATES = 1 << 14
"""Distinct step templates kept (a long table repeats a few hundred kernels; more are dumped again)."""
MAX_STREAMS = MAX_FILE_BYTES // 10
"""Most replay streams (each takes at least 10 characters of the scenario's `streams:` list, which a scenario
file of MAX_FILE_BYTES must hold): bounds the lanes kept while the rows are placed."""
VALIDATE_BATCH = 4_096
"""Distinct steps validated together (each distinct step is validated once, in a scenario of its own kind)."""


def _rows(path: Path, source: str) -> Iterator[tuple[int, str, str, int, int, int]]:
    """(line, name, core, stream, start ns, duration ns) of every row, HCCL and shape-less rows included (the
    kernel reader skips those for calibration), streamed (`iter_kernels` checks every row as `read_kernels`
    does)."""
    from opsim.ingest.kernels import iter_kernels  # lazy: keeps decimal and the dtype tables out of the package
    rows = iter_kernels(path)
    _, _, header_cells, _, _ = next(rows)
    header = [h.strip() for h in header_cells]
    col = {}
    for key, names in COLUMNS.items():
        col[key] = next((header.index(n) for n in names if n in header), None)
        if col[key] is None and key != "stream":
            raise ProfileFormatError(f"{source}: no {names[0]!r} column; a kernels-only import needs each "
                                     f"kernel's name, core, start time and duration")
    for line, _, cells, _, _ in rows:
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
        yield line, cell("name")[:256], cell("core")[:64], stream, start, dur


class _Lanes:
    """One stream's lanes: a task takes the lowest-numbered lane free at its start (`assign_lanes`' greedy
    colouring, with heaps so a stream of many overlapping tasks stays linear)."""

    def __init__(self) -> None:
        self.free: list[int] = []
        self.busy: list[tuple[int, int]] = []
        self.count = 0

    def take(self, start: int, dur: int) -> int:
        while self.busy and self.busy[0][0] <= start:
            heapq.heappush(self.free, heapq.heappop(self.busy)[1])
        if self.free:
            lane = heapq.heappop(self.free)
        else:
            lane, self.count = self.count, self.count + 1
        heapq.heappush(self.busy, (start + dur, lane))
        return lane


def _yaml_float(value: float) -> str:
    """The plain scalar PyYAML's SafeRepresenter writes for a finite float."""
    text = repr(value).lower()
    return text.replace("e", ".0e", 1) if "." not in text and "e" in text else text


class KernelReplay:
    """A kernel table's replay, its steps ordered on disk until `write` streams them as YAML."""

    def __init__(self, path: Path, report: ImportReport, *, name: str, source: str):
        first = SpillSort()
        spare = 0  # the stream of rows that name none
        for line, kname, core, stream, start, dur in _rows(path, source):
            first.add((start, dur, line, stream, kname, core))
            spare = max(spare, stream + 1)
        if not first.count:
            raise ProfileFormatError(f"{source}: no kernel row; a kernels-only import replays the rows at their "
                                     f"start times")
        self.count = first.count
        self._steps = SpillSort()
        lanes: dict[int, _Lanes] = {}
        labels: set[Any] = set()
        kinds = {"communication": 0, "recorded": 0}
        self.origin: int | None = None
        for start, dur, line, stream, kname, core in first.sorted():  # lanes in start, then duration order
            stream = spare if stream < 0 else stream
            comm = core.upper() == "HCCL" or is_communication(core) or kname.startswith("hcom_")
            kind = "communication" if comm else "recorded"
            lane = lanes.setdefault(stream, _Lanes()).take(start, dur)
            labels.add(stream if lane == 0 else f"{stream}_{lane}")
            if len(labels) > MAX_STREAMS:
                raise ProfileFormatError(f"{source}: the replay needs more than {MAX_STREAMS} streams (stream ids, "
                                         f"and lanes of kernels overlapping on one), more than a scenario file "
                                         f"(at most {MAX_FILE_BYTES >> 20} MiB) can list; import a shorter profile")
            kinds[kind] += 1
            self.origin = start if self.origin is None else min(self.origin, start)
            self._steps.add((start, line, stream, lane, kind, kname, core, dur))
        ordered = sorted(labels, key=lambda s: (int(str(s).split("_")[0]), str(s)))
        report.figures.update({"calls": 0, "phase1": 0, "threads": 1, "kernels": 0, "streams": len(ordered),
                               "profiled_ops": 0, "steps": 1, "kernels_only": True, "device_tasks": kinds})
        report.note("kernels-only profile: no host trace, the kernels are replayed at their recorded starts", 1)
        self.scenario = {
            "name": name,
            "description": f"imported from {source.rsplit('/', 1)[-1]} by opsim import: {self.count} kernel rows "
                           f"replayed on the device at their recorded starts (no host trace)",
            "seed": 0,
            "streams": [_stream_name(s) for s in ordered],
            "threads": [{"name": DEVICE_THREAD, "program": [{"loop": {"count": 1, "body": []}}]}],
        }
        """The scenario without its steps (`write` adds them)."""

    def with_body(self, body: list[dict[str, Any]]) -> dict[str, Any]:
        """The scenario with `body` as the device thread's steps."""
        thread = {"name": DEVICE_THREAD, "program": [{"loop": {"count": 1, "body": body}}]}
        return dict(self.scenario, threads=[thread])

    def steps(self) -> Iterator[tuple[dict[str, Any], float, str]]:
        """(step, its last value, that value's YAML text) in replay order: sleeps between the tasks' starts."""
        prev = self.origin
        for start, _, stream, lane, kind, kname, core, dur in self._steps.sorted():
            if start > prev:
                gap = round((start - prev) / 1000.0, 3)
                yield {"sleep": gap}, gap, _yaml_float(gap)
                prev = start
            item = DeviceItem(kind, stream, kname or "kernel", core or "AI_CORE", start, dur, lane=lane)
            (step,) = step_of(item, _stream_name)
            value = step["task"]["duration_us"]
            yield step, value, _yaml_float(value)

    def write(self, out: IO[str], header: str, *, limit: int, check: Callable[[dict[str, Any]], None]) -> int:
        """Write the scenario YAML (after `header`) to `out`, each distinct step validated by `check(scenario)`;
        refuses a text longer than `limit` characters. Returns the characters written."""
        import yaml  # lazy: keeps PyYAML out of importing opsim.importer
        sentinel = {"sleep": 0.5}
        text = yaml.safe_dump(self.with_body([sentinel]), **DUMP)
        head, tail = text.split(_item_text(sentinel, "0.5"))
        templates: dict[tuple, tuple[str, str] | None] = {}
        pending: list[dict[str, Any]] = []
        sleeps = 0.0
        written = len(header) + len(head) + len(tail)
        out.write(header + head)
        for step, value, vtext in self.steps():
            if "sleep" in step:
                sleeps += value
                key: tuple = ("sleep", len(vtext))
            else:
                t = step["task"]
                key = (t["stream"], t["kind"], t["name"], t["task_type"], len(vtext))
            if key not in templates:
                if len(templates) >= TEMPLATES:
                    templates.clear()
                templates[key] = _template(step, vtext)
                pending.append(step)
                if len(pending) >= VALIDATE_BATCH:
                    check(self.with_body(pending))
                    pending = []
            tpl = templates[key]
            piece = tpl[0] + vtext + tpl[1] if tpl is not None else _item_text(step, vtext)
            written += len(piece)
            if written > limit:
                raise ProfileFormatError(
                    f"the replay of {self.count} kernel rows is more than {limit >> 20} MiB of scenario YAML, "
                    f"above the file budget (docs/scenarios.md, Limits); nothing was written: import and run it "
                    f"with a larger --max-file-mib, or import a shorter profile")
            out.write(piece)
        check(self.with_body(pending + [{"sleep": sleeps}]))
        out.write(tail)
        return written


def _item_text(step: dict[str, Any], vtext: str) -> str:
    """`step`'s text as an item of the device thread's body, as `yaml.safe_dump` of the scenario writes it."""
    import yaml  # lazy: keeps PyYAML out of importing opsim.importer
    doc = {"threads": [{"name": DEVICE_THREAD, "program": [{"loop": {"count": 1, "body": [step]}}]}]}
    text = yaml.safe_dump(doc, **DUMP)
    return text[text.index("      body:\n") + len("      body:\n"):]


def _template(step: dict[str, Any], vtext: str) -> tuple[str, str] | None:
    """(text before, text after) the step's last value: the text of every step that differs from it only in
    that value, written as long (PyYAML breaks lines by column, so a value of another length may not fit);
    None when the value is not found where it is expected (the step is then dumped each time)."""
    text = _item_text(step, vtext)
    at = text.rfind(": " + vtext)
    if at < 0 or text[at + 2 + len(vtext):].rstrip("}\n") != "":
        return None
    return text[:at + 2], text[at + 2 + len(vtext):]


def build_kernels_only(path: str | Path, report: ImportReport, *, name: str, source: str) -> KernelReplay:
    """The replay of the kernel table at `path` (see the module docstring)."""
    return KernelReplay(Path(path), report, name=name, source=source)


__all__ = ["build_kernels_only", "KernelReplay"]
