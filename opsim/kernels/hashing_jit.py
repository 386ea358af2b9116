"""The Numba kernels behind opsim.kernels.hashing: GenHashBinary (single and batched) and the MurmurHash3
second half. Imported by opsim.kernels.hashing only for keys too long for its Python path and for batches, so a
run whose keys are all short never loads Numba's cached hash kernels."""
from __future__ import annotations

import numpy as np
from numba import njit, prange, uintp

from opsim.kernels.hashing import K_HASH_SEED

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
def gen_hash_binary_kernel(buf):
    return _gen_hash_binary_at(buf, 0, len(buf))


@njit(cache=True)
def gen_hash_binary_batch_kernel(buf, offsets, lengths, out):
    for i in range(len(offsets)):
        out[i] = _gen_hash_binary_at(buf, offsets[i], lengths[i])


@njit(cache=True, parallel=True)
def gen_hash_binary_batch_kernel_par(buf, offsets, lengths, out):
    for i in prange(len(offsets)):
        out[i] = _gen_hash_binary_at(buf, offsets[i], lengths[i])


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
def murmur_h2_kernel(buf, seed):
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


__all__ = ["gen_hash_binary_kernel", "gen_hash_binary_batch_kernel", "gen_hash_binary_batch_kernel_par",
           "murmur_h2_kernel"]
