"""A data set in TFX's terms: its statistics as TFDV's `DatasetFeatureStatisticsList`, a TFMD
`Schema` from its spec and statistics, and the anomalies of a data set against a saved Schema.

TensorFlow's pipeline for this job (TFX) keeps statistics and schemas as tensorflow-metadata
protos: StatisticsGen writes statistics, SchemaGen infers a schema, Transform and Trainer read
it, and TFDV validates new data against it and draws Facets views. tfspark computes the same
statistics at write time (the statistics module); here they become those protos, so TFX's tools
use them without a second pass over the data:

    tfdv_statistics   a DatasetFeatureStatisticsList: the statistics of all rows, named
                      ALL_ROWS (TFDV's default slice, what its tools show and validate), and
                      one dataset per split, named by the split (TFDV sees them as slices);
                      what TFDV's load_stats_binary reads
    tfmd_schema       a Schema: types, presence, value counts or shapes, string domains of
                      the features with at most MAX_DOMAIN values, int domains the spec knows
                      (booleans are 0 or 1), what TFDV's load_schema_text reads
    validate          a data set's statistics against a Schema: one line per anomaly (a
                      feature gone or new, a type changed, values missing where the schema
                      says always present, value counts, string values outside the domain,
                      numbers outside an int or float domain, NaN or infinities a float
                      domain disallows); needs tensorflow-metadata, not TFDV

Features are named as TFDV names them, by their Example keys: a 2-D ragged feature is its two
keys, `name/values` and `name/row_lengths`. The statistics describe rows, so they are the
statistics TFDV computes over the row layout's files; over the block layout's files
(rows_per_record > 1) TFDV would see blocks, not rows. A SequenceExample's feature lists are
left out (its context features are in). Numbers get a QUANTILES histogram of the stored
deciles and a STANDARD histogram of ten equal-width buckets interpolated from them (the
deciles are all that is kept); strings their top values (TOP_VALUES, as TFDV shows) and a rank
histogram (RANK_BUCKETS) from the stored top values, and their average length where those
hold every value.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tfspark.errors import OptionError, SchemaError, require
from tfspark.spec.model import Feature, FeatureSpec
from tfspark.store import manifest as mf
from tfspark.store.stats import rules
from tfspark.store.uris import redact

ALL_ROWS = "All Examples"  # TFDV's name for the statistics of a whole data set
MAX_DOMAIN = 100  # a string domain for features of at most this many values (TFDV's default)
TOP_VALUES = 20  # top values of a string feature in the statistics (TFDV's default)
RANK_BUCKETS = 1000  # rank histogram buckets (TFDV's default); validation reads these
HIST_BUCKETS = 10
VALUES, LENGTHS = "values", "row_lengths"


def _protos() -> tuple[Any, Any]:
    require("tensorflow_metadata", "tfspark's TFX support (TFDV statistics, TFMD schemas, "
            "validate)", "tfx")
    from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

    return statistics_pb2, schema_pb2


@dataclass(frozen=True)
class Column:
    """One Example key as TFX sees it: a feature, or one of the two keys of a ragged one."""

    key: str
    feature: Feature
    part: str = ""  # VALUES or LENGTHS for a ragged feature's keys

    @property
    def tfmd_type(self) -> str:
        """BYTES, INT or FLOAT: the Schema's type of the key."""
        if self.part == LENGTHS:
            return "INT"
        return {"int64": "INT", "float32": "FLOAT", "string": "BYTES"}[self.feature.dtype]

    @property
    def scalar(self) -> bool:
        """One value per row (a fixed feature without a shape)."""
        f = self.feature
        return f.kind == "fixed" and not f.shape

    @property
    def fixed_count(self) -> int | None:
        """Values per present record when the spec fixes it (scalars 1, fixed arrays n)."""
        f = self.feature
        if f.kind != "fixed" or self.part:
            return None
        return math.prod(f.shape) if f.shape else 1


def columns(spec: FeatureSpec) -> list[Column]:
    """The Example keys of a spec's features, in spec order (feature lists left out)."""
    out: list[Column] = []
    for f in spec.features:
        if f.kind == "sequence":
            continue
        if f.kind == "ragged":
            out += [Column(key, f, part) for key, part in zip(f.keys, (VALUES, LENGTHS))]
        else:
            out.append(Column(f.name, f))
    return out


# ---------------------------------------------------------------- statistics


def tfdv_statistics(path: str | os.PathLike, split: str | None = None,
                    filesystem: Any = None) -> Any:
    """The statistics the write stored, as TFDV's DatasetFeatureStatisticsList.

    The statistics of all rows are the dataset named "All Examples" (TFDV's default slice:
    what its visualize_statistics draws and validate_statistics checks), then each split is a
    dataset named by the split. Nothing but the manifest and its statistics files is read.
    Needs tensorflow-metadata (the `tfx` extra).

    Args:
        path: a data set's directory or URI.
        split: that split's statistics alone (one dataset, named by the split).
        filesystem: a pyarrow filesystem for `path` (default: from the path).

    Returns:
        A tensorflow_metadata DatasetFeatureStatisticsList: `.SerializeToString()` is the
        stats.pb that TFDV's load_stats_binary reads.

    Raises:
        SchemaError: a data set written without statistics or without a spec.
        OptionError: no such split.

    Examples:
        >>> import pyarrow as pa, tfspark
        >>> _ = tfspark.write_dataset(pa.table({"x": [1.0, 2.0, 4.0]}), "ds")
        >>> stats = tfspark.tfdv_statistics("ds")
        >>> feature = stats.datasets[0].features[0]
        >>> stats.datasets[0].name, feature.path.step[0], round(feature.num_stats.mean, 3)
        ('All Examples', 'x', 2.333)
    """
    m, where = _manifest(path, filesystem)
    m.check_split(split, where)
    return statistics_list(m, [split] if split is not None else [None, *m.splits], where)


def statistics_list(m: mf.Manifest, splits: list[str | None], where: str) -> Any:
    """A DatasetFeatureStatisticsList of a manifest's stored statistics, one dataset per split
    (None: all rows, named ALL_ROWS), in the order given."""
    statistics_pb2, _ = _protos()
    spec = _spec(m, where)
    out = statistics_pb2.DatasetFeatureStatisticsList()
    for split in splits:
        per = _stats(m, split, where)
        d = out.datasets.add(name=split or ALL_ROWS, num_examples=m.rows_of_split(split))
        for c in columns(spec):
            s = per.get(c.feature.name)
            if s is not None:
                _feature_statistics(d.features.add(), c, s, statistics_pb2)
    return out


def _feature_statistics(fs: Any, c: Column, s: Mapping[str, Any], pb: Any) -> None:
    """Fill one FeatureNameStatistics from a feature's stored statistics."""
    f = c.feature
    fs.path.step.append(c.key)
    # (raw bytes too are STRING with string statistics to TFDV, as it computes them)
    kind = "STRING" if c.part != LENGTHS and f.dtype == "string" else c.tfmd_type
    fs.type = getattr(pb.FeatureNameStatistics, kind)
    rows, nulls = int(s.get("rows", 0)), int(s.get("nulls", 0))
    target = fs.string_stats if kind == "STRING" else fs.num_stats
    common = target.common_stats
    common.num_non_missing = rows - nulls
    common.num_missing = nulls
    present = rows - nulls
    counts = _value_counts(c, s, present)
    if counts is not None:
        lo, hi, total = counts
        if lo is not None:
            common.min_num_values, common.max_num_values = lo, hi
        common.tot_num_values = int(round(total))
        if present:
            common.avg_num_values = total / present
    if c.part == LENGTHS:  # the inner lists' lengths: their mean (the rest is not kept)
        lists = (s.get("length") or {}).get("mean", 0.0) * present
        if lists and "count" in (s.get("elements") or {}):
            target.mean = s["elements"]["count"] / lists
        return
    if kind == "STRING":
        _string_statistics(target, s)
    else:
        _numeric_statistics(target, c, s, pb)


def _value_counts(c: Column, s: Mapping[str, Any], present: int
                  ) -> tuple[int | None, int | None, float] | None:
    """(min, max, total) values per present record; min/max None where only the total is
    known (a ragged feature's values); None when nothing is known."""
    n = c.fixed_count
    if n is not None:
        return n, n, float(n * present)
    length = s.get("length")
    if c.part == VALUES:
        e = s.get("elements") or {}
        return (None, None, float(e["count"])) if "count" in e else None
    if length:
        return int(length["min"]), int(length["max"]), float(length["mean"]) * present
    return None


def _numeric_statistics(ns: Any, c: Column, s: Mapping[str, Any], pb: Any) -> None:
    e = s if c.scalar else s.get("elements") or {}
    if "mean" in e:
        ns.mean = float(e["mean"])
        ns.std_dev = math.sqrt(max(float(e.get("variance") or 0.0), 0.0))
        ns.min, ns.max = float(e["min"]), float(e["max"])
    q = s.get("quantiles") if c.scalar else None
    top = dict((v, n) for v, n in s.get("top") or []) if c.scalar else {}
    if 0 in top:  # zeros known from the top values (integers with few values)
        ns.num_zeros = int(top[0])
    if not q or "mean" not in e:
        return
    probs, values = list(q["probabilities"]), [float(v) for v in q["values"]]
    if 0.5 in probs:
        ns.median = values[probs.index(0.5)]
    count = int(e.get("count", 0))
    edges = [float(e["min"]), *values, float(e["max"])]
    cdf = [0.0, *probs, 1.0]
    nan = int(s.get("nan", 0))
    quantiles = ns.histograms.add(type=pb.Histogram.QUANTILES, num_nan=nan)
    for i in range(len(edges) - 1):
        quantiles.buckets.add(low_value=edges[i], high_value=edges[i + 1],
                              sample_count=count * (cdf[i + 1] - cdf[i]))
    standard = ns.histograms.add(type=pb.Histogram.STANDARD, num_nan=nan)
    lo, hi = edges[0], edges[-1]
    width = (hi - lo) / HIST_BUCKETS if hi > lo else 0.0
    below = 0.0
    for i in range(HIST_BUCKETS):
        upper = hi if i == HIST_BUCKETS - 1 or not width else lo + width * (i + 1)
        at = 1.0 if i == HIST_BUCKETS - 1 else _cdf_at(upper, edges, cdf)
        standard.buckets.add(low_value=lo + width * i, high_value=upper,
                             sample_count=count * (at - below))
        below = at
        if not width:
            break


def _cdf_at(x: float, edges: list[float], cdf: list[float]) -> float:
    """The share of values at or below x, linear between the stored quantiles."""
    if x >= edges[-1]:
        return 1.0
    for i in range(len(edges) - 1):
        a, b = edges[i], edges[i + 1]
        if x < b:
            if x < a:
                return cdf[i]
            return cdf[i] + (cdf[i + 1] - cdf[i]) * ((x - a) / (b - a) if b > a else 1.0)
    return 1.0


def _string_statistics(target: Any, s: Mapping[str, Any]) -> None:
    if "distinct_approx" in s:
        target.unique = int(round(s["distinct_approx"]))
    # most frequent first, ties by value from the last (TFDV's order of equal counts)
    top = sorted(((str(v), int(n)) for v, n in s.get("top") or []),
                 key=lambda vn: (vn[1], vn[0].encode()), reverse=True)
    for v, n in top[:TOP_VALUES]:
        target.top_values.add(value=v, frequency=n)
    for rank, (v, n) in enumerate(top[:RANK_BUCKETS]):
        target.rank_histogram.buckets.add(low_rank=rank, high_rank=rank, label=v,
                                          sample_count=n)
    if top and _complete(s):
        total = sum(n for _, n in top)
        target.avg_length = sum(len(v.encode()) * n for v, n in top) / total if total else 0.0


def _complete(s: Mapping[str, Any]) -> bool:
    """The stored top values are every value there is, with exact counts."""
    top = s.get("top") or []
    return bool(top) and not s.get("top_count_error") and \
        float(s.get("distinct_approx", math.inf)) <= len(top) + 0.5


# ---------------------------------------------------------------- schema


def tfmd_schema(path: str | os.PathLike, filesystem: Any = None) -> Any:
    """A TFMD Schema of a data set, from its spec and the statistics of all its rows.

    Each Example key's type; presence (min_fraction 1 where no row lacks it); a shape where
    every row holds the same number of values, else value counts; a string domain of every
    value where a string feature has at most 100 of them; an int domain where the spec knows
    one (booleans). TFDV's infer_schema over the row layout's files infers the same. Needs
    tensorflow-metadata (the `tfx` extra).

    Args:
        path: a data set's directory or URI.
        filesystem: a pyarrow filesystem for `path` (default: from the path).

    Returns:
        A tensorflow_metadata Schema: `text_format.MessageToString(schema)` is the
        schema.pbtxt that TFDV's load_schema_text and `tfspark validate --schema` read.

    Raises:
        SchemaError: a data set written without statistics or without a spec.

    Examples:
        >>> import pyarrow as pa, tfspark
        >>> _ = tfspark.write_dataset(pa.table({"color": ["red", "blue", "red"]}), "ds")
        >>> schema = tfspark.tfmd_schema("ds")
        >>> [d.value for d in schema.string_domain][0]
        ['blue', 'red']
    """
    m, where = _manifest(path, filesystem)
    return schema_of(m, where)


def schema_of(m: mf.Manifest, where: str) -> Any:
    """The Schema of a manifest (see tfmd_schema)."""
    _, schema_pb2 = _protos()
    spec = _spec(m, where)
    per = _stats(m, None, where)
    schema = schema_pb2.Schema()
    for c in columns(spec):
        s = per.get(c.feature.name) or {}
        feat = schema.feature.add(name=c.key, type=getattr(schema_pb2, c.tfmd_type))
        rows, nulls = int(s.get("rows", 0)), int(s.get("nulls", 0))
        if rows and not nulls:
            feat.presence.min_fraction = 1.0
        feat.presence.min_count = 1
        n = c.fixed_count
        if n is not None and rows and not nulls:
            for size in c.feature.shape or (1,):
                feat.shape.dim.add(size=size)
        elif n is not None:
            feat.value_count.min = feat.value_count.max = n
        elif c.part == "" and (s.get("length") or {}).get("min", 0) >= 1:
            feat.value_count.min = int(s["length"]["min"])
        if c.part:
            continue
        if c.feature.encoding == "bool":
            feat.int_domain.min, feat.int_domain.max = 0, 1
        elif c.feature.dtype == "string" and not rules.binary(c.feature) and \
                c.feature.encoding == "bytes" and _complete(s) and len(s["top"]) <= MAX_DOMAIN:
            feat.domain = c.key
            schema.string_domain.add(name=c.key, value=sorted(str(v) for v, _ in s["top"]))
    return schema


def schema_text(schema: Any) -> str:
    """A Schema in text format (schema.pbtxt: what TFDV's load_schema_text reads)."""
    _protos()
    from google.protobuf import text_format

    return str(text_format.MessageToString(schema))


def load_schema(file: str | os.PathLike) -> Any:
    """A Schema from its text format (schema.pbtxt) or binary file; OptionError for anything
    else (an empty file, a schema without features, TFDV's statistics)."""
    statistics_pb2, schema_pb2 = _protos()
    from google.protobuf import text_format

    try:
        raw = open(file, "rb").read()
    except OSError as e:
        raise OptionError(f"cannot read the schema {file} ({e.strerror or e}); give the path "
                          f"of a schema.pbtxt (tfspark stats PATH --format tfdv writes one)"
                          ) from None
    give = "give a schema.pbtxt as tfdv.write_schema_text or tfspark stats --format tfdv writes"
    schema = schema_pb2.Schema()
    try:
        text_format.Parse(raw.decode(), schema)
        if not schema.feature:
            empty = " (it is empty)" if not raw.strip() else ""
            raise OptionError(f"{file} holds no feature{empty}: a schema to check against "
                              f"names them; {give}")
        return schema
    except (UnicodeDecodeError, text_format.ParseError) as e:
        text_error = str(e)
    stats = statistics_pb2.DatasetFeatureStatisticsList()
    try:  # (TFDV's statistics parse as a Schema of nonsense: said as what they are)
        stats.ParseFromString(raw)
        if any(d.num_examples and d.features for d in stats.datasets):
            raise OptionError(f"{file} holds statistics (a DatasetFeatureStatisticsList), not a "
                              f"schema; give the schema.pbtxt beside it")
    except OptionError:
        raise
    except Exception:  # noqa: BLE001 - not statistics: perhaps a binary Schema
        pass
    try:
        schema = schema_pb2.Schema.FromString(raw)
        if schema.feature and all(f.name for f in schema.feature):
            return schema
    except Exception:  # noqa: BLE001 - not a binary Schema either: the text error says more
        pass
    raise OptionError(f"{file} is not a TFMD Schema in text format ({text_error}); {give}")


# ---------------------------------------------------------------- validation


@dataclass
class SchemaReport:
    """What `validate` found: the anomalies of a data set's statistics against a Schema,
    one line each (empty when it conforms)."""

    path: str
    schema: str
    datasets: list[str] = field(default_factory=list)
    split: str | None = None  # the one split checked; None: every split
    anomalies: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no anomaly was found."""
        return not self.anomalies

    def render(self) -> str:
        """The report as text for the terminal."""
        split = f" --split {self.split}" if self.split else ""
        lines = [f"tfspark validate {self.path} --schema {self.schema}{split}",
                 f"  statistics of {', '.join(self.datasets)}"]
        if self.ok:
            lines.append("  OK: every feature conforms to the schema")
        else:
            n = len(self.anomalies)
            lines.append(f"  {n} anomal{'y' if n == 1 else 'ies'}:")
            lines += [f"  - {a}" for a in self.anomalies]
        return "\n".join(lines)


def validate(path: str | os.PathLike, schema: Any, split: str | None = None,
             filesystem: Any = None) -> SchemaReport:
    """The anomalies of a data set against a TFMD Schema saved earlier, one line each.

    Features in the schema the data set lacks, features it has that the schema lacks, changed
    types, values missing where the schema's presence says always, value counts and shapes,
    string values outside the domain (among the stored top values), numbers outside an int or
    float domain, NaN and infinities a float domain disallows. Per split (every split, or
    `split`), or of all rows for a data set without splits. Reads the stored statistics only;
    needs tensorflow-metadata, not TFDV.

    Args:
        path: a data set's directory or URI.
        schema: a tensorflow_metadata Schema, or the path of one (schema.pbtxt, or binary).
        split: check this split only.
        filesystem: a pyarrow filesystem for `path` (default: from the path).

    Returns:
        A SchemaReport: `.ok`, `.anomalies` (the lines) and `.render()` for the terminal.

    Raises:
        OptionError: a schema file that cannot be read or parsed, or no such split.
        SchemaError: a data set written without statistics or without a spec.

    Examples:
        >>> import pyarrow as pa, tfspark
        >>> _ = tfspark.write_dataset(pa.table({"color": ["red", "blue"]}), "day1")
        >>> schema = tfspark.tfmd_schema("day1")
        >>> _ = tfspark.write_dataset(pa.table({"color": ["red", "green"]}), "day2")
        >>> tfspark.validate("day2", schema).anomalies
        ["color: 1 value(s) outside the schema's domain 'color': 'green' (1 row)"]
    """
    where = redact(os.fspath(path) if isinstance(path, os.PathLike) else str(path))
    schema_name = "the schema"
    if isinstance(schema, (str, os.PathLike)):
        schema_name = os.fspath(schema)
        schema = load_schema(schema)
    m, where = _manifest(path, filesystem)
    m.check_split(split, where)
    spec = _spec(m, where)
    report = SchemaReport(where, schema_name, split=split)
    by_key = {c.key: c for c in columns(spec)}
    names: list[str | None] = [split] if split is not None else list(m.splits) or [None]
    for name in names:
        per = _stats(m, name, where)
        report.datasets.append(f"split {name!r}" if name else "all rows")
        tag = f"[{name}] " if name and len(names) > 1 else ""
        report.anomalies += [tag + a for a in _anomalies(schema, by_key, per)]
    return report


def _anomalies(schema: Any, by_key: Mapping[str, Column], per: Mapping[str, Any]) -> list[str]:
    _, schema_pb2 = _protos()
    names = {v: k for k, v in schema_pb2.FeatureType.items()}
    domains = {d.name: d for d in schema.string_domain}
    out: list[str] = []
    wanted = set()
    for feat in schema.feature:
        if feat.lifecycle_stage in (schema_pb2.DEPRECATED, schema_pb2.DISABLED,
                                    schema_pb2.PLANNED, schema_pb2.ALPHA, schema_pb2.DEBUG_ONLY):
            wanted.add(feat.name)
            continue
        wanted.add(feat.name)
        c = by_key.get(feat.name)
        if c is None:
            if _required(feat):
                out.append(f"{feat.name}: in the schema, not in the data set (a feature gone)")
            continue
        s = per.get(c.feature.name) or {}
        if feat.type != schema_pb2.TYPE_UNKNOWN and names[feat.type] != c.tfmd_type:
            out.append(f"{feat.name}: type {c.tfmd_type}, the schema says {names[feat.type]} "
                       f"(the type changed)")
            continue
        out += [f"{feat.name}: {a}" for a in _feature_anomalies(feat, c, s, domains)]
    for key in by_key:
        if key not in wanted:
            out.append(f"{key}: in the data set, not in the schema (a new feature)")
    return out


def _required(feat: Any) -> bool:
    """The schema says every data set holds the feature (not optional)."""
    return feat.presence.min_fraction > 0 or feat.presence.min_count > 0


def _feature_anomalies(feat: Any, c: Column, s: Mapping[str, Any],
                       domains: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    rows, nulls = int(s.get("rows", 0)), int(s.get("nulls", 0))
    present = rows - nulls
    if rows and feat.presence.min_fraction and present / rows < feat.presence.min_fraction:
        out.append(f"missing in {nulls:,} of {rows:,} rows; the schema says present in at "
                   f"least {feat.presence.min_fraction:.0%}")
    elif feat.presence.min_count and present < feat.presence.min_count:
        out.append(f"present in {present:,} rows; the schema says at least "
                   f"{feat.presence.min_count:,}")
    if not s:
        return out
    counts = _value_counts(c, s, present)
    if counts is not None and counts[0] is not None and present:
        lo, hi = counts[0], counts[1]
        if feat.HasField("shape"):
            want = math.prod(d.size for d in feat.shape.dim)
            if (lo, hi) != (want, want):
                out.append(f"{_span(lo, hi)} values per row; the schema's shape "
                           f"{[d.size for d in feat.shape.dim]} holds {want}")
            if nulls and not out:  # (a presence of 100% said so already)
                out.append(f"missing in {nulls:,} of {rows:,} rows; a feature with a shape "
                           f"must be in every row")
        elif feat.HasField("value_count"):
            vc = feat.value_count
            if (vc.HasField("min") and lo < vc.min) or (vc.HasField("max") and hi > vc.max):
                want = _span(vc.min if vc.HasField("min") else 0,
                             vc.max if vc.HasField("max") else None)
                out.append(f"{_span(lo, hi)} values per row; the schema says {want}")
    if c.part == LENGTHS:
        return out
    e = s if c.scalar else s.get("elements") or {}
    which = feat.WhichOneof("domain_info")
    if which == "int_domain" and "min" in e:
        d = feat.int_domain
        out += _outside(e, d.min if d.HasField("min") else None,
                        d.max if d.HasField("max") else None, "int")
    elif which == "float_domain":
        d = feat.float_domain
        if "min" in e:
            out += _outside(e, d.min if d.HasField("min") else None,
                            d.max if d.HasField("max") else None, "float")
        if d.disallow_nan and int(e.get("nan", 0)):
            out.append(f"{_values(int(e['nan']), 'NaN value')}; the schema's float domain "
                       f"disallows NaN")
        if d.disallow_inf and int(e.get("pos_inf", 0)) + int(e.get("neg_inf", 0)):
            inf = int(e.get("pos_inf", 0)) + int(e.get("neg_inf", 0))
            out.append(f"{_values(inf, 'infinite value')}; the schema's float domain "
                       f"disallows them")
    elif which in ("domain", "string_domain"):
        d = feat.string_domain if which == "string_domain" else domains.get(feat.domain)
        if d is None:
            out.append(f"the schema names string domain {feat.domain!r}, which it lacks")
        else:
            out += _outside_domain(d, s, feat)
    return out


def _rows(n: int) -> str:
    return _values(n, "row")


def _values(n: int, what: str) -> str:
    return f"{n:,} {what}{'' if n == 1 else 's'}"


def _span(lo: int, hi: int | None) -> str:
    if hi is None:
        return f"at least {lo}"
    return str(lo) if lo == hi else f"{lo} to {hi}"


def _outside(e: Mapping[str, Any], lo: float | None, hi: float | None, kind: str) -> list[str]:
    out = []
    if lo is not None and float(e["min"]) < lo:
        out.append(f"values down to {e['min']:g}, below the schema's {kind} domain min {lo:g}")
    if hi is not None and float(e["max"]) > hi:
        out.append(f"values up to {e['max']:g}, above the schema's {kind} domain max {hi:g}")
    return out


def _outside_domain(domain: Any, s: Mapping[str, Any], feat: Any) -> list[str]:
    allowed = set(domain.value)
    top = [(str(v), int(n)) for v, n in s.get("top") or []]
    new = [(v, n) for v, n in top if v not in allowed]
    if not top:
        return []
    out = []
    if new:
        shown = ", ".join(f"{v!r} ({_rows(n)})" for v, n in new[:5])
        more = f" and {len(new) - 5} more" if len(new) > 5 else ""
        partial = "" if _complete(s) else \
            f" (among its {len(top):,} most frequent values; the rest are not stored)"
        out.append(f"{len(new)} value(s) outside the schema's domain {domain.name!r}: "
                   f"{shown}{more}{partial}")
    mass = feat.distribution_constraints.min_domain_mass if \
        feat.HasField("distribution_constraints") else 1.0
    total = sum(n for _, n in top)
    outside = sum(n for _, n in new)
    if new and total and _complete(s) and (total - outside) / total < mass < 1.0:
        out.append(f"{(total - outside) / total:.1%} of the values in the domain; the schema "
                   f"says at least {mass:.1%}")
    return out


# ---------------------------------------------------------------- the data set


def _manifest(path: str | os.PathLike, filesystem: Any) -> tuple[mf.Manifest, str]:
    from tfspark.store.partitions import read_data_set_manifest

    p = os.fspath(path)
    return read_data_set_manifest(p, filesystem), redact(p)


def _spec(m: mf.Manifest, where: str) -> FeatureSpec:
    if m.spec is None:
        raise SchemaError(f"{where} holds raw records (ByteArray) with no feature spec: TFX's "
                          f"statistics and schema describe features; write it with a spec")
    return m.spec


def _stats(m: mf.Manifest, split: str | None, where: str) -> Mapping[str, Any]:
    per = m.feature_stats(split)
    if per is None:
        what = f"split {split!r}" if split else "its rows"
        raise SchemaError(f"{where} has no statistics of {what} (written with stats=False?); "
                          f"write it again with statistics (the default) to use TFX's tools")
    return per
