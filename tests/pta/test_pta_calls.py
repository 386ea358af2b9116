"""EXEC_NPU_CMD through opbase's PTA mode in a simulation: the given/when/then cases of pta-cache-mode.md §10
(1-10), its §8 edge cases, the V1/V2 differences and the task queue."""
from __future__ import annotations

import functools

import pytest

from opsim.acl import IntArray, Scalar, Tensor, TensorList
from opsim.opdev import op_exec_cache as oec
from opsim.opdev import pta_cache as pta
from opsim.ops import _common
from opsim.ops.aicpu_ops import aclnn_nonzero, aclnn_nonzero_get_workspace_size, aclnn_roll, aclnn_roll_get_workspace_size
from pta_helpers import ADD, Harness

V1_NO_QUEUE = {"TASK_QUEUE_ENABLE": "0"}
V1_QUEUE = {"TASK_QUEUE_ENABLE": "1"}
V2 = {"TASK_QUEUE_ENABLE": "2"}


@pytest.fixture
def replays(monkeypatch):
    """The address list of every cache replay."""
    seen: list[list[int]] = []
    orig = oec.OpExecCache.run

    def run(self, ctx, workspace, stream, addresses, *a, **kw):
        seen.append(list(addresses))
        return orig(self, ctx, workspace, stream, addresses, *a, **kw)

    monkeypatch.setattr(oec.OpExecCache, "run", run)
    return seen


@pytest.fixture
def inserts(monkeypatch):
    """(hash, key, accepted) of every AddOpExecCache."""
    seen: list[tuple[int, bytes, bool]] = []
    orig = oec.OpExecCacheManager.add

    def add(self, ctx, cache):
        h, k = cache.hash_key, cache.key
        ok = orig(self, ctx, cache)
        seen.append((h, k, ok))
        return ok

    monkeypatch.setattr(oec.OpExecCacheManager, "add", add)
    return seen


@pytest.mark.parametrize("env", [V1_NO_QUEUE, V1_QUEUE])
def test_case_1_second_call_hits_skips_phase_1_and_replays_with_its_own_addresses(env, replays):
    h = Harness(env)
    calls = {}

    def body(th, stream):
        calls[1] = h.tensors()
        yield from h.add(th, stream, calls[1])
        yield from h.npu.drain(th)  # the first call's phase 2 has run
        calls[2] = h.tensors()
        yield from h.add(th, stream, calls[2])

    h.run(body)
    assert h.hits == [False, True] and h.statuses == [0, 0]
    assert h.phase1_count() == 1
    assert len(h.manager().hash_map) == 1 and len(h.manager().container) == 0
    assert h.outcomes[1].workspace_size == h.outcomes[0].workspace_size
    assert replays == [[t.storage.address for t in calls[2]]]
    assert h.cache_events("pta") == ["miss", "hit"] and h.cache_events("exec") == []


@pytest.mark.parametrize("change", ["stream", "alpha", "stride"])
def test_case_2_a_different_stream_alpha_or_stride_misses_and_adds_an_entry(change):
    h = Harness(V1_NO_QUEUE)

    def body(th, stream):
        yield from h.add(th, stream)
        if change == "stream":
            yield from h.add(th, h.sim.device.create_stream())
        elif change == "alpha":
            yield from h.add(th, stream, alpha=2)
        else:
            yield from h.add(th, stream, strides=(1, 2))

    h.run(body)
    assert h.hits == [False, False] and h.phase1_count() == 2
    assert len(h.manager().hash_map) == 2


def test_case_3_a_second_identical_call_before_the_first_phase_2_misses_and_is_refused(inserts):
    h = Harness(V1_QUEUE)
    first_cache = {}

    def body(th, stream):
        yield from h.add(th, stream)
        yield from h.add(th, stream)  # queued behind the first: its phase 2 has not run yet
        first_cache.update(h.manager().hash_map)
        yield from h.npu.drain(th)
        yield from h.add(th, stream)

    h.run(body)
    assert h.hits == [False, False, True] and h.phase1_count("py") == 2
    assert [ok for _, _, ok in inserts] == [True, False]
    assert inserts[0][0] == inserts[1][0] != 0
    assert h.manager().hash_map == first_cache


def test_producer_runs_ahead_while_the_consumer_runs_phase_2():
    h = Harness(V1_QUEUE)

    def body(th, stream):
        for _ in range(3):
            yield from h.add(th, stream)

    h.run(body)
    calls = h.sim.recorder.records("host")
    rows = list(zip(calls["thread"], calls["phase"], calls["start"], calls["dur"], calls["corr"]))
    op_calls = [(s, s + d, c) for t, p, s, d, c in rows if p == "op_call" and t == "py"]
    phase2 = {c: s for t, p, s, d, c in rows if p == "L2 phase2 entry" and t == "task_queue"}
    assert set(phase2) == {c for _, _, c in op_calls}  # every phase 2 ran on the consumer
    assert all(t == "py" for t, _, _ in h.phase_spans("L2 phase1 entry"))
    # the producer never waits for the consumer: its second call starts when its first ends, while the consumer
    # runs the first call's phase 2
    (s1, e1, c1), (s2, e2, c2), _ = op_calls
    assert s2 == e1 <= phase2[c1] < e2
    assert phase2[c1] < phase2[c2]


def test_case_4_v1_full_map_is_sticky_until_reselect(monkeypatch):
    h = Harness({"TASK_QUEUE_ENABLE": "0", "ACLNN_CACHE_LIMIT": "2"})
    created = []
    orig = oec.OpExecCache.__init__

    def init(self, *a, **kw):
        orig(self, *a, **kw)
        created.append(self)

    monkeypatch.setattr(oec.OpExecCache, "__init__", init)
    shapes = [(2, 3), (4, 3), (8, 3), (16, 3)]
    state = {}

    def body(th, stream):
        for s in shapes[:3]:
            yield from h.add(th, stream, shape=s)
        state["full"] = th.ctx.cache_has_full
        state["size"] = len(h.manager().hash_map)
        for s in shapes[:2]:
            yield from h.add(th, stream, shape=s)
        n = len(created)
        yield from h.add(th, stream, shape=shapes[3])
        state["created_for_4th"] = len(created) - n
        yield from th.call(pta.aclnn_reselect_static_kernel)
        state["after_reselect"] = (th.ctx.cache_has_full, len(h.manager().hash_map))
        for s in shapes[:2]:
            yield from h.add(th, stream, shape=s)

    h.run(body)
    assert state["full"] is True and state["size"] == 2
    assert h.hits[:6] == [False, False, False, True, True, False]
    assert state["created_for_4th"] == 0  # no OpExecCache at all for any executor on this thread
    assert state["after_reselect"] == (False, 0)
    assert h.hits[6:] == [False, False] and len(h.manager().hash_map) == 2


def test_case_5_v2_container_evicts_lru_before_inserting():
    h = Harness({"TASK_QUEUE_ENABLE": "2", "ACLNN_CACHE_LIMIT": "2"})

    def body(th, stream):
        for s in [(2, 3), (4, 3), (8, 3)]:
            yield from h.add(th, stream, shape=s)
            yield from h.npu.drain(th)
        yield from h.add(th, stream, shape=(2, 3))

    h.run(body)
    m = h.manager("queue")  # V2: the consumer thread's manager
    assert h.hits == [False, False, False, False]
    assert m.evictions == 2 and len(m.hash_map) == 0  # k3 evicted k1 and k2; k1 came back into a free slot
    assert len(m.container) == 2
    assert len(h.manager("py").container) == 0 and h.phase1_count("py") == 0


@pytest.fixture
def unrecordable(monkeypatch):
    """Every Add launch has 0 bytes of tiling data, so its first phase 2 cannot be recorded."""
    orig = oec.OpExecCache.record

    def record(self, op_name, task_type, block_dim, duration, tensors, n_in, n_out, attrs, compute, tiling,
               *launch_cfg):
        return orig(self, op_name, task_type, block_dim, duration, tensors, n_in, n_out, attrs, compute,
                    0 if op_name == "Add" else tiling, *launch_cfg)

    monkeypatch.setattr(oec.OpExecCache, "record", record)


def test_case_6_v1_poisoned_hash_never_hits_again(unrecordable, inserts):
    h = Harness(V1_NO_QUEUE)

    def body(th, stream):
        for _ in range(4):
            yield from h.add(th, stream)

    h.run(body)
    assert h.hits == [False] * 4 and h.phase1_count() == 4
    m = h.manager()
    assert len(m.hash_map) == 1
    (h_key, dead), = m.hash_map.items()
    assert h_key != 0 and dead.hash_key == 0 and not dead.usable
    assert [ok for _, _, ok in inserts] == [True, False, False, False]


def test_case_6_contrast_v2_stores_the_next_calls_cache(unrecordable, inserts):
    h = Harness(V2)

    def body(th, stream):
        for _ in range(3):
            yield from h.add(th, stream)
            yield from h.npu.drain(th)

    h.run(body)
    assert [ok for _, _, ok in inserts] == [True, True, True]  # a dead entry cannot match: no duplicate
    assert len(h.manager("queue").container) == 3  # the dead ones stay until evicted


def test_case_7_an_aicpu_op_is_never_stored(inserts):
    h = Harness(V1_QUEUE)

    def body(th, stream):
        for _ in range(3):
            x, out = h.tensors(shape=(16,), n=2)
            yield from h.call(th, stream, (aclnn_roll_get_workspace_size, aclnn_roll),
                              (x, IntArray([1]), IntArray([0]), out), "aclnnRoll")
            yield from h.npu.drain(th)

    h.run(body)
    assert h.hits == [False] * 3 and h.phase1_count("py") == 3
    assert not any(ok for *_, ok in inserts) and h.manager().hash_map == {}


def _overflowing_calls(env: dict) -> Harness:
    """Two aclnnAdd calls whose torch_npu key also carries a 60-tensor list (over 8192 bytes)."""
    h = Harness(env)
    extra = TensorList([Tensor([1] * 8) for _ in range(60)])

    def gws(a, b, alpha, out, _tensors):
        return ADD[0](a, b, alpha, out)

    def body(th, stream):
        for _ in range(2):
            a, b, o = h.tensors()
            yield from h.call(th, stream, (gws, ADD[1]), (a, b, Scalar(1, "int64"), o, extra), "aclnnAdd")
            yield from h.npu.drain(th)

    return h.run(body)


def test_case_8_an_overflowing_key_is_never_stored_and_opbase_key_is_not_tried(inserts):
    h = _overflowing_calls(V1_NO_QUEUE)
    assert h.hits == [False, False] and h.phase1_count() == 2
    assert inserts == [(0, b"", False)] * 2  # hash 0 and no key: the executor's cache is invalid, refused
    assert h.cache_events("exec") == [] and h.manager().container == {}


def test_case_8_v2_overflow_gives_a_null_key():
    h = _overflowing_calls(V2)
    assert h.hits == [False, False] and len(h.manager("queue").container) == 0


def test_case_9_op_dump_turns_pta_off():
    h = Harness(V1_NO_QUEUE, sim_kw={"op_dump": True})

    def body(th, stream):
        for _ in range(3):
            yield from h.add(th, stream)

    h.run(body)
    assert h.hits == [None] * 3 and h.cache_events("pta") == []
    assert h.phase1_count() == 3 and h.ctx().cache_has_full and h.manager().hash_map == {}


@pytest.mark.parametrize("env", [V1_QUEUE, V2])
def test_case_10_no_format_check_runs_phase_1_every_call_and_stores_nothing(env, inserts):
    h = Harness(env)

    def body(th, stream):
        for _ in range(3):
            yield from h.add(th, stream, form="no_format_check")
            yield from h.npu.drain(th)

    h.run(body)
    assert h.hits == [None] * 3 and h.phase1_count() == 3 and inserts == [(0, b"", False)] * 3
    assert h.cache_events("pta") == [] and h.cache_events("exec") == []


def test_case_10_exec_npu_cmd_sync_for_data_dependent_shapes(inserts):
    h = Harness(V1_QUEUE)

    def body(th, stream):
        th.ctx.cache_api = "aclnnAdd"
        for _ in range(2):
            x, out = h.tensors(shape=(16,), n=2)
            out = Tensor([16, 1], "int64", address=out.storage.address)
            yield from h.call(th, stream, (aclnn_nonzero_get_workspace_size, aclnn_nonzero), (x, out),
                              "aclnnNonzero", form="sync")

    h.run(body)
    assert h.hits == [None, None] and h.statuses == [0, 0] and not any(ok for *_, ok in inserts)
    assert h.ctx().cache_api == "aclnnAdd"  # no CanUsePTACache: cacheApi_ keeps its previous value
    assert all(t == "py" for t, _, _ in h.phase_spans("L2 phase2 entry"))  # run inline, then synchronised


def test_pta_symbols_missing_fall_back_to_opbase_ordinary_cache():
    h = Harness(V1_NO_QUEUE, pta_symbols=False)

    def body(th, stream):
        for _ in range(3):
            yield from h.add(th, stream)

    h.run(body)
    assert h.hits == [None] * 3 and h.phase1_count() == 3
    assert h.cache_events("exec") == ["miss", "hit", "hit"] and h.cache_events("pta") == []


def test_aliased_and_distinct_outputs_share_one_executor():
    h = Harness(V1_NO_QUEUE)

    def body(th, stream):
        a, b, o = h.tensors()
        yield from h.add(th, stream, [a, b, o])
        yield from h.add(th, stream, [a, b, a])

    h.run(body)
    assert h.hits == [False, True]


def test_two_python_threads_have_separate_managers():
    h = Harness(V1_QUEUE)

    def body(th, stream):
        for _ in range(2):
            yield from h.add(th, stream)
            yield from h.npu.drain(th)

    h.run(body, body)
    assert h.hits.count(True) == 2 and h.hits.count(False) == 2
    assert len(h.manager("py").hash_map) == 1 and len(h.manager("py2").hash_map) == 1
    assert h.manager("queue").hash_map == {}


def test_v1_hash_collision_replays_the_other_signature_v2_does_not(monkeypatch):
    from opsim.runtime import torch_npu
    monkeypatch.setattr(torch_npu, "gen_hash", lambda data: 0x5EED)
    for env, second in ((V1_NO_QUEUE, True), (V2, False)):
        h = Harness(env)

        def body(th, stream):
            yield from h.add(th, stream, shape=(2, 3))
            yield from h.npu.drain(th)
            yield from h.add(th, stream, shape=(64, 64))

        h.run(body)
        assert h.hits == [False, second]


def test_without_cache_phase_1_in_v1_poisons_the_hash(monkeypatch, inserts):
    monkeypatch.setattr(_common, "l2_dfx_phase_1", functools.partial(oec.l2_dfx_phase_1, with_cache=False))
    h = Harness(V1_NO_QUEUE)

    def body(th, stream):
        for _ in range(3):
            yield from h.add(th, stream)

    h.run(body)
    assert h.hits == [False] * 3
    assert [ok for _, _, ok in inserts] == [True, False, False]  # stored under the PTA hash, empty storages
    (dead,) = h.manager().hash_map.values()
    assert dead.hash_key == 0 and not dead.usable


def test_set_repeatable_takes_the_cache_out_of_the_hash_map():
    from opsim.opdev.executor import destroy_executor, set_repeatable
    h = Harness(V1_NO_QUEUE)
    state = {}

    def body(th, stream):
        a, b, o = h.tensors()
        args = (a, b, Scalar(1, "int64"), o)

        def phase_1():
            pta.can_use_pta_cache("aclnnAdd")
            pta.init_pta_cache_thread_local()
            pta.set_pta_hash_key(77)
            status, size, ex = ADD[0](*args)
            state["before"] = dict(get(th).hash_map)
            state["repeat"] = set_repeatable(ex)
            state["after"] = dict(get(th).hash_map)
            pta.un_init_pta_cache_thread_local()
            return ex

        ex = yield from th.call(phase_1)
        yield from th.call(ADD[1], 0, 0, ex, stream)
        yield from th.call(destroy_executor, ex)

    get = lambda th: oec.get_manager(th.ctx)  # noqa: E731
    h.run(body)
    assert list(state["before"]) == [77] and state["repeat"] == 0 and state["after"] == {}


def test_a_hit_shows_only_phase_2_in_the_profiler_on_the_queue_thread():
    from opsim.trace.ascend_profiler import build_profile
    h = Harness(V1_QUEUE)

    def body(th, stream):
        for _ in range(3):
            yield from h.add(th, stream)
            yield from h.npu.drain(th)

    h.run(body)
    p = build_profile(h.sim)
    names = {tid: name for name, tid in p.threads.items()}
    spans = sorted((names[s.tid], s.name) for s in p.api_spans if s.name.startswith("aclnnAdd"))
    assert spans == [("py", "aclnnAddGetWorkspaceSize")] + [("task_queue", "aclnnAdd")] * 3


def test_v2_runs_the_whole_call_on_the_consumer():
    h = Harness(V2)

    def body(th, stream):
        for _ in range(2):
            yield from h.add(th, stream)
            yield from h.npu.drain(th)

    h.run(body)
    assert h.hits == [False, True]
    assert {t for t, _, _ in h.phase_spans("L2 phase1 entry")} == {"task_queue"}
    assert {t for t, _, _ in h.phase_spans("op_call")} == {"py"}
    assert len(h.manager("queue").container) == 1 and h.manager("py").container == {}


@pytest.mark.parametrize("setting", [{"env": {"DISABLE_L2_CACHE": ""}}, {"sim_kw": {"overflow_dump": True}}])
def test_other_cache_disabling_switches_turn_pta_off(setting):
    env = {**V1_NO_QUEUE, **setting.get("env", {})}
    h = Harness(env, sim_kw=setting.get("sim_kw", {}))

    def body(th, stream):
        for _ in range(2):
            yield from h.add(th, stream)

    h.run(body)
    assert h.hits == [None, None] and h.phase1_count() == 2 and h.ctx().cache_has_full


def test_a_direct_invoke_op_is_never_stored():
    from opsim.scenario.runner import run_scenario
    data = {"name": "di", "threads": [{"name": "py", "cache_mode": "pta", "program": [
        {"loop": {"count": 3, "body": [{"op": "FusedBiasRelu", "shapes": [[4, 8], [8]]}]}}]}]}
    res = run_scenario(data, write=False)
    s = res.summary
    assert s["pta_cache"]["hits"] == 0 and s["pta_cache"]["misses"] == 3 and not s["errors"]
    host = res.sim.recorder.records("host")
    assert sum(1 for t, p in zip(host["thread"], host["phase"]) if p == "L2 phase1 entry" and t == "py") == 3
