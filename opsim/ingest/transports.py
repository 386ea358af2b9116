"""The link vocabulary of msprof's communication files, shared by the link calibration (`opsim.calibration`)
and the link presets (`opsim.cluster.links`), which sit on different layers."""
from __future__ import annotations

TRANSPORTS = ("HCCS", "RDMA", "PCIE", "SIO", "LOCAL")
"""Transport types as msprof's communication files name them (SDMA, their sum of HCCS, PCIE and SIO, aside)."""
MAX_BANDWIDTH_GBPS = 1e6
"""Largest link bandwidth accepted (1 PB/s): a bigger figure is a unit mistake, not a link."""
MAX_LATENCY_US = 1e9
"""Largest per-step latency accepted (1000 s)."""

__all__ = ["MAX_BANDWIDTH_GBPS", "MAX_LATENCY_US", "TRANSPORTS"]
