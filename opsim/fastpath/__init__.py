"""The fast path: exact shortcuts beside the reference path (docs/fast-path.md lists each one).

Every shortcut here leaves every output byte as the reference path (`fast_path: false`, plain SimPy and the
framework run call by call) makes it; the differential tests run both and compare.

The one way in
    `opsim.runtime.simulation.Simulation` builds a `FastEnvironment` (environment.py) when the fast path is on,
    `HostThread` spends host time through it, `run_op` calls `calls.replay` first and tells `calls.Capture` what
    the framework did, `HostThread.call` consults `phase2_replay`, and the scenario's batched loops call
    `batch.run_batch`.

What it may read
    Anything of the simulation: the opbase state (thread contexts, the process, executors and caches), the
    device (streams, unit pools, memory), the recorder, the host threads and workloads.

What it may change, and how
    Only through the owners' own methods: the environment's clock and heap (`FastEnvironment`), a stream's,
    pool's or allocator's state (their `export_state` / `import_state`), the recorder's rows and codes (its
    public methods). The state changes a template replays are the framework's own writes (TLS fields, sequence
    counter, LRU order), made in the reference path's order.

Modules
    environment (the in-place clock), calls (run_op's entry and capture hook), hit_replay, call_replay,
    phase2_replay (templates), batch, batch_state, batch_rows (a batch's state in and out of arrays),
    batch_layout, batch_memory and batch_kernel (the compiled event loop, a port of `opsim.device` and
    `hit_replay`).
"""
