"""The imported calls as a scenario: profiled op definitions, one host thread per issuing thread, sleeps for
the host gaps between calls, ProfilerStep boundaries as top-level loops.

Cache behaviour is reproduced through variants (in a profile without torch_npu's PTA cache every call runs
phase 1, so there calls with the same launch list, tensors and kernel durations within 25% share a variant). A profiled op's variant is one OpExecCache key (the API, its
input tensors and the variant number): a call that ran phase 1 (a miss) gets a new variant, a call without
phase 1 (a PTA hit) reuses the variant already cached on its thread with the same launch list and the nearest
kernel durations, among those whose creating call's phase 2 had run before it (torch_npu cannot hit an
executor that has not run yet). A hit on a key the profile never created (it was cached before profiling started) gets a
warm-up call in the thread's `warmup` steps, run with the profiler stopped as the real run's earlier steps were. Each variant's kernel
durations are the medians over the calls that used it.
"""
from __future__ import annotations

import bisect
import math
import re
import statistics
from typing import Any

from opsim.importer.calls import Call, ProfileCalls, Sync
from opsim.importer.device_tasks import DEVICE_THREAD, DeviceItem, step_of
from opsim.importer.report import ImportReport

NS = 1000.0
HIT_WINDOW = 64
"""A PTA hit is matched among its thread's 64 most recent variants of the op (opsim's choice, to keep the
import linear in the calls; a profile has rarely more live keys per API and thread)."""
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.\-]")


def thread_name(tid: Any) -> str:
    return "thread_" + _NAME_BAD.sub("_", str(tid))


def stream_name(sid: int) -> str:
    return f"stream_{sid}"


def op_name(call: Call) -> str:
    """The profiled op's name: the ACLNN API, or `aclop_<type>` for an old-style single-op call."""
    return call.api if call.kind == "aclnn" else "aclop_" + _NAME_BAD.sub("_", call.api)


def _us(ns: float) -> float:
    return round(ns / NS, 3)


class _Variants:
    """Variant bookkeeping of one profiled op (see the module docstring)."""

    def __init__(self) -> None:
        self.sigs: list[tuple] = []
        self.members: list[list[list[int]]] = []  # variant -> calls -> kernel durations (ns)
        self.meta: list[Call] = []
        self.host: dict[int, list[int]] = {}  # variant -> phase-2 host durations (ns)
        self.ready: list[float] = []  # when the key became usable: its creating call's phase 2 ended
        self.by_sig: dict[tuple, list[int]] = {}  # signature -> its variants, ascending
        self._cols: dict[int, list[list[int]]] = {}  # variant -> per kernel, its calls' durations sorted

    def new(self, call: Call, *, warm: bool = False) -> int:
        self.sigs.append(_signature(call))
        self.by_sig.setdefault(self.sigs[-1], []).append(len(self.sigs) - 1)
        self.members.append([])
        self.meta.append(call)
        self.ready.append(-math.inf if warm else call.phase2.end)
        return len(self.sigs) - 1

    def usable(self, among: list[int], at_ns: int) -> list[int]:
        """The variants whose executor had run phase 2 by `at_ns` (an earlier one cannot be hit yet), among
        the HIT_WINDOW most recently created of `among` (ascending), so a long profile costs linear time."""
        return [v for v in among[-HIT_WINDOW:] if self.ready[v] <= at_ns]

    def nearest(self, call: Call, among: Any) -> int | None:
        sig = _signature(call)
        best, best_d = None, math.inf
        for v in among:
            if self.sigs[v] != sig:
                continue
            ref = self._median(v) or [k.dur_ns for k in self.meta[v].kernels]
            d = sum(abs(math.log((a + 1) / (b + 1))) for a, b in zip([k.dur_ns for k in call.kernels], ref))
            if d < best_d:
                best, best_d = v, d
        return best

    def add(self, v: int, call: Call) -> None:
        durs = [k.dur_ns for k in call.kernels]
        self.members[v].append(durs)
        cols = self._cols.setdefault(v, [[] for _ in durs])
        del cols[len(durs):]  # a column counts only while every call of the variant has it
        for col, d in zip(cols, durs):
            bisect.insort(col, d)
        self.host.setdefault(v, []).append(call.phase2.dur)

    def _median(self, v: int) -> list[float]:
        """Per kernel, the median duration over the variant's calls (columns kept sorted: O(1) here)."""
        return [_sorted_median(col) for col in self._cols.get(v, ())]

    def definition(self, v: int) -> dict[str, Any]:
        call = self.meta[v]
        durs = self._median(v) or [k.dur_ns for k in call.kernels]
        out: dict[str, Any] = {"calls": len(self.members[v])}
        if call.kind == "aclop":  # an aclop call compiles on first use: each variant keeps its own host time
            out["host_us"] = {"phase2": _us(statistics.median(self.host[v]))}
        if call.kernels and call.kernels[0].input_shapes:
            out["shapes"] = [list(s) for s in call.kernels[0].input_shapes]
            out["dtype"] = _dtype(call.kernels[0].input_dtypes)
        out["kernels"] = [_kernel(k, d) for k, d in zip(call.kernels, durs)]
        return out


def _sorted_median(col: list[int]) -> float:
    """statistics.median of an already sorted list."""
    n = len(col)
    return col[n // 2] if n % 2 else (col[n // 2 - 1] + col[n // 2]) / 2


def _same_input_count(variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An op has one input count: variants without recorded shapes, or with fewer, get one-element inputs."""
    n = max((len(v.get("shapes", ())) for v in variants), default=0)
    if n:
        for v in variants:
            shapes = v.setdefault("shapes", [])
            shapes += [[1]] * (n - len(shapes))
            v.setdefault("dtype", "float")
    return variants


def _kernel(k: Any, dur_ns: float) -> dict[str, Any]:
    out: dict[str, Any] = {"name": k.name}
    if k.op_type:
        out["type"] = k.op_type
    out.update({"task_type": k.task_type, "block_dim": k.block_dim, "duration_us": _us(dur_ns)})
    if k.work is not None:  # the predictor's inputs for `repredict` (a SoC what-if)
        out["work"] = {"flops": k.work[0], "bytes": k.work[1], "itemsize": k.work[2]}
    return out


def _dtype(dtypes: tuple) -> str:
    from opsim.ops.profiled import DTYPES  # lazy: keeps opsim.opdev, opsim.ops out of importing opsim.importer.scenario
    return next((d for d in dtypes if d in DTYPES), "float")


def _signature(call: Call) -> tuple:
    return tuple((k.name, k.input_shapes, k.input_dtypes) for k in call.kernels)


def build_scenario(pc: ProfileCalls, report: ImportReport, *, view: Any, name: str, source: str) -> dict[str, Any]:
    """The scenario (plain data, ready for YAML) replaying `pc` (read from the trace `view`)."""
    # lazy: keeps SimPy out of importing opsim.importer.scenario
    from opsim.calibration.host import host_table, queue_phases
    queued = any(c.queued for c in pc.calls)
    pta = queued or any(c.kind == "aclnn" and c.phase1 is None for c in pc.calls)
    variants, warmup, assigned = _assign_variants(pc, pta)
    profiled = _profiled_ops(pc, variants, host_table(view))
    streams = [stream_name(s) for s in pc.streams] or ["stream_0"]
    threads = _threads(pc, warmup, assigned, profiled, streams, pta)
    scenario: dict[str, Any] = {
        "name": name,
        "description": f"imported from {source} by opsim import: {len(pc.calls)} calls on {len(pc.threads)} "
                       f"thread(s); sleeps are the recorded host gaps between calls",
        "seed": 0,
        "env": {"TASK_QUEUE_ENABLE": "1" if queued else "0"},
        "share_tensors": True,  # each profiled step calls the same layers: it reuses the step before's tensors
    }
    if queued and pc.consumer is not None:
        scenario["task_queue_thread"] = thread_name(pc.consumer)
        # the task queue's own costs as this profile measured them (Enqueue, Dequeue@ overhead, gap)
        measured = queue_phases(view)
        if measured:
            scenario["cost_overrides"] = {k: round(m.median_us, 3) for k, m in measured.items()}
    scenario["streams"] = streams
    if pc.device is not None and pc.device.events:
        scenario["events"] = list(pc.device.events)
    scenario["profiled_ops"] = profiled
    scenario["threads"] = threads
    device_items = pc.device.items if pc.device is not None else []
    report.figures.update({
        "calls": len(pc.calls), "phase1": sum(c.phase1 is not None for c in pc.calls), "threads": len(threads),
        "kernels": sum(len(c.kernels) for c in pc.calls), "streams": len(streams), "profiled_ops": len(profiled),
        "steps": len(pc.steps), "warmup_calls": sum(len(w) for w in warmup.values()),
        "variants": sum(len(vs.sigs) for vs in variants.values()),
        "task_queue": queued,
        "device_tasks": {k: sum(1 for d in device_items if d.kind == k)
                         for k in ("communication", "record", "wait", "recorded", "collective")
                         if k != "collective" or any(d.kind == k for d in device_items)}})
    return scenario


def _assign_variants(pc: ProfileCalls, pta: bool) -> tuple[dict[str, _Variants], dict[Any, list], dict[int, int]]:
    """(op -> its launch variants, thread -> the (op, variant) its warm-up calls create, call index -> its
    variant). Without PTA phase 1 runs on hits too, so a call joins the nearest variant of its signature; with
    PTA a call with phase 1 makes a new variant and one without reuses one its thread has cached."""
    variants: dict[str, _Variants] = {}
    cached: dict[tuple[Any, str], list[int]] = {}
    seen: set[tuple[Any, str, int]] = set()
    warmup: dict[Any, list[tuple[str, int]]] = {}
    assigned: dict[int, int] = {}
    for i, c in enumerate(pc.calls):
        op = op_name(c)
        vs = variants.setdefault(op, _Variants())
        mine = cached.setdefault((c.thread, op), [])
        if c.kind == "aclop" or not pta:  # no PTA: phase 1 runs on hits too, so it says nothing of the cache
            v = vs.nearest(c, vs.by_sig.get(_signature(c), ()))
            v = vs.new(c) if v is None or not _close(vs, v, c) else v
        elif c.phase1 is not None:
            v = vs.new(c)
        else:
            v = vs.nearest(c, vs.usable(mine, c.start_ns))
            if v is not None and c.kernels and not c.kernels[0].input_shapes and not _close(vs, v, c, HIT_FLOOR_NS):
                v = None  # shapes unknown and durations 25% apart: another key, cached before the profile
            if v is None:  # cached before the profile began: a warm-up call creates it
                v = vs.new(c, warm=True)
                warmup.setdefault(c.thread, []).append((op, v))
        if (c.thread, op, v) not in seen:
            seen.add((c.thread, op, v))
            mine.append(v)
        vs.add(v, c)
        assigned[i] = v
    return variants, warmup, assigned


def _profiled_ops(pc: ProfileCalls, variants: dict[str, _Variants], host_medians: dict) -> dict[str, Any]:
    """The scenario's `profiled_ops`: per op its API names, the profile's own host medians and its variants."""
    calls_of: dict[str, list[Call]] = {}
    for c in pc.calls:
        calls_of.setdefault(op_name(c), []).append(c)
    profiled: dict[str, Any] = {}
    for op, vs in variants.items():
        calls = calls_of[op]
        first = calls[0]
        entry: dict[str, Any] = {"api": first.api if first.kind == "aclnn" else "aclopCompileAndExecute"}
        p1_names = [c.phase1_api for c in calls if c.phase1_api]
        if p1_names:
            common = statistics.mode(p1_names)
            if common != entry["api"]:
                entry["phase1_api"] = common
        if first.kind == "aclop":
            entry["kind"] = "aclop"
        # the calibration's per-API medians of the same profile (phase 1 under the name the profile gives it)
        host: dict[str, float] = {}
        p1 = host_medians.get(entry.get("phase1_api", entry["api"]))
        if p1 is not None and p1.phase1_us() is not None and any(c.phase1 is not None for c in calls):
            host["phase1"] = round(p1.phase1_us(), 3)
        if first.kind == "aclnn":
            host["phase2"] = round(host_medians[first.api].phase2_us(), 3)
        if host:
            entry["host_us"] = host
        entry["variants"] = _same_input_count([vs.definition(v) for v in range(len(vs.sigs))])
        profiled[op] = entry
    return profiled


def _threads(pc: ProfileCalls, warmup: dict[Any, list], assigned: dict[int, int], profiled: dict[str, Any],
             streams: list[str], pta: bool) -> list[dict[str, Any]]:
    """The scenario's threads: per profile thread its warm-up calls (`warmup`: outside the profiling window,
    opsim.scenario.warmup), then its calls, syncs and device tasks in time order (the device tasks of no host
    thread on their own thread)."""
    step_thread = _step_thread(pc)
    threads = []
    items_of: dict[Any, list[tuple[int, Any]]] = {tid: [] for tid in pc.threads}
    for i, c in enumerate(pc.calls):
        items_of[c.thread].append((c.start_ns, (i, c)))
    for s in pc.syncs:
        items_of[s.thread].append((s.start_ns, s))
    device_items = pc.device.items if pc.device is not None else []
    for d in device_items:
        items_of.setdefault(d.host_tid if d.host_tid in items_of else DEVICE_THREAD, []).append((d.host_ns, d))
    for tid in list(items_of):
        items = items_of[tid]
        items.sort(key=lambda x: x[0])
        warm = [_op_step(op, v, profiled, streams[0], None) for op, v in warmup.get(tid, [])]
        program = _timeline(items, pc, assigned, profiled, streams, tid == step_thread)
        th: dict[str, Any] = {"name": thread_name(tid) if tid != DEVICE_THREAD else DEVICE_THREAD}
        if warm:  # run with the profiler stopped, as the real run's earlier steps primed the cache
            th["warmup"] = warm
        th["program"] = program or [{"sleep": 0}]
        threads.append(th)
    if pta:
        for th in threads:
            if th["name"] != DEVICE_THREAD:
                th["cache_mode"] = "pta"
    return threads


HIT_FLOOR_NS = 2000
"""A PTA hit without known shapes reuses a variant whose kernels last within 25% or 2 us of its own (a small
kernel's time varies by a microsecond from call to call); further apart it is another key, cached before the
profile began (opsim's choice: on the shared AlexNet and MNIST traces it keeps the replayed device busy time
within 1%)."""


def _close(vs: _Variants, v: int, call: Call, floor_ns: int = 1) -> bool:
    ref = vs._median(v)
    return all(abs(a - b) <= max(0.25 * b, floor_ns) for a, b in zip([k.dur_ns for k in call.kernels], ref))


def _step_thread(pc: ProfileCalls) -> Any:
    """The thread the ProfilerStep events belong to: the issuing thread whose calls fall inside them first."""
    if not pc.steps or not pc.calls:
        return None
    _, s0, e0 = pc.steps[0]
    for c in pc.calls:
        if s0 <= c.start_ns <= e0:
            return c.thread
    return pc.calls[0].thread


def _op_step(op: str, variant: int, profiled: dict[str, Any], stream: str, streams: list[str] | None
             ) -> dict[str, Any]:
    v = profiled[op]["variants"][variant]
    step: dict[str, Any] = {"op": op}
    if "shapes" in v:
        step["shapes"] = v["shapes"]
        step["dtype"] = v["dtype"]
    else:
        step["shape"] = [1]
    if variant:
        step["attrs"] = {"variant": variant}
    if streams is not None and stream != streams[0]:
        step["stream"] = stream
    return step


_GROUPABLE = frozenset({"task", "record_event", "wait_event"})
"""The device actions a `tasks` step holds (a job import's `collective` steps stay steps of their own)."""


def _timeline(items: list, pc: ProfileCalls, assigned: dict[int, int], profiled: dict[str, Any],
              streams: list[str], with_steps: bool) -> list[dict[str, Any]]:
    """Steps of one thread: sleeps for the gaps, calls and syncs, wrapped in one loop per ProfilerStep."""
    out: list[dict[str, Any]] = []
    body = out
    prev_end = pc.origin_ns
    group_ns: int | None = None
    step_i = 0
    steps = pc.steps if with_steps else []
    def close_step() -> None:  # the step's host time after its last item (the real step ended then)
        nonlocal prev_end
        tail = steps[step_i][2] - prev_end
        if body is not out and tail > 0:
            body.append({"sleep": _us(tail)})
            prev_end = steps[step_i][2]

    for start, item in items:
        while step_i < len(steps) and start >= steps[step_i][2]:
            close_step()
            step_i += 1
            body = out
        if step_i < len(steps) and start >= steps[step_i][1] and body is out:
            body = []
            out.append({"loop": {"count": 1, "body": body}})
        gap = start - prev_end
        if gap > 0:
            body.append({"sleep": _us(gap)})
        if isinstance(item, Sync):
            body.append({"sync_device": True} if item.kind == "device" else {"sync": streams[0]})
            # the time the real sync took stays host time (a sleep after it): the replay's host keeps the
            # profile's pace even when the replayed device work it waited for is placed by another thread
            prev_end, group_ns = item.start_ns, None
        elif isinstance(item, DeviceItem):
            steps_ = step_of(item, stream_name)
            last = body[-1] if body else None
            groupable = all(_GROUPABLE.intersection(st) for st in steps_)
            if groupable and gap <= 0 and last is not None and group_ns == item.host_ns \
                    and _GROUPABLE.union({"tasks"}).intersection(last):
                # launched by one host event (a collective, its events): one step, one task-queue job
                if "tasks" not in last:
                    body[-1] = last = {"tasks": [last]}
                last["tasks"] += steps_
            elif len(steps_) > 1:
                body.append({"tasks": steps_})
            else:
                body.append(steps_[0])
            group_ns = item.host_ns if groupable else None
            prev_end = max(prev_end, item.host_end_ns)
        else:
            i, c = item
            stream = stream_name(c.kernels[0].stream) if c.kernels else streams[0]
            body.append(_op_step(op_name(c), assigned[i], profiled, stream, streams))
            prev_end, group_ns = c.end_ns, None
    if step_i < len(steps):
        close_step()
    for loop in out:
        if "loop" in loop and not loop["loop"]["body"]:
            loop["loop"]["body"] = [{"sleep": 0}]
    return out


__all__ = ["build_scenario", "thread_name", "stream_name", "op_name"]
