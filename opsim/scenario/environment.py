"""The opbase environment variables in force for a run, and where each value came from.

opbase reads its variables (`ENV_VARS`) from the process environment, so a value exported in the shell that
starts `opsim` applies, as it would to a real application. Three sources, later ones winning:

1. ``shell``: the process environment of `opsim` (only the documented `ENV_VARS`; nothing else is read);
2. ``scenario``: the scenario's ``env:`` mapping, which plays the launch script that exports variables before
   starting the application (an ``export`` in the script overrides the caller's shell);
3. ``--set``: ``--set env.NAME=VALUE`` on the command line (``overrides`` in Python), the most specific.

Values are strings, as in a real environment.
"""
from __future__ import annotations

import os
from typing import Any, Mapping

from opsim.scenario.schema import ENV_VARS

SOURCES = ("shell", "scenario", "--set")
"""Where a value can come from, lowest precedence first."""


def resolve_env(scenario_env: Mapping[str, Any], set_names: set[str],
                environ: Mapping[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """NAME -> (value, source) of every documented variable in force. ``scenario_env`` is the scenario's
    ``env`` after overrides; ``set_names`` are the names given with ``--set env.NAME``; ``environ`` defaults to
    ``os.environ``."""
    out: dict[str, tuple[str, str]] = {k: (v, "shell") for k, v in shell_values(environ).items()}
    for name, value in scenario_env.items():
        out[name] = (str(value), "--set" if name in set_names else "scenario")
    return dict(sorted(out.items()))


def shell_values(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The documented variables set in ``environ`` (default ``os.environ``)."""
    shell = os.environ if environ is None else environ
    return {name: str(shell[name]) for name in ENV_VARS if name in shell}


__all__ = ["resolve_env", "shell_values", "SOURCES"]
