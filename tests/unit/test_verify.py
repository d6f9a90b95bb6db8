"""`tfspark verify`: a clean data set passes; each kind of damage is reported with its file."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from pyspark.sql import types as T

import tfspark
from tfspark.arrow.encode import encode_records
from tfspark.cli.main import main
from tfspark.store import manifest as mf
from tfspark.store.fs import locate
from tfspark.wire.stream import RecordWriter


@pytest.fixture(params=[None, "gzip"])
def dataset(request, tmp_path):
    """A 3-file data set written with the library's own pieces (no Spark needed)."""
    compression = request.param
    schema = T.StructType([T.StructField("id", T.LongType()),
                           T.StructField("tags", T.ArrayType(T.StringType()))])
    spec = tfspark.infer_spec(schema)
    out = tmp_path / "ds"
    out.mkdir()
    m = mf.Manifest(spec=spec, compression=compression)
    files = []
    for k in range(3):
        batch = pa.RecordBatch.from_pylist(
            [{"id": k * 100 + i, "tags": ["a"] * (i % 3)} for i in range(50)],
            schema=pa.schema([("id", pa.int64()), ("tags", pa.list_(pa.string()))]))
        buf, offsets = encode_records(batch, spec, framed=True)
        name = f"part-{k:05d}.tfrecord" + (".gz" if compression else "")
        with open(out / name, "wb") as f, RecordWriter(f, compression=compression) as w:
            w.write_framed(buf, count=len(offsets) - 1)
            written = w.bytes_written
        files.append({"path": name, "records": 50, "bytes": written, "split": None,
                      "partition": {}, "write_id": "w1"})
    mf.write_manifest(locate(str(out)), m.with_files([mf.FileEntry(**e) for e in files], "w1"))
    return out, compression


def run(path, capsys):
    code = main(["verify", str(path)])
    return code, capsys.readouterr().out


def test_clean_data_set_passes(dataset, capsys):
    out, _ = dataset
    code, text = run(out, capsys)
    assert code == 0, text
    assert "files 3" in text and "records 150" in text and "OK" in text


def test_flipped_byte_is_reported_with_file_and_offset(dataset, capsys):
    out, compression = dataset
    target = out / sorted(os.listdir(out))[-1]
    raw = bytearray(target.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    target.write_bytes(bytes(raw))
    code, text = run(out, capsys)
    assert code == 1
    assert target.name in text
    if compression is None:
        assert "offset" in text


def test_truncated_file(dataset, capsys):
    out, _ = dataset
    target = out / sorted(os.listdir(out))[-1]
    target.write_bytes(target.read_bytes()[:-7])
    code, text = run(out, capsys)
    assert code == 1 and target.name in text


def test_missing_and_extra_files(dataset, capsys):
    out, _ = dataset
    names = sorted(n for n in os.listdir(out) if n.startswith("part-"))
    os.rename(out / names[0], out / ("part-99999-stray" + names[0][len("part-00000"):]))
    code, text = run(out, capsys)
    assert code == 1
    assert f"{names[0]}: missing" in text
    assert "extra data file" in text and "part-99999-stray" in text


def test_count_mismatch_and_no_manifest(dataset, capsys, tmp_path):
    out, _ = dataset
    doc = json.loads((out / mf.NAME).read_text())
    doc["files"][1]["records"] = 49
    (out / mf.NAME).write_text(json.dumps(doc))
    code, text = run(out, capsys)
    assert code == 1 and "manifest says 49" in text
    empty = tmp_path / "nothing"
    empty.mkdir()
    with pytest.raises(mf.ManifestError, match="no _tfspark.json in"):  # nothing to verify
        tfspark.verify(str(empty))


@pytest.mark.parametrize("key", ["records", "bytes"])
def test_an_edited_total_is_found_by_verify(dataset, capsys, key):
    """The manifest's totals are its files' sums; other tools read them, so one edited by
    hand is a problem (exit 1)."""
    out, _ = dataset
    doc = json.loads((out / mf.NAME).read_text())
    doc[key] += 7
    (out / mf.NAME).write_text(json.dumps(doc))
    code, text = run(out, capsys)
    assert code == 1 and f"its total '{key}' is {doc[key]} but its files' entries add up " \
        f"to {doc[key] - 7:,}" in text, text


def test_a_file_the_filesystem_refuses_is_an_access_error_not_damage(dataset, capsys):
    """A filesystem that will not open a data file (an fsspec one of the user's here; a store's
    403 reads the same) is an access error naming the file, never 'corrupt' data."""
    from fsspec.implementations.local import LocalFileSystem

    class Refusing(LocalFileSystem):
        def _open(self, path, mode="rb", **kw):
            if ".tfrecord" in str(path):
                raise PermissionError(13, "Permission denied", str(path))
            return super()._open(path, mode, **kw)

    out, _ = dataset
    with pytest.raises(tfspark.AccessError, match=r"part-0000\d\.tfrecord(\.gz)?: access denied .*"
                                                   r"check the file's permissions") as refused:
        list(tfspark.read_batches(str(out), 10, filesystem=Refusing()))
    assert not isinstance(refused.value, tfspark.CorruptRecordError)
    assert isinstance(refused.value, PermissionError)  # what a caller catches
    report = tfspark.verify(str(out), filesystem=Refusing())
    assert len(report.problems) == 3, report.render()
    assert all("access denied" in p and "corrupt" not in p.lower() and "CRC" not in p
               for p in report.problems), report.render()
