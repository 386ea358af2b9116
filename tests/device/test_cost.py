"""Cost model: roofline kernel times, memcpy times, the host-phase table and its overrides."""
import pytest

from opsim.device.cost import DEVICE_PARAMS, HOST_PHASES, CostModel
from opsim.device.soc import get_soc
from opsim.device.task import TaskKind
from opsim.errors import InvalidArgumentError

PHASES = [
    "L2 phase1 entry", "make key", "match cache", "add io and attr", "infershape", "tiling", "alloc tensor",
    "build graph", "plan workspace", "release to", "L2 phase2 entry", "update tensor addr", "launch",
    "cache replay", "destroy executor", "rt malloc", "rt free", "stream sync",
    "FindTask", "CreateTask", "Init", "UpdateShape", "ShapeH2D", "UpdateArgs", "Launch", "CopyShapeD2H",
    "UpdateOutputShape", "prepare", "direct invoke launch", "destroy", "dump", "overflow check",
]


@pytest.fixture
def cost():
    return CostModel(get_soc("Ascend910B2"))


def test_every_phase_has_a_cost_and_provenance(cost):
    for phase in PHASES:
        assert cost.host(phase) > 0
        assert HOST_PHASES[phase][1].startswith(("assumed", "derived", "measured", "vendor table"))
    for name, (_v, prov) in DEVICE_PARAMS.items():
        assert prov.startswith(("assumed", "derived", "measured", "vendor table")), name


def test_unknown_phase_is_a_clear_error(cost):
    with pytest.raises(InvalidArgumentError, match="tilling") as e:
        cost.host("tilling")
    assert "tiling" in str(e.value)


def test_overrides_apply_and_unknown_keys_name_allowed_ones():
    c = CostModel(get_soc("Ascend910B2"), {"tiling": 7.5, "aicore_launch_us": 1.0})
    assert c.host("tiling") == 7.5
    assert c.provenance["tiling"].startswith("assumed")
    with pytest.raises(InvalidArgumentError) as e:
        CostModel(get_soc("Ascend910B2"), {"tilling": 1.0})
    assert "tiling" in str(e.value) and "aicore_efficiency" in str(e.value)
    with pytest.raises(InvalidArgumentError):
        CostModel(get_soc("Ascend910B2"), {"tiling": -1})
    with pytest.raises(InvalidArgumentError):
        CostModel(get_soc("Ascend910B2"), {"aicore_efficiency": 1.5})


def test_compute_bound_kernel_uses_cube_peak_and_core_fraction(cost):
    soc = cost.soc
    eff = cost.params["aicore_efficiency"]
    launch = cost.params["aicore_launch_us"]
    flops = 1e12
    full = cost.kernel_time(flops, 0, soc.aicore_count, TaskKind.AI_CORE)
    assert full == pytest.approx(flops / (soc.peak_flops_per_us * eff) + launch)
    half = cost.kernel_time(flops, 0, soc.aicore_count // 2, TaskKind.AI_CORE)
    assert half - launch == pytest.approx(2 * (full - launch))
    # More blocks than cores cannot go faster than all cores.
    assert cost.kernel_time(flops, 0, 48, TaskKind.AI_CORE) == pytest.approx(full)


def test_memory_bound_kernel_uses_bandwidth(cost):
    nbytes = 1 << 30
    t = cost.kernel_time(1.0, nbytes, 24, TaskKind.AI_CORE)
    expected = nbytes / (cost.soc.hbm_bytes_per_us * cost.params["bandwidth_efficiency"])
    assert t == pytest.approx(expected + cost.params["aicore_launch_us"])


def test_aicpu_and_memcpy(cost):
    t = cost.kernel_time(4000.0, 0, 1, TaskKind.AI_CPU)
    assert t == pytest.approx(1.0 + cost.params["aicpu_launch_us"])
    soc = cost.soc
    assert cost.memcpy_time(25_000, "H2D") == pytest.approx(soc.memcpy_latency_us + 25_000 / soc.h2d_bytes_per_us)
    assert cost.memcpy_time(0, "D2D") == soc.memcpy_latency_us
    assert cost.kernel_time(0, 25_000, 1, TaskKind.MEMCPY_H2D) == cost.memcpy_time(25_000, "H2D")
    with pytest.raises(InvalidArgumentError, match="H2D"):
        cost.memcpy_time(1, "sideways")


def test_bad_kernel_arguments(cost):
    with pytest.raises(InvalidArgumentError, match="block_dim"):
        cost.kernel_time(1, 1, 0, TaskKind.AI_CORE)
    with pytest.raises(InvalidArgumentError):
        cost.kernel_time(-1, 1, 1, TaskKind.AI_CORE)
    with pytest.raises(InvalidArgumentError):
        cost.kernel_time(1, 1, 1, TaskKind.EVENT_RECORD)


def test_vector_kernels_on_a_soc_without_vector_cores_use_ai_cores():
    c = CostModel(get_soc("Ascend910A"))
    t = c.kernel_time(1e9, 0, 32, TaskKind.AI_VECTOR)
    rate = 32 * c.params["vector_flops_per_core_cycle"] * c.soc.clock_mhz * c.params["vector_efficiency"]
    assert t == pytest.approx(1e9 / rate + c.params["aicore_launch_us"])


def test_docs_table_matches_the_defaults():
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[2] / "docs" / "device.md").read_text()
    for phase, (us, _prov) in HOST_PHASES.items():
        assert f"| `{phase}` | {us:g} |" in doc, phase
    for name, (value, _prov) in DEVICE_PARAMS.items():
        assert f"| `{name}` | {value:g} |" in doc, name
