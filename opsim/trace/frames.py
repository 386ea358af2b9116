"""DataFrame views derived from the recorder's columns, and the summary figures computed from them.

Every table here is a pure function of the record columns (``Recorder.records(kind)`` or the same columns read
back from a saved run), so a live run and a loaded one give identical tables. Times are simulated microseconds.

Linking rules (the recorder keeps kinds separate; these joins put them back together):

- an ACLNN call is one ``op_call`` host span; its correlation id ``corr`` is carried by every host phase span and
  device task the call caused;
- a cache event has no correlation id, so it belongs to the ``op_call`` span of the same thread that encloses
  its time;
- a workspace allocation is an ``alloc`` memory event at the end of an ``rt malloc`` host span that belongs to
  an op call (``run_op`` allocates the workspace between the two phases); its address stays a workspace until
  the matching ``free``.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Mapping

import pandas as pd

from opsim.trace.recorder import COLUMNS

OP_CALL = "op_call"
"""The host phase name of the envelope span ``run_op`` records around one ACLNN call."""

LOOKUP_KINDS = ("hit", "miss", "oneshot")
"""Cache event kinds that are the outcome of one lookup (``evict`` is not a lookup)."""

AICPU_CACHED_COUNTER = "aicpu cached tasks"
"""The counter the AI CPU task spaces record: cached tasks over every space of the process."""

_PLURAL = {"hit": "hits", "miss": "misses", "oneshot": "oneshots"}
_TIME_TOL = 1e-6


def frame(columns: Mapping[str, list], kind: str) -> pd.DataFrame:
    """The raw records of ``kind`` as a DataFrame with the recorder's column order."""
    names = COLUMNS[kind]
    return pd.DataFrame({c: list(columns.get(c, ())) for c in names}, columns=list(names))


def host_spans(host: pd.DataFrame) -> pd.DataFrame:
    """Host spans with an ``end`` column, sorted by thread then start (``op_call`` envelopes included)."""
    df = host.copy()
    df["end"] = df["start"] + df["dur"]
    return df.sort_values(["thread", "start", "end"], kind="stable").reset_index(drop=True)


def device_tasks(device: pd.DataFrame) -> pd.DataFrame:
    """Device tasks with ``dur`` (start to end) and ``wait`` (queued to start) columns."""
    df = device.copy()
    df["dur"] = df["end"] - df["start"]
    df["wait"] = df["start"] - df["queued"]
    return df.sort_values(["start", "stream", "task_id"], kind="stable").reset_index(drop=True)


def op_call_spans(host: pd.DataFrame) -> pd.DataFrame:
    """The ``op_call`` envelope spans: one row per ACLNN call (thread, api, start, end, corr)."""
    calls = host[host["phase"] == OP_CALL]
    out = pd.DataFrame({"corr": calls["corr"].astype("int64"), "thread": calls["thread"],
                        "api": calls["op"], "start": calls["start"],
                        "end": calls["start"] + calls["dur"]})
    return out.sort_values(["start", "corr"], kind="stable").reset_index(drop=True)


def attach_corr(events: pd.DataFrame, calls: pd.DataFrame) -> pd.Series:
    """For each event (``time``, ``thread``), the ``corr`` of the enclosing op call on that thread, else -1."""
    if events.empty:
        return pd.Series([], dtype="int64", index=events.index)
    if calls.empty:
        return pd.Series(-1, index=events.index, dtype="int64")
    left = pd.DataFrame({"time": events["time"].astype(float), "thread": events["thread"].astype(str),
                         "_row": range(len(events))}).sort_values("time", kind="stable")
    right = pd.DataFrame({"start": calls["start"].astype(float), "end": calls["end"].astype(float),
                          "thread": calls["thread"].astype(str), "corr": calls["corr"]}).sort_values(
        "start", kind="stable")
    merged = pd.merge_asof(left, right, left_on="time", right_on="start", by="thread", direction="backward",
                           allow_exact_matches=True)
    inside = merged["end"].notna() & (merged["time"] <= merged["end"] + _TIME_TOL)
    corr = merged["corr"].where(inside, -1).fillna(-1).astype("int64")
    corr.index = merged["_row"].to_numpy()
    corr = corr.sort_index()
    corr.index = events.index
    return corr


def cache_events(cache: pd.DataFrame, calls: pd.DataFrame) -> pd.DataFrame:
    """Cache events with the ``corr`` of their op call and a per-cache lookup number (``lookup``, from 1)."""
    df = cache.copy()
    df["corr"] = attach_corr(df, calls)
    df = df.sort_values(["time"], kind="stable").reset_index(drop=True)
    is_lookup = df["kind"].isin(LOOKUP_KINDS)
    df["lookup"] = is_lookup.groupby(df["cache"]).cumsum().where(is_lookup, 0).astype("int64")
    return df


def memory_events(memory: pd.DataFrame, host: pd.DataFrame) -> pd.DataFrame:
    """Memory events in simulated-time order with ``workspace`` (bool), ``op`` (the API a workspace belongs
    to), ``hbm_in_use`` and ``workspace_in_use`` (bytes allocated after the event, in time order).

    The recorder's own ``in_use`` is the allocator's total in call order: a host thread allocates at its own
    clock, which may run ahead of another thread's, so records are not time-sorted and ``in_use`` can differ
    from ``hbm_in_use`` between two threads' events.
    """
    df = memory.sort_values("time", kind="stable").reset_index(drop=True)
    mallocs = host[(host["phase"] == "rt malloc") & (host["corr"] >= 0)]
    # Workspace mallocs by end time (rounded, so float summation order cannot split equal times).
    pending: dict[float, list[str]] = defaultdict(list)
    for end, op in zip((mallocs["start"] + mallocs["dur"]).round(6), mallocs["op"]):
        pending[float(end)].append(op)
    live: dict[int, str] = {}
    workspace, ops, ws_in_use, hbm_in_use = [], [], [], []
    in_use = hbm = 0
    for time, kind, address, size in zip(df["time"].round(6), df["kind"], df["address"], df["size"]):
        is_ws, op = False, ""
        if kind == "alloc":
            hbm += int(size)
        elif kind == "free":
            hbm -= int(size)
        if kind == "alloc":
            waiting = pending.get(float(time))
            if waiting:
                op = waiting.pop(0)
                is_ws = True
                live[int(address)] = op
                in_use += int(size)
        elif kind == "free" and int(address) in live:
            op = live.pop(int(address))
            is_ws = True
            in_use -= int(size)
        workspace.append(is_ws)
        ops.append(op)
        ws_in_use.append(in_use)
        hbm_in_use.append(hbm)
    df["hbm_in_use"] = pd.Series(hbm_in_use, index=df.index, dtype="int64")
    df["workspace"] = pd.Series(workspace, index=df.index, dtype=bool)
    df["op"] = pd.Series(ops, index=df.index, dtype=object)
    df["workspace_in_use"] = pd.Series(ws_in_use, index=df.index, dtype="int64")
    return df


def _is_kernel(device: pd.DataFrame) -> pd.Series:
    """Device tasks that occupied units (kernels and copies, not host functions or events)."""
    return device["unit_kind"] != "none"


def op_calls(calls: pd.DataFrame, host: pd.DataFrame, device: pd.DataFrame, cache: pd.DataFrame) -> pd.DataFrame:
    """One row per ACLNN call: host envelope, host busy time, the device work it caused and its cache outcomes.

    ``host_us`` is the envelope (phase 1, workspace malloc, phase 2, free; waits included), ``host_busy_us``
    the sum of its charged phases; ``device_us`` sums its device tasks' durations, ``latency_us`` runs from
    the call's start to its last device task's end.
    """
    df = calls.copy()
    df["host_us"] = df["end"] - df["start"]
    phases = host[(host["phase"] != OP_CALL) & (host["corr"] >= 0)]
    busy = phases.groupby("corr")["dur"].sum()
    df["host_busy_us"] = df["corr"].map(busy).fillna(0.0)
    kernels = device[_is_kernel(device) & (device["corr"] >= 0)]
    grouped = kernels.groupby("corr")
    df["device_tasks"] = df["corr"].map(grouped.size()).fillna(0).astype("int64")
    df["device_us"] = df["corr"].map(grouped["dur"].sum() if not kernels.empty else pd.Series(dtype=float)
                                     ).fillna(0.0)
    df["device_end"] = df["corr"].map(grouped["end"].max() if not kernels.empty else pd.Series(dtype=float))
    df["latency_us"] = df["device_end"].where(df["device_end"].notna(), df["end"]) - df["start"]
    for name in ("exec", "aicpu", "pta"):
        sub = cache[(cache["cache"] == name) & (cache["corr"] >= 0)]
        for kind in LOOKUP_KINDS if name == "aicpu" else ("hit", "miss"):
            counts = sub[sub["kind"] == kind].groupby("corr").size()
            df[f"{name}_{_PLURAL[kind]}"] = df["corr"].map(counts).fillna(0).astype("int64")
    return df


def op_summary(calls: pd.DataFrame) -> pd.DataFrame:
    """One row per ACLNN API: call count, mean host and device time, cache outcomes."""
    cols = ["api", "calls", "host_us_mean", "host_busy_us_mean", "device_us_mean", "latency_us_mean",
            "device_tasks", "exec_hits", "exec_misses", "exec_hit_rate", "aicpu_hits", "aicpu_misses",
            "aicpu_oneshots", "aicpu_hit_rate", "pta_hits", "pta_misses"]
    if calls.empty:
        return pd.DataFrame(columns=cols)
    g = calls.groupby("api", sort=True)
    out = pd.DataFrame({
        "calls": g.size(),
        "host_us_mean": g["host_us"].mean(),
        "host_busy_us_mean": g["host_busy_us"].mean(),
        "device_us_mean": g["device_us"].mean(),
        "latency_us_mean": g["latency_us"].mean(),
        "device_tasks": g["device_tasks"].sum(),
        "exec_hits": g["exec_hits"].sum(),
        "exec_misses": g["exec_misses"].sum(),
        "aicpu_hits": g["aicpu_hits"].sum(),
        "aicpu_misses": g["aicpu_misses"].sum(),
        "aicpu_oneshots": g["aicpu_oneshots"].sum(),
        "pta_hits": g["pta_hits"].sum(),
        "pta_misses": g["pta_misses"].sum(),
    })
    out["exec_hit_rate"] = [hit_rate(h, m) for h, m in zip(out["exec_hits"], out["exec_misses"])]
    out["aicpu_hit_rate"] = [hit_rate(h, m + o) for h, m, o in
                             zip(out["aicpu_hits"], out["aicpu_misses"], out["aicpu_oneshots"])]
    return out.reset_index()[cols]


def aicpu_tasks(device: pd.DataFrame, cache: pd.DataFrame, calls: pd.DataFrame) -> pd.DataFrame:
    """Device tasks that ran on the AI CPU pool, with the calling thread and API and the AI CPU cache
    outcome of the launch (``hit``, ``miss`` or ``oneshot``; the n-th lookup of a call pairs with its
    n-th AI CPU task)."""
    df = device[device["unit_kind"] == "aicpu"].copy()
    thread = calls.set_index("corr")["thread"] if not calls.empty else pd.Series(dtype=object)
    api = calls.set_index("corr")["api"] if not calls.empty else pd.Series(dtype=object)
    df["thread"] = df["corr"].map(thread)
    df["api"] = df["corr"].map(api)
    lookups = cache[(cache["cache"] == "aicpu") & cache["kind"].isin(LOOKUP_KINDS) & (cache["corr"] >= 0)]
    outcome: dict[int, list[str]] = defaultdict(list)
    for corr, kind in zip(lookups["corr"], lookups["kind"]):
        outcome[int(corr)].append(kind)
    df = df.sort_values(["corr", "queued", "task_id"], kind="stable")
    taken: dict[int, int] = defaultdict(int)
    kinds = []
    for corr in df["corr"]:
        corr = int(corr)
        i = taken[corr]
        taken[corr] += 1
        seq = outcome.get(corr, ())
        kinds.append(seq[i] if i < len(seq) else "")
    df["cache"] = pd.Series(kinds, index=df.index, dtype=object)
    return df.sort_values(["start", "stream", "task_id"], kind="stable").reset_index(drop=True)


def _counter_peak(counters: pd.DataFrame | None, name: str) -> int:
    if counters is None or counters.empty:
        return 0
    values = counters.loc[counters["name"] == name, "value"]
    return int(values.max()) if not values.empty else 0


def hit_rate(hits: int, misses: int) -> float:
    """hits / lookups, NaN when there was no lookup."""
    total = int(hits) + int(misses)
    return int(hits) / total if total else math.nan


def figures(host: pd.DataFrame, device: pd.DataFrame, memory: pd.DataFrame, cache: pd.DataFrame,
            calls: pd.DataFrame, makespan_us: float | None = None,
            counters: pd.DataFrame | None = None) -> dict[str, Any]:
    """The headline numbers of a run, all derived from the trace (flat, JSON-friendly)."""
    kinds = cache.groupby(["cache", "kind"]).size() if not cache.empty else pd.Series(dtype="int64")

    def count(c: str, k: str) -> int:
        return int(kinds.get((c, k), 0))

    ends = [host["end"].max() if not host.empty else 0.0, device["end"].max() if not device.empty else 0.0,
            memory["time"].max() if not memory.empty else 0.0]
    span = float(makespan_us) if makespan_us is not None else float(max(ends))
    kernels = device[_is_kernel(device)]
    phases = host[host["phase"] != OP_CALL]
    e_hit, e_miss = count("exec", "hit"), count("exec", "miss")
    a_hit, a_miss, a_one = count("aicpu", "hit"), count("aicpu", "miss"), count("aicpu", "oneshot")
    p_hit, p_miss = count("pta", "hit"), count("pta", "miss")
    return {
        "makespan_us": span,
        "op_calls": int(len(calls)),
        "host_threads": int(host["thread"].nunique()) if not host.empty else 0,
        "host_busy_us": float(phases["dur"].sum()),
        "device_tasks": int(len(kernels)),
        "device_busy_us": float(kernels["dur"].sum()) if not kernels.empty else 0.0,
        "exec_hits": e_hit,
        "exec_misses": e_miss,
        "exec_evictions": sum(int(d) if str(d).isdigit() else 1 for d in
                              cache.loc[(cache["cache"] == "exec") & (cache["kind"] == "evict"), "detail"]),
        "exec_hit_rate": hit_rate(e_hit, e_miss),
        "pta_hits": p_hit,
        "pta_misses": p_miss,
        "pta_hit_rate": hit_rate(p_hit, p_miss),
        "aicpu_hits": a_hit,
        "aicpu_misses": a_miss,
        "aicpu_oneshots": a_one,
        "aicpu_hit_rate": hit_rate(a_hit, a_miss + a_one),
        "aicpu_tasks": int((device["unit_kind"] == "aicpu").sum()) if not device.empty else 0,
        "aicpu_cached_tasks_peak": _counter_peak(counters, AICPU_CACHED_COUNTER),
        "peak_hbm_bytes": int(memory["hbm_in_use"].max()) if not memory.empty else 0,
        "peak_workspace_in_use_bytes": int(memory["workspace_in_use"].max()) if not memory.empty else 0,
        "largest_workspace_bytes": int(memory.loc[memory["workspace"] & (memory["kind"] == "alloc"), "size"].max())
        if not memory.empty and memory["workspace"].any() else 0,
        "oom_events": int((memory["kind"] == "oom").sum()) if not memory.empty else 0,
    }
