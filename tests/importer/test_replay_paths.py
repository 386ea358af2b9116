"""An imported real profile (the bundled AlexNet rank: profiled ops, sleeps, replayed communication and recorded
tasks, events, a warm-up) replays to the same bytes on the fast path and the reference path, profiler outputs
included."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from opsim.importer import import_profile, write_import
from opsim.scenario.runner import run_scenario

ALEXNET = Path(__file__).resolve().parents[1] / "data" / "real" / "alexnet_910b_rank0"


@pytest.mark.slow
def test_fast_and_reference_paths_write_the_same_files(tmp_path):
    path = write_import(import_profile(ALEXNET), tmp_path / "imported.yaml").scenario_path
    for d, fast in (("fast", True), ("ref", False)):
        run_scenario(path, out_dir=tmp_path / d, profiler_output="both", fast_path=fast)
    files = sorted(p.relative_to(tmp_path / "fast") for p in (tmp_path / "fast").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "ref") for p in (tmp_path / "ref").rglob("*") if p.is_file())
    assert any(f.name == "trace_view.json" for f in files) and any(f.suffix == ".db" for f in files)
    for f in files:
        a, b = (tmp_path / "fast" / f).read_bytes(), (tmp_path / "ref" / f).read_bytes()
        if f.name == "summary.json":  # its `wall` section is machine time
            a, b = ({k: v for k, v in json.loads(x).items() if k != "wall"} for x in (a, b))
        assert a == b, f
