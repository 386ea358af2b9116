"""Refit the default host model (opsim/device/host_defaults.yaml) on every public real profile:

    python docs/refit_host.py [--profiles ../shared/real-profiles]

Step 1 (only when the profiles folder is given and exists): every ACLNN call of every profile, from its
trace_view.json or its db export's CANN_API, classified phase1 / phase2_miss / phase2_hit, with the API's
tensor count from the profile's kernel table and the device tasks each call launched, is written to
tests/data/real/host_calls_public.csv (small; its README names the sources). The mnist trace of tests/data/real is always included.
Step 2: the model is fitted on that CSV (opsim.calibration.host_fit) and written as package data.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from opsim.calibration.host_fit import api_tensors, fit_host_model, host_calls, read_calls_csv, \
    trace_launch_counts, write_calls_csv  # noqa: E402
from opsim.device.host_model import HOST_DEFAULTS_FILE  # noqa: E402
from opsim.ingest import iter_db_api_events, iter_kernel_rows, locate_profiles, read_trace_view  # noqa: E402
from opsim.ingest.profiler_db import db_launch_counts  # noqa: E402

CALLS = ROOT / "tests" / "data" / "real" / "host_calls_public.csv"
MNIST = ROOT / "tests" / "data" / "real" / "trace_view_910b_mnist.json"
TARGET = ROOT / "opsim" / "device" / HOST_DEFAULTS_FILE
HEADER = ("# Default host costs of any ACLNN API (opsim.device.host_model), fitted by docs/refit_host.py on the\n"
          "# ACLNN calls of tests/data/real/host_calls_public.csv (public real torch_npu profiles; see the README\n"
          "# there). Medians in microseconds; n: profiles (api level) or APIs (family, all). Do not edit by hand.\n")


def _profile_name(root: Path, base: Path) -> str:
    try:
        return str(root.relative_to(base))
    except ValueError:
        return root.name


def collect(profiles: Path | None) -> list:
    mnist = read_trace_view(MNIST)
    calls = host_calls(mnist.acl_api_events(), "mnist-910b", str(MNIST.relative_to(ROOT)),
                       launches=trace_launch_counts(mnist))
    if profiles is None or not profiles.is_dir():
        return calls
    for files in locate_profiles(profiles):
        name = "alexnet-910b/" + _profile_name(files.root, profiles / "alexnet-910b")
        kernels = [r for k in files.kernel_sources for r in iter_kernel_rows(k)]
        src = files.host_source
        if src is None:
            continue
        if src == files.trace_view:
            trace = read_trace_view(src)
            events, launches = trace.acl_api_events(), trace_launch_counts(trace)
        else:
            events, launches = list(iter_db_api_events(src)), db_launch_counts(src)
        label = f"../shared/real-profiles/{name}/{src.relative_to(files.root)}"
        calls.extend(host_calls(events, name, label, api_tensors(kernels), launches))
    return calls


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", type=Path, default=None, help="the shared real-profiles folder (step 1)")
    args = ap.parse_args(argv)
    from opsim.outputs import write_text_atomic
    if args.profiles is not None:
        write_text_atomic(CALLS, write_calls_csv(collect(args.profiles)))
    calls = read_calls_csv(CALLS)
    model = fit_host_model(calls, name="built-in host model", machines=True)
    import yaml
    write_text_atomic(TARGET, HEADER + yaml.safe_dump(model.to_dict(), sort_keys=False, default_flow_style=None,
                                                      width=110))
    print(f"{TARGET.relative_to(ROOT)}: {len(calls)} calls, {len({c.profile for c in calls})} profiles, "
          f"{len({a for a, _k in model.apis})} APIs, tensor slope {model.tensor_slope:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
