"""GE_PROFILING_TO_STD_OUT text: the AI CPU timestamp blocks and the AI Core path's `Nnopbase time` lines.

With the variable starting with '1', opbase prints to standard output:

- per AI CPU task Run, the block `opsim.opdev.aicpu.timestamps` prints through the process's stdout at the
  simulated time of the print (captured here by `StdoutCapture`, tagged with that time);
- per AI Core executor run, nnopbase's PrintNnopbaseAllTimeStampInfo block: a header line
  `test case opType: <op>, index: <n>` (n counts per thread from 0, as nnopbase's thread_local counter does)
  and eleven `Nnopbase time <phase> : <us> us` lines. These are derived here from the recorder's host spans of
  each ACLNN call, charging each simulated host phase to the nnopbase interval that covers the same work
  (`NNOPBASE_PHASES`); an interval with no simulated counterpart prints 0.000000.

`merge_text` interleaves both kinds in simulated-time order (a stable sort, so lines of one block stay
together and equal times keep their print order).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Iterable

from opsim.trace.timefmt import to_ns, us_text

OP_CALL = "op_call"

NNOPBASE_PHASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("add io and attr", ("add io and attr", "alloc tensor")),
    ("before match cache", ("L2 phase1 entry", "make key")),
    ("match cache", ("match cache",)),
    ("create cache", ("create executor", "build graph", "plan workspace", "release to")),
    ("aging cache", ()),
    ("check static bin", ()),
    ("find bin", ()),
    ("build tiling context", ("infershape",)),
    ("tiling", ("tiling",)),
    ("before launch", ("L2 phase2 entry", "update tensor addr")),
    ("launch", ("launch", "cache replay")),
    ("after launch", ("destroy executor",)),
)
"""nnopbase PrintTime label -> the simulated host phases whose time it reports, in print order."""

AI_CORE_LAUNCH_PHASES = frozenset({"launch", "cache replay"})
"""A call whose spans include one of these launched AI Core work (so nnopbase prints its block)."""

_PHASE_TO_LABEL = {p: label for label, phases in NNOPBASE_PHASES for p in phases}


class StdoutCapture:
    """The simulation's `stdout=`: keeps each write with the simulated time it happened at."""

    def __init__(self, clock: Callable[[], float]):
        self.clock = clock
        self.writes: list[tuple[float, str]] = []

    def write(self, text: str) -> int:
        self.writes.append((self.clock(), text))
        return len(text)

    def __call__(self, text: str) -> int:
        return self.write(text)


def op_type_of(api: str) -> str:
    """"aclnnAddmm" -> "Addmm" (the op type nnopbase prints)."""
    return api[5:] if api.startswith("aclnn") and len(api) > 5 else api


def format_nnopbase_line(label: str, us: float) -> str:
    """OP_EVENT("Nnopbase time %s : %f us"): the duration is whole nanoseconds printed in microseconds."""
    return f"Nnopbase time {label} : {us_text(to_ns(us), 6)} us\n"


def aicore_blocks(host: dict[str, list]) -> list[tuple[float, str]]:
    """(simulated time, block text) of every ACLNN call that launched AI Core work, from host-span columns.

    The block is printed when the executor is cleared at the end of the call, so its time is the end of the
    call's op_call span."""
    sums: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    aicore: set[int] = set()
    calls: list[tuple[float, str, str, int]] = []
    for thread, phase, op, start, dur, corr in zip(host["thread"], host["phase"], host["op"], host["start"],
                                                    host["dur"], host["corr"]):
        if corr < 0:
            continue
        if phase == OP_CALL:
            calls.append((start + dur, thread, op, corr))
            continue
        label = _PHASE_TO_LABEL.get(phase)
        if label is not None:
            sums[corr][label] += dur
        if phase in AI_CORE_LAUNCH_PHASES:
            aicore.add(corr)
    calls.sort(key=lambda c: (c[0], c[3]))
    index: dict[Any, int] = defaultdict(int)
    out = []
    for end, thread, api, corr in calls:
        if corr not in aicore:
            continue
        n = index[thread]
        index[thread] = n + 1
        phase_us = sums.get(corr, {})
        lines = [f"test case opType: {op_type_of(api)}, index: {n}\n"]
        lines += [format_nnopbase_line(label, phase_us.get(label, 0.0)) for label, _ in NNOPBASE_PHASES]
        out.append((end, "".join(lines)))
    return out


def merge_text(printed: Iterable[tuple[float, str]], blocks: Iterable[tuple[float, str]]) -> str:
    """Printed writes and derived blocks as one text, in simulated-time order (printed first on ties)."""
    items = [(t, 0, i, s) for i, (t, s) in enumerate(printed)]
    items += [(t, 1, i, s) for i, (t, s) in enumerate(blocks)]
    items.sort(key=lambda x: (x[0], x[1], x[2]))
    return "".join(s for _, _, _, s in items)


__all__ = ["NNOPBASE_PHASES", "StdoutCapture", "aicore_blocks", "merge_text", "format_nnopbase_line", "op_type_of"]
