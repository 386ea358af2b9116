"""Profiled ops: an API seen in a real profile, replayed through opbase's rules with the profile's timings.

A scenario's `profiled_ops:` section defines them (`opsim import` writes it; a user may edit it). Each entry
is one ACLNN API (or one old-style `aclop` single-op call) with the variants the profile showed: their input
shapes and dtype, workspace size and launch list (the kernels seen, with block dim, task type and duration).

An `aclnn` profiled op follows opbase: phase 1 goes through L2_DFX_PHASE_1 (OpExecCache key from the API name,
the input tensors and the variant number), CREATE_EXECUTOR, one AI Core launcher per kernel seen, workspace
planning and ReleaseTo; phase 2 is CommonOpExecutorRun. A cache hit replays the recorded tasks, exactly as for
a built-in op. Each kernel's device time is the recorded duration while the call keeps the recorded shapes;
with other shapes (a what-if) it is scaled by the element count (bytes moved by an elementwise-like kernel).

Host time: opsim charges its modelled phases; the profile's median phase-1 (on a miss) and phase-2 host times
(`host_us`) are reached by charging the remainder as a `profiled host` span, so the replayed
`aclnnXxxGetWorkspaceSize` / `aclnnXxx` durations are the profile's. An `aclop` op has no phase 1: its one
call (`aclopCompileAndExecute` in the profile) charges its recorded host time and launches its kernels.
"""
from __future__ import annotations

import math
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from opsim.acl.status import AclnnStatus
from opsim.opdev.kernel import AiCoreKernel, TilingResult, find_aicore_kernel, register_aicore_kernel
from opsim.opdev.thread_local import A_SPAN, current
from opsim.ops.registry import OpSpec
from opsim.opdev.op_args import op_attr, op_input, op_output

PROFILED_HOST = "profiled host"
"""Host phase of the time a profile recorded beyond opsim's modelled phases (phase 1 on a miss, phase 2)."""

KINDS = ("aclnn", "aclop")
TASK_TYPES = ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU", "DSA_SQE", "PCIE_DMA_SQE", "SDMA_SQE")
"""Task types a profiled kernel may carry: the cores, and the tasks torch_npu's device rows give a call beside
its kernels (DSA_SQE: a DSA kernel such as DSAGenBitMask; PCIE_DMA_SQE / SDMA_SQE: the MEMCPY_ASYNC copies
opbase issues inside a call), each replayed on its own unit (opsim.opdev.rt.submit_kernel)."""
DTYPES = ("float", "float16", "bf16", "int32", "int64", "int8", "uint8", "bool", "double", "int16")
S = AclnnStatus


def _tiling(ins: list, outs: list, attrs: list) -> TilingResult:
    """Launch parameters from the recorded kernel (attrs: duration, block dim, task type, recorded elements,
    workspace bytes, op type, repredict, and its recorded flops, bytes and element size, -1 if unknown). With the recorded shapes the duration is the recorded one, unless the
    scenario says `repredict: true`; with other shapes (a what-if) or `repredict`, a kernel of known op type asks
    the cost model's predictor (calibration, built-in fits, family model, roofline) on the run's SoC; one of
    unknown type scales its duration with the element count."""
    duration, block_dim, task_type, recorded, workspace, op_type = attrs[:6]
    repredict = len(attrs) > 9 and bool(attrs[6])
    work = tuple(attrs[7:10]) if repredict and attrs[7] >= 0 else None
    numel = sum(t.numel() for t in ins if t is not None)
    ws = [int(workspace)] if workspace else []
    reshaped = recorded > 0 and numel != recorded
    if op_type and (repredict or reshaped):
        duration = _predicted(str(op_type), str(task_type), int(block_dim), ins, outs, None if reshaped else work)
    elif reshaped:
        duration = float(duration) * numel / recorded
    return TilingResult(block_dim=int(block_dim), workspace_sizes=ws, tiling_data_size=64, duration=float(duration),
                        task_type=str(task_type))


def _predicted(op_type: str, task_type: str, block_dim: int, ins: Sequence[Any], outs: Sequence[Any],
               work: Sequence[float] | None = None) -> float:
    """The device-time predictor's duration of one kernel (opsim.device.predictor) on the run's SoC: from its
    recorded `work` (flops, bytes, element size of its kernel_details.csv row) when given, else counted over
    the call's tensors."""
    cost = current().process.cost
    if work:
        flops, nbytes, itemsize = work
        return cost.kernel(op_type, task_type, float(flops), float(nbytes), block_dim, itemsize=float(itemsize))
    flops, nbytes = _work(op_type, list(ins), list(outs))
    return cost.kernel(op_type, task_type, flops, nbytes, block_dim)


def _work(op_type: str, ins: list, outs: list) -> tuple[float, float]:
    """(flops, bytes moved) of a launch, counted as the calibration counts a profile row."""
    # lazy: keeps ijson, sqlite3, SimPy, decimal out of importing opsim.ops.profiled
    from opsim.calibration.features import MATMUL_TYPES, matmul_flops
    ins = [t for t in ins if t is not None]
    outs = [t for t in outs if t is not None]
    nbytes = float(sum(t.storage_nbytes for t in ins + outs))
    if op_type in MATMUL_TYPES:
        return matmul_flops(tuple(tuple(t.view_shape) for t in ins), tuple(tuple(t.view_shape) for t in outs)), nbytes
    return float(max([t.numel() for t in ins + outs] or [0])), nbytes


def kernel_type(name: str) -> str:
    """The L0 op type a profiled kernel is registered under: its recorded name, unless a modelled kernel has it."""
    existing = find_aicore_kernel(name)
    if existing is not None and existing.tiling is not _tiling:
        return "Profiled_" + name
    if existing is None:
        register_aicore_kernel(AiCoreKernel(name, _tiling, tiling_by_shape=True))
    return name


def _spent_since(ctx: Any, start: int) -> float:
    return sum(a[3] for a in ctx.actions[start:] if a[0] == A_SPAN)


def _charge_rest(ctx: Any, start: int, target: float | None) -> None:
    if target is None:
        return
    rest = target - _spent_since(ctx, start)
    if rest > 0:
        ctx.charge(PROFILED_HOST, us=rest)


class ProfiledOp:
    """One profiled API: its two-phase functions over the variants a profile recorded."""

    def __init__(self, name: str, entry: Mapping[str, Any], repredict: bool = False):
        self.name = name
        self.repredict = repredict
        """Kernels of known op type take the predictor's duration even at the recorded shapes (a SoC what-if)."""
        self.api = str(entry.get("api", name))
        self.phase1_api = str(entry.get("phase1_api", self.api))
        self.kind = str(entry.get("kind", "aclnn"))
        host = entry.get("host_us") or {}
        self.phase1_us = _opt_float(host.get("phase1"))
        self.phase2_us = _opt_float(host.get("phase2"))
        self.variants = [dict(v) for v in entry.get("variants") or [{}]]
        for v in self.variants:
            v.setdefault("kernels", [])
        self.n_inputs = max(len(v.get("shapes") or [[1]]) for v in self.variants)

    # ---- the OpSpec ------------------------------------------------------------------------------------
    def spec(self) -> OpSpec:
        dtypes = sorted({str(v.get("dtype", "float")) for v in self.variants} | {"float"},
                        key=lambda d: (d != self.variants[0].get("dtype", "float"), d))
        return OpSpec(
            name=self.name, api=self.api, launchers=("AI_CORE",), dtypes=tuple(dtypes),
            inputs=tuple(f"x{i}" for i in range(self.n_inputs)), attrs=MappingProxyType({"variant": 0}),
            infer=self._infer, build=self._build, get_workspace_size=self.get_workspace_size, run=self.run,
            description=f"profiled {self.kind} API {self.api}: {len(self.variants)} variant(s)",
            attr_types=MappingProxyType({"variant": int}))

    def _infer(self, shapes: list, attrs: Mapping[str, Any]) -> list | str:
        v = int(attrs.get("variant", 0))
        if not 0 <= v < len(self.variants):
            return f"variant {v} does not exist; {self.name} has variants 0..{len(self.variants) - 1}"
        return [tuple(shapes[0])]

    def _build(self, make: Any, ins: list, dtype: Any, attrs: Mapping[str, Any], out_shapes: list) -> tuple:
        outs = [make(s, dtype, "output") for s in out_shapes]
        return (int(attrs.get("variant", 0)), *ins, *outs)

    # ---- phase 1 / phase 2 --------------------------------------------------------------------------------
    def get_workspace_size(self, variant: int, *tensors: Any) -> tuple[AclnnStatus, int, Any]:
        if self.kind == "aclop":
            return S.ACLNN_SUCCESS, 0, ("aclop", variant, tensors[:self.n_inputs], tensors[self.n_inputs:])
        from opsim.opdev.op_exec_cache import OpExecCacheWrap  # lazy: keeps SimPy out of importing opsim.ops.profiled
        from opsim.ops import _common as common  # lazy: keeps SimPy out of importing opsim.ops.profiled
        ctx = current()
        start = len(ctx.actions)
        ins, outs = tensors[:self.n_inputs], tensors[self.n_inputs:]
        status, size, executor = common.l2_phase_1(self.phase1_api, (*ins, variant), tuple(outs), lambda: S.ACLNN_SUCCESS,
                                              lambda ex: self._launchers(ex, variant, ins, outs))
        if status == S.ACLNN_SUCCESS and not isinstance(executor, OpExecCacheWrap):
            _charge_rest(ctx, start, self.phase1_us)
        return status, size, executor

    def _launchers(self, executor: Any, variant: int, ins: Sequence[Any], outs: Sequence[Any]) -> AclnnStatus:
        from opsim.opdev.dfx import l0_dfx  # lazy: keeps SimPy out of importing opsim.ops.profiled
        # lazy: keeps SimPy out of importing opsim.ops.profiled
        from opsim.opdev.launchers import add_to_launcher_list_aicore
        v = self.variants[variant]
        recorded = _recorded_numel(v, self.n_inputs)
        last = len(v["kernels"]) - 1  # the last kernel writes the outputs (no output written twice)
        for i, k in enumerate(v["kernels"]):
            op_type = kernel_type(str(k["name"]))
            ws = int(v.get("workspace_bytes", 0)) if i == 0 else 0
            with l0_dfx(op_type, executor):
                status = add_to_launcher_list_aicore(
                    op_type, executor, op_input(*ins), op_output(*(outs if i == last else ())),
                    op_attr(float(k.get("duration_us", 0.0)), int(k.get("block_dim", 1)),
                            str(k.get("task_type", "AI_CORE")), recorded, ws, str(k.get("type", "")),
                            self.repredict, *(_recorded_work(k) or (-1.0, -1.0, -1.0))))
            if status != S.ACLNN_SUCCESS:
                return status
        return S.ACLNN_SUCCESS

    def run(self, workspace: int, workspace_size: int, executor: Any, stream: Any) -> AclnnStatus:
        ctx = current()
        start = len(ctx.actions)
        target = self.phase2_us
        if self.kind == "aclop":
            status = self._aclop_run(ctx, executor, stream)
            own = (self.variants[executor[1]].get("host_us") or {}).get("phase2")
            target = target if own is None else float(own)
        else:
            from opsim.ops import _common as common  # lazy: keeps SimPy out of importing opsim.ops.profiled
            status = common.l2_phase_2(self.api, workspace, workspace_size, executor, stream)
        _charge_rest(ctx, start, target)
        return status

    def _aclop_run(self, ctx: Any, executor: tuple, stream: Any) -> AclnnStatus:
        """aclopCompileAndExecute: the single-op call launches the recorded kernels (no opbase executor); with
        `repredict` a kernel of known op type takes the predictor's duration over the call's tensors."""
        from opsim.opdev import rt  # lazy: keeps SimPy out of importing opsim.ops.profiled
        _, variant, ins, outs = executor
        ctx.current_op = self.api
        ctx.charge("L2 phase2 entry")
        for k in self.variants[variant]["kernels"]:
            task_type, block_dim = str(k.get("task_type", "AI_CORE")), int(k.get("block_dim", 1))
            op_type = k.get("type")
            duration = _predicted(str(op_type), task_type, block_dim, ins, outs, _recorded_work(k)) \
                if self.repredict and op_type else float(k.get("duration_us", 0.0))
            rt.submit_kernel(ctx, stream, str(k["name"]), task_type, block_dim, duration)
        return S.ACLNN_SUCCESS


def _recorded_work(kernel: Mapping[str, Any]) -> tuple[float, float, float] | None:
    """A profiled kernel's `work` (flops, bytes, itemsize), None when the scenario gives none."""
    w = kernel.get("work")
    if not isinstance(w, Mapping):
        return None
    return float(w.get("flops", 0.0)), float(w.get("bytes", 0.0)), float(w.get("itemsize", 2.0))


def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v)


def _recorded_numel(variant: Mapping[str, Any], n_inputs: int) -> int:
    shapes = variant.get("shapes") or [[1]] * n_inputs
    return sum(math.prod(int(d) for d in s) for s in shapes)


def profiled_specs(section: Mapping[str, Any], repredict: bool = False) -> dict[str, OpSpec]:
    """The OpSpecs of a scenario's `profiled_ops:` section (name -> spec); `repredict`: the scenario's key of
    that name (kernels of known op type re-predicted on the run's SoC instead of their recorded durations)."""
    return {name: ProfiledOp(name, entry, repredict).spec() for name, entry in section.items()}


def profiled_ops_schema(shape: Mapping[str, Any], number: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema of the `profiled_ops:` section (shape and number schemas from the scenario schema)."""
    def obj(props: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
        if required:
            out["required"] = list(required)
        return out

    kernel = obj({"name": {"type": "string", "minLength": 1}, "type": {"type": "string"},
                  "task_type": {"enum": list(TASK_TYPES)}, "core": {"type": "string"},
                  "block_dim": {"type": "integer", "minimum": 1}, "duration_us": number,
                  "stream": {"type": "integer"},
                  "work": obj({"flops": number, "bytes": number,
                               "itemsize": {"type": "number", "exclusiveMinimum": 0, "maximum": 16}})},
                 ("name", "duration_us"))
    variant = obj({"shapes": {"type": "array", "items": shape, "minItems": 1}, "dtype": {"enum": list(DTYPES)},
                   "workspace_bytes": {"type": "integer", "minimum": 0}, "calls": {"type": "integer", "minimum": 0},
                   "host_us": obj({"phase2": number}),
                   "kernels": {"type": "array", "items": kernel}})
    entry = obj({"api": {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_]*$"},
                 "phase1_api": {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_]*$"},
                 "kind": {"enum": list(KINDS)}, "host_us": obj({"phase1": number, "phase2": number}),
                 "variants": {"type": "array", "items": variant, "minItems": 1}}, ("api", "variants"))
    return {"type": "object", "additionalProperties": entry}


__all__ = ["ProfiledOp", "profiled_specs", "profiled_ops_schema", "PROFILED_HOST", "KINDS", "TASK_TYPES",
           "kernel_type"]
