"""The newcomer's path through the docs: the quick start stays two commands, the notebooks are listed and
installable, and what the docs tell you to write in the checkout is git-ignored."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def test_the_quick_start_is_two_commands_and_the_notebooks_have_their_own_section():
    quick = _section(README, "Quick start")
    block = re.search(r"```sh\n(.*?)```", quick, re.S).group(1)
    assert block.strip().splitlines() == ["pip install -e '.[test]' && python -m pytest",
                                          "pip install -e . && opsim run scenarios/quickstart.yaml"]
    assert "notebooks" not in quick
    notebooks = _section(README, "Notebooks")
    assert "pip install -e '.[notebooks]'" in notebooks and "jupyter lab notebooks/" in notebooks


def test_the_notebooks_extra_installs_jupyter():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {re.split(r"[<>=\[ ]", r, maxsplit=1)[0] for r in extras["notebooks"]}
    assert {"jupyterlab", "nbconvert", "ipykernel"} <= names
    assert "opsim[analysis,sweep]" in extras["notebooks"]  # what the notebooks import


def test_the_notebook_table_lists_every_notebook():
    table = _section((ROOT / "docs" / "analysis.md").read_text(encoding="utf-8"), "Notebooks")
    listed = re.findall(r"^\| `(\d\d_\w+)\.ipynb` \|", table, re.M)
    assert listed == sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))


OUT_FLAG = re.compile(r"(?:^|\s)(?:-o|--out|--output)\s+(\S+)|out_dir=\"([^\"]+)\"")
PLACEHOLDER = re.compile(r"[<>]|\.\.\.|^[A-Z_]+$|^/")


def documented_outputs() -> set[str]:
    """Every path README.md and docs/*.md tell you to write (-o, --out, --output, out_dir=), placeholders left
    out, with the files `opsim import` writes next to its scenario."""
    found = set()
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for _lang, block in re.findall(r"^```(\w*)[^\n]*\n(.*?)^```", path.read_text(encoding="utf-8"), re.M | re.S):
            for m in OUT_FLAG.finditer(block):
                target = (m.group(1) or m.group(2)).strip("'\"")
                if not PLACEHOLDER.search(target):
                    found.add(target)
    for name in [f for f in found if f.endswith(".yaml") and f.startswith("imported")]:
        stem = name[:-len(".yaml")]
        found |= {f"{stem}.import-report.json", f"{stem}.calibration.yaml"}
    return found


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_documented_outputs_are_git_ignored(tmp_path):
    outputs = documented_outputs()
    assert {"opsim-out/limit1", "calibration.yaml", "predicted.csv", "imported.yaml", "results/exec"} <= outputs
    shutil.copy(ROOT / ".gitignore", tmp_path / ".gitignore")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    paths = sorted(outputs) + ["notebooks/opsim-out/quickstart"]  # a notebook writes beside itself
    # a written file, or a file in a written directory (an empty repository has neither, so ask for both)
    proc = subprocess.run(["git", "check-ignore", "--no-index", *paths, *[f"{p}/x" for p in paths]], cwd=tmp_path,
                          capture_output=True, text=True)
    ignored = set(proc.stdout.split())
    not_ignored = [p for p in paths if p not in ignored and f"{p}/x" not in ignored]
    assert not not_ignored, f"add these to .gitignore: {not_ignored}"
    tracked = subprocess.run(["git", "ls-files", "-ci", "--exclude-standard"], cwd=ROOT, capture_output=True,
                             text=True).stdout.split()
    assert tracked == [], f".gitignore hides tracked files: {tracked}"


PERFORMANCE = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")


def test_performance_md_shows_today_not_a_diary():
    titles = re.findall(r"^## (.+)$", PERFORMANCE, re.M)
    assert titles[:4] == ["Today's figures and their targets", "How the figures are measured",
                          "How the code reaches them", "What is not done"]
    assert not [t for t in titles if "previous round" in t or "Earlier figures" in t or "Latest figures" in t]
    assert len(PERFORMANCE.splitlines()) < 300
    # every row of the figures table has its target and a verdict
    table = _section(PERFORMANCE, "Today's figures and their targets")
    rows = [r for r in table.splitlines() if r.startswith("| ") and not r.startswith("| figure")]
    assert len(rows) >= 15 and all(len(r.strip("|").split(" | ")) == 4 for r in rows)
    assert "QUICK" not in PERFORMANCE


def test_every_benchmark_figure_with_a_target_is_in_the_table():
    """The targets benchmarks/run.py checks are the ones docs/performance.md lists next to today's figures."""
    run_py = (ROOT / "benchmarks" / "run.py").read_text(encoding="utf-8")
    assert "benchmarks/run.py" in PERFORMANCE
    table = _section(PERFORMANCE, "Today's figures and their targets")
    for target in ("≥ 1.5", "≥ 0.3", "≥ 1.0", "< 2 s", "< 12 s", "< 40 s", "< 1.2 GiB", "≥ 4 GB/s", "< 400 ns",
                   "< 0.2 s", "< 0.5 s", "< 3 s", "≤ 0.6", "≤ 1.1"):
        assert target in table, target
    for figure in ("skeleton", "executor-cache hit", "executor-cache miss", "AI CPU task-cache hit",
                   "DirectInvoke", "2 MB", "large.yaml", "key hash", "workspace plan", "opsim validate",
                   "opsim run scenarios/quickstart.yaml", "sweep", "trace.json writer"):
        assert figure in table, figure
    assert '"<= 1.1"' in run_py and '"<= 0.6"' in run_py and '"< 400"' in run_py


def test_the_changelog_has_short_tagged_entries():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## (.+)$", text, re.M)
    assert sections[0].startswith("Unreleased") and any(s.startswith("0.1.0") for s in sections)
    entries = re.findall(r"^- (.*)$", text, re.M)
    assert len(entries) >= 10 and all(re.match(r"`\[[a-z]+\]`", e) for e in entries)
    assert "CHANGELOG.md" in PERFORMANCE


def test_the_benchmark_script_answers_help():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--help"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and "--quick" in proc.stdout


def test_import_docs_count_calls_with_their_warm_ups_named(tmp_path):
    """docs/import.md gives the bundled trace's calls as "N calls (+W warm-up)", N and W from the import itself,
    and N + W is what a run of the replay counts."""
    from opsim.importer import import_profile
    report = import_profile(ROOT / "tests" / "data" / "real" / "trace_view_910b_mnist.json").report
    figures = report.figures if hasattr(report, "figures") else report.to_dict()["figures"]
    calls, warm = figures["calls"], figures["warmup_calls"]
    text = (ROOT / "docs" / "import.md").read_text(encoding="utf-8")
    assert f"{calls} calls (+{warm} warm-up" in " ".join(text.split())
    assert f"counts both, {calls + warm})" in " ".join(text.split())
    assert "the same 171 calls" not in text
