"""`tfspark export|demo|spec|inspect|verify|train`: the command line (`python -m tfspark.cli`).

export and demo run a local Spark session whose catalog persists in a Derby metastore under the
warehouse directory, so the backup table is still there for the next session. inspect reads a
written data set with no Spark at all. Errors of the tfspark family print one line, exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from tfspark.config import KEYS, MODES, SOURCE_FORMATS, ExportConfig, load_config
from tfspark.errors import OptionError, TfsparkError

DEMO = ExportConfig(output="out/sample_tfrecords", mode="overwrite", label_cols=("label",),
                    compression="gzip", backup_table="tfspark_demo.sample_backup",
                    split={"train": 0.8, "validation": 0.1, "test": 0.1}, split_key="id")
_REPO_CONF = Path(__file__).resolve().parents[1] / "conf"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except TfsparkError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfspark", description="Spark DataFrames -> a parquet copy + TFRecord files")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("export", help="a table, parquet or CSV -> parquet backup + TFRecords")
    add_export_args(p)
    p.set_defaults(run=_export)
    p = sub.add_parser("demo", help="export the embedded sample, then query and decode it")
    add_export_args(p, config_help="default: conf/export.toml when present, else built-in")
    p.set_defaults(run=lambda args: _export(args, demo=True))
    p = sub.add_parser("spec", help="infer the feature spec of a table or parquet files from "
                       "the schema (export also finds fixed-length arrays in the data)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--table", help="catalog table name")
    what.add_argument("--parquet", help="parquet file or directory")
    p.add_argument("--label-cols", help="comma-separated label columns")
    p.add_argument("--out", help="where to write the JSON (default: schemas/<name>.json)")
    p.add_argument("--master", help="Spark master (default local[*])")
    p.add_argument("--warehouse", help="warehouse directory holding the metastore")
    p.set_defaults(run=_spec)
    p = sub.add_parser("inspect", help="summarize a written data set and decode a few records")
    p.add_argument("path", help="a directory written by tfspark, or one .tfrecord[.gz] file")
    p.add_argument("--records", type=int, default=3, help="records to decode (default 3)")
    p.add_argument("--split", help="decode records of this split only")
    p.set_defaults(run=_inspect)
    p = sub.add_parser("verify", help="check every file, CRC, count and record against the "
                       "manifest; exit 1 on any problem")
    p.add_argument("path", help="a directory written by tfspark (or one of its splits)")
    p.set_defaults(run=_verify)
    p = sub.add_parser("train", help="train a small Keras model on an exported data set "
                       "(needs tfspark[tf])")
    p.add_argument("--config", default=None, help="TOML of train settings (conf/train.toml)")
    p.add_argument("--data", help="exported data set directory")
    p.add_argument("--label", help="label feature (default: the spec's labels)")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--epochs", type=int)
    p.add_argument("--model-out", help="where to save the .keras model")
    p.set_defaults(run=_train)
    return parser


def _train(args: argparse.Namespace) -> int:
    from tfspark.train import TrainConfig, load_train_config, train

    flags: dict[str, Any] = {k: v for k, v in (("data", args.data), ("label", args.label),
                               ("batch_size", args.batch_size), ("epochs", args.epochs),
                               ("model_out", args.model_out)) if v is not None}
    cfg = load_train_config(args.config, **flags) if args.config else TrainConfig(**flags)
    train(cfg)
    return 0


def _verify(args: argparse.Namespace) -> int:
    from tfspark.verify import verify

    report = verify(args.path)
    print(report.render())
    return 0 if report.ok else 1


def add_export_args(p: argparse.ArgumentParser, config_help: str = "") -> None:
    """The export flags, shared with jobs/export_tfrecords.py; each overrides a config key."""
    p.add_argument("--config", help=f"TOML file of ExportConfig keys {config_help}".strip())
    p.add_argument("--source", help="table name, parquet/CSV file or directory (default: sample)")
    p.add_argument("--source-format", choices=SOURCE_FORMATS)
    p.add_argument("--output", help="output directory or URI of the TFRecords")
    p.add_argument("--mode", choices=MODES)
    p.add_argument("--label-cols", help="comma-separated label columns")
    p.add_argument("--compression", choices=("gzip", "none"))
    p.add_argument("--backup-table", help="catalog table of the parquet copy, e.g. db.name")
    p.add_argument("--backup-path", help="parquet directory of the copy (instead of a table)")
    p.add_argument("--split", help="e.g. train=0.8,validation=0.1,test=0.1")
    p.add_argument("--split-key", help="column whose hash assigns rows to splits")
    p.add_argument("--seed", type=int)
    p.add_argument("--shuffle", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--target-file-mb", type=float, help="TFRecord file size to aim for")
    p.add_argument("--max-records-per-file", type=int)
    p.add_argument("--partition-by", help="comma-separated columns, one directory per value")
    p.add_argument("--null-elements", choices=("error", "drop"))
    p.add_argument("--sample-rows", type=int, help="rows of the embedded sample")
    p.add_argument("--master", help="Spark master of the local session (default local[*])")
    p.add_argument("--warehouse", help="spark.sql.warehouse.dir and metastore directory")
    p.add_argument("--app-name")


def config_from_args(args: argparse.Namespace, base: ExportConfig | None = None) -> ExportConfig:
    cfg = load_config(args.config) if args.config else (base or ExportConfig())
    return cfg.with_overrides(**{k: getattr(args, k) for k in KEYS if hasattr(args, k)})


# ---------------------------------------------------------------- Spark side

def local_session(cfg: ExportConfig) -> Any:
    """A local SparkSession with a persistent catalog (Hive + Derby) under cfg.warehouse."""
    from pyspark.sql import SparkSession

    warehouse = Path(cfg.warehouse).resolve()
    warehouse.mkdir(parents=True, exist_ok=True)
    # Python workers run PYSPARK_PYTHON, not this interpreter, unless told.
    python = os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf_dir = next((d for d in (Path("conf").resolve(), _REPO_CONF)
                     if (d / "spark-defaults.conf").exists()), None)
    if conf_dir is not None:
        os.environ.setdefault("SPARK_CONF_DIR", str(conf_dir))
    # derby.log and the metastore stay in the warehouse, not in the working directory.
    java_opts = [f"-Dderby.system.home={warehouse}"]
    if conf_dir is not None and (conf_dir / "log4j2.properties").exists():
        java_opts.append(f"-Dlog4j2.configurationFile={(conf_dir / 'log4j2.properties').as_uri()}")
    builder = (SparkSession.builder.master(cfg.master).appName(cfg.app_name)
               .config("spark.pyspark.python", python)
               .config("spark.sql.warehouse.dir", str(warehouse))
               .config("spark.ui.showConsoleProgress", "true")
               .config("spark.driver.extraJavaOptions", " ".join(java_opts)))
    if _hive_available():
        # Without Hive the catalog is in memory and the backup table is gone with the session.
        url = f"jdbc:derby:;databaseName={warehouse / 'metastore_db'};create=true"
        builder = builder.enableHiveSupport().config(
            "spark.hadoop.javax.jdo.option.ConnectionURL", url)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _hive_available() -> bool:
    try:
        from pyspark.find_spark_home import _find_spark_home

        return any((Path(_find_spark_home()) / "jars").glob("spark-hive_*.jar"))
    except Exception:  # no Spark home to look in: assume the plain in-memory catalog
        return False


def run_export(spark: Any, cfg: ExportConfig) -> Any:
    """Load the configured source and write it with tfspark.write_tfrecords -> WriteResult."""
    from tfspark.workflow import write_tfrecords

    output = _check_output(cfg)
    df = load_source(spark, cfg)
    if cfg.backup_table and "." in cfg.backup_table:
        db = ".".join(f"`{p}`" for p in cfg.backup_table.split(".")[:-1])
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {db}")
    return write_tfrecords(df, output, **cfg.write_kwargs())


def _check_output(cfg: ExportConfig) -> str:
    if not cfg.output:
        raise OptionError("no output path: pass --output, or set 'output' in the --config file")
    return cfg.output


def _check_local_source(cfg: ExportConfig) -> None:
    """Fail before the (slow) Spark start when a local run names a file that is not there."""
    src = cfg.source
    if (src and cfg.master.startswith("local") and "://" not in src
            and cfg.source_kind() != "table" and not Path(src).exists()):
        raise OptionError(f"source {src!r} not found: no such file or directory")


def load_source(spark: Any, cfg: ExportConfig) -> Any:
    from pyspark.errors import AnalysisException

    src = cfg.source
    if src is None:
        from tfspark.sample import sample_dataframe

        return sample_dataframe(spark, rows=cfg.sample_rows, seed=cfg.seed)
    fmt = cfg.source_kind()
    try:
        if fmt == "table":
            if not spark.catalog.tableExists(src):
                raise OptionError(f"source {src!r} not found: no such table in the catalog "
                                  f"(warehouse {cfg.warehouse!r}) and no such file")
            return spark.table(src)
        if fmt == "csv":
            return spark.read.csv(src, header=cfg.csv_header, inferSchema=cfg.csv_infer_schema)
        return spark.read.parquet(src)
    except AnalysisException as e:
        first = str(e).strip().splitlines()[0]
        raise OptionError(f"cannot read source {src!r} as {fmt}: {first}") from None


# ---------------------------------------------------------------- commands

def _export(args: argparse.Namespace, demo: bool = False) -> int:
    if demo and not args.config and Path("conf/export.toml").exists():
        args.config = "conf/export.toml"
    cfg = config_from_args(args, base=DEMO if demo else None)
    _check_output(cfg)
    _check_local_source(cfg)
    spark = local_session(cfg)
    try:
        result = run_export(spark, cfg)
        print(result.summary())
        if demo and cfg.backup_table:
            n = spark.sql(f"SELECT COUNT(*) AS n FROM {cfg.backup_table}").first()["n"]
            print(f"\nSpark SQL: SELECT COUNT(*) FROM {cfg.backup_table} -> {n:,} rows")
    finally:
        spark.stop()
    if demo:
        split = "train" if "train" in result.splits else None
        print(f"\n3 decoded records{' of the train split' if split else ''}:")
        _print_records(result.path, 3, split)
        _demo_train(result.path)
    return 0


def _demo_train(path: str) -> None:
    """The second half of the main flow: train on what was exported (when TF is installed)."""
    import importlib.util

    if importlib.util.find_spec("tensorflow") is None:
        print("\nTensorFlow is not installed: skipping training (pip install 'tfspark[tf]')")
        return
    from tfspark.train import TrainConfig, load_train_config, train

    conf = Path("conf/train.toml")
    flags: dict[str, Any] = {"data": path, "epochs": 2,
                             "model_out": str(Path(path).parent / "model.keras")}
    cfg = load_train_config(conf, **flags) if conf.exists() else TrainConfig(
        exclude=("id",), **flags)
    print(f"\nTraining a Keras model on {path} (tfspark train):")
    train(cfg)


def _spec(args: argparse.Namespace) -> int:
    from tfspark.spec import infer_spec

    cfg = ExportConfig().with_overrides(
        master=args.master, warehouse=args.warehouse, label_cols=args.label_cols,
        source=args.table or args.parquet, source_format="table" if args.table else "parquet")
    _check_local_source(cfg)
    spark = local_session(cfg)
    try:
        spec = infer_spec(load_source(spark, cfg).schema, label_cols=cfg.label_cols)
    finally:
        spark.stop()
    name = args.table.split(".")[-1] if args.table else Path(args.parquet.rstrip("/")).stem
    out = Path(args.out or f"schemas/{name}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(spec.to_json() + "\n")
    print(out)
    return 0


def _inspect(args: argparse.Namespace) -> int:
    if args.records < 0:
        raise OptionError(f"--records must be >= 0, got {args.records}")
    if not _is_file(args.path):
        print(_describe(args.path))
    _print_records(args.path, args.records, args.split)
    return 0


def _describe(path: str) -> str:
    """Manifest counts per split and the spec as a table."""
    from tfspark.manifest import read_manifest

    m = read_manifest(path)
    lines = [f"{path}: {m['records']:,} {m.get('record_type', 'Example')} records in "
             f"{len(m['files'])} files, {m['bytes'] / 2**20:,.2f} MiB, "
             f"compression={m.get('compression') or 'none'}"]
    groups: dict[str, list[int]] = {}
    for f in m["files"]:
        part = ",".join(f"{k}={v}" for k, v in (f.get("partition") or {}).items())
        g = groups.setdefault("/".join(x for x in (f.get("split"), part) if x) or "(all)",
                              [0, 0, 0])
        g[0], g[1], g[2] = g[0] + 1, g[1] + f["records"], g[2] + f["bytes"]
    lines += _table(["split/partition", "files", "records", "MiB"],
                    [[k, n, f"{r:,}", f"{b / 2**20:,.2f}"] for k, (n, r, b) in groups.items()])
    if m.get("spec"):
        from tfspark.spec import FeatureSpec

        rows = [[f.name, f.kind, f.dtype, list(f.shape) if f.kind == "fixed" else "-",
                 f.source_type, "yes" if f.nullable else "no",
                 "-" if f.default is None else repr(f.default), "yes" if f.label else ""]
                for f in FeatureSpec.from_dict(m["spec"]).features]
        lines += ["", *_table(["feature", "kind", "dtype", "shape", "source type", "nullable",
                               "default", "label"], rows)]
    return "\n".join(lines) + "\n"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    cells = [header, *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]


def _print_records(path: str, n: int, split: str | None) -> None:
    for i, record in enumerate(_records(path, n, split)):
        print(f"record {i}:")
        for key, value in record.items():
            print(f"  {key}: {_fmt(value)}")


def _records(path: str, n: int, split: str | None):
    """The first n records of a data set (one split's when given), decoded with its spec."""
    from itertools import islice

    from tfspark.decode import decode_example, decode_with_spec
    from tfspark.framing import read_records

    if _is_file(path):  # a lone file: no manifest, so no spec; show the raw Example keys
        gz = "gzip" if path.endswith(".gz") else None
        yield from islice(map(decode_example, read_records(path, gz, path=path)), n)
        return
    from tfspark.fs import locate
    from tfspark.manifest import read_manifest
    from tfspark.spec import FeatureSpec

    loc = locate(path)
    m = read_manifest(loc)
    files = [f for f in m["files"] if split is None or f.get("split") == split]
    if split is not None and not files:
        raise OptionError(f"no split {split!r} in {path}; its splits are {m.get('splits')}")
    spec = FeatureSpec.from_dict(m["spec"]) if m.get("spec") else None
    for f in files:
        if n <= 0:
            return
        where = loc.join(f["path"])
        # compression=None: pyarrow would otherwise gunzip .gz files itself.
        with loc.fs.open_input_stream(where, compression=None) as stream:
            for data in islice(read_records(stream, m.get("compression"), path=where), n):
                n -= 1
                # Nulls show as None here; the spec table above says what a reader fills in.
                yield (decode_with_spec(data, spec, fill_defaults=False) if spec
                       else {"record": data})


def _is_file(path: str) -> bool:
    return "://" not in path and Path(path).is_file()


def _fmt(value: Any, width: int = 100) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        more = f", ... ({len(value)} values)" if len(value) > 8 else ""
        text = "[" + ", ".join(_fmt(v, width) for v in value[:8]) + more + "]"
    else:
        text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


if __name__ == "__main__":
    raise SystemExit(main())
