"""Checks shared by the scenario and CLI tests: output parsing, the reference text format, trace structure."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
BUNDLED = sorted(p.name for p in SCENARIOS.glob("*.yaml"))
TESTED = [n for n in BUNDLED if n != "large.yaml"]

# msprof's column names, written out literally (op summary assembler: base, tensor and per-core time columns).
MSPROF_OP_SUMMARY = [
    "Device_id", "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "OP State", "Task Type",
    "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)", "Block Num", "Mix Block Num",
    "HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types",
    "Output Formats", "Context ID", "aicore_time(us)", "aic_total_cycles", "aiv_time(us)", "aiv_total_cycles",
]
MSPROF_TASK_TIME = ["Device_id", "kernel_name", "kernel_type", "stream_id", "task_id", "task_time(us)",
                    "task_start(us)", "task_stop(us)"]

AICPU_LABELS = ["FindTask", "UpdateShape", "ShapeH2D", "UpdateArgs", "Launch", "CopyShapeD2H", "UpdateOutputShape"]
NNOPBASE_LABELS = ["add io and attr", "before match cache", "match cache", "create cache", "aging cache",
                   "check static bin", "find bin", "build tiling context", "tiling", "before launch", "launch",
                   "after launch"]
_HEADER = re.compile(r"^test case opType: (\S+), index: (\d+)$")
_NUM = r"\d+\.\d{6}"


def check_timestamp_text(text: str) -> dict[str, int]:
    """Parse GE_PROFILING_TO_STD_OUT text line by line against opbase's formats; returns block counts.

    AI CPU block: header, 7 lines `<label padded to 18> : <us, 6 decimals> ` (trailing space), an empty line.
    nnopbase block: header, 12 lines `Nnopbase time <label> : <us, 6 decimals> us` in PrintTime order.
    AI CPU indices count up from 0 across the process; nnopbase indices are per thread (not checked here)."""
    lines = text.split("\n")
    assert lines[-1] == "", "the text ends with a newline"
    lines = lines[:-1]
    i = 0
    counts = {"aicpu": 0, "aicore": 0}
    aicpu_index = 0
    while i < len(lines):
        m = _HEADER.match(lines[i])
        assert m, f"line {i + 1}: expected a block header, got {lines[i]!r}"
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if nxt.startswith("Nnopbase time "):
            for k, label in enumerate(NNOPBASE_LABELS):
                line = lines[i + 1 + k]
                assert re.fullmatch(rf"Nnopbase time {re.escape(label)} : {_NUM} us", line), \
                    f"line {i + 2 + k}: {line!r} is not the nnopbase {label!r} line"
            i += 1 + len(NNOPBASE_LABELS)
            counts["aicore"] += 1
        else:
            assert int(m.group(2)) == aicpu_index, f"line {i + 1}: AI CPU index {m.group(2)}, expected {aicpu_index}"
            aicpu_index += 1
            for k, label in enumerate(AICPU_LABELS):
                line = lines[i + 1 + k]
                assert line[:18] == label.ljust(18), f"line {i + 2 + k}: label field {line[:18]!r}"
                assert re.fullmatch(rf" : {_NUM} ", line[18:]), f"line {i + 2 + k}: value field {line[18:]!r}"
            assert lines[i + 1 + len(AICPU_LABELS)] == "", f"line {i + 2 + len(AICPU_LABELS)}: expected an empty line"
            i += 2 + len(AICPU_LABELS)
            counts["aicpu"] += 1
    return counts


def flow_pairs(events: list[dict]) -> tuple[dict, dict]:
    starts = {e["id"]: e for e in events if e.get("ph") == "s"}
    ends = {e["id"]: e for e in events if e.get("ph") == "f"}
    return starts, ends


AICORE_ONLY = """\
name: light
threads:
  - name: a
    program:
      - {op: Add, shape: [8, 8], dtype: float16}
"""
"""A one-call scenario for CLI tests."""


def cli(*argv):
    """Run `opsim ARGV...` in this process: (exit code, stdout, stderr)."""
    import io

    from opsim.cli import main
    out, err = io.StringIO(), io.StringIO()
    code = main(list(map(str, argv)), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()
