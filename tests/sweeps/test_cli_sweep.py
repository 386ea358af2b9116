"""`opsim sweep` and `opsim validate` on sweep files: one-line errors with exit 2, a progress bar, exit 1 when a
point could not run."""
from __future__ import annotations

import io

import pandas as pd
import pytest

from opsim.cli import main
from opsim.sweeps.results import PARQUET

from .conftest import SCENARIOS, write_sweep, without_wall


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(args), stdout=out, stderr=err), out.getvalue(), err.getvalue()


def test_validate_accepts_sweep_files(small_sweep):
    code, out, err = _cli("validate", str(small_sweep))
    assert code == 0, err
    assert out == (f"{small_sweep}: ok (sweep small: 8 point(s) over env.ACLNN_CACHE_LIMIT, soc x 2 seed(s) on "
                   "quickstart.yaml)\n")
    code, out, _ = _cli("validate", str(SCENARIOS / "quickstart.yaml"))  # scenarios as before
    assert code == 0 and "ok (quickstart:" in out


def test_validate_names_the_problem_in_one_line(tmp_path):
    path = write_sweep(tmp_path, "sweep: s\nscenario: {scenario}\ngrid:\n  soc: [Ascend999]\n")
    code, out, err = _cli("validate", str(path))
    assert code == 2 and out == ""
    assert err.startswith(f"opsim: error: {path}:4: grid.soc: soc='Ascend999' makes the scenario invalid")
    assert "Traceback" not in err
    code, _, err = _cli("validate", str(path), "--set", "seed=1")
    assert code == 2 and "is a sweep file; --set applies to scenarios" in err


def test_sweep_in_process_with_progress_bar(small_sweep, tmp_path, reference):
    out_dir = tmp_path / "res"
    err = io.StringIO()
    out = io.StringIO()
    code = main(["sweep", str(small_sweep), "--workers", "0", "-o", str(out_dir)], stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    assert "8/8" in err.getvalue() and "point" in err.getvalue()  # tqdm's bar
    assert f"results: {out_dir / 'results.csv'}, {out_dir / PARQUET}" in out.getvalue()
    pd.testing.assert_frame_equal(without_wall(pd.read_parquet(out_dir / PARQUET)), without_wall(reference))
    code, _, err2 = _cli("sweep", str(small_sweep), "--workers", "0", "-o", str(out_dir), "--no-progress")
    assert code == 2 and "already holds sweep results" in err2
    code, out2, err2 = _cli("sweep", str(small_sweep), "--workers", "0", "-o", str(out_dir), "--resume",
                            "--no-progress")
    assert code == 0 and "8 already done, 0 to run" in err2 and "8 point(s): 8 ok" in out2


def test_point_that_cannot_run_gives_exit_1(tmp_path):
    path = write_sweep(tmp_path, """\
sweep: partly
scenario: {scenario}
overrides: {trace: false}
grid:
  seed: [1, 2]
figures: [summary.op_calls, summary.threads.no_such_thread]
""")  # a named section's names are known only once a point ran (a field no summary has is refused by validate)
    code, out, err = _cli("sweep", str(path), "--workers", "0", "-o", str(tmp_path / "r"), "--no-progress")
    assert code == 1
    assert "0 ok, 0 with failed calls, 2 could not run" in out
    assert "summary has no field 'no_such_thread'" in err


def test_scheduler_and_workers_together_is_bad_usage(small_sweep):
    code, _, err = _cli("sweep", str(small_sweep), "--workers", "2", "--scheduler", "tcp://127.0.0.1:1")
    assert code == 2 and "drop one of the two" in err


def test_missing_dask_names_the_extra(small_sweep, monkeypatch, tmp_path):
    import sys
    monkeypatch.setitem(sys.modules, "distributed", None)
    code, _, err = _cli("sweep", str(small_sweep), "--workers", "2", "-o", str(tmp_path / "r"), "--no-progress")
    assert code == 2 and "pip install opsim[sweep]" in err
    assert not (tmp_path / "r").exists()  # nothing written: the same command works once dask is installed


def test_trace_figures_need_the_trace(tmp_path):
    path = write_sweep(tmp_path, """\
sweep: untraced
scenario: {scenario}
overrides: {trace: false}
grid:
  seed: [1]
figures: [makespan_us]
""")
    from opsim.sweeps import sweep
    df = sweep(path, workers=0)
    assert df.loc[0, "status"] == "failed" and "trace: false" in df.loc[0, "error"]


@pytest.mark.parametrize("name", ["aicpu_limit_x_threads", "exec_limit_x_shapes", "quickstart_socs"])
def test_bundled_sweep_validates_on_the_command_line(name):
    code, out, err = _cli("validate", str(SCENARIOS / "sweeps" / f"{name}.yaml"))
    assert code == 0 and f"sweep {name}:" in out, err


def test_sweep_takes_max_file_mib_for_the_sweep_and_its_scenario(tmp_path):
    """`opsim sweep` lacked --max-file-mib (run, validate and import had it): a sweep over a scenario above
    4 MiB (a long imported replay) could not run. Its scenario and the sweep file are read within the budget."""
    base = (SCENARIOS / "quickstart.yaml").read_text()
    big = tmp_path / "big.yaml"
    big.write_text(base + "#" + "x" * (4 << 20) + "\n")  # a comment: 4 MiB more of text, the same scenario
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"sweep: s\nscenario: {big}\ngrid:\n  seed: [1]\n")
    code, _, err = _cli("sweep", str(sweep), "-o", str(tmp_path / "out1"), "--workers", "0", "--no-progress")
    assert code == 2 and err.count("\n") == 1 and "4 MiB" in err, err
    code, out, err = _cli("validate", str(sweep), "--max-file-mib", "5")
    assert code == 0 and "ok (sweep s: 1 point(s)" in out, err
    code, out, err = _cli("sweep", str(sweep), "-o", str(tmp_path / "out2"), "--workers", "0", "--no-progress",
                          "--max-file-mib", "5")
    assert code == 0 and "1 ok" in out, err
    code, _, err = _cli("sweep", str(sweep), "--max-file-mib", "0")
    assert code == 2 and "--max-file-mib" in err
