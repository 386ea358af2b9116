"""Read msprof's communication.json (per collective: its time split) and communication_matrix.json (per group:
the links between ranks) of one rank of a torch_npu profile.

Both files are small in practice (kilobytes per step); a file above `MAX_BYTES`, nested deeper than
the parser's depth, a device such as /dev/zero or a value of the wrong type is refused naming the file and the field.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opsim.errors import ProfileFormatError
from opsim.ingest.locate import check_regular_file

MAX_BYTES = 64 << 20
"""Largest communication file read (opsim's bound: the shared 8-NPU profile's are 6-8 KB for one step)."""
MAX_RANK = 1 << 20
"""Largest rank id accepted in a communication matrix's "src-dst" key."""


@dataclass(frozen=True)
class CommOp:
    """One collective of communication.json: its name (hcom_allReduce__586_0_1), its group's hash (the
    "@17522688603477080586" suffix) and the time split msprof reports, in microseconds."""

    name: str
    group_hash: str
    step: str
    start_us: float
    elapse_us: float
    transit_us: float
    wait_us: float
    sync_us: float
    idle_us: float


def _load(path: Path, expected: str) -> Any:
    size = check_regular_file(path, expected)
    if size > MAX_BYTES:
        raise ProfileFormatError(f"{path}: {size} bytes, more than the {MAX_BYTES >> 20} MiB a {expected} may have; "
                                 f"give the file torch_npu wrote")
    try:
        return json.loads(path.read_bytes().decode("utf-8-sig"))
    except RecursionError:  # the C parser refuses nesting past the interpreter's depth, quickly
        raise ProfileFormatError(f"{path}: JSON nested too deeply to be a {expected}; give the file torch_npu "
                                 f"wrote") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProfileFormatError(f"{path}: not valid JSON ({str(exc).splitlines()[0][:120]}); export the profile "
                                 f"again") from None


def _obj(value: Any, path: Path, field: str) -> dict:
    if not isinstance(value, dict):
        raise ProfileFormatError(f"{path}: field {field!r} is {type(value).__name__}, expected an object; export "
                                 f"the profile again")
    return value


def _ms(info: dict, key: str, path: Path, where: str, scale: float = 1000.0) -> float:
    """A time field in microseconds (the file's milliseconds x 1000; `scale` 1 for a microsecond field)."""
    value = info.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= 1e20 / scale:
        raise ProfileFormatError(f"{path}: {where}: field {key!r} is {str(value)[:40]!r}, expected a non-negative "
                                 f"number of {'milliseconds' if scale != 1 else 'microseconds'}")
    return float(value) * scale


def read_communication(path: str | Path) -> list[CommOp]:
    """The collectives (and point-to-point ops) of a communication.json, in file order."""
    p = Path(path)
    data = _obj(_load(p, "communication.json"), p, "(top level)")
    out: list[CommOp] = []
    for step, body in data.items():
        for kind in ("collective", "p2p"):
            ops = _obj(_obj(body, p, step).get(kind, {}), p, f"{step}.{kind}")
            for key, op in ops.items():
                if key == "Total Op Info":
                    continue
                where = f"{step}.{kind}.{key}"
                name, _, ghash = str(key).partition("@")
                info = _obj(_obj(op, p, where).get("Communication Time Info"), p, where + ".Communication Time Info")
                out.append(CommOp(name=name, group_hash=ghash, step=str(step),
                                  start_us=_ms(info, "Start Timestamp(us)", p, where, 1.0),
                                  elapse_us=_ms(info, "Elapse Time(ms)", p, where),
                                  transit_us=_ms(info, "Transit Time(ms)", p, where),
                                  wait_us=_ms(info, "Wait Time(ms)", p, where),
                                  sync_us=_ms(info, "Synchronization Time(ms)", p, where),
                                  idle_us=_ms(info, "Idle Time(ms)", p, where)))
    return out


def read_matrix_groups(path: str | Path) -> dict[str, set[int]]:
    """Group hash -> every rank a communication_matrix.json names in it (each "src-dst" link key): the
    group's members as this rank saw them."""
    p = Path(path)
    data = _obj(_load(p, "communication_matrix.json"), p, "(top level)")
    out: dict[str, set[int]] = {}
    for step, body in data.items():
        for kind in ("collective", "p2p"):
            for key, links in _obj(_obj(body, p, step).get(kind, {}), p, f"{step}.{kind}").items():
                ghash = str(key).rpartition("@")[2]
                members = out.setdefault(ghash, set())
                for link in _obj(links, p, f"{step}.{kind}.{key}"):
                    members.update(_link_ranks(str(link), p, f"{step}.{kind}.{key}"))
    return out


def _link_ranks(link: str, path: Path, where: str) -> tuple[int, int]:
    src, sep, dst = link.partition("-")
    if not sep or not (src.isdigit() and dst.isdigit()) or len(src) > 7 or len(dst) > 7 \
            or max(int(src), int(dst)) > MAX_RANK:
        raise ProfileFormatError(f"{path}: {where}: link key {link[:40]!r} is not \"SRC-DST\" (two rank numbers "
                                 f"up to {MAX_RANK}); export the profile again")
    return int(src), int(dst)


__all__ = ["CommOp", "read_communication", "read_matrix_groups", "MAX_BYTES"]
