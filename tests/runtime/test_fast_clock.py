"""FastEnvironment.advance: spending host time in place gives the event order of a SimPy timeout, whatever else
is queued."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.opdev import rt
from opsim.opdev.thread_local import current
from opsim.runtime.simulation import Simulation

_STEP = st.tuples(st.sampled_from(["host", "kernel", "sync", "sleep"]), st.sampled_from([0.0, 0.5, 1.0, 2.5, 7.0]),
                  st.integers(0, 1))
_PROGRAM = st.lists(_STEP, min_size=1, max_size=25)


def _run(programs, fast: bool):
    """Threads that charge host time, launch kernels on shared streams, synchronise and sleep; returns every
    record the run leaves (host spans, device tasks) and the end time."""
    sim = Simulation(trace=True, fast_path=fast)
    streams = [sim.device.create_stream() for _ in range(2)]

    def host(us, stream, kernel):
        ctx = current()
        ctx.charge("launch", "Op", us=us)
        if kernel:
            rt.submit_kernel(ctx, streams[stream], "Op", "AI_CORE", 4, us + 1.0)

    def make(steps):
        def program(th):
            for kind, us, stream in steps:
                if kind == "sync":
                    yield from th.call(lambda s=stream: rt.synchronize_stream(current(), streams[s]))
                elif kind == "sleep":
                    yield from th.sleep(us)
                else:
                    yield from th.call(host, us, stream, kind == "kernel")
        return program

    for i, steps in enumerate(programs):
        sim.add_thread(make(steps), f"t{i}")
    end = sim.run()
    rec = sim.recorder
    return end, rec.records("host"), rec.records("device")


@settings(max_examples=40, deadline=None)
@given(st.lists(_PROGRAM, min_size=1, max_size=3))
def test_fast_path_keeps_the_event_order(programs):
    assert _run(programs, True) == _run(programs, False)


def _launching(fast: bool, launches: int):
    """A simulation with one thread launching `launches` 30 us kernels on one stream, back to back."""
    sim = Simulation(trace=True, fast_path=fast)
    stream = sim.device.create_stream()

    def launch():
        rt.submit_kernel(current(), stream, "Op", "AI_CORE", 1, 30.0)

    def program(th):
        for _ in range(launches):
            yield from th.call(launch)

    return sim, sim.add_thread(program, "t")


def _thread_resumes(fast: bool) -> int:
    """How many times SimPy resumes a thread whose kernels outlast its host time (50 launches)."""
    sim, th = _launching(fast, 50)
    env = sim.env
    resumes = [0]
    real_step = env.step

    def step():
        if env._queue and any(getattr(cb, "__self__", None) is th.proc for cb in env._queue[0][3].callbacks):
            resumes[0] += 1
        real_step()

    env.step = step
    sim.run()
    assert len(sim.recorder.records("device")["op"]) == 50
    return resumes[0]


def test_fast_path_runs_in_place_when_only_the_device_is_due():
    assert _thread_resumes(False) >= 50
    assert _thread_resumes(True) <= 2  # the start, and the end of the program


def _run_in_two_parts(fast: bool):
    sim, _ = _launching(fast, 20)
    first = sim.run(until=37.5)
    n_first = len(sim.recorder.records("device")["op"])
    return first, n_first, sim.run(), sim.recorder.records("host"), sim.recorder.records("device")


def test_run_until_stops_where_the_reference_path_stops():
    fast, ref = _run_in_two_parts(True), _run_in_two_parts(False)
    assert fast[0] == 37.5 and 0 < fast[1] < 20
    assert fast == ref
