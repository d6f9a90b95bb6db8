"""DALI's index files (`tfspark.dali_index`, `tfspark index`): each equals what DALI's
tfrecord2idx writes for the same file (its algorithm, public, is the oracle below: walk the
records by their length fields, write "offset size" per record), for the row and block
layouts, splits, partitions, records across read chunks and on a store; only missing indexes
are written and those of files gone are removed; damaged and compressed files are refused."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest

import tfspark
from tfspark.cli.main import main
from tfspark.errors import CorruptRecordError, OptionError
from tfspark.store.dali import DIR


def tfrecord2idx(data: bytes) -> str:
    """DALI's tfrecord2idx: from each record's start, its 8-byte length, then skip its CRC,
    data and data CRC; "offset size" of the record."""
    out, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack("<q", data[pos:pos + 8])
        size = 8 + 4 + length + 4
        out.append(f"{pos} {size}\n")
        pos += size
    return "".join(out)


def table(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n)
    return pa.table({"id": pa.array(ids), "c": pa.array(["a", "b", "c"] * (n // 3) +
                                                        ["a"] * (n % 3)),
                     "x": pa.array(ids * 0.5), "y": pa.array(ids % 2)})


def check(pairs, read=lambda p: open(p, "rb").read()) -> int:
    records = 0
    for data, index in pairs:
        raw = read(data)
        text = read(index).decode()
        assert text == tfrecord2idx(raw), data
        records += text.count("\n")
    return records


@pytest.mark.parametrize("layout", [{}, {"rows_per_record": 64}, {"partition_by": ["c"]}],
                         ids=["rows", "blocks", "partitions"])
def test_each_index_is_what_tfrecord2idx_writes(tmp_path, layout, capsys):
    out = tmp_path / "ds"
    tfspark.write_dataset(table(1000), str(out), label_cols=["y"], max_records_per_file=300,
                          split={"train": 0.8, "test": 0.2}, split_key="id", **layout)
    m = tfspark.read_manifest(str(out))
    pairs = tfspark.dali_index(out)
    assert [d for d, _ in pairs] == [str(out / f.path) for f in m.files]
    assert [i for _, i in pairs] == [str(out / DIR / f"{f.path}.idx") for f in m.files]
    assert check(pairs) == m.records and len(pairs) > 2
    if "rows_per_record" in layout:
        assert main(["index", str(out)]) == 0
        assert "note: the block layout: each record DALI reads is a block of up to 64 rows" \
            in capsys.readouterr().out
    train = tfspark.dali_index(out, split="train")
    assert train == [p for p, f in zip(pairs, m.files) if f.split == "train"]
    assert tfspark.verify(str(out)).ok  # the index is no stray file


def test_records_that_cross_read_chunks(tmp_path, monkeypatch):
    import tfspark.wire.stream as stream

    monkeypatch.setattr(stream, "CHUNK_BYTES", 1000)  # records of ~3 KB: each crosses
    big = pa.table({"id": pa.array(np.arange(40)),
                    "blob": pa.array([bytes([i]) * (3000 + i) for i in range(40)], pa.binary()),
                    "y": pa.array(np.arange(40) % 2)})
    tfspark.write_dataset(big, str(tmp_path / "ds"), label_cols=["y"])
    assert check(tfspark.dali_index(tmp_path / "ds")) == 40


def test_only_missing_indexes_are_written_and_those_of_files_gone_removed(tmp_path, capsys):
    out = tmp_path / "ds"
    tfspark.write_dataset(table(300), str(out), label_cols=["y"])
    assert main(["index", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == \
        f"1 TFRecord file(s) indexed for DALI: 1 index file(s) written, under {out / DIR}"
    first = tfspark.dali_index(out)
    stamp = (out / DIR / f"{tfspark.read_manifest(str(out)).files[0].path}.idx").stat()
    tfspark.write_dataset(table(100, 300), str(out), label_cols=["y"], mode="append")
    assert main(["index", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith(
        "2 TFRecord file(s) indexed for DALI: 1 index file(s) written,")
    both = tfspark.dali_index(out)
    assert both[0] == first[0] and check(both) == 400
    assert (out / DIR / f"{tfspark.read_manifest(str(out)).files[0].path}.idx").stat() \
        .st_mtime_ns == stamp.st_mtime_ns  # not written again
    tfspark.write_dataset(table(50), str(out), label_cols=["y"], mode="overwrite")
    assert main(["index", str(out)]) == 0
    assert ", 2 of files no longer in it removed, under" in capsys.readouterr().out
    now = tfspark.dali_index(out)
    assert check(now) == 50
    assert sorted(p.name for p in (out / DIR).rglob("*.idx")) == \
        sorted(i.rsplit("/", 1)[1] for _, i in now)


def test_damaged_and_compressed_files_are_refused(tmp_path, capsys):
    out = tmp_path / "ds"
    tfspark.write_dataset(table(300), str(out), label_cols=["y"])
    f = out / tfspark.read_manifest(str(out)).files[0].path
    raw = bytearray(f.read_bytes())
    raw[500] ^= 0xFF
    f.write_bytes(bytes(raw))
    with pytest.raises(CorruptRecordError, match=rf"{f}: .*byte offset"):
        tfspark.dali_index(out)
    assert not list((out / DIR).rglob("*.idx")) if (out / DIR).exists() else True
    gz = tmp_path / "gz"
    tfspark.write_dataset(table(30), str(gz), label_cols=["y"], compression="gzip")
    with pytest.raises(OptionError, match=r"is gzip-compressed; DALI's TFRecord reader reads "
                       r"uncompressed files only: write the data set uncompressed "
                       r"\(compression=None; tfspark export --compression none\)"):
        tfspark.dali_index(gz)
    assert main(["index", str(gz)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {gz} is gzip-compressed;")


def test_on_a_store_the_pairs_are_its_uris(s3):
    import pyarrow.fs as pafs

    fs = s3.filesystem()
    path = f"{s3.bucket()}/ds"
    tfspark.write_dataset(table(500), path, filesystem=fs, label_cols=["y"],
                          max_records_per_file=200)
    pairs = tfspark.dali_index(path, filesystem=fs)
    assert len(pairs) == 3 and all(d.startswith(f"{path}/") for d, _ in pairs)

    def read(p: str) -> bytes:
        with fs.open_input_stream(p) as f:
            return f.read()

    assert check(pairs, read) == 500
    assert fs.get_file_info(pafs.FileSelector(f"{path}/{DIR}", recursive=True))


def test_written_at_export_with_dali_index(tmp_path):
    """dali_index=True: the write's index files come with it, an append's for its new files;
    a compressed write with it is refused before anything is written."""
    out = tmp_path / "ds"
    first = tfspark.write_dataset(table(600), str(out), label_cols=["y"],
                                  max_records_per_file=250, dali_index=True)
    assert first.dali_indexes == 3 and "DALI index: 3 files written" in first.summary()
    again = tfspark.write_dataset(table(100, 600), str(out), label_cols=["y"], mode="append",
                                  dali_index=True)
    pairs = tfspark.dali_index(out)  # (nothing left to write)
    assert again.dali_indexes == 1 and check(pairs) == 700 and len(pairs) == 4
    with pytest.raises(OptionError, match=r"dali_index: DALI reads uncompressed TFRecords "
                       r"only, and compression is 'gzip': drop one of them"):
        tfspark.write_dataset(table(30), str(tmp_path / "gz"), compression="gzip",
                              dali_index=True)
    assert not (tmp_path / "gz").exists()


@pytest.mark.spark
def test_written_by_write_tfrecords_with_dali_index(tmp_path, spark):
    df = spark.createDataFrame(table(300).to_pandas())
    done = tfspark.write_tfrecords(df, str(tmp_path / "spark"), label_cols=["y"],
                                   dali_index=True)
    assert done.dali_indexes >= 1
    assert check(tfspark.dali_index(tmp_path / "spark")) == 300
