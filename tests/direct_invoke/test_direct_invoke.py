"""AddDirectInvokeTask and DirectInvokeKernelLauncher: the reference unit-test table (direct-invoke.md §9) and
every step of the validation order (§3-§5), each with its status and exact prepare/launch/destroy counts."""
from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pytest

from opsim.acl.dtypes import DataType
from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Scalar, Tensor, TensorList
from opsim.errors import InvalidArgumentError
from opsim.opdev import rt
from opsim.opdev.dfx import l0_dfx
from opsim.opdev.direct_invoke import (INT64_MAX, DirectInvokeKernelLauncher, DirectInvokeWorkspaceRequest,
                                       add_direct_invoke_task)
from opsim.opdev.executor import create_executor, destroy_executor, set_repeatable, set_tensor_addr
from opsim.opdev.op_args import (NULL_TENSOR_LIST, OpArgDef, make_op_arg_context, op_attr, op_input, op_output,
                                 op_outshape, op_workspace)
from opsim.opdev.op_def import CoreType, RepeatMode
from opsim.opdev.op_exec_cache import l2_dfx_phase_1
from opsim.opdev.op_types import OP_TYPE_DICT, register_op_type
from opsim.opdev.process import ProcessContext
from opsim.opdev.thread_local import A_SPAN, A_SUBMIT, set_current
from opsim.ops import _common as C

S = AclnnStatus
OP = register_op_type("DirectInvokeTestOp")
UINT64_MAX = (1 << 64) - 1
WS_BASE = 0x2000_0000


# ---- fixtures and a producer with counting callbacks ----------------------------------------------

@pytest.fixture
def process():
    return ProcessContext()


@pytest.fixture
def ctx(process):
    c = process.new_thread("t0")
    prev = set_current(c)
    yield c
    set_current(prev)


class State:
    """A launch state that owns the workspace sizes it requested (the sizes must outlive prepare)."""

    def __init__(self, sizes):
        self.sizes = list(sizes) if sizes is not None else None


class Producer:
    """Callbacks with configurable outcomes that count every call."""

    def __init__(self, sizes=(), count=None, prepare_status=S.ACLNN_SUCCESS, stateful=True,
                 launch_status=S.ACLNN_SUCCESS, raise_in=(), launch_statuses=None, dispatches=1):
        self.sizes = sizes
        self.count = count
        self.prepare_status = prepare_status
        self.stateful = stateful
        self.launch_status = launch_status
        self.launch_statuses = list(launch_statuses) if launch_statuses is not None else None
        self.raise_in = set(raise_in)
        self.dispatches = dispatches
        self.prepare_calls = 0
        self.launch_calls = 0
        self.destroyed: list = []
        self.states: list = []
        self.prepare_workspace_counts: list[int] = []
        self.launches: list = []

    def prepare(self, args, request):
        self.prepare_calls += 1
        self.prepare_workspace_counts.append(args.get_op_arg(OpArgDef.OP_WORKSPACE_ARG).count)
        assert request.sizes is None and request.count == 0 and request.reserved == 0
        if "prepare" in self.raise_in:
            raise RuntimeError("prepare failed")
        state = State(self.sizes) if self.stateful else None
        if state is not None:
            self.states.append(state)
        if self.sizes is not None or self.count is not None:
            request.sizes = state.sizes if state is not None else (list(self.sizes) if self.sizes is not None else None)
            request.count = self.count if self.count is not None else len(self.sizes)
        return self.prepare_status, state

    def launch(self, state, args, stream):
        self.launch_calls += 1
        ws = [t for a in args.workspaces() if a.value is not None for t in a.value.tensors]
        ins = [a.value for a in args.inputs()]
        self.launches.append(SimpleNamespace(
            state=state, stream=stream, ws=ws, ws_addresses=[t.data_address for t in ws],
            in_addresses=[t.data_address if isinstance(t, Tensor) else None for t in ins]))
        if "launch" in self.raise_in:
            raise RuntimeError("launch failed")
        ctx = current_ctx()
        for i in range(self.dispatches):
            rt.submit_kernel(ctx, stream, f"DirectInvokeTestOp.{i}", "AI_VECTOR_CORE", 4, 10.0 + i)
        if self.launch_statuses:
            return self.launch_statuses.pop(0)
        return self.launch_status

    def destroy(self, state):
        assert state is not None
        self.destroyed.append(state)
        if "destroy" in self.raise_in:
            raise RuntimeError("destroy failed")

    @property
    def counts(self):
        return self.prepare_calls, self.launch_calls, len(self.destroyed)


def current_ctx():
    from opsim.opdev.thread_local import current
    return current()


def user(shape=(4, 8), dtype=DataType.DT_FLOAT, address=0x1000_0000):
    return Tensor(list(shape), dtype, address=address)


def register(producer, executor, *groups, op_type=OP):
    """The L0 side: an L0_DFX scope, an OpArgContext, AddDirectInvokeTask. Returns (status, args)."""
    args = make_op_arg_context(*groups)
    with l0_dfx("DirectInvokeTestOp", executor):
        status = add_direct_invoke_task("ignored", op_type, producer.prepare, producer.launch, producer.destroy,
                                        executor, args)
    return status, args


def phase1(producer, *groups, api="aclnnDirectInvokeTest", dfx_in=(), dfx_out=(), after=None):
    """A whole L2 phase 1 whose single L0 call registers the producer's task."""
    holder = {}

    def build(ex):
        status, holder["args"] = register(producer, ex, *groups)
        if status == S.ACLNN_SUCCESS and after is not None:
            return after(ex)
        return status

    status, size, ex = C.l2_phase_1(api, dfx_in, dfx_out, lambda: S.ACLNN_SUCCESS, build)
    return status, size, ex, holder.get("args")


def phase2(ex, workspace, size, stream, api="aclnnDirectInvokeTest"):
    return C.l2_phase_2(api, workspace, size, ex, stream)


def submitted(ctx):
    return [(a[1], a[2].op_name) for a in ctx.take_actions() if a[0] == A_SUBMIT]


# ---- happy path and launcher shape ---------------------------------------------------------------

def test_happy_path_one_4096_byte_workspace(ctx):
    p = Producer(sizes=[4096])
    x, y = user(), user(address=0x1100_0000)
    status, size, ex, args = phase1(p, op_input(x), op_output(y), dfx_in=(x,), dfx_out=(y,))
    assert status == S.ACLNN_SUCCESS and size == 4608  # Align(4096) = round_up(4096 + 32, 512)
    assert p.counts == (1, 0, 0) and p.prepare_workspace_counts == [0]
    stream = object()
    assert phase2(ex, WS_BASE, size, stream) == S.ACLNN_SUCCESS
    assert p.counts == (1, 1, 1) and not ex.alive and args.destroy_count == 1
    seen = p.launches[0]
    assert seen.stream is stream and seen.state is p.states[0] and p.destroyed == [p.states[0]]
    assert WS_BASE <= seen.ws_addresses[0] and seen.ws_addresses[0] + 4096 <= WS_BASE + size


def test_launcher_shape_and_dfx_context(ctx):
    p = Producer(sizes=[64])
    ex = create_executor("t").get()
    ctx.log_info.l2_api_name, ctx.log_info.l2_sequence_counter = "aclnnOuter", 7
    ex.log_info = ctx.log_info.copy()
    status, _ = register(p, ex, op_input(user()), op_output(user()))
    assert status == S.ACLNN_SUCCESS
    (launcher,) = ex.kernel_launch_obj_list
    assert isinstance(launcher, DirectInvokeKernelLauncher) and launcher.core_type == CoreType.DIRECT_INVOKE == 4
    assert launcher.get_bin() is None and launcher.op_type == OP
    info = launcher.op_log_info
    assert (info.l2_api_name, info.l0_name, info.l2_sequence_counter) == ("aclnnOuter", "DirectInvokeTestOp", 7)
    assert len(ex.graph.nodes) == 1 and ctx.log_info.l0_name is None


def test_launch_submits_two_dispatches_on_the_callers_stream_in_order(ctx):
    p = Producer(sizes=[128], dispatches=2)
    status, size, ex, _ = phase1(p, op_input(user()), op_output(user()))
    ctx.take_actions()
    stream = object()
    assert phase2(ex, WS_BASE, size, stream) == S.ACLNN_SUCCESS
    assert submitted(ctx) == [(stream, "DirectInvokeTestOp.0"), (stream, "DirectInvokeTestOp.1")]


def test_host_costs_are_charged_by_phase(ctx):
    p = Producer(sizes=[128])
    status, size, ex, _ = phase1(p, op_input(user()), op_output(user()))
    ph1 = [a[1] for a in ctx.take_actions() if a[0] == A_SPAN]
    assert ph1.count("prepare") == 1 and "alloc tensor" in ph1 and "build graph" in ph1
    assert ph1.index("prepare") < ph1.index("alloc tensor") < ph1.index("build graph")
    phase2(ex, WS_BASE, size, None)
    ph2 = [a[1] for a in ctx.take_actions() if a[0] == A_SPAN]
    assert ph2.count("direct invoke launch") == 1 and ph2.count("destroy") == 1
    assert ph2.index("direct invoke launch") < ph2.index("destroy")


def test_stateless_callbacks_never_destroy(ctx):
    p = Producer(sizes=None, stateful=False)
    status, size, ex, args = phase1(p, op_input(user()), op_output(user()))
    assert status == S.ACLNN_SUCCESS and size == 0
    assert phase2(ex, 0, 0, None) == S.ACLNN_SUCCESS
    assert p.counts == (1, 1, 0) and p.launches[0].state is None and args.destroy_count == 1


# ---- step 1: null pointers -------------------------------------------------------------------------

@pytest.mark.parametrize("missing", ["prepare", "launch", "destroy", "executor"])
def test_step1_null_callback_or_executor(ctx, missing):
    p = Producer(sizes=[64])
    ex = create_executor("t").get()
    fns = {"prepare": p.prepare, "launch": p.launch, "destroy": p.destroy, "executor": ex}
    fns[missing] = None
    args = make_op_arg_context(op_input(user()), op_output(user()))
    status = add_direct_invoke_task(None, OP, fns["prepare"], fns["launch"], fns["destroy"], fns["executor"], args)
    assert status == S.ACLNN_ERR_PARAM_NULLPTR
    assert p.counts == (0, 0, 0) and args.destroy_count == 1 and not ex.kernel_launch_obj_list


def test_step1_null_args(ctx):
    p = Producer()
    ex = create_executor("t").get()
    assert add_direct_invoke_task(None, OP, p.prepare, p.launch, p.destroy, ex, None) == S.ACLNN_ERR_PARAM_NULLPTR
    assert p.counts == (0, 0, 0)


def test_non_callable_callback_or_op_type_raises_after_consuming_args(ctx):
    p = Producer()
    ex = create_executor("t").get()
    args = make_op_arg_context(op_output(user()))
    with pytest.raises(InvalidArgumentError, match="launch must be a callable"):
        add_direct_invoke_task(None, OP, p.prepare, 42, p.destroy, ex, args)
    assert args.destroy_count == 1
    args = make_op_arg_context(op_output(user()))
    with pytest.raises(InvalidArgumentError, match="register_op_type"):
        add_direct_invoke_task(None, "DirectInvokeTestOp", p.prepare, p.launch, p.destroy, ex, args)
    assert args.destroy_count == 1 and p.counts == (0, 0, 0)


# ---- step 2: op type and argument validation ---------------------------------------------------------

@pytest.mark.parametrize("op_type", [0, "size", "size+1"])
def test_step2_invalid_op_type(ctx, op_type):
    n = OP_TYPE_DICT.size()
    op_type = {"size": n, "size+1": n + 1}.get(op_type, op_type)
    p = Producer(sizes=[64])
    ex = create_executor("t").get()
    status, args = register(p, ex, op_input(user()), op_output(user()), op_type=op_type)
    assert status == S.ACLNN_ERR_PARAM_INVALID and p.counts == (0, 0, 0) and args.destroy_count == 1


def test_step2_highest_registered_op_type_is_valid(ctx):
    p = Producer(sizes=None)
    ex = create_executor("t").get()
    status, _ = register(p, ex, op_output(user()), op_type=OP_TYPE_DICT.size() - 1)
    assert status == S.ACLNN_SUCCESS


@pytest.mark.parametrize("entry", ["tensor", "list", "tensor_and_list"])
def test_step2_non_empty_entry_workspace(ctx, entry):
    p = Producer(sizes=[64])
    ex = create_executor("t").get()
    w = ex.alloc_tensor([64], DataType.DT_UINT8)
    group = {"tensor": op_workspace(w), "list": op_workspace(ex.alloc_tensor_list([w])),
             "tensor_and_list": op_workspace(w, TensorList([w]))}[entry]
    status, args = register(p, ex, op_input(user()), op_output(user()), group)
    assert status == S.ACLNN_ERR_PARAM_INVALID and p.counts == (0, 0, 0) and args.destroy_count == 1


def test_step2_empty_workspace_group_is_fine(ctx):
    p = Producer(sizes=[64])
    ex = create_executor("t").get()
    status, args = register(p, ex, op_input(user()), op_output(user()), op_workspace())
    assert status == S.ACLNN_SUCCESS and p.prepare_workspace_counts == [0]
    assert [len(a.value) for a in args.workspaces()] == [1]


@pytest.mark.parametrize("outputs", [
    (None,), (TensorList([user(), None]),), (NULL_TENSOR_LIST,), (Scalar(1.0),), (np.int64(3),)],
    ids=["null_tensor", "list_with_null", "null_list", "scalar", "int"])
def test_step2_invalid_outputs(ctx, outputs):
    p = Producer(sizes=[64])
    ex = create_executor("t").get()
    status, args = register(p, ex, op_input(user()), op_output(*outputs))
    assert status == S.ACLNN_ERR_PARAM_INVALID and p.counts == (0, 0, 0) and args.destroy_count == 1


@pytest.mark.parametrize("inputs", [(NULL_TENSOR_LIST,), (Scalar(2.0),), (user(), 3)],
                         ids=["null_list", "scalar", "int"])
def test_step2_invalid_inputs(ctx, inputs):
    p = Producer(sizes=[64])
    ex = create_executor("t").get()
    status, args = register(p, ex, op_input(*inputs), op_output(user()))
    assert status == S.ACLNN_ERR_PARAM_INVALID and p.counts == (0, 0, 0) and args.destroy_count == 1


def test_step2_accepted_shapes_of_arguments(ctx):
    """Null optional input, a list with null elements as input, attributes of any tag, zero outputs, and a
    context with nothing at all are all valid."""
    ex = create_executor("t").get()
    cases = [
        (op_input(user(), None), op_output(user())),
        (op_input(TensorList([user(), None])), op_output(TensorList([user(), user()]))),
        (op_input(user()), op_output(user()), op_attr(1.5, "mode", True, Scalar(1.0), np.uint32(3))),
        (op_input(user()),),
        (),
    ]
    for groups in cases:
        p = Producer(sizes=None)
        status, _ = register(p, ex, *groups)
        assert status == S.ACLNN_SUCCESS, groups
        assert p.counts == (1, 0, 0)
    assert len(ex.kernel_launch_obj_list) == len(cases) == len(ex.graph.nodes)


def test_null_input_elements_are_in_the_graph_but_not_outputs(ctx):
    ex = create_executor("t").get()
    x = user()
    status, _ = register(Producer(sizes=None), ex, op_input(TensorList([x, None]), None), op_output(user()))
    assert status == S.ACLNN_SUCCESS
    assert [kt.tensor for kt in ex.graph.nodes[0].inputs] == [x, None]


# ---- step 3: prepare failures --------------------------------------------------------------------------

@pytest.mark.parametrize("status", [S.ACLNN_ERR_INNER, S.ACLNN_ERR_PARAM_INVALID, 12345])
@pytest.mark.parametrize("stateful", [True, False])
def test_step3_prepare_status_returned_verbatim(ctx, status, stateful):
    p = Producer(sizes=[64], prepare_status=status, stateful=stateful)
    ex = create_executor("t").get()
    got, args = register(p, ex, op_input(user()), op_output(user()))
    assert got == status and int(got) == int(status)
    assert p.counts == (1, 0, 1 if stateful else 0) and args.destroy_count == 1
    assert not ex.kernel_launch_obj_list and not ex.graph.nodes and not ex.allocated_tensor_list


def test_step3_raising_prepare_is_inner_without_destroy(ctx, caplog):
    p = Producer(sizes=[64], raise_in={"prepare"})
    ex = create_executor("t").get()
    with caplog.at_level(logging.ERROR, logger="opsim.opdev"):
        status, args = register(p, ex, op_input(user()), op_output(user()))
    assert status == S.ACLNN_ERR_INNER and p.counts == (1, 0, 0) and args.destroy_count == 1
    assert "prepare callback raised" in caplog.text and "RuntimeError: prepare failed" in caplog.text


@pytest.mark.parametrize("result,destroys", [(None, 0), (S.ACLNN_SUCCESS, 0), (("ok", "state"), 1)],
                         ids=["none", "bare_status", "non_code_status"])
def test_step3_malformed_prepare_result_is_inner(ctx, result, destroys):
    destroyed = []
    ex = create_executor("t").get()
    args = make_op_arg_context(op_output(user()))
    status = add_direct_invoke_task(None, OP, lambda a, r: result, lambda s, a, st: 0, destroyed.append, ex, args)
    assert status == S.ACLNN_ERR_INNER and len(destroyed) == destroys and args.destroy_count == 1


# ---- step 4: workspace requests ------------------------------------------------------------------------

@pytest.mark.parametrize("sizes,count", [([UINT64_MAX], None), ([1024, 0], None), (None, 1), ([0], None),
                                          ([INT64_MAX + 1], None), ([-1], None), ([64], 2), ([1.5], None)],
                         ids=["uint64_max", "1024_0", "null_sizes_count_1", "zero", "int64_max_plus_1", "negative",
                              "count_beyond_sizes", "float"])
def test_step4_invalid_requests(ctx, sizes, count):
    p = Producer(sizes=sizes, count=count)
    ex = create_executor("t").get()
    status, args = register(p, ex, op_input(user()), op_output(user()))
    assert status == S.ACLNN_ERR_PARAM_INVALID
    assert p.counts == (1, 0, 1) and args.destroy_count == 1
    assert not ex.kernel_launch_obj_list and not ex.graph.nodes


def test_step4_tensors_allocated_before_a_bad_size_stay_with_the_executor(ctx):
    p = Producer(sizes=[1024, 0])
    ex = create_executor("t").get()
    register(p, ex, op_input(user()), op_output(user()))
    assert [list(t.storage_shape) for t in ex.allocated_tensor_list] == [[1024]]
    assert ex.get_workspace_size() == 0  # never planned: no graph node references it


def test_step4_int64_max_is_accepted(ctx):
    p = Producer(sizes=[INT64_MAX])
    ex = create_executor("t").get()
    status, args = register(p, ex, op_input(user()), op_output(user()))
    assert status == S.ACLNN_SUCCESS and p.counts == (1, 0, 0)
    (t,) = args.workspaces()[0].value.tensors
    assert list(t.storage_shape) == [INT64_MAX] and t.dtype == DataType.DT_UINT8


def test_step4_two_sizes_give_5120_bytes_and_a_two_tensor_list(ctx):
    p = Producer(sizes=[128, 4096])
    status, size, ex, args = phase1(p, op_input(user()), op_output(user()))
    assert status == S.ACLNN_SUCCESS and size == 5120 >= 128 + 4096
    phase2(ex, WS_BASE, size, None)
    seen = p.launches[0]
    assert len(seen.ws) == 2 and [list(t.storage_shape) for t in seen.ws] == [[128], [4096]]
    assert all(t.dtype == DataType.DT_UINT8 and t.is_from_workspace for t in seen.ws)
    assert seen.ws_addresses == [WS_BASE, WS_BASE + 512]  # one node's workspaces never share memory
    assert all(t.storage_address == WS_BASE for t in seen.ws)  # storage address = workspace base


def test_step4_zero_request_appends_nothing_and_destroys_at_executor_deletion(ctx):
    p = Producer(sizes=[999], count=0)  # sizes ignored when count is 0
    status, size, ex, args = phase1(p, op_input(user()), op_output(user()))
    assert status == S.ACLNN_SUCCESS and size == 0
    assert not args.contains_op_arg_type(OpArgDef.OP_WORKSPACE_ARG) and ex.graph.nodes[0].workspaces == []
    assert p.counts == (1, 0, 0)
    phase2(ex, 0, 0, None)
    assert p.counts == (1, 1, 1) and p.launches[0].ws == []


@pytest.mark.parametrize("point", ["executor.alloc_tensor", "executor.alloc_tensor_list"])
def test_step4_allocation_failure_is_inner(ctx, process, point):
    process.faults[point] = lambda *a: True
    p = Producer(sizes=[64, 128])
    ex = create_executor("t").get()
    status, args = register(p, ex, op_input(user()), op_output(user()))
    assert status == S.ACLNN_ERR_INNER and p.counts == (1, 0, 1) and args.destroy_count == 1
    assert not ex.kernel_launch_obj_list


def test_step4_second_allocation_failing(ctx, process):
    calls = []
    process.faults["executor.alloc_tensor"] = lambda shape: calls.append(shape) or len(calls) == 2
    p = Producer(sizes=[64, 128, 256])
    ex = create_executor("t").get()
    status, _ = register(p, ex, op_output(user()))
    assert status == S.ACLNN_ERR_INNER and p.counts == (1, 0, 1) and calls == [[64], [128]]


# ---- steps 5 and 6 ---------------------------------------------------------------------------------------

def test_step5_launcher_allocation_failure(ctx, process):
    process.faults["direct_invoke.new_launcher"] = lambda op_type: op_type == OP
    p = Producer(sizes=[64])
    ex = create_executor("t").get()
    status, args = register(p, ex, op_input(user()), op_output(user()))
    assert status == S.ACLNN_ERR_INNER and p.counts == (1, 0, 1) and args.destroy_count == 1
    assert not ex.kernel_launch_obj_list and not ex.graph.nodes


def test_step6_malformed_graph_lists_delete_the_launcher(ctx):
    """A list that claims entries without storage (here: corrupted by prepare) fails registration; the
    launcher's destructor destroys the state and consumes the args."""
    p = Producer(sizes=[64])
    inner_prepare = p.prepare

    def corrupting_prepare(args, request):
        result = inner_prepare(args, request)
        args._lists[OpArgDef.OP_INPUT_ARG][0] = None  # count stays 1, storage gone
        return result

    ex = create_executor("t").get()
    args = make_op_arg_context(op_input(user()), op_output(user()))
    status = add_direct_invoke_task(None, OP, corrupting_prepare, p.launch, p.destroy, ex, args)
    assert status == S.ACLNN_ERR_PARAM_INVALID and p.counts == (1, 0, 1) and args.destroy_count == 1
    assert not ex.kernel_launch_obj_list and not ex.graph.nodes


# ---- step 7: cache and repeat ----------------------------------------------------------------------------

def _executor_with_valid_cache(ctx):
    x, y = user(), user(address=0x1100_0000)
    l2_dfx_phase_1("aclnnDirectInvokeTest", (x,), (y,))
    ex = create_executor("aclnnDirectInvokeTest").get()
    assert ex.op_exec_cache is not None and ex.op_exec_cache.valid
    return ex, x, y


def test_step7_abandon_cache_only_on_success(ctx):
    ex, x, y = _executor_with_valid_cache(ctx)
    status, _ = register(Producer(sizes=[64], prepare_status=S.ACLNN_ERR_INNER), ex, op_input(x), op_output(y))
    assert status == S.ACLNN_ERR_INNER and ex.op_exec_cache.valid and ex.repeat_mode == RepeatMode.DEFAULT
    status, _ = register(Producer(sizes=[64]), ex, op_input(x), op_output(y))
    assert status == S.ACLNN_SUCCESS and not ex.op_exec_cache.valid and ex.repeat_mode == RepeatMode.DEFAULT


def test_step7_no_phase1_cache_hit_prepare_runs_per_executor(ctx):
    p = Producer(sizes=[64])
    x, y = user(), user(address=0x1100_0000)
    for _ in range(3):
        status, size, ex, _ = phase1(p, op_input(x), op_output(y), dfx_in=(x,), dfx_out=(y,))
        assert status == S.ACLNN_SUCCESS and ex.kind == "executor"
        assert phase2(ex, WS_BASE, size, None) == S.ACLNN_SUCCESS
    assert p.counts == (3, 3, 3) and len(set(map(id, p.states))) == 3


def test_repeat_three_runs_new_addresses_and_streams(ctx):
    p = Producer(sizes=[256], launch_statuses=[S.ACLNN_SUCCESS, S.ACLNN_SUCCESS, S.ACLNN_ERR_INNER])
    x, y = user(), user(address=0x1100_0000)
    status, size, ex, args = phase1(p, op_input(x), op_output(y), dfx_in=(x,), dfx_out=(y,))
    assert set_repeatable(ex) == S.ACLNN_SUCCESS and ex.is_repeatable()
    streams = [object(), object(), object()]
    results = []
    for i, stream in enumerate(streams):
        set_tensor_addr(ex, x, 0x3000_0000 + i * 0x1000)
        results.append(phase2(ex, WS_BASE + i * 0x10_0000, size, stream))
        assert ex.alive and p.counts == (1, i + 1, 0)
    assert results == [S.ACLNN_SUCCESS, S.ACLNN_SUCCESS, S.ACLNN_ERR_INNER]  # a later failure is returned
    assert [s.stream for s in p.launches] == streams
    assert all(s.state is p.states[0] for s in p.launches)
    assert [s.in_addresses[0] for s in p.launches] == [0x3000_0000, 0x3000_1000, 0x3000_2000]
    assert [s.ws_addresses[0] for s in p.launches] == [WS_BASE, WS_BASE + 0x10_0000, WS_BASE + 0x20_0000]
    assert args.destroy_count == 0
    assert destroy_executor(ex) == S.ACLNN_SUCCESS
    assert p.counts == (1, 3, 1) and p.destroyed == [p.states[0]] and args.destroy_count == 1


def test_repeat_never_replays_device_tasks(ctx):
    """Without OUTSHAPE the executor is repeatable but its cache is abandoned: every run calls launch."""
    p = Producer(sizes=[64], dispatches=2)
    x, y = user(), user(address=0x1100_0000)
    status, size, ex, _ = phase1(p, op_input(x), op_output(y), dfx_in=(x,), dfx_out=(y,))
    assert ex.op_exec_cache is None or not ex.op_exec_cache.valid
    set_repeatable(ex)
    ctx.take_actions()
    stream = object()
    for _ in range(2):
        phase2(ex, WS_BASE, size, stream)
    spans = [a[1] for a in ctx.take_actions() if a[0] == A_SPAN]
    assert "cache replay" not in spans and spans.count("direct invoke launch") == 2 and p.launch_calls == 2
    destroy_executor(ex)


def test_outshape_forbids_repeat(ctx):
    p = Producer(sizes=[64])
    shape_tensor = Tensor([9], DataType.DT_INT64, from_workspace=True)
    x, y = user(), user(address=0x1100_0000)
    status, size, ex, args = phase1(p, op_input(x), op_output(y), op_outshape(shape_tensor, 0),
                                    dfx_in=(x,), dfx_out=(y,))
    assert status == S.ACLNN_SUCCESS and ex.repeat_mode == RepeatMode.UNREPEATABLE
    assert shape_tensor in [kt.tensor for kt in ex.graph.nodes[0].workspaces]
    assert set_repeatable(ex) == S.ACLNN_ERR_INNER and not ex.is_repeatable()
    assert not ex.kernel_launch_obj_list[0].check_repeatable({}, set())
    assert phase2(ex, WS_BASE, size, None) == S.ACLNN_SUCCESS and p.counts == (1, 1, 1)


@pytest.mark.parametrize("pre_abandoned", [True, False])
def test_pre_abandoned_executor_stays_unrepeatable(ctx, pre_abandoned):
    p = Producer(sizes=[64])
    x, y = user(), user(address=0x1100_0000)

    holder = {}

    def build(ex):
        if pre_abandoned:
            ex.abandon_cache(True)
        status, holder["args"] = register(p, ex, op_input(x), op_output(y))
        return status

    status, size, ex = C.l2_phase_1("aclnnDirectInvokeTest", (x,), (y,), lambda: S.ACLNN_SUCCESS, build)
    assert status == S.ACLNN_SUCCESS
    expected = S.ACLNN_ERR_INNER if pre_abandoned else S.ACLNN_SUCCESS
    assert set_repeatable(ex) == expected and ex.is_repeatable() is (not pre_abandoned)
    destroy_executor(ex)
    assert p.counts == (1, 0, 1)


def test_check_launcher_repeatable_with_workspace_tensors_only(ctx):
    ex = create_executor("t").get()
    a = ex.alloc_tensor([4, 8], DataType.DT_FLOAT)
    b = ex.alloc_tensor([4, 8], DataType.DT_FLOAT)
    register(Producer(sizes=[64]), ex, op_input(a), op_output(b))
    assert ex.check_launcher_repeatable()
    register(Producer(sizes=[64]), ex, op_input(a), op_output(user()))
    assert not ex.check_launcher_repeatable()


def test_check_repeatable_false_without_args(ctx):
    ex = create_executor("t").get()
    launcher = DirectInvokeKernelLauncher(OP, ex, lambda *a: 0, lambda s: None, None, None)
    assert launcher.check_repeatable({}, set()) is False
    assert launcher.launch() == S.ACLNN_ERR_INNER


# ---- phase 2 failures and lifetimes -----------------------------------------------------------------------

@pytest.mark.parametrize("status", [S.ACLNN_ERR_INNER, S.ACLNN_ERR_RUNTIME_ERROR, 777])
def test_launch_failure_is_the_run_status(ctx, status):
    p = Producer(sizes=[64], launch_status=status)
    _, size, ex, args = phase1(p, op_input(user()), op_output(user()))
    assert phase2(ex, WS_BASE, size, None) == status
    assert p.counts == (1, 1, 1) and not ex.alive and args.destroy_count == 1


@pytest.mark.parametrize("result", ["raise", None, "ok"])
def test_raising_or_malformed_launch_is_inner(ctx, caplog, result):
    p = Producer(sizes=[64], raise_in={"launch"} if result == "raise" else ())
    if result != "raise":
        p.launch_status = result
    _, size, ex, _ = phase1(p, op_input(user()), op_output(user()))
    with caplog.at_level(logging.ERROR, logger="opsim.opdev"):
        assert phase2(ex, WS_BASE, size, None) == S.ACLNN_ERR_INNER
    assert p.counts == (1, 1, 1) and not ex.alive
    assert "launch callback" in caplog.text


def test_raising_destroy_counts_as_destroyed(ctx, caplog):
    p = Producer(sizes=[64], raise_in={"destroy"})
    _, size, ex, args = phase1(p, op_input(user()), op_output(user()))
    with caplog.at_level(logging.ERROR, logger="opsim.opdev"):
        assert phase2(ex, WS_BASE, size, None) == S.ACLNN_SUCCESS
    assert p.counts == (1, 1, 1) and args.destroy_count == 1 and "destroy callback raised" in caplog.text
    destroy_executor(ex)  # already deleted: nothing runs twice
    assert p.counts == (1, 1, 1)


def test_raising_destroy_on_registration_failure(ctx):
    p = Producer(sizes=[0], raise_in={"destroy"})
    ex = create_executor("t").get()
    status, args = register(p, ex, op_output(user()))
    assert status == S.ACLNN_ERR_PARAM_INVALID and p.counts == (1, 0, 1) and args.destroy_count == 1


def test_phase2_null_workspace_with_size_deletes_executor(ctx):
    p = Producer(sizes=[64])
    _, size, ex, args = phase1(p, op_input(user()), op_output(user()))
    assert size > 0
    assert phase2(ex, 0, size, None) == S.ACLNN_ERR_PARAM_NULLPTR
    assert p.counts == (1, 0, 1) and not ex.alive and args.destroy_count == 1


def test_phase2_null_workspace_deletes_even_a_repeatable_executor(ctx):
    p = Producer(sizes=[64])
    x, y = user(), user(address=0x1100_0000)
    _, size, ex, _ = phase1(p, op_input(x), op_output(y), dfx_in=(x,), dfx_out=(y,))
    assert set_repeatable(ex) == S.ACLNN_SUCCESS
    assert phase2(ex, 0, size, None) == S.ACLNN_ERR_PARAM_NULLPTR
    assert p.counts == (1, 0, 1) and not ex.alive


def test_executor_never_released_by_phase1_destroys_when_phase1_returns(ctx):
    p = Producer(sizes=[64])
    status, size, ex, args = phase1(p, op_input(user()), op_output(user()),
                                    after=lambda ex: S.ACLNN_ERR_PARAM_INVALID)
    assert status == S.ACLNN_ERR_PARAM_INVALID and ex is None
    assert p.counts == (1, 0, 1) and args.destroy_count == 1


def test_two_tasks_first_launch_fails_second_not_launched(ctx):
    first = Producer(sizes=[64], launch_status=S.ACLNN_ERR_INNER)
    second = Producer(sizes=[64])
    args_list = []

    def build(ex):
        for p in (first, second):
            status, args = register(p, ex, op_input(user()), op_output(user()))
            args_list.append(args)
            assert status == S.ACLNN_SUCCESS
        return S.ACLNN_SUCCESS

    status, size, ex = C.l2_phase_1("aclnnDirectInvokeTest", (), (), lambda: S.ACLNN_SUCCESS, build)
    assert phase2(ex, WS_BASE, size, None) == S.ACLNN_ERR_INNER
    assert first.counts == (1, 1, 1) and second.counts == (1, 0, 1)
    assert [a.destroy_count for a in args_list] == [1, 1]


def test_destroy_is_not_a_device_completion_notification(ctx):
    """destroy runs at the end of the non-repeatable run, right after the launch submitted its work, without
    any stream synchronisation in between."""
    p = Producer(sizes=[64])
    _, size, ex, _ = phase1(p, op_input(user()), op_output(user()))
    ctx.take_actions()
    phase2(ex, WS_BASE, size, object())
    kinds = [(a[0], a[1] if a[0] == A_SPAN else None) for a in ctx.take_actions()]
    submit_at = kinds.index((A_SUBMIT, None))
    destroy_at = kinds.index((A_SPAN, "destroy"))
    assert submit_at < destroy_at and all(k[0] in (A_SPAN, A_SUBMIT) for k in kinds)


def test_workspace_request_type():
    r = DirectInvokeWorkspaceRequest()
    assert (r.sizes, r.count, r.reserved) == (None, 0, 0)
