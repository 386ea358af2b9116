"""Environment variables as opbase parses them (exact rules, per variable)."""
from __future__ import annotations

from typing import Mapping

K_CACHE_LIMIT = 10000
K_MAX_CACHE_LIMIT = 10000000
K_DEFAULT_AICPU_CACHE_LIMIT = 32768
_U64 = 1 << 64


def parse_strtoull(text: str) -> int | None:
    """C++ std::stoull: leading whitespace and one sign accepted, stops at the first non-digit, a negative
    number wraps modulo 2^64; None when no digit parses or the value overflows 64 bits."""
    i, n = 0, len(text)
    while i < n and text[i] in " \t\n\v\f\r":
        i += 1
    neg = False
    if i < n and text[i] in "+-":
        neg = text[i] == "-"
        i += 1
    start = i
    while i < n and "0" <= text[i] <= "9":
        i += 1
    if i == start:
        return None
    value = int(text[start:i])
    if value >= _U64:
        return None
    return (-value) % _U64 if neg else value


def parse_aclnn_cache_limit(value: str | None) -> int:
    """ACLNN_CACHE_LIMIT (OpExecCache capacity): default 10000, lenient strtoull, clamp to 10 000 000."""
    cap = K_CACHE_LIMIT
    if value is not None:
        parsed = parse_strtoull(value)
        if parsed is not None:
            cap = parsed
    return min(cap, K_MAX_CACHE_LIMIT)


def parse_aicpu_cache_limit(value: str | None) -> int:
    """ACLNN_AICPU_CACHE_LIMIT: default 32768; every character must be a digit (else default); empty,
    32 characters or more, or a 64-bit overflow -> default; no clamp; 0 is legal."""
    if value is None:
        return K_DEFAULT_AICPU_CACHE_LIMIT
    if len(value) >= 32 or value == "" or not all("0" <= c <= "9" for c in value):
        return K_DEFAULT_AICPU_CACHE_LIMIT
    v = int(value)
    return v if v < _U64 else K_DEFAULT_AICPU_CACHE_LIMIT


def parse_aicpu_cache_limit_guide(value: str | None) -> tuple[int, str | None]:
    """The published aicpu_task guide's rule (profile `aicpu-guide`): ACLNN_CACHE_LIMIT governs the AI CPU
    cache, default 10000, clamped to 10 000 000, a non-numeric value warns and falls back to the default.
    Returns (limit, warning or None)."""
    if value is None:
        return K_CACHE_LIMIT, None
    text = value.strip()
    if not text or not text.isdigit():
        return K_CACHE_LIMIT, f"ACLNN_CACHE_LIMIT={value!r} is not a number; using the default {K_CACHE_LIMIT}"
    return min(int(text), K_MAX_CACHE_LIMIT), None


def ge_profiling_enabled(value: str | None) -> bool:
    """GE_PROFILING_TO_STD_OUT: enabled iff the value's first character is '1'."""
    return bool(value) and value[0] == "1"


def is_set(env: Mapping[str, str], name: str) -> bool:
    """DISABLE_L2_CACHE-style switch: any value (even empty) counts."""
    return name in env
