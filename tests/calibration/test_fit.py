"""The robust kernel fit and the predictor levels."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.calibration.fit import MAX_US_PER_UNIT, Sample, fit_kernels
from opsim.device.cost import CostModel
from opsim.device.fitted import FittedTiming, KernelFit, Provenance, SignatureTime, parse_rows


def _s(nbytes, us, bd=8, flops=0.0, row=2):
    return Sample(flops=flops, nbytes=nbytes, block_dim=bd, duration_us=us, file="f.csv", row=row)


def test_recovers_overhead_and_bandwidth_with_an_outlier():
    samples = [_s(b, 2.0 + b * 1e-6, row=i + 2) for i, b in enumerate([1e4, 1e5, 1e6, 4e6, 1e7, 3e7])]
    samples.append(_s(5e5, 400.0, row=99))  # one kernel that waited on something: must not move the fit
    fit = fit_kernels(samples)
    assert fit.overhead_us == pytest.approx(2.0, rel=0.05)
    assert fit.us_per_byte + fit.us_per_byte_per_block / 8 == pytest.approx(1e-6, rel=0.05)
    assert fit.n == 7 and fit.median_error < 0.01
    assert fit.provenance == (Provenance("f.csv", (2, 3, 4, 5, 6, 7, 99)),)
    assert fit.bytes_range == (1e4, 3e7)


def test_one_kernel_gives_its_own_duration():
    fit = fit_kernels([_s(1e6, 7.5)])
    assert fit.overhead_us == pytest.approx(7.5) and fit.us_per_byte == 0 and fit.n == 1


def test_scalar_sized_kernels_get_no_slope():
    fit = fit_kernels([_s(4, 1.4), _s(8, 1.48), _s(8, 1.36), _s(4, 1.5)])
    assert (fit.us_per_byte, fit.us_per_flop, fit.us_per_byte_per_block) == (0.0, 0.0, 0.0)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.floats(1e3, 1e9), st.floats(0.5, 5e4)), min_size=1, max_size=20))
def test_fit_coefficients_are_non_negative_and_bounded(points):
    fit = fit_kernels([_s(b, us, row=i) for i, (b, us) in enumerate(points)])
    assert fit.overhead_us >= 0 and fit.us_per_byte >= 0 and fit.us_per_flop >= 0
    assert fit.us_per_byte_per_block >= 0
    assert max(fit.us_per_byte, fit.us_per_flop, fit.us_per_byte_per_block) <= MAX_US_PER_UNIT * (1 + 1e-9)


def test_rows_text_round_trip():
    p = Provenance("x", (9, 2, 3, 4, 12, 13, 14, 20))
    assert p.rows_text() == "2-4,9,12-14,20"
    assert parse_rows(p.rows_text()) == (2, 3, 4, 9, 12, 13, 14, 20)


def test_predictor_levels_and_fallbacks():
    fits = FittedTiming(
        name="t",
        op_types={("Add", "AI_VECTOR_CORE"): KernelFit(2.0, bytes_range=(0, 1e6), flops_range=(0, 1e6))},
        cores={"AI_VECTOR_CORE": KernelFit(1.0, us_per_byte=1e-6)},
        signatures={"Add|AI_VECTOR_CORE|4|float|4|float": SignatureTime(median_us=9.0, n=3)})
    cost = CostModel(fitted=fits, defaults=False)
    sig = "Add|AI_VECTOR_CORE|4|float|4|float"
    assert cost.kernel("Add", "AI_VECTOR_CORE", 4, 32, 1, sig) == 9.0
    assert cost.kernel("Add", "AI_VECTOR_CORE", 4, 32, 1) == 2.0
    assert cost.kernel_level("Add", "AI_VECTOR_CORE", 4, 32) == "op type (calibration)"
    # far outside the op-type line's sizes it is not extrapolated, nor is a core line used: without any
    # family parameters (defaults=False) the roofline answers
    far = cost.predict("Add", "AI_VECTOR_CORE", 0, 1e9, 1)
    assert far.level == "roofline" and far.us == cost.kernel_time(0, 1e9, 1, "AI_VECTOR")
    assert cost.kernel("MatMulV2", "AI_CORE", 1e9, 1e6, 24) == cost.kernel_time(1e9, 1e6, 24, "AI_CORE")
    assert cost.kernel_level("MatMulV2", "AI_CORE", 1e9, 1e6) == "roofline (roofline)"
    # with the built-in family model, the family answers beyond the line
    cost = CostModel(fitted=fits)
    assert cost.predict("Add", "AI_VECTOR_CORE", 0, 1e9, 1).level in ("family", "op type")
    assert cost.predict("Add", "AI_VECTOR_CORE", 0, 1e9, 1).source != "calibration"
    assert cost.predict("Xyz", "AI_VECTOR_CORE", 0, 1e6, 8).level == "family"


def test_every_prediction_has_a_band_around_it():
    cost = CostModel()
    for args in (("Add", "AI_VECTOR_CORE", 1e6, 6e6, 40), ("MatMulV2", "AI_CORE", 2e11, 3e7, 24),
                 ("MemSet", "AI_VECTOR_CORE", 0, 4096, 1), ("Cast", "AI_CPU", 16, 96, 1),
                 ("Foo", "DSA_SQE", 0, 1024, 1)):
        p = cost.predict(*args)
        assert 0 < p.low <= p.us <= p.high, args
    inside = cost.predict("Xyz", "AI_VECTOR_CORE", 1e6, 6e6, 40)
    outside = cost.predict("Xyz", "AI_VECTOR_CORE", 1e13, 6e13, 40)  # far beyond any fitted byte range
    assert outside.high / outside.us > inside.high / inside.us


def test_socs_rank_as_the_hardware_does():
    """A large matmul and a large elementwise kernel: the faster chip (more cores x clock, more bandwidth)
    is faster under the built-in model, whatever the preset."""
    from opsim.device.soc import get_soc
    t = {s: CostModel(get_soc(s)).kernel("MatMulV2", "AI_CORE", 2 * 4096.0 ** 3, 3 * 2 * 4096.0 ** 2, 1000)
         for s in ("Ascend910B2", "Ascend910B4", "Ascend910A", "Ascend310P3")}
    assert t["Ascend910B2"] < t["Ascend910B4"] < t["Ascend310P3"]
    assert t["Ascend910B2"] < t["Ascend910A"] < t["Ascend310P3"]
    v = {s: CostModel(get_soc(s)).kernel("Add", "AI_VECTOR_CORE", 1e8, 6e8, 1000)
         for s in ("Ascend910B2", "Ascend310P3")}
    assert v["Ascend910B2"] < v["Ascend310P3"]


def test_builtin_defaults_apply_to_every_preset():
    from opsim.device.soc import get_soc
    assert CostModel(get_soc("Ascend910B2")).default_fitted is not None  # host timings: 910B presets only
    assert CostModel(get_soc("Ascend910A")).default_fitted is None
    assert CostModel(get_soc("Ascend910A")).default_family is CostModel().default_family is not None
    tiny_add = CostModel().kernel("Add", "AI_VECTOR_CORE", 1024, 12288, 4)
    assert tiny_add < CostModel(defaults=False).kernel("Add", "AI_VECTOR_CORE", 1024, 12288, 4)
    assert CostModel().kernel_level("Add", "AI_VECTOR_CORE", 1024, 12288) == "op type (built-in fits)"
    assert CostModel(get_soc("Ascend910A")).kernel_level("Add", "AI_VECTOR_CORE", 1024, 12288) == \
        "op type (built-in fits)"
