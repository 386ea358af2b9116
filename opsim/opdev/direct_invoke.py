"""DirectInvoke: AddDirectInvokeTask and DirectInvokeKernelLauncher (direct-invoke.md).

A producer attaches its own compute task to an executor through three callbacks: `prepare` (phase 1, once per
executor: choose an implementation, request workspace sizes, build a launch state), `launch` (phase 2, every
run: submit device work on the run's stream with the current addresses) and `destroy` (exactly once per
non-null state). opbase owns the workspace (one planned DT_UINT8 tensor per requested size), the graph node and
the lifetimes; the producer owns what it submits.

Python callbacks:

- ``prepare(args, request) -> (status, launch_state)``: fills ``request.sizes`` / ``request.count``; the request
  arrives as ``DirectInvokeWorkspaceRequest()`` (no sizes, count 0).
- ``launch(launch_state, args, stream) -> status``: submits device tasks with ``opsim.opdev.rt.submit_kernel``.
- ``destroy(launch_state) -> None``: never called with ``None``.

opbase requires callbacks not to throw. Here a callback that raises (or returns a value of the wrong shape) is
a failure reported as ACLNN_ERR_INNER with exactly the cleanup of a failing status, the exception logged and
never propagated: a raising prepare returned no state, so nothing is destroyed; a raising destroy still counts
as the state's one destruction.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from opsim.acl.dtypes import DataType
from opsim.acl.status import AclnnStatus
from opsim.errors import InvalidArgumentError
from opsim.opdev import dfx
from opsim.opdev.executor import launcher_repeatable_checker
from opsim.opdev.launchers import KernelLauncher
from opsim.opdev.op_args import OpArgContext, OpArgDef, OpArgList, OpArgType, destroy_op_arg_context
from opsim.opdev.op_def import CoreType
from opsim.opdev.op_types import OP_TYPE_DICT
from opsim.opdev.thread_local import ThreadLocalContext, current

log = logging.getLogger("opsim.opdev")
S = AclnnStatus

INT64_MAX = (1 << 63) - 1
UINT32_MAX = 0xFFFFFFFF

PrepareFn = Callable[[OpArgContext, "DirectInvokeWorkspaceRequest"], tuple[Any, Any]]
LaunchFn = Callable[[Any, OpArgContext, Any], Any]
DestroyFn = Callable[[Any], None]


@dataclass
class DirectInvokeWorkspaceRequest:
    """What prepare asks opbase to allocate: `count` byte sizes read from `sizes` (u64 each).

    opbase reads the sizes synchronously right after prepare returns and keeps no reference to them."""

    sizes: Sequence[int] | None = None
    count: int = 0
    reserved: int = 0


# ---- helpers -------------------------------------------------------------------------------------

def _as_status(value: Any) -> AclnnStatus | int | None:
    """A callback's status as an aclnnStatus (unknown codes stay plain ints, verbatim); None if not a code."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        return None
    code = int(value)
    try:
        return AclnnStatus(code)
    except ValueError:
        return code


def _require_callable(name: str, fn: Any, args: OpArgContext | None) -> None:
    if fn is not None and not callable(fn):
        destroy_op_arg_context(args)
        raise InvalidArgumentError(f"AddDirectInvokeTask: {name} must be a callable or None, got "
                                   f"{type(fn).__name__}")


def _destroy_state(ctx: ThreadLocalContext, destroy: DestroyFn, state: Any) -> None:
    """"Destroy state": call destroy(state) only for a non-null state; a raising destroy is logged."""
    if state is None:
        return
    ctx.charge("destroy")
    try:
        destroy(state)
    except Exception:
        log.exception("DirectInvoke destroy callback raised; the launch state counts as destroyed")


def _call_prepare(ctx: ThreadLocalContext, prepare: PrepareFn, args: OpArgContext,
                  request: DirectInvokeWorkspaceRequest) -> tuple[AclnnStatus | int, Any]:
    ctx.charge("prepare")
    try:
        result = prepare(args, request)
    except Exception:
        log.exception("DirectInvoke prepare callback raised; reported as ACLNN_ERR_INNER (no launch state)")
        return S.ACLNN_ERR_INNER, None
    if not isinstance(result, tuple) or len(result) != 2:
        log.error("DirectInvoke prepare must return (status, launch_state), got %r; reported as ACLNN_ERR_INNER",
                  result)
        return S.ACLNN_ERR_INNER, None
    status, state = result
    code = _as_status(status)
    if code is None:
        log.error("DirectInvoke prepare returned status %r, not an aclnnStatus code; reported as "
                  "ACLNN_ERR_INNER", status)
        return S.ACLNN_ERR_INNER, state
    return code, state


def _well_formed(lst: OpArgList) -> bool:
    """IsWellFormedArgList: count 0, or backing storage present."""
    return lst.count == 0 or lst.has_storage


def _valid_tensor(t: Any, optional: bool) -> bool:
    return optional if t is None else True


def _valid_tensor_list(lst: OpArgList, optional: bool) -> bool:
    """IsValidTensorList: tensors (null only if optional) or non-null tensor lists; any other tag is invalid."""
    if not _well_formed(lst):
        return False
    for a in lst.args:
        if a.type == OpArgType.OPARG_ACLTENSOR:
            if not _valid_tensor(a.value, optional):
                return False
        elif a.type == OpArgType.OPARG_ACLTENSOR_LIST:
            if a.value is None:
                return False
            if not all(_valid_tensor(t, optional) for t in a.value.tensors):
                return False
        else:
            return False
    return True


def is_valid_args(args: OpArgContext) -> bool:
    """§4: attributes well formed, inputs optional tensors / non-null lists, outputs present, no workspace."""
    attrs = args.get_op_arg(OpArgDef.OP_ATTR_ARG)
    inputs = args.get_op_arg(OpArgDef.OP_INPUT_ARG)
    outputs = args.get_op_arg(OpArgDef.OP_OUTPUT_ARG)
    workspaces = args.get_op_arg(OpArgDef.OP_WORKSPACE_ARG)
    return (_well_formed(attrs) and _valid_tensor_list(inputs, optional=True)
            and _valid_tensor_list(outputs, optional=False) and workspaces.count == 0)


def append_requested_workspaces(ctx: ThreadLocalContext, executor: Any, request: DirectInvokeWorkspaceRequest,
                                args: OpArgContext) -> AclnnStatus:
    """AppendRequestedWorkspaces (§5): one DT_UINT8 [size] executor tensor per size, appended as one list."""
    count = request.count
    if isinstance(count, (bool, np.bool_)) or not isinstance(count, (int, np.integer)) \
            or not 0 <= int(count) <= UINT32_MAX:
        log.error("DirectInvoke workspace request count %r is not a u32 (ACLNN_ERR_PARAM_INVALID)", count)
        return S.ACLNN_ERR_PARAM_INVALID
    count = int(count)
    if count == 0:
        return S.ACLNN_SUCCESS
    if request.sizes is None:
        log.error("DirectInvoke workspace request count is %d but sizes is null (ACLNN_ERR_PARAM_INVALID)", count)
        return S.ACLNN_ERR_PARAM_INVALID
    sizes = request.sizes
    tensors = []
    for index in range(count):
        if index >= len(sizes):
            log.error("DirectInvoke workspace request count %d exceeds the %d sizes given (ACLNN_ERR_PARAM_INVALID)",
                      count, len(sizes))
            return S.ACLNN_ERR_PARAM_INVALID
        size = sizes[index]
        if isinstance(size, (bool, np.bool_)) or not isinstance(size, (int, np.integer)) \
                or not 1 <= int(size) <= INT64_MAX:
            log.error("DirectInvoke workspace request contains an invalid size %r at index %d; sizes must be in "
                      "1..2^63-1 (ACLNN_ERR_PARAM_INVALID)", size, index)
            return S.ACLNN_ERR_PARAM_INVALID
        ctx.charge("alloc tensor")
        tensor = executor.alloc_tensor([int(size)], DataType.DT_UINT8)
        if tensor is None:
            log.error("failed to allocate a requested workspace of %d bytes (ACLNN_ERR_INNER)", int(size))
            return S.ACLNN_ERR_INNER
        tensors.append(tensor)
    workspace_list = executor.alloc_tensor_list(tensors)
    if workspace_list is None:
        log.error("failed to allocate the requested workspace list (ACLNN_ERR_INNER)")
        return S.ACLNN_ERR_INNER
    args.append_op_workspace_arg(workspace_list)
    return S.ACLNN_SUCCESS


# ---- the launcher --------------------------------------------------------------------------------

class DirectInvokeKernelLauncher(KernelLauncher):
    """Runs the producer's launch callback with opbase's DFX around it; destroys the state when deleted.

    Profiling ids stay zero (no reports at the callback boundary); the DFX context is the one captured at
    registration (the enclosing L2 / L0 scopes)."""

    core_type = CoreType.DIRECT_INVOKE

    def __init__(self, op_type: int, executor: Any, launch: LaunchFn, destroy: DestroyFn, launch_state: Any,
                 args: OpArgContext):
        super().__init__(op_type, executor, args)
        self.launch_fn = launch
        self.destroy_fn = destroy
        self.launch_state = launch_state

    def launch(self) -> AclnnStatus | int:
        if self.launch_fn is None or self.args is None or self.args.destroyed:
            log.error("DirectInvoke task launcher is not initialized (ACLNN_ERR_INNER)")
            return S.ACLNN_ERR_INNER
        ctx = self.restore_thread_local()
        stream = self.executor.stream
        dump = ctx.config.is_op_dump_enable
        if dump:
            dfx.l0_dump(ctx, self.op_log_info, self.args, inputs=True)
        ctx.charge("direct invoke launch")
        try:
            result = self.launch_fn(self.launch_state, self.args, stream)
        except Exception:
            log.exception("DirectInvoke launch callback of %s raised; reported as ACLNN_ERR_INNER", self)
            result = S.ACLNN_ERR_INNER
        ret = _as_status(result)
        if ret is None:
            log.error("DirectInvoke launch callback of %s returned %r, not an aclnnStatus code; reported as "
                      "ACLNN_ERR_INNER", self, result)
            ret = S.ACLNN_ERR_INNER
        if dump:
            dfx.l0_dump(ctx, self.op_log_info, self.args, inputs=False)
        dfx.after_launch_overflow_check(ctx, self.args, stream, self.op_log_info, ret == S.ACLNN_SUCCESS)
        return ret

    def check_repeatable(self, relation: dict, ori_storage: set) -> bool:
        """The standard checker over the argument storages (the launch state is address independent)."""
        if self.args is None:
            return False
        return launcher_repeatable_checker(self.args, relation, ori_storage)

    def destroy(self) -> None:
        """Destructor: destroy(launchState) if non-null, then consume the args."""
        if self.destroyed:
            return
        state, self.launch_state = self.launch_state, None
        _destroy_state(current(), self.destroy_fn, state)
        super().destroy()


def _register(ctx: ThreadLocalContext, executor: Any, launcher: DirectInvokeKernelLauncher,
              include_outshape: bool) -> AclnnStatus:
    """RegisterKernelLauncher: build the graph node, then append; on failure the launcher is deleted."""
    args = launcher.args
    inputs = args.get_op_arg(OpArgDef.OP_INPUT_ARG)
    outputs = args.get_op_arg(OpArgDef.OP_OUTPUT_ARG)
    workspaces = args.get_op_arg(OpArgDef.OP_WORKSPACE_ARG)
    outshapes = args.get_op_arg(OpArgDef.OP_OUTSHAPE_ARG)
    if not (_well_formed(inputs) and _well_formed(outputs) and _well_formed(workspaces)
            and (not include_outshape or _well_formed(outshapes))):
        log.error("DirectInvoke launcher graph arguments are malformed (ACLNN_ERR_PARAM_INVALID)")
        launcher.destroy()
        return S.ACLNN_ERR_PARAM_INVALID
    ctx.charge("build graph")
    status = executor.graph.build_graph_from_args(launcher.op_type, inputs.args, outputs.args, workspaces.args,
                                                  outshapes.args if include_outshape else None)
    if status != S.ACLNN_SUCCESS:
        launcher.destroy()
        return status
    executor.kernel_launch_obj_list.append(launcher)
    return S.ACLNN_SUCCESS


# ---- AddDirectInvokeTask -------------------------------------------------------------------------

def add_direct_invoke_task(l0_name: str | None, op_type: int, prepare: PrepareFn | None, launch: LaunchFn | None,
                           destroy: DestroyFn | None, executor: Any, args: OpArgContext | None) -> AclnnStatus | int:
    """AddDirectInvokeTask: validate, prepare, allocate the requested workspaces, register the launcher.

    `l0_name` is reserved and ignored: attribution comes from the enclosing `l0_dfx` scope. On every return path
    the args are consumed (now or by the launcher) and a non-null launch state is destroyed exactly once (now
    or when the executor is deleted). A failing prepare's status is returned verbatim."""
    del l0_name
    for name, fn in (("prepare", prepare), ("launch", launch), ("destroy", destroy)):
        _require_callable(name, fn, args)
    # step 1
    if prepare is None or launch is None or destroy is None or executor is None or args is None:
        destroy_op_arg_context(args)
        log.error("DirectInvoke callbacks, executor and arguments must not be null (ACLNN_ERR_PARAM_NULLPTR)")
        return S.ACLNN_ERR_PARAM_NULLPTR
    if isinstance(op_type, (bool, np.bool_)) or not isinstance(op_type, (int, np.integer)):
        destroy_op_arg_context(args)
        raise InvalidArgumentError(f"AddDirectInvokeTask: op_type must be an int id from register_op_type(name), "
                                   f"got {type(op_type).__name__} {op_type!r}")
    # step 2
    if not OP_TYPE_DICT.is_valid(int(op_type)) or not is_valid_args(args):
        destroy_op_arg_context(args)
        log.error("invalid DirectInvoke task (op type %d of %d registered) or arguments (ACLNN_ERR_PARAM_INVALID)",
                  int(op_type), OP_TYPE_DICT.size())
        return S.ACLNN_ERR_PARAM_INVALID
    op_type = int(op_type)
    ctx = current()
    # step 3
    request = DirectInvokeWorkspaceRequest()
    status, state = _call_prepare(ctx, prepare, args, request)
    if status != S.ACLNN_SUCCESS:
        _destroy_state(ctx, destroy, state)
        destroy_op_arg_context(args)
        return status
    # step 4
    status = append_requested_workspaces(ctx, executor, request, args)
    if status != S.ACLNN_SUCCESS:
        _destroy_state(ctx, destroy, state)
        destroy_op_arg_context(args)
        return status
    # step 5
    if ctx.process.fault("direct_invoke.new_launcher", op_type):
        log.error("failed to allocate the DirectInvoke launcher (ACLNN_ERR_INNER)")
        _destroy_state(ctx, destroy, state)
        destroy_op_arg_context(args)
        return S.ACLNN_ERR_INNER
    launcher = DirectInvokeKernelLauncher(op_type, executor, launch, destroy, state, args)
    # steps 6, 7
    include_outshape = args.contains_op_arg_type(OpArgDef.OP_OUTSHAPE_ARG)
    status = _register(ctx, executor, launcher, include_outshape)
    if status != S.ACLNN_SUCCESS:
        return status
    executor.abandon_cache(include_outshape)
    return S.ACLNN_SUCCESS


__all__ = ["DirectInvokeWorkspaceRequest", "DirectInvokeKernelLauncher", "add_direct_invoke_task",
           "append_requested_workspaces", "is_valid_args", "INT64_MAX"]
