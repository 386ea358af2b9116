"""`opsim report DIR`: a finished run's summary table printed again, from its summary.json, checked first.

A directory that is not a complete run (an interrupted one, files gone) is explained: what is missing and how
to get it back (exit 2). A summary that is damaged (wrong types at any depth, nested too deep, too large) is
named with the field. What is printed is escaped (the summary echoes names a user wrote).
"""
from __future__ import annotations

from pathlib import Path

from opsim.errors import InvalidArgumentError, printable_message
from opsim.outputs import read_manifest
from opsim.safe_io import check_path, shown_path
from opsim.trace.result_files import missing_outputs, read_json_file
from opsim.trace.summary import render_table, summary_problem

EXIT_OK, EXIT_SIM_ERRORS, EXIT_BAD_INPUT = 0, 1, 2
PERFETTO_HINT = "open it at https://ui.perfetto.dev (\"Open trace file\")"


def report(outdir: Path) -> tuple[str, int]:
    """(the text to print, the exit code) for the run directory `outdir`; InvalidArgumentError when it holds no
    complete, readable run."""
    check_path(outdir, "a run's output directory")
    label = shown_path(outdir)
    if not outdir.is_dir():
        raise InvalidArgumentError(f"{label}: not a directory; give the output directory of a run")
    path = outdir / "summary.json"
    missing = missing_outputs(outdir)
    if not path.is_file():
        why = f"; it lacks {', '.join(missing)}" if missing else ""
        raise InvalidArgumentError(f"{label}: no summary.json here, so not a finished run{why}; give the output "
                                   "directory of a finished `opsim run`, or run it again")
    if missing:
        raise InvalidArgumentError(f"{label}: an incomplete run: it lacks {', '.join(missing)}; run `opsim run` "
                                   "into it again to rewrite every output")
    summary = read_json_file(path, what="a summary.json")
    problem = summary_problem(summary)
    if problem:
        raise InvalidArgumentError(f"{shown_path(path)}: not an opsim summary: {problem}; rerun `opsim run` to "
                                   "rewrite it")
    try:
        table = render_table(summary)
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:  # a type the schema let by
        raise InvalidArgumentError(f"{shown_path(path)}: not an opsim summary: {type(exc).__name__}: {exc}; "
                                   "rerun `opsim run` to rewrite it") from None
    files = sorted(read_manifest(outdir)) or sorted(p.name for p in outdir.iterdir() if p.is_file())
    lines = [table, f"\nfiles in {label}: {', '.join(files)}\n"]
    if "trace.json" in files:
        lines.append(f"trace.json: {PERFETTO_HINT}\n")
    text = "".join(printable_message(part, line_limit=2000, max_lines=10_000) for part in lines)
    return text, EXIT_SIM_ERRORS if summary.get("errors") else EXIT_OK


__all__ = ["report"]
