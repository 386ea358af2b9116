"""Small sweeps of the bundled quickstart scenario, written next to each test (paths are relative to the file)."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"

SMALL = """\
sweep: small
scenario: {scenario}
overrides:
  threads.1.program.0.loop.count: 2
grid:
  env.ACLNN_CACHE_LIMIT: [1, 8]
  soc: [Ascend910B2, Ascend310P3]
seeds: 2
figures: [summary.simulated_makespan_us, summary.exec_cache.hit_rate, summary.memory, makespan_us]
"""
"""8 points: 2 cache limits x 2 SoCs x 2 seeds, with summary fields, a flattened summary section and a trace
figure."""


def write_sweep(tmp_path: Path, text: str = SMALL, name: str = "small.yaml") -> Path:
    (tmp_path / "quickstart.yaml").write_text((SCENARIOS / "quickstart.yaml").read_text())
    path = tmp_path / name
    path.write_text(text.replace("{scenario}", "quickstart.yaml"))
    return path


@pytest.fixture
def small_sweep(tmp_path: Path) -> Path:
    return write_sweep(tmp_path)


@pytest.fixture(scope="session")
def reference(tmp_path_factory):
    """The small sweep run in this process (workers=0): what every executor must reproduce."""
    from opsim.sweeps import sweep
    return sweep(write_sweep(tmp_path_factory.mktemp("ref")), workers=0)


def without_wall(df):
    return df.drop(columns=["wall_seconds"])
