"""The op type dictionary (OpTypeDict): op type names to u32 ids.

Id 0 is the reserved "BEGIN__" entry, so 0 is never a valid op type; the internal ops MemSet, MemSetV2
and NonFiniteCheck are registered before any user op, like opbase does at load time.
"""
from __future__ import annotations

from opsim.errors import InvalidArgumentError

RESERVED_OP_TYPE = "BEGIN__"
INTERNAL_OP_TYPES = ("MemSet", "MemSetV2", "NonFiniteCheck")


class OpTypeDict:
    """Name <-> id registry. Registration order gives the ids, so it is deterministic."""

    def __init__(self) -> None:
        self._names: list[str] = [RESERVED_OP_TYPE]
        self._ids: dict[str, int] = {RESERVED_OP_TYPE: 0}
        for name in INTERNAL_OP_TYPES:
            self.register(name)

    def register(self, name: str) -> int:
        """Id of `name`, registering it if new."""
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"op type name must be a non-empty string, got {name!r}")
        found = self._ids.get(name)
        if found is not None:
            return found
        new_id = len(self._names)
        self._names.append(name)
        self._ids[name] = new_id
        return new_id

    def to_op_type(self, name: str) -> int:
        """Id of a registered name, 0 if unknown (opbase's ToOpType)."""
        return self._ids.get(name, 0)

    def to_str(self, op_type: int) -> str:
        """Name of an id; "" when out of range."""
        if 0 <= op_type < len(self._names):
            return self._names[op_type]
        return ""

    def size(self) -> int:
        """Number of entries including the reserved id 0 (GetAllOpTypeSize)."""
        return len(self._names)

    def is_valid(self, op_type: int) -> bool:
        """What AddDirectInvokeTask checks: 0 < op_type < size."""
        return 0 < op_type < len(self._names)

    def names(self) -> list[str]:
        return list(self._names[1:])


OP_TYPE_DICT = OpTypeDict()


def register_op_type(name: str) -> int:
    """Register an op type in the process-wide dictionary and return its id."""
    return OP_TYPE_DICT.register(name)


def op_type_id(name: str) -> int:
    return OP_TYPE_DICT.to_op_type(name)


def op_type_name(op_type: int) -> str:
    return OP_TYPE_DICT.to_str(op_type)


def get_all_op_type_size() -> int:
    return OP_TYPE_DICT.size()
