"""The import report: every event the importer could not place, counted by reason, never dropped silently."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from opsim.outputs import write_text_atomic

LATE_US = 1.0
"""A job's filled rank gets its own threads only when its model rank's recorded waits exceed this (opsim's
threshold: msprof rounds its times to 0.02 us); the report mentions the added idle above it too."""


@dataclass
class ImportReport:
    """Counted warnings (events not replayed) and notes (events kept only as host time), plus the figures."""

    source: str = ""
    warnings: dict[str, int] = field(default_factory=dict)
    notes: dict[str, int] = field(default_factory=dict)
    examples: dict[str, str] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)

    def warn(self, reason: str, count: int = 1, example: str | None = None) -> None:
        if count <= 0:
            return
        self.warnings[reason] = self.warnings.get(reason, 0) + count
        if example and reason not in self.examples:
            self.examples[reason] = example

    def note(self, reason: str, count: int = 1) -> None:
        if count > 0:
            self.notes[reason] = self.notes.get(reason, 0) + count

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "figures": self.figures,
                "warnings": [{"reason": r, "count": n, **({"example": self.examples[r]} if r in self.examples else {})}
                             for r, n in sorted(self.warnings.items())],
                "notes": [{"reason": r, "count": n} for r, n in sorted(self.notes.items())]}

    def write(self, path: str | Path) -> Path:
        return Path(write_text_atomic(path, json.dumps(self.as_dict(), indent=2, sort_keys=False) + "\n"))

    def summary_lines(self) -> list[str]:
        """A few lines for stdout: the figures, then the warnings by count."""
        f = self.figures
        if "job" in f:  # a job: one pair of lines per observed rank, then the job's shape
            lines = [f"rank {r}: {line}" for r, rf in sorted(f.get("ranks", {}).items()) for line in _rank_lines(rf)]
            lines += job_lines(f)
        else:
            lines = _rank_lines(f)
        total = sum(self.warnings.values())
        if total:
            lines.append(f"{total} event(s) not replayed:")
            lines += [f"  {n:6d}  {r}" + (f" (e.g. {self.examples[r]})" if r in self.examples else "")
                      for r, n in sorted(self.warnings.items(), key=lambda kv: (-kv[1], kv[0]))]
        else:
            lines.append("every call and kernel was placed")
        return lines


def job_lines(figures: dict[str, Any]) -> list[str]:
    """The report's job lines: observed ranks, groups and each filled rank."""
    job = figures.get("job")
    if not job:
        return []
    lines = [f"job: {len(job['observed'])} observed rank(s) {job['observed']} of {job['size']}; groups: " +
             ", ".join(f"{g['name']} ({len(g['ranks'])} ranks)" for g in job["groups"])]
    for f in figures.get("filled_ranks", []):
        late = f["extra_idle_us"] > LATE_US
        lines.append(f"  rank {f['rank']} filled like rank {f['like']}" +
                     (f" plus {f['extra_idle_us']} us of idle over its collectives (rank {f['like']}'s recorded "
                      f"waits for the last member)" if late else ""))
    return lines


def _rank_lines(f: dict[str, Any]) -> list[str]:
    lines = [f"imported {f.get('calls', 0)} calls ({f.get('phase1', 0)} with phase 1) on "
             f"{f.get('threads', 0)} thread(s), {f.get('kernels', 0)} kernels on {f.get('streams', 0)} "
             f"stream(s), {f.get('profiled_ops', 0)} profiled op(s), {f.get('steps', 0)} step(s)"]
    dev = f.get("device_tasks") or {}
    if any(dev.values()):
        lines.append(f"{sum(dev.values())} other device task(s) replayed: " +
                     ", ".join(f"{n} {k}" for k, n in dev.items() if n))
    return lines


__all__ = ["ImportReport", "LATE_US"]
