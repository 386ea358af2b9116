"""The profiler output's CSV tables (kernel_details, op_statistic, step_trace_time) and its small JSON files."""
from __future__ import annotations

import csv
import hashlib
import io
from typing import Iterable

from opsim.trace.ascend_model import MODEL_ID_NONE, AscendProfile, us_str
from opsim.trace.ascend_pmu import MIX_TYPES, pmu_csv_values


def quoted_shape(text: str) -> str:
    """torch_npu writes shape strings with literal quotes (the advisor strips the first and last character)."""
    return f'"{text}"' if text else ""


def kernel_detail_rows(p: AscendProfile) -> list[list[str]]:
    rows = []
    pmu_cells: dict[int, list[str]] = {}  # by id of the (shared, frozen) split
    for t in p.kernels:
        ti = t.tensors
        mix = t.block_dim if t.task_type in MIX_TYPES else 0
        row = [
            "" if t.step is None else str(t.step), str(MODEL_ID_NONE), str(t.task_id), str(t.stream), t.name, t.op,
            "static", t.task_type, us_str(t.start_ns), us_str(t.dur_ns), us_str(t.wait_ns), str(t.block_dim),
            str(mix), "NO",
            quoted_shape(ti.get("input_shapes", "")), ti.get("input_data_types", ""), ti.get("input_formats", ""),
            quoted_shape(ti.get("output_shapes", "")), ti.get("output_data_types", ""), ti.get("output_formats", ""),
            "N/A",
        ]
        cells = pmu_cells.get(id(t.pmu))
        if cells is None:
            cells = pmu_cells[id(t.pmu)] = pmu_csv_values(t.pmu)
        rows.append(row + cells)
    return rows


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
