"""float32 exp and tanh written for Numba kernels: branch-free, so loops using them vectorize.

Numba lowers np.exp / np.tanh on float32 to scalar libm calls (about 3x and 100x slower than numpy's SIMD
loops here), and libm results differ between platforms. These are the Cephes expf / tanhf algorithms in
plain arithmetic: exp stays within 1 ulp of the exact result over the whole float32 range (numpy's SIMD
expf reaches 2.4 ulp), results are identical on every machine, and the kernels that use them (Sigmoid,
Softmax, the gelu_tanh epilogue) run at numpy speed or better. Kernels calling them need
error_model="numpy" so the divisions do not carry Python's zero-division check.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from opsim.kernels.dtype_bits import u32_as_f32

_LOG2E = np.float32(1.4426950408889634)
_LN2_HI = np.float32(0.693359375)  # ln 2 split so n * _LN2_HI is exact for |n| < 2^11 (Cody-Waite)
_LN2_LO = np.float32(-2.12194440e-4)
_X_MAX = np.float32(88.8)  # exp overflows float32 above 88.7228
_X_MIN = np.float32(-104.0)  # and underflows to 0 below -103.9721
_E0, _E1, _E2 = np.float32(1.9875691500e-4), np.float32(1.3981999507e-3), np.float32(8.3334519073e-3)
_E3, _E4, _E5 = np.float32(4.1665795894e-2), np.float32(1.6666665459e-1), np.float32(5.0000001201e-1)
_T0, _T1, _T2 = np.float32(-5.70498872745e-3), np.float32(2.06390887954e-2), np.float32(-5.37397155531e-2)
_T3, _T4 = np.float32(1.33314422036e-1), np.float32(-3.33332819422e-1)
_TANH_SMALL = np.float32(0.625)
_ZERO, _HALF, _ONE, _TWO = np.float32(0.0), np.float32(0.5), np.float32(1.0), np.float32(2.0)


@njit(cache=True, error_model="numpy")
def exp_f32(x):
    """e**x for a float32 x: inf above 88.72, 0 (through subnormals) below -103.97, NaN stays NaN."""
    xc = x
    if xc > _X_MAX:
        xc = _X_MAX
    if xc < _X_MIN:
        xc = _X_MIN
    if xc != xc:
        xc = _ZERO  # keep the integer path defined; NaN is returned below
    n = np.floor(xc * _LOG2E + _HALF)
    r = xc - n * _LN2_HI - n * _LN2_LO
    y = (((((_E0 * r + _E1) * r + _E2) * r + _E3) * r + _E4) * r + _E5) * (r * r) + r + _ONE
    # scale by 2**n in two halves so that subnormal results and the overflow to inf both come out right
    ni = np.int32(n)
    n1 = ni >> 1
    n2 = ni - n1
    res = y * u32_as_f32(np.uint32((n1 + 127) << 23)) * u32_as_f32(np.uint32((n2 + 127) << 23))
    return res if x == x else x


@njit(cache=True, error_model="numpy")
def tanh_f32(x):
    """tanh of a float32 x: an odd polynomial below |x| = 0.625, 1 - 2 / (e**2|x| + 1) above."""
    ax = abs(x)
    z = x * x
    small = ((((_T0 * z + _T1) * z + _T2) * z + _T3) * z + _T4) * z * x + x
    big = _ONE - _TWO / (exp_f32(ax + ax) + _ONE)
    big = -big if x < _ZERO else big
    return big if ax > _TANH_SMALL else small


@njit(cache=True, error_model="numpy")
def sigmoid_f32(x):
    """1 / (1 + e**-x) for a float32 x."""
    return _ONE / (_ONE + exp_f32(-x))
