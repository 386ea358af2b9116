"""communication.json and communication_matrix.json: msprof's schema, checked against the shared 910B profile.

The real files (../shared/real-profiles/alexnet-910b, ranks 0 and 1 of an 8-NPU job, levels 1 and 2) fix the
shape: key order, which numbers are integers and which floats, how ratios round, how Total Op Info sums and
how the matrix ranks an op kind's links. Synthetic records exercise the writer on the same shape.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from opsim.cluster.records import CollectiveRecord
from opsim.trace.ascend_comm import (communication_data, communication_matrix_data, dumps, op_kind, rank_links,
                                     ratio, total_op_info, window_step_finder)

REAL = Path(__file__).resolve().parents[3] / "shared" / "real-profiles" / "alexnet-910b" / "text"
REAL_FILES = [REAL / lv / f"rank{r}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" for lv in ("level1", "level2")
              for r in (0, 1)]
needs_real = pytest.mark.skipif(not REAL.is_dir(), reason="the shared real profile is not on this machine")
EPOCH_US = 1_700_000_000_000_000
HASH = "17522688603477080586"
MB = 1_000_000


def record(index: int = 0, *, rank: int = 0, ranks: tuple = tuple(range(8)), op: str = "allreduce",
           start: float = 100.0, wait: float = 5.0, transit: float = 240.0, idle: float = 73.0, links=None,
           group: str = "world", group_hash: str = HASH, op_type: str = "hcom_allReduce_") -> CollectiveRecord:
    """One rank's record of a mesh allreduce over 8 ranks: a LOCAL copy and 7 HCCS links of 4 MB."""
    if links is None:
        links = ((rank, rank, "LOCAL", 4 * MB, 8.2),) + tuple(
            (rank, p, "HCCS", 4 * MB + p, 260.0 + p) for p in ranks if p != rank)
    return CollectiveRecord(
        rank=rank, group=group, group_ranks=ranks, index=index, op=op,
        name=f"{op_type}_{int(group_hash) % 1000}_{index}_1", op_type=op_type, group_hash=group_hash,
        nbytes=16 * MB, dtype="float32", algorithm="mesh", transport="HCCS", stream_id=2, start_us=start,
        ready_us=start + idle, end_us=start + idle + wait + transit, wait_us=wait, transit_us=transit, idle_us=idle,
        links=links)


def in_step1(rec) -> int:
    return 1


def shape(obj):
    """The key order and value types of a JSON value (values themselves left out)."""
    if isinstance(obj, dict):
        return {k: shape(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [shape(v) for v in obj]
    return type(obj).__name__


# ---- the real files fix the rules ----------------------------------------------------------------------------

@needs_real
@pytest.mark.parametrize("folder", REAL_FILES, ids=lambda p: f"{p.parts[-3]}-{p.parts[-4]}")
def test_total_op_info_and_ratios_reproduce_the_real_files_exactly(folder):
    """Total Op Info is the in-order float sum of the ops, ratios recomputed; per op the ratios and bandwidths
    are msprof's 4-decimal rounding; the text is json.dumps' one line."""
    text = (folder / "communication.json").read_text()
    data = json.loads(text)
    assert dumps(data) == text
    for step in data.values():
        ops = {k: v for k, v in step["collective"].items() if k != "Total Op Info"}
        assert dumps(total_op_info(ops.values())) == dumps(step["collective"]["Total Op Info"])
        for op in ops.values():
            t = op["Communication Time Info"]
            assert t["Wait Time Ratio"] == ratio(t["Wait Time(ms)"], t["Wait Time(ms)"] + t["Transit Time(ms)"])
            for b in op["Communication Bandwidth Info"].values():
                assert b["Bandwidth(GB/s)"] == ratio(b["Transit Size(MB)"], b["Transit Time(ms)"])


@needs_real
@pytest.mark.parametrize("folder", REAL_FILES, ids=lambda p: f"{p.parts[-3]}-{p.parts[-4]}")
def test_matrix_ranking_reproduces_the_real_files_byte_for_byte(folder):
    """From the real file's per-op rows (top1..bottom3 hold all four ops of each link), `rank_links` gives
    back the whole real file, text included: key order top1, middle, bottom1, total, bottom2, bottom3."""
    text = (folder / "communication_matrix.json").read_text()
    data = json.loads(text)
    for key, step in data.items():
        by_link: dict = {}
        for name, links in step["collective"].items():
            kind, rest = name.split("-", 1)
            position, ghash = rest.split("@")
            if position != "total":
                for link, row in links.items():
                    rows = by_link.setdefault((kind, ghash, link), [])
                    if row["Op Name"] not in [r["Op Name"] for r in rows]:
                        rows.append(row)
        by_link = {k: sorted(v, key=lambda r: r["Op Name"]) for k, v in by_link.items()}
        assert dumps({key: {"p2p": {}, "collective": rank_links(by_link)}}) == text


@needs_real
def test_a_written_file_has_the_real_files_shape():
    """Same keys in the same order, the same int/float types (unused transports: integer 0s)."""
    real = json.loads((REAL_FILES[0] / "communication.json").read_text())
    mine = communication_data([record(i, start=100.0 + 400 * i) for i in range(4)], in_step1, EPOCH_US)
    real_step, mine_step = real["step50"], mine["step1"]
    assert list(mine_step) == list(real_step) == ["p2p", "collective"]
    real_op, mine_op = (next(iter(s["collective"].values())) for s in (real_step, mine_step))
    hccs = dict(real_op["Communication Bandwidth Info"]["HCCS"], **{"Size Distribution": {}})
    mine_hccs = dict(mine_op["Communication Bandwidth Info"]["HCCS"], **{"Size Distribution": {}})
    assert shape(mine_hccs) == shape(hccs)
    for section in ("Communication Time Info",):
        assert shape(mine_op[section]) == shape(real_op[section])
    for tr in ("RDMA", "PCIE", "SDMA", "SIO"):
        assert shape(mine_op["Communication Bandwidth Info"][tr]) == shape(real_op["Communication Bandwidth Info"][tr])
    total, real_total = mine_step["collective"]["Total Op Info"], real_step["collective"]["Total Op Info"]
    assert shape(total["Communication Time Info"]) == shape(real_total["Communication Time Info"])
    assert list(total["Communication Bandwidth Info"]) == list(real_total["Communication Bandwidth Info"])
    assert shape(total["Communication Bandwidth Info"]["RDMA"]) == shape(real_total["Communication Bandwidth Info"]["RDMA"])
    real_matrix = json.loads((REAL_FILES[0] / "communication_matrix.json").read_text())["step50"]["collective"]
    mine_matrix = communication_matrix_data([record(i, start=100.0 + 400 * i) for i in range(4)], in_step1)
    assert [k.split("@")[0] for k in mine_matrix["step1"]["collective"]] == [k.split("@")[0] for k in real_matrix]
    real_row = real_matrix[f"allreduce-top1@{HASH}"]["0-1"]
    assert shape(mine_matrix["step1"]["collective"][f"allreduce-top1@{HASH}"]["0-1"]) == shape(real_row)
    assert shape(mine_matrix["step1"]["collective"][f"allreduce-total@{HASH}"]["0-1"]) == \
        shape(real_matrix[f"allreduce-total@{HASH}"]["0-1"])


# ---- the figures of one op ---------------------------------------------------------------------------------

def test_time_info_is_the_records_times_in_ms_and_they_add_up():
    rec = record(start=1000.25, wait=5.5, transit=239.125, idle=73.0)
    op = communication_data([rec], in_step1, EPOCH_US)["step1"]["collective"][f"{rec.name}@{HASH}"]
    t = op["Communication Time Info"]
    assert t["Start Timestamp(us)"] == (EPOCH_US * 1000 + 1_000_250) / 1000
    assert (t["Elapse Time(ms)"], t["Transit Time(ms)"], t["Wait Time(ms)"], t["Idle Time(ms)"]) == \
        (0.317625, 0.239125, 0.0055, 0.073)
    assert t["Synchronization Time(ms)"] == t["Wait Time(ms)"]
    assert t["Wait Time Ratio"] == t["Synchronization Time Ratio"] == round(5.5 / (5.5 + 239.125), 4)


def test_bandwidth_info_sums_the_links_per_transport_and_sdma_carries_the_intra_server_ones():
    links = ((0, 0, "LOCAL", 3 * MB, 9.0), (0, 1, "HCCS", 2 * MB, 100.0), (0, 2, "HCCS", 2 * MB, 150.0),
             (0, 8, "RDMA", 5 * MB, 400.0), (0, 3, "SIO", MB, 10.0))
    rec = record(ranks=tuple(range(16)), links=links)
    bw = communication_data([rec], in_step1, EPOCH_US)["step1"]["collective"][f"{rec.name}@{HASH}"][
        "Communication Bandwidth Info"]
    assert list(bw) == ["RDMA", "HCCS", "PCIE", "SDMA", "SIO"]
    assert bw["HCCS"] == {"Transit Size(MB)": 4.0, "Transit Time(ms)": 0.25, "Bandwidth(GB/s)": 16.0,
                          "Large Packet Ratio": 0.0, "Size Distribution": {"2.0": [2, 0.25]}}
    assert bw["RDMA"]["Transit Size(MB)"] == 5.0 and bw["RDMA"]["Bandwidth(GB/s)"] == 12.5
    assert bw["SDMA"] == {"Transit Size(MB)": 5.0, "Transit Time(ms)": 0.26, "Bandwidth(GB/s)": ratio(5.0, 0.26),
                          "Large Packet Ratio": 0, "Size Distribution": {}}
    assert bw["PCIE"] == {"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0, "Large Packet Ratio": 0,
                          "Size Distribution": {}}


def test_send_and_recv_go_in_p2p_with_their_own_total_and_matrix_section():
    pair = (2, 5)
    ghash = "19215011202651423951"
    send = record(0, rank=2, ranks=pair, op="send", op_type="hcom_send_", group="p2p_2_5", group_hash=ghash,
                  links=((2, 5, "HCCS", 8 * MB, 500.0),))
    coll = record(0, rank=2, start=900.0)
    data = communication_data([coll, send], in_step1, EPOCH_US)["step1"]
    assert list(data["p2p"]) == [f"{send.name}@{ghash}", "Total Op Info"]
    assert list(data["collective"]) == [f"{coll.name}@{HASH}", "Total Op Info"]
    matrix = communication_matrix_data([coll, send], in_step1)["step1"]
    assert list(matrix["p2p"]) == [f"send-{p}@{ghash}" for p in ("top1", "middle", "bottom1", "total")]
    # links are keyed by local ranks: 2 and 5 are 0 and 1 in their pair
    assert list(matrix["p2p"][f"send-top1@{ghash}"]) == ["0-1"]


def test_matrix_ranks_by_bandwidth_and_keys_links_by_local_rank():
    ranks = (3, 9)
    recs = [record(i, rank=9, ranks=ranks, start=10.0 * i,
                   links=((9, 9, "LOCAL", MB, 2.0), (9, 3, "HCCS", MB, 100.0 + 10 * i))) for i in range(4)]
    m = communication_matrix_data(recs, in_step1)["step1"]["collective"]
    assert list(m) == [f"allreduce-{p}@{HASH}" for p in ("top1", "middle", "bottom1", "total", "bottom2", "bottom3")]
    assert list(m[f"allreduce-top1@{HASH}"]) == ["1-1", "1-0"]
    names = [m[f"allreduce-{p}@{HASH}"]["1-0"]["Op Name"] for p in ("top1", "middle", "bottom1", "bottom2", "bottom3")]
    assert names == [recs[i].name for i in (0, 2, 3, 2, 1)]  # fastest first: op 0 took 100 us, op 3 130 us
    total = m[f"allreduce-total@{HASH}"]["1-0"]
    assert total == {"Transport Type": "HCCS", "Transit Size(MB)": 4.0, "Transit Time(ms)": pytest.approx(0.46),
                     "Bandwidth(GB/s)": ratio(4.0, total["Transit Time(ms)"])}


def test_op_kinds_follow_msprofs_pattern():
    assert [op_kind(n) for n in ("hcom_allReduce__586_0_1", "hcom_allGather__1_2_1", "hcom_broadcast__3_0_1",
                                 "hcom_alltoall__3_0_1", "hcom_receive__1_0_1", "hcom_reduceScatter__9_1_1")] == \
        ["allreduce", "allgather", "broadcast", "alltoall", "receive", "reduce"]


def test_a_link_outside_the_group_is_refused_naming_the_collective():
    rec = record(ranks=(0, 1), links=((0, 7, "HCCS", MB, 1.0),))
    with pytest.raises(ValueError, match=r"hcom_allReduce__586_0_1 of group 'world': link 0-7"):
        communication_matrix_data([rec], in_step1)


# ---- steps ---------------------------------------------------------------------------------------------------

def test_ops_go_to_the_step_whose_window_holds_their_start_and_outside_ones_are_left_out():
    base = EPOCH_US * 1000
    windows = [(1, base, base + 1_000_000), (2, base + 1_000_000, base + 2_000_000)]
    recs = [record(0, start=10.0), record(1, start=1500.0), record(2, start=2500.0)]
    data = communication_data(recs, window_step_finder(windows, EPOCH_US), EPOCH_US)
    assert list(data) == ["step1", "step2"]
    assert [k.split("@")[0] for k in data["step2"]["collective"]] == [recs[1].name, "Total Op Info"]
    assert list(communication_data(recs, window_step_finder([], EPOCH_US), EPOCH_US)) == ["step"]


def test_no_collectives_give_empty_files():
    assert communication_data([], in_step1, EPOCH_US) == {}
    assert communication_matrix_data([], in_step1) == {}


# ---- invariants ----------------------------------------------------------------------------------------------

times = st.floats(min_value=0.0, max_value=1e7, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(times, times, times, times), min_size=1, max_size=6))
def test_elapse_is_transit_plus_wait_plus_idle_and_totals_are_the_sums(ops):
    recs = [record(i, start=s, wait=w, transit=t, idle=d) for i, (s, w, t, d) in enumerate(ops)]
    coll = communication_data(recs, in_step1, EPOCH_US)["step1"]["collective"]
    infos = [v["Communication Time Info"] for k, v in coll.items() if k != "Total Op Info"]
    for t in infos:
        assert t["Idle Time(ms)"] >= -1e-6
        assert t["Elapse Time(ms)"] == pytest.approx(t["Transit Time(ms)"] + t["Wait Time(ms)"] + t["Idle Time(ms)"],
                                                     abs=1e-9)
        assert 0 <= t["Wait Time Ratio"] <= 1
    total = coll["Total Op Info"]["Communication Time Info"]
    assert total["Elapse Time(ms)"] == pytest.approx(sum(t["Elapse Time(ms)"] for t in infos))
    json.loads(dumps(coll))  # always valid JSON (no NaN, no Infinity)


def test_writing_is_linear_in_the_collectives():
    """10x the collectives take about 10x the time (measured here only as a bound on the large case, in CPU
    seconds: tests/cpu_clock.py)."""
    from cpu_clock import cpu_seconds
    recs = [record(i, start=10.0 * i) for i in range(2000)]
    t0 = cpu_seconds()
    text = dumps(communication_data(recs, in_step1, EPOCH_US)) + dumps(communication_matrix_data(recs, in_step1))
    assert cpu_seconds() - t0 < 5.0 and len(text) > 2000 * 1000
