"""Apply a calibration's measured host timings to one ACLNN call's host-action log.

A calibrated API's phase-1 spans (a cache miss) are scaled together so they sum to the measured
``aclnnXxxGetWorkspaceSize`` median, and its phase-2 spans so they sum to the measured ``aclnnXxx`` median of
the same kind of call (after a miss, or a hit). Scaling keeps opsim's split between the phases of a call (the
trace still shows tiling, launch, ...), while the two totals become the profile's. One-time process set-up
(loading AI CPU kernel registries) is not part of a profile's per-call median and is left unscaled. On an
executor-cache hit phase 1 keeps opsim's cost: torch_npu does not call GetWorkspaceSize on a hit, so a
profile has nothing to measure for it. A profiled op (``opsim.ops.profiled``, from ``opsim import``) already
charges its own recorded host time, so its calls are left as they are.
"""
from __future__ import annotations

from opsim.device.fitted import HostApiTiming, host_scale
from opsim.opdev.aicpu.kernel_lib import ONE_TIME_PHASES
from opsim.opdev.thread_local import A_SPAN
from opsim.ops.profiled import PROFILED_HOST


def _scale(actions: list, lo: int, hi: int, target: float | None) -> None:
    total = 0.0
    for i in range(lo, hi):
        a = actions[i]
        if a[0] == A_SPAN and a[1] not in ONE_TIME_PHASES:
            total += a[3]
    factor = host_scale(total, target)
    if factor == 1.0:
        return
    for i in range(lo, hi):
        a = actions[i]
        if a[0] == A_SPAN and a[1] not in ONE_TIME_PHASES:
            actions[i] = (a[0], a[1], a[2], a[3] * factor, a[4])


def apply_host_calibration(actions: list, phase1: tuple[int, int], phase2: tuple[int, int] | None,
                           timing: HostApiTiming, hit: bool) -> None:
    """Rescale the spans of phase 1 (actions[phase1[0]:phase1[1]]) and phase 2 in place."""
    end = phase2[1] if phase2 is not None else phase1[1]
    if any(a[0] == A_SPAN and a[1] == PROFILED_HOST for a in actions[phase1[0]:end]):
        return
    if not hit:
        _scale(actions, phase1[0], phase1[1], timing.phase1_us())
    if phase2 is not None:
        _scale(actions, phase2[0], phase2[1], timing.phase2_us(hit=hit))
