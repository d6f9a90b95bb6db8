"""Interop with TensorFlow's own TFRecord writer and reader, both ways, plain and GZIP."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

from tfspark.errors import CorruptRecordError  # noqa: E402
from tfspark.wire.stream import RecordWriter, read_records  # noqa: E402
from tfspark.wire.tfrecord import frame_buffer, frame_record  # noqa: E402

pytestmark = pytest.mark.tf

TF_COMPRESSION = {None: "", "gzip": "GZIP"}


def _records(n: int = 120, seed: int = 0) -> list[bytes]:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 2000, n)
    sizes[::10] = 0
    return [rng.integers(0, 256, s, dtype=np.uint8).tobytes() for s in sizes]


def _tf_read(path, compression) -> list[bytes]:
    ds = tf.data.TFRecordDataset(str(path), compression_type=TF_COMPRESSION[compression])
    return [t.numpy() for t in ds]


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_read_files_written_by_tensorflow(tmp_path, compression):
    records = _records()
    path = tmp_path / "tf.tfrecord"
    options = tf.io.TFRecordOptions(compression_type=TF_COMPRESSION[compression])
    with tf.io.TFRecordWriter(str(path), options=options) as w:
        for r in records:
            w.write(r)
    assert list(read_records(path, compression=compression)) == records


@pytest.mark.parametrize("compression", [None, "gzip"])
@pytest.mark.parametrize("how", ["write", "write_framed"])
def test_tensorflow_reads_files_we_write(tmp_path, compression, how):
    records = _records(seed=1)
    path = tmp_path / "ours.tfrecord"
    with open(path, "wb") as f, RecordWriter(f, compression=compression) as w:
        if how == "write":
            for r in records:
                w.write(r)
        else:
            buf = np.frombuffer(b"".join(records), dtype=np.uint8)
            offsets = np.concatenate([[0], np.cumsum([len(r) for r in records])])
            half = len(records) // 2  # two batches, as a task writing its partition would
            w.write_framed(frame_buffer(buf, offsets[: half + 1]))
            w.write_framed(frame_buffer(buf, offsets[half:]))
    assert w.records == len(records)
    assert _tf_read(path, compression) == records


def test_both_readers_reject_a_flipped_data_byte(tmp_path):
    records = [b"alpha" * 10, b"beta" * 20, b"gamma" * 5]
    data = bytearray(b"".join(map(frame_record, records)))
    second = 16 + len(records[0])
    data[second + 12 + 7] ^= 0x01
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(bytes(data))
    with pytest.raises(tf.errors.DataLossError):
        _tf_read(path, None)
    with pytest.raises(CorruptRecordError, match=f"byte offset {second}") as info:
        list(read_records(path))
    assert info.value.offset == second
