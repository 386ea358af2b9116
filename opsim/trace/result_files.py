"""A finished run's files read back and checked whole when they are loaded (`load_result`, `opsim report`), so
damage is an `InvalidArgumentError` naming the file and the field, never a crash later when a table is used.

- `read_json_file` / `read_gzip_json`: JSON read from a regular file within a size bound (a gzip file's
  decompressed size bounded too: a gzip bomb stops at the bound), nesting and integer length refused as
  errors (Python's recursion and int-conversion limits), never a traceback.
- `records_problem(doc)`: why a records document is not what `Result.save` writes: every record kind with every
  column, columns of equal length, numbers in numeric columns and names in name columns, `outputs` a mapping of
  plain relative names.
- `summary_problem(summary)`: the summary fields `render_table` reads, with their types, nested ones included.
- `missing_outputs(outdir)`: what an interrupted or damaged run directory lacks.
"""
from __future__ import annotations

import gzip
import json
import math
import os
from pathlib import Path
from typing import Any, Mapping

from opsim.errors import InvalidArgumentError, shown
from opsim.safe_io import open_regular, path_problem, read_bounded, shown_path
from opsim.outputs import STAGING_PREFIX, read_manifest
from opsim.trace.recorder import COLUMNS, _CODED, _NUMERIC

MAX_SUMMARY_BYTES = 64 << 20
"""Largest summary.json read (a run's summary is a few KiB; its error list is capped by the runner)."""
MIN_RECORDS_BYTES = 1 << 30
MAX_GZIP_RATIO = 200
"""records.json.gz decompresses to at most max(MIN_RECORDS_BYTES, MAX_GZIP_RATIO x its size): opsim's records
compress about 10 to 30 times; a gzip bomb (1000 times and more) stops at the bound."""


def _parse(raw: bytes | str, label: str) -> Any:
    try:
        return json.loads(raw)
    except RecursionError:
        raise InvalidArgumentError(f"{label}: JSON nested too deep to be an opsim file; rerun `opsim run` to "
                                   "rewrite it") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidArgumentError(f"{label}: not valid JSON ({shown(str(exc), 200, quote=False)}); rerun "
                                   "`opsim run` to rewrite it") from None


def read_json_file(path: Path, limit: int = MAX_SUMMARY_BYTES, what: str = "an opsim JSON file") -> Any:
    """The JSON of a regular file of at most `limit` bytes."""
    return _parse(read_bounded(path, limit, what, InvalidArgumentError), shown_path(path))


def read_gzip_json(path: Path, what: str = "an opsim records file") -> Any:
    """The JSON of a gzip file, decompressed within the bound above."""
    label = shown_path(path)
    with open_regular(path, what, InvalidArgumentError) as raw:
        size = os.fstat(raw.fileno()).st_size
        limit = max(MIN_RECORDS_BYTES, MAX_GZIP_RATIO * size)
        chunks, total = [], 0
        try:
            with gzip.GzipFile(fileobj=raw) as gz:
                while chunk := gz.read(1 << 22):
                    total += len(chunk)
                    if total > limit:
                        raise InvalidArgumentError(
                            f"{label}: decompresses to more than {limit >> 20} MiB ({MAX_GZIP_RATIO} times its size "
                            "or 1 GiB), more than opsim's records ever do; not a records file of `opsim run`")
                    chunks.append(chunk)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise InvalidArgumentError(f"{label} is not a readable {path.name}: {exc}") from None
    return _parse(b"".join(chunks), label)


def _is_num(v: Any) -> bool:
    return (v.__class__ is int or v.__class__ is float) or v is None


def _is_name(v: Any) -> bool:
    return v.__class__ is str or v is None


def records_problem(doc: Mapping[str, Any]) -> str | None:
    """Why a records document (format and version already checked) is damaged, as "field: problem", or None."""
    for key, kind in (("meta", dict), ("records", dict), ("outputs", dict), ("stdout_text", str)):
        if key in doc and doc[key] is not None and not isinstance(doc[key], kind):
            return f"{key}: must be {'a mapping' if kind is dict else 'text'}, got {type(doc[key]).__name__}"
    if doc.get("summary") is not None and not isinstance(doc["summary"], dict):
        return f"summary: must be a mapping, got {type(doc['summary']).__name__}"
    for name, rel in (doc.get("outputs") or {}).items():
        if not isinstance(rel, str) or path_problem(rel) or os.path.isabs(rel) or ".." in Path(rel).parts:
            return f"outputs.{shown(name, 60, quote=False)}: {shown(rel, 60)} is not a file name inside the run directory"
    records = doc.get("records")
    if not isinstance(records, dict):
        return "records: missing"
    for kind, names in COLUMNS.items():
        cols = records.get(kind)
        if not isinstance(cols, dict):
            return f"records.{kind}: missing or not a mapping of columns"
        lengths = set()
        for col in names:
            values = cols.get(col)
            if not isinstance(values, list):
                return f"records.{kind}.{col}: missing or not a list"
            lengths.add(len(values))
            check = _is_num if col in _NUMERIC[kind] else _is_name if col in _CODED[kind] else None
            if check is not None and not all(map(check, values)):
                i, bad = next((i, v) for i, v in enumerate(values) if not check(v))
                want = "numbers" if check is _is_num else "names (text)"
                return f"records.{kind}.{col}[{i}]: {shown(bad, 60)} in a column of {want}"
            if check is _is_num and not all(math.isfinite(v) for v in values if v.__class__ is float):
                return f"records.{kind}.{col}: a value that is not finite"
        if len(lengths) > 1:
            return f"records.{kind}: columns of different lengths ({', '.join(map(str, sorted(lengths)))})"
    return None


def missing_outputs(outdir: Path) -> list[str]:
    """What a run directory lacks: the entries its manifest lists that are gone, and staging directories an
    interrupted run left (their names)."""
    missing = [f"{n} (listed in the manifest)" for n in read_manifest(outdir) if not (outdir / n).exists()]
    staging = sorted(p.name for p in outdir.glob(STAGING_PREFIX + "*"))
    return missing + [f"{s} (left by an interrupted run)" for s in staging[:3]]


__all__ = ["read_json_file", "read_gzip_json", "records_problem", "missing_outputs", "MAX_SUMMARY_BYTES"]
