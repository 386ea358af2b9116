"""A job's profiler output: one torch_npu *_ascend_pt per rank, each with its communication files."""
from __future__ import annotations

import copy
import csv
import json
from pathlib import Path

import pytest

from opsim.scenario.runner import run_scenario
from opsim.trace.ascend_model import DEFAULT_EPOCH_US, timestamp_17
from opsim.trace.timefmt import to_ns

MIB = 1 << 20
STAMP = timestamp_17(DEFAULT_EPOCH_US)


def job(size: int = 2, *, ranks: list | None = None, count: int = 3) -> dict:
    """A data-parallel job: per step a MatMul on `compute`, then an allreduce of its gradients on `comm`."""
    body = [{"op": "Matmul", "stream": "compute", "shapes": [[1024, 1024], [1024, 1024]], "dtype": "float16"},
            {"record_event": {"event": "grads", "stream": "compute"}},
            {"wait_event": {"event": "grads", "stream": "comm"}},
            {"collective": "allreduce", "group": "world", "bytes": 4 * MIB, "dtype": "float16", "stream": "comm"}]
    data = {"name": "dp", "cluster": {"size": size}, "groups": [{"name": "world", "ranks": "all"}],
            "events": ["grads"],
            "threads": [{"name": "train", "streams": ["compute", "comm"],
                         "program": [{"loop": {"count": count, "body": body}}, {"sync_device": True}]}],
            "outputs": {"records": False, "trace": False, "csv": False}}
    if ranks is not None:
        data["ranks"] = ranks
    return data


def write(data: dict, out: Path):
    return run_scenario(copy.deepcopy(data), out_dir=out, profiler_output="text")


def rank_dir(out: Path, rank: int) -> Path:
    return out / f"dp_rank{rank}_{STAMP}_ascend_pt"


def step_rows(folder: Path) -> list[dict]:
    with open(folder / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", newline="") as f:
        return list(csv.DictReader(f))


def union_us(intervals) -> float:
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total, end = total + e - s, e
        elif e > end:
            total, end = total + e - end, e
    return total / 1000.0


def test_every_rank_writes_its_own_ascend_pt(tmp_path):
    res = write(job(3), tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*_ascend_pt")) == [rank_dir(tmp_path, r).name for r in range(3)]
    for r in range(3):
        folder = rank_dir(tmp_path, r)
        assert json.loads((folder / f"profiler_info_{r}.json").read_text())["rank_id"] == r
        assert [p.name for p in folder.glob("profiler_info_*.json")] == [f"profiler_info_{r}.json"]
        out = folder / "ASCEND_PROFILER_OUTPUT"
        comm = json.loads((out / "communication.json").read_text())
        recs = res.ranks[r].rank.collectives
        ops = {k: v for step in comm.values() for k, v in step["collective"].items() if k != "Total Op Info"}
        assert sorted(ops) == sorted(f"{c.name}@{c.group_hash}" for c in recs)
        for c in recs:
            t = ops[f"{c.name}@{c.group_hash}"]["Communication Time Info"]
            assert t["Wait Time(ms)"] == to_ns(c.wait_us) / 1e6 and t["Transit Time(ms)"] == to_ns(c.transit_us) / 1e6
        assert json.loads((out / "communication_matrix.json").read_text()).keys() == comm.keys()
        assert {row["Device_id"] for row in step_rows(folder)} == {str(r)}


def test_step_trace_time_counts_each_steps_collectives(tmp_path):
    """A collective is counted in the step its host thread issued it in (its device task runs later, after the
    host has moved on), so each step's Communication is its allreduce, as in communication.json."""
    res = write(job(2, ranks=[{}, {"slowdown": 1.5}]), tmp_path)
    for r in range(2):
        rows = step_rows(rank_dir(tmp_path, r))
        comm = json.loads((rank_dir(tmp_path, r) / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
        assert [row["Step"] for row in rows] == ["1", "2", "3"] and list(comm) == ["step1", "step2", "step3"]
        dev = res.ranks[r].sim.recorder.records("device")
        spans = [(to_ns(s), to_ns(e)) for s, e, t in zip(dev["start"], dev["end"], dev["task_type"])
                 if t == "COMMUNICATION"]
        assert sum(float(row["Communication"]) for row in rows) == pytest.approx(union_us(spans), abs=1e-6)
        for row in rows:
            total = comm[f"step{row['Step']}"]["collective"]["Total Op Info"]["Communication Time Info"]
            assert float(row["Communication"]) == pytest.approx(total["Elapse Time(ms)"] * 1000, abs=1e-6)
    # the fast rank waits for the slow one: its Wait shows in its file, the slow rank's is zero
    waits = [json.loads((rank_dir(tmp_path, r) / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
             ["step1"]["collective"]["Total Op Info"]["Communication Time Info"]["Wait Time(ms)"] for r in range(2)]
    assert waits[0] > 0 and waits[1] == 0


def test_send_and_recv_are_written_in_p2p(tmp_path):
    data = job(2, count=1)
    data["threads"][0]["program"] = [{"collective": "send", "peer": 1, "bytes": MIB, "stream": "comm"},
                                     {"sync_device": True}]
    data["ranks"] = [{}, {"threads": [{"name": "train", "streams": ["comm"], "program": [
        {"collective": "recv", "peer": 0, "bytes": MIB, "stream": "comm"}, {"sync_device": True}]}]}]
    write(data, tmp_path)
    for r, kind in ((0, "send"), (1, "receive")):
        out = rank_dir(tmp_path, r) / "ASCEND_PROFILER_OUTPUT"
        step = next(iter(json.loads((out / "communication.json").read_text()).values()))
        assert step["collective"] == {} and len(step["p2p"]) == 2
        matrix = next(iter(json.loads((out / "communication_matrix.json").read_text()).values()))
        assert {k.split("-")[0] for k in matrix["p2p"]} == {kind} and matrix["collective"] == {}
        # rank 0 sends to rank 1; each side also lists its own LOCAL row (msprof-analyze places it by that row)
        assert {link for k, v in matrix["p2p"].items() for link in v} == {"0-1", f"{r}-{r}"}


def test_a_single_rank_scenario_keeps_its_one_folder_without_communication_files(tmp_path):
    data = job(1)
    del data["cluster"], data["groups"]
    data["threads"][0]["program"][0]["loop"]["body"] = data["threads"][0]["program"][0]["loop"]["body"][:1]
    write(data, tmp_path)
    (folder,) = tmp_path.glob("*_ascend_pt")
    assert folder.name == f"dp_{STAMP}_ascend_pt"
    assert not list(folder.rglob("communication*.json"))


def test_a_rerun_with_fewer_ranks_removes_the_old_rank_folders(tmp_path):
    write(job(3, count=1), tmp_path)
    write(job(2, count=1), tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*_ascend_pt")) == [rank_dir(tmp_path, r).name for r in range(2)]


def test_overlap_analysis_shows_each_ranks_communication(tmp_path):
    """trace_view.json's Overlap Analysis gets the Communication and Communication(Not Overlapped) tracks,
    whose totals are the run table's whole-run figures (a step's own figures leave out the next step's
    compute, which may overlap its last allreduce), and Free leaves out the time the rank communicates."""
    from opsim.trace.ascend_build import build_profile
    from opsim.trace.ascend_trace_view import trace_events, trace_view_lines

    res = write(job(2, ranks=[{}, {"slowdown": 1.5}]), tmp_path)
    for r in range(2):
        events = json.loads((rank_dir(tmp_path, r) / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
        pid = next(e["pid"] for e in events if e["ph"] == "M" and e["args"].get("name") == "Overlap Analysis")
        total: dict[str, float] = {}
        for e in events:
            if e["ph"] == "X" and e["pid"] == pid:
                total[e["name"]] = total.get(e["name"], 0.0) + float(e["dur"])
        summary = res.summary["ranks"][str(r)]
        for track, key in (("Computing", "computing_us"), ("Communication", "communication_us"),
                           ("Communication(Not Overlapped)", "communication_not_overlapped_us")):
            assert total[track] == pytest.approx(summary[key], abs=1e-6)
        ns = lambda text: int(text.replace(".", ""))  # noqa: E731  (3-decimal microseconds, exact)
        spans = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events if e["ph"] == "X" and e["pid"] == pid]
        assert total["Computing"] + total["Communication(Not Overlapped)"] + total.get("Free", 0.0) == \
            pytest.approx((max(e for _, e in spans) - min(s for s, _ in spans)) / 1000, abs=1e-6)
        p = build_profile(res.ranks[r].sim, epoch_us=DEFAULT_EPOCH_US)
        assert trace_view_lines(p)[-len(spans):] == [
            json.dumps(e, sort_keys=True, separators=(",", ":")) for e in trace_events(p)[-len(spans):]]
