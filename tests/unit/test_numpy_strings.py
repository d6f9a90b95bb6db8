"""read_batches' string values as an object array of bytes (numpy/decode._strings, made by
Arrow), from the decoder's (bytes, offsets): edge cases a data set's batches reach."""

from __future__ import annotations

import numpy as np
import pytest

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
