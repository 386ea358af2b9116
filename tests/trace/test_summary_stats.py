"""Summary totals read from a finished recorder's columns equal the totals the record methods fold one record
at a time (the `trace: false` way): same keys in the same order, same counts, sums added in record order."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.trace import Recorder
from opsim.trace.summary import SummaryStats

_times = st.floats(0.0, 1e9, allow_nan=False)
_task = st.tuples(st.integers(0, 3), st.sampled_from(["aicore", "aiv", "none", "aicpu"]), st.integers(0, 48),
                  st.sampled_from(["AI_CORE", "AI_CPU", "HOST_FUNC"]), _times, _times, _times)


def _totals(stats: SummaryStats) -> list:
    return [list(d.items()) if isinstance(d, dict) else d for d in vars(stats).values()]


@settings(max_examples=80, deadline=None)
@given(tasks=st.lists(_task, max_size=60), mem=st.lists(st.sampled_from(["alloc", "free", "oom"]), max_size=20),
       caches=st.lists(st.tuples(st.sampled_from(["exec", "aicpu"]), st.sampled_from(["hit", "miss", "evict"])),
                       max_size=20), instants=st.lists(st.sampled_from(["step", "oneshot", "prof_x"]), max_size=10),
       odd=st.booleans(), fold=st.booleans())
def test_totals_from_columns_equal_totals_record_by_record(tasks, mem, caches, instants, odd, fold):
    rec, live = Recorder(), SummaryStats()
    live_rec = Recorder(sink=live)
    for target in (rec, live_rec):
        for i, (stream, kind, units, ttype, q, s, e) in enumerate(tasks):
            start = 0 if odd and i == 0 else s  # an int start: record by record
            target.device_task(stream, kind, units, i, "Add", ttype, 8, q, start, e, i)
        for i, kind in enumerate(mem):
            target.memory_event(float(i), kind, 64 * i, 64, 64)
        for i, (cache, kind) in enumerate(caches):
            target.cache_event(float(i), "t0", cache, kind, "aclnnAdd")
        for i, name in enumerate(instants):
            target.instant(float(i), name, "t0")
        target.counter(1.0, "queue", 3)
    if fold:
        rec.compact()
    assert _totals(SummaryStats().feed_recorder(rec)) == _totals(live)


def test_totals_added_to_existing_ones_record_by_record():
    rec = Recorder()
    rec.device_task(0, "aicore", 8, 1, "Add", "AI_CORE", 8, 0.0, 0.1, 0.4)
    stats = SummaryStats()
    stats.device_task(0, "aicore", 8, 0, "Add", "AI_CORE", 8, 0.0, 0.2, 0.3)
    want = SummaryStats()
    want.device_task(0, "aicore", 8, 0, "Add", "AI_CORE", 8, 0.0, 0.2, 0.3)
    want.device_task(0, "aicore", 8, 1, "Add", "AI_CORE", 8, 0.0, 0.1, 0.4)
    assert _totals(stats.feed_recorder(rec)) == _totals(want)


def test_busy_sums_added_in_record_order():
    """Thousands of tasks on one stream: a sum in another order (numpy's pairwise sum) lands elsewhere."""
    import random
    rnd = random.Random(7)
    rec, live = Recorder(), SummaryStats()
    for i in range(3000):
        s = rnd.uniform(0, 1e6)
        args = (0, "aicore", 7, i, "Add", "AI_CORE", 8, s, s, s + rnd.uniform(0, 1e3) / 3)
        rec.device_task(*args)
        live.device_task(*args)
    assert _totals(SummaryStats().feed_recorder(rec)) == _totals(live)
