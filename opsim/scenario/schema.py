"""The scenario JSON Schema (draft 2020-12), validated with the `jsonschema` library.

The schema checks structure, types, ranges and names that are fixed tables (SoC presets, behaviour profiles,
cost-model phases, environment variables). What depends on the operator catalogue (op names, dtypes, how many
input shapes an op takes, whether shapes fit) is checked afterwards by `opsim.scenario.loader`, which
reports both kinds of error together.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Iterator

from opsim.device.cost import DEVICE_PARAMS, HOST_PHASES
from opsim.device.memory import STRATEGIES
from opsim.device.soc import SOC_PRESETS
from opsim.opdev.profiles import PROFILES
from opsim.ops.profiled import profiled_ops_schema
from opsim.opdev.profiling import MASK_NAMES
from opsim.scenario.limits import INT64_MAX, MAX_EPOCH_US, MAX_HORIZON_US

ENV_VARS: dict[str, str] = {
    "ACLNN_CACHE_LIMIT": "OpExecCache capacity per thread (default 10000, clamped to 10000000)",
    "ACLNN_AICPU_CACHE_LIMIT": "AI CPU task cache limit per task space (default 32768; 0 caches nothing)",
    "GE_PROFILING_TO_STD_OUT": "timestamp text on standard output when the value starts with '1'",
    "DISABLE_L2_CACHE": "any value (even empty) disables the L2 cache hint",
    "NPU_COLLECT_PATH": "a non-empty value enables debug kernels",
    "TASK_QUEUE_ENABLE": "torch_npu task queue and PTA cache variant of `cache_mode: pta` threads: 0 no queue (V1), "
                         "1 queue (V1, torch_npu's default), 2 queue (V2)",
    "ASCEND_LAUNCH_BLOCKING": "torch_npu: 1 forces TASK_QUEUE_ENABLE to 0",
}
"""The opbase environment variables a scenario may set, as a user would export them."""

DEFAULT_EPOCH_US = 1_700_000_000_000_000
"""Epoch base (us) added to simulated time in profiler-style outputs (fixed, so outputs are reproducible)."""

PROFILER_FORMATS = ("text", "db", "both")
"""Layouts of the Ascend profiler output: torch_npu's text files, its SQLite databases, or both."""

MAX_DIMS = 8
SOC_FIELDS = tuple(next(iter(SOC_PRESETS.values())).numbers())
"""SoC numbers a scenario may override."""
NAME = {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_.\-]*$", "maxLength": 64}
DIM = {"type": "integer", "minimum": 0, "maximum": 1 << 40}
SHAPE = {"type": "array", "items": DIM, "maxItems": MAX_DIMS}
NUMBER = {"type": "number", "minimum": 0}
SHAPE_CHOICE = {"oneOf": [SHAPE, {"type": "array", "items": SHAPE, "minItems": 1}]}
"""One of `shape_choices`: a shape for every input, or one shape per input."""
COUNT = {"type": "integer", "minimum": 0, "maximum": INT64_MAX}
CACHE_MODES = ("ordinary", "pta")
"""`cache_mode`: opbase's own OpExecCache key (ordinary) or torch_npu's hash-keyed PTA path (pta)."""
STEP_KEYS = ("op", "loop", "choose", "sync", "sync_device", "record_event", "wait_event", "sleep", "profiling",
             "deterministic", "task", "tasks", "collective")
MAX_GROUP_TASKS = 100_000
"""Most device actions (tasks, event records and waits) one `tasks` step launches (a collective's sub-tasks are
hundreds; opsim's bound on one host action)."""
MAX_RANKS = 1024
"""Ranks a scenario may declare (`cluster.size`): each rank is a whole simulated NPU and host process."""
COLLECTIVES = ("allreduce", "allgather", "reducescatter", "broadcast", "alltoall", "send", "recv")
ALGORITHMS = ("auto", "ring", "mesh", "halving_doubling", "pairwise")
MAX_BYTES = 1 << 50
"""A collective's buffer bound (1 PiB): far above any device's memory, far below float precision trouble."""
PROFILING_MASK = {"type": ["integer", "array"], "minimum": 0, "maximum": (1 << 64) - 1,
                  "items": {"enum": list(MASK_NAMES)}, "minItems": 1, "uniqueItems": True}
"""A profiling switch mask: an integer, or the names of its bits (opsim.opdev.profiling.MASK_NAMES)."""
DETERMINISTIC_LEVELS = (0, 1, 2, 3)
"""The runtime's deterministic level (ACL_OPT_DETERMINISTIC): off, on, strong consistency, batch consistency."""


def _obj(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = list(required)
    return out


def _deterministic() -> dict[str, Any]:
    """The runtime's process-wide deterministic options (aclrtCtxSetSysParamOpt)."""
    return _obj({"level": {"enum": list(DETERMINISTIC_LEVELS)}, "strong_consistency": {"type": "boolean"}})


def _step_schemas() -> dict[str, Any]:
    """Step kind -> the schema of a program step of that kind."""
    op_step = _obj({
        "op": {"type": "string", "minLength": 1},
        "stream": NAME,
        "shape": SHAPE,
        "shapes": {"oneOf": [{"type": "array", "items": SHAPE, "minItems": 1},
                             {"type": "object", "additionalProperties": SHAPE, "minProperties": 1}]},
        "shape_choices": {"type": "array", "minItems": 1, "shapeChoiceItems": SHAPE_CHOICE},
        "dtype": {"type": "string"},
        "dtype_choices": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "attrs": {"type": "object"},
        "repeat": {**COUNT, "minimum": 1},
        "cache_mode": {"enum": list(CACHE_MODES)},
    }, ("op",))
    loop = _obj({"loop": _obj({"count": COUNT,
                                "body": {"$ref": "#/$defs/program"}}, ("count", "body"))}, ("loop",))
    choose = _obj({"choose": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/step"}}}, ("choose",))
    event_ref = _obj({"event": NAME, "stream": NAME}, ("event",))
    task = _obj({"stream": NAME, "kind": {"enum": ["communication", "recorded"]},
                 "name": {"type": "string", "minLength": 1, "maxLength": 256},
                 "task_type": {"type": "string", "minLength": 1, "maxLength": 64},
                 "duration_us": {**NUMBER, "maximum": MAX_HORIZON_US}}, ("kind", "duration_us"))
    steps = {
        "op": op_step,
        "loop": loop,
        "choose": choose,
        "sync": _obj({"sync": NAME}, ("sync",)),
        "sync_device": _obj({"sync_device": {"const": True}}, ("sync_device",)),
        "record_event": _obj({"record_event": event_ref}, ("record_event",)),
        "wait_event": _obj({"wait_event": event_ref}, ("wait_event",)),
        "sleep": _obj({"sleep": {**NUMBER, "maximum": MAX_HORIZON_US}}, ("sleep",)),
        "profiling": _obj({"profiling": {**_obj({"start": PROFILING_MASK, "stop": {"const": True}}),
                                         "minProperties": 1, "maxProperties": 1}}, ("profiling",)),
        "deterministic": _obj({"deterministic": {**_deterministic(), "minProperties": 1}}, ("deterministic",)),
        "task": _obj({"task": task}, ("task",)),
        "tasks": _obj({"tasks": {"type": "array", "minItems": 1, "maxItems": MAX_GROUP_TASKS, "items": {
            "type": "object", "minProperties": 1, "maxProperties": 1, "additionalProperties": False,
            "properties": {"task": task, "record_event": event_ref, "wait_event": event_ref}}}}, ("tasks",)),
    }
    steps["collective"] = _obj({
        "collective": {"enum": list(COLLECTIVES)}, "group": NAME, "peer": {"type": "integer", "minimum": 0,
                                                                           "maximum": MAX_RANKS - 1},
        "bytes": {"type": "integer", "minimum": 0, "maximum": MAX_BYTES}, "dtype": {"type": "string"},
        "stream": NAME, "name": {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_]*$", "maxLength": 64},
        "algorithm": {"enum": list(ALGORITHMS)}, "transit_us": {**NUMBER, "maximum": MAX_HORIZON_US},
        "idle_us": {**NUMBER, "maximum": MAX_HORIZON_US},
        "root": {"type": "integer", "minimum": 0, "maximum": MAX_RANKS - 1}}, ("collective", "bytes"))
    return steps


def _thread_schema() -> dict[str, Any]:
    """One entry of `threads` (or of a rank's): its program and the warm-up run before it (unprofiled)."""
    return _obj({
        "name": NAME,
        "streams": {"type": "array", "items": NAME, "minItems": 1, "uniqueItems": True},
        "cache_mode": {"enum": list(CACHE_MODES)},
        "program": {"$ref": "#/$defs/program"},
        "warmup": {"$ref": "#/$defs/program"},
    }, ("name", "program"))


def build_schema() -> dict[str, Any]:
    """The scenario schema (a fresh dict)."""
    steps = _step_schemas()
    step = {
        "type": "object",
        "anyOf": [{"required": [k]} for k in STEP_KEYS],
        "allOf": [{"if": {"required": [k]}, "then": {"$ref": f"#/$defs/step_{k}"}} for k in STEP_KEYS],
    }
    defs: dict[str, Any] = {"program": {"type": "array", "items": {"$ref": "#/$defs/step"}}, "step": step,
                            "thread": _thread_schema()}
    defs.update({f"step_{k}": v for k, v in steps.items()})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "opsim scenario",
        "$defs": defs,
        **_obj({
            "name": NAME,
            "description": {"type": "string"},
            "seed": {"type": "integer", "minimum": 0, "maximum": (1 << 63) - 1},
            "soc": {"enum": list(SOC_PRESETS)},
            "soc_overrides": _obj({f: NUMBER for f in SOC_FIELDS}),
            "profile": {"enum": list(PROFILES)},
            "env": _obj({k: {"type": ["string", "integer"]} for k in ENV_VARS}),
            "cost_overrides": _obj({k: NUMBER for k in (*HOST_PHASES, *DEVICE_PARAMS)}),
            "calibration": {"type": "string", "minLength": 1},
            "deterministic": _deterministic(),
            "numerics": {"type": "boolean"},
            "trace": {"type": "boolean"},
            "fast_path": {"type": "boolean"},
            "repredict": {"type": "boolean"},
            "share_tensors": {"type": "boolean"},
            "memory_strategy": {"enum": list(STRATEGIES)},
            "epoch_us": {"type": "integer", "minimum": 0, "maximum": MAX_EPOCH_US},
            "on_error": {"enum": ["stop", "continue"]},
            "dump": _obj({"op_dump": {"type": "boolean"}, "overflow_dump": {"type": "boolean"},
                          "dir": {"type": "string", "minLength": 1}}),
            "direct_invoke_module": {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"},
            "events": {"type": "array", "items": NAME, "uniqueItems": True},
            "streams": {"type": "array", "items": NAME, "uniqueItems": True},
            "profiled_ops": profiled_ops_schema(SHAPE, NUMBER),
            "task_queue_thread": NAME,
            "threads": {"type": "array", "items": {"$ref": "#/$defs/thread"}, "minItems": 1},
            **_cluster_schema(),
            "outputs": _obj({
                "dir": {"type": "string", "minLength": 1},
                "trace": {"type": "boolean"},
                "csv": {"type": "boolean"},
                "timestamps": {"type": "boolean"},
                "summary": {"type": "boolean"},
                "records": {"type": "boolean"},
                "profiler": {"oneOf": [{"type": "boolean"}, {"enum": list(PROFILER_FORMATS)}]},
                "step_thread": NAME,
            }),
        }, ("name", "threads")),
    }


def _cluster_schema() -> dict[str, Any]:
    """`cluster`, `groups` and `ranks`: a multi-rank job (opsim.cluster)."""
    link = _obj({"preset": {"type": "string", "minLength": 1, "maxLength": 64},
                 "bandwidth_gbps": {"type": "number", "exclusiveMinimum": 0, "maximum": 1e6},
                 "latency_us": {"type": "number", "minimum": 0, "maximum": 1e6}})
    rank_id = {"type": "integer", "minimum": 0, "maximum": MAX_RANKS - 1}
    return {
        "cluster": _obj({"size": {"type": "integer", "minimum": 1, "maximum": MAX_RANKS},
                         "ranks_per_server": {"type": "integer", "minimum": 1, "maximum": MAX_RANKS},
                         "link": link, "inter_link": link, "algorithm": {"enum": list(ALGORITHMS)},
                         "transit": {"enum": ["recorded", "model"]}}),
        "groups": {"type": "array", "maxItems": MAX_RANKS, "items": _obj({
            "name": NAME, "ranks": {"oneOf": [{"const": "all"}, {"type": "array", "rankItems": rank_id, "minItems": 1,
                                                                 "maxItems": MAX_RANKS, "uniqueItems": True}]}},
            ("name", "ranks"))},
        "ranks": {"type": "array", "maxItems": MAX_RANKS, "items": _obj({
            "threads": {"type": "array", "items": {"$ref": "#/$defs/thread"}, "minItems": 1},
            "like": rank_id, "slowdown": {"type": "number", "exclusiveMinimum": 0, "maximum": 1000}})},
    }


_VALIDATOR = None


def strict_integers(base: Any) -> Any:
    """`base`'s type checker with "integer" meaning an int (not a bool): YAML's 1.0e+308 or .inf is a float
    and never stands in for a count (jsonschema's own check takes any float with an integral value)."""
    return base.TYPE_CHECKER.redefine("integer", lambda _c, v: isinstance(v, int) and not isinstance(v, bool))


def validator():
    """A cached `jsonschema` validator of the scenario schema."""
    global _VALIDATOR
    if _VALIDATOR is None:
        import jsonschema  # lazy: keeps jsonschema out of importing opsim.scenario.schema
        schema = build_schema()
        base = jsonschema.validators.validator_for(schema)
        base.check_schema(schema)
        checker = strict_integers(base)
        _VALIDATOR = jsonschema.validators.extend(base, {"$ref": _memo_ref(base.VALIDATORS["$ref"]),
                                                         "shapeChoiceItems": _shape_choice_items,
                                                         "rankItems": _rank_items},
                                                  type_checker=checker)(schema)
    return _VALIDATOR


def _is_shape(value: Any) -> bool:
    return type(value) is list and len(value) <= MAX_DIMS and all(
        type(d) is int and 0 <= d <= DIM["maximum"] for d in value)


def _shape_choice_items(validator: Any, subschema: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """`items` of `shape_choices`, each choice first checked in plain Python (a shape, or a non-empty list of
    shapes: exactly what SHAPE_CHOICE accepts), so 100,000 choices validate in a fraction of a second instead of
    the schema's ~0.2 ms each. A choice the plain check does not accept is validated by the schema itself, so
    its error is the one `items` gives."""
    if type(instance) is not list:
        return
    for k, item in enumerate(instance):
        if _is_shape(item) or (type(item) is list and item and all(_is_shape(s) for s in item)):
            continue
        yield from validator.descend(item, subschema, path=k)


def _rank_items(validator: Any, subschema: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """`items` of a group's `ranks`, each rank id first checked in plain Python (an int, not a bool, in
    0..MAX_RANKS-1): 400 groups of 1,024 ranks took 17 s through the schema's ~40 us per item. An id the plain
    check does not accept is validated by the schema itself, so its error is the one `items` gives."""
    if type(instance) is not list:
        return
    for k, item in enumerate(instance):
        if type(item) is not int or not 0 <= item < MAX_RANKS:
            yield from validator.descend(item, subschema, path=k)


_STEP_REF = "#/$defs/step"
_VALID_STEPS: set[str] = set()
_MAX_MEMO = 100_000


def _memo_ref(ref: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    """`$ref` that validates each distinct leaf step (an op, sync, event or sleep step: no loop or choose
    inside) once per process. Large scenarios, imported ones above all, repeat the same steps thousands of
    times; a step's validity depends on nothing but its own value, so a step seen valid before is valid again.
    Invalid steps are never memoised: they are validated again, so every error keeps its full path."""
    def memo_ref(validator: Any, target: str, instance: Any, schema: Any) -> Iterator[Any]:
        key = None
        if target == _STEP_REF and isinstance(instance, dict) and "loop" not in instance \
                and "choose" not in instance:
            try:
                key = json.dumps(instance, sort_keys=True, allow_nan=False)
            except (TypeError, ValueError):
                key = None
            if key is not None and key in _VALID_STEPS:
                return
        valid = True
        for error in ref(validator, target, instance, schema):
            valid = False
            yield error
        if valid and key is not None:
            if len(_VALID_STEPS) >= _MAX_MEMO:
                _VALID_STEPS.clear()
            _VALID_STEPS.add(key)
    return memo_ref


__all__ = ["build_schema", "validator", "strict_integers", "ENV_VARS", "CACHE_MODES", "DEFAULT_EPOCH_US", "PROFILER_FORMATS", "STEP_KEYS",
           "MAX_DIMS"]
