"""Sweep files: a base scenario, the parameters to vary, the seeds and the figures to collect -> `Sweep`.

A sweep file is YAML with a top-level `sweep:` name (that key tells it apart from a scenario). Its points are
the product of the `grid` axes, the `zip` rows and the seeded `random` samples, each repeated once per seed.
Everything is derived from the file alone (no clock, no global random state), so the same file always gives
the same points in the same order, whatever machine or worker runs them.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import random as _random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from opsim.errors import ScenarioError, shown
from opsim.safe_io import path_problem
from opsim.trace.recorder import COLUMNS
from opsim.yamlio.limits import MAX_FILE_BYTES, LimitError, non_string_keys
from opsim.yamlio.messages import _Errors

SWEEP_KEY = "sweep"
DEFAULT_FIGURES = (
    "summary.simulated_makespan_us", "summary.op_calls", "summary.failed_calls", "summary.exec_cache.hit_rate",
    "summary.aicpu_cache.hit_rate", "summary.oneshot_tasks", "summary.memory.peak_hbm_bytes",
    "summary.memory.peak_workspace_bytes", "summary.memory.oom_events")
"""The standard figures: summary fields, so they exist with `trace: false` and cost nothing to collect."""
ALL_RESULT_FIGURES = "*"
"""In `figures`, every trace-derived `Result.figures` value (needs the trace on)."""
MAX_POINTS = 100_000
"""Most points a sweep file may make (grid x zip x random samples x seeds), checked arithmetically before any
point is made (docs/sweeps.md, "Limits"): at the measured few points per second per core this is days of
simulation, and the points list stays a few tens of MB."""
DISTRIBUTIONS = ("choice", "uniform", "log_uniform", "integer")
_FIELDS = ("sweep", "description", "scenario", "overrides", "grid", "zip", "random", "seeds", "figures")

_AXIS = {"oneOf": [{"type": "array", "minItems": 1},
                   {"type": "object", "minProperties": 1, "additionalProperties": {"type": "object"}}]}
_RANGE = {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}
SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["sweep", "scenario"],
    "properties": {
        "sweep": {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_.\-]*$", "maxLength": 64},
        "description": {"type": "string"},
        "scenario": {"type": ["string", "object"]},
        "overrides": {"type": "object"},
        "grid": {"type": "object", "additionalProperties": _AXIS},
        "zip": {"type": "object", "additionalProperties": _AXIS},
        "random": {"type": "object", "additionalProperties": False, "required": ["samples", "params"],
                   "properties": {
                       "samples": {"type": "integer", "minimum": 1},
                       "seed": {"type": "integer", "minimum": 0},
                       "params": {"type": "object", "minProperties": 1, "additionalProperties": {
                           "type": "object", "minProperties": 1, "maxProperties": 1, "additionalProperties": False,
                           "properties": {"choice": {"type": "array", "minItems": 1}, "uniform": _RANGE,
                                          "log_uniform": _RANGE, "integer": _RANGE}}}}},
        "seeds": {"oneOf": [{"type": "integer", "minimum": 1},
                            {"type": "array", "minItems": 1,
                             "items": {"type": "integer", "minimum": 0, "maximum": (1 << 63) - 1}}]},
        "figures": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
    },
}
"""The sweep file's JSON Schema (draft 2020-12)."""


@dataclass(frozen=True)
class Point:
    """One simulation of a sweep: its number, its parameter values (one column each), the overrides they
    stand for, and its seed (None: the scenario's own)."""

    index: int
    params: dict[str, Any]
    overrides: dict[str, Any]
    seed: int | None


@dataclass
class Sweep:
    """A checked sweep. `scenario` is the base scenario's YAML text (what travels to the workers), or a
    callable `overrides -> Result | Simulation` for in-process use."""

    name: str
    scenario: str | Callable[[dict], Any]
    label: str
    overrides: dict[str, Any] = field(default_factory=dict)
    axes: list[tuple[str, list[str], list[tuple[Any, ...]], list[dict[str, Any]]]] = field(default_factory=list)
    """One entry per grid axis, zip group or the random samples: (kind, column names, value rows, override sets
    per row). The points are the product of the entries."""
    seeds: list[int] | None = None
    figures: tuple[str, ...] = DEFAULT_FIGURES
    description: str = ""
    source_text: str | None = None
    """The sweep file's own text (kept next to the results)."""
    scenario_dir: Path | None = None
    """Where the base scenario's relative paths (its `calibration` file) start: the scenario file's directory."""
    max_bytes: int = MAX_FILE_BYTES
    """The file budget of the sweep file and its scenario (`--max-file-mib`), also each point's."""

    @property
    def params(self) -> list[str]:
        """The parameter columns, in file order."""
        return [name for _, names, _, _ in self.axes for name in names]

    def points(self) -> list[Point]:
        """Every point, in a fixed order: the first axis varies slowest, the seed fastest."""
        out: list[Point] = []
        seeds: list[int | None] = list(self.seeds) if self.seeds else [None]
        choices = [list(zip(rows, sets)) for _, _, rows, sets in self.axes]
        for combo in itertools.product(*choices):
            params: dict[str, Any] = {}
            overrides: dict[str, Any] = dict(self.overrides)
            for (_, names, _, _), (row, sets) in zip(self.axes, combo):
                params.update(zip(names, row))
                overrides.update(sets)
            for seed in seeds:
                ov = dict(overrides) if seed is None else {**overrides, "seed": seed}
                out.append(Point(len(out), dict(params), ov, seed))
        return out

    def calibration_file(self, point: Point) -> Path | None:
        """The calibration file a point names (`calibration`, overridden or in the base scenario), resolved
        here: it is read here and travels as data, never as a path."""
        import yaml  # lazy: keeps PyYAML out of importing opsim.sweeps.spec
        value = point.overrides.get("calibration")
        if value is None and isinstance(self.scenario, str):
            data = yaml.safe_load(self.scenario)
            value = data.get("calibration") if isinstance(data, dict) else None
        if not isinstance(value, str) or not value:
            return None
        path = Path(value).expanduser()
        return path if path.is_absolute() or self.scenario_dir is None else self.scenario_dir / path

    def point_key(self, point: Point) -> str:
        """A digest of everything that decides a point's row (scenario text, overrides, figures): `--resume`
        recognises finished points by it, even when the sweep file gained or lost values."""
        scenario = self.scenario if isinstance(self.scenario, str) else getattr(
            self.scenario, "__qualname__", repr(self.scenario))
        doc = {"scenario": scenario, "overrides": point.overrides, "figures": list(self.figures)}
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def is_sweep(data: Any) -> bool:
    """True for sweep-file data (a mapping with a top-level `sweep` key)."""
    return isinstance(data, Mapping) and SWEEP_KEY in data


def is_sweep_file(path: str | Path, max_bytes: int = MAX_FILE_BYTES) -> bool:
    """True when `path` is a readable YAML file whose top level is a sweep (False for scenarios and bad files).
    Read like a scenario (size, depth and alias limits; `max_bytes` the file budget), so a hostile file costs no
    more here."""
    # lazy: keeps PyYAML out of importing opsim.sweeps.spec
    from opsim.scenario.source import read_source, read_text_file
    try:
        text = read_text_file(path, "a scenario .yaml file", "scenario", max_bytes=max_bytes)
        if SWEEP_KEY not in text and "\\" not in text:  # no `sweep` key can be spelled without either: a
            return False  # scenario is then not read twice (a large one takes seconds to read)
        data = read_source(Path(path), max_bytes)[0]
    except ScenarioError:
        return False
    return is_sweep(data)


def load_sweep(source: str | Path | Mapping[str, Any], *, check_points: bool = True,
               max_points: int | None = None, max_bytes: int = MAX_FILE_BYTES) -> Sweep:
    """Read and check a sweep file (or the same structure as a dict; its scenario path is then relative to
    the working directory). With `check_points`, every parameter value is applied to the base scenario and
    validated, so a typo in a key or a bad value is reported before anything runs. More than `max_points`
    points (default MAX_POINTS) are refused before any is made. `max_bytes`: the largest sweep file and
    scenario file read (the CLI's --max-file-mib)."""
    from opsim.scenario.source import read_source  # lazy: keeps PyYAML out of importing opsim.sweeps.spec
    if isinstance(source, Mapping):
        data, lines, label, path = read_source(source, max_bytes)
        label, base_dir, text = "<sweep>", Path.cwd(), None
    else:
        data, lines, label, path = read_source(source, max_bytes)
        base_dir = Path(path).parent
        from opsim.yamlio.files import read_text_file  # lazy: keeps PyYAML out of importing opsim.sweeps.spec
        text = read_text_file(path, "a sweep .yaml file", "sweep", max_bytes=max_bytes)  # bounded, as read_source
    errors = _Errors(label, lines, what="sweep file")
    if not isinstance(data, dict):
        raise ScenarioError(f"{label}:1: a sweep file is a mapping with `sweep`, `scenario` and the parameters")
    if SWEEP_KEY not in data and "threads" in data:
        raise ScenarioError(f"{label} is a scenario, not a sweep file (it has `threads` and no `sweep` key): run it "
                            f"with `opsim run {label}`, or name it as a sweep file's `scenario` (docs/sweeps.md)")
    _check_names(data, errors)
    _schema_errors(data, errors)
    errors.raise_if_any()
    scenario_text, scenario_label, scenario_path = _base_scenario(data["scenario"], base_dir, errors, max_bytes)
    errors.raise_if_any()
    sweep = Sweep(name=data["sweep"], scenario=scenario_text, label=scenario_label,
                  overrides=dict(data.get("overrides") or {}), description=str(data.get("description", "")),
                  figures=tuple(data.get("figures") or DEFAULT_FIGURES), source_text=text,
                  scenario_dir=scenario_path.parent if scenario_path is not None else base_dir,
                  max_bytes=max_bytes)
    check_figures(sweep.figures, errors)
    check_point_count(data, errors, max_points)
    errors.raise_if_any()
    build_axes(sweep, data, errors)
    errors.raise_if_any()
    if check_points:
        check_values(sweep, scenario_path if scenario_path is not None else data["scenario"], errors)
        errors.raise_if_any()
    return sweep


def point_count(data: Mapping[str, Any]) -> int:
    """The number of points a checked sweep file makes, computed from the sizes alone (nothing expanded)."""
    n = 1
    for values in (data.get("grid") or {}).values():
        n *= len(values)
    zipped = data.get("zip") or {}
    if zipped:
        n *= min(len(v) for v in zipped.values())
    rnd = data.get("random")
    if rnd:
        n *= int(rnd["samples"])
    seeds = data.get("seeds")
    if seeds is not None:
        n *= seeds if isinstance(seeds, int) else len(seeds)
    return n


def check_point_count(data: Mapping[str, Any], errors: _Errors, max_points: int | None = None) -> None:
    """Refuse a sweep of more than `max_points` points (default MAX_POINTS) before anything is expanded."""
    limit = MAX_POINTS if max_points is None else max_points
    n = point_count(data)
    if n > limit:
        where = ("seeds",) if data.get("seeds") is not None and n // max(point_count({**data, "seeds": None}), 1) \
            > limit else ("random", "samples") if data.get("random") else ()
        errors.add(where, f"the sweep makes {n:,} points, above the limit of {limit:,}; sweep fewer values, "
                          "samples or seeds, or split it into several sweep files")


def result_figure_names() -> list[str]:
    """The names `Result.figures` gives every traced run (read off an empty result; needs pandas)."""
    # lazy: keeps opsim.api, opsim.scenario, opsim.trace out of importing opsim.sweeps.spec
    from opsim.api import Result
    return list(Result({k: {c: [] for c in cols} for k, cols in COLUMNS.items()}).figures)


def check_figures(figures: Iterable[str], errors: _Errors) -> None:
    """Summary paths must not reach into the machine-time `wall` section; other names must be Result figures."""
    names = None
    for i, name in enumerate(figures):
        if name == "summary.wall" or name.startswith("summary.wall."):
            errors.add(("figures", i), "the summary's `wall` section is machine time and would make results differ "
                                       "between machines; every row has a wall_seconds column instead")
        elif name.startswith("summary."):
            # lazy: keeps opsim.trace out of importing opsim.sweeps.spec
            from opsim.trace.summary import summary_field_problem
            problem = summary_field_problem(name[len("summary."):])
            if problem:
                errors.add(("figures", i), f"unknown figure {shown(name)}: {problem}")
        elif name == ALL_RESULT_FIGURES or name == "summary":
            continue
        else:
            names = names if names is not None else result_figure_names()
            if name not in names:
                # lazy: keeps numpy, SimPy out of importing opsim.sweeps.spec
                from opsim.scenario.messages import _suggest
                errors.add(("figures", i), f"unknown figure {name!r}{_suggest(name, names)}; use a summary field "
                                           f"('summary.<path>', e.g. summary.exec_cache.hit_rate), '*' for every "
                                           f"trace figure, or one of: {', '.join(names)}")


def one_parameter(scenario: Any, param: str, values: list[Any], *, overrides: Mapping[str, Any] | None = None,
                  figures: tuple[str, ...] = DEFAULT_FIGURES) -> Sweep:
    """The sweep of one parameter over `values` (what `what_if` runs). `scenario` is a path, a scenario dict,
    or a callable `overrides -> Result | Simulation` (then nothing is validated before running)."""
    if not callable(scenario):
        return load_sweep({"sweep": "what_if", "scenario": scenario, "overrides": dict(overrides or {}),
                           "grid": {param: list(values)}, "figures": list(figures)})
    sweep = Sweep(name="what_if", scenario=scenario, label=getattr(scenario, "__name__", "<callable>"),
                  overrides=dict(overrides or {}), figures=tuple(figures))
    errors = _Errors("what_if", {}, what="sweep file")
    build_axes(sweep, {"grid": {param: list(values)}}, errors)
    errors.raise_if_any()
    return sweep


def _check_names(data: dict[str, Any], errors: _Errors) -> None:
    """Field and parameter names must be strings (`grid: {5: [a, b]}`); a named axis's labels may be numbers."""
    sections = [((), data, 1)] + [((k,), data.get(k), 1) for k in ("grid", "zip", "overrides")] + \
        [(("random",), data.get("random"), 2)]
    for where, section, depth in sections:
        for path, key in non_string_keys(section if isinstance(section, dict) else {}, depth):
            errors.add(where + path, f"the key {shown(key)} is read as {type(key).__name__}; names are strings: "
                                     "quote it")


def _schema_errors(data: dict[str, Any], errors: _Errors) -> None:
    from jsonschema import Draft202012Validator  # lazy: keeps jsonschema out of importing opsim.sweeps.spec
    from jsonschema.exceptions import best_match  # lazy: keeps jsonschema out of importing opsim.sweeps.spec
    from jsonschema.validators import extend  # lazy: keeps jsonschema out of importing opsim.sweeps.spec

    # lazy: keeps numpy, SimPy out of importing opsim.sweeps.spec
    from opsim.scenario.messages import _report  # the scenario loader's error wording, shared
    from opsim.scenario.schema import strict_integers  # lazy: keeps jsonschema out of importing opsim.sweeps.spec
    for err in extend(Draft202012Validator, type_checker=strict_integers(Draft202012Validator))(SCHEMA).iter_errors(data):
        _report(err, errors, best_match)


def _base_scenario(value: Any, base_dir: Path, errors: _Errors, max_bytes: int = MAX_FILE_BYTES
                   ) -> tuple[str, str, Path | None]:
    """(YAML text, label, local path or None) of the base scenario."""
    import yaml  # lazy: keeps PyYAML out of importing opsim.sweeps.spec
    if isinstance(value, Mapping):
        return yaml.safe_dump(dict(value), sort_keys=False, allow_unicode=True), "<inline scenario>", None
    from opsim.yamlio.files import read_text_file  # lazy: keeps PyYAML out of importing opsim.sweeps.spec
    from opsim.yamlio.reader import check_yaml_events  # lazy: keeps PyYAML out of importing opsim.sweeps.spec
    path = Path(value)
    full = path if path.is_absolute() else base_dir / path
    if path_problem(full) is None and not full.exists():
        errors.add(("scenario",), f"the scenario file {shown(str(full))} is not found; give a path relative to the "
                                  "sweep file, or the scenario inline")
        return "", shown(value), None
    try:  # a regular file, bounded, its path checked first (opsim.safe_io)
        text = read_text_file(full, "a scenario .yaml file", "scenario", max_bytes=max_bytes)
        check_yaml_events(text, max_bytes)  # the scenario reader's depth and alias limits, before any YAML is built
    except ScenarioError as exc:
        errors.add(("scenario",), str(exc))
        return "", shown(value), None
    except LimitError as exc:
        errors.add(("scenario",), f"the scenario file {shown(str(full))}: {exc}")
        return "", shown(value), None
    except yaml.YAMLError:
        pass  # a syntax error is reported with its line when the points are validated
    return text, path.name, full


def _axis(name: str, values: Any) -> tuple[list[Any], list[dict[str, Any]]]:
    """(column values, override sets) of one axis: a list of values of the dotted key `name`, or a mapping of
    labels to override sets (a named axis; the schema has checked each set is a mapping)."""
    if isinstance(values, Mapping):
        return list(values), [dict(v) for v in values.values()]
    return list(values), [{name: v} for v in values]


def build_axes(sweep: Sweep, data: Mapping[str, Any], errors: _Errors) -> None:
    """Fill `sweep.axes` and `sweep.seeds` from the file's grid, zip, random and seeds sections."""
    seen: dict[str, tuple] = {}

    def claim(name: str, path: tuple) -> None:
        if name in seen:
            errors.add(path, f"{name!r} is already swept at {'.'.join(map(str, seen[name]))}; sweep each key once")
        elif name in sweep.overrides:
            errors.add(path, f"{name!r} is also fixed in `overrides`; remove it from one of them")
        seen[name] = path

    for name, values in (data.get("grid") or {}).items():
        claim(name, ("grid", name))
        col, sets = _axis(name, values)
        sweep.axes.append(("grid", [name], [(v,) for v in col], sets))
    zipped = data.get("zip") or {}
    if zipped:
        cols, setss = [], []
        for name, values in zipped.items():
            claim(name, ("zip", name))
            col, sets = _axis(name, values)
            cols.append(col)
            setss.append(sets)
        lengths = {len(c) for c in cols}
        if len(lengths) > 1:
            errors.add(("zip",), "zipped parameters need the same number of values; got "
                                 + ", ".join(f"{n}: {len(c)}" for n, c in zip(zipped, cols)))
        else:
            rows = list(zip(*cols))
            sets = [{k: v for s in group for k, v in s.items()} for group in zip(*setss)]
            sweep.axes.append(("zip", list(zipped), rows, sets))
    rnd = data.get("random")
    if rnd:
        names = list(rnd["params"])
        for name in names:
            claim(name, ("random", "params", name))
        rows = sample(rnd["params"], int(rnd["samples"]), int(rnd.get("seed", 0)), errors)
        sweep.axes.append(("random", names, rows, [dict(zip(names, r)) for r in rows]))
    seeds = data.get("seeds")
    if seeds is not None:
        if "seed" in seen or "seed" in sweep.overrides:
            errors.add(("seeds",), "the seed is already set by a parameter or in `overrides`; drop `seeds` or that "
                                   "key")
        base = sweep.overrides.get("seed", _scenario_seed(sweep.scenario))
        base = base if isinstance(base, int) and not isinstance(base, bool) else 0  # a bad one: reported below
        sweep.seeds = [base + r for r in range(seeds)] if isinstance(seeds, int) else [int(s) for s in seeds]
        if len(set(sweep.seeds)) != len(sweep.seeds):
            errors.add(("seeds",), f"seeds repeat a value ({sweep.seeds}); give each seed once")


def _scenario_seed(text: Any) -> int:
    """The base scenario's own seed (0 when it sets none): `seeds: N` counts up from it."""
    import yaml  # lazy: keeps PyYAML out of importing opsim.sweeps.spec
    try:
        data = yaml.safe_load(text) if isinstance(text, str) else None
    except yaml.YAMLError:
        return 0
    seed = data.get("seed", 0) if isinstance(data, dict) else 0
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else 0


def sample(params: Mapping[str, Mapping[str, Any]], samples: int, seed: int, errors: _Errors | None = None
           ) -> list[tuple[Any, ...]]:
    """`samples` rows of values drawn with Python's Mersenne Twister seeded by `seed` (the same rows on every
    platform): `choice` picks from a list, `uniform`/`log_uniform` draw a float in [lo, hi], `integer` an
    integer in [lo, hi] inclusive."""
    rng = _random.Random(seed)
    draws: list[Callable[[], Any]] = []
    for name, spec in params.items():
        (kind, arg), = spec.items()
        path = ("random", "params", name, kind)
        if kind == "choice":
            draws.append(lambda arg=arg: arg[rng.randrange(len(arg))])
            continue
        lo, hi = arg
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in arg):
            if errors:
                errors.add(path, f"the range [{shown(lo)}, {shown(hi)}] needs two finite numbers; give [low, high]")
            return []
        if lo > hi:
            if errors:
                errors.add(path, f"the range [{lo}, {hi}] is empty; give [low, high] with low <= high")
            return []
        if kind == "uniform":
            draws.append(lambda lo=lo, hi=hi: rng.uniform(lo, hi))
        elif kind == "log_uniform":
            if lo <= 0:
                if errors:
                    errors.add(path, f"log_uniform needs a positive low end, got {lo}")
                return []
            draws.append(lambda lo=lo, hi=hi: math.exp(rng.uniform(math.log(lo), math.log(hi))))
        else:
            if lo != int(lo) or hi != int(hi):
                if errors:
                    errors.add(path, f"integer needs whole-number ends, got [{lo}, {hi}]")
                return []
            draws.append(lambda lo=int(lo), hi=int(hi): rng.randint(lo, hi))
    return [tuple(draw() for draw in draws) for _ in range(samples)]


def check_values(sweep: Sweep, scenario: Any, errors: _Errors) -> None:
    """Validate the base scenario with the fixed overrides, then once per distinct parameter value (each
    applied alone), so the cost grows with the number of values, not the number of points."""
    # lazy: keeps numpy, SimPy, PyYAML out of importing opsim.sweeps.spec
    from opsim.scenario.loader import load_scenario
    from opsim.scenario.limits import Limits  # lazy: as above
    limits = Limits(file_bytes=sweep.max_bytes)
    if not isinstance(sweep.scenario, str):
        return
    if isinstance(scenario, Mapping):
        scenario = dict(scenario)

    def check(overrides: dict[str, Any], where: tuple, what: str) -> bool:
        try:
            load_scenario(scenario, {**sweep.overrides, **overrides}, limits=limits)
        except ScenarioError as exc:
            errors.add(where, f"{what} makes the scenario invalid: {exc}")
            return False
        return True

    if not check({}, ("overrides",) if sweep.overrides else ("scenario",), "the base scenario"):
        return
    for kind, names, rows, sets in sweep.axes:
        done: set[str] = set()
        for row, overrides in zip(rows, sets):
            for name, value, one in _singles(names, row, overrides):
                token = json.dumps([name, one], sort_keys=True, default=str)
                if token in done:
                    continue
                done.add(token)
                where = (kind, name) if kind != "random" else ("random", "params", name)
                if not check(one, where, f"{name}={value!r}"):
                    break
    if sweep.seeds:  # a seed only sets `seed`: the smallest and the largest stand for all of them
        for seed in sorted({min(sweep.seeds), max(sweep.seeds)}):
            if not check({"seed": seed}, ("seeds",), f"seed {seed}"):
                break


def _singles(names: list[str], row: tuple, overrides: dict[str, Any]) -> Iterable[tuple[str, Any, dict]]:
    """Each column of a row with the overrides it alone stands for (a named axis: its whole override set)."""
    if len(names) == 1 or set(overrides) == set(names):
        for name, value in zip(names, row):
            yield name, value, ({name: overrides[name]} if name in overrides else overrides)
    else:  # zipped named axes: check the row's overrides together
        yield ", ".join(names), row, overrides


__all__ = ["MAX_POINTS", "point_count", "Sweep", "Point", "load_sweep", "is_sweep", "is_sweep_file", "sample", "DEFAULT_FIGURES",
           "ALL_RESULT_FIGURES", "SCHEMA"]
