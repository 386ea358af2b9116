"""Reading and validating a scenario: YAML (safe loading only) -> checked data -> `ScenarioConfig`.

Every error names the file, the line, the field path and what is allowed, and all errors are collected before
one `ScenarioError` is raised. The text is read by one pass over libyaml's events (opsim.yamlio.reader)
that enforces the YAML limits, builds the data as `yaml.safe_load` would and notes the line of every field;
it also rejects tags other than YAML's standard ones (a `!!python/...` tag is refused by name, nothing is
constructed) and duplicate keys. The only user code a scenario can cause to run is the module it names in
`direct_invoke_module`.

The steps live in their own modules: `source` (reading the text), `overrides` (`--set`), `messages` (error
wording), `builder` (the typed config); this module runs them in order.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from opsim.errors import InvalidArgumentError, OpsimError, ScenarioError, shown
from opsim.scenario import config
from opsim.scenario.builder import DEFAULT_STREAM, _Builder
from opsim.scenario.cluster_config import build_cluster, check_collective_time, oversized_lists
from opsim.scenario.environment import resolve_env, shell_values
from opsim.scenario.limits import Limits
from opsim.scenario.messages import Path_, _describe, _Errors, _schema_errors, _suggest, format_path
from opsim.scenario.overrides import apply_overrides, parse_key, parse_override
from opsim.scenario.schema import DEFAULT_EPOCH_US, PROFILER_FORMATS
from opsim.scenario.source import read_source
from opsim.yamlio.files import read_yaml
from opsim.yamlio.limits import MAX_FILE_BYTES, non_finite, non_string_keys
import importlib.util
import sys
from opsim.ops.profiled import profiled_specs
from opsim.ops.registry import catalogue_from_module
from opsim.scenario.checks import check_scenario


def _load_extra_ops(module: str, errors: _Errors) -> dict[str, Any]:
    try:
        return catalogue_from_module(module, "DIRECT_INVOKE_OPS", "DIRECT_INVOKE")
    except ImportError as exc:
        errors.add(("direct_invoke_module",), f"cannot import {module!r}: {exc}; the module must be importable "
                                              "(installed or on PYTHONPATH)")
    except OpsimError as exc:
        errors.add(("direct_invoke_module",), str(exc))
    except Exception as exc:  # user code: report, never crash
        errors.add(("direct_invoke_module",), f"importing {module!r} failed: {type(exc).__name__}: {exc}")
    return {}


def module_findable(name: str) -> bool:
    """True when `import name` would find the module, decided without running it or its parent packages
    (importlib.util.find_spec of a dotted name would import the parents)."""
    parts = name.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])  # a top-level name: found, not executed
        for i in range(1, len(parts)):
            if spec is None or spec.submodule_search_locations is None:
                return False
            full = ".".join(parts[:i + 1])
            module = sys.modules.get(full)
            if module is not None:
                spec = module.__spec__
                continue
            spec = next((found for finder in sys.meta_path if hasattr(finder, "find_spec")
                         for found in [finder.find_spec(full, list(spec.submodule_search_locations))]
                         if found is not None), None)
    except (ImportError, ValueError):
        return False
    return spec is not None


def load_scenario(source: str | Path | Mapping[str, Any], overrides: Mapping[str, Any] | None = None, *,
                  environ: Mapping[str, str] | None = None, limits: Limits | None = None,
                  import_modules: bool = True) -> config.ScenarioConfig:
    """Read, override and validate a scenario; raise `ScenarioError` listing every problem found.

    The documented opbase variables set in `environ` (default: this process's environment) apply under the
    scenario's `env` and the overrides (see opsim.scenario.environment). `limits` holds the call and
    numerics budgets (defaults: `opsim.scenario.limits`). With `import_modules=False` (validation)
    `direct_invoke_module` is only looked up, never imported, and the ops it may define are checked when a run
    imports it."""
    data, lines, label, path = read_source(source, (limits or Limits()).file_bytes or MAX_FILE_BYTES)
    if not isinstance(data, dict):
        raise ScenarioError(f"{label}:1: the scenario must be a mapping of fields (name, threads, ...), got "
                            f"{_describe(data)}")
    overridden = apply_overrides(data, dict(overrides or {}))
    errors = _Errors(label, lines, overridden)
    _check_values(data, errors)
    extra_ops, deferred = _extra_ops(data, errors, import_modules)
    builder = _Builder(data, errors, extra_ops, label, deferred)
    threads, names = _threads(data, builder, errors)
    in_force = _env_in_force(data, overridden, environ)
    _check_task_queue(data, names, errors)
    cluster, ranks = build_cluster(data, tuple(threads), lambda where, th: _built(builder, where, th), errors.add)
    if not errors.items:
        every = [th for r in range(cluster.size) for th in config.rank_threads(tuple(threads), ranks, r)] \
            if cluster else None
        cal = check_scenario(data, threads, errors.add, limits or Limits(), deferred_ops=bool(builder.deferred),
                             calibration=_relative(data.get("calibration"), path), every_rank=every)
        if cluster is not None and not errors.items:
            check_collective_time(data, cluster, ranks, tuple(threads), errors.add, getattr(cal, "links", None))
    errors.raise_if_any()
    scenario = _config(data, threads, path, extra_ops, {k: src for k, (_, src) in in_force.items()},
                       shell_values(environ))
    return replace(scenario, cluster=cluster, ranks=ranks) if cluster is not None else scenario


def _check_values(data: dict[str, Any], errors: _Errors) -> None:
    """Keys that are not names (raised at once: every later step expects names), non-finite numbers, then the
    schema (which skips the non-finite values already reported)."""
    for where, key in non_string_keys(data):  # `env: {5: x}`: every later step expects names
        errors.add(where, f"the key {shown(key)} is read as {type(key).__name__}; mapping keys are names: quote it")
    for where, message in oversized_lists(data):  # before the schema walks a million items
        errors.add(where, message)
    errors.raise_if_any()
    bad_numbers = set()
    for where, value in non_finite(data):
        errors.add(where, f"{value!r} is not a finite number; give a finite value")
        bad_numbers.add(where)
    _schema_errors(data, errors, bad_numbers)


def _extra_ops(data: dict[str, Any], errors: _Errors, import_modules: bool) -> tuple[dict[str, Any], str | None]:
    """(the ops `direct_invoke_module` and `profiled_ops` add, the module whose ops are checked only when a run
    imports it): the module is imported for a run, only looked up for validation."""
    extra_ops: dict[str, Any] = {}
    deferred = None
    module = data.get("direct_invoke_module")
    if isinstance(module, str) and not errors.items:
        if import_modules:
            extra_ops = _load_extra_ops(module, errors)
        elif module_findable(module):
            deferred = module
        else:
            errors.add(("direct_invoke_module",), f"module {module!r} not found; it must be importable "
                                                  "(installed or on PYTHONPATH)")
    if isinstance(data.get("profiled_ops"), dict) and not errors.items:
        extra_ops.update(profiled_specs(data["profiled_ops"], data.get("repredict") is True))
    return extra_ops, deferred


def _threads(data: dict[str, Any], builder: _Builder, errors: _Errors) -> tuple[list[config.ThreadConfig], dict[str, int]]:
    """(each thread's config, thread name -> its first index): duplicate names and an unknown
    `outputs.step_thread` reported; a malformed thread is skipped (the schema has reported it)."""
    threads: list[config.ThreadConfig] = []
    raw_threads = data.get("threads") if isinstance(data.get("threads"), list) else []
    names: dict[str, int] = {}
    for i, th in enumerate(raw_threads):
        if not isinstance(th, dict):
            continue
        name = th.get("name")
        if isinstance(name, str):
            if name in names:
                errors.add(("threads", i, "name"), f"thread name {name!r} is already used by threads[{names[name]}]; "
                                                   "thread names must be unique")
            names.setdefault(name, i)
        try:
            threads.append(builder.thread(i, th))
        except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError):
            continue  # malformed parts are already reported by the schema
    step_thread = (data.get("outputs") or {}).get("step_thread") if isinstance(data.get("outputs"), dict) else None
    if isinstance(step_thread, str) and names and step_thread not in names:
        errors.add(("outputs", "step_thread"), f"no thread is named {step_thread!r}{_suggest(step_thread, names)}; "
                                               f"use one of: {', '.join(names)}")
    return threads, names


def _env_in_force(data: dict[str, Any], overridden: set, environ: Mapping[str, str] | None) -> dict:
    """The opbase variables in force (name -> (value, source)): the shell's under the scenario's `env` and the
    `--set` ones; `data["env"]` becomes them, so the copy written next to the outputs reproduces the run."""
    in_force: dict = {}
    if isinstance(data.get("env") or {}, dict):
        set_names = {p[1] for p in overridden if len(p) == 2 and p[0] == "env"}
        set_names |= {k for p in overridden if p == ("env",) for k in (data.get("env") or {})}
        in_force = resolve_env(data.get("env") or {}, set_names, environ)
        if in_force:  # the copy written next to the outputs reproduces the run without the shell
            data["env"] = {k: v for k, (v, _) in in_force.items()}
    return in_force


def _built(builder: _Builder, where: Path_, th: Any) -> config.ThreadConfig | None:
    """A rank's own thread, built like the scenario's (None when malformed: the schema reported it)."""
    if not isinstance(th, dict):
        return None
    try:
        return builder.thread(where[-1], th, where)
    except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError):
        return None


def _check_task_queue(data: dict[str, Any], thread_names: Mapping[str, int], errors: _Errors) -> None:
    """TASK_QUEUE_ENABLE must be 0, 1 or 2 (torch_npu refuses anything else); the consumer's name is free."""
    env = data.get("env") if isinstance(data.get("env"), dict) else {}
    if "TASK_QUEUE_ENABLE" in env and str(env["TASK_QUEUE_ENABLE"]).strip() not in ("0", "1", "2"):
        errors.add(("env", "TASK_QUEUE_ENABLE"), f"TASK_QUEUE_ENABLE={env['TASK_QUEUE_ENABLE']!r} is not supported; "
                                                 "use \"0\" (no queue), \"1\" (queue, V1) or \"2\" (queue, V2)")
    consumer = data.get("task_queue_thread", "task_queue")
    if isinstance(consumer, str) and consumer in thread_names:
        errors.add(("task_queue_thread",), f"task_queue_thread {consumer!r} is also the name of "
                                           f"threads[{thread_names[consumer]}]; give the task-queue thread another name")


def _config(data: dict[str, Any], threads: list[config.ThreadConfig], path: Path | None,
            extra_ops: Mapping[str, Any], env_sources: Mapping[str, str],
            env_shell: Mapping[str, str]) -> config.ScenarioConfig:
    out = data.get("outputs") or {}
    dump = data.get("dump") or {}
    return config.ScenarioConfig(
        name=data["name"], threads=tuple(threads), description=str(data.get("description", "")),
        seed=int(data.get("seed", 0)), soc=str(data.get("soc", "Ascend910B2")),
        soc_overrides=dict(data.get("soc_overrides") or {}), profile=data.get("profile"),
        env={k: str(v) for k, v in (data.get("env") or {}).items()}, env_sources=dict(env_sources),
        env_shell=dict(env_shell),
        cost_overrides=dict(data.get("cost_overrides") or {}), numerics=bool(data.get("numerics", False)),
        calibration=_relative(data.get("calibration"), path),
        deterministic_level=int((data.get("deterministic") or {}).get("level", 0)),
        strong_consistency=bool((data.get("deterministic") or {}).get("strong_consistency", False)),
        trace=bool(data.get("trace", True)), memory_strategy=str(data.get("memory_strategy", "first_fit")),
        epoch_us=int(data.get("epoch_us", DEFAULT_EPOCH_US)), on_error=str(data.get("on_error", "stop")),
        dump=config.DumpConfig(op_dump=bool(dump.get("op_dump", False)), overflow_dump=bool(dump.get("overflow_dump", False)),
                          dir=dump.get("dir")),
        direct_invoke_module=data.get("direct_invoke_module"), events=tuple(data.get("events") or ()),
        shared_streams=tuple(data.get("streams") or ()),
        task_queue_thread=str(data.get("task_queue_thread", "task_queue")),
        fast_path=bool(data.get("fast_path", True)), share_tensors=data.get("share_tensors") is True,
        outputs=config.OutputsConfig(dir=out.get("dir"), trace=bool(out.get("trace", True)), csv=bool(out.get("csv", True)),
                                timestamps=bool(out.get("timestamps", True)), summary=bool(out.get("summary", True)),
                                records=bool(out.get("records", True)),
                                profiler=profiler_format(out.get("profiler", False)),
                                step_thread=out.get("step_thread")),
        source=path, data=data, extra_ops=dict(extra_ops))


def _relative(file: str | None, scenario: Path | None) -> str | None:
    """A path from the scenario, relative to the scenario file's directory (as written when absolute)."""
    if file is None:
        return None
    p = Path(file).expanduser()
    return str(p if p.is_absolute() or scenario is None else scenario.parent / p)


def profiler_format(value: bool | str | None) -> str:
    """`outputs.profiler` / `--profiler-output` as one of "", "text", "db", "both" (true means "text")."""
    if value is True:
        return "text"
    if value is False or value is None:
        return ""
    if value in PROFILER_FORMATS:
        return value
    raise InvalidArgumentError(f"profiler output {value!r}: use one of {', '.join(PROFILER_FORMATS)}, True or False")


def validate(source: str | Path | Mapping[str, Any], overrides: Mapping[str, Any] | None = None, *,
             environ: Mapping[str, str] | None = None, limits: Limits | None = None) -> config.ScenarioConfig:
    """`load_scenario` without running any user code (`direct_invoke_module` is looked up, not imported)."""
    return load_scenario(source, overrides, environ=environ, limits=limits, import_modules=False)


__all__ = ["load_scenario", "validate", "module_findable", "read_yaml", "read_source", "apply_overrides",
           "parse_override", "parse_key", "format_path", "DEFAULT_STREAM", "profiler_format"]
