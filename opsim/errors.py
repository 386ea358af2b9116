"""User-facing errors.

Framework-level calls (everything that mirrors an opbase C API) return ``AclnnStatus`` codes and never
raise for a framework failure. The classes here are for the user-facing layers (scenario files, CLI,
Python API misuse) and for simulator self-checks; each message names what was wrong and how to fix it.
"""
from __future__ import annotations


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
    """A scenario file is invalid: the message names the file, the line, the field and what is allowed."""


class ProfileFormatError(InvalidArgumentError):
    """A profiler file (kernel_details.csv, op_summary_*.csv, trace_view.json) cannot be read: the message
    names the file, the row or position, the column and how to fix it."""


class CalibrationError(InvalidArgumentError):
    """A calibration file is invalid: the message names the file, the field and what is allowed."""


class SimulationError(OpsimError):
    """The simulation itself found a fatal inconsistency (never raised for ordinary opbase failures)."""
