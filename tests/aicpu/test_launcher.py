"""AI CPU launchers and registration: codes, occupancy release timing, one-shot overflow launchers and
repeatability, kernel library and launch-API selection, host-input placement, the Init/Run host phases and the
DEPEND_SHAPE_RANGE output-shape refresh (aicpu-tasks.md §4, §8-§11; launchers.md §5)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from opsim.acl import Shape, Tensor, host_tensor
from opsim.acl.status import AclnnStatus
from opsim.opdev.aicpu import kernel_lib as kl
from opsim.opdev.aicpu.kernel_lib import CC, TF, AicpuKernel, register_aicpu_kernel
from opsim.opdev.aicpu.launcher import (AiCpuKernelLauncher, AiCpuOneShotKernelLauncher, add_to_launcher_list_aicpu,
                                        creat_aicpu_kernel_launcher)
from opsim.opdev.aicpu.task_space import get_task_space
from opsim.opdev.dfx import l0_dfx
from opsim.opdev.executor import (AclOpExecutor, common_op_executor_run, create_executor, destroy_executor,
                                  set_repeatable)
from opsim.opdev.op_args import make_op_arg_context, op_attr, op_input, op_output
from opsim.opdev.op_def import CoreType, RepeatMode, UnknowShapeOpType
from opsim.opdev.process import ProcessContext
from opsim.opdev.profiling import PROF_TASK_TIME_L1_MASK, PROF_TASK_TIME_MASK
from opsim.opdev.thread_local import A_SPAN, A_SYNC, current, set_current
from opsim.ops import _common as C

S = AclnnStatus
OP = "AicpuLauncherTestOp"
OP_TF = "AicpuLauncherTestTfOp"
OP_RANGE = "AicpuLauncherTestRangeOp"
register_aicpu_kernel(AicpuKernel(OP, CC))
register_aicpu_kernel(AicpuKernel(OP_TF, TF))
register_aicpu_kernel(AicpuKernel(OP_RANGE, CC, output_shapes=lambda ins, outs, attrs: [(5,)]))
WS = 0x100000


def new_process(**kw):
    p = ProcessContext(**kw)
    set_current(p.new_thread())
    return p


@pytest.fixture
def proc():
    p = ProcessContext()
    prev = set_current(p.new_thread())
    yield p
    set_current(prev)


def dev(*shape, dtype="float32"):
    return Tensor(list(shape), dtype)


def host(n_int64: int) -> Tensor:
    return host_tensor(np.arange(n_int64, dtype=np.int64))


def l2_prepare(op=OP, inputs=None, outputs=None, attrs=(np.int64(1),), names=("n",), unknown=None, is_tf=False):
    """Phase 1 of a one-op L2 API: (status, workspace size, executor)."""
    inputs = inputs if inputs is not None else (dev(2, 3),)
    outputs = outputs if outputs is not None else (dev(2, 3),)
    kind = UnknowShapeOpType.DEPEND_IN_SHAPE if unknown is None else unknown

    def build(ex):
        with l0_dfx(op, ex):
            space = get_task_space(op, kind, is_tf)
            return add_to_launcher_list_aicpu(op, space, ex, names, op_input(*inputs), op_output(*outputs),
                                              op_attr(*attrs))

    return C.l2_phase_1("aclnnTest" + op, tuple(inputs), tuple(outputs), lambda: S.ACLNN_SUCCESS, build)


def run(ex, size, stream=None):
    return C.l2_phase_2("aclnnTest" + OP, WS if size else 0, size, ex, stream)


def task_of(ex):
    return ex.kernel_launch_obj_list[0].task


# ---- registration ---------------------------------------------------------------------------------------

def test_null_args_is_param_invalid(proc):
    ex = AclOpExecutor()
    assert creat_aicpu_kernel_launcher(OP, get_task_space(OP), ex, ["n"], None) == S.ACLNN_ERR_PARAM_INVALID
    assert ex.kernel_launch_obj_list == []


def test_arg_context_failure_is_param_invalid(proc):
    proc.faults["op_args.make_context"] = lambda name: True
    ex = AclOpExecutor()
    status = add_to_launcher_list_aicpu(OP, get_task_space(OP), ex, ["n"], op_input(dev(2)), op_output(dev(2)))
    assert status == S.ACLNN_ERR_PARAM_INVALID and ex.kernel_launch_obj_list == []


def test_an_oversized_task_key_fails_registration_with_inner(proc):
    """aicpu_task.cpp CreatAicpuKernelLauncher: `CHECK_RET(task != nullptr, ACLNN_ERR_INNER)`. A key past 1024
    bytes gives no task (GetOrCreateTask's PARAM_INVALID is its own); the registration returns INNER, registers
    nothing and consumes the args."""
    ex = AclOpExecutor()
    ctx_args = make_op_arg_context(op_input(*[dev(2) for _ in range(508)]), op_output(dev(2)))
    status = creat_aicpu_kernel_launcher(OP, get_task_space(OP), ex, ["n"], ctx_args)
    assert status == S.ACLNN_ERR_INNER and ex.kernel_launch_obj_list == []
    assert ctx_args.destroyed


def test_unknown_op_fails_registration_with_inner(proc):
    status, size, ex = l2_prepare(op="NoSuchAicpuKernelAnywhere")
    assert status == S.ACLNN_ERR_INNER and ex is None


def test_cached_launcher_registration(proc):
    status, size, ex = l2_prepare()
    assert status == S.ACLNN_SUCCESS and size == 0
    launcher = ex.kernel_launch_obj_list[0]
    assert type(launcher) is AiCpuKernelLauncher and launcher.core_type == CoreType.AI_CPU
    assert launcher.profiling_info_id.kernel_launcher_id == 0 and launcher.task.holder is launcher
    assert ex.repeat_mode == RepeatMode.DEFAULT            # AbandonCache(): repeat still allowed
    assert ex.op_exec_cache is None or not ex.op_exec_cache.valid
    assert len(ex.graph.nodes) == 1
    assert run(ex, size) == S.ACLNN_SUCCESS


def test_launch_without_task_is_nullptr(proc):
    status, size, ex = l2_prepare()
    launcher = ex.kernel_launch_obj_list[0]
    launcher.task = None
    assert launcher.launch() == S.ACLNN_ERR_PARAM_NULLPTR
    one_shot = AiCpuOneShotKernelLauncher.__new__(AiCpuOneShotKernelLauncher)
    one_shot.task = None
    assert one_shot.launch() == S.ACLNN_ERR_PARAM_NULLPTR


# ---- occupancy release timing ----------------------------------------------------------------------------

def test_non_repeatable_releases_right_after_run(proc):
    status, size, ex = l2_prepare()
    task = task_of(ex)
    assert task.is_visit
    assert run(ex, size) == S.ACLNN_SUCCESS
    assert not task.is_visit and not ex.alive and get_task_space(OP).live_launchers == 0


def test_non_repeatable_releases_even_when_run_fails(proc):
    status, size, ex = l2_prepare()
    task = task_of(ex)
    proc.faults["rt.launch_kernel"] = lambda name: True
    assert run(ex, size) == S.ACLNN_ERR_RUNTIME_ERROR
    assert not task.is_visit


def nine_dims(t: Tensor) -> Tensor:
    """aclCreateTensor refuses more than 8 dims; internal code can still give a tensor a 9-D origin shape."""
    t.origin_shape = Shape([1] * 9)
    return t


def test_set_io_tensors_failure_leaves_the_task_busy(proc):
    big = nine_dims(dev(1))
    status, size, ex = l2_prepare(inputs=(big,))
    task = task_of(ex)
    assert run(ex, size) == S.ACLNN_ERR_INNER          # more than 8 dims in the ext info
    assert task.is_visit and not ex.alive
    status, size, ex2 = l2_prepare(inputs=(big,))
    assert task_of(ex2) is not task and get_task_space(OP).task_count == 2   # the stuck task still counts
    destroy_executor(ex2)


def test_output_over_8_dims_fails_at_launch(proc):
    status, size, ex = l2_prepare(outputs=(nine_dims(dev(2)),))
    assert status == S.ACLNN_SUCCESS and run(ex, size) == S.ACLNN_ERR_INNER


def test_repeatable_releases_only_in_the_destructor(proc):
    status, size, ex = l2_prepare()
    task = task_of(ex)
    assert set_repeatable(ex) == S.ACLNN_SUCCESS
    for _ in range(3):
        assert run(ex, size) == S.ACLNN_SUCCESS
        assert task.is_visit
    assert task.launches == 3
    assert destroy_executor(ex) == S.ACLNN_SUCCESS
    assert not task.is_visit and task.holder is None


def test_non_repeatable_destroyed_without_running_keeps_the_task_busy(proc):
    status, size, ex = l2_prepare()
    task = task_of(ex)
    destroy_executor(ex)
    assert task.is_visit


def test_two_executors_back_to_back_then_reuse_of_the_first(proc):
    _, s1, ex1 = l2_prepare()
    _, s2, ex2 = l2_prepare()
    t1, t2 = task_of(ex1), task_of(ex2)
    assert t1 is not t2 and t1.key == t2.key and get_task_space(OP).task_count == 2
    assert run(ex1, s1) == S.ACLNN_SUCCESS and run(ex2, s2) == S.ACLNN_SUCCESS
    _, s3, ex3 = l2_prepare()
    assert task_of(ex3) is t1
    assert run(ex3, s3) == S.ACLNN_SUCCESS


# ---- one-shot overflow tasks ------------------------------------------------------------------------------

def test_one_shot_when_the_space_is_full():
    p = new_process(env={"ACLNN_AICPU_CACHE_LIMIT": "1"})
    ctx = current()
    _, s1, ex1 = l2_prepare(attrs=(np.int64(1),))
    assert run(ex1, s1) == S.ACLNN_SUCCESS
    _, s2, ex2 = l2_prepare(attrs=(np.int64(2),))
    launcher = ex2.kernel_launch_obj_list[0]
    task = launcher.task
    space = get_task_space(OP)
    assert type(launcher) is AiCpuOneShotKernelLauncher and ctx.pending_overflow_task is None
    assert space.task_count == 1 and task not in space.tasks()
    assert ex2.repeat_mode == RepeatMode.UNREPEATABLE and not launcher.check_repeatable({}, set())
    assert set_repeatable(ex2) == S.ACLNN_ERR_INNER
    assert run(ex2, s2) == S.ACLNN_SUCCESS
    assert task.released and task.is_visit and launcher.task is None   # never released, freed with the launcher
    _, s3, ex3 = l2_prepare(attrs=(np.int64(2),))
    assert task_of(ex3) is not task and type(ex3.kernel_launch_obj_list[0]) is AiCpuOneShotKernelLauncher
    assert space.task_count == 1
    destroy_executor(ex3)
    assert p.aicpu_cache_limit == 1


def test_repeatable_check_uses_the_standard_checker(proc):
    status, size, ex = l2_prepare()
    launcher = ex.kernel_launch_obj_list[0]
    assert not launcher.check_repeatable({}, set())      # a user device tensor outside the L2 list
    assert ex.check_launcher_repeatable() is False
    st_ids = {id(t.storage) for t in current().l2_tensor_list}
    assert launcher.check_repeatable({}, st_ids)
    destroy_executor(ex)


# ---- kernel libraries and launch API ------------------------------------------------------------------------

def aicpu_ops():
    import opsim.ops.aicpu_ops as mod
    return mod


@pytest.mark.parametrize("op,so,new", [("IndexPut", kl.K_PT_KERNEL_SO, True), ("Pad", kl.K_DEFAULT_KERNEL_SO, False),
                                       ("Sigmoid", kl.K_DEFAULT_KERNEL_SO, False),
                                       ("ReduceSum", kl.K_DEFAULT_KERNEL_SO, False),
                                       ("NonZero", kl.K_DEFAULT_KERNEL_SO, True), (OP, kl.K_DEFAULT_KERNEL_SO, True)])
def test_cc_kernel_library_and_launch_api(proc, op, so, new):
    aicpu_ops()
    status, size, ex = l2_prepare(op=op)
    t = task_of(ex)
    assert (t.kernel_so, t.use_new_launch, t.is_custom, t.function_name) == (so, new, False, "RunCpuKernel")
    assert t.host_input_align == 4


@pytest.mark.parametrize("op,new", [("Roll", False), (OP_TF, True)])
def test_tf_launch_api(proc, op, new):
    aicpu_ops()
    status, size, ex = l2_prepare(op=op, is_tf=True)
    t = task_of(ex)
    assert t.framework == TF and t.use_new_launch is new and t.host_input_align == 64


def test_compatibility_lists_are_exact():
    assert kl.TF_COMPATIBLE_OPS == {"ResizeBilinear", "ResizeNearestNeighbor", "Roll", "Max", "Min", "Mean", "Prod",
                                    "Sum"}
    assert kl.AICPU_COMPATIBLE_OPS == {"CacheVerification", "AicpuPathwayVerification", "FaultInjection",
                                       "DataCompare", "VoltageRegulator", "Floor", "Pad", "ReduceSum", "Sigmoid"}


def test_soc_without_new_launch_api():
    new_process(soc_name="Ascend910_9691")
    aicpu_ops()
    _, _, ex = l2_prepare(op="IndexPut")
    assert task_of(ex).use_new_launch is False
    _, _, ex = l2_prepare(op=OP_TF, is_tf=True)
    assert task_of(ex).use_new_launch is False


def test_missing_soc_name_fails_init():
    new_process(soc_name="")
    status, _, _ = l2_prepare()
    assert status == S.ACLNN_ERR_INNER


@pytest.mark.parametrize("is_tf", [False, True])
def test_unset_opp_path_fails_init(is_tf):
    p = new_process(env={"ASCEND_OPP_PATH": ""})
    status, _, ex = l2_prepare(op=OP_TF if is_tf else OP, is_tf=is_tf)
    assert status == S.ACLNN_ERR_INNER and ex is None
    assert kl.opp_path(p) is None and kl.opp_path(ProcessContext()) == kl.DEFAULT_OPP_PATH


def test_descriptions_load_once_per_process(proc):
    for i in range(3):
        l2_prepare(attrs=(np.int64(i),))
        l2_prepare(op=OP_TF, is_tf=True, attrs=(np.int64(i),))
    phases = [a[1] for a in current().take_actions() if a[0] == A_SPAN]
    assert phases.count("load aicpu kernel json") == 1 and phases.count("load tf kernel json") == 1
    assert phases.count("get soc version") == 1
    assert phases.count("CreateTask") == phases.count("Init") == 6


def write_repo(root, name, entries, so_files=()):
    repo = root / name
    cfg = repo / "op_impl" / "cpu" / "config"
    cfg.mkdir(parents=True)
    (cfg / "cust_aicpu_kernel.json").write_text(entries if isinstance(entries, str) else json.dumps(entries))
    impl = repo / "op_impl" / "cpu" / "aicpu_kernel" / "impl"
    impl.mkdir(parents=True)
    for so in so_files:
        (impl / so).write_bytes(b"\x7fELF simulated")
    return str(repo)


def info(so, fn, **extra):
    return {"opInfo": {"kernelSo": so, "functionName": fn, "opKernelLib": "CUSTAICPUKernel", **extra}}


def test_custom_registry(tmp_path):
    r1 = write_repo(tmp_path, "vendor_a", {"CustOp": info("libcust_a.so", "RunA", userDefined="True")},
                    ["libcust_a.so"])
    r2 = write_repo(tmp_path, "vendor_b", {"CustOp": info("libcust_b.so", "RunB"),
                                           "CustNoSo": info("libmissing.so", "RunM")})
    r3 = write_repo(tmp_path, "custom_aicpu_ops", {"BlackOp": info("libcust_cpu_kernels.so", "RunX"),
                                                   "WhiteOp": info("libother.so", "RunW")}, ["libother.so"])
    r4 = write_repo(tmp_path, "vendor_bad", {"BadOp": info("libbad.so", "RunBad", userDefined="maybe")},
                    ["libbad.so"])
    r5 = write_repo(tmp_path, "vendor_broken", "{not json", ())
    p = new_process(env={"ASCEND_CUSTOM_OPP_PATH": ":".join([r1, "", r2, r3, r4, r5, str(tmp_path / "none")])},
                    soc_name="Ascend910_9691")
    status, _, ex = l2_prepare(op="CustOp")
    assert status == S.ACLNN_SUCCESS
    t = task_of(ex)
    assert (t.is_custom, t.kernel_so, t.function_name, t.use_new_launch) == (True, kl.K_CUSTOM_SO_NAME, "RunA", True)
    reg = kl.state_of(p).custom_ops
    assert sorted(reg) == ["CustNoSo", "CustOp", "WhiteOp"]      # first wins, blacklist, rejected files
    assert reg["CustOp"].register_path == r1
    assert l2_prepare(op="CustNoSo")[0] == S.ACLNN_ERR_INNER       # its kernel so cannot be read
    assert l2_prepare(op="BlackOp")[0] == S.ACLNN_ERR_INNER        # skipped: not described anywhere
    assert l2_prepare(op="WhiteOp")[0] == S.ACLNN_SUCCESS


def test_custom_json_rules():
    assert kl.parse_custom_json(json.dumps({"B": info("b.so", "f"), "A": info("a.so", "g")}))[0][0] == "A"
    assert kl.parse_custom_json(json.dumps({"A": {"opInfo": {"kernelSo": "a.so", "functionName": "f"}}})) is None
    assert kl.parse_custom_json(json.dumps({"A": info("a.so", "f", userDefined="FALSE")})) is not None
    assert kl.split_paths("::a::b:") == ["a", "b"]


# ---- host-input placement and the device region ------------------------------------------------------------

def test_host_inputs_inline_then_device_region(proc):
    status, size, ex = l2_prepare(inputs=(dev(2, 3), host(100), host(100)))
    assert size == ex.workspace_device_aicpu_mem == 1600
    offset = ex.workspace_device_aicpu_task_offset
    task = task_of(ex)
    assert run(ex, size) == S.ACLNN_SUCCESS
    assert task.host_input_placement == [(1, "inline", 0), (2, "device", offset)]


def test_placement_is_greedy(proc):
    status, size, ex = l2_prepare(inputs=(host(120), host(10)))
    task = task_of(ex)
    assert size == 1040 and run(ex, size) == S.ACLNN_SUCCESS
    assert task.host_input_placement == [(0, "inline", 0), (1, "device", 0)]


def test_guide_profile_region_can_overflow_at_launch():
    new_process(profile="aicpu-guide")
    status, size, ex = l2_prepare(inputs=(host(100), host(100)))
    assert size == 1600 - 1024
    assert run(ex, size) == S.ACLNN_ERR_PARAM_INVALID


def test_host_output_is_rejected_at_launch(proc):
    status, size, ex = l2_prepare(outputs=(host(6),))
    assert run(ex, size) == S.ACLNN_ERR_INNER


# ---- Init / Run sequences ----------------------------------------------------------------------------------

def phases_of(actions):
    return [a[1] for a in actions if a[0] == A_SPAN]


def test_phase_sequence_of_a_plain_op(proc):
    ctx = current()
    ctx.take_actions()
    status, size, ex = l2_prepare()
    p1 = phases_of(ctx.take_actions())
    i = p1.index("FindTask")
    assert p1[i:i + 3] == ["FindTask", "CreateTask", "Init"]
    run(ex, size)
    p2 = phases_of(ctx.take_actions())
    core = [p for p in p2 if p in ("UpdateShape", "ShapeH2D", "UpdateArgs", "Launch", "CopyShapeD2H",
                                   "UpdateOutputShape")]
    assert core == ["UpdateShape", "UpdateArgs", "Launch"]
    _, size, ex = l2_prepare()
    p3 = phases_of(ctx.take_actions())
    assert "FindTask" in p3 and "CreateTask" not in p3 and "Init" not in p3


def test_shape_range_op_syncs_and_refreshes_output_shapes(proc):
    ctx = current()
    out = dev(9)
    status, size, ex = l2_prepare(op=OP_RANGE, outputs=(out,), unknown=UnknowShapeOpType.DEPEND_SHAPE_RANGE)
    task = task_of(ex)
    assert size == task.device_ext_mem_size > 0
    ctx.take_actions()
    assert run(ex, size) == S.ACLNN_SUCCESS
    acts = ctx.take_actions()
    core = [p for p in phases_of(acts) if p in ("UpdateShape", "ShapeH2D", "UpdateArgs", "Launch", "stream sync",
                                                 "CopyShapeD2H", "UpdateOutputShape")]
    assert core == ["UpdateShape", "ShapeH2D", "UpdateArgs", "Launch", "stream sync", "CopyShapeD2H",
                    "UpdateOutputShape"]
    assert sum(a[0] == A_SYNC for a in acts) == 1
    assert tuple(out.view_shape) == tuple(out.storage_shape) == tuple(out.origin_shape) == (5,)


def test_shape_range_ext_info_must_fit_the_region(proc):
    status, size, ex = l2_prepare(op=OP_RANGE, outputs=(dev(9),), unknown=UnknowShapeOpType.DEPEND_SHAPE_RANGE)
    ex.workspace_device_aicpu_mem = 8
    assert run(ex, size) == S.ACLNN_ERR_INNER


def test_cc_task_gets_a_new_kernel_id_on_another_stream(proc):
    s1, s2 = object(), object()
    status, size, ex = l2_prepare()
    task = task_of(ex)
    assert set_repeatable(ex) == S.ACLNN_SUCCESS
    run(ex, size, s1)
    run(ex, size, s1)
    assert task.kernel_id == 0
    run(ex, size, s2)
    assert task.kernel_id == 1 and task.stream is s2
    destroy_executor(ex)


def test_reused_task_keeps_its_creators_attribution():
    p = new_process(profiling_switch=PROF_TASK_TIME_MASK | PROF_TASK_TIME_L1_MASK)
    status, size, ex = l2_prepare()
    task = task_of(ex)
    creator = task.summary_item_id
    assert task.summary_item == f"aclnnTest{OP}_{OP}_{OP}" and creator != 0
    run(ex, size)
    _, size, ex = l2_prepare()
    assert task_of(ex) is task
    run(ex, size)
    reports = [r for r in p.profiling_reports if r.op_type == OP and r.kind == "tensor_info"]
    assert len(reports) == 4 and {r.summary_item_id for r in reports} == {creator}  # inputs, outputs per run
    assert reports[0].kernel_launcher_id == task.launch_id != 0 and reports[0].task_type == "AI_CPU"


def test_executor_api_sequence_through_create_executor(proc):
    """The plain CREATE_EXECUTOR / ReleaseTo / CommonOpExecutorRun path (no L2 skeleton)."""
    unique = create_executor("aclnnRaw")
    args = make_op_arg_context(op_input(dev(4)), op_output(dev(4)), op_attr(np.int64(3)))
    assert creat_aicpu_kernel_launcher(OP, get_task_space(OP), unique.get(), ["n"], args) == S.ACLNN_SUCCESS
    size = unique.get().get_workspace_size()
    ex = unique.release_to()
    assert common_op_executor_run(0, size, ex, None) == S.ACLNN_SUCCESS


@pytest.mark.parametrize("op, fault", [(OP, "aicpu.load_json"), ("NoSuchAicpuKernelAnywhere", None)])
def test_failed_task_creation_consumes_the_args_once(proc, op, fault):
    """Every early return of CreatAicpuKernelLauncher destroys the args it was given (exactly once): a failed
    kernel-description load, an unknown kernel."""
    if fault is not None:
        proc.faults[fault] = lambda *a: True
    ex = AclOpExecutor()
    args = make_op_arg_context(op_input(dev(2)), op_output(dev(2)), op_attr(np.int64(1)))
    status = creat_aicpu_kernel_launcher(op, get_task_space(op), ex, ["n"], args)
    assert status != S.ACLNN_SUCCESS and ex.kernel_launch_obj_list == []
    assert args.destroy_count == 1
