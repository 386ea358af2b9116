"""What a batch records: the rows the compiled loop filled handed to the recorder (full trace), or the summary's
totals folded into `SummaryStats` (trace off), as their record methods would have left them."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from opsim.fastpath import batch_layout as layout

if TYPE_CHECKING:
    from opsim.fastpath.batch import Batch



class Tables:
    """Codes of the op names and task types of a batch's tasks (the compiled loop holds codes, not strings)."""

    def __init__(self) -> None:
        self.values: list = []
        self.codes: dict = {}

    def code(self, value: Any) -> int:
        c = self.codes.get(value)
        if c is None:
            c = self.codes[value] = len(self.values)
            self.values.append(value)
        return c


def flush(b: Batch) -> None:
    """Hand the rows the compiled loop filled to the recorder, as its record methods append them."""
    g, ri, rf, rec, cc = b.g, b.ri, b.rf, b.rec, b.cc
    counts = [int(g[layout.NROWS + kind]) for kind in range(layout.RK_KINDS)]
    g[layout.NROWS:layout.NROWS + layout.RK_KINDS] = 0
    rec.extend("device", ())  # device rows the Python path took before the batch's go first
    n = counts[layout.RK_HOST]
    if n:
        i, f = ri[layout.RK_HOST, :, :n], rf[layout.RK_HOST, :, :n]
        rec.extend("host", [(name, values.tolist()) for name, values in (
            ("thread", i[0]), ("phase", i[1]), ("op", i[2]), ("start", f[0]), ("dur", f[1]), ("corr", i[3]))],
            int(g[layout.HGROUPED]), int(g[layout.HEXTRA]))
        g[layout.HGROUPED] = g[layout.HEXTRA] = 0
    n = counts[layout.RK_DEVICE]
    if n:
        i, f = ri[layout.RK_DEVICE, :, :n], rf[layout.RK_DEVICE, :, :n]
        rec.extend("device", [(name, values.tolist()) for name, values in (
            ("device", i[0]), ("stream", i[1]), ("unit_kind", i[2]), ("units", i[3]), ("task_id", i[4]),
            ("op", i[5]), ("task_type", i[6]), ("block_dim", i[7]), ("queued", f[0]), ("start", f[1]),
            ("end", f[2]), ("corr", i[8]))])
    n = counts[layout.RK_MEMORY]
    if n:
        i, f = ri[layout.RK_MEMORY, :, :n], rf[layout.RK_MEMORY, :, :n]
        rec.extend("memory", [(name, values.tolist()) for name, values in (
            ("time", f[0]), ("device", i[0]), ("kind", i[1]), ("address", i[2]), ("size", i[3]), ("in_use", i[4]))])
    _flush_small(b, counts)


def _flush_small(b: Batch, counts: list) -> None:
    """The cache hits, step instants, tensor descriptions and call tags among the rows."""
    ri, rf, rec, cc = b.ri, b.rf, b.rec, b.cc
    n = counts[layout.RK_CACHE]
    if n:
        rec.extend("cache", (
            ("time", rf[layout.RK_CACHE, 0, :n].tolist()), ("thread", ri[layout.RK_CACHE, 0, :n].tolist()),
            ("cache", [int(cc[layout.C_EXEC])] * n), ("kind", [int(cc[layout.C_HIT])] * n),
            ("op", ri[layout.RK_CACHE, 1, :n].tolist()), ("key_hash", [0] * n),
            ("detail", [int(cc[layout.C_EMPTY])] * n)))
    n = counts[layout.RK_INSTANT]
    if n:
        rec.extend("instant", (
            ("time", rf[layout.RK_INSTANT, 0, :n].tolist()), ("name", [int(cc[layout.C_STEP])] * n),
            ("track", ri[layout.RK_INSTANT, 0, :n].tolist()),
            ("args", [{"step": step, "phase": "end" if phase else "begin"} for step, phase in
                      zip(ri[layout.RK_INSTANT, 1, :n].tolist(), ri[layout.RK_INSTANT, 2, :n].tolist())])))
    n = counts[layout.RK_INFO]
    if n:
        ti = rec.tensor_infos
        ti.corr.extend(ri[layout.RK_INFO, 0, :n].tolist())
        ti.op.extend(ri[layout.RK_INFO, 1, :n].tolist())
        infos = b.infos
        ti.info.extend(infos[k] for k in ri[layout.RK_INFO, 2, :n].tolist())
    n = counts[layout.RK_TAG]
    if n:  # what the runner's call tagging records: the call's (op step, variant)
        steps, corr_variant = b.steps, b.run.corr_variant
        for corr, k, v in zip(*ri[layout.RK_TAG, :3, :n].tolist()):
            corr_variant[corr] = (steps[k], v)


def fold_totals(b: Batch) -> None:
    """SummaryStats' totals as its record methods would have left them."""
    g, gf, st, stf, pl, plf = b.g, b.gf, b.st, b.stf, b.pl, b.plf
    stats = b.stats
    if g[layout.HITS]:
        stats.cache[("exec", "hit")] += int(g[layout.HITS])
    if g[layout.INSTANTS]:
        stats.instants["step"] += int(g[layout.INSTANTS])
    if g[layout.NALLOC]:
        stats.memory_kinds["alloc"] += int(g[layout.NALLOC])
    if g[layout.NFREE]:
        stats.memory_kinds["free"] += int(g[layout.NFREE])
    if gf[layout.DEV_END] > stats.device_end:
        stats.device_end = float(gf[layout.DEV_END])
    for s, stream in enumerate(b.streams):
        if st[layout.S_REC, s]:
            stats.stream_tasks[stream.stream_id] = int(st[layout.S_TASKS, s])
            stats.stream_busy[stream.stream_id] = float(stf[layout.SF_BUSY, s])
    for j, pool in enumerate(b.pools):
        if pl[layout.L_TASKS, j] != stats.pool_tasks.get(pool.name, 0):
            stats.pool_tasks[pool.name] = int(pl[layout.L_TASKS, j])
            stats.pool_unit_us[pool.name] = float(plf[layout.LF_US, j])


def fold_counts(b: Batch, type_count: np.ndarray) -> None:
    """The device tasks' types counted by the compiled loop, into the summary's totals."""
    task_types = b.stats.task_types
    for code in np.flatnonzero(type_count):
        task_types[b.types.values[code]] += int(type_count[code])
