"""Hashes opbase computes on host: the AI CPU task-key hash and the op-exec-cache bucket hash.

`gen_hash_binary` is AicpuTaskSpace::GenHashBinary bit for bit (it picks the bucket of a task key, so a
simulator that disagrees would scan different buckets). `murmur_hash3_x64_h2` is the op-exec-cache bucket
hash (second 64-bit half of MurmurHash3-x64-128, seed 0xdeadb0d7).

The Numba kernels take `bytes` directly as well as uint8 arrays: passing `bytes` avoids building a numpy
view on the single-key path, which is what every AI CPU L0 call hits. The pure-Python `*_reference`
versions are kept next to the kernels as the executable specification the tests and benchmarks compare
against.
"""
from __future__ import annotations

import struct

import numpy as np
from numba import njit, prange, uintp

from opsim.errors import InvalidArgumentError

#: kHashSeed of AicpuTaskSpace: the golden-ratio mixing constant of boost's hash_combine.
K_HASH_SEED = 0x9E3779B9
#: Seed of the op-exec-cache bucket hash.
MURMUR_SEED = 0xDEADB0D7

_MASK64 = 0xFFFFFFFFFFFFFFFF

_U6 = np.uint64(6)
_U2 = np.uint64(2)
_U8 = np.uint64(8)
_KSEED = np.uint64(K_HASH_SEED)


# --- GenHashBinary ----------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _load_u64_le(buf, p):
    """An unaligned little-endian 64-bit load at unsigned index p.

    Unsigned indices matter: Numba adds a negative-index wrap-around select to every signed index, which
    stops LLVM from folding the eight byte loads into one load (about 3x slower).
    """
    return (np.uint64(buf[p]) | (np.uint64(buf[p + uintp(1)]) << np.uint64(8))
            | (np.uint64(buf[p + uintp(2)]) << np.uint64(16)) | (np.uint64(buf[p + uintp(3)]) << np.uint64(24))
            | (np.uint64(buf[p + uintp(4)]) << np.uint64(32)) | (np.uint64(buf[p + uintp(5)]) << np.uint64(40))
            | (np.uint64(buf[p + uintp(6)]) << np.uint64(48)) | (np.uint64(buf[p + uintp(7)]) << np.uint64(56)))


@njit(cache=True, inline="always")
def _gen_hash_binary_at(buf, start, length):
    """GenHashBinary over buf[start:start+length] (std::hash<uint64_t> is the identity in libstdc++)."""
    seed = np.uint64(0)
    p = uintp(start)
    for _ in range(length >> 3):
        seed ^= _load_u64_le(buf, p) + _KSEED + (seed << _U6) + (seed >> _U2)
        p += uintp(8)
    rem = length & 7
    if rem != 0:
        # The C++ shifts after every byte: the first tail byte ends highest, the low byte stays 0.
        v = np.uint64(0)
        for j in range(rem):
            v = (v | np.uint64(buf[p + uintp(j)])) << _U8
        seed ^= v + _KSEED + (seed << _U6) + (seed >> _U2)
    return seed


@njit(cache=True)
def _gen_hash_binary_kernel(buf):
    return _gen_hash_binary_at(buf, 0, len(buf))


@njit(cache=True)
def _gen_hash_binary_batch_kernel(buf, offsets, lengths, out):
    for i in range(len(offsets)):
        out[i] = _gen_hash_binary_at(buf, offsets[i], lengths[i])


@njit(cache=True, parallel=True)
def _gen_hash_binary_batch_kernel_par(buf, offsets, lengths, out):
    for i in prange(len(offsets)):
        out[i] = _gen_hash_binary_at(buf, offsets[i], lengths[i])


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
    if type(key) is bytes:
        return _gen_hash_binary_kernel(key)
    return _gen_hash_binary_kernel(_as_key_buffer(key))


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
    if parallel:
        _gen_hash_binary_batch_kernel_par(buf, offsets, lengths, out)
    else:
        _gen_hash_binary_batch_kernel(buf, offsets, lengths, out)
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


# --- MurmurHash3-x64-128, second half -----------------------------------------------------------------
_C1 = np.uint64(0x87C37B91114253D5)
_C2 = np.uint64(0x4CF5AD432745937F)
_F1 = np.uint64(0xFF51AFD7ED558CCD)
_F2 = np.uint64(0xC4CEB9FE1A85EC53)
_N1 = np.uint64(0x52DCE729)
_N2 = np.uint64(0x38495AB5)
_U5 = np.uint64(5)
_U33 = np.uint64(33)


@njit(cache=True, inline="always")
def _rotl64(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(cache=True, inline="always")
def _fmix64(k):
    k ^= k >> _U33
    k *= _F1
    k ^= k >> _U33
    k *= _F2
    k ^= k >> _U33
    return k


@njit(cache=True)
def _murmur_h2_kernel(buf, seed):
    n = len(buf)
    h1 = np.uint64(seed)
    h2 = np.uint64(seed)
    p = uintp(0)
    for _ in range(n >> 4):
        k1 = _load_u64_le(buf, p)
        k2 = _load_u64_le(buf, p + uintp(8))
        k1 *= _C1
        k1 = _rotl64(k1, 31)
        k1 *= _C2
        h1 ^= k1
        h1 = _rotl64(h1, 27)
        h1 += h2
        h1 = h1 * _U5 + _N1
        k2 *= _C2
        k2 = _rotl64(k2, 33)
        k2 *= _C1
        h2 ^= k2
        h2 = _rotl64(h2, 31)
        h2 += h1
        h2 = h2 * _U5 + _N2
        p += uintp(16)
    rem = n & 15
    if rem > 8:
        k2 = np.uint64(0)
        for j in range(rem - 1, 7, -1):
            k2 ^= np.uint64(buf[p + uintp(j)]) << np.uint64(8 * (j - 8))
        k2 *= _C2
        k2 = _rotl64(k2, 33)
        k2 *= _C1
        h2 ^= k2
    if rem > 0:
        k1 = np.uint64(0)
        for j in range(min(rem, 8) - 1, -1, -1):
            k1 ^= np.uint64(buf[p + uintp(j)]) << np.uint64(8 * j)
        k1 *= _C1
        k1 = _rotl64(k1, 31)
        k1 *= _C2
        h1 ^= k1
    h1 ^= np.uint64(n)
    h2 ^= np.uint64(n)
    h1 += h2
    h2 += h1
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 += h2
    h2 += h1
    return h2


def murmur_hash3_x64_h2(key: bytes | np.ndarray, seed: int = MURMUR_SEED) -> int:
    """The op-exec-cache bucket hash: MurmurHash3_x64_128(key, seed), second 64-bit half."""
    if not 0 <= seed <= 0xFFFFFFFF:
        raise InvalidArgumentError(f"seed {seed:#x} must fit in 32 bits (MurmurHash3 takes a uint32 seed)")
    buf = key if type(key) is bytes else _as_key_buffer(key)
    return _murmur_h2_kernel(buf, seed)


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
    "K_HASH_SEED", "MURMUR_SEED", "gen_hash_binary", "gen_hash_binary_batch", "gen_hash_binary_many",
    "gen_hash_binary_reference", "murmur_hash3_x64_h2", "murmur_hash3_x64_h2_reference",
]
