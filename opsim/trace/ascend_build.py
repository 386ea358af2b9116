"""``build_profile``: the recorder's host, device and instant records as one ``AscendProfile``.

See ascend_profiler.py for how opsim's records map onto torch_npu's (calls, CANN spans, device tasks, steps).
"""
from __future__ import annotations

import bisect
import itertools
from typing import Any, Iterable, Mapping

import numpy as np

from opsim.errors import InvalidArgumentError
from opsim.trace.ascend_model import (DEFAULT_EPOCH_US, HIDDEN_TASK_TYPES, ApiSpan, AscendProfile, DeviceTaskRow,
                                      OpCall, StepWindow, is_kernel_type, merge_intervals, to_epoch_ns)
from opsim.trace.ascend_host import HostColumns, api_spans, first_call_rows, host_columns
from opsim.trace.ascend_memory import memory_profile
from opsim.trace.ascend_pmu import kernel_pmu
from opsim.trace import step_breakdown
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
    host = host_columns(rec, epoch_ns)
    dev = rec.records("device")
    inst = rec.records("instant")
    tids = _thread_ids(sim, _thread_names(host, inst))
    calls, op_calls = _op_calls(host, tids)
    steps, by_thread, timeline = _profile_steps(sim, host, dev, inst, epoch_ns, tids, step_thread)
    finders = {name: StepFinder(ws) for name, ws in by_thread.items()}
    in_timeline = StepFinder(timeline)
    seq: dict[tuple[str, int | None], int] = {}
    for c in op_calls:  # the call's position in its own thread's step (its call stack)
        c.step = finders.get(c.thread, in_timeline)(c.start_ns)
        key = (c.thread, c.step)
        seq[key] = seq.get(key, 0) + 1
        c.seq = seq[key]
    tasks = _device_tasks(dev, dev_id, calls, epoch_ns, in_timeline, _checked_stream_ids(stream_ids))
    _match_tensors(tasks, _tensor_infos(inst, getattr(rec, "tensor_infos", ())))
    for t in tasks if kernel_types else ():
        if t.is_kernel and t.op in kernel_types:
            t.name, t.op = t.op, str(kernel_types[t.op])
    tasks.sort(key=lambda t: (t.start_ns, t.stream, t.task_id))
    _wait_times(tasks)
    busy = merge_intervals((t.start_ns, t.end_ns) for t in tasks if t.is_busy and t.end_ns > t.start_ns)
    comm = merge_intervals((t.start_ns, t.end_ns) for t in tasks
                           if step_breakdown.is_communication(t.task_type) and t.end_ns > t.start_ns)
    memory_events, op_memory = memory_profile(rec, dev_id, epoch_ns, host, calls, op_calls)
    cost = getattr(sim, "cost", None)
    pmus: dict[tuple[int, str, str], Any] = {}  # the split depends on these only (shared: the splits are frozen)
    for t in tasks:
        if t.is_kernel:
            key = (t.end_ns - t.start_ns, t.task_type, t.unit_kind)
            pmu = pmus.get(key, pmus)
            if pmu is pmus:
                pmu = pmus[key] = kernel_pmu(t, cost, float(soc.clock_mhz))
            t.pmu = pmu
    return AscendProfile(
        epoch_us=int(epoch_us), device_id=dev_id, soc_name=soc.name, aicore_count=int(soc.aicore_count),
        vector_core_count=int(soc.vector_core_count), aicpu_count=int(getattr(soc, "aicpu_count", 0)),
        clock_mhz=float(soc.clock_mhz), threads=tids, op_calls=op_calls,
        api_spans=api_spans(host, {c: call.api for c, call in calls.items()}, tids), tasks=tasks, steps=steps, step_windows=timeline,
        step_rows=step_breakdown.step_rows(timeline, tasks), busy=busy, comm=comm, memory_events=memory_events,
        op_memory=op_memory, session_ns=_session(host, tasks, steps, epoch_ns))


def step_rows_of(sim: Any, *, step_thread: str | None = None, epoch_us: int = DEFAULT_EPOCH_US
                 ) -> tuple[list[step_breakdown.StepBreakdown], str | None]:
    """The step_trace_time rows of ``sim`` (after ``sim.run()``), as `build_profile` computes them, without the
    rest of the profile (names, tensors, PMU, memory), and the thread whose steps they are: what summary.json's
    ``step_breakdown`` sums."""
    rec = sim.recorder
    epoch_ns = int(epoch_us) * 1000
    host, dev, inst = host_columns(rec, epoch_ns), rec.records("device"), rec.records("instant")
    tids = _thread_ids(sim, _thread_names(host, inst))
    calls, _ = _op_calls(host, tids)
    _, _, timeline = _profile_steps(sim, host, dev, inst, epoch_ns, tids, step_thread)
    dev_id = int(getattr(sim.device, "device_id", 0))
    tasks = _device_tasks(dev, dev_id, calls, epoch_ns, StepFinder(timeline), {})
    return step_breakdown.step_rows(timeline, tasks), (timeline[0].thread if timeline else None)


def _session(host: HostColumns, tasks: list[DeviceTaskRow], steps: list[StepWindow],
             epoch_ns: int) -> tuple[int, int]:
    """The first start and last end of any host span, device task or step (SESSION_TIME_INFO)."""
    starts = [t.start_ns for t in tasks] + [w.start_ns for w in steps]
    ends = [t.end_ns for t in tasks] + [w.end_ns for w in steps]
    if len(host):
        starts.append(int(host.start_ns.min()))
        ends.append(int(host.end_ns.max()))
    return min(starts, default=epoch_ns), max(ends, default=epoch_ns)


def _thread_names(host: HostColumns, inst: dict[str, list]) -> list:
    """Thread names in order of first appearance: the host spans', then the step instants' tracks."""
    steps = [str(t) for n, t in zip(inst["name"], inst["track"]) if n == "step"]
    return list(dict.fromkeys(itertools.chain(host.thread_names(), steps)))


def _op_calls(host: HostColumns, tids: dict[str, int]) -> tuple[dict[int, OpCall], list[OpCall]]:
    """The ACLNN calls (first ``op_call`` span of each correlation id), by id and in start order."""
    rows = first_call_rows(host)
    vals = host.values
    calls: dict[int, OpCall] = {}
    for th, op, s_ns, e_ns, corr in zip(host.thread[rows].tolist(), host.op[rows].tolist(),
                                         host.start_ns[rows].tolist(), host.end_ns[rows].tolist(),
                                         host.corr[rows].tolist()):
        thread = vals[th]
        calls[corr] = OpCall(corr, thread, tids[thread], vals[op], s_ns, e_ns)
    op_calls = sorted(calls.values(), key=lambda c: (c.start_ns, c.tid, c.corr))
    _separate_touching(op_calls)
    return calls, op_calls


def _profile_steps(sim: Any, host: HostColumns, dev: dict[str, list], inst: dict[str, list],
                   epoch_ns: int, tids: dict[str, int], step_thread: str | None
                   ) -> tuple[list[StepWindow], dict[str, list[StepWindow]], list[StepWindow]]:
    """Every thread's steps (the whole run as step 1 without step instants), by thread, and the timeline."""
    host_starts = [int(host.start_ns.min())] if len(host) else []
    host_ends = [int(host.end_ns.max())] if len(host) else []
    run_end_ns = max(host_ends + _epoch_ns(dev["end"], epoch_ns), default=epoch_ns)
    steps = _steps_from_instants(inst, epoch_ns, tids, run_end_ns)
    if not steps:
        run_start_ns = min(host_starts + _epoch_ns(dev["start"], epoch_ns), default=epoch_ns)
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


def _device_tasks(dev: dict[str, list], dev_id: int, calls: dict[int, OpCall], epoch_ns: int,
                  step_of: StepFinder, stream_ids: dict[int, int]) -> list[DeviceTaskRow]:
    """The shown tasks of device `dev_id` in record order (streams renumbered by `stream_ids`); a task's step is
    that of the call that launched it; a collective (a communication task no op call launched) belongs to the
    step its host thread launched it in, as torch_npu counts an HCCL op in the step that issued it (the task is
    queued as its launch ends, which may be the instant the step ends: its launch's last nanosecond decides)."""
    tasks: list[DeviceTaskRow] = []
    cols = ("device", "stream", "task_id", "op", "task_type", "unit_kind", "block_dim", "corr", "queued")
    starts, ends = _epoch_ns(dev["start"], epoch_ns), _epoch_ns(dev["end"], epoch_ns)
    names: dict[tuple[str, str | None], str] = {}
    for i, (d, stream, task_id, op, tt, unit, bd, corr, queued, s_ns, e_ns) in enumerate(
            zip(*(dev[c] for c in cols), starts, ends)):
        if d != dev_id or tt in HIDDEN_TASK_TYPES:
            continue
        call = calls.get(corr) if corr >= 0 else None
        t = DeviceTaskRow(i, d, stream_ids.get(stream, stream), task_id, op, tt, unit, int(bd), s_ns, e_ns, corr,
                          op, call)
        if is_kernel_type(tt):
            key = (op, call.api if call is not None else None)
            name = names.get(key)
            if name is None:
                name = names[key] = _kernel_name(*key)
            t.name = name
        if call is not None:
            t.step = step_of(call.start_ns)
        else:
            comm = step_breakdown.is_communication(tt)
            t.step = step_of.closed(to_epoch_ns(epoch_ns, queued) - 1) if comm else step_of(s_ns)
        tasks.append(t)
    return tasks


def _epoch_ns(times: list, epoch_ns: int) -> list[int]:
    """`to_epoch_ns` of a column of simulated microseconds, at once (exact in int64; else one by one)."""
    try:
        x = np.asarray(times, dtype=np.float64)
    except (TypeError, ValueError):
        x = None
    if x is None or len(x) == 0 or not np.isfinite(x).all() or np.abs(x).max() * 1000.0 + epoch_ns >= 2.0**62:
        return [to_epoch_ns(epoch_ns, t) for t in times]
    return (to_ns_array(x) + epoch_ns).tolist()


def _match_tensors(tasks: list[DeviceTaskRow], tensor_infos: dict[tuple[int, str], list[dict[str, str]]]) -> None:
    """Tensor descriptions to kernels: launch order within one call = task order on the stream."""
    tensor_taken: dict[tuple[int, str], int] = {}
    for t in sorted(tasks, key=lambda t: (t.corr, t.stream, t.task_id)):
        if t.is_kernel and t.corr >= 0:
            key = (t.corr, t.op)
            infos = tensor_infos.get(key)
            k = tensor_taken.get(key, 0)
            if infos and k < len(infos):
                t.tensors = infos[k]
                tensor_taken[key] = k + 1


def _wait_times(tasks: list[DeviceTaskRow]) -> None:
    """msprof's Task Wait Time: the gap since the previous kernel (in start order, any stream) ended."""
    prev_end: int | None = None
    for t in tasks:
        if t.is_kernel:
            t.wait_ns = max(0, t.start_ns - prev_end) if prev_end is not None else 0
            prev_end = t.end_ns
