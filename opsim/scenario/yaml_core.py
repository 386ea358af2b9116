"""`--set` values as YAML 1.2 core-schema data (PyYAML itself reads YAML 1.1, where ``010`` is octal 8 and
``on``/``yes`` are booleans)."""
from __future__ import annotations

import re
from typing import Any

import yaml

from opsim.yamlio.limits import MAX_DEPTH, MAX_NUMBER_CHARS, LimitError


class _CoreLoader(yaml.SafeLoader):
    """YAML 1.2 core schema scalars (PyYAML reads YAML 1.1): decimal integers may have leading zeros (``010`` is
    10), ``0o``/``0x`` prefixes, booleans only true/false, null/~/empty; ``yes``, ``on``, ``1_000`` and
    ``0b11`` are strings."""

    yaml_implicit_resolvers: dict = {}


_CORE_SCALARS = (
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", [*"~nN", ""]),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", list("-+0123456789")),
    ("tag:yaml.org,2002:float", r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                                r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$", list("-+.0123456789")),
)
"""(tag, pattern, possible first characters) of the YAML 1.2.2 core schema's plain scalars."""
for _tag, _pattern, _first in _CORE_SCALARS:
    _CoreLoader.add_implicit_resolver(_tag, re.compile(_pattern), _first)


def _core_int(loader: yaml.SafeLoader, node: yaml.Node) -> int:
    text = loader.construct_scalar(node)
    if len(text) > MAX_NUMBER_CHARS:  # bounded before int() (a 0x... of any length converts, then overflows)
        raise LimitError(f"an integer of {len(text)} characters, above the limit of {MAX_NUMBER_CHARS}; opsim's "
                         "integers fit int64 (at most 19 digits)")
    if text[:2] in ("0o", "0x"):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)


def _core_float(loader: yaml.SafeLoader, node: yaml.Node) -> float:
    text = loader.construct_scalar(node)
    low = text.lower()
    if low.endswith(".inf"):
        return float("-inf") if low.startswith("-") else float("inf")
    return float("nan") if low == ".nan" else float(text)


_CoreLoader.add_constructor("tag:yaml.org,2002:int", _core_int)
_CoreLoader.add_constructor("tag:yaml.org,2002:float", _core_float)


def _check_flow_depth(text: str) -> None:
    """Refuse flow nesting deeper than the scenario limit before PyYAML's Python parser sees it: that parser
    recurses once per level, so a deep `[[[...` would end in a RecursionError instead of a message."""
    depth = deepest = 0
    quote = ""
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    raise LimitError(f"flow collections nested deeper than {MAX_DEPTH} levels; flatten the value")
        elif ch in "]}":
            depth -= 1


def parse_core_scalar(text: str) -> Any:
    """A YAML 1.2 core schema value: a scalar or a flow collection ("5", "true", "[1, 2]"); the text itself
    when it does not parse."""
    if not text.strip():
        return ""
    _check_flow_depth(text)
    try:
        return yaml.load(text, Loader=_CoreLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError:
        return text


def parse_as_written(text: str) -> Any:
    """A flow collection or scalar whose scalars all stay the text as written (environment values)."""
    if not text.strip():
        return ""
    _check_flow_depth(text)
    try:
        return yaml.load(text, Loader=yaml.BaseLoader)  # noqa: S506 - constructs strings, lists and dicts only
    except yaml.YAMLError:
        return text


__all__ = ["parse_core_scalar", "parse_as_written"]
