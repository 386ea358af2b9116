"""The per-thread context (opbase's TLS) and the host-action log that charges host time.

opbase keeps per-thread state in thread-local storage; opsim keeps it in one `ThreadLocalContext` per
simulated host thread and makes the running thread's context current, exactly like TLS is "current" for the
calling OS thread. Framework calls are synchronous Python: they never yield. Everything that takes simulated
time is appended to the context's action log (host-cost spans, device-task submissions, stream
synchronisations, callbacks stamped with the simulated time); the host-thread process replays the log in
simulated time after the call returns (`opsim.runtime.host_thread`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from opsim.errors import SimulationError

if TYPE_CHECKING:  # pragma: no cover
    from opsim.opdev.process import ProcessContext

# Action kinds of the host-action log.
A_SPAN = 0      # (A_SPAN, phase, op, us, corr)
A_SUBMIT = 1    # (A_SUBMIT, stream, task)
A_SYNC = 2      # (A_SYNC, stream or None for the whole device)
A_CALL = 3      # (A_CALL, fn) -> fn(t) at replay time


class CacheEventAt:
    """A cache lookup's record, written when the replay reaches its point: `fn(t)` of an A_CALL action that the fast
    path recognises by its type and reads by field (the exec-cache hit or miss of phase 1, an AI CPU task-cache
    hit), where a lambda would hide them in its closure."""

    __slots__ = ("rec", "thread", "cache", "kind", "op", "seed", "detail")

    def __init__(self, rec: Any, thread: Any, cache: str, kind: str, op: str, seed: int = 0,
                 detail: str = "") -> None:
        self.rec, self.thread, self.cache, self.kind, self.op, self.seed, self.detail = (
            rec, thread, cache, kind, op, seed, detail)

    def __call__(self, t: float) -> None:
        self.rec.cache_event(t, self.thread, self.cache, self.kind, self.op, self.seed, self.detail)


@dataclass(slots=True)
class OpLogInfo:
    """{l2ApiName, l0Name, l2SequenceCounter}: naming and attribution of the current call."""

    l2_api_name: str | None = None
    l0_name: str | None = None
    l2_sequence_counter: int = 0

    def copy(self) -> "OpLogInfo":
        return OpLogInfo(self.l2_api_name, self.l0_name, self.l2_sequence_counter)


@dataclass(slots=True)
class OpConfigInfo:
    """{aicNum, aivNum, isDeterministicOn, isOpDumpEnable, deterministicLevel}."""

    aic_num: int = 0
    aiv_num: int = 0
    is_deterministic_on: bool = False
    is_op_dump_enable: bool = False
    deterministic_level: int = 0

    def copy(self) -> "OpConfigInfo":
        return OpConfigInfo(self.aic_num, self.aiv_num, self.is_deterministic_on, self.is_op_dump_enable,
                            self.deterministic_level)


@dataclass(slots=True)
class ProfilingInfoId:
    tiling_profiling_id: int = 0
    kernel_launcher_id: int = 0
    summary_item_id: int = 0


@dataclass
class ThreadLocalContext:
    """One simulated application thread's opbase TLS plus its host-action log."""

    process: "ProcessContext"
    thread_id: int  # the OS thread id as opbase's gettid() would see it
    name: str = "thread"
    log_info: OpLogInfo = field(default_factory=OpLogInfo)
    config: OpConfigInfo = field(default_factory=OpConfigInfo)
    profiling_info_id: ProfilingInfoId = field(default_factory=ProfilingInfoId)
    executor: Any = None  # executor currently running (phase 2)
    l2_io_tensors: tuple = ((), ())  # DFX_IN / DFX_OUT of the last phase 1, kept only while dump is on
    l2_guard: Any = None  # the open L2 phase guard's profiler (dfx.open_l2_guard), reported when the phase ends
    # op-exec-cache state (opbase `common/inc/thread_local_context.h`): manager, key of the last phase-1, storages
    # and addresses
    op_cache_manager: Any = None
    cache_has_full: bool = False
    key: bytes = b""
    l2_storage_list: list = field(default_factory=list)
    l2_tensor_list: list = field(default_factory=list)
    op_cache_context: Any = None
    # huge host-memory pool index of this thread (-1: none active; opsim.opdev.huge_mem)
    pool_index: int = -1
    # PTA mode (opbase `common/utils/op_cache.cpp`): usePTAHash_, hashKey_, cacheApi_ and the L2 tensor address list (a
    # vector reused across calls: `cached_tensor_list_size` is its logical size)
    use_pta_hash: bool = False
    hash_key: int = 0
    cache_api: str | None = None
    cached_tensor_list: list = field(default_factory=list)
    cached_tensor_list_size: int = 0
    # AI CPU: the pending one-shot (overflow) task slot
    pending_overflow_task: Any = None
    # AI Core tiling context (LauncherContext) in flight
    launcher_ctx: Any = None
    impl_mode: int = 0x1
    # current op for attribution of host spans
    current_op: str = ""
    current_corr: int = -1
    actions: list = field(default_factory=list)

    # --- host-cost charging -------------------------------------------------------------------
    def charge(self, phase: str, op: str | None = None, us: float | None = None) -> None:
        """Charge a named host phase (cost from the cost model unless `us` is given) to this thread."""
        if us is None:
            try:
                us = self.process.cost.host_us[phase]  # CostModel.host without the call
            except (AttributeError, KeyError):
                us = self.process.cost.host(phase)  # raises the explanatory error for an unknown phase
        self.actions.append((A_SPAN, phase, self.current_op if op is None else op, us, self.current_corr))

    def submit(self, stream: Any, task: Any) -> None:
        """Queue a device task on `stream` at the thread's current simulated time."""
        self.actions.append((A_SUBMIT, stream, task))

    def sync(self, stream: Any = None) -> None:
        """Block the thread until `stream` (None: the whole device) has drained."""
        self.actions.append((A_SYNC, stream))

    def at(self, fn: Callable[[float], None]) -> None:
        """Run `fn(t)` when the replay reaches this point, t = simulated time then."""
        self.actions.append((A_CALL, fn))

    def take_actions(self) -> list:
        acts = self.actions
        self.actions = []
        return acts


def charged_us(actions: list) -> float:
    """Host time charged by the spans of an action log, summed in log order (the thread's clock offset at the
    end of it: what acl_rt stamps its allocations and frees with, and what a replayed hit must reproduce)."""
    return sum(a[3] for a in actions if a[0] == A_SPAN)


_current: ThreadLocalContext | None = None


def current() -> ThreadLocalContext:
    """The calling simulated thread's context (opbase's TLS)."""
    if _current is None:
        raise SimulationError("no simulated host thread is current; call opsim APIs from a HostThread program "
                              "or set one with opsim.opdev.thread_local.set_current()")
    return _current


def set_current(ctx: ThreadLocalContext | None) -> ThreadLocalContext | None:
    """Make `ctx` the current thread context; returns the previous one."""
    global _current
    prev = _current
    _current = ctx
    return prev
