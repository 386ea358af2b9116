"""Sweep files: points are the product of grid, zip and random, repeated per seed; every mistake is named
with its file, line and field before anything runs."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.errors import ScenarioError
from opsim.sweeps.spec import DEFAULT_FIGURES, is_sweep_file, load_sweep, sample

from .conftest import SCENARIOS, write_sweep


def test_points_are_grid_product_times_seeds(small_sweep):
    spec = load_sweep(small_sweep)
    pts = spec.points()
    assert spec.params == ["env.ACLNN_CACHE_LIMIT", "soc"]
    assert len(pts) == 8 and [p.index for p in pts] == list(range(8))
    assert [(p.params["env.ACLNN_CACHE_LIMIT"], p.params["soc"], p.seed) for p in pts[:3]] == [
        (1, "Ascend910B2", 7), (1, "Ascend910B2", 8), (1, "Ascend310P3", 7)]  # seeds count up from the scenario's 7
    assert pts[0].overrides == {"threads.1.program.0.loop.count": 2, "env.ACLNN_CACHE_LIMIT": 1,
                                "soc": "Ascend910B2", "seed": 7}
    assert len({spec.point_key(p) for p in pts}) == 8
    assert load_sweep(small_sweep).points() == pts  # the same file, the same points


def test_zip_random_and_named_axes(tmp_path):
    path = write_sweep(tmp_path, """\
sweep: mixed
scenario: {scenario}
zip:
  env.ACLNN_CACHE_LIMIT: [1, 2, 3]
  env.ACLNN_AICPU_CACHE_LIMIT: [4, 5, 6]
grid:
  sampler:
    short: {threads.1.program.0.loop.count: 1}
    long: {threads.1.program.0.loop.count: 3}
random:
  samples: 4
  seed: 5
  params:
    soc_overrides.clock_mhz: {integer: [1000, 2000]}
    soc: {choice: [Ascend910B2, Ascend910B3]}
seeds: [3, 9]
""")
    spec = load_sweep(path)
    assert spec.params == ["sampler", "env.ACLNN_CACHE_LIMIT", "env.ACLNN_AICPU_CACHE_LIMIT",
                           "soc_overrides.clock_mhz", "soc"]
    pts = spec.points()
    assert len(pts) == 2 * 3 * 4 * 2
    first = pts[0]
    assert first.params["sampler"] == "short" and first.overrides["threads.1.program.0.loop.count"] == 1
    assert (first.params["env.ACLNN_CACHE_LIMIT"], first.params["env.ACLNN_AICPU_CACHE_LIMIT"]) == (1, 4)
    assert {p.seed for p in pts} == {3, 9}
    clocks = [p.params["soc_overrides.clock_mhz"] for p in pts]
    assert all(1000 <= c <= 2000 and isinstance(c, int) for c in clocks)
    assert [p.params for p in load_sweep(path).points()] == [p.params for p in pts]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(1, 20), lo=st.floats(0.5, 10), span=st.floats(0, 100))
def test_random_samples_are_seeded_and_in_range(seed, n, lo, span):
    params = {"a": {"uniform": [lo, lo + span]}, "b": {"log_uniform": [lo, lo + span]},
              "c": {"integer": [-3, 3]}, "d": {"choice": ["x", "y"]}}
    rows = sample(params, n, seed)
    assert rows == sample(params, n, seed) and len(rows) == n
    for a, b, c, d in rows:
        assert lo <= a <= lo + span and lo * (1 - 1e-12) <= b <= (lo + span) * (1 + 1e-12)
        assert c in range(-3, 4) and d in ("x", "y")
        assert math.isfinite(a)


def test_default_figures_and_sweep_detection(small_sweep):
    spec = load_sweep({"sweep": "d", "scenario": str(SCENARIOS / "quickstart.yaml"), "grid": {"seed": [1, 2]}})
    assert spec.figures == DEFAULT_FIGURES and spec.seeds is None
    assert is_sweep_file(small_sweep) and not is_sweep_file(SCENARIOS / "quickstart.yaml")
    assert not is_sweep_file(small_sweep.parent / "missing.yaml")


@pytest.mark.parametrize("body, expected", [
    ("grid:\n  env.ACLNN_CACHE_LIMIT: [1, 2]\ngird: {}\n", r"small\.yaml:\d+: gird: unknown field 'gird' \(did you mean 'grid'\?\)"),
    ("grid:\n  env.ACLNN_CACHE_LIMIT: []\n", r"small\.yaml:\d+: grid\.env\.ACLNN_CACHE_LIMIT: "),
    ("grid:\n  soc: [Ascend910B2, Ascend999]\n", r"small\.yaml:7: grid\.soc: soc='Ascend999' makes the scenario invalid"),
    ("grid:\n  threads.0.progrm.0.loop.count: [1]\n", r"grid\.threads\.0\.progrm\.0\.loop\.count.*makes the scenario invalid"),
    ("zip:\n  seed: [1, 2]\n  soc: [Ascend910B2]\n", r"zip: zipped parameters need the same number of values"),
    ("grid:\n  seed: [1, 2]\nseeds: 2\n", r"seeds: the seed is already set"),
    ("grid:\n  soc: [Ascend910B2]\noverrides: {soc: Ascend910B3}\n", r"grid\.soc: 'soc' is also fixed in `overrides`"),
    ("figures: [makespan_uss]\n", r"figures\[0\]: unknown figure 'makespan_uss' \(did you mean 'makespan_us'\?\)"),
    ("figures: [summary.wall.wall_seconds]\n", r"figures\[0\]: the summary's `wall` section is machine time"),
    ("random: {samples: 2, params: {seed: {integer: [5, 1]}}}\n", r"random\.params\.seed\.integer: the range \[5, 1\] is empty"),
])
def test_errors_name_file_line_and_field(tmp_path, body, expected):
    path = write_sweep(tmp_path, "sweep: small\nscenario: {scenario}\n\n\n\n" + body)
    with pytest.raises(ScenarioError, match=expected):
        load_sweep(path)


def test_missing_scenario_file_is_named(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("sweep: s\nscenario: nowhere.yaml\ngrid: {seed: [1]}\n")
    with pytest.raises(ScenarioError, match=r"s\.yaml:2: scenario: the scenario file .*nowhere\.yaml' is not found"):
        load_sweep(path)


def test_bundled_sweeps_validate():
    for path in sorted((SCENARIOS / "sweeps").glob("*.yaml")):
        spec = load_sweep(path)
        assert spec.points(), path
    names = {p.stem for p in (SCENARIOS / "sweeps").glob("*.yaml")}
    assert {"aicpu_limit_x_threads", "exec_limit_x_shapes", "quickstart_socs"} <= names
