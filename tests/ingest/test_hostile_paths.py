"""Every reader of a profiler file goes through opsim.safe_io: a FIFO (which would block forever), /dev/zero
behind a link (which never ends), a directory, a NUL byte or an over-long name are refused at once, naming the
file and what to give, whether named directly or found inside a profile directory."""
from __future__ import annotations

import io
import os
import shutil
import signal
from pathlib import Path

import pytest

from opsim.cli import EXIT_BAD_INPUT, main
from opsim.errors import ProfileFormatError

DATA = Path(__file__).resolve().parents[1] / "data"
TRACE = DATA / "formats" / "trace_view_queue_two_threads.json"
KERNELS = DATA / "real" / "kernel_details_910b_matmul.csv"


@pytest.fixture(autouse=True)
def _no_hang():
    """A reader that blocks (a FIFO opened for reading waits for a writer) fails the test instead of hanging."""
    def alarm(_s, _f):
        raise TimeoutError("blocked reading a special file")
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _hostile(tmp_path: Path, kind: str, name: str) -> Path:
    p = tmp_path / name
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "zero":
        p.symlink_to("/dev/zero")
    elif kind == "directory":
        p.mkdir()
    elif kind == "nul":
        return tmp_path / (name[:3] + "\0" + name[3:])
    elif kind == "long":
        return tmp_path / ("x" * 300 + name)
    return p


KINDS = {"fifo": "not a regular file", "zero": "not a regular file", "directory": "is a directory",
         "nul": "NUL byte", "long": "above the file system's limit"}


@pytest.mark.parametrize("kind", list(KINDS))
def test_trace_view_reader_refuses_special_files(tmp_path, kind):
    from opsim.ingest import read_trace_view
    p = _hostile(tmp_path, kind, "trace_view.json")
    with pytest.raises(ProfileFormatError, match=KINDS[kind]) as info:
        read_trace_view(p)
    assert "trace_view.json" in str(info.value)


@pytest.mark.parametrize("kind", ["fifo", "zero"])
@pytest.mark.parametrize("command", ["import", "calibrate"])
def test_a_special_trace_view_inside_a_profile_directory(tmp_path, kind, command):
    """`opsim import` / `opsim calibrate` on a profile directory whose trace_view.json is a FIFO or a link to
    /dev/zero: exit 2, one line naming the file."""
    prof = tmp_path / "p_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    prof.mkdir(parents=True)
    shutil.copy(KERNELS, prof / "kernel_details.csv")
    _hostile(prof, kind, "trace_view.json")
    err = io.StringIO()
    code = main([command, str(tmp_path / "p_ascend_pt"), "-o", str(tmp_path / "out.yaml")], stdout=io.StringIO(),
                stderr=err)
    assert code == EXIT_BAD_INPUT, err.getvalue()
    assert "trace_view.json: not a regular file" in err.getvalue()
    assert err.getvalue().count("\n") <= 2 and "Traceback" not in err.getvalue()


@pytest.mark.parametrize("kind", list(KINDS))
def test_csv_readers_refuse_special_files(tmp_path, kind):
    """api_statistic.csv and op_summary go through the streaming CSV reader; `opsim predict` names the file."""
    p = _hostile(tmp_path, kind, "api_statistic.csv")
    err = io.StringIO()
    code = main(["predict", str(p), "-o", str(tmp_path / "o.csv")], stdout=io.StringIO(), stderr=err)
    assert code == EXIT_BAD_INPUT, err.getvalue()
    assert "Traceback" not in err.getvalue()


@pytest.mark.parametrize("kind", list(KINDS))
def test_profiler_db_and_host_table_readers_refuse_special_files(tmp_path, kind):
    from opsim.ingest.csv_stream import iter_csv
    from opsim.ingest.profiler_db import iter_db_kernels
    p = _hostile(tmp_path, kind, "ascend_pytorch_profiler_0.db")
    with pytest.raises(ProfileFormatError, match=KINDS[kind]):
        list(iter_db_kernels(p, {}))
    q = _hostile(tmp_path, kind, "op_summary_0.csv")
    with pytest.raises(ProfileFormatError, match=KINDS[kind]):
        list(iter_csv(q, "op_summary.csv"))


def test_custom_aicpu_registry_on_a_fifo_is_skipped_not_blocked(tmp_path):
    """ASCEND_CUSTOM_OPP_PATH names files a scenario's environment points at: a FIFO is skipped with opbase's
    warning (the run goes on), never read."""
    from opsim.opdev.aicpu.kernel_lib import CUSTOM_JSON_FILE, _read_user_file
    base = str(tmp_path / "opp")
    target = Path(base + CUSTOM_JSON_FILE)
    target.parent.mkdir(parents=True)
    os.mkfifo(target)
    assert _read_user_file(str(target), 1 << 20, "a custom AI CPU kernel description") is None
    assert _read_user_file(str(tmp_path / "a\0b"), 1 << 20, "x") is None
    (tmp_path / "big").write_bytes(b"x" * 2048)
    assert _read_user_file(str(tmp_path / "big"), 1024, "x") is None
