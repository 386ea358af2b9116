"""Find the profiler files inside a torch_npu or msprof output directory.

Accepted: a ``*_ascend_pt`` directory, its ``ASCEND_PROFILER_OUTPUT/`` directory, an msprof ``PROF_*``
directory (``mindstudio_profiler_output/op_summary_*.csv`` and its ``msprof_*.json`` timeline), or one file: ``kernel_details*.csv``,
``trace_view*.json`` or ``op_summary*.csv``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from opsim.errors import ProfileFormatError

_OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
_MSPROF_DIR = "mindstudio_profiler_output"


@dataclass(frozen=True)
class ProfileFiles:
    """The readable files of one profile; any of them may be missing."""

    root: Path
    kernel_details: Path | None = None
    trace_view: Path | None = None
    op_summary: tuple[Path, ...] = ()

    @property
    def kernel_sources(self) -> tuple[Path, ...]:
        """The kernel tables to read: kernel_details.csv when present, else the msprof op summaries."""
        if self.kernel_details is not None:
            return (self.kernel_details,)
        return self.op_summary


def _classify_file(path: Path) -> ProfileFiles:
    name = path.name.lower()
    if name.startswith("kernel_details") and name.endswith(".csv"):
        return ProfileFiles(root=path.parent, kernel_details=path)
    if name.startswith("trace_view") and name.endswith(".json"):
        return ProfileFiles(root=path.parent, trace_view=path)
    if name.startswith("op_summary") and name.endswith(".csv"):
        return ProfileFiles(root=path.parent, op_summary=(path,))
    if name.endswith(".csv"):  # a renamed kernel table: kernel_details columns are checked when read
        return ProfileFiles(root=path.parent, kernel_details=path)
    if name.endswith(".json"):
        return ProfileFiles(root=path.parent, trace_view=path)
    raise ProfileFormatError(
        f"{path}: not a profiler file; give a kernel_details.csv, an op_summary_*.csv, a trace_view.json or "
        f"a torch_npu *_ascend_pt directory")


def _first(paths: list[Path]) -> Path | None:
    return sorted(paths)[0] if paths else None


def _scan_dir(root: Path) -> ProfileFiles:
    out_dirs = [root] if root.name == _OUTPUT_DIR else [root / _OUTPUT_DIR, root]
    kernel = trace = None
    for d in out_dirs:
        if d.is_dir():
            kernel = kernel or _first(list(d.glob("kernel_details*.csv")))
            trace = trace or _first(list(d.glob("trace_view*.json")))
    if trace is None:  # msprof's own timeline (msprof_<timestamp>.json; the msprof_slice_* parts are not merged)
        timelines = [t for pattern in (f"{_MSPROF_DIR}/msprof_*.json", f"PROF_*/{_MSPROF_DIR}/msprof_*.json")
                     for t in root.glob(pattern) if not t.name.startswith("msprof_slice_")]
        trace = _first(timelines)
    summaries: list[Path] = []
    for pattern in (f"{_MSPROF_DIR}/op_summary*.csv", f"PROF_*/{_MSPROF_DIR}/op_summary*.csv",
                    "op_summary*.csv"):
        summaries.extend(root.glob(pattern))
    return ProfileFiles(root=root, kernel_details=kernel, trace_view=trace,
                        op_summary=tuple(sorted(set(summaries))))


def read_profile_text(path: Path, expected: str) -> str:
    """The text of a profiler file (UTF-8, BOM allowed); errors name the file and what was expected."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ProfileFormatError(f"{path}: no such file; give a {expected}") from None
    except OSError as exc:
        raise ProfileFormatError(f"{path}: cannot read ({exc}); give a {expected}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ProfileFormatError(
            f"{path}: line {line}, byte {exc.start}: not UTF-8 ({data[exc.start:exc.start + 4]!r}); re-save the "
            f"{expected} as UTF-8") from None


def rank_dirs(path: str | Path) -> list[Path]:
    """The `*_ascend_pt` directories (one per rank) of a folder that holds several and no profile of its own;
    [] for anything else."""
    p = Path(path)
    if not p.is_dir() or p.name.endswith("_ascend_pt") or (p / _OUTPUT_DIR).is_dir():
        return []
    return sorted(d for d in p.glob("*_ascend_pt") if d.is_dir())


def locate_profile(path: str | Path) -> ProfileFiles:
    """The profiler files at `path` (a profile directory or one profiler file)."""
    p = Path(path)
    if not p.exists():
        raise ProfileFormatError(f"{p}: no such file or directory; give a profiler output directory or file")
    if p.is_file():
        return _classify_file(p)
    found = _scan_dir(p)
    if found.kernel_details is None and found.trace_view is None and not found.op_summary:
        raise ProfileFormatError(
            f"{p}: no kernel_details.csv, trace_view.json or op_summary_*.csv found (looked in {p}, "
            f"{p / _OUTPUT_DIR} and PROF_*/{_MSPROF_DIR}); give the *_ascend_pt directory of a torch_npu "
            f"profile or one of those files")
    return found
