"""The profiler output's CSV tables (kernel_details, op_statistic, step_trace_time) and its small JSON files."""
from __future__ import annotations

import csv
import hashlib
import io
from typing import Iterable, Iterator

from opsim.trace.ascend_model import KERNEL_DETAILS_HEADER, MODEL_ID_NONE, AscendProfile, us_str
from opsim.trace.ascend_pmu import MIX_TYPES, pmu_csv_values
from opsim.trace.timefmt import us_texts


def quoted_shape(text: str) -> str:
    """torch_npu writes shape strings with literal quotes (the advisor strips the first and last character)."""
    return f'"{text}"' if text else ""


def kernel_details_blocks(p: AscendProfile, block_rows: int = 65_536) -> Iterator[str]:
    """kernel_details.csv as text blocks (the header, then `block_rows` rows at a time), as ``csv.writer`` writes
    its rows. The times are formatted a column at a time; the cells a kernel shares with others of the same
    name, op, type, block dim, tensors and PMU split are written once, as CSV text."""
    yield csv_text(KERNEL_DETAILS_HEADER, ())
    kernels = p.kernels
    starts = us_texts([t.start_ns for t in kernels])
    durs = us_texts([t.end_ns - t.start_ns for t in kernels])
    waits = us_texts([t.wait_ns for t in kernels])
    shared: dict[tuple, tuple[str, str]] = {}
    lines: list[str] = []
    for t, start, dur, wait in zip(kernels, starts, durs, waits):
        ti = t.tensors
        key = (t.name, t.op, t.task_type, t.block_dim, id(ti) if ti else 0, id(t.pmu))
        cells = shared.get(key)
        if cells is None:
            mix = t.block_dim if t.task_type in MIX_TYPES else 0
            head = _csv_cells([t.name, t.op, "static", t.task_type])
            tail = _csv_cells([
                str(t.block_dim), str(mix), "NO",
                quoted_shape(ti.get("input_shapes", "")), ti.get("input_data_types", ""), ti.get("input_formats", ""),
                quoted_shape(ti.get("output_shapes", "")), ti.get("output_data_types", ""),
                ti.get("output_formats", ""), "N/A"] + pmu_csv_values(t.pmu))
            cells = shared[key] = (head, tail)
        step = "" if t.step is None else t.step
        lines.append(f"{step},{MODEL_ID_NONE},{t.task_id},{t.stream},{cells[0]},{start},{dur},{wait},{cells[1]}\n")
        if len(lines) >= block_rows:
            yield "".join(lines)
            lines = []
    if lines:
        yield "".join(lines)


def _csv_cells(cells: list[str]) -> str:
    """Cells as ``csv.writer`` writes them within a row (each quoted as it needs), without the line end."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(cells)
    return buf.getvalue()[:-1]


def op_statistic_rows(p: AscendProfile) -> list[list[str]]:
    groups: dict[tuple[str, str], list[int]] = {}
    for t in p.kernels:
        groups.setdefault((t.op, t.task_type), []).append(t.dur_ns)
    total = sum(sum(v) for v in groups.values())
    rows = []
    for (op, core), durs in sorted(groups.items(), key=lambda kv: (-sum(kv[1]), kv[0])):
        s = sum(durs)
        rows.append([op, core, str(len(durs)), us_str(s), us_str(round(s / len(durs))), us_str(max(durs)),
                     us_str(min(durs)), f"{100.0 * s / total:.2f}" if total else "0.00"])
    return rows


def step_trace_rows(p: AscendProfile) -> list[list[str]]:
    return [[str(p.device_id), str(r.step)] + [us_str(v) for v in (
        r.computing, r.comm_not_overlapped, r.overlapped, r.communication, r.free, r.stage, r.bubble,
        r.comm_not_overlapped - r.bubble, r.preparing)] for r in p.step_rows]


def csv_text(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(list(header))
    w.writerows(rows)
    return buf.getvalue()


def prof_id(name: str, rank: int) -> str:
    """A fixed 16-letter id for the PROF_ directory (the tools only match ``\\w+``)."""
    digest = hashlib.sha256(f"{name}:{rank}".encode()).digest()
    return "".join(chr(ord("A") + b % 26) for b in digest[:16])


def device_info(p: AscendProfile, rank: int) -> dict:
    """info.json.<d>: the SoC preset's core counts and clock, as msprof writes them."""
    return {"DeviceInfo": [{"id": p.device_id, "ai_core_num": p.aicore_count, "aiv_num": p.vector_core_count,
                            "ai_cpu_num": p.aicpu_count, "aic_frequency": _mhz(p.clock_mhz),
                            "aiv_frequency": _mhz(p.clock_mhz), "hwts_frequency": "100"}],
            "platform_version": p.soc_name, "rank_id": rank}


def _mhz(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.3f}"


def profiler_info(p: AscendProfile, rank: int) -> dict:
    return {"config": {"common_config": {"activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"]},
                       "experimental_config": {"_profiler_level": "Level1", "_aic_metrics": "PipeUtilization"}},
            "rank_id": rank, "simulator": {"name": "opsim", "soc": p.soc_name, "epoch_us": p.epoch_us}}
