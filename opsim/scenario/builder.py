"""Building a checked scenario's typed config: what the schema cannot check (ops, dtypes, shapes, attributes,
stream and event names) is checked here while the `ThreadConfig`s are built."""
from __future__ import annotations

from typing import Any, Mapping

from opsim.errors import InvalidArgumentError
from opsim.scenario import config
from opsim.scenario.limits import INT64_MAX
from opsim.scenario.messages import Path_, _describe, _Errors, _suggest
from opsim.acl.dtypes import DataType
from opsim.opdev.profiling import MASK_NAMES, mask_of
from opsim.ops.registry import get_op, op_names

DEFAULT_STREAM = "default"


def _dtype_name(name: str) -> str | None:
    if name.__class__ is str and name in _DTYPE_NAMES:
        return _DTYPE_NAMES[name]
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
        groups = data.get("groups")
        self.group_names = tuple(g["name"] for g in groups if isinstance(g, dict) and isinstance(g.get("name"), str)) \
            if isinstance(groups, list) else ()
        self.thread_mode = "ordinary"  # `cache_mode` of the thread being built
        self._op_steps: dict[tuple, config.OpStep] = {}
        """Op steps built without a problem, by what they were built from (see `op_step`)."""

    def thread(self, i: int, th: Mapping[str, Any], path: Path_ | None = None) -> config.ThreadConfig:
        """Thread `i` of the scenario's `threads` (or of another list: `path`, e.g. a rank's threads)."""
        own = tuple(th.get("streams") or ())
        shared = tuple(s for s in self.shared_streams if s not in own)
        streams = own + shared or (DEFAULT_STREAM,)
        path = ("threads", i) if path is None else path
        self.thread_mode = th.get("cache_mode", "ordinary")
        program = self.program(th.get("program") or [], path + ("program",), streams)
        warmup = self.program(th.get("warmup") or [], path + ("warmup",), streams)
        return config.ThreadConfig(name=str(th.get("name")), streams=streams, program=program,
                                   cache_mode=str(th.get("cache_mode", "ordinary")), warmup=warmup)

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
            return config.LoopStep(count=int(lp.get("count", 0)), body=body)
        if "choose" in step and isinstance(step["choose"], list):
            opts = self.program(step["choose"], path + ("choose",), streams)
            return config.ChooseStep(options=opts) if opts else None
        if "sync" in step:
            return config.SyncStep(self.stream(step["sync"], path + ("sync",), streams))
        if "sync_device" in step:
            return config.SyncDeviceStep()
        for key in ("record_event", "wait_event"):
            if key in step and isinstance(step[key], dict):
                return self.event_step(key, step[key], path, streams)
        if "sleep" in step:
            return config.SleepStep(float(step["sleep"]))
        if "task" in step and isinstance(step["task"], dict):
            return self.task_step(step["task"], path + ("task",), streams)
        if "tasks" in step and isinstance(step["tasks"], list):
            tasks = tuple(self.group_item(t, path + ("tasks", i), streams) for i, t in enumerate(step["tasks"]))
            return config.TasksStep(tuple(t for t in tasks if t is not None)) if any(tasks) else None
        if "collective" in step:
            return self.collective_step(step, path, streams)
        if "profiling" in step and isinstance(step["profiling"], dict):
            return _profiling_step(step["profiling"])
        if "deterministic" in step and isinstance(step["deterministic"], dict):
            det = step["deterministic"]
            return config.DeterministicStep(det.get("level"), det.get("strong_consistency"))
        return None

    def event_step(self, key: str, ev: dict, path: Path_, streams: tuple[str, ...]) -> Any:
        name = ev.get("event")
        if name not in self.events:
            self.errors.add(path + (key, "event"), f"unknown event {name!r}{_suggest(name, self.events)}; "
                            f"declare it in the top-level `events` list (declared: {', '.join(self.events) or 'none'})")
        stream = self.stream(ev.get("stream", streams[0]), path + (key, "stream"), streams)
        return config.EventStep(event=str(name), stream=stream, record=key == "record_event")

    def group_item(self, item: Any, path: Path_, streams: tuple[str, ...]) -> Any:
        """One device action of a `tasks` step: a task, an event record or an event wait."""
        if not isinstance(item, dict):
            return None
        if isinstance(item.get("task"), dict):
            return self.task_step(item["task"], path + ("task",), streams)
        for key in ("record_event", "wait_event"):
            if isinstance(item.get(key), dict):
                return self.event_step(key, item[key], path, streams)
        return None

    def task_step(self, t: dict, path: Path_, streams: tuple[str, ...]) -> Any:
        stream = self.stream(t.get("stream", streams[0]), path + ("stream",), streams)
        kind = str(t.get("kind", "recorded"))
        return config.TaskStep(stream=stream, kind=kind, name=str(t.get("name", kind)),
                          task_type=str(t.get("task_type", kind.upper())), duration_us=float(t.get("duration_us", 0.0)))

    def collective_step(self, step: dict[str, Any], path: Path_, streams: tuple[str, ...]) -> config.CollectiveStep | None:
        """A collective: its group (declared in `groups`) or its send/recv `peer`, its dtype and stream."""
        # lazy: keeps opsim.cluster out of importing opsim.scenario.builder
        from opsim.cluster.collective import CollectiveSpec
        from opsim.cluster import transfer  # lazy: as above
        op = step.get("collective")
        stream = self.stream(step.get("stream", streams[0]), path + ("stream",), streams)
        group, peer = step.get("group"), step.get("peer")
        if op in ("send", "recv"):
            if peer is None or group is not None:
                self.errors.add(path, f"a {op} names its partner with `peer: RANK` (and no `group`)")
        elif group is None:
            self.errors.add(path + ("collective",), f"a {op} needs `group:`, one of the groups declared in the "
                                                    f"top-level `groups` ({', '.join(self.group_names) or 'none'})")
        elif group not in self.group_names:
            self.errors.add(path + ("group",), f"unknown group {group!r}{_suggest(group, self.group_names)}; declare "
                                               f"it in the top-level `groups` (declared: "
                                               f"{', '.join(self.group_names) or 'none'})")
        dtype = _dtype_name(step.get("dtype", "float32"))
        if dtype is None:
            self.errors.add(path + ("dtype",), f"unknown dtype {step.get('dtype')!r}; use a name such as float32, "
                                               "float16 or bfloat16")
        if not isinstance(op, str) or not isinstance(step.get("bytes"), int):
            return None  # the schema reports the malformed parts
        algorithm = step.get("algorithm")
        if isinstance(algorithm, str) and algorithm != "auto" and op in transfer.OPS:
            try:
                transfer.choose_algorithm(op, 1, 1, algorithm)  # the run would raise for it on reaching the step
            except ValueError as exc:
                self.errors.add(path + ("algorithm",), str(exc))
        # a refused group or peer (a mapping, a list, ...) is reported above or by the schema: the spec keeps only
        # values later checks can hash and compare
        group = group if group in self.group_names else None
        peer = peer if isinstance(peer, int) and not isinstance(peer, bool) else None
        return config.CollectiveStep(stream=stream, spec=CollectiveSpec(
            op=op, nbytes=int(step["bytes"]), dtype=dtype or "float32", group=group, peer=peer,
            op_type=step.get("name"), algorithm=step.get("algorithm"), transit_us=step.get("transit_us"),
            idle_us=float(step.get("idle_us", 0.0)), root=int(step.get("root", 0))))

    def stream(self, name: Any, path: Path_, streams: tuple[str, ...]) -> str:
        if name not in streams:
            self.errors.add(path, f"unknown stream {name!r}{_suggest(name, streams)}; this thread's streams: "
                                  f"{', '.join(streams)}")
        return str(name)

    def op_step(self, step: dict[str, Any], path: Path_, streams: tuple[str, ...]) -> config.OpStep | None:
        """The step's OpStep, or None after reporting its problems. A step written like an earlier one built
        while no problem had been found in the scenario (equal text of its values, types included, on the same
        streams and cache mode) gets that one's checked values, with its own place: a long program mostly
        repeats its steps. Once a problem is found no step is kept, so each problem is reported where it is."""
        mode = self.thread_mode
        key = (repr(step), streams, mode) if type(mode) is str else None
        done = self._op_steps.get(key) if key is not None else None
        if done is not None:
            line = self.errors.line_of(path)
            return config.OpStep(op=done.op, spec=done.spec, stream=done.stream, shape_sets=done.shape_sets,
                            dtypes=done.dtypes, attrs=dict(done.attrs), repeat=done.repeat,
                            cache_mode=done.cache_mode, where=f"{self.label}:{line}" if line else self.label)
        built = self._op_step(step, path, streams)
        if key is not None and built is not None and not self.errors.items:  # (no problem found so far at all)
            self._op_steps[key] = built
        return built

    def _op_step(self, step: dict[str, Any], path: Path_, streams: tuple[str, ...]) -> config.OpStep | None:
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
        return config.OpStep(op=spec.name, spec=spec, stream=stream, shape_sets=shape_sets, dtypes=dtypes,
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
        choices = step.get("dtype_choices") or [spec.dtypes[0]]
        if not isinstance(choices, list):  # the schema reports it (a string is not a list of dtypes)
            return None
        names = [step["dtype"]] if "dtype" in step else list(choices)
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


def _tuple(t: Any) -> tuple:
    return t if isinstance(t, tuple) else (t,)


def _profiling_step(spec: dict) -> config.ProfilingStep | None:
    """{start: mask} or {stop: true}; a malformed value is reported by the schema."""
    if "start" in spec:
        mask = spec["start"]
        if isinstance(mask, list) and all(m in MASK_NAMES for m in mask):
            return config.ProfilingStep(True, mask_of(mask))
        if isinstance(mask, int) and not isinstance(mask, bool):
            return config.ProfilingStep(True, mask)
        return None
    return config.ProfilingStep(False) if spec.get("stop") is True else None


__all__ = ["DEFAULT_STREAM"]
