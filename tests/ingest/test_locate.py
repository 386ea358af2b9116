"""locate_profile: torch_npu and msprof layouts, single files, and errors."""
from __future__ import annotations

import pytest

from opsim.errors import ProfileFormatError
from opsim.ingest import locate_profile


def test_ascend_pt_layout(tmp_path):
    root = tmp_path / "host_123_ascend_pt"
    out = root / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "kernel_details.csv").write_text("x")
    (out / "trace_view.json").write_text("[]")
    found = locate_profile(root)
    assert found.kernel_details == out / "kernel_details.csv" and found.trace_view == out / "trace_view.json"
    assert locate_profile(out).kernel_details == out / "kernel_details.csv"
    assert found.kernel_sources == (out / "kernel_details.csv",)


def test_msprof_layout(tmp_path):
    root = tmp_path / "x_ascend_pt"
    d = root / "PROF_000001_abc" / "mindstudio_profiler_output"
    d.mkdir(parents=True)
    (d / "op_summary_20240101.csv").write_text("x")
    found = locate_profile(root)
    assert found.kernel_details is None and found.op_summary == (d / "op_summary_20240101.csv",)
    assert found.kernel_sources == found.op_summary
    assert locate_profile(d.parent).op_summary == found.op_summary


@pytest.mark.parametrize("name, attr", [("kernel_details.csv", "kernel_details"), ("trace_view.json", "trace_view"),
                                        ("op_summary_1.csv", "op_summary")])
def test_single_files(tmp_path, name, attr):
    p = tmp_path / name
    p.write_text("x")
    found = getattr(locate_profile(p), attr)
    assert found == p or found == (p,)


def test_errors(tmp_path):
    with pytest.raises(ProfileFormatError, match="no such file"):
        locate_profile(tmp_path / "missing")
    with pytest.raises(ProfileFormatError, match="no kernel_details.csv"):
        locate_profile(tmp_path)
    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(ProfileFormatError, match="not a profiler file"):
        locate_profile(tmp_path / "a.txt")


def test_msprof_directory_finds_its_timeline_but_not_slices(tmp_path):
    out = tmp_path / "PROF_000001_20240101_abc" / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    (out / "op_summary_20240101.csv").write_text("x\n")
    (out / "msprof_slice_0_20240101000000.json").write_text("[]")
    found = locate_profile(tmp_path)
    assert found.trace_view is None and len(found.op_summary) == 1
    (out / "msprof_20240101000000.json").write_text("[]")
    assert locate_profile(tmp_path).trace_view == out / "msprof_20240101000000.json"
