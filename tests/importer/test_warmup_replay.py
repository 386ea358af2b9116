"""The replay of each shared AlexNet profile (levels 1 and 2, ranks 0 and 1) has the real profile's calls over
its whole trace: the warm-up calls that prime the cache run with the profiler stopped (opsim.scenario.warmup),
so no warm-up call or kernel is written into the profile."""
from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[3] / "shared" / "real-profiles" / "alexnet-910b" / "text"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (SHARED / "level1").is_dir(), reason="the shared AlexNet profiles are not here")]


def _aclnn_calls(trace_view: Path) -> Counter:
    from opsim.ingest import read_trace_view
    return Counter(a.api for a in read_trace_view(trace_view).acl_api_events()
                   if a.kind == "phase2" and a.api.startswith("aclnn"))


def _stepless_kernels(kernel_details: Path) -> int:
    with open(kernel_details, newline="") as f:
        return sum(1 for row in csv.DictReader(f) if not row["Step Id"])


@pytest.mark.parametrize("folder", ["level1/rank0", "level1/rank1", "level2/rank0", "level2/rank1"])
def test_replay_has_the_real_calls_per_api_over_the_whole_trace(folder, tmp_path):
    from opsim.importer import import_profile, write_import
    from opsim.scenario.runner import run_scenario
    real = SHARED / f"{folder}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    imported = write_import(import_profile(real.parent), tmp_path / "imported.yaml")
    assert imported.report.figures["warmup_calls"] > 0  # the profile hits keys cached before it began
    run_scenario(imported.scenario_path, out_dir=tmp_path / "replay", profiler_output=True)
    (replay,) = (tmp_path / "replay").glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT")
    assert _aclnn_calls(replay / "trace_view.json") == _aclnn_calls(real / "trace_view.json")
    assert _stepless_kernels(replay / "kernel_details.csv") == _stepless_kernels(real / "kernel_details.csv")
