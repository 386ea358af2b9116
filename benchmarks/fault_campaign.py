"""Fault campaign: the bundled scenarios run again and again with failures injected at every fault point of the
framework, counting what is left unreleased at the end of each run.

    python benchmarks/fault_campaign.py                 # about 200k calls
    python benchmarks/fault_campaign.py --calls 2000000 # the long campaign

Each run draws a seed; each fault point fails with probability `--rate` per visit (a seeded generator, so a
campaign is reproducible). After the run (every thread drained and its tensors freed) it counts:

- argument contexts (OpArgContext) never destroyed,
- DirectInvoke launch states never destroyed,
- executors still alive,
- device bytes still allocated, and allocations.

Prints one line per scenario and the totals; exits 1 when anything leaked.
"""
from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCENARIOS = ("quickstart", "aicpu_cache_pressure", "direct_invoke_fused", "exec_cache_and_repeat",
             "multi_stream_contention", "memory_pressure", "pta_cache")
FAULT_POINTS = ("aicpu.load_json", "create_executor", "direct_invoke.new_launcher", "executor.alloc_tensor",
                "executor.alloc_tensor_list", "op_args.make_context", "rt.launch_kernel", "rt.memcpy",
                "rt.synchronize_stream")


class Census:
    """Every argument context, executor and launcher made during one run (strong references: a context that
    nothing references any more still counts as leaked when it was never destroyed)."""

    def __init__(self) -> None:
        from opsim.opdev.executor import AclOpExecutor
        from opsim.opdev.launchers import KernelLauncher
        from opsim.opdev.op_args import OpArgContext
        self.contexts: list = []
        self.executors: list = []
        self.launchers: list = []
        self._patches = []
        for cls, bucket in ((OpArgContext, self.contexts), (AclOpExecutor, self.executors),
                            (KernelLauncher, self.launchers)):
            self._wrap(cls, bucket)

    def _wrap(self, cls, bucket: list) -> None:
        original = cls.__init__

        def init(obj, *args, **kwargs):
            original(obj, *args, **kwargs)
            bucket.append(obj)

        cls.__init__ = init
        self._patches.append((cls, original))

    def reset(self) -> None:
        self.contexts.clear()
        self.executors.clear()
        self.launchers.clear()

    def close(self) -> None:
        for cls, original in self._patches:
            cls.__init__ = original

    def leaks(self) -> dict[str, int]:
        from opsim.opdev.direct_invoke import DirectInvokeKernelLauncher
        return {
            "contexts": sum(1 for c in self.contexts if c.destroy_count == 0),
            "states": sum(1 for l in self.launchers if isinstance(l, DirectInvokeKernelLauncher)
                          and l.launch_state is not None),
            "executors": sum(1 for e in self.executors if e.alive),
        }


def one_run(name: str, seed: int, rate: float, census: Census) -> dict[str, int]:
    from opsim.scenario.loader import load_scenario
    from opsim.scenario.runner import _Run
    config = load_scenario(ROOT / "scenarios" / f"{name}.yaml", {"on_error": "continue", "seed": seed})
    census.reset()
    run = _Run(config, None)
    rng = random.Random(seed)
    injected = [0]

    def maybe(*_args) -> bool:
        if rng.random() < rate:
            injected[0] += 1
            return True
        return False

    for point in FAULT_POINTS:
        run.sim.process.faults[point] = maybe
    run.sim.run()
    memory = run.sim.device.memory
    out = {"calls": run.calls, "faults": injected[0], "failed_calls": len(run.errors), **census.leaks(),
           "bytes": memory.in_use, "allocations": len(memory._live)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200_000, help="stop after about this many simulated calls")
    ap.add_argument("--rate", type=float, default=0.01, help="failure probability per fault-point visit")
    ap.add_argument("--json", metavar="PATH", help="also write the totals as JSON")
    args = ap.parse_args(argv)
    logging.disable(logging.CRITICAL)
    census = Census()
    totals: dict[str, int] = {}
    per: dict[str, dict[str, int]] = {}
    t0 = time.perf_counter()
    seed = 0
    try:
        while totals.get("calls", 0) < args.calls:
            for name in SCENARIOS:
                res = one_run(name, seed, args.rate, census)
                seed += 1
                res["runs"] = 1
                for k, v in res.items():
                    totals[k] = totals.get(k, 0) + v
                    per.setdefault(name, {})[k] = per.get(name, {}).get(k, 0) + v
    finally:
        census.close()
    wall = time.perf_counter() - t0
    keys = ("runs", "calls", "faults", "failed_calls", "contexts", "states", "executors", "bytes", "allocations")
    print(f"{'scenario':26s}" + "".join(f"{k:>14s}" for k in keys))
    for name, row in per.items():
        print(f"{name:26s}" + "".join(f"{row.get(k, 0):>14d}" for k in keys))
    print(f"{'total':26s}" + "".join(f"{totals.get(k, 0):>14d}" for k in keys))
    leaked = {k: totals.get(k, 0) for k in ("contexts", "states", "executors", "bytes", "allocations")}
    print(f"unreleased: {leaked} in {wall:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"totals": totals, "per_scenario": per, "wall_seconds": wall}, indent=1))
    return 1 if any(leaked.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
