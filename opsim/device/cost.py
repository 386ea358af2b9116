"""The cost model: how long device tasks take and what each host-side phase costs.

One interface, ``CostModel``, with a roofline default:

    kernel_time = max(flops / (peak x efficiency x used-core fraction), bytes / (bandwidth x bw efficiency))
                  + launch latency of the task's kind

and a table of host-phase costs in microseconds, keyed by the phase names opbase's code paths use
(``CostModel.host(phase)``; the runtime charges them to the calling host thread). Every default carries its
provenance (``HOST_PHASES`` / ``DEVICE_PARAMS``: name -> (value, provenance)); docs/device.md prints both
tables. The host numbers are assumed orders of magnitude for a server-class ARM/x86 host, meant to be
replaced by measured values through ``overrides`` or a calibration, except torch_npu's task-queue phases
(``enqueue``, ``dequeue``, ``dequeue gap``), which are medians of a public real trace. A calibration's measured
host phases (``FittedTiming.host_phases``) replace the defaults; ``overrides`` win over both.

``CostModel.kernel`` is the one device-duration entry point (``opsim.device.predictor``): a calibration's
signatures and op-type lines where it has evidence, op-type factors over the family model, the family model
parameterised by the SoC preset (``opsim.device.family``, built-in parameters in ``family_defaults.yaml``),
then the roofline ``kernel_time``. The 910B presets' built-in host timings come from ``defaults_910b.yaml``.
"""
from __future__ import annotations

import math
from types import MappingProxyType
from typing import Mapping

from opsim.device.fitted import FittedTiming, HostApiTiming
from opsim.device.family import FamilyModel
from opsim.device.host_phases import HOST_PHASES
from opsim.device.predictor import Prediction, predict
from opsim.device.soc import SocSpec, get_soc
from opsim.device.task import MEMCPY_KINDS, TaskKind
from opsim.errors import InvalidArgumentError
from importlib import resources
from opsim.device.fitted_io import family_from_dict, fitted_from_dict

_A = "assumed"


DEVICE_PARAMS: Mapping[str, tuple[float, str]] = MappingProxyType({
    "aicore_efficiency": (0.75, f"{_A}: achieved fraction of cube peak for a well-tiled kernel"),
    "vector_efficiency": (0.75, f"{_A}: achieved fraction of vector peak"),
    "bandwidth_efficiency": (0.85, f"{_A}: achieved fraction of HBM bandwidth for streaming kernels"),
    "vector_flops_per_core_cycle": (256.0, f"{_A}: 128 FP16 lanes x 2 (vec_calc_size 128, fused multiply-add)"),
    "aicore_launch_us": (3.0, f"{_A}: device-side dispatch overhead of one AI Core kernel"),
    "aicpu_launch_us": (20.0, f"{_A}: device-side dispatch overhead of one AI CPU kernel"),
    "aicpu_flops_per_us": (4000.0, f"{_A}: one AI CPU (ARM core) at ~4 GFLOP/s"),
    "aicpu_bytes_per_us": (10000.0, f"{_A}: one AI CPU streams ~10 GB/s"),
})
"""Device-side cost parameter -> (value, provenance). Memcpy bandwidth and latency come from the SocSpec."""

_DIRECTIONS = {"H2D": TaskKind.MEMCPY_H2D, "D2H": TaskKind.MEMCPY_D2H, "D2D": TaskKind.MEMCPY_D2D}


def _as_kind(kind: object) -> TaskKind:
    try:
        return TaskKind[kind] if isinstance(kind, str) else TaskKind(kind)
    except (KeyError, ValueError):
        raise InvalidArgumentError(
            f"unknown task kind {kind!r}; use one of {', '.join(k.name for k in TaskKind)}") from None


class CostModel:
    """Roofline device costs plus the host-phase table, for one SoC.

    ``overrides`` maps host phase names and device parameter names (see ``HOST_PHASES`` and
    ``DEVICE_PARAMS``) to new values; an unknown name raises, naming the allowed ones.
    """

    def __init__(self, soc: SocSpec | None = None, overrides: Mapping[str, float] | None = None,
                 fitted: FittedTiming | None = None, defaults: bool = True) -> None:
        self.soc = soc if soc is not None else get_soc()
        #: the calibration in use (None: uncalibrated); its name is what summaries and traces report.
        self.fitted = fitted
        #: the SoC's built-in fitted kernel defaults (None for SoCs without, or with defaults=False).
        self.default_fitted = default_fits(self.soc.name) if defaults else None
        #: the built-in family model (SoC-independent parameters; None with defaults=False).
        self.default_family = default_family() if defaults else None
        self._memo: dict[tuple, Prediction] = {}
        #: (op type, core) -> {(level, source): (sum of low, predicted, high) over distinct kernels asked}.
        self.answers: dict[tuple[str, str], dict[tuple[str, str], tuple[float, float, float]]] = {}
        host = {k: v for k, (v, _p) in HOST_PHASES.items()}
        params = {k: v for k, (v, _p) in DEVICE_PARAMS.items()}
        self.provenance: dict[str, str] = {k: p for k, (_v, p) in {**HOST_PHASES, **DEVICE_PARAMS}.items()}
        for fits in (self.default_fitted, fitted):
            for key, m in (fits.host_phases.items() if fits is not None else ()):
                host[key] = m.median_us
                self.provenance[key] = f"measured: median of {m.n} event(s), {fits.name}"
        for key, value in (overrides or {}).items():
            target = host if key in host else params if key in params else None
            if target is None:
                raise InvalidArgumentError(
                    f"unknown cost override {key!r}; host phases: {', '.join(HOST_PHASES)}; "
                    f"device parameters: {', '.join(DEVICE_PARAMS)}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise InvalidArgumentError(f"cost override {key!r} must be a finite number >= 0, got {value!r}")
            if key.endswith("efficiency") and not 0 < value <= 1:
                raise InvalidArgumentError(f"cost override {key!r} must be in (0, 1], got {value!r}")
            target[key] = float(value)
            self.provenance[key] = "assumed (override)"
        self.host_us: dict[str, float] = host
        """Host phase -> microseconds after overrides (read-only outside the model: `ThreadLocalContext.charge`
        reads it directly on the hot path; `host` names an unknown phase)."""
        self.params = MappingProxyType(params)
        soc = self.soc
        # Pre-computed rates (per microsecond) so kernel_time is a few float operations.
        self._cube_rate = soc.peak_flops_per_us * params["aicore_efficiency"]
        vec_cores = soc.vector_core_count or soc.aicore_count
        self._vec_cores = vec_cores
        self._vec_rate = (vec_cores * params["vector_flops_per_core_cycle"] * soc.clock_mhz
                          * params["vector_efficiency"])
        self._bw = soc.hbm_bytes_per_us * params["bandwidth_efficiency"]
        self._aicore_launch = params["aicore_launch_us"]
        self._aicpu_launch = params["aicpu_launch_us"]
        self._aicpu_flops = params["aicpu_flops_per_us"]
        self._aicpu_bw = params["aicpu_bytes_per_us"]
        self._memcpy_bw = {TaskKind.MEMCPY_H2D: soc.h2d_bytes_per_us, TaskKind.MEMCPY_D2H: soc.d2h_bytes_per_us,
                           TaskKind.MEMCPY_D2D: soc.d2d_bytes_per_us}

    # --- host side -------------------------------------------------------------------------------------
    def host(self, phase: str) -> float:
        """Microseconds the host spends in ``phase`` (one of ``HOST_PHASES``)."""
        try:
            return self.host_us[phase]
        except KeyError:
            raise InvalidArgumentError(
                f"unknown host phase {phase!r}; known phases: {', '.join(self.host_us)}") from None

    def host_phases(self) -> dict[str, float]:
        """Phase name -> microseconds, after overrides."""
        return dict(self.host_us)

    def host_api(self, api: str) -> HostApiTiming | None:
        """Measured host timing of ``api``: the calibration's, else the built-in defaults' (None: neither has it)."""
        for fits in (self.fitted, self.default_fitted):
            if fits is not None:
                found = fits.host_apis.get(api)
                if found is not None:
                    return found
        return None

    # --- device side -------------------------------------------------------------------------------------
    def kernel(self, op_type: str, core: str, flops: float, nbytes: float, block_dim: int,
               signature: str | None = None, itemsize: float = 2.0) -> float:
        """Duration (us) of one kernel of ``op_type`` on ``core`` (a profiler Accelerator Core name).

        The most specific evidence answers (``opsim.device.predictor``: calibration signature and op type,
        op-type factors, the family model, the roofline). Memoised per (op type, core, sizes, signature); this
        is the predictor ``opsim run`` and ``opsim predict`` share."""
        return self.predict(op_type, core, flops, nbytes, block_dim, signature, itemsize)[0]

    def predict(self, op_type: str, core: str, flops: float, nbytes: float, block_dim: int,
                signature: str | None = None, itemsize: float = 2.0) -> "Prediction":
        """The full prediction of ``kernel``: duration, p10-p90 band, level and source (memoised)."""
        key = (op_type, core, flops, nbytes, block_dim, signature, itemsize)
        hit = self._memo.get(key)
        if hit is None:
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            hit = self._memo[key] = predict(self, op_type, core, flops, nbytes, block_dim, signature, itemsize)
            per_op = self.answers.setdefault((op_type, core), {})
            lk = (hit.level, hit.source)
            lo, us, hi = per_op.get(lk, (0.0, 0.0, 0.0))
            per_op[lk] = (lo + hit.low, us + hit.us, hi + hit.high)
        return hit

    def kernel_level(self, op_type: str, core: str, flops: float, nbytes: float,
                     signature: str | None = None, block_dim: int = 1, itemsize: float = 2.0) -> str:
        """Which level and source answer ``kernel``: 'signature (calibration)', 'family (family model)', ..."""
        p = self.predict(op_type, core, flops, nbytes, block_dim, signature, itemsize)
        return f"{p.level} ({p.source})"

    def kernel_time(self, flops: float, bytes: float, block_dim: int, kind: TaskKind = TaskKind.AI_CORE) -> float:
        """Duration (us) of one kernel: roofline over the cores it gets, plus its kind's launch latency.

        AI Core kernels use the cube peak, AI_VECTOR kernels the vector peak, both scaled by the fraction of
        cores ``block_dim`` occupies; AI CPU kernels run on one AI CPU; memcpy kinds defer to ``memcpy_time``.
        """
        if type(kind) is not TaskKind:
            kind = _as_kind(kind)
        if flops < 0 or bytes < 0:
            raise InvalidArgumentError(f"kernel_time needs flops >= 0 and bytes >= 0, got {flops!r}, {bytes!r}")
        if kind is TaskKind.AI_CORE or kind is TaskKind.AI_VECTOR:
            if block_dim <= 0:
                raise InvalidArgumentError(f"block_dim must be >= 1 for {TaskKind(kind).name}, got {block_dim!r}")
            if kind is TaskKind.AI_CORE:
                cores = self.soc.aicore_count
                rate = self._cube_rate
            else:
                cores = self._vec_cores
                rate = self._vec_rate
            used = block_dim if block_dim < cores else cores
            compute = flops * cores / (rate * used)
            memory = bytes / self._bw
            return (compute if compute > memory else memory) + self._aicore_launch
        if kind is TaskKind.AI_CPU:
            compute = flops / self._aicpu_flops
            memory = bytes / self._aicpu_bw
            return (compute if compute > memory else memory) + self._aicpu_launch
        if kind in MEMCPY_KINDS:
            return self.memcpy_time(bytes, kind)
        raise InvalidArgumentError(
            f"kernel_time covers AI_CORE, AI_VECTOR, AI_CPU and memcpy kinds, not {kind!r}")

    def memcpy_time(self, nbytes: int, direction: str | TaskKind) -> float:
        """Duration (us) of one async copy: latency + bytes / link bandwidth ("H2D", "D2H" or "D2D")."""
        kind = _DIRECTIONS.get(direction) if isinstance(direction, str) else direction
        bw = self._memcpy_bw.get(kind) if kind is not None else None
        if bw is None:
            raise InvalidArgumentError(f"memcpy direction must be H2D, D2H or D2D, got {direction!r}")
        if nbytes < 0:
            raise InvalidArgumentError(f"memcpy size must be >= 0 bytes, got {nbytes!r}")
        return self.soc.memcpy_latency_us + nbytes / bw

    def table(self) -> list[tuple[str, float, str]]:
        """(name, value, provenance) for every host phase and device parameter, after overrides."""
        rows = [(k, v, self.provenance[k]) for k, v in self.host_us.items()]
        rows += [(k, v, self.provenance[k]) for k, v in self.params.items()]
        return rows


_MEMO_LIMIT = 1 << 16
_DEFAULT_FAMILY: list = []
FAMILY_DEFAULTS_FILE = "family_defaults.yaml"


def default_family() -> "FamilyModel | None":
    """The built-in family model (opsim/device/family_defaults.yaml, fitted by docs/refit_family.py), loaded once."""
    if not _DEFAULT_FAMILY:

        import yaml  # lazy: keeps PyYAML out of importing opsim.device.cost

        ref = resources.files("opsim.device").joinpath(FAMILY_DEFAULTS_FILE)
        model = None
        if ref.is_file():
            data = yaml.safe_load(ref.read_text(encoding="utf-8"))
            model = family_from_dict(data.get("family"), f"opsim/device/{FAMILY_DEFAULTS_FILE}")
        _DEFAULT_FAMILY.append(model)
    return _DEFAULT_FAMILY[0]


_DEFAULT_FITS: dict[str, FittedTiming | None] = {}
#: SoC presets whose built-in kernel fits come from defaults_910b.yaml (refitted on public 910B profiles).
DEFAULT_FITS_SOCS = frozenset({"Ascend910B1", "Ascend910B2", "Ascend910B3", "Ascend910B4"})
DEFAULT_FITS_FILE = "defaults_910b.yaml"


def default_fits(soc_name: str) -> FittedTiming | None:
    """The built-in fitted kernel timing of ``soc_name`` (loaded once), or None for SoCs without one."""
    if soc_name not in DEFAULT_FITS_SOCS:
        return None
    if soc_name not in _DEFAULT_FITS:

        import yaml  # lazy: keeps PyYAML out of importing opsim.device.cost

        ref = resources.files("opsim.device").joinpath(DEFAULT_FITS_FILE)
        if not ref.is_file():
            _DEFAULT_FITS[soc_name] = None
        else:
            data = yaml.safe_load(ref.read_text(encoding="utf-8"))
            _DEFAULT_FITS[soc_name] = fitted_from_dict(data, f"opsim/device/{DEFAULT_FITS_FILE}",
                                                       name=f"built-in defaults ({DEFAULT_FITS_FILE})")
    return _DEFAULT_FITS[soc_name]
