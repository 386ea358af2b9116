"""A YAML file the user named, read bounded and checked before anything is built from it: the path checked and at
most MAX_FILE_BYTES read (opsim.safe_io), one pass over libyaml's events with the limits (opsim.yamlio.reader),
the data and its field path -> line map; problems named by file and line."""
from __future__ import annotations

import os
from typing import Any, Mapping

import yaml

from opsim.errors import OpsimError, ScenarioError, shown
from opsim.safe_io import path_problem, read_bounded, shown_path
from opsim.yamlio.limits import MAX_DEPTH, MAX_FILE_BYTES, LimitError
from opsim.yamlio.messages import Path_, _Errors, format_path
from opsim.yamlio.reader import AS_WRITTEN, LOADER, Problem, read_document

_WHY_TAG = {
    True: ("scenarios are plain data read with yaml.safe_load and never construct Python objects; to run your own "
           "DirectInvoke producers name their module in `direct_invoke_module`"),
    False: "only YAML's standard tags (strings, numbers, booleans, null, lists, mappings) are allowed",
}


def _problem(problem: Problem, label: str) -> tuple[int, str]:
    """The (line, entry) of a node PyYAML accepts but a scenario may not have."""
    where = f"{label}:{problem.line}: "
    if problem.kind == "tag":
        tag = shown(problem.detail.replace("tag:yaml.org,2002:", "!!"), quote=False)
        why = _WHY_TAG["python/" in problem.detail]
        return problem.line, f"{where}{format_path(problem.path)}: the tag {tag} is not allowed: {why}"
    if problem.kind == "key":
        return problem.line, f"{where}{format_path(problem.path)}: mapping keys must be plain names"
    return problem.line, (f"{where}{format_path(problem.path)}: duplicate key {problem.detail!r} "
                          "(each field once)")


def read_yaml(text: str, label: str, max_bytes: int = MAX_FILE_BYTES) -> tuple[Any, Mapping[Path_, int]]:
    """Parse scenario text: (data, field path -> line). Raises ScenarioError on syntax errors and bad tags.

    One pass over libyaml's events checks the limits and builds the data and the line map
    (opsim.yamlio.reader); PyYAML composes and constructs only what that pass leaves to it (composer
    errors, merge keys, explicit tags other than the core scalar ones)."""
    try:
        doc = read_document(text, max_bytes)  # bounded before anything is built (see opsim.yamlio.limits)
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
            except (yaml.YAMLError, ValueError, TypeError, KeyError, OverflowError) as exc:
                raise ScenarioError(f"{label}: YAML error: {shown(str(exc), 300, quote=False)}") from None
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
    depth = 0
    try:  # events only (PyYAML's parser keeps an explicit stack; its composer recurses), stopped at the limit
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    return exc
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
        yaml.compose(text, Loader=yaml.SafeLoader)  # nested at most MAX_DEPTH: the composer's recursion is bounded
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


def read_text_file(source: str | os.PathLike, what: str, kind: str, error: type[OpsimError] = ScenarioError,
                   missing: str = "", max_bytes: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of a YAML file the user named: the path checked first (NUL, length), only a regular file
    read, at most MAX_FILE_BYTES (opsim.safe_io). `kind` names the file in messages ("scenario", "sweep");
    `missing` is the message for a file that does not exist."""
    label = shown_path(source)
    problem = path_problem(source)
    if problem:
        raise error(f"{label}: {problem}")
    if not os.path.lexists(source):
        raise error(f"{label}: " + (missing or f"{kind} file not found (check the path; bundled scenarios are in "
                                               "scenarios/)"))
    if os.path.isdir(source):
        raise error(f"{label}: is a directory; give the path of {what}")
    raw = read_bounded(source, max_bytes, what, error, raise_limit="a longer scenario (an imported replay) runs "
                       "with --max-file-mib" if kind == "scenario" else "")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{label}: not UTF-8 text (byte {exc.start}); {kind}s are UTF-8 YAML") from None


def read_yaml_file(source: str | os.PathLike, what: str, kind: str, error: type[OpsimError] = ScenarioError,
                   missing: str = "") -> Any:
    """The data of a YAML file other than a scenario (a calibration file): read by `read_text_file` and the
    scenario reader (its limits, standard tags only, values bounded before conversion); problems raise
    `error` naming the file and the line."""
    text = read_text_file(source, what, kind, error, missing)
    if not text.strip():
        return None
    try:
        return read_yaml(text, shown_path(source))[0]
    except ScenarioError as exc:
        raise error(str(exc)) from None


__all__ = ["read_yaml", "read_text_file", "read_yaml_file"]
