"""User-facing errors.

Framework-level calls (everything that mirrors an opbase C API) return ``AclnnStatus`` codes and never
raise for a framework failure. The classes here are for the user-facing layers (scenario files, CLI,
Python API misuse) and for simulator self-checks; each message names what was wrong and how to fix it.
"""
from __future__ import annotations
import reprlib


class OpsimError(Exception):
    """Base class of every error opsim raises on purpose."""


class InvalidArgumentError(OpsimError, ValueError):
    """A value passed to an opsim API is outside what the API accepts (names the argument and the fix)."""


class UnsupportedTypeError(OpsimError, TypeError):
    """A Python value whose type has no opbase counterpart (for example in an OpArg group)."""


class UseAfterDestroyError(OpsimError, RuntimeError):
    """A framework object was used after it was destroyed: a lifetime bug the simulator detects."""


class OutputPathError(InvalidArgumentError):
    """An output directory opsim cannot use (a file in the way, no permission, a user's file it would replace)."""


class ScenarioError(OpsimError):
    """A scenario file is invalid: the message names the file, the line, the field and what is allowed.

    When several problems were found, `entries` holds each "file:line: field: message" in line order and
    `label` the file, so the CLI can show the first in one line and say how to list the rest."""

    def __init__(self, message: str, entries: tuple[str, ...] = (), label: str = "") -> None:
        super().__init__(message)
        self.entries = entries
        self.label = label


class ProfileFormatError(InvalidArgumentError):
    """A profiler file (kernel_details.csv, op_summary_*.csv, trace_view.json) cannot be read: the message
    names the file, the row or position, the column and how to fix it."""


class CalibrationError(InvalidArgumentError):
    """A calibration file is invalid: the message names the file, the field and what is allowed."""


class SimulationError(OpsimError):
    """The simulation itself found a fatal inconsistency (never raised for ordinary opbase failures)."""


MAX_SHOWN = 120
"""Characters of a user's value echoed in a message (a 1,000,000-character value is shown cut, with its length)."""


def _escape(text: str) -> str:
    """Control and format characters (NUL, ESC, a right-to-left override...) as escapes, as repr writes them."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def shown(value: object, limit: int = MAX_SHOWN, *, quote: bool = True) -> str:
    """`value` for a message: repr-like (strings quoted when `quote`), non-printable characters escaped, cut to
    about `limit` characters with the full length said. Bounded work whatever the value's size."""
    if isinstance(value, str):
        head = _escape(value[:limit])
        text = "'" + head.replace("'", "\\'") + "'" if quote else head
        return text + (f"... ({len(value):,} characters)" if len(value) > limit else "")
    r = reprlib.Repr()
    r.maxstring = r.maxother = r.maxlong = limit
    r.maxlist = r.maxtuple = r.maxdict = r.maxset = 8
    r.maxlevel = 3
    text = _escape(r.repr(value))
    return text if len(text) <= limit + 20 else text[:limit] + "..."


def printable_message(text: str, line_limit: int = 1000, max_lines: int = 60) -> str:
    """An error message safe to print: every line escaped (see `shown`) and cut to `line_limit` characters,
    at most `max_lines` lines. The CLI prints every error through it."""
    lines = text.split("\n")
    out = []
    for line in lines[:max_lines]:
        cut = _escape(line[:line_limit])
        out.append(cut + (f"... ({len(line):,} characters)" if len(line) > line_limit else ""))
    if len(lines) > max_lines:
        out.append(f"... and {len(lines) - max_lines} more lines")
    return "\n".join(out)
