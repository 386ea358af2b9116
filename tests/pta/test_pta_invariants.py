"""Random call sequences through torch_npu's PTA path: the V1 hash map never exceeds the capacity, every
executor is destroyed exactly once, every call succeeds and no device memory is left allocated."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.acl import IntArray
from opsim.runtime import acl_rt
from opsim.opdev import executor as ex_mod
from opsim.opdev import pta_cache as pta
from opsim.ops.aicpu_ops import aclnn_roll, aclnn_roll_get_workspace_size
from pta_helpers import Harness

STEPS = st.lists(st.sampled_from(["add0", "add1", "add2", "add3", "roll", "drain", "reselect", "nfc"]),
                 min_size=1, max_size=14)


@settings(max_examples=25, deadline=None)
@given(steps=STEPS, limit=st.integers(1, 3), tqe=st.sampled_from(["0", "1", "2"]))
def test_pta_call_sequences_keep_the_invariants(steps, limit, tqe):
    deleted: dict[int, int] = {}
    created: list = []
    orig_delete, orig_init = ex_mod.delete_executor, ex_mod.AclOpExecutor.__init__

    def delete(executor):
        if executor.alive:
            deleted[id(executor)] = deleted.get(id(executor), 0) + 1
        orig_delete(executor)

    def init(self, *a, **kw):
        orig_init(self, *a, **kw)
        created.append(self)

    ex_mod.delete_executor, ex_mod.AclOpExecutor.__init__ = delete, init
    try:
        h = Harness({"TASK_QUEUE_ENABLE": tqe, "ACLNN_CACHE_LIMIT": str(limit)})
        sizes: list[int] = []
        allocated: list[int] = []
        mem = h.sim.device.memory

        def place(shape, n):
            ts = h.tensors(shape=shape, n=n)
            for t in ts:
                status, addr = mem.malloc(t.storage_nbytes, at=h.sim.env.now)
                assert status == 0
                allocated.append(addr)
                t.set_storage_address(addr)
            return ts

        def body(th, stream):
            for s in steps:
                if s.startswith("add"):
                    yield from h.add(th, stream, place((2 ** int(s[3]), 3), 3))
                elif s == "nfc":
                    yield from h.add(th, stream, place((2, 3), 3), form="no_format_check")
                elif s == "roll":
                    x, out = place((16,), 2)
                    yield from h.call(th, stream, (aclnn_roll_get_workspace_size, aclnn_roll),
                                      (x, IntArray([1]), IntArray([0]), out), "aclnnRoll")
                elif s == "drain":
                    yield from h.npu.drain(th)
                else:
                    yield from h.npu.drain(th)
                    yield from th.call(pta.aclnn_reselect_static_kernel)
                for name in ("py", "queue"):
                    if name == "py" or h.npu.queue is not None:
                        sizes.append(len(h.manager(name).hash_map))
            yield from h.npu.drain(th)
            yield from th.call(acl_rt.synchronize_device)
            for addr in allocated:
                mem.free(addr, at=h.sim.env.now)

        h.run(body)
    finally:
        ex_mod.delete_executor, ex_mod.AclOpExecutor.__init__ = orig_delete, orig_init
    assert all(s == 0 for s in h.statuses) and len(h.outcomes) == sum(s not in ("drain", "reselect") for s in steps)
    assert max(sizes) <= limit
    assert all(not e.alive for e in created)
    assert all(deleted.get(id(e)) == 1 for e in created)
    assert mem.leaks() == [] and mem.in_use == 0
