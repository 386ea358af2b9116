"""Plots of one run. Each function takes a ``Result`` and returns its matplotlib ``Figure``, titled, with units
on both axes and a legend, so a notebook cell can show it and a script can save it.

matplotlib is imported inside the functions (it is an optional dependency); pyplot is used only to create the
figure, so the caller's backend choice (``Agg`` in tests and scripts) is respected.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from opsim.trace.frames import OP_CALL
from opsim.errors import OpsimError

_BYTE_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1))


def _plt():
    try:
        import matplotlib.pyplot as plt  # lazy: an optional dependency, looked for where it is used
    except ImportError:
        raise OpsimError("opsim.analysis plots need matplotlib; install it with `pip install opsim[analysis]`"
                         ) from None
    return plt


def _new_axes(ax: Any, size: tuple[float, float]):
    if ax is not None:
        return ax.figure, ax
    fig, ax = _plt().subplots(figsize=size, layout="constrained")
    return fig, ax


def _palette(names: Iterable[str]) -> dict[str, Any]:
    """A stable colour per name (order of first appearance); 46 distinct colours before they repeat."""
    from matplotlib import colormaps  # lazy: keeps matplotlib out of importing opsim.analysis.plots
    colours = [*colormaps["tab10"].colors, *colormaps["Dark2"].colors, *colormaps["Set2"].colors,
               *colormaps["tab20b"].colors]
    out: dict[str, Any] = {}
    for name in names:
        if name not in out:
            out[name] = colours[len(out) % len(colours)]
    return out


def _byte_unit(peak: float) -> tuple[str, int]:
    for name, scale in _BYTE_UNITS:
        if peak >= scale:
            return name, scale
    return "B", 1


def _human_bytes(n: float) -> str:
    unit, scale = _byte_unit(n)
    return f"{n / scale:.3g} {unit}"


def _placeholder_legend(ax: Any, text: str) -> None:
    """A legend that says why a plot is empty (every plot has a legend)."""
    ax.plot([], [], " ", label=text)
    ax.legend(loc="upper right")


PHASE_GROUPS: dict[str, tuple[str, ...]] = {
    "L2 phase 1": ("L2 phase1 entry", "make key", "match cache", "add io and attr", "infershape", "tiling",
                   "alloc tensor", "build graph", "plan workspace", "create executor", "release to"),
    "L2 phase 2": ("L2 phase2 entry", "update tensor addr", "launch", "cache replay", "destroy executor"),
    "runtime": ("rt malloc", "rt free", "stream sync"),
    "AI CPU task": ("FindTask", "CreateTask", "Init", "UpdateShape", "ShapeH2D", "UpdateArgs", "Launch",
                    "CopyShapeD2H", "UpdateOutputShape"),
    "AI CPU one-time load": ("load aicpu kernel json", "load tf kernel json", "load custom aicpu registry",
                             "load custom aicpu so", "get soc version"),
    "DirectInvoke": ("prepare", "direct invoke launch", "destroy"),
    "DFX": ("dump", "overflow check"),
    "task queue": ("enqueue", "dequeue", "dequeue gap"),
}
"""Host phase names (the cost model's) grouped by the part of opbase that charges them (timeline colours)."""

_GROUP_OF = {phase: group for group, names in PHASE_GROUPS.items() for phase in names}
_GROUP_COLOURS = {"L2 phase 1": "#2b2b2b", "L2 phase 2": "#7b3294", "runtime": "#1b7837", "AI CPU task": "#b35806",
                  "AI CPU one-time load": "#fdb863",
                  "DirectInvoke": "#2166ac", "DFX": "#d6604d", "task queue": "#8c510a", "other": "#969696"}


def phase_group(phase: str) -> str:
    """The ``PHASE_GROUPS`` group of a host phase name ("other" when it is not listed)."""
    return _GROUP_OF.get(phase, "other")


STARTUP_GROUP = "AI CPU one-time load"
"""The process start-up work (the first AI CPU call loads the kernel JSON files): thousands of microseconds
once per process, which plots leave out by default (``startup=True`` shows it)."""


def startup_window(result: Any) -> tuple[float, float] | None:
    """(start, end) in µs of the process start-up spans, or None when the run has none."""
    host = result.host_spans
    spans = host[host["phase"].map(phase_group) == STARTUP_GROUP]
    if spans.empty:
        return None
    return float(spans["start"].min()), float(spans["end"].max())


def _idle_gap(result: Any, window: tuple[float, float]) -> tuple[float, float] | None:
    """The part of the start-up window in which nothing else happens: no other thread's host span, no device
    task (the call that does the start-up is excluded). None when that part is short."""
    a, b = window
    host = result.host_spans
    startup_corr = set(host.loc[host["phase"].map(phase_group) == STARTUP_GROUP, "corr"])
    other = host[~host["corr"].isin(startup_corr) | (host["corr"] < 0)]
    dev = result.device_tasks
    ends = [float(e) for e in other.loc[(other["start"] < b) & (other["end"] > a), "end"]]
    ends += [float(e) for e in dev.loc[(dev["start"] < b) & (dev["end"] > a), "end"]]
    g0 = max([a] + [e for e in ends if e < b])
    return (g0, b) if b - g0 > 0.05 * max(result.makespan_us, 1e-9) else None


def _compress_axis(ax: Any, gap: tuple[float, float], share: float = 0.03) -> None:
    """Squeeze [g0, g1] of the x axis to `share` of its length (times stay true; the gap is marked)."""
    g0, g1 = gap
    k = share * max(ax.get_xlim()[1] - ax.get_xlim()[0], 1e-9) / (g1 - g0)

    def forward(x):
        x = np.asarray(x, float)
        return np.where(x <= g0, x, np.where(x >= g1, x - (g1 - g0) * (1 - k), g0 + (x - g0) * k))

    def inverse(u):
        u = np.asarray(u, float)
        c = g0 + (g1 - g0) * k
        return np.where(u <= g0, u, np.where(u >= c, u + (g1 - g0) * (1 - k), g0 + (u - g0) / k))

    lo, hi = ax.get_xlim()
    ax.set_xscale("function", functions=(forward, inverse))
    from matplotlib.ticker import MaxNLocator  # lazy: keeps matplotlib out of importing opsim.analysis.plots
    ticks = [t for a, b, n in ((lo, g0, 6), (g1, hi, 3)) for t in MaxNLocator(n).tick_values(a, b) if a <= t <= b]
    ax.set_xticks(ticks)
    ax.set_xlim(lo, hi)
    for x in gap:
        ax.axvline(x, color="0.3", linestyle=":", linewidth=0.8)


# --- timeline ------------------------------------------------------------------------------------------------
def timeline(result: Any, *, start: float | None = None, end: float | None = None, phases: bool = True,
             links: bool = True, max_links: int = 400, max_legend: int = 24, startup: bool = False, ax: Any = None):
    """Gantt chart: one row per host thread, per stream and per device unit pool, with host-to-device links.

    Host rows show each ACLNN call's envelope (light) and, with ``phases``, its charged host phases (solid);
    stream rows show device tasks by op; pool rows overlay the tasks that held units of the pool. A grey line
    links each launch (the time the task was queued by its thread) to the task's start on its stream.
    ``start``/``end`` (µs) crop the view. The legend lists the APIs, then the device ops, then the host
    phase groups (at most ``max_legend`` API and op entries). Unless ``startup`` is true, the stretch of the
    process start-up (the one-time AI CPU kernel JSON load) in which nothing else happens is squeezed to a
    sliver between two dotted lines, so it does not flatten the rest of the run; times stay true.
    """
    host, dev = result.host_spans, result.device_tasks
    dev = dev[dev["unit_kind"] != "none"]
    lo = float(start) if start is not None else 0.0
    hi = float(end) if end is not None else max(result.makespan_us, 1e-9)
    host = host[(host["end"] >= lo) & (host["start"] <= hi)]
    dev = dev[(dev["end"] >= lo) & (dev["start"] <= hi)]
    threads, streams, pools = _timeline_tracks(result)
    rows = [f"thread {t}" for t in threads] + [f"Stream {s}" for s in streams] + [f"pool {p}" for p in pools]
    y = {name: i for i, name in enumerate(rows)}
    calls = host[host["phase"] == OP_CALL]
    every = result.host_spans
    colours = _palette(sorted(set(every.loc[every["phase"] == OP_CALL, "op"])) +
                       sorted(set(result.device_tasks["op"])))  # the same colours however the view is cropped
    fig, ax = _new_axes(ax, (12, 1.2 + 0.45 * max(len(rows), 3)))
    apis: dict[str, Any] = {}
    ops: dict[str, Any] = {}
    seen: dict[str, Any] = {}  # host phase groups and the link collection

    def bars(row: str, frame: pd.DataFrame, label_col: str, height: float, alpha: float, into: dict) -> None:
        for name, grp in frame.groupby(label_col, sort=False):
            handle = ax.broken_barh(list(zip(grp["start"], grp["end"] - grp["start"])),
                                    (y[row] - height / 2, height), facecolors=colours[name], alpha=alpha,
                                    edgecolor="none")
            into.setdefault(str(name), handle)

    for t in threads:
        mine = host[host["thread"].astype(str) == t]
        bars(f"thread {t}", mine[mine["phase"] == OP_CALL], "op", 0.8, 0.35, apis)
        if phases:
            ph = mine[mine["phase"] != OP_CALL]
            for group, grp in ph.groupby(ph["phase"].map(phase_group), sort=False):
                colour = _GROUP_COLOURS[group]
                handle = ax.broken_barh(list(zip(grp["start"], grp["dur"])), (y[f"thread {t}"] - 0.18, 0.36),
                                        facecolors=colour, edgecolor="white", linewidth=0.3)
                seen.setdefault(f"host: {group}", handle)
    for s in streams:
        bars(f"Stream {s}", dev[dev["stream"] == s], "op", 0.7, 0.9, ops)
    for p in pools:
        bars(f"pool {p}", dev[dev["unit_kind"] == p], "op", 0.7, 0.45, ops)
    if links and not dev.empty and not calls.empty:
        _launch_links(ax, result, dev, y, max_links, seen)
    _timeline_axes(ax, result, rows, lo, hi, startup, seen)
    _timeline_legend(ax, apis, ops, seen, max_legend)
    return fig


def _timeline_axes(ax: Any, result: Any, rows: list[str], lo: float, hi: float, startup: bool,
                   seen: dict[str, Any]) -> None:
    """The tracks, the view's time range (the idle start-up squeezed unless `startup`) and the labels."""
    ax.set_yticks(range(len(rows)), rows)
    ax.set_ylim(max(len(rows), 1) - 0.5, -0.5)
    ax.set_xlim(lo, hi)
    window = None if startup else startup_window(result)
    gap = _idle_gap(result, window) if window is not None else None
    if gap is not None and lo < gap[0] and gap[1] < hi:
        _compress_axis(ax, gap)
        seen["host: start-up squeezed (startup=True shows it)"] = ax.plot([], [], ":", color="0.3")[0]
    ax.set_xlabel("simulated time (µs)")
    ax.set_ylabel("track (host thread / stream / unit pool)")
    ax.set_title("Timeline: host threads, streams and unit pools")


def _timeline_tracks(result: Any) -> tuple[list[str], list[int], list[str]]:
    """The timeline's host threads (the scenario's order, then any other that ran), streams and unit pools, for
    the whole run whatever the view's crop."""
    threads = [str(t) for t in result.meta.get("threads") or ()]
    threads += [t for t in dict.fromkeys(result.host_spans["thread"].astype(str)) if t not in threads]
    streams = sorted(set(int(s) for s in result.device_tasks["stream"]))
    pools = list(result.pools) or sorted(set(result.device_tasks["unit_kind"]) - {"none"})
    return threads, streams, pools


def _launch_links(ax: Any, result: Any, dev: pd.DataFrame, y: dict[str, int], max_links: int,
                  seen: dict[str, Any]) -> None:
    """A grey line from each launch (its thread, when queued) to its task's start on its stream (at most
    `max_links`)."""
    thread_of = dict(zip(result.host_spans.loc[result.host_spans["phase"] == OP_CALL, "corr"],
                         result.host_spans.loc[result.host_spans["phase"] == OP_CALL, "thread"].astype(str)))
    linked = dev[dev["corr"].isin(thread_of.keys())].head(max_links)
    if not linked.empty:
        # lazy: keeps matplotlib out of importing opsim.analysis.plots
        from matplotlib.collections import LineCollection
        segs = [((q, y[f"thread {thread_of[c]}"]), (st, y[f"Stream {s}"]))
                for q, st, s, c in zip(linked["queued"], linked["start"], linked["stream"], linked["corr"])]
        lc = LineCollection(segs, colors="0.5", linewidths=0.6, alpha=0.7)
        ax.add_collection(lc)
        seen["host → device launch"] = lc


def _timeline_legend(ax: Any, apis: dict[str, Any], ops: dict[str, Any], seen: dict[str, Any],
                     max_legend: int) -> None:
    """The APIs, then the device ops (at most `max_legend` of both), then the host phase groups and the links."""
    named = {**{f"API {k}": v for k, v in sorted(apis.items())},
             **{f"op {k}": v for k, v in sorted(ops.items()) if f"API {k}" not in apis}}
    names = list(named)[:max_legend]
    if len(named) > max_legend:
        names.append(f"... {len(named) - max_legend} more")
        named[names[-1]] = ax.plot([], [], " ")[0]
    named.update(sorted((k, v) for k, v in seen.items() if k.startswith("host:")))
    names += sorted(k for k in seen if k.startswith("host:"))
    if "host → device launch" in seen:
        named["host → device launch"] = seen["host → device launch"]
        names.append("host → device launch")
    if names:
        ax.legend([named[n] for n in names], names, loc="upper left", bbox_to_anchor=(1.0, 1.0),
                  fontsize="small")
    else:
        _placeholder_legend(ax, "no spans recorded")


# --- memory --------------------------------------------------------------------------------------------------
def memory_over_time(result: Any, *, ax: Any = None):
    """HBM in use and the part of it held by op workspaces, over simulated time (OOM events marked)."""
    mem = result.memory
    fig, ax = _new_axes(ax, (10, 4))
    peak = float(mem["hbm_in_use"].max()) if not mem.empty else 0.0
    unit, scale = _byte_unit(peak)
    if mem.empty:
        _placeholder_legend(ax, "no memory events recorded")
    else:
        t = np.concatenate([[0.0], mem["time"].to_numpy(float), [result.makespan_us]])
        hbm = np.concatenate([[0.0], mem["hbm_in_use"].to_numpy(float), [mem["hbm_in_use"].iloc[-1]]]) / scale
        ws = np.concatenate([[0.0], mem["workspace_in_use"].to_numpy(float),
                             [mem["workspace_in_use"].iloc[-1]]]) / scale
        ax.step(t, hbm, where="post", label=f"HBM in use (peak {_human_bytes(peak)})")
        ax.fill_between(t, ws, step="post", alpha=0.35, color="tab:orange",
                        label=f"workspace in use (peak {_human_bytes(mem['workspace_in_use'].max())})")
        oom = mem[mem["kind"] == "oom"]
        if not oom.empty:
            ax.plot(oom["time"], oom["hbm_in_use"] / scale, "x", color="tab:red", markersize=8,
                    label=f"out of memory ({len(oom)})")
        ax.set_ylim(0, max(peak / scale, 1e-9) * 1.3)  # headroom for the legend
        ax.legend(loc="upper right")
    ax.set_xlabel("simulated time (µs)")
    ax.set_ylabel(f"device memory ({unit})")
    ax.set_title("HBM and workspace use over time")
    return fig


# --- cache hit rate ------------------------------------------------------------------------------------------
def cache_hit_rate(result: Any, *, caches: Sequence[str] = ("exec", "pta", "aicpu"), window: int | None = None,
                   ax: Any = None):
    """Cumulative hit rate of the executor cache and the AI CPU task cache over successive lookups (one
    lookup per call that consults the cache); ``window`` adds a moving-window rate. One-shot AI CPU tasks
    count as lookups that missed."""
    ev = result.cache_events
    fig, ax = _new_axes(ax, (10, 4))
    labels = {"exec": "executor cache (OpExecCache)", "pta": "PTA hash cache (torch_npu)",
              "aicpu": "AI CPU task cache"}
    drew = False
    for name in caches:
        sub = ev[(ev["cache"] == name) & (ev["lookup"] > 0)]
        if sub.empty:
            continue
        n = np.arange(1, len(sub) + 1)
        hits = (sub["kind"] == "hit").to_numpy(float)
        line, = ax.plot(n, 100.0 * np.cumsum(hits) / n,
                        label=f"{labels.get(name, name)}: {100.0 * hits.mean():.1f}% over {len(sub)} lookups")
        if window:
            rolling = pd.Series(hits).rolling(window, min_periods=1).mean().to_numpy()
            ax.plot(n, 100.0 * rolling, color=line.get_color(), alpha=0.4, linewidth=0.8,
                    label=f"{labels.get(name, name)}: last {window} lookups")
        oneshot = (sub["kind"] == "oneshot").to_numpy(float)
        if oneshot.any():
            ax.plot(n, 100.0 * np.cumsum(oneshot) / n, linestyle="--", color=line.get_color(),
                    label=f"{labels.get(name, name)}: one-shot share ({int(oneshot.sum())} tasks)")
        drew = True
    ax.set_ylim(-2, 102)
    ax.set_xlabel("cache lookups (calls, in simulated-time order)")
    ax.set_ylabel("hit rate (%)")
    ax.set_title("Cache hit rate over calls")
    if drew:
        ax.legend(loc="lower right", fontsize="small")
    else:
        _placeholder_legend(ax, "no cache lookups recorded")
    return fig


# --- host phase breakdown ------------------------------------------------------------------------------------
def phase_table(result: Any) -> pd.DataFrame:
    """Mean host microseconds per call, by API (rows) and opbase phase name (columns, cost-table order).

    Spans outside any op call (for example an application's own ``rt malloc``) are listed under their op.
    """
    host = result.host_spans
    calls = host[host["phase"] == OP_CALL]
    api_of = dict(zip(calls["corr"], calls["op"]))
    ph = host[host["phase"] != OP_CALL]
    api = [api_of.get(c, op) if c >= 0 else op for c, op in zip(ph["corr"], ph["op"])]
    ph = ph.assign(api=api)
    totals = ph.pivot_table(index="api", columns="phase", values="dur", aggfunc="sum", fill_value=0.0)
    n_calls = calls.groupby("op").size()
    per_call = totals.div(n_calls.reindex(totals.index).fillna(1).clip(lower=1), axis=0)
    from opsim.device.cost import HOST_PHASES  # lazy: keeps SimPy out of importing opsim.analysis.plots
    order = [p for p in HOST_PHASES if p in per_call.columns] + sorted(
        p for p in per_call.columns if p not in HOST_PHASES)
    return per_call[order]


def _merge_case(table: pd.DataFrame) -> pd.DataFrame:
    """One column per phase name regardless of case (the AI CPU launcher's ``Launch`` and the L2 ``launch``
    are both the kernel launch), named as its first column."""
    first: dict[str, str] = {}
    for c in table.columns:
        first.setdefault(str(c).lower(), c)
    if len(first) == table.shape[1]:
        return table
    return table.T.groupby(lambda c: first[str(c).lower()], sort=False).sum().T


def phase_breakdown(result: Any, *, max_phases: int = 16, startup: bool = False, ax: Any = None):
    """Host time per call by opbase phase name, one stacked bar per ACLNN API. The ``max_phases`` phases with
    the most host time keep their own colour; the rest are summed into one "other phases" segment. Runtime
    calls made outside ACLNN calls (event record/wait, the application's mallocs) are not ACLNN APIs and are
    left out; so is the process start-up (the one-time AI CPU JSON load) unless ``startup`` is true."""
    table = phase_table(result)
    calls = result.host_spans
    apis = set(calls.loc[calls["phase"] == OP_CALL, "op"])
    table = table[[i in apis for i in table.index]]
    if not startup:
        table = table[[c for c in table.columns if phase_group(c) != STARTUP_GROUP]]
    table = _merge_case(table)
    if table.shape[1] > max_phases:
        keep = table.sum().nlargest(max_phases).index
        rest = [c for c in table.columns if c not in keep]
        table = table[[c for c in table.columns if c in keep]].assign(
            **{f"other phases ({len(rest)})": table[rest].sum(axis=1)})
    fig, ax = _new_axes(ax, (max(6.0, 1.1 * len(table) + 4), max(4.5, 0.24 * table.shape[1] + 1.0)))
    if table.empty:
        _placeholder_legend(ax, "no host phases recorded")
    else:
        colours = _palette(table.columns)
        bottom = np.zeros(len(table))
        x = np.arange(len(table))
        for phase in table.columns:
            vals = table[phase].to_numpy(float)
            ax.bar(x, vals, bottom=bottom, color=colours[phase], label=phase, width=0.6)
            bottom += vals
        ax.set_xticks(x, [str(i) for i in table.index], rotation=20, ha="right")
        handles, labels = ax.get_legend_handles_labels()  # top of the legend = top of the stack
        ax.legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small",
                  title="phase")
    ax.set_xlabel("ACLNN API (L2 op name)")
    ax.set_ylabel("host time per call (µs)")
    ax.set_title("Host phase breakdown per op")
    return fig


# --- device utilisation --------------------------------------------------------------------------------------
def utilisation_table(result: Any, bins: int = 50) -> pd.DataFrame:
    """Busy fraction (0..1) of each unit pool per time bin: index = bin start (µs), one column per pool."""
    dev = result.device_tasks
    dev = dev[dev["unit_kind"] != "none"]
    span = max(result.makespan_us, 1e-9)
    edges = np.linspace(0.0, span, bins + 1)
    pools = dict(result.pools) or {}
    out = {}
    for pool in (list(pools) or sorted(set(dev["unit_kind"]))):
        sub = dev[dev["unit_kind"] == pool]
        times = np.concatenate([sub["start"].to_numpy(float), sub["end"].to_numpy(float)])
        delta = np.concatenate([sub["units"].to_numpy(float), -sub["units"].to_numpy(float)])
        order = np.argsort(times, kind="stable")
        times, delta = times[order], delta[order]
        level = np.cumsum(delta)
        capacity = float(pools.get(pool) or (level.max() if len(level) else 1.0) or 1.0)
        # Integral of busy units: piecewise linear, so interpolation at the bin edges is exact.
        integral = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(times))]) if len(times) else np.zeros(0)
        at_edges = np.interp(edges, times, integral) if len(times) else np.zeros_like(edges)
        out[pool] = np.diff(at_edges) / (capacity * np.diff(edges))
    return pd.DataFrame(out, index=pd.Index(edges[:-1], name="time_us"))


def device_utilisation(result: Any, *, bins: int = 50, ax: Any = None):
    """Share of each device unit pool's units busy over time (binned), with the run's mean in the legend."""
    table = utilisation_table(result, bins)
    fig, ax = _new_axes(ax, (10, 4))
    if table.empty or table.shape[1] == 0:
        _placeholder_legend(ax, "no device tasks recorded")
    else:
        width = float(table.index[1] - table.index[0]) if len(table) > 1 else result.makespan_us
        for pool in table.columns:
            cap = result.pools.get(pool)
            label = f"{pool}" + (f" ({cap} units)" if cap else "") + f": mean {100 * table[pool].mean():.1f}%"
            ax.step(np.append(table.index, table.index[-1] + width), 100 * np.append(table[pool], table[pool].iloc[-1]),
                    where="post", label=label)
        ax.legend(loc="upper right", fontsize="small")
    ax.set_ylim(-2, 102)
    ax.set_xlabel("simulated time (µs)")
    ax.set_ylabel("units busy (%)")
    ax.set_title("Device utilisation per unit pool")
    return fig


# --- what-if ------------------------------------------------------------------------------------------------
_FIGURE_LABELS = {
    "exec_hit_rate": ("executor-cache hit rate", "%", 100.0), "aicpu_hit_rate": ("AI CPU cache hit rate", "%", 100.0),
    "makespan_us": ("makespan", "µs", 1.0), "host_busy_us": ("host busy time", "µs", 1.0),
    "device_busy_us": ("device busy time", "µs", 1.0), "aicpu_oneshots": ("one-shot AI CPU tasks", "count", 1.0),
    "peak_workspace_in_use_bytes": ("peak workspace in use", "KiB", 1 / 1024),
    "largest_workspace_bytes": ("largest workspace", "KiB", 1 / 1024), "peak_hbm_bytes": ("peak HBM", "KiB", 1 / 1024),
    "summary.simulated_makespan_us": ("makespan", "µs", 1.0),
    "summary.exec_cache.hit_rate": ("executor-cache hit rate", "%", 100.0),
    "summary.aicpu_cache.hit_rate": ("AI CPU cache hit rate", "%", 100.0),
    "summary.oneshot_tasks": ("one-shot AI CPU tasks", "count", 1.0),
    "summary.memory.peak_hbm_bytes": ("peak HBM", "KiB", 1 / 1024),
    "summary.memory.peak_workspace_bytes": ("peak workspace", "KiB", 1 / 1024),
}


def _figure_label(name: str) -> tuple[str, str, float]:
    return _FIGURE_LABELS.get(name, (name, "value", 1.0))


def what_if_plot(table: pd.DataFrame, param: str | None = None, left: Sequence[str] = ("aicpu_hit_rate",),
                 right: Sequence[str] = ("makespan_us",), *, ax: Any = None):
    """A ``what_if`` table against its parameter: ``left`` figures on the left axis, ``right`` ones on a
    twin axis (each axis's figures should share a unit). The parameter axis is categorical when its values
    are not all numbers."""
    param = param or table.columns[0]
    fig, ax = _new_axes(ax, (8, 4))
    xs = table[param].tolist()
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in xs)
    x = np.asarray(xs, float) if numeric else np.arange(len(xs))
    handles = []
    for axis, names, style in ((ax, left, "o-"), (ax.twinx() if right else None, right, "s--")):
        if axis is None or not names:
            continue
        unit = _figure_label(names[0])[1]
        for name in names:
            label, _unit, scale = _figure_label(name)
            handles += axis.plot(x, table[name].to_numpy(float) * scale, style,
                                 color=f"C{len(handles)}", label=f"{label} ({_unit})")
        axis.set_ylabel(" / ".join(_figure_label(n)[0] for n in names) + f" ({unit})")
    if not numeric:
        ax.set_xticks(x, [str(v) for v in xs])
    elif len(x) > 2 and x.min() > 0 and x.max() / x.min() >= 100:
        ax.set_xscale("log")
    ax.set_xlabel(f"{param} (override value)")
    ax.set_title(f"What if: {param}")
    ax.legend(handles, [h.get_label() for h in handles], loc="best", fontsize="small")
    return fig


# --- sweeps ------------------------------------------------------------------------------------------------
def _all_numbers(values: Sequence[Any]) -> bool:
    return all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) for v in values)


def _swept_order(column: pd.Series) -> list[Any]:
    """A parameter's values in ascending order when they are numbers, else in the order the sweep lists them."""
    values = list(pd.unique(column))
    return sorted(values) if _all_numbers(values) else values


def sweep_plot(table: pd.DataFrame, figure: str, params: Sequence[str] | None = None, *, ax: Any = None):
    """One figure of a sweep table (``opsim.sweep``) against one or two swept parameters.

    One parameter: the mean over every other column that varies (seeds, other parameters) as a line, their
    min-max range as a band. Two: a heatmap of the mean, first parameter across, second down. ``params``
    defaults to the sweep's parameters (it must then have one or two). Points that could not run are left out.
    """
    params = list(params) if params is not None else list(table.attrs.get("params") or [])
    if not 1 <= len(params) <= 2:
        raise ValueError(f"sweep_plot draws one or two parameters; give params= (the table's parameters: "
                         f"{table.attrs.get('params') or 'unknown'})")
    missing = [c for c in [*params, figure] if c not in table.columns]
    if missing:
        raise ValueError(f"sweep_plot: the table has no column {missing[0]!r}; its columns: {', '.join(table.columns)}")
    rows = table[table["status"] != "failed"] if "status" in table.columns else table
    label, unit, scale = _figure_label(figure)
    values = pd.to_numeric(rows[figure], errors="coerce") * scale
    others = [c for c in (table.attrs.get("params") or []) if c not in params]
    others += ["seed"] if "seed" in table.columns else []
    over = f" (mean over {', '.join(others)})" if others else ""
    if len(params) == 1:
        fig, ax = _new_axes(ax, (8, 4))
        stats = values.groupby(rows[params[0]], sort=False).agg(["mean", "min", "max"])
        xs = _swept_order(rows[params[0]])
        stats = stats.loc[xs]
        numeric = _all_numbers(xs)
        x = np.asarray(xs, float) if numeric else np.arange(len(xs))
        ax.plot(x, stats["mean"], "o-", label=f"{label}, mean")
        if (stats["max"] > stats["min"]).any():
            ax.fill_between(x, stats["min"], stats["max"], alpha=0.25, label="min-max")
        if not numeric:
            ax.set_xticks(x, [str(v) for v in xs], rotation=20 if len(xs) > 4 else 0)
        ax.set_xlabel(f"{params[0]} (swept value)")
        ax.set_ylabel(f"{label} ({unit})")
        ax.legend(loc="best", fontsize="small")
        ax.set_title(f"Sweep: {label} against {params[0]}{over}")
        return fig
    grid = values.groupby([rows[params[1]], rows[params[0]]], sort=False).mean().unstack()
    grid = grid.loc[_swept_order(rows[params[1]]), _swept_order(rows[params[0]])]
    fig, ax = _new_axes(ax, (max(5.0, 0.9 * grid.shape[1] + 3), max(3.5, 0.5 * grid.shape[0] + 2)))
    image = ax.imshow(grid.to_numpy(float), aspect="auto", origin="lower", cmap="viridis")
    ax.set_xticks(range(grid.shape[1]), [str(v) for v in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [str(v) for v in grid.index])
    if grid.size <= 150:
        lo, hi = np.nanmin(grid.to_numpy(float)), np.nanmax(grid.to_numpy(float))
        for (i, j), v in np.ndenumerate(grid.to_numpy(float)):
            if v == v:
                ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize="x-small",
                        color="black" if hi > lo and (v - lo) / (hi - lo) > 0.6 else "white")
    fig.colorbar(image, ax=ax, label=f"{label} ({unit})")
    ax.set_xlabel(f"{params[0]} (swept value)")
    ax.set_ylabel(f"{params[1]} (swept value)")
    ax.set_title(f"Sweep: {label}{over}")
    return fig


PLOTS = {"timeline": timeline, "memory_over_time": memory_over_time, "cache_hit_rate": cache_hit_rate,
         "phase_breakdown": phase_breakdown, "device_utilisation": device_utilisation}
"""Every plot function by name (the tests and docs/make_figures.py iterate over it)."""
