"""Hashes opbase computes on host: the AI CPU task-key hash and the op-exec-cache bucket hash.

`gen_hash_binary` is AicpuTaskSpace::GenHashBinary bit for bit (it picks the bucket of a task key, so a
simulator that disagrees would scan different buckets). `murmur_hash3_x64_h2` is the op-exec-cache bucket
hash (second 64-bit half of MurmurHash3-x64-128, seed 0xdeadb0d7).

Short keys (AI CPU task keys, profiler names: at most SHORT_KEY_BYTES) are hashed in Python and remembered,
since a run asks for the same few keys again and again; longer keys and batches go to the Numba kernels of
opsim.kernels.hashing_jit, imported on first use. So a run whose keys are all short never loads Numba's
cached hash kernels (loading them costs a few tenths of a second, more than a small run's simulation). The
pure-Python `*_reference` versions are the executable specification the tests compare the kernels against.
"""
from __future__ import annotations

import struct
from typing import Any

import numpy as np

from opsim.errors import InvalidArgumentError
from opsim.kernels.seeds import K_HASH_SEED, MURMUR_SEED

SHORT_KEY_BYTES = 64
"""Keys up to this length are hashed in Python: at 64 bytes that takes 2 to 6 us once per distinct key (then a
dict lookup), against about 0.3 us a call for the kernel plus its one-time load."""
MEMO_LIMIT = 65536
"""Distinct short keys remembered per hash before the memo starts over (bounded memory: 64 B x 65536)."""

_MASK64 = 0xFFFFFFFFFFFFFFFF
_GEN_MEMO: dict[bytes, int] = {}
_MURMUR_MEMO: dict[bytes, int] = {}


_JIT: Any = None


def _jit() -> Any:
    """opsim.kernels.hashing_jit, imported (and its cached kernels loaded) on first use."""
    global _JIT
    if _JIT is None:
        from opsim.kernels import hashing_jit  # lazy: a run whose keys are all short never loads Numba
        _JIT = hashing_jit
    return _JIT


def _gen_long(buf: Any) -> int:
    """GenHashBinary by the kernel; the first call puts the kernel itself in this name's place."""
    global _gen_long
    _gen_long = _jit().gen_hash_binary_kernel
    return _gen_long(buf)


def _murmur_long(buf: Any, seed: int) -> int:
    """MurmurHash3 by the kernel; the first call puts the kernel itself in this name's place."""
    global _murmur_long
    _murmur_long = _jit().murmur_h2_kernel
    return _murmur_long(buf, seed)


_UINT8 = np.dtype(np.uint8)


def _as_key_buffer(key) -> bytes | np.ndarray:
    """bytes pass through; a uint8 array is made 1-D contiguous; other buffers are copied to bytes."""
    if isinstance(key, np.ndarray):
        if key.dtype != _UINT8:
            raise InvalidArgumentError(f"key array has dtype {key.dtype}; pass a uint8 array or bytes")
        if key.ndim == 1 and key.flags.c_contiguous:
            return key
        return np.ascontiguousarray(key.reshape(-1))
    if isinstance(key, (bytearray, memoryview)):
        return bytes(key)
    raise InvalidArgumentError(f"key has type {type(key).__name__}; pass bytes or a uint8 numpy array")


def gen_hash_binary(key: bytes | np.ndarray) -> int:
    """AicpuTaskSpace::GenHashBinary(key, len(key)) as an unsigned 64-bit int."""
    if type(key) is not bytes:
        key = _as_key_buffer(key)
        if type(key) is not bytes:  # a uint8 array
            if len(key) > SHORT_KEY_BYTES:
                return _gen_long(key)
            key = key.tobytes()
    if len(key) > SHORT_KEY_BYTES:
        return _gen_long(key)
    h = _GEN_MEMO.get(key)
    if h is None:
        h = gen_hash_binary_reference(key)
        if len(_GEN_MEMO) >= MEMO_LIMIT:
            _GEN_MEMO.clear()
        _GEN_MEMO[key] = h
    return h


def gen_hash_binary_batch(buf: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, *,
                          parallel: bool = False) -> np.ndarray:
    """GenHashBinary of the keys buf[offsets[i]:offsets[i]+lengths[i]], in one kernel call.

    Keys are independent, so `parallel=True` gives the same result; the default stays on one thread so
    a simulation never competes with itself for cores.
    """
    buf = np.ascontiguousarray(buf)
    if buf.ndim != 1 or buf.dtype != np.uint8:
        raise InvalidArgumentError(f"buf must be a 1-D uint8 array, got {buf.ndim}-D {buf.dtype}")
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    if offsets.shape != lengths.shape or offsets.ndim != 1:
        raise InvalidArgumentError(
            f"offsets {offsets.shape} and lengths {lengths.shape} must be 1-D arrays of the same length")
    if len(offsets) and (offsets.min() < 0 or lengths.min() < 0 or (offsets + lengths).max() > len(buf)):
        raise InvalidArgumentError(
            f"every key must lie inside buf (len {len(buf)}): offsets and lengths must be >= 0 and "
            "offsets + lengths <= len(buf)")
    out = np.empty(len(offsets), dtype=np.uint64)
    jit = _jit()
    (jit.gen_hash_binary_batch_kernel_par if parallel else jit.gen_hash_binary_batch_kernel)(buf, offsets, lengths, out)
    return out


def gen_hash_binary_many(keys: list[bytes], *, parallel: bool = False) -> np.ndarray:
    """GenHashBinary of every key in `keys` (concatenated once, hashed by the batch kernel)."""
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    offsets = np.zeros(len(keys), dtype=np.int64)
    if len(keys) > 1:
        np.cumsum(lengths[:-1], out=offsets[1:])
    buf = np.frombuffer(b"".join(keys), dtype=np.uint8)
    return gen_hash_binary_batch(buf, offsets, lengths, parallel=parallel)


def gen_hash_binary_reference(key: bytes) -> int:
    """Pure-Python GenHashBinary: the specification the kernel is tested against."""
    if type(key) is not bytes:
        key = bytes(key)
    words = len(key) >> 3
    seed = 0
    for w in struct.unpack_from(f"<{words}Q", key):
        seed ^= (w + K_HASH_SEED + ((seed << 6) & _MASK64) + (seed >> 2)) & _MASK64
    rem = len(key) & 7
    if rem:
        v = int.from_bytes(key[words * 8:], "big") << 8
        seed ^= (v + K_HASH_SEED + ((seed << 6) & _MASK64) + (seed >> 2)) & _MASK64
    return seed


def murmur_hash3_x64_h2(key: bytes | np.ndarray, seed: int = MURMUR_SEED) -> int:
    """The op-exec-cache bucket hash: MurmurHash3_x64_128(key, seed), second 64-bit half."""
    if not 0 <= seed <= 0xFFFFFFFF:
        raise InvalidArgumentError(f"seed {seed:#x} must fit in 32 bits (MurmurHash3 takes a uint32 seed)")
    buf = key if type(key) is bytes else _as_key_buffer(key)
    if len(buf) > SHORT_KEY_BYTES or seed != MURMUR_SEED:
        return _murmur_long(buf, seed)
    if type(buf) is not bytes:
        buf = buf.tobytes()
    h = _MURMUR_MEMO.get(buf)
    if h is None:
        h = murmur_hash3_x64_h2_reference(buf)
        if len(_MURMUR_MEMO) >= MEMO_LIMIT:
            _MURMUR_MEMO.clear()
        _MURMUR_MEMO[buf] = h
    return h


def _rotl64_py(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK64


def _fmix64_py(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK64
    return k ^ (k >> 33)


def murmur_hash3_x64_h2_reference(key: bytes, seed: int = MURMUR_SEED) -> int:
    """Pure-Python MurmurHash3_x64_128 second half (the specification for the kernel)."""
    if type(key) is not bytes:
        key = bytes(key)
    c1, c2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
    n = len(key)
    h1 = h2 = seed
    blocks = n >> 4
    for i in range(blocks):
        k1, k2 = struct.unpack_from("<QQ", key, 16 * i)
        k1 = (_rotl64_py((k1 * c1) & _MASK64, 31) * c2) & _MASK64
        h1 ^= k1
        h1 = (((_rotl64_py(h1, 27) + h2) & _MASK64) * 5 + 0x52DCE729) & _MASK64
        k2 = (_rotl64_py((k2 * c2) & _MASK64, 33) * c1) & _MASK64
        h2 ^= k2
        h2 = (((_rotl64_py(h2, 31) + h1) & _MASK64) * 5 + 0x38495AB5) & _MASK64
    tail = key[blocks * 16:]
    if len(tail) > 8:
        k2 = int.from_bytes(tail[8:], "little")
        h2 ^= (_rotl64_py((k2 * c2) & _MASK64, 33) * c1) & _MASK64
    if tail:
        k1 = int.from_bytes(tail[:8], "little")
        h1 ^= (_rotl64_py((k1 * c1) & _MASK64, 31) * c2) & _MASK64
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    h1 = _fmix64_py(h1)
    h2 = _fmix64_py(h2)
    h1 = (h1 + h2) & _MASK64
    return (h2 + h1) & _MASK64


__all__ = [
    "K_HASH_SEED", "MURMUR_SEED", "SHORT_KEY_BYTES", "gen_hash_binary", "gen_hash_binary_batch",
    "gen_hash_binary_many", "gen_hash_binary_reference", "murmur_hash3_x64_h2", "murmur_hash3_x64_h2_reference",
]
