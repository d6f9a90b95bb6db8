"""`tfspark export|demo|spec|inspect|verify|train`: the command line (`python -m tfspark.cli`).

export and demo run a local Spark session whose catalog persists in a Derby metastore under the
warehouse directory, so the backup table is still there for the next session. inspect and verify
read a written data set with no Spark at all.

An error prints one line to stderr (`error: ...`, plus a `hint: ...` line where one helps) and
exits 2, or 130 when interrupted; Spark and JVM errors are cut down to their error class and
first message line. `--debug` prints the full traceback as well.
"""

from __future__ import annotations

import argparse
import errno
import os
import re
import sys
import traceback
from pathlib import Path
from typing import Any

from tfspark import __version__
from tfspark.config import KEYS, MODES, NULL_ELEMENTS, SOURCE_FORMATS, ExportConfig, load_config
from tfspark.errors import OptionError, TfsparkError

DEMO = ExportConfig(output="out/sample_tfrecords", mode="overwrite", label_cols=("label",),
                    compression="gzip", backup_table="tfspark_demo.sample_backup",
                    split={"train": 0.8, "validation": 0.1, "test": 0.1}, split_key="id")
_REPO_CONF = Path(__file__).resolve().parents[1] / "conf"

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130
_DEBUG_HINT = "run again with --debug for the full traceback"
_SPARK_HINT = "run again with --debug for the full Spark error and stack trace"

_EPILOG = """\
examples:
  tfspark demo                                   export the embedded sample, decode, train
  tfspark export --config conf/export.toml --source db.events --output out/events
  tfspark inspect out/events --records 5         manifest, spec table, 5 decoded records
  tfspark verify out/events                      check every CRC, count and record

Run `tfspark COMMAND --help` for a command's options. Exit status: 0 ok, 1 verify found
problems, 2 error, 130 interrupted. Add --debug for the full traceback of an error."""


def main(argv: list[str] | None = None) -> int:
    """Run the command line with `argv` (default: sys.argv[1:]); returns the exit status.

    Errors are reported on stderr as one line plus an optional hint (see `describe_error`)
    and give exit status 2 (130 for Ctrl-C); with --debug the traceback is printed first.
    """
    args = build_parser().parse_args(argv)
    debug = getattr(args, "debug", False)
    try:
        return args.run(args)
    except KeyboardInterrupt:
        if debug:
            traceback.print_exc()
        print("error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `tfspark inspect ... | head`: stop quietly
        _silence_stdout()
        return EXIT_ERROR
    except Exception as e:
        if debug:
            traceback.print_exc()
        if _interrupted(e):  # Ctrl-C, then a failed cleanup (e.g. stopping a dying Spark)
            print("error: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        message, hint = describe_error(e)
        print(f"error: {message}", file=sys.stderr)
        if hint and not (debug and "--debug" in hint):
            print(f"hint: {hint}", file=sys.stderr)
        return EXIT_ERROR


def build_parser() -> argparse.ArgumentParser:
    """The `tfspark` argument parser: global options and one subparser per command."""
    parser = argparse.ArgumentParser(
        prog="tfspark", epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Spark DataFrames -> TFRecord files of tf.train.Example, with a parquet copy\n"
                    "of the same rows and the feature spec alongside; inspect, verify and train\n"
                    "on the result.")
    parser.add_argument("--debug", action="store_true",
                        help="on an error, print the full traceback (also after COMMAND)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    # --debug after the command too; SUPPRESS keeps a subparser from resetting the global one.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="on an error, print the full traceback")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                title="commands")

    def command(name: str, help: str, description: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=description, parents=[common])

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
    add_export_args(p, config_help="(default: conf/export.toml when present, else built-in)")
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
    p = command("inspect", "summarize a data set and decode a few records",
                "Print a data set's manifest (records, files, MiB per split and partition), its "
                "feature spec as a table, and a few records decoded with it. Needs no Spark. "
                "A lone .tfrecord[.gz] file shows its raw Example keys.")
    p.add_argument("path", help="a directory written by tfspark, or one .tfrecord[.gz] file")
    p.add_argument("--records", type=int, default=3, help="records to decode (default 3)")
    p.add_argument("--split", help="decode records of this split only")
    p.set_defaults(run=_inspect)
    p = command("verify", "check every file, CRC, count and record; exit 1 on problems",
                "Read every file the manifest names, check both CRCs of every record, compare "
                "record counts with the manifest, parse every record with the spec and list "
                "stray data files. Needs no Spark. Exit status 1 when anything is wrong.")
    p.add_argument("path", help="a directory written by tfspark (or one of its splits)")
    p.set_defaults(run=_verify)
    p = command("train", "train a small Keras model on an exported data set",
                "Train a small Keras model on an exported data set with tf.data "
                "(tfspark.make_dataset). Needs TensorFlow: pip install 'tfspark[tf]'. Flags "
                "override the keys of --config.")
    p.add_argument("--config", default=None, metavar="TOML",
                   help="TOML of train settings (conf/train.toml)")
    p.add_argument("--data", help="exported data set directory")
    p.add_argument("--label", help="label feature (default: the spec's labels)")
    p.add_argument("--batch-size", type=int, help="examples per batch")
    p.add_argument("--epochs", type=int, help="passes over the train split")
    p.add_argument("--model-out", help="where to save the .keras model")
    p.set_defaults(run=_train)
    return parser


# ---------------------------------------------------------------- errors

_CONDITION = re.compile(r"^\[([A-Z][A-Z0-9_.]*)\]")
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\.?")
_JVM_FRAME = re.compile(r"^\s*(at |\.\.\. \d+ more|Suppressed: |Caused by: )")
_EXC_LINE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)"
                       r"\w*)(:.*)?$")
_MAX_LINE = 600


def describe_error(exc: BaseException) -> tuple[str, str | None]:
    """(one-line message, hint or None) that tell a command-line user what went wrong.

    tfspark errors keep their message (it already says what to do). Spark errors become
    `[ERROR_CLASS] message` (no SQLSTATE, query plan or JVM stack trace); an error raised in a
    Python worker becomes that worker's exception line. OS errors name the file. Anything else
    is `Type: message` with a hint to rerun with --debug.
    """
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", None
    if isinstance(exc, TfsparkError):
        return _first_line(str(exc)), None
    spark = _spark_error(exc)
    if spark is not None:
        return spark
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        where = f"{exc.filename}: {exc.strerror}"
        if isinstance(exc, FileNotFoundError):
            return where, f"check the path (relative paths start at {os.getcwd()})"
        if isinstance(exc, PermissionError):
            return where, "check the permissions of the file and its directory"
        return where, _DEBUG_HINT
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.split(".")[0]
        if top in ("tensorflow", "keras"):
            return (f"{top} is not installed",
                    "this command needs TensorFlow: pip install 'tfspark[tf]'")
        return f"{top} is not installed", f"install it (pip install {top}), or reinstall tfspark"
    text = _first_line(str(exc))
    if isinstance(exc, (OSError, ValueError)):
        return text or type(exc).__name__, _DEBUG_HINT
    return (f"{type(exc).__name__}: {text}" if text else type(exc).__name__,
            "run again with --debug for the full traceback; if it points into tfspark, "
            "please report it")


def _spark_error(exc: BaseException) -> tuple[str, str | None] | None:
    """describe_error for PySpark and py4j errors; None for anything else.

    Looked up in sys.modules: an error cannot come from Spark unless Spark was imported.
    """
    errors = sys.modules.get("pyspark.errors")
    protocol = sys.modules.get("py4j.protocol")
    if errors is None and protocol is None:
        return None
    # A converted JVM error asks the JVM for its text: that fails once the JVM is gone.
    text = _ask(lambda: str(exc), lambda: str(getattr(exc, "_desc", "") or repr(exc)))
    if errors is not None and isinstance(exc, errors.PySparkException):
        condition = _ask(exc.getCondition, lambda: None)
        message = _first_line(_ask(exc.getMessage, lambda: "") if condition else text) or \
            _first_line(text)
        if condition is None:  # a JVM error converted by PySpark: "[CLASS] message" text
            m = _CONDITION.match(message)
            condition = m.group(1) if m else None
        if condition == "JAVA_GATEWAY_EXITED" or "JAVA_HOME" in text:
            java = os.environ.get("JAVA_HOME")
            return (message,
                    "Spark needs Java 17+: install a JDK and put `java` on PATH or set "
                    f"JAVA_HOME{f' (now {java!r})' if java else ''}")
        if "Traceback (most recent call last)" in text:
            return _worker_error(text), _DEBUG_HINT
        if condition == "PATH_NOT_FOUND":
            return message, "check the path (a relative path starts at the working directory)"
        if condition in ("TABLE_OR_VIEW_NOT_FOUND", "SCHEMA_NOT_FOUND"):
            return message, ("check the name; local runs keep their catalog under --warehouse "
                             "(default ./warehouse)")
        return message, _SPARK_HINT
    if protocol is not None and isinstance(exc, protocol.Py4JNetworkError):
        return (_first_line(text) or type(exc).__name__,
                "the Spark driver JVM stopped answering (often out of memory: see its log "
                "above); give it more with spark.driver.memory")
    if protocol is not None and isinstance(exc, protocol.Py4JError):
        if "Traceback (most recent call last)" in text:
            return _worker_error(text), _DEBUG_HINT
        lines = [ln.strip() for ln in text.splitlines()
                 if ln.strip() and not _JVM_FRAME.match(ln)
                 and not ln.startswith("An error occurred while calling")]
        message = _clip(lines[0].lstrip(": ") if lines else type(exc).__name__)
        return message, _SPARK_HINT
    return None


def _ask(get: Any, fallback: Any) -> Any:
    try:
        return get()
    except Exception:
        return fallback()


def _worker_error(text: str) -> str:
    """The exception line of the last Python traceback inside a Spark error message."""
    tail = text.rsplit("Traceback (most recent call last)", 1)[-1].splitlines()[1:]
    for line in tail:
        if line.strip() and not line.startswith((" ", "\t")):
            m = _EXC_LINE.match(line.strip())
            return _clip(f"{m.group(1)}{m.group(2) or ''}" if m else line.strip())
    return _first_line(text)


def _first_line(text: str) -> str:
    """The first non-blank line, without Spark's SQLSTATE suffix, cut to a readable length."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return _clip(_SQLSTATE.sub("", line).rstrip(" ;"))


def _clip(line: str) -> str:
    return line if len(line) <= _MAX_LINE else line[:_MAX_LINE - 3] + "..."


def _interrupted(exc: BaseException) -> bool:
    """Whether a KeyboardInterrupt is among the exceptions that led to `exc`."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, KeyboardInterrupt):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the exit flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _missing_local_path(path: str) -> None:
    """Fail with FileNotFoundError when a local path (not a URI) does not exist."""
    if "://" not in path and not Path(path).exists():
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)


def _train(args: argparse.Namespace) -> int:
    from tfspark.train import TrainConfig, load_train_config, train

    flags: dict[str, Any] = {k: v for k, v in (("data", args.data), ("label", args.label),
                               ("batch_size", args.batch_size), ("epochs", args.epochs),
                               ("model_out", args.model_out)) if v is not None}
    cfg = load_train_config(args.config, **flags) if args.config else TrainConfig(**flags)
    _missing_local_path(cfg.data)
    train(cfg)
    return 0


def _verify(args: argparse.Namespace) -> int:
    from tfspark.verify import verify

    _missing_local_path(args.path)
    report = verify(args.path)
    print(report.render())
    return 0 if report.ok else 1


def add_export_args(p: argparse.ArgumentParser, config_help: str = "") -> None:
    """The export flags, shared with jobs/export_tfrecords.py; each overrides a config key."""
    p.add_argument("--config", metavar="TOML",
                   help=f"TOML file of ExportConfig keys {config_help}".strip())
    p.add_argument("--source", help="table name, parquet/CSV file or directory (default: sample)")
    p.add_argument("--source-format", choices=SOURCE_FORMATS,
                   help="how to read --source (default auto: guessed from the name)")
    p.add_argument("--output", help="output directory or URI of the TFRecords")
    p.add_argument("--mode", choices=MODES,
                   help="when --output exists (default errorifexists)")
    p.add_argument("--label-cols", help="comma-separated label columns")
    p.add_argument("--compression", choices=("gzip", "none"),
                   help="of the TFRecord files (default none)")
    p.add_argument("--backup-table", help="catalog table of the parquet copy, e.g. db.name")
    p.add_argument("--backup-path", help="parquet directory of the copy (instead of a table)")
    p.add_argument("--split", help="e.g. train=0.8,validation=0.1,test=0.1")
    p.add_argument("--split-key", help="column whose hash assigns rows to splits")
    p.add_argument("--seed", type=int,
                   help="seed of the split and shuffle draws and of the sample (default 0)")
    p.add_argument("--shuffle", action=argparse.BooleanOptionalAction, default=None,
                   help="shuffle rows randomly across the files (a Spark shuffle; default no)")
    p.add_argument("--target-file-mb", type=float,
                   help="TFRecord file size to aim for (default 128)")
    p.add_argument("--max-records-per-file", type=int,
                   help="start a new file after this many records")
    p.add_argument("--partition-by", help="comma-separated columns, one directory per value")
    p.add_argument("--null-elements", choices=NULL_ELEMENTS,
                   help="a null inside an array: fail (default) or drop the element")
    p.add_argument("--sample-rows", type=int, help="rows of the embedded sample")
    p.add_argument("--master", help="Spark master of the local session (default local[*])")
    p.add_argument("--warehouse", help="spark.sql.warehouse.dir and metastore directory")
    p.add_argument("--app-name", help="Spark application name (default tfspark-export)")


def config_from_args(args: argparse.Namespace, base: ExportConfig | None = None) -> ExportConfig:
    """The ExportConfig of parsed export flags: --config (else `base`, else defaults), then every
    flag that was given on top. Raises OptionError for a bad file, key or value.
    """
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
    """The DataFrame of cfg.source: the embedded sample when None, else a catalog table, CSV or
    parquet (cfg.source_kind()). Raises OptionError when it is missing or unreadable.
    """
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
    _missing_local_path(args.path)
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
