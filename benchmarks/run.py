"""The benchmark suite: every performance figure of opsim next to its target, measured in one run.

    python benchmarks/run.py            # full run (a few minutes; includes the million-call scenario)
    python benchmarks/run.py --quick    # small counts, under a minute (what CI runs)
    python benchmarks/run.py --cpu-time # in-process figures timed by CPU time (a shared machine)

Prints one table (figure, measured value, target, verdict) and writes `benchmarks/results.json` (or the
path given with `--out`). It is a measurement, not a test: it exits 0 whatever the figures.

Simulated ACLNN call rates are measured with the trace on and numerics off, one host thread on one stream,
in this process, next to the bare SimPy 7-event skeleton of `benchmarks/device_throughput.py` (host step,
queue to a stream, stream takes a unit, runs, releases, signals) run in the same process on one stream; each
rate is also given as a ratio to the skeleton, which cancels most of the machine's speed, and each is measured
on the fast path and on the reference path (`fast_path=False`) in the same pass. Command timings
(`opsim validate`, `opsim run`) run in subprocesses, best of 3, after one warm-up run that fills Numba's cache.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import device_throughput  # noqa: E402  (the bare SimPy skeleton)
import hashing  # noqa: E402  (best_of / per_call_ns)
import planner  # noqa: E402  (chain_graph)

GIB = float(1 << 30)


# ---- simulated ACLNN call rates ------------------------------------------------------------------------

def _sim(env: dict[str, str] | None = None, fast: bool = True):
    from opsim.runtime.simulation import Simulation
    return Simulation(soc="Ascend910B2", trace=True, numerics=False, env=env, fast_path=fast)


CLOCK: list[Callable[[], float]] = [time.perf_counter]
"""The clock of the in-process figures: wall time, or this process's CPU time with --cpu-time."""


def _timed_run(sim: Any, calls: int) -> float:
    clock = CLOCK[0]
    t0 = clock()
    sim.run()
    return calls / (clock() - t0)


def rate_aicore(calls: int, *, miss: bool, fast: bool = True) -> float:
    """aclnnAdd on [256, 256] float32, same tensors every call, through `run_op` (phase 1, phase 2).

    `miss`: ACLNN_CACHE_LIMIT=0, so the thread's OpExecCache refuses every insertion and every call runs
    phase 1 in full (key, lookup miss, checks, executor, launcher, tiling, workspace plan)."""
    from opsim.acl import Scalar, Tensor
    from opsim.ops.elementwise import aclnn_add, aclnn_add_get_workspace_size
    from opsim.runtime.host_thread import run_op
    sim = _sim({"ACLNN_CACHE_LIMIT": "0"} if miss else None, fast)
    statuses = set()

    def program(th):
        stream = sim.device.create_stream()
        a, b, out, alpha = Tensor([256, 256]), Tensor([256, 256]), Tensor([256, 256]), Scalar(1.0)
        args = (a, b, alpha, out)
        for _ in range(calls):
            status, _ = yield from run_op(th, aclnn_add_get_workspace_size, aclnn_add, args, stream, "aclnnAdd")
            statuses.add(int(status))

    sim.add_thread(program, "bench")
    rate = _timed_run(sim, calls)
    _check(sim, statuses, "exec", "miss" if miss else "hit", calls if miss else calls - 1)
    return rate


def rate_aicpu(calls: int, fast: bool = True) -> float:
    """aclnnSigmoidAicpu on [128, 512] float32: phase 1 each call (AI CPU launches are not in the
    OpExecCache), the AI CPU task found in its task cache from the second call on."""
    from opsim.acl import Tensor
    from opsim.ops.aicpu_ops import aclnn_sigmoid_aicpu, aclnn_sigmoid_aicpu_get_workspace_size
    from opsim.runtime.host_thread import run_op
    sim = _sim(fast=fast)
    statuses = set()

    def program(th):
        stream = sim.device.create_stream()
        args = (Tensor([128, 512]), Tensor([128, 512]))
        for _ in range(calls):
            status, _ = yield from run_op(th, aclnn_sigmoid_aicpu_get_workspace_size, aclnn_sigmoid_aicpu, args,
                                          stream, "aclnnSigmoidAicpu")
            statuses.add(int(status))

    sim.add_thread(program, "bench")
    rate = _timed_run(sim, calls)
    _check(sim, statuses, "aicpu", "hit", calls - 1)
    return rate


def rate_direct_invoke(calls: int, fast: bool = True) -> float:
    """aclnnAddRmsNorm on [128, 512] float16: phase 1 once, aclSetAclOpExecutorRepeatable, one workspace,
    then phase 2 (`aclnnAddRmsNorm`) per call, each its own correlation id; destroyed at the end."""
    from opsim.acl import Tensor
    from opsim.acl.dtypes import DataType
    from opsim.opdev.executor import destroy_executor, set_repeatable
    from opsim.ops.fused import aclnn_add_rms_norm, aclnn_add_rms_norm_get_workspace_size
    from opsim.runtime import acl_rt
    sim = _sim(fast=fast)
    statuses = set()
    f16, f32 = DataType.DT_FLOAT16, DataType.DT_FLOAT

    def program(th):
        stream = sim.device.create_stream()
        rec = sim.recorder
        tensors = []
        for shape, dt in (([128, 512], f16), ([128, 512], f16), ([512], f16), ([128, 512], f16), ([128, 1], f32),
                          ([128, 512], f16)):
            t = Tensor(shape, dt)
            status, addr = sim.device.memory.malloc(max(t.storage_nbytes, 1))
            t.set_storage_address(addr)
            tensors.append(t)
        x1, x2, gamma, y, rstd, x_out = tensors
        status, size, ex = yield from th.call(aclnn_add_rms_norm_get_workspace_size, x1, x2, gamma, 1e-6, y,
                                              rstd, x_out)
        statuses.add(int(status))
        statuses.add(int((yield from th.call(set_repeatable, ex))))
        workspace = 0
        if size:
            status, workspace = yield from th.call(acl_rt.malloc, size)
            statuses.add(int(status))
        for _ in range(calls):
            th.ctx.current_corr = rec.next_corr()
            statuses.add(int((yield from th.call(aclnn_add_rms_norm, workspace, size, ex, stream))))
        th.ctx.current_corr = -1
        if workspace:
            yield from th.call(acl_rt.free_async, workspace, stream)
        yield from th.call(destroy_executor, ex)

    sim.add_thread(program, "bench")
    rate = _timed_run(sim, calls)
    if statuses != {0}:
        raise RuntimeError(f"aclnnAddRmsNorm benchmark: statuses {sorted(statuses)}")
    return rate


def _check(sim: Any, statuses: set[int], cache: str, kind: str, at_least: int) -> None:
    """The benchmark measured what it says: every call succeeded, and the cache outcome is the intended one."""
    if statuses != {0}:
        raise RuntimeError(f"benchmark calls failed with statuses {sorted(statuses)}")
    recs = sim.recorder.records("cache")
    n = sum(1 for c, k in zip(recs["cache"], recs["kind"]) if c == cache and k == kind)
    if n < at_least:
        raise RuntimeError(f"expected at least {at_least} {cache} cache {kind} events, saw {n}")


def rate_skeleton(calls: int) -> float:
    wall, done, _ = device_throughput.run_baseline(1, calls, CLOCK[0])
    return done / wall


def best_rate(fn: Callable[[], float], repeat: int) -> float:
    return max(fn() for _ in range(repeat))


# ---- loading ---------------------------------------------------------------------------------------------

_STEP = """\
            - op: {op}
              stream: s{stream}
              shape_choices: [[{a}, {b}], [{b}, {a}], [{a}]]
              dtype_choices: [float, float16]
"""


def big_scenario_text(nbytes: int) -> tuple[str, int]:
    """A valid scenario of about `nbytes` bytes: two threads whose loops hold thousands of op steps."""
    head = "name: big\nseed: 1\ntrace: false\nthreads:\n"
    per_step = len(_STEP.format(op="Add", stream=0, a=256, b=512))
    steps = max(2, (nbytes - len(head)) // per_step)
    parts = [head]
    for th in range(2):
        parts.append(f"  - name: t{th}\n    streams: [s{th}]\n    program:\n      - loop:\n          count: 1\n"
                     "          body:\n")
        parts += [_STEP.format(op=("Add", "Mul", "Relu", "Abs")[i % 4], stream=th, a=64 + i % 200, b=128)
                  for i in range(steps // 2)]
    return "".join(parts), steps // 2 * 2


def load_figures(quick: bool) -> dict[str, float]:
    """`load_scenario` of a generated scenario of 2 MB (0.125 MB with --quick): best of 3, in process (the
    first load also pays for imports and building the schema validator)."""
    from opsim.scenario.loader import load_scenario
    text, steps = big_scenario_text((1 << 17) if quick else (2 << 20))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.yaml"
        path.write_text(text, encoding="utf-8")
        best = float("inf")
        for _ in range(3):
            t0 = CLOCK[0]()
            cfg = load_scenario(path)
            best = min(best, CLOCK[0]() - t0)
    if cfg.planned_calls() != steps:
        raise RuntimeError(f"generated scenario: {cfg.planned_calls()} calls planned, {steps} expected")
    return {"seconds": best, "mb": len(text.encode()) / (1 << 20), "steps": steps}


# ---- hashing and planning ------------------------------------------------------------------------------

def hash_figures(quick: bool) -> dict[str, float]:
    import numpy as np

    from opsim.kernels.hashing import gen_hash_binary, gen_hash_binary_batch
    total = (8 if quick else 64) << 20
    out: dict[str, float] = {}
    rng = np.random.default_rng(0)
    for key_len in (64, 1024):
        n = total // key_len
        buf = rng.integers(0, 256, n * key_len, dtype=np.uint8)
        offsets = np.arange(n, dtype=np.int64) * key_len
        lengths = np.full(n, key_len, dtype=np.int64)
        gen_hash_binary_batch(buf[:key_len], offsets[:1], lengths[:1])  # compile or load from cache
        gen_hash_binary_batch(buf[:key_len], offsets[:1], lengths[:1], parallel=True)
        serial = hashing.best_of(lambda: gen_hash_binary_batch(buf, offsets, lengths), 3 if quick else 5)
        par = hashing.best_of(lambda: gen_hash_binary_batch(buf, offsets, lengths, parallel=True), 3 if quick else 5)
        out[f"hash_batch_{key_len}B_gbs"] = buf.nbytes / min(serial, par) / 1e9
        out[f"hash_batch_{key_len}B_serial_gbs"] = buf.nbytes / serial / 1e9
    key = bytes(rng.integers(0, 256, 1024, dtype=np.uint8))
    gen_hash_binary(key)
    out["hash_single_1024B_ns"] = hashing.per_call_ns(lambda: gen_hash_binary(key), 20_000 if quick else 200_000)
    return out


def plan_seconds(tensors: int, repeat: int) -> float:
    from opsim.opdev.planner import plan_graph
    logging.disable(logging.WARNING)  # in-place re-productions log a warning each
    try:
        graph = planner.chain_graph(tensors)
        return planner.best_of(lambda: plan_graph(graph), repeat)
    finally:
        logging.disable(logging.NOTSET)


# ---- commands in subprocesses --------------------------------------------------------------------------

def _opsim_cmd(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from opsim.cli import main; sys.exit(main())", *args]


def command_seconds(args: list[str], repeat: int) -> float:
    """Best wall time of `repeat` runs of `opsim <args>` (after one warm-up run)."""
    cmd = _opsim_cmd(*args)
    subprocess.run(cmd, cwd=ROOT, capture_output=True, check=False)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, capture_output=True, check=False)
        best = min(best, time.perf_counter() - t0)
    return best


def large_run(trace: bool, out_dir: Path, calls: int | None = None) -> dict[str, float]:
    """`opsim run scenarios/large.yaml` in a fresh subprocess: wall seconds and peak resident GiB. With
    `trace`, every record is kept and trace.json is written (`--set trace=true --set outputs.trace=true`)."""
    args = ["run", "scenarios/large.yaml", "--quiet", "--no-progress", "--out", str(out_dir)]
    if trace:  # the trace writer's figures: records.json.gz (every record again, as JSON) is not written
        args += ["--set", "trace=true", "--set", "outputs.trace=true", "--set", "outputs.records=false"]
    if calls is not None:
        per_thread = max(1, calls // 8)
        args += ["--set", f"threads.0.program.0.loop.count={per_thread}",
                 "--set", f"threads.1.program.0.loop.count={per_thread}"]
    # A small runner process so that RUSAGE_CHILDREN reports this child's peak alone.
    code = ("import resource, subprocess, sys, time, json\n"
            "t0 = time.perf_counter()\n"
            "rc = subprocess.run(sys.argv[1:], capture_output=True).returncode\n"
            "wall = time.perf_counter() - t0\n"
            "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
            "print(json.dumps({'rc': rc, 'wall': wall, 'rss_kib': rss}))\n")
    res = subprocess.run([sys.executable, "-c", code, *_opsim_cmd(*args)], cwd=ROOT, capture_output=True,
                         text=True, check=False)
    info = json.loads(res.stdout.strip().splitlines()[-1])
    summary = json.loads((out_dir / "summary.json").read_text()) if (out_dir / "summary.json").exists() else {}
    trace_file = out_dir / "trace.json"
    return {"wall_s": info["wall"], "peak_rss_gib": info["rss_kib"] * 1024 / GIB, "exit_code": info["rc"],
            "op_calls": summary.get("op_calls", 0), "makespan_s": summary.get("simulated_makespan_us", 0) / 1e6,
            "run_wall_s": summary.get("wall", {}).get("wall_seconds", 0.0),
            "trace_bytes": trace_file.stat().st_size if trace_file.exists() else 0}


# ---- sweeps on Dask ---------------------------------------------------------------------------------------

def sweep_scaling(points: int, repeat: int) -> dict[str, float]:
    """Wall seconds of one `points`-point sweep of quickstart (10 cache limits x points/10 seeds) on a local
    Dask cluster of 1 and of 2 worker processes, each measured on a started cluster whose workers have run one
    point (imports and Numba's cache loaded), interleaved, best of `repeat`; `cold_*` adds the cluster start;
    `inline` with workers=0 and `default` with no workers given (the sweep's own choice, cluster start included),
    interleaved, best of max(2, `repeat`)."""
    from opsim.sweeps import load_sweep
    from opsim.sweeps.engine import connect, run_sweep
    from opsim.sweeps.point import PointTask, run_point
    spec = load_sweep({"sweep": "bench", "scenario": str(ROOT / "scenarios" / "quickstart.yaml"),
                       "grid": {"env.ACLNN_CACHE_LIMIT": list(range(1, 11))}, "seeds": max(1, points // 10)})
    first = spec.points()[0]
    warm = PointTask(0, "warm", spec.scenario, spec.label, first.overrides, spec.figures)
    out: dict[str, float] = {"points": float(len(spec.points()))}
    for _ in range(repeat):
        for n in (1, 2):
            t0 = time.perf_counter()
            client, close, _ = connect(n, None)
            try:
                client.run(run_point, warm)
                started = time.perf_counter()
                run_sweep(spec, scheduler=client)
                t1 = time.perf_counter()
            finally:
                close()
            out[f"warm_{n}"] = min(out.get(f"warm_{n}", float("inf")), t1 - started)
            out[f"cold_{n}"] = min(out.get(f"cold_{n}", float("inf")), t1 - t0)
    pair = (("inline", 0), ("default", None))  # no workers given: choose_workers decides
    for i in range(max(2, repeat)):  # the same work when the choice is "in this process": best of two at least,
        for key, workers in (pair if i % 2 == 0 else pair[::-1]):  # in both orders
            t0 = time.perf_counter()
            table = run_sweep(spec, workers=workers)
            out[key] = min(out.get(key, float("inf")), time.perf_counter() - t0)
            out[f"{key}_executor"] = table.attrs["executor"]
    return out


# ---- the table -------------------------------------------------------------------------------------------

def trace_writer_figures(quick: bool) -> dict[str, float]:
    """In one process: a large.yaml slice simulated with the full trace, then trace.json written (best of 2
    writes): the writer's time per call and per MB, and the ratio to the simulation of the same slice."""
    from opsim.scenario.runner import run_scenario
    from opsim.trace.chrome_trace import write_chrome_trace
    calls = 20_000 if quick else 200_000
    overrides = {"trace": True, "threads.0.program.0.loop.count": calls // 8,
                 "threads.1.program.0.loop.count": calls // 8}
    t0 = time.perf_counter()
    res = run_scenario(ROOT / "scenarios" / "large.yaml", overrides=overrides, write=False)
    sim_s = time.perf_counter() - t0
    best = float("inf")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        for _ in range(2):
            t0 = time.perf_counter()
            with open(path, "w", encoding="utf-8") as fh:
                write_chrome_trace(res.sim, fh)
            best = min(best, time.perf_counter() - t0)
        size = path.stat().st_size
    return {"calls": res.summary["op_calls"], "sim_s": sim_s, "write_s": best, "bytes": size}


def _row(name: str, value: float | None, unit: str, target: str, ok: bool | None, note: str = "") -> dict:
    return {"figure": name, "value": value, "unit": unit, "target": target,
            "met": ok, "note": note}


def measure(quick: bool, log: Callable[[str], None]) -> dict[str, Any]:
    n_hit = 10_000 if quick else 100_000
    n_slow = 2_000 if quick else 30_000
    # The skeleton runs as many calls as the cache-hit path: its SimPy Store keeps queued items in a list whose
    # pop(0) grows with the backlog, so its rate falls with the call count (about 115k/s at 20k calls, 99k/s
    # at 100k, 80k/s at 200k on a 2-core machine); equal counts keep the ratio like for like.
    n_skel = n_hit
    repeat = 1 if quick else 5
    rates: dict[str, float] = {}
    log("simulated ACLNN call rates (trace on, numerics off; fast path and reference path)...")
    # warm every path once (imports, Numba cache loads) before timing
    rate_aicore(50, miss=False), rate_aicore(50, miss=True), rate_aicpu(50), rate_direct_invoke(50)
    figures = (("skeleton", lambda fast: rate_skeleton(n_skel)),
               ("exec_cache_hit", lambda fast: rate_aicore(n_hit, miss=False, fast=fast)),
               ("exec_cache_miss", lambda fast: rate_aicore(n_slow, miss=True, fast=fast)),
               ("aicpu_task_cache_hit", lambda fast: rate_aicpu(n_slow, fast=fast)),
               ("direct_invoke_repeat", lambda fast: rate_direct_invoke(n_hit, fast=fast)))
    for _ in range(repeat):  # interleaved, so that a slow spell of the machine hits every figure alike
        for name, fn in figures:
            for fast in ((True,) if name == "skeleton" else (True, False)):
                key = name if fast else name + "_reference"
                rates[key] = max(rates.get(key, 0.0), fn(fast))
    skel = rates["skeleton"]
    rows = [_row("bare SimPy 7-event skeleton", skel, "calls/s", "(reference)", None,
                 "device_throughput.run_baseline, 1 stream")]
    targets = {"exec_cache_hit": (1.5, "aclnnAdd, executor-cache hit (run_op)"),
               "exec_cache_miss": (0.3, "aclnnAdd, phase 1 every call (ACLNN_CACHE_LIMIT=0)"),
               "aicpu_task_cache_hit": (0.3, "aclnnSigmoidAicpu, AI CPU task-cache hit"),
               "direct_invoke_repeat": (1.0, "aclnnAddRmsNorm, repeatable executor, phase 2 only")}
    for key, (want, label) in targets.items():
        ratio = rates[key] / skel
        ref = rates[key + "_reference"] / skel
        rows.append(_row(label, rates[key], "calls/s", f">= {want:.1f}x skeleton", ratio >= want,
                         f"ratio {ratio:.2f} (reference path {ref:.2f}, fast/reference "
                         f"{rates[key] / rates[key + '_reference']:.2f})"))
    log("loading a large scenario...")
    load = load_figures(quick)
    rows.append(_row(f"load a {load['mb']:.1f} MB scenario ({load['steps']} steps)", load["seconds"], "s",
                     f"< {2.0 * load['mb'] / 2.0:.2g}", load["seconds"] < 2.0 * load["mb"] / 2.0,
                     "in process; target 2 s per 2 MB"))
    log("AI CPU key hash...")
    h = hash_figures(quick)
    rows.append(_row("batched key hash, 64 B keys", h["hash_batch_64B_gbs"], "GB/s", "(reported)", None,
                     f"serial {h['hash_batch_64B_serial_gbs']:.2f} GB/s"))
    rows.append(_row("batched key hash, 1024 B keys", h["hash_batch_1024B_gbs"], "GB/s", ">= 4", 
                     h["hash_batch_1024B_gbs"] >= 4.0, f"serial {h['hash_batch_1024B_serial_gbs']:.2f} GB/s"))
    rows.append(_row("single 1024 B key hash", h["hash_single_1024B_ns"], "ns/call", "< 400",
                     h["hash_single_1024B_ns"] < 400.0))
    log("workspace planning...")
    tensors = 100_000
    plan = plan_seconds(tensors, 2 if quick else 5)
    rows.append(_row(f"workspace plan, {tensors} tensors", plan, "s", "< 0.2", plan < 0.2))
    log("opsim validate / opsim run quickstart (subprocesses)...")
    val = command_seconds(["validate", "scenarios/quickstart.yaml"], 3)
    rows.append(_row("opsim validate scenarios/quickstart.yaml", val, "s", "< 0.5", val < 0.5))
    with tempfile.TemporaryDirectory() as tmp:
        qs = command_seconds(["run", "scenarios/quickstart.yaml", "--quiet", "--no-progress", "--out",
                              str(Path(tmp) / "qs")], 3)
    rows.append(_row("opsim run scenarios/quickstart.yaml (warm cache)", qs, "s", "< 3", qs < 3.0))
    n_sweep = 40 if quick else 200
    log(f"{n_sweep}-point quickstart sweep on local Dask clusters of 1 and 2 workers...")
    sw = sweep_scaling(n_sweep, 1 if quick else 2)
    ratio = sw["warm_2"] / sw["warm_1"]
    rows.append(_row(f"{n_sweep}-point quickstart sweep, 2 workers / 1 worker", ratio, "x wall", "<= 0.6",
                     ratio <= 0.6, f"1 worker {sw['warm_1']:.2f} s, 2 workers {sw['warm_2']:.2f} s; with cluster "
                     f"start {sw['cold_1']:.2f} s vs {sw['cold_2']:.2f} s"))
    rows.append(_row(f"{n_sweep}-point quickstart sweep, no --workers / --workers 0", sw["default"] / sw["inline"],
                     "x wall", "<= 1.1", sw["default"] / sw["inline"] <= 1.1,
                     f"{sw['default']:.2f} s ({sw['default_executor']}) vs {sw['inline']:.2f} s; the choice: "
                     "docs/sweeps.md, How many workers"))
    log("trace.json writer on a large.yaml slice...")
    tw = trace_writer_figures(quick)
    rows.append(_row(f"trace.json writer, {tw['calls']} calls", tw["write_s"] / tw["calls"] * 1e6, "us/call",
                     "(reported)", None, f"{tw['bytes'] / 1e6 / tw['write_s']:.0f} MB/s; write / simulate "
                     f"{tw['write_s'] / tw['sim_s']:.2f}"))
    large: dict[str, Any] = {}
    if quick:
        rows.append(_row("opsim run scenarios/large.yaml", None, "s", "< 12 s; full trace < 40 s, < 1.2 GiB", None,
                         "skipped (--quick)"))
    else:
        log("opsim run scenarios/large.yaml, warm-up (fills Numba's cache, as for the quickstart figure)...")
        with tempfile.TemporaryDirectory() as tmp:
            large_run(False, Path(tmp) / "large", calls=100_000)
        for trace in (False, True):
            label = "full trace" if trace else "trace: false"
            log(f"opsim run scenarios/large.yaml, {label} (subprocess)...")
            with tempfile.TemporaryDirectory() as tmp:
                r = large_run(trace, Path(tmp) / "large")
            large["trace" if trace else "no_trace"] = r
            note = f"{r['op_calls']} calls, exit {r['exit_code']}"
            if trace:
                note += f", trace.json {r['trace_bytes'] / 1e9:.2f} GB"
            wall_target = 40.0 if trace else 12.0
            rows.append(_row(f"large.yaml wall, {label}", r["wall_s"], "s", f"< {wall_target:.0f}",
                             r["wall_s"] < wall_target, note))
            if trace:
                rows.append(_row(f"large.yaml peak RSS, {label}", r["peak_rss_gib"], "GiB", "< 1.2",
                                 r["peak_rss_gib"] < 1.2))
            else:
                rows.append(_row(f"large.yaml peak RSS, {label}", r["peak_rss_gib"], "GiB", "(reported)", None))
            if r.get("makespan_s"):
                rows.append(_row(f"large.yaml simulated makespan, {label}", r["makespan_s"], "s",
                                 "> wall (stretch)", r["makespan_s"] > r["wall_s"],
                                 f"wall / simulated {r['wall_s'] / r['makespan_s']:.2f} (the process; the run "
                                 f"alone, summary.json's wall: {r['run_wall_s'] / r['makespan_s']:.2f})"))
    return {"rows": rows, "rates": rates, "load": load, "hash": h, "plan_s": plan, "validate_s": val,
            "quickstart_s": qs, "sweep": sw, "trace_writer": tw, "large": large}


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}"


def table(rows: list[dict]) -> str:
    head = ("figure", "measured", "unit", "target", "met", "note")
    body = [(r["figure"], _fmt(r["value"]), r["unit"], r["target"],
             "-" if r["met"] is None else ("yes" if r["met"] else "NO"), r["note"]) for r in rows]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(head, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in body]
    return "\n".join(line.rstrip() for line in lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small counts, no million-call run (under a minute)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results.json", help="results JSON path")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time the in-process figures (call rates, loading) by this process's CPU time instead of "
                         "wall time: steadier on a machine shared with other work")
    args = ap.parse_args(argv)
    if args.cpu_time:
        CLOCK[0] = time.process_time
    t0 = time.perf_counter()
    try:
        result = measure(args.quick, lambda s: print(s, file=sys.stderr, flush=True))
    except Exception as exc:  # a measurement, not a test: report and exit 0
        print(f"benchmark failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 0
    result["quick"] = args.quick
    result["clock"] = "cpu" if args.cpu_time else "wall"
    result["seconds"] = time.perf_counter() - t0
    result["machine"] = {"python": platform.python_version(), "platform": platform.platform(),
                         "cpus": os.cpu_count()}
    print(table(result["rows"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out} ({result['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
