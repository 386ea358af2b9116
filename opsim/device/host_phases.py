"""The host-phase cost table: phase name -> (microseconds, provenance), shared by the cost model and the
calibration file reader (which checks measured phase names against it), below both so neither imports the
other."""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

_A = "assumed"
_M = "measured on tests/data/real/trace_view_910b_mnist.json (public 910B torch_npu profile)"

HOST_PHASES: Mapping[str, tuple[float, str]] = MappingProxyType({
    # --- AI Core path (two-phase L2 API, executor, launcher) ---
    "L2 phase1 entry": (0.3, f"{_A}: TLS DFX context init, sequence counter, config snapshot"),
    "make key": (0.8, f"{_A}: op-exec-cache key serialisation of the L2 arguments"),
    "match cache": (0.3, f"{_A}: one hash-map lookup of the key"),
    "add io and attr": (0.5, f"{_A}: OpArg context construction per L0 op"),
    "infershape": (1.5, f"{_A}: shape inference of one L0 op"),
    "tiling": (4.0, f"{_A}: tiling function of one AI Core kernel (dominant phase-1 cost)"),
    "alloc tensor": (0.2, f"{_A}: executor AllocTensor (object + shape)"),
    "build graph": (0.5, f"{_A}: graph node and edges for one L0 op"),
    "plan workspace": (1.0, f"{_A}: MaxAllocator bucket planning at the end of phase 1"),
    "create executor": (1.0, f"{_A}: CREATE_EXECUTOR (executor, graph and op-cache objects)"),
    "release to": (0.2, f"{_A}: ReleaseTo (hand the executor to the caller)"),
    "L2 phase2 entry": (0.3, f"{_A}: restore TLS context from the executor snapshot"),
    "update tensor addr": (0.3, f"{_A}: bind workspace offsets to device addresses"),
    "launch": (3.0, f"{_A}: one AI Core kernel launch call (args packing + runtime submit)"),
    "cache replay": (1.5, f"{_A}: replay of one recorded device task from the op-exec cache"),
    "destroy executor": (0.8, f"{_A}: executor and graph teardown"),
    "rt malloc": (5.0, f"{_A}: one runtime device allocation call"),
    "rt free": (3.0, f"{_A}: one runtime device free call"),
    "stream sync": (2.0, f"{_A}: host overhead of one stream synchronisation (the wait itself is simulated)"),
    # --- torch_npu's task queue (opsim.runtime.torch_npu), measured: opsim.calibration.host.queue_phases ---
    "enqueue": (1.38, f"{_M}: median of the 148 Enqueue events (issuing thread, one per queued call)"),
    "dequeue": (2.4, f"{_M}: median over the 148 Dequeue@ events of their time outside the AscendCL call inside"),
    "dequeue gap": (1.73, f"{_M}: median of the 127 gaps between consecutive Dequeue@ events whose next job was "
                          f"already enqueued (consumer busy)"),
    # --- AI CPU path (aicpu task phases, GE_PROFILING_TO_STD_OUT labels) ---
    "FindTask": (0.5, f"{_A}: task-space lookup by key"),
    "CreateTask": (15.0, f"{_A}: new AI CPU task object, ext-info and kernel description"),
    "Init": (25.0, f"{_A}: first-use task Init (binary and device scratch setup)"),
    "UpdateShape": (1.0, f"{_A}: refresh input/output shapes in ext info"),
    "ShapeH2D": (3.0, f"{_A}: host-to-device copy of shape information"),
    "UpdateArgs": (1.5, f"{_A}: refresh IO addresses in the kernel args"),
    "Launch": (4.0, f"{_A}: one AI CPU kernel launch call"),
    "CopyShapeD2H": (5.0, f"{_A}: output-shape copy back (compute-dependent ops only; ~0 otherwise)"),
    "load aicpu kernel json": (2000.0, f"{_A}: once per process, parse aicpu_kernel.json of the OPP package"),
    "load tf kernel json": (2000.0, f"{_A}: once per process, parse tf_kernel.json of the OPP package"),
    "load custom aicpu registry": (300.0, f"{_A}: once per process, read cust_aicpu_kernel.json registries"),
    "load custom aicpu so": (500.0, f"{_A}: once per custom kernel library, read the .so into a buffer"),
    "get soc version": (5.0, f"{_A}: once per process, query the SoC name for the launch API choice"),
    "UpdateOutputShape": (1.0, f"{_A}: apply the copied-back output shapes"),
    # --- DirectInvoke ---
    "prepare": (5.0, f"{_A}: producer prepare callback (phase 1, once per executor)"),
    "direct invoke launch": (3.0, f"{_A}: producer launch callback (phase 2, every run)"),
    "destroy": (0.5, f"{_A}: producer destroy callback"),
    # --- DFX ---
    "dump": (50.0, f"{_A}: host side of one L0/L2 tensor dump"),
    "overflow check": (10.0, f"{_A}: host side of one overflow check (its stream syncs are simulated)"),
})
"""Host phase name -> (microseconds, provenance)."""

__all__ = ["HOST_PHASES"]
