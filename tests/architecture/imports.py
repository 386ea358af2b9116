"""The import graph of the `opsim` package, read with `ast` (nothing is imported): the modules, the imports each one
makes (module level or inside a function; not those under `if TYPE_CHECKING:`, which never run) and the cycles."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "opsim"


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every module of `opsim`."""
    mods = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, package: str, mods: dict[str, Path]) -> None:
        self.module, self.package, self.mods = module, package, mods
        self.found: dict[str, int] = {}  # imported module -> first line

    def _resolve(self, name: str) -> str | None:
        while name and name not in self.mods:
            name = name.rpartition(".")[0]
        return name or None

    def _add(self, name: str | None, line: int) -> None:
        if name is not None and name != self.module:
            self.found.setdefault(name, line)

    def visit_If(self, node: ast.If) -> None:
        if _type_checking(node.test):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(self._resolve(alias.name), node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")[:len(self.package.split(".")) - node.level + 1]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        for alias in node.names:
            sub = f"{source}.{alias.name}"
            self._add(self._resolve(sub if sub in self.mods else source), node.lineno)


def import_graph() -> dict[str, dict[str, int]]:
    """Module -> {module it imports: line of the first such import}, within `opsim`."""
    mods = module_files()
    graph = {}
    for module, path in mods.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        visitor = _Imports(module, package, mods)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        graph[module] = visitor.found
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[tuple[str, ...]]:
    """The strongly connected components of more than one module (each a set of modules that import each other,
    directly or in a loop), as sorted tuples (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph[nxt])))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        comp.append(member)
                        if member == node:
                            break
                    if len(comp) > 1:
                        found.append(tuple(sorted(comp)))
    return sorted(found)


_ROW = re.compile(r"^\| (`opsim/[^|]*)\|")


def layer_table(doc: Path) -> list[list[str]]:
    """The packages of docs/architecture.md's table, in order (a row may name several modules: one layer)."""
    layers = []
    for line in doc.read_text(encoding="utf-8").splitlines():
        m = _ROW.match(line)
        if m:
            names = re.findall(r"`(opsim/[^`]+)`", m.group(1))
            layers.append([n.removesuffix(".py").removesuffix("/").replace("/", ".") for n in names])
    return layers


def layer_of(module: str, layers: list[list[str]]) -> int | None:
    """The row of the table that owns `module` (the longest matching name), None for the `opsim` package itself."""
    best, best_len = None, -1
    for i, names in enumerate(layers):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best_len:
                best, best_len = i, len(name)
    return best
