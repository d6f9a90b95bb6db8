"""Serialized tf.train.Example -> Arrow columns, whole buffers at a time: the mirror of
arrow.encode, for the Spark reader and `verify`. No protobuf objects, no TensorFlow.

decode_records(buf, offsets, spec) finds every record's Feature for each spec key once
(wire.example_index: any key order, unknown keys skipped), then reads each key's values with
a count pass and a fill pass (int64 lists: one pass; wire.example_read) into one canonical
Arrow column per feature.
The one-record pure-Python decoder is wire.example_py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from tfspark.errors import CorruptRecordError, SchemaError
from tfspark.spec.model import Feature, FeatureSpec
from tfspark.wire import example_read
from tfspark.wire.example_index import index_records, key_table
from tfspark.wire.protobuf import (
    FEATURE_LISTS,
    INEXACT,
    INT,
    KIND_NAMES,
    KIND_OF_DTYPE,
    TOO_MANY,
    WRONG_TYPE,
)
from tfspark.wire.sequence_index import count_steps, index_lists, index_steps, list_index
from tfspark.wire.tfrecord import (
    HEADER_BYTES,
    TRAILER_BYTES,
    as_bytes,
    checked_offsets,
    gather_records,
)
from tfspark.wire.words import SLACK

__all__ = ["Decoder", "ScalarsRead", "decode_records", "records_column"]
SEQUENCE_EXAMPLE = ("the record is a tf.train.SequenceExample (it has feature_lists), not a "
                    "tf.train.Example: read it with recordType=SequenceExample (record_type="
                    "'SequenceExample')")


def decode_records(buf: np.ndarray, offsets: np.ndarray, spec: FeatureSpec, *,
                   framed: bool = False, path: str | None = None,
                   offset: int = 0) -> pa.RecordBatch:
    """One Arrow column per spec feature for the n records buf[offsets[i]:offsets[i+1]].

    framed=True: the offsets delimit framed records (what frame_offsets returns) and the framing
    bytes around each are skipped. Columns come in canonical form: fixed scalars are
    int64 / float32 / large_binary with nulls where the feature is absent (or empty); fixed [n]
    and varlen features are lists; ragged features lists of lists. path and offset (where buf
    starts in the file) go into error messages.
    """
    return Decoder(spec).decode(buf, offsets, framed=framed, path=path, offset=offset)


def records_column(buf: np.ndarray, offsets: np.ndarray, *, framed: bool = True) -> pa.Array:
    """The records themselves as one large_binary column (recordType ByteArray)."""
    data = as_bytes(buf)
    head, tail = (HEADER_BYTES, TRAILER_BYTES) if framed else (0, 0)
    off = checked_offsets(offsets, data.size, head + tail, "record")
    n = off.size - 1
    out = np.empty(int(off[-1] - off[0]) - (head + tail) * n, np.uint8)
    out_offsets = np.empty(n + 1, np.int64)
    gather_records(data, off, head, tail, out, out_offsets)
    return pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(out_offsets),
                                                        pa.py_buffer(out)])


@dataclass
class ScalarsRead:
    """A buffer's scalar features (fixed, no shape), read while the records are indexed: of
    int64 and float32 features the one packed value every writer makes into values[dtype]
    (features, records), of string features the byte range of their one string into
    values["string"] (features, 2 x records), each with valid[dtype]. What indexing left is
    read when a column is first asked for: numbers by example_read.scalars_many
    (RecordIndex.scalar), strings by the general path (RecordIndex.values)."""

    features: dict[str, list[Feature]]  # by dtype, in spec order
    keys: dict[str, np.ndarray]  # their key indexes
    rows: dict[str, np.ndarray]  # per key: its row in values[dtype], -1 for other keys
    values: dict[str, np.ndarray]
    valid: dict[str, np.ndarray]
    done: set[str] = field(default_factory=set)  # dtypes read whole (scalars_many ran)
    # The string features' bytes, copied while indexing: string_bytes[j, :string_fill[j]]
    # (-1: not one string per record in order, see index_records)
    string_bytes: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.uint8))
    string_fill: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @classmethod
    def plan(cls, spec: FeatureSpec, keys: int) -> ScalarsRead:
        """The scalar features of spec (its `keys` keys), for no records yet."""
        features: dict[str, list[Feature]] = {d: [] for d in _NUMPY}
        at: dict[str, list[int]] = {d: [] for d in _NUMPY}
        k = 0
        for f in spec.features:
            if f.kind == "sequence":
                continue
            if f.kind == "fixed" and not f.shape:
                features[f.dtype].append(f)
                at[f.dtype].append(k)
            k += len(f.keys)
        rows = {}
        for dtype, ks in at.items():
            rows[dtype] = np.full(keys, -1, np.int64)
            rows[dtype][ks] = np.arange(len(ks))
        return cls(features, {d: np.array(ks, np.int64) for d, ks in at.items()}, rows,
                   {d: np.zeros((len(fs), 0), _NUMPY[d]) for d, fs in features.items()},
                   {d: np.zeros((len(fs), 0), np.bool_) for d, fs in features.items()})

    def sized(self, n: int, nbytes: int) -> ScalarsRead:
        """The same features, with room for n records of nbytes in all. Each string feature's
        bytes get room for STRING_ROOM bytes a record, or a share of twice the records' bytes
        where that is less (past it, they are gathered after indexing)."""
        strings = len(self.features["string"])
        room = min(STRING_ROOM * n, 2 * nbytes // max(strings, 1))
        return ScalarsRead(self.features, self.keys, self.rows,
                           {d: np.empty((len(fs), 2 * n if d == "string" else n), _NUMPY[d])
                            for d, fs in self.features.items()},
                           {d: np.zeros((len(fs), n), np.bool_)
                            for d, fs in self.features.items()},
                           string_bytes=np.empty((strings, room + SLACK), np.uint8),
                           string_fill=np.zeros(strings, np.int64))


STRING_ROOM = 64  # bytes per record and string feature copied while indexing


_NUMPY = {"int64": np.int64, "float32": np.float32, "string": np.int64}  # strings: spans


class Decoder:
    """The key table of a spec, built once and reused for every buffer."""

    def __init__(self, spec: FeatureSpec):
        self.spec = spec
        # A SequenceExample's context keys here, its feature-list keys in lists.
        self.keys = [k for f in spec.features if f.kind != "sequence" for k in f.keys]
        self.lists = [f.name for f in spec.features if f.kind == "sequence"]
        self._key_data, self._key_offsets, self._table = key_table(self.keys)
        self._list_table = key_table(self.lists)
        self._scalars = ScalarsRead.plan(spec, len(self.keys))

    def decode(self, buf: np.ndarray, offsets: np.ndarray, *, framed: bool = False,
               path: str | None = None, offset: int = 0,
               strict: str | None = None) -> pa.RecordBatch:
        """The records buf[offsets[i]:offsets[i+1]] as a RecordBatch with one column per feature.

        framed: each record still has its TFRecord framing (header before, trailer after). path and
        offset only name the place in error messages. strict: a key not in the spec is an
        error, whose message ends with this advice (keys are otherwise skipped, as a narrower
        schema asks). Raises CorruptRecordError for a malformed record, SchemaError when a
        record does not fit the spec (wrong type, too many values, a key outside it if strict).
        """
        ctx = self.index(buf, offsets, framed=framed, path=path, offset=offset, strict=strict)
        arrays = []
        k = j = 0
        for f in self.spec.features:
            if f.kind == "sequence":
                arrays.append(_sequence_column(ctx, f, j))
                j += 1
            else:
                arrays.append(_feature_column(ctx, f, k))
                k += len(f.keys)
        return pa.RecordBatch.from_arrays(arrays, names=self.spec.names)

    def index(self, buf: np.ndarray, offsets: np.ndarray, *, framed: bool = False,
              path: str | None = None, offset: int = 0, strict: str | None = None
              ) -> RecordIndex:
        """Where each spec key's list sits in each record (the first half of decode), checked
        for damage, with the scalar numbers read on the way; other readers build their own
        columns from it (tfspark.numpy)."""
        data = as_bytes(buf)
        head, tail = (HEADER_BYTES, TRAILER_BYTES) if framed else (0, 0)
        off = checked_offsets(offsets, data.size, head + tail, "record")
        n = off.size - 1
        kinds = np.full((n, len(self.keys)), -1, np.int8)
        # (left unset where a record has no such key: every reader of them checks kinds first,
        # and zeroing them cost a tenth of the indexing)
        starts = np.empty((n, len(self.keys)), np.int64)
        ends = np.empty((n, len(self.keys)), np.int64)
        unknown = np.full(3, -1, np.int64)
        sequence = self.spec.is_sequence
        read = self._scalars.sized(n, int(off[-1] - off[0]))
        code, rec, pos = index_records(data, off, head, tail, self._key_data,
                                       self._key_offsets, self._table, kinds, starts, ends,
                                       unknown, sequence, read.rows["int64"],
                                       read.values["int64"], read.valid["int64"],
                                       read.rows["float32"],
                                       read.values["float32"].view(np.uint32),
                                       read.valid["float32"], read.rows["string"],
                                       read.values["string"], read.valid["string"],
                                       read.string_bytes, read.string_fill)
        ctx = RecordIndex(data, off, (kinds, starts, ends), path or "<buffer>", offset)
        ctx.scalars = read
        what = "tf.train.SequenceExample" if sequence else "tf.train.Example"
        if code == FEATURE_LISTS:
            raise ctx.error(rec, SEQUENCE_EXAMPLE, schema=True)
        if code == 0 and sequence:
            ctx.lists = list_index(n, len(self.lists))
            code, rec, pos = index_lists(data, off, head, tail, *self._list_table, *ctx.lists,
                                         unknown)
        if code:
            raise ctx.error(rec, f"malformed {what} (at byte {pos - off[rec] - head} "
                                 f"of the record's data)")
        if strict is not None and unknown[0] >= 0:
            key = data[unknown[1]:unknown[2]].tobytes().decode("utf-8", "replace")
            raise ctx.error(int(unknown[0]), f"feature {key!r} is not in the schema; {strict}",
                            schema=True)
        return ctx


class RecordIndex:
    """One buffer's index (kinds, starts, ends per record and key) and its error messages."""

    def __init__(self, data: np.ndarray, offsets: np.ndarray,
                 index: tuple[np.ndarray, np.ndarray, np.ndarray], path: str, offset: int,
                 row_steps: np.ndarray | None = None):
        # A fixed-length tuple, so a type checker can match `*self.index` to kernel parameters.
        self.data, self.offsets, self.index = data, offsets, index
        self.path, self.offset = path, offset
        self.n = index[0].shape[0]
        # The steps of feature lists are indexed as records: record i's steps are
        # row_steps[i]..row_steps[i + 1], what an error maps a step back with.
        self.row_steps = row_steps
        self.lists: tuple[np.ndarray, np.ndarray] | None = None  # sequence_index.index_lists
        self.scalars: ScalarsRead | None = None  # read while indexing (Decoder.index)

    def error(self, rec: int, what: str, schema: bool = False) -> Exception:
        """A CorruptRecordError, or a SchemaError when the record is fine but the spec is not."""
        if self.row_steps is not None:  # a step: name its record
            rec = int(np.searchsorted(self.row_steps, rec, side="right")) - 1
        at = self.offset + int(self.offsets[rec])
        msg = f"{self.path}: {what} (record at byte offset {at})"
        return SchemaError(msg) if schema else CorruptRecordError(msg, path=self.path, offset=at)

    def check(self, code: int, rec: int, info: int, f: Feature, key: str, dtype: str) -> None:
        """Raise for a kernel's error code (wrong type, too many values, malformed list)."""
        if code == WRONG_TYPE:
            raise self.error(rec, f"feature {f.name!r} (key {key!r}) holds a "
                                  f"{KIND_NAMES[info]} list but the spec says {dtype}; "
                                  f"read it with a schema that gives this column a "
                                  f"{KIND_NAMES[info]} type", schema=True)
        if code == INEXACT:
            raise self.error(rec, f"feature {f.name!r} (key {key!r}) holds the int64 value "
                                  f"{info}, which float32 cannot hold exactly, but the spec "
                                  f"says {dtype}; read it with the spec it was written with "
                                  f"(int64)", schema=True)
        if code == TOO_MANY:
            raise self.error(rec, f"feature {f.name!r} has {info} values where the spec (or "
                                  f"schema) has a scalar; read it as an array column",
                             schema=True)
        if code:
            raise self.error(rec, f"malformed {dtype} list of feature {f.name!r}")

    def steps(self, f: Feature, j: int):
        """(steps per record, -1 when absent; step offsets n+1; value offsets per step S+1;
        values) of feature list j of SequenceExample records."""
        assert self.lists is not None
        counts = np.empty(self.n, np.int64)
        code, rec, _ = count_steps(self.data, *self.lists, j, counts)
        if code:
            raise self.error(rec, f"malformed feature list {f.name!r}")
        row_steps = np.zeros(self.n + 1, np.int64)
        np.cumsum(np.maximum(counts, 0), out=row_steps[1:])
        total = int(row_steps[-1])
        index = (np.full((total, 1), -1, np.int8), np.zeros((total, 1), np.int64),
                 np.zeros((total, 1), np.int64))
        code, rec, _ = index_steps(self.data, *self.lists, j, row_steps, *index)
        if code:
            raise self.error(rec, f"malformed step of feature list {f.name!r}")
        steps = RecordIndex(self.data, self.offsets, index, self.path, self.offset, row_steps)
        _, rows, values = steps.values(f, f.name, 0, f.dtype)
        return counts, row_steps, rows, values

    def scalar(self, f: Feature) -> tuple[np.ndarray, np.ndarray]:
        """(values, whether each record holds exactly one) of a fixed scalar int64 / float32
        feature; the first call for a dtype reads what indexing left of all of its features
        (checked: a wrong type, too many values, a malformed list)."""
        read = self.scalars
        assert read is not None, "a RecordIndex made by Decoder.index"
        values, valid = read.values[f.dtype], read.valid[f.dtype]
        if f.dtype not in read.done:
            if not valid.all():  # (where indexing read them all, nothing is left to read)
                feats = read.features[f.dtype]
                code, rec, info, j = example_read.scalars_many(
                    self.data, *self.index, read.keys[f.dtype], KIND_OF_DTYPE[f.dtype],
                    values, values.view(np.uint8), valid)
                if code:
                    self.check(code, rec, info, feats[j], feats[j].name, f.dtype)
            read.done.add(f.dtype)
        row = read.features[f.dtype].index(f)
        return values[row], valid[row]

    def _indexed_strings(self, f: Feature, key: str):
        """values() of a fixed string scalar from what indexing found (its strings' byte
        ranges, their bytes mostly copied already), where every record holds its one string
        there; None where not (another feature, or any other record: the general path)."""
        read = self.scalars
        if read is None or key != f.name or f not in read.features["string"]:
            return None  # (a block record's strings are lists: not read while indexing)
        row = read.features["string"].index(f)
        if not read.valid["string"][row].all():
            return None
        spans = read.values["string"][row].reshape(-1, 2)
        rows = np.arange(self.n + 1, dtype=np.int64)
        offsets = np.zeros(self.n + 1, np.int64)
        np.cumsum(spans[:, 1] - spans[:, 0], out=offsets[1:])
        filled = int(read.string_fill[row])
        if filled == offsets[-1]:  # copied while indexing (a copy of its own: the room is
            blob = read.string_bytes[row, :filled].copy()  # larger)
        else:
            blob = np.empty(int(offsets[-1]), np.uint8)
            example_read.gather_spans(self.data, spans, blob)
        return np.ones(self.n, np.int64), rows, (blob, offsets)

    def values(self, f: Feature, key: str, k: int, dtype: str):
        """(counts per record, -1 when absent; element offsets n+1; values) of key k."""
        if dtype == "string" and (indexed := self._indexed_strings(f, key)) is not None:
            return indexed
        counts = np.empty(self.n, np.int64)
        if dtype == "int64":  # counted and filled in one pass, into room for the most values
            kinds, starts, ends = self.index
            room = int(np.where(kinds[:, k] == INT, ends[:, k] - starts[:, k], 0).sum())
            rows = np.empty(self.n + 1, np.int64)
            out = np.empty(room, np.int64)
            code, rec, info = example_read.read_ints(self.data, *self.index, k, counts, rows,
                                                     out)
            self.check(code, rec, info, f, key, dtype)
            out.resize(int(rows[-1]), refcheck=False)  # shrunk where it lies (realloc)
            return counts, rows, out
        code, rec, info, nbytes = example_read.count_values(self.data, *self.index, k,
                                                            KIND_OF_DTYPE[dtype], counts)
        self.check(code, rec, info, f, key, dtype)
        rows = np.zeros(self.n + 1, np.int64)
        np.cumsum(np.maximum(counts, 0), out=rows[1:])
        total = int(rows[-1])
        if dtype == "float32":
            out = np.empty(total, np.float32)
            code, rec, info = example_read.fill_floats(self.data, *self.index, k, rows, out,
                                                       out.view(np.uint8))
            self.check(code, rec, info, f, key, dtype)
            return counts, rows, out
        blob = np.empty(nbytes + SLACK, np.uint8)  # (fill_bytes copies by words)
        blob_offsets = np.empty(total + 1, np.int64)
        example_read.fill_bytes(self.data, *self.index, k, rows, blob, blob_offsets)
        return counts, rows, (blob[:nbytes], blob_offsets)


def _sequence_column(ctx: RecordIndex, f: Feature, j: int) -> pa.Array:
    """Feature list j of a SequenceExample as a list (steps) of lists (values); null where a
    record has no such list."""
    counts, row_steps, rows, values = ctx.steps(f, j)
    inner = list_array(rows, _leaf(f.dtype, values, rows[-1]), None)
    return list_array(row_steps, inner, counts < 0)


def _feature_column(ctx: RecordIndex, f: Feature, k: int) -> pa.Array:
    if f.kind == "ragged":
        counts, rows, values = ctx.values(f, f.keys[0], k, f.dtype)
        lcounts, lrows, lengths = ctx.values(f, f.keys[1], k + 1, "int64")
        present = (counts >= 0) | (lcounts >= 0)
        inner_offsets = np.zeros(lengths.size + 1, np.int64)
        np.cumsum(lengths, out=inner_offsets[1:])
        sums = inner_offsets[lrows[1:]] - inner_offsets[lrows[:-1]]
        bad = (sums != np.diff(rows)) | _any_negative(lengths, lrows)
        if bad.any():
            rec = int(np.argmax(bad))
            raise ctx.error(rec, f"ragged feature {f.name!r}: row lengths add up to "
                                 f"{int(sums[rec])} but there are {int(np.diff(rows)[rec])} "
                                 f"values")
        inner = list_array(inner_offsets, _leaf(f.dtype, values, inner_offsets[-1]), None)
        return list_array(lrows, inner, ~present)
    if f.kind == "fixed" and not f.shape and f.dtype != "string":
        out, valid = ctx.scalar(f)
        if valid.all():
            return pa.array(out)
        out[~valid] = 0  # (what a null holds beneath)
        mask = pa.py_buffer(np.packbits(valid, bitorder="little"))
        return pa.Array.from_buffers(pa.from_numpy_dtype(out.dtype), ctx.n,
                                     [mask, pa.py_buffer(out)])
    counts, rows, values = ctx.values(f, f.name, k, f.dtype)
    present = counts >= 0
    if f.kind == "fixed" and not f.shape:
        if (counts > 1).any():
            rec = int(np.argmax(counts > 1))
            ctx.check(TOO_MANY, rec, int(counts[rec]), f, f.name, f.dtype)
        return _strings(counts == 1, rows, values)
    if f.kind == "fixed":
        bad = present & (counts != f.shape[0])
        if bad.any():
            rec = int(np.argmax(bad))
            raise ctx.error(rec, f"feature {f.name!r} has {int(counts[rec])} values but the spec "
                                 f"fixes its shape to {list(f.shape)}", schema=True)
    return list_array(rows, _leaf(f.dtype, values, rows[-1]), ~present)


def _any_negative(lengths: np.ndarray, rows: np.ndarray) -> np.ndarray:
    neg = np.zeros(rows.size - 1, bool)
    if (lengths < 0).any():
        owner = np.repeat(np.arange(rows.size - 1), np.diff(rows))
        neg[owner[lengths < 0]] = True
    return neg


def _leaf(dtype: str, values, total: int) -> pa.Array:
    if dtype == "string":
        blob, blob_offsets = values
        return pa.Array.from_buffers(pa.large_binary(), int(total),
                                     [None, pa.py_buffer(blob_offsets), pa.py_buffer(blob)])
    return pa.array(values)


def _strings(valid: np.ndarray, rows: np.ndarray, values) -> pa.Array:
    """Scalar strings: each row holds 0 or 1 value, so row i's bytes are value rows[i]'s."""
    blob, blob_offsets = values
    mask = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    row_offsets = np.ascontiguousarray(blob_offsets[rows])
    return pa.Array.from_buffers(pa.large_binary(), valid.size,
                                 [mask, pa.py_buffer(row_offsets), pa.py_buffer(blob)])


def list_array(offsets: np.ndarray, values: pa.Array, null: np.ndarray | None) -> pa.Array:
    """A list column of `values` cut at `offsets`, null where `null` says (large offsets when
    the values need them)."""
    mask = None if null is None or not null.any() else pa.array(null)
    if offsets[-1] < 2**31:
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values, mask=mask)
    return pa.LargeListArray.from_arrays(pa.array(offsets), values, mask=mask)
