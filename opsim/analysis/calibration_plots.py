"""Predicted vs real kernel durations (log-log), for checking a calibration (`opsim calibrate --validate`)."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pandas as pd

from opsim.analysis.plots import _new_axes, _palette


def prediction_frame(predictions: Iterable[Any]) -> pd.DataFrame:
    """One row per kernel: op_type, core, real_us, predicted_us, rel_error (from `cross_validate` or
    `predict_records` results)."""
    cols = ["op_type", "core", "real_us", "predicted_us", "rel_error", "low_us", "high_us", "level"]
    rows = [{"op_type": p.record.op_type, "core": p.record.core, "real_us": p.real_us,
             "predicted_us": p.predicted_us, "rel_error": p.rel_error, "low_us": getattr(p, "low_us", 0.0) or None,
             "high_us": getattr(p, "high_us", 0.0) or None, "level": getattr(p, "level", "")} for p in predictions]
    return pd.DataFrame(rows, columns=cols)


def predicted_vs_real(predictions: Any, *, top: int = 8, ax: Any = None, title: str | None = None,
                      intervals: bool = False):
    """Log-log scatter of predicted against real duration, the `top` most frequent op types coloured, with
    the y = x line and a +-25% band. `predictions`: Prediction objects or a `prediction_frame`. `intervals`:
    draw each prediction's p10-p90 band (its level's interval) as a vertical bar."""
    df = predictions if isinstance(predictions, pd.DataFrame) else prediction_frame(predictions)
    fig, ax = _new_axes(ax, (6.5, 5.5))
    if df.empty:
        ax.set_title(title or "predicted vs real kernel duration (no kernels)")
        return fig
    counts = df["op_type"].value_counts()
    shown = list(counts.index[:top])
    colours = _palette(shown + ["other"])
    for name in shown + ["other"]:
        part = df[df["op_type"] == name] if name != "other" else df[~df["op_type"].isin(shown)]
        if not part.empty:
            ax.scatter(part["real_us"], part["predicted_us"], s=14, alpha=0.75, color=colours[name],
                       label=f"{name} ({len(part)})")
            banded = part.dropna(subset=["low_us", "high_us"]) if intervals and "low_us" in part else part[:0]
            if not banded.empty:
                ax.vlines(banded["real_us"], banded["low_us"], banded["high_us"], color=colours[name],
                          alpha=0.3, linewidth=1)
    lo = float(min(df["real_us"].min(), df["predicted_us"].min())) * 0.8
    hi = float(max(df["real_us"].max(), df["predicted_us"].max())) * 1.25
    line = np.geomspace(lo, hi, 50)
    ax.plot(line, line, color="black", linewidth=1, label="predicted = real")
    ax.fill_between(line, line * 0.75, line * 1.25, color="grey", alpha=0.15, label="within 25%")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("real duration (µs)")
    ax.set_ylabel("predicted duration (µs)")
    within = float(np.mean(df["rel_error"] <= 0.25))
    ax.set_title(title or f"predicted vs real kernel duration: median |error| "
                          f"{100 * float(df['rel_error'].median()):.1f}%, {100 * within:.0f}% within 25%")
    ax.legend(fontsize="small", loc="upper left")
    return fig
