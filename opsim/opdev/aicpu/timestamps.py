"""AI CPU phase timestamps (GE_PROFILING_TO_STD_OUT): the process-global record and its stdout block.

opbase keeps ten process-global timespecs, stamps them with the monotonic clock while the switch is on, and
prints seven durations at the end of every task Run. Here a stamp is the simulated time at which the host
replay reaches that point, written at that simulated time (in a SimPy run the write is scheduled on the
event queue), so "the most recent lookup on any thread" and the print order are simulated-time order. The
switch (`process.aicpu_timestamp_enabled`) is set by every GetOrCreateTask when the host code runs.

Printed format (exact, printf("%s : %f \\n")):

    test case opType: <op>, index: <n>
    FindTask           : 0.500000 
    ...                (7 lines; label left-justified to 18 characters, a trailing space)
    <empty line>

A duration follows opbase's timespec arithmetic: same seconds field -> end.nsec - start.nsec, else
end.nsec + 1e9 - start.nsec (one second at most), as unsigned 64-bit, printed in microseconds.
"""
from __future__ import annotations

from typing import Any, Callable

from opsim.trace.timefmt import to_ns

# Timestamp indices (aicpu_utils.h).
K_FIND_TASK_START = 0
K_FIND_TASK_END = 1
K_UPDATE_SHAPE_START = 2
K_UPDATE_SHAPE_END = 3
K_SHAPE_H2D_END = 4
K_UPDATE_ARGS_START = 5
K_UPDATE_ARGS_END = 6
K_LAUNCH_END = 7
K_SHAPE_D2H_COPY_END = 8
K_UPDATE_OUTPUT_SHAPE_END = 9
K_AICPU_TIMESTAMP_NUM = 10

#: The printed lines: label (already padded as opbase writes it), start index, end index.
PRINT_LINES: tuple[tuple[str, int, int], ...] = (
    ("FindTask          ", K_FIND_TASK_START, K_FIND_TASK_END),
    ("UpdateShape       ", K_UPDATE_SHAPE_START, K_UPDATE_SHAPE_END),
    ("ShapeH2D          ", K_UPDATE_SHAPE_END, K_SHAPE_H2D_END),
    ("UpdateArgs        ", K_UPDATE_ARGS_START, K_UPDATE_ARGS_END),
    ("Launch            ", K_UPDATE_ARGS_END, K_LAUNCH_END),
    ("CopyShapeD2H      ", K_LAUNCH_END, K_SHAPE_D2H_COPY_END),
    ("UpdateOutputShape ", K_SHAPE_D2H_COPY_END, K_UPDATE_OUTPUT_SHAPE_END),
)

_NS_PER_SEC = 1_000_000_000
_U64 = 1 << 64


def at_simulated_time(ctx: Any, fn: Callable[[float], None]) -> None:
    """Run `fn(t)` at simulated time t, the time the thread's replay reaches this point.

    The host replay reaches a point before the simulation clock does (it runs a call's actions eagerly), so
    with a SimPy device the call is put on the event queue for time t; without one it runs during the replay.
    """
    dev = ctx.process.device
    env = getattr(dev, "env", None)
    if env is None:
        ctx.at(fn)
        return

    def _schedule(t: float) -> None:
        delay = t - env.now
        if delay <= 0:
            fn(t)
        else:
            env.timeout(delay).callbacks.append(lambda _ev: fn(t))

    ctx.at(_schedule)


def set_enabled(process: Any) -> bool:
    """GetOrCreateTask step 1: isEnable := GE_PROFILING_TO_STD_OUT starts with '1' (re-read every call)."""
    enabled = process.ge_profiling
    process.aicpu_timestamp_enabled = enabled
    return enabled


def record(ctx: Any, index: int) -> None:
    """RecordAicpuTime(index): only while the switch is on."""
    process = ctx.process
    if not process.aicpu_timestamp_enabled:
        return
    stamps = process.aicpu_timestamps

    def _stamp(t: float) -> None:
        stamps[index] = t

    at_simulated_time(ctx, _stamp)


def to_timespec(t_us: float) -> tuple[int, int]:
    """Simulated microseconds as a monotonic timespec (seconds, nanoseconds)."""
    ns = to_ns(t_us)
    return ns // _NS_PER_SEC, ns % _NS_PER_SEC


def duration_ns(start_us: float, end_us: float) -> int:
    """AicpuPrintTimeInfo's unsigned nanosecond difference of two stamps."""
    s_sec, s_nsec = to_timespec(start_us)
    e_sec, e_nsec = to_timespec(end_us)
    if s_sec != e_sec:
        ns = e_nsec + _NS_PER_SEC - s_nsec
    else:
        ns = e_nsec - s_nsec
    return ns % _U64


def format_line(label: str, ns: int) -> str:
    """One printed line: `<label 18 chars> : <us with 6 decimals> ` and a newline."""
    return "%s : %f \n" % (label.ljust(18), ns / 1000.0)


def format_block(op_type: str, index: int, stamps: list[float]) -> list[str]:
    """The lines PrintAicpuAllTimeStampInfo writes for one task Run."""
    lines = [f"test case opType: {op_type}, index: {index}\n"]
    for label, start, end in PRINT_LINES:
        lines.append(format_line(label, duration_ns(stamps[start], stamps[end])))
    lines.append("\n")
    return lines


def print_all(ctx: Any, op_type: str) -> None:
    """PrintAicpuAllTimeStampInfo: at the end of a task Run while the switch is on; the block index is a
    process-wide counter taken when the block is printed."""
    process = ctx.process
    if not process.aicpu_timestamp_enabled:
        return

    def _print(t: float) -> None:
        index = process.aicpu_print_index
        process.aicpu_print_index = index + 1
        write = process.stdout
        for line in format_block(op_type, index, process.aicpu_timestamps):
            write(line)

    at_simulated_time(ctx, _print)


__all__ = [
    "K_FIND_TASK_START", "K_FIND_TASK_END", "K_UPDATE_SHAPE_START", "K_UPDATE_SHAPE_END", "K_SHAPE_H2D_END",
    "K_UPDATE_ARGS_START", "K_UPDATE_ARGS_END", "K_LAUNCH_END", "K_SHAPE_D2H_COPY_END", "K_UPDATE_OUTPUT_SHAPE_END",
    "K_AICPU_TIMESTAMP_NUM", "PRINT_LINES", "at_simulated_time", "set_enabled", "record", "to_timespec",
    "duration_ns", "format_line", "format_block", "print_all",
]
