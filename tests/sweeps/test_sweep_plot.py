"""sweep_plot: a labelled line for one swept parameter (mean and seed range), a heatmap for two."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from opsim.analysis import sweep_plot  # noqa: E402


def test_one_parameter_line_is_the_mean_with_a_range(reference):
    fig = sweep_plot(reference, "summary.exec_cache.hit_rate", ["env.ACLNN_CACHE_LIMIT"])
    try:
        ax = fig.axes[0]
        assert ax.get_xlabel() == "env.ACLNN_CACHE_LIMIT (swept value)"
        assert ax.get_ylabel() == "executor-cache hit rate (%)"
        assert "mean over soc, seed" in ax.get_title()
        line = ax.get_lines()[0]
        means = reference.groupby("env.ACLNN_CACHE_LIMIT")["summary.exec_cache.hit_rate"].mean() * 100
        assert list(line.get_xdata()) == [1.0, 8.0]
        assert np.allclose(line.get_ydata(), means.to_numpy())
        assert ax.get_legend() is not None
    finally:
        plt.close(fig)


def test_categorical_parameter_keeps_sweep_order(reference):
    fig = sweep_plot(reference, "summary.simulated_makespan_us", ["soc"])
    try:
        assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["Ascend910B2", "Ascend310P3"]
    finally:
        plt.close(fig)


def test_two_parameters_make_a_heatmap_of_means(reference):
    fig = sweep_plot(reference, "makespan_us")  # the table's own two parameters
    try:
        ax = fig.axes[0]
        image = ax.get_images()[0].get_array()
        assert image.shape == (2, 2)  # soc down, cache limit across
        sub = reference[(reference["soc"] == "Ascend310P3") & (reference["env.ACLNN_CACHE_LIMIT"] == 8)]
        assert image[1, 1] == pytest.approx(sub["makespan_us"].mean())
        assert ax.get_xlabel() == "env.ACLNN_CACHE_LIMIT (swept value)" and ax.get_ylabel() == "soc (swept value)"
        assert fig.axes[1].get_ylabel() == "makespan (µs)"  # the colour bar
    finally:
        plt.close(fig)


def test_bad_arguments_are_named(reference):
    with pytest.raises(ValueError, match="one or two parameters"):
        sweep_plot(reference, "makespan_us", ["env.ACLNN_CACHE_LIMIT", "soc", "seed"])
    with pytest.raises(ValueError, match="no column 'nope'"):
        sweep_plot(reference, "nope", ["soc"])
