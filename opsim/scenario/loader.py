"""Reading and validating a scenario: YAML (safe loading only) -> checked data -> `ScenarioConfig`.

Every error names the file, the line, the field path and what is allowed, and all errors are collected before
one `ScenarioError` is raised. The text is read by one pass over libyaml's events (opsim.scenario.yaml_reader)
that enforces the YAML limits, builds the data as `yaml.safe_load` would and notes the line of every field;
it also rejects tags other than YAML's standard ones (a `!!python/...` tag is refused by name, nothing is
constructed) and duplicate keys. The only user code a scenario can cause to run is the module it names in
`direct_invoke_module`.
"""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from opsim.errors import InvalidArgumentError, OpsimError, ScenarioError
from opsim.scenario import config as C
from opsim.scenario.environment import resolve_env, shell_values
from opsim.scenario.limits import (INT64_MAX, MAX_FILE_BYTES, MAX_HORIZON_US, LimitError, Limits, check_data,
                                   check_yaml_events, non_finite)
from opsim.scenario.yaml_reader import AS_WRITTEN, LOADER, Problem, read_document
from opsim.scenario.schema import DEFAULT_EPOCH_US, PROFILER_FORMATS, STEP_KEYS, validator
from opsim.scenario.yaml_core import parse_as_written, parse_core_scalar

Path_ = tuple  # a field path: keys and list indices

DEFAULT_STREAM = "default"
MAX_ERRORS = 50


# ---- paths and messages ---------------------------------------------------------------------------------

def format_path(path: Iterable[Any]) -> str:
    """("threads", 0, "program", 1, "op") -> "threads[0].program[1].op"."""
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out or "(top level)"


class _Errors:
    """Collects "file:line: path: message" entries."""

    def __init__(self, label: str, lines: Mapping[Path_, int], overridden: set[Path_]):
        self.label = label
        self.lines = lines
        self.overridden = overridden
        self.items: list[tuple[int, str]] = []

    def line_of(self, path: Path_) -> int | None:
        path = tuple(path)
        while True:
            line = self.lines.get(path)
            if line is not None:
                return line
            if not path:
                return None
            path = path[:-1]

    def add(self, path: Iterable[Any], message: str) -> None:
        path = tuple(path)
        where = self.label
        if any(path[:len(o)] == o for o in self.overridden):
            where += " (--set)"
        else:
            line = self.line_of(path)
            if line is not None:
                where += f":{line}"
        entry = f"{where}: {format_path(path)}: {message}"
        if entry not in (e for _, e in self.items):
            self.items.append((self.line_of(path) or 0, entry))

    def raise_if_any(self) -> None:
        if self.items:
            entries = [e for _, e in sorted(self.items, key=lambda x: x[0])]
            more = len(entries) - MAX_ERRORS
            entries = entries[:MAX_ERRORS] + ([f"... and {more} more"] if more > 0 else [])
            head = f"{self.label}: {len(self.items)} error{'s' if len(self.items) > 1 else ''} in the scenario"
            raise ScenarioError(head + ":\n  " + "\n  ".join(entries) if len(entries) > 1 else entries[0])


def _suggest(word: Any, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


# ---- reading ----------------------------------------------------------------------------------------

_WHY_TAG = {
    True: ("scenarios are plain data read with yaml.safe_load and never construct Python objects; to run your own "
           "DirectInvoke producers name their module in `direct_invoke_module`"),
    False: "only YAML's standard tags (strings, numbers, booleans, null, lists, mappings) are allowed",
}


def _problem(problem: Problem, label: str) -> tuple[int, str]:
    """The (line, entry) of a node PyYAML accepts but a scenario may not have."""
    where = f"{label}:{problem.line}: "
    if problem.kind == "tag":
        shown = problem.detail.replace("tag:yaml.org,2002:", "!!")
        why = _WHY_TAG["python/" in problem.detail]
        return problem.line, f"{where}{format_path(problem.path)}: the tag {shown} is not allowed: {why}"
    if problem.kind == "key":
        return problem.line, f"{where}{format_path(problem.path)}: mapping keys must be plain names"
    return problem.line, (f"{where}{format_path(problem.path)}: duplicate key {problem.detail!r} "
                          "(each field once)")


def read_yaml(text: str, label: str) -> tuple[Any, Mapping[Path_, int]]:
    """Parse scenario text: (data, field path -> line). Raises ScenarioError on syntax errors and bad tags.

    One pass over libyaml's events checks the limits and builds the data and the line map
    (opsim.scenario.yaml_reader); PyYAML composes and constructs only what that pass leaves to it (composer
    errors, merge keys, explicit tags other than the core scalar ones)."""
    try:
        doc = read_document(text)  # bounded before anything is built (see opsim.scenario.limits)
    except LimitError as exc:
        raise ScenarioError(f"{label}{f':{exc.line}' if exc.line else ''}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ScenarioError(_yaml_error(_python_parser_error(text, exc), label)) from None
    node = None
    loader = None if doc.built else LOADER(text)
    try:
        if loader is not None:
            try:
                node = loader.get_single_node()
            except yaml.YAMLError as exc:
                raise ScenarioError(_yaml_error(_python_parser_error(text, exc), label)) from None
        if doc.empty:
            raise ScenarioError(f"{label}: the scenario is empty; it needs at least `name` and `threads`")
        errors = _Errors(label, doc.lines, set())
        errors.items.extend(_problem(p, label) for p in doc.problems)
        errors.raise_if_any()
        if loader is None:
            data, as_written = doc.data, doc.env_as_written
        else:
            try:
                data = loader.construct_document(node)  # as yaml.safe_load would build it
            except yaml.YAMLError as exc:
                raise ScenarioError(f"{label}: YAML error: {exc}") from None
            as_written = _env_pairs(node)
    finally:
        if loader is not None:
            loader.dispose()
    if isinstance(data, dict) and isinstance(data.get("env"), dict):
        for key, written in as_written:
            data["env"][key] = written
    return data, doc.lines


def _python_parser_error(text: str, exc: yaml.YAMLError) -> yaml.YAMLError:
    """The error PyYAML's own parser reports for `text`: libyaml words syntax errors differently, and opsim's
    messages (and their tests) follow PyYAML's wording. Falls back to `exc` if that parser accepts the text."""
    if LOADER is yaml.SafeLoader:
        return exc
    try:
        yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as py_exc:
        return py_exc
    return exc


def _yaml_error(exc: yaml.YAMLError, label: str) -> str:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"{label}:{mark.line + 1}:{mark.column + 1}" if mark else label
        problem = " ".join(x for x in (exc.context, exc.problem) if x) or str(exc)
        return f"{where}: YAML syntax error: {problem}"
    return f"{label}: YAML syntax error: {exc}"


def _env_pairs(node: yaml.Node) -> list[tuple[str, str]]:
    """Environment values are strings as written (``ACLNN_CACHE_LIMIT: 010`` is "010", not YAML 1.1's octal
    8): (key, source text) of the top-level `env` mapping's plain int, float and bool scalars in a composed
    and constructed node graph (null stays null: the schema reports it)."""
    if not isinstance(node, yaml.MappingNode):
        return []
    for key_node, value_node in node.value:
        if getattr(key_node, "value", None) == "env" and isinstance(value_node, yaml.MappingNode):
            return [(k.value, v.value) for k, v in value_node.value
                    if isinstance(v, yaml.ScalarNode) and v.tag in AS_WRITTEN]
    return []


def read_source(source: str | Path | Mapping[str, Any]) -> tuple[Any, Mapping[Path_, int], str, Path | None]:
    """(data, lines, label, path) of a scenario file or an in-memory dict."""
    if isinstance(source, Mapping):
        try:
            check_data(source)
        except LimitError as exc:
            raise ScenarioError(f"<scenario>: {exc}") from None
        return _plain(source), {}, "<scenario>", None
    if not isinstance(source, (str, Path)):
        raise ScenarioError(f"a scenario is a YAML file path or a dict, got {type(source).__name__}")
    path = Path(source)
    label = str(source)
    if not path.exists():
        raise ScenarioError(f"{label}: scenario file not found (check the path; bundled scenarios are in "
                            "scenarios/)")
    if path.is_dir():
        raise ScenarioError(f"{label}: is a directory; give the path of a scenario .yaml file")
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise ScenarioError(f"{label}: larger than the limit of {MAX_FILE_BYTES >> 20} MiB for a scenario file")
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{label}: not UTF-8 text (byte {exc.start}); scenarios are UTF-8 YAML") from None
    except OSError as exc:
        raise ScenarioError(f"{label}: cannot read the file: {exc.strerror or exc}") from None
    data, lines = read_yaml(text, label)
    return data, lines, label, path


def _plain(obj: Any) -> Any:
    """A deep copy of dict/list data (so overrides never touch the caller's dict)."""
    if isinstance(obj, Mapping):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


# ---- overrides --------------------------------------------------------------------------------------

def parse_key(key: str) -> Path_:
    """"threads.0.program[1].loop.count" -> ("threads", 0, "program", 1, "loop", "count")."""
    path: list[Any] = []
    for part in key.replace("[", ".").replace("]", "").split("."):
        if part == "":
            raise ScenarioError(f"--set {key}: empty field name in the key (use dots between names, "
                                "e.g. threads.0.program.0.loop.count)")
        path.append(int(part) if part.isdigit() else part)
    return tuple(path)


def parse_override(text: str) -> tuple[str, Any]:
    """"key=value" with the value read as a YAML 1.2 core scalar or flow collection ("5", "true", "[1, 2]").
    Environment values are strings, as in a real environment: ``env.NAME=010`` is the text "010", and the
    values of ``env={...}`` are kept as written."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ScenarioError(f"--set {text!r}: expected key=value, e.g. --set seed=3 or "
                            "--set env.GE_PROFILING_TO_STD_OUT=1")
    try:
        check_yaml_events(value)  # the same depth and alias limits as a scenario file
    except LimitError as exc:
        raise ScenarioError(f"--set {key}: {exc}") from None
    except yaml.YAMLError:
        pass
    if key.startswith("env.") or key.startswith("env["):
        return key, value
    return key, parse_as_written(value) if key == "env" else parse_core_scalar(value)


def apply_overrides(data: Any, overrides: Mapping[str, Any]) -> set[Path_]:
    """Set each dotted key in `data` (creating mappings on the way); returns the paths set."""
    done: set[Path_] = set()
    if not isinstance(data, dict):
        return done
    for key, value in overrides.items():
        path = parse_key(key) if isinstance(key, str) else tuple(key)
        try:
            check_data(value)
        except LimitError as exc:
            raise ScenarioError(f"--set {key}: {exc}") from None
        node: Any = data
        for i, part in enumerate(path[:-1]):
            if isinstance(node, dict):
                node = node.setdefault(part, [] if isinstance(path[i + 1], int) else {})
            elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                node = node[part]
            else:
                raise ScenarioError(f"--set {key}: {format_path(path[:i + 1])} does not exist in the scenario")
        last = path[-1]
        if isinstance(node, dict):
            node[last] = _plain(value)
        elif isinstance(node, list) and isinstance(last, int) and last <= len(node):
            if last == len(node):
                node.append(_plain(value))
            else:
                node[last] = _plain(value)
        else:
            raise ScenarioError(f"--set {key}: {format_path(path)} cannot be set (its parent is not a mapping "
                                "or the list index is out of range)")
        done.add(path)
    return done


# ---- schema errors -----------------------------------------------------------------------------------

def _schema_errors(data: Any, errors: _Errors, skip: set[Path_] = frozenset()) -> None:
    """Report schema violations, except at `skip` (paths already reported)."""
    from jsonschema.exceptions import best_match
    for err in validator().iter_errors(data):
        if tuple(err.absolute_path) not in skip:
            _report(err, errors, best_match)


def _allowed_props(schema: Mapping[str, Any]) -> list[str]:
    return list((schema.get("properties") or {}).keys())


def _report(err: Any, errors: _Errors, best_match: Any) -> None:
    path = tuple(err.absolute_path)
    kind = err.validator
    inst = err.instance
    if kind == "additionalProperties" and isinstance(inst, dict):
        allowed = _allowed_props(err.schema)
        for k in inst:
            if k not in allowed:
                errors.add(path + (k,), f"unknown field {k!r}{_suggest(k, allowed)}; allowed fields: "
                                        f"{', '.join(allowed)}")
        return
    if kind == "anyOf" and isinstance(err.schema.get("anyOf"), list) and \
            all(set(s) == {"required"} for s in err.schema["anyOf"]):
        keys = list(inst) if isinstance(inst, dict) else []
        hint = "".join(_suggest(k, STEP_KEYS) for k in keys[:1])
        errors.add(path, f"a program step needs one of the keys {', '.join(STEP_KEYS)}; got "
                         f"{', '.join(map(str, keys)) or 'nothing'}{hint}")
        return
    if kind in ("oneOf", "anyOf") and err.context:
        sub = _negative_dim(err) or best_match(err.context)
        if sub is not None:
            _report(sub, errors, best_match)
            return
    if kind == "required":
        missing = [k for k in err.validator_value if not isinstance(inst, dict) or k not in inst]
        for k in missing:
            errors.add(path, f"missing required field {k!r}")
        return
    if kind == "enum":
        allowed = err.validator_value
        errors.add(path, f"{inst!r} is not allowed{_suggest(inst, map(str, allowed))}; use one of: "
                         f"{', '.join(map(str, allowed))}")
        return
    if kind == "type":
        want = err.validator_value
        want = " or ".join(want) if isinstance(want, list) else want
        errors.add(path, f"expected {_article(want)}, got {_describe(inst)}")
        return
    if kind == "minimum" and path and (isinstance(path[-1], int)) and any(
            p in ("shape", "shapes", "shape_choices") for p in path if isinstance(p, str)):
        errors.add(path, f"negative dimension {inst}; every dimension must be >= 0")
        return
    if kind in ("minimum", "maximum"):
        errors.add(path, f"{inst!r} is out of range; the value must be {'>=' if kind == 'minimum' else '<='} "
                         f"{err.validator_value}")
        return
    if kind == "pattern":
        errors.add(path, f"{inst!r} is not a valid name; use letters, digits, '_', '.' or '-' and start with a "
                         "letter or '_'")
        return
    if kind == "const":
        errors.add(path, f"must be {err.validator_value!r}, got {inst!r}")
        return
    if kind == "minItems":
        errors.add(path, f"needs at least {err.validator_value} item(s), got {len(inst)}")
        return
    if kind == "maxItems":
        errors.add(path, f"has {len(inst)} items; at most {err.validator_value} are allowed")
        return
    errors.add(path, err.message)


def _article(t: str) -> str:
    return {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
            "number": "a number", "boolean": "true or false"}.get(t, t)


def _describe(v: Any) -> str:
    if isinstance(v, bool):
        return f"boolean {v}"
    if isinstance(v, dict):
        return "a mapping"
    if isinstance(v, list):
        return "a list"
    if v is None:
        return "nothing (null)"
    return f"{type(v).__name__} {v!r}"


# ---- catalogue checks and the typed config -------------------------------------------------------

def _dtype_name(name: str) -> str | None:
    if name.__class__ is str and name in _DTYPE_NAMES:
        return _DTYPE_NAMES[name]
    from opsim.acl.dtypes import DataType
    try:
        short = DataType.parse(name).short_name
    except InvalidArgumentError:
        short = None
    if name.__class__ is str and len(_DTYPE_NAMES) < 4096:
        _DTYPE_NAMES[name] = short
    return short


_DTYPE_NAMES: dict[str, str | None] = {}
"""Dtype names as written -> short names (None: not a dtype); a scenario names the same few thousands of times."""


class _Builder:
    """Checks what the schema cannot (ops, dtypes, shapes, stream and event names) and builds the config."""

    def __init__(self, data: dict[str, Any], errors: _Errors, extra_ops: Mapping[str, Any], label: str,
                 deferred_module: str | None = None):
        self.data = data
        self.errors = errors
        self.extra_ops = extra_ops
        self.label = label
        self.deferred_module = deferred_module
        """The direct_invoke_module found but not imported (validation): ops it may define are not checked."""
        self.deferred: list[str] = []
        events = data.get("events")  # a malformed value is reported by the schema; build with what is usable
        self.events = tuple(e for e in events if isinstance(e, str)) if isinstance(events, list) else ()
        shared = data.get("streams")
        self.shared_streams = tuple(s for s in shared if isinstance(s, str)) if isinstance(shared, list) else ()
        self.thread_mode = "ordinary"  # `cache_mode` of the thread being built
        self._op_steps: dict[tuple, C.OpStep] = {}
        """Op steps built without a problem, by what they were built from (see `op_step`)."""

    def thread(self, i: int, th: Mapping[str, Any]) -> C.ThreadConfig:
        own = tuple(th.get("streams") or ())
        shared = tuple(s for s in self.shared_streams if s not in own)
        streams = own + shared or (DEFAULT_STREAM,)
        path = ("threads", i)
        self.thread_mode = th.get("cache_mode", "ordinary")
        program = self.program(th.get("program") or [], path + ("program",), streams)
        return C.ThreadConfig(name=str(th.get("name")), streams=streams, program=program,
                              cache_mode=str(th.get("cache_mode", "ordinary")))

    def program(self, steps: list, path: Path_, streams: tuple[str, ...]) -> tuple:
        out = []
        for j, step in enumerate(steps):
            built = self.step(step, path + (j,), streams)
            if built is not None:
                out.append(built)
        return tuple(out)

    def step(self, step: Any, path: Path_, streams: tuple[str, ...]) -> Any:
        if not isinstance(step, dict):
            return None
        if "op" in step:
            return self.op_step(step, path, streams)
        if "loop" in step and isinstance(step["loop"], dict):
            lp = step["loop"]
            body = self.program(lp.get("body") or [], path + ("loop", "body"), streams)
            return C.LoopStep(count=int(lp.get("count", 0)), body=body)
        if "choose" in step and isinstance(step["choose"], list):
            opts = self.program(step["choose"], path + ("choose",), streams)
            return C.ChooseStep(options=opts) if opts else None
        if "sync" in step:
            return C.SyncStep(self.stream(step["sync"], path + ("sync",), streams))
        if "sync_device" in step:
            return C.SyncDeviceStep()
        for key, record in (("record_event", True), ("wait_event", False)):
            if key in step and isinstance(step[key], dict):
                ev = step[key]
                name = ev.get("event")
                if name not in self.events:
                    self.errors.add(path + (key, "event"), f"unknown event {name!r}{_suggest(name, self.events)}; "
                                    f"declare it in the top-level `events` list (declared: "
                                    f"{', '.join(self.events) or 'none'})")
                stream = self.stream(ev.get("stream", streams[0]), path + (key, "stream"), streams)
                return C.EventStep(event=str(name), stream=stream, record=record)
        if "sleep" in step:
            return C.SleepStep(float(step["sleep"]))
        if "task" in step and isinstance(step["task"], dict):
            t = step["task"]
            stream = self.stream(t.get("stream", streams[0]), path + ("task", "stream"), streams)
            kind = str(t.get("kind", "recorded"))
            return C.TaskStep(stream=stream, kind=kind, name=str(t.get("name", kind)),
                              task_type=str(t.get("task_type", kind.upper())),
                              duration_us=float(t.get("duration_us", 0.0)))
        if "profiling" in step and isinstance(step["profiling"], dict):
            return _profiling_step(step["profiling"])
        if "deterministic" in step and isinstance(step["deterministic"], dict):
            det = step["deterministic"]
            return C.DeterministicStep(det.get("level"), det.get("strong_consistency"))
        return None

    def stream(self, name: Any, path: Path_, streams: tuple[str, ...]) -> str:
        if name not in streams:
            self.errors.add(path, f"unknown stream {name!r}{_suggest(name, streams)}; this thread's streams: "
                                  f"{', '.join(streams)}")
        return str(name)

    def op_step(self, step: dict[str, Any], path: Path_, streams: tuple[str, ...]) -> C.OpStep | None:
        """The step's OpStep, or None after reporting its problems. A step written like an earlier one built
        while no problem had been found in the scenario (equal text of its values, types included, on the same
        streams and cache mode) gets that one's checked values, with its own place: a long program mostly
        repeats its steps. Once a problem is found no step is kept, so each problem is reported where it is."""
        mode = self.thread_mode
        key = (repr(step), streams, mode) if type(mode) is str else None
        done = self._op_steps.get(key) if key is not None else None
        if done is not None:
            line = self.errors.line_of(path)
            return C.OpStep(op=done.op, spec=done.spec, stream=done.stream, shape_sets=done.shape_sets,
                            dtypes=done.dtypes, attrs=dict(done.attrs), repeat=done.repeat,
                            cache_mode=done.cache_mode, where=f"{self.label}:{line}" if line else self.label)
        built = self._op_step(step, path, streams)
        if key is not None and built is not None and not self.errors.items:  # (no problem found so far at all)
            self._op_steps[key] = built
        return built

    def _op_step(self, step: dict[str, Any], path: Path_, streams: tuple[str, ...]) -> C.OpStep | None:
        from opsim.ops.registry import get_op, op_names
        name = step.get("op")
        try:
            spec = get_op(str(name), self.extra_ops)
        except InvalidArgumentError:
            if self.deferred_module is not None and isinstance(name, str):
                self.deferred.append(name)  # may come from the module; checked when `run` imports it
                return None
            known = sorted(set(op_names()) | set(self.extra_ops))
            self.errors.add(path + ("op",), f"unknown op {name!r}{_suggest(name, known)}; known ops: "
                                            f"{', '.join(known)} (opsim list-ops shows their inputs and dtypes)")
            return None
        stream = self.stream(step.get("stream", streams[0]), path + ("stream",), streams)
        shape_sets = self.shapes(step, spec, path)
        dtypes = self.dtypes(step, spec, path)
        attrs = self.attrs(step.get("attrs") or {}, spec, path + ("attrs",))
        if shape_sets is None or dtypes is None or attrs is None:
            return None
        for k, shapes in enumerate(shape_sets):
            res = spec.infer(list(shapes), attrs)
            if isinstance(res, str):
                where = path + (("shape_choices", k) if "shape_choices" in step else
                                ("shapes",) if "shapes" in step else ("shape",))
                self.errors.add(where, f"{spec.name}: {res}")
        if step.get("cache_mode", self.thread_mode) == "pta" and step.get("repeat", 1) != 1:
            self.errors.add(path + ("repeat",), "repeat > 1 needs cache_mode: ordinary (torch_npu never makes an "
                                                "executor repeatable); set cache_mode: ordinary on this op or drop repeat")
        line = self.errors.line_of(path)
        return C.OpStep(op=spec.name, spec=spec, stream=stream, shape_sets=shape_sets, dtypes=dtypes,
                        attrs=attrs, repeat=int(step.get("repeat", 1)), cache_mode=step.get("cache_mode"),
                        where=f"{self.label}:{line}" if line else self.label)

    def _one_set(self, value: Any, spec: Any, path: Path_, single: bool) -> tuple | None:
        n = len(spec.inputs)
        if single:  # `shape`: every input gets it
            return _valid_dims(tuple(tuple(value) for _ in range(n)))
        if isinstance(value, dict):
            unknown = [k for k in value if k not in spec.inputs]
            missing = [k for k in spec.inputs if k not in value]
            for k in unknown:
                self.errors.add(path + (k,), f"{spec.name} has no input {k!r}{_suggest(k, spec.inputs)}; its "
                                             f"inputs: {', '.join(spec.inputs)}")
            if missing:
                self.errors.add(path, f"{spec.name} needs a shape for each input ({', '.join(spec.inputs)}); "
                                      f"missing: {', '.join(missing)}")
            if unknown or missing:
                return None
            return _valid_dims(tuple(tuple(value[k]) for k in spec.inputs))
        if len(value) != n:
            self.errors.add(path, f"{spec.name} takes {n} input shape(s) ({', '.join(spec.inputs)}), got "
                                  f"{len(value)}")
            return None
        return _valid_dims(tuple(tuple(s) for s in value))

    def shapes(self, step: dict[str, Any], spec: Any, path: Path_) -> tuple | None:
        given = [k for k in ("shape", "shapes", "shape_choices") if k in step]
        if len(given) != 1:
            self.errors.add(path, f"give exactly one of shape (the same shape for every input), shapes (one per "
                                  f"input: {', '.join(spec.inputs)}) or shape_choices (a list of either, picked at "
                                  f"random); got {', '.join(given) or 'none'}")
            return None
        key = given[0]
        if key == "shape":
            one = self._one_set(step["shape"], spec, path + ("shape",), True)
            return (one,) if one is not None else None
        if key == "shapes":
            one = self._one_set(step["shapes"], spec, path + ("shapes",), False)
            return (one,) if one is not None else None
        sets = []
        for k, choice in enumerate(step["shape_choices"]):
            single = bool(choice) and all(isinstance(d, int) for d in choice) or choice == []
            one = self._one_set(choice, spec, path + ("shape_choices", k), single)
            if one is None:
                return None
            sets.append(one)
        return tuple(sets)

    def dtypes(self, step: dict[str, Any], spec: Any, path: Path_) -> tuple | None:
        if "dtype" in step and "dtype_choices" in step:
            self.errors.add(path, "give dtype or dtype_choices, not both")
            return None
        names = ([step["dtype"]] if "dtype" in step else list(step.get("dtype_choices") or [spec.dtypes[0]]))
        out = []
        ok = True
        for k, n in enumerate(names):
            where = path + (("dtype",) if "dtype" in step else ("dtype_choices", k))
            short = _dtype_name(n)
            if short is None or short not in spec.dtypes:
                self.errors.add(where, f"{spec.name} does not take dtype {n!r}; supported: {', '.join(spec.dtypes)}")
                ok = False
            else:
                out.append(short)
        return tuple(out) if ok else None

    def attrs(self, attrs: Any, spec: Any, path: Path_) -> dict[str, Any] | None:
        if not isinstance(attrs, dict):
            return None
        out = dict(spec.attrs)
        ok = True
        for k, v in attrs.items():
            known = list(spec.attrs) + [a for a in spec.attr_types if a not in spec.attrs]
            if k not in known:
                allowed = ", ".join(known) or "none"
                self.errors.add(path + (k,), f"{spec.name} has no attribute {k!r}{_suggest(k, known)}; "
                                             f"its attributes: {allowed}")
                ok = False
                continue
            want = spec.attr_types.get(k)
            if want is not None and (not isinstance(v, want) or (isinstance(v, bool) and bool not in _tuple(want))):
                names = " or ".join(t.__name__ for t in _tuple(want))
                self.errors.add(path + (k,), f"attribute {k!r} of {spec.name} must be {names}, got {_describe(v)}")
                ok = False
                continue
            bad = _int_out_of_range(v, spec.attr_ranges.get(k, (-INT64_MAX - 1, INT64_MAX)))
            if bad is not None:
                self.errors.add(path + (k,), f"attribute {k!r} of {spec.name}: {bad}")
                ok = False
                continue
            if k == "dtype" and isinstance(v, str) and _dtype_name(v) is None:
                self.errors.add(path + (k,), f"unknown dtype {v!r}")
                ok = False
                continue
            out[k] = v
        return out if ok else None


def _int_out_of_range(value: Any, bounds: tuple[int, int]) -> str | None:
    """Why an integer attribute (or an integer in a list attribute) does not fit its opbase type, or None."""
    lo, hi = bounds
    for v in (value if isinstance(value, list) else [value]):
        if isinstance(v, int) and not isinstance(v, bool) and not lo <= v <= hi:
            kind = "int64" if (lo, hi) == (-INT64_MAX - 1, INT64_MAX) else f"[{lo}, {hi}]"
            return f"{v} does not fit its type ({kind}); use a value in [{lo}, {hi}]"
    return None


def _valid_dims(shapes: tuple) -> tuple | None:
    """The shapes, or None when a dimension is not a non-negative integer (the schema reports it)."""
    for shape in shapes:
        for d in shape:
            if d.__class__ is int:  # the usual case, checked first
                if d < 0:
                    return None
            elif not isinstance(d, int) or isinstance(d, bool) or d < 0:
                return None
    return shapes


def _negative_dim(err: Any) -> Any:
    """The first "negative dimension" error among the alternatives of a oneOf/anyOf error (any depth)."""
    for sub in err.context or ():
        path = tuple(sub.absolute_path)
        if sub.validator == "minimum" and path and isinstance(path[-1], int) and isinstance(sub.instance, int) \
                and sub.instance < 0 and any(p in ("shape", "shapes", "shape_choices") for p in path):
            return sub
        found = _negative_dim(sub)
        if found is not None:
            return found
    return None


def _tuple(t: Any) -> tuple:
    return t if isinstance(t, tuple) else (t,)


def _load_extra_ops(module: str, errors: _Errors) -> dict[str, Any]:
    from opsim.ops.registry import catalogue_from_module
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
    import importlib.util
    import sys
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
                  import_modules: bool = True) -> C.ScenarioConfig:
    """Read, override and validate a scenario; raise `ScenarioError` listing every problem found.

    The documented opbase variables set in `environ` (default: this process's environment) apply under the
    scenario's `env` and the overrides (see opsim.scenario.environment). `limits` holds the call and numerics budgets (defaults: `opsim.scenario.limits`). With
    `import_modules=False` (validation) `direct_invoke_module` is only looked up, never imported, and the ops
    it may define are checked when a run imports it."""
    data, lines, label, path = read_source(source)
    if not isinstance(data, dict):
        raise ScenarioError(f"{label}:1: the scenario must be a mapping of fields (name, threads, ...), got "
                            f"{_describe(data)}")
    overridden = apply_overrides(data, dict(overrides or {}))
    errors = _Errors(label, lines, overridden)
    bad_numbers = set()
    for where, value in non_finite(data):
        errors.add(where, f"{value!r} is not a finite number; give a finite value")
        bad_numbers.add(where)
    _schema_errors(data, errors, bad_numbers)
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
        from opsim.ops.profiled import profiled_specs
        extra_ops.update(profiled_specs(data["profiled_ops"]))
    threads: list[C.ThreadConfig] = []
    builder = _Builder(data, errors, extra_ops, label, deferred)
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
    in_force: dict = {}
    if isinstance(data.get("env") or {}, dict):
        set_names = {p[1] for p in overridden if len(p) == 2 and p[0] == "env"}
        set_names |= {k for p in overridden if p == ("env",) for k in (data.get("env") or {})}
        in_force = resolve_env(data.get("env") or {}, set_names, environ)
        if in_force:  # the copy written next to the outputs reproduces the run without the shell
            data["env"] = {k: v for k, (v, _) in in_force.items()}
    _check_task_queue(data, names, errors)
    if not errors.items:
        from opsim.scenario.checks import check_scenario
        check_scenario(data, threads, errors.add, limits or Limits(), deferred_ops=bool(builder.deferred),
                       calibration=_relative(data.get("calibration"), path))
    errors.raise_if_any()
    return _config(data, threads, path, extra_ops, {k: src for k, (_, src) in in_force.items()},
                   shell_values(environ))


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


def _config(data: dict[str, Any], threads: list[C.ThreadConfig], path: Path | None,
            extra_ops: Mapping[str, Any], env_sources: Mapping[str, str],
            env_shell: Mapping[str, str]) -> C.ScenarioConfig:
    out = data.get("outputs") or {}
    dump = data.get("dump") or {}
    return C.ScenarioConfig(
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
        dump=C.DumpConfig(op_dump=bool(dump.get("op_dump", False)), overflow_dump=bool(dump.get("overflow_dump", False)),
                          dir=dump.get("dir")),
        direct_invoke_module=data.get("direct_invoke_module"), events=tuple(data.get("events") or ()),
        shared_streams=tuple(data.get("streams") or ()),
        task_queue_thread=str(data.get("task_queue_thread", "task_queue")),
        fast_path=bool(data.get("fast_path", True)),
        outputs=C.OutputsConfig(dir=out.get("dir"), trace=bool(out.get("trace", True)), csv=bool(out.get("csv", True)),
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
             environ: Mapping[str, str] | None = None, limits: Limits | None = None) -> C.ScenarioConfig:
    """`load_scenario` without running any user code (`direct_invoke_module` is looked up, not imported)."""
    return load_scenario(source, overrides, environ=environ, limits=limits, import_modules=False)


__all__ = ["load_scenario", "validate", "module_findable", "read_yaml", "read_source", "apply_overrides",
           "parse_override", "parse_key", "format_path", "DEFAULT_STREAM", "profiler_format"]


def _profiling_step(spec: dict) -> C.ProfilingStep | None:
    """{start: mask} or {stop: true}; a malformed value is reported by the schema."""
    from opsim.opdev.profiling import MASK_NAMES, mask_of
    if "start" in spec:
        mask = spec["start"]
        if isinstance(mask, list) and all(m in MASK_NAMES for m in mask):
            return C.ProfilingStep(True, mask_of(mask))
        if isinstance(mask, int) and not isinstance(mask, bool):
            return C.ProfilingStep(True, mask)
        return None
    return C.ProfilingStep(False) if spec.get("stop") is True else None
