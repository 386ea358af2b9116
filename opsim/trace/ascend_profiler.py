"""Ascend profiler output: a simulated run written as the torch_npu profiler's text layout.

msprof-analyze (``compare``, ``advisor``, ``cluster``) and MindStudio Insight read a torch_npu profiling run
from a ``<name>_<timestamp>_ascend_pt/`` directory. Writing the same layout from the recorder lets users
compare a simulated what-if against a simulated (or real) baseline in the tools they already use.

Layout written by ``write_profiler_output`` (see docs/ascend-tools.md for the commands that read it)::

    <name>_<YYYYmmddHHMMSSfff>_ascend_pt/
        profiler_info_<rank>.json                 rank id (by file name) and profiler level
        PROF_000001_<timestamp>_<id>/device_<d>/info.json.<d>   core counts and clock of the SoC preset
        ASCEND_PROFILER_OUTPUT/
            trace_view.json                       Chrome-trace array: Python / CANN / Ascend Hardware / Overlap
            kernel_details.csv                    one row per kernel, PMU-style pipe times from the cost model
            op_statistic.csv                      per (op type, core type) totals
            step_trace_time.csv                   per step: computing, free, stage, preparing (us)
            memory_record.csv                     the allocator's totals after each alloc / free
            operator_memory.csv                   one row per allocation: its op, size and lifetime
            npu_module_mem.csv                    the application module's device memory over time
            ascend_pytorch_profiler_<rank>.db     with db=True (see ascend_profiler_db.py)
            analysis.db                           with db=True
            communication.json                    a rank of a job (``collectives``, see ascend_comm.py)
            communication_matrix.json             a rank of a job

Every figure is derived from one model (``build_profile``) of the recorder's host and device records, so
the trace, the CSVs and the databases agree with each other and with opsim's own records. Timestamps are
epoch nanoseconds computed with integer arithmetic: each simulated time (float us) is rounded to an integer
nanosecond once and added to ``epoch_us * 1000``; every written microsecond value is that integer printed
with three decimals, so a kernel's ``Start Time(us)`` is the same string as its trace ``ts``.

Mapping from opsim records (the conventions of ``opsim.runtime.host_thread.run_op``):

* one host span of phase ``op_call`` per ACLNN call -> a ``cpu_op`` event named after the API (``aclnnAddmm``
  -> ``aten::addmm``, ``aclnnInplaceAdd`` -> ``aten::add_``) with a call stack naming the thread and the
  call's position in its step;
* the call's host spans from ``L2 phase1 entry`` -> ``AscendCL@aclnnXxxGetWorkspaceSize``, from
  ``L2 phase2 entry`` -> ``AscendCL@aclnnXxx``, each kernel launch -> ``Node@launch``, runtime calls
  (malloc, free, stream sync, event record/wait) -> ``AscendCL@aclrt...``;
* device tasks -> ``Ascend Hardware`` slices (one track per stream) linked to their call by one
  ``torch_to_npu`` flow each; ``HOST_FUNC`` tasks (stream-ordered frees) are not shown;
* kernels and copies are the device busy time: their union is ``Computing``, the gaps are ``Free``;
* ``step`` instants (args ``{"step": n, "phase": "begin"|"end"}``, track = thread name) -> ``ProfilerStep#n``;
  without them the whole run is step 1. Each thread's steps are shown on its own track; step_trace_time.csv,
  the kernels' ``Step Id`` and the databases' STEP_TIME follow one thread's steps (``step_thread``, default
  the first thread with steps), since torch_npu marks steps on the one thread that calls ``prof.step()``.

Tensor shapes, dtypes and formats are taken from ``tensor_info`` instants (args ``corr``, ``op`` and the
torch_npu strings ``input_shapes``, ``input_data_types``, ``input_formats``, ``output_shapes``,
``output_data_types``, ``output_formats``; one per kernel launch, in launch order) when the run recorded them;
otherwise those columns are empty.
"""
from __future__ import annotations

import json
import os
import re
from typing import Any, Mapping, Sequence

from opsim.errors import InvalidArgumentError
from opsim.trace.ascend_build import build_profile
from opsim.trace.ascend_comm import StepOf, communication_data, communication_matrix_data, dumps
from opsim.trace.ascend_memory import (MEMORY_RECORD_HEADER, NPU_MODULE_MEM_HEADER, OPERATOR_MEMORY_HEADER,
                                       memory_record_rows, npu_module_mem_rows, operator_memory_rows)
from opsim.trace.ascend_model import (DEFAULT_EPOCH_US, DIR_MODE, FILE_MODE, KERNEL_DETAILS_HEADER,
                                      OP_STATISTIC_HEADER, OUTPUT_DIR, STEP_TRACE_TIME_HEADER, AscendProfile,
                                      merge_intervals, profiler_dir_name, timestamp_17, torch_op_name, us_str)
from opsim.trace.ascend_profiler_db import write_profiler_db
from opsim.trace.ascend_tables import (csv_text, prof_id, device_info, kernel_details_blocks, op_statistic_rows,
                                       profiler_info, step_trace_rows)
from opsim.trace.ascend_trace_view import write_trace_view
from opsim.outputs import atomic_file
from opsim.trace.step_breakdown import is_communication
from opsim.trace.timefmt import to_ns

__all__ = ["write_profiler_output", "build_profile", "AscendProfile", "profiler_dir_name", "torch_op_name",
           "KERNEL_DETAILS_HEADER", "STEP_TRACE_TIME_HEADER", "OP_STATISTIC_HEADER", "DEFAULT_EPOCH_US",
           "merge_intervals", "timestamp_17", "us_str", "profile_stream_ids",
           "profiled_kernel_types", "collective_step_finder"]

_NAME_RE = re.compile(r"^[A-Za-z0-9._-]+$")


def _mkdir(path: str) -> None:
    os.makedirs(path, exist_ok=True)
    os.chmod(path, DIR_MODE)


def _write(path: str, text: str) -> None:
    with atomic_file(path, encoding="utf-8", newline="") as f:
        f.write(text)
    os.chmod(path, FILE_MODE)


def _write_with(path: str, write: Any) -> None:
    """A binary file written by ``write(fh)`` block by block (a large run's file is never held whole)."""
    with atomic_file(path, "wb") as f:
        write(f)
    os.chmod(path, FILE_MODE)


def _json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


PROFILE_STREAM_RE = re.compile(r"^stream_(\d{1,9})$")
"""A stream named ``stream_<N>`` (how `opsim import` names a profile's stream N) is written with id N."""


def profile_stream_ids(streams: Mapping[str, Any]) -> dict[int, int]:
    """opsim stream id -> written id for scenario streams (name -> opsim Stream) named ``stream_<N>``, so a
    replay's profiler output shows its profile's stream ids; empty (opsim's ids) when that would give two
    streams one id."""
    ids = {st.stream_id: st.stream_id for st in streams.values()}
    for name, st in streams.items():
        m = PROFILE_STREAM_RE.match(name)
        if m:
            ids[st.stream_id] = int(m.group(1))
    if len(set(ids.values())) != len(ids):
        return {}
    return {k: v for k, v in ids.items() if k != v}


def profiled_kernel_types(profiled_ops: Any) -> dict[str, str]:
    """Recorded kernel name -> op type of every kernel of a scenario's ``profiled_ops`` (its ``type``, else the
    name itself): a replay's kernels are written under their profile's names and types."""
    out: dict[str, str] = {}
    for entry in (profiled_ops or {}).values() if isinstance(profiled_ops, Mapping) else ():
        for v in entry.get("variants") or () if isinstance(entry, Mapping) else ():
            for k in v.get("kernels") or () if isinstance(v, Mapping) else ():
                if isinstance(k, Mapping) and isinstance(k.get("name"), str):
                    out.setdefault(k["name"], str(k.get("type") or k["name"]))
    return out


def _write_memory_csvs(p: AscendProfile, out: str) -> None:
    """memory_record.csv, operator_memory.csv and npu_module_mem.csv (see ascend_memory.py)."""
    d = p.device_id
    _write(os.path.join(out, "memory_record.csv"),
           csv_text(MEMORY_RECORD_HEADER, memory_record_rows(p.memory_events, d)))
    _write(os.path.join(out, "operator_memory.csv"),
           csv_text(OPERATOR_MEMORY_HEADER, operator_memory_rows(p.op_memory, d)))
    _write(os.path.join(out, "npu_module_mem.csv"),
           csv_text(NPU_MODULE_MEM_HEADER, npu_module_mem_rows(p.memory_events, d)))


def write_profiler_output(sim: Any, out_dir: str, *, name: str, epoch_us: int = DEFAULT_EPOCH_US, rank: int = 0,
                          db: bool = False, text: bool = True, step_thread: str | None = None,
                          stream_ids: Mapping[int, int] | None = None,
                          kernel_types: Mapping[str, str] | None = None,
                          collectives: Sequence[Any] | None = None) -> str:
    """Write ``sim`` (after ``sim.run()``) as a torch_npu profiling directory; returns its path.

    ``name`` becomes the ``<name>_<timestamp>_ascend_pt`` directory under ``out_dir`` (timestamp: the UTC
    ``YYYYmmddHHMMSSfff`` of ``epoch_us``, the wall-clock microsecond that simulated time 0 maps to). ``rank``
    names ``profiler_info_<rank>.json`` (the tools take the rank from it). ``db=True`` also writes the
    torch_npu database layout, which the cluster recipes (``compute_op_sum``, ``cann_api_sum``) need;
    ``text=False`` leaves the text files (trace_view.json and the CSVs) out. ``step_thread`` chooses whose steps
    step_trace_time reports. ``stream_ids`` maps opsim stream ids to the ids written (streams not in it keep
    theirs; `profile_stream_ids` gives a replay its profile's ids); ``kernel_types`` maps recorded kernel names
    to op types (`profiled_kernel_types`). ``collectives`` (a rank's `CollectiveRecord` list, given for every
    rank of a job, possibly empty) adds communication.json and communication_matrix.json, and in the db layout
    COMMUNICATION_OP, the collectives' launches and analysis.db's CommAnalyzer* tables (ascend_comm_db.py). The same simulation
    and arguments always give byte-identical files.
    """
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InvalidArgumentError(
            f"profiler output name {name!r} must be non-empty and use only letters, digits, '.', '_' and '-' "
            "(the Ascend tools warn on other characters); pass e.g. name='baseline'")
    if isinstance(epoch_us, bool) or not isinstance(epoch_us, int) or epoch_us < 0:
        raise InvalidArgumentError(f"epoch_us must be a non-negative integer (microseconds since 1970), "
                                   f"got {epoch_us!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise InvalidArgumentError(f"rank must be a non-negative integer, got {rank!r}")
    rec = sim.recorder
    if rec.count("host") == 0 and rec.count("device") == 0:
        raise InvalidArgumentError(
            "the simulation has no trace records to write as profiler output; create it with trace=True (the "
            "default) and call sim.run() before write_profiler_output")
    p = build_profile(sim, epoch_us=epoch_us, step_thread=step_thread, stream_ids=stream_ids,
                      kernel_types=kernel_types)
    root = os.path.join(out_dir, profiler_dir_name(name, epoch_us))
    out = os.path.join(root, OUTPUT_DIR)
    prof = os.path.join(root, f"PROF_000001_{timestamp_17(epoch_us)}_{prof_id(name, rank)}")
    device_dir = os.path.join(prof, f"device_{p.device_id}")
    if not os.path.isdir(out_dir):
        os.makedirs(out_dir, exist_ok=True)
    for d in (root, out, prof, device_dir):
        _mkdir(d)
    _write(os.path.join(root, f"profiler_info_{rank}.json"), _json(profiler_info(p, rank)))
    _write(os.path.join(device_dir, f"info.json.{p.device_id}"), _json(device_info(p, rank)))
    if text:
        _write_with(os.path.join(out, "trace_view.json"), lambda fh: write_trace_view(p, fh))
        _write_with(os.path.join(out, "kernel_details.csv"),
                    lambda fh: fh.writelines(b.encode("utf-8") for b in kernel_details_blocks(p)))
        _write(os.path.join(out, "op_statistic.csv"), csv_text(OP_STATISTIC_HEADER, op_statistic_rows(p)))
        _write(os.path.join(out, "step_trace_time.csv"), csv_text(STEP_TRACE_TIME_HEADER, step_trace_rows(p)))
        _write_memory_csvs(p, out)
    comm = communication_contents(p, collectives) if collectives is not None else None
    if comm is not None and text:
        _write(os.path.join(out, "communication.json"), dumps(comm[0]))
        _write(os.path.join(out, "communication_matrix.json"), dumps(comm[1]))
    if db:
        write_profiler_db(p, out, rank=rank, collectives=collectives, comm=comm)
    return root


def collective_step_finder(p: AscendProfile) -> StepOf:
    """A record's step: that of its COMMUNICATION task in the profile (the step its host thread issued it in),
    False when the task is outside every step."""
    steps = {(t.name, t.start_ns): t.step for t in p.tasks if is_communication(t.task_type)}
    epoch_ns = p.epoch_us * 1000

    def step_of(rec: Any) -> int | bool:
        step = steps.get((rec.name, epoch_ns + to_ns(rec.start_us)))
        return False if step is None else step
    return step_of


def communication_contents(p: AscendProfile, collectives: Sequence[Any]) -> tuple[dict, dict]:
    """The contents of communication.json and communication_matrix.json of one rank of a job (the db layout's
    analysis.db holds the same figures)."""
    step_of = collective_step_finder(p)
    return communication_data(collectives, step_of, p.epoch_us), communication_matrix_data(collectives, step_of)
