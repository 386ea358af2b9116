"""AI CPU operators: IndexPut, Pad, Sigmoid, ReduceSum, NonZero (CC kernels) and Roll (a TF kernel).

Each L0 function declares its op's static AicpuTaskSpace and registers through ADD_TO_LAUNCHER_LIST_AICPU, as
opbase operator code does; the L2 APIs use the usual two-phase skeleton. The kernels' numerics come from
`opsim.kernels.numerics` (Roll is pure data movement, done with numpy on the storage bits).

| API | L0 op | kernel | launch API | notes |
|---|---|---|---|---|
| aclnnIndexPutImpl | IndexPut | libpt_kernels.so | new | in place: self is input 0 (ref) and the output |
| aclnnPadAicpu | Pad | libcpu_kernels.so | old (CC compatibility list) | constant pad |
| aclnnSigmoidAicpu | Sigmoid | libcpu_kernels.so | old (CC compatibility list) | |
| aclnnReduceSumAicpu | ReduceSum | libcpu_kernels.so | old (CC compatibility list) | axes travel as a host input |
| aclnnNonzero | NonZero | libcpu_kernels.so | new | DEPEND_SHAPE_RANGE: out's shape comes back from the device |
| aclnnRoll | Roll | tf_kernel | old (TF compatibility list) | TF framework task, shifts/dims as host inputs |

The Sigmoid / ReduceSum / Pad APIs carry an "Aicpu" suffix to stay distinct from AI Core implementations of
the same maths (opsim/ops/reduce.py's aclnnReduceSum).
"""
from __future__ import annotations

import numpy as np

from opsim.acl.dtypes import DataType
from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import IntArray, Scalar, Tensor, TensorList
from opsim.opdev.aicpu.kernel_lib import CC, TF, AicpuKernel, register_aicpu_kernel
from opsim.opdev.aicpu.launcher import add_to_launcher_list_aicpu
from opsim.opdev.aicpu.task_space import get_task_space
from opsim.opdev.dfx import l0_dfx
from opsim.opdev.op_args import op_attr, op_input, op_output
from opsim.opdev.op_def import UnknowShapeOpType
from opsim.ops import _common as common
from opsim.ops._common import S

ALL_TYPES = (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16, DataType.DT_INT32, DataType.DT_INT64,
             DataType.DT_INT8, DataType.DT_UINT8, DataType.DT_BOOL)
ARITH_TYPES = (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16, DataType.DT_INT32, DataType.DT_INT64)
FLOAT_TYPES = (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16)
INDEX_TYPES = (DataType.DT_INT32, DataType.DT_INT64)
MAX_DIMS = 8


def _K():
    from opsim.kernels import numerics  # lazy: keeps Numba out of importing opsim.ops.aicpu_ops
    return numerics


def _bytes(*tensors) -> float:
    return float(sum(t.storage_nbytes for t in tensors if t is not None))


# ---- kernels (numerics + cost) --------------------------------------------------------------------------

def _index_put_compute(ins, outs, attrs):
    self_t, values, masks, *indices = ins
    out = outs[0]
    mask = np.asarray(masks.numpy()).reshape(-1)
    if not mask.all():
        raise ValueError("IndexPut: the simulated kernel indexes leading dims only (every mask entry must be 1)")
    _K().index_put(self_t.numpy(), [np.asarray(ix.numpy()) for ix in indices], values.numpy(),
                   bool(attrs.get("accumulate", False)), out.numpy(), self_t.dtype)
    return None


def _index_put_cost(ins, outs, attrs):
    self_t, values, masks, *indices = ins
    n = values.numel()
    return float(n), 2.0 * _bytes(values) + _bytes(masks, *indices)


def _pad_compute(ins, outs, attrs):
    x, out = ins[0], outs[0]
    flat = attrs.get("paddings", [])
    pairs = [(flat[2 * d], flat[2 * d + 1]) for d in range(len(x.view_shape))]
    _K().pad(x.numpy(), pairs, attrs.get("constant_values", 0.0), out.numpy(), x.dtype)
    return None


def _pad_cost(ins, outs, attrs):
    return 0.0, _bytes(ins[0], outs[0])


def _sigmoid_compute(ins, outs, attrs):
    _K().sigmoid(ins[0].numpy(), outs[0].numpy(), ins[0].dtype)
    return None


def _sigmoid_cost(ins, outs, attrs):
    return 4.0 * ins[0].numel(), _bytes(ins[0], outs[0])


def _reduce_sum_compute(ins, outs, attrs):
    x, axes = ins[0], ins[1]
    axis_list = [int(a) for a in np.asarray(axes.numpy()).reshape(-1)]
    _K().reduce_sum(x.numpy(), axis_list, bool(attrs.get("keep_dims", False)), outs[0].numpy(), x.dtype)
    return None


def _reduce_sum_cost(ins, outs, attrs):
    return float(ins[0].numel()), _bytes(ins[0], outs[0])


def _non_zero_compute(ins, outs, attrs):
    x, out = ins[0], outs[0]
    count = _K().non_zero(x.numpy(), out.numpy(), x.dtype)
    return [(count, len(x.view_shape))]


def _non_zero_shapes(ins, outs, attrs):
    """Without numerics the count is unknown: the upper bound (every element non-zero) is reported."""
    x = ins[0]
    return [(x.numel(), len(x.view_shape))]


def _non_zero_cost(ins, outs, attrs):
    x = ins[0]
    return float(x.numel()), _bytes(x) + 8.0 * x.numel() * len(x.view_shape)


def _roll_compute(ins, outs, attrs):
    x, shift, axis = ins
    shifts = [int(s) for s in np.asarray(shift.numpy()).reshape(-1)]
    axes = [int(a) for a in np.asarray(axis.numpy()).reshape(-1)]
    outs[0].numpy()[...] = np.roll(x.numpy(), shifts, axis=axes)  # a permutation: storage bits move as they are
    return None


def _roll_cost(ins, outs, attrs):
    return 0.0, _bytes(ins[0], outs[0])


register_aicpu_kernel(AicpuKernel("IndexPut", CC, _index_put_compute, _index_put_cost, cost_by_shape=True))
register_aicpu_kernel(AicpuKernel("Pad", CC, _pad_compute, _pad_cost, cost_by_shape=True))
register_aicpu_kernel(AicpuKernel("Sigmoid", CC, _sigmoid_compute, _sigmoid_cost, cost_by_shape=True))
register_aicpu_kernel(AicpuKernel("ReduceSum", CC, _reduce_sum_compute, _reduce_sum_cost, cost_by_shape=True))
register_aicpu_kernel(AicpuKernel("NonZero", CC, _non_zero_compute, _non_zero_cost, _non_zero_shapes,
                                  cost_by_shape=True))
register_aicpu_kernel(AicpuKernel("Roll", TF, _roll_compute, _roll_cost, cost_by_shape=True))


# ---- L0 -------------------------------------------------------------------------------------------

def index_put_l0(self_ref: Tensor, indices: TensorList, values: Tensor, masks: Tensor, accumulate: bool,
                 out: Tensor, executor) -> AclnnStatus:
    """l0op::IndexPut: self (a ref input), values, masks, the defined indices; attr accumulate."""
    with l0_dfx("IndexPut", executor):
        space = get_task_space("IndexPut")
        space.set_ref(0)
        return add_to_launcher_list_aicpu("IndexPut", space, executor, ("accumulate",),
                                          op_input(self_ref, values, masks, indices), op_output(out),
                                          op_attr(bool(accumulate)))


def pad_l0(x: Tensor, paddings: IntArray, value: float, out: Tensor, executor) -> AclnnStatus:
    """l0op::Pad (AI CPU): paddings as (before, after) per dim from dim 0, constant value as float."""
    with l0_dfx("Pad", executor):
        space = get_task_space("Pad")
        return add_to_launcher_list_aicpu("Pad", space, executor, ("paddings", "constant_values"),
                                          op_input(x), op_output(out), op_attr(paddings, np.float32(value)))


def sigmoid_l0(x: Tensor, out: Tensor, executor) -> AclnnStatus:
    with l0_dfx("Sigmoid", executor):
        space = get_task_space("Sigmoid")
        return add_to_launcher_list_aicpu("Sigmoid", space, executor, (), op_input(x), op_output(out))


def reduce_sum_l0(x: Tensor, axes: IntArray, keep_dims: bool, out: Tensor, executor) -> AclnnStatus:
    """l0op::ReduceSum on the AI CPU: the axes go as an input (an int array becomes a host DT_INT64 tensor)."""
    with l0_dfx("ReduceSum", executor):
        space = get_task_space("ReduceSum")
        return add_to_launcher_list_aicpu("ReduceSum", space, executor, ("keep_dims",), op_input(x, axes),
                                          op_output(out), op_attr(bool(keep_dims)))


def non_zero_l0(x: Tensor, out: Tensor, executor) -> AclnnStatus:
    """l0op::NonZero: a third-type op, the output shape [count, ndim] is copied back after the run."""
    with l0_dfx("NonZero", executor):
        space = get_task_space("NonZero", UnknowShapeOpType.DEPEND_SHAPE_RANGE)
        return add_to_launcher_list_aicpu("NonZero", space, executor, ("transpose",), op_input(x),
                                          op_output(out), op_attr(False))


def roll_l0(x: Tensor, shifts: IntArray, dims: IntArray, out: Tensor, executor) -> AclnnStatus:
    """l0op::Roll: a TF kernel whose shift and axis are inputs."""
    with l0_dfx("Roll", executor):
        space = get_task_space("Roll", is_tf=True)
        return add_to_launcher_list_aicpu("Roll", space, executor, (), op_input(x, shifts, dims), op_output(out))


# ---- L2 -------------------------------------------------------------------------------------------

def _check_max_dims(api: str, name: str, t: Tensor) -> AclnnStatus:
    if len(t.view_shape) > MAX_DIMS:
        common.log.error("%s: %s has %d dims; at most %d are supported (ACLNN_ERR_PARAM_INVALID)", api, name,
                    len(t.view_shape), MAX_DIMS)
        return S.ACLNN_ERR_PARAM_INVALID
    return S.ACLNN_SUCCESS


def _index_put_selection_shape(self: Tensor, indices: list[Tensor]) -> tuple[int, ...] | None:
    b: tuple[int, ...] = ()
    for ix in indices:
        b = common.broadcast_shape(b, ix.view_shape)
        if b is None:
            return None
    return tuple(b) + tuple(self.view_shape[len(indices):])


def aclnn_index_put_impl_get_workspace_size(self_ref: Tensor, indices: TensorList, values: Tensor,
                                            accumulate: bool, unsafe: bool = False):
    """aclnnIndexPutImplGetWorkspaceSize: self[indices] = values (or += with accumulate), in place.

    The indices index the leading dims of self (one int32/int64 tensor per dim, broadcast together) and
    values broadcast to the selection; empty self or values register nothing.
    """
    api = "aclnnIndexPutImpl"

    def check():
        st = common.check_not_null(api, selfRef=self_ref, indices=indices, values=values)
        if st:
            return st
        for i, ix in enumerate(indices.tensors):
            if ix is None:
                common.log.error("%s: indices[%d] must not be null (ACLNN_ERR_PARAM_NULLPTR)", api, i)
                return S.ACLNN_ERR_PARAM_NULLPTR
        st = (common.check_dtype(api, "selfRef", self_ref, ALL_TYPES) or common.check_dtype(api, "values", values, ALL_TYPES)
              or common.check_same_dtype(api, selfRef=self_ref, values=values)
              or _check_max_dims(api, "selfRef", self_ref))
        if st:
            return st
        if len(indices) > len(self_ref.view_shape) or len(indices) == 0:
            common.log.error("%s: %d index tensors for a %d-D selfRef; pass 1..%d (ACLNN_ERR_PARAM_INVALID)", api,
                        len(indices), len(self_ref.view_shape), len(self_ref.view_shape))
            return S.ACLNN_ERR_PARAM_INVALID
        for i, ix in enumerate(indices.tensors):
            st = common.check_dtype(api, f"indices[{i}]", ix, INDEX_TYPES)
            if st:
                return st
        if self_ref.is_empty() or values.is_empty():
            return S.ACLNN_SUCCESS
        sel = _index_put_selection_shape(self_ref, indices.tensors)
        if sel is None or common.broadcast_shape(values.view_shape, sel) != sel:
            common.log.error("%s: values shape %s does not broadcast to the indexed shape %s (ACLNN_ERR_PARAM_INVALID)",
                        api, list(values.view_shape), None if sel is None else list(sel))
            return S.ACLNN_ERR_PARAM_INVALID
        return S.ACLNN_SUCCESS

    def build(ex):
        if self_ref.is_empty() or values.is_empty():
            return S.ACLNN_SUCCESS
        masks = ex.convert_to_tensor(IntArray([1] * len(indices)), DataType.DT_INT64)
        defined = ex.alloc_tensor_list(indices.tensors)
        return index_put_l0(self_ref, defined, values, masks, bool(accumulate), self_ref, ex)

    return common.l2_phase_1(api, (self_ref, indices, values, bool(accumulate), bool(unsafe)), (self_ref,), check,
                        build)


def aclnn_index_put_impl(workspace: int, workspace_size: int, executor, stream) -> AclnnStatus:
    return common.l2_phase_2("aclnnIndexPutImpl", workspace, workspace_size, executor, stream)


def pad_paddings(pad: IntArray | list[int], ndim: int) -> list[int] | None:
    """torch's pad list (last dim first: [l_last, r_last, l_prev, ...]) as PadV3 paddings from dim 0
    ([b0, a0, b1, a1, ...]); None when it has an odd length or pads more dims than self has."""
    values = [int(v) for v in pad]
    if len(values) % 2 or len(values) > 2 * ndim:
        return None
    flat = [0] * (2 * ndim)
    for i in range(len(values) // 2):
        d = ndim - 1 - i
        flat[2 * d], flat[2 * d + 1] = values[2 * i], values[2 * i + 1]
    return flat


def pad_out_shape(shape, flat: list[int]) -> tuple[int, ...]:
    return tuple(n + flat[2 * d] + flat[2 * d + 1] for d, n in enumerate(shape))


def aclnn_pad_aicpu_get_workspace_size(self: Tensor, pad: IntArray, value: Scalar, out: Tensor):
    """aclnnPadAicpuGetWorkspaceSize: out = self padded with `value` (torch's pad list, negative crops)."""
    api = "aclnnPadAicpu"

    def check():
        st = (common.check_not_null(api, self=self, pad=pad, value=value, out=out)
              or common.check_dtype(api, "self", self, ALL_TYPES) or common.check_same_dtype(api, self=self, out=out)
              or _check_max_dims(api, "self", self))
        if st:
            return st
        flat = pad_paddings(pad, len(self.view_shape))
        if flat is None:
            common.log.error("%s: pad %s must have an even length of at most 2 x %d (ACLNN_ERR_PARAM_INVALID)", api,
                        list(pad), len(self.view_shape))
            return S.ACLNN_ERR_PARAM_INVALID
        want = pad_out_shape(self.view_shape, flat)
        if any(d < 0 for d in want):
            common.log.error("%s: pad %s crops self %s below zero (ACLNN_ERR_PARAM_INVALID)", api, list(pad),
                        list(self.view_shape))
            return S.ACLNN_ERR_PARAM_INVALID
        return common.check_shape(api, "out", out, want)

    def build(ex):
        flat = pad_paddings(pad, len(self.view_shape))
        return pad_l0(self, ex.alloc_int_array(flat), float(value.value), out, ex)

    return common.l2_phase_1(api, (self, pad, value), (out,), check, build)


def aclnn_pad_aicpu(workspace: int, workspace_size: int, executor, stream) -> AclnnStatus:
    return common.l2_phase_2("aclnnPadAicpu", workspace, workspace_size, executor, stream)


def aclnn_sigmoid_aicpu_get_workspace_size(self: Tensor, out: Tensor):
    """aclnnSigmoidAicpuGetWorkspaceSize: out = 1 / (1 + exp(-self)) on the AI CPU."""
    api = "aclnnSigmoidAicpu"

    def check():
        return (common.check_not_null(api, self=self, out=out) or common.check_dtype(api, "self", self, FLOAT_TYPES)
                or common.check_same_dtype(api, self=self, out=out) or common.check_shape(api, "out", out, self.view_shape))

    return common.l2_phase_1(api, (self,), (out,), check, lambda ex: sigmoid_l0(self, out, ex))


def aclnn_sigmoid_aicpu(workspace: int, workspace_size: int, executor, stream) -> AclnnStatus:
    return common.l2_phase_2("aclnnSigmoidAicpu", workspace, workspace_size, executor, stream)


def _normalize_axes(dim, ndim: int) -> tuple[int, ...] | None:
    n = max(ndim, 1)
    out = []
    for d in dim:
        d = int(d)
        if not -n <= d < n:
            return None
        out.append(d % n)
    return tuple(sorted(set(out)))


def _reduced_shape(shape, axes, keepdim: bool) -> tuple[int, ...]:
    if keepdim:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def aclnn_reduce_sum_aicpu_get_workspace_size(self: Tensor, dim: IntArray, keepdim: bool, out: Tensor):
    """aclnnReduceSumAicpuGetWorkspaceSize: sum over `dim` (all dims when empty) on the AI CPU."""
    api = "aclnnReduceSumAicpu"

    def check():
        st = (common.check_not_null(api, self=self, dim=dim, out=out) or common.check_dtype(api, "self", self, ARITH_TYPES)
              or common.check_same_dtype(api, self=self, out=out) or _check_max_dims(api, "self", self))
        if st:
            return st
        axes = _normalize_axes(dim, len(self.view_shape))
        if axes is None:
            common.log.error("%s: dim %s out of range for %d dims (ACLNN_ERR_PARAM_INVALID)", api, list(dim),
                        len(self.view_shape))
            return S.ACLNN_ERR_PARAM_INVALID
        axes = axes or tuple(range(len(self.view_shape)))
        return common.check_shape(api, "out", out, _reduced_shape(self.view_shape, axes, bool(keepdim)))

    def build(ex):
        axes = _normalize_axes(dim, len(self.view_shape)) or tuple(range(len(self.view_shape)))
        return reduce_sum_l0(self, ex.alloc_int_array(list(axes)), bool(keepdim), out, ex)

    return common.l2_phase_1(api, (self, dim, bool(keepdim)), (out,), check, build)


def aclnn_reduce_sum_aicpu(workspace: int, workspace_size: int, executor, stream) -> AclnnStatus:
    return common.l2_phase_2("aclnnReduceSumAicpu", workspace, workspace_size, executor, stream)


def aclnn_nonzero_get_workspace_size(self: Tensor, out: Tensor):
    """aclnnNonzeroGetWorkspaceSize: out (int64 [self.numel, self.ndim], the upper bound) receives the indices
    of the non-zero elements; after the run its shape is [count, self.ndim]."""
    api = "aclnnNonzero"

    def check():
        st = (common.check_not_null(api, self=self, out=out) or common.check_dtype(api, "self", self, ALL_TYPES)
              or common.check_dtype(api, "out", out, (DataType.DT_INT64,)) or _check_max_dims(api, "self", self))
        if st:
            return st
        return common.check_shape(api, "out", out, (self.numel(), len(self.view_shape)))

    return common.l2_phase_1(api, (self,), (out,), check, lambda ex: non_zero_l0(self, out, ex))


def aclnn_nonzero(workspace: int, workspace_size: int, executor, stream) -> AclnnStatus:
    return common.l2_phase_2("aclnnNonzero", workspace, workspace_size, executor, stream)


def aclnn_roll_get_workspace_size(self: Tensor, shifts: IntArray, dims: IntArray, out: Tensor):
    """aclnnRollGetWorkspaceSize: out = self rolled by shifts[i] along dims[i] (one shift per dim)."""
    api = "aclnnRoll"

    def check():
        st = (common.check_not_null(api, self=self, shifts=shifts, dims=dims, out=out)
              or common.check_dtype(api, "self", self, ALL_TYPES) or common.check_same_dtype(api, self=self, out=out)
              or common.check_shape(api, "out", out, self.view_shape) or _check_max_dims(api, "self", self))
        if st:
            return st
        if len(shifts) == 0 or len(shifts) != len(dims):
            common.log.error("%s: shifts %s and dims %s must be non-empty and of equal length (ACLNN_ERR_PARAM_INVALID)",
                        api, list(shifts), list(dims))
            return S.ACLNN_ERR_PARAM_INVALID
        if _normalize_axes(dims, len(self.view_shape)) is None:
            common.log.error("%s: dims %s out of range for %d dims (ACLNN_ERR_PARAM_INVALID)", api, list(dims),
                        len(self.view_shape))
            return S.ACLNN_ERR_PARAM_INVALID
        return S.ACLNN_SUCCESS

    return common.l2_phase_1(api, (self, shifts, dims), (out,), check, lambda ex: roll_l0(self, shifts, dims, out, ex))


def aclnn_roll(workspace: int, workspace_size: int, executor, stream) -> AclnnStatus:
    return common.l2_phase_2("aclnnRoll", workspace, workspace_size, executor, stream)


# ---- scenario catalogue -------------------------------------------------------------------------------

def _names(types) -> tuple[str, ...]:
    return tuple(t.short_name for t in types)


def _infer_index_put(shapes, attrs):
    self_shape, values_shape = shapes
    k = int(attrs.get("indices", 1))
    if not 1 <= k <= len(self_shape):
        return f"indices must be 1..{len(self_shape)} for a {len(self_shape)}-D self, got {k}"
    n = int(attrs.get("index_len", values_shape[0] if values_shape else 1))
    sel = (n,) + tuple(self_shape[k:])
    if common.broadcast_shape(values_shape, sel) != sel:
        return f"values {list(values_shape)} do not broadcast to the indexed shape {list(sel)}"
    return []


def _build_index_put(make, ins, dtype, attrs, out_shapes):
    self_t, values = ins
    k = int(attrs.get("indices", 1))
    n = int(attrs.get("index_len", values.view_shape[0] if values.view_shape else 1))
    idx_dtype = DataType.parse(attrs.get("index_dtype", "int64"))
    # role "index": the runner must fill these with in-range positions (zeros are valid)
    indices = TensorList([make((n,), idx_dtype, "index") for _ in range(k)])
    return (self_t, indices, values, bool(attrs.get("accumulate", False)), False)


def _infer_pad(shapes, attrs):
    flat = pad_paddings(attrs.get("pad", []), len(shapes[0]))
    if flat is None:
        return f"pad {list(attrs.get('pad', []))} must have an even length of at most 2 x {len(shapes[0])}"
    out = pad_out_shape(shapes[0], flat)
    if any(d < 0 for d in out):
        return f"pad {list(attrs['pad'])} crops {list(shapes[0])} below zero"
    return [out]


def _build_pad(make, ins, dtype, attrs, out_shapes):
    out = make(out_shapes[0], dtype, "output")
    return (ins[0], IntArray([int(v) for v in attrs.get("pad", [])]), Scalar(float(attrs.get("value", 0.0))), out)


def _infer_reduce(shapes, attrs):
    shape = shapes[0]
    axes = _normalize_axes(attrs.get("dim", []), len(shape))
    if axes is None:
        return f"dim {list(attrs.get('dim', []))} is out of range for a {len(shape)}-D input"
    return [_reduced_shape(shape, axes or tuple(range(len(shape))), bool(attrs.get("keepdim", False)))]


def _build_reduce(make, ins, dtype, attrs, out_shapes):
    out = make(out_shapes[0], dtype, "output")
    return (ins[0], IntArray([int(d) for d in attrs.get("dim", [])]), bool(attrs.get("keepdim", False)), out)


def _infer_nonzero(shapes, attrs):
    shape = shapes[0]
    n = 1
    for d in shape:
        n *= d
    return [(n, len(shape))]


def _build_nonzero(make, ins, dtype, attrs, out_shapes):
    return (ins[0], make(out_shapes[0], DataType.DT_INT64, "output"))


def _infer_roll(shapes, attrs):
    shifts, dims = attrs.get("shifts", [1]), attrs.get("dims", [0])
    if len(shifts) == 0 or len(shifts) != len(dims):
        return f"shifts {list(shifts)} and dims {list(dims)} must be non-empty and of equal length"
    if len(shapes[0]) == 0:
        return "Roll needs an input of at least 1 dimension; got a 0-D (scalar) input"
    if _normalize_axes(dims, len(shapes[0])) is None:
        return f"dims {list(dims)} are out of range for a {len(shapes[0])}-D input"
    return [tuple(shapes[0])]


def _build_roll(make, ins, dtype, attrs, out_shapes):
    out = make(out_shapes[0], dtype, "output")
    return (ins[0], IntArray([int(s) for s in attrs.get("shifts", [1])]),
            IntArray([int(d) for d in attrs.get("dims", [0])]), out)


def _build_same(make, ins, dtype, attrs, out_shapes):
    return (ins[0], make(out_shapes[0], dtype, "output"))


def _infer_same(shapes, attrs):
    return [tuple(shapes[0])]


_MOD = "opsim.ops.aicpu_ops"

#: Scenario catalogue entries (OpSpec fields); the op registry adapts them with launcher kind "AI_CPU".
AICPU_OPS: dict[str, dict] = {
    "IndexPut": {
        "api": "aclnnIndexPutImpl", "launchers": ("AI_CPU",), "dtypes": _names(ALL_TYPES),
        "inputs": ("self", "values"),
        "attrs": {"accumulate": False, "indices": 1, "index_dtype": "int64"},
        "attr_types": {"accumulate": bool, "indices": int, "index_dtype": str, "index_len": int},
        "infer": _infer_index_put, "build": _build_index_put,
        "get_workspace_size": f"{_MOD}:aclnn_index_put_impl_get_workspace_size",
        "run": f"{_MOD}:aclnn_index_put_impl",
        "description": "self[idx_0, ..., idx_k-1] = values (+= with accumulate), in place; AI CPU IndexPut "
                       "(libpt_kernels.so); the index tensors are built with role 'index'",
    },
    "Pad": {
        "api": "aclnnPadAicpu", "launchers": ("AI_CPU",), "dtypes": _names(ALL_TYPES), "inputs": ("self",),
        "attrs": {"pad": [1, 1], "value": 0.0}, "attr_types": {"pad": list, "value": (int, float)},
        "infer": _infer_pad, "build": _build_pad,
        "get_workspace_size": f"{_MOD}:aclnn_pad_aicpu_get_workspace_size", "run": f"{_MOD}:aclnn_pad_aicpu",
        "description": "constant pad (torch pad order) on the AI CPU; old launch API (CC compatibility list)",
    },
    "Sigmoid": {
        "api": "aclnnSigmoidAicpu", "launchers": ("AI_CPU",), "dtypes": _names(FLOAT_TYPES), "inputs": ("self",),
        "infer": _infer_same, "build": _build_same,
        "get_workspace_size": f"{_MOD}:aclnn_sigmoid_aicpu_get_workspace_size",
        "run": f"{_MOD}:aclnn_sigmoid_aicpu",
        "description": "out = sigmoid(self) on the AI CPU; old launch API (CC compatibility list)",
    },
    "ReduceSumAicpu": {
        "api": "aclnnReduceSumAicpu", "launchers": ("AI_CPU",), "dtypes": _names(ARITH_TYPES), "inputs": ("self",),
        "attrs": {"dim": [], "keepdim": False}, "attr_types": {"dim": list, "keepdim": bool},
        "infer": _infer_reduce, "build": _build_reduce,
        "get_workspace_size": f"{_MOD}:aclnn_reduce_sum_aicpu_get_workspace_size",
        "run": f"{_MOD}:aclnn_reduce_sum_aicpu",
        "description": "sum over attrs.dim on the AI CPU (axes as a host input); old launch API",
    },
    "NonZero": {
        "api": "aclnnNonzero", "launchers": ("AI_CPU",), "dtypes": _names(ALL_TYPES), "inputs": ("self",),
        "output_shape_from_device": True,
        "infer": _infer_nonzero, "build": _build_nonzero, "out_dtype": lambda dtype, attrs: DataType.DT_INT64,
        "get_workspace_size": f"{_MOD}:aclnn_nonzero_get_workspace_size", "run": f"{_MOD}:aclnn_nonzero",
        "description": "indices of non-zero elements; DEPEND_SHAPE_RANGE: stream sync and output-shape copy back",
    },
    "Roll": {
        "api": "aclnnRoll", "launchers": ("AI_CPU",), "dtypes": _names(ALL_TYPES), "inputs": ("self",),
        "attrs": {"shifts": [1], "dims": [0]}, "attr_types": {"shifts": list, "dims": list},
        "infer": _infer_roll, "build": _build_roll,
        "get_workspace_size": f"{_MOD}:aclnn_roll_get_workspace_size", "run": f"{_MOD}:aclnn_roll",
        "description": "np.roll on the AI CPU as a TF kernel (is_tf, 64-byte host-input alignment); old launch API",
    },
}

__all__ = [
    "AICPU_OPS", "index_put_l0", "pad_l0", "sigmoid_l0", "reduce_sum_l0", "non_zero_l0", "roll_l0",
    "aclnn_index_put_impl_get_workspace_size", "aclnn_index_put_impl", "aclnn_pad_aicpu_get_workspace_size",
    "aclnn_pad_aicpu", "aclnn_sigmoid_aicpu_get_workspace_size", "aclnn_sigmoid_aicpu",
    "aclnn_reduce_sum_aicpu_get_workspace_size", "aclnn_reduce_sum_aicpu", "aclnn_nonzero_get_workspace_size",
    "aclnn_nonzero", "aclnn_roll_get_workspace_size", "aclnn_roll", "pad_paddings", "pad_out_shape",
]
