"""msprof-style `op_summary.csv` and `task_time.csv`, with msprof's column names, so its analysis scripts read them.

op_summary follows msprof's op-summary assembler: the base columns, the tensor columns, then per-core time
columns; one row per compute task (AI Core, AI Vector, AI CPU), sorted by start time; `Task Start Time(us)`
is an absolute epoch microsecond value with three decimals and msprof's trailing TAB; `Task Wait Time(us)` is
msprof's "gap since the previous task on the device ended" (0 for the first row), printed with six decimals
on every row, as std::to_string does. Shapes are written with the literal quotes msprof puts around them.

What the simulator does not model is marked as msprof marks missing data: `Context ID` is N/A, `Mix Block Num`
is 0, `HF32 Eligible` is NO, and the PMU pipe-ratio columns are omitted (only the time and cycle columns that
follow from a task's duration, block count and the SoC clock are written). Tensor columns describe the ACLNN
call's own tensors (the simulator does not record per-kernel tensor descriptors).

task_time.csv has one row per device task (kernels, copies, event records and waits; the simulator's
stream-ordered frees are not runtime tasks and are left out).
"""
from __future__ import annotations

import csv
from typing import Any, Callable, Mapping, TextIO

import numpy as np

from opsim.trace.timefmt import to_ns, to_ns_array, us_text, us_texts

OP_SUMMARY_BASE = ("Device_id", "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "OP State", "Task Type",
                   "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)")
OP_SUMMARY_TENSOR = ("Block Num", "Mix Block Num", "HF32 Eligible", "Input Shapes", "Input Data Types",
                     "Input Formats", "Output Shapes", "Output Data Types", "Output Formats", "Context ID")
OP_SUMMARY_PMU = ("aicore_time(us)", "aic_total_cycles", "aiv_time(us)", "aiv_total_cycles")
OP_SUMMARY_HEADER = OP_SUMMARY_BASE + OP_SUMMARY_TENSOR + OP_SUMMARY_PMU
"""op_summary.csv columns, in order."""

TASK_TIME_HEADER = ("Device_id", "kernel_name", "kernel_type", "stream_id", "task_id", "task_time(us)",
                    "task_start(us)", "task_stop(us)")
"""task_time.csv columns, in order."""

MODEL_ID_SINGLE_OP = 4294967295
"""msprof's Model ID for tasks outside a model (single-op execution, as every ACLNN call)."""
NA = "N/A"
COMPUTE_POOLS = frozenset({"aicore", "vector", "aicpu"})
HOST_FUNC = "HOST_FUNC"

TensorInfo = Mapping[str, str]
"""Input Shapes, Input Data Types, Input Formats, Output Shapes, Output Data Types, Output Formats."""


WAIT_DECIMALS = 6
"""`Task Wait Time(us)` has six decimals on every row (std::to_string's "%f", as msprof prints it)."""


def epoch_us_text(epoch_us: int, t_us: float) -> str:
    """Absolute time epoch_us + t with three decimals, built in integer nanoseconds (exact)."""
    return us_text(epoch_us * 1000 + to_ns(t_us))


def _epoch_texts(epoch_us: int, ns: np.ndarray) -> list[str]:
    """`epoch_us_text` of a column of simulated nanoseconds (Python integers past int64's range)."""
    base = epoch_us * 1000
    if len(ns) and max(abs(base + int(ns.min())), abs(base + int(ns.max()))) >= 2**62:
        return [us_text(base + v) for v in ns.tolist()]
    return us_texts(ns + base)


def total_cycles(dur_ns: int, clock_mhz: float) -> int:
    """aic/aiv_total_cycles of a kernel: core time x core clock (the one formula of op_summary.csv and
    kernel_details.csv)."""
    return round(dur_ns * clock_mhz / 1000.0)


_OP_SUMMARY_INTS = ("device", "stream", "units", "task_id", "block_dim", "corr")
_OP_SUMMARY_TEXTS = ("unit_kind", "op", "task_type")
BLOCK_ROWS = 1 << 13
"""op_summary.csv rows formatted at a time (bounded memory: one block's Python values, never the whole trace)."""


def _device_columns(recorder: Any) -> tuple[dict[str, Any], list] | None:
    """The device records as arrays read from the recorder's columns (the texts as codes into the returned
    values); None when the recorder keeps no columns or a number is not of its column's type (then the
    writers take the record lists, whose values Python compares whatever their type)."""
    from opsim.trace.ascend_host import exact  # lazy: the profiler model loads with op_summary.csv only
    if getattr(recorder, "coded", None) is None or getattr(recorder, "numeric", None) is None:
        return None
    cols: dict[str, Any] = {}
    for name, tc in [(n, "q") for n in _OP_SUMMARY_INTS] + [("start", "d"), ("end", "d")]:
        arr, odd = recorder.numeric("device", name, tc)
        if not exact(odd, tc):
            return None
        cols[name] = arr
    values: list = []
    for name in _OP_SUMMARY_TEXTS:
        cols[name], values = recorder.coded("device", name)
    return cols, values


def _compute_columns(recorder: Any, device_id: int) -> tuple[dict[str, Any], list] | None:
    """The compute tasks of `device_id` sorted as op_summary.csv lists them (start, stream, task id; record
    order on ties), from `_device_columns` (None without them)."""
    dev = _device_columns(recorder)
    if dev is None:
        return None
    cols, values = dev
    compute = np.array([v in COMPUTE_POOLS for v in values] or [False])
    keep = np.flatnonzero(compute[cols["unit_kind"]] & (cols["device"] == device_id))
    keep = keep[np.lexsort((cols["task_id"][keep], cols["stream"][keep], cols["start"][keep]))]
    return {name: col[keep] for name, col in cols.items() if name != "device"}, values


def _text_ranks(codes: Any, values: list) -> Any:
    """Each code's place among the distinct texts `codes` stands for, in string order (None when one of them
    is not a string: their order is then Python's, from the record lists)."""
    present = np.unique(codes).tolist()
    if not all(type(values[c]) is str for c in present):
        return None
    ranks = np.zeros(len(values), dtype=np.int64)
    for r, c in enumerate(sorted(present, key=values.__getitem__)):
        ranks[c] = r
    return ranks[codes]


def _task_time_columns(recorder: Any, device_id: int) -> tuple[dict[str, Any], list] | None:
    """The runtime tasks of `device_id` (not HOST_FUNC) in task_time.csv's order: by (start, stream, task id,
    op, task type, end), record order on ties, as the sort of the record tuples orders them; from
    `_device_columns` (None without them, or when an op or task type is not a string)."""
    dev = _device_columns(recorder)
    if dev is None:
        return None
    cols, values = dev
    host_func = np.array([v == HOST_FUNC for v in values] or [False])
    keep = np.flatnonzero(~host_func[cols["task_type"]] & (cols["device"] == device_id))
    op_rank = _text_ranks(cols["op"][keep], values)
    type_rank = _text_ranks(cols["task_type"][keep], values)
    if op_rank is None or type_rank is None:
        return None
    keep = keep[np.lexsort((cols["end"][keep], type_rank, op_rank, cols["task_id"][keep], cols["stream"][keep],
                            cols["start"][keep]))]
    return {name: cols[name][keep] for name in ("start", "stream", "task_id", "op", "task_type", "end")}, values


def _list_rows(recorder: Any, device_id: int) -> dict[str, list]:
    """`_compute_columns` from the recorder's record lists (values of any type, compared as Python compares
    them)."""
    dev = recorder.records("device")
    rows = [r for r in zip(dev["start"], dev["stream"], dev["task_id"], dev["unit_kind"], dev["units"], dev["op"],
                           dev["task_type"], dev["block_dim"], dev["end"], dev["corr"], dev["device"])
            if r[3] in COMPUTE_POOLS and r[10] == device_id]
    del dev
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    names = ("start", "stream", "task_id", "unit_kind", "units", "op", "task_type", "block_dim", "end", "corr")
    return {name: [r[i] for r in rows] for i, name in enumerate(names)}


def write_op_summary(recorder: Any, fh: TextIO, *, epoch_us: int, clock_mhz: float,
                     tensor_info: Callable[[int], TensorInfo | None] | None = None, device_id: int = 0) -> int:
    """Write op_summary.csv rows for every compute task; returns the row count. The tasks are read from the
    recorder's columns as arrays and written a block of rows at a time; times are formatted a column at a time
    (`us_texts`), and the text of each distinct duration once."""
    from opsim.trace.ascend_host import call_apis  # lazy: the profiler model loads with op_summary.csv only
    api = call_apis(recorder)
    coded = _compute_columns(recorder, device_id)
    if coded is None:
        cols, values = _list_rows(recorder, device_id), None
    else:
        cols, values = coded
    n = len(cols["start"])
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(OP_SUMMARY_HEADER)
    s_ns = to_ns_array(np.asarray(cols["start"], dtype=np.float64))
    e_ns = to_ns_array(np.asarray(cols["end"], dtype=np.float64))
    waits = np.zeros(n, dtype=np.int64)
    if n > 1:
        waits[1:] = np.maximum(0, s_ns[1:] - e_ns[:-1])
    dur_text: dict[int, tuple[str, str]] = {}
    for b0 in range(0, n, BLOCK_ROWS):
        b1 = min(n, b0 + BLOCK_ROWS)
        block = {name: (col[b0:b1].tolist() if values is not None else col[b0:b1]) for name, col in cols.items()}
        if values is not None:
            for name in _OP_SUMMARY_TEXTS:
                block[name] = [values[c] for c in block[name]]
        starts = [t + "\t" for t in _epoch_texts(epoch_us, s_ns[b0:b1])]
        for kind, units, task_id, stream, op, task_type, block_dim, corr, dur_ns, start_text, wait in zip(
                block["unit_kind"], block["units"], block["task_id"], block["stream"], block["op"],
                block["task_type"], block["block_dim"], block["corr"], (e_ns[b0:b1] - s_ns[b0:b1]).tolist(),
                starts, us_texts(waits[b0:b1], WAIT_DECIMALS)):
            texts = dur_text.get(dur_ns)
            if texts is None:
                texts = dur_text[dur_ns] = (us_text(dur_ns), str(total_cycles(dur_ns, clock_mhz)))
            dur, cycles = texts
            l2 = api.get(corr, "")
            info = tensor_info(corr) if tensor_info is not None and corr >= 0 else None
            info = info or {}
            if kind == "aicore":
                pmu = (dur, cycles, NA, NA)
            elif kind == "vector":
                pmu = (NA, NA, dur, cycles)
            else:
                pmu = (NA, NA, NA, NA)
            w.writerow((device_id, MODEL_ID_SINGLE_OP, task_id, stream, f"{l2}_{op}" if l2 else op, op, "dynamic",
                        task_type, start_text, dur, wait,
                        block_dim, 0, "NO",
                        info.get("Input Shapes", NA), info.get("Input Data Types", NA),
                        info.get("Input Formats", NA), info.get("Output Shapes", NA),
                        info.get("Output Data Types", NA), info.get("Output Formats", NA), NA) + pmu)
    return n


def write_task_time(recorder: Any, fh: TextIO, *, epoch_us: int, device_id: int = 0) -> int:
    """Write task_time.csv rows for every runtime task, a block of rows at a time; returns the row count."""
    coded = _task_time_columns(recorder, device_id)
    if coded is None:
        dev = recorder.records("device")
        rows = sorted(
            (start, stream, task_id, op, task_type, end)
            for stream, task_id, op, task_type, start, end, dev_id in zip(
                dev["stream"], dev["task_id"], dev["op"], dev["task_type"], dev["start"], dev["end"], dev["device"])
            if task_type != HOST_FUNC and dev_id == device_id)
        del dev
        names = ("start", "stream", "task_id", "op", "task_type", "end")
        cols, values = {name: [r[i] for r in rows] for i, name in enumerate(names)}, None
        del rows
    else:
        cols, values = coded
    n = len(cols["start"])
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(TASK_TIME_HEADER)
    s_ns = to_ns_array(np.asarray(cols["start"], dtype=np.float64))
    e_ns = to_ns_array(np.asarray(cols["end"], dtype=np.float64))
    for b0 in range(0, n, BLOCK_ROWS):
        b1 = min(n, b0 + BLOCK_ROWS)
        block = {name: (cols[name][b0:b1].tolist() if values is not None else cols[name][b0:b1])
                 for name in ("stream", "task_id", "op", "task_type")}
        if values is not None:
            for name in ("op", "task_type"):
                block[name] = [values[c] for c in block[name]]
        bs, be = s_ns[b0:b1], e_ns[b0:b1]
        for stream, task_id, op, task_type, dur, s_text, e_text in zip(
                block["stream"], block["task_id"], block["op"], block["task_type"], us_texts(be - bs),
                _epoch_texts(epoch_us, bs), _epoch_texts(epoch_us, be)):
            w.writerow((device_id, op or task_type, task_type, stream, task_id, dur, s_text, e_text))
    return n


def tensor_columns(inputs: list[tuple[tuple[int, ...], str, str]],
                   outputs: list[tuple[tuple[int, ...], str, str]]) -> dict[str, str]:
    """msprof's tensor cells from (shape, dtype name, format name) lists: shapes "d0,d1;e0" in literal quotes,
    dtypes and formats joined with ';'."""
    def shapes(ts):
        return '"' + ";".join(",".join(str(d) for d in s) for s, _, _ in ts) + '"'

    return {
        "Input Shapes": shapes(inputs), "Input Data Types": ";".join(d for _, d, _ in inputs),
        "Input Formats": ";".join(f for _, _, f in inputs),
        "Output Shapes": shapes(outputs), "Output Data Types": ";".join(d for _, d, _ in outputs),
        "Output Formats": ";".join(f for _, _, f in outputs),
    }


__all__ = ["OP_SUMMARY_HEADER", "TASK_TIME_HEADER", "write_op_summary", "write_task_time", "tensor_columns",
           "epoch_us_text", "MODEL_ID_SINGLE_OP", "total_cycles"]
