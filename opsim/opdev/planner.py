"""Workspace planner: opbase's MaxAllocator (bucket reuse, the only planner of the normal flow) and the
deprecated LinearAllocator, over the planning list of `KernelGraph.calc_life_time_and_size`.

MaxAllocator rule (memory_allocator.cpp): for each listed tensor, skip it if its storage already holds the
placeholder offset (placed earlier in this pass); otherwise put it in the *last* bucket, in creation order,
whose most recently added tensor B has a lifetime that does not overlap (equal starts always overlap) and
is not, by object identity, an input of the new tensor's node; else open a new bucket. Buckets are laid out
in creation order and every tensor gets its bucket's offset.

`plan_max` implements that rule exactly without scanning every bucket: the planning list is in node order,
so a bucket becomes reusable once its last tensor's end falls below the current start and stays reusable
until it receives a tensor. Reusable buckets sit in max-heaps by creation index (one for buckets whose last
tensor is a null workspace element, which a node with a null input cannot reuse), so "last reusable bucket"
is the heap top after setting aside the few buckets whose last tensor is an input of the current node.
`plan_max_reference` is the direct O(n x buckets) transcription it is checked against.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from heapq import heappop, heappush
from typing import Sequence

from opsim.errors import InvalidArgumentError
from opsim.opdev.graph import KernelGraph, KernelTensor

#: Offset written to a storage while it is being placed (opbase's OFFSET_PLACEHOLDER = UINT64_MAX).
OFFSET_PLACEHOLDER = 0xFFFFFFFFFFFFFFFF
EXTRA_SIZE_IN_BYTE = 32
ALIGN_SIZE_IN_BYTE = 512

_ALIGN_ADD = EXTRA_SIZE_IN_BYTE + ALIGN_SIZE_IN_BYTE - 1
_ALIGN_MASK = ~(ALIGN_SIZE_IN_BYTE - 1)


def align(n: int) -> int:
    """Align: 32 guard bytes added before rounding up to 512 (Align(0) = 512, Align(481) = 1024)."""
    return (n + _ALIGN_ADD) & _ALIGN_MASK


@dataclass(slots=True)
class Bucket:
    """One reused region: its offset, its size (max aligned size of its tensors) and its entry indices."""

    offset: int
    size: int
    entries: list[int]


@dataclass(slots=True)
class PlanResult:
    """A planning pass. `offsets[i]` is the offset entry i ended with (for a skipped entry: its storage's
    final offset); `skipped` lists the entries the MaxAllocator skipped (storage already placed)."""

    total: int
    offsets: list[int]
    buckets: list[Bucket]
    entries: list[KernelTensor]
    skipped: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class AliasingHazard:
    """Two tensors share a bucket although the earlier one's storage is still used by a node at or after
    the later one's start (the in-place lifetime truncation opbase reproduces; worth a diagnostic)."""

    earlier: int  # entry index
    later: int  # entry index
    last_use: int  # last node that references the earlier tensor's storage


def plan_max(entries: Sequence[KernelTensor]) -> PlanResult:
    """MaxAllocator over the planning list; writes every placed storage's `workspace_offset`.

    Exact for any list; lists in node order (non-decreasing starts, end >= start, which is what
    `calc_life_time_and_size` produces) take the heap path, anything else continues with the bucket scan
    from the first out-of-order entry.
    """
    entries = list(entries)
    sizes: list[int] = []
    members: list[list[int]] = []
    skipped: list[int] = []
    entry_bucket = [-1] * len(entries)
    stop = _place_in_order(entries, sizes, members, skipped, entry_bucket)
    if stop < len(entries):
        _scan_allocate(entries, stop, sizes, members, skipped)
        return _finish(entries, sizes, members, skipped)
    return _lay_out(entries, sizes, members, skipped, entry_bucket)


def _place_in_order(entries: list[KernelTensor], sizes: list[int], members: list[list[int]], skipped: list[int],
                    entry_bucket: list[int]) -> int:
    """plan_max's heap path: entries placed (`entry_bucket`, storages marked) or skipped up to the first one out
    of node order, whose index it returns (len(entries): none)."""
    ph = OFFSET_PLACEHOLDER
    last_id: list[int] = []  # id() of each bucket's last tensor object, 0 for a null entry
    ends: list[int] = []  # heap of distinct last-ends of buckets not yet reusable
    waiting: dict[int, list[int]] = {}  # last end -> buckets not yet reusable
    free: list[int] = []  # max-heap (negated) of reusable buckets whose last tensor is non-null
    free_null: list[int] = []  # same, last tensor null
    cur = entries[0].start if entries else 0
    i = -1
    for kt in entries:
        i += 1
        t = kt.tensor
        tid = 0
        if t is not None:
            st = t.storage
            if st.workspace_offset == ph:
                skipped.append(i)
                continue
            tid = id(t)
        s, e = kt.start, kt.end
        if s != cur or e < s:
            if s < cur or e < s:
                return i
            cur = s
            while ends and ends[0] < s:  # buckets whose last tensor ended become reusable
                for b in waiting.pop(heappop(ends)):
                    heappush(free if last_id[b] else free_null, -b)
        node = kt.node
        stash = (_set_aside(free, last_id, node.input_ids) if free and node is not None
                 and last_id[-free[0]] in node.input_ids else None)
        best = -free[0] if free else -1
        if free_null and -free_null[0] > best and (node is None or not node.has_null_input):
            best = -heappop(free_null)
        elif best >= 0:
            heappop(free)
        if stash is not None:
            for nb in stash:
                heappush(free, nb)
        a = (kt.size + _ALIGN_ADD) & _ALIGN_MASK
        if best < 0:
            best = len(sizes)
            sizes.append(a), members.append([i]), last_id.append(tid)
        else:
            if a > sizes[best]:
                sizes[best] = a
            members[best].append(i)
            last_id[best] = tid
        entry_bucket[i] = best
        lst = waiting.get(e)
        if lst is None:
            waiting[e] = [best]
            heappush(ends, e)
        else:
            lst.append(best)
        if t is not None:
            st.workspace_offset = ph
    return len(entries)


def _set_aside(free: list[int], last_id: list[int], input_ids: frozenset) -> list[int]:
    """The reusable buckets on top of `free` whose last tensor is an input of the node being placed, taken off
    (the caller puts them back once it has chosen)."""
    stash = []
    while free and last_id[-free[0]] in input_ids:
        stash.append(heappop(free))
    return stash


def _lay_out(entries: list[KernelTensor], sizes: list[int], members: list[list[int]], skipped: list[int],
             entry_bucket: list[int]) -> PlanResult:
    """UpdateOffset after the heap path, over flat lists rather than bucket by bucket (same result: one offset
    per bucket), the storages written in placement order."""
    bucket_offset = []
    total = 0
    for size in sizes:
        bucket_offset.append(total)
        total += size
    for kt, b in zip(entries, entry_bucket):
        if b >= 0 and (t := kt.tensor) is not None:
            t.storage.workspace_offset = bucket_offset[b]
    offsets = [bucket_offset[b] for b in entry_bucket]
    for i in skipped:
        offsets[i] = entries[i].tensor.storage.workspace_offset
    buckets = [Bucket(off, size, idxs) for off, size, idxs in zip(bucket_offset, sizes, members)]
    return PlanResult(total, offsets, buckets, entries, skipped)


def plan_max_reference(entries: Sequence[KernelTensor]) -> PlanResult:
    """MaxAllocator transcribed line by line (scan every bucket, keep the last reusable one)."""
    entries = list(entries)
    sizes: list[int] = []
    refs: list[list[int]] = []
    skipped: list[int] = []
    _scan_allocate(entries, 0, sizes, refs, skipped)
    return _finish(entries, sizes, refs, skipped)


def _scan_allocate(entries: list[KernelTensor], begin: int, sizes: list[int], refs: list[list[int]],
                   skipped: list[int]) -> None:
    """MaxAllocator::Allocate's first loop from entry `begin`, extending the given bucket state."""
    for i in range(begin, len(entries)):
        kt = entries[i]
        t = kt.tensor
        if t is not None and t.storage.workspace_offset == OFFSET_PLACEHOLDER:
            skipped.append(i)
            continue
        fit = -1
        for b in range(len(refs)):
            if not refs[b]:
                fit = b
                continue
            back = entries[refs[b][-1]]
            if back.is_life_time_not_overlap(kt) and not back.is_input_of(kt):
                fit = b
        if fit < 0:
            sizes.append(0)
            refs.append([])
            fit = len(refs) - 1
        sizes[fit] = max(sizes[fit], align(kt.size))
        refs[fit].append(i)
        if t is not None:
            t.storage.workspace_offset = OFFSET_PLACEHOLDER


def _finish(entries: list[KernelTensor], sizes: list[int], members: list[list[int]],
            skipped: list[int]) -> PlanResult:
    """UpdateOffset: buckets laid out in creation order, offsets written to the storages."""
    offsets = [0] * len(entries)
    buckets: list[Bucket] = []
    total = 0
    for size, idxs in zip(sizes, members):
        for i in idxs:
            offsets[i] = total
            t = entries[i].tensor
            if t is not None:
                t.storage.workspace_offset = total
        buckets.append(Bucket(total, size, idxs))
        total += size
    for i in skipped:
        offsets[i] = entries[i].tensor.storage.workspace_offset
    return PlanResult(total, offsets, buckets, entries, skipped)


def plan_linear(entries: Sequence[KernelTensor]) -> PlanResult:
    """LinearAllocator (deprecated GetLinearWorkspaceSize): every entry its own slot, no skip, no reuse;
    a storage listed twice ends with its last slot's offset."""
    entries = list(entries)
    offsets = [0] * len(entries)
    buckets: list[Bucket] = []
    total = 0
    for i, kt in enumerate(entries):
        offsets[i] = total
        t = kt.tensor
        if t is not None:
            t.storage.workspace_offset = total
        a = align(kt.size)
        buckets.append(Bucket(total, a, [i]))
        total += a
    return PlanResult(total, offsets, buckets, entries)


_STRATEGIES = {"max": plan_max, "linear": plan_linear}


def plan_graph(graph: KernelGraph, strategy: str = "max") -> PlanResult:
    """Lifetime pass + allocator: what GetWorkspaceSize ("max") / GetLinearWorkspaceSize ("linear") plan."""
    try:
        allocate = _STRATEGIES[strategy]
    except KeyError:
        raise InvalidArgumentError(
            f"workspace planner strategy {strategy!r} is unknown; use 'max' (opbase's default) or 'linear'"
        ) from None
    return allocate(graph.calc_life_time_and_size())


def plan_workspace(graph: KernelGraph, strategy: str = "max") -> int:
    """The planned workspace total in bytes (a multiple of 512, 0 when nothing is planned)."""
    if strategy in _STRATEGIES and _nothing_to_plan(graph):
        return 0  # an empty planning list: both allocators place nothing and total 0
    return plan_graph(graph, strategy).total


def _nothing_to_plan(graph: KernelGraph) -> bool:
    """No workspace entry and no from-workspace output: `calc_life_time_and_size` would list nothing."""
    for node in graph.nodes:
        if node.workspaces:
            return False
        for out in node.outputs:
            if out.tensor.storage.from_workspace:
                return False
    return True


def find_aliasing_hazards(graph: KernelGraph, result: PlanResult) -> list[AliasingHazard]:
    """Bucket neighbours whose earlier tensor's storage is still referenced by a node at or after the later
    tensor's start. A faithful plan can contain these (in-place re-production, workspace tensors read by a
    later node); the simulator reports them instead of silently aliasing."""
    last_use: dict[int, int] = {}
    for node in graph.nodes:
        k = node.topo_id
        for group in (node.inputs, node.outputs, node.workspaces):
            for kt in group:
                if kt.tensor is not None:
                    last_use[id(kt.tensor.storage)] = k
    entries = result.entries
    hazards: list[AliasingHazard] = []
    for bucket in result.buckets:
        idxs = bucket.entries
        for a, b in zip(idxs, idxs[1:]):
            t = entries[a].tensor
            if t is None:
                continue
            use = last_use.get(id(t.storage), entries[a].end)
            if use >= entries[b].start:
                hazards.append(AliasingHazard(a, b, use))
    return hazards


__all__ = [
    "OFFSET_PLACEHOLDER", "EXTRA_SIZE_IN_BYTE", "ALIGN_SIZE_IN_BYTE", "align", "Bucket", "PlanResult",
    "AliasingHazard", "plan_max", "plan_max_reference", "plan_linear", "plan_graph", "plan_workspace",
    "find_aliasing_hazards",
]
