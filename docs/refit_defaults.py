"""Refit the built-in kernel-timing defaults of the 910B presets (opsim/device/defaults_910b.yaml):

    python docs/refit_defaults.py

The fits come from the public real profiles in tests/data/real/ (their source is in that directory's
README): per op type and accelerator core, and per core, with the same robust fit as `opsim calibrate`
(no per-signature entries: the defaults generalise over shapes). Device kernel times now come from the family
model (docs/refit_family.py, opsim/device/family_defaults.yaml), so this file keeps the host timings only.
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from opsim.calibration import Calibration, fit_device  # noqa: E402
from opsim.calibration.host import host_table  # noqa: E402
from opsim.ingest import read_kernels, read_trace_view  # noqa: E402

REAL = Path("tests/data/real")
SOURCES = (REAL / "kernel_details_910b_training.csv", REAL / "kernel_details_910b_matmul.csv")
TRACE = REAL / "trace_view_910b_mnist.json"
TARGET = ROOT / "opsim" / "device" / "defaults_910b.yaml"
HEADER = ("# Built-in kernel-timing defaults of the Ascend910B presets, refitted by docs/refit_defaults.py on\n"
          "# the public torch_npu profiles in tests/data/real/ (see its README for their source). Do not edit by\n"
          "# hand: rerun the script.\n")


def build() -> Calibration:
    records = []
    sources = []
    for rel in SOURCES:
        table = read_kernels(ROOT / rel)
        # provenance names the file relative to the repository, whatever the working directory
        rows = [dataclasses.replace(r, source=str(rel)) for r in table.rows]
        records.extend(rows)
        sources.append({"file": str(rel), "kind": "kernels", "kernels": len(rows), "skipped": dict(table.skipped)})
    timing = fit_device(records, signatures=False, name="built-in defaults (defaults_910b.yaml)")
    # device time comes from the family model (docs/refit_family.py); this file keeps the host timings
    timing.cores, timing.op_types = {}, {}
    trace = read_trace_view(ROOT / TRACE)
    timing.host_apis = host_table(trace, TRACE)
    sources.append({"file": str(TRACE), "kind": "trace_view", "acl_events": len(trace.acl_api_events())})
    return Calibration(timing=timing, soc="Ascend910B2", sources=sources)


def main() -> int:
    cal = build()
    from opsim.outputs import write_text_atomic
    write_text_atomic(TARGET, HEADER + cal.to_yaml())
    print(f"{TARGET.relative_to(ROOT)}: {len(cal.timing.host_apis)} host APIs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
