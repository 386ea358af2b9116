"""Operator numerics: the Numba kernels against the equivalent numpy code, side by side.

Run: python benchmarks/numerics.py [--quick]
Every function is called once before timing (compilation or cache loading is not measured); each time is the
best of several runs. "ratio" is numpy time / Numba time: above 1 the Numba kernel is faster. The numpy
column is what an operator would otherwise write: half types widened to float32, computed, rounded back.

Rows marked "(Numba loop)" / "(Numba copy)" time a Numba path the wrappers do not take, against the numpy
code they call instead, to show why: MatMul (BLAS sgemm), Pad (fill + strided copy), integer casts; float32
ReduceSum rows time the Numba path against numpy's sum, which reduce_sum uses for DT_FLOAT.
"""
from __future__ import annotations

import os

# One BLAS thread: the Numba kernels are single-threaded too, and on a small shared machine OpenBLAS's worker
# wake-ups made some matmul timings jump from 0.15 ms to 16 ms. Must be set before numpy loads OpenBLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402
from typing import Callable  # noqa: E402

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

from opsim.acl.dtypes import DataType, bf16_to_float32, float32_to_bf16  # noqa: E402
from opsim.kernels import numerics as K  # noqa: E402
from opsim.kernels.dtype_bits import KERNEL_DTYPE  # noqa: E402
from opsim.kernels.elementwise import _cast_kernel  # noqa: E402
from opsim.kernels.reduce import reduce_sum_numba  # noqa: E402
from opsim.kernels.strided import plan_operands  # noqa: E402

F32, F16, BF16, I32, I64 = (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16, DataType.DT_INT32,
                            DataType.DT_INT64)


def best_us(fn: Callable[[], object], repeat: int) -> float:
    """Best wall time of `repeat` calls after one warm-up call, in microseconds."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e6


def row(op: str, case: str, numba_fn, numpy_fn, repeat: int, note: str = "") -> None:
    tn = best_us(numba_fn, repeat)
    tp = best_us(numpy_fn, repeat)
    print(f"{op:<13} {case:<34} {tn:>11.1f} {tp:>11.1f} {tp / tn:>7.2f}  {note}")


def storage(values: np.ndarray, dt: DataType) -> np.ndarray:
    if dt == BF16:
        return float32_to_bf16(values)
    return values.astype(dt.numpy_dtype)


def wide(x: np.ndarray, dt: DataType) -> np.ndarray:
    return bf16_to_float32(x) if dt == BF16 else x.astype(np.float32, copy=False)


def store_np(values: np.ndarray, out: np.ndarray, dt: DataType) -> None:
    """What numpy code does to write float32 results into dt storage."""
    if dt == BF16:
        out[...] = float32_to_bf16(values)
    else:
        np.copyto(out, values, casting="unsafe")


@njit(cache=True)
def _naive_matmul(a, b, out):
    """The straightforward Numba matmul (i-k-j order, float32 accumulation) that BLAS is measured against."""
    m, k = a.shape
    n = b.shape[1]
    for i in range(m):
        for j in range(n):
            out[i, j] = 0.0
        for p in range(k):
            aip = a[i, p]
            for j in range(n):
                out[i, j] += aip * b[p, j]


def bench_elementwise(n: int, repeat: int, rng: np.random.Generator) -> None:
    side = int(np.sqrt(n))
    for dt in (F32, F16, BF16):
        xf = rng.standard_normal(n).astype(np.float32)
        yf = rng.standard_normal(n).astype(np.float32)
        x, y, out = storage(xf, dt), storage(yf, dt), storage(np.zeros(n, np.float32), dt)
        name = dt.short_name

        def np_add(x=x, y=y, out=out, dt=dt):
            store_np(wide(x, dt) + np.float32(0.5) * wide(y, dt), out, dt)

        row("Add", f"{name} n={n} alpha=0.5", lambda: K.add(x, y, 0.5, out, dt), np_add, repeat)
        xm, ym, om = x[:side * side].reshape(side, side), y[:side], out[:side * side].reshape(side, side)

        def np_add_b(xm=xm, ym=ym, om=om, dt=dt):
            store_np(wide(xm, dt) + wide(ym, dt), om, dt)

        row("Add", f"{name} [{side},{side}]+[{side}]", lambda: K.add(xm, ym, 1, om, dt), np_add_b, repeat)

        def np_mul(x=x, y=y, out=out, dt=dt):
            store_np(wide(x, dt) * wide(y, dt), out, dt)

        row("Mul", f"{name} n={n}", lambda: K.mul(x, y, out, dt), np_mul, repeat)

        def np_relu(x=x, out=out, dt=dt):
            store_np(np.maximum(wide(x, dt), np.float32(0)), out, dt)

        row("Relu", f"{name} n={n}", lambda: K.relu(x, out, dt), np_relu, repeat)

        def np_abs(x=x, out=out, dt=dt):
            store_np(np.abs(wide(x, dt)), out, dt)

        row("Abs", f"{name} n={n}", lambda: K.abs_(x, out, dt), np_abs, repeat)

        def np_sigmoid(x=x, out=out, dt=dt):
            store_np(np.float32(1) / (np.float32(1) + np.exp(-wide(x, dt))), out, dt)

        row("Sigmoid", f"{name} n={n}", lambda: K.sigmoid(x, out, dt), np_sigmoid, repeat)
    xi = rng.integers(-1000, 1000, n).astype(np.int32)
    oi = np.empty_like(xi)
    row("Add", f"int32 n={n} alpha=3", lambda: K.add(xi, xi, 3, oi, I32),
        lambda: np.add(xi, np.int32(3) * xi, out=oi), repeat)


def bench_cast(n: int, repeat: int, rng: np.random.Generator) -> None:
    xf = (rng.standard_normal(n) * 100).astype(np.float32)
    cases = [
        (F32, BF16, xf, lambda x, o: np.copyto(o, float32_to_bf16(x))),
        (F32, F16, xf, lambda x, o: np.copyto(o, x, casting="unsafe")),
        (F16, F32, xf.astype(np.float16), lambda x, o: np.copyto(o, x)),
        (BF16, F16, float32_to_bf16(xf), lambda x, o: np.copyto(o, bf16_to_float32(x), casting="unsafe")),
        (F32, I32, xf, lambda x, o: np.copyto(o, x, casting="unsafe")),
    ]
    for src, dst, x, ref in cases:
        out = np.empty(n, dst.numpy_dtype)
        note = "saturating: numpy differs on NaN/overflow" if dst == I32 else ""
        row("Cast", f"{src.short_name}->{dst.short_name} n={n}", lambda: K.cast(x, out, src, dst),
            lambda: ref(x, out), repeat, note)
    x64, out32 = xf.astype(np.int64), np.empty(n, np.int32)

    def numba_int_cast():
        (fx, fo), plan = plan_operands(x64.shape, [(x64, None, False), (out32, None, True)])
        _cast_kernel(fx, fo, plan.starts, plan.inner, plan.steps)

    row("Cast", f"int64->int32 n={n} (Numba loop)", numba_int_cast,
        lambda: np.copyto(out32, x64, casting="unsafe"), repeat, "int<->int uses numpy")


def bench_reduce(n: int, repeat: int, rng: np.random.Generator) -> None:
    side = int(np.sqrt(n))
    xi = rng.integers(-1000, 1000, (side, side)).astype(np.int32)
    oi = np.empty(side, np.int32)
    for axis in (1, 0):
        row("ReduceSum", f"int32 [{side},{side}] axis={axis}", lambda: K.reduce_sum(xi, [axis], False, oi, I32),
            lambda: np.copyto(oi, np.sum(xi, axis=axis, dtype=np.int64), casting="unsafe"), repeat)
    for dt in (F32, F16, BF16):
        x = storage(rng.standard_normal((side, side)).astype(np.float32), dt)
        for axis in (1, 0):
            out = np.empty(side, dt.numpy_dtype)

            def np_sum(x=x, out=out, dt=dt, axis=axis):
                store_np(np.sum(wide(x, dt), axis=axis, dtype=np.float32), out, dt)

            # DT_FLOAT is summed by numpy in reduce_sum; its row times the Numba path it would otherwise take
            row("ReduceSum", f"{dt.short_name} [{side},{side}] axis={axis}",
                lambda: reduce_sum_numba(x.view(KERNEL_DTYPE[dt]), [axis], out, dt), np_sum, repeat,
                "float32 uses numpy" if dt == F32 else "")
        out2 = np.empty_like(x)

        def np_softmax(x=x, out=out2, dt=dt):
            v = wide(x, dt)
            e = np.exp(v - v.max(axis=-1, keepdims=True))
            store_np(e / e.sum(axis=-1, keepdims=True), out, dt)

        row("SoftmaxV2", f"{dt.short_name} [{side},{side}] dim=-1", lambda: K.softmax(x, -1, out2, dt),
            np_softmax, repeat)
        gamma = storage(rng.standard_normal(side).astype(np.float32), dt)
        rstd = np.empty((side, 1), np.float32)
        x_out = np.empty_like(x)

        def np_rms(x=x, gamma=gamma, out=out2, dt=dt):
            v = wide(x, dt)
            r = np.float32(1) / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + np.float32(1e-6))
            store_np(v * r * wide(gamma, dt), out, dt)
            rstd[...] = r

        row("RmsNorm", f"{dt.short_name} [{side},{side}]", lambda: K.rms_norm(x, gamma, 1e-6, out2, rstd, dt),
            np_rms, repeat)

        def np_add_rms(x=x, gamma=gamma, out=out2, dt=dt):
            s = wide(x, dt) + wide(x, dt)
            store_np(s, x_out, dt)
            v = wide(x_out, dt)
            r = np.float32(1) / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + np.float32(1e-6))
            store_np(v * r * wide(gamma, dt), out, dt)
            rstd[...] = r

        row("AddRmsNorm", f"{dt.short_name} [{side},{side}]",
            lambda: K.add_rms_norm(x, x, gamma, 1e-6, out2, rstd, x_out, dt), np_add_rms, repeat)
        x_flat = x.reshape(-1)
        row("NonFiniteChk", f"{dt.short_name} n={x.size}", lambda: K.has_non_finite(x_flat, dt),
            lambda: not np.isfinite(wide(x_flat, dt)).all(), repeat)


def bench_matmul(n: int, repeat: int, rng: np.random.Generator) -> None:
    m = max(64, int(round(n ** (1 / 3))) * 4)
    a = rng.standard_normal((m, m)).astype(np.float32)
    b = rng.standard_normal((m, m)).astype(np.float32)
    out = np.empty((m, m), np.float32)
    # reversed roles: numpy (BLAS) is what the kernel uses; the first column is the plain Numba loop
    row("MatMul", f"f32 [{m},{m}]@[{m},{m}] (Numba loop)", lambda: _naive_matmul(a, b, out),
        lambda: np.matmul(a, b, out=out), max(3, repeat // 4), "matmul uses numpy (BLAS)")
    for dt in (F16, BF16):
        xa, xb = storage(a, dt), storage(b, dt)
        o = np.empty((m, m), dt.numpy_dtype)

        def np_mm(xa=xa, xb=xb, o=o, dt=dt):
            store_np(wide(xa, dt) @ wide(xb, dt), o, dt)

        row("MatMul", f"{dt.short_name} [{m},{m}]@[{m},{m}]", lambda: K.matmul(xa, xb, o, dt), np_mm,
            max(3, repeat // 4), "BLAS + Numba widen/round")
    bias = rng.standard_normal(m).astype(np.float32)
    for dt in (F32, BF16):
        xa, xb, xbias = storage(a, dt), storage(b, dt), storage(bias, dt)
        o = np.empty((m, m), dt.numpy_dtype)

        def np_fused(xa=xa, xb=xb, xbias=xbias, o=o, dt=dt):
            v = wide(xa, dt) @ wide(xb, dt) + wide(xbias, dt)
            c = np.float32(0.7978845608028654)
            store_np(np.float32(0.5) * v * (np.float32(1) + np.tanh(c * (v + np.float32(0.044715) * v * v * v))), o,
                     dt)

        row("FusedMatMul", f"{dt.short_name} [{m},{m}] bias gelu_tanh",
            lambda: K.matmul_bias_act(xa, xb, xbias, o, dt, "gelu_tanh"), np_fused, max(3, repeat // 4))


def bench_index(n: int, repeat: int, rng: np.random.Generator) -> None:
    side = int(np.sqrt(n))
    x = rng.standard_normal((side, side)).astype(np.float32)
    out = np.empty((side + 2, side + 6), np.float32)

    def numba_pad():
        out.fill(0)
        (fx, fo), plan = plan_operands(x.shape, [(x, None, False), (out[1:-1, 3:-3], None, True)])
        _cast_kernel(fx, fo, plan.starts, plan.inner, plan.steps)

    def numpy_pad():
        out.fill(0)
        out[1:-1, 3:-3] = x

    row("PadV3", f"f32 [{side},{side}] (1,1),(3,3) (Numba copy)", numba_pad, numpy_pad, repeat, "pad uses numpy")
    self_ = np.zeros((side, side), np.float32)
    idx = rng.integers(0, side, side * 4).astype(np.int64)
    vals = rng.standard_normal((side * 4, side)).astype(np.float32)
    work = self_.copy()

    def np_acc():
        np.copyto(work, self_)
        np.add.at(work, idx, vals)

    row("IndexPutV2", f"f32 [{side},{side}] {side * 4} rows acc",
        lambda: K.index_put(self_, [idx], vals, True, work, F32), np_acc, repeat)

    def np_put():
        np.copyto(work, self_)
        work[idx] = vals

    row("IndexPutV2", f"f32 [{side},{side}] {side * 4} rows",
        lambda: K.index_put(self_, [idx], vals, False, work, F32), np_put, repeat, "numpy inside: ratio = checks")
    for dt in (F32, BF16):
        z = storage(np.where(rng.random((side, side)) < 0.3, x, 0).astype(np.float32), dt)
        coords = np.empty((z.size, 2), np.int64)
        row("NonZero", f"{dt.short_name} [{side},{side}] 30% non-zero", lambda: K.non_zero(z, coords, dt),
            lambda: np.argwhere(wide(z, dt) != 0), repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes and fewer repeats")
    args = parser.parse_args()
    sizes = [1 << 14, 1 << 18] if args.quick else [1 << 16, 1 << 20]
    repeat = 5 if args.quick else 15
    rng = np.random.default_rng(0)
    print(f"{'op':<13} {'case':<34} {'numba us':>11} {'numpy us':>11} {'ratio':>7}")
    for n in sizes:
        bench_elementwise(n, repeat, rng)
        bench_cast(n, repeat, rng)
        bench_reduce(n, repeat, rng)
        bench_index(n, repeat, rng)
        bench_matmul(n, repeat, rng)


if __name__ == "__main__":
    main()
