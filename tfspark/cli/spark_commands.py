"""`tfspark export|demo|spec`: the commands that run Spark (a local session, cli.session),
and the export flags they share with jobs/export_tfrecords.py."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tfspark.cli import inspect
from tfspark.cli.config import (
    KEYS,
    SOURCE_FORMATS,
    WRITE_KEYS,
    ExportConfig,
    add_store_arg,
    load_config,
    packaged,
    store_table,
)
from tfspark.errors import install, require
from tfspark.quiet import stderr_filtered

SAMPLE_OUTPUT = "tfspark_sample/tfrecords"  # where `tfspark export` puts the sample by default
def write_commands(command: Any) -> None:
    """export, demo and spec: the commands that run Spark."""
    p = command("export", "a table, parquet or CSV -> parquet backup + TFRecords",
                "Read a catalog table, parquet or CSV (default: the embedded sample), write its "
                "parquet backup, then the TFRecords with their spec and manifest, and print a "
                "summary. Every flag overrides the key of the same name in --config.")
    add_export_args(p)
    p.set_defaults(run=_export)
    p = command("demo", "export the embedded sample, then query, decode and train on it",
                "The main flow on embedded sample data: export it (local Spark, backup table in "
                "./warehouse), count the backup with Spark SQL, decode 3 records, then train a "
                "small Keras model when TensorFlow is installed. Takes the export flags.")
    add_export_args(p, config_help="(default: the one --print-config prints)")
    p.set_defaults(run=lambda args: _export(args, demo=True))
    p = command("spec", "infer the feature spec of a table or parquet files",
                "Infer the feature spec (JSON) from the schema of a catalog table or parquet "
                "files. export also finds fixed-length arrays in the data; this looks at the "
                "schema only.")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--table", help="catalog table name")
    what.add_argument("--parquet", help="parquet file or directory")
    p.add_argument("--label-cols", help="comma-separated label columns")
    p.add_argument("--out", help="where to write the JSON (default: schemas/<name>.json)")
    p.add_argument("--master", help="Spark master (default local[*])")
    p.add_argument("--warehouse", help="warehouse directory holding the metastore")
    p.set_defaults(run=_spec)


def add_export_args(p: argparse.ArgumentParser, config_help: str = "") -> None:
    """The export flags, shared with jobs/export_tfrecords.py; each overrides the config key of
    the same name. The write settings' flags come from their table (WriteOptions)."""
    p.add_argument("--config", metavar="TOML",
                   help=f"TOML file of ExportConfig keys {config_help}".strip())
    p.add_argument("--print-config", action="store_true",
                   help="print a commented config file to start from (the demo's), and exit: "
                        "tfspark export --print-config > export.toml")
    p.add_argument("--source", help="table name, parquet/CSV file or directory (default: sample)")
    p.add_argument("--source-format", choices=SOURCE_FORMATS,
                   help="how to read --source (default auto: guessed from the name)")
    p.add_argument("--output", help="output directory or URI of the TFRecords")
    for key, t in WRITE_KEYS.items():
        flag = "--" + key.replace("_", "-")
        default = t.config_value if t.config_value not in (None, ()) else "none"
        text = f"{t.help} (default {default})"
        if t.typed is bool:
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=text)
        else:
            p.add_argument(flag, type=float if t.config else (t.typed or str), help=text,
                           choices=None if t.typed else _choices(t))
    p.add_argument("--sample-rows", type=int,
                   help=f"rows of the embedded sample (default {ExportConfig().sample_rows:,})")
    p.add_argument("--master", help="Spark master of the local session (default local[*])")
    p.add_argument("--warehouse", help="spark.sql.warehouse.dir and metastore directory")
    p.add_argument("--app-name", help="Spark application name (default tfspark-export)")
    add_store_arg(p)


def _choices(t: Any) -> list[str] | None:
    """argparse choices of a setting, as its values are spelled (any case is accepted by the
    setting's check; argparse is strict, so both spellings are listed only where they differ)."""
    if not t.choices:
        return None
    return sorted({*t.choices, *(c.lower() for c in t.choices)})


def config_from_args(args: argparse.Namespace, base: ExportConfig | None = None) -> ExportConfig:
    """The ExportConfig of parsed export flags: --config (else `base`, else defaults), then every
    flag that was given on top. Raises OptionError for a bad file, key or value.
    """
    cfg = load_config(args.config) if args.config else (base or ExportConfig())
    flags = {k: getattr(args, k) for k in KEYS if hasattr(args, k) and k != "store"}
    if getattr(args, "store", None):
        flags["store"] = store_table(args.store)
    return cfg.with_overrides(**flags)


def _export(args: argparse.Namespace, demo: bool = False) -> int:
    if args.print_config:
        print(packaged("export.toml").read_text(), end="")
        return 0
    require("pyspark", f"tfspark {'demo' if demo else 'export'}", "spark")
    from tfspark.cli.session import check_local_source, local_session, run_export, stop

    cfg = config_from_args(args, base=load_config(packaged("export.toml")) if demo else None)
    if cfg.output is None and cfg.source is None:  # the embedded sample: a path of its own
        cfg = cfg.with_overrides(output=SAMPLE_OUTPUT)
        print(f"tfspark export: no --output given: the embedded sample goes to "
              f"{Path(SAMPLE_OUTPUT).resolve()}")
    cfg.write_options()  # bad settings fail here, before the (slow) Spark start
    cfg.filesystem()
    check_local_source(cfg)
    spark = local_session(cfg, verbose=args.verbose)
    try:
        result = run_export(spark, cfg)
        print(result.summary())
        if demo and cfg.backup_table:
            n = spark.sql(f"SELECT COUNT(*) AS n FROM {cfg.backup_table}").first()["n"]
            print(f"\nSpark SQL: SELECT COUNT(*) FROM {cfg.backup_table} -> {n:,} rows")
    except BaseException:
        stop(spark, quietly=True)  # the JVM logs every job it aborts: the error says it all
        raise
    stop(spark)
    if demo:
        split = "train" if "train" in result.splits else None
        print(f"\n3 decoded records{' of the train split' if split else ''}:")
        inspect.print_records(result.path, 3, split)
        _demo_train(result.path, args.verbose)
    return 0


def _demo_train(path: str, verbose: bool) -> None:
    """The second half of the main flow: train on what was exported (when TF is installed)."""
    import importlib.util

    if importlib.util.find_spec("tensorflow") is None:
        print(f"\nTensorFlow is not installed: skipping training ({install('tf')}; or train "
              f"on JAX: tfspark train {path} --backend jax)")
        return
    from tfspark.cli.config import load_train_config
    from tfspark.cli.train import train

    flags: dict[str, Any] = {"data": path, "epochs": 2,
                             "model_out": str(Path(path).parent / "model.keras")}
    if verbose:
        flags["verbose"] = 1
    cfg = load_train_config(packaged("train.toml"), **flags)
    print(f"\nTraining a Keras model on {path} (tfspark train):")
    with stderr_filtered(verbose, drain=True):  # TensorFlow's C++ start-up notices
        train(cfg)


def _spec(args: argparse.Namespace) -> int:
    require("pyspark", "tfspark spec", "spark")
    from tfspark.cli.session import check_local_source, load_source, local_session, stop
    from tfspark.spec import infer_spec

    cfg = ExportConfig().with_overrides(
        master=args.master, warehouse=args.warehouse, label_cols=args.label_cols,
        source=args.table or args.parquet, source_format="table" if args.table else "parquet")
    check_local_source(cfg)
    spark = local_session(cfg, verbose=args.verbose)
    try:
        spec = infer_spec(load_source(spark, cfg).schema, label_cols=cfg.label_cols)
    finally:
        stop(spark)
    name = args.table.split(".")[-1] if args.table else Path(args.parquet.rstrip("/")).stem
    out = Path(args.out or f"schemas/{name}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(spec.to_json() + "\n")
    print(out)
    return 0
