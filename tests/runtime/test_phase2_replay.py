"""Phase-2 runs of repeatable executors replayed from templates leave exactly what the framework leaves.

Random programs on one or two threads build repeatable executors (DirectInvoke tasks with and without a
workspace and launch state, AI Core launches replayed from the executor's OpExecCache), run phase 2 on them
repeatedly, and in between mutate what a template depends on (a tensor's shape or dtype, the producer's
launch state, the workspace, a run through another operator's phase 2, the executor's life, profiling, the
deterministic level, injected launch faults, memory pressure); the run with
the fast path and the reference run must give the same statuses, records of every kind, end time and opbase
state (TLS, executors, memory)."""
from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from program_steps import F16, F32, SHARED_STEPS, all_records, count_calls, device_tensor, shared_step

from opsim.acl import Scalar
from opsim.errors import UseAfterDestroyError
from opsim.opdev.executor import destroy_executor, set_repeatable
from opsim.ops.elementwise import aclnn_add, aclnn_add_get_workspace_size
from opsim.ops.fused import (aclnn_add_rms_norm, aclnn_add_rms_norm_get_workspace_size, aclnn_fused_bias_relu,
                             aclnn_fused_bias_relu_get_workspace_size)
from opsim.runtime import acl_rt
from opsim.runtime.simulation import Simulation

_OPS = 3
_STEP = st.one_of(
    st.tuples(st.just("run"), st.integers(0, _OPS - 1), st.integers(0, 1), st.integers(1, 4)),
    st.tuples(st.sampled_from(["build", "destroy", "rebind", "plan", "cross", "fault", *SHARED_STEPS]),
              st.integers(0, _OPS - 1), st.integers(0, 1), st.just(1)),
)
_PROGRAM = st.lists(_STEP, min_size=1, max_size=30)


def _ops(sim):
    """Per op: phase 1, phase 2 and its arguments (the same objects every call) with device addresses."""

    def t(shape, dt=F16):
        return device_tensor(sim, shape, dt)

    return [
        (aclnn_add_rms_norm_get_workspace_size, aclnn_add_rms_norm,  # DirectInvoke: launch state, workspace
         (t([4, 64]), t([4, 64]), t([64]), 1e-6, t([4, 64]), t([4, 1], F32), t([4, 64]))),
        (aclnn_fused_bias_relu_get_workspace_size, aclnn_fused_bias_relu,  # DirectInvoke: cost from the shapes
         (t([8, 32]), t([32]), t([8, 32]))),
        (aclnn_add_get_workspace_size, aclnn_add,  # AI Core: later runs replay the executor's OpExecCache
         (t([16, 32], F32), t([16, 32], F32), Scalar(1.0), t([16, 32], F32))),
    ]


def _run(programs, fast: bool, trace: bool):
    sim = Simulation(trace=trace, fast_path=fast)
    ops = _ops(sim)
    streams = [sim.device.create_stream() for _ in programs]
    rec = sim.recorder
    hog: list = []
    outcomes: list = []
    executors: list = []

    def make(k, steps, stream):
        slots: dict[int, list] = {}  # op -> [executor, workspace, size]

        def release(th, i):
            ex, workspace, _ = slots.pop(i)
            if workspace:
                yield from th.call(acl_rt.free_async, workspace, stream)
            outcomes.append((k, "destroy", int((yield from th.call(destroy_executor, ex)))))

        def program(th):
            ctx = th.ctx
            for kind, i, j, times in steps:
                gws, run, args = ops[i]
                if kind == "build":
                    if i in slots:
                        yield from release(th, i)
                    status, size, ex = yield from th.call(gws, *args)
                    outcomes.append((k, "build", int(status), size))
                    if status != 0:
                        continue
                    executors.append(ex)
                    outcomes.append((k, "repeatable", int((yield from th.call(set_repeatable, ex)))))
                    workspace = 0
                    if size:
                        status, workspace = yield from th.call(acl_rt.malloc, size)
                        workspace = workspace if status == 0 else 0
                    slots[i] = [ex, workspace, size]
                elif kind == "run" and i in slots:
                    ex, workspace, size = slots[i]
                    for _ in range(times):
                        if j:  # the caller's correlation id (else the thread's current one stays)
                            ctx.current_corr = rec.next_corr()
                        try:
                            status = yield from th.call(run, workspace, size, ex, stream)
                        except UseAfterDestroyError:
                            status = "destroyed"
                        outcomes.append((k, "run", i, status if status == "destroyed" else int(status)))
                    ctx.current_corr = -1
                elif kind == "destroy" and i in slots:
                    if j:
                        yield from release(th, i)
                    else:  # destroyed, but phase 2 is still called with it
                        outcomes.append((k, "destroy", int((yield from th.call(destroy_executor, slots[i][0])))))
                elif kind == "plan" and i in slots:  # the producer changes its launch state between runs
                    for launcher in slots[i][0].kernel_launch_obj_list:
                        plan = getattr(launcher, "launch_state", None)
                        if plan is not None:
                            plan.add_reduce_us += 1.0
                elif kind == "cross" and i in slots:  # the executor run by another operator's phase 2 on
                    ex, _, size = slots[i]               # a workspace of its own
                    status, workspace = yield from th.call(acl_rt.malloc, max(size, 1))
                    workspace = workspace if status == 0 else 0
                    try:
                        status = yield from th.call(ops[(i + 1) % _OPS][1], workspace, size, ex, stream)
                    except UseAfterDestroyError:
                        status = "destroyed"
                    outcomes.append((k, "cross", i, status if status == "destroyed" else int(status)))
                    if workspace:
                        yield from th.call(acl_rt.free_async, workspace, stream)
                elif kind == "rebind" and i in slots:  # a new workspace (none when memory is exhausted)
                    slot = slots[i]
                    if slot[1]:
                        yield from th.call(acl_rt.free_async, slot[1], stream)
                    status, workspace = yield from th.call(acl_rt.malloc, max(slot[2], 1))
                    slot[1] = workspace if status == 0 else 0
                elif kind == "fault":  # a launch of the op's second kernel (or of Add) fails, or no fault
                    if j:
                        sim.process.faults["rt.launch_kernel"] = lambda name, *a: name in ("AddRmsNormNormalize",
                                                                                          "Add")
                    else:
                        sim.process.faults.pop("rt.launch_kernel", None)
                elif kind in SHARED_STEPS:
                    yield from shared_step(sim, th, kind, j, args[0], stream, hog)
        return program

    threads = [sim.add_thread(make(k, steps, streams[k]), f"t{k}") for k, steps in enumerate(programs)]
    end = sim.run()
    records = all_records(rec)
    state = [(th.calls, th.busy_us, th.ctx.log_info, th.ctx.config, th.ctx.profiling_info_id, th.ctx.current_op,
              th.ctx.executor, th.ctx.op_cache_context is None) for th in threads]
    ex_state = [(ex.alive, ex.runs, ex.repeat_mode, getattr(ex.stream, "stream_id", None), ex.workspace,
                 ex.workspace_size) for ex in executors]
    mem = sim.device.memory
    return (end, outcomes, records, rec.tensor_infos, state, ex_state, len(sim.process.profiling_reports),
            mem.in_use, mem.peak, sorted(mem._live))


@settings(max_examples=60, deadline=None)
@given(st.lists(_PROGRAM, min_size=1, max_size=2), st.booleans())
@example([[("build", 0, 0, 1), ("run", 0, 1, 4), ("rebind", 0, 0, 1), ("run", 0, 1, 2), ("retype", 0, 0, 1),
           ("run", 0, 0, 2), ("destroy", 0, 0, 1), ("run", 0, 1, 2)]], True)
@example([[("build", 1, 0, 1), ("run", 1, 1, 3), ("retype", 1, 0, 1), ("run", 1, 1, 3), ("build", 2, 0, 1),
           ("run", 2, 1, 4), ("fault", 0, 1, 1), ("run", 2, 1, 2), ("run", 1, 1, 1)],
          [("build", 0, 0, 1), ("profile", 0, 1, 1), ("run", 0, 1, 3), ("profile", 0, 0, 1), ("run", 0, 1, 3)]], True)
@example([[("build", 1, 0, 1), ("run", 1, 1, 3), ("retype", 1, 0, 1), ("run", 1, 1, 3)]], True)
@example([[("build", 2, 0, 1), ("run", 2, 1, 4), ("destroy", 2, 0, 1), ("run", 2, 1, 2)]], True)
@example([[("build", 0, 0, 1), ("run", 0, 1, 2), ("plan", 0, 0, 1), ("run", 0, 1, 2), ("rebind", 0, 0, 1),
           ("run", 0, 1, 2), ("cross", 0, 0, 1), ("run", 0, 1, 2)]], True)
@example([[("build", 0, 0, 1), ("run", 0, 1, 2), ("hog", 0, 0, 1), ("rebind", 0, 0, 1), ("run", 0, 1, 2)]], False)
def test_replayed_phase_2_runs_equal_the_framework_path(programs, trace):
    assert _run(programs, True, trace) == _run(programs, False, trace)


def _count_phase_2(monkeypatch, op: int, runs: int) -> tuple[int, Simulation]:
    """Build op `op`'s executor, make it repeatable and run phase 2 `runs` times; how often the framework's
    phase 2 ran."""
    import opsim.ops._common as common
    calls = count_calls(monkeypatch, common, "l2_phase_2")
    sim = Simulation(fast_path=True)
    gws, run, args = _ops(sim)[op]
    stream = sim.device.create_stream()

    def program(th):
        status, size, ex = yield from th.call(gws, *args)
        assert status == 0 and (yield from th.call(set_repeatable, ex)) == 0
        workspace = (yield from th.call(acl_rt.malloc, size))[1] if size else 0
        for _ in range(runs):
            th.ctx.current_corr = sim.recorder.next_corr()
            assert (yield from th.call(run, workspace, size, ex, stream)) == 0

    sim.add_thread(program, "t")
    sim.run()
    return calls[0], sim


def test_repeated_phase_2_runs_are_replayed_from_a_template(monkeypatch):
    """The shortcut is taken: after one framework run, the DirectInvoke runs replay (two kernels each)."""
    n, sim = _count_phase_2(monkeypatch, 0, 6)
    assert n == 1
    device = sim.recorder.records("device")
    assert device["op"] == ["AddRmsNormAddReduce", "AddRmsNormNormalize"] * 6
    assert len(set(device["corr"])) == 6


def test_repeated_cache_runs_are_replayed_from_a_template(monkeypatch):
    """An AI Core executor: its first run records the cache, the second replays it through the framework
    and is kept, the rest are replayed from the template."""
    n, sim = _count_phase_2(monkeypatch, 2, 5)
    assert n == 2
    assert len(sim.recorder.records("device")["op"]) == 5
