"""The generated timing tables in docs/fidelity.md and docs/device.md match what docs/make_fidelity.py computes,
and the built-in fits file is what docs/refit_defaults.py produces."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_docs_{name}", ROOT / "docs" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_docs_tables_are_current():
    mod = _load("make_fidelity")
    try:
        assert mod.main(["--check"]) == 0, "run python docs/make_fidelity.py"
    finally:
        sys.modules.pop("calibration", None)  # benchmarks/calibration.py, imported by the script


def test_builtin_fits_are_what_the_refit_script_writes():
    mod = _load("refit_defaults")
    text = mod.HEADER + mod.build().to_yaml()
    assert (ROOT / "opsim" / "device" / "defaults_910b.yaml").read_text(encoding="utf-8") == text, \
        "run python docs/refit_defaults.py"


def test_builtin_family_model_is_what_the_refit_script_writes():
    import yaml
    mod = _load("refit_family")
    on_disk = yaml.safe_load((ROOT / "opsim" / "device" / "family_defaults.yaml").read_text(encoding="utf-8"))
    assert yaml.safe_load(yaml.safe_dump(mod.build())) == on_disk, "run python docs/refit_family.py"
