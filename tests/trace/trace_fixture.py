"""A small simulation-shaped object whose recorder holds every kind of record trace.json writes, with the
values that need care: rounding ties (``1.1 + 0.3``), children ending past their parents, steps tied with
spans, threads that are not names, keys beyond 64 bits, odd argument types, a second device."""
from __future__ import annotations

from types import SimpleNamespace

from opsim.trace import Recorder


def synthetic_sim() -> SimpleNamespace:
    rec = Recorder()
    h = rec.host_span
    # thread t0: an op_call with children, one ending past its parent, siblings meeting on a tie
    h("t0", "L2 phase1 entry", "aclnnAdd", 1.1, 0.3, 1)
    h("t0", "launch", "Add", 1.4, 0.6000000000000001, 1)
    h("t0", "tiling", "Add", 1.9, 0.5, -1)  # ends past the op_call below: clamped
    h("t0", "op_call", "aclnnAdd", 1.1, 1.2, 1)
    h("t0", "op_call", "aclnnMul", 2.3, 0.0, -1)  # zero length, no corr
    h("t0", "launch", "Mul", 2.3, 0.0, 2)
    h("t0", "launch", "Mul", 2.3, 0.0, 2)  # an exact duplicate
    h("t0", "op_call", "aclnnBig", 1_000_000.0, 0.0003, 3)
    h("t0", "launch", "Big", 1_000_000.0, 0.0003, 3)
    h("t1", "op_call", 'ac"l\\n\u00e9', 0.0, 5.5, 4)  # a name that needs escaping
    h("t1", "launch", 'ac"l\\n\u00e9', 0.5, 1.0, 4)
    h(7, "launch", "Odd", 3, 1, 5)  # a thread that is not a name, an int time among floats
    h("t1", "make key", "aclnnAdd", 10.0000004, 0.0000002, 6)
    rec.instant(0.0, "step", "t0", {"step": 1, "phase": "begin"})
    rec.instant(2.3, "step", "t0", {"step": 1, "phase": "end"})
    rec.instant(2.3, "step", "t0", {"step": 2, "phase": "begin"})
    rec.instant(3.0, "step", "t0", {"step": 2, "phase": "end"})
    rec.instant(4.0, "step", "t9", {"step": "x", "phase": "begin"})  # a step-only track
    rec.instant(5.0, "step", "t9", {"step": "x", "phase": "end"})
    rec.instant(6.0, "step", "t0", {"step": 3, "phase": "end"})  # an end without a begin
    rec.instant(1.5, "overflow", "t0", {"op": "Add"})
    rec.instant(1.6, "oom", "device", None)
    rec.instant(1.7, "note", "t1", 42)
    rec.instant(1.8, "note", "t1", 1.25)
    d = rec.device_task
    d(0, "aicore", 8, 1, "Add", "AI_CORE", 8, 1.5, 2.0, 2.5, 1)
    d(0, "aicore", 8, 2, "Mul", "AI_CORE", 8, 2.3, 2.5, 3.0000000000000004, 2)
    d(1, "vector", 4, 3, "", "AI_VECTOR_CORE", 4, 0.7, 1.1, 1.4, 4)  # no op: named by its task type
    d(1, "none", 0, 4, "free_async", "HOST_FUNC", 0, 1.0, 1.4, 1.4, 4)
    d(1, "vector", 4, 5, "Big", "AI_VECTOR_CORE", 4, 1_000_000.0001, 1_000_000.0002, 1_000_000.001, 3)
    d(0, "aicore", 8, 6, "Nocorr", "AI_CORE", 8, 3.0, 3.0, 3.5, -1)
    d(0, "aicore", 8, 7, "Late", "AI_CORE", 8, 0.0, 9.0, 9.5, 5)  # queued before its launch span
    d(0, "aicore", 8, 8, "Other", "AI_CORE", 8, 0.0, 1.0, 2.0, 1, device=1)  # another device: not written
    rec.memory_event(1.0, "alloc", 0x1000, 512, 512)
    rec.memory_event(1.5, "alloc", 0x2000, 512, 1024)
    rec.memory_event(1.6, "oom", 0, 1 << 40, 1024.5)  # an in-use value that is not an int
    rec.memory_event(1.7, "alloc", 0x3000, 512, 99, device=1)
    rec.cache_event(1.2, "t0", "exec", "miss", "aclnnAdd")
    rec.cache_event(2.4, "t0", "exec", "hit", "aclnnMul", key_hash=0xBEEF)
    rec.cache_event(2.5, "t1", "aicpu", "evict", "Cast", key_hash=1 << 70, detail="lru")
    rec.cache_event(2.6, "device", "exec", "hit", "aclnnAdd")
    rec.cache_event(2.7, "t1", "exec", "oneshot", "aclnnAdd", key_hash="k")
    rec.counter(1.0, "cached AI CPU tasks", 3)
    rec.counter(2.0, "cached AI CPU tasks", 2.5)
    threads = [SimpleNamespace(name="t0", thread_id=10001), SimpleNamespace(name="t1", thread_id=10002)]
    device = SimpleNamespace(device_id=0, streams=[SimpleNamespace(stream_id=0), SimpleNamespace(stream_id=1)])
    return SimpleNamespace(recorder=rec, threads=threads, device=device, soc=SimpleNamespace(name="Ascend910B2"),
                           cost=SimpleNamespace(fitted=SimpleNamespace(name="fit-1")))
