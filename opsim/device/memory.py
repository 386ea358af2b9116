"""Device memory (HBM): a real address space with a free-list allocator and, optionally, real bytes.

Addresses start at ``BASE_ADDRESS``; sizes and addresses are multiples of ``ALIGNMENT`` (512 bytes).
Allocation is a free list kept sorted by address, with neighbouring free blocks merged on every free:

- ``first_fit`` takes the lowest-addressed free block large enough. Cheap (stops at the first match) and it
  keeps live data packed towards low addresses, so long-lived blocks fragment the top of memory less.
- ``best_fit`` takes the smallest free block large enough (lowest address on ties). It scans every free
  block, and leaves the largest holes intact for later large requests, at the price of more tiny leftovers.

Framework calls never raise for a runtime failure: ``malloc`` returns ``(status, address)``, ``free``
returns a status, and ``last_error`` says what went wrong (like aclGetRecentErrMsg). Out of memory returns
``AclnnStatus.ACLNN_ERR_RUNTIME_ERROR`` (361001, the code opbase maps runtime allocation failures to) with
address 0 and changes nothing. Invalid sizes and unknown or double frees return ``ACLNN_ERR_PARAM_INVALID``.

With numerics on, every allocation owns a zero-filled numpy ``uint8`` buffer and ``view`` returns slices of
it, so two tensors at overlapping addresses of one allocation really share bytes.

Compiled twin: `opsim.fastpath.batch_memory._malloc` and `_release` port `DeviceMemory.malloc` and `_release`
(free list only) for batched steady state; a change of behaviour here is made there too.
"""
from __future__ import annotations

import bisect
import operator
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from opsim.acl.status import AclnnStatus
from opsim.device.task import DeviceTask, TaskKind
from opsim.errors import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    import simpy

    from opsim.device.device import Stream
    from opsim.trace.recorder import Recorder

BASE_ADDRESS = 0x1_0000_0000
ALIGNMENT = 512
STRATEGIES = ("first_fit", "best_fit")

_OK = AclnnStatus.ACLNN_SUCCESS
_INVALID = AclnnStatus.ACLNN_ERR_PARAM_INVALID
_OOM = AclnnStatus.ACLNN_ERR_RUNTIME_ERROR


class Allocation:
    """One live allocation: aligned ``size`` (what it occupies), the ``requested`` size, when it was made."""

    __slots__ = ("address", "size", "requested", "time", "buffer", "free_pending")

    def __init__(self, address: int, size: int, requested: int, time: float, buffer: np.ndarray | None) -> None:
        self.address = address
        self.size = size
        self.requested = requested
        self.time = time
        self.buffer = buffer
        self.free_pending = False

    def __repr__(self) -> str:
        return f"Allocation(address={self.address:#x}, size={self.size}, requested={self.requested}, time={self.time})"


class StreamFree:
    """The callback of a stream-ordered free: releases `alloc` when its HOST_FUNC task starts (a class, not a
    lambda, so that a batched run can tell such a task from any other and rebuild it)."""

    __slots__ = ("memory", "alloc")

    def __init__(self, memory: "DeviceMemory", alloc: Allocation) -> None:
        self.memory = memory
        self.alloc = alloc

    def __call__(self, task: DeviceTask) -> None:
        self.memory._release(self.alloc, task.start)


def free_task(memory: "DeviceMemory", alloc: Allocation) -> DeviceTask:
    """The HOST_FUNC task of `DeviceMemory.free_async` for `alloc`."""
    return DeviceTask(TaskKind.HOST_FUNC, op_name="free_async", callback=StreamFree(memory, alloc))


class MemoryState(NamedTuple):
    """The allocator's state as `DeviceMemory.export_state` gives it (the lists and dict are the live ones)."""

    in_use: int
    peak: int
    best_fit: bool
    free_addr: list
    free_size: list
    live: dict


class DeviceMemory:
    """The HBM of one device: allocator, usage counters (recorded as memory events) and optional bytes."""

    def __init__(self, size_bytes: int, recorder: Recorder, env: simpy.Environment, numerics: bool = False,
                 strategy: str = "first_fit", device_id: int = 0) -> None:
        if isinstance(size_bytes, bool) or not isinstance(size_bytes, int) or size_bytes < ALIGNMENT:
            raise InvalidArgumentError(
                f"device memory size must be an integer of at least {ALIGNMENT} bytes, got {size_bytes!r}")
        if strategy not in STRATEGIES:
            raise InvalidArgumentError(f"unknown memory strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
        self.capacity = size_bytes // ALIGNMENT * ALIGNMENT
        self.recorder = recorder
        self.env = env
        self.numerics = bool(numerics)
        self.strategy = strategy
        self.device_id = device_id
        self._best_fit = strategy == "best_fit"
        # Free list, sorted by address: parallel lists of block starts and sizes.
        self._free_addr: list[int] = [BASE_ADDRESS]
        self._free_size: list[int] = [self.capacity]
        self._live: dict[int, Allocation] = {}
        self._live_starts: list[int] = []  # sorted; kept only with numerics on (for view lookups)
        self.in_use = 0
        self.peak = 0
        self.last_error = ""
        self.host_budget: int | None = None
        """With numerics on, the most host bytes the backing buffers may take (None: no bound); an allocation
        beyond it fails like an out-of-memory one instead of asking the host for more."""

    # --- allocation -----------------------------------------------------------------------------------------
    def malloc(self, size: int, at: float | None = None) -> tuple[AclnnStatus, int]:
        """Allocate ``size`` bytes (rounded up to 512): ``(ACLNN_SUCCESS, address)`` or ``(error, 0)``.

        ``at`` is the simulated time of the call (a host thread's own clock; default ``env.now``).
        """
        time = self.env.now if at is None else at
        if type(size) is not int:
            try:
                size = operator.index(size) if not isinstance(size, bool) else None
            except TypeError:
                size = None
            if size is None:
                self.last_error = "malloc size must be an integer number of bytes"
                return _INVALID, 0
        if size <= 0:
            self.last_error = f"malloc size must be > 0 bytes, got {size}"
            return _INVALID, 0
        need = (size + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        if self.numerics and self.host_budget is not None and self.in_use + need > self.host_budget:
            self.last_error = (f"out of device memory: requested {size} bytes, but numerics keeps a host copy of "
                               f"device memory and {self.in_use} of the {self.host_budget} bytes of its budget are "
                               "in use (raise --max-numerics-mib or use numerics: false)")
            self.recorder.memory_event(time, "oom", 0, need, self.in_use, self.device_id)
            return _OOM, 0
        addrs = self._free_addr
        sizes = self._free_size
        idx = -1
        if self._best_fit:
            best = 0
            for i, s in enumerate(sizes):
                if s >= need and (idx < 0 or s < best):
                    idx, best = i, s
                    if s == need:
                        break
        else:
            for i, s in enumerate(sizes):
                if s >= need:
                    idx = i
                    break
        if idx < 0:
            largest = max(sizes, default=0)
            self.last_error = (f"out of device memory: requested {size} bytes ({need} aligned), "
                               f"{self.capacity - self.in_use} bytes free, largest free block {largest} bytes")
            self.recorder.memory_event(time, "oom", 0, need, self.in_use, self.device_id)
            return _OOM, 0
        address = addrs[idx]
        if sizes[idx] == need:
            del addrs[idx]
            del sizes[idx]
        else:
            addrs[idx] = address + need
            sizes[idx] -= need
        buffer = np.zeros(need, dtype=np.uint8) if self.numerics else None
        self._live[address] = Allocation(address, need, size, time, buffer)
        if self.numerics:
            bisect.insort(self._live_starts, address)
        self.in_use += need
        if self.in_use > self.peak:
            self.peak = self.in_use
        self.recorder.memory_event(time, "alloc", address, need, self.in_use, self.device_id)
        return _OK, address

    def can_malloc(self, size: int) -> bool:
        """Whether `malloc(size)` would succeed now (asked without changing anything)."""
        if type(size) is not int or size <= 0:
            return False
        need = (size + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        if self.numerics and self.host_budget is not None and self.in_use + need > self.host_budget:
            return False
        return any(s >= need for s in self._free_size)

    def free(self, address: int, at: float | None = None) -> AclnnStatus:
        """Free the allocation starting at ``address`` now (``at``: time of the call, default ``env.now``)."""
        alloc = self._live.get(address)
        if alloc is None or alloc.free_pending:
            self.last_error = self._bad_free_message(address, alloc)
            return _INVALID
        self._release(alloc, self.env.now if at is None else at)
        return _OK

    def free_async(self, address: int, stream: Stream, at: float) -> AclnnStatus:
        """Free ``address`` once the work already queued on ``stream`` (up to time ``at``) has finished.

        The call is checked now (unknown or double frees return ``ACLNN_ERR_PARAM_INVALID``); the block stays
        allocated, and counted in use, until a HOST_FUNC task on ``stream`` releases it in stream order.
        """
        alloc = self._live.get(address)
        if alloc is None or alloc.free_pending:
            self.last_error = self._bad_free_message(address, alloc)
            return _INVALID
        stream.submit(free_task(self, alloc), at)
        alloc.free_pending = True  # after submit: a rejected `at` leaves the block freeable
        return _OK

    def _bad_free_message(self, address: Any, alloc: Allocation | None) -> str:
        shown = f"{address:#x}" if isinstance(address, int) else repr(address)
        if alloc is not None:
            return f"double free of device address {shown}: a stream-ordered free of it is already queued"
        inside = self.find(address) if isinstance(address, int) else None
        if inside is not None:
            return (f"free of device address {shown}, which is inside the allocation at {inside.address:#x}; "
                    "free the start address")
        return f"free of device address {shown}, which is not a live allocation (never allocated or already freed)"

    def _release(self, alloc: Allocation, time: float) -> None:
        address, size = alloc.address, alloc.size
        del self._live[address]
        if self.numerics:
            starts = self._live_starts
            del starts[bisect.bisect_left(starts, address)]
        addrs, sizes = self._free_addr, self._free_size
        i = bisect.bisect_left(addrs, address)
        # Merge with the following block, then with the preceding one.
        if i < len(addrs) and addrs[i] == address + size:
            size += sizes[i]
            del addrs[i]
            del sizes[i]
        if i > 0 and addrs[i - 1] + sizes[i - 1] == address:
            sizes[i - 1] += size
        else:
            addrs.insert(i, address)
            sizes.insert(i, size)
        self.in_use -= alloc.size
        self.recorder.memory_event(time, "free", address, alloc.size, self.in_use, self.device_id)

    # --- the fast path's batches (opsim.fastpath.batch_state; the compiled twins of malloc and _release are
    # opsim.fastpath.batch_kernel._malloc and _release) -------------------------------------------------------
    def export_state(self) -> MemoryState:
        """The allocator's state for a batch to take into arrays (read-only; see `import_state`)."""
        return MemoryState(self.in_use, self.peak, self._best_fit, self._free_addr, self._free_size, self._live)

    def import_state(self, in_use: int, peak: int, free_addr: list[int], free_size: list[int],
                     released: Any, made: Any) -> None:
        """Take back what a batch left: the counters, the free list, the live allocations it released (by
        address) and those it made (`Allocation`s, freed on a stream later)."""
        self.in_use, self.peak = in_use, peak
        self._free_addr, self._free_size = free_addr, free_size
        live = self._live
        for address in released:
            del live[address]
        for alloc in made:
            live[alloc.address] = alloc

    # --- inspection -------------------------------------------------------------------------------------------
    def find(self, address: int) -> Allocation | None:
        """The live allocation containing ``address``, if any."""
        live = self._live
        if address in live:
            return live[address]
        starts = self._live_starts if self.numerics else sorted(live)
        i = bisect.bisect_right(starts, address) - 1
        if i >= 0:
            alloc = live[starts[i]]
            if address < alloc.address + alloc.size:
                return alloc
        return None

    def view(self, address: int, nbytes: int) -> np.ndarray | None:
        """The bytes [address, address + nbytes) as a uint8 slice of the allocation holding them.

        None when numerics are off or the range is not inside one live allocation.
        """
        if not self.numerics or nbytes < 0:
            return None
        starts = self._live_starts
        i = bisect.bisect_right(starts, address) - 1
        if i < 0:
            return None
        alloc = self._live[starts[i]]
        offset = address - alloc.address
        if offset + nbytes > alloc.size:
            return None
        return alloc.buffer[offset:offset + nbytes]

    def leaks(self) -> list[Allocation]:
        """Live allocations, lowest address first (at the end of a run: what was never freed)."""
        return [self._live[a] for a in sorted(self._live)]

    @property
    def free_bytes(self) -> int:
        return self.capacity - self.in_use

    @property
    def largest_free_block(self) -> int:
        return max(self._free_size, default=0)

    def free_blocks(self) -> list[tuple[int, int]]:
        """(address, size) of every free block, by address."""
        return list(zip(self._free_addr, self._free_size))
