"""Calls that run phase 1 in full, replayed from templates, leave exactly what the framework leaves.

Random programs on one or two threads call AI Core ops under a small ACLNN_CACHE_LIMIT (0: every insertion
refused; 1: every insertion evicts) and AI CPU ops (task-cache hits, and with ACLNN_AICPU_CACHE_LIMIT=1
one-shot overflow tasks), and in between mutate what a template depends on (shapes, dtypes, a host array's
values, the deterministic level, profiling, GE_PROFILING_TO_STD_OUT, the stream, the thread's exec caches,
the AI CPU task caches, memory pressure). The run with the fast path and the reference run must give the
same records of every kind, end time, printed text and opbase state (TLS, exec-cache LRU order, AI CPU
tasks and their spaces, memory)."""
from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from program_steps import (F16, F32, SHARED_STEPS, all_records, count_calls, device_tensor, shared_step,
                           thread_state)

from opsim.acl import Scalar
from opsim.acl.tensor import IntArray
from opsim.opdev.aicpu.task_space import aclnn_aicpu_finalize
from opsim.opdev.op_exec_cache import reselect_static_kernel
from opsim.opdev.thread_local import current
from opsim.ops import aicpu_ops as cpu
from opsim.ops import elementwise as ew
from opsim.ops.fused import aclnn_add_rms_norm, aclnn_add_rms_norm_get_workspace_size
from opsim.ops.reduce import aclnn_reduce_sum, aclnn_reduce_sum_get_workspace_size
from opsim.ops.softmax import aclnn_softmax, aclnn_softmax_get_workspace_size
from opsim.runtime.host_thread import run_op
from opsim.runtime.simulation import Simulation

N_OPS = 8
_STEP = st.one_of(
    st.tuples(st.just("call"), st.integers(0, N_OPS - 1), st.integers(0, 1), st.integers(1, 4)),
    st.tuples(st.sampled_from(["dims", "reselect", "finalize", "ge", "stream", *SHARED_STEPS]),
              st.integers(0, N_OPS - 1), st.integers(0, 1), st.just(1)),
)
_PROGRAM = st.lists(_STEP, min_size=1, max_size=40)
_LIMITS = st.sampled_from([("0", None), ("1", None), ("0", "1")])  # ACLNN_CACHE_LIMIT, ACLNN_AICPU_CACHE_LIMIT


def _arg_sets(sim):
    """Per op: two argument tuples (the same objects every call) with device addresses."""

    def t(shape, dt=F32):
        return device_tensor(sim, shape, dt)

    ops = []
    for k in range(2):
        n = 64 * (k + 1)
        ops.append(((ew.aclnn_add_get_workspace_size, ew.aclnn_add, "aclnnAdd"),
                    (t([n, 32]), t([n, 32]), Scalar(1.0), t([n, 32]))))
        ops.append(((ew.aclnn_mul_get_workspace_size, ew.aclnn_mul, "aclnnMul"), (t([n]), t([n]), t([n]))))
        ops.append(((aclnn_softmax_get_workspace_size, aclnn_softmax, "aclnnSoftmax"),
                    (t([8, n], F16), 1, t([8, n], F16))))  # a workspace
        ops.append(((aclnn_reduce_sum_get_workspace_size, aclnn_reduce_sum, "aclnnReduceSum"),
                    (t([n, 16]), IntArray([1]), False, F32, t([n]))))
        ops.append(((aclnn_add_rms_norm_get_workspace_size, aclnn_add_rms_norm, "aclnnAddRmsNorm"),
                    (t([4, n], F16), t([4, n], F16), t([n], F16), 1e-6, t([4, n], F16), t([4, 1]),
                     t([4, n], F16))))
        ops.append(((cpu.aclnn_sigmoid_aicpu_get_workspace_size, cpu.aclnn_sigmoid_aicpu, "aclnnSigmoidAicpu"),
                    (t([n, 32], F32 if k else F16), t([n, 32], F32 if k else F16))))  # two AI CPU tasks
        ops.append(((cpu.aclnn_reduce_sum_aicpu_get_workspace_size, cpu.aclnn_reduce_sum_aicpu,
                     "aclnnReduceSumAicpu"), (t([n, 16]), IntArray([1]), False, t([n]))))  # a host input
        ops.append(((cpu.aclnn_roll_get_workspace_size, cpu.aclnn_roll, "aclnnRoll"),
                    (t([n, 8]), IntArray([1]), IntArray([0]), t([n, 8]))))  # a TF task, two host inputs
    return [ops[i::N_OPS] for i in range(N_OPS)]  # op index -> [argument set 0, argument set 1]


def _task_state(task, labels: dict):
    """A task's state; its tensors as (op, argument set, position) when they are arguments."""
    return (task.op_type, task.seed, task.key, task.is_visit, task.holder is None, task.released, task.launches,
            task.kernel_id, task.device_cache_offset, task.host_input_placement, task._shapes,
            [labels.get(id(x), "converted") for x in task.inputs], [labels.get(id(x)) for x in task.outputs],
            task.stream.stream_id if task.stream is not None else None)


def _run(programs, fast: bool, trace: bool, limits):
    exec_limit, aicpu_limit = limits
    env = {"ACLNN_CACHE_LIMIT": exec_limit}
    if aicpu_limit is not None:
        env["ACLNN_AICPU_CACHE_LIMIT"] = aicpu_limit
    printed: list = []
    sim = Simulation(trace=trace, fast_path=fast, env=env)
    p = sim.process
    p.stdout = printed.append
    table = _arg_sets(sim)
    streams = [[sim.device.create_stream(), sim.device.create_stream()] for _ in programs]
    hog: list = []

    def make(steps, own):
        def program(th):
            which = 0
            for kind, i, j, times in steps:
                (gws, run, api), args = table[i][j]
                if kind == "call":
                    for _ in range(times):
                        yield from run_op(th, gws, run, args, own[which], api)
                elif kind == "dims":
                    if api in ("aclnnReduceSum", "aclnnReduceSumAicpu", "aclnnRoll"):
                        args[1].values[0] = j
                elif kind == "reselect":
                    yield from th.call(lambda: reselect_static_kernel(current()))
                elif kind == "finalize":
                    yield from th.call(aclnn_aicpu_finalize)
                elif kind == "ge":
                    p.env["GE_PROFILING_TO_STD_OUT"] = str(j)
                elif kind == "stream":
                    which = j
                else:
                    yield from shared_step(sim, th, kind, j, args[0], own[which], hog)
        return program

    threads = [sim.add_thread(make(steps, streams[k]), f"t{k}") for k, steps in enumerate(programs)]
    end = sim.run()
    rec = sim.recorder
    records = all_records(rec)
    state = []
    for th in threads:
        ctx = th.ctx
        m = ctx.op_cache_manager
        state.append((*thread_state(th), ctx.impl_mode, ctx.cache_has_full, ctx.pool_index, ctx.executor is None,
                      ctx.op_cache_context is None, ctx.pending_overflow_task is None,
                      None if m is None else m.evictions))
    labels = {id(a): (i, j, k) for i, sets in enumerate(table) for j, (_, args) in enumerate(sets)
              for k, a in enumerate(args)}
    spaces = [(s.op_type, s.task_count, s.live_launchers, s.has_init, [_task_state(t, labels) for t in s.tasks()])
              for s in p.aicpu_spaces.values()]
    mem = sim.device.memory
    return (end, records, rec.tensor_infos, state, spaces, p.l2_sequence_counter, p.aicpu_timestamp_enabled,
            p.aicpu_timestamps, p.aicpu_print_index, printed, len(p.aicpu_registry), mem.in_use, mem.peak,
            sorted(mem._live))


@settings(max_examples=60, deadline=None)
@given(st.lists(_PROGRAM, min_size=1, max_size=2), st.booleans(), _LIMITS)
@example([[("call", 0, 0, 4), ("call", 5, 0, 4)]], True, ("0", None))  # a miss and an AI CPU hit, replayed
@example([[("call", 2, 0, 4)]], True, ("0", None))  # a workspace: malloc and stream-ordered free
@example([[("call", 5, 0, 3), ("stream", 0, 1, 1), ("call", 5, 0, 3), ("retype", 5, 0, 1), ("call", 5, 0, 3),
           ("finalize", 0, 0, 1), ("call", 5, 1, 3)]], True, ("0", "1"))  # new kernel id, one-shot, cleared
@example([[("call", 5, 0, 3), ("ge", 0, 1, 1), ("call", 5, 0, 2), ("ge", 0, 0, 1), ("call", 5, 0, 3)]], True,
         ("0", None))  # timestamps printed while GE_PROFILING_TO_STD_OUT is on
@example([[("call", 0, 0, 3), ("reselect", 0, 0, 1), ("call", 0, 0, 3), ("level", 0, 1, 1), ("call", 0, 0, 3),
           ("profile", 0, 1, 1), ("call", 0, 0, 2), ("profile", 0, 0, 1), ("call", 0, 0, 2)]], True, ("0", None))
@example([[("call", 5, 0, 4)], [("call", 5, 1, 4)]], True, ("0", None))  # two threads, one task each
@example([[("call", 5, 0, 2), ("call", 5, 1, 1), ("call", 5, 0, 2)]], True, ("0", None))  # a second task cached
@example([[("call", 7, 0, 3), ("dims", 7, 1, 1), ("call", 7, 0, 3), ("stream", 0, 1, 1), ("call", 7, 0, 2),
           ("call", 6, 0, 3)]], True, ("0", None))  # converted host inputs: a TF task, ReduceSum's axes
@example([[("call", 0, 0, 2), ("call", 1, 0, 2), ("call", 0, 0, 2)]], True, ("1", None))  # evictions
@example([[("call", 2, 0, 2), ("hog", 0, 0, 1), ("call", 2, 0, 2), ("hog", 0, 0, 1), ("call", 2, 0, 2)]], False,
         ("0", None))  # no room for the workspace: the framework records the failure
def test_replayed_full_calls_equal_the_framework_path(programs, trace, limits):
    assert _run(programs, True, trace, limits) == _run(programs, False, trace, limits)


def _counting_phase_1(monkeypatch) -> list:
    import opsim.ops._common as common
    return count_calls(monkeypatch, common, "l2_dfx_phase_1")


def test_repeated_misses_and_aicpu_hits_are_replayed_from_a_template(monkeypatch):
    """The shortcut is taken: from the second call of an argument set on (the first one whose state before
    and after match), phase 1 is not run, yet every call leaves its miss / hit record and device task."""
    phase_1 = _counting_phase_1(monkeypatch)
    sim = Simulation(fast_path=True, trace=True, env={"ACLNN_CACHE_LIMIT": "0"})
    table = _arg_sets(sim)
    stream = sim.device.create_stream()

    def program(th):
        for i in (0, 5):
            (gws, run, api), args = table[i][0]
            for _ in range(5):
                yield from run_op(th, gws, run, args, stream, api)

    sim.add_thread(program, "t")
    sim.run()
    # Add: its first call sets cacheHasFull (a refused insertion: not captured), the second is captured.
    # Sigmoid: its first call creates the AI CPU task (not captured), the second (a task-cache hit) is.
    assert phase_1[0] == 4
    cache = sim.recorder.records("cache")
    assert list(zip(cache["cache"], cache["kind"])) == [("exec", "miss")] * 5 + [("exec", "miss"), ("aicpu", "miss")] + [
        ("exec", "miss"), ("aicpu", "hit")] * 4
    assert len(sim.recorder.records("device")["op"]) == 10


def test_an_aicpu_input_converted_from_a_host_array_is_made_afresh(monkeypatch):
    """ReduceSumAicpu's axes become a new host tensor at every launch, replayed or not; changing the host
    array in place makes the next call run the framework again."""
    phase_1 = _counting_phase_1(monkeypatch)
    sim = Simulation(fast_path=True, env={"ACLNN_CACHE_LIMIT": "0"})
    (gws, run, api), args = _arg_sets(sim)[6][0]
    stream = sim.device.create_stream()
    seen: list = []

    def program(th):
        for k in range(6):
            if k == 4:
                args[1].values[0] = -1  # the same axis, other bytes
            status, _ = yield from run_op(th, gws, run, args, stream, api)
            assert status == 0
            (space,) = [s for s in sim.process.aicpu_spaces.values() if s.op_type == "ReduceSum"]
            (task,) = space.tasks()
            axes = task.inputs[1]
            seen.append((id(axes), axes, list(axes.numpy())))
        assert len({id(t) for t in th.call_templates.values()}) == 1  # one template (under its two keys)

    sim.add_thread(program, "t")
    sim.run()
    assert phase_1[0] == 3  # the task created, the first hit (captured), the call after the change
    assert len({i for i, _, _ in seen}) == 6
    assert [v for _, _, v in seen] == [[1]] * 6  # the normalised axes phase 1 allocates, converted
