"""Throughput of the AI CPU key hash (batched and single-key) and of task-key construction.

Run: python benchmarks/hashing.py [--quick]
Every Numba kernel is called once before timing, so compilation (or cache loading) is not measured. The
pure-Python reference runs side by side on the same data; ratios are reference time / kernel time.
"""
from __future__ import annotations

import argparse
import time
import timeit

import numpy as np

from opsim.acl import Tensor
from opsim.kernels.hashing import (gen_hash_binary, gen_hash_binary_batch, gen_hash_binary_reference,
                                   murmur_hash3_x64_h2, murmur_hash3_x64_h2_reference)
from opsim.opdev.aicpu.key import flatten_aicpu_inputs, gen_task_key, gen_task_key_and_seed
from opsim.opdev.op_args import make_op_arg_context, op_attr, op_input


def best_of(fn, repeat: int) -> float:
    """Best wall time of `repeat` calls, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def per_call_ns(stmt, number: int, repeat: int = 5) -> float:
    return min(timeit.repeat(stmt, number=number, repeat=repeat)) / number * 1e9


def bench_batched(key_len: int, total_bytes: int, ref_keys: int) -> None:
    n = total_bytes // key_len
    rng = np.random.default_rng(0)
    buf = rng.integers(0, 256, n * key_len, dtype=np.uint8)
    offsets = np.arange(n, dtype=np.int64) * key_len
    lengths = np.full(n, key_len, dtype=np.int64)
    for parallel in (False, True):
        gen_hash_binary_batch(buf[:key_len], offsets[:1], lengths[:1], parallel=parallel)  # warm up
    serial = best_of(lambda: gen_hash_binary_batch(buf, offsets, lengths), 5)
    par = best_of(lambda: gen_hash_binary_batch(buf, offsets, lengths, parallel=True), 5)
    raw = buf.tobytes()
    m = min(ref_keys, n)
    ref = best_of(lambda: [gen_hash_binary_reference(raw[i * key_len:(i + 1) * key_len]) for i in range(m)], 3)
    ref_gbs = m * key_len / ref / 1e9
    serial_gbs = buf.nbytes / serial / 1e9
    par_gbs = buf.nbytes / par / 1e9
    print(f"  {key_len:5d} B keys x {n:8d}: batch {serial_gbs:6.2f} GB/s, batch parallel {par_gbs:6.2f} GB/s, "
          f"pure Python {ref_gbs:7.4f} GB/s  (batch / Python = {serial_gbs / ref_gbs:7.0f}x)")


def bench_single(key_len: int, number: int) -> None:
    key = bytes(np.random.default_rng(1).integers(0, 256, key_len, dtype=np.uint8))
    arr = np.frombuffer(key, dtype=np.uint8)
    gen_hash_binary(key), gen_hash_binary(arr), murmur_hash3_x64_h2(key)  # warm up
    ns_bytes = per_call_ns(lambda: gen_hash_binary(key), number)
    ns_arr = per_call_ns(lambda: gen_hash_binary(arr), number)
    ns_ref = per_call_ns(lambda: gen_hash_binary_reference(key), max(number // 20, 1))
    ns_mm = per_call_ns(lambda: murmur_hash3_x64_h2(key), number)
    ns_mm_ref = per_call_ns(lambda: murmur_hash3_x64_h2_reference(key), max(number // 50, 1))
    print(f"  {key_len:5d} B: gen_hash_binary(bytes) {ns_bytes:7.0f} ns, (uint8 array) {ns_arr:7.0f} ns, "
          f"pure Python {ns_ref:8.0f} ns  (Python / Numba = {ns_ref / ns_bytes:6.1f}x)")
    print(f"          murmur_hash3_x64_h2 {ns_mm:7.0f} ns, pure Python {ns_mm_ref:8.0f} ns  "
          f"(Python / Numba = {ns_mm_ref / ns_mm:6.1f}x)")


def bench_task_key(number: int) -> None:
    x, y = Tensor([2, 3], "float32"), Tensor([2, 3], "float16")
    ctx = make_op_arg_context(op_input(x, y), op_attr(np.int64(1), np.float32(0.5), True))
    inputs, attrs = flatten_aicpu_inputs(ctx.inputs()), ctx.attrs()
    gen_task_key_and_seed(12345, inputs, attrs)  # warm up
    ns_key = per_call_ns(lambda: gen_task_key(12345, inputs, attrs), number)
    ns_both = per_call_ns(lambda: gen_task_key_and_seed(12345, inputs, attrs), number)
    ns_flat = per_call_ns(lambda: flatten_aicpu_inputs(ctx.inputs()), number)
    print(f"  2 inputs + (int64, float, bool) attrs, 26 B key: gen_task_key {ns_key:6.0f} ns, "
          f"+ seed {ns_both:6.0f} ns, flatten_aicpu_inputs {ns_flat:6.0f} ns")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller data, fewer repetitions")
    args = parser.parse_args()
    total = (8 if args.quick else 64) << 20
    number = 20_000 if args.quick else 200_000
    print("batched GenHashBinary (one kernel call over many keys)")
    for key_len in (64, 1024):
        bench_batched(key_len, total, ref_keys=2000 if args.quick else 20000)
    print("single-key call")
    for key_len in (0, 8, 26, 64, 1024):
        bench_single(key_len, number)
    print("task key construction")
    bench_task_key(number // 2)


if __name__ == "__main__":
    main()
