"""Exact output times: simulated time becomes integer nanoseconds once, and every writer formats from those.

Simulated time is a float in microseconds. Each output (trace.json, trace_view.json, the CSVs, the
GE_PROFILING_TO_STD_OUT text, the profiler databases) converts a time to an integer nanosecond with `to_ns`
exactly once (an end is converted from `start + dur`, never as `to_ns(start) + to_ns(dur)`), and then only
formats integers. Because rounding is monotone, a child span that ends before its parent in simulated time
still does after rounding, and siblings never overlap.

Two text forms:

- `us_text(ns, decimals)`: an exact decimal (``1.400``), no float involved: the CSVs, trace_view.json and the
  nnopbase lines use it (`us_texts` formats a whole column at once, `put_us_text` into compiled rows).
- `json_ts(ns)` and `dur_float(start_ns, end_ns)`: Chrome Trace JSON numbers, which readers parse as doubles
  and add. The duration is the largest double for which ``ts + dur`` (double addition) does not pass the end's
  double (it lands on it exactly unless the rounding of the sum cannot), so ``1.1 + 0.3 = 1.4000000000000001``
  can never push a slice past its sibling; `nest_durations` also caps a child's sum at its parent's.
"""
from __future__ import annotations

import math

from types import SimpleNamespace

import numpy as np

NS_PER_US = 1000


def to_ns(t_us: float) -> int:
    """Simulated microseconds -> integer nanoseconds (round half to even, as numpy's rint)."""
    return int(round(t_us * 1000.0))


def to_ns_array(t_us):  # numpy array in, int64 array out
    """`to_ns` over a numpy array (bit-identical results)."""
    x = np.multiply(t_us, 1000.0)
    np.rint(x, out=x)
    return x.astype(np.int64)


_THOUSANDTHS = tuple(f"{r:03d}" for r in range(1000))


def us_text(ns: int, decimals: int = 3) -> str:
    """Integer nanoseconds as an exact microsecond decimal with 3 (or more, zero-padded) decimals."""
    if ns < 0:
        return "-" + us_text(-ns, decimals)
    q = ns // NS_PER_US
    if decimals == 3:
        return f"{q}.{_THOUSANDTHS[ns - q * NS_PER_US]}"
    return f"{q}.{_THOUSANDTHS[ns - q * NS_PER_US]}" + "0" * (decimals - 3)


def us_texts(ns, decimals: int = 3) -> list[str]:
    """`us_text` of every integer of `ns` (an int64 array or a sequence of ints), formatted by one compiled
    loop: the writers' bulk columns."""
    a = np.ascontiguousarray(ns, dtype=np.int64)
    if len(a) == 0:
        return []
    buf = np.empty(len(a) * (_US_TEXT_WIDTH + decimals), dtype=np.uint8)
    end = compiled().put_us_texts(a, buf, decimals)
    return buf[:end - 1].tobytes().decode("ascii").split("\n")


_US_TEXT_WIDTH = 23
"""Bytes of one `us_texts` item besides its decimals: sign, 19 digits, point, newline."""


def put_us_text(buf, pos, ns, decimals):
    """Write ``us_text(ns, decimals)`` into the uint8 array `buf` at `pos`; returns the end (compiled by
    `compiled()`)."""
    if ns < 0:
        buf[pos] = 45  # "-"
        pos += 1
        ns = -ns
    q = ns // 1000
    r = ns - q * 1000
    pos = _put_digits_compiled(buf, pos, q)
    buf[pos] = 46  # "."
    buf[pos + 1] = 48 + r // 100
    buf[pos + 2] = 48 + (r // 10) % 10
    buf[pos + 3] = 48 + r % 10
    pos += 4
    for _ in range(decimals - 3):
        buf[pos] = 48
        pos += 1
    return pos


def _put_us_texts(ns, buf, decimals):  # compiled by `compiled()`
    pos = 0
    for i in range(len(ns)):
        pos = _put_us_text_compiled(buf, pos, ns[i], decimals)
        buf[pos] = 10  # "\n"
        pos += 1
    return pos


def ts_float(ns: int) -> float:
    """A Chrome Trace ``ts`` (microseconds): the nearest double to ns / 1000."""
    return ns / 1000.0


def json_ts(ns: int) -> str:
    """`ts_float` as JSON text (what ``json.dumps`` writes for it)."""
    return repr(ns / 1000.0)


def dur_float(start_ns: int, end_ns: int, cap: float = math.inf) -> float:
    """A non-negative double ``d`` with ``start + d`` (double addition) equal to ``min(end, cap)``, or one step
    below it when the rounding of the sum cannot land on it (a tie); never past it. start and end are the
    nearest doubles to start_ns / 1000 and end_ns / 1000. The plain quotient (e - s) / 1000 is used when it
    already lands (it prints shortest: ``0.3``), else the difference of the two doubles."""
    return float(_dur_float(start_ns, end_ns, cap))


def _dur_float(start_ns, end_ns, cap):  # plain Python, and compiled by `compiled()`
    ts = start_ns / 1000.0
    te = min(end_ns / 1000.0, cap)
    d = (end_ns - start_ns) / 1000.0
    if ts + d == te:
        return d
    d = te - ts
    if d <= 0.0:
        return 0.0
    # |ts + d - te| is at most half a unit of d; the sum passes te only when d and te share a binade, so a
    # step or two of d brings it back
    while d > 0.0 and ts + d > te:
        d = np.nextafter(d, 0.0)
    return d


def nest_durations(starts, ends):
    """Place the slices of one trace track so that they nest strictly, in integer nanoseconds and in the
    doubles a reader adds. `starts` and `ends` (int64 arrays, nanoseconds) must already be in (start, -end,
    record order) order; a child's end is clamped to its parent's, and its duration is chosen so that its
    ``ts + dur`` never passes its parent's. Returns (clamped ends, durations to write)."""
    s = np.ascontiguousarray(starts, dtype=np.int64)
    e = np.array(ends, dtype=np.int64)  # a copy: clamped in place
    durs = np.empty(len(s), dtype=np.float64)
    compiled().nest(s, e, durs)
    return e, durs


def _nest(s, e, durs):  # compiled by `compiled()`
    n = len(s)
    stack_end = np.empty(n + 1, dtype=np.int64)
    stack_fend = np.empty(n + 1, dtype=np.float64)
    top = 0
    for i in range(n):
        st = s[i]
        en = e[i]
        while top > 0 and st >= stack_end[top - 1]:
            top -= 1
        cap = np.inf
        if top > 0:
            if en > stack_end[top - 1]:
                en = stack_end[top - 1]
            cap = stack_fend[top - 1]
        d = _dur_float_compiled(st, en, cap)
        e[i] = en
        durs[i] = d
        stack_end[top] = en
        stack_fend[top] = st / 1000.0 + d
        top += 1


# ---- JSON numbers written by compiled code (trace.json at scale) ----------------------------------------------

JSON_US_MAX = 10**15
"""Below this many nanoseconds (in magnitude), ``json_ts(ns)`` is the exact decimal of ns / 1000 with its trailing
zeros dropped (a decimal of at most 15 significant digits is the shortest text of its nearest double), which
`put_json_us` writes without a float."""


_PAIRS = np.frombuffer("".join(f"{i:02d}" for i in range(100)).encode("ascii"), dtype=np.uint8)
"""The two digits of 0..99, back to back: `put_digits` writes two digits per division."""
_POW10 = np.array([10**k for k in range(19)], dtype=np.int64)
"""Powers of ten up to 10**18: `put_digits` counts digits by comparing, without dividing."""


def put_digits(buf, pos, v):
    """Write the decimal digits of the integer v >= 0 into the uint8 array `buf` at `pos`; returns the end
    (compiled by `compiled()`)."""
    n = 1
    while n < 19 and v >= _POW10[n]:
        n += 1
    end = pos + n
    p = end
    while v >= 100:
        q = v // 100
        r = 2 * (v - q * 100)
        p -= 2
        buf[p] = _PAIRS[r]
        buf[p + 1] = _PAIRS[r + 1]
        v = q
    if v >= 10:
        buf[p - 2] = _PAIRS[2 * v]
        buf[p - 1] = _PAIRS[2 * v + 1]
    else:
        buf[p - 1] = 48 + v
    return end


def _fractions() -> tuple[np.ndarray, np.ndarray]:
    """The decimals of every 0..999 thousandths as `json_ts` writes them (trailing zeros dropped, "0" for none),
    three bytes each, and their lengths."""
    text, length = np.zeros(3000, dtype=np.uint8), np.zeros(1000, dtype=np.int64)
    for r in range(1000):
        t = (f"{r:03d}".rstrip("0") or "0").encode("ascii")
        text[3 * r:3 * r + len(t)] = np.frombuffer(t, dtype=np.uint8)
        length[r] = len(t)
    return text, length


_FRACTION, _FRACTION_LEN = _fractions()


def put_json_us(buf, pos, ns):
    """Write ``json_ts(ns)`` into the uint8 array `buf` at `pos` (|ns| < JSON_US_MAX; up to two bytes past the
    text may be overwritten); returns the end (compiled by `compiled()`, for code that formats at scale)."""
    if ns < 0:
        buf[pos] = 45  # "-"
        pos += 1
        ns = -ns
    q = ns // 1000
    r = ns - q * 1000
    pos = _put_digits_compiled(buf, pos, q)
    buf[pos] = 46  # "."
    buf[pos + 1] = _FRACTION[3 * r]
    buf[pos + 2] = _FRACTION[3 * r + 1]
    buf[pos + 3] = _FRACTION[3 * r + 2]
    return pos + 1 + _FRACTION_LEN[r]


_COMPILED: SimpleNamespace | None = None


def compiled() -> SimpleNamespace:
    """The compiled forms of `put_json_us`, `put_digits`, `put_us_text`, `us_texts`' loop and the nesting loop
    (Numba is imported on first use only, so that reading a scenario never loads it). `opsim.trace.json_rows`
    inlines the three ``put_*`` into its cached row loop, and Numba's cache checks only that loop's own file:
    after changing them here, delete the ``json_rows._render-*`` files in ``opsim/trace/__pycache__`` (a fresh
    install has none)."""
    global _COMPILED, _dur_float_compiled, _put_digits_compiled, _put_us_text_compiled
    if _COMPILED is None:
        from numba import njit  # lazy: keeps Numba out of importing opsim.trace.timefmt
        _dur_float_compiled = njit(cache=True)(_dur_float)
        _put_digits_compiled = njit(cache=True, inline="always")(put_digits)
        _put_us_text_compiled = njit(cache=True, inline="always")(put_us_text)
        _COMPILED = SimpleNamespace(nest=njit(cache=True)(_nest), put_digits=_put_digits_compiled,
                                    put_json_us=njit(cache=True, inline="always")(put_json_us),
                                    put_us_text=_put_us_text_compiled,
                                    put_us_texts=njit(cache=True)(_put_us_texts))
    return _COMPILED


_dur_float_compiled = None
_put_digits_compiled = None
_put_us_text_compiled = None


def round3_ns(values):
    """``round(x, 3)`` over a float64 array as integer thousandths (so that ``json_ts(k)`` is
    ``repr(round(x, 3))``), and a mask of the values where that holds without doubt: non-negative, below
    JSON_US_MAX / 1000, and not within the product's rounding error of a half (those keep Python's ``round``)."""
    x = np.asarray(values, dtype=np.float64)
    p = x * 1000.0
    k = np.rint(p)
    frac = np.abs(np.abs(p - np.floor(p)) - 0.5)
    ok = (x >= 0.0) & ~np.signbit(x) & (p < JSON_US_MAX) & (frac > p * 2.0 ** -50 + 2.0 ** -60)
    return np.where(ok, k, 0).astype(np.int64), ok


__all__ = ["to_ns", "to_ns_array", "us_text", "us_texts", "put_us_text", "json_ts", "dur_float", "ts_float",
           "nest_durations",
           "put_json_us", "compiled", "round3_ns", "JSON_US_MAX", "NS_PER_US"]
