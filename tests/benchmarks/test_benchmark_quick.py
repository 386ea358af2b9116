"""`benchmarks/run.py --quick` keeps working: it exits 0, prints every figure with its target, writes the JSON."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_benchmark_runs_and_reports_every_figure(tmp_path):
    out = tmp_path / "results.json"
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--out", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=1200)
    # (a guard against a hang only: "under a minute" alone, 265 s on the loaded 2-core machine with 300 s allowed)
    assert res.returncode == 0, res.stderr
    assert "benchmark failed" not in res.stderr, res.stderr
    data = json.loads(out.read_text())
    figures = {r["figure"]: r for r in data["rows"]}
    for name in ("bare SimPy 7-event skeleton", "aclnnAdd, executor-cache hit (run_op)",
                 "aclnnAdd, phase 1 every call (ACLNN_CACHE_LIMIT=0)", "aclnnSigmoidAicpu, AI CPU task-cache hit",
                 "aclnnAddRmsNorm, repeatable executor, phase 2 only", "batched key hash, 64 B keys",
                 "batched key hash, 1024 B keys", "single 1024 B key hash", "workspace plan, 100000 tensors",
                 "opsim validate scenarios/quickstart.yaml", "opsim run scenarios/quickstart.yaml (warm cache)",
                 "40-point quickstart sweep, 2 workers / 1 worker",
                 "40-point quickstart sweep, no --workers / --workers 0"):
        assert name in figures, name
        assert figures[name]["value"] > 0, name
        assert name in res.stdout
    for key in ("exec_cache_hit", "exec_cache_miss", "aicpu_task_cache_hit", "direct_invoke_repeat"):
        assert data["rates"][key] > 0 and data["rates"][key + "_reference"] > 0, key
    assert data["load"]["seconds"] > 0 and any(name.startswith("load a ") for name in figures)
    assert figures["opsim run scenarios/large.yaml"]["note"] == "skipped (--quick)"
    for key in ("exec_cache_hit", "exec_cache_miss", "aicpu_task_cache_hit", "direct_invoke_repeat", "skeleton"):
        assert data["rates"][key] > 0
    assert data["quick"] is True
    assert data["sweep"]["points"] == 40 and data["sweep"]["warm_1"] > 0 and data["sweep"]["warm_2"] > 0
    assert data["sweep"]["inline"] > 0 and data["sweep"]["default"] > 0
