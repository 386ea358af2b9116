"""Running a scenario: build the simulation, run every thread's program, write the outputs, summarise.

`run_scenario(path_or_dict, out_dir=..., overrides=..., progress=...)` is the one entry point the CLI and the
Python API use. Every output is derived from the simulation's one recorder. With `trace: false` nothing is
kept per record: the recorder's record methods fold into the summary's totals instead, so a million calls run
in constant memory and still get every summary figure.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Generator, Mapping, Sequence

from opsim.scenario import heap
from opsim.opdev.settings import SimulationSettings
from opsim.outputs import OutputDir, make_dir
from opsim.scenario.config import OpStep, ScenarioConfig
from opsim.scenario.limits import Limits, MAX_HORIZON_US
from opsim.scenario.loader import load_scenario, profiler_format
from opsim.scenario.progress_bars import progress_bar as _progress_bar, writing_bar as _writing_bar
from opsim.scenario.warmup import warmup_barrier
import yaml
from opsim.acl.dtypes import DataType
from opsim.acl.status import AclnnStatus
from opsim.cluster.cluster import Cluster
from opsim.opdev.thread_local import current

DEFAULT_OUT_ROOT = "opsim-out"
"""Outputs go to `<DEFAULT_OUT_ROOT>/<scenario name>` unless the scenario or the caller names a directory."""

OUTPUT_FILES = {
    "summary": "summary.json",
    "trace": "trace.json",
    "op_summary": "op_summary.csv",
    "task_time": "task_time.csv",
    "timestamps": "ge_profiling_stdout.txt",
    "scenario": "scenario.yaml",
    "records": "records.json.gz",
}


@dataclass
class RunResult:
    """A finished run."""

    scenario: ScenarioConfig
    sim: Any
    summary: dict[str, Any]
    outputs: dict[str, Path] = field(default_factory=dict)
    wall_seconds: float = 0.0
    out_dir: Path | None = None
    stdout_text: str = ""
    """The GE_PROFILING_TO_STD_OUT text (empty when the variable is off)."""
    ranks: list = field(default_factory=list)
    """A job's runs, one per rank (rank 0's is `sim`'s): `.rank.collectives`, `.sim`, `.workloads`; empty for a
    single-rank scenario."""

    @property
    def ok(self) -> bool:
        """True when no call failed."""
        return not self.summary.get("errors")

    @property
    def exit_code(self) -> int:
        """The CLI's exit code for this run: 0 ok, 1 the simulation found errors."""
        return 0 if self.ok else 1


def simulation_settings(config: ScenarioConfig, *, calibration: Any = None,
                        dump_dir: str | None = None) -> SimulationSettings:
    """The one frozen settings object a scenario's simulation is built from (`calibration`: one given to the run,
    over the scenario's; `dump_dir`: where dumps go)."""
    return SimulationSettings(
        soc=config.soc, soc_overrides=config.soc_overrides or {}, env=config.env, profile=config.profile,
        numerics=config.numerics, trace=True, cost_overrides=config.cost_overrides or {}, dump_dir=dump_dir,
        op_dump=config.dump.op_dump, overflow_dump=config.dump.overflow_dump,
        memory_strategy=config.memory_strategy, calibration=calibration or config.calibration,
        deterministic_level=config.deterministic_level, strong_consistency=config.strong_consistency,
        fast_path=config.fast_path)


class _Run:
    """The state of one scenario run shared by its threads (error list, counters, call tagging)."""

    def __init__(self, config: ScenarioConfig, progress: Callable[[int], None] | None, calibration: Any = None,
                 dump_dir: str | None = None, cluster: Any = None, slowdown: float = 1.0, warmup: Any = None):
        """`cluster`: the job this run is the next rank of (its clock, groups, links), None: a single rank;
        `warmup`: the job's WarmupBarrier when a rank's thread warms up (opsim.scenario.warmup)."""
        # lazy: keeps ijson, sqlite3, decimal out of importing opsim.scenario.runner
        from opsim.runtime.simulation import Simulation
        # lazy: keeps opsim.trace out of importing opsim.scenario.runner
        from opsim.trace.ge_profiling import StdoutCapture
        from opsim.trace.summary import SummaryStats  # lazy: keeps opsim.trace out of importing opsim.scenario.runner
        self.config = config
        self.stats = SummaryStats()
        self._now: Callable[[], float] = lambda: 0.0
        self.capture = StdoutCapture(lambda: self._now())
        settings = simulation_settings(config, calibration=calibration, dump_dir=dump_dir)
        if cluster is not None:
            settings = settings.but(device_id=len(cluster.ranks), slowdown=slowdown)
        self.sim = Simulation(settings, stdout=self.capture, record_sink=None if config.trace else self.stats,
                              clock=cluster.env if cluster is not None else None)
        self.cluster = cluster
        self.rank = cluster.add_rank(self.sim) if cluster is not None else None
        """This run's opsim.cluster.Rank in a job (None: a single-rank run)."""
        env = self.sim.env
        self._now = lambda: env.now
        self.events = {name: self.sim.device.create_event(name) for name in config.events}
        self.shared_streams = {name: self.sim.device.create_stream() for name in config.shared_streams}
        self.errors: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.calls = 0
        self.calls_by_thread: dict[str, int] = {}
        self.peak_workspace = 0
        self.progress = progress
        self.capture_calls = config.trace and config.outputs.csv
        self.call_tags: set = set()
        """The `pre_call` hooks of `call_tagger` (a batch records what they would, opsim.scenario.batch)."""
        self.corr_variant: dict[int, tuple[OpStep, int]] = {}
        self.variant_info: dict[tuple[int, int], dict[str, str]] = {}
        self._columns: dict[tuple, dict[str, str]] = {}
        """The tensor columns of each (shapes, dtype, output shapes, output dtype) described (read-only)."""
        self.current_variant: tuple[OpStep, int] | None = None
        # lazy: keeps opsim.kernels, opsim.opdev, opsim.runtime out of importing opsim.scenario.runner
        from opsim.runtime.torch_npu import task_queue_setting
        # lazy: keeps opsim.fastpath, opsim.kernels, opsim.opdev and more out of importing opsim.scenario.runner
        from opsim.scenario.workload import ThreadWorkload
        self.pta_queue = config.uses_pta() and task_queue_setting(config.env)[1]
        self.warmup_barrier = warmup if cluster is not None else warmup_barrier(config, env)  # None: no warm-up
        if self.warmup_barrier is not None:
            self.warmup_barrier.join(self.sim.recorder, len(config.threads))
        self.workloads = [ThreadWorkload(self, th, i) for i, th in enumerate(config.threads)]
        for wl in self.workloads:
            self.sim.add_thread(wl.program, wl.cfg.name)
        self.npu = None
        """torch_npu (opsim.runtime.torch_npu.TorchNpu) when a thread or call uses `cache_mode: pta`."""
        self.pta_stopped: set[str] = set()
        if config.uses_pta():
            # lazy: keeps opsim.kernels, opsim.opdev, opsim.runtime out of importing opsim.scenario.runner
            from opsim.runtime.torch_npu import TorchNpu
            self.npu = TorchNpu(self.sim, env=config.env, queue_thread=config.task_queue_thread,
                                device=self.sim.device.device_id)

    def collective_call(self, spec: Any) -> Any:
        """The collective `spec` as this rank issues it (a `collective` step needs a job)."""
        return self.cluster.call(self.rank.index, spec)

    # --- per-call hooks ------------------------------------------------------------------------------------
    def call_tagger(self, gws: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap a phase-1 function so each call's correlation id is linked to its (op step, variant)."""
        corr_variant = self.corr_variant

        def pre_call(ctx: Any) -> None:
            corr_variant[ctx.current_corr] = self.current_variant

        def tagged(*args: Any) -> Any:
            pre_call(current())
            return gws(*args)

        tagged.__name__ = getattr(gws, "__name__", "get_workspace_size")
        tagged.__wrapped__ = gws  # type: ignore[attr-defined]
        tagged.pre_call = pre_call  # type: ignore[attr-defined]  # what a replayed hit runs instead of the wrapper
        self.call_tags.add(pre_call)
        return tagged

    def describe_variant(self, step: OpStep, variant: int, shapes: Any, dtype: str, out_shapes: Any,
                         out_dtype: Any) -> None:
        if not self.capture_calls:
            return
        key = (tuple(map(tuple, shapes)), dtype, tuple(map(tuple, out_shapes)), out_dtype)
        info = self._columns.get(key)
        if info is None:  # the steps of an imported profile repeat the same few variants: one description each
            # lazy: keeps opsim.trace out of importing opsim.scenario.runner
            from opsim.trace.msprof_csv import tensor_columns

            def name(d: Any) -> str:
                return DataType.parse(d).name[3:]

            info = self._columns[key] = tensor_columns([(s, name(dtype), "ND") for s in key[0]],
                                                       [(s, name(out_dtype), "ND") for s in key[2]])
        self.variant_info[(id(step), variant)] = info

    def tensor_info(self, corr: int) -> dict[str, str] | None:
        hit = self.corr_variant.get(corr)
        if hit is None:
            return None
        step, variant = hit
        return self.variant_info.get((id(step), variant))

    def count_call(self, th: Any, size: int) -> None:
        """One finished op call of thread `th` with a workspace of `size` bytes (totals, progress)."""
        self.calls += 1
        self.calls_by_thread[th.name] = self.calls_by_thread.get(th.name, 0) + 1
        if size > self.peak_workspace:
            self.peak_workspace = size
        if self.progress is not None and not self.calls & 1023:
            self.progress(self.calls)

    def op_call(self, th: Any, gws: Any, run_fn: Any, args: tuple, stream: Any, api: str, step: OpStep,
                _repeat: int) -> Generator:
        """One ACLNN call through the runtime's run_op (phase 1, workspace, phase 2, stream-ordered free)."""
        status, size = yield from _run_op(th, gws, run_fn, args, stream, api)
        self.count_call(th, size)
        if status:
            self.fail(th, step, status)

    def pta_call(self, th: Any, gws: Any, run_fn: Any, args: tuple, stream: Any, api: str, step: OpStep,
                 _repeat: int) -> Generator:
        """One call through torch_npu's EXEC_NPU_CMD (EXEC_NPU_CMD_SYNC for ops whose output shape the device
        computes). Counted, and checked for failure, when its queued part has run."""
        if th.name in self.pta_stopped:
            # lazy: keeps opsim.fastpath, opsim.kernels, opsim.opdev and more out of importing opsim.scenario.runner
            from opsim.scenario.workload import StopThread
            raise StopThread()
        variant = self.current_variant
        form = "sync" if step.spec.output_shape_from_device else "cmd"
        out = yield from self.npu.exec_npu_cmd(th, gws, run_fn, args, stream, api, form=form,
                                               on_done=lambda o: self._pta_done(th, step, o))
        if self.capture_calls:
            self.corr_variant[out.corr] = variant
        if th.name in self.pta_stopped:
            # lazy: keeps opsim.fastpath, opsim.kernels, opsim.opdev and more out of importing opsim.scenario.runner
            from opsim.scenario.workload import StopThread
            raise StopThread()

    def _pta_done(self, th: Any, step: OpStep, out: Any) -> None:
        # lazy: keeps opsim.fastpath, opsim.kernels, opsim.opdev and more out of importing opsim.scenario.runner
        from opsim.scenario.workload import StopThread
        self.count_call(th, out.workspace_size)
        if out.status:
            try:
                self.fail(th, step, out.status)
            except StopThread:  # raised on the calling thread at its next call
                self.pta_stopped.add(th.name)

    def queues_for(self, thread: Any) -> bool:
        """Whether `thread` (a ThreadConfig) queues its event records and waits behind its PTA calls."""
        return self.pta_queue and thread.uses_pta()

    def queue_event(self, th: Any, event: Any, stream: Any, record: bool) -> Generator:
        """aclrtRecordEvent / aclrtStreamWaitEvent through torch_npu's task queue (after the queued calls)."""
        from opsim.runtime import acl_rt  # lazy: keeps opsim.runtime out of importing opsim.scenario.runner
        fn = acl_rt.record_event if record else acl_rt.stream_wait_event
        args = (event, stream) if record else (stream, event)
        api = "aclrtRecordEvent" if record else "aclrtStreamWaitEvent"
        th.ctx.charge("enqueue", api)  # torch_npu enqueues an event like a call
        yield from th.spend_actions()
        self.npu.queue.put(th.name, lambda: fn(*args), -1, None, api)

    def queue_tasks(self, th: Any, name: str, job: Callable[[], Any]) -> Generator:
        """Replayed device tasks (a `task` / `tasks` step, launched by `job`) as one job of torch_npu's task
        queue, behind the queued calls, as torch_npu queues an HCCL collective or a copy."""
        th.ctx.charge("enqueue", name)
        yield from th.spend_actions()
        self.npu.queue.put(th.name, job, -1, None, name)

    def drain(self, th: Any) -> Generator:
        """Before a synchronisation: wait for the task queue to run what `th` queued (no-op without a queue)."""
        if self.npu is not None:
            yield from self.npu.drain(th)

    def repeat_call(self, th: Any, gws: Any, run_fn: Any, args: tuple, stream: Any, api: str, step: OpStep,
                    repeat: int) -> Generator:
        """Phase 1 once, aclSetAclOpExecutorRepeatable, phase 2 `repeat` times on one workspace, then
        aclDestroyAclOpExecutor. Each run is one op_call span with its own correlation id. When the executor
        cannot be made repeatable (for example phase 1 hit the op-exec cache and returned its wrapper) the
        call runs once as an ordinary call and the remaining runs are ordinary calls; a warning says so."""
        # lazy: keeps opsim.kernels, opsim.opdev out of importing opsim.scenario.runner
        from opsim.opdev.executor import destroy_executor, set_repeatable
        from opsim.runtime import acl_rt  # lazy: keeps opsim.runtime out of importing opsim.scenario.runner
        ctx = th.ctx
        rec = self.sim.recorder
        env = th.env
        executor = None
        workspace = 0
        size = 0
        for i in range(repeat):
            ctx.current_corr = rec.next_corr()
            start = env.now
            status = 0
            fallback = False
            try:
                if i == 0:
                    status, size, executor = yield from th.call(gws, *args)
                    if status == 0:
                        st = yield from th.call(set_repeatable, executor)
                        if st != 0:
                            fallback = True
                    if status == 0 and size:
                        status, workspace = yield from th.call(acl_rt.malloc, size)
                        if status != 0:
                            workspace = 0
                            yield from th.call(destroy_executor, executor)
                            executor = None
                if status == 0:
                    status = yield from th.call(run_fn, workspace, size, executor, stream)
                if fallback or status != 0 or i == repeat - 1:
                    if workspace:
                        yield from th.call(acl_rt.free_async, workspace, stream)
                        workspace = 0
                    if executor is not None and not fallback:
                        yield from th.call(destroy_executor, executor)
                    executor = None
            finally:
                if rec.enabled:
                    rec.host_span(th.name, "op_call", api, start, env.now - start, ctx.current_corr)
                ctx.current_corr = -1
            self.count_call(th, size)
            if status:
                self.fail(th, step, status)
                return
            if fallback:
                self.warnings.append(f"{step.where}: {api} repeat {repeat}: aclSetAclOpExecutorRepeatable failed "
                                     "(phase 1 returned an op-exec cache wrapper or an unrepeatable executor); the "
                                     "runs are ordinary calls")
                for _ in range(repeat - 1):
                    yield from self.op_call(th, gws, run_fn, args, stream, api, step, 1)
                return

    def fail(self, th: Any, step: OpStep, status: int, message: str | None = None) -> None:
        """Record a failed call; with `on_error: stop` the thread stops (it still drains and frees)."""
        # lazy: keeps opsim.fastpath, opsim.kernels, opsim.opdev and more out of importing opsim.scenario.runner
        from opsim.scenario.workload import StopThread
        try:
            code = AclnnStatus(int(status)).name
        except ValueError:
            code = str(int(status))
        if message is None:
            last = self.sim.device.memory.last_error
            message = last if code == "ACLNN_ERR_RUNTIME_ERROR" and last.startswith("out of device memory") else \
                f"{step.spec.api} returned {code} ({int(status)})"
        self.errors.append({
            "thread": th.name, "op": step.op, "api": step.spec.api, "status": int(status), "status_name": code,
            "time_us": round(float(self.sim.env.now), 3), "where": step.where,
            "message": f"{th.name} at {self.sim.env.now:.3f} us: {step.op} ({step.where}): {message}",
        })
        if self.config.on_error == "stop":
            raise StopThread()


def _run_op(*args: Any) -> Generator:
    """opsim.runtime.host_thread.run_op, imported on the first call (then bound here directly)."""
    global _run_op
    # lazy: keeps opsim.fastpath, opsim.kernels, opsim.opdev and more out of importing opsim.scenario.runner
    from opsim.runtime.host_thread import run_op
    _run_op = run_op
    return run_op(*args)


def _note_write_time(summary: dict[str, Any], seconds: float, staged: OutputDir, write_summary: bool) -> None:
    """The wall time spent writing every output goes in the summary (`wall.write_seconds`, machine time like
    `wall_seconds`, which is simulating alone); summary.json, written before the records, is written again."""
    wall = summary.get("wall")
    if not isinstance(wall, dict):
        return
    wall["write_seconds"] = round(seconds, 3)
    if write_summary:
        from opsim.trace.summary import summary_json  # lazy: keeps opsim.trace out of importing opsim.scenario.runner
        with staged.open(OUTPUT_FILES["summary"], encoding="utf-8") as fh:
            fh.write(summary_json(summary))


def run_scenario(source: str | Path | Mapping[str, Any] | ScenarioConfig, *, out_dir: str | Path | None = None,
                 overrides: Mapping[str, Any] | None = None, progress: bool = False,
                 profiler_output: bool | str | None = None, write: bool = True, calibration: Any = None,
                 fast_path: bool | None = None, limits: Limits | None = None) -> RunResult:
    """Load (unless given a ScenarioConfig), run and write the outputs of one scenario.

    `out_dir` overrides the scenario's `outputs.dir` (default `opsim-out/<name>`); `profiler_output` overrides
    `outputs.profiler` ("text", "db", "both"; True means "text", False none); `write=False` keeps everything in
    memory, else `records.json.gz` is written too (unless `outputs.records` is false), so
    `opsim.load_result(out_dir)` reads the run back. `calibration` (a calibration YAML path or a loaded
    Calibration) replaces the scenario's `calibration` key. `fast_path=False` runs the reference path whatever
    the scenario says (the outputs are the same either way). Raises `ScenarioError` for a bad scenario,
    `CalibrationError` for a bad calibration file and `OutputPathError` for an unusable output directory, all
    before simulating; failed calls (e.g. out of memory) are reported in `summary["errors"]`, not raised.
    Outputs are staged and committed atomically (`opsim.outputs`): an interrupted run leaves the previous
    outputs in place."""
    config = source if isinstance(source, ScenarioConfig) else load_scenario(source, overrides, limits=limits)
    if fast_path is not None and fast_path != config.fast_path:
        config = replace(config, fast_path=fast_path)
    want_profiler = config.outputs.profiler if profiler_output is None else profiler_format(profiler_output)
    target = Path(out_dir) if out_dir is not None else Path(config.outputs.dir) if config.outputs.dir \
        else Path(DEFAULT_OUT_ROOT) / config.name
    staged = OutputDir(target, _output_names(config, want_profiler)) if write else None
    dump_dir = _dump_dir(config, staged, target)
    update, close = _progress_bar(config.planned_calls(), progress)
    t0 = time.perf_counter()
    frozen = heap.freeze()  # the configuration lives through the run: collections would only rescan it
    try:
        with heap.uncollected():
            run, ranks = _start(config, update, calibration, dump_dir)
        heap.freeze(frozen)  # and so do the compiled programs and the threads
        for r in ranks:
            r.sim.device.memory.host_budget = (limits or Limits()).numerics_bytes
        if not config.trace:
            skipped = [n for n, on in (("trace.json", config.outputs.trace), ("the msprof CSVs", config.outputs.csv),
                                       ("the profiler output", want_profiler)) if on]
            if skipped:
                run.warnings.append(f"trace: false keeps no records, so {', '.join(skipped)} cannot be written "
                                    "(set outputs.trace/csv/profiler to false, or trace: true)")
        run.sim.run() if run.cluster is None else run.cluster.run()
        wall = time.perf_counter() - t0
        if staged is not None:
            from opsim.scenario.checks import check_run_horizon  # lazy: only a run that writes checks it
            check_run_horizon(float(run.sim.env.now), config.trace and config.outputs.trace)
        from opsim.trace.summary import build_summary  # lazy: keeps opsim.trace out of importing opsim.scenario.runner
        stats = run.stats if not config.trace else run.stats.feed_recorder(run.sim.recorder)
        summary = build_summary(run, stats, wall)
        if run.cluster is not None:
            # lazy: keeps opsim.trace out of importing opsim.scenario.runner
            from opsim.trace.rank_table import cluster_section, ranks_section
            rows = [_rank_row(r) for r in ranks]
            summary["cluster"], summary["ranks"] = cluster_section(rows), ranks_section(rows)
        stdout_text = _stdout_text(run)
        result = RunResult(scenario=config, sim=run.sim, summary=summary, wall_seconds=wall,
                           stdout_text=stdout_text, ranks=ranks if run.cluster is not None else [])
        if staged is not None:
            result.out_dir = target
            t1 = time.perf_counter()
            stage = _writing_bar(config, want_profiler, progress)
            write_outputs(run, summary, stdout_text, staged, profiler=want_profiler, stage=stage,
                          ranks=result.ranks)
            if config.outputs.records:
                from opsim.scenario.result import Result  # lazy: only a run that writes its records needs it
                stage("records")
                result.outputs = _keyed(staged.planned())
                Result.from_run(result, lazy=True).write_records(staged.path(OUTPUT_FILES["records"]),
                                                                 relative_to=target)
            stage(None)
            _note_write_time(summary, time.perf_counter() - t1, staged, config.outputs.summary)
            result.outputs = _keyed(staged.commit())
    finally:
        heap.thaw(frozen)
        close()
        if staged is not None:
            staged.discard()
    return result


def _start(config: ScenarioConfig, progress: Callable[[int], None] | None, calibration: Any,
           dump_dir: str | None) -> tuple[_Run, list[_Run]]:
    """The run to simulate (rank 0's in a job) and every rank's run: one for a single-rank scenario; for a job
    one per rank on the cluster's clock, each with the threads it runs, its slowdown and its own dumps."""
    if config.cluster is None:
        run = _Run(config, progress, calibration, dump_dir)
        return run, [run]
    # lazy: keeps ijson, sqlite3, decimal out of importing opsim.scenario.runner
    from opsim.calibration import load_calibration
    cal = load_calibration(calibration or config.calibration)
    cluster = Cluster(config.cluster, fast_path=config.fast_path, source=str(config.source or config.name),
                      calibrated_links=getattr(cal, "links", None), horizon_us=MAX_HORIZON_US)
    ranks = []
    warmup = warmup_barrier(config, cluster.env)  # one profiler start for the job: after every rank's warm-up
    for r in range(config.cluster.size):
        own = replace(config, threads=config.rank_threads(r), cluster=None, ranks=())
        ranks.append(_Run(own, progress, calibration, dump_dir and os.path.join(dump_dir, f"rank{r}"),
                          cluster=cluster, slowdown=config.rank_config(r).slowdown, warmup=warmup))
    return ranks[0], ranks


def _rank_row(run: _Run) -> dict[str, Any]:
    from opsim.trace.rank_table import rank_row  # lazy: keeps opsim.trace out of importing opsim.scenario.runner
    records = run.sim.recorder.records("device") if run.config.trace else None  # read once: a copy of the columns
    device_end = run.stats.device_end if records is None else max(records["end"], default=0.0)
    return rank_row(run.rank.index, slowdown=run.sim.settings.slowdown, calls=run.calls, device_end_us=device_end,
                    totals=run.rank.totals, device_records=records)


def _top(rel: str) -> str:
    """The first component of a relative path ("dump/a" -> "dump")."""
    return Path(os.path.normpath(rel)).parts[0]


def _output_names(config: ScenarioConfig, profiler: str) -> list[str]:
    """Every entry the run may write directly in its output directory (checked against user files first)."""
    names = list(OUTPUT_FILES.values())
    if profiler:
        # lazy: keeps opsim.scenario out of importing opsim.scenario.runner
        from opsim.scenario.profiler_outputs import profiler_dir_names
        names.extend(profiler_dir_names(config))
    if config.dump.dir and not os.path.isabs(config.dump.dir):
        names.append(_top(config.dump.dir))
    return names


def _dump_dir(config: ScenarioConfig, staged: OutputDir | None, target: Path) -> str | None:
    """Where tensor dumps go: a relative dump.dir inside the output directory (staged with the other outputs),
    an absolute one as given."""
    d = config.dump.dir
    if d and os.path.isabs(d) and config.numerics:  # made now: a directory that cannot be made fails before the run
        make_dir(d, "dump.dir")
    if not d or os.path.isabs(d):
        return d
    if staged is None:
        return str(target / d)
    staged.path(_top(d))
    return str(staged.staging / os.path.normpath(d))


def _keyed(written: Mapping[str, Path]) -> dict[str, Path]:
    """The written outputs by OUTPUT_FILES key ("profiler" for the profiler directory; dumps are not listed)."""
    by_name = {v: k for k, v in OUTPUT_FILES.items()}
    return {by_name.get(name, "profiler"): path for name, path in written.items()
            if name in by_name or name.endswith("_ascend_pt")}


def _stdout_text(run: _Run) -> str:
    # lazy: keeps opsim.trace out of importing opsim.scenario.runner
    from opsim.trace.ge_profiling import aicore_blocks, merge_text
    blocks = []
    if run.config.trace and run.sim.process.ge_profiling:
        blocks = aicore_blocks(run.sim.recorder.records("host"))
    return merge_text(run.capture.writes, blocks)


def write_outputs(run: _Run, summary: dict[str, Any], stdout_text: str, out: OutputDir, *,
                  profiler: str = "", stage: Callable[[str | None], None] | None = None,
                  ranks: Sequence[_Run] = ()) -> None:
    """Write every output the scenario asks for into the staged output directory `out`; `stage` is told the
    name of each writer as it starts (the progress bar). `ranks`: every rank's run of a job (each writes its
    own profiler directory)."""
    stage = stage or (lambda name: None)

    from opsim.trace.summary import summary_json  # lazy: keeps opsim.trace out of importing opsim.scenario.runner
    cfg = run.config
    sim = run.sim
    with out.open(OUTPUT_FILES["scenario"], encoding="utf-8") as fh:
        fh.write(yaml.safe_dump(_plain_data(cfg.data), sort_keys=False, allow_unicode=True))
    if cfg.trace and cfg.outputs.trace:
        # lazy: keeps Numba out of importing opsim.scenario.runner
        from opsim.trace.chrome_trace import write_chrome_trace
        stage("trace.json")
        with out.open(OUTPUT_FILES["trace"], encoding="utf-8") as fh:
            write_chrome_trace(sim, fh)
    if cfg.trace and cfg.outputs.csv:
        # lazy: keeps opsim.trace out of importing opsim.scenario.runner
        from opsim.trace.msprof_csv import write_op_summary, write_task_time
        stage("op_summary.csv")
        with out.open(OUTPUT_FILES["op_summary"], encoding="utf-8", newline="") as fh:
            write_op_summary(sim.recorder, fh, epoch_us=cfg.epoch_us, clock_mhz=sim.soc.clock_mhz,
                             tensor_info=run.tensor_info, device_id=sim.device.device_id)
        stage("task_time.csv")
        with out.open(OUTPUT_FILES["task_time"], encoding="utf-8", newline="") as fh:
            write_task_time(sim.recorder, fh, epoch_us=cfg.epoch_us, device_id=sim.device.device_id)
    if cfg.outputs.timestamps and stdout_text:
        with out.open(OUTPUT_FILES["timestamps"], encoding="utf-8", newline="") as fh:
            fh.write(stdout_text)
    if profiler and cfg.trace:
        # lazy: keeps opsim.scenario out of importing opsim.scenario.runner
        from opsim.scenario.profiler_outputs import write_profiler_outputs
        stage("profiler output")
        write_profiler_outputs(ranks or [run], out, profiler)
    if cfg.outputs.summary:
        with out.open(OUTPUT_FILES["summary"], encoding="utf-8") as fh:
            fh.write(summary_json(summary))


def _plain_data(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _plain_data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain_data(v) for v in obj]
    return obj


__all__ = ["run_scenario", "load_scenario", "RunResult", "write_outputs", "OUTPUT_FILES", "DEFAULT_OUT_ROOT"]
