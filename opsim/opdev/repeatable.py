"""LauncherRepeatableChecker (opbase `common/inc/kernel_launcher.h`): may a launcher's arguments be re-bound on a
repeat?

Shared by the executor (SetRepeatable) and the launchers that check their own arguments; it sits below both.
"""
from __future__ import annotations

from opsim.acl.tensor import Placement, Tensor
from opsim.opdev.op_args import OpArgContext, OpArgDef, OpArgType


def _tensor_passes(t: Tensor | None, relation: dict, ori: set) -> bool:
    if t is None:
        return True
    st = t.storage
    if st.from_workspace or st.placement != Placement.ON_DEVICE_HBM:
        return True
    sid = id(st)
    if sid in ori:
        return True
    rel = relation.get(sid)
    return rel is not None and rel in ori


def _list_passes(args, relation: dict, ori: set) -> bool:
    for a in args:
        if a.type == OpArgType.OPARG_ACLTENSOR:
            if not _tensor_passes(a.value, relation, ori):
                return False
        elif a.type == OpArgType.OPARG_ACLTENSOR_LIST and a.value is not None:
            for t in a.value.tensors:
                if not _tensor_passes(t, relation, ori):
                    return False
    return True


def launcher_repeatable_checker(args: OpArgContext | None, relation: dict, ori_storage: set) -> bool:
    """LauncherRepeatableChecker: INPUT, OUTPUT, (OUTSHAPE -> False), WORKSPACE.

    `relation` maps id(middle storage) -> id(L2 output storage); `ori_storage` is a set of id(storage)."""
    if args is None:
        return False
    if not _list_passes(args.inputs(), relation, ori_storage):
        return False
    if not _list_passes(args.outputs(), relation, ori_storage):
        return False
    if args.contains_op_arg_type(OpArgDef.OP_OUTSHAPE_ARG):
        return False
    return _list_passes(args.workspaces(), relation, ori_storage)
