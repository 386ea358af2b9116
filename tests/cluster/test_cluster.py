"""Ranks together: collectives on one clock, their timing, what-ifs and the errors a job can make."""
from __future__ import annotations

import copy
import json
import re

import pytest

from cpu_clock import cpu_seconds  # bounds in CPU seconds: a loaded machine stretches wall time
from opsim.cli import main as cli_main
from opsim.cluster.links import get_link
from opsim.cluster.transfer import transfer_time_us
from opsim.errors import ScenarioError
from opsim.scenario.loader import load_scenario, validate
from opsim.scenario.runner import run_scenario

MIB = 1 << 20


def job(size: int = 2, *, ranks: list | None = None, count: int = 3, nbytes: int = 4 * MIB, **extra) -> dict:
    """A data-parallel step: a MatMul on the compute stream, then an allreduce of its gradients on `comm`."""
    data = {
        "name": "dp", "cluster": {"size": size}, "groups": [{"name": "world", "ranks": "all"}],
        "events": ["grads"],
        "threads": [{"name": "train", "streams": ["compute", "comm"], "program": [
            {"loop": {"count": count, "body": [
                {"op": "Matmul", "stream": "compute", "shapes": [[1024, 1024], [1024, 1024]], "dtype": "float16"},
                {"record_event": {"event": "grads", "stream": "compute"}},
                {"wait_event": {"event": "grads", "stream": "comm"}},
                {"collective": "allreduce", "group": "world", "bytes": nbytes, "dtype": "float16", "stream": "comm"},
            ]}},
            {"sync_device": True}]}],
        "outputs": {"records": False},
    }
    if ranks is not None:
        data["ranks"] = ranks
    data.update(extra)
    return data


def run(data: dict, **kw):
    return run_scenario(copy.deepcopy(data), write=False, **kw)


def kernels(res, rank: int) -> list[tuple[float, float]]:
    rec = res.ranks[rank].sim.recorder.records("device")
    return [(s, e) for s, e, t in zip(rec["start"], rec["end"], rec["task_type"]) if t != "COMMUNICATION"
            and not t.startswith("EVENT")]


def test_a_collective_ends_on_every_member_at_the_last_arrival_plus_the_transfer():
    res = run(job(2, ranks=[{}, {"slowdown": 1.5}], count=1))
    r0, r1 = (res.ranks[i].rank.collectives[0] for i in (0, 1))
    link = get_link("hccs-910b")
    model = transfer_time_us("allreduce", 4 * MIB, 2, algorithm=r0.algorithm, intra=link, inter=get_link("roce-200g"))
    assert r0.transit_us == r1.transit_us == pytest.approx(model)
    assert r0.end_us == r1.end_us == pytest.approx(max(r0.ready_us, r1.ready_us) + model)
    # rank 1's MatMul takes 1.5x as long, so rank 0 waits exactly the difference
    (s0, e0), = kernels(res, 0)
    (s1, e1), = kernels(res, 1)
    assert e1 - s1 == pytest.approx(1.5 * (e0 - s0))
    assert r0.wait_us == pytest.approx(r1.ready_us - r0.ready_us) and r0.wait_us > 0
    assert r1.wait_us == 0.0
    assert r0.name == r1.name and r0.name.startswith("hcom_allReduce__") and r0.name.endswith("_0_1")


def test_recorded_transit_and_idle_replay_as_given():
    data = job(2, count=1)
    step = data["threads"][0]["program"][0]["loop"]["body"][3]
    step.update(transit_us=250.0, idle_us=40.0)
    res = run(data)
    c = res.ranks[0].rank.collectives[0]
    assert c.transit_us == 250.0 and c.idle_us == 40.0 and c.ready_us == c.start_us + 40.0
    assert c.end_us == pytest.approx(c.ready_us + c.wait_us + 250.0)
    data["cluster"]["transit"] = "model"
    assert run(data).ranks[0].rank.collectives[0].transit_us != 250.0


def test_with_recorded_transits_each_member_finishes_after_its_own():
    data = job(2, count=1)
    data["ranks"] = [{}, {"threads": copy.deepcopy(data["threads"])}]
    data["threads"][0]["program"][0]["loop"]["body"][3]["transit_us"] = 100.0
    data["ranks"][1]["threads"][0]["program"][0]["loop"]["body"][3]["transit_us"] = 160.0
    a, b = (r.rank.collectives[0] for r in run(data).ranks)
    assert (a.transit_us, b.transit_us) == (100.0, 160.0)
    assert b.end_us - a.end_us == pytest.approx(60.0) and a.ready_us + a.wait_us == b.ready_us + b.wait_us


def test_fast_and_reference_paths_give_the_same_job(tmp_path):
    data = job(4, ranks=[{}, {}, {"slowdown": 1.3}])
    outs = []
    for fast in (True, False):
        out = tmp_path / ("fast" if fast else "ref")
        run_scenario(copy.deepcopy(data), out_dir=out, fast_path=fast)
        outs.append(out)
    for name in ("trace.json", "op_summary.csv", "task_time.csv"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes()
    a, b = (json.loads((o / "summary.json").read_text()) for o in outs)
    a.pop("wall"), b.pop("wall")
    assert a == b and len(a["ranks"]) == 4


def test_a_job_is_deterministic():
    a, b = run(job(3)).summary, run(job(3)).summary
    a.pop("wall"), b.pop("wall")
    assert a == b


def test_the_rank_table_reports_each_ranks_breakdown_and_waits():
    res = run(job(2, ranks=[{}, {"slowdown": 2.0}]))
    rows = list(res.summary["ranks"].values())
    assert [r["rank"] for r in rows] == [0, 1] and list(res.summary["ranks"]) == ["0", "1"]
    assert res.summary["cluster"]["slowest_rank"] == 1 and res.summary["cluster"]["waiting_rank"] == 0
    assert res.summary["cluster"]["max_wait_us"] == rows[0]["wait_us"]
    assert rows[1]["computing_us"] == pytest.approx(2 * rows[0]["computing_us"], abs=0.003)
    assert rows[0]["wait_us"] > rows[1]["wait_us"] == 0.0
    assert rows[0]["collectives"] == rows[1]["collectives"] == 3
    for r in rows:
        assert r["stage_us"] == pytest.approx(r["computing_us"] + r["communication_not_overlapped_us"] + r["free_us"],
                                              abs=0.002)


def test_set_a_ranks_slowdown_and_the_cluster_size_from_the_command_line(tmp_path):
    path = tmp_path / "dp.yaml"
    path.write_text(json.dumps(job(2)))
    cfg = load_scenario(path, {"ranks.3.slowdown": 1.2, "cluster.size": 4})
    assert cfg.rank_count == 4 and [cfg.rank_config(r).slowdown for r in range(4)] == [1.0, 1.0, 1.0, 1.2]


def test_weak_scaling_keeps_per_rank_work_and_grows_the_group():
    small, large = run(job(2)), run(job(8))
    assert large.summary["ranks"]["7"]["computing_us"] == small.summary["ranks"]["1"]["computing_us"]
    assert large.ranks[0].rank.collectives[0].group_ranks == tuple(range(8))


def test_send_and_recv_pair_up():
    data = job(2, count=1)
    data["threads"][0]["program"] = [{"collective": "send", "peer": 1, "bytes": MIB, "stream": "comm"}]
    data["ranks"] = [{}, {"threads": [{"name": "train", "streams": ["comm"], "program": [
        {"collective": "recv", "peer": 0, "bytes": MIB, "stream": "comm"}]}]}]
    res = run(data)
    s, r = res.ranks[0].rank.collectives[0], res.ranks[1].rank.collectives[0]
    assert (s.op, r.op) == ("send", "recv") and s.end_us == r.end_us and s.transit_us > 0


def crossed(size: int = 2) -> dict:
    """Rank 0 all-reduces on group a then b, rank 1 on b then a, on one stream: each waits for the other."""
    data = job(size, count=1)
    data["groups"] = [{"name": "a", "ranks": "all"}, {"name": "b", "ranks": "all"}]
    one = lambda g: {"collective": "allreduce", "group": g, "bytes": 1024, "stream": "comm"}  # noqa: E731
    data["threads"][0]["program"] = [one("a"), one("b"), {"sync_device": True}]
    data["ranks"] = [{}, {"threads": [{"name": "train", "streams": ["comm"], "program": [one("b"), one("a")]}]}]
    return data


def test_a_rank_that_never_arrives_is_a_deadlock_naming_the_collective_and_the_missing_ranks():
    with pytest.raises(ScenarioError, match=r"deadlock: collective 0 of group 'a'.*rank\(s\) 1\b.*never arrived"):
        run(crossed())


def test_mismatched_collectives_name_both_ranks():
    data = job(2, count=1)
    data["ranks"] = [{}, {"threads": [{"name": "train", "streams": ["comm"], "program": [
        {"collective": "allreduce", "group": "world", "bytes": 8, "stream": "comm"}]}]}]
    with pytest.raises(ScenarioError, match="mismatched collectives.*8 bytes.*on rank 1 but.*4194304 bytes.*on rank 0"):
        run(data)


@pytest.mark.parametrize("change, message", [
    (lambda d: d["threads"][0]["program"][0]["loop"]["body"][3].update(group="wrold"), "unknown group 'wrold'"),
    (lambda d: d["groups"].append({"name": "pair", "ranks": [0, 5]}), "outside the cluster"),
    (lambda d: d.update(ranks=[{}, {"like": 1}]), "`like` chain returns"),
    (lambda d: d.update(ranks=[{}, {}, {}]), "3 ranks are listed but cluster.size is 2"),
    (lambda d: d["cluster"].update(link={"preset": "warp-drive"}), "warp-drive"),
    (lambda d: d.update(groups=[{"name": "world", "ranks": [0]}]), "is not one of its ranks"),
    (lambda d: d["ranks"].__setitem__(1, {"threads": [{"name": "t", "streams": ["comm"], "program": []}]})
     if d.get("ranks") else d.update(ranks=[{}, {"threads": [{"name": "t", "streams": ["comm"], "program": [
         {"sleep": 1}]}]}]), "issues 0 of its collectives but rank 0 issues 3"),
])
def test_validation_refuses_a_bad_job_naming_the_field(tmp_path, capsys, change, message):
    data = job(2)
    change(data)
    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps(data))
    assert cli_main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err and len(err.strip().splitlines()) <= 2


@pytest.mark.parametrize("fields, message", [
    ({"group": {"count": 1}}, "unknown group {'count': 1}"),
    ({"collective": "send", "group": None, "peer": [1]}, "peer: expected an integer, got a list"),
])
def test_a_group_or_peer_of_the_wrong_type_is_refused_not_a_traceback(tmp_path, fields, message):
    data = job(2)
    data["threads"][0]["program"][0]["loop"]["body"][3].update(fields)
    for check in (validate, load_scenario):
        with pytest.raises(ScenarioError, match=re.escape(message)):
            check(copy.deepcopy(data))


def test_the_cli_reports_a_deadlock_in_one_line_with_exit_2(tmp_path, capsys):
    path = tmp_path / "dead.yaml"
    path.write_text(json.dumps(crossed()))
    assert cli_main(["run", str(path), "--out", str(tmp_path / "o"), "--no-progress", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "deadlock" in err[0] and "never arrived" in err[0] and str(path) in err[0]
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_a_single_rank_scenario_has_no_rank_table():
    data = job(2)
    for key in ("cluster", "groups"):
        data.pop(key)
    data["threads"][0]["program"][0]["loop"]["body"].pop()
    res = run(data)
    assert "ranks" not in res.summary and res.ranks == []


def test_result_tables_of_a_job_survive_load_result(tmp_path):
    import opsim
    data = job(2, ranks=[{}, {"slowdown": 1.2}])
    data["outputs"] = {}
    live = opsim.run(copy.deepcopy(data), out_dir=tmp_path / "o")
    loaded = opsim.load_result(tmp_path / "o")
    for res in (live, loaded):
        assert list(res.ranks["rank"]) == [0, 1] and list(res.ranks["slowdown"]) == [1.0, 1.2]
        assert len(res.collectives) == 6 and set(res.collectives["rank"]) == {0, 1}
        assert (res.collectives["wait_us"] >= 0).all()
    assert live.rank(1).device_tasks["dur"].sum() > live.rank(0).device_tasks["dur"].sum()
    with pytest.raises(Exception, match="holds 0 ranks"):
        loaded.rank(1)
    assert opsim.run(job(2) | {"cluster": {"size": 1}, "groups": [{"name": "world", "ranks": [0]}]},
                     write=False).ranks["rank"].tolist() == [0]


def test_the_bundled_what_if_sweep_runs_a_slow_rank_and_faster_links(tmp_path):
    from pathlib import Path

    from opsim.sweeps import sweep
    root = Path(__file__).resolve().parents[2]
    table = sweep(root / "scenarios" / "sweeps" / "data_parallel_whatif.yaml", workers=0)
    assert (table["status"] == "ok").all() and len(table) == 12
    base = table[(table["ranks.3.slowdown"] == 1.0)]
    slow = table[(table["ranks.3.slowdown"] == 1.3)]
    assert (base["summary.cluster.max_wait_us"] == 0).all() and (slow["summary.cluster.max_wait_us"] > 0).all()
    transit = base.sort_values("cluster.link.bandwidth_gbps")["summary.cluster.max_transit_us"].tolist()
    assert transit == sorted(transit, reverse=True) and transit[0] > 3 * transit[-1]


def test_trace_off_keeps_only_the_collectives_totals():
    data = job(2, ranks=[{}, {"slowdown": 1.5}])
    data["trace"] = False
    data["outputs"] = {"trace": False, "csv": False, "records": False}
    off = run(data)
    on = run(job(2, ranks=[{}, {"slowdown": 1.5}]))
    assert all(r.rank.collectives == [] for r in off.ranks)
    for key in ("collectives", "wait_us", "transit_us", "idle_us", "device_end_us"):
        assert off.summary["ranks"]["0"][key] == on.summary["ranks"]["0"][key]
    assert "computing_us" not in off.summary["ranks"]["0"]


def test_a_transfer_beyond_the_simulated_horizon_is_refused_naming_the_fix():
    data = job(2, count=1)
    data["cluster"]["link"] = {"bandwidth_gbps": 1e-300}
    with pytest.raises(ScenarioError, match="beyond the longest .*raise cluster.link.bandwidth_gbps"):
        run(data)
    with pytest.raises(ScenarioError, match="collectives alone take .* raise cluster.link.bandwidth_gbps"):
        validate(data)  # refused before simulating, as validate refuses it


def test_a_simulation_still_takes_the_process_environment_by_name():
    from opsim.runtime.simulation import Simulation
    sim = Simulation(env={"ACLNN_AICPU_CACHE_LIMIT": "4"})
    assert sim.settings.env["ACLNN_AICPU_CACHE_LIMIT"] == "4" and hasattr(sim.env, "run")


def test_a_send_between_servers_goes_over_the_inter_server_link():
    def pair(a: int, b: int, inter_gbps: float = 25.0) -> float:
        data = job(16, count=1)
        data["cluster"]["inter_link"] = {"preset": "roce-200g", "bandwidth_gbps": inter_gbps}
        data["groups"] = []
        data["threads"][0]["program"] = [{"sleep": 1.0}]
        mk = lambda op, peer: [{"name": "train", "streams": ["comm"], "program": [  # noqa: E731
            {"collective": op, "peer": peer, "bytes": 64 * MIB, "stream": "comm"}]}]
        data["ranks"] = [{} for _ in range(16)]
        data["ranks"][a], data["ranks"][b] = {"threads": mk("send", b)}, {"threads": mk("recv", a)}
        return run(data).ranks[a].rank.collectives[0].transit_us
    assert pair(0, 9, 1.0) > 10 * pair(0, 9)  # ranks 0 and 9 sit on two servers: the RoCE link carries it
    assert pair(0, 1, 1.0) == pair(0, 1)  # within a server: HCCS only


def test_malformed_job_fields_are_reported_not_raised(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("name: b\ncluster: {size: Add, ranks_per_server: true, link: 5, inter_link: [1]}\n"
                    "groups: [{name: w, ranks: all}, 5, {name: 3, ranks: x}]\n"
                    "ranks: [5, {like: x, slowdown: s, threads: 3}]\n"
                    "threads: [{name: t, program: [{collective: allreduce, group: w, bytes: x}]}]\n")
    assert cli_main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "cluster.size: expected an integer" in err and "Traceback" not in err


# ---- hostile job fields: refused in one or two lines, exit 2, never a traceback, quickly ----

BIG = "9" * 5000


@pytest.mark.parametrize("ranks", [[{"like": -(1 << 62)}], [{}, {"like": -(1 << 80)}], [{"like": -1}],
                                   [{"like": True}], [{"like": 1 << 80}]])
def test_a_like_outside_the_cluster_is_refused_not_an_index_error(ranks):
    data = job(2, ranks=ranks)
    for check in (validate, load_scenario):
        with pytest.raises(ScenarioError, match="like"):
            check(copy.deepcopy(data))


@pytest.mark.parametrize("key", [f"ranks.{BIG}.slowdown", f"threads.{BIG}.name", "ranks.99999999999999999999.slowdown"],
                         ids=["ranks-5000-digits", "threads-5000-digits", "ranks-20-digits"])
def test_a_set_index_of_thousands_of_digits_is_refused_in_one_line(tmp_path, capsys, key):
    path = tmp_path / "j.yaml"
    path.write_text(json.dumps(job(2)))
    assert cli_main(["validate", str(path), "--set", f"{key}=2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0] and len(err[0]) < 400, err


@pytest.mark.parametrize("link", [{"bandwidth_gbps": 1e-300}, {"bandwidth_gbps": 1e-9, "latency_us": 1e6}])
def test_validate_refuses_collectives_that_outlast_the_outputs_as_run_does(tmp_path, capsys, link):
    """A run refuses a collective ending past the trace horizon only when it reaches it; validate first."""
    import yaml
    data = job(2, count=50)
    data["cluster"]["link"] = link
    path = tmp_path / "slow.yaml"
    path.write_text(yaml.safe_dump(data))
    for cmd in (["validate", str(path)], ["run", str(path), "--out", str(tmp_path / "o"), "--quiet",
                                          "--no-progress"]):
        assert cli_main(cmd) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) <= 2 and "cluster.link.bandwidth_gbps" in err[-1], err


def test_recorded_transits_count_toward_the_horizon():
    data = job(2, count=3)
    data["threads"][0]["program"][0]["loop"]["body"][3]["transit_us"] = 9.0e11
    with pytest.raises(ScenarioError, match="collectives alone take 2.7e\\+12 us"):
        validate(data)
    data["cluster"]["transit"] = "model"  # the model's time counts instead: well inside
    validate(data)


@pytest.mark.parametrize("change", [
    lambda d: d["groups"].__setitem__(0, {"name": "world", "ranks": list(range(10 ** 6))}),
    lambda d: d["cluster"].update(size=10 ** 9),
    lambda d: d.update(ranks=[{} for _ in range(10 ** 5)]),
    lambda d: d["groups"].extend({"name": f"g{i}", "ranks": "all"} for i in range(10 ** 4)),
])
def test_enormous_counts_are_refused_quickly(change):
    data = job(2)
    change(data)
    t = cpu_seconds()
    for check in (validate, load_scenario):
        with pytest.raises(ScenarioError):
            check(copy.deepcopy(data))
    assert cpu_seconds() - t < 30


def test_a_calibrations_slow_link_counts_toward_the_collectives_horizon(tmp_path):
    """The run resolves links over the scenario calibration's fitted ones; validate checks those links too."""
    from pathlib import Path
    from opsim.calibration import calibrate
    cal = calibrate([Path(__file__).resolve().parents[1] / "data" / "real" / "alexnet_910b_comm" / "level1"])
    cal.links["HCCS"]["bandwidth_gbps"] = 1e-12
    data = job(2, count=1)
    data["calibration"] = str(cal.save(tmp_path / "slow.calibration.yaml"))
    for check in (validate, load_scenario):
        with pytest.raises(ScenarioError, match="collectives alone take"):
            check(copy.deepcopy(data))


@pytest.mark.parametrize("where, value, field", [("step", "pairwise", "body[3].algorithm"),
                                                 ("cluster", "pairwise", "cluster.algorithm")])
def test_an_algorithm_the_op_has_not_is_refused_before_the_run_raises_for_it(where, value, field):
    """An allreduce with `algorithm: pairwise` (alltoall's only): validate accepted it and the run ended in a
    ValueError traceback when it reached the collective."""
    data = job(2, count=1)
    if where == "step":
        data["threads"][0]["program"][0]["loop"]["body"][3]["algorithm"] = value
    else:
        data["cluster"]["algorithm"] = value
    for check in (validate, load_scenario):
        with pytest.raises(ScenarioError, match=re.escape(field) + ".*allreduce has no pairwise algorithm"):
            check(copy.deepcopy(data))


def test_recorded_idle_times_count_toward_the_horizon():
    """idle_us of 5e11 on 3 allreduces: the run refused after simulating (the trace cannot hold 1.5e12 us)."""
    data = job(2, count=3)
    data["threads"][0]["program"][0]["loop"]["body"][3]["idle_us"] = 5.0e11
    with pytest.raises(ScenarioError, match="collectives alone take 1.5e\\+12 us"):
        validate(data)
