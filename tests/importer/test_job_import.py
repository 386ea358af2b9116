"""`opsim import FOLDER` on a job's rank folders: one multi-rank scenario, refused when the folders disagree or
are hostile (exit 2, one line naming the folder and the field)."""
from __future__ import annotations

import io
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from opsim.cli import main
from opsim.importer.job_scenario import fill_ranks, nearest_rank
from opsim.importer.report import ImportReport
from opsim.calibration.comm_read import CommOp

DATA = Path(__file__).resolve().parents[1] / "data" / "real"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "real-profiles" / "alexnet-910b" / "text"
needs_shared = pytest.mark.skipif(not (SHARED / "level1").is_dir(), reason="the shared AlexNet job is not here")

COMM = {"step50": {"p2p": {}, "collective": {"hcom_allReduce__586_0_1@17522688603477080586": {
    "Communication Time Info": {"Start Timestamp(us)": 1.0, "Elapse Time(ms)": 1.0, "Transit Time(ms)": 0.5,
                                "Wait Time(ms)": 0.1, "Synchronization Time(ms)": 0.1, "Idle Time(ms)": 0.4}}}}}
MATRIX = {"step50": {"p2p": {}, "collective": {"allreduce-top1@17522688603477080586": {
    f"0-{r}": {"Transport Type": "HCCS"} for r in range(8)}}}}


def _rank(root: Path, rank: int, *, level: str = "Level1", step: str = "50", soc_table: str | None = None,
          files: tuple[str, ...] = ("communication.json", "communication_matrix.json", "step_trace_time.csv",
                                    "trace_view.json"), folder: str | None = None) -> Path:
    d = root / (folder or f"rank{rank}_ascend_pt")
    out = d / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (d / f"profiler_info_{rank}.json").write_text(json.dumps(
        {"config": {"experimental_config": {"_profiler_level": level}}, "rank_id": rank}))
    body = {"communication.json": json.dumps(COMM), "communication_matrix.json": json.dumps(MATRIX),
            "step_trace_time.csv": f"Step,Computing\n{step},1.0\n", "trace_view.json": "[]"}
    for name in files:
        (out / name).write_text(body[name])
    if soc_table:
        shutil.copy(DATA / soc_table, out / "kernel_details.csv")
    return d


def _import(folder: Path, tmp_path: Path) -> tuple[int, str]:
    err = io.StringIO()
    code = main(["import", str(folder), "-o", str(tmp_path / "job.yaml")], stdout=io.StringIO(), stderr=err)
    return code, err.getvalue()


@pytest.mark.parametrize("case, field", [
    ("duplicate", "rank_id"), ("level", "profiler level"), ("step", "Step"), ("soc", "SoC"),
    ("lacking", "ASCEND_PROFILER_OUTPUT/communication_matrix.json"), ("info", "rank_id")])
def test_inconsistent_rank_folders_exit_2_naming_folder_and_field(tmp_path, case, field):
    root = tmp_path / "job"
    soc = "kernel_details_910b_alexnet_level1_rank0.csv" if case == "soc" else None
    _rank(root, 0, soc_table=soc)
    if case == "duplicate":
        _rank(root, 0, folder="other_ascend_pt")
    elif case == "level":
        _rank(root, 1, level="Level2")
    elif case == "step":
        _rank(root, 1, step="51")
    elif case == "soc":
        _rank(root, 1, soc_table="kernel_details_910b_training.csv")
    elif case == "lacking":
        _rank(root, 1, files=("communication.json", "step_trace_time.csv", "trace_view.json"))
    else:  # profiler_info_1.json that says rank 3
        d = _rank(root, 1)
        (d / "profiler_info_1.json").write_text(json.dumps({"rank_id": 3}))
    code, text = _import(root, tmp_path)
    assert code == 2 and len(text.strip().splitlines()) == 1, text
    assert "_ascend_pt" in text and f"field {field}" in text, text
    assert not (tmp_path / "job.yaml").exists()


def _comm(rank: int, waits: list[float]) -> list[CommOp]:
    return [CommOp("communication.json", "step50", "collective", f"hcom_allReduce__586_{k}_1", 10.0, w, 50.0, {},
                   group_hash="1") for k, w in enumerate(waits)]


def test_missing_ranks_behave_like_the_rank_that_waited_least_plus_its_recorded_waits():
    comm = {0: _comm(0, [500.0, 30.0]), 1: _comm(1, [5.0, 3.0])}
    assert nearest_rank(comm) == 1
    threads = {0: [{"name": "t", "program": []}],
               1: [{"name": "t", "program": [{"loop": {"count": 1, "body": [
                   {"collective": "allreduce", "idle_us": 50.0, "_op": "hcom_allReduce__586_0_1"},
                   {"collective": "allreduce", "idle_us": 50.0, "_op": "hcom_allReduce__586_1_1"}]}}]}]}
    report = ImportReport()
    entries = fill_ranks(4, [0, 1], comm, threads, report)
    body = entries[2]["threads"][0]["program"][0]["loop"]["body"]
    assert [s["idle_us"] for s in body] == [55.0, 53.0]  # ready when rank 1's profile says the last one was
    assert entries[3] == {"like": 2} and threads[1][0]["program"][0]["loop"]["body"][0]["idle_us"] == 50.0
    assert [f["rank"] for f in report.figures["filled_ranks"]] == [2, 3]
    assert all(f["like"] == 1 and "nearest in arrival" in f["why"] for f in report.figures["filled_ranks"])


def test_no_lateness_fills_with_plain_like():
    comm = {0: _comm(0, [0.0]), 1: _comm(1, [0.0])}
    assert fill_ranks(3, [0, 1], comm, {0: [], 1: []}, ImportReport()) == {2: {"like": 0}}


# ---- hostile input: bounded time, exit 2, one line ----------------------------------------------------------

def test_ten_thousand_rank_folders_are_refused_quickly(tmp_path):
    root = tmp_path / "job"
    root.mkdir()
    for i in range(10_000):
        (root / f"r{i}_ascend_pt").mkdir()
    t0 = time.perf_counter()
    code, text = _import(root, tmp_path)
    assert code == 2 and "more than 1024" in text and len(text.strip().splitlines()) == 1
    assert time.perf_counter() - t0 < 5


@pytest.mark.parametrize("where", ["rank folder", "file"])
def test_symlink_loops_exit_2_naming_them(tmp_path, where):
    root = tmp_path / "job"
    _rank(root, 0)
    d = _rank(root, 1)
    os.symlink(".", d / "ASCEND_PROFILER_OUTPUT" / "again")  # a directory loop the import never walks
    if where == "rank folder":
        os.symlink("loop_ascend_pt", root / "loop_ascend_pt")  # a link to itself
    else:
        (d / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json").unlink()
        os.symlink("communication_matrix.json", d / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json")
    code, text = _import(root, tmp_path)
    named = "loop_ascend_pt" if where == "rank folder" else "communication_matrix.json"
    assert code == 2 and named in text and len(text.strip().splitlines()) == 1, text


def test_a_nul_byte_in_the_folder_name_exits_2(tmp_path):
    code, text = _import(Path(str(tmp_path) + "/a\0b"), tmp_path)
    assert code == 2 and len(text.strip().splitlines()) == 1


@pytest.mark.parametrize("content, expected", [
    ("/dev/zero", "not a regular file"), ("[" * 100_000 + "]" * 100_000, "nested too deep"),
    ('{"step50": []}', "field step50: expected an object"),
    ('{"step50": {"collective": {"x@1": {"Communication Time Info": {"Transit Time(ms)": "fast"}}}}}',
     "field step50.collective.x@1.Communication Time Info.Transit Time(ms): expected a non-negative number"),
    ("\xff\xfe", "not valid JSON")])
def test_a_damaged_communication_json_exits_2_naming_file_and_field(tmp_path, content, expected):
    root = tmp_path / "job"
    _rank(root, 0)
    comm = _rank(root, 1) / "ASCEND_PROFILER_OUTPUT" / "communication.json"
    comm.unlink()
    if content == "/dev/zero":
        os.symlink("/dev/zero", comm)
    else:
        comm.write_bytes(content.encode("latin-1"))
    t0 = time.perf_counter()
    code, text = _import(root, tmp_path)
    assert code == 2 and "communication.json" in text and expected in text, text
    assert len(text.strip().splitlines()) == 1 and time.perf_counter() - t0 < 5


def test_a_communication_matrix_with_a_wrong_link_key_exits_2(tmp_path):
    root = tmp_path / "job"
    _rank(root, 0)
    m = _rank(root, 1) / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json"
    m.write_text(json.dumps({"s": {"collective": {"g@1": {"0-99999999999": {}}}}}))
    code, text = _import(root, tmp_path)
    assert code == 2 and "field s.collective.g@1.0-99999999999" in text and "communication_matrix.json" in text, text


# ---- the shared 2-of-8-rank AlexNet job ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def level1():
    from opsim.importer import import_job
    return import_job(SHARED / "level1")


def _collectives(program: list, out: list) -> list:
    for s in program:
        if "collective" in s:
            out.append(s)
        if "loop" in s:
            _collectives(s["loop"]["body"], out)
    return out


def _steps(threads: list) -> list:
    return [c for th in threads for c in _collectives(th["program"], [])]


@needs_shared
def test_one_scenario_for_the_job_with_groups_from_the_matrix(level1):
    sc = level1.scenario
    assert sc["name"] == "level1" and sc["cluster"] == {"size": 8, "transit": "recorded"}
    assert sc["groups"] == [{"name": "world", "ranks": "all"}]
    ranks = sc["ranks"]
    assert len(ranks) == 8 and ranks[0] == {} and "threads" in ranks[1] and "threads" in ranks[2]
    assert ranks[3:] == [{"like": 2}] * 5
    filled = level1.report.figures["filled_ranks"]
    assert [f["rank"] for f in filled] == [2, 3, 4, 5, 6, 7] and {f["like"] for f in filled} == {1}
    assert "rank 7 filled like rank 1" in "\n".join(level1.report.summary_lines())


@needs_shared
def test_each_hccl_op_is_a_collective_with_its_recorded_times(level1):
    sc = level1.scenario
    r0 = _steps(sc["threads"])
    assert [c["bytes"] for c in r0] == [4097000 * 4, 16781312 * 4, 37752832 * 4, 2469696 * 4]
    assert r0[0] == {"collective": "allreduce", "group": "world", "bytes": 16388000, "dtype": "float32",
                     "stream": "stream_4", "name": "hcom_allReduce_", "transit_us": 239.185, "idle_us": 73203.703}
    r1 = _steps(sc["ranks"][1]["threads"])
    assert [c["transit_us"] for c in r1] == [245.225, 1302.306, 2152.643, 159.503]
    # the sub-tasks are modelled by the collective, not replayed on their own
    text = json.dumps(sc)
    leftovers = [w for w in ('"kind": "communication"', "Notify Wait", '"_op"') if w in text]
    assert leftovers == []


@needs_shared
def test_the_written_job_validates(level1, tmp_path):
    from opsim.importer import write_import
    from opsim.scenario.loader import validate
    res = write_import(level1, tmp_path / "job.yaml")
    cfg = validate(res.scenario_path)
    assert cfg.cluster.size == 8


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(size=st.integers(1, 16), data=st.data())
def test_every_missing_rank_leads_to_threads_and_is_never_earlier_than_its_model(size, data):
    observed = sorted(data.draw(st.sets(st.integers(0, size - 1), min_size=1, max_size=min(size, 4))))
    waits = {r: data.draw(st.lists(st.floats(0, 1e5), min_size=1, max_size=3)) for r in observed}
    n = max(len(w) for w in waits.values())
    comm = {r: _comm(r, w + [0.0] * (n - len(w))) for r, w in waits.items()}
    prog = [{"collective": "allreduce", "idle_us": 50.0, "_op": f"hcom_allReduce__586_{k}_1"} for k in range(n)]
    threads = {r: [{"name": "t", "program": [dict(s) for s in prog]}] for r in observed}
    entries = fill_ranks(size, observed, comm, threads, ImportReport())
    assert sorted(entries) == [r for r in range(size) if r not in observed]
    for r, e in entries.items():
        seen = {r}
        while "like" in e and e["like"] not in observed:  # a `like` chain ends at a rank with threads
            assert e["like"] not in seen
            seen.add(e["like"])
            e = entries[e["like"]]
        for step in (e.get("threads") or [{"program": prog}])[0]["program"]:
            assert step["idle_us"] >= 50.0


def test_a_missing_rank_of_a_group_no_folder_holds_is_refused():
    comm = {0: _comm(0, [1.0]), 1: _comm(1, [1.0])}
    groups = {0: frozenset({"a"}), 1: frozenset({"a"}), 2: frozenset({"b"})}
    with pytest.raises(Exception, match="rank 2 is in group"):
        fill_ranks(3, [0, 1], comm, {0: [], 1: []}, ImportReport(), groups)


@pytest.mark.parametrize("args, field", [
    ({"data_type": "FP32", "count": "many"}, "'count'"), ({"data_type": "FP32", "count": -1}, "'count'"),
    ({"data_type": "FP32", "count": 2 ** 60}, "'count'"), ({"data_type": "QUBIT", "count": 4}, "'data_type'"),
    ({"count": 4}, "'data_type'")])
def test_an_hccl_op_of_wrong_types_is_refused_naming_the_field(args, field):
    from opsim.errors import ProfileFormatError
    from opsim.importer.collectives import read_hccl_ops
    from opsim.ingest import TraceEvent, TraceView
    view = TraceView(Path("trace_view.json"), [TraceEvent("hcom_allReduce__586_0_1", 9, 0, 0, 10, args=args)], [],
                     {9: "HCCL"}, {})
    with pytest.raises(ProfileFormatError, match=field):
        read_hccl_ops(view)


def test_hccl_ops_give_op_bytes_and_dtype():
    from opsim.importer.collectives import read_hccl_ops
    from opsim.ingest import TraceEvent, TraceView
    view = TraceView(Path("t.json"), [TraceEvent("hcom_allGather__12_3_1", 9, 0, 5, 10,
                                                 args={"data_type": "BF16", "count": 8})], [], {9: "HCCL"}, {})
    (op,) = read_hccl_ops(view)
    assert (op.op, op.op_type, op.dtype, op.nbytes, op.hash3) == ("allgather", "hcom_allGather_", "bf16", 16, "12")


@pytest.mark.parametrize("where", ["folder", "matrix"])
def test_a_rank_beyond_what_a_scenario_holds_is_refused_before_ranks_are_built(tmp_path, where):
    """Rank 9,999,999 (a profiler_info file) or 999,999,999 (a matrix link): was a list of every missing rank up
    to it (22 s and 518 MB for the first, a hang for the second); now one line naming the file and field."""
    root = tmp_path / "job"
    _rank(root, 0)
    if where == "folder":
        _rank(root, 9_999_999)
    else:
        m = _rank(root, 1) / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json"
        m.write_text(json.dumps({"s": {"collective": {"g@1": {"1-999999999": {}}}}}))
    t0 = time.perf_counter()
    code, text = _import(root, tmp_path)
    assert code == 2 and len(text.strip().splitlines()) == 1 and time.perf_counter() - t0 < 5, text
    assert "beyond the 1024 ranks" in text and ("rank_id" in text if where == "folder" else
                                                "rank1_ascend_pt/ASCEND_PROFILER_OUTPUT/communication_matrix.json" in text)


# ---- `opsim import RANK_FOLDER --job`: one rank's profile as a rank of its job, as a job folder holding only
# that rank would be; its HCCL ops become collectives, so the replay writes op-level communication (the
# collectives' rows, communication.json) where a plain single-rank import replays only the recorded sub-tasks.


def _import_args(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["import", *args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("case", ["job folder", "no output dir", "no communication", "nul", "missing"])
def test_job_needs_one_rank_folder_with_communication_files(tmp_path, case):
    if case == "job folder":
        _rank(tmp_path / "job", 0)
        target, expected = tmp_path / "job", "not a rank's *_ascend_pt folder"
    elif case == "no output dir":
        (tmp_path / "rank0_ascend_pt").mkdir()
        target, expected = tmp_path / "rank0_ascend_pt", "not a rank's *_ascend_pt folder"
    elif case == "no communication":
        target = _rank(tmp_path, 0, files=("step_trace_time.csv", "trace_view.json"))
        expected = "communication.json: missing; --job needs the rank's communication files"
    elif case == "nul":
        target, expected = "a\0b_ascend_pt", "NUL byte"
    else:
        target, expected = tmp_path / "nothing_ascend_pt", "not a rank's *_ascend_pt folder"
    code, out, err = _import_args([str(target), "--job", "-o", str(tmp_path / "s.yaml")])
    assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "s.yaml").exists()


def test_a_rank_folder_given_by_its_output_dir_is_the_rank(tmp_path):
    from opsim.importer.job import rank_folder
    d = _rank(tmp_path, 3)
    assert rank_folder(d / "ASCEND_PROFILER_OUTPUT") == d == rank_folder(d)


@needs_shared
def test_one_rank_as_its_job_equals_a_job_folder_holding_it_and_writes_op_level_communication(tmp_path):
    rank0 = SHARED / "level1" / "rank0_ascend_pt"
    code, plain_out, _ = _import_args([str(rank0), "-o", str(tmp_path / "plain.yaml")])
    assert code == 0 and "'opsim import --job' replays its HCCL ops as collectives" in plain_out
    code, out, err = _import_args([str(rank0), "--job", "-o", str(tmp_path / "one.yaml")])
    assert code == 0, err
    assert "job: 1 observed rank(s) [0] of 8" in out and "--job" not in out
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / rank0.name).symlink_to(rank0)
    assert _import_args([str(folder), "-o", str(tmp_path / "folder.yaml")])[0] == 0
    import yaml

    def scenario(name: str) -> dict:
        data = yaml.safe_load((tmp_path / name).read_text())
        return {k: v for k, v in data.items() if k not in ("name", "description", "calibration")}
    assert scenario("one.yaml") == scenario("folder.yaml")
    code = main(["run", str(tmp_path / "one.yaml"), "--out", str(tmp_path / "out"), "--profiler-output", "text",
                 "--quiet", "--no-progress"], stdout=io.StringIO(), stderr=io.StringIO())
    assert code == 0
    comm = next((tmp_path / "out").glob("*rank0*_ascend_pt")) / "ASCEND_PROFILER_OUTPUT" / "communication.json"
    ops = [k for step in json.loads(comm.read_text()).values() for k in step["collective"] if k != "Total Op Info"]
    assert len(ops) == 4 and all(k.startswith("hcom_allReduce_") for k in ops)
