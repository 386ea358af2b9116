"""opsim.opdev has no import cycle: every import between its modules, at module level or inside a function,
follows one order (a module below another never imports it back, not even lazily)."""
from __future__ import annotations

import ast
from pathlib import Path

import opsim.opdev

ROOT = Path(opsim.opdev.__file__).parent


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT.parent.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The opsim.opdev modules `path` imports, wherever the import statement is (TYPE_CHECKING blocks excepted)."""
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module in modules:
                found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules)
    return found - {_module(path)}


def _graph() -> dict[str, set[str]]:
    paths = sorted(ROOT.rglob("*.py"))
    modules = {_module(p) for p in paths}
    return {_module(p): _imports(p, modules) for p in paths}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_executor_and_launchers_do_not_import_each_other():
    graph = _graph()
    assert "opsim.opdev.executor" not in graph["opsim.opdev.launchers"]
    assert "opsim.opdev.launchers" not in graph["opsim.opdev.executor"]


def test_the_op_exec_cache_modules_form_no_cycle():
    graph = _graph()
    for m in ("opsim.opdev.op_cache_key", "opsim.opdev.op_cache_manager"):
        assert "opsim.opdev.op_exec_cache" not in graph[m]


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_opdev_has_no_import_cycle():
    assert _cycle(_graph()) is None
