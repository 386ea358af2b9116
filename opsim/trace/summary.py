"""The run summary: every figure of the CLI's closing table, as one JSON-ready dict, and the table itself.

The figures are folded from record streams by `SummaryStats`, which can read a finished recorder's columns
(`feed_recorder`) or be installed as the recorder's record methods (`install`) so that a run that keeps no
trace (a million calls) still gets every figure in constant memory.
"""
from __future__ import annotations

import json
import math
import shlex
from collections import defaultdict
from typing import Any, Mapping

from opsim.trace.timing_sources import describe_sources, timing_sources
from opsim.errors import shown


class SummaryStats:
    """Running totals over the record kinds the summary needs."""

    def __init__(self) -> None:
        self.stream_tasks: dict[int, int] = defaultdict(int)
        self.stream_busy: dict[int, float] = defaultdict(float)
        self.pool_tasks: dict[str, int] = defaultdict(int)
        self.pool_unit_us: dict[str, float] = defaultdict(float)
        self.task_types: dict[str, int] = defaultdict(int)
        self.cache: dict[tuple[str, str], int] = defaultdict(int)
        self.instants: dict[str, int] = defaultdict(int)
        self.counter_max: dict[str, float] = {}
        self.counter_last: dict[str, float] = {}
        self.memory_kinds: dict[str, int] = defaultdict(int)
        self.device_end = 0.0

    # --- live record methods (same signatures as Recorder's) -----------------------------------------------
    def host_span(self, thread: Any, phase: str, op: str, start: float, dur: float, corr: int = -1) -> None:
        """Host time is summed by the threads themselves (HostThread.busy_us) and calls by the runner."""

    def host_spans(self, thread: Any, phases: tuple, ops: tuple, start: float, durs: tuple, corr: int = -1) -> None:
        """As `host_span`."""

    def device_task(self, stream: int, unit_kind: str, units: int, task_id: int, op: str, task_type: str,
                    block_dim: int, queued: float, start: float, end: float, corr: int = -1, device: int = 0) -> None:
        """One finished device task into the totals (compiled twin: `opsim.fastpath.batch_kernel._finish`)."""
        self.task_types[task_type] += 1
        if end > self.device_end:
            self.device_end = end
        if unit_kind != "none":
            dur = end - start
            self.stream_tasks[stream] += 1
            self.stream_busy[stream] += dur
            self.pool_tasks[unit_kind] += 1
            self.pool_unit_us[unit_kind] += dur * units

    def memory_event(self, time: float, kind: str, address: int, size: int, in_use: int, device: int = 0) -> None:
        self.memory_kinds[kind] += 1

    def cache_event(self, time: float, thread: Any, cache: str, kind: str, op: str, key_hash: int = 0,
                    detail: str = "") -> None:
        self.cache[(cache, kind)] += 1

    def instant(self, time: float, name: str, track: str, args: dict | None = None) -> None:
        self.instants[name] += 1

    def counter(self, time: float, name: str, value: float) -> None:
        self.counter_last[name] = value
        if value > self.counter_max.get(name, -math.inf):
            self.counter_max[name] = value

    def tensor_info(self, corr: int, op: str, info: dict) -> None:
        """Per-launch tensor descriptions are not kept when only totals are."""

    def hit(self, rows: tuple, start: float, hit_at: float, corr: int, call_end: bool) -> None:
        """A replayed executor-cache hit (`Recorder.hit`): its cache hit (spans and descriptions as above)."""
        self.cache[("exec", "hit")] += 1

    # --- from a finished recorder ---------------------------------------------------------------------------
    def feed_recorder(self, recorder: Any) -> "SummaryStats":
        """Fold a finished recorder's records into these totals. Fresh totals are read from the columns with
        numpy (counts per name; per-stream and per-pool sums added in record order, as the record methods
        add them); otherwise, or when a column holds a value of an unusual type, record by record."""
        fresh = not (self.stream_tasks or self.pool_tasks or self.task_types or self.memory_kinds or self.cache
                     or self.instants or self.device_end)
        if not (fresh and self._feed_device_columns(recorder)):
            for dev in recorder.iter_chunks("device"):
                for args in zip(dev["stream"], dev["unit_kind"], dev["units"], dev["task_id"], dev["op"],
                                dev["task_type"], dev["block_dim"], dev["queued"], dev["start"], dev["end"]):
                    self.device_task(*args)
        for kind, names, into in (("memory", ("kind",), self.memory_kinds), ("cache", ("cache", "kind"), self.cache),
                                  ("instant", ("name",), self.instants)):
            for key, n in _counts(recorder, kind, names):
                into[key] += n
        for cnt in recorder.iter_chunks("counter"):
            for t, name, value in zip(cnt["time"], cnt["name"], cnt["value"]):
                self.counter(t, name, value)
        return self

    def _feed_device_columns(self, recorder: Any) -> bool:
        """`device_task` over every device record at once; False (nothing added) when a numeric column holds a
        value of an unusual type."""
        import numpy as np  # lazy: keeps numpy out of importing opsim.trace.summary
        recorder.compact()  # typed columns: numpy reads them without a Python step per record
        cols = {}
        for name, typecode in (("stream", "q"), ("units", "q"), ("start", "d"), ("end", "d")):
            cols[name], odd = recorder.numeric("device", name, typecode)
            if odd:
                return False
        types, values = recorder.coded("device", "task_type")
        for key, n in _first_seen_counts(types, values):
            self.task_types[key] += n
        end, start = cols["end"], cols["start"]
        if len(end):
            self.device_end = max(self.device_end, float(end.max()))
        kinds, _ = recorder.coded("device", "unit_kind")
        none = next((c for c, v in enumerate(values) if type(v) is str and v == "none"), -1)
        busy = np.flatnonzero(kinds != none)
        dur = end[busy] - start[busy]
        for key, at in _first_seen_groups(cols["stream"][busy].astype(np.int64), None):
            self.stream_tasks[key] += len(at)
            self.stream_busy[key] += _sum_in_order(dur[at])
        unit_us = dur * cols["units"][busy].astype(np.float64)
        for key, at in _first_seen_groups(kinds[busy], values):
            self.pool_tasks[key] += len(at)
            self.pool_unit_us[key] += _sum_in_order(unit_us[at])
        return True


def _sum_in_order(x: Any) -> float:
    """0.0 + x[0] + x[1] + ..., added left to right (numpy's accumulate, unlike its sum, adds in order)."""
    import numpy as np  # lazy: keeps numpy out of importing opsim.trace.summary
    return float(np.add.accumulate(x)[-1]) if len(x) else 0.0


def _first_seen_groups(codes: Any, values: list | None) -> list[tuple[Any, Any]]:
    """(value, record indices) per distinct code in order of first appearance (`values[code]`, or the code
    itself as a Python int when `values` is None)."""
    import numpy as np  # lazy: keeps numpy out of importing opsim.trace.summary
    if not len(codes):
        return []
    distinct, first, which = np.unique(codes, return_index=True, return_inverse=True)
    order = np.argsort(which, kind="stable")
    bounds = np.cumsum(np.bincount(which, minlength=len(distinct)))
    groups = np.split(order, bounds[:-1])
    keys = distinct.tolist() if values is None else [values[c] for c in distinct.tolist()]
    return [(keys[i], groups[i]) for i in np.argsort(first, kind="stable").tolist()]


def _first_seen_counts(codes: Any, values: list | None) -> list[tuple[Any, int]]:
    """(value, count) per distinct code in order of first appearance (`values[code]`, or the code itself as a
    Python int when `values` is None)."""
    import numpy as np  # lazy: keeps numpy out of importing opsim.trace.summary
    if not len(codes):
        return []
    distinct, first, counts = np.unique(codes, return_index=True, return_counts=True)
    keys = distinct.tolist() if values is None else [values[c] for c in distinct.tolist()]
    return [(keys[i], int(counts[i])) for i in np.argsort(first, kind="stable").tolist()]


def _counts(recorder: Any, kind: str, names: tuple[str, ...]) -> list[tuple[Any, int]]:
    """Records of `kind` counted per value of the coded column(s) `names` (a tuple of values for two)."""
    import numpy as np  # lazy: keeps numpy out of importing opsim.trace.summary
    parts = [recorder.coded(kind, name) for name in names]
    values = parts[0][1]
    if len(parts) == 1:
        return _first_seen_counts(parts[0][0], values)
    width = len(values) + 1
    pair = parts[0][0].astype(np.int64) * width + parts[1][0]
    return [((values[p // width], values[p % width]), n) for p, n in _first_seen_counts(pair, None)]


def _rate(hits: int, total: int) -> float | None:
    return round(hits / total, 6) if total else None


def _r(x: float, nd: int = 3) -> float:
    return round(float(x), nd)


def build_summary(run: Any, stats: SummaryStats, wall_seconds: float) -> dict[str, Any]:
    """The summary dict of a finished run (`run` is the runner's `_Run`)."""
    sim = run.sim
    cfg = run.config
    makespan = float(sim.now)
    span = makespan if makespan > 0 else 1.0
    threads = _thread_rows(run, span)
    streams = _stream_rows(run, stats, span)
    dev = sim.device
    units = _unit_rows(dev, stats, span)
    calls = run.calls
    summary: dict[str, Any] = {
        "scenario": cfg.name,
        "seed": cfg.seed,
        "soc": sim.soc.name,
        "profile": sim.process.profile.name,
        "env": env_report(cfg.env, getattr(cfg, "env_sources", {}), getattr(cfg, "env_shell", {})),
        "calibration": sim.cost.fitted.name if sim.cost.fitted is not None else None,
        "device_timing": timing_sources(sim.cost, {p.name: stats.pool_unit_us.get(p.name, 0.0) for p in
                                                   (dev.aicore, dev.vector, dev.aicpu, dev.dma)},
                                        makespan, max(stats.stream_busy.values(), default=0.0)),
        "simulated_makespan_us": _r(makespan),
        "device_busy_until_us": _r(stats.device_end),
        "step_breakdown": _step_breakdown(run),
        "op_calls": calls,
        "failed_calls": len(run.errors),
        "threads": threads,
        "streams": streams,
        "units": units,
        "task_types": dict(sorted(stats.task_types.items())),
        **_cache_rows(stats),
        **_memory_rows(run, stats),
        "overflows": len(sim.process.overflows),
        "profiling_reports": {k[len("prof_"):]: v for k, v in sorted(stats.instants.items())
                              if k.startswith("prof_")},
        "instants": dict(sorted(stats.instants.items())),
        "counters_max": {k: v for k, v in sorted(stats.counter_max.items())},
        "errors": list(run.errors),
        "warnings": list(run.warnings) + list(sim.process.warnings),
        "wall": {
            "wall_seconds": round(wall_seconds, 3),
            "simulated_calls_per_wall_second": round(calls / wall_seconds, 1) if wall_seconds > 0 else None,
        },
    }
    return summary


def _step_breakdown(run: Any) -> dict[str, Any] | None:
    """step_trace_time.csv's figures summed over the steps (opsim.trace.step_breakdown.summarise); None when
    the run kept no records (`trace: false`)."""
    if not run.config.trace:
        return None
    # lazy: the profile model (numpy, the profiler's tables) is loaded only by a run that keeps records
    from opsim.trace.ascend_build import step_rows_of
    from opsim.trace.step_breakdown import summarise  # lazy: as above
    rows, thread = step_rows_of(run.sim, step_thread=run.config.outputs.step_thread, epoch_us=run.config.epoch_us)
    return summarise(rows, thread)


def _thread_rows(run: Any, span: float) -> dict[str, dict]:
    """summary.json's ``threads``: each workload thread, then torch_npu's task-queue consumer when there is one."""
    threads = {}
    for wl in run.workloads:
        th = wl.thread
        threads[th.name] = {
            "thread_id": th.thread_id,
            "op_calls": run.calls_by_thread.get(th.name, 0),
            "host_busy_us": _r(th.busy_us),
            "host_busy_pct": _r(100.0 * th.busy_us / span, 2),
            "streams": [f"Stream {s.stream_id}" for s in wl.streams.values()],
            "stopped_on_error": wl.stopped,
        }
    queue = run.npu.queue if getattr(run, "npu", None) is not None else None
    if queue is not None:  # torch_npu's task-queue consumer: no calls of its own, the queued work's host time
        th = queue.thread
        threads[th.name] = {"thread_id": th.thread_id, "op_calls": 0, "host_busy_us": _r(th.busy_us),
                            "host_busy_pct": _r(100.0 * th.busy_us / span, 2), "streams": [],
                            "stopped_on_error": False, "task_queue": True}
    return threads


def _stream_rows(run: Any, stats: SummaryStats, span: float) -> dict[str, dict]:
    """summary.json's ``streams``: tasks and busy time of each stream, with the thread that owns it."""
    sim = run.sim
    streams = {}
    owner = {s.stream_id: wl.thread.name for wl in run.workloads for s in wl.streams.values()}
    for s in sim.device.streams:
        busy = stats.stream_busy.get(s.stream_id, 0.0)
        streams[f"Stream {s.stream_id}"] = {
            "thread": owner.get(s.stream_id, ""),
            "tasks": stats.stream_tasks.get(s.stream_id, 0),
            "busy_us": _r(busy),
            "busy_pct": _r(100.0 * busy / span, 2),
        }
    return streams


def _unit_rows(dev: Any, stats: SummaryStats, span: float) -> dict[str, dict]:
    """summary.json's ``units``: tasks and utilisation of each unit pool (a pool shared by two kinds, once)."""
    units = {}
    seen = set()
    for pool in (dev.aicore, dev.vector, dev.aicpu, dev.dma):
        if pool.name in seen:
            continue
        seen.add(pool.name)
        unit_us = stats.pool_unit_us.get(pool.name, 0.0)
        units[pool.name] = {
            "capacity": pool.capacity,
            "tasks": stats.pool_tasks.get(pool.name, 0),
            "unit_busy_us": _r(unit_us),
            "utilization_pct": _r(100.0 * unit_us / (pool.capacity * span), 2),
        }
    return units


def _cache_rows(stats: SummaryStats) -> dict[str, Any]:
    """summary.json's cache figures: ``exec_cache``, ``pta_cache``, ``aicpu_cache``, ``cache_events`` and
    ``oneshot_tasks``, in that order."""
    c = stats.cache
    exec_hits, exec_misses = c.get(("exec", "hit"), 0), c.get(("exec", "miss"), 0)
    ai_hits, ai_misses = c.get(("aicpu", "hit"), 0), c.get(("aicpu", "miss"), 0)
    ai_oneshot = c.get(("aicpu", "oneshot"), 0)
    pta_hits, pta_misses = c.get(("pta", "hit"), 0), c.get(("pta", "miss"), 0)
    return {
        "exec_cache": {
            "hits": exec_hits, "misses": exec_misses, "evictions": c.get(("exec", "evict"), 0),
            "hit_rate": _rate(exec_hits, exec_hits + exec_misses),
        },
        "pta_cache": {"hits": pta_hits, "misses": pta_misses, "hit_rate": _rate(pta_hits, pta_hits + pta_misses)},
        "aicpu_cache": {
            "hits": ai_hits, "misses": ai_misses, "oneshot": ai_oneshot,
            "evictions": c.get(("aicpu", "evict"), 0),
            "hit_rate": _rate(ai_hits, ai_hits + ai_misses + ai_oneshot),
        },
        "cache_events": {f"{k[0]}.{k[1]}": v for k, v in sorted(c.items())},
        "oneshot_tasks": ai_oneshot + stats.instants.get("oneshot", 0),
    }


def _memory_rows(run: Any, stats: SummaryStats) -> dict[str, Any]:
    """summary.json's ``memory`` and ``leaks``."""
    mem = run.sim.device.memory
    leaks = mem.leaks()
    return {
        "memory": {
            "capacity_bytes": mem.capacity,
            "peak_hbm_bytes": mem.peak,
            "peak_workspace_bytes": run.peak_workspace,
            "in_use_at_end_bytes": mem.in_use,
            "oom_events": stats.memory_kinds.get("oom", 0),
        },
        "leaks": {
            "count": len(leaks),
            "bytes": sum(a.size for a in leaks),
            "allocations": [{"address": f"{a.address:#x}", "size": a.size, "time_us": _r(a.time)} for a in leaks[:20]],
        },
    }


def env_report(env: Mapping[str, str], sources: Mapping[str, str], shell: Mapping[str, str]) -> dict[str, dict]:
    """summary.json's ``env``: NAME -> {"value", "source"} of each opbase variable in force, plus "shell" when
    the scenario or --set overrode the shell's value (opsim.scenario.environment)."""
    out: dict[str, dict] = {}
    for k, v in sorted(env.items()):
        entry = {"value": v, "source": sources.get(k, "scenario")}
        if entry["source"] != "shell" and k in shell:
            entry["shell"] = shell[k]
        out[k] = entry
    return out


def describe_env(env: Mapping[str, Mapping[str, str]]) -> str:
    """The run table's ``environment`` row: ``NAME=value (source), ...``, or that none is set."""
    if not env:
        return "none set (opbase defaults)"

    def one(k: str, v: Mapping[str, str]) -> str:
        over = f", over the shell's {shlex.quote(v['shell'])}" if "shell" in v else ""
        return f"{k}={shlex.quote(v['value'])} ({v['source']}{over})"

    return ", ".join(one(k, v) for k, v in env.items())


def summary_json(summary: Mapping[str, Any]) -> str:
    """Deterministic JSON text of a summary (only the `wall` section depends on the machine)."""
    return json.dumps(summary, indent=2, sort_keys=False) + "\n"


def _fmt_us(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f} s"
    if us >= 1e3:
        return f"{us / 1e3:.3f} ms"
    return f"{us:.3f} us"


def _fmt_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit} ({n} B)"
    return f"{n} B"


def _pct(rate: float | None) -> str:
    return "n/a (no lookups)" if rate is None else f"{100.0 * rate:.1f}%"


SUMMARY_FIELDS: dict[str, Any] = {
    "scenario": None, "seed": None, "soc": None, "profile": None, "env": "*", "calibration": None,
    "simulated_makespan_us": None, "device_busy_until_us": None,
    "step_breakdown": ("steps", "step_thread", "computing_us", "comm_not_overlapped_us", "overlapped_us",
                       "communication_us", "free_us", "stage_us", "bubble_us", "preparing_us"),
    "op_calls": None, "failed_calls": None,
    "threads": "*", "streams": "*", "units": "*", "task_types": "*",
    "exec_cache": ("hits", "misses", "evictions", "hit_rate"), "pta_cache": ("hits", "misses", "hit_rate"),
    "aicpu_cache": ("hits", "misses", "oneshot", "evictions", "hit_rate"), "cache_events": "*",
    "oneshot_tasks": None,
    "memory": ("capacity_bytes", "peak_hbm_bytes", "peak_workspace_bytes", "in_use_at_end_bytes", "oom_events"),
    "leaks": ("count", "bytes", "allocations"), "overflows": None, "profiling_reports": "*", "instants": "*",
    "counters_max": "*", "errors": None, "warnings": None,
    "device_timing": ("calibration", "levels", "makespan_band_us", "sources"),
    "cluster": ("size", "collectives", "max_wait_us", "waiting_rank", "slowest_rank", "max_transit_us",
                "max_communication_not_overlapped_us"),
    "ranks": "*",
    "wall": ("wall_seconds", "simulated_calls_per_wall_second", "write_seconds"),
}
"""The fields `build_summary` writes (a test keeps the two in step): None a value, a tuple the keys of a fixed
section, "*" a section keyed by names (threads, streams, ...). Sweep figures `summary.<path>` are checked
against it when a sweep file is validated."""


def summary_field_problem(path: str) -> str | None:
    """Why `summary.<path>` names no summary field (None: it may: a named section's names are run-dependent)."""
    parts = path.split(".", 2)
    top = parts[0]
    if top not in SUMMARY_FIELDS:
        return f"the summary has no field {top!r}; its fields: {', '.join(SUMMARY_FIELDS)}"
    kind = SUMMARY_FIELDS[top]
    if len(parts) > 1 and kind is None:
        return f"summary.{top} is a value, not a section; use summary.{top}"
    if len(parts) > 1 and isinstance(kind, tuple) and parts[1] not in kind:
        return f"summary.{top} has no field {parts[1]!r}; its fields: {', '.join(kind)}"
    return None


_NUM = {"type": "number"}
_OPT_NUM = {"type": ["number", "null"]}


def _table(required: tuple[str, ...], **props: Any) -> dict[str, Any]:
    """A JSON object of objects (name -> row), each row with these number fields."""
    return {"type": "object", "additionalProperties": {"type": "object", "required": list(required),
                                                       "properties": {k: _NUM for k in required} | props}}


_SECTION = {"type": ["object", "null"]}
_ENV_ROW = {"type": "object", "required": ["value", "source"],
            "properties": {"value": {"type": "string"}, "source": {"type": "string"}, "shell": {"type": "string"}}}
SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "wall": {"type": ["object", "null"], "properties": {"wall_seconds": _OPT_NUM, "write_seconds": _OPT_NUM,
                                                           "simulated_calls_per_wall_second": _OPT_NUM}},
        "env": {"type": ["object", "null"], "additionalProperties": _ENV_ROW},
        "simulated_makespan_us": _NUM,
        "step_breakdown": _SECTION | {"properties": {"steps": _NUM, "stage_us": _NUM, "computing_us": _NUM,
                                                     "communication_us": _NUM, "comm_not_overlapped_us": _NUM,
                                                     "free_us": _NUM, "preparing_us": _NUM}},
        "threads": _table(("host_busy_us", "host_busy_pct")) | {"type": ["object", "null"]},
        "streams": _table(("busy_us", "busy_pct")) | {"type": ["object", "null"]},
        "units": _table(("utilization_pct",)) | {"type": ["object", "null"]},
        "exec_cache": _SECTION | {"properties": {"hit_rate": _OPT_NUM}},
        "pta_cache": _SECTION | {"properties": {"hit_rate": _OPT_NUM}},
        "aicpu_cache": _SECTION | {"properties": {"hit_rate": _OPT_NUM}},
        "memory": _SECTION | {"properties": {"peak_hbm_bytes": _NUM, "peak_workspace_bytes": _NUM}},
        "leaks": _SECTION | {"properties": {"count": _NUM, "bytes": _NUM}},
        "profiling_reports": _SECTION,
        "ranks": _table(("rank", "collectives", "wait_us", "transit_us", "idle_us", "device_end_us")) | {
            "type": ["object", "null"]},
        "errors": {"type": ["array", "null"], "items": {"type": "object"}},
        "warnings": {"type": ["array", "null"]},
    },
}
"""The types `render_table` relies on (what `opsim report` checks before reading a summary.json)."""


def summary_problem(summary: Any) -> str | None:
    """Why `summary` (parsed JSON) cannot be rendered as a run summary, or None."""
    import jsonschema  # lazy: keeps jsonschema out of importing opsim.trace.summary
    from jsonschema.exceptions import best_match  # lazy: keeps jsonschema out of importing opsim.trace.summary
    err = best_match(jsonschema.Draft202012Validator(SUMMARY_SCHEMA).iter_errors(summary))
    if err is None:
        return None
    where = ".".join(shown(str(p), 60, quote=False) for p in err.absolute_path) or "(top level)"
    return f"{where}: {shown(err.message, 200, quote=False)}"


def render_table(summary: Mapping[str, Any]) -> str:
    """The closing table the CLI prints (plain text, fixed layout)."""
    rows: list[tuple[str, str]] = []
    wall = summary.get("wall") or {}
    rows.append(("scenario", f"{summary.get('scenario')} (seed {summary.get('seed')}, {summary.get('soc')}, "
                             f"profile {summary.get('profile')})"))
    if "env" in summary:
        rows.append(("environment", describe_env(summary["env"])))
    rows.append(("simulated makespan", _fmt_us(summary.get("simulated_makespan_us", 0.0))))
    rows += describe_sources(summary.get("device_timing") or {})
    sb = summary.get("step_breakdown")
    if sb and sb.get("steps"):
        rows.append(("step breakdown", f"{sb['steps']} step(s): stage {_fmt_us(sb['stage_us'])} = computing "
                                       f"{_fmt_us(sb['computing_us'])} + communication not overlapped "
                                       f"{_fmt_us(sb['comm_not_overlapped_us'])} + free {_fmt_us(sb['free_us'])}; "
                                       f"communication {_fmt_us(sb['communication_us'])}, preparing "
                                       f"{_fmt_us(sb['preparing_us'])}"))
    if wall.get("wall_seconds") is not None:
        write = wall.get("write_seconds")
        rows.append(("wall time", f"{wall['wall_seconds']:.3f} s simulating"
                                  + (f", {write:.3f} s writing the outputs" if write is not None else "")))
    rate = wall.get("simulated_calls_per_wall_second")
    rows.append(("op calls", f"{summary.get('op_calls')} ({summary.get('failed_calls')} failed)"
                             + (f", {rate:,.0f} calls per wall-second" if rate else "")))
    for name, th in (summary.get("threads") or {}).items():
        rows.append((f"host {name}", f"busy {_fmt_us(th['host_busy_us'])} ({th['host_busy_pct']:.1f}%), "
                                     + (f"{th['op_calls']} calls" if not th.get("task_queue") else "task-queue thread")
                                     + (", stopped on error" if th.get("stopped_on_error") else "")))
    for name, st in (summary.get("streams") or {}).items():
        rows.append((f"device {name}", f"busy {_fmt_us(st['busy_us'])} ({st['busy_pct']:.1f}%), {st['tasks']} tasks"
                                       + (f" [{st['thread']}]" if st.get("thread") else "")))
    for name, u in (summary.get("units") or {}).items():
        rows.append((f"unit pool {name}", f"{u['utilization_pct']:.1f}% of {u['capacity']} units, {u['tasks']} tasks"))
    if summary.get("ranks"):
        # lazy: keeps numpy out of importing opsim.trace.summary
        from opsim.trace.rank_table import rank_lines  # a job's table only
        rows += rank_lines(list(summary["ranks"].values()))
    ec = summary.get("exec_cache") or {}
    rows.append(("executor cache", f"hit rate {_pct(ec.get('hit_rate'))} ({ec.get('hits', 0)} hits, "
                                   f"{ec.get('misses', 0)} misses, {ec.get('evictions', 0)} evicted)"))
    pc = summary.get("pta_cache") or {}
    if pc.get("hits") or pc.get("misses"):
        rows.append(("PTA hash cache", f"hit rate {_pct(pc.get('hit_rate'))} ({pc.get('hits', 0)} hits, "
                                       f"{pc.get('misses', 0)} misses)"))
    ac = summary.get("aicpu_cache") or {}
    rows.append(("AI CPU task cache", f"hit rate {_pct(ac.get('hit_rate'))} ({ac.get('hits', 0)} hits, "
                                      f"{ac.get('misses', 0)} misses)"))
    rows.append(("one-shot AI CPU tasks", str(summary.get("oneshot_tasks", 0))))
    mem = summary.get("memory") or {}
    rows.append(("peak HBM in use", _fmt_bytes(mem.get("peak_hbm_bytes", 0))))
    rows.append(("peak workspace", _fmt_bytes(mem.get("peak_workspace_bytes", 0))))
    if mem.get("oom_events"):
        rows.append(("out-of-memory events", str(mem["oom_events"])))
    leaks = summary.get("leaks") or {}
    rows.append(("leaks found", "none" if not leaks.get("count") else
                 f"{leaks['count']} allocation(s), {_fmt_bytes(leaks.get('bytes', 0))}"))
    if summary.get("overflows"):
        rows.append(("overflow detections", str(summary["overflows"])))
    prof = summary.get("profiling_reports") or {}
    if prof:
        rows.append(("profiling reports", ", ".join(f"{k} {v}" for k, v in prof.items())))
    width = max(len(k) for k, _ in rows)
    lines = ["opsim run summary", "-" * (width + 40)]
    lines += [f"{k.ljust(width)}  {v}" for k, v in rows]
    for err in (summary.get("errors") or [])[:10]:
        lines.append(f"error: {err.get('message')}")
    for w in (summary.get("warnings") or [])[:10]:
        lines.append(f"warning: {w}")
    return "\n".join(lines) + "\n"


__all__ = ["SummaryStats", "build_summary", "render_table", "summary_json", "summary_problem", "SUMMARY_SCHEMA"]
