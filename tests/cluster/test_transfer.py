"""The transfer model: HCCL's alpha-beta costs per algorithm, the algorithm choice, link plans and presets."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.cluster.links import LINK_PRESETS, LinkSpec, get_link
from opsim.cluster.transfer import (ALGORITHMS, MAX_BYTES, OPS, choose_algorithm, link_plan, transfer_time_us)

HCCS = get_link("hccs-910b")
ROCE = get_link("roce-200g")
COLLECTIVES = ("allreduce", "allgather", "reducescatter", "broadcast")
ops_algos = st.sampled_from([(op, a) for op in OPS for a in ALGORITHMS
                             if not (op == "alltoall" and a in ("ring", "halving_doubling"))
                             and not (op in COLLECTIVES and a == "pairwise")])
sizes = st.integers(min_value=0, max_value=1 << 34)
ranks = st.integers(min_value=1, max_value=64)
per_server = st.sampled_from([1, 2, 4, 8, 16])
links = st.builds(lambda bw, lat: LinkSpec("x", "HCCS", bw, lat, "test"),
                  st.floats(0.01, 1000.0), st.floats(0.0, 100.0))


def t(op, n, p, alg, rps=8, intra=HCCS, inter=ROCE, **kw):
    return transfer_time_us(op, n, p, algorithm=alg, intra=intra, inter=inter, ranks_per_server=rps, **kw)


@settings(max_examples=300, deadline=None)
@given(ops_algos, sizes, sizes, ranks, per_server, links, links)
def test_monotone_in_bytes_and_non_negative(oa, n1, n2, p, rps, intra, inter):
    """More bytes never take less time, and no time is negative."""
    op, alg = oa
    lo, hi = sorted((n1, n2))
    a, b = t(op, lo, p, alg, rps, intra, inter), t(op, hi, p, alg, rps, intra, inter)
    assert 0.0 <= a <= b + 1e-9 * max(b, 1.0)
    assert math.isfinite(b)


@given(ops_algos, sizes, per_server, links)
def test_single_rank_costs_nothing(oa, n, rps, link):
    """A group of one moves no data."""
    op, alg = oa
    assert t(op, n, 1, alg, rps, link, link) == 0.0


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["ring", "mesh"]), sizes, st.integers(2, 64), links)
def test_allreduce_is_reducescatter_plus_allgather(alg, n, p, link):
    """Ring and mesh allreduce are HCCL's reduce-scatter followed by all-gather (one server)."""
    ar = t("allreduce", n, p, alg, rps=p, intra=link, inter=link)
    both = t("reducescatter", n, p, alg, rps=p, intra=link, inter=link) + t("allgather", n, p, alg, rps=p,
                                                                             intra=link, inter=link)
    assert ar == pytest.approx(both, rel=1e-12, abs=1e-9)


@given(sizes, st.sampled_from([2, 4, 8, 16, 32, 64]), links)
def test_rhd_power_of_two_allreduce_is_rs_plus_ag(n, p, link):
    """RHD on a power of two: allreduce = reducescatter + allgather (RHD.md)."""
    kw = dict(rps=p, intra=link, inter=link)
    assert t("allreduce", n, p, "halving_doubling", **kw) == pytest.approx(
        t("reducescatter", n, p, "halving_doubling", **kw) + t("allgather", n, p, "halving_doubling", **kw),
        rel=1e-12, abs=1e-9)


@given(st.sampled_from(COLLECTIVES), st.integers(1, 1 << 30), st.integers(2, 32))
def test_faster_link_is_never_slower(op, n, p):
    """Doubling the bandwidth never lengthens a collective."""
    fast = get_link("hccs-910b", bandwidth_gbps=HCCS.bandwidth_gbps * 2)
    assert t(op, n, p, "ring", p, fast, fast) <= t(op, n, p, "ring", p, HCCS, HCCS)


def test_documented_formulas():
    """Spot values of HCCL's tables (Mesh.md, Ring.md, RHD.md, Pairwise.md) with alpha 10 us, 1 GB/s."""
    link = LinkSpec("x", "HCCS", 1.0, 10.0, "test")  # beta = 1e-3 us per byte
    n = 8_000_000
    kw = dict(rps=64, intra=link, inter=link)
    assert t("allreduce", n, 8, "mesh", **kw) == pytest.approx(2 * 10 + 2 * n / 8 * 1e-3)
    assert t("allreduce", n, 8, "ring", **kw) == pytest.approx(2 * 7 * (10 + n / 8 * 1e-3))
    assert t("allreduce", n, 8, "halving_doubling", **kw) == pytest.approx(2 * 3 * 10 + 2 * 7 / 8 * n * 1e-3)
    assert t("alltoall", n, 8, "pairwise", **kw) == pytest.approx(7 * (10 + n / 8 * 1e-3))
    assert t("broadcast", n, 8, "ring", **kw) == pytest.approx(7 * (10 + n * 1e-3))
    assert t("send", n, 2, "mesh", **kw) == pytest.approx(10 + n * 1e-3)
    # RHD, 6 ranks (not a power of two): fold-in + two uneven halvings + scatter (RHD.md)
    rs = (10 + n * 1e-3) + (10 + 3 * n / 6 * 1e-3) + (10 + 2 * n / 6 * 1e-3) + (10 + n / 6 * 1e-3)
    assert t("reducescatter", n, 6, "halving_doubling", **kw) == pytest.approx(rs)
    assert t("allreduce", n, 6, "halving_doubling", **kw) == pytest.approx(6 * 10 + (2 * 3 / 4 + 2) * n * 1e-3)


def test_hierarchy_two_servers():
    """16 ranks on 2 servers: intra mesh RS + inter allreduce of n/8 + intra mesh AG (algo_intro.md)."""
    n = 151_011_328
    intra_rs = HCCS.latency_us + n / 8 * HCCS.us_per_byte
    inter = 2 * (ROCE.latency_us + n / 8 / 2 * ROCE.us_per_byte)  # RHD over 2 servers, n/8 each
    assert t("allreduce", n, 16, "halving_doubling") == pytest.approx(2 * intra_rs + inter)
    # a send between servers goes over the inter-server link when the ranks are given
    assert t("send", 1000, 2, "mesh", ranks=(0, 9)) == pytest.approx(ROCE.latency_us + 1000 * ROCE.us_per_byte)
    assert t("send", 1000, 2, "mesh", ranks=(0, 1)) == pytest.approx(HCCS.latency_us + 1000 * HCCS.us_per_byte)


def test_choose_algorithm_as_hccl_documents():
    """Mesh in a server; RHD across a power-of-two server count, ring otherwise; pairwise alltoall across."""
    assert choose_algorithm("allreduce", 8, 8) == "mesh"
    assert choose_algorithm("allreduce", 1, 8) == "mesh"
    assert choose_algorithm("allreduce", 16, 8) == "halving_doubling"
    assert choose_algorithm("allreduce", 24, 8) == "ring"
    assert choose_algorithm("alltoall", 8, 8) == "mesh"
    assert choose_algorithm("alltoall", 16, 8) == "pairwise"
    assert choose_algorithm("send", 2, 1) == "mesh"
    assert choose_algorithm("allreduce", 16, 8, "ring") == "ring"
    with pytest.raises(ValueError, match="alltoall has no ring"):
        choose_algorithm("alltoall", 8, 8, "ring")
    with pytest.raises(ValueError, match="unknown algorithm 'tree'"):
        choose_algorithm("allreduce", 8, 8, "tree")
    with pytest.raises(ValueError, match="unknown collective 'gather'"):
        choose_algorithm("gather", 8, 8)


@pytest.mark.parametrize("bad", [-1, True, 1.5, "8", MAX_BYTES + 1, 10 ** 400])
def test_bad_sizes_refused(bad):
    """Negative, boolean, fractional, textual and absurd byte counts are refused, naming nbytes."""
    with pytest.raises(ValueError, match="nbytes"):
        t("allreduce", bad, 8, "mesh")


def test_bad_rank_counts_refused():
    with pytest.raises(ValueError, match="n_ranks"):
        t("allreduce", 8, 0, "mesh")
    with pytest.raises(ValueError, match="n_ranks"):
        t("allreduce", 8, 10 ** 30, "mesh")


def test_link_plan_matches_the_shared_profile_layout():
    """Rank 0 of an 8-rank 910B allreduce: one LOCAL row 0-0 and seven HCCS rows 0-1..0-7, each 2 n/8 bytes
    (communication_matrix.json of ../shared/real-profiles/alexnet-910b: 37.78 MB per peer for a 151 MB buffer)."""
    n = 151_011_328
    rows = link_plan("allreduce", n, tuple(range(8)), 0, algorithm="mesh", intra=HCCS)
    assert [(s, d, tr) for s, d, tr, _b, _t in rows] == [(0, 0, "LOCAL")] + [(0, d, "HCCS") for d in range(1, 8)]
    assert all(b == n // 4 for *_x, b, _t in rows)
    assert rows[1][4] == pytest.approx(2 * (HCCS.latency_us + n / 8 * HCCS.us_per_byte))


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(COLLECTIVES + ("alltoall",)), st.integers(1, 1 << 30), st.integers(2, 40),
       st.sampled_from([1, 4, 8]), st.data())
def test_link_plan_rows_are_sane(op, n, p, rps, data):
    """Rows (none only for a broadcast leaf) start at the rank, name a group member, carry non-negative bytes
    and times, and name each peer once."""
    alg = choose_algorithm(op, p, rps)
    rank = data.draw(st.integers(0, p - 1))
    rows = link_plan(op, n, tuple(range(p)), rank, algorithm=alg, ranks_per_server=rps, intra=HCCS, inter=ROCE)
    assert rows or op == "broadcast"
    assert all(s == rank and 0 <= d < p and b >= 0 and tm >= 0 for s, d, _tr, b, tm in rows)
    assert len({d for _s, d, *_x in rows}) == len(rows)
    assert {tr for *_x, tr, _b, _t in rows} <= {"HCCS", "RDMA", "LOCAL"}
    assert not rows or (rank, rank, "LOCAL") in {r[:3] for r in rows}  # msprof-analyze places a rank by it


def test_link_plan_p2p_and_errors():
    send = link_plan("send", 64, (2, 9), 2, algorithm="mesh", intra=HCCS, inter=ROCE)
    recv = link_plan("recv", 64, (2, 9), 9, algorithm="mesh", intra=HCCS, inter=ROCE)
    assert [r[:4] for r in send] == [(2, 2, "LOCAL", 64), (2, 9, "RDMA", 64)]
    assert [r[:4] for r in recv] == [(2, 9, "RDMA", 64), (9, 9, "LOCAL", 64)]
    assert link_plan("allreduce", 64, (3,), 3, algorithm="mesh", intra=HCCS) == ()
    with pytest.raises(ValueError, match="group ranks"):
        link_plan("allreduce", 64, (0, 1), 5, algorithm="mesh", intra=HCCS)
    with pytest.raises(ValueError, match="exactly 2"):
        link_plan("send", 64, (0, 1, 2), 0, algorithm="mesh", intra=HCCS)


def test_presets_and_overrides():
    """Every preset is usable and says where its numbers come from; overrides are checked."""
    assert {"hccs-910b", "roce-100g", "roce-200g", "pcie-gen4", "local-910b"} <= set(LINK_PRESETS)
    for spec in LINK_PRESETS.values():
        assert spec.bandwidth_gbps > 0 and spec.latency_us >= 0
        assert spec.provenance.split(":")[0].split(",")[0] in ("measured", "derived")
    fast = get_link("hccs-910b", bandwidth_gbps=34.48)
    assert fast.bandwidth_gbps == 34.48 and "34.48 given" in fast.provenance
    with pytest.raises(ValueError, match="known presets: hccs-910b"):
        get_link("nvlink")
    with pytest.raises(ValueError, match="unknown field.*bandwith_gbps"):
        get_link("hccs-910b", bandwith_gbps=3)
    for bad in (0, -1, float("nan"), float("inf"), "fast", True, 10 ** 400):
        with pytest.raises(ValueError, match="bandwidth_gbps"):
            get_link("hccs-910b", bandwidth_gbps=bad)
    assert get_link("hccs-910b", latency_us=0).latency_us == 0.0


def test_fast_and_memoised():
    """A repeated collective costs a dictionary look-up (called once per collective instance)."""
    from cpu_clock import cpu_seconds  # CPU seconds: a loaded machine stretches wall time
    start = cpu_seconds()
    for _ in range(20000):
        t("allreduce", 151_011_328, 16, "halving_doubling")
        link_plan("allreduce", 151_011_328, tuple(range(16)), 3, algorithm="halving_doubling", intra=HCCS,
                  inter=ROCE)
    assert cpu_seconds() - start < 5.0  # typical is well under 1 s
