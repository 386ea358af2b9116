"""The run's progress bars on stderr: one while simulating (calls), one while writing the outputs (files).

Both appear only on a terminal, after a second, and only when tqdm (an optional dependency) is installed.
"""
from __future__ import annotations

import sys
from typing import Any, Callable


def progress_bar(total: int, enabled: bool) -> tuple[Callable[[int], None] | None, Callable[[], None]]:
    """A tqdm bar on stderr that appears after one second, only on a terminal."""
    if not enabled or total <= 0 or not sys.stderr.isatty():
        return None, lambda: None
    try:
        from tqdm import tqdm  # lazy: an optional dependency, looked for where it is used
    except ImportError:
        return None, lambda: None
    bar = tqdm(total=total, unit="call", delay=1.0, file=sys.stderr, dynamic_ncols=True, leave=False)
    last = [0]

    def update(n: int) -> None:
        bar.update(n - last[0])
        last[0] = n

    return update, bar.close


def writing_bar(config: Any, profiler: str, enabled: bool) -> Callable[[str | None], None]:
    """A second tqdm bar while the outputs are written: one step per writer (called with the writer's name as
    it starts, None at the end). Only on a terminal, like the simulating bar."""
    c = config.outputs
    n = 1 + (config.trace and c.trace) + 2 * (config.trace and c.csv) + (bool(profiler) and config.trace) \
        + bool(c.records)
    if not enabled or not sys.stderr.isatty():
        return lambda name: None
    try:
        from tqdm import tqdm  # lazy: an optional dependency, looked for where it is used
    except ImportError:
        return lambda name: None
    bar = tqdm(total=n, unit="file", delay=1.0, file=sys.stderr, dynamic_ncols=True, leave=False, desc="writing")

    def stage(name: str | None) -> None:
        if name is None:
            bar.close()
            return
        if bar.n or bar.desc != "writing":
            bar.update(1)
        bar.set_description(f"writing {name}")

    return stage


__all__ = ["progress_bar", "writing_bar"]
