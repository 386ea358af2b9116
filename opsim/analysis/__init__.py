"""opsim.analysis: tables, plots, what-if loops and sweep plots over finished runs (needs the `analysis` extra:
pandas and matplotlib).

`opsim.run(...)` / `opsim.load_result(...)` give a `Result`; the functions here take one.
"""
from opsim.analysis.calibration_plots import prediction_frame, predicted_vs_real
from opsim.analysis.plots import (PLOTS, cache_hit_rate, device_utilisation, memory_over_time, phase_breakdown,
                                  phase_table, sweep_plot, timeline, utilisation_table,
                                  what_if_plot)
from opsim.analysis.what_if import what_if

__all__ = ["PLOTS", "cache_hit_rate", "device_utilisation", "memory_over_time", "phase_breakdown", "phase_table",
           "predicted_vs_real", "prediction_frame", "sweep_plot",
           "timeline", "utilisation_table", "what_if", "what_if_plot"]
