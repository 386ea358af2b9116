"""DFX around DirectInvoke launches: DFX context capture/restore, dump order and naming, overflow detection only
on success and never under stream capture, and no profiling at the callback boundary (dfx-and-profiling.md)."""
from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pytest

from opsim.acl.dtypes import DataType
from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Scalar, Tensor, TensorList, host_tensor
from opsim.errors import InvalidArgumentError
from opsim.kernels.hashing import murmur_hash3_x64_h2
from opsim.opdev import dfx, rt
from opsim.opdev.dfx import l0_dfx
from opsim.opdev.direct_invoke import add_direct_invoke_task
from opsim.opdev.op_args import make_op_arg_context, op_input, op_output
from opsim.opdev.op_def import CoreType
from opsim.opdev.op_types import register_op_type
from opsim.opdev.process import ProcessContext
from opsim.opdev.profiling import (PROF_ACL_API_MASK, PROF_TASK_TIME_L1_MASK, PROF_TASK_TIME_L2_MASK, PROF_TASK_TIME_MASK,
                                   start_profiling)
from opsim.opdev.thread_local import A_CALL, A_SPAN, A_SYNC, OpLogInfo, current, set_current
from opsim.ops import _common as C
from opsim.trace.recorder import Recorder

ALL_TASK_PROFILING = PROF_ACL_API_MASK | PROF_TASK_TIME_MASK | PROF_TASK_TIME_L1_MASK | PROF_TASK_TIME_L2_MASK

S = AclnnStatus
OP = register_op_type("DfxDirectOp")
API = "aclnnDfxDirect"
WS = 0x2000_0000


def make_ctx(**switches):
    process = ProcessContext(recorder=Recorder(enabled=True), **switches)
    ctx = process.new_thread("t0")
    return process, ctx


@pytest.fixture
def world(request):
    switches = getattr(request, "param", {})
    process, ctx = make_ctx(**switches)
    prev = set_current(ctx)
    yield process, ctx
    set_current(prev)


class Producer:
    """Callbacks that log what the TLS DFX context and the dump list look like while they run."""

    def __init__(self, process, l0="DfxDirectL0", status=S.ACLNN_SUCCESS, sizes=(64,), write_output=None):
        self.process = process
        self.l0 = l0
        self.status = status
        self.sizes = list(sizes)
        self.write_output = write_output
        self.events: list = []
        self.destroyed = 0

    def prepare(self, args, request):
        request.sizes, request.count = self.sizes, len(self.sizes)
        return S.ACLNN_SUCCESS, object()

    def launch(self, state, args, stream):
        ctx = current()
        li = ctx.log_info
        self.events.append(("launch", li.l2_api_name, li.l0_name, li.l2_sequence_counter,
                            ctx.profiling_info_id.kernel_launcher_id, ctx.profiling_info_id.summary_item_id,
                            [d.kind for d in self.process.dumps]))
        if self.write_output is not None:
            args.outputs()[0].value.numpy()[...] = self.write_output
        rt.submit_kernel(ctx, stream, self.l0, "AI_VECTOR_CORE", 1, 1.0)
        return self.status

    def destroy(self, state):
        self.destroyed += 1


def run_api(producers, inputs, outputs, stream=None, api=API):
    """Phase 1 registering one DirectInvoke task per producer (each in its own L0 scope), then phase 2."""
    def build(ex):
        for p in producers:
            args = make_op_arg_context(op_input(*inputs), op_output(*outputs))
            with l0_dfx(p.l0, ex):
                status = add_direct_invoke_task(None, OP, p.prepare, p.launch, p.destroy, ex, args)
            if status != S.ACLNN_SUCCESS:
                return status
        return S.ACLNN_SUCCESS

    status, size, ex = C.l2_phase_1(api, tuple(inputs), tuple(outputs), lambda: S.ACLNN_SUCCESS, build)
    assert status == S.ACLNN_SUCCESS
    return ex, C.l2_phase_2(api, WS, size, ex, stream)


def host(values, dtype=DataType.DT_FLOAT):
    return host_tensor(np.asarray(values, dtype=np.float32), dtype)


# ---- the DFX context --------------------------------------------------------------------------------------

def test_dfx_context_captured_at_registration_and_restored_at_launch(world):
    process, ctx = world
    first, second = Producer(process, l0="FirstL0"), Producer(process, l0="SecondL0")
    seq = process.l2_sequence_counter
    ex, status = run_api([first, second], [Tensor([4])], [Tensor([4], address=0x100)])
    assert status == S.ACLNN_SUCCESS
    assert [e[1:4] for e in first.events + second.events] == [(API, "FirstL0", seq), (API, "SecondL0", seq)]
    assert [e[4:6] for e in first.events + second.events] == [(0, 0), (0, 0)]  # DirectInvoke ids stay 0


def test_l0_name_is_cleared_outside_the_scope_and_the_launcher_keeps_its_copy(world):
    process, ctx = world
    from opsim.opdev.executor import create_executor
    ex = create_executor(API).get()
    ctx.log_info = OpLogInfo(API, None, 3)
    ex.log_info = ctx.log_info.copy()
    p = Producer(process, l0="ScopedL0")
    with l0_dfx("ScopedL0", ex):
        add_direct_invoke_task(None, OP, p.prepare, p.launch, p.destroy, ex,
                               make_op_arg_context(op_input(Tensor([4])), op_output(Tensor([4]))))
    assert ctx.log_info.l0_name is None
    (launcher,) = ex.kernel_launch_obj_list
    assert (launcher.op_log_info.l2_api_name, launcher.op_log_info.l0_name) == (API, "ScopedL0")
    ctx.log_info.l0_name = "SomethingElse"
    launcher.restore_thread_local()
    assert ctx.log_info.l0_name == "ScopedL0"


# ---- dumps ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("world", [{"op_dump": True}], indirect=True)
@pytest.mark.parametrize("status", [S.ACLNN_SUCCESS, S.ACLNN_ERR_INNER])
def test_dumps_in_order_around_the_launch_even_on_failure(world, status):
    process, ctx = world
    p = Producer(process, status=status)
    x, y = Tensor([4, 2]), Tensor([4, 2], address=0x100)
    seq = process.l2_sequence_counter
    _, got = run_api([p], [x, None, TensorList([x, None])], [y])
    assert got == status
    assert p.events[0][-1] == ["input", "input"]  # L2 input dump, then the L0 input dump, before the launch
    kinds = [(d.kind, d.name, d.op_type) for d in process.dumps]
    assert kinds == [("input", f"{API}_{seq}_L2", API), ("input", f"{API}_{seq}_L0", "DfxDirectL0"),
                     ("output", f"{API}_{seq}_L0", "DfxDirectL0"), ("output", f"{API}_{seq}_L2", API)]
    l0_in = process.dumps[1]
    assert len(l0_in.tensors) == 2  # null tensors dropped, the list expanded
    d = l0_in.tensors[0]
    assert d["kind"] == "input" and d["address_type"] == "traditional" and d["size"] == 32
    assert d["dtype"] == "DT_FLOAT" and d["storage_dims"] == [4, 2] and d["origin_dims"] == [4, 2]


def test_no_dump_when_the_switch_is_off(world):
    process, ctx = world
    run_api([Producer(process)], [Tensor([4])], [Tensor([4], address=0x100)])
    assert process.dumps == []


def test_dump_files_use_the_op_type_and_opbase_dump_name(tmp_path):
    process, ctx = make_ctx(op_dump=True, numerics=True, dump_dir=str(tmp_path))
    prev = set_current(ctx)
    try:
        x = host([[1.0, 2.0], [3.0, 4.0]])
        y = host(np.zeros((2, 2)))
        p = Producer(process, write_output=np.array([[5.0, 6.0], [7.0, 8.0]], np.float32))
        seq = process.l2_sequence_counter
        run_api([p], [x], [y])
    finally:
        set_current(prev)
    l0_in, l0_out = process.dumps[1], process.dumps[2]
    name = f"{API}_{seq}_L0"
    assert [f.rsplit("/", 1)[1] for f in l0_in.files] == [f"DfxDirectL0.{name}.1.input.0.npy"]
    assert [f.rsplit("/", 1)[1] for f in l0_out.files] == [f"DfxDirectL0.{name}.2.output.0.npy"]
    np.testing.assert_array_equal(np.load(l0_in.files[0]), [[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(np.load(l0_out.files[0]), [[5.0, 6.0], [7.0, 8.0]])
    assert dfx.dump_file_name("Op", "aclnnX_0_L0", 5, "output", 1) == "Op.aclnnX_0_L0.5.output.1.npy"


# ---- overflow detection -------------------------------------------------------------------------------------

def _overflow_world(**extra):
    process, ctx = make_ctx(overflow_dump=True, numerics=True, **extra)
    return process, ctx


def test_overflow_detected_after_a_successful_launch(caplog):
    process, ctx = _overflow_world()
    prev = set_current(ctx)
    try:
        x, y = host([1.0, 2.0]), host([0.0, 0.0])
        p = Producer(process, write_output=np.array([np.inf, 1.0], np.float32))
        stream = SimpleNamespace(capturing=False)
        with caplog.at_level(logging.WARNING, logger="opsim.opdev"):
            _, status = run_api([p], [x], [y], stream=stream)
        acts = ctx.take_actions()
    finally:
        set_current(prev)
    assert status == S.ACLNN_SUCCESS
    name = f"{API}_{process.l2_sequence_counter - 1}_L0"
    assert process.overflows == [(name, "DfxDirectL0")]
    (rec,) = process.dumps
    assert rec.kind == "overflow" and [t["kind"] for t in rec.tensors] == ["input", "output"]
    assert "overflow detected" in caplog.text
    spans = [a[1] for a in acts if a[0] == A_SPAN]
    assert spans.count("overflow check") == 1
    assert sum(1 for a in acts if a[0] == A_SYNC and a[1] is stream) == 2  # the check synchronises the stream
    for a in acts:  # the trace event is stamped when the host replay reaches it
        if a[0] == A_CALL:
            a[1](12.5)
    inst = process.recorder.records("instant")
    assert inst["name"] == ["overflow"] and inst["args"][0] == {"name": name, "op_type": "DfxDirectL0"}


def test_overflow_check_only_on_success():
    process, ctx = _overflow_world()
    prev = set_current(ctx)
    try:
        p = Producer(process, status=S.ACLNN_ERR_INNER, write_output=np.array([np.nan], np.float32))
        _, status = run_api([p], [host([1.0])], [host([0.0])], stream=SimpleNamespace())
        spans = [a[1] for a in ctx.take_actions() if a[0] == A_SPAN]
    finally:
        set_current(prev)
    assert status == S.ACLNN_ERR_INNER and "overflow check" not in spans and process.overflows == []


def test_capture_skips_the_overflow_check():
    process, ctx = _overflow_world()
    prev = set_current(ctx)
    stream = SimpleNamespace()
    try:
        dfx.begin_capture(stream)
        assert dfx.is_capturing(stream)
        p = Producer(process, write_output=np.array([np.inf], np.float32))
        _, status = run_api([p], [host([1.0])], [host([0.0])], stream=stream)
        spans = [a[1] for a in ctx.take_actions() if a[0] == A_SPAN]
        assert status == S.ACLNN_SUCCESS and "overflow check" not in spans and process.overflows == []
        dfx.end_capture(stream)
        assert not dfx.is_capturing(stream)
        _, status = run_api([Producer(process, write_output=np.array([np.inf], np.float32))],
                            [host([1.0])], [host([0.0])], stream=stream)
        spans = [a[1] for a in ctx.take_actions() if a[0] == A_SPAN]
        assert "overflow check" in spans and len(process.overflows) == 1
    finally:
        set_current(prev)


def test_overflow_switch_off_means_no_check(world):
    process, ctx = world
    run_api([Producer(process)], [Tensor([4])], [Tensor([4], address=0x100)], stream=SimpleNamespace())
    assert "overflow check" not in [a[1] for a in ctx.take_actions() if a[0] == A_SPAN]


def test_capture_helpers_need_a_stream():
    with pytest.raises(InvalidArgumentError, match="needs a stream"):
        dfx.begin_capture(None)
    with pytest.raises(InvalidArgumentError, match="needs a stream"):
        dfx.end_capture(None)


# ---- profiling ------------------------------------------------------------------------------------------------

def test_profiling_id_helpers_hash_the_strings():
    h = lambda s: int(murmur_hash3_x64_h2(s.encode()))  # noqa: E731
    assert dfx.kernel_launcher_id("Add") == h("Add") != 0
    assert dfx.kernel_launcher_id(None) == 0 and dfx.kernel_launcher_id("") == 0
    assert dfx.summary_item_id("aclnnAdd", "Add", "Add") == h("aclnnAdd_Add_Add")
    assert dfx.summary_item_id("aclnnAdd", "Add", with_op_type=False) == h("aclnnAdd_Add")
    assert dfx.summary_item_id(None, "Add", "Add") == 0 and dfx.summary_item_id("aclnnAdd", None, "Add") == 0
    li = OpLogInfo("aclnnAdd", "Add", 0)
    ids = dfx.launcher_profiling_ids(CoreType.AI_CORE, "Add", li)
    assert (ids.kernel_launcher_id, ids.summary_item_id) == (h("Add"), h("aclnnAdd_Add_Add"))
    dsa = dfx.launcher_profiling_ids(CoreType.AI_CORE, "DSARandomNormal", OpLogInfo("aclnnX", "Rand", 0), dsa=True)
    assert (dsa.kernel_launcher_id, dsa.summary_item_id) == (h("Rand"), h("aclnnX_Rand_Rand"))
    zero = dfx.launcher_profiling_ids(CoreType.DIRECT_INVOKE, "DfxDirectOp", li)
    assert (zero.tiling_profiling_id, zero.kernel_launcher_id, zero.summary_item_id) == (0, 0, 0)


@pytest.mark.parametrize("world", [{"profiling_switch": ALL_TASK_PROFILING}], indirect=True)
def test_no_profiling_reports_at_the_callback_boundary(world):
    """With profiling on, an AI Core launch reports; the DirectInvoke launch does not (only its L2 API's host-exec
    records appear), and its ids stay 0."""
    process, ctx = world
    from opsim.ops.elementwise import aclnn_add, aclnn_add_get_workspace_size
    a, b, out = Tensor([8]), Tensor([8], address=0x100), Tensor([8], address=0x200)
    status, size, ex = aclnn_add_get_workspace_size(a, b, Scalar(1.0), out)
    assert aclnn_add(WS, size, ex, None) == S.ACLNN_SUCCESS
    launches = [r for r in process.profiling_reports if r.kind == "kernel_launch"]
    assert [(r.op_type, r.l2_api_name, r.l0_name) for r in launches] == [("Add", "aclnnAdd", "Add")]
    assert launches[0].kernel_launcher_id == dfx.kernel_launcher_id("Add")
    before = [r for r in process.profiling_reports if r.kind != "host_exec"]
    p = Producer(process)
    ex, status = run_api([p], [Tensor([4])], [Tensor([4], address=0x300)])
    assert status == S.ACLNN_SUCCESS and len(p.events) == 1
    assert [r for r in process.profiling_reports if r.kind != "host_exec"] == before
    assert p.events[0][4:6] == (0, 0)


def test_profiling_guard_needs_the_switch_and_a_non_zero_id(world):
    process, ctx = world
    li = OpLogInfo("aclnnAdd", "Add", 0)
    ids = dfx.launcher_profiling_ids(CoreType.AI_CORE, "Add", li)
    assert not dfx.kernel_launch_guard(ctx, ids.summary_item_id, "Add", log_info=li)  # profiling off
    start_profiling(process, PROF_TASK_TIME_MASK)
    assert dfx.kernel_launch_guard(ctx, ids.summary_item_id, "Add", log_info=li)
    zero = dfx.launcher_profiling_ids(CoreType.DIRECT_INVOKE, "X", li)
    assert not dfx.kernel_launch_guard(ctx, zero.summary_item_id, "X", log_info=li)
    assert len(process.profiling_reports) == 1
