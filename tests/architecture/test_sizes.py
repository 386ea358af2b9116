"""Sizes: no module of `opsim` over 600 lines and no function over 100 (the architecture's limits), and the
functions over the 60 lines a function aims for are listed, so that the list only shrinks."""
from __future__ import annotations

import ast

from tests.architecture.imports import module_files

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 100
AIM_FUNCTION_LINES = 60

OVER_AIM: set[str] = {
    "opsim.fastpath.batch_kernel:_call", "opsim.sweeps.engine:run_sweep", "opsim.opdev.process:ProcessContext.__init__",
    "opsim.ingest.trace_view:read_trace_view", "opsim.trace.columns:expand_groups",
    "opsim.fastpath.phase2_replay:capture", "opsim.fastpath.batch_kernel:_advance", "opsim.runtime.host_thread:run_op",
    "opsim.trace.chrome_device:device_slices", "opsim.scenario.runner:run_scenario",
    "opsim.device.memory:DeviceMemory.malloc", "opsim.device.soc:_build_presets", "opsim.scenario.batch:batched_loop",
    "opsim.trace.summary:render_table",
}
"""Functions between AIM_FUNCTION_LINES and MAX_FUNCTION_LINES today (split one, then drop it from here)."""


def function_lengths(tree: ast.AST, module: str) -> dict[str, int]:
    """`module:Qualified.name` -> lines (decorators excluded) of every function and method of a module."""
    found: dict[str, int] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found[f"{module}:{prefix}{child.name}"] = child.end_lineno - child.lineno + 1
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(tree, "")
    return found


def _all_lengths() -> dict[str, int]:
    lengths: dict[str, int] = {}
    for module, path in module_files().items():
        lengths.update(function_lengths(ast.parse(path.read_text(encoding="utf-8")), module))
    return lengths


def test_no_module_over_600_lines():
    """Every module of opsim has at most MAX_MODULE_LINES lines."""
    big = {m: n for m, p in module_files().items() if (n := len(p.read_text(encoding="utf-8").splitlines()))
           > MAX_MODULE_LINES}
    assert not big, f"modules over {MAX_MODULE_LINES} lines (split along a seam): {big}"


def test_no_function_over_100_lines():
    """Every function has at most MAX_FUNCTION_LINES lines (no exception)."""
    long = {f: n for f, n in _all_lengths().items() if n > MAX_FUNCTION_LINES}
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split into named steps): {long}"


def test_functions_over_60_lines_are_listed_and_only_shrink():
    """A function over AIM_FUNCTION_LINES is one of OVER_AIM (no new one), and a listed one that got shorter
    leaves the list."""
    lengths = _all_lengths()
    over = {f for f, n in lengths.items() if AIM_FUNCTION_LINES < n <= MAX_FUNCTION_LINES}
    assert not over - OVER_AIM, f"new functions over {AIM_FUNCTION_LINES} lines (split them): {sorted(over - OVER_AIM)}"
    assert not OVER_AIM - over, f"now at most {AIM_FUNCTION_LINES} lines, remove from OVER_AIM: {sorted(OVER_AIM - over)}"


def test_the_length_scan_sees_methods_and_nested_functions():
    """Methods are named with their class, nested functions with their parent, and lengths count every line."""
    tree = ast.parse("class A:\n    def f(self):\n        def g():\n            return 1\n        return g\n")
    assert function_lengths(tree, "m") == {"m:A.f": 4, "m:A.f.g": 2}
