"""Default host costs of any ACLNN API: a model fitted on public real traces (``host_defaults.yaml``).

A profile measures the host time of the APIs it called; opsim's scenarios and users' what-if runs call
others. This model answers for any ``aclnnXxx`` name, for each kind of call torch_npu makes:

* ``phase1``: ``aclnnXxxGetWorkspaceSize`` (torch_npu calls it on its executor-cache misses only);
* ``phase2_miss`` / ``phase2_hit``: ``aclnnXxx`` after a miss (it builds and launches the new executor) or on
  a hit (it replays a cached one); ``phase2``: any call (hits and misses together, as api_statistic.csv
  averages them).

Levels, most specific first: the **API** itself (the median over the profiles that measured it of each
profile's median, so every profile weighs the same), its **family** (the median over the family's APIs,
scaled by ``tensor_slope`` per doubling of the tensor count when the caller knows it), then **all** APIs of
that kind. Families come from the name (``api_family``): matmul, conv, attention, norm, softmax and loss,
reduce, pool, foreach, random, copy and fill, data movement, elementwise; ``Backward`` APIs and
``Inplace`` variants share their forward family. Every number carries n (profiles or APIs) and the
profiles it came from (``profiles`` names each profile's file).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opsim.device.fitted import HostApiTiming, Measured, Provenance
from importlib import resources

KINDS = ("phase1", "phase2", "phase2_miss", "phase2_hit")
#: family -> name stems (matched against the API name without 'aclnn', 'Inplace' and 'Backward'), in order.
FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("attention", ("FlashAttention", "Attention", "Rope", "RotaryPosition")),
    ("matmul", ("Matmul", "MatMul", "Mm", "Bmm", "Addmm", "Baddbmm", "Addbmm", "Linear", "Gemm", "Mv")),
    ("conv", ("Convolution", "Conv")),
    ("norm", ("Norm", "Rms")),
    ("softmax_loss", ("Softmax", "Loss", "CrossEntropy", "Nll", "NLL")),
    ("pool", ("Pool",)),
    ("foreach", ("Foreach",)),
    ("random", ("Dropout", "Rand", "Normal", "Bernoulli", "Multinomial", "Uniform")),
    ("reduce", ("Reduce", "Sum", "Mean", "Max", "Min", "Amax", "Amin", "ArgMax", "ArgMin", "Prod", "Var", "Std",
                "Topk", "Sort", "Cumsum", "Cumprod", "All", "Any", "Median")),
    ("copy_fill", ("Copy", "Fill", "Zero", "One", "Cast", "Contiguous", "Arange", "Empty", "Clone")),
    ("data_movement", ("Gather", "Index", "Scatter", "Slice", "Cat", "Stack", "Split", "Chunk", "Transpose",
                       "Permute", "Embedding", "Pad", "Repeat", "Expand", "Flip", "Roll", "Tril", "Triu",
                       "Masked", "Where", "Nonzero", "Unique", "Narrow", "Select", "Take")),
)
DEFAULT_FAMILY = "elementwise"
#: a launch-count correction never takes an estimate below this share of it.
MIN_SHARE = 0.25
_PREFIXES = ("aclnn",)
_STEM_RE = re.compile(r"^(Inplace)?(.*?)(Backward|Grad)?(V\d+)?$")


def api_family(api: str) -> str:
    """The family of an ACLNN API name ('aclnnInplaceAdd' -> 'elementwise', 'aclnnMm' -> 'matmul')."""
    name = api[len("aclnn"):] if api.startswith(_PREFIXES) else api
    m = _STEM_RE.match(name)
    stem = m.group(2) if m and m.group(2) else name
    for family, stems in FAMILIES:
        if any(stem.startswith(s) or s in stem for s in stems):
            return family
    return DEFAULT_FAMILY


@dataclass(frozen=True)
class HostEstimate:
    """One fitted median: microseconds, how many profiles (API level) or APIs (family and all) it pools,
    and where it came from."""

    median_us: float
    n: int
    provenance: tuple[Provenance, ...] = ()
    tensors: float | None = None
    """The typical tensor count of what the estimate pools (family level), when known."""
    launches: float | None = None
    """The typical number of device tasks one call launched, when known."""


@dataclass
class HostModel:
    """Fitted per-kind medians at three levels; ``predict`` picks the most specific that answers."""

    name: str = ""
    apis: dict[tuple[str, str], HostEstimate] = field(default_factory=dict)
    families: dict[tuple[str, str], HostEstimate] = field(default_factory=dict)
    kinds: dict[str, HostEstimate] = field(default_factory=dict)
    #: log2 change of the host time per doubling of the tensor count, away from the family's typical count.
    tensor_slope: float = 0.0
    #: microseconds per device task a phase-2 call launches beyond the estimate's typical count.
    launch_us: float = 0.0
    #: profile name -> the file its calls came from (provenance entries name profiles).
    profiles: dict[str, str] = field(default_factory=dict)

    def predict(self, api: str, kind: str, n_tensors: int | None = None,
                n_launches: int | None = None) -> tuple[float, str] | None:
        """(microseconds, level) of one call of `api` of `kind` ('phase1', 'phase2', 'phase2_miss',
        'phase2_hit'); level is 'api', 'family' or 'all'. None when the model has nothing for `kind`.
        `n_launches` (device tasks the call launches, phase 2) and `n_tensors` refine the estimate when known."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        est, level = self.apis.get((api, kind)), "api"
        if est is None:
            est, level = self.families.get((api_family(api), kind)), "family"
        if est is None:
            est, level = self.kinds.get(kind), "all"
        if est is None:
            return None
        us = est.median_us
        if level != "api" and n_tensors and est.tensors and self.tensor_slope:
            us *= 2.0 ** (self.tensor_slope * math.log2(max(n_tensors, 1) / est.tensors))
        if kind != "phase1" and n_launches is not None and est.launches is not None and self.launch_us:
            us = max(us + self.launch_us * (n_launches - est.launches), MIN_SHARE * us)
        return us, level

    def machine_factor(self, observed: dict[tuple[str, str], float]) -> float | None:
        """How fast a machine runs host code against this model: the median over the (API, kind) medians a
        profile of that machine measured, ``observed`` (us), of measured / this model's API-level estimate.
        Host time is CPU time (argument checks, tiling, executor building), so one factor carries over to the
        APIs the profile did not call; None when no observed API is known at the API level."""
        ratios = sorted(us / est.median_us for key, us in observed.items()
                        if us > 0 and (est := self.apis.get(key)) is not None and est.median_us > 0)
        if not ratios:
            return None
        mid = len(ratios) // 2
        return ratios[mid] if len(ratios) % 2 else math.sqrt(ratios[mid - 1] * ratios[mid])

    def scaled(self, factor: float) -> "HostModel":
        """This model on a machine ``factor`` times as slow (every estimate and the launch cost scaled)."""
        def one(e: HostEstimate) -> HostEstimate:
            return HostEstimate(e.median_us * factor, e.n, e.provenance, e.tensors, e.launches)
        return HostModel(name=self.name, apis={k: one(e) for k, e in self.apis.items()},
                         families={k: one(e) for k, e in self.families.items()},
                         kinds={k: one(e) for k, e in self.kinds.items()}, tensor_slope=self.tensor_slope,
                         launch_us=self.launch_us * factor, profiles=dict(self.profiles))

    def timing(self, api: str, n_tensors: int | None = None, n_launches: int | None = None) -> HostApiTiming:
        """The modelled host timing of `api` in the form a calibration gives measured ones."""
        out: dict[str, Measured] = {}
        for kind in KINDS:
            got = self.predict(api, kind, n_tensors, n_launches)
            if got is not None:
                src = self.apis.get((api, kind)) or self.families.get((api_family(api), kind)) or self.kinds[kind]
                out[kind] = Measured(median_us=got[0], n=src.n, provenance=src.provenance)
        return HostApiTiming(**out)

    # ---- file form ---------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        def est(e: HostEstimate) -> dict[str, Any]:
            d: dict[str, Any] = {"median_us": round(e.median_us, 4), "n": e.n}
            if e.tensors is not None:
                d["tensors"] = round(e.tensors, 3)
            if e.launches is not None:
                d["launches"] = round(e.launches, 3)
            d["from"] = [p.file for p in e.provenance]
            return d
        apis: dict[str, dict] = {}
        for (api, kind), e in sorted(self.apis.items()):
            apis.setdefault(api, {})[kind] = est(e)
        fams: dict[str, dict] = {}
        for (fam, kind), e in sorted(self.families.items()):
            fams.setdefault(fam, {})[kind] = est(e)
        return {"opsim_host_model": 1, "profiles": dict(sorted(self.profiles.items())),
                "tensor_slope": round(self.tensor_slope, 4), "launch_us": round(self.launch_us, 4),
                "all": {k: est(e) for k, e in sorted(self.kinds.items())}, "families": fams, "apis": apis}

    @classmethod
    def from_dict(cls, data: dict[str, Any], name: str = "") -> "HostModel":
        def est(d: dict[str, Any]) -> HostEstimate:
            return HostEstimate(median_us=float(d["median_us"]), n=int(d["n"]),
                                provenance=tuple(Provenance(file=str(f)) for f in d.get("from", ())),
                                tensors=float(d["tensors"]) if d.get("tensors") is not None else None,
                                launches=float(d["launches"]) if d.get("launches") is not None else None)
        m = cls(name=name, tensor_slope=float(data.get("tensor_slope", 0.0)),
                launch_us=float(data.get("launch_us", 0.0)),
                profiles={str(k): str(v) for k, v in (data.get("profiles") or {}).items()})
        m.kinds = {k: est(v) for k, v in (data.get("all") or {}).items()}
        m.families = {(f, k): est(v) for f, ks in (data.get("families") or {}).items() for k, v in ks.items()}
        m.apis = {(a, k): est(v) for a, ks in (data.get("apis") or {}).items() for k, v in ks.items()}
        return m


HOST_DEFAULTS_FILE = "host_defaults.yaml"
_DEFAULT: list[HostModel] = []


def default_host_model() -> HostModel:
    """The built-in host model (``opsim/device/host_defaults.yaml``, refitted by docs/refit_host.py), loaded once."""
    if not _DEFAULT:

        import yaml  # lazy: keeps PyYAML out of importing opsim.device.host_model
        ref = resources.files("opsim.device").joinpath(HOST_DEFAULTS_FILE)
        data = yaml.safe_load(ref.read_text(encoding="utf-8")) if ref.is_file() else {}
        _DEFAULT.append(HostModel.from_dict(data or {}, name=f"built-in host model ({HOST_DEFAULTS_FILE})"))
    return _DEFAULT[0]


def load_host_model(path: str | Path) -> HostModel:
    import yaml  # lazy: keeps PyYAML out of importing opsim.device.host_model
    p = Path(path)
    return HostModel.from_dict(yaml.safe_load(p.read_text(encoding="utf-8")) or {}, name=str(p))


__all__ = ["FAMILIES", "KINDS", "HostEstimate", "HostModel", "api_family", "default_host_model", "load_host_model"]
