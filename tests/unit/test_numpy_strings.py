"""read_batches' string values as an object array of bytes (made by Arrow, one object per
distinct value of a categorical column), from the decoder's (bytes, offsets): edge cases a
data set's batches reach."""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from tfspark.arrow.hashing import distinct_strings
from tfspark.numpy.decode import _strings


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_values_from_offsets_of_either_width_and_not_from_zero(dtype):
    blob = np.frombuffer(b"xxabc\x00def", np.uint8)
    got = _strings((blob, np.array([2, 5, 5, 6, 9], dtype)))  # an empty and a NUL value too
    assert got.dtype == object and got.tolist() == [b"abc", b"", b"\x00", b"def"]
    assert all(type(v) is bytes for v in got)


def test_no_values_and_a_view_of_a_larger_buffer():
    assert _strings((np.frombuffer(b"", np.uint8), np.array([0]))).tolist() == []
    whole = np.frombuffer(b"--hello--world", np.uint8)
    assert _strings((whole[2::1], np.array([0, 5, 7, 12]))).tolist() == [b"hello", b"--",
                                                                          b"world"]


def test_the_values_are_copies_not_views_of_the_decoder_buffer():
    blob = np.frombuffer(bytearray(b"abcdef"), np.uint8)
    got = _strings((blob, np.array([0, 3, 6])))
    blob[:] = ord("z")  # the reader reuses its buffers for the next chunk
    assert got.tolist() == [b"abc", b"def"]


def _parts(values: list[bytes], dtype=np.int64, pad: bytes = b"") -> tuple[np.ndarray, np.ndarray]:
    """(bytes, offsets) of values, starting after `pad`."""
    blob = np.frombuffer(pad + b"".join(values), np.uint8)
    offs = np.cumsum([len(pad)] + [len(v) for v in values]).astype(dtype)
    return blob, offs


def _shared(got: np.ndarray) -> bool:
    """Whether equal values are one object."""
    first: dict[bytes, object] = {}
    return all(first.setdefault(v, v) is v for v in got)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_a_categorical_column_shares_one_object_per_distinct_value(dtype):
    # heads alike: a value and its NUL-padded twin have the same first 8 bytes but not the same
    # length; long values differ only past their 8th byte; the last values end the buffer
    words = [b"", b"a", b"abc", b"abc\x00", b"12345678", b"12345678x", b"12345678y",
             b"a much longer category 1", b"a much longer category 2", b"\xff" * 9]
    rng = np.random.default_rng(1)
    values = [words[i] for i in rng.integers(0, len(words), 5000)] + [b"abc", b"abc\x00"]
    got = _strings(_parts(values, dtype, pad=b"pad"))
    assert got.tolist() == values and all(type(v) is bytes for v in got)
    assert _shared(got)


@pytest.mark.parametrize("family", [
    [b"\x00" * k for k in range(30)],  # one head (all NUL), 30 lengths
    [b"category" + bytes([k]) for k in range(30)],  # one head and length, past the 8th byte
    [b"category" + bytes([k]) * 9 for k in range(30)],
])
def test_values_alike_in_their_first_8_bytes_are_told_apart(family):
    # 30 such values in the table's first 64 slots: some probe meets another of them
    rng = np.random.default_rng(3)
    values = [family[i] for i in rng.integers(0, len(family), 3000)]
    codes, firsts, m = distinct_strings(*_parts(values), 375)
    assert m == len(set(values)) and [values[firsts[c]] for c in codes] == values
    assert _strings(_parts(values)).tolist() == values


def test_many_categories_share_objects_past_the_table_doubling():
    rng = np.random.default_rng(2)
    values = [b"category %d" % i for i in rng.integers(0, 3000, 30000)]
    got = _strings(_parts(values))
    assert got.tolist() == values and _shared(got)
    assert len({id(v) for v in got}) == 3000


@pytest.mark.parametrize("values", [
    [b"v%d" % i for i in range(5000)],  # every value its own: given up in the first 2,048
    [b"v%d" % (i % 1000) for i in range(5000)],  # one in 5 distinct: more than one in 8
    [b"long text %d " % (i % 8) * 4 for i in range(5000)],  # long: not looked for
    [b"xx", b"yy"] * 20,  # too few to look for
])
def test_columns_of_mostly_distinct_long_or_few_values_are_one_object_per_value(values):
    got = _strings(_parts(values))
    assert got.tolist() == values
    assert len({id(v) for v in got}) == len(values)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=12), min_size=1, max_size=12),
       st.lists(st.integers(0, 11), min_size=64, max_size=3000))
def test_distinct_strings_numbers_each_value_by_its_first_occurrence(pool, picks):
    values = [pool[i % len(pool)] for i in picks]
    blob, offs = _parts(values)
    for cap in (len(values) // 8, len(set(values)), len(set(values)) - 1):
        codes, firsts, m = distinct_strings(blob, offs, cap)
        if len(set(values)) > cap:
            assert m == -1
            continue
        first = list(dict.fromkeys(values))  # distinct values in order of first occurrence
        assert m == len(first)
        assert [values[j] for j in firsts[:m]] == first
        assert [first[c] for c in codes] == values
