"""Workload generation: a thread's program compiled into a SimPy generator, drawing its choices from a seeded rng.

Each program step becomes a small generator function, compiled once; loops run them in place, so a million
calls cost no more memory than ten (nothing is expanded ahead). Random choices (shape sets, dtypes, `choose`
options) come from `numpy.random.default_rng` seeded from the scenario seed and the thread's index, drawn in
batches. The tensors of each (op, shapes, dtype) variant are created once per thread, placed in device memory
at first use (filled with seeded random data when numerics are on), reused by every later call, and freed when
the thread ends.
"""
from __future__ import annotations

from typing import Any, Callable, Generator

import numpy as np

from opsim.scenario import batch
from opsim.scenario.batch import LoopState
from opsim.scenario.config import (ChooseStep, DeterministicStep, EventStep, LoopStep, OpStep, ProfilingStep,
                                   SleepStep, Step, SyncDeviceStep, SyncStep, TasksStep, TaskStep, ThreadConfig,
                                   CollectiveStep)
from opsim.acl.dtypes import DataType, from_compute
from opsim.acl.tensor import Tensor
from opsim.opdev import profiling
from opsim.opdev.thread_local import current
from opsim.runtime import acl_rt

_BATCH = 4096


class StopThread(Exception):
    """The thread stops here (a failed call with `on_error: stop`)."""


class Chooser:
    """Uniform choices from a seeded generator, drawn `_BATCH` at a time (kept as Python floats: indexing a list
    and multiplying a float is cheaper than a numpy scalar, and gives the same double product)."""

    __slots__ = ("rng", "_buf", "_i")

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self._buf = rng.random(_BATCH).tolist()
        self._i = 0

    def pick(self, n: int) -> int:
        """An index in [0, n)."""
        if n == 1:
            return 0
        i = self._i
        if i == _BATCH:
            self._buf = self.rng.random(_BATCH).tolist()
            i = 0
        self._i = i + 1
        return int(self._buf[i] * n)

    def export_state(self) -> tuple[list, int]:
        """(this batch of draws, the index of the next one): a batched run (opsim.fastpath.batch) draws from
        them in its compiled loop and hands the index back through `import_state`."""
        return self._buf, self._i

    def import_state(self, i: int) -> None:
        """The index of the next draw, as a batched run left it."""
        self._i = i

    def refill(self) -> list:
        """The next batch of draws, drawn as `pick` draws it when the batch is used up."""
        self._buf = self.rng.random(len(self._buf)).tolist()
        self._i = 0
        return self._buf


def thread_rngs(seed: int, index: int) -> tuple[np.random.Generator, np.random.Generator]:
    """(choice rng, data rng) of thread `index`: independent streams, so numerics never change the workload."""
    choice_seq, data_seq = np.random.SeedSequence([seed, index]).spawn(2)
    return np.random.default_rng(choice_seq), np.random.default_rng(data_seq)


class ThreadWorkload:
    """One thread's runtime state: its streams, tensors, chooser, and the compiled program."""

    def __init__(self, run: Any, cfg: ThreadConfig, index: int):
        self.run = run
        self.cfg = cfg
        self.index = index
        sim = run.sim
        self.sim = sim
        self.memory = sim.device.memory
        shared = run.shared_streams
        self.streams = {name: shared[name] if name in shared else sim.device.create_stream() for name in cfg.streams}
        choice_rng, self.data_rng = thread_rngs(run.config.seed, index)
        self.chooser = Chooser(choice_rng)
        self.allocations: list[int] = []
        self.stopped = False
        self.step_no = 0
        self.loop: LoopState | None = None
        """The top loop being run in batches (opsim.scenario.batch), if any."""
        self.thread: Any = None
        self._shared_args: dict[tuple, dict[int, tuple]] = {}
        self.queued = run.queues_for(cfg)
        """Whether its event steps and replayed tasks go through torch_npu's task queue (asked once: it walks the
        whole program)."""
        self._program = [self._compile(s, top=True) for s in cfg.program]
        self._warmup = [self._compile(s) for s in cfg.warmup]

    # --- tensors ------------------------------------------------------------------------------------------
    def make_tensor(self, shape: tuple[int, ...], dtype: Any, role: str) -> Any:
        """A tensor at a fresh device allocation (seeded random data for inputs when numerics are on)."""
        dt = DataType.parse(dtype)
        t = Tensor(shape, dt)
        nbytes = t.storage_nbytes
        # An empty tensor still gets a (minimum-size) buffer, as an application passes a valid address.
        status, addr = self.memory.malloc(max(nbytes, 1), at=self.sim.env.now)
        if status != 0:
            raise _AllocFailed(int(status), self.memory.last_error)
        self.allocations.append(addr)
        t.set_storage_address(addr)
        if self.sim.process.numerics:
            t.storage.memory = self.memory
            if role == "input" and nbytes > 0:
                n = t.numel()
                rng = self.data_rng
                if dt in (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16, DataType.DT_DOUBLE):
                    values = from_compute(rng.standard_normal(n).astype(np.float32), dt)
                elif dt == DataType.DT_BOOL:
                    values = rng.integers(0, 2, n).astype(np.bool_)
                else:
                    values = rng.integers(-8, 8, n).astype(dt.numpy_dtype)
                t.write(values)
        return t

    def _warm_up(self, th: Any, barrier: Any) -> Generator:
        """The warm-up steps, a device sync, then the wait for every other thread's (opsim.scenario.warmup); a
        thread stopped by a failed warm-up call still arrives, so the others go on."""
        warmed = bool(self._warmup)
        try:
            for fn in self._warmup:
                yield from fn(th)
            if warmed:
                yield from self._sync_device(th)
        except StopThread:
            self.stopped = True
        yield from barrier.arrive(warmed)
        if self.stopped:
            raise StopThread()

    def free_all(self) -> Generator:
        """aclrtFree of every tensor this thread placed (after its streams drained)."""
        for addr in self.allocations:
            yield from self.thread.call(acl_rt.free, addr)
        self.allocations.clear()

    # --- compilation ----------------------------------------------------------------------------------
    def _compile(self, step: Step, top: bool = False) -> Callable[[Any], Generator]:
        if isinstance(step, OpStep):
            return self._compile_op(step).step
        if isinstance(step, LoopStep):
            count = step.count
            if top and batch.loop_batchable(self, step):
                plans = [self._compile_op(s) for s in step.body]
                return lambda th: batch.batched_loop(self, th, plans, count)
            body = [self._compile(s) for s in step.body]
            if top:
                return lambda th: self._top_loop(th, body, count)
            return lambda th: self._loop(th, body, count)
        if isinstance(step, ChooseStep):
            options = [self._compile(s) for s in step.options]
            pick = self.chooser.pick
            n = len(options)
            return lambda th: options[pick(n)](th)
        if isinstance(step, SyncStep):
            stream = self.streams[step.stream]
            return lambda th: self._sync(th, stream)
        if isinstance(step, SyncDeviceStep):
            return self._sync_device
        if isinstance(step, EventStep):
            stream = self.streams[step.stream]
            event = self.run.events[step.event]
            if self.queued:  # torch_npu queues event records and waits behind the calls
                return lambda th: self.run.queue_event(th, event, stream, step.record)
            return lambda th: self._event(th, event, stream, step.record)
        if isinstance(step, SleepStep):
            return lambda th: th.sleep(step.us)
        if isinstance(step, (TaskStep, TasksStep)):
            tasks = [(self.streams[t.stream], self.run.events[t.event] if isinstance(t, EventStep) else None, t)
                     for t in (step.tasks if isinstance(step, TasksStep) else (step,))]
            if self.queued:  # queued behind the calls, as torch_npu queues HCCL and copies
                first = tasks[0][2]
                name = getattr(first, "name", None) or ("record_event" if first.record else "wait_event")
                return lambda th: self.run.queue_tasks(th, name, lambda: _launch_tasks(tasks))
            return lambda th: th.call(_launch_tasks, tasks)
        if isinstance(step, CollectiveStep):
            # lazy: keeps opsim.cluster out of importing opsim.scenario.workload
            from opsim.cluster.hccl import launch_collective  # a job's step: single-rank runs never load it
            stream = self.streams[step.stream]
            call = self.run.collective_call(step.spec)
            return lambda th: th.call(launch_collective, stream, call)
        if isinstance(step, ProfilingStep):
            return lambda th: th.call(_profiling_command, step.start, step.mask)
        if isinstance(step, DeterministicStep):
            return lambda th: th.call(_deterministic_command, step.level, step.strong_consistency)
        raise TypeError(f"unknown step {step!r}")  # pragma: no cover - the loader builds only these

    @staticmethod
    def _loop(th: Any, body: list, count: int) -> Generator:
        for _ in range(count):
            for fn in body:
                yield from fn(th)

    def _top_loop(self, th: Any, body: list, count: int) -> Generator:
        rec = self.sim.recorder
        env = self.sim.env
        name = th.name
        for _ in range(count):
            self.step_no += 1
            n = self.step_no
            rec.instant(env.now, "step", name, {"step": n, "phase": "begin"})
            for fn in body:
                yield from fn(th)
            rec.instant(env.now, "step", name, {"step": n, "phase": "end"})

    def _sync(self, th: Any, stream: Any) -> Generator:
        yield from self.run.drain(th)
        yield from th.call(acl_rt.synchronize_stream, stream)

    def _sync_device(self, th: Any) -> Generator:
        yield from self.run.drain(th)
        yield from th.call(acl_rt.synchronize_device)

    @staticmethod
    def _event(th: Any, event: Any, stream: Any, record: bool) -> Generator:
        if record:
            yield from th.call(acl_rt.record_event, event, stream)
        else:
            yield from th.call(acl_rt.stream_wait_event, stream, event)

    def _compile_op(self, step: OpStep) -> "OpPlan":
        spec = step.spec
        gws, run_fn = spec.resolve()
        api = spec.api
        stream = self.streams[step.stream]
        n_shapes, n_dtypes = len(step.shape_sets), len(step.dtypes)
        cache = self._args_cache(step)
        described: set[int] = set()  # this step's variants told to the runner (the args may be another step's)
        pick = self.chooser.pick
        runner = self.run
        pta = (step.cache_mode or self.cfg.cache_mode) == "pta"
        if runner.capture_calls and not pta:
            gws = runner.call_tagger(gws)

        def args_of(variant: int) -> tuple:
            args = cache.get(variant)
            if args is None or variant not in described:
                shapes = step.shape_sets[variant // n_dtypes]
                dtype = step.dtypes[variant % n_dtypes]
                ins = [self.make_tensor(s, dtype, "input") for s in shapes] if args is None else None
                out_shapes = spec.infer(list(shapes), step.attrs)
                out_dtype = spec.output_dtype(dtype, step.attrs)
                if args is None:
                    made = spec.build(self._factory(out_dtype), ins, _parse_dtype(dtype), step.attrs, out_shapes)
                    args = cache[variant] = made
                described.add(variant)
                runner.describe_variant(step, variant, shapes, dtype, out_shapes, out_dtype)
            return args

        variants = n_shapes * n_dtypes
        repeat = step.repeat
        call = runner.pta_call if pta else runner.op_call if repeat == 1 else runner.repeat_call

        restore = spec.output_shape_from_device
        planned: dict[int, list] = {}

        def op_step(th: Any) -> Generator:
            return op_call(th, pick(variants))

        def op_call(th: Any, variant: int) -> Generator:
            try:
                args = args_of(variant)
            except _AllocFailed as exc:
                runner.fail(th, step, exc.status, f"allocating the inputs/outputs failed: {exc.message}")
                return
            if restore:  # the previous run shrank the outputs to the computed shape: give back the upper bound
                shapes = planned.get(variant)
                if shapes is None:
                    shapes = planned[variant] = [(t, tuple(t.view_shape)) for t in args if _is_tensor(t)]
                for t, shape in shapes:
                    if tuple(t.view_shape) != shape:
                        t.set_shape(shape)
            runner.current_variant = (step, variant)
            yield from call(th, gws, run_fn, args, stream, api, step, repeat)

        return OpPlan(step, op_step, op_call, gws, run_fn, api, stream, variants, cache)

    def _args_cache(self, step: OpStep) -> dict[int, tuple]:
        """The step's argument tuples by variant: its own, or with `share_tensors` the ones every op step of
        this thread with the same op, shapes, dtypes and attributes uses (a training loop's steps reuse their
        buffers: an imported profile's steps then hold one step's tensors, not one set per step)."""
        if not self.run.config.share_tensors:
            return {}
        key = (step.op, step.shape_sets, step.dtypes, repr(sorted(step.attrs.items())))
        return self._shared_args.setdefault(key, {})

    def _factory(self, out_dtype: Any) -> Callable[[Any, Any, str], Any]:
        def make(shape: Any, dtype: Any, role: str) -> Any:
            return self.make_tensor(tuple(shape), dtype if dtype is not None else out_dtype, role)
        return make

    # --- the program ---------------------------------------------------------------------------------
    def program(self, th: Any) -> Generator:
        """The SimPy program of this thread: the compiled steps, then drain its streams and free its tensors."""
        self.thread = th
        barrier = self.run.warmup_barrier
        try:
            if barrier is not None:
                yield from self._warm_up(th, barrier)
            for fn in self._program:
                yield from fn(th)
        except StopThread:
            self.stopped = True
        yield from self.run.drain(th)
        for stream in self.streams.values():
            yield from th.call(acl_rt.synchronize_stream, stream)
        yield from self.free_all()


def _launch_tasks(tasks: list) -> int:
    """The replayed device actions of a `task` / `tasks` step (stream, event or None, step), launched by one
    host action in order: tasks, event records and waits."""
    for stream, event, t in tasks:
        if event is None:
            acl_rt.launch_task(stream, t.kind, t.name, t.task_type, t.duration_us)
        elif t.record:
            acl_rt.record_event(event, stream)
        else:
            acl_rt.stream_wait_event(stream, event)
    return 0


def _profiling_command(start: bool, mask: int) -> int:
    """The profiler's START (INIT then START with `mask`) or STOP, stamped in the trace on this thread."""
    ctx = current()
    p = ctx.process
    ret = profiling.start_profiling(p, mask) if start else profiling.stop_profiling(p)
    rec = p.recorder
    if rec.enabled:
        name, args = ctx.name, {"mask": hex(mask), "flags": p.profiling.as_dict(), "ret": ret}
        ctx.at(lambda t: rec.instant(t, "profiling_start" if start else "profiling_stop", name, args))
    return ret


def _deterministic_command(level: int | None, strong_consistency: bool | None) -> None:
    """aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC / ACL_OPT_STRONG_CONSISTENCY): process-wide, read by every
    later phase 1 (and torch_npu's key); stamped in the trace on this thread."""
    ctx = current()
    p = ctx.process
    if level is not None:
        p.deterministic_level = int(level)
    if strong_consistency is not None:
        p.strong_consistency = bool(strong_consistency)
    rec = p.recorder
    if rec.enabled:
        name, args = ctx.name, {"level": p.deterministic_level, "strong_consistency": p.strong_consistency}
        ctx.at(lambda t: rec.instant(t, "deterministic", name, args))


class OpPlan:
    """One compiled op step: its generator function (`step`: pick a variant, then `call` it) and what a batched
    loop needs to replay the call itself (callee, API, stream, number of variants, the argument tuples made so
    far by variant)."""

    __slots__ = ("config", "step", "call", "gws", "run_fn", "api", "stream", "variants", "cache")

    def __init__(self, config: OpStep, step: Callable[[Any], Generator], call: Callable[[Any, int], Generator],
                 gws: Any, run_fn: Any, api: str, stream: Any, variants: int, cache: dict) -> None:
        self.config, self.step, self.call, self.gws, self.run_fn = config, step, call, gws, run_fn
        self.api, self.stream, self.variants, self.cache = api, stream, variants, cache


class _AllocFailed(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def _is_tensor(value: Any) -> bool:
    return isinstance(value, Tensor)


def _parse_dtype(name: str) -> Any:
    return DataType.parse(name)


__all__ = ["Chooser", "LoopState", "OpPlan", "ThreadWorkload", "StopThread", "thread_rngs"]
