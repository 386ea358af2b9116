"""A job's shape as a scenario gives it: ranks, servers, links, algorithm and groups (plain data, so reading a
scenario never loads the simulator)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from opsim.cluster.groups import CommGroup

DEFAULT_LINK = "hccs-910b"
"""The intra-server link preset (opsim.cluster.links) when a scenario names none."""
DEFAULT_INTER_LINK = "roce-200g"
"""The inter-server link preset when a scenario names none."""
TRANSIT_MODES = ("recorded", "model")


@dataclass(frozen=True)
class ClusterSpec:
    """A job's shape: its ranks, servers, links and groups (the scenario's `cluster` and `groups`)."""

    size: int = 1
    ranks_per_server: int = 8
    link: Mapping[str, Any] = field(default_factory=dict)
    """The intra-server link: `preset` (default DEFAULT_LINK) and LinkSpec fields replaced."""
    inter_link: Mapping[str, Any] = field(default_factory=dict)
    algorithm: str = "auto"
    transit: str = "recorded"
    """recorded: a collective's recorded transit_us is used when given; model: the transfer model always."""
    groups: tuple[CommGroup, ...] = ()


__all__ = ["ClusterSpec", "DEFAULT_LINK", "DEFAULT_INTER_LINK", "TRANSIT_MODES"]
