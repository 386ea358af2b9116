"""The analysis and fidelity docs stay truthful: every test named in docs/fidelity.md exists, and every figure
docs/analysis.md shows is one docs/make_figures.py writes."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from opsim.analysis import PLOTS

ROOT = Path(__file__).resolve().parents[2]
TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_every_test_named_in_fidelity_md_exists():
    refs = TEST_REF.findall((ROOT / "docs" / "fidelity.md").read_text(encoding="utf-8"))
    assert len(refs) > 100
    missing = []
    cache: dict[str, set[str]] = {}
    for file, name in refs:
        path = ROOT / file
        names = cache.setdefault(file, _test_names(path) if path.is_file() else set())
        if name not in names:
            missing.append(f"{file}::{name}")
    assert not missing, f"docs/fidelity.md names tests that do not exist: {missing}"


def test_analysis_md_shows_a_generated_figure_per_plot():
    text = (ROOT / "docs" / "analysis.md").read_text(encoding="utf-8")
    shown = set(re.findall(r"\]\(figures/(\w+)\.png\)", text))
    script = (ROOT / "docs" / "make_figures.py").read_text(encoding="utf-8")
    assert set(PLOTS) <= shown  # one figure per plot function
    assert shown - set(PLOTS) == {"what_if"} and '"what_if")' in script
    for name in shown:
        assert f"### `{name}" in text or name == "what_if"
