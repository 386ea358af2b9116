from __future__ import annotations

from pathlib import Path

import pytest

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
TRAINING = REAL / "kernel_details_910b_training.csv"
MATMUL = REAL / "kernel_details_910b_matmul.csv"
TRACE = REAL / "trace_view_910b_mnist.json"


@pytest.fixture(scope="session")
def real_calibration():
    from opsim.calibration import calibrate
    return calibrate([TRAINING, TRACE])


@pytest.fixture(scope="session")
def calibration_file(real_calibration, tmp_path_factory):
    return real_calibration.save(tmp_path_factory.mktemp("cal") / "calibration.yaml")
