"""The profiler output's CSV tables (kernel_details, op_statistic, step_trace_time) and its small JSON files."""
from __future__ import annotations

import csv
import hashlib
import io
from typing import Iterable, Iterator

import numpy as np

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
    tasks = p.tasks
    k = np.flatnonzero(tasks.is_kernel())
    texts, tensor_list, pmu_list = tasks.texts, tasks.tensor_list, tasks.pmu_list
    shared: dict[tuple, tuple[str, str]] = {}
    for lo in range(0, len(k), block_rows):
        rows = k[lo:lo + block_rows]
        starts = us_texts(tasks.start_ns[rows])
        durs = us_texts(tasks.end_ns[rows] - tasks.start_ns[rows])
        waits = us_texts(tasks.wait_ns[rows])
        steps = [s if h else "" for s, h in zip(tasks.step[rows].tolist(), tasks.has_step[rows].tolist())]
        lines: list[str] = []
        for key, step, task_id, stream, start, dur, wait in zip(
                zip(tasks.name[rows].tolist(), tasks.op[rows].tolist(), tasks.task_type[rows].tolist(),
                    tasks.block_dim[rows].tolist(), tasks.tensors[rows].tolist(), tasks.pmu[rows].tolist()),
                steps, tasks.task_id[rows].tolist(), tasks.stream[rows].tolist(), starts, durs, waits):
            cells = shared.get(key)
            if cells is None:
                cells = shared[key] = _kernel_cells(key, texts, tensor_list, pmu_list)
            lines.append(f"{step},{MODEL_ID_NONE},{task_id},{stream},{cells[0]},{start},{dur},{wait},{cells[1]}\n")
        yield "".join(lines)


def _kernel_cells(key: tuple, texts: list[str], tensor_list: list[dict[str, str]],
                  pmu_list: list) -> tuple[str, str]:
    """The CSV text of the cells a kernel shares with every kernel of the same `key` (name, op, type, block dim,
    tensors, PMU split codes): those before its times, and those after."""
    name, op, tt, block_dim, tensors, pmu = key
    ti = tensor_list[tensors] if tensors >= 0 else {}
    task_type = texts[tt]
    mix = block_dim if task_type in MIX_TYPES else 0
    head = _csv_cells([texts[name], texts[op], "static", task_type])
    tail = _csv_cells([
        str(block_dim), str(mix), "NO",
        quoted_shape(ti.get("input_shapes", "")), ti.get("input_data_types", ""), ti.get("input_formats", ""),
        quoted_shape(ti.get("output_shapes", "")), ti.get("output_data_types", ""),
        ti.get("output_formats", ""), "N/A"] + pmu_csv_values(pmu_list[pmu] if pmu >= 0 else None))
    return head, tail


def _csv_cells(cells: list[str]) -> str:
    """Cells as ``csv.writer`` writes them within a row (each quoted as it needs), without the line end."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(cells)
    return buf.getvalue()[:-1]


def op_statistic_rows(p: AscendProfile) -> list[list[str]]:
    tasks = p.tasks
    k = np.flatnonzero(tasks.is_kernel())
    durs = tasks.end_ns[k] - tasks.start_ns[k]
    pairs = np.stack([tasks.op[k].astype(np.int64), tasks.task_type[k].astype(np.int64)], axis=1)
    groups: dict[tuple[str, str], tuple[int, int, int, int]] = {}  # sum, count, max, min
    if len(k):
        uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
        order = np.argsort(inv.reshape(-1), kind="stable")
        d, g = durs[order], inv.reshape(-1)[order]
        bounds = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
        counts = np.diff(np.r_[bounds, len(d)]).tolist()
        texts = tasks.texts
        for (op, tt), s, n, hi, lo in zip(uniq.tolist(), np.add.reduceat(d, bounds).tolist(), counts,
                                          np.maximum.reduceat(d, bounds).tolist(),
                                          np.minimum.reduceat(d, bounds).tolist()):
            groups[(texts[op], texts[tt])] = (s, n, hi, lo)
    total = sum(v[0] for v in groups.values())
    rows = []
    for (op, core), (s, n, hi, lo) in sorted(groups.items(), key=lambda kv: (-kv[1][0], kv[0])):
        rows.append([op, core, str(n), us_str(s), us_str(round(s / n)), us_str(hi), us_str(lo),
                     f"{100.0 * s / total:.2f}" if total else "0.00"])
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
