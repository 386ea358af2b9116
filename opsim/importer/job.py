"""A folder of several `*_ascend_pt` (one per rank of a job) found and checked before it is imported as one
multi-rank scenario (opsim.importer.job_scenario builds it).

A rank's id is its `profiler_info_{rank}.json` (the file name, and its `rank_id` field when present), else
the folder name (`rank{N}_ascend_pt` or `..._rank{N}_...`). Rank folders must agree: distinct rank ids, one
profiler level, the same step ids (step_trace_time.csv), one SoC (the preset the kernel table's block dims and
clock match, opsim.calibration.soc_evidence), and the same profiler files. Anything else is refused naming the
folder and the field.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from opsim.errors import ProfileFormatError
from opsim.ingest.locate import check_regular_file
import csv
import io
from opsim.ingest import read_kernels

MAX_RANK_FOLDERS = 1024
"""Most rank folders a job folder may hold (the scenario's rank limit, opsim.scenario.schema.MAX_RANKS)."""
MAX_SCANNED = 100_000
"""Directory entries looked at before a folder is refused as too large to be one job."""
MAX_SMALL_FILE = 16 << 20
"""Largest profiler_info / step_trace_time file read (real ones are a few KB)."""
OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
COMPARED_FILES = ("trace_view.json", "kernel_details.csv", "communication.json", "communication_matrix.json",
                  "step_trace_time.csv")
"""Files every rank folder must have when any has them (a rank lacking one is refused)."""
NEEDED_FILES = ("trace_view.json", "communication.json", "communication_matrix.json")
"""Files a job import reads for every rank (of the text export)."""
DB_EXPORT = "ascend_pytorch_profiler_*.db"
DB_NEEDED = (DB_EXPORT, "analysis.db")
"""The db export's files a job import reads instead (trace from the profiler db, communication from analysis.db)."""
_RANK_IN_NAME = re.compile(r"(?:^|_)rank_?(\d{1,7})(?:_|$)", re.IGNORECASE)
_INFO_NAME = re.compile(r"^profiler_info_(\d{1,7})\.json$")


@dataclass(frozen=True)
class RankFolder:
    """One rank's `*_ascend_pt` folder and what it must share with the job's other ranks."""

    rank: int
    path: Path
    level: str
    steps: tuple[str, ...]
    files: frozenset[str]
    soc: str

    @property
    def output(self) -> Path:
        return self.path / OUTPUT_DIR


def job_folders(path: str | Path) -> list[Path]:
    """The `*_ascend_pt` directories directly in `path` (a folder that is not itself a profile); [] otherwise.
    Bounded: more than MAX_RANK_FOLDERS rank folders (or MAX_SCANNED entries) is refused."""
    p = Path(path)
    try:
        if not p.is_dir() or p.name.endswith("_ascend_pt") or (p / OUTPUT_DIR).is_dir():
            return []
        out: list[Path] = []
        with os.scandir(p) as it:
            for n, entry in enumerate(it):
                if n >= MAX_SCANNED:
                    raise ProfileFormatError(f"{p}: more than {MAX_SCANNED} entries; give the folder that holds "
                                             f"the job's *_ascend_pt rank folders")
                if entry.name.endswith("_ascend_pt") and _is_dir(entry):
                    out.append(Path(entry.path))
                    if len(out) > MAX_RANK_FOLDERS:
                        raise ProfileFormatError(f"{p}: more than {MAX_RANK_FOLDERS} *_ascend_pt rank folders; a "
                                                 f"job import takes at most {MAX_RANK_FOLDERS} ranks")
    except (ValueError, OSError) as exc:  # a NUL byte in the path, a permission or loop error
        if isinstance(exc, ProfileFormatError):
            raise
        raise ProfileFormatError(f"{str(p)[:200]!r}: cannot list the folder ({exc}); give the folder of the "
                                 f"job's *_ascend_pt rank folders") from None
    return sorted(out)


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError as exc:  # a symbolic link loop, a dangling mount
        raise ProfileFormatError(f"{entry.path}: cannot read this rank folder ({exc.strerror}); remove it or point "
                                 f"it at a rank folder") from None


def is_job_folder(path: str | Path) -> bool:
    """Whether `path` holds rank folders of a job with collectives (any has a communication.json): those are
    imported as one scenario; rank folders without communication files are imported one by one."""
    return any((d / OUTPUT_DIR / "communication.json").exists() or _db_collectives(d / OUTPUT_DIR / "analysis.db")
               for d in job_folders(path))


def _db_collectives(path: Path) -> bool:
    """Whether an analysis.db (the db export's) lists communication ops; a damaged one counts (the job import
    then names its damage)."""
    if not path.exists():
        return False
    import sqlite3  # lazy: only a db export needs it
    try:
        con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            return con.execute("SELECT 1 FROM CommAnalyzerTime LIMIT 1").fetchone() is not None
        finally:
            con.close()
    except (sqlite3.Error, OSError, ValueError):
        return True


def db_steps(path: Path) -> tuple[str, ...]:
    """The step ids of an analysis.db's StepTraceTime (as step_trace_time.csv's Step column)."""
    from opsim.ingest.profiler_db import _connect, _require, _rows  # lazy: only a db export needs it
    with _connect(path, "analysis.db (torch_npu's db export)") as (p, con):
        _require(p, con, {"StepTraceTime": ("step",)})
        return tuple(str(r[0]).strip()[:32] for r in _rows(p, con, "StepTraceTime", "SELECT step FROM StepTraceTime"))


def describe(d: Path) -> RankFolder:
    """The rank id, level, steps, files and SoC of one rank folder (refused naming folder and field)."""
    rank, level = _rank_and_level(d)
    files = frozenset(f for f in COMPARED_FILES + ("analysis.db",) if os.path.lexists(d / OUTPUT_DIR / f))
    if any((d / OUTPUT_DIR).glob(DB_EXPORT)):
        files |= {DB_EXPORT}
    steps = _steps(d / OUTPUT_DIR / "step_trace_time.csv") if "step_trace_time.csv" in files else (
        db_steps(d / OUTPUT_DIR / "analysis.db") if "analysis.db" in files else ())
    soc = _soc(d / OUTPUT_DIR / "kernel_details.csv") if "kernel_details.csv" in files else ""
    return RankFolder(rank=rank, path=d, level=level, steps=steps, files=files, soc=soc)


def _rank_and_level(d: Path) -> tuple[int, str]:
    infos = []
    with os.scandir(d) as it:
        for n, entry in enumerate(it):
            if n >= MAX_SCANNED:
                raise ProfileFormatError(f"{d}: more than {MAX_SCANNED} entries; not a torch_npu rank folder")
            m = _INFO_NAME.match(entry.name)
            if m:
                infos.append((int(m.group(1)), Path(entry.path)))
    if len(infos) > 1:
        raise ProfileFormatError(f"{d}: field rank_id: {len(infos)} profiler_info_*.json files "
                                 f"({', '.join(sorted(p.name for _, p in infos))}); a rank folder has one")
    if not infos:
        m = _RANK_IN_NAME.search(d.name[: -len("_ascend_pt")])
        if m is None:
            raise ProfileFormatError(f"{d}: field rank_id: no profiler_info_{{rank}}.json and no rank in the folder "
                                     f"name; keep the profiler_info file torch_npu wrote")
        return int(m.group(1)), ""
    rank, info = infos[0]
    data = _json(info)
    rid = data.get("rank_id", rank)
    if isinstance(rid, bool) or not isinstance(rid, int) or rid != rank:
        raise ProfileFormatError(f"{info}: field rank_id is {str(rid)[:20]!r} but the file is named for rank "
                                 f"{rank}; keep the profiler_info file torch_npu wrote")
    exp = (data.get("config") or {}).get("experimental_config") if isinstance(data.get("config"), dict) else None
    level = exp.get("_profiler_level", "") if isinstance(exp, dict) else ""
    if not isinstance(level, str):
        raise ProfileFormatError(f"{info}: field config.experimental_config._profiler_level is "
                                 f"{str(level)[:20]!r}, expected a level name such as Level1")
    return rank, level[:32]


def _json(path: Path) -> dict:
    size = check_regular_file(path, "profiler_info json")
    if size > MAX_SMALL_FILE:
        raise ProfileFormatError(f"{path}: {size} bytes; a profiler_info file is a few KB")
    try:
        data = json.loads(path.read_bytes().decode("utf-8-sig"))
    except RecursionError:
        raise ProfileFormatError(f"{path}: JSON nested too deeply; keep the file torch_npu wrote") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProfileFormatError(f"{path}: not valid JSON ({str(exc)[:100]})") from None
    if not isinstance(data, dict):
        raise ProfileFormatError(f"{path}: field (top level) is {type(data).__name__}, expected an object")
    return data


def _steps(path: Path) -> tuple[str, ...]:
    size = check_regular_file(path, "step_trace_time.csv")
    if size > MAX_SMALL_FILE:
        raise ProfileFormatError(f"{path}: {size} bytes; a step_trace_time.csv is a few KB per step")
    try:
        rows = list(csv.reader(io.StringIO(path.read_bytes().decode("utf-8-sig"))))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ProfileFormatError(f"{path}: not a CSV file ({str(exc)[:100]})") from None
    if not rows or "Step" not in rows[0]:
        raise ProfileFormatError(f"{path}: field Step: no Step column; give the step_trace_time.csv torch_npu "
                                 f"wrote")
    i = rows[0].index("Step")
    return tuple(r[i].strip()[:32] for r in rows[1:] if len(r) > i)


def _soc(path: Path) -> str:
    # lazy: keeps SimPy out of importing opsim.importer.job
    from opsim.calibration.soc_evidence import match_preset, table_evidence
    return match_preset(table_evidence(path))  # read as a stream: a rank's table is never held


def check_consistent(folders: list[RankFolder]) -> None:
    """Refuse rank folders that cannot be one job: the first disagreement, naming the folder and the field."""
    seen: dict[int, RankFolder] = {}
    for f in folders:
        if f.rank in seen:
            raise ProfileFormatError(f"{f.path}: field rank_id: rank {f.rank} is also {seen[f.rank].path.name}; "
                                     f"each rank folder must be a different rank")
        seen[f.rank] = f
    ref = min(folders, key=lambda f: f.rank)
    for f in folders:
        for field, mine, theirs in (("profiler level", f.level, ref.level), ("Step", f.steps, ref.steps),
                                    ("SoC", f.soc, ref.soc)):
            if mine != theirs:
                raise ProfileFormatError(f"{f.path}: field {field}: {_show(mine)} but rank {ref.rank} "
                                         f"({ref.path.name}) has {_show(theirs)}; import rank folders of one run")
        for name in COMPARED_FILES + DB_NEEDED:
            has = [g for g in folders if name in g.files]
            if has and name not in f.files:
                raise ProfileFormatError(f"{f.path}: field {OUTPUT_DIR}/{name}: missing, but rank {has[0].rank} "
                                         f"({has[0].path.name}) has it; export every rank the same way")
    if all(n in ref.files for n in DB_NEEDED) and "trace_view.json" not in ref.files:
        return  # the db export: its profiler db and analysis.db hold what the text export's files do
    for name in NEEDED_FILES:
        if name not in ref.files:
            raise ProfileFormatError(f"{ref.path}: field {OUTPUT_DIR}/{name}: missing; a job import needs each "
                                     f"rank's trace_view.json, communication.json and communication_matrix.json "
                                     f"(torch_npu's text export at profiler level Level1 or higher), or its "
                                     f"{DB_EXPORT} and analysis.db (the db export)")


def _show(value: object) -> str:
    if isinstance(value, tuple):
        return "steps " + (", ".join(value[:8]) or "none")
    return repr(value) if value else "none"


def rank_folder(path: str | Path) -> Path:
    """One rank's `*_ascend_pt` folder given as the folder or its ASCEND_PROFILER_OUTPUT, to import as a rank of
    its job (`opsim import --job`): its HCCL ops need the communication files naming their groups."""
    p = Path(path)
    if p.name == OUTPUT_DIR:
        p = p.parent
    try:
        out = p / OUTPUT_DIR
        usable = p.name.endswith("_ascend_pt") and out.is_dir()
        comm = usable and (os.path.lexists(out / "communication.json") or _db_collectives(out / "analysis.db"))
    except (ValueError, OSError) as exc:  # a NUL byte, a name too long, a permission error
        raise ProfileFormatError(f"{str(p)[:200]!r}: cannot read the folder ({exc}); give a rank's *_ascend_pt "
                                 f"folder") from None
    if not usable:
        raise ProfileFormatError(f"{str(p)[:200]}: not a rank's *_ascend_pt folder with an {OUTPUT_DIR}; --job "
                                 f"imports one rank's profile folder as a rank of its job")
    if not comm:
        raise ProfileFormatError(f"{out / 'communication.json'}: missing; --job needs the rank's communication "
                                 f"files (torch_npu writes them for a job with HCCL collectives); import without "
                                 f"--job to replay this rank alone")
    return p


def importable_as_job(path: str | Path) -> bool:
    """Whether `path` is one rank's folder that `opsim import --job` can import as a rank of its job."""
    try:
        rank_folder(path)
    except ProfileFormatError:
        return False
    return True


def rank_folders(path: str | Path, *, single: bool = False) -> list[RankFolder]:
    """The checked rank folders of a job folder (refused when inconsistent); [] when `path` is no job folder.
    `single`: `path` is one rank's folder, imported as the job's only observed rank."""
    folders = [describe(d) for d in ([rank_folder(path)] if single else job_folders(path))]
    if folders:
        check_consistent(folders)
    return sorted(folders, key=lambda f: f.rank)


__all__ = ["RankFolder", "job_folders", "is_job_folder", "rank_folder", "importable_as_job", "rank_folders", "check_consistent", "describe",
           "MAX_RANK_FOLDERS"]
