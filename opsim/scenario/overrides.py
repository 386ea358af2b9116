"""`--set key=value` overrides: keys parsed into field paths, values read as YAML 1.2 core data and set into
a scenario's data before it is checked."""
from __future__ import annotations

from typing import Any, Mapping

import yaml

from opsim.errors import ScenarioError
from opsim.yamlio.limits import LimitError, check_data
from opsim.scenario.messages import Path_, format_path
from opsim.scenario.schema import MAX_RANKS
from opsim.scenario.source import _plain
from opsim.scenario.yaml_core import parse_as_written, parse_core_scalar
from opsim.yamlio.reader import check_yaml_events

def parse_key(key: str) -> Path_:
    """"threads.0.program[1].loop.count" -> ("threads", 0, "program", 1, "loop", "count")."""
    path: list[Any] = []
    for part in key.replace("[", ".").replace("]", "").split("."):
        if part == "":
            raise ScenarioError(f"--set {key}: empty field name in the key (use dots between names, "
                                "e.g. threads.0.program.0.loop.count)")
        if part.isascii() and part.isdigit() and len(part) > 18:  # int() refuses 4,300 digits; no list is so long
            raise ScenarioError(f"--set {key[:80]}: the index {part[:20]}... ({len(part)} digits) is larger than any "
                                "list of a scenario; give an index that exists")
        path.append(int(part) if part.isascii() and part.isdigit() else part)  # "²" is a digit to isdigit
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
    try:
        return key, parse_as_written(value) if key == "env" else parse_core_scalar(value)
    except (LimitError, ValueError, TypeError, KeyError, OverflowError) as exc:  # `!!int x`, a huge 0x...
        raise ScenarioError(f"--set {key}: {exc}") from None


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
            elif path[0] == "ranks" and i == 1 and isinstance(node, list) and isinstance(part, int) \
                    and part < MAX_RANKS:  # `ranks.5.slowdown`: the ranks before it keep their defaults ({})
                node.extend({} for _ in range(part + 1 - len(node)))
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


__all__ = ["parse_key", "parse_override", "apply_overrides"]
