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
            ascend_pytorch_profiler_<rank>.db     with db=True (see ascend_profiler_db.py)
            analysis.db                           with db=True

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

import csv
import datetime as _dt
import hashlib
import io
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from opsim.errors import InvalidArgumentError
from opsim.trace import step_breakdown
from opsim.trace.msprof_csv import total_cycles
from opsim.trace.timefmt import to_ns, us_text

__all__ = ["write_profiler_output", "build_profile", "AscendProfile", "profiler_dir_name", "torch_op_name",
           "KERNEL_DETAILS_HEADER", "STEP_TRACE_TIME_HEADER", "OP_STATISTIC_HEADER", "DEFAULT_EPOCH_US"]

DEFAULT_EPOCH_US = 1_700_000_000_000_000
"""Default epoch base (2023-11-14 22:13:20 UTC): simulated time 0 maps to this wall-clock microsecond."""

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
FILE_MODE = 0o640
DIR_MODE = 0o750
"""Modes the tools accept without warnings when run as a non-root user."""

PID_PYTHON, PID_CANN, PID_HARDWARE, PID_OVERLAP = 100, 200, 300, 400
"""Trace process ids; the tools identify the processes by their ``process_name`` metadata."""

OVERLAP_THREADS = {0: "Computing", 1: "Communication", 2: "Communication(Not Overlapped)", 3: "Free"}
"""Overlap Analysis track ids and names, as torch_npu numbers them."""

MODEL_ID_NONE = 4294967295
"""Model ID of single-operator (opbase) tasks."""

HIDDEN_TASK_TYPES = frozenset({"HOST_FUNC"})
"""Device tasks that are not shown: stream-ordered host callbacks (frees), not device work."""
NON_KERNEL_TASK_TYPES = frozenset({"HOST_FUNC", "MEMCPY_ASYNC", "EVENT_RECORD_SQE", "EVENT_WAIT_SQE"})
"""Task types that are not kernels (no kernel_details row)."""
BUSY_NON_KERNEL_TASK_TYPES = frozenset({"MEMCPY_ASYNC"})
"""Non-kernel tasks that still keep the device busy (counted in Computing)."""
AICPU_TASK_TYPES = frozenset({"AI_CPU"})

_CUBE_TYPES = frozenset({"AI_CORE", "MIX_AIC"})
_VECTOR_TYPES = frozenset({"AI_VECTOR_CORE", "MIX_AIV"})
_MIX_TYPES = frozenset({"MIX_AIC", "MIX_AIV"})

KERNEL_DETAILS_HEADER = (
    "Step Id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State", "Accelerator Core",
    "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Dim", "Mix Block Dim", "HF32 Eligible",
    "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types", "Output Formats",
    "Context ID",
    "aicore_time(us)", "aic_total_cycles", "aic_mac_time(us)", "aic_mac_ratio", "aic_scalar_time(us)",
    "aic_scalar_ratio",
    "aiv_time(us)", "aiv_total_cycles", "aiv_vec_time(us)", "aiv_vec_ratio", "aiv_scalar_time(us)",
    "aiv_scalar_ratio",
)
"""kernel_details.csv columns: torch_npu's, then PipeUtilization-style PMU columns (split AI Core / vector)."""

PMU_COLUMNS = KERNEL_DETAILS_HEADER[KERNEL_DETAILS_HEADER.index("aicore_time(us)"):]

OP_STATISTIC_HEADER = ("OP Type", "Core Type", "Count", "Total Time(us)", "Avg Time(us)", "Max Time(us)",
                       "Min Time(us)", "Ratio(%)")

STEP_TRACE_TIME_HEADER = ("Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped",
                          "Communication", "Free", "Stage", "Bubble",
                          "Communication(Not Overlapped and Exclude Receive)", "Preparing")

_NAME_RE = re.compile(r"^[A-Za-z0-9._-]+$")

# Runtime host phases (opsim cost-model names) -> the ACL API they stand for.
_RUNTIME_API = {"rt malloc": "aclrtMalloc", "rt free": "aclrtFree", "stream sync": "aclrtSynchronizeStream"}
_EVENT_LAUNCH_API = {"RecordEvent": "aclrtRecordEvent", "StreamWaitEvent": "aclrtStreamWaitEvent"}
_LAUNCH_PHASES = frozenset({"launch", "Launch"})
_PHASE1_ENTRY = "L2 phase1 entry"
_PHASE2_ENTRY = "L2 phase2 entry"
_OP_CALL = "op_call"
_QUEUE_PHASES = frozenset({"enqueue", "dequeue", "dequeue gap"})
"""torch_npu's task-queue costs: part of no AscendCL API span."""
_TENSOR_FIELDS = ("input_shapes", "input_data_types", "input_formats", "output_shapes", "output_data_types",
                  "output_formats")


# ---- time formatting ----------------------------------------------------------------------------------

us_str = us_text
"""Integer nanoseconds as a microsecond string with exactly three decimals (no float on the way)."""


def _to_ns(epoch_ns: int, t_us: float) -> int:
    """Simulated microseconds -> epoch nanoseconds, rounding to the nanosecond once."""
    return epoch_ns + to_ns(t_us)


def timestamp_17(epoch_us: int) -> str:
    """``YYYYmmddHHMMSSfff`` (UTC) of an epoch in microseconds, the timestamp torch_npu puts in names."""
    sec, micro = divmod(int(epoch_us), 1_000_000)
    t = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(seconds=sec)
    return t.strftime("%Y%m%d%H%M%S") + f"{micro // 1000:03d}"


def profiler_dir_name(name: str, epoch_us: int) -> str:
    """``<name>_<YYYYmmddHHMMSSfff>_ascend_pt``: the rank directory name the tools look for."""
    return f"{name}_{timestamp_17(epoch_us)}_ascend_pt"


def torch_op_name(api: str) -> str:
    """The torch-style name of an ACLNN API: ``aclnnAddmm`` -> ``aten::addmm``, ``aclnnInplaceAdd`` -> ``aten::add_``.

    torch_npu's host ops carry ``aten::`` names, and the tools classify by them (``aten::addmm``/``mm``/``bmm``/
    ``matmul`` mark matmul time); names that are not ``aclnn*`` are kept as they are.
    """
    if not api.startswith("aclnn") or len(api) == 5:
        return api
    base = api[5:]
    inplace = base.startswith("Inplace") and len(base) > 7
    if inplace:
        base = base[7:]
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", base).lower()
    return f"aten::{snake}{'_' if inplace else ''}"


# ---- the profile model ----------------------------------------------------------------------------------

@dataclass
class OpCall:
    """One ACLNN call made through run_op (its ``op_call`` host span)."""

    corr: int
    thread: str
    tid: int
    api: str
    start_ns: int
    end_ns: int
    step: int | None = None
    seq: int = 0

    @property
    def torch_name(self) -> str:
        return torch_op_name(self.api)

    @property
    def call_stack(self) -> str:
        """Where the call sits in the application: thread and position in the thread's step program."""
        return f"{self.thread}({self.seq}): {self.api}"


@dataclass
class ApiSpan:
    """A CANN-level host span: ``kind`` "acl" (``AscendCL@name``) or "node" (``Node@name``)."""

    kind: str
    name: str
    tid: int
    start_ns: int
    end_ns: int
    corr: int

    @property
    def trace_name(self) -> str:
        return ("AscendCL@" if self.kind == "acl" else "Node@") + self.name


@dataclass
class DeviceTaskRow:
    """One shown device task with its epoch times and derived fields (``index``: its recorder row)."""

    index: int
    device: int
    stream: int
    task_id: int
    op: str
    task_type: str
    unit_kind: str
    block_dim: int
    start_ns: int
    end_ns: int
    corr: int
    name: str
    op_call: OpCall | None = None
    step: int | None = None
    wait_ns: int = 0
    tensors: dict[str, str] = field(default_factory=dict)
    pmu: KernelPmu | None = None

    @property
    def dur_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def is_kernel(self) -> bool:
        return self.task_type not in NON_KERNEL_TASK_TYPES and step_breakdown.is_compute(self.task_type)

    @property
    def is_busy(self) -> bool:
        return self.is_kernel or self.task_type in BUSY_NON_KERNEL_TASK_TYPES

    @property
    def flow_id(self) -> str:
        """torch_npu's flow id ``<stream>-<device ts>`` (the advisor finds call stacks through it)."""
        return f"{self.stream}-{us_str(self.start_ns)}"


@dataclass
class StepWindow:
    """A ProfilerStep on one host thread."""

    step: int
    thread: str
    tid: int
    start_ns: int
    end_ns: int


StepRow = step_breakdown.StepBreakdown
"""One step_trace_time row (all values in ns; opsim.trace.step_breakdown computes them)."""


@dataclass
class AscendProfile:
    """Everything the profiler files say about one device of one simulation (see ``build_profile``)."""

    epoch_us: int
    device_id: int
    soc_name: str
    aicore_count: int
    vector_core_count: int
    aicpu_count: int
    clock_mhz: float
    threads: dict[str, int]
    op_calls: list[OpCall]
    api_spans: list[ApiSpan]
    tasks: list[DeviceTaskRow]
    steps: list[StepWindow]
    """Every thread's ProfilerSteps (the trace shows each thread's own)."""
    step_windows: list[StepWindow]
    """The step timeline of step_trace_time.csv and the kernels' Step Id: one thread's steps (`_step_timeline`)."""
    step_rows: list[StepRow]
    busy: list[tuple[int, int]]

    @property
    def kernels(self) -> list[DeviceTaskRow]:
        return [t for t in self.tasks if t.is_kernel]

    @property
    def free(self) -> list[tuple[int, int]]:
        """Gaps between consecutive busy intervals."""
        return [(a[1], b[0]) for a, b in zip(self.busy, self.busy[1:]) if b[0] > a[1]]

    @property
    def computing_ns(self) -> int:
        return sum(e - s for s, e in self.busy)

    @property
    def e2e_ns(self) -> int:
        return self.busy[-1][1] - self.busy[0][0] if self.busy else 0


def merge_intervals(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Union of half-open integer intervals as sorted, disjoint, non-touching intervals."""
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _thread_ids(sim: Any, names: Iterable[str]) -> dict[str, int]:
    """Thread name -> integer tid: the simulated OS thread id when known, else the next free id in order."""
    tids: dict[str, int] = {}
    for th in getattr(sim, "threads", ()):
        tids.setdefault(th.name, int(th.thread_id))
    nxt = max(tids.values(), default=0) + 1
    for n in names:
        if n not in tids:
            tids[n] = nxt
            nxt += 1
    return tids


def _steps_from_instants(inst: dict[str, list], epoch_ns: int, tids: dict[str, int],
                         run_end_ns: int) -> list[StepWindow]:
    begins: dict[tuple[str, int], int] = {}
    ends: dict[tuple[str, int], int] = {}
    for t, name, track, args in zip(inst["time"], inst["name"], inst["track"], inst["args"]):
        if name != "step" or not isinstance(args, dict) or "step" not in args:
            continue
        key = (str(track), int(args["step"]))
        ns = _to_ns(epoch_ns, t)
        if args.get("phase") == "begin":
            begins.setdefault(key, ns)
        elif args.get("phase") == "end":
            ends[key] = ns
    steps = []
    for (thread, n), start in begins.items():
        end = ends.get((thread, n), run_end_ns)
        steps.append(StepWindow(n, thread, tids[thread], start, max(start, end)))
    steps.sort(key=lambda w: (w.start_ns, w.step, w.tid))
    return steps


def _tensor_infos(inst: dict[str, list], launches: list | tuple = ()) -> dict[tuple[int, str], list[dict[str, str]]]:
    """Per-launch tensor descriptions grouped by (corr, op), in launch order: the recorder's `tensor_infos`
    (what the framework records at every kernel launch) and any ``tensor_info`` instants."""
    out: dict[tuple[int, str], list[dict[str, str]]] = {}
    for corr, op, info in launches:
        out.setdefault((int(corr), str(op)), []).append({f: str(info.get(f, "")) for f in _TENSOR_FIELDS})
    for name, args in zip(inst["name"], inst["args"]):
        if name != "tensor_info" or not isinstance(args, dict):
            continue
        key = (int(args.get("corr", -1)), str(args.get("op", "")))
        out.setdefault(key, []).append({f: str(args.get(f, "")) for f in _TENSOR_FIELDS})
    return out


def _api_spans(calls: dict[int, OpCall], host: dict[str, list], epoch_ns: int,
               tids: dict[str, int]) -> list[ApiSpan]:
    """CANN-level spans: the two ACLNN phases of each call, kernel launches and runtime calls. Each span is on
    the thread that ran it (a call's phase 2 may run on torch_npu's task-queue thread)."""
    spans: list[ApiSpan] = []
    by_corr: dict[int, list[tuple[float, float, str, str, int]]] = {}
    rows = zip(host["thread"], host["phase"], host["op"], host["start"], host["dur"], host["corr"])
    for thread, phase, op, start, dur, corr in rows:
        if phase == _OP_CALL:
            continue
        tid = tids[thread]
        if corr in calls:
            by_corr.setdefault(corr, []).append((start, dur, phase, op, tid))
            continue
        api = _runtime_api(phase, op)
        if api is not None:
            spans.append(ApiSpan("acl", api, tid, _to_ns(epoch_ns, start), _to_ns(epoch_ns, start + dur), corr))
    for corr, rows_ in by_corr.items():
        call = calls[corr]
        group: list[Any] | None = None  # [kind name, start, end, tid]
        for start, dur, phase, op, tid in rows_:
            s_ns, e_ns = _to_ns(epoch_ns, start), _to_ns(epoch_ns, start + dur)
            if group is not None and group[3] != tid:
                spans.append(ApiSpan("acl", group[0], group[3], group[1], group[2], corr))
                group = None
            if phase == _PHASE1_ENTRY or phase == _PHASE2_ENTRY:
                if group is not None:
                    spans.append(ApiSpan("acl", group[0], group[3], group[1], group[2], corr))
                # the span's op is the API its DFX entry named (a profiled op may name phase 1 differently)
                name = (op or call.api) + ("GetWorkspaceSize" if phase == _PHASE1_ENTRY else "")
                group = [name, s_ns, e_ns, tid]
                continue
            if phase in _QUEUE_PHASES:
                if group is not None:
                    spans.append(ApiSpan("acl", group[0], group[3], group[1], group[2], corr))
                    group = None
                continue
            if phase in ("rt malloc", "rt free"):  # the application's calls between the two phases
                if group is not None:
                    spans.append(ApiSpan("acl", group[0], group[3], group[1], group[2], corr))
                    group = None
                spans.append(ApiSpan("acl", _RUNTIME_API[phase], tid, s_ns, e_ns, corr))
                continue
            if group is not None:
                group[2] = e_ns
            if phase in _LAUNCH_PHASES and op not in _EVENT_LAUNCH_API:
                spans.append(ApiSpan("node", "launch", tid, s_ns, e_ns, corr))
            else:
                api = _runtime_api(phase, op)
                if api is not None:
                    spans.append(ApiSpan("acl", api, tid, s_ns, e_ns, corr))
        if group is not None:
            spans.append(ApiSpan("acl", group[0], group[3], group[1], group[2], corr))
    spans.sort(key=lambda a: (a.start_ns, -a.end_ns, a.tid, a.kind, a.name))
    return spans


def _runtime_api(phase: str, op: str) -> str | None:
    if phase in _RUNTIME_API:
        return _RUNTIME_API[phase]
    if phase == "launch" and op in _EVENT_LAUNCH_API:
        return _EVENT_LAUNCH_API[op]
    return None


@dataclass(frozen=True)
class PipeSplit:
    """PipeUtilization figures of one core side (AI Core "aic" or vector "aiv") of one kernel, in ns."""

    total_ns: int
    cycles: int
    pipe_ns: int
    """The side's main pipe: cube MAC on aic, vector on aiv."""
    scalar_ns: int

    @property
    def pipe_ratio(self) -> str:
        return _ratio(self.pipe_ns, self.total_ns)

    @property
    def scalar_ratio(self) -> str:
        return _ratio(self.scalar_ns, self.total_ns)


@dataclass(frozen=True)
class KernelPmu:
    """A kernel's PMU-style split; a side is None when the kernel did not run on those cores."""

    aic: PipeSplit | None
    aiv: PipeSplit | None


def kernel_pmu(task: DeviceTaskRow, cost: Any, clock_mhz: float) -> KernelPmu | None:
    """PipeUtilization-style figures from the cost model's view of a kernel (None for AI CPU kernels).

    The cost model charges a kernel as dispatch latency (``aicore_launch_us``) plus an execution that runs
    its main pipe (cube MAC for AI Core kernels, vector for vector kernels) at the model's achieved
    efficiency (``aicore_efficiency`` / ``vector_efficiency``). So: core time = task duration, cycles = core
    time x clock, main-pipe time = execution x efficiency, scalar time = the dispatch latency. AI CPU
    kernels have no AI Core PMU (N/A in real profiles too).
    """
    if task.task_type in AICPU_TASK_TYPES:
        return None
    params = getattr(cost, "params", {}) if cost is not None else {}
    d = task.dur_ns
    launch = min(d, round(float(params.get("aicore_launch_us", 0.0)) * 1000.0))
    busy = d - launch
    tt = task.task_type
    cube = tt in _CUBE_TYPES or tt in _MIX_TYPES or (tt not in _VECTOR_TYPES and task.unit_kind == "aicore")
    vector = tt in _VECTOR_TYPES or tt in _MIX_TYPES or not cube
    cycles = total_cycles(d, clock_mhz)

    def side(active: bool, eff_key: str) -> PipeSplit | None:
        if not active:
            return None
        return PipeSplit(d, cycles, round(busy * float(params.get(eff_key, 1.0))), launch)

    return KernelPmu(side(cube, "aicore_efficiency"), side(vector, "vector_efficiency"))


def pmu_csv_values(pmu: KernelPmu | None) -> list[str]:
    """The PMU_COLUMNS cells of one kernel: N/A without PMU, zeros for a side the kernel did not use."""
    if pmu is None:
        return ["N/A"] * len(PMU_COLUMNS)
    out: list[str] = []
    for s in (pmu.aic, pmu.aiv):
        if s is None:
            out += ["0.000", "0", "0.000", "0.000", "0.000", "0.000"]
        else:
            out += [us_str(s.total_ns), str(s.cycles), us_str(s.pipe_ns), s.pipe_ratio, us_str(s.scalar_ns),
                    s.scalar_ratio]
    return out


def _ratio(part: int, whole: int) -> str:
    return f"{part / whole:.3f}" if whole > 0 else "0.000"


def _kernel_name(op: str, api: str | None) -> str:
    """torch_npu's ``<L2 API>_<L0 op>_<op type>`` kernel name (opsim's L0 names are the op types)."""
    return f"{api}_{op}_{op}" if api else op


def _separate_touching(spans: list) -> None:
    """End a span 1 ns before the next span of the same thread when they touch.

    The tools treat host spans as closed intervals: a kernel whose flow starts exactly where one op ends and
    the next begins would be attributed to both (and its time classified by the earlier op). Back-to-back
    calls are common in a simulation, so the earlier span is written 1 ns shorter.
    """
    last: dict[int, Any] = {}
    for sp in sorted(spans, key=lambda x: (x.tid, x.start_ns, x.end_ns)):
        prev = last.get(sp.tid)
        if prev is not None and prev.end_ns >= sp.start_ns and sp.start_ns - 1 > prev.start_ns:
            prev.end_ns = sp.start_ns - 1
        last[sp.tid] = sp


def _step_of(start_ns: int, windows: list[StepWindow]) -> int | None:
    for w in windows:
        if w.start_ns <= start_ns < w.end_ns or (w.start_ns == w.end_ns == start_ns):
            return w.step
    return None


def _step_timeline(sim: Any, by_thread: dict[str, list[StepWindow]], steps: list[StepWindow],
                   step_thread: str | None) -> list[StepWindow]:
    """The steps of step_trace_time.csv: the ProfilerSteps of one thread, as torch_npu marks steps on the one
    thread that calls ``prof.step()`` and msprof-analyze's cluster step view reads one timeline per rank.
    ``step_thread`` names the thread; by default it is the first thread (in the scenario's order) that has
    steps. A device task belongs to the step in which the call that launched it started."""
    if step_thread is not None:
        known = {th.name for th in getattr(sim, "threads", ())} | set(by_thread)
        if step_thread not in known:
            raise InvalidArgumentError(f"step_thread {step_thread!r} is not a thread of this simulation; use one "
                                       f"of: {', '.join(sorted(known))}")
        if step_thread in by_thread:
            return by_thread[step_thread]
        first, last = min(w.start_ns for w in steps), max(w.end_ns for w in steps)
        return [StepWindow(1, step_thread, 0, first, last)]
    for name in [th.name for th in getattr(sim, "threads", ())] + sorted(by_thread):
        if name in by_thread:
            return by_thread[name]
    return steps


def build_profile(sim: Any, *, epoch_us: int = DEFAULT_EPOCH_US, device: int | None = None,
                  step_thread: str | None = None) -> AscendProfile:
    """The profiler model of ``sim`` (after ``sim.run()``) for one device (default: the simulation's device);
    ``step_thread`` chooses the thread whose steps step_trace_time.csv reports (see `_step_timeline`)."""
    rec = sim.recorder
    soc = sim.soc
    epoch_ns = int(epoch_us) * 1000
    dev_id = int(device if device is not None else getattr(sim.device, "device_id", 0))
    host = rec.records("host")
    dev = rec.records("device")
    inst = rec.records("instant")

    names = list(dict.fromkeys(list(host["thread"]) + [str(t) for n, t in zip(inst["name"], inst["track"])
                                                        if n == "step"]))
    tids = _thread_ids(sim, names)

    ends = [_to_ns(epoch_ns, s + d) for s, d in zip(host["start"], host["dur"])]
    ends += [_to_ns(epoch_ns, e) for e in dev["end"]]
    run_end_ns = max(ends, default=epoch_ns)
    run_start_ns = min([_to_ns(epoch_ns, s) for s in host["start"]] + [_to_ns(epoch_ns, s) for s in dev["start"]],
                       default=epoch_ns)

    # ACLNN calls
    calls: dict[int, OpCall] = {}
    for thread, phase, op, start, dur, corr in zip(host["thread"], host["phase"], host["op"], host["start"],
                                                   host["dur"], host["corr"]):
        if phase == _OP_CALL and corr >= 0 and corr not in calls:
            calls[corr] = OpCall(corr, thread, tids[thread], op, _to_ns(epoch_ns, start),
                                 _to_ns(epoch_ns, start + dur))
    op_calls = sorted(calls.values(), key=lambda c: (c.start_ns, c.tid, c.corr))
    _separate_touching(op_calls)

    # steps
    steps = _steps_from_instants(inst, epoch_ns, tids, run_end_ns)
    if not steps:
        first_thread = min(tids, key=lambda n: tids[n]) if tids else "main"
        host_starts = [_to_ns(epoch_ns, s) for s in host["start"]]
        host_ends = [_to_ns(epoch_ns, s + d) for s, d in zip(host["start"], host["dur"])]
        s0 = min(host_starts, default=run_start_ns)
        e0 = max(host_ends, default=run_end_ns)
        steps = [StepWindow(1, first_thread, tids.get(first_thread, 0), s0, max(s0, e0))]
    _separate_touching(steps)
    by_thread: dict[str, list[StepWindow]] = {}
    for w in steps:
        by_thread.setdefault(w.thread, []).append(w)
    timeline = _step_timeline(sim, by_thread, steps, step_thread)
    seq: dict[tuple[str, int | None], int] = {}
    for c in op_calls:  # the call's position in its own thread's step (its call stack)
        c.step = _step_of(c.start_ns, by_thread.get(c.thread, timeline))
        key = (c.thread, c.step)
        seq[key] = seq.get(key, 0) + 1
        c.seq = seq[key]

    # device tasks
    tensor_infos = _tensor_infos(inst, getattr(sim.recorder, "tensor_infos", ()))
    tensor_taken: dict[tuple[int, str], int] = {}
    tasks: list[DeviceTaskRow] = []
    cols = ("device", "stream", "task_id", "op", "task_type", "unit_kind", "block_dim", "start", "end", "corr")
    for i, (d, stream, task_id, op, tt, unit, bd, start, end, corr) in enumerate(zip(*(dev[c] for c in cols))):
        if d != dev_id or tt in HIDDEN_TASK_TYPES:
            continue
        call = calls.get(corr) if corr >= 0 else None
        t = DeviceTaskRow(i, d, stream, task_id, op, tt, unit, int(bd), _to_ns(epoch_ns, start),
                          _to_ns(epoch_ns, end), corr, op, call)
        if t.is_kernel:
            t.name = _kernel_name(op, call.api if call is not None else None)
        t.step = _step_of(call.start_ns if call is not None else t.start_ns, timeline)
        tasks.append(t)
    # launch order within one call = task order on the stream (tensor infos are matched in that order)
    for t in sorted(tasks, key=lambda t: (t.corr, t.stream, t.task_id)):
        if t.is_kernel and t.corr >= 0:
            key = (t.corr, t.op)
            infos = tensor_infos.get(key)
            k = tensor_taken.get(key, 0)
            if infos and k < len(infos):
                t.tensors = infos[k]
                tensor_taken[key] = k + 1
    tasks.sort(key=lambda t: (t.start_ns, t.stream, t.task_id))
    # msprof's Task Wait Time: the gap since the previous kernel (in start order, any stream) ended
    prev_end: int | None = None
    for t in tasks:
        if t.is_kernel:
            t.wait_ns = max(0, t.start_ns - prev_end) if prev_end is not None else 0
            prev_end = t.end_ns

    busy = merge_intervals((t.start_ns, t.end_ns) for t in tasks if t.is_busy and t.end_ns > t.start_ns)

    # step_trace_time rows
    step_rows = step_breakdown.step_rows(timeline, tasks)  # step_trace_time rows

    cost = getattr(sim, "cost", None)
    for t in tasks:
        if t.is_kernel:
            t.pmu = kernel_pmu(t, cost, float(soc.clock_mhz))
    return AscendProfile(
        epoch_us=int(epoch_us), device_id=dev_id, soc_name=soc.name, aicore_count=int(soc.aicore_count),
        vector_core_count=int(soc.vector_core_count), aicpu_count=int(getattr(soc, "aicpu_count", 0)),
        clock_mhz=float(soc.clock_mhz), threads=tids, op_calls=op_calls,
        api_spans=_api_spans(calls, host, epoch_ns, tids), tasks=tasks, steps=steps, step_windows=timeline,
        step_rows=step_rows,
        busy=busy)


# ---- file contents --------------------------------------------------------------------------------------

def _meta(pid: int, name: str, kind: str = "process_name", tid: int = 0, **extra: Any) -> dict:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {"name": name, **extra}}


def trace_events(p: AscendProfile) -> list[dict]:
    """The trace_view.json events, in a fixed order."""
    ev: list[dict] = []
    for sort, (pid, name) in enumerate(((PID_PYTHON, "Python"), (PID_CANN, "CANN"),
                                        (PID_HARDWARE, "Ascend Hardware"), (PID_OVERLAP, "Overlap Analysis"))):
        ev.append(_meta(pid, name))
        ev.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort}})
    for thread, tid in sorted(p.threads.items(), key=lambda kv: kv[1]):
        for pid in (PID_PYTHON, PID_CANN):
            ev.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": thread}})
            ev.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    for stream in sorted({t.stream for t in p.tasks}):
        ev.append({"ph": "M", "name": "thread_name", "pid": PID_HARDWARE, "tid": stream,
                   "args": {"name": f"Stream {stream}"}})
        ev.append({"ph": "M", "name": "thread_sort_index", "pid": PID_HARDWARE, "tid": stream,
                   "args": {"sort_index": stream}})
    for tid, name in OVERLAP_THREADS.items():
        ev.append({"ph": "M", "name": "thread_name", "pid": PID_OVERLAP, "tid": tid, "args": {"name": name}})
        ev.append({"ph": "M", "name": "thread_sort_index", "pid": PID_OVERLAP, "tid": tid,
                   "args": {"sort_index": tid}})

    for w in p.steps:
        ev.append({"ph": "X", "cat": "cpu_op", "name": f"ProfilerStep#{w.step}", "pid": PID_PYTHON, "tid": w.tid,
                   "ts": us_str(w.start_ns), "dur": us_str(w.end_ns - w.start_ns),
                   "args": {"Sequence number": -1, "Fwd thread id": 0}})
    for c in p.op_calls:
        args: dict[str, Any] = {"Sequence number": -1, "Fwd thread id": 0, "Call stack": c.call_stack}
        ev.append({"ph": "X", "cat": "cpu_op", "name": c.torch_name, "pid": PID_PYTHON, "tid": c.tid,
                   "ts": us_str(c.start_ns), "dur": us_str(c.end_ns - c.start_ns), "args": args})
    for a in p.api_spans:
        ev.append({"ph": "X", "name": a.trace_name, "pid": PID_CANN, "tid": a.tid, "ts": us_str(a.start_ns),
                   "dur": us_str(a.end_ns - a.start_ns), "args": {"connection_id": a.corr}})
    for t in p.tasks:
        ev.append({"ph": "X", "name": t.name, "pid": PID_HARDWARE, "tid": t.stream, "ts": us_str(t.start_ns),
                   "dur": us_str(t.dur_ns),
                   "args": {"Model Id": MODEL_ID_NONE, "Task Type": t.task_type, "Physic Stream Id": t.stream,
                            "Task Id": t.task_id, "Stream Id": t.stream, "connection_id": t.corr}})
    for t in p.tasks:
        if t.op_call is None:
            continue
        flow = {"name": "torch_to_npu", "cat": "async_npu", "id": t.flow_id}
        ev.append({**flow, "ph": "s", "pid": PID_PYTHON, "tid": t.op_call.tid, "ts": us_str(t.op_call.start_ns)})
        ev.append({**flow, "ph": "f", "bp": "e", "pid": PID_HARDWARE, "tid": t.stream, "ts": us_str(t.start_ns)})
    for s, e in p.busy:
        ev.append({"ph": "X", "name": "Computing", "pid": PID_OVERLAP, "tid": 0, "ts": us_str(s), "dur": us_str(e - s)})
    for s, e in p.free:
        ev.append({"ph": "X", "name": "Free", "pid": PID_OVERLAP, "tid": 3, "ts": us_str(s), "dur": us_str(e - s)})
    return ev


def trace_view_json(p: AscendProfile) -> str:
    """A flat JSON array, one event per line, keys sorted."""
    lines = [json.dumps(e, sort_keys=True, separators=(",", ":"), ensure_ascii=False) for e in trace_events(p)]
    return "[\n" + ",\n".join(lines) + "\n]\n"


def _quoted(text: str) -> str:
    """torch_npu writes shape strings with literal quotes (the advisor strips the first and last character)."""
    return f'"{text}"' if text else ""


def kernel_detail_rows(p: AscendProfile) -> list[list[str]]:
    rows = []
    for t in p.kernels:
        ti = t.tensors
        mix = t.block_dim if t.task_type in _MIX_TYPES else 0
        row = [
            "" if t.step is None else str(t.step), str(MODEL_ID_NONE), str(t.task_id), str(t.stream), t.name, t.op,
            "static", t.task_type, us_str(t.start_ns), us_str(t.dur_ns), us_str(t.wait_ns), str(t.block_dim),
            str(mix), "NO",
            _quoted(ti.get("input_shapes", "")), ti.get("input_data_types", ""), ti.get("input_formats", ""),
            _quoted(ti.get("output_shapes", "")), ti.get("output_data_types", ""), ti.get("output_formats", ""),
            "N/A",
        ]
        rows.append(row + pmu_csv_values(t.pmu))
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


def _csv(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(list(header))
    w.writerows(rows)
    return buf.getvalue()


def _prof_id(name: str, rank: int) -> str:
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


# ---- writing --------------------------------------------------------------------------------------------

def _mkdir(path: str) -> None:
    os.makedirs(path, exist_ok=True)
    os.chmod(path, DIR_MODE)


def _write(path: str, text: str) -> None:
    from opsim.outputs import atomic_file
    with atomic_file(path, encoding="utf-8", newline="") as f:
        f.write(text)
    os.chmod(path, FILE_MODE)


def _json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def write_profiler_output(sim: Any, out_dir: str, *, name: str, epoch_us: int = DEFAULT_EPOCH_US, rank: int = 0,
                          db: bool = False, text: bool = True, step_thread: str | None = None) -> str:
    """Write ``sim`` (after ``sim.run()``) as a torch_npu profiling directory; returns its path.

    ``name`` becomes the ``<name>_<timestamp>_ascend_pt`` directory under ``out_dir`` (timestamp: the UTC
    ``YYYYmmddHHMMSSfff`` of ``epoch_us``, the wall-clock microsecond that simulated time 0 maps to). ``rank``
    names ``profiler_info_<rank>.json`` (the tools take the rank from it). ``db=True`` also writes the
    torch_npu database layout, which the cluster recipes (``compute_op_sum``, ``cann_api_sum``) need;
    ``text=False`` leaves the text files (trace_view.json and the CSVs) out. ``step_thread`` chooses whose steps
    step_trace_time reports. The same simulation and arguments always give byte-identical files.
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
    p = build_profile(sim, epoch_us=epoch_us, step_thread=step_thread)
    root = os.path.join(out_dir, profiler_dir_name(name, epoch_us))
    out = os.path.join(root, OUTPUT_DIR)
    prof = os.path.join(root, f"PROF_000001_{timestamp_17(epoch_us)}_{_prof_id(name, rank)}")
    device_dir = os.path.join(prof, f"device_{p.device_id}")
    if not os.path.isdir(out_dir):
        os.makedirs(out_dir, exist_ok=True)
    for d in (root, out, prof, device_dir):
        _mkdir(d)
    _write(os.path.join(root, f"profiler_info_{rank}.json"), _json(profiler_info(p, rank)))
    _write(os.path.join(device_dir, f"info.json.{p.device_id}"), _json(device_info(p, rank)))
    if text:
        _write(os.path.join(out, "trace_view.json"), trace_view_json(p))
        _write(os.path.join(out, "kernel_details.csv"), _csv(KERNEL_DETAILS_HEADER, kernel_detail_rows(p)))
        _write(os.path.join(out, "op_statistic.csv"), _csv(OP_STATISTIC_HEADER, op_statistic_rows(p)))
        _write(os.path.join(out, "step_trace_time.csv"), _csv(STEP_TRACE_TIME_HEADER, step_trace_rows(p)))
    if db:
        from opsim.trace.ascend_profiler_db import write_profiler_db
        write_profiler_db(p, out, rank=rank)
    return root
