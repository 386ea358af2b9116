"""Refit the built-in family model (opsim/device/family_defaults.yaml):

    python docs/refit_family.py

Every real kernel table in tests/data/real/ (sources in its README) is read, each on the SoC preset its own
PMU clock and block dims match; the family parameters and op-type factors are fitted on all of them pooled
(`opsim.calibration.family_fit`). Each family's interval (log p10/p90) is taken from leave-one-workload-out
residuals, so the band printed next to a prediction is an out-of-sample spread.
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from opsim.calibration import read_profiles, socs_of, work_samples  # noqa: E402
from opsim.calibration.family_fit import fit_family_model  # noqa: E402
from opsim.device.fitted_io import family_to_dict  # noqa: E402

REAL = Path("tests/data/real")
#: workload -> its kernel tables (the two AlexNet tables are one workload profiled twice).
WORKLOADS = {
    "training (fp16, 910B1)": [REAL / "kernel_details_910b_training.csv"],
    "llm matmul (bf16, 910B3)": [REAL / "kernel_details_910b_matmul.csv"],
    "alexnet (fp32, 910B2)": [REAL / "kernel_details_910b_alexnet_level1_rank0.csv",
                              REAL / "kernel_details_910b_alexnet_level2_rank0.csv"],
}
TARGET = ROOT / "opsim" / "device" / "family_defaults.yaml"
HEADER = ("# Built-in family model of opsim's device timing, fitted by docs/refit_family.py on every public real\n"
          "# kernel table in tests/data/real/ (sources in its README). Do not edit by hand: rerun the script.\n")


def load() -> tuple[dict, dict]:
    """(workload -> records, file -> SoC preset) with files named relative to the repository."""
    groups, socs = {}, {}
    for name, files in WORKLOADS.items():
        recs, _t, sources = read_profiles([ROOT / f for f in files])
        rel = {str(ROOT / f): str(f) for f in files}
        groups[name] = [dataclasses.replace(r, source=rel.get(r.source, r.source)) for r in recs]
        socs.update({rel.get(k, k): v for k, v in socs_of(sources).items()})
    return groups, socs


def build() -> dict:
    from opsim.calibration.validate import out_of_sample_bands, with_bands
    groups, socs = load()
    records = [r for rs in groups.values() for r in rs]
    model = fit_family_model(work_samples(records, socs))
    with_bands(model, out_of_sample_bands(groups, socs))
    sources = [{"file": f, "soc": s} for f, s in sorted(socs.items())]
    return {"sources": sources, "family": family_to_dict(model)}


def main() -> int:
    import yaml

    from opsim.outputs import write_text_atomic
    data = build()
    write_text_atomic(TARGET, HEADER + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=110))
    fam = data["family"]
    print(f"{TARGET.relative_to(ROOT)}: {len(fam['families'])} families, {len(fam['op_types'])} op-type factors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
