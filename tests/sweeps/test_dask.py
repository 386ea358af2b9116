"""Sweeps on Dask: a local cluster of two worker processes, a real `dask scheduler` with two `dask worker`
processes on 127.0.0.1, and Ctrl-C. Each gives exactly the rows of the in-process run."""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from opsim.cli import main
from opsim.sweeps.results import CSV, JOURNAL, PARQUET

from .conftest import ROOT, write_sweep, without_wall

pytest.importorskip("distributed", reason="dask[distributed] is not installed (pip install opsim[test])")
pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    """Worker processes import opsim from this checkout."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def _sweep_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["sweep", *args, "--no-progress"], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_local_cluster_of_two_worker_processes(small_sweep, tmp_path, reference):
    code, out, err = _sweep_cli(str(small_sweep), "--workers", "2", "-o", str(tmp_path / "res"))
    assert code == 0, err
    assert "on a local Dask cluster of 2 worker processes" in err
    assert "8 point(s): 8 ok" in out
    table = pd.read_parquet(tmp_path / "res" / PARQUET)
    pd.testing.assert_frame_equal(without_wall(table), without_wall(reference))
    from_csv = pd.read_csv(tmp_path / "res" / CSV, index_col="point", keep_default_na=False)
    assert list(from_csv["summary.simulated_makespan_us"]) == list(reference["summary.simulated_makespan_us"])


def _stop(procs: list[subprocess.Popen]) -> None:
    """Stop each process in turn (workers before their scheduler), killing any that lingers."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)


@pytest.fixture
def dask_cluster(tmp_path):
    """`dask scheduler` and two `dask worker` processes on 127.0.0.1 (a free port chosen by the scheduler, no
    dashboard, no nanny); stopped when the test ends, whatever its outcome. Yields the scheduler address."""
    info = tmp_path / "scheduler.json"
    logs = tmp_path / "logs"
    logs.mkdir()
    dask = [sys.executable, "-m", "dask"]
    procs: list[subprocess.Popen] = []

    def start(name: str, args: list[str]) -> None:
        with open(logs / f"{name}.log", "w") as log:
            procs.append(subprocess.Popen(dask + args, env=_env(), cwd=tmp_path, stdout=log,
                                          stderr=subprocess.STDOUT))

    try:
        start("scheduler", ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                            "--scheduler-file", str(info)])
        deadline = time.monotonic() + 60
        while not info.exists() or not info.read_text().strip():
            assert procs[0].poll() is None, (logs / "scheduler.log").read_text()
            assert time.monotonic() < deadline, "the scheduler did not start"
            time.sleep(0.1)
        address = json.loads(info.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        for i in range(2):
            start(f"worker{i}", ["worker", "--scheduler-file", str(info), "--host", "127.0.0.1", "--nthreads", "1",
                                 "--no-nanny", "--no-dashboard", "--local-directory", str(tmp_path / f"w{i}")])
        from distributed import Client
        with Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=90)
        yield address
    finally:
        _stop(procs[::-1])


def test_existing_cluster_through_scheduler_option(dask_cluster, small_sweep, tmp_path, reference):
    code, out, err = _sweep_cli(str(small_sweep), "--scheduler", dask_cluster, "-o", str(tmp_path / "res"))
    assert code == 0, err
    assert f"on the Dask cluster at {dask_cluster}" in err
    table = pd.read_parquet(tmp_path / "res" / PARQUET)
    pd.testing.assert_frame_equal(without_wall(table), without_wall(reference))
    # what_if is a one-parameter sweep: the same engine, on the same cluster
    from opsim.analysis import what_if
    scenario = small_sweep.parent / "quickstart.yaml"
    remote = what_if(scenario, "env.ACLNN_CACHE_LIMIT", [1, 8], scheduler=dask_cluster)
    assert remote.attrs["executor"] == f"on the Dask cluster at {dask_cluster}"
    local = what_if(scenario, "env.ACLNN_CACHE_LIMIT", [1, 8])
    pd.testing.assert_frame_equal(without_wall(remote), without_wall(local))


def test_unreachable_scheduler_is_bad_input(small_sweep, tmp_path, monkeypatch):
    import socket

    from opsim.sweeps import engine
    monkeypatch.setattr(engine, "CONNECT_TIMEOUT", "1s")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nobody listens there
    code, _, err = _sweep_cli(str(small_sweep), "--scheduler", f"tcp://127.0.0.1:{port}", "-o", str(tmp_path / "r"))
    assert code == 2 and "cannot reach the Dask scheduler" in err and "Traceback" not in err

def test_local_cluster_that_does_not_start_is_a_one_line_error(small_sweep, tmp_path, monkeypatch):
    import distributed

    def no_cluster(*args, **kwargs):
        raise RuntimeError("Nanny failed to start.")

    monkeypatch.setattr(distributed, "LocalCluster", no_cluster)
    code, _, err = _sweep_cli(str(small_sweep), "--workers", "2", "-o", str(tmp_path / "r"))
    assert code == 2 and "Traceback" not in err
    assert "could not start a local Dask cluster of 2 worker process(es)" in err and "--workers 0" in err



def test_ctrl_c_stops_cleanly_and_keeps_finished_rows(tmp_path):
    path = write_sweep(tmp_path, """\
sweep: long
scenario: {scenario}
grid:
  env.ACLNN_CACHE_LIMIT: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
seeds: 40
""")
    out = tmp_path / "res"
    proc = subprocess.Popen([sys.executable, "-m", "opsim.cli", "sweep", str(path), "-o", str(out), "--workers", "2",
                             "--no-progress"], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (out / JOURNAL).exists() or not (out / JOURNAL).read_text():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole process group
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted;" in err and "--resume" in err
    done = [json.loads(line)["point"] for line in (out / JOURNAL).read_text().splitlines()]
    assert 0 < len(done) < 400
    assert sorted(pd.read_csv(out / CSV)["point"]) == sorted(done) == sorted(pd.read_parquet(out / PARQUET).index)
    deadline = time.monotonic() + 120  # the worker processes go too (polled: a loaded machine may take a while)
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("worker processes outlived the interrupted sweep")
