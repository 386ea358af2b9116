"""No module reads or writes another class's private attributes (`obj._name` on anything but `self` / `cls`), nor
SimPy's, outside their owner: state moves through the owner's own methods (`export_state` / `import_state`,
`FastEnvironment.advance`, ...). The few exceptions are listed below, each with its owner and reason."""
from __future__ import annotations

import ast

from tests.architecture.imports import module_files

SIMPY_PRIVATE = {"_now", "_eid", "_queue", "_ok", "_value", "_active_proc", "_defused", "_triggered"}
"""SimPy's private state: flagged in every module but its one owner in opsim (FastEnvironment's module)."""

ALLOWED: dict[tuple[str, str], str] = {
    ("opsim.fastpath.environment", "_ok"):
        "FastEnvironment, the simpy.Environment subclass (reads an event's outcome as Environment.step does)",
    ("opsim.device.device", "_now"):
        "Stream's hot path reads SimPy's clock as Environment.schedule does (pinned: test_simpy_internals.py)",
    ("opsim.device.device", "_queue"):
        "Stream's ticks pushed on SimPy's heap, Environment.schedule's operation inlined on the hot path",
    ("opsim.device.device", "_eid"):
        "Stream's ticks take SimPy's next event id, Environment.schedule's operation inlined on the hot path",
    ("opsim.device.device", "_target"):
        "DeviceTask._target is Stream's bookkeeping slot on a task (an event record or wait's target)",
    ("opsim.cli", "_SubParsersAction"): "argparse's documented subparsers type, used for a type hint",
    ("opsim.sweeps.command", "_SubParsersAction"): "argparse's documented subparsers type, used for a type hint",
}
"""Deliberate exceptions: (module, attribute) -> the owner and the reason."""

NAMEDTUPLE_API = {"_fields", "_field_defaults", "_make", "_replace", "_asdict"}
"""typing.NamedTuple's public methods and attributes (underscored only so as not to clash with field names)."""


def _private_defined(tree: ast.AST) -> set[str]:
    """The private names a module defines: its functions and classes, `self._x` / `cls._x` attributes, module
    names and `__slots__` strings."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            names.add(node.value)
    return {n for n in names if n.startswith("_")}


def _foreign_private(module: str, tree: ast.AST) -> list[tuple[str, int, str]]:
    """(attribute, line, receiver) of each private attribute this module touches on an object not its own."""
    mine = _private_defined(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__") and node.attr.endswith("__"):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        if node.attr in NAMEDTUPLE_API:
            continue
        if node.attr in SIMPY_PRIVATE or node.attr not in mine:
            found.append((node.attr, node.lineno, ast.unparse(node.value)))
    return found


def test_no_private_access_outside_the_owner():
    """Every `obj._name` on another object (or SimPy's private state anywhere) is allowed by name, with its owner."""
    wrong = []
    used = set()
    for module, path in module_files().items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for attr, line, receiver in _foreign_private(module, tree):
            key = (module, attr)
            if key in ALLOWED:
                used.add(key)
                continue
            wrong.append(f"{module}:{line}: {receiver}.{attr}")
    assert not wrong, ("private attributes used outside their owner (add a method to the owner):\n"
                       + "\n".join(wrong))
    stale = sorted(set(ALLOWED) - used)
    assert not stale, f"no longer needed, remove from ALLOWED: {stale}"


def test_the_scan_sees_foreign_and_simpy_privates():
    """A foreign private and SimPy's clock are flagged; the module's own privates and `self._x` are not."""
    tree = ast.parse("class A:\n    def f(self, o, env):\n        self._a = o._a\n        return o._b, env._now\n")
    assert sorted(a for a, _, _ in _foreign_private("m", tree)) == ["_b", "_now"]
