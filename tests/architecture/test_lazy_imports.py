"""Every import inside a function is a deliberate lazy import and says why: a `# lazy: <reason>` comment on its
line or the line above (what it keeps out of importing the module, an optional dependency, a subcommand's own
modules, a module `__getattr__`). An import the module loads anyway belongs at the top of the module."""
from __future__ import annotations

import ast
import re

from tests.architecture.imports import module_files

MARK = re.compile(r"#\s*lazy:\s*\S")


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def function_imports(tree: ast.AST) -> list[ast.stmt]:
    """The import statements inside a function (those under `if TYPE_CHECKING:` never run and are left out)."""
    found: list[ast.stmt] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child.test):
                for other in child.orelse:
                    walk_one(other, in_function)
                continue
            walk_one(child, in_function)

    def walk_one(child: ast.AST, in_function: bool) -> None:
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            if in_function:
                found.append(child)
            return
        walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(tree, False)
    return found


def unmarked(source: str) -> list[int]:
    """Lines of the function-level imports of `source` without a `# lazy:` reason."""
    lines = source.splitlines()
    bad = []
    for node in function_imports(ast.parse(source)):
        here = "\n".join(lines[node.lineno - 1:node.end_lineno])
        above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
        if not MARK.search(here) and not (above.startswith("#") and MARK.search(above)):
            bad.append(node.lineno)
    return bad


def test_every_function_level_import_says_why_it_is_lazy():
    """No import inside a function of opsim lacks its `# lazy:` reason."""
    wrong = [f"{module}:{line}" for module, path in module_files().items()
             for line in unmarked(path.read_text(encoding="utf-8"))]
    assert not wrong, ("imports inside functions without a `# lazy: <reason>` comment (move an import the module "
                       "loads anyway to the top):\n" + "\n".join(wrong))


def test_the_scan_sees_unmarked_and_marked_lazy_imports():
    """An unmarked import in a function is found; a marked one (same line or the line above), a module-level one
    and one under TYPE_CHECKING are not."""
    source = ("import os\n"
              "def f():\n"
              "    import json\n"
              "    import re  # lazy: a reason\n"
              "    # lazy: another reason\n"
              "    from typing import Any\n"
              "    if TYPE_CHECKING:\n"
              "        import numpy\n")
    assert unmarked(source) == [3]
