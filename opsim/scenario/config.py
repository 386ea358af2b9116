"""The typed form of a validated scenario: what the runner and the workload generator read.

Every value here has been checked (schema and catalogue); defaults are filled in, op names resolved to their
`OpSpec`, shape sets expanded to one tuple of input shapes per choice.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Union

from opsim.ops.registry import OpSpec

Shape = tuple[int, ...]


@dataclass(frozen=True)
class OpStep:
    """One ACLNN call (or, with `repeat` > 1, one repeatable executor run `repeat` times)."""

    op: str
    spec: OpSpec
    stream: str
    shape_sets: tuple[tuple[Shape, ...], ...]
    """One tuple of input shapes per choice (a single entry when the shapes are fixed)."""
    dtypes: tuple[str, ...]
    """Dtype choices (a single entry when fixed)."""
    attrs: Mapping[str, Any]
    repeat: int = 1
    cache_mode: str | None = None
    """`ordinary` or `pta` for this call only; None: the thread's mode."""
    where: str = ""
    """Where the step was written ("file:line"), for messages."""

    @property
    def variants(self) -> int:
        return len(self.shape_sets) * len(self.dtypes)


@dataclass(frozen=True)
class LoopStep:
    count: int
    body: tuple["Step", ...]


@dataclass(frozen=True)
class ChooseStep:
    """Run one of `options`, picked uniformly at random (seeded) each time the step is reached."""

    options: tuple["Step", ...]


@dataclass(frozen=True)
class SyncStep:
    stream: str


@dataclass(frozen=True)
class SyncDeviceStep:
    pass


@dataclass(frozen=True)
class EventStep:
    event: str
    stream: str
    record: bool
    """True: aclrtRecordEvent; False: aclrtStreamWaitEvent."""


@dataclass(frozen=True)
class TaskStep:
    """A device task replayed from a profile (communication or recorded), submitted on `stream`."""

    stream: str
    kind: str
    """'communication' or 'recorded' (opsim.device.task.TaskKind COMMUNICATION / RECORDED)."""
    name: str
    task_type: str
    duration_us: float


@dataclass(frozen=True)
class TasksStep:
    """Several replayed device actions (tasks, event records and waits) launched by one host action, such as an
    HCCL collective with its sub-tasks and the events around them: one job of torch_npu's task queue."""

    tasks: tuple[TaskStep | EventStep, ...]


@dataclass(frozen=True)
class CollectiveStep:
    """A collective of a communication group (or a send/recv pair), issued on `stream` (opsim.cluster)."""

    stream: str
    spec: Any
    """The collective (opsim.cluster.collective.CollectiveSpec)."""


@dataclass(frozen=True)
class SleepStep:
    us: float


@dataclass(frozen=True)
class ProfilingStep:
    """The profiler starts (with a switch mask) or stops: opbase's profiling callback, process-wide."""

    start: bool
    mask: int = 0


@dataclass(frozen=True)
class DeterministicStep:
    """The runtime's deterministic options change (process-wide); None leaves an option as it is."""

    level: int | None = None
    strong_consistency: bool | None = None


Step = Union[OpStep, LoopStep, ChooseStep, SyncStep, SyncDeviceStep, EventStep, SleepStep, ProfilingStep,
             DeterministicStep, TaskStep, TasksStep, CollectiveStep]


@dataclass(frozen=True)
class ThreadConfig:
    name: str
    streams: tuple[str, ...]
    program: tuple[Step, ...]
    cache_mode: str = "ordinary"
    """How the thread's ACLNN calls reach the OpExecCache: `ordinary` (opbase's own key) or `pta` (torch_npu)."""
    warmup: tuple[Step, ...] = ()
    """Steps run before `program` with the profiler stopped (opsim.scenario.warmup): a cache-priming pass that
    the profiler outputs leave out, as torch_npu's schedule leaves out its wait and warm-up steps."""

    def steps(self) -> tuple[Step, ...]:
        """Every top-level step the thread runs: its warm-up, then its program."""
        return self.warmup + self.program if self.warmup else self.program

    def uses_pta(self) -> bool:
        """Whether the thread or any of its calls uses `cache_mode: pta`."""
        return self.cache_mode == "pta" or _any_pta(self.steps())


@dataclass(frozen=True)
class OutputsConfig:
    dir: str | None = None
    trace: bool = True
    csv: bool = True
    timestamps: bool = True
    summary: bool = True
    records: bool = True
    """records.json.gz, what `opsim.load_result` reads (every record as JSON: large for a big traced run)."""
    profiler: str = ""
    """The Ascend profiler layout to write: "" none, "text", "db" or "both" (a scenario's `true` is "text")."""
    step_thread: str | None = None
    """The thread whose ProfilerStep windows define step_trace_time.csv's steps (default: the first thread)."""


@dataclass(frozen=True)
class DumpConfig:
    op_dump: bool = False
    overflow_dump: bool = False
    dir: str | None = None


@dataclass(frozen=True)
class RankConfig:
    """One rank's settings (the scenario's `ranks[i]`)."""

    threads: tuple[ThreadConfig, ...] | None = None
    """The rank's own threads (an imported rank), None: see `like`, else the scenario's threads."""
    like: int | None = None
    """Run this other rank's threads (a rank an import filled in)."""
    slowdown: float = 1.0
    """Kernel time of this rank's NPU times this factor."""


@dataclass(frozen=True)
class ScenarioConfig:
    """A validated scenario."""

    name: str
    threads: tuple[ThreadConfig, ...]
    description: str = ""
    seed: int = 0
    soc: str = "Ascend910B2"
    soc_overrides: Mapping[str, float] = field(default_factory=dict)
    profile: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    """The opbase variables in force: the shell's, then the scenario's `env`, then `--set` (environment.py)."""
    env_sources: Mapping[str, str] = field(default_factory=dict)
    """NAME -> where its value came from: "shell", "scenario" or "--set"."""
    env_shell: Mapping[str, str] = field(default_factory=dict)
    """The documented variables the shell had (reported where the scenario or --set overrode them)."""
    cost_overrides: Mapping[str, float] = field(default_factory=dict)
    calibration: str | None = None
    """A calibration YAML (`opsim calibrate`), resolved against the scenario file's directory."""
    deterministic_level: int = 0
    """The runtime's deterministic level at start (ACL_OPT_DETERMINISTIC, process-wide)."""
    strong_consistency: bool = False
    """The runtime's strong-consistency option (ACL_OPT_STRONG_CONSISTENCY): a level 1 reads as 2."""
    numerics: bool = False
    trace: bool = True
    memory_strategy: str = "first_fit"
    epoch_us: int = 0
    on_error: str = "stop"
    dump: DumpConfig = field(default_factory=DumpConfig)
    direct_invoke_module: str | None = None
    events: tuple[str, ...] = ()
    shared_streams: tuple[str, ...] = ()
    """Streams every thread sees (top-level `streams`): created once, before the threads' own streams."""
    task_queue_thread: str = "task_queue"
    fast_path: bool = True
    """Steady-state shortcuts of the simulator (outputs unchanged); false runs the reference path."""
    """Name of the torch_npu task-queue consumer thread that `cache_mode: pta` calls are queued to."""
    share_tensors: bool = False
    """Op steps of a thread with the same op, shapes, dtypes and attributes share their tensors
    (opsim.scenario.workload; `opsim import` sets it)."""
    outputs: OutputsConfig = field(default_factory=OutputsConfig)
    source: Path | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    """The scenario as loaded (after overrides), for the record written next to the outputs."""
    extra_ops: Mapping[str, OpSpec] = field(default_factory=dict)
    """Ops from `direct_invoke_module`."""
    cluster: Any = None
    """The job's ranks, groups and links (opsim.cluster.ClusterSpec), None: a single-rank scenario."""
    ranks: tuple[RankConfig, ...] = ()
    """Per-rank settings by rank index (ranks beyond the tuple run the scenario's threads)."""

    def rank_config(self, rank: int) -> RankConfig:
        """Rank `rank`'s settings (defaults beyond the listed ranks)."""
        return self.ranks[rank] if rank < len(self.ranks) else RankConfig()

    def rank_threads(self, rank: int) -> tuple[ThreadConfig, ...]:
        """The threads rank `rank` runs: its own, its `like` rank's (followed), else the scenario's."""
        return rank_threads(self.threads, self.ranks, rank)

    @property
    def rank_count(self) -> int:
        """Ranks in the job (1 for a single-rank scenario)."""
        return self.cluster.size if self.cluster is not None else 1

    def uses_pta(self) -> bool:
        """Whether any thread or call uses `cache_mode: pta`."""
        return any(th.uses_pta() for th in self.threads)

    def planned_calls(self) -> int:
        """ACLNN calls the program makes (a `choose` counts its largest option), over every rank: the progress
        bar's total."""
        return sum(program_calls(th.steps()) for r in range(self.rank_count) for th in self.rank_threads(r))

    def estimated_calls(self) -> int:
        """The call budget's measure: ACLNN calls, with every loop iteration counting at least one (a loop
        of 10**12 iterations over an empty body or a sleep costs as much to simulate as one of calls)."""
        return sum(program_calls(th.steps(), 1) for r in range(self.rank_count) for th in self.rank_threads(r))

    def has_warmup(self) -> bool:
        """Whether a thread of any rank has `warmup` steps (the profiler then starts after them)."""
        return any(th.warmup for r in range(self.rank_count) for th in self.rank_threads(r))


def rank_threads(threads: tuple[ThreadConfig, ...], ranks: tuple[RankConfig, ...],
                 rank: int) -> tuple[ThreadConfig, ...]:
    """The threads rank `rank` of a job runs: its own, its `like` rank's (followed), else `threads`."""
    seen = set()
    while rank not in seen and rank < len(ranks):
        seen.add(rank)
        rc = ranks[rank]
        if rc.threads is not None:
            return rc.threads
        if rc.like is None:
            break
        rank = rc.like
    return threads


def _any_pta(program: tuple[Step, ...]) -> bool:
    for step in program:
        if isinstance(step, OpStep) and step.cache_mode == "pta":
            return True
        body = step.body if isinstance(step, LoopStep) else step.options if isinstance(step, ChooseStep) else ()
        if _any_pta(body):
            return True
    return False


def program_calls(program: tuple[Step, ...], per_iteration: int = 0) -> int:
    """ACLNN calls of the program; each loop iteration counts at least `per_iteration` (0: exact calls)."""
    n = 0
    for step in program:
        if isinstance(step, OpStep):
            n += step.repeat
        elif isinstance(step, LoopStep):
            n += step.count * max(program_calls(step.body, per_iteration), per_iteration)
        elif isinstance(step, ChooseStep):
            n += max(program_calls((o,), per_iteration) for o in step.options)
    return n


def sleep_us(program: tuple[Step, ...]) -> float:
    """Simulated time the program spends in `sleep` steps (a `choose` counts its longest option): a lower
    bound of its horizon, known before simulating."""
    t = 0.0
    for step in program:
        if isinstance(step, SleepStep):
            t += step.us
        elif isinstance(step, LoopStep):
            t += step.count * sleep_us(step.body)
        elif isinstance(step, ChooseStep):
            t += max(sleep_us((o,)) for o in step.options)
    return t


def op_steps(program: tuple[Step, ...]) -> list[OpStep]:
    """Every op step of the program, once each (loop bodies and choose options included)."""
    out: list[OpStep] = []
    for step in program:
        if isinstance(step, OpStep):
            out.append(step)
        elif isinstance(step, LoopStep):
            out.extend(op_steps(step.body))
        elif isinstance(step, ChooseStep):
            out.extend(op_steps(step.options))
    return out


__all__ = ["CollectiveStep", "RankConfig", "TaskStep", "TasksStep", "OpStep", "LoopStep", "ChooseStep", "SyncStep", "SyncDeviceStep", "EventStep", "SleepStep", "ProfilingStep",
           "DeterministicStep", "Step", "ThreadConfig", "OutputsConfig", "DumpConfig", "ScenarioConfig",
           "sleep_us", "op_steps", "program_calls", "rank_threads"]
