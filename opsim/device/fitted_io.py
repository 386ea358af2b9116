"""FittedTiming <-> plain data (the calibration YAML), with errors naming the file and the field.

Layout (every fitted number carries its fit quality and provenance):

    device:
      cores:      {AI_VECTOR_CORE: {overhead_us, us_per_byte, us_per_flop, us_per_byte_per_block, n,
                                    median_error, provenance: [{file, rows: "2-5,9"}]}}
      op_types:   {Add@AI_VECTOR_CORE: {...same fields...}}
      signatures: [{op_type, core, input_shapes, input_dtypes, output_shapes, output_dtypes, median_us, n,
                    provenance}]
    host:
      phases: {enqueue: {median_us, n, provenance}, dequeue: ..., dequeue gap: ...}   (optional)
      apis: {aclnnAdd: {phase1: {median_us, n, provenance}, phase2: ..., phase2_miss: ..., phase2_hit: ...}}
"""
from __future__ import annotations

import math
from typing import Any

from opsim.device.family import FAMILIES, FamilyModel, FamilyParams, OpTypeFactor
from opsim.device.host_phases import HOST_PHASES
from opsim.device.fitted import (
    FittedTiming,
    HostApiTiming,
    KernelFit,
    Measured,
    Provenance,
    SignatureTime,
    parse_rows,
)
from opsim.errors import CalibrationError

_FIT_NUMBERS = ("overhead_us", "us_per_byte", "us_per_flop", "us_per_byte_per_block")
_HOST_KINDS = ("phase1", "phase2", "phase2_miss", "phase2_hit")


def _num(x: float) -> float:
    """Round for a readable YAML: 6 significant digits is far below the fit error."""
    return float(f"{x:.6g}")


def _prov(prov: tuple[Provenance, ...]) -> list[dict]:
    return [{"file": p.file, "rows": p.rows_text()} for p in prov]


def _fit_dict(fit: KernelFit) -> dict:
    d: dict[str, Any] = {k: _num(getattr(fit, k)) for k in _FIT_NUMBERS}
    if fit.bytes_range is not None:
        d["bytes_range"] = [_num(v) for v in fit.bytes_range]
    if fit.flops_range is not None:
        d["flops_range"] = [_num(v) for v in fit.flops_range]
    d.update(n=fit.n, median_error=_num(fit.median_error), provenance=_prov(fit.provenance))
    return d


def _measured_dict(m: Measured) -> dict:
    return {"median_us": _num(m.median_us), "n": m.n, "provenance": _prov(m.provenance)}


_FAMILY_NUMBERS = ("overhead_us", "compute_eff", "hbm_eff", "core_bw", "log_p10", "log_p90")
_FACTOR_NUMBERS = ("factor", "log_p10", "log_p90")
#: optional launch terms of a family (absent: 0, as in files written before they existed).
_LAUNCH_NUMBERS = ("block_us", "mix_us")


def family_to_dict(m: FamilyModel) -> dict:
    """The family model as plain data: families (parameters, n, byte range) and op-type factors."""
    fams = {}
    for name, p in m.families.items():
        d: dict[str, Any] = {k: _num(getattr(p, k)) for k in _FAMILY_NUMBERS}
        d["n"] = p.n
        for k in _LAUNCH_NUMBERS:
            if getattr(p, k):
                d[k] = _num(getattr(p, k))
        if p.bytes_range is not None:
            d["bytes_range"] = [_num(v) for v in p.bytes_range]
        fams[name] = d
    ops = {f"{op}@{fam}": {**{k: _num(getattr(f, k)) for k in _FACTOR_NUMBERS}, "n": f.n,
                           "bytes_range": [_num(v) for v in f.bytes_range],
                           **({"itemsizes": [_num(v) for v in f.itemsizes]} if f.itemsizes else {})}
           for (op, fam), f in m.op_types.items()}
    return {"n": m.n, "families": fams, "op_types": ops}


def family_from_dict(data: Any, file: str, where: str = "family") -> FamilyModel | None:
    """Parse a `family` section (None when absent); a malformed field raises CalibrationError naming it."""
    if data is None:
        return None
    r = _Reader(file)
    data = r.mapping(data, where)
    m = FamilyModel(n=int(r.number(data, "n", where, default=0, integer=True)))
    for name, d in r.mapping(data.get("families"), f"{where}.families").items():
        w = f"{where}.families.{name}"
        if name not in FAMILIES:
            raise r.fail(w, f"unknown family; known: {', '.join(FAMILIES)}")
        d = r.mapping(d, w)
        nums = {k: r.number(d, k, w) if not k.startswith("log") else _signed(r, d, k, w) for k in _FAMILY_NUMBERS}
        if nums["compute_eff"] <= 0 or nums["hbm_eff"] <= 0 or nums["core_bw"] <= 0:
            raise r.fail(w, "compute_eff, hbm_eff and core_bw must be > 0")
        nums.update({k: r.number(d, k, w, default=0.0) for k in _LAUNCH_NUMBERS})
        m.families[str(name)] = FamilyParams(**nums, n=int(r.number(d, "n", w, default=0, integer=True)),
                                             bytes_range=r.range(d, "bytes_range", w))
    for key, d in r.mapping(data.get("op_types"), f"{where}.op_types").items():
        w = f"{where}.op_types.{key}"
        op, sep, fam = str(key).rpartition("@")
        if not sep or not op or fam not in FAMILIES:
            raise r.fail(w, f"keys are OPTYPE@FAMILY with a family of {', '.join(FAMILIES)}")
        d = r.mapping(d, w)
        factor = r.number(d, "factor", w)
        if factor <= 0:
            raise r.fail(f"{w}.factor", "must be > 0")
        m.op_types[(op, fam)] = OpTypeFactor(factor=factor, n=int(r.number(d, "n", w, default=0, integer=True)),
                                             log_p10=_signed(r, d, "log_p10", w), log_p90=_signed(r, d, "log_p90", w),
                                             bytes_range=r.range(d, "bytes_range", w) or (0.0, 0.0),
                                             itemsizes=_itemsizes(r, d, w))
    return m


def _itemsizes(r: "_Reader", d: dict, where: str) -> tuple[float, ...]:
    """An op-type factor's element sizes: absent (any), or a short list of sizes in bytes (0 < size <= 16)."""
    v = d.get("itemsizes")
    if v is None:
        return ()
    if (not isinstance(v, list) or not 0 < len(v) <= 16
            or any(isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 < x <= 16 for x in v)):
        raise r.fail(f"{where}.itemsizes", f"must be a list of 1 to 16 element sizes in bytes (0 < size <= 16), "
                                           f"got {str(v)[:80]!r}")
    return tuple(float(x) for x in v)


def _signed(r: "_Reader", d: dict, key: str, where: str) -> float:
    v = d.get(key, 0.0)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or abs(v) > 20:
        raise r.fail(f"{where}.{key}", f"must be a finite number within [-20, 20], got {v!r}")
    return float(v)


def fitted_to_dict(t: FittedTiming) -> dict:
    """Plain data for YAML; the order of keys is the reading order."""
    sigs = []
    for key, s in t.signatures.items():
        op, core, ish, idt, osh, odt = key.split("|")
        sigs.append({"op_type": op, "core": core, "input_shapes": ish, "input_dtypes": idt, "output_shapes": osh,
                     "output_dtypes": odt, "median_us": _num(s.median_us), "n": s.n,
                     "provenance": _prov(s.provenance)})
    apis = {}
    for api, h in t.host_apis.items():
        apis[api] = {k: _measured_dict(getattr(h, k)) for k in _HOST_KINDS if getattr(h, k) is not None}
    device: dict[str, Any] = {
        "cores": {c: _fit_dict(f) for c, f in t.cores.items()},
        "op_types": {f"{op}@{core}": _fit_dict(f) for (op, core), f in t.op_types.items()},
        "signatures": sigs,
    }
    if t.family is not None:
        device["family"] = family_to_dict(t.family)
    return {
        "device": device,
        "host": {"phases": {k: _measured_dict(m) for k, m in t.host_phases.items()}, "apis": apis}
        if t.host_phases else {"apis": apis},
    }


class _Reader:
    def __init__(self, file: str):
        self.file = file

    def fail(self, where: str, what: str) -> CalibrationError:
        return CalibrationError(f"{self.file}: field {where}: {what}; regenerate the file with `opsim calibrate` "
                                f"or fix that field")

    def mapping(self, value: Any, where: str) -> dict:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(where, f"must be a mapping, got {type(value).__name__}")
        return value

    def number(self, d: dict, key: str, where: str, *, default: float | None = None, integer: bool = False) -> float:
        if key not in d:
            if default is not None:
                return default
            raise self.fail(f"{where}.{key}", "missing")
        v = d[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise self.fail(f"{where}.{key}", f"must be a finite number >= 0, got {v!r}")
        if integer and v != int(v):
            raise self.fail(f"{where}.{key}", f"must be a whole number, got {v!r}")
        return int(v) if integer else float(v)

    def text(self, d: dict, key: str, where: str) -> str:
        v = d.get(key)
        if not isinstance(v, str):
            raise self.fail(f"{where}.{key}", f"must be a string, got {v!r}")
        return v

    def provenance(self, d: dict, where: str) -> tuple[Provenance, ...]:
        items = d.get("provenance", [])
        if not isinstance(items, list):
            raise self.fail(f"{where}.provenance", "must be a list of {file, rows}")
        out = []
        for i, p in enumerate(items):
            w = f"{where}.provenance[{i}]"
            p = self.mapping(p, w)
            try:
                rows = parse_rows(p.get("rows", ""))
            except ValueError:
                raise self.fail(f"{w}.rows", f"must be row numbers and ranges like '2-5,9', got {p.get('rows')!r}") \
                    from None
            out.append(Provenance(file=self.text(p, "file", w), rows=rows))
        return tuple(out)

    def range(self, d: dict, key: str, where: str) -> tuple[float, float] | None:
        v = d.get(key)
        if v is None:
            return None
        if (not isinstance(v, list) or len(v) != 2
                or any(isinstance(x, bool) or not isinstance(x, (int, float)) or x < 0 for x in v) or v[0] > v[1]):
            raise self.fail(f"{where}.{key}", f"must be [low, high] with 0 <= low <= high, got {v!r}")
        return float(v[0]), float(v[1])

    def fit(self, d: Any, where: str) -> KernelFit:
        d = self.mapping(d, where)
        nums = {k: self.number(d, k, where, default=0.0 if k != "overhead_us" else None) for k in _FIT_NUMBERS}
        return KernelFit(**nums, n=int(self.number(d, "n", where, default=0, integer=True)),
                         median_error=self.number(d, "median_error", where, default=0.0),
                         provenance=self.provenance(d, where), bytes_range=self.range(d, "bytes_range", where),
                         flops_range=self.range(d, "flops_range", where))

    def measured(self, d: Any, where: str) -> Measured:
        d = self.mapping(d, where)
        return Measured(median_us=self.number(d, "median_us", where),
                        n=int(self.number(d, "n", where, default=0, integer=True)),
                        provenance=self.provenance(d, where))


def fitted_from_dict(data: Any, file: str, name: str | None = None) -> FittedTiming:
    """Parse the `device`/`host` sections; any malformed field raises CalibrationError naming file and field."""
    r = _Reader(file)
    data = r.mapping(data, "(top level)")
    device = r.mapping(data.get("device"), "device")
    host = r.mapping(data.get("host"), "host")
    t = FittedTiming(name=name if name is not None else file)
    for core, f in r.mapping(device.get("cores"), "device.cores").items():
        t.cores[str(core)] = r.fit(f, f"device.cores.{core}")
    for key, f in r.mapping(device.get("op_types"), "device.op_types").items():
        op, sep, core = str(key).rpartition("@")
        if not sep or not op or not core:
            raise r.fail(f"device.op_types.{key}", "keys are OPTYPE@CORE, for example Add@AI_VECTOR_CORE")
        t.op_types[(op, core)] = r.fit(f, f"device.op_types.{key}")
    sigs = device.get("signatures") or []
    if not isinstance(sigs, list):
        raise r.fail("device.signatures", "must be a list")
    for i, s in enumerate(sigs):
        w = f"device.signatures[{i}]"
        s = r.mapping(s, w)
        parts = [r.text(s, k, w) for k in ("op_type", "core", "input_shapes", "input_dtypes", "output_shapes",
                                            "output_dtypes")]
        key = "|".join(parts)
        t.signatures[key] = SignatureTime(median_us=r.number(s, "median_us", w),
                                          n=int(r.number(s, "n", w, default=0, integer=True)),
                                          provenance=r.provenance(s, w))
    t.family = family_from_dict(device.get("family"), file, "device.family")
    for phase, m in r.mapping(host.get("phases"), "host.phases").items():
        if phase not in HOST_PHASES:
            raise r.fail(f"host.phases.{phase}", f"unknown host phase; known: {', '.join(HOST_PHASES)}")
        t.host_phases[str(phase)] = r.measured(m, f"host.phases.{phase}")
    for api, h in r.mapping(host.get("apis"), "host.apis").items():
        w = f"host.apis.{api}"
        h = r.mapping(h, w)
        unknown = sorted(set(h) - set(_HOST_KINDS))
        if unknown:
            raise r.fail(f"{w}.{unknown[0]}", f"unknown; allowed: {', '.join(_HOST_KINDS)}")
        t.host_apis[str(api)] = HostApiTiming(**{k: r.measured(h[k], f"{w}.{k}") for k in _HOST_KINDS if k in h})
    return t


__all__ = ["family_from_dict", "family_to_dict", "fitted_from_dict", "fitted_to_dict"]
