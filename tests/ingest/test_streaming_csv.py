"""The streaming CSV readers (api_statistic.csv, op_summary_*.csv / kernel_details.csv) and locate_profiles:
real files, the same rows as the whole-file reader, and hostile input refused naming file, row and column."""
from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from opsim.cli import EXIT_BAD_INPUT, main
from opsim.errors import ProfileFormatError
from opsim.ingest import iter_api_statistic, iter_op_summary, locate_profiles, read_kernels
from opsim.ingest.csv_stream import MAX_LINE_BYTES

DATA = Path(__file__).resolve().parents[1] / "data"
STATS = DATA / "real" / "api_statistic_alexnet_rank0.csv"
HEAD = "Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance"


def _stats(tmp_path: Path, *rows: str, header: str = HEAD) -> Path:
    p = tmp_path / "api_statistic.csv"
    p.write_text("\n".join((header,) + rows) + "\n", encoding="utf-8")
    return p


def test_real_api_statistic():
    rows = list(iter_api_statistic(STATS))
    assert len(rows) == 57
    divs = {r.api_name: r for r in rows if r.api == "aclnnDivs"}
    assert divs["aclnnDivs"].kind == "phase2" and divs["aclnnDivs"].count == 2
    assert divs["aclnnDivs"].avg_us == 60.125 and divs["aclnnDivsGetWorkspaceSize"].kind == "phase1"
    assert sum(r.is_aclnn for r in rows) == 32  # aclnn* rows of the file (grep -c ",aclnn")


def test_api_statistic_messy_cells(tmp_path):
    # a BOM, CRLF, an extra column, quoted cells, N/A, a missing count (skipped), a blank record
    p = tmp_path / "api_statistic.csv"
    p.write_text("\ufeffLevel,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance,Extra\r\n"
                 "acl,\"aclnnAdd\",N/A,3,\"5.5\",,,,x\r\nacl,aclnnMul,1,,2,1,1,0,\r\n,,,,,,,,\r\n"
                 "node,launch,1,1,1,1,1,-0.5,\r\n", encoding="utf-8")
    skipped: dict[str, int] = {}
    rows = list(iter_api_statistic(p, skipped))
    assert [(r.api_name, r.count, r.avg_us, r.time_us) for r in rows] == [("aclnnAdd", 3, 5.5, None),
                                                                          ("launch", 1, 1.0, 1.0)]
    assert skipped == {"no count or mean": 1} and rows[1].variance == -0.5


@pytest.mark.parametrize("cell, column, what", [
    ("x", "Count", "not a whole number"), ("1.5", "Count", "not a whole number"), ("-1", "Count", "not a whole"),
    ("nan", "Avg(us)", "not a number"), ("inf", "Avg(us)", "not a number"), ("1e400", "Avg(us)", "not a number"),
    ("9" * 400, "Time(us)", "not a number"), ("-3", "Min(us)", "not a number"),
])
def test_api_statistic_bad_cells_name_row_and_column(tmp_path, cell, column, what):
    cells = {"Level": "acl", "API Name": "aclnnAdd", "Time(us)": "1", "Count": "1", "Avg(us)": "1",
             "Min(us)": "1", "Max(us)": "1", "Variance": "0"}
    cells[column] = cell
    p = _stats(tmp_path, ",".join(cells.values()))
    with pytest.raises(ProfileFormatError, match=rf"api_statistic\.csv: row 2, column '{re.escape(column)}': {what}"):
        list(iter_api_statistic(p))


@pytest.mark.parametrize("header, missing", [("Level,Time(us),Count,Avg(us)", "API Name"),
                                             ("Level,API Name,Time(us)", "Count")])
def test_api_statistic_missing_column(tmp_path, header, missing):
    with pytest.raises(ProfileFormatError, match=rf"row 1: missing column\(s\) '{missing}'"):
        list(iter_api_statistic(_stats(tmp_path, "acl,x", header=header)))


def _hostile(tmp_path: Path) -> list[tuple[Path, str]]:
    big = tmp_path / "oneline.csv"
    with open(big, "wb") as f:
        f.write(b"Level,API Name," + b"x" * (MAX_LINE_BYTES + 10))
    bad_utf8 = tmp_path / "latin1.csv"
    bad_utf8.write_bytes(HEAD.encode() + b"\nacl,aclnn\xe9,1,1,1,1,1,0\n")
    unclosed = tmp_path / "quote.csv"
    unclosed.write_text(HEAD + '\nacl,"aclnnAdd,1,1,1,1,1,0\n', encoding="utf-8")
    nul = tmp_path / "nul.csv"
    nul.write_bytes(b"\x00" * 4096)
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    import os
    import stat
    os.mkfifo(tmp_path / "fifo.csv")
    devices = [(Path("/dev/zero"), "not a regular file")] if stat.S_ISCHR(os.stat("/dev/zero").st_mode) else []
    return devices + [(tmp_path / "fifo.csv", "not a regular file"), (tmp_path, "is a directory"),
            (Path(str(tmp_path / "a\x00b.csv")), "NUL byte"), (tmp_path / "none.csv", "no such file"),
            (big, "line 1: longer than"), (bad_utf8, "line 2, byte 72: not UTF-8|row 1: missing column"),
            (unclosed, "line 2: .*never closed|row 1: missing column"), (nul, "missing column|readable CSV"),
            (empty, "empty file")]


def test_hostile_files_refused_by_every_streaming_reader(tmp_path):
    """api_statistic.csv, op_summary and the kernel table (read_kernels, the fit's and the importer's reader)
    share one CSV streamer (opsim.ingest.csv_stream): the same refusals, in the same words."""
    for path, match in _hostile(tmp_path):
        for reader in (iter_api_statistic, iter_op_summary, read_kernels):
            with pytest.raises(ProfileFormatError, match=match) as info:
                list(reader(path))
            assert "\n" not in str(info.value)


def test_op_summary_stream_gives_read_kernels_rows():
    for name in ("formats/op_summary_0_1_1.csv", "real/kernel_details_910b_training.csv",
                 "real/kernel_details_910b_matmul.csv", "formats/kernel_details_pmu_multistep_crlf.csv"):
        skipped: dict[str, int] = {}
        table = read_kernels(DATA / name)
        assert list(iter_op_summary(DATA / name, skipped)) == table.rows and skipped == table.skipped


def test_op_summary_bad_cell_names_row_and_column(tmp_path):
    src = (DATA / "formats" / "op_summary_0_1_1.csv").read_text(encoding="utf-8-sig").splitlines()
    src[3] = src[3].replace(",20,40,", ",twenty,40,")
    p = tmp_path / "op_summary_0_1_1.csv"
    p.write_text("\n".join(src) + "\n", encoding="utf-8")
    with pytest.raises(ProfileFormatError, match=r"op_summary_0_1_1\.csv: row 4, column 'Block Dim'"):
        list(iter_op_summary(p))


def test_streaming_csv_bounded_memory(tmp_path):
    """Peak Python memory reading 500 vs 5000 rows is the same (benchmarks/readers.py: up to 1M rows)."""
    import tracemalloc
    row = (DATA / "formats" / "op_summary_0_1_1.csv").read_text(encoding="utf-8-sig").splitlines()
    peaks = []
    for n in (500, 5_000):
        p = tmp_path / f"op_summary_{n}.csv"
        p.write_text("\n".join([row[0]] + [row[1]] * n) + "\n", encoding="utf-8")
        tracemalloc.start()
        assert sum(1 for _ in iter_op_summary(p)) == n
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < 1.5 * peaks[0] + (256 << 10), peaks


def test_locate_profiles_reads_every_ascend_pt_below_a_folder(tmp_path):
    for rank in (0, 1):
        out = tmp_path / "run" / "text" / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        out.mkdir(parents=True)
        (out / "api_statistic.csv").write_text(HEAD + "\n")
        (out / "kernel_details.csv").write_text("x")
    db = tmp_path / "run" / "db" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    db.mkdir(parents=True)
    (db / "ascend_pytorch_profiler_0.db").write_bytes(b"")
    (db / "analysis.db").write_bytes(b"")
    (tmp_path / "run" / "loop").symlink_to(tmp_path / "run")  # a link back up is not followed
    found = locate_profiles(tmp_path / "run")
    assert [f.root.name for f in found] == ["rank0_ascend_pt", "rank0_ascend_pt", "rank1_ascend_pt"]
    assert found[0].db == db / "ascend_pytorch_profiler_0.db" and found[0].kernel_sources == (found[0].db,)
    assert found[1].api_statistic is not None and found[1].kernel_details is not None
    assert locate_profiles(found[1].root) == [found[1]]
    (tmp_path / "nothing").mkdir()
    with pytest.raises(ProfileFormatError, match="no kernel_details.csv"):
        locate_profiles(tmp_path / "nothing")


def test_calibrate_a_folder_of_real_profiles_and_an_api_statistic(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    code = main(["calibrate", str(STATS), "-o", str(tmp_path / "c.yaml")], stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    from opsim.calibration import Calibration
    cal = Calibration.load(tmp_path / "c.yaml")
    assert cal.host_api("aclnnDivs").phase2_us() == 60.125 and cal.host_api("aclnnDivs").phase1_us() == 36.15
    bad = _stats(tmp_path, "acl,aclnnAdd,1,many,1,1,1,0")
    code = main(["calibrate", str(bad), "-o", str(tmp_path / "d.yaml")], stdout=out, stderr=(err := io.StringIO()))
    assert code == EXIT_BAD_INPUT and err.getvalue().count("\n") == 1 and "row 2, column 'Count'" in err.getvalue()


def test_the_kernel_table_reader_words_its_errors_as_the_other_csv_readers(tmp_path):
    """The kernel table had its own streamer with other wording ("not a readable CSV (line 2: ...)", "line 2 is
    longer than 1 MiB"); now every CSV error reads `file: line N: what; fix`."""
    from opsim.ingest import csv_stream, kernels
    assert not hasattr(kernels, "iter_records") and not hasattr(kernels, "MAX_LINE_BYTES")
    head = (DATA / "real" / "kernel_details_910b_matmul.csv").read_text(encoding="utf-8-sig").splitlines()[0]
    unclosed = tmp_path / "kernel_details.csv"
    unclosed.write_text(head + '\n"x,1\n', encoding="utf-8")
    with pytest.raises(ProfileFormatError, match=r"kernel_details\.csv: line 2: a quoted cell is never closed"):
        read_kernels(unclosed)
    long = tmp_path / "long.csv"
    long.write_bytes(head.encode() + b"\n" + b"x" * (csv_stream.MAX_LINE_BYTES + 1))
    with pytest.raises(ProfileFormatError, match=r"long\.csv: line 2: longer than 1 MiB; this is not a "
                                                 r"kernel_details\.csv or op_summary_\*\.csv"):
        read_kernels(long)


def test_a_crlf_kernel_table_keeps_its_newlines_and_rows():
    table = read_kernels(DATA / "formats" / "kernel_details_pmu_multistep_crlf.csv")
    assert table.newline == "\r\n" and table.raw_rows and not any(r.endswith(("\r", "\n")) for r in table.raw_rows)
