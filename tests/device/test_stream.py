"""Streams, unit pools and events: ordering, concurrency, occupancy, waits and synchronisation."""
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.device import Device, DeviceTask, TaskKind, get_soc
from opsim.errors import InvalidArgumentError
from opsim.trace import Recorder


def make(soc="Ascend910B2", **overrides):
    env = simpy.Environment()
    rec = Recorder()
    return env, rec, Device(env, get_soc(soc, **overrides), rec)


def core(dur, bd=1, name=""):
    return DeviceTask(TaskKind.AI_CORE, dur, bd, name)


def test_tasks_on_one_stream_run_in_fifo_order_back_to_back():
    env, rec, dev = make()
    s = dev.create_stream()
    tasks = [s.submit(core(d, 1, f"k{i}"), at=0.0) for i, d in enumerate([5.0, 1.0, 3.0])]
    env.run()
    assert [t.task_id for t in tasks] == [0, 1, 2]
    assert [(t.start, t.end) for t in tasks] == [(0.0, 5.0), (5.0, 6.0), (6.0, 9.0)]
    assert rec.records("device")["op"] == ["k0", "k1", "k2"]


def test_two_streams_overlap_when_units_allow():
    env, rec, dev = make()
    a, b = dev.create_stream(), dev.create_stream()
    ta = a.submit(core(10.0, 12), at=0.0)
    tb = b.submit(core(10.0, 12), at=0.0)
    env.run()
    assert ta.start == tb.start == 0.0
    assert env.now == 10.0


def test_two_streams_serialise_when_units_do_not_allow():
    env, rec, dev = make()
    a, b = dev.create_stream(), dev.create_stream()
    ta = a.submit(core(10.0, 16), at=0.0)
    tb = b.submit(core(10.0, 16), at=0.0)
    env.run()
    assert (ta.start, tb.start) == (0.0, 10.0)
    assert env.now == 20.0


def test_block_dim_above_core_count_takes_every_core():
    env, rec, dev = make()
    a, b = dev.create_stream(), dev.create_stream()
    big = a.submit(core(10.0, 48), at=0.0)
    small = b.submit(core(1.0, 1), at=0.0)
    env.run()
    assert big.units == 24
    assert small.start == 10.0  # not one core was left for it
    assert rec.records("device")["units"][0] == 24
    assert rec.records("device")["block_dim"][0] == 48


def test_ai_cpu_tasks_take_one_ai_cpu_each():
    env, rec, dev = make()  # 6 AI CPUs
    streams = [dev.create_stream() for _ in range(7)]
    tasks = [s.submit(DeviceTask(TaskKind.AI_CPU, 10.0), at=0.0) for s in streams]
    env.run()
    assert [t.start for t in tasks] == [0.0] * 6 + [10.0]
    assert all(t.units == 1 for t in tasks)


def test_vector_tasks_use_the_vector_pool_or_ai_cores_without_one():
    env, rec, dev = make()
    a, b = dev.create_stream(), dev.create_stream()
    a.submit(core(10.0, 24), at=0.0)
    v = b.submit(DeviceTask(TaskKind.AI_VECTOR, 10.0, 48), at=0.0)
    env.run()
    assert v.start == 0.0 and v.units == 48
    env, rec, dev = make("Ascend910A")
    a, b = dev.create_stream(), dev.create_stream()
    a.submit(core(10.0, 32), at=0.0)
    v = b.submit(DeviceTask(TaskKind.AI_VECTOR, 10.0, 8), at=0.0)
    env.run()
    assert v.start == 10.0
    assert rec.records("device")["unit_kind"] == ["aicore", "aicore"]


def test_memcpy_duration_and_copy_engine():
    env, rec, dev = make()
    a, b = dev.create_stream(), dev.create_stream()
    d = dev.cost.memcpy_time(1 << 20, "H2D")
    c1 = a.submit(DeviceTask(TaskKind.MEMCPY_H2D, d, nbytes=1 << 20), at=0.0)
    c2 = b.submit(DeviceTask(TaskKind.MEMCPY_D2H, d, nbytes=1 << 20), at=0.0)
    k = b.submit(core(1.0), at=0.0)
    env.run()
    assert c1.task_type == "MEMCPY_ASYNC"
    assert (c1.start, c1.end) == (0.0, d)
    assert c2.start == d  # one copy engine by default
    assert k.start == 2 * d


def test_task_does_not_start_before_its_submission_time():
    env, rec, dev = make()
    s = dev.create_stream()
    t1 = s.submit(core(2.0), at=0.0)
    t2 = s.submit(core(2.0), at=7.5)
    t3 = s.submit(core(2.0), at=8.0)
    env.run()
    assert (t1.start, t2.start, t3.start) == (0.0, 7.5, 9.5)
    assert t2.queued == 7.5


def test_earlier_arrival_from_another_thread_goes_first():
    env, rec, dev = make()
    s = dev.create_stream()
    late = s.submit(core(1.0, 1, "late"), at=50.0)
    early = s.submit(core(1.0, 1, "early"), at=20.0)
    env.run()
    assert early.start == 20.0 and late.start == 50.0
    assert rec.records("device")["op"] == ["early", "late"]


def test_submit_in_the_past_or_twice_is_an_error():
    env, rec, dev = make()
    s = dev.create_stream()
    env.run(until=5.0)
    with pytest.raises(InvalidArgumentError, match="at=1.0"):
        s.submit(core(1.0), at=1.0)
    t = s.submit(core(1.0), at=5.0)
    with pytest.raises(InvalidArgumentError, match="already submitted"):
        s.submit(t, at=6.0)


_SLOTS = DeviceTask.__slots__


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([TaskKind.AI_CORE, TaskKind.AI_VECTOR, TaskKind.AI_CPU]),
                          st.floats(0, 50), st.integers(1, 64), st.floats(0, 30), st.booleans()), max_size=12))
def test_submit_kernel_is_submit_of_a_trusted_task(launches):
    """`Stream.submit_kernel` makes and queues the very task `submit(DeviceTask.trusted(...))` does: every field
    equal at submission and after the run, the same records and end time; a time in the past is refused
    alike."""
    runs = []
    for direct in (True, False):
        env, rec, dev = make()
        streams = [dev.create_stream(), dev.create_stream()]
        tasks = []
        for i, (kind, dur, bd, at, other) in enumerate(launches):
            s = streams[other]
            args = (kind, dur, bd, f"k{i}", "AI_CORE", i)
            t = s.submit_kernel(at, *args) if direct else s.submit(DeviceTask.trusted(*args), at)
            tasks.append(t)
        queued = [[getattr(t, f) for f in _SLOTS] for t in tasks]
        env.run()
        runs.append((queued, [[getattr(t, f) for f in _SLOTS] for t in tasks], rec.rows("device"), env.now))
    assert repr(runs[0]) == repr(runs[1])  # nan fields compare as written
    env, rec, dev = make()
    s = dev.create_stream()
    env.run(until=5.0)
    with pytest.raises(InvalidArgumentError, match="at=1.0"):
        s.submit_kernel(1.0, TaskKind.AI_CORE, 1.0, 1, "k", "AI_CORE", 1)


def test_event_wait_delays_the_stream_exactly_until_the_record():
    env, rec, dev = make()
    a, b = dev.create_stream(), dev.create_stream()
    ev = dev.create_event("e")
    a.submit(core(13.25, 1), at=0.0)
    record = a.record_event(ev, at=0.0)
    wait = b.wait_event(ev, at=1.0)
    after = b.submit(core(1.0, 1), at=1.0)
    env.run()
    assert record.end == 13.25
    assert wait.start == 1.0 and wait.end == 13.25
    assert after.start == 13.25
    assert ev.query() and ev.time == 13.25


def test_wait_on_a_never_recorded_event_passes_and_waits_see_only_earlier_records():
    env, rec, dev = make()
    a, b = dev.create_stream(), dev.create_stream()
    ev = dev.create_event()
    w0 = b.wait_event(ev, at=0.0)  # nothing recorded yet: passes
    a.submit(core(10.0), at=0.0)
    a.record_event(ev, at=0.0)
    w1 = b.wait_event(ev, at=0.0)
    a.submit(core(10.0), at=0.0)
    a.record_event(ev, at=0.0)  # recorded after w1 was submitted: w1 does not wait for it
    env.run()
    assert w0.end == 0.0
    assert w1.end == 10.0


def test_event_synchronize():
    env, rec, dev = make()
    a = dev.create_stream()
    ev = dev.create_event()
    a.submit(core(4.0), at=0.0)
    a.record_event(ev, at=0.0)
    done = ev.synchronize()
    env.run()
    assert done.value == 4.0


def test_stream_synchronize_includes_future_submissions():
    env, rec, dev = make()
    s = dev.create_stream()
    s.submit(core(1.0), at=0.0)
    s.submit(core(1.0), at=100.0)
    sync = s.synchronize()
    fired = []
    sync.callbacks.append(lambda e: fired.append(env.now))
    env.run()
    assert fired == [101.0]
    assert sync.value == 101.0


def test_synchronize_on_an_idle_stream_fires_now_and_device_sync_waits_for_all():
    env, rec, dev = make()
    a, b = dev.create_stream(), dev.create_stream()
    assert a.synchronize().triggered
    a.submit(core(3.0), at=0.0)
    b.submit(core(8.0), at=2.0)
    done = dev.synchronize()
    env.run()
    assert done.value == 10.0 and dev.idle()


def test_callback_runs_at_start_and_on_done_at_end():
    env, rec, dev = make()
    s = dev.create_stream()
    seen = []
    s.submit(core(5.0), at=0.0)
    s.submit(DeviceTask(TaskKind.AI_CORE, 2.0, 1, callback=lambda t: seen.append(("start", env.now)),
                        on_done=lambda t: seen.append(("done", env.now))), at=0.0)
    s.submit(DeviceTask(TaskKind.HOST_FUNC, callback=lambda t: seen.append(("host", env.now))), at=0.0)
    env.run()
    assert seen == [("start", 5.0), ("done", 7.0), ("host", 7.0)]


def test_host_func_with_duration_occupies_the_stream():
    env, rec, dev = make()
    s = dev.create_stream()
    h = s.submit(DeviceTask(TaskKind.HOST_FUNC, 4.0), at=0.0)
    k = s.submit(core(1.0), at=0.0)
    env.run()
    assert (h.start, h.end, k.start) == (0.0, 4.0, 4.0)
    assert rec.records("device")["unit_kind"][0] == "none"


def test_stream_ids_and_limits():
    env, rec, dev = make(max_streams=2)
    assert [dev.create_stream().stream_id, dev.create_stream().stream_id] == [0, 1]
    with pytest.raises(InvalidArgumentError, match="2 streams"):
        dev.create_stream()
    assert dev.stream(1).stream_id == 1
    with pytest.raises(InvalidArgumentError, match="0..1"):
        dev.stream(7)


@pytest.mark.parametrize("bd", [0, -3])
def test_block_dim_must_be_positive(bd):
    with pytest.raises(InvalidArgumentError, match="block_dim"):
        DeviceTask(TaskKind.AI_CORE, 1.0, bd)


def test_bad_task_fields():
    with pytest.raises(InvalidArgumentError, match="duration"):
        DeviceTask(TaskKind.AI_CORE, -1.0)
    with pytest.raises(InvalidArgumentError, match="event"):
        DeviceTask(TaskKind.EVENT_WAIT)
    with pytest.raises(InvalidArgumentError, match="TaskKind"):
        DeviceTask("NOPE")
    with pytest.raises(InvalidArgumentError, match="duration"):
        DeviceTask(TaskKind.AI_CORE, "5")


def test_space_available_reflects_stream_depth():
    env, rec, dev = make(stream_depth=2)
    s = dev.create_stream()
    s.submit(core(5.0), at=0.0)
    s.submit(core(5.0), at=0.0)
    assert s.full
    ev = s.space_available()
    env.run()
    assert ev.value == 5.0


def _submit_workload(seed_tasks, **soc):
    """Three streams and one event, the tasks submitted: (env, recorder, streams)."""
    env, rec, dev = make(**soc)
    streams = [dev.create_stream() for _ in range(3)]
    ev = dev.create_event()
    for i, (si, kind, dur, bd, at) in enumerate(seed_tasks):
        s = streams[si]
        if kind == "rec":
            s.record_event(ev, at)
        elif kind == "wait":
            s.wait_event(ev, at)
        else:
            s.submit(DeviceTask(TaskKind[kind], dur, bd, f"op{i}", corr_id=i), at)
    return env, rec, streams


def _run_workload(seed_tasks):
    env, rec, _ = _submit_workload(seed_tasks)
    env.run()
    return rec.rows("device")


task_st = st.tuples(st.integers(0, 2), st.sampled_from(["AI_CORE", "AI_CPU", "MEMCPY_D2D", "rec", "wait"]),
                    st.floats(0.0, 20.0), st.integers(1, 64), st.floats(0.0, 50.0))


@settings(max_examples=40, deadline=None)
@given(st.lists(task_st, max_size=25))
def test_same_inputs_give_an_identical_trace_and_invariants_hold(tasks):
    tasks = sorted(tasks, key=lambda t: t[4])  # a single host submits in time order
    rows = _run_workload(tasks)
    assert rows == _run_workload(tasks)
    assert len(rows) == len(tasks)
    by_stream = {}
    for (_dev, stream, _uk, units, task_id, _op, _tt, _bd, queued, start, end, _c) in rows:
        assert queued <= start <= end
        by_stream.setdefault(stream, []).append((task_id, start, end))
    for recs in by_stream.values():
        recs.sort()
        for (_i, _s, e0), (_j, s1, _e) in zip(recs, recs[1:]):
            assert s1 >= e0  # one task at a time, in FIFO order


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(0.5, 10.0), st.integers(1, 30), st.floats(0, 30)),
                min_size=1, max_size=30))
def test_core_occupancy_never_exceeds_the_pool(tasks):
    env, rec, dev = make()
    streams = [dev.create_stream() for _ in range(4)]
    for si, dur, bd, at in sorted(tasks, key=lambda t: t[3]):
        streams[si].submit(core(dur, bd), at)
    env.run()
    cols = rec.records("device")
    points = sorted({*cols["start"], *cols["end"]})
    for p in points:
        used = sum(u for u, s, e in zip(cols["units"], cols["start"], cols["end"]) if s <= p < e)
        assert used <= 24
    assert dev.aicore.free == 24


@settings(max_examples=40, deadline=None)
@given(st.lists(task_st, max_size=25))
def test_a_stream_never_has_two_end_ticks_pending(tasks):
    """A stream reuses one end-tick object (`_end_tick`): that is sound only while at most one of its end ticks
    is in the event queue at any moment, whatever the contention, events and zero-length tasks."""
    from opsim.device.device import StreamTick
    env, rec, streams = _submit_workload(sorted(tasks, key=lambda t: t[4]), aicore_count=8)
    while env._queue:
        for s in streams:
            ends = [item for item in env._queue if type(item[3]) is StreamTick and item[3].callbacks is s._end_cbs]
            assert len(ends) <= (1 if s._current is not None else 0)
            assert all(item[3] is s._end_tick for item in ends)
        env.step()
    assert len(rec.rows("device")) == len(tasks)
