"""Every shell command and Python snippet in README.md and docs/*.md runs, so the docs cannot drift.

The convention (also in docs/architecture.md, "Docs examples"):

- fenced blocks tagged ``sh``, ``bash`` or ``shell`` are commands: each line runs with bash in a fresh
  directory holding a copy of ``scenarios/`` and ``tests/data/real/`` (``opsim`` is this checkout) and must exit with status 0;
  ``pip install ...`` parts are dropped (the environment is installed already) and ``python -m pytest`` lines
  are not run (they are this test suite);
- fenced blocks tagged ``python`` run in order, per file, in one namespace (like notebook cells), in that
  directory, as a script's main module (``__name__ == "__main__"``);
- a block preceded by ``<!-- docs-test: skip (reason) -->`` is not run: cluster setups, long benchmarks,
  signatures, tools that need their own tests;
- untagged and other blocks (output, YAML, diagrams) are text.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\b[^>]*-->\s*$")
SHELL = {"sh", "bash", "shell"}


def blocks(path: Path) -> list[tuple[int, str, str, bool]]:
    """(line, language, body, skipped) of every fenced block of a Markdown file."""
    text = path.read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        out.append((text[:m.start()].count("\n") + 1, m.group(1).lower(), m.group(2), bool(SKIP.search(before))))
    return out


def shell_commands(body: str) -> list[str]:
    """The commands of a shell block: one per line, `pip install` parts dropped, pytest runs left out."""
    cmds = []
    for line in body.replace("\\\n", " ").splitlines():  # a trailing backslash continues the line
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split("&&") if not p.strip().startswith("pip install")]
        parts = [p for p in parts if not re.match(r"(python -m )?pytest\b", p)]
        if parts:
            cmds.append(" && ".join(parts))
    return cmds


CASES = [(p, line, lang, body) for p in DOCS for line, lang, body, skipped in blocks(p)
         if not skipped and (lang in SHELL or lang == "python")]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A directory with the scenarios and an `opsim` command that runs this checkout, its environment, and the
    shell blocks run in it so far."""
    root = tmp_path_factory.mktemp("docs")
    shutil.copytree(ROOT / "scenarios", root / "scenarios")
    shutil.copytree(ROOT / "tests" / "data" / "real", root / "tests" / "data" / "real")  # the bundled real profile
    bin_dir = root / ".bin"
    bin_dir.mkdir()
    shim = bin_dir / "opsim"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m opsim "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
                                 f"{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    from opsim.scenario.schema import ENV_VARS
    for name in ENV_VARS:  # the commands run as documented, not under the developer's exported variables
        env.pop(name, None)
    return root, env, set()


def test_the_docs_have_runnable_examples():
    langs = {lang for _, _, lang, _ in CASES}
    assert {"sh", "python"} <= langs
    assert sum(len(shell_commands(b)) for _, _, lang, b in CASES if lang in SHELL) >= 5


def test_the_convention_drops_installs_and_pytest():
    assert shell_commands("pip install -e '.[test]' && python -m pytest\npip install -e . && opsim run x.yaml\n"
                          "# comment\nopsim run y.yaml \\\n   --quiet\n") == ["opsim run x.yaml", "opsim run y.yaml     --quiet"]


_SHELL_CASES = [(p, line, b) for p, line, lang, b in CASES if lang in SHELL]


def _run_shell(workdir, path: Path, line: int, body: str) -> None:
    root, env, done = workdir
    for cmd in shell_commands(body):
        proc = subprocess.run(["bash", "-c", cmd], cwd=root, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, (f"{path.relative_to(ROOT)}:{line}: `{cmd}` exited {proc.returncode}\n"
                                      f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    done.add((path, line))


def _shell_blocks_up_to(workdir, upto: int) -> None:
    """Run the first `upto` shell blocks (in the file order) that have not run here: a block may use what an
    earlier one wrote (import.md's imported.yaml), so a test selected alone (`-k`, `--lf`) or reordered would
    otherwise fail where the whole module passes."""
    for path, line, body in _SHELL_CASES[:upto]:
        if (path, line) not in workdir[2]:
            _run_shell(workdir, path, line, body)


@pytest.mark.parametrize("path, line, body", _SHELL_CASES, ids=[f"{p.name}:{line}" for p, line, _ in _SHELL_CASES])
def test_shell_block_runs(workdir, path, line, body):
    # this block and those before it, each once (a later block selected first may have run it, checked alike)
    _shell_blocks_up_to(workdir, _SHELL_CASES.index((path, line, body)) + 1)


@pytest.mark.parametrize("path", sorted({p for p, _, lang, _ in CASES if lang == "python"}),
                         ids=lambda p: p.name)
def test_python_blocks_run(workdir, path, monkeypatch):
    _shell_blocks_up_to(workdir, len(_SHELL_CASES))  # the blocks' files (imported.yaml) are there
    root = workdir[0]
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    monkeypatch.chdir(root)
    module = types.ModuleType("__main__")  # the blocks run as a script would: `if __name__ == "__main__":` holds
    monkeypatch.setitem(sys.modules, "__main__", module)  # dataclasses look their module up
    namespace = module.__dict__
    try:
        for p, line, lang, body in CASES:
            if p == path and lang == "python":
                code = compile(body, f"{path.relative_to(ROOT)}:{line}", "exec")
                exec(code, namespace)  # noqa: S102 - the repository's own documentation
    finally:
        plt.close("all")


def test_the_sweep_example_runs_as_a_plain_script(workdir, tmp_path):
    """docs/sweeps.md's Python example saved as a file and run with `python`: what a newcomer does with it."""
    root, env, _ = workdir
    code = "\n".join(b for p, _, lang, b in CASES if p.name == "sweeps.md" and lang == "python")
    assert 'if __name__ == "__main__":' in code
    script = root / "sweep_example.py"
    script.write_text(code + '\n    print(len(table), table.attrs["executor"])\n')
    proc = subprocess.run([sys.executable, str(script)], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("20 ")
