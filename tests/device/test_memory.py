"""Device memory: alignment, statuses, OOM without leaks, stream-ordered frees, numerics aliasing, strategies."""
import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.acl.status import AclnnStatus
from opsim.device import ALIGNMENT, BASE_ADDRESS, Device, DeviceMemory, DeviceTask, TaskKind, get_soc
from opsim.errors import InvalidArgumentError
from opsim.trace import Recorder

OK = AclnnStatus.ACLNN_SUCCESS


def mem(size=64 * 1024, numerics=False, strategy="first_fit"):
    env = simpy.Environment()
    rec = Recorder()
    return env, rec, DeviceMemory(size, rec, env, numerics, strategy)


def test_addresses_and_sizes_are_512_aligned_from_the_base():
    env, rec, m = mem()
    st1, a1 = m.malloc(1)
    st2, a2 = m.malloc(600)
    assert (st1, st2) == (OK, OK)
    assert a1 == BASE_ADDRESS and a2 == BASE_ADDRESS + 512
    assert m.in_use == 512 + 1024
    assert rec.records("memory")["size"] == [512, 1024]
    assert m.leaks()[1].requested == 600


@pytest.mark.parametrize("size", [0, -1, -4096, 1.5, "10"])
def test_bad_sizes_return_param_invalid(size):
    env, rec, m = mem()
    assert m.malloc(size) == (AclnnStatus.ACLNN_ERR_PARAM_INVALID, 0)
    assert "size" in m.last_error
    assert m.in_use == 0


def test_bad_constructor_arguments():
    env, rec = simpy.Environment(), Recorder()
    with pytest.raises(InvalidArgumentError, match="strategy"):
        DeviceMemory(1 << 20, rec, env, strategy="worst_fit")
    with pytest.raises(InvalidArgumentError, match="size"):
        DeviceMemory(-5, rec, env)


def test_out_of_memory_returns_a_status_and_changes_nothing():
    env, rec, m = mem(size=4096)
    _, a = m.malloc(1024)
    before = (m.in_use, m.free_blocks(), [x.address for x in m.leaks()])
    status, addr = m.malloc(4096)
    assert status == AclnnStatus.ACLNN_ERR_RUNTIME_ERROR and addr == 0
    assert "out of device memory" in m.last_error
    assert (m.in_use, m.free_blocks(), [x.address for x in m.leaks()]) == before
    assert rec.records("memory")["kind"][-1] == "oom"
    assert m.free(a) == OK
    assert m.leaks() == [] and m.free_blocks() == [(BASE_ADDRESS, 4096)]


def test_free_errors():
    env, rec, m = mem()
    _, a = m.malloc(1024)
    assert m.free(a + 512) == AclnnStatus.ACLNN_ERR_PARAM_INVALID
    assert "inside the allocation" in m.last_error
    assert m.free(a) == OK
    assert m.free(a) == AclnnStatus.ACLNN_ERR_PARAM_INVALID
    assert "not a live allocation" in m.last_error
    assert m.free(12345) == AclnnStatus.ACLNN_ERR_PARAM_INVALID


def test_peak_and_in_use_over_time():
    env, rec, m = mem()
    _, a = m.malloc(1024, at=1.0)
    _, b = m.malloc(2048, at=2.0)
    m.free(a, at=3.0)
    assert (m.in_use, m.peak) == (2048, 3072)
    cols = rec.records("memory")
    assert cols["time"] == [1.0, 2.0, 3.0]
    assert cols["kind"] == ["alloc", "alloc", "free"]
    assert cols["in_use"] == [1024, 3072, 2048]


def test_free_async_waits_for_the_work_queued_on_the_stream():
    env = simpy.Environment()
    rec = Recorder()
    dev = Device(env, get_soc("Ascend910B2"), rec)
    s = dev.create_stream()
    _, ws = dev.memory.malloc(1 << 20)
    s.submit(DeviceTask(TaskKind.AI_CORE, 40.0, 24, "uses_ws"), at=0.0)
    assert dev.memory.free_async(ws, s, at=2.0) == OK
    assert dev.memory.free_async(ws, s, at=2.0) == AclnnStatus.ACLNN_ERR_PARAM_INVALID  # double free
    assert dev.memory.free(ws) == AclnnStatus.ACLNN_ERR_PARAM_INVALID
    assert "already queued" in dev.memory.last_error
    env.run(until=39.0)
    assert dev.memory.in_use == 1 << 20
    env.run()
    assert dev.memory.in_use == 0
    cols = rec.records("memory")
    assert cols["kind"][-1] == "free" and cols["time"][-1] == 40.0


def test_free_async_on_an_idle_stream_frees_at_the_submission_time():
    env = simpy.Environment()
    dev = Device(env, get_soc("Ascend910B2"), Recorder())
    s = dev.create_stream()
    _, a = dev.memory.malloc(512)
    dev.memory.free_async(a, s, at=0.0)
    assert dev.memory.in_use == 0
    _, b = dev.memory.malloc(512)
    dev.memory.free_async(b, s, at=5.0)
    env.run()
    assert dev.recorder.records("memory")["time"][-1] == 5.0


def test_view_aliases_overlapping_ranges_when_numerics_are_on():
    env, rec, m = mem(numerics=True)
    _, a = m.malloc(4096)
    v1 = m.view(a + 512, 1024)
    v2 = m.view(a + 1024, 1024)  # overlaps v1 by 512 bytes
    v1[:] = 7
    assert np.all(v2[:512] == 7) and np.all(v2[512:] == 0)
    v2.view(np.float32)[-1] = 1.5
    assert m.view(a + 2044, 4).view(np.float32)[0] == 1.5
    assert m.view(a + 4000, 200) is None  # runs past the allocation
    assert m.view(a - 512, 16) is None
    m.free(a)
    assert m.view(a, 16) is None
    _, b = m.malloc(4096)
    assert b == a and np.all(m.view(b, 4096) == 0)  # a fresh allocation starts zeroed


def test_view_is_none_without_numerics():
    env, rec, m = mem(numerics=False)
    _, a = m.malloc(4096)
    assert m.view(a, 16) is None


def test_first_fit_and_best_fit_pick_different_holes():
    def fragment(strategy):
        env, rec, m = mem(size=16 * ALIGNMENT, strategy=strategy)
        blocks = [m.malloc(n * ALIGNMENT)[1] for n in (3, 1, 1, 1, 2, 1)]
        m.free(blocks[0])  # hole of 3 blocks at the bottom
        m.free(blocks[4])  # hole of 2 blocks higher up
        return m, blocks
    m, blocks = fragment("first_fit")
    assert m.malloc(2 * ALIGNMENT)[1] == blocks[0]
    m, blocks = fragment("best_fit")
    assert m.malloc(2 * ALIGNMENT)[1] == blocks[4]


ops = st.lists(st.tuples(st.booleans(), st.integers(1, 5000), st.integers(0, 50)), max_size=60)


@settings(max_examples=60, deadline=None)
@given(ops, st.sampled_from(["first_fit", "best_fit"]))
def test_allocator_invariants(seq, strategy):
    env, rec, m = mem(size=64 * 1024, strategy=strategy)
    live = []
    for is_alloc, size, pick in seq:
        if is_alloc or not live:
            status, addr = m.malloc(size)
            if status == OK:
                live.append(addr)
            else:
                assert addr == 0 and m.largest_free_block < -(-size // ALIGNMENT) * ALIGNMENT
        else:
            assert m.free(live.pop(pick % len(live))) == OK
        allocs = m.leaks()
        assert sorted(live) == [x.address for x in allocs]
        spans = sorted([(x.address, x.size) for x in allocs] + m.free_blocks())
        pos = BASE_ADDRESS
        for start, size_ in spans:  # live and free blocks tile the whole space without overlap
            assert start == pos and start % ALIGNMENT == 0
            pos += size_
        assert pos == BASE_ADDRESS + m.capacity
        assert m.in_use == sum(x.size for x in allocs)
        free = m.free_blocks()
        assert all(a + s < b for (a, s), (b, _) in zip(free, free[1:]))  # free neighbours are merged
    for addr in live:
        m.free(addr)
    assert m.free_blocks() == [(BASE_ADDRESS, m.capacity)] and m.in_use == 0
