"""PTA-mode calls on the fast path take torch_npu's argument key from the memo (opsim.fastpath.pta_key) and get
the reference path's bytes: the same key bytes, hash and cached tensor list as a fresh serialisation, the same
hits and misses, the same records."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from opsim.acl import Scalar, Tensor
from opsim.acl.dtypes import Format
from opsim.acl.tensor import BoolArray
from opsim.fastpath import pta_key
from opsim.runtime import torch_npu
from opsim.runtime.torch_npu import G_HASH_OVERFLOW_OFFSET, calc_hash_id, serialise, stream_pointer

from pta_helpers import ADD, Harness


def _fresh(npu, ctx, api, args, stream, v2):
    hb = serialise(api, args, v2=v2, deterministic_level=ctx.process.deterministic_level, device=npu.device,
                   stream=stream_pointer(stream), core_control=npu.core_control,
                   deterministic_bool=npu.deterministic_bool)
    return (bytes(hb.buf), hb.offset, None if v2 else calc_hash_id(hb)), hb.addresses


def _cached_list(ctx):
    return list(ctx.cached_tensor_list[:ctx.cached_tensor_list_size])


CHANGES = st.sampled_from(["none", "shape", "format", "address", "scalar", "value", "swap"])


@settings(max_examples=40, deadline=None)
@given(st.lists(CHANGES, min_size=1, max_size=8), st.booleans())
def test_memoised_key_is_the_fresh_key_whatever_changes_between_calls(changes, v2):
    """Between repeated keys of the same argument objects, any field torch_npu reads may change: the memo's key
    (bytes, offset, hash) and the addresses it adds are always a fresh serialisation's."""
    h = Harness()
    npu, ctx = h.npu, h.sim.process.new_thread("t")
    a, b, o = h.tensors()
    alpha = Scalar(1, "int64")
    args = [a, b, alpha, o, 7]
    made = []
    real = torch_npu.serialise
    torch_npu.serialise = lambda *a, **k: made.append(1) or real(*a, **k)
    try:
        for change in ["none", "none", *changes]:
            if change == "shape":
                a.set_shape((3, 2) if a.view_shape == (2, 3) else (2, 3))
            elif change == "format":
                b.storage_format = Format.FORMAT_NC1HWC0 if b.storage_format != Format.FORMAT_NC1HWC0 else \
                    Format.FORMAT_ND
            elif change == "address":
                o.set_storage_address(o.storage.address + 0x1000)
            elif change == "scalar":
                args[2] = alpha = Scalar(2, "int64")
            elif change == "value":
                args[4] += 1
            elif change == "swap":
                args[0], args[1] = args[1], args[0]
            ctx.cached_tensor_list_size = 0
            got = npu._key(ctx, "aclnnAdd", tuple(args), None, v2)
            want, addresses = _fresh(npu, ctx, "aclnnAdd", tuple(args), None, v2)
            assert got == want
            assert _cached_list(ctx) == addresses
    finally:
        torch_npu.serialise = real
    assert len(made) < len(changes) + 2  # the second call (unchanged) came from the memo


def test_the_reference_path_keeps_no_memo():
    assert Harness(sim_kw={"fast_path": False}).npu.key_memo is None
    assert Harness().npu.key_memo == {}


def test_a_v2_bool_array_is_never_memoised():
    """V2 copies a vector<bool> from past its heap block: new bytes every call, so no key is kept."""
    memo: dict = {}
    pta_key.keep(memo, ("api",), (BoolArray([True]),), True, (b"", 0, None))
    assert memo == {}
    pta_key.keep(memo, ("api",), (BoolArray([True]),), False, (b"", 0, 1))
    assert len(memo) == 1


def test_the_memo_is_bounded():
    memo: dict = {}
    for i in range(pta_key.MEMO_MAX + 5):
        pta_key.keep(memo, ("api", i), (i,), False, (b"", 0, i))
    assert len(memo) <= pta_key.MEMO_MAX


@pytest.mark.parametrize("queue", ["1", "2"])
def test_repeated_pta_calls_take_the_memo_and_give_the_reference_records(monkeypatch, queue):
    """The same calls on both paths: the fast path serialises each argument set once (the memo gives the
    rest), and hits, misses, statuses and every host and device record are the reference path's."""
    serialised = []
    real = torch_npu.serialise
    monkeypatch.setattr(torch_npu, "serialise", lambda *a, **k: serialised.append(1) or real(*a, **k))

    def run(fast: bool) -> tuple:
        serialised.clear()
        h = Harness(env={"TASK_QUEUE_ENABLE": queue}, sim_kw={"fast_path": fast})
        a, b, o = h.tensors()
        one, two = Scalar(1, "int64"), Scalar(2, "int64")

        def body(th, stream):
            for i in range(6):
                yield from h.call(th, stream, ADD, (a, b, two if i == 3 else one, o), "aclnnAdd")
                if i == 4:
                    a.set_shape((1, 3))
        h.run(body)
        rec = h.sim.recorder
        return (h.hits, h.statuses, rec.records("host"), rec.records("device"), h.cache_events()), len(serialised)

    fast, n_fast = run(True)
    ref, n_ref = run(False)
    assert fast == ref
    assert n_ref == 6
    assert n_fast == 3  # the first call, the other alpha, the new shape: the other three came from the memo
    assert None not in fast[0] and True in fast[0]
