"""Workspace planner throughput: the bucket-heap MaxAllocator against the direct transcription.

A realistic chain: every node reads the previous node's intermediate output (sometimes also one from a few
nodes back, sometimes through a view), writes one or two from-workspace outputs, and has one or two
workspaces (sometimes a null workspace-list element); every 50th node re-produces its input in place.

    python benchmarks/planner.py [--tensors 100000] [--reference-tensors 20000] [--repeat 5]
"""
from __future__ import annotations

import argparse
import logging
import random
import time

from opsim.acl.dtypes import DataType
from opsim.acl.tensor import Tensor
from opsim.opdev.graph import KernelGraph
from opsim.opdev.planner import plan_graph, plan_max, plan_max_reference

_DTYPES = (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16, DataType.DT_INT8, DataType.DT_INT4)


def chain_graph(n_tensors: int, seed: int = 0, long_skips: float = 0.0) -> KernelGraph:
    """A chain graph whose planning list has about `n_tensors` entries. With `long_skips` = p, each output
    is also read, with probability p, by a node 100..3000 nodes later (U-Net-like skip connections), which
    keeps many tensors alive at once and so creates many buckets."""
    rng = random.Random(seed)
    graph = KernelGraph()
    produced: list[Tensor] = [Tensor([64, 64], DataType.DT_FLOAT)]  # user input
    due: dict[int, list[Tensor]] = {}
    planned = 0
    node = 0
    while planned < n_tensors:
        inputs = [produced[-1]] + due.pop(node, [])
        if len(produced) > 4 and rng.random() < 0.3:
            inputs.append(produced[-rng.randint(2, 4)])
        if rng.random() < 0.1 and produced[-1].is_from_workspace:
            src = produced[-1]
            inputs[0] = Tensor([src.storage_numel() // 2], src.dtype, storage=src.storage, from_workspace=True)
        workspaces: list[Tensor | None] = [
            Tensor([rng.randint(1, 1 << 16)], DataType.DT_UINT8, from_workspace=True)
            for _ in range(rng.randint(1, 2))]
        if rng.random() < 0.05:
            workspaces.append(None)
        if node % 50 == 49 and produced[-1].is_from_workspace:
            outputs = [produced[-1]]
        else:
            outputs = [Tensor([rng.randint(1, 256), rng.randint(1, 256)], rng.choice(_DTYPES), from_workspace=True)
                       for _ in range(1 if rng.random() < 0.7 else 2)]
        graph.build_graph("Op", inputs, outputs, workspaces)
        if long_skips and rng.random() < long_skips:
            due.setdefault(node + rng.randint(100, 3000), []).append(outputs[0])
        produced.extend(outputs)
        planned += len(workspaces) + len(outputs)
        node += 1
    return graph


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure(name: str, args, long_skips: float) -> None:
    big = chain_graph(args.tensors, long_skips=long_skips)
    entries = big.calc_life_time_and_size()
    t_lifetime = best_of(big.calc_life_time_and_size, args.repeat)
    t_fast = best_of(lambda: plan_max(entries), args.repeat)
    t_graph = best_of(lambda: plan_graph(big), args.repeat)
    result = plan_graph(big)
    print(f"[{name}] {len(big)} nodes, {len(entries)} planned entries, {len(result.buckets)} buckets, "
          f"total {result.total} B")
    print(f"  lifetime pass (calc_life_time_and_size): {t_lifetime * 1e3:9.2f} ms")
    print(f"  plan_max (bucket heaps):                  {t_fast * 1e3:9.2f} ms")
    print(f"  plan_graph (lifetime pass + plan_max):    {t_graph * 1e3:9.2f} ms")

    small = chain_graph(args.reference_tensors, seed=1, long_skips=long_skips)
    small_entries = small.calc_life_time_and_size()
    fast = plan_max(small_entries)
    t_fast_small = best_of(lambda: plan_max(small_entries), args.repeat)
    t_ref = best_of(lambda: plan_max_reference(small_entries), 1)
    same = fast.offsets == plan_max_reference(small_entries).offsets
    print(f"  side by side on {len(small_entries)} entries, {len(fast.buckets)} buckets "
          f"(offsets identical: {same}):")
    print(f"    plan_max_reference (scan all buckets):  {t_ref * 1e3:9.2f} ms")
    print(f"    plan_max (bucket heaps):                {t_fast_small * 1e3:9.2f} ms")
    print(f"    ratio reference / fast:                 {t_ref / t_fast_small:9.1f} x")


def main() -> None:
    logging.disable(logging.WARNING)  # in-place re-productions log a warning each
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tensors", type=int, default=100_000)
    ap.add_argument("--reference-tensors", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    measure("chain", args, 0.0)
    measure("chain + long skip connections", args, 0.1)


if __name__ == "__main__":
    main()
