"""Behaviour profiles: where opbase revisions or documents differ, one named row per variant, in one table.

The default follows opbase at the reference revision (aa3cd74 + 9bb47b8). `aicpu-guide` follows the
published aicpu_task interface guide.
"""
from __future__ import annotations

from dataclasses import dataclass

from opsim.errors import InvalidArgumentError


@dataclass(frozen=True)
class BehaviourProfile:
    name: str
    #: environment variable that sets the AI CPU task cache limit
    aicpu_cache_limit_var: str
    #: "digits" (opbase: digits only, no clamp, default 32768) or "guide" (default 10000, clamp 1e7, warn)
    aicpu_cache_limit_rule: str
    #: device scratch for host inputs: "whole" (the whole host-input total once it exceeds 1024 bytes,
    #: opbase) or "above" (only the part above 1024 bytes, the guide)
    aicpu_device_cache_rule: str
    description: str


PROFILES: dict[str, BehaviourProfile] = {
    "opbase": BehaviourProfile(
        name="opbase", aicpu_cache_limit_var="ACLNN_AICPU_CACHE_LIMIT", aicpu_cache_limit_rule="digits",
        aicpu_device_cache_rule="whole",
        description="opbase master aa3cd74 (2026-07-22) incl. 9bb47b8: ACLNN_AICPU_CACHE_LIMIT, default 32768, "
                    "digits only, no clamp, 0 never caches; whole host-input total reserved above 1024 bytes"),
    "aicpu-guide": BehaviourProfile(
        name="aicpu-guide", aicpu_cache_limit_var="ACLNN_CACHE_LIMIT", aicpu_cache_limit_rule="guide",
        aicpu_device_cache_rule="above",
        description="the published aicpu_task guide: ACLNN_CACHE_LIMIT governs the AI CPU cache, default 10000, "
                    "clamped to 10000000, non-numeric warns and uses the default; only the host input above "
                    "1024 bytes is reserved on the device"),
}

DEFAULT_PROFILE = "opbase"


def get_profile(name: str | None) -> BehaviourProfile:
    if name is None:
        return PROFILES[DEFAULT_PROFILE]
    try:
        return PROFILES[name]
    except KeyError:
        raise InvalidArgumentError(
            f"unknown behaviour profile {name!r}; accepted: {', '.join(PROFILES)}") from None
