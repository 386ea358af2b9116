"""Process-wide opbase state of one simulation (what lives in globals in the C++ library).

Per process in opbase: AicpuTaskSpace registry and its cache limit, the AI CPU timestamp record and print
counter, profiling and dump switches, the L2 sequence counter, DISABLE_L2_CACHE. One `ProcessContext` per
simulation keeps several simulations in one Python process independent and deterministic.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

from opsim.opdev import env as envmod
from opsim.opdev.huge_mem import HugeMemPools
from opsim.opdev.profiles import BehaviourProfile, get_profile
from opsim.opdev.profiling import OpProfilingSwitch, start_profiling
from opsim.opdev.settings import DEFAULT, SimulationSettings
from opsim.opdev.thread_local import ThreadLocalContext
from opsim.trace.recorder import Recorder

FIRST_THREAD_ID = 10001


class ProcessContext:
    """The simulated application process: environment, switches and process-global opbase state."""

    def __init__(self, settings: SimulationSettings | None = None, *, cost: Any = None, recorder: Any = None,
                 device: Any = None, stdout: Callable[[str], Any] | None = None, soc_name: str = "Ascend910B2",
                 **changes: Any):
        """`settings` (the defaults when None) with `changes` by field name (`ProcessContext(numerics=True)`);
        `cost`, `recorder` and `device` are the simulation's (defaults: a plain cost model, a disabled recorder, no
        device)."""
        settings = (settings or DEFAULT).but(**changes)
        self.settings = settings
        env, profile, numerics = settings.env, settings.profile, settings.numerics
        fast_path = settings.fast_path
        self.env: dict[str, str] = dict(env or {})
        self.profile = profile if isinstance(profile, BehaviourProfile) else get_profile(profile)
        if cost is None:
            from opsim.device.cost import CostModel  # lazy: framework tests without a device never load it
            cost = CostModel()
        self.cost = cost
        if recorder is None:
            recorder = Recorder(enabled=False)
        self.recorder = recorder
        self.device = device
        self.numerics = numerics
        self.slowdown = float(settings.slowdown)
        """Kernel time of this device times this factor (opsim.opdev.rt.submit_kernel); 1.0 normally."""
        soc = getattr(device, "soc", None)
        self.soc_name = getattr(soc, "name", soc_name)
        self.aic_num = settings.aic_num if settings.aic_num is not None else getattr(soc, "aicore_count", 24)
        self.aiv_num = settings.aiv_num if settings.aiv_num is not None else getattr(soc, "vector_core_count", 48)
        self.stdout = stdout or sys.stdout.write
        self.dump_dir = settings.dump_dir
        # DFX switches: dump queried per phase 1, overflow read once per process.
        self.op_dump = settings.op_dump
        self.overflow_dump = settings.overflow_dump
        self.exception_dump = settings.exception_dump
        # Profiling switches: set by the profiler's control callback (opsim.opdev.profiling).
        self.profiling = OpProfilingSwitch()
        self.profiling_commands: list[tuple[str, int]] = []
        self.level2_profiling = settings.level2_profiling  # direct flag settings (the cache-disabling conditions);
        self.record_op_args = settings.record_op_args      # a profiling run uses `profiling_switch` (a START)
        # Runtime system parameters read at every phase-1 entry: ACL_OPT_DETERMINISTIC (0..3) and
        # ACL_OPT_STRONG_CONSISTENCY (upgrades a reported level 1 to 2).
        self.deterministic_level = settings.deterministic_level
        self.strong_consistency = settings.strong_consistency
        self.fast_path = fast_path
        self.key_memo: dict | None = {} if fast_path else None
        """The fast path's phase-1 key memo (opsim.opdev.op_exec_cache.build_l2_key), None on the reference path."""
        self.launch_memo: dict | None = {} if fast_path else None
        """The fast path's memo of AI Core launch parameters (tiling, duration, tensor description) and AI CPU
        task keys by argument identity (opsim.opdev.memo), None on the reference path."""
        # Huge host-memory pools: free pool indices, popped from the back.
        self.huge_mem = HugeMemPools()
        self.disable_l2_cache = envmod.is_set(self.env, "DISABLE_L2_CACHE")
        self.l2_sequence_counter = 0
        self._next_tid = FIRST_THREAD_ID
        self.threads: list[ThreadLocalContext] = []
        # AI CPU process globals (opsim.opdev.aicpu)
        self.aicpu_cache_limit, self.aicpu_limit_warning = self._aicpu_limit()
        self.aicpu_registry: dict = {}          # AicpuTaskSpace objects registered by task creation
        self.aicpu_spaces: dict = {}            # (op type, unknown type, is_tf) -> space ("static" per op)
        self.aicpu_timestamps = [0.0] * 10      # the process-global timestamp record
        self.aicpu_timestamp_enabled = False    # its isEnable switch, set by every GetOrCreateTask
        self.aicpu_kernel_lib = None            # opsim.opdev.aicpu.kernel_lib.KernelLibState (JsonLoadManger)
        self.aicpu_print_index = 0
        self.warnings: list[str] = []
        if self.aicpu_limit_warning:
            self.warnings.append(self.aicpu_limit_warning)
        # fault injection points (tests): name -> callable returning True to fail
        self.faults: dict[str, Callable[..., bool]] = {}
        # DFX outputs collected in memory (dumps and overflow detections)
        self.dumps: list = []
        self.overflows: list = []
        self.profiling_reports: list = []  # dfx.ProfilingReport records (profiling switch on, id != 0)
        self.profiling_strs: dict[str, int] = {}  # CollectProfilingStr's table: string -> ACL-level type id
        if settings.profiling_switch:
            start_profiling(self, settings.profiling_switch)

    @property
    def level2_profiling(self) -> bool:
        """levelTwo profiling flag (task time L2 or op attributes): also disables the OpExecCache."""
        return self.profiling.level2_profiling_flag

    @level2_profiling.setter
    def level2_profiling(self, on: bool) -> None:
        self.profiling.level2_profiling_flag = bool(on)

    @property
    def record_op_args(self) -> bool:
        """recordOpArgFlag, set through the dump subsystem's op-arg callback: disables the OpExecCache."""
        return self.profiling.record_op_arg_flag

    @record_op_args.setter
    def record_op_args(self, on: bool) -> None:
        self.profiling.record_op_arg_flag = bool(on)

    def _aicpu_limit(self) -> tuple[int, str | None]:
        p = self.profile
        value = self.env.get(p.aicpu_cache_limit_var)
        if p.aicpu_cache_limit_rule == "guide":
            return envmod.parse_aicpu_cache_limit_guide(value)
        return envmod.parse_aicpu_cache_limit(value), None

    @property
    def exec_cache_limit(self) -> int:
        """ACLNN_CACHE_LIMIT as a thread's OpExecCache manager reads it."""
        return envmod.parse_aclnn_cache_limit(self.env.get("ACLNN_CACHE_LIMIT"))

    @property
    def ge_profiling(self) -> bool:
        """GE_PROFILING_TO_STD_OUT, re-read at every AI CPU GetOrCreateTask."""
        return envmod.ge_profiling_enabled(self.env.get("GE_PROFILING_TO_STD_OUT"))

    def next_sequence(self) -> int:
        n = self.l2_sequence_counter
        self.l2_sequence_counter += 1
        return n

    def new_thread(self, name: str | None = None) -> ThreadLocalContext:
        """A new simulated application thread with a fresh OS thread id."""
        tid = self._next_tid
        self._next_tid += 1
        ctx = ThreadLocalContext(process=self, thread_id=tid, name=name or f"thread-{len(self.threads)}")
        self.threads.append(ctx)
        return ctx

    def fault(self, point: str, *args: Any) -> bool:
        """True when a test injected a failure at `point` (e.g. 'direct_invoke.alloc_tensor')."""
        f = self.faults.get(point)
        return bool(f and f(*args))

    def warn(self, message: str) -> None:
        self.warnings.append(message)
