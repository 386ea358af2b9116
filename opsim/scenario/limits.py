"""The budgets a scenario's run must stay within: the simulated horizon and epoch (so every time fits int64
nanoseconds at 1 ns resolution), and the call and numerics-memory budgets a caller may change.

Every bound here is an opsim limit (a protection against hostile or mistaken input), not a hardware number;
docs/scenarios.md ("Limits") lists them. The bounds of the YAML and data themselves (size, depth, aliases,
nodes, integer length) are `opsim.yamlio.limits`'.
"""
from __future__ import annotations

from dataclasses import dataclass

INT64_MAX = (1 << 63) - 1
NS_PER_US = 1000
MAX_HORIZON_US = (1 << 53) // NS_PER_US
"""Longest simulated time (us, about 104 days): below 2**53 ns a float64 time in microseconds keeps 1 ns
resolution, and with `epoch_us` added it still fits int64 nanoseconds."""
MAX_EPOCH_US = INT64_MAX // NS_PER_US - MAX_HORIZON_US
"""Largest `epoch_us`: epoch plus the longest horizon, in nanoseconds, fits int64."""
DEFAULT_MAX_CALLS = 10 ** 8
"""Default call budget (`--max-calls`): about an hour of simulation at the measured ~30k calls/s."""
DEFAULT_NUMERICS_BYTES = 2 << 30
"""Default host-memory budget for tensor data when `numerics: true` (2 GiB; `--max-numerics-mib`)."""


@dataclass(frozen=True)
class Limits:
    """The budgets a caller may change (the CLI's --max-calls, --max-numerics-mib and --max-file-mib)."""

    max_calls: int = DEFAULT_MAX_CALLS
    numerics_bytes: int = DEFAULT_NUMERICS_BYTES
    file_bytes: int | None = None
    """The largest scenario file read (the CLI's --max-file-mib; a long imported replay may need more); None:
    the YAML limit, opsim.yamlio.limits.MAX_FILE_BYTES."""


__all__ = ["Limits", "MAX_HORIZON_US", "MAX_EPOCH_US", "INT64_MAX", "DEFAULT_MAX_CALLS", "DEFAULT_NUMERICS_BYTES"]
