"""Mutated scenarios: the bundled scenarios with values replaced, removed or added at random places, for the
property test (tests/scenario/test_fuzz.py) and the long fuzz run (benchmarks/fuzz_scenarios.py).

The replacement values are the kinds that broke the loader before: non-finite and huge numbers, floats where
counts go, wrong types, deep nesting, a list that contains itself, path escapes, empty values.
"""
from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
BASES = {p.stem: yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted((ROOT / "scenarios").glob("*.yaml"))}


def _self_list() -> list:
    a: list = []
    a.append(a)
    return a


def _deep(n: int) -> Any:
    v: Any = []
    for _ in range(n):
        v = [v]
    return v


NASTY: tuple = (
    float("inf"), float("-inf"), float("nan"), 1.0e308, -1.0e308, 10 ** 21, -(10 ** 21), (1 << 63), (1 << 64) + 1,
    -1, 0, 1, 0.5, 2.5, 1.0e-300, 1.0e12, 1.0e30, 3.0, True, False, None, "", "x", "../../escape", "/etc/hostname",
    "float16", "Add", "default", "a" * 300, [], {}, [1, 2], [-1], [0], [1.5], [float("inf")], {"x": 1},
    {"count": 10 ** 12, "body": []}, {"count": 1.0e308, "body": []}, {"count": float("inf"), "body": []},
)
"""Replacement values (a fresh copy of a container is used each time)."""


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Field paths into `node`, not entering a value twice (a list may contain itself) nor past 12 levels."""
    out: list[tuple] = []
    seen: set[int] = set()
    work = [(node, prefix)]
    while work:
        value, path = work.pop()
        out.append(path)
        if id(value) in seen or len(path) > 12:
            continue
        if isinstance(value, dict):
            seen.add(id(value))
            work.extend((v, path + (k,)) for k, v in value.items())
        elif isinstance(value, list):
            seen.add(id(value))
            work.extend((v, path + (i,)) for i, v in enumerate(value))
    return sorted(out, key=repr)


def _get(node: Any, path: tuple) -> Any:
    for p in path:
        node = node[p]
    return node


def _value(rng: random.Random) -> Any:
    r = rng.random()
    if r < 0.04:
        return _self_list()
    if r < 0.08:
        return _deep(rng.choice((20, 80, 200)))
    return copy.deepcopy(rng.choice(NASTY))


def mutate(rng: random.Random, base: str | None = None, edits: int | None = None) -> dict[str, Any]:
    """A copy of a bundled scenario (random unless named) with 1-4 random edits."""
    data = copy.deepcopy(BASES[base or rng.choice(sorted(BASES))])
    for _ in range(edits or rng.choice((1, 1, 1, 2, 3, 4))):
        paths = _paths(data)
        path = rng.choice(paths[1:] or paths)
        if not path:
            break
        parent, key = _get(data, path[:-1]), path[-1]
        action = rng.random()
        if action < 0.6:
            parent[key] = _value(rng)
        elif action < 0.75:
            del parent[key]
        elif action < 0.85 and isinstance(parent, dict):
            parent[rng.choice(("extra", "count", "repeat", "sleep", "soc_overrides", "numerics", "dir"))] = \
                _value(rng)
        elif isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
        else:
            parent[key] = str(parent[key])
    return data


CLUSTER_NASTY: tuple = (
    1 << 80, -(1 << 62), 10 ** 9, 10 ** 6, 1024, 1025, 1023, "all", "world", "w\0x", "\0", {"name": "world"},
    {"count": 1}, [0, 0], [1023], [-1], [True], list(range(2000)), [{"like": 0}], [{"like": -(1 << 70)}],
    {"bandwidth_gbps": 1e-300}, {"preset": "roce-200g", "latency_us": 1e6}, {"preset": "\0"}, "send", "recv",
    "alltoall", "broadcast", "ring", "pairwise", "model", "recorded",
)
"""Values a job's fields (cluster, groups, ranks, a collective step) broke on or could break on."""
CLUSTER_FIELDS: tuple = (
    ("cluster", "size"), ("cluster", "ranks_per_server"), ("cluster", "link"), ("cluster", "link", "bandwidth_gbps"),
    ("cluster", "link", "latency_us"), ("cluster", "inter_link"), ("cluster", "algorithm"), ("cluster", "transit"),
    ("groups",), ("groups", 0), ("groups", 0, "name"), ("groups", 0, "ranks"), ("ranks",), ("ranks", 1),
    ("ranks", 1, "slowdown"), ("ranks", 1, "like"), ("ranks", 1, "threads"), ("cluster",),
)
CLUSTER_BENIGN: tuple = (8, 16, 1.5, 2.0, "ring", "mesh", "auto", "all", list(range(8)), {"preset": "hccs-910b"},
                          {"bandwidth_gbps": 100.0}, {}, 4096)
"""Values some job fields accept, so mutated jobs are also accepted (and then compared)."""
COLLECTIVE_FIELDS = ("collective", "group", "bytes", "dtype", "stream", "name", "algorithm", "transit_us", "idle_us",
                     "root", "peer")


def mutate_cluster(rng: random.Random) -> dict[str, Any]:
    """A copy of the bundled job (data_parallel) with 1-3 of its job fields or a collective step's fields
    replaced by a value from CLUSTER_NASTY or NASTY."""
    data = copy.deepcopy(BASES["data_parallel"])
    data.setdefault("ranks", [{}, {"slowdown": 1.2}])
    for _ in range(rng.choice((1, 1, 2, 3))):
        pool = CLUSTER_BENIGN if rng.random() < 0.4 else CLUSTER_NASTY + NASTY
        if rng.random() < 0.35:
            steps = [s for s in _get(data, ("threads", 0, "program", 0, "loop", "body")) if "collective" in s]
            rng.choice(steps)[rng.choice(COLLECTIVE_FIELDS)] = copy.deepcopy(rng.choice(pool))
            continue
        path = rng.choice(CLUSTER_FIELDS)
        node: Any = data
        for part in path[:-1]:
            if isinstance(node, dict) and not isinstance(node.get(part), (dict, list)):
                node[part] = {}
            elif isinstance(node, list) and not (isinstance(part, int) and part < len(node)):
                break
            node = node[part]
        else:
            if isinstance(node, dict) or (isinstance(node, list) and isinstance(path[-1], int)
                                          and path[-1] < len(node)):
                node[path[-1]] = copy.deepcopy(rng.choice(pool))
    return data


__all__ = ["mutate", "mutate_cluster", "BASES", "NASTY", "CLUSTER_NASTY"]
