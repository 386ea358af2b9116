"""Atomic outputs: a run replaces only opsim's previous outputs (listed in the manifest), removes its stale ones,
never touches other files, and an interrupted write leaves the previous complete outputs."""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from scenario_helpers import ROOT
from opsim.cli import EXIT_BAD_INPUT, EXIT_OK, main
from opsim.outputs import MANIFEST, OutputDir, atomic_file, read_manifest, record_output

SMALL = """\
name: small
seed: {seed}
trace: {trace}
threads:
  - name: a
    program:
      - loop:
          count: {count}
          body:
            - {{op: Add, shape: [64, 64], dtype: float16}}
"""


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(map(str, argv)), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def scenario(tmp_path, seed=1, trace="true", count=3):
    path = tmp_path / f"s{seed}{trace}{count}.yaml"
    path.write_text(SMALL.format(seed=seed, trace=trace, count=count))
    return path


def snapshot(d) -> dict[str, bytes]:
    """Every file's bytes (summary.json without its wall-clock section, which differs between equal runs)."""
    out = {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}
    if "summary.json" in out:
        doc = json.loads(out["summary.json"])
        doc.pop("wall", None)
        out["summary.json"] = json.dumps(doc, sort_keys=True).encode()
    if ".opsim-manifest.json" in out:  # its hashes cover summary.json's wall-clock section
        doc = json.loads(out[".opsim-manifest.json"])
        doc.pop("hashes", None)
        out[".opsim-manifest.json"] = json.dumps(doc, sort_keys=True).encode()
    return out


def test_rerun_removes_stale_outputs_and_keeps_user_files(tmp_path):
    out = tmp_path / "out"
    assert cli("run", scenario(tmp_path), "--out", out, "--quiet")[0] == EXIT_OK
    assert {"trace.json", "op_summary.csv", "task_time.csv", "summary.json"} <= set(read_manifest(out))
    (out / "notes.txt").write_text("mine")
    assert cli("run", scenario(tmp_path, trace="false"), "--out", out, "--quiet")[0] == EXIT_OK
    names = {p.name for p in out.iterdir()}
    assert "trace.json" not in names and "op_summary.csv" not in names and "task_time.csv" not in names
    assert (out / "notes.txt").read_text() == "mine"
    assert set(read_manifest(out)) == {"scenario.yaml", "summary.json", "records.json.gz"}
    assert not [p for p in out.iterdir() if p.name.startswith(".opsim-staging")]
    code, text, err = cli("report", out)
    assert text.rstrip().endswith(f"files in {out}: records.json.gz, scenario.yaml, summary.json")


def test_user_file_with_an_output_name_is_refused_before_simulating(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "trace.json").write_text("my own trace")
    code, text, err = cli("run", scenario(tmp_path), "--out", out, "--quiet")
    assert code == EXIT_BAD_INPUT and "not written by opsim" in err
    assert (out / "trace.json").read_text() == "my own trace" and sorted(os.listdir(out)) == ["trace.json"]


@pytest.mark.parametrize("bad", ["file", "under_file"])
def test_unusable_out_is_refused_before_simulating(tmp_path, bad):
    (tmp_path / "f").write_text("x")
    target = tmp_path / "f" if bad == "file" else tmp_path / "f" / "sub"
    code, text, err = cli("run", scenario(tmp_path), "--out", target, "--quiet")
    assert code == EXIT_BAD_INPUT and "Traceback" not in err and str(tmp_path / "f") in err


def test_failure_inside_a_writer_keeps_the_previous_outputs(tmp_path, monkeypatch):
    out = tmp_path / "out"
    assert cli("run", scenario(tmp_path), "--out", out, "--quiet")[0] == EXIT_OK
    before = snapshot(out)
    import opsim.trace.chrome_trace as ct

    def broken(sim, fh):
        fh.write('{"traceEvents": [')  # a partial file, then the writer fails
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ct, "write_chrome_trace", broken)
    code, text, err = cli("run", scenario(tmp_path, seed=2), "--out", out, "--quiet")
    assert code != EXIT_OK
    assert snapshot(out) == before
    assert not [p for p in out.iterdir() if p.name.startswith(".opsim-staging")]


def test_atomic_file_keeps_the_old_content_when_the_block_fails(tmp_path):
    path = tmp_path / "f.json"
    path.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_file(path) as fh:
            fh.write("new, half written")
            raise RuntimeError("interrupted")
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["f.json"]
    with atomic_file(path) as fh:
        fh.write("new")
    assert path.read_text() == "new"


def test_output_dir_replaces_a_directory_entry_and_refuses_unsafe_names(tmp_path):
    first = OutputDir(tmp_path, ["d"])
    (first.path("d")).mkdir()
    (first.path("d") / "a").write_text("1")
    first.commit()
    second = OutputDir(tmp_path, ["d"])
    second.path("d").mkdir()
    (second.path("d") / "b").write_text("2")
    second.commit()
    assert sorted(os.listdir(tmp_path / "d")) == ["b"]
    for name in ("../x", "..", "a/b", MANIFEST):
        with pytest.raises(Exception, match="plain file or directory name"):
            OutputDir(tmp_path).path(name)
    record_output(tmp_path, "extra.bin")
    assert "extra.bin" in read_manifest(tmp_path)


def test_forged_manifest_never_removes_anything_outside(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (out / MANIFEST).write_text(json.dumps({"format": "opsim-outputs", "version": 1,
                                            "files": ["../victim.txt", "/etc/hostname"]}))
    OutputDir(out).commit()
    assert victim.read_text() == "keep"


@pytest.mark.slow
def test_sigint_at_any_moment_leaves_previous_or_new_complete_outputs(tmp_path):
    """A subprocess run is interrupted at several moments; each time the directory holds exactly the first
    run's files or exactly the second run's, each complete."""
    first, second = scenario(tmp_path, seed=1, count=400), scenario(tmp_path, seed=2, count=400)
    ref_b = tmp_path / "ref_b"
    assert cli("run", second, "--out", ref_b, "--quiet")[0] == EXIT_OK
    want_b = snapshot(ref_b)
    out = tmp_path / "out"
    assert cli("run", first, "--out", out, "--quiet")[0] == EXIT_OK
    want_a = snapshot(out)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    seen = set()
    for delay in (0.2, 0.8, 1.5, 2.5, 4.0):
        proc = subprocess.Popen([sys.executable, "-m", "opsim.cli", "run", str(second), "--out", str(out),
                                 "--quiet", "--no-progress"], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)  # (a SIGINT during interpreter start-up may print a traceback: no matter)
        got = snapshot(out)
        assert got in (want_a, want_b), sorted(got)
        seen.add("old" if got == want_a else "new")
        if got == want_b:  # back to the first run's outputs for the next attempt
            assert cli("run", first, "--out", out, "--quiet")[0] == EXIT_OK
    assert "old" in seen, seen
