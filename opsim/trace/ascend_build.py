"""``build_profile``: the recorder's host, device and instant records as one ``AscendProfile``.

See ascend_profiler.py for how opsim's records map onto torch_npu's (calls, CANN spans, device tasks, steps).
"""
from __future__ import annotations

import bisect
import itertools
import operator
from typing import Any, Iterable, Mapping

import numpy as np

from opsim.errors import InvalidArgumentError
from opsim.trace.ascend_model import (DEFAULT_EPOCH_US, HIDDEN_TASK_TYPES, ApiSpan, AscendProfile, DeviceTaskRow,
                                      OpCall, StepWindow, is_kernel_type, merge_intervals, to_epoch_ns)
from opsim.trace.ascend_memory import memory_profile
from opsim.trace.ascend_pmu import kernel_pmu
from opsim.trace import step_breakdown
from opsim.trace.profiler_window import since, window_start
from opsim.trace.timefmt import to_ns_array

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


def _api_spans(calls: dict[int, OpCall], host: dict[str, list], host_ns: tuple[list[int], list[int]],
               tids: dict[str, int]) -> list[ApiSpan]:
    """CANN-level spans: the two ACLNN phases of each call, kernel launches and runtime calls. Each span is on
    the thread that ran it (a call's phase 2 may run on torch_npu's task-queue thread). The spans a call's
    host rows give depend only on their phases, ops and threads: worked out once per distinct call
    (`_span_program`), then filled with each call's times."""
    spans: list[ApiSpan] = []
    by_corr: dict[int, list[int]] = {}
    starts, ends = host_ns
    threads, phases, ops = host["thread"], host["phase"], host["op"]
    for i, (phase, corr) in enumerate(zip(phases, host["corr"])):
        if phase == _OP_CALL:
            continue
        if corr in calls:
            rows = by_corr.get(corr)
            if rows is None:
                by_corr[corr] = [i]
            else:
                rows.append(i)
            continue
        api = _runtime_api(phase, ops[i])
        if api is not None:
            spans.append(ApiSpan("acl", api, tids[threads[i]], starts[i], ends[i], corr))
    programs: dict[tuple, list[tuple[str, str, int, int, int]]] = {}
    for corr, rows in by_corr.items():
        api = calls[corr].api
        if len(rows) == 1:
            i = rows[0]
            key: tuple = (api, phases[i], ops[i], threads[i])
        else:
            get = operator.itemgetter(*rows)
            key = (api, get(phases), get(ops), get(threads))
        program = programs.get(key)
        if program is None:
            program = programs[key] = _span_program(api, [(phases[i], ops[i], tids[threads[i]]) for i in rows])
        for kind, name, tid, a, b in program:
            spans.append(ApiSpan(kind, name, tid, starts[rows[a]], ends[rows[b]], corr))
    return _sorted_spans(spans)


def _span_program(api: str, rows: list[tuple[str, str, int]]) -> list[tuple[str, str, int, int, int]]:
    """The spans of one call's host rows (phase, op, tid) as (kind, name, tid, row of the start, row of the end)."""
    out: list[tuple[str, str, int, int, int]] = []
    group: list[Any] | None = None  # [name, start row, end row, tid]
    for j, (phase, op, tid) in enumerate(rows):
        if group is not None and group[3] != tid:
            out.append(("acl", group[0], group[3], group[1], group[2]))
            group = None
        if phase == _PHASE1_ENTRY or phase == _PHASE2_ENTRY:
            if group is not None:
                out.append(("acl", group[0], group[3], group[1], group[2]))
            # the span's op is the API its DFX entry named (a profiled op may name phase 1 differently)
            name = (op or api) + ("GetWorkspaceSize" if phase == _PHASE1_ENTRY else "")
            group = [name, j, j, tid]
            continue
        if phase in _QUEUE_PHASES:
            if group is not None:
                out.append(("acl", group[0], group[3], group[1], group[2]))
                group = None
            continue
        if phase in ("rt malloc", "rt free"):  # the application's calls between the two phases
            if group is not None:
                out.append(("acl", group[0], group[3], group[1], group[2]))
                group = None
            out.append(("acl", _RUNTIME_API[phase], tid, j, j))
            continue
        if group is not None:
            group[2] = j
        if phase in _LAUNCH_PHASES and op not in _EVENT_LAUNCH_API:
            out.append(("node", "launch", tid, j, j))
        else:
            runtime = _runtime_api(phase, op)
            if runtime is not None:
                out.append(("acl", runtime, tid, j, j))
    if group is not None:
        out.append(("acl", group[0], group[3], group[1], group[2]))
    return out


def _sorted_spans(spans: list[ApiSpan]) -> list[ApiSpan]:
    """`spans` by (start, -end, tid, kind, name), ties in list order (as a stable sort): one numpy lexsort of
    the columns, the texts by their rank among the distinct texts."""
    n = len(spans)
    if n < 2:
        return spans
    kinds = sorted({a.kind for a in spans})
    names = sorted({a.name for a in spans})
    kind_rank = {k: i for i, k in enumerate(kinds)}
    name_rank = {k: i for i, k in enumerate(names)}
    keys = (np.fromiter((name_rank[a.name] for a in spans), dtype=np.int64, count=n),
            np.fromiter((kind_rank[a.kind] for a in spans), dtype=np.int64, count=n),
            np.fromiter((a.tid for a in spans), dtype=np.int64, count=n),
            -np.fromiter((a.end_ns for a in spans), dtype=np.int64, count=n),
            np.fromiter((a.start_ns for a in spans), dtype=np.int64, count=n))
    return [spans[i] for i in np.lexsort(keys).tolist()]


def _runtime_api(phase: str, op: str) -> str | None:
    if phase in _RUNTIME_API:
        return _RUNTIME_API[phase]
    if phase == "launch" and op in _EVENT_LAUNCH_API:
        return _EVENT_LAUNCH_API[op]
    return None


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
    inst = rec.records("instant")
    t0 = window_start(inst)  # a run that warmed up: only what followed the profiler's start
    host = since(_host_records(rec), "start", t0)
    dev = since(rec.records("device"), "start", t0)
    inst = since(inst, "time", t0)

    names = list(dict.fromkeys(itertools.chain(host["thread"], [str(t) for n, t in zip(inst["name"], inst["track"])
                                                                 if n == "step"])))
    tids = _thread_ids(sim, names)
    host_ns = _host_ns(host, epoch_ns)
    calls, op_calls = _op_calls(host, host_ns, tids)
    steps, by_thread, timeline = _profile_steps(sim, host_ns, dev, inst, epoch_ns, tids, step_thread)
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
    memory_events, op_memory = memory_profile(rec, dev_id, epoch_ns, host, host_ns, calls, op_calls, since_us=t0)
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
        api_spans=_api_spans(calls, host, host_ns, tids), tasks=tasks, steps=steps, step_windows=timeline,
        step_rows=step_breakdown.step_rows(timeline, tasks), busy=busy, comm=comm, memory_events=memory_events,
        op_memory=op_memory, session_ns=_session(host_ns, tasks, steps, epoch_ns))


def step_rows_of(sim: Any, *, step_thread: str | None = None, epoch_us: int = DEFAULT_EPOCH_US
                 ) -> tuple[list[step_breakdown.StepBreakdown], str | None]:
    """The step_trace_time rows of ``sim`` (after ``sim.run()``), as `build_profile` computes them, without the
    rest of the profile (names, tensors, PMU, memory), and the thread whose steps they are: what summary.json's
    ``step_breakdown`` sums."""
    rec = sim.recorder
    epoch_ns = int(epoch_us) * 1000
    inst = rec.records("instant")
    t0 = window_start(inst)
    host, dev, inst = since(rec.records("host"), "start", t0), since(rec.records("device"), "start", t0), \
        since(inst, "time", t0)
    names = list(dict.fromkeys(list(host["thread"]) + [str(t) for n, t in zip(inst["name"], inst["track"])
                                                        if n == "step"]))
    tids = _thread_ids(sim, names)
    host_ns = _host_ns(host, epoch_ns)
    calls, _ = _op_calls(host, host_ns, tids)
    _, _, timeline = _profile_steps(sim, host_ns, dev, inst, epoch_ns, tids, step_thread)
    dev_id = int(getattr(sim.device, "device_id", 0))
    tasks = _device_tasks(dev, dev_id, calls, epoch_ns, StepFinder(timeline), {})
    return step_breakdown.step_rows(timeline, tasks), (timeline[0].thread if timeline else None)


def _session(host_ns: tuple[list[int], list[int]], tasks: list[DeviceTaskRow], steps: list[StepWindow],
             epoch_ns: int) -> tuple[int, int]:
    """The first start and last end of any host span, device task or step (SESSION_TIME_INFO)."""
    starts = host_ns[0] + [t.start_ns for t in tasks] + [w.start_ns for w in steps]
    ends = host_ns[1] + [t.end_ns for t in tasks] + [w.end_ns for w in steps]
    return min(starts, default=epoch_ns), max(ends, default=epoch_ns)


def _host_records(rec: Any) -> dict[str, Any]:
    """The host columns the profile reads: the names and ids as lists, the times as float64 arrays when every
    one is a float (no list of float objects: a million-call run has seven million spans)."""
    numeric = getattr(rec, "numeric", None)
    if numeric is None:
        return rec.records("host")
    out: dict[str, Any] = {c: list(itertools.chain.from_iterable(rec.column_chunks("host", c)))
                           for c in ("thread", "phase", "op", "corr")}
    for c in ("start", "dur"):
        values, odd = numeric("host", c, "d")
        out[c] = values if not odd else rec.records("host")[c]
    return out


def _host_ns(host: dict[str, list], epoch_ns: int) -> tuple[list[int], list[int]]:
    """Every host span's epoch-ns start and end, computed at once (`to_ns_array` rounds as `to_ns` does)."""
    start = np.asarray(host["start"], dtype=np.float64)
    end = start + np.asarray(host["dur"], dtype=np.float64)
    return (to_ns_array(start) + epoch_ns).tolist(), (to_ns_array(end) + epoch_ns).tolist()


def _op_calls(host: dict[str, list], host_ns: tuple[list[int], list[int]],
              tids: dict[str, int]) -> tuple[dict[int, OpCall], list[OpCall]]:
    """The ACLNN calls (first ``op_call`` span of each correlation id), by id and in start order."""
    calls: dict[int, OpCall] = {}
    for thread, phase, op, s_ns, e_ns, corr in zip(host["thread"], host["phase"], host["op"], host_ns[0],
                                                   host_ns[1], host["corr"]):
        if phase == _OP_CALL and corr >= 0 and corr not in calls:
            calls[corr] = OpCall(corr, thread, tids[thread], op, s_ns, e_ns)
    op_calls = sorted(calls.values(), key=lambda c: (c.start_ns, c.tid, c.corr))
    _separate_touching(op_calls)
    return calls, op_calls


def _profile_steps(sim: Any, host_ns: tuple[list[int], list[int]], dev: dict[str, list], inst: dict[str, list],
                   epoch_ns: int, tids: dict[str, int], step_thread: str | None
                   ) -> tuple[list[StepWindow], dict[str, list[StepWindow]], list[StepWindow]]:
    """Every thread's steps (the whole run as step 1 without step instants), by thread, and the timeline."""
    host_starts, host_ends = host_ns
    run_end_ns = max(host_ends + [to_epoch_ns(epoch_ns, e) for e in dev["end"]], default=epoch_ns)
    steps = _steps_from_instants(inst, epoch_ns, tids, run_end_ns)
    if not steps:
        run_start_ns = min(host_starts + [to_epoch_ns(epoch_ns, s) for s in dev["start"]], default=epoch_ns)
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
