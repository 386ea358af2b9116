"""Replay faithfulness of `opsim import` on the real torch_npu trace in tests/data/real.

Imports trace_view_910b_mnist.json, replays the scenario with --profiler-output, and prints the done-when
figures: ACLNN call counts per (API, phase, thread), device busy time and kernel span, per-API host medians.

    python benchmarks/import_replay.py
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from opsim.importer.compare import format_comparison  # noqa: E402
from opsim.importer.replay import replay_and_compare  # noqa: E402

PROFILE = ROOT / "tests" / "data" / "real" / "trace_view_910b_mnist.json"


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        c = replay_and_compare(PROFILE, tmp)
    for line in format_comparison(c):
        print(line)
    print("per-API host medians (us): real -> replay")
    for key, m in c["medians"].items():
        rel = "n/a" if m["rel"] is None else f"{m['rel']:.1%}"
        replay = "absent" if m["replay_us"] is None else f"{m['replay_us']:.3f}"
        print(f"  {key:45s} {m['real_us']:9.3f} -> {replay:>9s}  ({rel})")
    print("done-when bounds hold" if c["ok"] else "done-when bounds NOT all met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
