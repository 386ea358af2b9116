"""AI CPU kernel libraries: which binary a task launches and through which runtime API (JsonLoadManger).

Per process, once: the custom-op registries named by ASCEND_CUSTOM_OPP_PATH (real JSON files on disk, read
with opbase's rules), the built-in CC kernel description (aicpu_kernel.json) and the TF kernel description
(tf_kernel.json) under ASCEND_OPP_PATH, and whether the SoC supports the "new" launch API. Per task: the
kernel library (custom registry hit, libpt_kernels.so for Index/IndexPut/LeftShift, libcpu_kernels.so
otherwise) and the launch API (the TF and CC compatibility lists force the old one).

What a built-in description contains is modelled: an op type is described when a simulated AI CPU kernel is
registered for it (`register_aicpu_kernel`), with its numerics and cost. An op type with no description
fails task Init (the runtime function lookup by op type name would fail, ACLNN_ERR_RUNTIME_ERROR), which the
registration reports as ACLNN_ERR_INNER.

Modelling choice for ASCEND_OPP_PATH: the simulated process runs on an installed CANN (its set_env.sh
sourced), so an absent variable means the default install path `DEFAULT_OPP_PATH`; an empty value stands for
"unset" and makes the description load fail like opbase's null getenv (ACLNN_ERR_PARAM_NULLPTR).
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from opsim.acl.status import AclnnStatus
from opsim.errors import InvalidArgumentError, OpsimError
from opsim.safe_io import read_bounded

log = logging.getLogger("opsim.opdev.aicpu")
S = AclnnStatus

#: kDefaultKernelSo: the CC kernel library of built-in ops.
K_DEFAULT_KERNEL_SO = "libcpu_kernels.so"
#: kPtKernelSo and the ops it serves.
K_PT_KERNEL_SO = "libpt_kernels.so"
PT_KERNEL_OPS = frozenset({"Index", "IndexPut", "LeftShift"})
#: The so name sent to the runtime for a custom-registry kernel.
K_CUSTOM_SO_NAME = "custom_sub_repository.so"
#: kDefaultFunctionName of CC kernels.
K_DEFAULT_FUNCTION_NAME = "RunCpuKernel"
#: Old launch API kernel types and flag.
KERNEL_TYPE_FWK = 1
KERNEL_TYPE_AICPU = 2
RT_KERNEL_DEFAULT_IN_AICPU = 0
#: SoC name prefix without the new launch API.
NEW_LAUNCH_UNSUPPORTED_SOC_PREFIX = "Ascend910_96"

#: Ops forced to the old launch API (aicpu_task.cpp). The guide says 10 CC ops; every revision has these 9.
TF_COMPATIBLE_OPS = frozenset({"ResizeBilinear", "ResizeNearestNeighbor", "Roll", "Max", "Min", "Mean", "Prod",
                               "Sum"})
AICPU_COMPATIBLE_OPS = frozenset({"CacheVerification", "AicpuPathwayVerification", "FaultInjection", "DataCompare",
                                  "VoltageRegulator", "Floor", "Pad", "ReduceSum", "Sigmoid"})

#: Relative paths (aicpu_json_load_manager.cpp).
AICPU_OPS_FILE = "/built-in/op_impl/aicpu/aicpu_kernel/config/aicpu_kernel.json"
TF_OPS_FILE = "/built-in/op_impl/aicpu/tf_kernel/config/tf_kernel.json"
CUSTOM_JSON_FILE = "/op_impl/cpu/config/cust_aicpu_kernel.json"
CUSTOM_SO_DIR = "/op_impl/cpu/aicpu_kernel/impl/"
#: Custom-registry entries skipped: vendor directory name and kernel so (the blacklist).
CUSTOM_BLACKLIST_DIR = "custom_aicpu_ops"
CUSTOM_BLACKLIST_SO = "libcust_cpu_kernels.so"

#: Where the simulated CANN install keeps its OPP when ASCEND_OPP_PATH is not in the process environment.
DEFAULT_OPP_PATH = "/usr/local/Ascend/ascend-toolkit/latest/opp"

#: One-time host costs (microseconds, assumed) and the phase names they are charged under. The cost model's
#: value wins when it defines the phase.
ONE_TIME_PHASES = {
    "load aicpu kernel json": 2000.0,   # parse aicpu_kernel.json (~1000 op descriptions) and register the binary
    "load tf kernel json": 2000.0,      # the same for tf_kernel.json
    "load custom aicpu registry": 300.0,  # read and parse every cust_aicpu_kernel.json
    "load custom aicpu so": 500.0,      # read a custom kernel so into memory and register it
    "get soc version": 5.0,             # aclrtGetSocName
}

CC = "cc"
TF = "tf"


# ---- simulated kernel descriptions -------------------------------------------------------------------

ComputeFn = Callable[[list, list, dict], "list | None"]
CostFn = Callable[[list, list, dict], "tuple[float, float]"]
ShapeFn = Callable[[list, list, dict], list]


@dataclass
class AicpuKernel:
    """One AI CPU kernel as its description file and binary would provide it.

    `compute(inputs, outputs, attrs)` runs the numerics on numpy-backed tensors (attrs: the task's name -> value
    map); for output-shape-dependent ops it returns the output shapes. `output_shapes(inputs, outputs, attrs)`
    gives those shapes when numerics are off. `cost(inputs, outputs, attrs)` returns (flops, bytes) for the
    cost model; the default is one flop per output element and every non-null tensor's bytes.
    """

    op_type: str
    framework: str = CC
    compute: ComputeFn | None = None
    cost: CostFn | None = None
    output_shapes: ShapeFn | None = None
    cost_by_shape: bool = False
    """`cost` reads only its tensors' descriptors and the attribute values and has no side effect: the fast
    path may reuse a launch's predicted duration while those are unchanged (opsim.opdev.memo)."""


_KERNELS: dict[tuple[str, str], AicpuKernel] = {}


def register_aicpu_kernel(kernel: AicpuKernel) -> AicpuKernel:
    """Describe `kernel.op_type` in the built-in CC (aicpu_kernel.json) or TF (tf_kernel.json) description."""
    if kernel.framework not in (CC, TF):
        raise InvalidArgumentError(f"AI CPU kernel {kernel.op_type!r}: framework must be 'cc' or 'tf', "
                                   f"got {kernel.framework!r}")
    _KERNELS[(kernel.op_type, kernel.framework)] = kernel
    return kernel


def find_aicpu_kernel(op_type: str, framework: str = CC) -> AicpuKernel | None:
    return _KERNELS.get((op_type, framework))


def default_cost(inputs: list, outputs: list, attrs: dict) -> tuple[float, float]:
    """One flop per output element, every non-null tensor read or written once."""
    nbytes = sum(t.storage_nbytes for t in inputs if t is not None)
    nbytes += sum(t.storage_nbytes for t in outputs if t is not None)
    flops = sum(t.numel() for t in outputs if t is not None)
    return float(flops), float(nbytes)


# ---- per-process state ----------------------------------------------------------------------------

@dataclass
class CustomOpInfo:
    """One custom-registry entry (OpFullInfo + the repository it came from)."""

    op_type: str
    kernel_so: str
    function_name: str
    register_path: str


@dataclass
class KernelLibState:
    """JsonLoadManger's statics for one simulated process."""

    custom_loaded: bool = False
    custom_ops: dict[str, CustomOpInfo] = field(default_factory=dict)
    custom_bins: dict[str, bytes] = field(default_factory=dict)   # so path -> cached file buffer
    aicpu_json_loaded: bool = False
    tf_json_loaded: bool = False
    soc_version: str = ""
    new_launch_supported: bool = True


def state_of(process: Any) -> KernelLibState:
    st = process.aicpu_kernel_lib
    if st is None:
        st = process.aicpu_kernel_lib = KernelLibState()
    return st


def _charge_once(ctx: Any, phase: str, op: str) -> None:
    cost = ctx.process.cost
    us = cost.host(phase) if phase in cost.host_phases() else ONE_TIME_PHASES[phase]
    ctx.charge(phase, op, us=us)


def opp_path(process: Any) -> str | None:
    """ASCEND_OPP_PATH as getenv would return it (None = unset; see the module docstring)."""
    value = process.env.get("ASCEND_OPP_PATH", DEFAULT_OPP_PATH)
    return value or None


# ---- custom registries (CustJsonLoadAndParse) ---------------------------------------------------------

def split_paths(value: str) -> list[str]:
    """SplitLine(path, ":"): the non-empty pieces."""
    return [p for p in value.split(":") if p]


def _string_to_bool(value: Any) -> bool | None:
    if not isinstance(value, str):
        return None
    low = value.lower()
    return {"true": True, "false": False}.get(low)


def parse_custom_json(text: str) -> list[tuple[str, dict]] | None:
    """ParseUnderPath + ConvertJsonFormat: (op type, opInfo) entries, or None when the file is rejected.

    The file maps op type -> {"opInfo": {...}}; every entry needs functionName, kernelSo and opKernelLib, and a
    non-empty userDefined must read "true"/"false" (any case); one bad entry rejects the file. Entries come in
    key order, as nlohmann::json iterates its std::map.
    """
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    out = []
    for op_type in sorted(doc):
        entry = doc[op_type]
        info = entry.get("opInfo") if isinstance(entry, dict) else None
        if not isinstance(info, dict):
            return None
        ud = info.get("userDefined")
        if ud not in (None, "") and _string_to_bool(ud) is None:
            return None
        if info.get("functionName") is None or info.get("kernelSo") is None or info.get("opKernelLib") is None:
            return None
        out.append((op_type, info))
    return out


MAX_CUSTOM_JSON_BYTES = 16 << 20
"""Largest custom kernel description read (a bound against devices and runaway files, not a measured size)."""
MAX_CUSTOM_SO_BYTES = 256 << 20
"""Largest custom kernel library read into a process's cache (a bound, as above)."""


def _read_user_file(path: str, limit: int, what: str) -> bytes | None:
    """A file a scenario's environment names, read through opsim.safe_io (regular files only, bounded); None
    when it cannot be read (a FIFO, a device, a NUL byte, too large, missing), which opbase reports and skips."""
    try:
        return read_bounded(path, limit, what)
    except OpsimError:
        return None


def load_custom_registry(ctx: Any, op: str = "") -> None:
    """Once per process: read every `<path>/op_impl/cpu/config/cust_aicpu_kernel.json` of
    ASCEND_CUSTOM_OPP_PATH in order; the first registration of an op type wins; failures only warn."""
    st = state_of(ctx.process)
    if st.custom_loaded:
        return
    st.custom_loaded = True
    value = ctx.process.env.get("ASCEND_CUSTOM_OPP_PATH")
    if value is None:
        return
    _charge_once(ctx, "load custom aicpu registry", op)
    for path in split_paths(value):
        json_path = path + CUSTOM_JSON_FILE
        raw = _read_user_file(json_path, MAX_CUSTOM_JSON_BYTES, "a custom AI CPU kernel description")
        text = raw.decode("utf-8", errors="replace") if raw is not None else None
        if text is None:
            log.warning("open custom op impl %s failed, do next operator repository", json_path)
            continue
        entries = parse_custom_json(text)
        if entries is None:
            log.warning("parse custom json file %s failed", json_path)
            continue
        _fill_custom_ops(st, path, entries)


def _fill_custom_ops(st: KernelLibState, register_path: str, entries: list[tuple[str, dict]]) -> None:
    dir_name = os.path.basename(register_path.rstrip("/"))
    for op_type, info in entries:
        if not op_type:
            continue
        kernel_so = str(info.get("kernelSo", ""))
        if dir_name == CUSTOM_BLACKLIST_DIR and kernel_so == CUSTOM_BLACKLIST_SO:
            log.info("custom op %s of %s skipped (blacklisted kernel so %s)", op_type, register_path, kernel_so)
            continue
        if op_type in st.custom_ops:
            log.warning("[%s] of operator repository [%s] is duplicated; keeping the first registration",
                        op_type, register_path)
            continue
        st.custom_ops[op_type] = CustomOpInfo(op_type, kernel_so, str(info.get("functionName", "")), register_path)


def custom_so_path(info: CustomOpInfo) -> str:
    return info.register_path + CUSTOM_SO_DIR + info.kernel_so


def load_custom_binary(ctx: Any, info: CustomOpInfo) -> AclnnStatus:
    """Load the custom kernel so from a per-process cached file buffer (load mode "data")."""
    st = state_of(ctx.process)
    path = custom_so_path(info)
    if path in st.custom_bins:
        return S.ACLNN_SUCCESS
    data = _read_user_file(path, MAX_CUSTOM_SO_BYTES, "a custom AI CPU kernel library") or b""
    if not data:
        log.warning("failed to read custom kernel so %s", path)
        return S.ACLNN_ERR_PARAM_NULLPTR
    _charge_once(ctx, "load custom aicpu so", info.op_type)
    st.custom_bins[path] = data
    return S.ACLNN_SUCCESS


# ---- built-in descriptions and the launch API ----------------------------------------------------------

def _load_builtin(ctx: Any, tf: bool, op: str) -> AclnnStatus:
    st = state_of(ctx.process)
    if (st.tf_json_loaded if tf else st.aicpu_json_loaded):
        return S.ACLNN_SUCCESS
    if opp_path(ctx.process) is None:
        log.error("ASCEND_OPP_PATH is not set; cannot load the AI CPU kernel description (%d)",
                  int(S.ACLNN_ERR_PARAM_NULLPTR))
        return S.ACLNN_ERR_PARAM_NULLPTR
    if ctx.process.fault("aicpu.load_json", TF_OPS_FILE if tf else AICPU_OPS_FILE):
        return S.ACLNN_ERR_RUNTIME_ERROR
    _charge_once(ctx, "load tf kernel json" if tf else "load aicpu kernel json", op)
    if tf:
        st.tf_json_loaded = True
    else:
        st.aicpu_json_loaded = True
    return S.ACLNN_SUCCESS


def load_tf_kernels(ctx: Any, op: str = "") -> AclnnStatus:
    """LoadTfBinaryFromJson: once per process (retried after a failure)."""
    return _load_builtin(ctx, True, op)


def load_aicpu_kernels(ctx: Any, op: str = "") -> AclnnStatus:
    """LoadAicpuBinaryFromJson: once per process (retried after a failure)."""
    return _load_builtin(ctx, False, op)


def set_supported_new_launch_flag(ctx: Any, op: str = "") -> AclnnStatus:
    """SetSupportedNewLaunchFlag: the SoC name once per process; "Ascend910_96..." has no new launch API."""
    st = state_of(ctx.process)
    if st.soc_version:
        return S.ACLNN_SUCCESS
    name = ctx.process.soc_name
    if not name:
        log.error("get SoC version failed (%d)", int(S.ACLNN_ERR_RUNTIME_ERROR))
        return S.ACLNN_ERR_RUNTIME_ERROR
    _charge_once(ctx, "get soc version", op)
    if name.startswith(NEW_LAUNCH_UNSUPPORTED_SOC_PREFIX):
        st.new_launch_supported = False
    st.soc_version = name
    return S.ACLNN_SUCCESS


@dataclass
class KernelSelection:
    """GetKernelNameAndSoName's result for a CC task."""

    kernel_so: str
    function_name: str
    is_custom: bool
    use_new_launch: bool
    kernel: AicpuKernel | None


def select_cc_kernel(ctx: Any, op_type: str) -> tuple[AclnnStatus, KernelSelection | None]:
    """The CC kernel library and launch API of `op_type` (custom registry first, then built-in)."""
    st = state_of(ctx.process)
    info = st.custom_ops.get(op_type)
    if info is not None:
        status = load_custom_binary(ctx, info)
        if status != S.ACLNN_SUCCESS:
            return status, None
        # A custom kernel may also have a simulated implementation (numerics, cost) under its op type.
        return S.ACLNN_SUCCESS, KernelSelection(K_CUSTOM_SO_NAME, info.function_name, True, True,
                                                find_aicpu_kernel(op_type, CC))
    so = K_PT_KERNEL_SO if op_type in PT_KERNEL_OPS else K_DEFAULT_KERNEL_SO
    status = load_aicpu_kernels(ctx, op_type)
    if status != S.ACLNN_SUCCESS:
        return status, None
    kernel = find_aicpu_kernel(op_type, CC)
    if kernel is None:
        log.error("AI CPU op %s is not in the kernel description (%s); its function cannot be found",
                  op_type, AICPU_OPS_FILE)
        return S.ACLNN_ERR_RUNTIME_ERROR, None
    use_new = op_type not in AICPU_COMPATIBLE_OPS and st.new_launch_supported
    return S.ACLNN_SUCCESS, KernelSelection(so, K_DEFAULT_FUNCTION_NAME, False, use_new, kernel)


def select_tf_kernel(ctx: Any, op_type: str) -> tuple[AclnnStatus, KernelSelection | None]:
    """TF task: load tf_kernel.json, check the SoC, choose the launch API."""
    status = load_tf_kernels(ctx, op_type)
    if status != S.ACLNN_SUCCESS:
        return status, None
    status = set_supported_new_launch_flag(ctx, op_type)
    if status != S.ACLNN_SUCCESS:
        return status, None
    kernel = find_aicpu_kernel(op_type, TF)
    if kernel is None:
        log.error("TF op %s is not in the kernel description (%s); its function cannot be found",
                  op_type, TF_OPS_FILE)
        return S.ACLNN_ERR_RUNTIME_ERROR, None
    use_new = op_type not in TF_COMPATIBLE_OPS and state_of(ctx.process).new_launch_supported
    return S.ACLNN_SUCCESS, KernelSelection("", op_type, False, use_new, kernel)


__all__ = [
    "K_DEFAULT_KERNEL_SO", "K_PT_KERNEL_SO", "PT_KERNEL_OPS", "K_CUSTOM_SO_NAME", "K_DEFAULT_FUNCTION_NAME",
    "KERNEL_TYPE_FWK", "KERNEL_TYPE_AICPU", "RT_KERNEL_DEFAULT_IN_AICPU", "NEW_LAUNCH_UNSUPPORTED_SOC_PREFIX",
    "TF_COMPATIBLE_OPS", "AICPU_COMPATIBLE_OPS", "DEFAULT_OPP_PATH", "CC", "TF", "AicpuKernel", "CustomOpInfo",
    "KernelLibState", "KernelSelection", "register_aicpu_kernel", "find_aicpu_kernel", "default_cost", "state_of",
    "opp_path", "split_paths", "parse_custom_json", "load_custom_registry", "custom_so_path", "load_custom_binary",
    "load_tf_kernels", "load_aicpu_kernels", "set_supported_new_launch_flag", "select_cc_kernel", "select_tf_kernel",
]
