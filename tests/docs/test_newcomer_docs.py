"""The newcomer's path through the docs: the quick start stays two commands, the notebooks are listed and
installable, and what the docs tell you to write in the checkout is git-ignored."""
from __future__ import annotations

import re
import shutil
import subprocess
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
