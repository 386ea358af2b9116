"""Link calibration from communication.json / communication_matrix.json: the fit, the links: section of a
calibration YAML, `opsim calibrate` on them, and hostile communication files."""
from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest

from cpu_clock import cpu_seconds  # bounds in CPU seconds: a loaded machine stretches wall time
from opsim.calibration import Calibration, calibrate
from opsim.calibration.comm_fit import fit_files, links_from_yaml
from opsim.calibration.comm_read import read_communication, read_matrix
from opsim.cluster.links import LINK_PRESETS, get_link
from opsim.errors import CalibrationError

ROOT = Path(__file__).resolve().parents[2]
COMM = ROOT / "tests" / "data" / "real" / "alexnet_910b_comm"
L1 = COMM / "level1" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
L2 = COMM / "level2" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
SHARED = ROOT.parent / "shared" / "real-profiles" / "alexnet-910b" / "text"


def test_reads_the_real_files():
    """Four allreduces (Total Op Info and the SDMA aggregate skipped); each op's link rows once."""
    ops = read_communication(L1 / "communication.json")
    assert [o.name for o in ops] == [f"hcom_allReduce__586_{i}_1" for i in range(4)]
    assert ops[2].transit_us == pytest.approx(2059.78, abs=0.01)
    assert "SDMA" not in ops[2].transports
    assert ops[2].transports["HCCS"].buckets == ((18.890752, 12, pytest.approx(13.0692, abs=1e-4)),
                                                 (18.776064, 2, pytest.approx(2.13640, abs=1e-4)))
    rows = read_matrix(L1 / "communication_matrix.json")
    assert len(rows) == 32  # 4 ops x (7 HCCS peers + 1 LOCAL), duplicates across top1/middle/bottomN dropped
    assert {r.transport for r in rows} == {"HCCS", "LOCAL"}


def test_fit_of_one_rank():
    """HCCS from the Size Distribution (alpha-beta), LOCAL from the matrix rows; measured, in-sample."""
    fits = fit_files([L1 / "communication.json", L1 / "communication_matrix.json"])
    hccs, local = fits["HCCS"], fits["LOCAL"]
    assert hccs.source == "size distribution" and local.source == "link rows"
    assert 15.0 < hccs.bandwidth_gbps < 20.0 and 0.0 <= hccs.latency_us < 40.0
    assert hccs.messages == 56 and hccs.samples == 8 and hccs.median_error < 0.1
    assert 300.0 < local.bandwidth_gbps < 600.0
    assert get_link("hccs-910b", **hccs.overrides()).bandwidth_gbps == hccs.bandwidth_gbps


@pytest.mark.skipif(not SHARED.is_dir(), reason="needs ../shared/real-profiles")
def test_presets_are_the_fit_of_the_shared_profile():
    """hccs-910b and local-910b are the fit of both ranks and both levels of the shared profile."""
    files = sorted(SHARED.glob("level*/rank*_ascend_pt/ASCEND_PROFILER_OUTPUT/communication*.json"))
    fits = fit_files(files)
    assert LINK_PRESETS["hccs-910b"].bandwidth_gbps == pytest.approx(fits["HCCS"].bandwidth_gbps, abs=0.01)
    assert LINK_PRESETS["hccs-910b"].latency_us == pytest.approx(fits["HCCS"].latency_us, abs=0.01)
    assert LINK_PRESETS["local-910b"].bandwidth_gbps == pytest.approx(fits["LOCAL"].bandwidth_gbps, abs=0.1)


def test_calibrate_writes_and_loads_the_links_section(tmp_path):
    """A folder holding only communication files calibrates links; the YAML loads back into LinkSpec overrides
    and saves again byte for byte."""
    cal = calibrate([COMM / "level1"])
    assert set(cal.links) == {"HCCS", "LOCAL"}
    assert [s["kind"] for s in cal.sources] == ["communication", "communication matrix"]
    path = cal.save(tmp_path / "cal.yaml")
    assert "\nlinks:\n" in path.read_text()
    back = Calibration.load(path)
    assert back.links == cal.links
    assert back.link_overrides("HCCS") == {k: cal.links["HCCS"][k] for k in ("bandwidth_gbps", "latency_us")}
    assert back.link_overrides("RDMA") == {}
    assert back.save(tmp_path / "again.yaml").read_bytes() == path.read_bytes()


def test_calibrate_without_communication_files_has_no_links(real_calibration):
    """A profile without communication files calibrates as before: no links key in the YAML."""
    assert real_calibration.links == {}
    assert "links" not in real_calibration.to_dict()


def _cli(*argv):
    from opsim.cli import main
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_calibrate_cli(tmp_path):
    """`opsim calibrate` on a communication.json says the link types; a damaged one exits 2 in one line."""
    code, out, err = _cli("calibrate", L2 / "communication.json", "-o", tmp_path / "c.yaml")
    assert code == 0, err
    assert "1 link type(s) (HCCS)" in out
    bad = _comm(tmp_path, _op({"2.0": "12"}))
    code, out, err = _cli("calibrate", bad, "-o", tmp_path / "d.yaml")
    assert code == 2 and "communication.json: field step1.collective" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) <= 2 and not (tmp_path / "d.yaml").exists()


@pytest.mark.parametrize("bad_links, field", [
    (5, "links: must be a mapping"),
    ({"NVLINK": {"bandwidth_gbps": 1}}, "links.NVLINK: unknown transport"),
    ({"HCCS": {"latency_us": 1}}, "links.HCCS: must be a mapping with bandwidth_gbps"),
    ({"HCCS": {"bandwidth_gbps": -1}}, "links.HCCS.bandwidth_gbps: must be a finite number"),
    ({"HCCS": {"bandwidth_gbps": "fast"}}, "links.HCCS.bandwidth_gbps: wrong type"),
    ({"HCCS": {"bandwidth_gbps": True}}, "links.HCCS.bandwidth_gbps: wrong type"),
    ({"HCCS": {"bandwidth_gbps": 1e300}}, "links.HCCS: bandwidth_gbps must be in"),
    ({"HCCS": {"bandwidth_gbps": 1, "colour": 1}}, "links.HCCS.colour: unknown field"),
])
def test_bad_links_section(bad_links, field):
    with pytest.raises(CalibrationError, match=re.escape(f"cal.yaml: field {field}")):
        links_from_yaml(bad_links, "cal.yaml")


def _comm(tmp_path, text: str | bytes, name: str = "communication.json") -> Path:
    p = tmp_path / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


def _op(sd) -> str:
    return json.dumps({"step1": {"collective": {"hcom_allReduce__1_0_1@9": {
        "Communication Time Info": {"Transit Time(ms)": 1.0},
        "Communication Bandwidth Info": {"HCCS": {"Transit Size(MB)": 1, "Transit Time(ms)": 1,
                                                  "Size Distribution": sd}}}}}})


@pytest.mark.parametrize("content, expected", [
    (b'{"s": {"collective": {}}}\x00', "not valid JSON"),
    (b"\xff\xfe{", "not valid JSON"),
    ("[" * 100000 + "]" * 100000, "nested too deep|not valid JSON"),
    ("[1, 2]", r"field \(top level\): expected an object"),
    (_op({"2.0": [1e999, 1.0]}), "not valid JSON"),
    (_op({"2.0": [12, "NaN"]}), r"Size Distribution\.'2\.0'\[1\]: expected a non-negative number"),
    ('{"s": {"collective": {"x": {"Communication Time Info": {"Transit Time(ms)": NaN}}}}}', "not valid JSON"),
    (_op({"2.0": [1, 1.0]}).replace('"2.0": [1, 1.0]', '"2.0": [' + "9" * 60 + ', 1.0]'), "not valid JSON"),
    (_op({"2.0": [12.5, 1.0]}), r"\[0\]: expected a message count"),
    (_op({"2.0": "12"}), r"expected \[count, total ms\]"),
    (_op({"big": [1, 1.0]}), "the key must be a message size in MB"),
    (_op([1, 2]), r"Size Distribution: expected an object"),
    ('{"s": {"collective": {"x": {"Communication Time Info": {"Transit Time(ms)": -1}}}}}',
     r"Transit Time\(ms\): expected a non-negative number"),
])
def test_hostile_communication_json(tmp_path, content, expected):
    """Damaged files end in one CalibrationError naming the file (and the field where there is one)."""
    p = _comm(tmp_path, content)
    with pytest.raises(CalibrationError, match=expected) as err:
        read_communication(p)
    assert str(p) in str(err.value)


@pytest.mark.parametrize("row, expected", [
    ({"Transport Type": "HCCS", "Transit Size(MB)": 1, "Transit Time(ms)": 1, "Op Name": "x"}, None),
    ({"Transport Type": 5, "Transit Size(MB)": 1, "Transit Time(ms)": 1, "Op Name": "x"}, "Transport Type"),
    ({"Transport Type": "HCCS", "Transit Size(MB)": "1", "Transit Time(ms)": 1, "Op Name": "x"},
     r"Transit Size\(MB\): expected a non-negative number"),
])
def test_hostile_matrix(tmp_path, row, expected):
    p = _comm(tmp_path, json.dumps({"s": {"collective": {"allreduce-top1@1": {"0-1": row}}}}),
              "communication_matrix.json")
    if expected is None:
        assert len(read_matrix(p)) == 1
        bad = _comm(tmp_path, json.dumps({"s": {"collective": {"g@1": {"zero-one": row}}}}),
                    "communication_matrix.json")
        with pytest.raises(CalibrationError, match="<src rank>-<dst rank>"):
            read_matrix(bad)
        return
    with pytest.raises(CalibrationError, match=expected):
        read_matrix(p)


def test_special_files_refused(tmp_path):
    """/dev/zero and a FIFO named communication.json are refused, never read forever."""
    with pytest.raises(CalibrationError, match="not a regular file"):
        read_communication("/dev/zero")
    fifo = tmp_path / "communication.json"
    os.mkfifo(fifo)
    with pytest.raises(CalibrationError, match="not a regular file"):
        calibrate([fifo])


def test_many_ops_read_in_linear_time(tmp_path):
    """4,000 ops (10x a long step) read and fit quickly; the reader is one pass over the parsed JSON."""
    ops = {f"hcom_allReduce__1_{i}_1@9": {"Communication Time Info": {"Transit Time(ms)": 0.1},
                                          "Communication Bandwidth Info": {"HCCS": {
                                              "Transit Size(MB)": 1, "Transit Time(ms)": 1,
                                              "Size Distribution": {f"{1 + i % 50}.0": [2, 0.02 + (i % 50) * 0.11]}}}}
           for i in range(4000)}
    p = _comm(tmp_path, json.dumps({"step1": {"collective": ops}}))
    start = cpu_seconds()
    fit = fit_files([p])["HCCS"]
    assert cpu_seconds() - start < 10.0
    assert fit.messages == 8000 and fit.bandwidth_gbps == pytest.approx(1 / 0.055 * 1e-3 * 1e3, rel=0.05)


def test_one_message_size_gives_a_ratio_without_latency(tmp_path):
    """Messages of a single size cannot separate latency from bandwidth: bytes / time, no latency."""
    p = _comm(tmp_path, _op({"4.0": [10, 2.0]}))
    fit = fit_files([p])["HCCS"]
    assert fit.source == "ratio" and fit.latency_us is None
    assert fit.bandwidth_gbps == pytest.approx(20.0)  # 4 MB in 0.2 ms
    assert fit.overrides() == {"bandwidth_gbps": pytest.approx(20.0)}
    assert "latency_us" not in fit.to_dict()


@pytest.mark.skipif(not SHARED.is_dir(), reason="needs ../shared/real-profiles")
def test_transfer_benchmark_runs(capsys):
    """benchmarks/transfer.py prints its table on the shared profile; the in-sample per-link error stays small."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("transfer_bench", ROOT / "benchmarks" / "transfer.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--profiles", str(SHARED)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("in-sample (both levels)"))
    assert float(line.split()[-1].rstrip("%")) < 10.0  # per-link median |err|, in-sample


@pytest.mark.parametrize("dist", [{"1e15": [1, 1e-300]}, {"1e-300": [1, 1e15]}, {"1": [1, 1e-300], "2": [1, 1e-300]},
                                  {"1e-9": [1, 1e9], "1e-8": [1, 1e9]}])
def test_a_link_fit_no_calibration_file_could_hold_is_refused_nothing_written(tmp_path, dist):
    """Sizes and times that fit to an infinite, zero or 1e300 GB/s link: `opsim calibrate` exited 0 and wrote a
    links: section that `Calibration.load` (every run) refused; now exit 2 naming the file and the transport."""
    from opsim.cli import main
    op = {"Communication Time Info": {"Transit Time(ms)": 1},
          "Communication Bandwidth Info": {"HCCS": {"Transit Size(MB)": 1, "Transit Time(ms)": 1,
                                                    "Size Distribution": dist}}}
    path = tmp_path / "communication.json"
    path.write_text(json.dumps({"s": {"collective": {"hcom_allReduce__1@1": op}}}))
    err = io.StringIO()
    code = main(["calibrate", str(path), "-o", str(tmp_path / "cal.yaml")], stdout=io.StringIO(), stderr=err)
    text = err.getvalue().strip()
    assert code == 2 and len(text.splitlines()) == 1 and str(path) in text and "HCCS link" in text, text
    assert not (tmp_path / "cal.yaml").exists()
