"""SoC presets: the stated facts, provenance for every number, derived peak, clear errors."""
import pytest

from opsim.device.soc import PROVENANCE_KINDS, SOC_PRESETS, derive_peak_fp16_flops, get_soc
from opsim.errors import InvalidArgumentError

GiB = 1 << 30
REQUIRED = ("Ascend910B1", "Ascend910B2", "Ascend910B3", "Ascend910B4", "Ascend910A", "Ascend310P3")


def test_required_presets_exist():
    assert set(REQUIRED) <= set(SOC_PRESETS)


def test_910b2_facts():
    s = get_soc("Ascend910B2")
    assert (s.aicore_count, s.vector_core_count, s.aicpu_count) == (24, 48, 6)
    assert s.hbm_bytes == 64 * GiB
    assert s.clock_mhz == 1800


def test_310p3_facts():
    s = get_soc("Ascend310P3")
    assert (s.aicore_count, s.vector_core_count, s.aicpu_count) == (8, 7, 7)


@pytest.mark.parametrize("name,cores,vec,hbm_gib", [
    ("Ascend910B1", 24, 48, 64), ("Ascend910B3", 20, 40, 64), ("Ascend910B4", 20, 40, 32), ("Ascend910A", 32, 0, 32),
])
def test_other_variants(name, cores, vec, hbm_gib):
    s = get_soc(name)
    assert (s.aicore_count, s.vector_core_count, s.hbm_bytes) == (cores, vec, hbm_gib * GiB)


@pytest.mark.parametrize("name", REQUIRED)
def test_peak_is_derived_from_cores_and_clock(name):
    s = get_soc(name)
    assert s.peak_fp16_flops == s.aicore_count * 16 ** 3 * 2 * s.clock_mhz * 1e6
    assert s.provenance_kind("peak_fp16_flops") == "derived"


@pytest.mark.parametrize("name", REQUIRED)
def test_every_number_has_a_provenance(name):
    s = get_soc(name)
    for field in s.numbers():
        assert s.provenance_kind(field) in PROVENANCE_KINDS
    assert "assumed" in s.provenance["hbm_bandwidth_gbps"]


def test_910b2_peak_value():
    assert get_soc("Ascend910B2").peak_fp16_flops == pytest.approx(353.89e12, rel=1e-4)
    assert derive_peak_fp16_flops(1, 1000) == 4096 * 2 * 1e9


def test_names_are_case_insensitive():
    assert get_soc("ascend910b2") is get_soc("Ascend910B2")


def test_unknown_soc_lists_accepted_names():
    with pytest.raises(InvalidArgumentError) as e:
        get_soc("Ascend999")
    for name in REQUIRED:
        assert name in str(e.value)


def test_unknown_override_names_allowed_fields():
    with pytest.raises(InvalidArgumentError) as e:
        get_soc("Ascend910B2", cores=3)
    assert "cores" in str(e.value) and "aicore_count" in str(e.value)


def test_override_rederives_peak_and_marks_provenance():
    s = get_soc("Ascend910B2", aicore_count=12)
    assert s.aicore_count == 12
    assert s.peak_fp16_flops == get_soc("Ascend910B2").peak_fp16_flops / 2
    assert s.provenance["aicore_count"].startswith("assumed")
    assert get_soc("Ascend910B2").aicore_count == 24  # the preset itself is untouched


@pytest.mark.parametrize("field,value", [("aicore_count", 0), ("aicore_count", -1), ("hbm_bytes", 1.5),
                                         ("clock_mhz", "fast"), ("memcpy_engines", True)])
def test_bad_override_values(field, value):
    with pytest.raises(InvalidArgumentError, match=field):
        get_soc("Ascend910B2", **{field: value})
