"""A small, deterministic workload built directly on the runtime (two threads, two streams, three APIs), so the
analysis tests do not depend on the scenario layer."""
from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")

from opsim.acl import IntArray, Scalar, Tensor  # noqa: E402
from opsim.api import Result  # noqa: E402
from opsim.ops.aicpu_ops import ALL_TYPES, aclnn_roll, aclnn_roll_get_workspace_size  # noqa: E402
from opsim.ops.elementwise import aclnn_add, aclnn_add_get_workspace_size  # noqa: E402
from opsim.ops.matmul import aclnn_addmm, aclnn_addmm_get_workspace_size  # noqa: E402
from opsim.ops.softmax import aclnn_softmax, aclnn_softmax_get_workspace_size  # noqa: E402
from opsim.runtime.host_thread import run_op  # noqa: E402
from opsim.runtime.simulation import Simulation  # noqa: E402

HOT = (32, 64)
COLD = [(8 * (i + 1), 16) for i in range(6)]


def simulate(env: dict | None = None, calls: int = 24, threads: int = 2) -> Simulation:
    """Each thread alternates a hot Add shape with a cycle of six cold ones, and runs an Addmm and a Softmax
    every eighth call (they need workspace). Cache hits depend on ACLNN_CACHE_LIMIT."""
    sim = Simulation(soc="Ascend910B2", env=env or {})

    def program(th):
        stream = sim.device.create_stream()
        for i in range(calls):
            shape = HOT if i % 2 == 0 else COLD[(i // 2) % len(COLD)]
            a, b, out = Tensor(list(shape)), Tensor(list(shape)), Tensor(list(shape))
            status, _ = yield from run_op(th, aclnn_add_get_workspace_size, aclnn_add,
                                          (a, b, Scalar(1.0), out), stream, api="aclnnAdd")
            assert status == 0
            if i % 8 == 7:
                bias, m1, m2, o = Tensor([64]), Tensor([32, 48]), Tensor([48, 64]), Tensor([32, 64])
                status, _ = yield from run_op(th, aclnn_addmm_get_workspace_size, aclnn_addmm,
                                              (bias, m1, m2, Scalar(1.0), Scalar(0.5), o), stream, api="aclnnAddmm")
                assert status == 0
                x, y = Tensor([64, 128]), Tensor([64, 128])
                status, _ = yield from run_op(th, aclnn_softmax_get_workspace_size, aclnn_softmax,
                                              (x, 1, y), stream, api="aclnnSoftmax")
                assert status == 0

    for t in range(threads):
        sim.add_thread(program, f"t{t}")
    sim.run()
    return sim


def simulate_aicpu(env: dict | None = None, calls: int = 24, dtypes: int = 6) -> Simulation:
    """Two threads call the AI CPU Roll op cycling over `dtypes` dtypes: 2 x `dtypes` distinct task keys
    (the thread id is part of the key) in one task space, so ACLNN_AICPU_CACHE_LIMIT decides the hits."""
    sim = Simulation(soc="Ascend910B2", env=env or {})

    def program(th):
        stream = sim.device.create_stream()
        for i in range(calls):
            dt = ALL_TYPES[i % dtypes]
            x, out = Tensor([16, 32], dt), Tensor([16, 32], dt)
            status, _ = yield from run_op(th, aclnn_roll_get_workspace_size, aclnn_roll,
                                          (x, IntArray([1]), IntArray([1]), out), stream, api="aclnnRoll")
            assert status == 0

    sim.add_thread(program, "t0")
    sim.add_thread(program, "t1")
    sim.run()
    return sim


def _env(overrides: dict) -> dict:
    env = {}
    for key, value in overrides.items():
        section, _, name = key.partition(".")
        if section != "env" or not name:
            raise KeyError(f"this test workload only takes env.* overrides, got {key!r}")
        env[name] = str(value)
    return env


def run_with(overrides: dict) -> Result:
    """A what_if-compatible scenario callable: `env.NAME` overrides become environment variables."""
    return Result.from_simulation(simulate(_env(overrides)))


def run_aicpu(overrides: dict) -> Result:
    """The AI CPU workload as a what_if scenario callable (returns the Simulation: what_if wraps it)."""
    return simulate_aicpu(_env(overrides))


@pytest.fixture(scope="session")
def small_result() -> Result:
    return Result.from_simulation(simulate())


@pytest.fixture(scope="session")
def aicpu_result() -> Result:
    """The AI CPU workload with room for 4 cached tasks: hits, misses and one-shot tasks all occur."""
    return Result.from_simulation(simulate_aicpu({"ACLNN_AICPU_CACHE_LIMIT": "4"}))
