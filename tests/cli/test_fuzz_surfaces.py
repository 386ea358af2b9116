"""Seeded fuzzing of every surface a user reaches (scenario, sweep, --set, import, calibrate, predict, calibration
YAML, report, load_result, paths, stop signals): a few hundred hostile cases in this process, each refused or
accepted cleanly (exit 0, 1 or 2 with a one-line message; no traceback, no hang past 10 s, no memory blow-up).
benchmarks/fuzz_campaign.py runs the same generator over 10,000 cases and more."""
from __future__ import annotations

import collections

import pytest

from fuzz_cases import SURFACES, campaign

CASES = 264  # 24 per surface


@pytest.mark.slow
def test_every_surface_refuses_hostile_input_cleanly(tmp_path_factory):
    outcomes = campaign(seed=2026, n=CASES, root=tmp_path_factory.mktemp("fuzz"))
    bad = [o for o in outcomes if o.status != "ok"]
    assert not bad, "\n".join(f"{o.surface}: {o.label}: {o.status}: {o.detail}" for o in bad[:10])
    assert set(collections.Counter(o.surface for o in outcomes)) == set(SURFACES)
