"""How long a collective's data takes to move: HCCL's algorithms costed with the alpha-beta model.

Source: HCCL's own documentation of its collective algorithms (CANN "Collective Communication Algorithms";
the hicann/hccl repository, docs/en/user_guide/coll_algo_intro/: Mesh.md, Ring.md, RHD.md, Pairwise.md,
algo_intro.md). HCCL costs every algorithm with the Hockney model: one step moving m bytes takes
alpha + m*beta (alpha = ``LinkSpec.latency_us``, beta = 1/``bandwidth_gbps``). With p ranks and n bytes:

=================  ============================  ===============================  ==========================
op                 mesh (full mesh, HCCS)        ring                             halving_doubling (RHD)
=================  ============================  ===============================  ==========================
reducescatter      a + n/p b                     (p-1)(a + n/p b)                 log2(p) a + (p-1)/p n b
allgather          a + n/p b                     (p-1)(a + n/p b)                 as reducescatter
allreduce          2a + 2n/p b  (RS + AG)        2(p-1)(a + n/p b)  (RS + AG)     2 log2(p) a + 2(p-1)/p n b
broadcast          2a + 2n/p b  (scatter + AG)   (p-1)(a + n b)                   ceil(log2 p)(a + n b)
alltoall           a + n/p b                     -                                -
=================  ============================  ===============================  ==========================

``pairwise`` (alltoall only) is mesh one peer at a time: (p-1)(a + n/p b). send/recv is one step a + n b.
RHD on a p that is no power of two adds HCCL's documented fold-in and fold-out steps (RHD.md). The reduction
term (gamma) is left out: the 910B's SDMA reduces in line, so its cost is inside the measured per-byte time.
``n`` is the buffer per rank (allgather: its output size; alltoall: what each rank sends in all).

Hierarchy (algo_intro.md, "Hierarchical Communication Principle", Atlas A2 single-operator mode): a group
spanning S servers of L ranks each runs intra-server stages with mesh over the ``intra`` link and one
inter-server stage, the chosen algorithm over the ``inter`` link among the ranks of the same local index:
allreduce = intra RS(n) + inter allreduce(n/L) + intra AG(n); reducescatter = inter RS(n) + intra RS(n/S);
allgather = intra AG(n/S) + inter AG(n); broadcast = intra scatter(n) + inter broadcast(n/L) + intra AG(n);
alltoall = intra alltoall(n) + inter alltoall(n).

Algorithm choice (`choose_algorithm`, ``auto``): within one server mesh, which is what HCCL uses over the
910B's full HCCS mesh (the profile's allreduce sends to all 7 peers at once, two messages each: RS then AG).
Across servers HCCL A2 picks "by product form, node count and data size" without publishing the thresholds;
the rule it documents for the Atlas training series (HCCL_ALGO: a power-of-two server count uses H-D_R, any
other count ring) is used. alltoall across servers uses pairwise (avoids the many-to-many on one RDMA port).

Everything here is a pure function of its arguments, memoised (collectives repeat), deterministic.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Iterable

from opsim.cluster.links import LINK_PRESETS, LinkSpec

OPS = ("allreduce", "allgather", "reducescatter", "broadcast", "alltoall", "send", "recv")
ALGORITHMS = ("ring", "mesh", "halving_doubling", "pairwise")
_P2P = frozenset({"send", "recv"})
_SUPPORTED = {op: ("ring", "mesh", "halving_doubling") for op in ("allreduce", "allgather", "reducescatter",
                                                                  "broadcast")}
_SUPPORTED["alltoall"] = ("mesh", "pairwise")
_SUPPORTED["send"] = _SUPPORTED["recv"] = ALGORITHMS  # one direct message whatever the name
MAX_RANKS = 1 << 20
"""Largest group accepted (a larger count is a typo; it would also make link plans huge)."""
MAX_BYTES = 1 << 53
"""Largest byte count accepted (exact in a float)."""
Row = tuple[int, int, str, int, float]
"""(src rank, dst rank, transport, bytes, time_us): one link a rank sends on."""


def _count(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{what} must be an integer from {low} to {high}, got {value!r:.60}")
    return value


def _check_op(op: Any) -> str:
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r:.60}; one of {', '.join(OPS)}")
    return op


def _check_algorithm(op: str, algorithm: Any) -> str:
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r:.60}; one of {', '.join(ALGORITHMS)} or auto")
    if algorithm not in _SUPPORTED[op]:
        raise ValueError(f"{op} has no {algorithm} algorithm in HCCL; use {' or '.join(_SUPPORTED[op])}")
    return algorithm


def choose_algorithm(op: str, n_ranks: int, ranks_per_server: int, requested: str = "auto") -> str:
    """The algorithm HCCL would use for `op` over `n_ranks` (see the module docstring), or `requested` when it
    is not "auto" (checked: pairwise is alltoall's only, alltoall has no ring or RHD)."""
    _check_op(op)
    _count(n_ranks, "n_ranks", 1, MAX_RANKS)
    _count(ranks_per_server, "ranks_per_server", 1, MAX_RANKS)
    if requested != "auto":
        return _check_algorithm(op, requested)
    servers = -(-n_ranks // ranks_per_server)
    if op in _P2P or servers == 1:
        return "mesh"
    if op == "alltoall":
        return "pairwise"
    return "halving_doubling" if servers & (servers - 1) == 0 else "ring"


# --- flat (one level) costs ---------------------------------------------------------------------------------

def _rhd_scatter(p: int, n: float, a: float, b: float) -> float:
    """RHD reducescatter (allgather alike), RHD.md: power of two, else fold-in + uneven halving + scatter."""
    k = p.bit_length() - 1
    if p == 1 << k:
        return k * a + (p - 1) / p * n * b
    halving = sum(a + math.ceil(p / (1 << i)) * n / p * b for i in range(1, k + 1))
    return (a + n * b) + halving + (a + n / p * b)


def _flat(op: str, alg: str, p: int, n: float, link: LinkSpec) -> float:
    """One level: `op` by `alg` among p ranks on `link` (p >= 2)."""
    a, b = link.latency_us, link.us_per_byte
    if op in _P2P:
        return a + n * b
    if alg == "mesh":
        steps = 2 if op in ("allreduce", "broadcast") else 1
        return steps * (a + n / p * b)
    if alg == "pairwise":
        return (p - 1) * (a + n / p * b)
    if alg == "ring":
        if op == "broadcast":
            return (p - 1) * (a + n * b)
        return (2 if op == "allreduce" else 1) * (p - 1) * (a + n / p * b)
    k = p.bit_length() - 1  # halving_doubling
    if op == "broadcast":
        return math.ceil(math.log2(p)) * (a + n * b)
    if op != "allreduce":
        return _rhd_scatter(p, n, a, b)
    if p == 1 << k:
        return 2 * k * a + 2 * (p - 1) / p * n * b
    q = 1 << k
    return (2 * k + 2) * a + (2 * (q - 1) / q + 2) * n * b


@lru_cache(maxsize=65536)
def _time(op: str, n: int, servers: int, local: int, alg: str, intra: LinkSpec, inter: LinkSpec) -> float:
    if servers * local <= 1 or (op in _P2P and servers == 1 and local < 2):
        return 0.0
    if servers == 1:
        return _flat(op, alg, local, float(n), intra)
    if local == 1:
        return _flat(op, alg, servers, float(n), inter)
    if op in _P2P:
        return _flat(op, alg, 2, float(n), inter)
    mesh = lambda o, m: _flat(o, "mesh", local, m, intra)  # noqa: E731 - the intra-server stages
    if op == "allreduce":
        return mesh("reducescatter", n) + _flat(op, alg, servers, n / local, inter) + mesh("allgather", n)
    if op == "reducescatter":
        return _flat(op, alg, servers, float(n), inter) + mesh(op, n / servers)
    if op == "allgather":
        return mesh(op, n / servers) + _flat(op, alg, servers, float(n), inter)
    if op == "broadcast":
        scatter = intra.latency_us + n / local * intra.us_per_byte
        return 2 * scatter + _flat(op, alg, servers, n / local, inter)
    return mesh(op, n) + _flat(op, alg, servers, float(n), inter)  # alltoall


def _shape(n_ranks: int, ranks_per_server: int, ranks: Iterable[int] | None) -> tuple[int, int]:
    """(servers, ranks per server) of a group: from its rank ids when given, else packed."""
    if ranks is None:
        return -(-n_ranks // ranks_per_server), min(n_ranks, ranks_per_server)
    per: dict[int, int] = {}
    for r in ranks:
        per[r // ranks_per_server] = per.get(r // ranks_per_server, 0) + 1
    return len(per), max(per.values(), default=1)


def transfer_time_us(op: str, nbytes: int, n_ranks: int, *, algorithm: str, intra: LinkSpec,
                     inter: LinkSpec | None = None, ranks_per_server: int = 8,
                     ranks: tuple[int, ...] | None = None) -> float:
    """Microseconds the data of one `op` instance takes to move (the collective's Transit Time).

    `nbytes` is the buffer per rank (allgather: the output size). A group on one server uses `intra` only;
    across servers the hierarchy of the module docstring applies, `inter` (default: `intra`) between servers.
    `ranks` (optional, the group's rank ids) places the group on its servers exactly (a send/recv pair on two
    servers goes over `inter`); without it the group is packed from rank 0. 0 for a single rank."""
    _check_op(op)
    _count(nbytes, "nbytes", 0, MAX_BYTES)
    _count(n_ranks, "n_ranks", 1, MAX_RANKS)
    _count(ranks_per_server, "ranks_per_server", 1, MAX_RANKS)
    _check_algorithm(op, algorithm)
    if ranks is not None:
        ranks = tuple(ranks)
        if len(ranks) != n_ranks:
            raise ValueError(f"ranks has {len(ranks)} entries but n_ranks is {n_ranks}")
    servers, local = _shape(n_ranks, ranks_per_server, ranks)
    return _time(op, nbytes, servers, local, algorithm, intra, inter if inter is not None else intra)


# --- link plans: the rows of communication_matrix.json -----------------------------------------------------

def _stage_rows(op: str, alg: str, members: tuple[int, ...], me: int, n: float) -> dict[int, list[float]]:
    """{peer: [bytes, messages]} `me` sends in one stage of `op` by `alg` among `members` (LOCAL under -1)."""
    p = len(members)
    i = members.index(me)
    out: dict[int, list[float]] = {}

    def add(peer: int, nbytes: float, msgs: int) -> None:
        row = out.setdefault(peer, [0.0, 0])
        row[0] += nbytes
        row[1] += msgs
    if alg in ("mesh", "pairwise"):
        two = 2 if op in ("allreduce", "broadcast") else 1
        for peer in members:
            if peer != me:
                add(peer, two * n / p, two)
        if op != "broadcast" and alg == "mesh":
            add(-1, two * n / p, two)  # the rank's own chunk, copied locally
    elif alg == "ring":
        right = members[(i + 1) % p]
        if op == "broadcast":
            add(right, n, 1)
        else:
            steps = (2 if op == "allreduce" else 1) * (p - 1)
            add(right, steps * n / p, steps)
    else:
        _rhd_rows(op, members, i, n, add)
    return out


def _rhd_rows(op: str, members: tuple[int, ...], i: int, n: float, add: Any) -> None:
    """RHD partners: ranks past the largest power of two fold into the core, which halves and doubles."""
    p = len(members)
    k = p.bit_length() - 1
    q = 1 << k
    if i >= q:  # folded in: sends its whole buffer to its core partner
        add(members[i - q], n, 1)
        return
    if op == "broadcast":
        for j in range(k + (q < p)):
            if i < (1 << j) and i + (1 << j) < p:
                add(members[i + (1 << j)], n, 1)
        return
    phases = 2 if op == "allreduce" else 1
    for j in range(k):
        add(members[i ^ (q >> (j + 1))], phases * n / (2 << j), phases)
    if op == "allreduce" and i + q < p:  # fold out: the result back to the folded rank
        add(members[i + q], n, 1)


def _servers(group: tuple[int, ...], rps: int) -> list[tuple[int, ...]]:
    per: dict[int, list[int]] = {}
    for r in group:
        per.setdefault(r // rps, []).append(r)
    return [tuple(v) for _k, v in sorted(per.items())]


@lru_cache(maxsize=8192)  # a plan holds a row per peer: a smaller cache bounds memory for large groups
def _plan(op: str, n: int, group: tuple[int, ...], rank: int, alg: str, rps: int, intra: LinkSpec,
          inter: LinkSpec, local: LinkSpec) -> tuple[Row, ...]:
    if len(group) < 2:
        return ()
    servers = _servers(group, rps)
    mine = next(s for s in servers if rank in s)
    if op in _P2P:
        peer = next(r for r in group if r != rank)
        link = intra if len(servers) == 1 else inter
        src, dst = (rank, peer) if op == "send" else (peer, rank)
        return tuple(sorted(((src, dst, link.transport, n, link.latency_us + n * link.us_per_byte),
                             _local_row(rank, float(n), local))))
    stages: list[tuple[dict[int, list[float]], LinkSpec]] = []
    if len(servers) == 1:
        stages.append((_stage_rows(op, alg, mine, rank, float(n)), intra))
    else:
        s, big = len(servers), max(len(v) for v in servers)
        idx = mine.index(rank)
        same = tuple(v[idx] for v in servers if idx < len(v))
        inter_n = {"allreduce": n / big, "broadcast": n / big}.get(op, float(n))
        intra_n = {"reducescatter": n / s, "allgather": n / s}.get(op, float(n))
        if len(mine) > 1:
            intra_op = {"allreduce": "reducescatter"}.get(op, op)
            stages.append((_stage_rows(intra_op, "mesh", mine, rank, intra_n), intra))
            if op == "allreduce":
                stages.append((_stage_rows("allgather", "mesh", mine, rank, intra_n), intra))
        if len(same) > 1:
            stages.append((_stage_rows(op, alg, same, rank, inter_n), inter))
    merged: dict[int, tuple[str, float, float]] = {}
    for rows, link in stages:
        for peer, (nbytes, msgs) in rows.items():
            use = local if peer == -1 else link
            t = msgs * use.latency_us + nbytes * use.us_per_byte
            old = merged.get(peer, (use.transport, 0.0, 0.0))
            merged[peer] = (use.transport, old[1] + nbytes, old[2] + t)
    if -1 not in merged:  # assumed for every algorithm: the op mode stages a rank's own chunk through its buffer
        _s, _d, tr, b, t = _local_row(rank, n / len(group), local)
        merged[-1] = (tr, float(b), t)
    return tuple((rank, rank if peer == -1 else peer, tr, int(round(b)), t)
                 for peer, (tr, b, t) in sorted(merged.items()))


def _local_row(rank: int, nbytes: float, local: LinkSpec) -> Row:
    """The rank's LOCAL row (``rank``-``rank``): one copy of `nbytes` on the local link. The shared profile's
    mesh allreduces show it; HCCL's single-operator mode stages data through its own buffer for every
    algorithm, and msprof-analyze places a rank's links in the cluster by this row."""
    return (rank, rank, local.transport, int(round(nbytes)), local.latency_us + nbytes * local.us_per_byte)


def link_plan(op: str, nbytes: int, group_ranks: Iterable[int], rank: int, *, algorithm: str,
              ranks_per_server: int = 8, intra: LinkSpec, inter: LinkSpec | None = None,
              local: LinkSpec | None = None) -> tuple[Row, ...]:
    """The (src, dst, transport, bytes, time_us) rows `rank` sends in one `op` over `group_ranks`: what its
    communication_matrix.json shows. Every plan has a LOCAL row (``rank``-``rank``: the copy of its own chunk,
    timed on `local`, default the ``local-910b`` preset), as the shared 910B profile's mesh allreduces do
    (for the other algorithms and send/recv an assumption: `_local_row`). A row's
    time is its messages' alpha plus its bytes' beta on that link (links run in parallel, so the rows do not
    add up to the transit time). recv gives the row it receives (msprof lists a p2p link on both ends)."""
    _check_op(op)
    _count(nbytes, "nbytes", 0, MAX_BYTES)
    _count(ranks_per_server, "ranks_per_server", 1, MAX_RANKS)
    _check_algorithm(op, algorithm)
    group = tuple(group_ranks)
    if len(group) > MAX_RANKS or len(set(group)) != len(group) or rank not in group:
        raise ValueError(f"rank {rank!r:.20} must be one of {len(group)} distinct group ranks")
    if op in _P2P and len(group) != 2:
        raise ValueError(f"{op} needs a group of exactly 2 ranks (the pair), got {len(group)}")
    return _plan(op, nbytes, group, rank, algorithm, ranks_per_server, intra,
                 inter if inter is not None else intra, local if local is not None else LINK_PRESETS["local-910b"])


__all__ = ["ALGORITHMS", "MAX_BYTES", "MAX_RANKS", "OPS", "Row", "choose_algorithm", "link_plan",
           "transfer_time_us"]
