"""Import structure: no module imports another that imports it back (directly or in a loop), and a package imports
only packages listed above it in docs/architecture.md's table (the rule that table states)."""
from __future__ import annotations

from tests.architecture.imports import ROOT, cycles, import_graph, layer_of, layer_table

EXPECTED_CYCLES: set[tuple[str, ...]] = set()
"""Cycles known and being removed; every other cycle fails the test (and so does one of these once it is gone,
so that the list shrinks with the code)."""


def test_no_import_cycles():
    """Every cycle of the import graph (imports inside functions count; `TYPE_CHECKING` ones do not) is listed."""
    graph = import_graph()
    found = set(cycles(graph))
    lines = []
    for comp in sorted(found):
        edges = ", ".join(f"{a} -> {b} (line {graph[a][b]})" for a in comp for b in sorted(graph[a]) if b in comp)
        lines.append(f"{' <-> '.join(comp)}: {edges}")
    unexpected = found - EXPECTED_CYCLES
    gone = EXPECTED_CYCLES - found
    assert not unexpected and not gone, (
        "import cycles (move the shared piece down, or type the back-reference under TYPE_CHECKING):\n"
        + "\n".join(lines) + (f"\nno longer cycles, remove from EXPECTED_CYCLES: {sorted(gone)}" if gone else ""))


LAYER_EXCEPTIONS: set[tuple[str, str]] = set()
"""Known upward imports, each with its reason; the list only shrinks (it is empty: the bounded YAML reader that
calibration files are read through lives in opsim.yamlio, below calibration)."""


def test_layers_follow_the_architecture_table():
    """A module imports only modules of its own package or of packages listed above it in the table."""
    layers = layer_table(ROOT / "docs" / "architecture.md")
    assert len(layers) > 10
    graph = import_graph()
    unlisted = sorted(m for m in graph if m != "opsim" and layer_of(m, layers) is None)
    assert not unlisted, f"modules outside docs/architecture.md's package table: {unlisted}"
    wrong = []
    for module, imported in sorted(graph.items()):
        here = layer_of(module, layers)
        for other, line in sorted(imported.items()):
            there = layer_of(other, layers)
            if here is not None and there is not None and there > here and (module, other) not in LAYER_EXCEPTIONS:
                wrong.append(f"{module} (row {here}) imports {other} (row {there}) at line {line}")
    assert not wrong, "imports of a package listed lower in docs/architecture.md:\n" + "\n".join(wrong)


def test_the_scanner_sees_cycles_and_type_checking():
    """The graph code finds a two-module cycle and ignores imports under TYPE_CHECKING."""
    graph = {"a": {"b": 1}, "b": {"a": 3}, "c": {"a": 1}}
    assert cycles(graph) == [("a", "b")]
    assert cycles({"a": {"b": 1}, "b": {}}) == []
