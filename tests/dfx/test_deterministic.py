"""Deterministic level with the runtime's strong-consistency option (dfx-and-profiling.md §1 step 1;
op_executor.cpp GetDeterministicLevelFromRt; op-exec-cache.md §4 key config byte)."""
from __future__ import annotations

import pytest

from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Scalar, Tensor
from opsim.opdev.op_exec_cache import build_l2_key
from opsim.ops.elementwise import aclnn_add, aclnn_add_get_workspace_size

S = AclnnStatus
WS = 0x100000


def phase1(n=8):
    a, b, out = Tensor([n], address=0x80), Tensor([n], address=0x100), Tensor([n], address=0x200)
    status, size, ex = aclnn_add_get_workspace_size(a, b, Scalar(1.0), out)
    assert status == S.ACLNN_SUCCESS
    return size, ex


@pytest.mark.parametrize("world, level, on", [
    ({"deterministic_level": 0, "strong_consistency": True}, 0, False),
    ({"deterministic_level": 1}, 1, True),
    ({"deterministic_level": 1, "strong_consistency": True}, 2, True),
    ({"deterministic_level": 2}, 2, True),
    ({"deterministic_level": 3, "strong_consistency": True}, 3, True),
], indirect=["world"])
def test_level_at_phase_1(world, level, on):
    """Given the runtime's ACL_OPT_DETERMINISTIC and ACL_OPT_STRONG_CONSISTENCY, when phase 1 starts, then the
    TLS config and the executor snapshot hold the level (1 upgraded to 2 only with strong consistency)."""
    process, ctx = world
    size, ex = phase1()
    assert (ctx.config.deterministic_level, ctx.config.is_deterministic_on) == (level, on)
    assert ex.config.deterministic_level == level


@pytest.mark.parametrize("world", [{"deterministic_level": 1, "strong_consistency": True}], indirect=True)
def test_upgraded_level_is_the_key_byte(world):
    """The key's config byte is the upgraded level, so a strong-consistency call never hits a level-1 entry."""
    process, ctx = world
    phase1()
    two = build_l2_key("aclnnAdd", process.aic_num, process.aiv_num, 2, (), ())[0]
    assert ctx.key[:len(two)] == two
    assert ctx.key[len("aclnnAdd") + 8 + 8] == 2


@pytest.mark.parametrize("world", [{"deterministic_level": 1}], indirect=True)
def test_key_differs_when_strong_consistency_changes(world):
    process, ctx = world
    size, ex = phase1()
    assert aclnn_add(WS if size else 0, size, ex, None) == S.ACLNN_SUCCESS
    size, wrap = phase1()
    assert wrap.kind == "wrap"  # level 1 again: a hit
    aclnn_add(WS if size else 0, size, wrap, None)
    process.strong_consistency = True
    size, ex = phase1()
    assert ex.kind == "executor"  # level 2 now: a different key, a miss


@pytest.mark.parametrize("world", [{"deterministic_level": 1, "strong_consistency": True}], indirect=True)
def test_phase_2_restores_the_executors_level(world):
    """Given a phase-1 snapshot at level 2, when the runtime option changes and another phase 1 runs on the
    thread before phase 2, then phase 2 restores the executor's level into TLS."""
    process, ctx = world
    size, ex = phase1()
    process.strong_consistency = False
    process.deterministic_level = 0
    phase1(n=16)
    assert ctx.config.deterministic_level == 0
    seen = []
    from opsim.opdev import launchers
    orig = launchers.AiCoreKernelLauncher._kernel_run

    def spy(self, c, tiling):
        seen.append(c.config.deterministic_level)
        return orig(self, c, tiling)
    launchers.AiCoreKernelLauncher._kernel_run = spy
    try:
        assert aclnn_add(WS if size else 0, size, ex, None) == S.ACLNN_SUCCESS
    finally:
        launchers.AiCoreKernelLauncher._kernel_run = orig
    assert seen == [2]


@pytest.mark.parametrize("world", [{"deterministic_level": 1, "strong_consistency": True}], indirect=True)
@pytest.mark.parametrize("failing, level", [("ACL_OPT_DETERMINISTIC", 0), ("ACL_OPT_STRONG_CONSISTENCY", 1)])
def test_failed_queries(world, failing, level):
    """A failed deterministic query gives 0; a failed consistency query counts as off (level stays 1)."""
    process, ctx = world
    process.faults["rt.get_sys_param"] = lambda name: name == failing
    phase1()
    assert ctx.config.deterministic_level == level


@pytest.mark.parametrize("consistency, level", [(2, 1), (1, 2), (0, 1), (True, 2)])
@pytest.mark.parametrize("unrelated_fault", [False, True])
def test_only_a_strong_consistency_of_exactly_1_upgrades(world, consistency, level, unrelated_fault):
    """op_executor.cpp GetDeterministicLevelFromRt: `if (consistency == 1) deterministicLevel = 2;`. A value of 2
    leaves level 1, with or without a fault registered at some unrelated point (one path, one rule)."""
    from opsim.opdev.dfx import deterministic_level_from_rt
    process, ctx = world
    process.deterministic_level, process.strong_consistency = 1, consistency
    if unrelated_fault:
        process.faults["rt.launch_kernel"] = lambda name: False
    assert deterministic_level_from_rt(ctx) == level
    phase1()
    assert ctx.config.deterministic_level == level
