"""Device-model throughput: simulated device tasks per wall-second, next to a bare SimPy baseline.

Workload: N streams, each fed by one host process that spends a fixed host step per launch and submits one
AI Core task (block dim 8 on a 24-core SoC, so streams contend for cores). The baseline runs the same
pattern with plain SimPy primitives, 7 events per task: host step (timeout), Store put, stream get,
Resource request, kernel timeout, Resource release, completion signal. Both rates and their ratio are
printed; nothing is asserted.

    python benchmarks/device_throughput.py [--streams 4] [--tasks 50000] [--no-record]
"""
from __future__ import annotations

import argparse
import time

import simpy

from opsim.device import Device, DeviceTask, TaskKind, get_soc
from opsim.trace import Recorder

HOST_STEP_US = 5.0
KERNEL_US = 12.0
BLOCK_DIM = 8


def run_opsim(streams: int, tasks: int, record: bool) -> tuple[float, int, float]:
    env = simpy.Environment()
    rec = Recorder(enabled=record)
    dev = Device(env, get_soc("Ascend910B2"), rec)

    def host(stream):
        for i in range(tasks):
            yield env.timeout(HOST_STEP_US)
            stream.submit(DeviceTask(TaskKind.AI_CORE, KERNEL_US, BLOCK_DIM, "Add", corr_id=i), env.now)
        yield stream.synchronize()

    for _ in range(streams):
        env.process(host(dev.create_stream()))
    t0 = time.perf_counter()
    env.run()
    wall = time.perf_counter() - t0
    done = rec.count("device") if record else streams * tasks
    return wall, done, env.now


def run_opsim_ahead(streams: int, tasks: int) -> tuple[float, int]:
    """Host threads that charge ahead of env.now: tasks arrive in the future on idle streams (wake-ups)."""
    env = simpy.Environment()
    dev = Device(env, get_soc("Ascend910B2"), Recorder())

    def host(stream):
        t = env.now
        for i in range(tasks):
            t += HOST_STEP_US
            stream.submit(DeviceTask(TaskKind.AI_CORE, 2.0, BLOCK_DIM, "Add", corr_id=i), t)
            if i % 10 == 9:
                yield env.timeout(t - env.now)

    for _ in range(streams):
        env.process(host(dev.create_stream()))
    t0 = time.perf_counter()
    env.run()
    return time.perf_counter() - t0, dev.recorder.count("device")


def run_baseline(streams: int, tasks: int, clock=time.perf_counter) -> tuple[float, int, float]:
    """The bare SimPy skeleton: (seconds by `clock`, tasks finished, simulated end)."""
    env = simpy.Environment()
    cores = simpy.Resource(env, capacity=get_soc("Ascend910B2").aicore_count // BLOCK_DIM)
    finished = [0]

    def host(store):
        for i in range(tasks):
            yield env.timeout(HOST_STEP_US)          # 1 host step
            yield store.put(i)                       # 2 Store put
        yield store.put(None)

    def stream_proc(store):
        while True:
            item = yield store.get()                 # 3 stream get
            if item is None:
                return
            req = cores.request()                    # 4 Resource request
            yield req
            yield env.timeout(KERNEL_US)             # 5 kernel
            cores.release(req)                       # 6 release
            done = env.event()                       # 7 completion signal
            done.succeed()
            yield done
            finished[0] += 1

    for _ in range(streams):
        store = simpy.Store(env)
        env.process(host(store))
        env.process(stream_proc(store))
    t0 = clock()
    env.run()
    return clock() - t0, finished[0], env.now


def recorder_cost(n: int = 200_000) -> tuple[float, float]:
    """Wall nanoseconds per host_span record with the recorder on and off."""
    out = []
    for enabled in (True, False):
        rec = Recorder(enabled=enabled)
        span = rec.host_span
        t0 = time.perf_counter()
        for i in range(n):
            span("thread-0", "tiling", "Add", float(i), 1.0, i)
        out.append((time.perf_counter() - t0) / n * 1e9)
    return out[0], out[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--tasks", type=int, default=50_000, help="tasks per stream")
    ap.add_argument("--no-record", action="store_true", help="run the device model with the recorder off")
    args = ap.parse_args()
    total = args.streams * args.tasks
    w_opsim, n_opsim, t_opsim = run_opsim(args.streams, args.tasks, not args.no_record)
    w_base, n_base, t_base = run_baseline(args.streams, args.tasks)
    r_opsim = n_opsim / w_opsim
    r_base = n_base / w_base
    print(f"workload: {args.streams} streams x {args.tasks} AI Core tasks = {total} tasks")
    print(f"opsim device model : {n_opsim} tasks in {w_opsim:.3f} s wall = {r_opsim:,.0f} tasks/s "
          f"({1e6 / r_opsim:.2f} us/task; simulated end {t_opsim:.1f} us; recorder "
          f"{'off' if args.no_record else 'on'})")
    print(f"bare SimPy, 7 events: {n_base} tasks in {w_base:.3f} s wall = {r_base:,.0f} tasks/s "
          f"({1e6 / r_base:.2f} us/task; simulated end {t_base:.1f} us)")
    print(f"ratio opsim / bare SimPy: {r_opsim / r_base:.2f}x")
    w_ahead, n_ahead = run_opsim_ahead(args.streams, args.tasks)
    print(f"opsim, charge-ahead host (future submissions, idle streams): {n_ahead / w_ahead:,.0f} tasks/s "
          f"({w_ahead / n_ahead * 1e6:.2f} us/task)")
    on, off = recorder_cost()
    print(f"recorder host_span: {on:.0f} ns/record on, {off:.0f} ns/call off (loop overhead included)")


if __name__ == "__main__":
    main()
