"""msprof-analyze (Ascend's own profile analyser) reads simulated runs: compare, advisor and cluster.

The tool always exits 0, even when it fails, so every test checks the files it wrote and that its log has
no ``[ERROR]`` line. Each command runs as a subprocess in a temporary working directory (advisor writes
into the cwd). The expected figures are computed here from the recorder, independently of the writer.
"""
from __future__ import annotations

import csv
import glob
import json
import os
import sqlite3
import subprocess
import sys
from collections import defaultdict

import pytest

pytest.importorskip("msprof_analyze", reason="msprof-analyze is not installed (pip install opsim[test])")
openpyxl = pytest.importorskip("openpyxl", reason="openpyxl (reads the xlsx msprof-analyze writes) is not installed")

from opsim.acl import DataType, Scalar, Tensor  # noqa: E402
from opsim.ops.aicpu_ops import aclnn_sigmoid_aicpu, aclnn_sigmoid_aicpu_get_workspace_size  # noqa: E402
from opsim.ops.elementwise import aclnn_add, aclnn_add_get_workspace_size  # noqa: E402
from opsim.ops.matmul import aclnn_addmm, aclnn_addmm_get_workspace_size  # noqa: E402
from opsim.runtime import acl_rt  # noqa: E402
from opsim.runtime.host_thread import run_op  # noqa: E402
from opsim.runtime.simulation import Simulation  # noqa: E402
from opsim.trace.ascend_profiler import DEFAULT_EPOCH_US, write_profiler_output  # noqa: E402

EPOCH_NS = DEFAULT_EPOCH_US * 1000
STEPS = 2
AICPU_DTYPES = (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16)
"""Three distinct AI CPU task keys per step (the key holds dtypes, not shapes): with a cache limit of 1 two of
them are re-created on every call."""
NON_KERNEL = {"HOST_FUNC", "MEMCPY_ASYNC", "EVENT_RECORD_SQE", "EVENT_WAIT_SQE"}
_CLI = ("import sys; sys.argv[0] = 'msprof-analyze'; "
        "from msprof_analyze.cli.entrance import msprof_analyze_cli; msprof_analyze_cli()")


def simulate(aicpu_cache_limit: str = "32768", threads: int = 2) -> Simulation:
    """Threads on their own streams: Addmm (block dim 2 cube + vector kernels), Add and AI CPU Sigmoids per step."""
    sim = Simulation(soc="Ascend910B2", env={"ACLNN_AICPU_CACHE_LIMIT": aicpu_cache_limit})

    def program(th):
        stream = sim.device.create_stream()
        bias, mat1, mat2, out = Tensor([256]), Tensor([64, 128]), Tensor([128, 256]), Tensor([64, 256])
        summed = Tensor([64, 256])
        acts = [(Tensor([64, 256], dt), Tensor([64, 256], dt)) for dt in AICPU_DTYPES]
        for i in range(STEPS):
            sim.recorder.instant(th.env.now, "step", th.name, {"step": i + 1, "phase": "begin"})
            calls = [(aclnn_addmm_get_workspace_size, aclnn_addmm, (bias, mat1, mat2, Scalar(1.0), Scalar(0.5), out),
                      "aclnnAddmm"),
                     (aclnn_add_get_workspace_size, aclnn_add, (out, out, Scalar(1.0), summed), "aclnnAdd")]
            calls += [(aclnn_sigmoid_aicpu_get_workspace_size, aclnn_sigmoid_aicpu, (x, y), "aclnnSigmoidAicpu")
                      for x, y in acts]
            for gws, run, args, api in calls:
                status, _ = yield from run_op(th, gws, run, args, stream, api=api)
                assert status == 0
            yield from th.call(acl_rt.synchronize_stream, stream)
            sim.recorder.instant(th.env.now, "step", th.name, {"step": i + 1, "phase": "end"})

    for t in range(threads):
        sim.add_thread(program, f"t{t}")
    sim.run()
    return sim


def ns(t_us: float) -> int:
    return EPOCH_NS + round(t_us * 1000.0)


def kernels(sim) -> list[tuple[str, str, int, int]]:
    """(op type, task type, start ns, end ns) of every kernel the recorder holds."""
    dev = sim.recorder.records("device")
    return [(op, tt, ns(s), ns(e)) for op, tt, s, e in zip(dev["op"], dev["task_type"], dev["start"], dev["end"])
            if tt not in NON_KERNEL]


def per_op_type(sim) -> dict[str, tuple[int, int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for op, _, s, e in kernels(sim):
        out[op].append(e - s)
    return {op: (len(d), sum(d)) for op, d in out.items()}


def union_ns(intervals) -> int:
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def run_tool(args: list[str], cwd) -> str:
    proc = subprocess.run([sys.executable, "-c", _CLI, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)
    log = proc.stdout + proc.stderr
    errors = [line for line in log.splitlines() if "[ERROR]" in line]
    assert not errors, "\n".join(errors)
    return log


def sheet(path: str, name: str) -> list[tuple]:
    wb = openpyxl.load_workbook(path, read_only=True)
    assert name in wb.sheetnames, wb.sheetnames
    return [r for r in wb[name].iter_rows(values_only=True) if any(v is not None for v in r)]


# ---- compare ------------------------------------------------------------------------------------------------

def test_compare_two_cache_limits_matches_opsim_figures(tmp_path):
    # one thread, so the host time the small cache adds is on the critical path
    base_sim, cmp_sim = simulate("32768", threads=1), simulate("1", threads=1)
    base = write_profiler_output(base_sim, str(tmp_path / "base"), name="limit32768")
    comp = write_profiler_output(cmp_sim, str(tmp_path / "comp"), name="limit1")
    work = tmp_path / "work"
    work.mkdir()
    run_tool(["compare", "-d", comp, "-bp", base, "-o", str(work)], cwd=work)
    books = glob.glob(str(work / "performance_comparison_result_*.xlsx"))
    assert len(books) == 1
    book = books[0]

    # KernelCompare: per op type, calls and total duration of each side equal the recorder's
    rows = sheet(book, "KernelCompare")
    header = rows[1]
    assert header[:2] == ("Order Id", "Kernel") and header.count("Calls") == 2
    # one row per (kernel, input shapes): sum the rows of each kernel name
    got: dict = {}
    n_rows: dict = {}
    for r in rows[2:]:
        acc = got.setdefault(r[1], [0, 0.0, 0, 0.0])
        n_rows[r[1]] = n_rows.get(r[1], 0) + 1
        for i, col in enumerate((7, 3, 12, 8)):
            acc[i] += r[col] or 0
    want_base, want_cmp = per_op_type(base_sim), per_op_type(cmp_sim)
    assert set(got) == set(want_base) == {"MatMulV2", "Muls", "Add", "Sigmoid"}
    for op, (b_calls, b_total, c_calls, c_total) in got.items():
        assert b_calls == want_base[op][0] and c_calls == want_cmp[op][0]
        tol = 0.005 * n_rows[op] + 1e-9  # each row's total is rounded to 0.01 ms
        assert b_total == pytest.approx(want_base[op][1] / 1000, abs=tol)
        assert c_total == pytest.approx(want_cmp[op][1] / 1000, abs=tol)

    # OverallMetrics: computing = union of kernel time, e2e = first kernel start to last kernel end (ms)
    overall = {r[0].strip(): r for r in sheet(book, "OverallMetrics")[2:]}
    for sim, dur_col, num_col in ((base_sim, 1, 3), (cmp_sim, 4, 6)):
        ks = kernels(sim)
        busy = union_ns((s, e) for _, _, s, e in ks)
        e2e = max(e for *_, e in ks) - min(s for _, _, s, _ in ks)
        assert overall["Computing Time"][dur_col] == pytest.approx(busy / 1e6, abs=1e-9)
        assert overall["E2E Time"][dur_col] == pytest.approx(e2e / 1e6, abs=1e-9)
        assert overall["Free Time"][dur_col] == pytest.approx((e2e - busy) / 1e6, abs=1e-9)
        # AI CPU kernels have no AI Core PMU, so the tool files them under "Other" without a count
        assert overall["Computing Time"][num_col] == sum(1 for _, tt, _, _ in ks if tt != "AI_CPU")
        cube = sum(1 for _, tt, _, _ in ks if tt == "AI_CORE")
        assert overall["Matmul (Cube)"][num_col] == cube
    # the smaller AI CPU cache re-creates tasks on the host: never faster end to end (with the AI CPU kernels'
    # fitted device time the stream, not the host, may bound both runs, which then tie)
    assert overall["E2E Time"][4] >= overall["E2E Time"][1]


SCENARIO = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "scenarios", "aicpu_cache_pressure.yaml")


def test_compare_bundled_scenario_runs_matches_their_summary(tmp_path):
    """The acceptance run: `opsim run aicpu_cache_pressure.yaml --profiler-output` at two AI CPU cache limits."""
    if not os.path.exists(SCENARIO):
        pytest.skip("scenarios/aicpu_cache_pressure.yaml is not in this checkout")
    import io
    import json

    from opsim.cli import main
    roots, summaries = {}, {}
    for label, extra in (("limit3", []), ("limit64", ["--set", "env.ACLNN_AICPU_CACHE_LIMIT=64"])):
        out = tmp_path / label
        code = main(["run", SCENARIO, "--out", str(out), "--profiler-output", "--no-progress", "--quiet", *extra],
                    stdout=io.StringIO(), stderr=io.StringIO())
        assert code == 0
        (roots[label],) = glob.glob(str(out / "*_ascend_pt"))
        with open(out / "summary.json") as f:
            summaries[label] = json.load(f)
    assert summaries["limit3"]["aicpu_cache"]["oneshot"] > summaries["limit64"]["aicpu_cache"]["oneshot"] == 0
    work = tmp_path / "work"
    work.mkdir()
    run_tool(["compare", "-d", roots["limit3"], "-bp", roots["limit64"], "-o", str(work)], cwd=work)
    (book,) = glob.glob(str(work / "performance_comparison_result_*.xlsx"))
    rows = sheet(book, "KernelCompare")[2:]
    for label, calls_col, total_col in (("limit64", 7, 3), ("limit3", 12, 8)):
        summary = summaries[label]
        assert sum(r[calls_col] for r in rows) == sum(summary["task_types"].values())
        busy_us = sum(s["busy_us"] for s in summary["streams"].values())
        assert sum(r[total_col] for r in rows) == pytest.approx(busy_us, abs=0.005 * len(rows))
    overall = {r[0].strip(): r for r in sheet(book, "OverallMetrics")[2:]}
    for label, col in (("limit64", 1), ("limit3", 4)):
        busy_us = sum(s["busy_us"] for s in summaries[label]["streams"].values())  # one stream: busy = union
        assert overall["Computing Time"][col] == pytest.approx(busy_us / 1000, abs=1e-6)


# ---- advisor ---------------------------------------------------------------------------------------------------

def test_advisor_reports_aicpu_and_block_dim_findings(tmp_path):
    sim = simulate()
    root = write_profiler_output(sim, str(tmp_path / "prof"), name="advised")
    work = tmp_path / "work"
    work.mkdir()
    run_tool(["advisor", "all", "-d", root, "-o", str(work), "-l", "en"], cwd=work)
    assert len(glob.glob(str(work / "mstt_advisor_*.html"))) == 1
    books = glob.glob(str(work / "log" / "mstt_advisor_*.xlsx"))
    assert len(books) == 1
    problems = {r[0]: r for r in sheet(books[0], "problems")[1:]}
    assert {"Overall Summary", "AICPU Issues", "Block Dim Issues"} <= set(problems)
    assert "Sigmoid" in problems["AICPU Issues"][1]
    aicpu = sheet(books[0], "AICPU Issues")
    stacks = {r[aicpu[0].index("stack_info")] for r in aicpu[1:]}
    assert stacks and all(s and "aclnnSigmoidAicpu" in s for s in stacks)
    block = sheet(books[0], "Block Dim Issues")
    flagged = {r[block[0].index("op_type")] for r in block[1:]}
    assert {"MatMulV2", "Muls", "Add"} <= flagged  # block dims 2 / 4 do not fill 24 AI Cores or 48 vector cores
    # the cfg the advisor drops into the cwd lands in the temporary directory, not in the repository
    assert glob.glob(str(work / "operator_tuning_file_*.cfg"))


# ---- cluster -----------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_cluster_step_trace_time_summary(tmp_path):
    sim = simulate()
    parent = tmp_path / "cluster"
    root = write_profiler_output(sim, str(parent), name="rank0")
    run_tool(["cluster", "-d", str(parent)], cwd=tmp_path)
    path = parent / "cluster_analysis_output" / "cluster_step_trace_time.csv"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    with open(os.path.join(root, "ASCEND_PROFILER_OUTPUT", "step_trace_time.csv"), newline="") as f:
        mine = {r["Step"]: r for r in csv.DictReader(f)}
    ranks = [r for r in rows if r["Type"] == "rank"]
    assert [r["Step"] for r in ranks] == [str(n) for n in range(1, STEPS + 1)] and {r["Index"] for r in ranks} == {"0"}
    for r in ranks:
        for col in ("Computing", "Free", "Stage", "Preparing"):
            assert float(r[col]) == pytest.approx(float(mine[r["Step"]][col]), abs=1e-9)


@pytest.mark.slow
def test_cluster_recipes_on_the_db_layout(tmp_path):
    sim = simulate()
    parent = tmp_path / "cluster"
    write_profiler_output(sim, str(parent), name="rank0", db=True)
    run_tool(["cluster", "-d", str(parent), "-m", "compute_op_sum", "--export_type", "text"], cwd=tmp_path)
    with open(parent / "cluster_analysis_output" / "ComputeOpSum" / "all_stats.csv", newline="") as f:
        stats = {r["OpType"]: r for r in csv.DictReader(f)}
    for op, (count, total_ns) in per_op_type(sim).items():
        assert int(stats[op]["Count"]) == count
        assert float(stats[op]["Sum(Us)"]) == pytest.approx(total_ns / 1000, abs=1e-6)

    run_tool(["cluster", "-d", str(parent), "-m", "cann_api_sum"], cwd=tmp_path)
    db = sqlite3.connect(parent / "cluster_analysis_output" / "cluster_analysis.db")
    counts = dict(db.execute("SELECT name, totalCount FROM CannApiSum"))
    host = sim.recorder.records("host")
    launches = sum(1 for p, op in zip(host["phase"], host["op"]) if p in ("launch", "Launch"))
    calls = defaultdict(int)
    for p, op in zip(host["phase"], host["op"]):
        if p == "op_call":
            calls[op] += 1
    assert counts["launch"] == launches
    for api, n in calls.items():
        assert counts[api] == n and counts[f"{api}GetWorkspaceSize"] == n


# ---- cluster on a simulated job ---------------------------------------------------------------------------------

SLOW_RANK = 3


@pytest.fixture(scope="module")
def job_output(tmp_path_factory):
    """The bundled data_parallel job (8 ranks, 4 steps, two allreduces per step) with rank 3 1.5x slower,
    written as one *_ascend_pt per rank."""
    from pathlib import Path

    from opsim.scenario.runner import run_scenario
    root = Path(__file__).resolve().parents[2]
    out = tmp_path_factory.mktemp("job") / "out"
    res = run_scenario(str(root / "scenarios" / "data_parallel.yaml"), out_dir=out, profiler_output="text",
                       overrides={f"ranks.{SLOW_RANK}.slowdown": 1.5, "outputs.trace": False, "outputs.csv": False,
                                  "outputs.records": False})
    return res, out


def rank_step_rows(out, rank: int) -> dict[str, dict]:
    (folder,) = out.glob(f"data_parallel_rank{rank}_*_ascend_pt")
    with open(folder / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", newline="") as f:
        return {r["Step"]: r for r in csv.DictReader(f)}


@pytest.mark.slow
def test_cluster_all_on_an_8_rank_job_equals_opsims_per_rank_figures(job_output, tmp_path):
    res, out = job_output
    run_tool(["cluster", "-d", str(out), "-m", "all"], cwd=tmp_path)
    result = out / "cluster_analysis_output"
    with open(result / "cluster_step_trace_time.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["Type"] == "rank"]
    assert sorted({int(r["Index"]) for r in rows}) == list(range(8)) and len(rows) == 8 * 4
    columns = [c for c in rows[0] if c not in ("Step", "Type", "Index")]
    assert {"Computing", "Communication(Not Overlapped)", "Communication", "Free", "Stage"} <= set(columns)
    for r in rows:
        mine = rank_step_rows(out, int(r["Index"]))[r["Step"]]
        for col in columns:
            assert float(r[col]) == pytest.approx(float(mine[col]), abs=1e-9), (r["Index"], r["Step"], col)
    for rank in range(8):  # the run table's whole-run figures: the steps' sums
        summary = res.summary["ranks"][str(rank)]
        mine = [r for r in rows if int(r["Index"]) == rank]
        for col, key in (("Computing", "computing_us"), ("Communication", "communication_us"),
                         ("Communication(Not Overlapped)", "communication_not_overlapped_us")):
            assert sum(float(r[col]) for r in mine) == pytest.approx(summary[key], abs=1e-3)
    assert json.loads((result / "communication_group.json").read_text())["collective"] == [list(range(8))]
    # the matrix maps every rank's links to global ranks: 8 LOCAL copies and 56 HCCS links per step
    matrix = json.loads((result / "cluster_communication_matrix.json").read_text())[str(tuple(range(8)))]
    assert sorted(matrix) == [f"step{n}" for n in range(1, 5)]
    (total,) = [v for k, v in matrix["step1"].items() if k.startswith("Total Op Info@")]
    assert {k: v["Transport Type"] for k, v in total.items()} == {
        f"{i}-{j}": "LOCAL" if i == j else "HCCS" for i in range(8) for j in range(8)}
    # every rank's view of each allreduce: the fast ranks wait for rank 3, rank 3 waits for nobody
    comm = json.loads((result / "cluster_communication.json").read_text())[str(tuple(range(8)))]
    waits: dict[int, float] = defaultdict(float)
    for step in comm.values():
        for name, per_rank in step.items():
            if not name.startswith("Total"):
                for rank, info in per_rank.items():
                    waits[int(rank)] += info["Communication Time Info"]["Wait Time(ms)"]
    assert waits[SLOW_RANK] == 0 and all(waits[r] > 0 for r in range(8) if r != SLOW_RANK)
    for rank in range(8):
        assert waits[rank] * 1000 == pytest.approx(res.summary["ranks"][str(rank)]["wait_us"], abs=1e-3)


@pytest.mark.slow
def test_advisor_names_the_slow_rank_of_a_job(job_output, tmp_path):
    """msprof-analyze's slow-rank analysis (advisor all on the job's folder) finds rank 3's 1.5x computing."""
    _, out = job_output
    work = tmp_path / "work"
    work.mkdir()
    run_tool(["advisor", "all", "-d", str(out), "-o", str(work), "-l", "en"], cwd=work)
    (book,) = glob.glob(str(work / "log" / "mstt_advisor_*.xlsx"))
    problems = {r[0]: r for r in sheet(book, "problems")[1:]}
    assert "slow rank" in problems and "Computing" in problems["slow rank"][1]
    slow = sheet(book, "slow rank")
    head = slow[0]
    compute = defaultdict(list)
    for r in slow[1:]:
        compute[r[head.index("rank_id")]].append(r[head.index("compute(us)")])
    for rank, values in compute.items():
        if rank != SLOW_RANK:
            assert [c * 1.5 for c in values] == pytest.approx(compute[SLOW_RANK], rel=1e-4)
    assert any(f"Rank{SLOW_RANK}" in name for name in problems)  # it compares the slow rank's kernels to a fast one


@pytest.mark.slow
def test_slow_rank_and_all_on_the_db_layout_name_the_slowed_rank(tmp_path):
    """msprof-analyze's slow_rank recipe reads each rank's COMMUNICATION_OP (joined to its launch in CANN_API)
    and votes, per allreduce, for the rank whose communication was abnormally short (Dixon's test): the rank
    the others waited for. Ranks 1 and 2 are 1% and 2% slower so that the fast ranks' times differ (the test
    needs more than three distinct times), rank 3 1.5x."""
    from opsim.scenario.runner import run_scenario
    from opsim.trace.timefmt import to_ns

    from .test_comm_db import job
    out = tmp_path / "out"
    res = run_scenario(job(), out_dir=out, profiler_output="db")
    run_tool(["cluster", "-d", str(out), "-m", "slow_rank", "--export_type", "text"], cwd=tmp_path)
    result = out / "cluster_analysis_output" / "SlowRankAnalysis"
    with open(result / "rank_stats.csv", newline="") as f:
        assert [(r["rankId"], r["slowAffectCount"]) for r in csv.DictReader(f)] == [("3", "1")]
    with open(result / "slow_op_stats.csv", newline="") as f:
        (op,) = csv.DictReader(f)
    first = min(res.ranks[3].rank.collectives, key=lambda c: c.start_us)
    assert (op["SlowRank"], op["OpName"], op["GroupName"], int(op["Count"])) == ("3", first.name, "world", 4)
    assert int(op["Timestamp"]) == EPOCH_NS + to_ns(first.start_us)  # the slow rank's start of the op
    # -m all on the same folder: the communication tables come from each rank's analysis.db
    run_tool(["cluster", "-d", str(out), "-m", "all"], cwd=tmp_path)
    db = sqlite3.connect(out / "cluster_analysis_output" / "cluster_analysis.db")
    assert db.execute("SELECT type, rank_set FROM CommunicationGroupMapping").fetchall() == [
        ("collective", "(0,1,2,3)")]
    waits = dict(db.execute("SELECT rank_id, sum(wait_time) FROM ClusterCommunicationTime "
                            "WHERE hccl_op_name NOT LIKE 'Total%' GROUP BY rank_id"))
    assert sorted(waits) == [0, 1, 2, 3] and waits[3] == 0
    for rank, run in enumerate(res.ranks):
        # msprof-analyze rounds each op's figure to 1e-6 ms
        assert waits[rank] * 1000 == pytest.approx(sum(c.wait_us for c in run.rank.collectives), abs=5e-3)
