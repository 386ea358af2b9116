"""Reading a scenario's text: a file or a dict -> (data, field path -> line), bounded and checked before anything
is built (opsim.yamlio reads the text: one pass over libyaml's events)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from opsim.errors import ScenarioError
from opsim.safe_io import shown_path
from opsim.yamlio.files import read_text_file, read_yaml
from opsim.yamlio.limits import MAX_FILE_BYTES, LimitError, check_data, nodes_for
from opsim.yamlio.messages import Path_


def read_source(source: str | Path | Mapping[str, Any], max_bytes: int = MAX_FILE_BYTES
                ) -> tuple[Any, Mapping[Path_, int], str, Path | None]:
    """(data, lines, label, path) of a scenario file or an in-memory dict (`max_bytes`: the file budget, which
    also bounds the values a dict may hold, see opsim.yamlio.limits.nodes_for)."""
    if isinstance(source, Mapping):
        try:
            check_data(source, nodes_for(max_bytes))
        except LimitError as exc:
            raise ScenarioError(f"<scenario>: {exc}") from None
        return _plain(source), {}, "<scenario>", None
    if not isinstance(source, (str, Path)):
        raise ScenarioError(f"a scenario is a YAML file path or a dict, got {type(source).__name__}")
    path = Path(source)
    label = shown_path(source)
    text = read_text_file(source, "a scenario .yaml file", "scenario", max_bytes=max_bytes)
    data, lines = read_yaml(text, label, max_bytes)
    return data, lines, label, path


def _plain(obj: Any) -> Any:
    """A deep copy of dict/list data (so overrides never touch the caller's dict)."""
    if isinstance(obj, Mapping):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


__all__ = ["read_source"]
