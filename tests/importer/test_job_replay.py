"""Import and replay of the shared 2-of-8-rank AlexNet job (levels 1 and 2): per observed rank, the step's
Computing, Communication and Stage against its step_trace_time.csv, and the allreduces' Wait and Transit against
its communication.json, each within 10% (issue 29, "Done when")."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[3] / "shared" / "real-profiles" / "alexnet-910b" / "text"
TOLERANCE = 0.10
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (SHARED / "level1").is_dir(), reason="the shared AlexNet job is not here")]


def _real(folder: Path) -> dict[str, float]:
    from opsim.calibration.comm_read import read_communication
    out = folder / "ASCEND_PROFILER_OUTPUT"
    with open(out / "step_trace_time.csv", newline="") as f:
        row = next(csv.DictReader(f))
    ops = read_communication(out / "communication.json")
    return {"Computing": float(row["Computing"]), "Communication": float(row["Communication"]),
            "Stage": float(row["Stage"]), "Wait": sum(o.wait_us for o in ops),
            "Transit": sum(o.transit_us for o in ops)}


def _replayed(run, rank: int) -> dict[str, float]:
    """The rank's step as step_trace_time.csv computes it (its recorder's ProfilerStep), and its collectives."""
    from opsim.trace.ascend_build import build_profile
    step = build_profile(run.ranks[rank].sim).step_rows[0]
    colls = run.ranks[rank].rank.collectives
    return {"Computing": step.computing / 1000.0, "Communication": step.communication / 1000.0,
            "Stage": step.stage / 1000.0, "Wait": sum(c.wait_us for c in colls),
            "Transit": sum(c.transit_us for c in colls)}


@pytest.fixture(scope="module", params=["level1", "level2"])
def figures(request, tmp_path_factory):
    from opsim.importer import import_job, write_import
    from opsim.scenario.runner import run_scenario
    folder = SHARED / request.param
    tmp = tmp_path_factory.mktemp(request.param)
    imported = write_import(import_job(folder), tmp / "job.yaml")
    run = run_scenario(imported.scenario_path, out_dir=tmp / "out", write=False)
    return request.param, {r: (_real(folder / f"rank{r}_ascend_pt"), _replayed(run, r)) for r in (0, 1)}


@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("figure", ["Communication", "Stage", "Wait", "Transit"])
def test_replayed_rank_within_10_percent(figures, rank, figure):
    level, by_rank = figures
    real, replay = by_rank[rank]
    assert replay[figure] == pytest.approx(real[figure], rel=TOLERANCE), (level, rank, figure, real, replay)


@pytest.mark.parametrize("rank", [0, 1])
def test_replayed_computing(figures, rank):
    """Computing comes from the rank's own replay of its calls' kernels (copies and DSA tasks are not
    computing, as torch_npu counts): every observed rank within 10% (measured: within 1% on both levels)."""
    level, by_rank = figures
    real, replay = by_rank[rank]
    assert replay["Computing"] == pytest.approx(real["Computing"], rel=TOLERANCE), (level, rank, real, replay)
