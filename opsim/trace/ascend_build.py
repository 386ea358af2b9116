"""``build_profile``: the recorder's host, device and instant records as one ``AscendProfile``.

See ascend_profiler.py for how opsim's records map onto torch_npu's (calls, CANN spans, device tasks, steps).
"""
from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np

from opsim.errors import InvalidArgumentError
from opsim.trace.ascend_model import DEFAULT_EPOCH_US, AscendProfile, OpCalls, StepWindow, to_epoch_ns
from opsim.trace.ascend_host import HostColumns, api_spans, call_columns, first_call_rows, host_columns
from opsim.trace.ascend_memory import memory_profile
from opsim.trace.ascend_tasks import DeviceTasks, device_columns, device_tasks, merged, take
from opsim.trace.ascend_tasks import step_rows as task_step_rows
from opsim.trace.ascend_pmu import kernel_pmu
from opsim.trace import step_breakdown
from opsim.trace.profiler_window import since, window_start
from opsim.trace.timefmt import to_ns_array

_TENSOR_FIELDS = ("input_shapes", "input_data_types", "input_formats", "output_shapes", "output_data_types",
                  "output_formats")


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
        ns = to_epoch_ns(epoch_ns, t)
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


def _tensor_infos(inst: dict[str, list],
                  launches: list | tuple = ()) -> dict[tuple[int, str], list[dict[str, str]]]:
    """Per-launch tensor descriptions grouped by (corr, op), in launch order: the recorder's `tensor_infos`
    (what the framework records at every kernel launch) and any ``tensor_info`` instants."""
    out: dict[tuple[int, str], list[dict[str, str]]] = {}
    shared: dict[tuple[str, ...], dict[str, str]] = {}  # equal descriptions are one dict (read only)
    seen: dict[int, dict[str, str]] = {}  # by id of the recorded dict (the recorder shares them; all stay alive)

    def described(info: Any) -> dict[str, str]:
        d = seen.get(id(info))
        if d is None:
            values = tuple(str(info.get(f, "")) for f in _TENSOR_FIELDS)
            d = shared.get(values)
            if d is None:
                d = shared[values] = dict(zip(_TENSOR_FIELDS, values))
            seen[id(info)] = d
        return d

    for corr, op, info in launches:
        out.setdefault((int(corr), str(op)), []).append(described(info))
    for name, args in zip(inst["name"], inst["args"]):
        if name != "tensor_info" or not isinstance(args, dict):
            continue
        key = (int(args.get("corr", -1)), str(args.get("op", "")))
        out.setdefault(key, []).append(described(args))
    return out


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


class StepFinder:
    """The step a time falls in: the first window (in list order) with ``start <= t < end``, or an empty window
    at ``t``. Windows sorted by start and apart (each ends by the next one's start), as a thread's steps are,
    are searched by bisection; any other list is scanned."""

    def __init__(self, windows: list[StepWindow]) -> None:
        self.windows = windows
        self.starts = [w.start_ns for w in windows]
        self.ends = [w.end_ns for w in windows]
        self.apart = all(a.start_ns <= a.end_ns <= b.start_ns for a, b in zip(windows, windows[1:]))

    def __call__(self, t: int) -> int | None:
        windows = self.windows
        if not self.apart:
            return _scan_step(t, windows)
        j = bisect.bisect_right(self.starts, t)
        if j == 0:
            return None
        if j == 1 or self.ends[j - 2] < t:  # one window may hold t: the last to start by t
            w = windows[j - 1]
            return w.step if w.start_ns <= t < w.end_ns or w.start_ns == w.end_ns == t else None
        lo = j
        while lo > 0 and windows[lo - 1].end_ns >= t:  # the windows that may hold t: they end at or after it
            lo -= 1
        return _scan_step(t, windows[lo:j])

    def closed(self, t: int) -> int | None:
        """The step whose window holds `t` counting its last nanosecond (a window ends 1 ns before the next
        begins, `_separate_touching`): where the tools put an instant, and where a launch that ends its step
        belongs."""
        step = self(t)
        if step is None and self.apart:
            j = bisect.bisect_right(self.starts, t)
            step = self.windows[j - 1].step if j and self.windows[j - 1].end_ns == t else None
        elif step is None:
            step = next((w.step for w in self.windows if w.start_ns <= t <= w.end_ns), None)
        return step


def _scan_step(t: int, windows: list[StepWindow]) -> int | None:
    for w in windows:
        if w.start_ns <= t < w.end_ns or (w.start_ns == w.end_ns == t):
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
                  step_thread: str | None = None, stream_ids: Mapping[int, int] | None = None,
                  kernel_types: Mapping[str, str] | None = None) -> AscendProfile:
    """The profiler model of ``sim`` (after ``sim.run()``) for one device (default: the simulation's device);
    ``step_thread`` chooses the thread whose steps step_trace_time.csv reports (see `_step_timeline`);
    ``stream_ids`` maps opsim stream ids to the ids written (a replay keeps its profile's stream ids);
    ``kernel_types`` maps recorded kernel names to op types (a replay's kernels keep their profile's Name and
    Type instead of opsim's ``<api>_<op>_<op>``).
    Every stage is linear in the records (steps are found by bisection, tasks binned per step once)."""
    rec = sim.recorder
    soc = sim.soc
    epoch_ns = int(epoch_us) * 1000
    dev_id = int(device if device is not None else getattr(sim.device, "device_id", 0))
    host, dev, inst, t0 = _window(rec, epoch_ns)
    tids = _thread_ids(sim, _thread_names(host, inst))
    op_calls = _op_calls(host, tids)
    steps, by_thread, timeline = _profile_steps(sim, host, dev, inst, epoch_ns, tids, step_thread)
    in_timeline = StepFinder(timeline)
    _call_steps(op_calls, {name: StepFinder(ws) for name, ws in by_thread.items()}, in_timeline)
    stream_ids = _checked_stream_ids(stream_ids)
    # what reads every host span first, so the spans are dropped before the tasks are built
    spans = api_spans(host, op_calls, tids)
    memory_events, op_memory = memory_profile(rec, dev_id, epoch_ns, host, op_calls, since_us=t0)
    host_bounds = host.bounds()
    del host
    tasks = device_tasks(dev, dev_id, op_calls, epoch_ns, in_timeline, stream_ids, _kernel_name)
    del dev
    _match_tensors(tasks, _tensor_infos(inst, getattr(rec, "tensor_infos", ())))
    kernel = tasks.is_kernel()
    for oc in np.unique(tasks.op[kernel]).tolist() if kernel_types else ():
        if tasks.texts[oc] in kernel_types:
            renamed = kernel & (tasks.op == oc)
            tasks.name[renamed] = oc
            tasks.op[renamed] = tasks.code(str(kernel_types[tasks.texts[oc]]))
    take(tasks, np.lexsort((tasks.task_id, tasks.stream, tasks.start_ns)))
    _wait_times(tasks)
    real = tasks.end_ns > tasks.start_ns
    busy = tasks.is_busy() & real
    comm = tasks.is_communication() & real
    _kernel_pmus(tasks, getattr(sim, "cost", None), float(soc.clock_mhz))
    return AscendProfile(
        epoch_us=int(epoch_us), device_id=dev_id, soc_name=soc.name, aicore_count=int(soc.aicore_count),
        vector_core_count=int(soc.vector_core_count), aicpu_count=int(getattr(soc, "aicpu_count", 0)),
        clock_mhz=float(soc.clock_mhz), threads=tids, op_calls=op_calls,
        api_spans=spans, tasks=tasks, steps=steps,
        step_windows=timeline, step_rows=task_step_rows(timeline, tasks),
        busy=merged(tasks.start_ns[busy], tasks.end_ns[busy]), comm=merged(tasks.start_ns[comm], tasks.end_ns[comm]),
        memory_events=memory_events, op_memory=op_memory, session_ns=_session(host_bounds, tasks, steps, epoch_ns))



def _window(rec: Any, epoch_ns: int, calls_only: bool = False) -> tuple[Any, tuple[dict, list], dict, float | None]:
    """The host spans, device tasks and instants the profiler saw, and when it started: after a warm-up only
    what began at or after the profiler's start (opsim.trace.profiler_window); otherwise everything.
    `calls_only`: of the host spans only the calls' (`call_columns`), for what needs no other span."""
    inst = rec.records("instant")
    t0 = window_start(inst)
    cols, values = device_columns(rec)
    host = (call_columns if calls_only else host_columns)(rec, epoch_ns, since_us=t0)
    return host, (since(cols, "start", t0), values), since(inst, "time", t0), t0


@dataclass(slots=True)
class _PmuKey:
    """What `kernel_pmu` reads of a kernel."""

    dur_ns: int
    task_type: str
    unit_kind: str


def _kernel_pmus(tasks: DeviceTasks, cost: Any, clock_mhz: float) -> None:
    """Each kernel's PMU split (`kernel_pmu`), worked out once per (duration, task type, unit kind)."""
    k = np.flatnonzero(tasks.is_kernel())
    if not len(k):
        return
    keys = np.stack([tasks.end_ns[k] - tasks.start_ns[k], tasks.task_type[k].astype(np.int64),
                     tasks.unit_kind[k].astype(np.int64)], axis=1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    texts = tasks.texts
    tasks.pmu_list = [kernel_pmu(_PmuKey(d, texts[t], texts[u]), cost, clock_mhz) for d, t, u in uniq.tolist()]
    tasks.pmu[k] = inv.reshape(-1)


def step_rows_of(sim: Any, *, step_thread: str | None = None, epoch_us: int = DEFAULT_EPOCH_US
                 ) -> tuple[list[step_breakdown.StepBreakdown], str | None]:
    """The step_trace_time rows of ``sim`` (after ``sim.run()``), as `build_profile` computes them, without the
    rest of the profile (names, tensors, PMU, memory), and the thread whose steps they are: what summary.json's
    ``step_breakdown`` sums."""
    rec = sim.recorder
    epoch_ns = int(epoch_us) * 1000
    host, dev, inst, _ = _window(rec, epoch_ns, calls_only=True)
    tids = _thread_ids(sim, _thread_names(host, inst))
    op_calls = _op_calls(host, tids)
    _, _, timeline = _profile_steps(sim, host, dev, inst, epoch_ns, tids, step_thread)
    dev_id = int(getattr(sim.device, "device_id", 0))
    tasks = device_tasks(dev, dev_id, op_calls, epoch_ns, StepFinder(timeline), {}, _kernel_name)
    return task_step_rows(timeline, tasks), (timeline[0].thread if timeline else None)


def _session(host_bounds: tuple[list[int], list[int]], tasks: DeviceTasks, steps: list[StepWindow],
             epoch_ns: int) -> tuple[int, int]:
    """The first start and last end of any host span (`HostColumns.bounds`), device task or step
    (SESSION_TIME_INFO)."""
    starts = [w.start_ns for w in steps] + host_bounds[0]
    ends = [w.end_ns for w in steps] + host_bounds[1]
    if len(tasks.start_ns):
        starts.append(int(tasks.start_ns.min()))
        ends.append(int(tasks.end_ns.max()))
    return min(starts, default=epoch_ns), max(ends, default=epoch_ns)


def _thread_names(host: HostColumns, inst: dict[str, list]) -> list:
    """Thread names in order of first appearance: the host spans', then the step instants' tracks."""
    steps = [str(t) for n, t in zip(inst["name"], inst["track"]) if n == "step"]
    return list(dict.fromkeys(itertools.chain(host.thread_names(), steps)))


def _op_calls(host: HostColumns, tids: dict[str, int]) -> OpCalls:
    """The ACLNN calls (first ``op_call`` span of each correlation id) as columns, by (start, tid, corr), each
    ending 1 ns before the next call of its thread when they touch (`_separate_touching`)."""
    rows = first_call_rows(host)
    vals = host.values
    th_codes, th_inv = np.unique(host.thread[rows], return_inverse=True)
    threads = [vals[c] for c in th_codes.tolist()]
    api_codes, api_inv = np.unique(host.op[rows], return_inverse=True)
    tid_of = np.array([tids[t] for t in threads] or [0], dtype=np.int64)
    thread, api = th_inv.reshape(-1).astype(np.int32), api_inv.reshape(-1).astype(np.int32)
    tid, corr = tid_of[thread], host.corr[rows].astype(np.int64)
    start, end = host.start_ns[rows].astype(np.int64), host.end_ns[rows].astype(np.int64)
    order = np.lexsort((corr, tid, start))
    n = len(order)
    calls = OpCalls(corr[order], thread[order], threads, tid[order], api[order], [vals[c] for c in api_codes.tolist()],
                    start[order], end[order], np.zeros(n, np.int64), np.zeros(n, bool), np.zeros(n, np.int64))
    _separate_touching_calls(calls)
    return calls


def _separate_touching_calls(calls: OpCalls) -> None:
    """`_separate_touching` of the calls' columns: a call ends 1 ns before the next call of its thread (by start,
    end) when they touch (each end depends only on its own span and the next one's start)."""
    if len(calls) < 2:
        return
    order = np.lexsort((calls.end_ns, calls.start_ns, calls.tid))  # stable: ties keep the calls' order
    tid, start, end = calls.tid[order], calls.start_ns[order], calls.end_ns[order]
    touch = (tid[1:] == tid[:-1]) & (end[:-1] >= start[1:]) & (start[1:] - 1 > start[:-1])
    prev = order[:-1][touch]
    calls.end_ns[prev] = start[1:][touch] - 1


def _call_steps(calls: OpCalls, finders: dict[str, "StepFinder"], in_timeline: "StepFinder") -> None:
    """Each call's step in its own thread's steps, and its position in that step (its call stack)."""
    finder_of = [finders.get(t, in_timeline) for t in calls.threads]
    seq: dict[tuple[int, int | None], int] = {}
    steps, has, seqs = [], [], []
    for th, s_ns in zip(calls.thread.tolist(), calls.start_ns.tolist()):
        step = finder_of[th](s_ns)
        key = (th, step)
        seq[key] = k = seq.get(key, 0) + 1
        steps.append(0 if step is None else step)
        has.append(step is not None)
        seqs.append(k)
    calls.step = np.array(steps, dtype=np.int64)
    calls.has_step = np.array(has, dtype=bool)
    calls.seq = np.array(seqs, dtype=np.int64)


def _profile_steps(sim: Any, host: HostColumns, dev: tuple[dict[str, Any], list], inst: dict[str, list],
                   epoch_ns: int, tids: dict[str, int], step_thread: str | None
                   ) -> tuple[list[StepWindow], dict[str, list[StepWindow]], list[StepWindow]]:
    """Every thread's steps (the whole run as step 1 without step instants), by thread, and the timeline."""
    host_starts, host_ends = host.bounds()
    dev_start, dev_end = _epoch_ns(dev[0]["start"], epoch_ns), _epoch_ns(dev[0]["end"], epoch_ns)
    run_end_ns = max(host_ends + dev_end, default=epoch_ns)
    steps = _steps_from_instants(inst, epoch_ns, tids, run_end_ns)
    if not steps:
        run_start_ns = min(host_starts + dev_start, default=epoch_ns)
        first_thread = min(tids, key=lambda n: tids[n]) if tids else "main"
        s0 = min(host_starts, default=run_start_ns)
        e0 = max(host_ends, default=run_end_ns)
        steps = [StepWindow(1, first_thread, tids.get(first_thread, 0), s0, max(s0, e0))]
    _separate_touching(steps)
    by_thread: dict[str, list[StepWindow]] = {}
    for w in steps:
        by_thread.setdefault(w.thread, []).append(w)
    return steps, by_thread, _step_timeline(sim, by_thread, steps, step_thread)


def _checked_stream_ids(stream_ids: Mapping[int, int] | None) -> dict[int, int]:
    """`stream_ids` as a dict, or an error naming the problem: ids are non-negative ints, no two streams share one."""
    ids = dict(stream_ids or {})
    for k, v in ids.items():
        if isinstance(k, bool) or isinstance(v, bool) or not isinstance(k, int) or not isinstance(v, int) \
                or k < 0 or not 0 <= v < 2**31:
            raise InvalidArgumentError(f"stream_ids: {k!r} -> {v!r} must map a stream id to a non-negative integer "
                                       "below 2**31")
    if len(set(ids.values())) != len(ids):
        raise InvalidArgumentError("stream_ids: two streams are given the same id; give each stream its own")
    return ids


def _epoch_ns(times: list, epoch_ns: int) -> list[int]:
    """`to_epoch_ns` of a column of simulated microseconds, at once (exact in int64; else one by one)."""
    try:
        x = np.asarray(times, dtype=np.float64)
    except (TypeError, ValueError):
        x = None
    if x is None or len(x) == 0 or not np.isfinite(x).all() or np.abs(x).max() * 1000.0 + epoch_ns >= 2.0**62:
        return [to_epoch_ns(epoch_ns, t) for t in times]
    return (to_ns_array(x) + epoch_ns).tolist()


def _match_tensors(tasks: DeviceTasks, tensor_infos: dict[tuple[int, str], list[dict[str, str]]]) -> None:
    """Tensor descriptions to kernels: launch order within one call = task order on the stream (tasks in record
    order)."""
    rows = np.flatnonzero(tasks.is_kernel() & (tasks.corr >= 0))
    rows = rows[np.lexsort((rows, tasks.task_id[rows], tasks.stream[rows], tasks.corr[rows]))]
    taken: dict[tuple[int, str], int] = {}
    listed: dict[int, int] = {}  # id of a (shared) description -> its index in tensor_list
    texts = tasks.texts
    for i, corr, op in zip(rows.tolist(), tasks.corr[rows].tolist(), tasks.op[rows].tolist()):
        key = (corr, texts[op])
        infos = tensor_infos.get(key)
        k = taken.get(key, 0)
        if infos and k < len(infos):
            info = infos[k]
            j = listed.get(id(info))
            if j is None:
                j = listed[id(info)] = len(tasks.tensor_list)
                tasks.tensor_list.append(info)
            tasks.tensors[i] = j
            taken[key] = k + 1


def _wait_times(tasks: DeviceTasks) -> None:
    """msprof's Task Wait Time: the gap since the previous kernel (in start order, any stream) ended."""
    k = np.flatnonzero(tasks.is_kernel())
    if len(k) > 1:
        tasks.wait_ns[k[1:]] = np.maximum(0, tasks.start_ns[k[1:]] - tasks.end_ns[k[:-1]])
