"""The Ascend profiler model: what the profiler files say about one device of one simulation.

``build_profile`` (ascend_build.py) fills an ``AscendProfile`` from the recorder; the trace view, the CSV tables
and the databases are all written from it, so they agree with each other. Timestamps are integer epoch
nanoseconds (see ascend_profiler.py for the conventions).
"""
from __future__ import annotations

import datetime as _dt
import functools
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Iterator

import numpy as np

from opsim.trace import step_breakdown
from opsim.trace.timefmt import to_ns, us_text

if TYPE_CHECKING:
    from opsim.trace.ascend_memory import MemoryEvents, OpMemories
    from opsim.trace.ascend_pmu import KernelPmu
    from opsim.trace.ascend_tasks import DeviceTasks

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
NON_KERNEL_TASK_TYPES = frozenset({"HOST_FUNC", "MEMCPY_ASYNC", "EVENT_RECORD_SQE", "EVENT_WAIT_SQE",
                                   "PCIE_DMA_SQE", "SDMA_SQE"})
"""Task types that are not kernels (no kernel_details row; the last two: a replayed profile's copies)."""
BUSY_NON_KERNEL_TASK_TYPES = frozenset({"MEMCPY_ASYNC", "PCIE_DMA_SQE", "SDMA_SQE"})
"""Non-kernel tasks that still keep the device busy (the profile's busy intervals)."""
AICPU_TASK_TYPES = frozenset({"AI_CPU"})

_CUBE_TYPES = frozenset({"AI_CORE", "MIX_AIC"})
_VECTOR_TYPES = frozenset({"AI_VECTOR_CORE", "MIX_AIV"})
MIX_TYPES = frozenset({"MIX_AIC", "MIX_AIV"})

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

# ---- time formatting ----------------------------------------------------------------------------------

us_str = us_text
"""Integer nanoseconds as a microsecond string with exactly three decimals (no float on the way)."""


def to_epoch_ns(epoch_ns: int, t_us: float) -> int:
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


@functools.lru_cache(maxsize=4096)
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


@functools.lru_cache(maxsize=1024)
def is_kernel_type(task_type: str) -> bool:
    """Whether tasks of this type are kernels (a kernel_details row); remembered per type."""
    return task_type not in NON_KERNEL_TASK_TYPES and step_breakdown.is_compute(task_type)


# ---- the profile model ----------------------------------------------------------------------------------

@dataclass(slots=True)
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
class OpCalls:
    """The ACLNN calls as columns, in start order (a million-call run has a million): ``thread`` and ``api`` are
    codes into ``threads`` / ``apis``; ``step`` is valid where ``has_step``. ``OpCalls[i]`` and iteration give
    `OpCall` objects (tests, small runs); the writers read the columns."""

    corr: np.ndarray
    thread: np.ndarray
    threads: list[str]
    tid: np.ndarray
    api: np.ndarray
    apis: list[str]
    start_ns: np.ndarray
    end_ns: np.ndarray
    step: np.ndarray
    has_step: np.ndarray
    seq: np.ndarray

    def __len__(self) -> int:
        return len(self.corr)

    def __getitem__(self, i: int) -> OpCall:
        return OpCall(int(self.corr[i]), self.threads[self.thread[i]], int(self.tid[i]), self.apis[self.api[i]],
                      int(self.start_ns[i]), int(self.end_ns[i]), int(self.step[i]) if self.has_step[i] else None,
                      int(self.seq[i]))

    def __iter__(self) -> Iterator[OpCall]:
        return (self[i] for i in range(len(self)))

    def index_of(self, corrs: np.ndarray) -> np.ndarray:
        """The row of the call with each correlation id (-1: none)."""
        corrs = np.asarray(corrs, dtype=np.int64)
        out = np.full(len(corrs), -1, dtype=np.int64)
        if len(self.corr):
            by_corr = np.argsort(self.corr, kind="stable")
            ordered = self.corr[by_corr]
            pos = np.minimum(np.searchsorted(ordered, corrs), len(ordered) - 1)
            hit = (corrs >= 0) & (ordered[pos] == corrs)
            out[hit] = by_corr[pos[hit]]
        return out

    def torch_names(self) -> list[str]:
        """`OpCall.torch_name` of each API code."""
        return [torch_op_name(a) for a in self.apis]

    def call_stacks(self) -> tuple[np.ndarray, list[str]]:
        """`OpCall.call_stack` of every call as a code into the returned texts, numbered in order of first use
        (calls of one thread, position and API share one text)."""
        if not len(self):
            return np.empty(0, np.int64), []
        seq = self.seq.astype(np.int64)
        key = (self.thread.astype(np.int64) * (int(seq.max()) + 1) + seq) * max(len(self.apis), 1) + self.api
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
        rank = np.empty(len(first), np.int64)
        order = np.argsort(first, kind="stable")
        rank[order] = np.arange(len(first))
        texts = [f"{self.threads[self.thread[i]]}({int(self.seq[i])}): {self.apis[self.api[i]]}"
                 for i in first[order].tolist()]
        return rank[inv.reshape(-1)], texts


@dataclass(slots=True)
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


API_KINDS = ("acl", "node")
"""`ApiSpans.kind` codes."""


@dataclass
class ApiSpans:
    """The CANN-level host spans as columns (a million-call run has millions): ``kind`` a code into `API_KINDS`,
    ``name`` an index into ``names``; read as `ApiSpan` objects by index or iteration (tests, small runs)."""

    kind: np.ndarray
    name: np.ndarray
    names: list[str]
    tid: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    corr: np.ndarray

    def __len__(self) -> int:
        return len(self.kind)

    def __getitem__(self, i: int) -> ApiSpan:
        return ApiSpan(API_KINDS[self.kind[i]], self.names[self.name[i]], int(self.tid[i]), int(self.start_ns[i]),
                       int(self.end_ns[i]), int(self.corr[i]))

    def __iter__(self) -> Iterator[ApiSpan]:
        names = self.names
        for k, n, tid, s, e, c in zip(self.kind.tolist(), self.name.tolist(), self.tid.tolist(),
                                      self.start_ns.tolist(), self.end_ns.tolist(), self.corr.tolist()):
            yield ApiSpan(API_KINDS[k], names[n], tid, s, e, c)

    def trace_names(self) -> list[str]:
        """``AscendCL@<name>`` / ``Node@<name>`` of each (kind code, name index) as ``kind * len(names) + name``."""
        return [("AscendCL@" if k == 0 else "Node@") + n for k in range(len(API_KINDS)) for n in self.names]


@dataclass(slots=True)
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
        return is_kernel_type(self.task_type)

    @property
    def is_busy(self) -> bool:
        return self.is_kernel or self.task_type in BUSY_NON_KERNEL_TASK_TYPES

    @property
    def flow_id(self) -> str:
        """torch_npu's flow id ``<stream>-<device ts>`` (the advisor finds call stacks through it)."""
        return f"{self.stream}-{us_str(self.start_ns)}"


@dataclass(slots=True)
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
    op_calls: OpCalls
    """The ACLNN calls, as columns."""
    api_spans: ApiSpans
    tasks: DeviceTasks
    """The shown device tasks, as columns (ascend_tasks.py)."""
    steps: list[StepWindow]
    """Every thread's ProfilerSteps (the trace shows each thread's own)."""
    step_windows: list[StepWindow]
    """The step timeline of step_trace_time.csv and the kernels' Step Id: one thread's steps (`_step_timeline`)."""
    step_rows: list[StepRow]
    busy: np.ndarray
    """The union of the busy tasks (`merged`): an (n, 2) int64 array of sorted, disjoint [start, end) intervals
    (a million-call run has about a million: columns, not tuples)."""
    memory_events: MemoryEvents = field(default_factory=lambda: _no_memory()[0])
    """The device's allocs and frees in time order with running totals, as columns (see ascend_memory.py)."""
    op_memory: OpMemories = field(default_factory=lambda: _no_memory()[1])
    """Each allocation's lifetime, as columns."""
    session_ns: tuple[int, int] = (0, 0)
    """First and last epoch ns of any record (SESSION_TIME_INFO)."""
    comm: np.ndarray = field(default_factory=lambda: no_intervals())
    """The union of the communication tasks (a rank's collectives), as merged intervals (like ``busy``)."""

    @property
    def kernels(self) -> list[DeviceTaskRow]:
        return [t for t in self.tasks if t.is_kernel]

    @property
    def free(self) -> np.ndarray:
        """Gaps in which the device neither computes nor communicates (intervals like ``busy``)."""
        spans = merged_array(np.concatenate([self.busy, self.comm])) if len(self.comm) else self.busy
        gap = np.flatnonzero(spans[1:, 0] > spans[:-1, 1])
        return np.stack([spans[gap, 1], spans[gap + 1, 0]], axis=1) if len(gap) else no_intervals()

    @property
    def comm_not_overlapped(self) -> np.ndarray:
        """The parts of the communication intervals during which nothing computes (intervals like ``busy``)."""
        out: list[tuple[int, int]] = []
        busy = self.busy.tolist() if len(self.comm) else []  # a job's rank: the busy walk is over a list
        j = 0
        for s, e in self.comm.tolist():
            while j < len(busy) and busy[j][1] <= s:
                j += 1
            k, cur = j, s
            while k < len(busy) and busy[k][0] < e:
                if busy[k][0] > cur:
                    out.append((cur, busy[k][0]))
                cur = max(cur, busy[k][1])
                k += 1
            if cur < e:
                out.append((cur, e))
        return np.array(out, dtype=np.int64).reshape(-1, 2)

    @property
    def computing_ns(self) -> int:
        return int((self.busy[:, 1] - self.busy[:, 0]).sum())

    @property
    def e2e_ns(self) -> int:
        return int(self.busy[-1, 1] - self.busy[0, 0]) if len(self.busy) else 0


def _no_memory() -> tuple:
    from opsim.trace.ascend_memory import no_memory  # lazy: only a profile without memory events needs it
    return no_memory()


def no_intervals() -> np.ndarray:
    """An empty interval array ((0, 2) int64)."""
    return np.empty((0, 2), np.int64)


def merged_array(intervals: np.ndarray) -> np.ndarray:
    """`merge_intervals` of an (n, 2) int64 array, with numpy: sorted, disjoint, touching ones joined."""
    if not len(intervals):
        return no_intervals()
    order = np.lexsort((intervals[:, 1], intervals[:, 0]))
    s, e = intervals[order, 0], intervals[order, 1]
    reach = np.maximum.accumulate(e)
    first = np.flatnonzero(np.r_[True, s[1:] > reach[:-1]])
    last = np.r_[first[1:] - 1, len(s) - 1]
    return np.stack([s[first], reach[last]], axis=1)


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
