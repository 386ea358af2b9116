"""Recording cost of a replayed executor-cache hit with the trace on: the record calls and the chunk fold.

Run: python benchmarks/recorder_fold.py [--against PATH] [--calls N] [--repeat R]
Each "call" records what a replayed hit of large.yaml records (a 7-span host group, the cache hit, a tensor
description, the device task, the op_call envelope); the fold is `Recorder.compact()` over all of them. With
`--against` (the root of another opsim checkout, e.g. a `git worktree` of main), that checkout's recorder runs
alternately with this one in the same process on the same records, and the records are checked to read back
identically (values and types). CPU time (`time.process_time`), best and median of `--repeat` rounds.
"""
from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("L2 phase1 entry", "make key", "match cache", "L2 phase2 entry", "cache replay", "launch", "profiled")
OPS = ("aclnnAdd",) * 7
DURS = (1.25, 0.5, 0.75, 2.0, 0.25, 1.5, 3.0)
INFO = {"input_shapes": "256,256"}


def load_recorder(root: Path, name: str) -> Any:
    """The recorder module of the checkout at `root`, loaded under its own name."""
    spec = importlib.util.spec_from_file_location(name, root / "opsim" / "trace" / "recorder.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def record_calls(module: Any, calls: int) -> tuple[Any, float]:
    """A recorder holding `calls` replayed hits (not folded: nothing here hands out correlation ids), and the CPU
    seconds the record calls took."""
    rec = module.Recorder()
    t0 = time.process_time()
    for i in range(calls):
        t = 1.5 + i
        rec.host_spans("producer", PHASES, OPS, t, DURS, i)
        rec.cache_event(t + 1.0, "producer", "exec", "hit", "aclnnAdd", 0, "")
        rec.tensor_info(i, "Add", INFO)
        rec.device_task(i & 1, "vector", 8, i, "Add", "AI_VECTOR_CORE", 8, t, t + 2.0, t + 3.0, i, 0)
        rec.host_span("producer", "op_call", "aclnnAdd", t, 9.5, i)
    return rec, time.process_time() - t0


def fold_seconds(module: Any, calls: int) -> tuple[float, float, Any]:
    """(record CPU seconds, fold CPU seconds, the folded recorder) of one round."""
    rec, recording = record_calls(module, calls)
    t0 = time.process_time()
    rec.compact()
    return recording, time.process_time() - t0, rec


def same_records(a: Any, b: Any) -> bool:
    for kind in ("host", "device", "cache"):
        ra, rb = a.records(kind), b.records(kind)
        if ra != rb or any(list(map(type, ra[c])) != list(map(type, rb[c])) for c in ra):
            return False
    return list(a.tensor_infos) == list(b.tensor_infos)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", type=Path, help="root of another opsim checkout to compare with")
    ap.add_argument("--calls", type=int, default=65000, help="replayed calls per round (default 65000)")
    ap.add_argument("--repeat", type=int, default=7, help="rounds per recorder (default 7)")
    args = ap.parse_args()
    codes = {"this": load_recorder(ROOT, "recorder_this")}
    if args.against is not None:
        codes = {"other": load_recorder(args.against, "recorder_other"), **codes}
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in codes}
    last = {}
    for _ in range(args.repeat):
        for name, module in codes.items():
            recording, fold, last[name] = fold_seconds(module, args.calls)
            times[name].append((recording / args.calls * 1e6, fold / args.calls * 1e6))
    for name, rounds in times.items():
        rec_us = sorted(r for r, _ in rounds)
        fold_us = sorted(f for _, f in rounds)
        mid = len(rounds) // 2
        print(f"{name:5}  record calls {rec_us[0]:.2f} / {rec_us[mid]:.2f} us a call (best / median);  "
              f"fold {fold_us[0]:.2f} / {fold_us[mid]:.2f} us a call")
    if len(last) == 2:
        print("records read back identically:", same_records(last["other"], last["this"]))


if __name__ == "__main__":
    main()
