"""The workspace allocator of a batch, compiled: the free list of `opsim.device.memory.DeviceMemory` over two
arrays (fa: block starts, fs: sizes, sorted by address; g[FN] blocks).

Compiled twin of `DeviceMemory.malloc` (first or best fit) and `DeviceMemory._release` (merge with both
neighbours), with the same integer operations in the same order.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from opsim.fastpath.batch_layout import BEST_FIT, FN, IN_USE, NALLOC, NFREE, PEAK


@njit(cache=True)
def _fits(g, fs, need):
    for i in range(g[FN]):
        if fs[i] >= need:
            return True
    return False


@njit(cache=True)
def _malloc(g, fa, fs, need):
    """DeviceMemory.malloc's free-list part (the caller checked that a block fits): the address.

    Twin of `opsim.device.memory.DeviceMemory.malloc`."""
    n = g[FN]
    idx = -1
    if g[BEST_FIT]:
        best = 0
        for i in range(n):
            s = fs[i]
            if s >= need and (idx < 0 or s < best):
                idx = i
                best = s
                if s == need:
                    break
    else:
        for i in range(n):
            if fs[i] >= need:
                idx = i
                break
    address = fa[idx]
    if fs[idx] == need:
        for i in range(idx, n - 1):
            fa[i] = fa[i + 1]
            fs[i] = fs[i + 1]
        g[FN] = n - 1
    else:
        fa[idx] = address + need
        fs[idx] -= need
    g[IN_USE] += need
    if g[IN_USE] > g[PEAK]:
        g[PEAK] = g[IN_USE]
    g[NALLOC] += 1
    return address


@njit(cache=True)
def _release(g, fa, fs, address, size0):
    """DeviceMemory._release's free-list part (merge with the following block, then the preceding one).

    Twin of `opsim.device.memory.DeviceMemory._release`."""
    n = g[FN]
    size = size0
    i = np.searchsorted(fa[:n], address)
    if i < n and fa[i] == address + size:
        size += fs[i]
        for j in range(i, n - 1):
            fa[j] = fa[j + 1]
            fs[j] = fs[j + 1]
        n -= 1
    if i > 0 and fa[i - 1] + fs[i - 1] == address:
        fs[i - 1] += size
    else:
        for j in range(n, i, -1):
            fa[j] = fa[j - 1]
            fs[j] = fs[j - 1]
        fa[i] = address
        fs[i] = size
        n += 1
    g[FN] = n
    g[IN_USE] -= size0
    g[NFREE] += 1
