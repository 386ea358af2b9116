"""The fast path recognises what the framework did by explicit references (types, fields, identities), never by
names: no callback is told apart by its `__qualname__` or read through its closure."""
from __future__ import annotations

import ast

from opsim.fastpath import call_replay, hit_replay
from opsim.opdev.thread_local import CacheEventAt
from tests.architecture.imports import module_files

_INTROSPECTION = {"__qualname__", "__closure__", "__code__", "co_freevars", "co_consts", "cell_contents"}


def test_no_fast_path_module_reads_a_function_by_its_name_or_closure():
    """No module of opsim.fastpath reads a function's qualified name, code or closure, or holds a `<locals>` name."""
    wrong = []
    for module, path in module_files().items():
        if not module.startswith("opsim.fastpath"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in _INTROSPECTION:
                wrong.append(f"{module}:{node.lineno}: .{node.attr}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                    "<locals>" in node.value or node.value in _INTROSPECTION):
                wrong.append(f"{module}:{node.lineno}: {node.value!r}")
    assert not wrong, "\n".join(wrong)


def test_cache_records_are_recognised_by_type_and_read_by_field():
    """A CacheEventAt of a replayed kind is read field by field; any other callback (or kind) is not replayed."""
    got = []

    class Rec:
        def cache_event(self, *args):
            got.append(args)

    miss = CacheEventAt(Rec(), "t0", "exec", "miss", "aclnnAdd")
    hit = CacheEventAt(Rec(), "t0", "aicpu", "hit", "Unique", 7, "cached=1")
    assert call_replay._event(miss) == ("exec", "miss", "aclnnAdd", 0, "")
    assert call_replay._event(hit) == ("aicpu", "hit", "Unique", 7, "cached=1")
    assert call_replay._event(CacheEventAt(Rec(), "t0", "exec", "evict", "aclnnAdd", 0, "30")) is None
    assert call_replay._event(lambda t: None) is None
    assert hit_replay.exec_hit_record(CacheEventAt(Rec(), "t0", "exec", "hit", "aclnnAdd"))
    assert not hit_replay.exec_hit_record(miss) and not hit_replay.exec_hit_record(lambda t: None)
    hit(2.5)
    assert got == [(2.5, "t0", "aicpu", "hit", "Unique", 7, "cached=1")]


def test_phase_1_leaves_its_cache_record_as_a_cache_event_at(monkeypatch):
    """l2_dfx_phase_1's miss and hit records, as left in the host-action log, are CacheEventAt objects."""
    from opsim.opdev import thread_local
    from opsim.ops.elementwise import aclnn_mul, aclnn_mul_get_workspace_size
    from opsim.runtime.host_thread import run_op
    from opsim.runtime.simulation import Simulation
    from tests.runtime.program_steps import F32, device_tensor

    sim = Simulation(fast_path=False)
    args = tuple(device_tensor(sim, [64], F32) for _ in range(3))
    stream = sim.device.create_stream()
    seen = []
    original = thread_local.ThreadLocalContext.at
    monkeypatch.setattr(thread_local.ThreadLocalContext, "at", lambda self, fn: (seen.append(fn), original(self, fn)))

    def program(th):
        for _ in range(2):
            yield from run_op(th, aclnn_mul_get_workspace_size, aclnn_mul, args, stream, "aclnnMul")

    sim.add_thread(program, "t")
    sim.run()
    assert [(fn.cache, fn.kind, fn.op) for fn in seen if type(fn) is CacheEventAt] == [
        ("exec", "miss", "aclnnMul"), ("exec", "hit", "aclnnMul")]


def test_the_compiled_loop_takes_its_state_as_named_tuples():
    """The batch kernel's entry point and its wide steps take the state as the layout's NamedTuples of arrays
    (not some twenty positional arrays each), and no compiled function takes more than 12 parameters."""
    from opsim.fastpath import batch_kernel, batch_layout

    path = module_files()["opsim.fastpath.batch_kernel"]
    functions = {n.name: [a.arg for a in n.args.args] for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(n, ast.FunctionDef)}
    assert functions["run"] == ["ev", "dev", "rows", "calls", "max_calls"]
    for name in ("_call", "_peek"):
        assert functions[name][:4] == ["ev", "dev", "rows", "calls"], name
    for name in ("_finish", "_advance", "_workspace"):
        assert functions[name][:3] == ["ev", "dev", "rows"], name
    assert max(len(args) for args in functions.values()) <= 12, functions
    for cls in (batch_layout.EventArrays, batch_layout.DeviceArrays, batch_layout.RowArrays, batch_layout.CallArrays):
        assert issubclass(cls, tuple) and cls._fields, cls
    assert callable(batch_kernel.run)
