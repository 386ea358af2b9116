"""Version stamps of tensors and scalars, and the argument snapshots that compare them before the fields.

A snapshot (`op_exec_cache.args_snapshot`) behind every fast-path template and key memo must say "unchanged"
exactly when the fields it covers equal the captured ones; the versions only let it say so without reading
the fields when nothing was assigned since.
"""
from __future__ import annotations

from operator import attrgetter

from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.acl import Scalar, Tensor
from opsim.acl.dtypes import DataType, Format
from opsim.acl.tensor import IntArray, Placement, Shape, Storage
from opsim.opdev.op_exec_cache import args_snapshot, args_unchanged, fields_unchanged

_KEY_FIELDS = ("view_shape", "strides", "storage_shape", "dtype", "view_offset", "view_format", "storage")


def test_every_assignment_stamps_a_new_version():
    t, s = Tensor([2, 3]), Scalar(1.0)
    seen = {t.version, s.version}
    assert len(seen) == 2
    for name in Tensor.__slots__:
        if name in ("version", "__weakref__"):
            continue
        setattr(t, name, getattr(t, name))  # the same value: still an assignment
        assert t.version not in seen
        seen.add(t.version)
    s.raw = s.raw
    assert s.version not in seen
    t.set_shape([3, 2])
    assert t.version not in seen
    t.version = 7  # a version cannot be set back: the assignment itself stamps a new one
    assert t.version != 7 and t.version not in seen


def test_matching_versions_skip_the_field_reads():
    t, u, s = Tensor([4, 4]), Tensor([4, 4], DataType.DT_FLOAT16), Scalar(2.0)
    snap = args_snapshot((t, u, s, 3))
    reads = []

    def counting(reader):
        def read(obj):
            reads.append(obj)
            return reader(obj)
        return read

    snap = snap[:3] + (tuple(map(counting, snap[3])),) + snap[4:]
    assert fields_unchanged(snap) and reads == []
    t.view_offset = 0  # assigned, equal: the fields are read once, and the versions taken as the snapshot's
    assert fields_unchanged(snap) and reads == [t, u, s]
    assert fields_unchanged(snap) and reads == [t, u, s]
    u.dtype = DataType.DT_FLOAT
    assert not fields_unchanged(snap)
    u.dtype = DataType.DT_FLOAT16
    assert fields_unchanged(snap)


def test_a_still_assignment_count_reads_nothing_and_a_moved_one_reads_versions_only(monkeypatch):
    import opsim.opdev.op_cache_key as oec
    t, s = Tensor([4, 4]), Scalar(2.0)
    snap = args_snapshot((t, s))
    read = []
    real = oec._version

    def counting(obj):
        read.append(obj)
        return real(obj)

    monkeypatch.setattr(oec, "_version", counting)
    assert fields_unchanged(snap) and read == []  # nothing assigned anywhere since the snapshot
    Tensor([1]).view_offset = 0  # another tensor's field: this snapshot's versions are read, not its fields
    assert fields_unchanged(snap) and read == [t, s]
    assert fields_unchanged(snap) and read == [t, s]  # the count it saw last is kept


def test_host_arrays_and_wider_readers_always_compare_fields():
    t, arr = Tensor([4]), IntArray([1, 2])
    assert args_snapshot((t, arr))[6] is None  # values changed in place assign nothing
    snap = args_snapshot((t, arr))
    arr.values[0] = 5
    assert not fields_unchanged(snap)
    wide = attrgetter(*_KEY_FIELDS, "storage.placement")  # a storage field: not covered by the tensor's version
    snap = args_snapshot((t,), wide)
    assert snap[6] is None
    t.storage.placement = Placement.ON_HOST
    assert not fields_unchanged(snap)


def test_unchanged_arguments_need_the_same_objects():
    t, s = Tensor([4]), Scalar(1.0)
    snap = args_snapshot((t, s, 1))
    assert args_unchanged(snap, (t, s, 1))
    assert not args_unchanged(snap, (Tensor([4]), s, 1))
    assert not args_unchanged(snap, (t, s, True))


_FIELD_VALUES = {
    "view_shape": [Shape([2, 3]), Shape([3, 2]), Shape([6])],
    "strides": [(3, 1), (1, 2), (1,)],
    "storage_shape": [Shape([2, 3]), Shape([6])],
    "dtype": [DataType.DT_FLOAT, DataType.DT_FLOAT16],
    "view_offset": [0, 1],
    "view_format": [Format.FORMAT_ND, Format.FORMAT_NCHW],
    "name": [None, "x"],
    "origin_format": [Format.FORMAT_ND, Format.FORMAT_NCHW],
}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(sorted(_FIELD_VALUES) + ["storage", "raw"]),
                          st.integers(0, 2)), max_size=12))
def test_unchanged_exactly_when_the_covered_fields_equal_the_captured_ones(ops):
    """Assignments of equal and different values, back and forth, to three arguments: the snapshot's answer
    is the fields' comparison every time (and a field outside the key, such as the name, never matters)."""
    storages = [Storage(), Storage()]
    args = (Tensor([2, 3], storage=storages[0]), Tensor([2, 3], storage=storages[0]), Scalar(1.0))
    readers = (attrgetter(*_KEY_FIELDS),) * 2 + (attrgetter("raw", "dtype"),)
    captured = [r(a) for r, a in zip(readers, args)]
    snap = args_snapshot(args)
    raws = [args[2].raw, Scalar(2.0).raw, Scalar(-0.0).raw]
    for which, field, pick in ops:
        if which == 2:
            if field == "raw":
                args[2].raw = raws[pick]
            elif field == "dtype":
                args[2].dtype = _FIELD_VALUES["dtype"][pick % 2]
            continue
        t = args[which]
        if field == "raw":
            continue
        if field == "storage":
            t.storage = storages[pick % 2]
        else:
            values = _FIELD_VALUES[field]
            setattr(t, field, values[pick % len(values)])
        expect = all(r(a) == c for r, a, c in zip(readers, args, captured))
        assert fields_unchanged(snap) == expect
    expect = all(r(a) == c for r, a, c in zip(readers, args, captured))
    assert fields_unchanged(snap) == expect
