"""The operator catalogue a scenario can call: one `OpSpec` per user-visible op.

A scenario names an op ("Add", "Matmul", ...) with input shapes, a dtype and attributes; the spec says which
ACLNN API that is, which launcher kinds it uses, which dtypes it accepts, how its output shapes follow from
its inputs, and how to build the phase-1 argument tuple from tensors placed in device memory. The two-phase
functions are named as "module:function" and imported on first use, so listing and validating ops never
imports an operator module (and never Numba).

AI CPU operators (`opsim.ops.aicpu_ops.AICPU_OPS`) and DirectInvoke producers
(`opsim.ops.fused.DIRECT_INVOKE_OPS`, or a module a scenario names) are adapted into the same `OpSpec`
shape by `_adapt`, so the runner treats every op alike.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

from opsim.acl.tensor import broadcast_shapes, IntArray, Scalar
from opsim.errors import InvalidArgumentError
from opsim.acl.dtypes import DataType

Shape = tuple[int, ...]
TensorFactory = Callable[[Sequence[int], Any, str], Any]
"""`make(shape, dtype, role)` -> an aclTensor placed in device memory; role is "input" or "output"."""


@dataclass(frozen=True)
class OpSpec:
    """One op a scenario can call."""

    name: str
    """The name scenarios use ("Add")."""
    api: str
    """The ACLNN API ("aclnnAdd")."""
    launchers: tuple[str, ...]
    """Launcher kinds its executor registers ("AI_CORE", "AI_CPU", "DIRECT_INVOKE")."""
    dtypes: tuple[str, ...]
    """Accepted input dtypes (short names: "float", "float16", "bf16", "int32", ...)."""
    inputs: tuple[str, ...]
    """Tensor input names, in argument order."""
    attrs: Mapping[str, Any]
    """Attribute name -> default value."""
    infer: Callable[[list[Shape], Mapping[str, Any]], list[Shape] | str]
    """Input shapes, attrs -> output shapes, or a message saying why the shapes do not fit."""
    build: Callable[[TensorFactory, list[Any], Any, Mapping[str, Any], list[Shape]], tuple]
    """(make, input tensors, dtype, attrs, output shapes) -> the phase-1 argument tuple."""
    get_workspace_size: str | Callable[..., Any]
    """`aclnnXxxGetWorkspaceSize` ("module:function" or the callable)."""
    run: str | Callable[..., Any]
    """`aclnnXxx` ("module:function" or the callable)."""
    description: str = ""
    out_dtype: Callable[[Any, Mapping[str, Any]], Any] | None = None
    """Output dtype from (input dtype, attrs); None: same as the input."""
    attr_types: Mapping[str, type | tuple[type, ...]] = field(default_factory=dict)
    """Accepted Python types of each attribute (validation)."""
    attr_ranges: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    """Inclusive (low, high) of an integer attribute narrower than int64, as its ACLNN signature types it;
    every other integer attribute (and list element) is an int64 like opbase's OpArg."""
    output_shape_from_device: bool = False
    """The run overwrites the output shapes with what the device computed (DEPEND_SHAPE_RANGE ops such as
    NonZero); a caller reusing its output tensors restores their shapes before the next call."""

    def resolve(self) -> tuple[Callable[..., Any], Callable[..., Any]]:
        """The (get_workspace_size, run) callables, importing their module on first use."""
        return _resolve(self.get_workspace_size), _resolve(self.run)

    def output_dtype(self, dtype: Any, attrs: Mapping[str, Any]) -> Any:
        return dtype if self.out_dtype is None else self.out_dtype(dtype, attrs)


_RESOLVED: dict[str, Callable[..., Any]] = {}
""""module:function" references already imported (every op step of a scenario resolves its spec: an imported
100-step profile has thousands)."""


def _resolve(ref: str | Callable[..., Any]) -> Callable[..., Any]:
    if callable(ref):
        return ref
    fn = _RESOLVED.get(ref)
    if fn is None:
        module, _, attr = ref.partition(":")
        fn = _RESOLVED[ref] = getattr(importlib.import_module(module), attr)
    return fn


# ---- shape inference -------------------------------------------------------------------------------

def _infer_binary(shapes: list[Shape], attrs: Mapping[str, Any]) -> list[Shape] | str:
    out = broadcast_shapes(shapes[0], shapes[1])
    if out is None:
        return f"shapes {list(shapes[0])} and {list(shapes[1])} do not broadcast"
    return [out]


def _infer_same(shapes: list[Shape], attrs: Mapping[str, Any]) -> list[Shape] | str:
    return [shapes[0]]


def _axes(dims: Any, ndim: int) -> tuple[int, ...] | str:
    n = max(ndim, 1)
    out = []
    for d in dims:
        if not -n <= int(d) < n:
            return f"dim {d} is out of range for a {ndim}-D input (use -{n}..{n - 1})"
        out.append(int(d) % n)
    return tuple(sorted(set(out)))


def _infer_reduce(shapes: list[Shape], attrs: Mapping[str, Any]) -> list[Shape] | str:
    shape = shapes[0]
    axes = _axes(attrs.get("dim", []), len(shape))
    if isinstance(axes, str):
        return axes
    if not axes:
        axes = tuple(range(len(shape)))
    if attrs.get("keepdim", False):
        return [tuple(1 if i in axes else d for i, d in enumerate(shape))]
    return [tuple(d for i, d in enumerate(shape) if i not in axes)]


def _infer_softmax(shapes: list[Shape], attrs: Mapping[str, Any]) -> list[Shape] | str:
    axes = _axes([attrs.get("dim", -1)], len(shapes[0]))
    return axes if isinstance(axes, str) else [shapes[0]]


def _infer_matmul(shapes: list[Shape], attrs: Mapping[str, Any]) -> list[Shape] | str:
    a, b = shapes[0], shapes[1]
    if len(a) != 2 or len(b) != 2:
        return f"matmul operands must be 2-D, got {list(a)} and {list(b)}"
    if a[1] != b[0]:
        return f"inner dimensions differ: {list(a)} @ {list(b)} ({a[1]} != {b[0]})"
    return [(a[0], b[1])]


def _infer_addmm(shapes: list[Shape], attrs: Mapping[str, Any]) -> list[Shape] | str:
    mm = _infer_matmul(shapes[1:], attrs)
    if isinstance(mm, str):
        return mm
    if broadcast_shapes(shapes[0], mm[0]) != mm[0]:
        return f"self {list(shapes[0])} does not broadcast to the product shape {list(mm[0])}"
    return mm


# ---- argument builders ------------------------------------------------------------------------------

def _outs(make: TensorFactory, out_shapes: list[Shape], dtype: Any) -> list[Any]:
    return [make(s, dtype, "output") for s in out_shapes]


def _scalar(value: float) -> Any:
    return Scalar(float(value))


def _dt(name: Any) -> Any:
    return DataType.parse(name)


def _build_add(make, ins, dtype, attrs, out_shapes):
    return (ins[0], ins[1], _scalar(attrs["alpha"]), *_outs(make, out_shapes, dtype))


def _build_plain(make, ins, dtype, attrs, out_shapes):
    return (*ins, *_outs(make, out_shapes, dtype))


def _build_cast(make, ins, dtype, attrs, out_shapes):
    target = _dt(attrs["dtype"])
    return (ins[0], target, *_outs(make, out_shapes, target))


def _build_reduce_sum(make, ins, dtype, attrs, out_shapes):
    return (ins[0], IntArray([int(d) for d in attrs["dim"]]), bool(attrs["keepdim"]), dtype,
            *_outs(make, out_shapes, dtype))


def _build_softmax(make, ins, dtype, attrs, out_shapes):
    return (ins[0], int(attrs["dim"]), *_outs(make, out_shapes, dtype))


def _build_matmul(make, ins, dtype, attrs, out_shapes):
    return (ins[0], ins[1], *_outs(make, out_shapes, dtype), int(attrs["cube_math_type"]))


def _build_addmm(make, ins, dtype, attrs, out_shapes):
    return (ins[0], ins[1], ins[2], _scalar(attrs["beta"]), _scalar(attrs["alpha"]),
            *_outs(make, out_shapes, dtype), int(attrs["cube_math_type"]))


_FLOATS = ("float", "float16", "bf16")
_NUMERIC = _FLOATS + ("int32", "int64")
_CAST = _NUMERIC + ("int8", "uint8", "bool")
_NUM = (int, float)


def _builtin(name: str, api: str, module: str, fn: str, dtypes, inputs, infer, build, attrs=None,
             attr_types=None, description="", out_dtype=None, attr_ranges=None) -> OpSpec:
    return OpSpec(name=name, api=api, launchers=("AI_CORE",), dtypes=tuple(dtypes), inputs=tuple(inputs),
                  attrs=MappingProxyType(dict(attrs or {})), infer=infer, build=build,
                  get_workspace_size=f"opsim.ops.{module}:{fn}_get_workspace_size", run=f"opsim.ops.{module}:{fn}",
                  description=description, out_dtype=out_dtype, attr_types=MappingProxyType(dict(attr_types or {})),
                  attr_ranges=MappingProxyType(dict(attr_ranges or {})))


_INT8 = (-128, 127)
"""cubeMathType is an int8_t in aclnnMatmul's and aclnnAddmm's signatures."""

_BUILTIN: tuple[OpSpec, ...] = (
    _builtin("Add", "aclnnAdd", "elementwise", "aclnn_add", _NUMERIC, ("self", "other"), _infer_binary,
             _build_add, {"alpha": 1.0}, {"alpha": _NUM}, "out = self + alpha * other (broadcasting)"),
    _builtin("Mul", "aclnnMul", "elementwise", "aclnn_mul", _NUMERIC, ("self", "other"), _infer_binary,
             _build_plain, description="out = self * other (broadcasting)"),
    _builtin("Abs", "aclnnAbs", "elementwise", "aclnn_abs", _NUMERIC, ("self",), _infer_same, _build_plain,
             description="out = |self|"),
    _builtin("Relu", "aclnnRelu", "elementwise", "aclnn_relu", _NUMERIC, ("self",), _infer_same, _build_plain,
             description="out = max(self, 0)"),
    _builtin("Cast", "aclnnCast", "elementwise", "aclnn_cast", _CAST, ("self",), _infer_same, _build_cast,
             {"dtype": "float"}, {"dtype": str}, "out = self converted to attrs.dtype",
             out_dtype=lambda dtype, attrs: _dt(attrs["dtype"])),
    _builtin("ReduceSum", "aclnnReduceSum", "reduce", "aclnn_reduce_sum", _NUMERIC, ("self",), _infer_reduce,
             _build_reduce_sum, {"dim": [], "keepdim": False}, {"dim": list, "keepdim": bool},
             "sum over attrs.dim (all dims when empty); the tiling asks for a cross-core workspace"),
    _builtin("Softmax", "aclnnSoftmax", "softmax", "aclnn_softmax", _FLOATS, ("self",), _infer_softmax,
             _build_softmax, {"dim": -1}, {"dim": int}, "softmax along attrs.dim (explicit OP_WORKSPACE scratch)"),
    _builtin("Matmul", "aclnnMatmul", "matmul", "aclnn_matmul", _FLOATS, ("self", "mat2"), _infer_matmul,
             _build_matmul, {"cube_math_type": 0}, {"cube_math_type": int}, "out = self @ mat2 (2-D)",
             attr_ranges={"cube_math_type": _INT8}),
    _builtin("Addmm", "aclnnAddmm", "matmul", "aclnn_addmm", _FLOATS, ("self", "mat1", "mat2"), _infer_addmm,
             _build_addmm, {"beta": 1.0, "alpha": 1.0, "cube_math_type": 0},
             {"beta": _NUM, "alpha": _NUM, "cube_math_type": int},
             "out = beta * self + alpha * (mat1 @ mat2): MatMul, Muls, Muls, Add with planned intermediates",
             attr_ranges={"cube_math_type": _INT8}),
)


# ---- optional catalogues (AI CPU, DirectInvoke) -----------------------------------------------------

OPTIONAL_CATALOGUES: tuple[tuple[str, str, str], ...] = (
    ("opsim.ops.aicpu_ops", "AICPU_OPS", "AI_CPU"),
    ("opsim.ops.fused", "DIRECT_INVOKE_OPS", "DIRECT_INVOKE"),
)
"""(module, exported dict, launcher kind) of the op catalogues kept in their own modules."""


def _adapt(key: str, entry: Any, kind: str) -> OpSpec:
    """A catalogue entry as an OpSpec: an OpSpec is taken as is; a mapping is read field by field."""
    if isinstance(entry, OpSpec):
        return entry
    if not isinstance(entry, Mapping):
        raise InvalidArgumentError(f"op catalogue entry {key!r} is a {type(entry).__name__}; "
                                   "expected an OpSpec or a mapping of OpSpec fields")
    fields = dict(entry)
    fields.setdefault("name", key)
    fields.setdefault("launchers", (kind,))
    fields["launchers"] = tuple(fields["launchers"])
    fields["dtypes"] = tuple(fields.get("dtypes", _FLOATS))
    fields["inputs"] = tuple(fields.get("inputs", ("self",)))
    fields["attrs"] = MappingProxyType(dict(fields.get("attrs", {})))
    fields["attr_types"] = MappingProxyType(dict(fields.get("attr_types", {})))
    fields.setdefault("infer", _infer_same)
    fields.setdefault("build", _build_plain)
    unknown = sorted(set(fields) - set(OpSpec.__dataclass_fields__))
    if unknown:
        raise InvalidArgumentError(f"op catalogue entry {key!r} has unknown fields {unknown}; "
                                   f"OpSpec fields: {', '.join(OpSpec.__dataclass_fields__)}")
    return OpSpec(**fields)


def catalogue_from_module(module_name: str, attr: str, kind: str) -> dict[str, OpSpec]:
    """The ops a module exports in its `attr` dict (name -> OpSpec or OpSpec fields)."""
    module = importlib.import_module(module_name)
    table = getattr(module, attr, None)
    if not isinstance(table, Mapping):
        raise InvalidArgumentError(f"module {module_name!r} does not export a dict named {attr}")
    return {spec.name: spec for spec in (_adapt(k, v, kind) for k, v in table.items())}


_BUILTIN_BY_NAME: dict[str, OpSpec] = {spec.name: spec for spec in _BUILTIN}
_REGISTRY: dict[str, OpSpec] | None = None
_MISSING: list[str] = []


def _load() -> dict[str, OpSpec]:
    """Every op: the built-in ones plus the optional catalogues (imported here, once)."""
    global _REGISTRY
    if _REGISTRY is None:
        reg = dict(_BUILTIN_BY_NAME)
        for module, attr, kind in OPTIONAL_CATALOGUES:
            try:
                extra = catalogue_from_module(module, attr, kind)
            except ModuleNotFoundError as exc:
                if exc.name != module:
                    raise
                _MISSING.append(module)
                continue
            for name, spec in extra.items():
                reg.setdefault(name, spec)
        _REGISTRY = reg
    return _REGISTRY


def list_ops() -> list[OpSpec]:
    """Every op a scenario can call, sorted by name."""
    return sorted(_load().values(), key=lambda s: s.name)


def op_names() -> list[str]:
    return sorted(_load())


def get_op(name: str, extra: Mapping[str, OpSpec] | None = None) -> OpSpec:
    """The spec of `name` (scenario-local `extra` ops first); unknown names raise, listing the known ones.

    A built-in AI Core op is found without importing the optional catalogues (the AI CPU one pulls in the
    Numba key hash), so validating an AI Core scenario stays light."""
    if extra and name in extra:
        return extra[name]
    spec = _BUILTIN_BY_NAME.get(name) if _REGISTRY is None else _REGISTRY.get(name)
    if spec is not None:
        return spec
    reg = _load()
    try:
        return reg[name]
    except KeyError:
        known = sorted(set(reg) | set(extra or ()))
        raise InvalidArgumentError(f"unknown op {name!r}; known ops: {', '.join(known)}") from None


def register(spec: OpSpec) -> None:
    """Add an op to the catalogue (a name already taken raises)."""
    reg = _load()
    if spec.name in reg:
        raise InvalidArgumentError(f"op {spec.name!r} is already registered")
    reg[spec.name] = spec


__all__ = ["OpSpec", "TensorFactory", "list_ops", "op_names", "get_op", "register", "catalogue_from_module",
           "OPTIONAL_CATALOGUES"]
