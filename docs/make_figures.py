"""Regenerate the figures of docs/analysis.md and docs/sweeps.md from bundled scenarios (run from anywhere):

    python docs/make_figures.py

Every figure is drawn by an `opsim.analysis` function from a simulated run, so the pictures in the docs are
exactly what a user gets from the same calls.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import opsim  # noqa: E402
from opsim.analysis import PLOTS, sweep_plot, what_if, what_if_plot  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "docs" / "figures"
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
CACHE_PRESSURE = ROOT / "scenarios" / "aicpu_cache_pressure.yaml"
CACHE_LIMITS = [0, 1, 2, 3, 4, 6, 8, 16]
EXEC_SWEEP = ROOT / "scenarios" / "sweeps" / "exec_limit_x_shapes.yaml"


def save(fig, name: str) -> Path:
    path = FIGURES / f"{name}.png"
    fig.savefig(path, dpi=110, metadata={"Software": None})  # no version stamp: stable bytes
    plt.close(fig)
    return path


def main() -> int:
    FIGURES.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    result = opsim.run(QUICKSTART, write=False)
    written = [save(plot(result), name) for name, plot in PLOTS.items()]
    table = what_if(CACHE_PRESSURE, "env.ACLNN_AICPU_CACHE_LIMIT", CACHE_LIMITS)
    written.append(save(what_if_plot(table, "env.ACLNN_AICPU_CACHE_LIMIT", left=["aicpu_hit_rate"],
                                     right=["host_busy_us"]), "what_if"))
    swept = opsim.sweep(EXEC_SWEEP, workers=0)  # in this process: the same rows as on any Dask cluster
    written.append(save(sweep_plot(swept, "exec_hit_rate"), "sweep_exec_limit_x_shapes"))
    for path in written:
        print(path.relative_to(ROOT))
    print(f"{len(written)} figures in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
