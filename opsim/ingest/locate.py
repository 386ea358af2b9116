"""Find the profiler files inside a torch_npu or msprof output directory.

Accepted: a ``*_ascend_pt`` directory, its ``ASCEND_PROFILER_OUTPUT/`` directory, an msprof ``PROF_*``
directory (``mindstudio_profiler_output/op_summary_*.csv`` and its ``msprof_*.json`` timeline), or one file: ``kernel_details*.csv``,
``trace_view*.json``, ``op_summary*.csv``, ``api_statistic*.csv`` or an ``ascend_pytorch_profiler*.db`` SQLite
export. ``locate_profiles`` also takes a folder holding several profiles: every ``*_ascend_pt`` directory
below it is one profile.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from opsim.errors import ProfileFormatError
from opsim.safe_io import open_regular

_OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
_MSPROF_DIR = "mindstudio_profiler_output"


@dataclass(frozen=True)
class ProfileFiles:
    """The readable files of one profile; any of them may be missing."""

    root: Path
    kernel_details: Path | None = None
    trace_view: Path | None = None
    op_summary: tuple[Path, ...] = ()
    #: torch_npu's SQLite export (ascend_pytorch_profiler_*.db): kernels (COMPUTE_TASK_INFO) and host calls (CANN_API).
    db: Path | None = None
    #: torch_npu's host API table (api_statistic.csv): per-API means, no per-call times.
    api_statistic: Path | None = None

    @property
    def kernel_sources(self) -> tuple[Path, ...]:
        """The kernel tables to read: kernel_details.csv when present, else the db export, else the msprof op
        summaries (one export of a profile, so no kernel is read twice)."""
        if self.kernel_details is not None:
            return (self.kernel_details,)
        if self.db is not None:
            return (self.db,)
        return self.op_summary

    @property
    def host_source(self) -> Path | None:
        """Where per-call host API times come from: trace_view.json, else the db export's CANN_API."""
        return self.trace_view if self.trace_view is not None else self.db


def _classify_file(path: Path) -> ProfileFiles:
    name = path.name.lower()
    if name.startswith("kernel_details") and name.endswith(".csv"):
        return ProfileFiles(root=path.parent, kernel_details=path)
    if name.startswith("trace_view") and name.endswith(".json"):
        return ProfileFiles(root=path.parent, trace_view=path)
    if name.startswith("op_summary") and name.endswith(".csv"):
        return ProfileFiles(root=path.parent, op_summary=(path,))
    if name.startswith("api_statistic") and name.endswith(".csv"):
        return ProfileFiles(root=path.parent, api_statistic=path)
    if name.endswith(".db"):
        return ProfileFiles(root=path.parent, db=path)
    if name.endswith(".csv"):  # a renamed kernel table: kernel_details columns are checked when read
        return ProfileFiles(root=path.parent, kernel_details=path)
    if name.endswith(".json"):
        return ProfileFiles(root=path.parent, trace_view=path)
    raise ProfileFormatError(
        f"{path}: not a profiler file; give a kernel_details.csv, an op_summary_*.csv, a trace_view.json, an "
        f"api_statistic.csv, an ascend_pytorch_profiler_*.db or a torch_npu *_ascend_pt directory")


def _first(paths: list[Path]) -> Path | None:
    return sorted(paths)[0] if paths else None


def _scan_dir(root: Path) -> ProfileFiles:
    out_dirs = [root] if root.name == _OUTPUT_DIR else [root / _OUTPUT_DIR, root]
    kernel = trace = db = stats = None
    for d in out_dirs:
        if d.is_dir():
            kernel = kernel or _first(list(d.glob("kernel_details*.csv")))
            trace = trace or _first(list(d.glob("trace_view*.json")))
            db = db or _first(list(d.glob("ascend_pytorch_profiler*.db")))
            stats = stats or _first(list(d.glob("api_statistic*.csv")))
    if trace is None:  # msprof's own timeline (msprof_<timestamp>.json; the msprof_slice_* parts are not merged)
        timelines = [t for pattern in (f"{_MSPROF_DIR}/msprof_*.json", f"PROF_*/{_MSPROF_DIR}/msprof_*.json")
                     for t in root.glob(pattern) if not t.name.startswith("msprof_slice_")]
        trace = _first(timelines)
    summaries: list[Path] = []
    for pattern in (f"{_MSPROF_DIR}/op_summary*.csv", f"PROF_*/{_MSPROF_DIR}/op_summary*.csv",
                    "op_summary*.csv"):
        summaries.extend(root.glob(pattern))
    return ProfileFiles(root=root, kernel_details=kernel, trace_view=trace,
                        op_summary=tuple(sorted(set(summaries))), db=db, api_statistic=stats)


def check_regular_file(path: Path, expected: str) -> int:
    """The size of `path`, which must be a readable regular file (a directory, a device such as /dev/zero, a
    FIFO, a path with a NUL byte or too long are refused naming the file and what was expected): checked by
    opening it as opsim.safe_io does, so every profiler reader refuses the same files the same way."""
    with open_regular(path, f"a {expected}", ProfileFormatError) as fh:
        return os.fstat(fh.fileno()).st_size


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
    if _empty(found):
        raise ProfileFormatError(
            f"{p}: no kernel_details.csv, trace_view.json, op_summary_*.csv, api_statistic.csv or "
            f"ascend_pytorch_profiler_*.db found (looked in {p}, {p / _OUTPUT_DIR} and PROF_*/{_MSPROF_DIR}); "
            f"give the *_ascend_pt directory of a torch_npu profile, a folder of them, or one of those files")
    return found


def _empty(found: ProfileFiles) -> bool:
    return (found.kernel_details is None and found.trace_view is None and not found.op_summary
            and found.db is None and found.api_statistic is None)


#: the most profile directories one folder may hold (a bound on a walk of a huge tree).
MAX_PROFILES = 10_000


def profile_dirs(root: Path) -> list[Path]:
    """Every ``*_ascend_pt`` directory below `root`, sorted (symbolic links are not followed; a profile
    directory's own subfolders are not searched)."""
    out: list[Path] = []
    for here, dirs, _files in os.walk(root, onerror=None, followlinks=False):
        keep = []
        for d in sorted(dirs):
            if d.endswith("_ascend_pt"):
                out.append(Path(here) / d)
                if len(out) > MAX_PROFILES:
                    raise ProfileFormatError(f"{root}: more than {MAX_PROFILES} *_ascend_pt directories; give a "
                                             f"smaller folder")
            else:
                keep.append(d)
        dirs[:] = keep
    return sorted(out)


def locate_profiles(path: str | Path) -> list[ProfileFiles]:
    """The profiles at `path`: one file, one profile directory, or every ``*_ascend_pt`` directory below a
    folder that is not itself a profile (each a separate profile)."""
    p = Path(path)
    if p.is_dir() and not p.name.endswith("_ascend_pt") and _empty(_scan_dir(p)):
        found = [f for f in (_scan_dir(d) for d in profile_dirs(p)) if not _empty(f)]
        if found:
            return found
    return [locate_profile(p)]
