"""`opsim calibrate` and `opsim predict` (their parsers are in opsim.cli, which builds them without importing
this package)."""
from __future__ import annotations

import argparse
from typing import TextIO


def cmd_calibrate(args: argparse.Namespace, out: TextIO) -> int:
    from opsim.calibration import calibrate, read_profiles  # lazy: each subcommand loads only what it runs
    # lazy: each subcommand loads only what it runs
    from opsim.calibration.validate import cross_validate, error_table, render_error_table
    cal = calibrate(args.profiles, soc=args.soc)
    path = cal.save(args.output)
    t = cal.timing
    out.write(f"{path}: {len(t.op_types)} op-type fit(s), {len(t.cores)} core fit(s), {len(t.signatures)} "
              f"signature(s), {len(t.host_apis)} host API(s)"
              + (f", {len(cal.links)} link type(s) ({', '.join(cal.links)})" if cal.links else "") + "\n")
    if args.validate:
        from opsim.calibration import socs_of  # lazy: each subcommand loads only what it runs
        # lazy: each subcommand loads only what it runs
        from opsim.calibration.validate import held_out_table, leave_one_out, render_held_out
        records, _traces, sources = read_profiles(args.profiles)
        preds = cross_validate(records, k=5, soc=args.soc)
        out.write("\n5-fold cross-validation (|predicted/real - 1|; folds interleave kernels of the same "
                  "profiles):\n")
        out.write(render_error_table(error_table(preds)))
        groups: dict = {}
        for r in records:
            groups.setdefault(r.source, []).append(r)
        if len(groups) < 2:
            out.write("\nleave-one-profile-out: needs kernels from at least two profiles (got "
                      f"{len(groups)})\n")
        else:
            out.write("\nleave-one-profile-out (each profile predicted by a model fitted on the others, family "
                      "parameters included, on its own SoC):\n")
            out.write(render_held_out(held_out_table(leave_one_out(groups, socs_of(sources)))))
    return 0


def cmd_predict(args: argparse.Namespace, out: TextIO) -> int:
    from opsim.calibration import load_calibration  # lazy: each subcommand loads only what it runs
    # lazy: each subcommand loads only what it runs
    from opsim.calibration.predict import predict_table, write_predictions
    from opsim.device.cost import CostModel  # lazy: each subcommand loads only what it runs
    from opsim.device.soc import get_soc  # lazy: each subcommand loads only what it runs
    from opsim.ingest import read_kernels  # lazy: each subcommand loads only what it runs
    cal = load_calibration(args.calibration)
    # lazy: each subcommand loads only what it runs
    from opsim.calibration.predict_host import is_api_statistic, predict_api_statistic
    if is_api_statistic(args.kernels):  # torch_npu's host API table: host predictions, not kernels
        path, n = predict_api_statistic(args.kernels, args.output, cal.timing if cal is not None else None)
        out.write(f"{path}: {n} ACLNN API row(s) predicted\n")
        return 0
    soc = args.soc or (cal.soc if cal is not None else None)
    cost = CostModel(get_soc(soc) if soc else get_soc(), fitted=cal.timing if cal is not None else None)
    table = read_kernels(args.kernels)
    if soc is None:  # the table's own PMU clock and block dims name its SoC
        # lazy: each subcommand loads only what it runs
        from opsim.calibration.soc_evidence import match_preset, soc_evidence
        cost = CostModel(get_soc(match_preset(soc_evidence(table))),
                         fitted=cal.timing if cal is not None else None)
    predicted = predict_table(cost, table)
    path = write_predictions(table, predicted, args.output)
    skipped = f", {table.n_skipped} skipped ({', '.join(f'{k}: {v}' for k, v in table.skipped.items())})" \
        if table.skipped else ""
    out.write(f"{path}: {len(predicted)} kernel(s) predicted{skipped}\n")
    return 0
