"""`opsim calibrate` and `opsim predict`."""
from __future__ import annotations

import argparse
from typing import TextIO


def add_parsers(sub: argparse._SubParsersAction) -> None:
    cal = sub.add_parser(
        "calibrate", help="fit device and host timing from real profiles",
        description="Fit kernel durations (per op type and accelerator core, on bytes, flops and block dim) "
                    "from kernel_details.csv / op_summary_*.csv and per-API host timings from trace_view.json; "
                    "write them as a readable YAML for `opsim run --calibration`.")
    cal.add_argument("profiles", nargs="+", metavar="PROFILE",
                     help="a *_ascend_pt directory, its ASCEND_PROFILER_OUTPUT/, a kernel_details.csv, an "
                          "op_summary_*.csv or a trace_view.json")
    cal.add_argument("-o", "--output", metavar="FILE", default="calibration.yaml",
                     help="calibration YAML to write (default: calibration.yaml)")
    cal.add_argument("--soc", metavar="NAME", help="the SoC the profile ran on (a preset name, see list-socs)")
    cal.add_argument("--validate", action="store_true",
                     help="also print a 5-fold cross-validation table per op type (n, median |error|, p90)")
    pred = sub.add_parser(
        "predict", help="predict kernel durations of a kernel_details.csv",
        description="Write the rows of KERNELS back unchanged with a `Predicted Duration(us)` column, using "
                    "the predictor `opsim run` uses for device tasks (a calibration, else the defaults).")
    pred.add_argument("kernels", metavar="KERNELS", help="kernel_details.csv or op_summary_*.csv")
    pred.add_argument("-o", "--output", metavar="OUT", required=True, help="CSV to write")
    pred.add_argument("--calibration", metavar="FILE", help="calibration YAML from `opsim calibrate`")
    pred.add_argument("--soc", metavar="NAME", help="SoC preset for the defaults and the roofline fallback")


def cmd_calibrate(args: argparse.Namespace, out: TextIO) -> int:
    from opsim.calibration import calibrate, read_profiles
    from opsim.calibration.validate import cross_validate, error_table, render_error_table
    cal = calibrate(args.profiles, soc=args.soc)
    path = cal.save(args.output)
    t = cal.timing
    out.write(f"{path}: {len(t.op_types)} op-type fit(s), {len(t.cores)} core fit(s), {len(t.signatures)} "
              f"signature(s), {len(t.host_apis)} host API(s)\n")
    if args.validate:
        records, _traces, _sources = read_profiles(args.profiles)
        preds = cross_validate(records, k=5, soc=args.soc)
        out.write("\n5-fold cross-validation (|predicted/real - 1|):\n")
        out.write(render_error_table(error_table(preds)))
    return 0


def cmd_predict(args: argparse.Namespace, out: TextIO) -> int:
    from opsim.calibration import load_calibration
    from opsim.calibration.predict import predict_table, write_predictions
    from opsim.device.cost import CostModel
    from opsim.device.soc import get_soc
    from opsim.ingest import read_kernels
    cal = load_calibration(args.calibration)
    soc = args.soc or (cal.soc if cal is not None else None)
    cost = CostModel(get_soc(soc) if soc else get_soc(), fitted=cal.timing if cal is not None else None)
    table = read_kernels(args.kernels)
    predicted = predict_table(cost, table)
    path = write_predictions(table, predicted, args.output)
    skipped = f", {table.n_skipped} skipped ({', '.join(f'{k}: {v}' for k, v in table.skipped.items())})" \
        if table.skipped else ""
    out.write(f"{path}: {len(predicted)} kernel(s) predicted{skipped}\n")
    return 0
