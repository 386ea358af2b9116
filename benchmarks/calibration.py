"""Calibration fidelity on the public real profiles, against the targets (prints met / not met):

    python benchmarks/calibration.py [--json OUT]

1. Device, interleaved halves: the measured kernels of kernel_details_910b_training.csv are split into the
   odd and the even rows; a calibration fitted on one half (`opsim calibrate`) predicts the other
   (`opsim predict`), in both directions. Target: median |error| <= 15% and >= 75% of kernels within 25%.
   The same split is also reported without the signature level (op-type and core fits only).
2. Host: a calibration from trace_view_910b_mnist.json drives an opsim run of every API that opsim models and
   the profile measured; the run's own profiler output (trace_view.json) is read back and its per-API
   phase-1 (GetWorkspaceSize, executor-cache misses) and phase-2 medians (misses and hits) are compared with
   the profile's. Target: within 20%. Shown next to it: the assumed host-phase table (before) and the built-in
   910B defaults, which carry the same public trace's medians (after, in-sample).
3. Defaults: the roofline (before) and the built-in 910B fits (after) on both real kernel tables, with no
   calibration. The fits were made on these same files, so "after" is in-sample; the 5-fold cross-validated
   figure of the same method (no signatures) is the out-of-sample estimate.

4. Generalisation (issue 27): leave-one-workload-out over every distinct real workload (the two AlexNet tables
   are one workload profiled twice): each workload predicted by a model fitted on the others only, family
   parameters included, on its own SoC (from its PMU clock and block dims). Targets per held-out workload:
   median |error| <= 20%, >= 60% of kernels within 25%, summed device time within 10%. Then a fit on one
   workload (one SoC) predicting another SoC's workload: median <= 30% per pair. In-sample: a calibration
   fitted on each table predicting it (median <= 7%), and the built-in model on all tables. Last,
   `opsim predict` on 100,000 rows (< 10 s).

It is a measurement, not a test: it exits 0 whatever the figures.

Last recorded (2026-12-03, loaded 2-core machine; docs/fidelity.md holds the generated tables). Held-out
(leave-one-workload-out) median |err| / within 25% / summed time / in p10-p90 band, before -> after the
pooled-where-thin out-of-sample bands:
    training (fp16, 910B1)   28.6% / 42% / -0.4% / 61%  ->  28.5% / 42% / +0.8% / 77%   not met
    llm matmul (bf16, 910B3)  9.5% / 100% / -7.2% / 83% ->   9.5% / 100% / -7.2% / 86%  met
    alexnet (fp32, 910B2)    36.0% / 35% / -24.5% / 43% ->  35.5% / 36% / -24.6% / 45%  not met
Cross-SoC medians (held out): 19.2 / 35.6 / 25.3 / 34.7 / 31.9 / 9.8% (3 of 6 <= 30%). In-sample (a
calibration fitted on the table): 3.3 / 0.5 / 2.3% (met).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REAL = ROOT / "tests" / "data" / "real"
TRAINING = REAL / "kernel_details_910b_training.csv"
MATMUL = REAL / "kernel_details_910b_matmul.csv"
TRACE = REAL / "trace_view_910b_mnist.json"
#: workload -> its kernel tables (the two AlexNet tables are one workload profiled twice).
WORKLOADS = {
    "training (fp16, 910B1)": [TRAINING],
    "llm matmul (bf16, 910B3)": [MATMUL],
    "alexnet (fp32, 910B2)": [REAL / "kernel_details_910b_alexnet_level1_rank0.csv",
                              REAL / "kernel_details_910b_alexnet_level2_rank0.csv"],
}
LOPO_MEDIAN_TARGET, LOPO_WITHIN_TARGET, LOPO_SUM_TARGET = 0.20, 0.60, 0.10
CROSS_SOC_TARGET = 0.30
IN_SAMPLE_TARGET = 0.07
PREDICT_ROWS, PREDICT_SECONDS = 100_000, 10.0

DEVICE_MEDIAN_TARGET = 0.15
DEVICE_WITHIN_TARGET = 0.75
HOST_TARGET = 0.20

#: the APIs opsim models that the mnist profile measured, with a scenario call of each.
HOST_CALLS: dict[str, dict[str, Any]] = {
    "aclnnAdd": {"op": "Add", "shape": [64, 1024], "dtype": "float"},
    "aclnnReduceSum": {"op": "ReduceSum", "shape": [64, 1024], "dtype": "float", "attrs": {"dim": [1]}},
    "aclnnCast": {"op": "Cast", "shape": [64, 1024], "dtype": "float", "attrs": {"dtype": "float16"}},
    "aclnnRelu": {"op": "Relu", "shape": [64, 1024], "dtype": "float"},
    "aclnnAddmm": {"op": "Addmm", "shapes": [[64, 128], [64, 256], [256, 128]], "dtype": "float"},
}
REPEATS = 5


# ---- 1. device: interleaved halves ------------------------------------------------------------------------

def _write_half(table, parity: int, path: Path) -> None:
    keep = [raw for i, raw in enumerate(table.raw_rows) if (i % 2) == parity]
    path.write_text(table.newline.join([table.raw_header] + keep) + table.newline, encoding="utf-8")


def _errors(predicted_csv: Path) -> list[float]:
    import csv
    errs = []
    with open(predicted_csv, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            pred, real = row["Predicted Duration(us)"], row["Duration(us)"].strip()
            if pred and real not in ("", "N/A") and float(real) > 0:
                errs.append(abs(float(pred) / float(real) - 1.0))
    return errs


def _stats(errs: list[float]) -> dict[str, float]:
    import numpy as np
    e = np.array(errs)
    return {"n": int(len(e)), "median_error": float(np.median(e)), "p90_error": float(np.percentile(e, 90)),
            "within_25": float(np.mean(e <= 0.25))}


def device_halves() -> list[dict[str, Any]]:
    """Both directions of the interleaved split through the CLI (`opsim calibrate`, `opsim predict`)."""
    from opsim.cli import main
    from opsim.ingest import read_kernels
    table = read_kernels(TRAINING)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for fit_parity, name in ((0, "fit even rows, predict odd"), (1, "fit odd rows, predict even")):
            train, test = d / f"train{fit_parity}.csv", d / f"test{fit_parity}.csv"
            _write_half(table, fit_parity, train)
            _write_half(table, 1 - fit_parity, test)
            cal, pred = d / f"cal{fit_parity}.yaml", d / f"pred{fit_parity}.csv"
            sink = open(d / "log.txt", "a")
            assert main(["calibrate", str(train), "-o", str(cal)], stdout=sink, stderr=sink) == 0
            assert main(["predict", str(test), "--calibration", str(cal), "-o", str(pred)], stdout=sink,
                        stderr=sink) == 0
            sink.close()
            out.append({"split": name, "levels": "signature, op type, core", **_stats(_errors(pred))})
    # the same split without the signature level (op-type and core fits only), through the Python API
    from opsim.calibration import fit_device
    from opsim.calibration.validate import predict_records
    from opsim.device.cost import CostModel
    measured = [r for r in table.rows if r.duration_us]
    rows_of = {parity: [r for r in measured if (table.lines.index(r.row) % 2) == parity] for parity in (0, 1)}
    for fit_parity, name in ((0, "fit even rows, predict odd"), (1, "fit odd rows, predict even")):
        cost = CostModel(fitted=fit_device(rows_of[fit_parity], signatures=False), defaults=False)
        preds = predict_records(cost, rows_of[1 - fit_parity])
        out.append({"split": name, "levels": "op type, core", **_stats([p.rel_error for p in preds])})
    return out


# ---- 2. host: closed loop through opsim's own profiler output ---------------------------------------------

def _scenario(miss_every_call: bool, soc: str) -> dict[str, Any]:
    body = [dict(call) for call in HOST_CALLS.values()]
    return {"name": "host_calibration", "seed": 1, "soc": soc,
            "env": {"ACLNN_CACHE_LIMIT": "0"} if miss_every_call else {},
            "outputs": {"trace": False, "csv": False, "timestamps": False, "summary": False, "profiler": True},
            "threads": [{"name": "main", "program": [{"loop": {"count": REPEATS, "body": body}}, {"sync": "default"}]}]}


#: host timing sources compared: (label, SoC, calibrated). The host-phase table does not depend on the SoC;
#: Ascend910A has no built-in fits, so its run shows the assumed table alone.
HOST_MODES = (("assumed", "Ascend910A", False), ("defaults", "Ascend910B2", False), ("calibrated", "Ascend910B2", True))


def _simulated_host(calibration: Any, miss_every_call: bool, soc: str) -> dict[str, dict[str, list[float]]]:
    """API -> {'phase1': [...], 'phase2': [...]} durations (us) in the run's own trace_view.json."""
    import opsim
    from opsim.ingest import locate_profile, read_trace_view
    with tempfile.TemporaryDirectory() as tmp:
        opsim.run(_scenario(miss_every_call, soc), out_dir=tmp, calibration=calibration)
        (pt,) = Path(tmp).glob("*_ascend_pt")
        tv = read_trace_view(locate_profile(pt).trace_view)
    out: dict[str, dict[str, list[float]]] = {}
    for a in sorted(tv.acl_api_events(), key=lambda a: a.event.ts):
        if a.kind in ("phase1", "phase2"):
            out.setdefault(a.api, {"phase1": [], "phase2": []})[a.kind].append(a.event.dur / 1000.0)
    return out


def host_closed_loop() -> list[dict[str, Any]]:
    """Per API and phase: the real median and the simulated medians of each of HOST_MODES, with errors."""
    from opsim.calibration import calibrate
    cal = calibrate([TRACE])
    sims = {(label, m): _simulated_host(cal if calibrated else None, m, soc)
            for label, soc, calibrated in HOST_MODES for m in (True, False)}
    rows = []
    for api in HOST_CALLS:
        real = cal.host_api(api)
        if real is None:
            continue
        # phase 1 and phase-2 misses from the run where every call misses; hits: the repeat calls of the other
        cases = [("phase 1 (miss)", real.phase1_us(), "phase1", True, slice(None)),
                 ("phase 2 (miss)", real.phase2_us(hit=False), "phase2", True, slice(None)),
                 ("phase 2 (hit)", real.phase2_us(hit=True), "phase2", False, slice(1, None))]
        for label, real_us, kind, miss, pick in cases:
            if real_us is None:
                continue
            row: dict[str, Any] = {"api": api, "phase": label, "real_us": real_us}
            for mode, _soc, _cal in HOST_MODES:
                us = statistics.median(sims[(mode, miss)][api][kind][pick])
                row[f"{mode}_us"] = us
                row[f"{mode}_error"] = abs(us / real_us - 1.0)
            rows.append(row)
    return rows


# ---- 3. defaults before / after ---------------------------------------------------------------------------

def defaults_before_after() -> list[dict[str, Any]]:
    from opsim.calibration.validate import cross_validate, predict_records
    from opsim.device.cost import CostModel
    from opsim.ingest import read_kernels
    rows = []
    for path in (TRAINING, MATMUL):
        records = read_kernels(path).rows
        for label, cost in (("roofline (before)", CostModel(defaults=False)),
                            ("built-in model (after, in-sample)", CostModel())):
            rows.append({"file": path.name, "model": label,
                         **_stats([p.rel_error for p in predict_records(cost, records)])})
    records = read_kernels(TRAINING).rows
    rows.append({"file": TRAINING.name, "model": "same fit method, 5-fold cross-validated (out-of-sample)",
                 **_stats([p.rel_error for p in cross_validate(records, signatures=False)])})
    return rows


# ---- 4. generalisation -------------------------------------------------------------------------------------

def load_workloads() -> tuple[dict[str, list], dict[str, str]]:
    """(workload -> records, file -> SoC preset), files named relative to the repository."""
    from opsim.calibration import read_profiles, socs_of
    groups: dict[str, list] = {}
    socs: dict[str, str] = {}
    for name, files in WORKLOADS.items():
        recs, _t, sources = read_profiles(files)
        rel = {str(f): str(f.relative_to(ROOT)) for f in files}
        groups[name] = [dataclasses.replace(r, source=rel.get(r.source, r.source)) for r in recs]
        socs.update({rel.get(k, k): v for k, v in socs_of(sources).items()})
    return groups, socs


def _held_row(preds: list) -> dict[str, Any]:
    import numpy as np
    e = np.array([p.rel_error for p in preds])
    real = sum(p.real_us for p in preds)
    return {"n": int(len(e)), "median_error": float(np.median(e)), "within_25": float(np.mean(e <= 0.25)),
            "sum_error": sum(p.predicted_us for p in preds) / real - 1.0}


def leave_one_workload_out() -> list[dict[str, Any]]:
    """Per held-out workload and op family: median |error|, share within 25%, summed device-time error."""
    from opsim.calibration.validate import held_out_table, leave_one_out
    groups, socs = load_workloads()
    rows = []
    for r in held_out_table(leave_one_out(groups, socs)):
        rows.append({"workload": r.profile, "family": r.family, "n": r.n, "median_error": r.median_error,
                     "within_25": r.within_25, "sum_error": r.sum_error, "in_band": r.in_band,
                     "met": (r.median_error <= LOPO_MEDIAN_TARGET and r.within_25 >= LOPO_WITHIN_TARGET
                             and abs(r.sum_error) <= LOPO_SUM_TARGET) if r.family == "all" else None})
    return rows


def cross_soc_pairs() -> list[dict[str, Any]]:
    """A model fitted on one workload alone (one SoC) predicting each other workload (another SoC)."""
    from opsim.calibration.validate import fit_held_in, predict_records
    from opsim.device.cost import CostModel
    from opsim.device.soc import get_soc
    groups, socs = load_workloads()
    rows = []
    for fit_name, fit_recs in groups.items():
        fitted = fit_held_in(fit_recs, socs)
        for name, recs in groups.items():
            if name == fit_name:
                continue
            soc = socs[recs[0].source]
            preds = predict_records(CostModel(get_soc(soc), fitted=fitted, defaults=False), recs)
            row = {"fit": fit_name, "fit_soc": fitted.soc, "predict": name, "predict_soc": soc, **_held_row(preds)}
            row["met"] = row["median_error"] <= CROSS_SOC_TARGET
            rows.append(row)
    return rows


def in_sample() -> list[dict[str, Any]]:
    """Each workload predicted by a calibration fitted on itself (all levels), and by the built-in model
    (fitted on all workloads, so also in-sample)."""
    from opsim.calibration.validate import fit_held_in, predict_records
    from opsim.device.cost import CostModel
    from opsim.device.soc import get_soc
    groups, socs = load_workloads()
    rows = []
    for name, recs in groups.items():
        soc = get_soc(socs[recs[0].source])
        for label, cost in (("calibration fitted on it", CostModel(soc, fitted=fit_held_in(recs, socs),
                                                                   defaults=False)),
                            ("built-in model", CostModel(soc))):
            row = {"workload": name, "model": label, **_held_row(predict_records(cost, recs))}
            row["met"] = row["median_error"] <= IN_SAMPLE_TARGET
            rows.append(row)
    return rows


def predict_speed(rows: int = PREDICT_ROWS) -> dict[str, Any]:
    """Wall seconds of `opsim predict` (CLI, no calibration) on `rows` rows made by repeating the training
    table's rows (many distinct signatures, as a long profile has)."""
    import time

    from opsim.cli import main
    from opsim.ingest import read_kernels
    table = read_kernels(TRAINING)
    body = [raw for raw in table.raw_rows if raw.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "big.csv", Path(tmp) / "pred.csv"
        reps = rows // len(body) + 1
        src.write_text("\n".join([table.raw_header] + (body * reps)[:rows]) + "\n", encoding="utf-8")
        t0, c0 = time.perf_counter(), time.process_time()
        with open(Path(tmp) / "log.txt", "w") as sink:
            code = main(["predict", str(src), "-o", str(out)], stdout=sink, stderr=sink)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"rows": rows, "seconds": wall, "cpu_seconds": cpu, "exit": code,
            "met": code == 0 and wall < PREDICT_SECONDS}


# ---- report -------------------------------------------------------------------------------------------------

def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    ap.add_argument("--fast", action="store_true", help="skip the 100,000-row predict timing")
    args = ap.parse_args(argv)
    results: dict[str, Any] = {}

    print("1. device: interleaved halves of kernel_details_910b_training.csv (opsim calibrate -> opsim predict)")
    results["device_halves"] = halves = device_halves()
    for r in halves:
        met = r["median_error"] <= DEVICE_MEDIAN_TARGET and r["within_25"] >= DEVICE_WITHIN_TARGET
        print(f"   {r['split']:<28} [{r['levels']:<24}] n={r['n']:<4} median |err| {_pct(r['median_error']):>6} "
              f"(target <= 15%)  within 25%: {_pct(r['within_25']):>6} (target >= 75%)  "
              f"p90 {_pct(r['p90_error'])}  -> {'met' if met else 'NOT MET'}")
        r["met"] = met

    print("\n2. host: calibrated run vs the profile's medians (trace_view_910b_mnist.json)")
    results["host"] = host = host_closed_loop()
    for r in host:
        met = r["calibrated_error"] <= HOST_TARGET
        r["met"] = met
        print(f"   {r['api']:<16} {r['phase']:<15} real {r['real_us']:7.2f} us  assumed table {r['assumed_us']:6.2f} us "
              f"({_pct(r['assumed_error']):>5})  built-in defaults {r['defaults_us']:6.2f} us "
              f"({_pct(r['defaults_error']):>5})  calibrated {r['calibrated_us']:6.2f} us "
              f"({_pct(r['calibrated_error']):>4}, target <= 20%)  -> {'met' if met else 'NOT MET'}")

    print("\n3. defaults, no calibration (before: roofline; after: built-in model)")
    results["defaults"] = defaults = defaults_before_after()
    for r in defaults:
        print(f"   {r['file']:<34} {r['model']:<56} n={r['n']:<4} median |err| {_pct(r['median_error']):>7}  "
              f"within 25%: {_pct(r['within_25']):>6}")
    improved = all(a["median_error"] < b["median_error"] and a["within_25"] > b["within_25"]
                   for a, b in zip(defaults[1:4:2], defaults[0:4:2]))
    results["defaults_improved"] = improved
    print(f"   defaults improve on both files: {'met' if improved else 'NOT MET'}")
    report_generalisation(results, fast="--fast" in (argv or []))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


def report_generalisation(results: dict[str, Any], fast: bool = False) -> None:
    """Section 4: leave-one-workload-out, cross-SoC pairs, in-sample, predict speed."""
    print("\n4. generalisation: leave-one-workload-out (fit on the other workloads, predict the held-out one)")
    results["lopo"] = lopo = leave_one_workload_out()
    for r in lopo:
        verdict = "" if r["met"] is None else ("  -> met" if r["met"] else "  -> NOT MET")
        print(f"   {r['workload']:<26} {r['family']:<7} n={r['n']:<4} median |err| {_pct(r['median_error']):>7} "
              f"within 25%: {_pct(r['within_25']):>6}  summed time {100 * r['sum_error']:+.1f}%  "
              f"in p10-p90 band: {_pct(r['in_band']):>6}{verdict}")
    print("   (targets per workload: median <= 20%, >= 60% within 25%, summed time within 10%; "
          "an honest band holds ~80%)")
    print("\n   fit on one workload / SoC, predict another SoC's workload (target median <= 30%)")
    results["cross_soc"] = pairs = cross_soc_pairs()
    for r in pairs:
        print(f"   {r['fit']} -> {r['predict']}: n={r['n']} median |err| {_pct(r['median_error'])} within 25%: "
              f"{_pct(r['within_25'])} summed {100 * r['sum_error']:+.1f}%  -> {'met' if r['met'] else 'NOT MET'}")
    print("\n   in-sample (target: calibration fitted on the table, median <= 7%)")
    results["in_sample"] = ins = in_sample()
    for r in ins:
        print(f"   {r['workload']:<26} {r['model']:<26} n={r['n']:<4} median |err| {_pct(r['median_error']):>6} "
              f"within 25%: {_pct(r['within_25']):>6}" + ("  -> met" if r["met"] else "  -> NOT MET"
                                                            if r["model"] != "built-in model" else ""))
    if not fast:
        results["predict_speed"] = sp = predict_speed()
        print(f"\n   opsim predict on {sp['rows']:,} rows: {sp['seconds']:.2f} s wall, {sp['cpu_seconds']:.2f} s CPU "
              f"(target < 10 s)  -> {'met' if sp['met'] else 'NOT MET'}")


if __name__ == "__main__":
    sys.exit(main())
