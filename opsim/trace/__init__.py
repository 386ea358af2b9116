"""The trace recorder (one columnar event log per simulation) and its exporters."""
from opsim.trace.recorder import COLUMNS, Recorder

__all__ = ["Recorder", "COLUMNS"]
