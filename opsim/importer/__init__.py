"""`opsim import`: a real torch_npu profile as a scenario that replays it.

`import_profile(path)` reads the profile (a torch_npu `*_ascend_pt` directory, its ASCEND_PROFILER_OUTPUT, or
a trace_view.json) with `opsim.ingest`, finds each host thread's ACLNN calls and what they launched
(`opsim.importer.calls`), and writes them as a scenario with profiled ops (`opsim.importer.scenario`).
Everything the importer could not place is counted in the `ImportReport`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from opsim.importer.report import ImportReport
import gc
import re
import sys
from opsim.errors import ProfileFormatError, ScenarioError
from opsim.outputs import write_text_atomic
from opsim.yamlio.limits import MAX_FILE_BYTES

REPORT_SUFFIX = ".import-report.json"
"""The report is written next to the scenario: `scenario.yaml` -> `scenario.import-report.json`."""


CALIBRATION_SUFFIX = ".calibration.yaml"
"""With a kernel table, the profile's calibration is written next to the scenario and named by it."""


@dataclass
class ImportResult:
    scenario: dict[str, Any]
    report: ImportReport
    calibration: Any = None
    """The calibration fitted from the same profile (`opsim.calibration.calibrate`) when it has a kernel table:
    the predictor a shape what-if asks."""
    replay: Any = None
    """A kernels-only profile: its replay (`opsim.importer.kernels_only.KernelReplay`), whose steps are written
    as a stream; `scenario` then holds the scenario without its steps."""
    scenario_path: Path | None = None
    report_path: Path | None = None
    calibration_path: Path | None = None


def import_profile(path: str | Path, *, name: str | None = None, progress: bool = False,
                   device_hook: Callable[[Any, Any, ImportReport], None] | None = None,
                   calibration: bool = True) -> ImportResult:
    """The scenario replaying the profile at `path`; raises ProfileFormatError for a missing or bad file.

    `progress` shows a bar on stderr while a long trace is read (on a terminal, after one second).
    `device_hook(calls, view, report)` may rewrite the device tasks before the scenario is built (a job import
    turns HCCL ops into collectives); `calibration` False skips fitting the profile's calibration."""
    enabled = gc.isenabled()
    gc.disable()  # hundreds of thousands of acyclic records: collections would only rescan them
    try:
        return _import(path, name, progress, device_hook, calibration)
    finally:
        if enabled:
            gc.enable()


def _import(path: str | Path, name: str | None, progress: bool, device_hook: Any = None,
            with_calibration: bool = True) -> ImportResult:
    # lazy: keeps numpy, ijson, sqlite3, decimal out of importing opsim.importer
    from opsim.importer.calls import read_calls
    # lazy: keeps numpy, ijson, sqlite3, decimal out of importing opsim.importer
    from opsim.importer.scenario import build_scenario
    # lazy: keeps numpy, ijson, sqlite3, decimal out of importing opsim.importer
    from opsim.ingest import locate_profile
    files = locate_profile(path)
    source = files.host_source
    if source is None:
        if not files.kernel_sources:
            raise ProfileFormatError(f"{path}: no trace_view.json, profiler db or kernel table found; give a "
                                     "torch_npu *_ascend_pt directory, its trace_view.json, its "
                                     "ascend_pytorch_profiler_*.db or a kernel_details.csv")
        return _kernels_only(files, name)
    report = ImportReport(source=str(source))
    update, close = _progress(progress)
    try:
        view = _read_view(files, update)
    finally:
        close()
    for reason, n in view.skipped.items():
        report.note(reason, n)
    calls = read_calls(view, report)
    if device_hook is not None:
        device_hook(calls, view, report)
    if not calls.calls:
        raise ProfileFormatError(f"{source}: no ACLNN or aclop call found (no AscendCL@aclnn* or "
                                 "AscendCL@aclopCompileAndExecute events); profile with the NPU activity at "
                                 "profiler_level Level1 or higher (Level0 records no AscendCL events)")
    table = _kernel_table(files)
    if table is not None:
        # lazy: keeps numpy, ijson, sqlite3, decimal out of importing opsim.importer
        from opsim.importer.calls import join_kernel_details
        report.figures["kernel_details_joined"] = join_kernel_details(calls, table, report)
    else:
        report.note("no kernel_details.csv: shapes, dtypes, block dims and cores are not known", 1)
    label = name or _default_name(source)
    scenario = build_scenario(calls, report, view=view, name=label, source=source.name)
    calibration = None
    if table is not None and with_calibration:
        # lazy: keeps numpy, ijson, sqlite3, SimPy, decimal out of importing opsim.importer
        from opsim.calibration import calibrate
        calibration = calibrate(path)
    return ImportResult(scenario=scenario, report=report, calibration=calibration)


def _read_view(files: Any, update: Any) -> Any:
    """The profile's TraceView: its trace_view.json, else its SQLite export's tables (opsim.ingest.db_view)."""
    from opsim.ingest.sources import read_view  # lazy: keeps ijson, sqlite3 out of importing opsim.importer
    return read_view(files.host_source, progress=update)


def _kernel_table(files: Any) -> Any:
    """The kernel rows joined to the trace's kernels: kernel_details.csv's, else (a db export read as the trace)
    the db's COMPUTE_TASK_INFO rows as a stream, else None."""
    if files.kernel_details is not None:
        from opsim.ingest import read_kernels  # lazy: keeps numpy, decimal out of importing opsim.importer
        return read_kernels(files.kernel_details, keep_raw=False, shapeless=True)
    if files.trace_view is None and files.db is not None:
        from opsim.ingest.profiler_db import iter_db_kernels  # lazy: keeps sqlite3 out of importing opsim.importer
        return iter_db_kernels(files.db, shapeless=True)  # streamed into the join, row by row
    return None


def _kernels_only(files: Any, name: str | None) -> ImportResult:
    """A profile without a host trace: its kernel table replayed on the device side."""
    # lazy: keeps numpy, ijson, sqlite3, decimal out of importing opsim.importer
    from opsim.importer.kernels_only import build_kernels_only
    source = files.kernel_sources[0]
    report = ImportReport(source=str(source))
    replay = build_kernels_only(source, report, name=name or _default_name(source), source=str(source))
    return ImportResult(scenario=replay.scenario, report=report, replay=replay)


def _progress(enabled: bool):
    """(update(bytes_read, total), close) of a byte-count bar on stderr, only on a terminal."""
    if not enabled or not sys.stderr.isatty():
        return None, lambda: None
    from tqdm import tqdm  # lazy: keeps tqdm out of importing opsim.importer
    bar = tqdm(total=0, unit="B", unit_scale=True, delay=1.0, file=sys.stderr, dynamic_ncols=True, leave=False,
               desc="reading trace")
    last = [0]

    def update(done: int, total: int) -> None:
        if bar.total != total:
            bar.total = total
        bar.update(done - last[0])
        last[0] = done

    return update, bar.close


def _default_name(path: Path) -> str:
    stem = path.parent.parent.name if path.parent.name == "ASCEND_PROFILER_OUTPUT" else path.stem
    cleaned = re.sub(r"[^A-Za-z0-9_.\-]", "_", stem) or "imported"
    return cleaned if cleaned[0].isalpha() or cleaned[0] == "_" else "p_" + cleaned


def write_import(result: ImportResult, out: str | Path, max_bytes: int = MAX_FILE_BYTES) -> ImportResult:
    """Write the scenario YAML, its import report and (with a kernel table) its calibration next to it; a
    scenario above `max_bytes` (the file budget `opsim run` reads, --max-file-mib) is refused, nothing written."""
    import yaml  # lazy: keeps PyYAML out of importing opsim.importer
    out = Path(out)
    budget = f" --max-file-mib {max_bytes >> 20}" if max_bytes != MAX_FILE_BYTES else ""
    header = ("# Imported by `opsim import` from a real profile. Replay: opsim run " + out.name +
              f" --profiler-output{budget}\n# Profiled ops (profiled_ops) carry the recorded launch lists and host "
              "times; sleeps are the recorded host gaps.\n")
    if result.replay is not None:
        return _write_replay(result, out, header, max_bytes)
    _validate_before_writing(result.scenario, out, max_bytes)
    calibration_path = out.with_name(out.stem + CALIBRATION_SUFFIX)
    if result.calibration is not None:
        items = list(result.scenario.items())
        at = next(i for i, (k, _) in enumerate(items) if k == "profiled_ops")
        items.insert(at, ("calibration", calibration_path.name))
        result.scenario = dict(items)
    text = header + yaml.safe_dump(result.scenario, sort_keys=False, width=120, default_flow_style=None)
    size = len(text.encode("utf-8"))
    if size > max_bytes:  # opsim run could not read it: nothing is written
        raise ProfileFormatError(f"{out}: {_too_long(size, max_bytes)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    if result.calibration is not None:
        result.calibration_path = result.calibration.save(calibration_path)
    write_text_atomic(out, text)
    result.scenario_path = out
    result.report_path = result.report.write(out.with_name(out.stem + REPORT_SUFFIX))
    return result


def _too_long(size: int, max_bytes: int) -> str:
    """Why a replay of `size` bytes is not written, and the two ways out."""
    need = -(-size // (1 << 20))
    return (f"the replay is {size / (1 << 20):.1f} MiB of scenario YAML, above the {max_bytes >> 20} MiB file "
            f"budget (docs/scenarios.md, Limits); nothing was written: import and run it with --max-file-mib "
            f"{need}, or import a profile of fewer steps")


def _write_replay(result: ImportResult, out: Path, header: str, max_bytes: int) -> ImportResult:
    """A kernels-only replay written step by step (bounded memory); each distinct step is validated as it is
    first written, and a text above the file budget is refused: nothing is written then."""
    from opsim.outputs import atomic_text_file  # lazy: keeps the output machinery out of importing opsim.importer
    try:
        with atomic_text_file(out) as fh:
            result.replay.write(fh, header, limit=max_bytes,
                                check=lambda scenario: _validate_before_writing(scenario, out, max_bytes))
    except ProfileFormatError as exc:
        text = str(exc)
        raise ProfileFormatError(text if text.startswith(str(out)) else f"{out}: {text}") from None
    result.scenario_path = out
    result.report_path = result.report.write(out.with_name(out.stem + REPORT_SUFFIX))
    return result


def _validate_before_writing(scenario: dict, out: Path, max_bytes: int = MAX_FILE_BYTES) -> None:
    """The scenario `opsim validate` would accept, or nothing is written: a profile can hold names opsim cannot
    replay (a thread named like the task-queue thread, API names with control characters or path parts)."""
    from opsim.scenario.limits import Limits  # lazy: keeps numpy, SimPy, PyYAML out of importing opsim.importer
    from opsim.scenario.loader import validate  # lazy: as above
    try:
        validate({k: v for k, v in scenario.items() if k != "calibration"}, environ={},
                 limits=Limits(file_bytes=max_bytes))
    except ScenarioError as exc:
        raise ProfileFormatError(f"{out}: the scenario imported from this profile would not validate, so nothing "
                                 f"was written: {exc}") from None


def import_job(path: str | Path, *, name: str | None = None, progress: bool = False,
               single: bool = False) -> ImportResult:
    """A folder of several `*_ascend_pt` (one per rank of a job) as ONE multi-rank scenario
    (opsim.importer.job_scenario); `single`: `path` is one rank's `*_ascend_pt`, imported as a rank of its job
    (its HCCL ops as collectives, the group's other ranks filled from it)."""
    # lazy: keeps numpy, ijson, sqlite3, SimPy, decimal out of importing opsim.importer
    from opsim.importer.job_scenario import build_job
    label = name or _default_name(Path(path) / "ASCEND_PROFILER_OUTPUT" / "trace_view.json")
    scenario, report, calibration = build_job(path, name=label, progress=progress, import_rank=import_profile,
                                              single=single)
    return ImportResult(scenario=scenario, report=report, calibration=calibration)


def import_ranks(path: str | Path, out: str | Path, *, name: str | None = None,
                 progress: bool = False, max_bytes: int = MAX_FILE_BYTES) -> list[ImportResult]:
    """A folder of several `*_ascend_pt` (one per rank): each rank imported on its own and written next to
    `out` as `<out stem>_<rank dir><suffix>` (ranks are not yet replayed together)."""
    # lazy: keeps numpy, ijson, sqlite3, decimal out of importing opsim.importer
    from opsim.ingest.locate import rank_dirs
    out = Path(out)
    results = []
    for d in rank_dirs(path):
        res = import_profile(d, name=f"{name}_{d.name}" if name else None, progress=progress)
        results.append(write_import(res, out.with_name(f"{out.stem}_{d.name}{out.suffix}"), max_bytes))
    return results


__all__ = ["import_profile", "import_job", "import_ranks", "write_import", "ImportResult", "ImportReport",
           "REPORT_SUFFIX", "CALIBRATION_SUFFIX"]
