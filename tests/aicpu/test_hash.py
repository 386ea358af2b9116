"""GenHashBinary and the op-exec-cache bucket hash: reference vectors, kernel == pure-Python reference,
batched == single."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.errors import InvalidArgumentError
from opsim.kernels.hashing import (K_HASH_SEED, MURMUR_SEED, gen_hash_binary, gen_hash_binary_batch,
                                   gen_hash_binary_many, gen_hash_binary_reference, murmur_hash3_x64_h2,
                                   murmur_hash3_x64_h2_reference)

# tid 12345 | float32/ND, float16/ND | '/' | int64 1 | float 0.5 | bool true  (aicpu-tasks.md §7.4)
KEY26 = bytes.fromhex("3930000000000000" "000201022f" "0100000000000000" "0000003f" "01")

VECTORS = [(26, 0x00158A681ECDC631), (0, 0), (1, 0x9E37B2B9), (7, 0x393000009E3779B9), (8, 0x9E37A9F2),
           (9, 0x28CD984947), (13, 0x2ACA85A647)]


def test_constants():
    assert K_HASH_SEED == 0x9E3779B9
    assert MURMUR_SEED == 0xDEADB0D7
    assert len(KEY26) == 26


@pytest.mark.parametrize("n,expected", VECTORS)
def test_gen_hash_binary_vectors(n, expected):
    key = KEY26[:n]
    assert gen_hash_binary(key) == expected
    assert gen_hash_binary(np.frombuffer(key, dtype=np.uint8)) == expected
    assert gen_hash_binary_reference(key) == expected


def test_tail_puts_first_byte_highest_and_low_byte_zero():
    # rem = 3: v = b0 << 24 | b1 << 16 | b2 << 8, mixed into seed 0.
    assert gen_hash_binary(b"\x01\x02\x03") == (0x010203 << 8) + K_HASH_SEED
    # rem = 7 with one full word before it exercises the (seed << 6) + (seed >> 2) mixing with wrap-around.
    key = b"\xff" * 15
    seed = 0xFFFFFFFFFFFFFFFF + K_HASH_SEED & 0xFFFFFFFFFFFFFFFF
    v = 0xFFFFFFFFFFFFFF << 8
    seed ^= (v + K_HASH_SEED + ((seed << 6) & 0xFFFFFFFFFFFFFFFF) + (seed >> 2)) & 0xFFFFFFFFFFFFFFFF
    assert gen_hash_binary(key) == seed


def test_result_is_an_unsigned_python_int():
    h = gen_hash_binary(b"\xff" * 64)
    assert type(h) is int and 0 <= h < 1 << 64


def test_accepts_buffers_and_non_contiguous_arrays():
    arr = np.frombuffer(KEY26, dtype=np.uint8)
    strided = np.repeat(arr, 2)[::2]
    assert not strided.flags.c_contiguous
    expected = 0x00158A681ECDC631
    assert gen_hash_binary(strided) == expected
    assert gen_hash_binary(bytearray(KEY26)) == expected
    assert gen_hash_binary(memoryview(KEY26)) == expected
    assert gen_hash_binary(arr.copy().reshape(2, 13)) == expected


def test_rejects_non_byte_keys():
    with pytest.raises(InvalidArgumentError, match="uint8"):
        gen_hash_binary(np.zeros(4, dtype=np.int32))
    with pytest.raises(InvalidArgumentError, match="bytes"):
        gen_hash_binary("abc")


def test_every_length_up_to_2100_matches_the_reference():
    data = np.random.default_rng(7).integers(0, 256, 2100, dtype=np.uint8).tobytes()
    for n in range(2101):
        assert gen_hash_binary(data[:n]) == gen_hash_binary_reference(data[:n]), n


@st.composite
def keys_of_any_length(draw, max_len=2100):
    n = draw(st.integers(0, max_len))
    return draw(st.binary(min_size=n, max_size=n))


@settings(max_examples=200, deadline=None)
@given(keys_of_any_length())
def test_kernel_equals_reference(key):
    assert gen_hash_binary(key) == gen_hash_binary_reference(key)
    assert gen_hash_binary(np.frombuffer(key, dtype=np.uint8)) == gen_hash_binary_reference(key)


@settings(max_examples=100, deadline=None)
@given(st.lists(keys_of_any_length(300), max_size=40), st.booleans())
def test_batch_equals_single(keys, parallel):
    expected = np.array([gen_hash_binary(k) for k in keys], dtype=np.uint64)
    got = gen_hash_binary_many(keys, parallel=parallel)
    assert got.dtype == np.uint64
    np.testing.assert_array_equal(got, expected)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=400), st.data())
def test_batch_with_overlapping_unordered_slices(buf_bytes, data):
    buf = np.frombuffer(buf_bytes, dtype=np.uint8)
    spans = data.draw(st.lists(st.tuples(st.integers(0, len(buf)), st.integers(0, len(buf))), max_size=20))
    offsets = np.array([min(a, b) for a, b in spans], dtype=np.int64)
    lengths = np.array([abs(a - b) for a, b in spans], dtype=np.int64)
    got = gen_hash_binary_batch(buf, offsets, lengths)
    for i, (o, n) in enumerate(zip(offsets, lengths)):
        assert int(got[i]) == gen_hash_binary(buf_bytes[o:o + n])
    np.testing.assert_array_equal(gen_hash_binary_batch(buf, offsets, lengths, parallel=True), got)


def test_batch_validation():
    buf = np.zeros(16, dtype=np.uint8)
    assert gen_hash_binary_batch(buf, np.zeros(0, np.int64), np.zeros(0, np.int64)).shape == (0,)
    assert gen_hash_binary_many([]).shape == (0,)
    with pytest.raises(InvalidArgumentError, match="inside buf"):
        gen_hash_binary_batch(buf, np.array([10]), np.array([7]))
    with pytest.raises(InvalidArgumentError, match="inside buf"):
        gen_hash_binary_batch(buf, np.array([-1]), np.array([1]))
    with pytest.raises(InvalidArgumentError, match="same length"):
        gen_hash_binary_batch(buf, np.array([0, 1]), np.array([1]))
    with pytest.raises(InvalidArgumentError, match="uint8"):
        gen_hash_binary_batch(buf.view(np.uint16), np.array([0]), np.array([1]))


def test_murmur_vectors():
    assert murmur_hash3_x64_h2(b"aclnnAdd") == 0xAC39F8D16958C1ED
    assert murmur_hash3_x64_h2(b"") == 0x8D946281F51D038F
    assert murmur_hash3_x64_h2_reference(b"aclnnAdd") == 0xAC39F8D16958C1ED
    assert murmur_hash3_x64_h2_reference(b"") == 0x8D946281F51D038F
    assert murmur_hash3_x64_h2(np.frombuffer(b"aclnnAdd", dtype=np.uint8)) == 0xAC39F8D16958C1ED


def test_murmur_seed():
    assert murmur_hash3_x64_h2(b"aclnnAdd", 0) != murmur_hash3_x64_h2(b"aclnnAdd")
    assert murmur_hash3_x64_h2(b"abc", 0xFFFFFFFF) == murmur_hash3_x64_h2_reference(b"abc", 0xFFFFFFFF)
    with pytest.raises(InvalidArgumentError, match="32 bits"):
        murmur_hash3_x64_h2(b"abc", 1 << 32)


def test_murmur_every_tail_length_matches_the_reference():
    data = np.random.default_rng(3).integers(0, 256, 600, dtype=np.uint8).tobytes()
    for n in range(600):
        assert murmur_hash3_x64_h2(data[:n]) == murmur_hash3_x64_h2_reference(data[:n]), n


@settings(max_examples=150, deadline=None)
@given(keys_of_any_length(), st.integers(0, 0xFFFFFFFF))
def test_murmur_kernel_equals_reference(key, seed):
    assert murmur_hash3_x64_h2(key, seed) == murmur_hash3_x64_h2_reference(key, seed)
