"""Executor-cache hits replayed from templates leave exactly what the framework's hit path leaves.

Random programs on one or two threads call ops with a few argument sets, and in between mutate what a
template depends on (a tensor's shape or dtype, a host array's values, the deterministic level, profiling,
the thread's caches, memory pressure); the run with the fast path and the reference run must give the same
records of every kind, the same end time and the same opbase state (TLS, cache LRU order, memory)."""
from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from program_steps import F16, F32, SHARED_STEPS, all_records, device_tensor, shared_step, thread_state

from opsim.acl import Scalar
from opsim.acl.tensor import IntArray
from opsim.opdev.op_exec_cache import reselect_static_kernel
from opsim.opdev.thread_local import current
from opsim.ops.elementwise import aclnn_add, aclnn_add_get_workspace_size, aclnn_mul, aclnn_mul_get_workspace_size
from opsim.ops.fused import aclnn_add_rms_norm, aclnn_add_rms_norm_get_workspace_size
from opsim.ops.matmul import aclnn_matmul, aclnn_matmul_get_workspace_size
from opsim.ops.reduce import aclnn_reduce_sum, aclnn_reduce_sum_get_workspace_size
from opsim.ops.softmax import aclnn_softmax, aclnn_softmax_get_workspace_size
from opsim.runtime.host_thread import run_op
from opsim.runtime.simulation import Simulation

_STEP = st.one_of(
    st.tuples(st.just("call"), st.integers(0, 5), st.integers(0, 1), st.integers(1, 4)),
    st.tuples(st.sampled_from(["dims", "reselect", *SHARED_STEPS]), st.integers(0, 5), st.integers(0, 1),
              st.just(1)),
)
_PROGRAM = st.lists(_STEP, min_size=1, max_size=40)


def _arg_sets(sim):
    """Per op: two argument tuples (the same objects every call) with device addresses."""

    def t(shape, dt=F32):
        return device_tensor(sim, shape, dt)

    ops = []
    for k in range(2):
        n = 64 * (k + 1)
        ops.append(((aclnn_add_get_workspace_size, aclnn_add, "aclnnAdd"),
                    (t([n, 32]), t([n, 32]), Scalar(1.0), t([n, 32]))))
        ops.append(((aclnn_mul_get_workspace_size, aclnn_mul, "aclnnMul"), (t([n]), t([n]), t([n]))))
        ops.append(((aclnn_softmax_get_workspace_size, aclnn_softmax, "aclnnSoftmax"), (t([8, n], F16), 1,
                                                                                          t([8, n], F16))))
        ops.append(((aclnn_reduce_sum_get_workspace_size, aclnn_reduce_sum, "aclnnReduceSum"),
                    (t([n, 16]), IntArray([1]), False, F32, t([n]))))
        ops.append(((aclnn_matmul_get_workspace_size, aclnn_matmul, "aclnnMatmul"),
                    (t([n, 32]), t([32, 16]), t([n, 16]))))
        ops.append(((aclnn_add_rms_norm_get_workspace_size, aclnn_add_rms_norm, "aclnnAddRmsNorm"),
                    (t([4, n], F16), t([4, n], F16), t([n], F16), 1e-6, t([4, n], F16), t([4, 1]),
                     t([4, n], F16))))
    return [ops[i::6] for i in range(6)]  # op index -> [argument set 0, argument set 1]


def _one_op(i: int):
    """A fast-path simulation, op `i`'s first argument set and a stream."""
    sim = Simulation(fast_path=True)
    op, args = _arg_sets(sim)[i][0]
    return sim, op, args, sim.device.create_stream()


def _run(programs, fast: bool, trace: bool):
    sim = Simulation(trace=trace, fast_path=fast)
    table = _arg_sets(sim)
    streams = [sim.device.create_stream() for _ in programs]
    hog: list = []

    def make(steps, stream):
        def program(th):
            for kind, i, j, times in steps:
                (gws, run, api), args = table[i][j]
                if kind == "call":
                    for _ in range(times):
                        yield from run_op(th, gws, run, args, stream, api)
                elif kind == "dims":
                    if api == "aclnnReduceSum":
                        args[1].values[0] = j
                elif kind == "reselect":
                    yield from th.call(lambda: reselect_static_kernel(current()))
                else:
                    yield from shared_step(sim, th, kind, j, args[0], stream, hog)
        return program

    threads = [sim.add_thread(make(steps, streams[k]), f"t{k}") for k, steps in enumerate(programs)]
    end = sim.run()
    rec = sim.recorder
    records = all_records(rec)
    state = [thread_state(th) for th in threads]
    mem = sim.device.memory
    return (end, records, rec.tensor_infos, state, sim.process.l2_sequence_counter, mem.in_use, mem.peak,
            sorted(mem._live))


@settings(max_examples=60, deadline=None)
@given(st.lists(_PROGRAM, min_size=1, max_size=2), st.booleans())
@example([[("call", 2, 0, 4)]], True)  # a workspace: malloc and stream-ordered free at the framework's times
@example([[("call", 0, 0, 3), ("call", 1, 0, 1), ("call", 0, 0, 2)], [("call", 0, 1, 4)]], True)  # LRU order
@example([[("profile", 0, 1, 1), ("call", 4, 0, 1), ("call", 0, 0, 1), ("profile", 0, 0, 1), ("call", 4, 0, 3),
            ("call", 0, 0, 3), ("call", 4, 0, 1)]], True)  # profiling ids recorded with the tasks
@example([[("call", 0, 0, 4), ("call", 1, 0, 3)] * 3, [("call", 0, 1, 4), ("call", 2, 0, 2)] * 3],
         True)  # hits recorded in one call, with their call span (the clock moved in place) and without (it waited)
@example([[("call", 3, 0, 3), ("dims", 3, 0, 1), ("call", 3, 0, 3), ("hog", 0, 0, 1), ("call", 2, 1, 4)]], False)
def test_replayed_hits_equal_the_framework_path(programs, trace):
    assert _run(programs, True, trace) == _run(programs, False, trace)


def test_repeated_hits_are_replayed_from_a_template():
    """The shortcut is taken: the second hit of an argument set replays (the framework's phase 1 is not run)."""
    import opsim.ops._common as common
    sim, (gws, run, api), args, stream = _one_op(0)
    phase_1 = [0]
    real = common.l2_dfx_phase_1

    def counting(*a, **k):
        phase_1[0] += 1
        return real(*a, **k)

    def program(th):
        for _ in range(5):
            yield from run_op(th, gws, run, args, stream, api)

    common.l2_dfx_phase_1 = counting
    try:
        sim.add_thread(program, "t")
        sim.run()
    finally:
        common.l2_dfx_phase_1 = real
    assert phase_1[0] == 2  # the miss, then the hit that the template is taken from
    cache = sim.recorder.records("cache")
    assert cache["kind"] == ["miss"] + ["hit"] * 4
    assert len(sim.recorder.records("device")["op"]) == 5


def test_a_host_array_changed_in_place_is_not_replayed():
    """The template keeps the bytes of a host array argument: changing them makes the next call a miss."""
    sim, (gws, run, api), args, stream = _one_op(3)

    def program(th):
        for k in range(4):
            if k == 3:
                args[1].values[0] = 0
            yield from run_op(th, gws, run, args, stream, api)

    sim.add_thread(program, "t")
    sim.run()
    assert sim.recorder.records("cache")["kind"] == ["miss", "hit", "hit", "miss"]
    assert np.array_equal(args[1].values, [0])


def test_a_fault_added_to_the_process_table_in_place_is_not_replayed():
    """A template keeps the process's (empty) fault table by value: a fault added to that very dict after
    the template was taken sends the next call through the framework, where it fails as the fault says."""
    from opsim.acl.status import AclnnStatus
    sim, (gws, run, api), args, stream = _one_op(0)
    statuses = []

    def program(th):
        for k in range(4):
            if k == 3:
                sim.process.faults["rt.launch_kernel"] = lambda name, *a: True
            status, _ = yield from run_op(th, gws, run, args, stream, api)
            statuses.append(int(status))

    sim.add_thread(program, "t")
    sim.run()
    assert statuses[:3] == [0, 0, 0] and statuses[3] != int(AclnnStatus.ACLNN_SUCCESS)
    assert len(sim.recorder.records("device")["op"]) == 3


def test_replayed_hits_record_in_one_call_with_their_call_span():
    """From the second replay of a template on, a hit's records are taken by one `Recorder.hit` call, with run_op's
    call span in the same row when the host clock moved in place; they read back as the reference run's."""
    from opsim.trace.recorder import Recorder
    calls = []
    real = Recorder.hit

    def counting(self, rows, start, hit_at, corr, call_end):
        calls.append(call_end)
        return real(self, rows, start, hit_at, corr, call_end)

    def run(fast):
        sim = Simulation(fast_path=fast)
        (gws, run_fn, api), args = _arg_sets(sim)[0][0]
        stream = sim.device.create_stream()

        def program(th):
            for _ in range(6):
                yield from run_op(th, gws, run_fn, args, stream, api)

        sim.add_thread(program, "t")
        sim.run()
        return all_records(sim.recorder), list(sim.recorder.tensor_infos)

    Recorder.hit = counting
    try:
        fast = run(True)
    finally:
        Recorder.hit = real
    assert calls == [True] * 3  # miss, hit (template taken), first replay (rows kept), then three in one call
    assert fast == run(False)


def test_settings_unchanged_reads_every_setting_and_switch():
    """The attribute-by-attribute check agrees with the captured settings on a change of each setting or switch."""
    from opsim.fastpath.hit_replay import PROCESS_SWITCHES, SETTINGS, captured_settings, process_settings, \
        settings_unchanged
    sim = Simulation(fast_path=True)
    p = sim.process
    captured = captured_settings(p)
    assert settings_unchanged(p, captured) and process_settings(p) == captured
    names = (*SETTINGS, *PROCESS_SWITCHES)
    assert len(captured) == len(names) == 15
    assert captured._fields == tuple(name.rpartition(".")[2] for name in names)
    for name in names:
        owner, attr = (p.profiling, name.split(".")[1]) if name.startswith("profiling.") else (p, name)
        before = getattr(owner, attr)
        if attr == "faults":
            before[attr] = lambda *a: False
        else:
            setattr(owner, attr, object() if attr == "cost" else 7)
        assert not settings_unchanged(p, captured) and process_settings(p) != captured, name
        if attr == "faults":
            before.clear()
        else:
            setattr(owner, attr, before)
        assert settings_unchanged(p, captured), name


def test_settings_are_compared_by_name_never_by_position():
    """settings_unchanged reads each captured setting by its field name (no `s[i]`), and a captured value changed
    under any one name is noticed."""
    import ast
    import inspect

    from opsim.fastpath.hit_replay import CapturedSettings, captured_settings, settings_unchanged
    tree = ast.parse(inspect.getsource(settings_unchanged))
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Subscript)]
    read = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            and n.value.id == "s"}
    assert read == set(CapturedSettings._fields)
    p = Simulation(fast_path=True).process
    captured = captured_settings(p)
    for name in CapturedSettings._fields:
        assert not settings_unchanged(p, captured._replace(**{name: object()})), name


def test_a_template_is_found_by_its_argument_tuple_and_by_equal_arguments_in_a_new_tuple():
    """The same argument tuple finds its template without reading the arguments; a new tuple of the very same
    objects finds it by their identities; the same tuple with another callee or stream does not."""
    from opsim.fastpath import hit_replay
    sim, (gws, run, api), args, stream = _one_op(0)
    found = []

    def program(th):
        for k in range(3):
            yield from run_op(th, gws, run, args, stream, api)
        found.append(hit_replay.lookup(th.hit_templates, th, gws, run, args, stream, api))
        found.append(hit_replay.lookup(th.hit_templates, th, gws, run, tuple(list(args)), stream, api))
        found.append(hit_replay.lookup(th.hit_templates, th, gws, run, args, None, api))
        found.append(hit_replay.lookup(th.hit_templates, th, aclnn_mul_get_workspace_size, run, args, stream, api))

    sim.add_thread(program, "t")
    sim.run()
    assert found[0] is not None and found[1] is found[0] and found[0].args is args
    assert found[2] is None and found[3] is None
