"""`opsim validate` refuses what `opsim run` refuses after simulating: a simulated end beyond what the outputs
express (opsim.scenario.end_bound), such as SoC rates overridden moderately low under many large kernels."""
from __future__ import annotations

import io

from hypothesis import HealthCheck, example, given, settings, strategies as st

from opsim.cli import main
from opsim.scenario.checks import scenario_horizon
from opsim.scenario.end_bound import end_bound
from opsim.scenario.loader import validate
from opsim.scenario.runner import run_scenario

BIG = ("name: big\nseed: 1\nthreads:\n  - name: t\n    program:\n      - loop:\n          count: 10\n"
       "          body:\n            - op: Matmul\n              shapes: [[4096, 4096], [4096, 4096]]\n"
       "              dtype: float16\n")
SMALL = ("name: small\nseed: 1\nthreads:\n  - name: t\n    streams: [a, b]\n    program:\n"
         "      - loop:\n          count: 3\n          body:\n"
         "            - op: Add\n              stream: a\n              shape: [256, 1024]\n              dtype: float16\n"
         "            - op: Matmul\n              stream: b\n              shapes: [[256, 512], [512, 256]]\n"
         "              dtype: float16\n            - sleep: 2\n")


def _cli(*argv) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], stdout=out, stderr=err)
    return code, err.getvalue()


def test_validate_refuses_a_clock_that_makes_the_run_outlast_trace_json(tmp_path):
    """The reproducer: 10 Matmuls of 4096^3 at clock_mhz 5e-6 reach 1.7e12 us (run refused it after simulating;
    validate said ok, its per-unit check only catches rates below 1e-12). At 2e-5 both accept."""
    s = tmp_path / "big.yaml"
    s.write_text(BIG)
    code, err = _cli("validate", s, "--set", "soc_overrides.clock_mhz=5e-6")
    assert code == 2 and err.count("\n") == 1, err
    assert "the run may reach 1.7" in err and "soc_overrides" in err and "trace.json" in err
    assert _cli("validate", s, "--set", "soc_overrides.clock_mhz=2e-5")[0] == 0


def _verdicts(text: str, path, overrides: dict) -> tuple[bool, bool, float, float]:
    path.write_text(text)
    cfg = validate(path, overrides)
    bound, _ = scenario_horizon(cfg.data)
    upper = end_bound(cfg)
    end = float(run_scenario(cfg, write=False).sim.env.now)
    return end > bound, upper > bound, end, upper


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(["clock_mhz", "hbm_bandwidth_gbps", "peak_fp16_flops"]),
       exponent=st.floats(-14.0, 0.0), trace=st.booleans())
@example(field="clock_mhz", exponent=-13.0, trace=True)  # both refuse
@example(field="hbm_bandwidth_gbps", exponent=-9.0, trace=True)  # both accept
def test_validate_refuses_whenever_the_run_would(tmp_path, field, exponent, trace):
    """Over SoC rates from near 0 to ordinary, validate's bound is never below the run's end (so every run the
    outputs cannot express is refused first), and it is tight where it matters (a device-bound run, long): within
    2x, so validate refuses no run far inside the horizon."""
    rate = 10.0 ** exponent * {"clock_mhz": 1800.0, "hbm_bandwidth_gbps": 1600.0, "peak_fp16_flops": 3e14}[field]
    run_refuses, validate_refuses, end, upper = _verdicts(
        SMALL, tmp_path / "s.yaml", {f"soc_overrides.{field}": rate, "outputs.trace": trace})
    assert upper >= end
    assert run_refuses <= validate_refuses
    if (field, exponent) == ("clock_mhz", -13.0):
        assert run_refuses
    if (field, exponent) == ("hbm_bandwidth_gbps", -9.0):
        assert not validate_refuses
    if end > 1e9:
        assert upper <= 2 * end


def test_quickstart_bound_is_above_its_end():
    from scenario_helpers import SCENARIOS
    cfg = validate(SCENARIOS / "quickstart.yaml")
    end = float(run_scenario(cfg, write=False).sim.env.now)
    assert end <= end_bound(cfg)
