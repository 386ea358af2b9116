"""The calibrated transfer model against the real communication files of the shared AlexNet 910B profile.

    python benchmarks/transfer.py [--profiles ../shared/real-profiles/alexnet-910b/text]

The job: an 8-NPU DDP step (one 910B server, HCCS full mesh) of which ranks 0 and 1 were profiled, twice
(level 1 and level 2: two runs). Each step has four allreduces (buffers of 9.96, 16.5, 67.2 and 151 MB).
For every op of every rank the model's transit (`transfer_time_us`: mesh allreduce over 8 ranks, 2 alpha +
2 n/8 beta) is compared with the op's ``Transit Time(ms)`` in communication.json, and the model's link rows
(`link_plan`) with the per-op per-link ``Transit Time(ms)`` of communication_matrix.json. The buffer size n is
read back from the HCCS traffic (Transit Size x p / (2 (p - 1)), the mesh allreduce's traffic inverted) and p
from the matrix's peers.

Three fits of the HCCS link (`opsim.calibration.comm_fit`, robust alpha-beta on the Size Distribution):
both levels (the hccs-910b preset: in-sample on both), the op's own level (in-sample) and the other level
(cross: fit on level 1, predict level 2 and the reverse). Errors are predicted / real - 1.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from opsim.calibration.comm_fit import fit_files  # noqa: E402
from opsim.calibration.comm_read import read_communication, read_matrix  # noqa: E402
from opsim.cluster.links import LINK_PRESETS, get_link  # noqa: E402
from opsim.cluster.transfer import link_plan, transfer_time_us  # noqa: E402

DEFAULT = ROOT.parent / "shared" / "real-profiles" / "alexnet-910b" / "text"


def files(base: Path, level: str) -> list[Path]:
    return sorted(base.glob(f"{level}/rank*_ascend_pt/ASCEND_PROFILER_OUTPUT/communication*.json"))


def fits(base: Path) -> dict[str, dict]:
    """{fit name: {level: LinkSpec of HCCS used to predict that level}} and the fitted numbers."""
    both = fit_files(files(base, "level*"))["HCCS"]
    per = {lv: fit_files(files(base, lv))["HCCS"] for lv in ("level1", "level2")}
    spec = lambda f: get_link("hccs-910b", **f.overrides())  # noqa: E731
    return {"in-sample (both levels)": {lv: spec(both) for lv in per},
            "in-sample (own level)": {lv: spec(per[lv]) for lv in per},
            "cross (other level)": {"level1": spec(per["level2"]), "level2": spec(per["level1"])},
            "_numbers": {"both": both, **per}}


def observations(base: Path) -> list[dict]:
    """Per level, rank and op: p, buffer bytes, real transit and per-link rows."""
    out = []
    for comm in sorted(base.glob("level*/rank*_ascend_pt/ASCEND_PROFILER_OUTPUT/communication.json")):
        level, rank = comm.parts[-4], int(comm.parts[-3].split("_")[0].removeprefix("rank"))
        rows = read_matrix(comm.with_name("communication_matrix.json"))
        p = len({r.dst for r in rows} | {r.src for r in rows})
        for op in read_communication(comm):
            hccs = op.transports["HCCS"]
            n = round(hccs.size_mb * 1e6 * p / (2 * (p - 1)))
            links = {r.dst: r.time_ms * 1e3 for r in rows if r.op_name == op.name and r.transport == "HCCS"}
            out.append(dict(level=level, rank=rank, op=op.name, p=p, n=n, real=op.transit_us, links=links))
    return out


def err(pred: float, real: float) -> float:
    return pred / real - 1.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", type=Path, default=DEFAULT)
    args = ap.parse_args(argv)
    if not args.profiles.is_dir():
        print(f"{args.profiles}: not found (the shared profile); give --profiles")
        return 2
    fs = fits(args.profiles)
    nums = fs.pop("_numbers")
    print("HCCS link fits (robust alpha-beta on Size Distribution buckets):")
    for name, f in nums.items():
        print(f"  {name:7s} bandwidth {f.bandwidth_gbps:6.2f} GB/s  latency {f.latency_us:6.2f} us  "
              f"({f.samples} buckets, {f.messages} messages, in-sample median |err| {f.median_error:.1%})")
    print(f"  preset hccs-910b: {LINK_PRESETS['hccs-910b'].bandwidth_gbps} GB/s, "
          f"{LINK_PRESETS['hccs-910b'].latency_us} us\n")
    obs = observations(args.profiles)
    names = list(fs)
    print("Transit Time per op (communication.json), mesh allreduce over 8 ranks; error = predicted/real - 1")
    print(f"{'level':7s} {'rank':>4s} {'op':24s} {'MB':>7s} {'real us':>8s} " +
          " ".join(f"{n[:22]:>22s}" for n in names))
    errs: dict[str, list[float]] = {n: [] for n in names}
    link_errs: dict[str, list[float]] = {n: [] for n in names}
    for o in obs:
        cells = []
        for name in names:
            link = fs[name][o["level"]]
            pred = transfer_time_us("allreduce", o["n"], o["p"], algorithm="mesh", intra=link)
            errs[name].append(err(pred, o["real"]))
            cells.append(f"{pred:9.1f} ({err(pred, o['real']):+6.1%})")
            plan = link_plan("allreduce", o["n"], tuple(range(o["p"])), o["rank"], algorithm="mesh", intra=link)
            link_errs[name] += [err(t, o["links"][d]) for _s, d, tr, _b, t in plan if tr == "HCCS" and d in o["links"]]
        print(f"{o['level']:7s} {o['rank']:4d} {o['op']:24s} {o['n'] / 1e6:7.2f} {o['real']:8.1f} "
              + " ".join(f"{c:>22s}" for c in cells))
    print("\nSummary (16 ops: 4 allreduces x 2 ranks x 2 levels; per-link: 7 HCCS links each, 112 rows)")
    print(f"{'fit':26s} {'op median |err|':>16s} {'op max |err|':>13s} {'link median |err|':>18s}")
    for name in names:
        e, le = [abs(x) for x in errs[name]], [abs(x) for x in link_errs[name]]
        print(f"{name:26s} {statistics.median(e):16.1%} {max(e):13.1%} {statistics.median(le):18.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
