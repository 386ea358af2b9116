"""Instructions per call of benchmarks/run.py's measured paths, this tree against other revisions.

    python benchmarks/ab_instructions.py c82cc92            # every figure, c82cc92 against this working tree
    python benchmarks/ab_instructions.py c82cc92 HEAD --no-worktree   # two commits
    python benchmarks/ab_instructions.py c82cc92 --figure exec_cache_hit --figure direct_invoke_repeat
    python benchmarks/ab_instructions.py c82cc92 --keep /tmp/cg   # keep cachegrind's files for cg_annotate

Wall-clock rates on a shared machine move by a fifth from one run to the next; the number of instructions a
call executes does not depend on the machine's load. Each figure's workload (the same functions of run.py, run
from this tree's benchmarks/ against each tree's opsim) runs in a fresh process under valgrind's cachegrind
twice, with N and with 2N calls; the difference of the two totals, over N, is the instructions per call of the
measured section alone: start-up, imports, Numba's cache loads, building the simulation and the first calls
(template capture) are in both runs and cancel. Each tree runs every figure once natively first, so that
Numba's cache is filled before anything is counted. Needs valgrind (3.19 or later) and git.

Prints one table (figure, instructions per call of each tree, ratio to the first) and writes it as JSON
(`--out`, default benchmarks/ab_instructions.json). A measurement, not a test: it exits 0 whatever the ratios.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

FIGURES: dict[str, tuple[int, str]] = {
    "skeleton": (2_000, "bare SimPy 7-event skeleton (run_baseline, 1 stream)"),
    "exec_cache_hit": (2_000, "aclnnAdd, executor-cache hit"),
    "exec_cache_hit_reference": (1_000, "the same, reference path"),
    "exec_cache_miss": (1_000, "aclnnAdd, phase 1 every call (ACLNN_CACHE_LIMIT=0)"),
    "exec_cache_miss_reference": (500, "the same, reference path"),
    "aicpu_task_cache_hit": (1_000, "aclnnSigmoidAicpu, AI CPU task-cache hit"),
    "aicpu_task_cache_hit_reference": (500, "the same, reference path"),
    "direct_invoke_repeat": (2_000, "aclnnAddRmsNorm, repeatable executor, phase 2 only"),
    "direct_invoke_repeat_reference": (1_000, "the same, reference path"),
    "workspace_plan": (2, "plan_graph of chain_graph(20 000), per plan"),
    "batched_loop": (100_000, "large.yaml's batched loops (compiled), per call, simulation only"),
}
"""Each figure: N (the smaller call count; the larger run makes 2N) and what one call is."""

PLAN_TENSORS = 20_000
WARM_FULL = frozenset({"batched_loop"})
"""Figures warmed with their full N: large.yaml batches only from `opsim.scenario.batch.MIN_CALLS` planned calls
(100 000) on, and a warm-up below it never compiles the batched loop, so each counted run would compile it (or
load the cache the other run had just written: a negative difference)."""


# ---- the child: one figure's workload, `calls` times, against the opsim of `tree` ----------------------------

def _workload(name: str) -> Callable[[int], Any]:
    import run  # this tree's benchmarks/run.py: the same workload for every tree measured
    fast = not name.endswith("_reference")
    base = name.removesuffix("_reference")
    if base == "skeleton":
        return run.rate_skeleton
    if base == "exec_cache_hit":
        return lambda n: run.rate_aicore(n, miss=False, fast=fast)
    if base == "exec_cache_miss":
        return lambda n: run.rate_aicore(n, miss=True, fast=fast)
    if base == "aicpu_task_cache_hit":
        return lambda n: run.rate_aicpu(n, fast=fast)
    if base == "direct_invoke_repeat":
        return lambda n: run.rate_direct_invoke(n, fast=fast)
    if base == "workspace_plan":
        return _plans
    if base == "batched_loop":
        return _batched
    raise SystemExit(f"unknown figure {name!r}; known: {', '.join(FIGURES)}")


def _plans(n: int) -> None:
    """`n` plans of one graph (the graph is built in both runs and cancels)."""
    import logging

    import planner  # benchmarks/planner.py
    from opsim.opdev.planner import plan_graph
    logging.disable(logging.WARNING)
    graph = planner.chain_graph(PLAN_TENSORS)
    for _ in range(n):
        plan_graph(graph)


def _batched(n: int) -> None:
    """large.yaml cut to `n` calls (two threads, n / 8 iterations of 4 calls each), simulated and not written:
    run.py's million-call path. `n` must be at least MIN_CALLS, or the loops are not batched."""
    from opsim.scenario import batch
    from opsim.scenario.runner import run_scenario
    if n < batch.MIN_CALLS:
        raise SystemExit(f"batched_loop: {n} calls do not batch (MIN_CALLS {batch.MIN_CALLS})")
    per = max(1, n // 8)
    run_scenario(ROOT / "scenarios" / "large.yaml", write=False,
                 overrides={"threads.0.program.0.loop.count": per, "threads.1.program.0.loop.count": per})


def child(tree: str, name: str, calls: int) -> None:
    sys.path.insert(0, tree)
    import opsim  # bound first, so that every opsim import below is `tree`'s whatever run.py puts on the path
    if not Path(opsim.__file__).resolve().is_relative_to(Path(tree).resolve()):
        raise SystemExit(f"opsim imported from {opsim.__file__}, not from {tree}")
    sys.path.insert(1, str(HERE))
    _workload(name)(calls)


# ---- the parent: trees, runs under cachegrind, the table -----------------------------------------------------

def export_tree(rev: str, trees: Path) -> Path:
    """`rev`'s files (git archive) in a folder of `trees` named by its commit, reused when it is there (with the
    Numba cache a earlier run left in it)."""
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{rev}^{{commit}}"], capture_output=True,
                         text=True, check=True).stdout.strip()
    dest = trees / sha
    if (dest / "opsim" / "__init__.py").exists():
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as fh:
        subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev], stdout=fh, check=True)
        fh.seek(0)
        with tarfile.open(fileobj=fh) as tar:
            tar.extractall(dest, filter="fully_trusted")
    return dest


def _cmd(tree: Path, name: str, calls: int) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", str(tree), name, str(calls)]


def _env() -> dict[str, str]:
    # One BLAS thread: OpenBLAS's idle worker threads spin, and their spinning would be counted.
    env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    return env


_IREFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def count(tree: Path, name: str, calls: int, keep: Path | None, label: str) -> int:
    """Instructions of one process running `calls` calls of figure `name` against `tree`."""
    out = keep / f"{label}.{name}.{calls}.out" if keep else Path(os.devnull)
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}", *_cmd(tree, name,
                                                                                                         calls)]
    res = subprocess.run(cmd, capture_output=True, text=True, env=_env(), check=False)
    m = _IREFS.search(res.stderr)
    if res.returncode != 0 or not m:
        raise RuntimeError(f"{label} {name} {calls}: exit {res.returncode}\n{res.stderr[-2000:]}")
    return int(m.group(1).replace(",", ""))


def warm_calls(name: str) -> int:
    """Calls of `name`'s native warm-up: few, but all of N where fewer would take another path."""
    n = FIGURES[name][0]
    return n if name in WARM_FULL else max(2, n // 20)


def warm(tree: Path, names: list[str]) -> None:
    """Each figure once natively, small: fills Numba's cache of `tree` before anything is counted."""
    for name in names:
        res = subprocess.run(_cmd(tree, name, warm_calls(name)), capture_output=True, text=True, env=_env(), check=False)
        if res.returncode != 0:
            raise RuntimeError(f"{tree} {name}: exit {res.returncode}\n{res.stderr[-2000:]}")
        if name in WARM_FULL:  # Numba keys its cache by the CPU, and valgrind's is not the machine's
            count(tree, name, warm_calls(name), None, "warm")


def per_call(tree: Path, name: str, keep: Path | None, label: str, pool: ThreadPoolExecutor) -> Any:
    n = FIGURES[name][0]
    small, big = pool.submit(count, tree, name, n, keep, label), pool.submit(count, tree, name, 2 * n, keep, label)
    return lambda: (big.result() - small.result()) / n


def table(names: list[str], labels: list[str], result: dict[str, dict[str, float]]) -> str:
    head = ["figure", *[f"{x} instr/call" for x in labels], *[f"{x}/{labels[0]}" for x in labels[1:]]]
    rows = [head]
    for name in names:
        vals = [result[x][name] for x in labels]
        rows.append([name, *[f"{v:,.0f}" for v in vals], *[f"{v / vals[0]:.4f}" for v in vals[1:]]])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("revs", nargs="+", help="git revisions to measure, the first the base of the ratios")
    ap.add_argument("--no-worktree", action="store_true",
                    help="measure the revisions only (by default this working tree is measured last, as `.`)")
    ap.add_argument("--trees", type=Path, help="keep the revisions' files (and their Numba caches) here for the next run")
    ap.add_argument("--figure", action="append", choices=list(FIGURES), help="only these figures (repeatable)")
    ap.add_argument("--jobs", type=int, default=2, help="cachegrind processes at once (default 2)")
    ap.add_argument("--keep", type=Path, help="keep cachegrind's output files here (for cg_annotate)")
    ap.add_argument("--out", type=Path, default=HERE / "ab_instructions.json", help="results JSON path")
    args = ap.parse_args(argv)
    names = args.figure or list(FIGURES)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="opsim-ab-") as tmp:
        keep_trees = args.trees or Path(tmp)
        trees = {rev: export_tree(rev, keep_trees) for rev in args.revs}
        labels = list(args.revs)
        if not args.no_worktree:
            trees["."] = ROOT
            labels.append(".")
        for label in labels:
            print(f"warming {label}...", file=sys.stderr, flush=True)
            warm(trees[label], names)
        with ThreadPoolExecutor(args.jobs) as pool:
            pending = {x: {name: per_call(trees[x], name, args.keep, x, pool) for name in names} for x in labels}
            result = {x: {name: fn() for name, fn in figs.items()} for x, figs in pending.items()}
    print(table(names, labels, result))
    revs = {x: subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD" if x == "." else x],
                              capture_output=True, text=True).stdout.strip() for x in labels}
    if "." in revs:
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "opsim"], capture_output=True,
                               text=True).stdout.strip()
        revs["."] += " (working tree" + (", opsim changed)" if dirty else ")")
    doc = {"tool": "valgrind --tool=cachegrind --cache-sim=no; (I(2N) - I(N)) / N", "revisions": revs,
           "calls": {name: FIGURES[name][0] for name in names},
           "what": {name: FIGURES[name][1] for name in names}, "instructions_per_call": result}
    args.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit(main())
