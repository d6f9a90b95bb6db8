"""`tfspark inspect`: a data set's manifest (records, files, MiB per split and partition), its
feature spec as a table, and a few records decoded with it. Needs no Spark and no TensorFlow."""

from __future__ import annotations

import argparse
import errno
import os
import warnings
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from tfspark import progress
from tfspark.cli.config import filesystem_of
from tfspark.errors import OptionError
from tfspark.spec import FeatureSpec
from tfspark.store import manifest as mf
from tfspark.store.fs import locate
from tfspark.store.partitions import read_data_set_manifest
from tfspark.store.uris import redact
from tfspark.wire.example_py import decode_sequence_example, decode_with_spec
from tfspark.wire.stream import read_records


def missing_local_path(path: str) -> None:
    """Fail with FileNotFoundError when a local path (not a URI) does not exist."""
    if "://" not in path and not Path(path).exists():
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)


def run(args: argparse.Namespace) -> int:
    """The inspect command: summary and spec of a data set (not of a lone file), then records."""
    if args.records < 0:
        raise OptionError(f"--records must be >= 0, got {args.records}")
    missing_local_path(args.path)
    fs = filesystem_of(args.path, args.store)
    m = None
    lone = is_file(args.path, fs)  # (a store: one request, asked once)
    if not lone:  # the manifest read once (a store: one request)
        m = read_data_set_manifest(args.path, fs)
        m.check_split(args.split, args.path)  # named before anything is printed
        print(describe(args.path, fs, m))
    print_records(args.path, args.records, args.split, fs, m, lone)
    return 0


def describe(path: str, filesystem: Any = None, manifest: mf.Manifest | None = None) -> str:
    """Manifest counts per split and the spec as a table (manifest: the path's, when read)."""
    m = manifest or mf.read_manifest(path, filesystem)
    block = m.rows_per_record
    what = f"{m.record_type} records" if block == 1 else \
        f"rows in {m.records:,} Example blocks of up to {block:,} rows"
    lines = [f"{redact(path)}: {m.rows:,} {what} in "
             f"{progress.many(len(m.files), 'file')}, {m.bytes / 2**20:,.2f} MiB, "
             f"compression={m.compression or 'none'}"]
    if m.description:
        lines.append(f"description: {m.description}")
    groups = _groups(m)
    lines += _table(["split/partition", "files", "records" if block == 1 else "rows", "MiB"],
                    [[k, n, f"{r:,}", f"{b / 2**20:,.2f}"] for k, (n, r, b) in groups.items()])
    if m.spec is not None:
        rows = [[f.name, f.kind, f.dtype, list(f.shape) if f.kind == "fixed" else "-",
                 f.source_type, "yes" if f.nullable else "no",
                 "-" if f.default is None else repr(f.default), "yes" if f.label else ""]
                for f in m.spec.features]
        lines += ["", *_table(["feature", "kind", "dtype", "shape", "source type", "nullable",
                               "default", "label"], rows)]
    scope = m.stats_scope()
    with warnings.catch_warnings():  # (said in the header)
        warnings.simplefilter("ignore")
        features = m.feature_stats()
    if features:
        lines += ["", f"statistics ({scope or 'all rows'}; of present values, nulls counted "
                      f"apart):",
                  *stats_table(features, m.spec)]
    return "\n".join(lines) + "\n"


def _groups(m: mf.Manifest) -> dict[str, list[int]]:
    """{name: [files, rows, bytes]}: each split (an empty one too) with its totals, followed
    by its partitions (`split/col=value`); without splits, the partitions, or "(all)"."""
    groups: dict[str, list[int]] = {split: [0, 0, 0] for split in m.splits}
    for f in m.files:
        part = ",".join(f"{k}={v}" for k, v in f.partition.items())
        names = [f.split] if f.split else []
        if part or not f.split:
            names.append("/".join(x for x in (f.split, part) if x) or "(all)")
        for name in names:
            g = groups.setdefault(name, [0, 0, 0])
            g[0], g[1], g[2] = g[0] + 1, g[1] + f.row_count, g[2] + f.bytes
    rank = {split: i for i, split in enumerate(m.splits)}
    return {k: groups[k] for k in sorted(
        groups, key=lambda k: (rank.get(k.split("/")[0], len(rank)), "/" in k, k))}


def stats_table(per: dict[str, Any], spec: FeatureSpec | None = None) -> list[str]:
    """{feature: statistics} as the lines of a table (inspect and `tfspark stats`); with the
    spec, dates and timestamps read as dates and times (UTC), their spread as a duration."""
    kinds = {f.name: f.encoding for f in spec.features} if spec is not None else {}
    return _table(["feature", "nulls", "mean", "std", "min", "max", "distinct~",
                   "most frequent"], [_stats_row(k, v, kinds.get(k)) for k, v in per.items()])


_UNIT_S = {"date": 86_400.0, "timestamp": 1e-6}  # seconds per stored unit


def _when(x: float, encoding: str) -> str:
    """A stored date (days) or timestamp (microseconds) as a date or time, UTC."""
    import datetime as dt

    try:
        t = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=x * _UNIT_S[encoding])
    except OverflowError:
        return f"{x:.6g}"
    return t.date().isoformat() if encoding == "date" else t.isoformat(sep=" ",
                                                                       timespec="seconds")


def _duration(x: float, encoding: str) -> str:
    seconds = x * _UNIT_S[encoding]
    for unit, size in (("d", 86_400.0), ("h", 3_600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


def _stats_row(name: str, s: dict[str, Any], encoding: str | None = None) -> list[Any]:
    def num(x: Any) -> str:
        if x is None:
            return "-"
        if isinstance(x, str):
            return x
        return _when(x, encoding) if encoding in _UNIT_S else f"{x:.6g}"

    v = s.get("elements") or s  # arrays: the numbers are their elements'
    var = v.get("variance")
    std = None if var is None or isinstance(var, str) else var ** 0.5
    top = s.get("top") or []
    most = f"{top[0][0]!r} x{top[0][1]:,}" if top else ""
    length = s.get("length")
    if length:
        most = ", ".join(x for x in (f"length {length['min']}..{length['max']}, mean "
                                     f"{num(length['mean'])}", most and "top " + most) if x)
    spread = "-" if std is None else _duration(std, encoding) if encoding in _UNIT_S else num(std)
    return [name, f"{s.get('nulls', 0):,}", num(v.get("mean")), spread, num(v.get("min")),
            num(v.get("max")), _count(s.get("distinct_approx")), most or "-"]


def _count(x: Any) -> str:
    return "-" if x is None else f"{x:,}" if isinstance(x, int) else str(x)


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    cells = [header, *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]


def print_records(path: str, n: int, split: str | None, filesystem: Any = None,
                  manifest: mf.Manifest | None = None, lone: bool = False) -> None:
    """Print the first n records of a data set (one split's when given), decoded
    (manifest: the path's, when read; lone: path is one TFRecord file, shown by its keys)."""
    shown = 0
    for i, record in enumerate(_records(path, n, split, filesystem, manifest, lone)):
        print(f"record {i}:")
        for key, value in record.items():
            print(f"  {key}: {_fmt(value)}")
        shown += 1
    if lone and not shown and n > 0:  # (a data set's summary above says its counts)
        print(f"{redact(path)}: a TFRecord file holding no records")


def _records(path: str, n: int, split: str | None, filesystem: Any = None,
             manifest: mf.Manifest | None = None, lone: bool = False):
    """The first n records of a data set (one split's when given), decoded with its spec."""
    loc = locate(path, filesystem)
    if lone:  # no manifest, so no spec: its raw keys
        with loc.open_input() as f:  # (random access: its compression found from its start)
            yield from islice(map(_raw_keys, read_records(f, "auto", path=loc.uri)), n)
        return
    m = manifest or mf.read_manifest(loc)
    m.check_split(split, path)
    files = m.files_of(split=split)
    spec = m.spec
    if spec is not None and m.rows_per_record > 1:
        yield from islice(_block_rows(loc, files, m.compression, spec), n)
        return
    for f in files:
        if n <= 0:
            return
        where = loc.join(f.path)
        with loc.open_stream(f.path) as stream:
            for data in islice(read_records(stream, m.compression, path=where), n):
                n -= 1
                # Nulls show as None here; the spec table above says what a reader fills in.
                yield (decode_with_spec(data, spec, fill_defaults=False) if spec
                       else {"record": data})


def _block_rows(loc: Any, files: tuple[mf.FileEntry, ...], compression: str | None,
                spec: FeatureSpec) -> Iterator[dict[str, Any]]:
    """The rows of block records, one block at a time (nulls as None, as for rows)."""
    import numpy as np

    from tfspark.arrow.decode_block import BlockDecoder

    decoder = BlockDecoder(spec)
    for f in files:
        where = loc.join(f.path)
        with loc.open_stream(f.path) as stream:
            for data in read_records(stream, compression, path=where):
                buf = np.frombuffer(data, np.uint8)
                rows = decoder.decode(buf, np.array([0, len(data)]), path=where)
                yield from rows.to_pylist()


def _raw_keys(data: bytes) -> dict[str, Any]:
    """An Example's {key: values}; a SequenceExample's context the same, and each feature
    list as "<key> (feature list)": [values of each step]."""
    context, lists = decode_sequence_example(data)  # an Example is a context alone
    return {**context, **{f"{k} (feature list)": v for k, v in lists.items()}}


def is_file(path: str, filesystem: Any = None) -> bool:
    """Whether path is a lone file (local, or on a store: one request), not a directory."""
    if "://" not in path and filesystem is None:
        return Path(path).is_file()
    from tfspark.store.integrity import is_lone_file  # (as verify: not at the CLI's start)

    return is_lone_file(locate(path, filesystem))


def _fmt(value: Any, width: int = 100) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        more = f", ... ({len(value)} values)" if len(value) > 8 else ""
        text = "[" + ", ".join(_fmt(v, width) for v in value[:8]) + more + "]"
    else:
        text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


