"""One test per failure class the hostile-input campaign found: each input is refused with exit 2 and one
error naming the file or field, in this process (no traceback, no hang, bounded memory)."""
from __future__ import annotations

import gzip
import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from cpu_clock import cpu_seconds  # the bounds below are CPU seconds: a loaded machine stretches wall time
from scenario_helpers import ROOT, SCENARIOS
from opsim.cli import EXIT_BAD_INPUT, main

QUICK = SCENARIOS / "quickstart.yaml"
KERNELS = ROOT / "tests" / "data" / "real" / "kernel_details_910b_matmul.csv"
TRACE = ROOT / "tests" / "data" / "formats" / "trace_view_queue_two_threads.json"


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(map(str, argv)), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def refused(argv, *needles):
    code, out, err = cli(*argv)
    assert code == EXIT_BAD_INPUT, (code, err)
    assert err.startswith("opsim: error: ") and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


def scenario_with(tmp_path, old, new, name="s.yaml"):
    p = tmp_path / name
    p.write_text(QUICK.read_text().replace(old, new, 1))
    return p


def sweep(tmp_path, body):
    p = tmp_path / "sw.yaml"
    p.write_text(f"sweep: s\nscenario: {QUICK}\n{body}")
    return p


# 1 ------------------------------------------------------------------------------------------------------
def test_class01_integer_longer_than_4300_digits(tmp_path):
    p = scenario_with(tmp_path, "seed: 7", "seed: " + "1" * 5000)
    refused(["validate", p], "s.yaml:", "an integer of 5000 characters")


def test_class01_long_integer_in_a_records_file(tmp_path):
    (tmp_path / "records.json.gz").write_bytes(gzip.compress(b'{"format": "opsim-records", "v": ' + b"9" * 5000 + b"}"))
    from opsim.api import load_result
    from opsim.errors import InvalidArgumentError
    with pytest.raises(InvalidArgumentError, match="records.json.gz: not valid JSON"):
        load_result(tmp_path)


# 2 ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["a: " + "[" * 1200 + "]" * 1200, "a: {b: " + "[" * 1200 + "}",
                                  "a: " + "[" * 1001 + "\n}", "{" * 1000 + "x"])
def test_class02_deep_flow_nesting_after_a_key(tmp_path, text):
    p = tmp_path / "deep.yaml"
    p.write_text(text)
    refused(["validate", p], "deep.yaml:")
    refused(["validate", QUICK, "--set", f"description={text}"], "--set")


# 3 ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tagged", ["!!int 'x'", "!!float 'x'", "!!bool 'maybe'"])
def test_class03_core_tag_with_an_unbuildable_value(tmp_path, tagged):
    p = scenario_with(tmp_path, "seed: 7", f"seed: {tagged}")
    refused(["validate", p], "s.yaml:", "cannot be read as")
    refused(["validate", QUICK, "--set", f"seed={tagged}"], "--set seed")


# 4 ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["threads.\u00b2.name", "threads.\u0661.name", "threads[\u00b3].name"])
def test_class04_unicode_digit_in_a_set_key(key):
    refused(["validate", QUICK, "--set", f"{key}=x"], "--set")


# 5 ------------------------------------------------------------------------------------------------------
def test_class05_non_string_keys(tmp_path):
    p = scenario_with(tmp_path, "seed: 7", "seed: 7\nsoc_overrides: {5: x}")
    refused(["validate", p], "s.yaml:", "the key 5")
    refused(["validate", QUICK, "--set", "env={5: x, true: y}"])  # env values stay text: keys are names
    refused(["validate", sweep(tmp_path, "grid: {5: [a, b]}\n")], "sw.yaml:", "the key 5")
    from opsim.errors import ScenarioError
    from opsim.scenario.loader import validate
    with pytest.raises(ScenarioError, match="the key 5"):
        validate({"name": "x", "threads": [], "env": {5: "x"}})


def test_class05_named_axis_labels_may_be_numbers():
    code, out, err = cli("validate", SCENARIOS / "sweeps" / "aicpu_limit_x_threads.yaml")
    assert code == 0, err


# 6 ------------------------------------------------------------------------------------------------------
def test_class06_huge_integer_in_a_float_field(tmp_path):
    refused(["validate", QUICK, "--set", "cost_overrides.tiling=0x" + "f" * 5000], "--set cost_overrides.tiling")
    cal = tmp_path / "cal.yaml"
    cal.write_text("opsim_calibration: 1\nscale: " + "1" * 401 + "\n")
    refused(["run", QUICK, "--calibration", cal, "--out", tmp_path / "o", "--quiet", "--no-progress"], "cal.yaml:2")


# 7 ------------------------------------------------------------------------------------------------------
def test_class07_nul_byte_in_a_path(tmp_path):
    refused(["validate", QUICK, "--set", "calibration=a\0b"], "NUL byte")
    refused(["validate", sweep(tmp_path, "seeds: 2\n").parent / "x\0y.yaml"], "NUL byte")
    p = tmp_path / "sw.yaml"
    p.write_text('sweep: s\nscenario: "a\\0b"\nseeds: 2\n')
    refused(["validate", p], "NUL byte")


# 8 ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("special", ["/dev/zero", "fifo", "link"])
def test_class08_special_files_are_not_read(tmp_path, special):
    target = tmp_path / "special"
    if special == "/dev/zero":
        target = "/dev/zero"
    elif special == "fifo":
        os.mkfifo(target)
    else:
        os.symlink("/dev/zero", target)
    t0 = cpu_seconds()
    refused(["validate", QUICK, "--set", f"calibration={target}"], "not a regular file")
    refused(["validate", target], "not a regular file")
    refused(["validate", sweep(tmp_path, f"seeds: 2\n").with_name("x.yaml")], "not found")
    p = tmp_path / "sw2.yaml"
    p.write_text(f"sweep: s\nscenario: {target}\nseeds: 2\n")
    refused(["validate", p], "not a regular file")
    refused(["predict", target, "-o", tmp_path / "p.csv"], "not a regular file")
    assert cpu_seconds() - t0 < 10


def test_class08_trace_view_linked_to_dev_zero(tmp_path):
    from opsim.errors import OpsimError
    from opsim.safe_io import open_regular
    link = tmp_path / "trace_view.json"
    os.symlink("/dev/zero", link)
    with pytest.raises(OpsimError, match="not a regular file"):
        open_regular(link, "a trace_view.json")


# 9 ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [
    ["validate", "x" * 5000], ["validate", "y" * 300 + ".yaml"], ["run", QUICK, "--calibration", "c" * 300],
    ["run", QUICK, "--out", "o" * 300], ["report", "r" * 300], ["predict", "k" * 300, "-o", "p.csv"],
    ["import", "t" * 300, "-o", "x.yaml"], ["calibrate", "z" * 5000]])
def test_class09_paths_longer_than_the_file_system_allows(argv):
    refused(argv, "long")


# 10 -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("output", ["", "{tmp}", "/proc/self/x", str(ROOT / "README.md" / "x"), "/tmp", "{tmp}/fifo"])
@pytest.mark.parametrize("command", ["predict", "calibrate", "import"])
def test_class10_bad_output_file(tmp_path, command, output):
    before = set(os.listdir("/"))
    os.mkfifo(tmp_path / "fifo")  # a special file: a rename over it would replace it (over /dev/null, the device)
    source = {"predict": KERNELS, "calibrate": KERNELS, "import": TRACE}[command]
    refused([command, source, "-o", output.format(tmp=tmp_path)], "-o")
    assert set(os.listdir("/")) == before  # no temporary file in /


def test_class10_atomic_path_refuses_before_its_temporary_file(tmp_path):
    from opsim.errors import OutputPathError
    from opsim.outputs import atomic_path
    with pytest.raises(OutputPathError, match="is a directory"):
        with atomic_path(tmp_path):
            pass
    assert os.listdir(tmp_path) == []


# 11 -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("override", ["threads.0.program.0={sleep: 2.0e12}", "cost_overrides.launch=1.0e+300"])
def test_class11_validate_refuses_times_the_outputs_cannot_write(override):
    refused(["validate", QUICK, "--set", override], "trace.json")


def test_class11_trace_bound_is_the_writers():
    from opsim.scenario.checks import TRACE_MAX_US
    from opsim.trace.timefmt import JSON_US_MAX
    assert TRACE_MAX_US * 1000 == JSON_US_MAX


@pytest.mark.parametrize("override", ["soc_overrides.clock_mhz=1e-300", "soc_overrides.hbm_bandwidth_gbps=1e-300",
                                      "soc_overrides.peak_fp16_flops=1e-300", "soc_overrides.h2d_bandwidth_gbps=1e-300"])
@pytest.mark.parametrize("outputs", ["outputs.trace=true", "outputs.trace=false"])
def test_class11_validate_refuses_soc_rates_whose_one_unit_outlasts_the_outputs(override, outputs):
    """A rate near 0 made every kernel last beyond what trace.json (or, without it, the profiler's nanosecond
    times) can hold: `run` failed after simulating (the profiler database with an internal error), `validate`
    said ok."""
    field = override.split("=")[0]
    refused(["validate", QUICK, "--set", override, "--set", outputs], field, "give a rate a device could have")


@pytest.mark.parametrize("trace_json", [True, False])
def test_class11_a_run_past_the_outputs_horizon_is_refused_before_writing(tmp_path, trace_json):
    """What no check before simulating can bound (a slow device and many large kernels) is refused after
    simulating and before writing: one line, no internal error, no output left."""
    s = tmp_path / "slow.yaml"
    s.write_text("name: slow\nseed: 1\nsoc_overrides: {hbm_bandwidth_gbps: %s}\n"
                 "outputs: {trace: %s, profiler: both}\nthreads:\n  - name: a\n    program:\n"
                 "      - loop: {count: 20, body: [{op: Add, shape: [4096, 4096], dtype: float16}]}\n"
                 % ("1.0e-6" if trace_json else "1.0e-9", "true" if trace_json else "false"))
    code, _, err = cli("validate", s)  # validate bounds the end first (opsim.scenario.end_bound)
    assert code == EXIT_BAD_INPUT and "the run may reach" in err, err
    out = tmp_path / "out"
    code, _, err = cli("run", s, "--out", out, "--quiet", "--no-progress")
    assert code == 1, err
    assert err.startswith("opsim: error: the run reached ") and err.count("\n") == 1, err
    assert ("trace.json" in err) == trace_json and "internal error" not in err
    assert not out.exists() or not any(out.iterdir())


# 12 -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["a: " + "[" * 5000 + "]" * 5000, "opsim_calibration: 1\nx: '" + "y" * (5 << 20) + "'",
                                  "opsim_calibration: !!python/object:os.system x"])
def test_class12_bad_calibration_yaml_is_bad_input(tmp_path, text):
    cal = tmp_path / "cal.yaml"
    cal.write_text(text)
    err = refused(["run", QUICK, "--calibration", cal, "--out", tmp_path / "o", "--quiet", "--no-progress"], "cal.yaml")
    assert "internal error" not in err


# 13 -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("body", ["seeds: 1000000000\n", "seeds: 1000000\n",
                                  "random: {samples: 100000000, params: {seed: {integer: [0, 9]}}}\n",
                                  "grid: {seed: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}\nseeds: 20000\n"])
def test_class13_sweep_points_bounded_before_expansion(tmp_path, body):
    t0 = cpu_seconds()
    refused(["validate", sweep(tmp_path, body)], "above the limit of 100,000")
    assert cpu_seconds() - t0 < 10


def test_class13_many_seeds_validate_without_one_check_each(tmp_path, monkeypatch):
    from opsim.sweeps import spec
    calls = []
    import opsim.scenario.loader as loader
    real = loader.load_scenario
    monkeypatch.setattr(loader, "load_scenario", lambda *a, **k: calls.append(1) or real(*a, **k))
    spec.load_sweep(sweep(tmp_path, "seeds: 100000\n"))
    assert len(calls) <= 3


# 14 -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ends", ["[0, .inf]", "[0, .nan]", "[-.inf, 1]", "[.nan, .nan]"])
@pytest.mark.parametrize("kind", ["integer", "uniform", "log_uniform"])
def test_class14_random_range_with_inf_or_nan(tmp_path, kind, ends):
    refused(["validate", sweep(tmp_path, f"random: {{samples: 2, params: {{seed: {{{kind}: {ends}}}}}}}\n")],
            "finite")


# 15 -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("old, new", [("aclnnAdd\"", "aclnnA\\u001bdd\""), ("aclnnMatmul", "aclnn../Matmul")])
def test_class15_import_refuses_names_validate_would_refuse(tmp_path, old, new):
    bad = tmp_path / "trace_view.json"
    bad.write_text(TRACE.read_text().replace(old, new))
    refused(["import", bad, "-o", tmp_path / "s.yaml"], "would not validate")
    assert not (tmp_path / "s.yaml").exists()


def test_class15_import_refuses_a_thread_named_like_the_task_queue(tmp_path):
    from opsim.errors import ProfileFormatError
    from opsim.importer import import_profile, write_import
    result = import_profile(TRACE)
    result.scenario["threads"][0]["name"] = result.scenario.get("task_queue_thread", "task_queue")
    with pytest.raises(ProfileFormatError, match="task_queue_thread"):
        write_import(result, tmp_path / "s.yaml")
    assert not (tmp_path / "s.yaml").exists()


# 16 -----------------------------------------------------------------------------------------------------
def test_class16_kernel_table_streams(tmp_path):
    """The reader holds one record at a time: a line without end is refused at the bound, not read whole."""
    from opsim.errors import ProfileFormatError
    from opsim.ingest.kernels import iter_kernels
    p = tmp_path / "kernel_details.csv"
    p.write_bytes(KERNELS.read_bytes().splitlines()[0] + b"\n" + b"x" * (2 << 20))
    with pytest.raises(ProfileFormatError, match="longer than 1 MiB"):
        list(iter_kernels(p))
    rows = list(iter_kernels(KERNELS))
    assert rows[0][4] == "header" and len(rows) > 1


# 17 -----------------------------------------------------------------------------------------------------
WRONG_NESTED = [
    {"threads": {"t": {"host_busy_us": "1", "host_busy_pct": 1}}}, {"threads": {"t": 5}}, {"threads": [1]},
    {"streams": {"s": {"busy_us": 1, "busy_pct": None}}}, {"streams": "x"}, {"units": {"u": {"utilization_pct": []}}},
    {"units": {"u": []}}, {"exec_cache": []}, {"exec_cache": {"hit_rate": "1"}}, {"aicpu_cache": 3},
    {"aicpu_cache": {"hit_rate": {}}}, {"pta_cache": [1]}, {"pta_cache": {"hits": 1, "hit_rate": "x"}},
    {"memory": []}, {"memory": {"peak_hbm_bytes": "1"}}, {"memory": {"peak_workspace_bytes": None}},
    {"leaks": []}, {"leaks": {"count": "2"}}, {"leaks": {"count": 1, "bytes": "3"}}, {"profiling_reports": [1]},
    {"profiling_reports": "x"}, {"wall": []}, {"wall": {"wall_seconds": "1"}},
    {"wall": {"simulated_calls_per_wall_second": []}}, {"env": {"A": "x"}}, {"env": {"A": {"value": 1, "source": "s"}}},
    {"env": []}, {"simulated_makespan_us": "1"}, {"errors": [1]}, {"errors": {}},
]


@pytest.mark.parametrize("summary", WRONG_NESTED, ids=range(len(WRONG_NESTED)))
def test_class17_report_on_wrong_nested_types(tmp_path, summary):
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    refused(["report", tmp_path], "summary.json")


def test_class17_manifest_nested_100k_deep(tmp_path):
    (tmp_path / "summary.json").write_text("{}")
    (tmp_path / ".opsim-manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    code, out, err = cli("report", tmp_path)
    assert code == 0 and "Traceback" not in err


# 18 and 19 ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def good_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    assert cli("run", QUICK, "--out", out, "--quiet", "--no-progress")[0] == 0
    return out


def _damaged(tmp_path, good_run, change=None, raw=None):
    import shutil
    d = tmp_path / "damaged"
    shutil.copytree(good_run, d)
    doc = json.loads(gzip.decompress((d / "records.json.gz").read_bytes()))
    if change is not None:
        change(doc)
    data = raw if raw is not None else json.dumps(doc).encode()
    (d / "records.json.gz").write_bytes(gzip.compress(data))
    return d


DAMAGE = {
    "outputs list": lambda d: d.__setitem__("outputs", ["x"]),
    "outputs path": lambda d: d["outputs"].__setitem__("trace", "../../etc/passwd"),
    "outputs number": lambda d: d["outputs"].__setitem__("trace", 5),
    "records list": lambda d: d.__setitem__("records", []),
    "kind missing": lambda d: d["records"].pop("device"),
    "column missing": lambda d: d["records"]["host"].pop("start"),
    "column not list": lambda d: d["records"]["host"].__setitem__("start", 5),
    "short column": lambda d: d["records"]["device"]["start"].pop(),
    "string in numbers": lambda d: d["records"]["host"]["dur"].__setitem__(0, "slow"),
    "number in names": lambda d: d["records"]["host"]["phase"].__setitem__(0, 7),
    "list in names": lambda d: d["records"]["cache"]["op"].__setitem__(0, []),
    "bool in numbers": lambda d: d["records"]["memory"]["size"].__setitem__(0, True),
    "meta list": lambda d: d.__setitem__("meta", []),
    "makespan text": lambda d: d["meta"].__setitem__("makespan_us", ""),  # campaign seed 31, case 5035
    "makespan inf": lambda d: d["meta"].__setitem__("makespan_us", float("inf")),
    "pools text": lambda d: d["meta"].__setitem__("pools", {"hbm": "big"}),
    "threads number": lambda d: d["meta"].__setitem__("threads", 3),
    "summary list": lambda d: d.__setitem__("summary", [1]),
    "stdout number": lambda d: d.__setitem__("stdout_text", 3),
}


@pytest.mark.parametrize("name", list(DAMAGE))
def test_class18_19_damaged_records_refused_when_loaded(tmp_path, good_run, name):
    from opsim.api import load_result
    from opsim.errors import InvalidArgumentError
    d = _damaged(tmp_path, good_run, DAMAGE[name])
    with pytest.raises(InvalidArgumentError, match="records.json.gz"):
        load_result(d)


@pytest.mark.parametrize("raw", [b"[" * 200_000, b"\0" * (80 << 20)], ids=["deep", "bomb"])
def test_class18_deep_json_and_gzip_bomb(tmp_path, good_run, raw, monkeypatch):
    from opsim.api import load_result
    from opsim.errors import InvalidArgumentError
    from opsim.trace import result_files
    monkeypatch.setattr(result_files, "MIN_RECORDS_BYTES", 8 << 20)  # the bound, scaled down for the test
    d = _damaged(tmp_path, good_run, raw=raw)
    with pytest.raises(InvalidArgumentError, match="records.json.gz"):
        load_result(d)


# 20 -----------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_class20_sigterm_and_sighup_leave_no_staging_files(tmp_path, sig):
    p = tmp_path / "s.yaml"
    p.write_text(QUICK.read_text().replace("count: ", "count: 40", 1))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "opsim.cli", "run", str(p), "--out", str(out), "--quiet",
                             "--no-progress"], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while not (out.exists() and any(out.glob(".opsim-staging-*"))) and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err.decode()
    assert not list(out.glob(".opsim-staging-*"))


def test_class20_stop_signals_unwind_in_process():
    from opsim.outputs import Terminated, stop_signals_unwind
    with pytest.raises(Terminated):
        with stop_signals_unwind():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


# manifest -----------------------------------------------------------------------------------------------
def test_corrupted_manifest_never_removes_a_user_directory(tmp_path):
    out = tmp_path / "out"
    assert cli("run", QUICK, "--out", out, "--quiet", "--no-progress")[0] == 0
    user = out / "my_data"
    user.mkdir()
    (user / "keep.txt").write_text("mine")
    m = json.loads((out / ".opsim-manifest.json").read_text())
    m["files"].append("my_data")
    m["hashes"]["my_data"] = "d:" + "0" * 64
    (out / ".opsim-manifest.json").write_text(json.dumps(m))
    assert cli("run", QUICK, "--out", out, "--quiet", "--no-progress")[0] == 0
    assert (user / "keep.txt").read_text() == "mine"
    (out / "notes.txt").write_text("mine")
    m["files"].append("notes.txt")  # a file not named as opsim names its files
    (out / ".opsim-manifest.json").write_text(json.dumps(m))
    assert cli("run", QUICK, "--out", out, "--quiet", "--no-progress")[0] == 0
    assert (out / "notes.txt").read_text() == "mine"
    m.pop("hashes")
    m["version"] = 1
    (out / ".opsim-manifest.json").write_text(json.dumps(m))  # an old manifest: no hashes, directories never removed
    assert cli("run", QUICK, "--out", out, "--quiet", "--no-progress")[0] == 0
    assert (user / "keep.txt").read_text() == "mine"


# found by the seed-31 campaign ----------------------------------------------------------------------------
@pytest.mark.parametrize("body", ["seeds: 1.0e+300\n", "seeds: 2.0\n",
                                  "random: {samples: 2.0, params: {seed: {integer: [0, 9]}}}\n"])
def test_sweep_counts_written_as_floats_are_refused(tmp_path, body):
    """jsonschema's own "integer" takes 1.0e+300; point_count then called len() on it (a traceback)."""
    refused(["validate", sweep(tmp_path, body)], "expected an integer, got float")


def test_a_long_string_where_a_list_of_dtypes_belongs_is_refused_at_once(tmp_path):
    """`dtype_choices: xxx...` (100,000 characters) made one error per character, each compared with every
    earlier one: validate hung."""
    p = scenario_with(tmp_path, "dtype_choices: [float, float16]", "dtype_choices: " + "x" * 100_000)
    t0 = cpu_seconds()
    refused(["validate", p], "dtype_choices: expected a list")
    assert cpu_seconds() - t0 < 30  # (it took hours: one error per character, each compared with all)


# 21 -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("figure", ["summary.bogus", "summary.exec_cache.no_such_field", "summary.op_calls.x"])
def test_class21_unknown_summary_figure(tmp_path, figure):
    refused(["validate", sweep(tmp_path, f"seeds: 2\nfigures: [{figure}]\n")], "unknown figure")


def test_class21_summary_fields_match_what_a_run_writes(good_run):
    from opsim.trace.summary import SUMMARY_FIELDS
    summary = json.loads((good_run / "summary.json").read_text())
    assert set(summary) <= set(SUMMARY_FIELDS)
    for k, sub in SUMMARY_FIELDS.items():
        if isinstance(sub, tuple) and isinstance(summary.get(k), dict):
            assert set(summary[k]) <= set(sub), k


# 22 and 23 ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["bo\0gus", "bo\x1b[31mgus", "bo\u202egus"])
def test_class22_control_characters_escaped(key):
    err = refused(["validate", QUICK, "--set", f"{key}=1"])
    assert not any(c in err for c in "\0\x1b\u202e")


def test_class23_long_value_cut(tmp_path):
    err = refused(["validate", QUICK, "--set", "soc=" + "x" * 1_000_000], "1,000,000 characters")
    assert len(err) < 5000
    p = scenario_with(tmp_path, "seed: 7", "seed: 7\ndescription: 1\nnosuchfield: '" + "z" * 1_000_000 + "'")
    assert len(refused(["validate", p])) < 5000


# issue 30: report on an incomplete run ------------------------------------------------------------------
def test_report_on_an_incomplete_run_says_what_is_missing(tmp_path, good_run):
    import shutil
    d = tmp_path / "run"
    shutil.copytree(good_run, d)
    (d / "trace.json").unlink()
    refused(["report", d], "incomplete run", "trace.json")
    (d / "summary.json").unlink()
    refused(["report", d], "no summary.json", "summary.json (listed in the manifest)")


def test_class02_set_value_nesting_is_refused_before_the_python_parser():
    """A --set value is parsed by PyYAML's Python parser, which recurses per level: depth is checked first."""
    from opsim.yamlio.limits import LimitError
    from opsim.scenario.yaml_core import parse_as_written, parse_core_scalar
    deep = "[" * 5000 + "]" * 5000
    for parse in (parse_core_scalar, parse_as_written):
        with pytest.raises(LimitError, match="nested deeper"):
            parse(deep)
    assert parse_core_scalar("'[[[[' ") == "[[[["  # brackets inside quotes are text
    assert parse_core_scalar("[[1], {a: [2]}]") == [[1], {"a": [2]}]
