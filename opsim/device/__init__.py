"""SimPy models of the device: streams, AI Core / AI CPU unit pools, HBM, cost model, SoC presets."""
from opsim.device.cost import DEVICE_PARAMS, HOST_PHASES, CostModel
from opsim.device.device import Device, Stream, StreamEvent, UnitPool
from opsim.device.memory import ALIGNMENT, BASE_ADDRESS, Allocation, DeviceMemory
from opsim.device.soc import DEFAULT_SOC, SOC_PRESETS, SocSpec, get_soc
from opsim.device.task import DeviceTask, TaskKind

__all__ = [
    "Device", "Stream", "StreamEvent", "UnitPool", "DeviceTask", "TaskKind", "DeviceMemory", "Allocation",
    "ALIGNMENT", "BASE_ADDRESS", "CostModel", "HOST_PHASES", "DEVICE_PARAMS", "SocSpec", "SOC_PRESETS",
    "DEFAULT_SOC", "get_soc",
]
