"""The Spark side of the command line: a local session with a persistent catalog, the export
source (the embedded sample, a catalog table, CSV or parquet), and the export itself."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from tfspark.cli.config import ExportConfig
from tfspark.errors import OptionError
from tfspark.quiet import stderr_filtered
from tfspark.store.uris import redact, redact_text

_REPO_CONF = Path(__file__).resolve().parents[2] / "conf"
_PACKAGED = Path(__file__).resolve().parent  # log4j2.properties, a copy of conf/'s


def local_session(cfg: ExportConfig, verbose: bool = False) -> Any:
    """A local SparkSession with a persistent catalog (Hive + Derby) under cfg.warehouse; the
    JVM's start-up notices left out of its stderr unless verbose (tfspark.quiet)."""
    from pyspark.sql import SparkSession

    warehouse = Path(cfg.warehouse).resolve()
    warehouse.mkdir(parents=True, exist_ok=True)
    # Python workers run PYSPARK_PYTHON, not this interpreter, unless told.
    python = os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if cfg.master.startswith("local"):  # else Spark warns the hostname is a loopback address
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    conf_dir = next((d for d in (Path("conf").resolve(), _REPO_CONF)
                     if (d / "spark-defaults.conf").exists()), None)
    if conf_dir is not None:
        os.environ.setdefault("SPARK_CONF_DIR", str(conf_dir))
    # derby.log and the metastore stay in the warehouse, not in the working directory.
    java_opts = [f"-Dderby.system.home={warehouse}"]
    # The quiet logging of conf/, else the copy that ships in the package (an installed wheel
    # has no conf/): Spark's own default prints start-up warnings no user needs.
    log4j = next((p for p in ((conf_dir or _PACKAGED) / "log4j2.properties",
                              _PACKAGED / "log4j2.properties") if p.exists()), None)
    if log4j is not None:
        java_opts.append(f"-Dlog4j2.configurationFile={log4j.as_uri()}")
    builder = (SparkSession.builder.master(cfg.master).appName(cfg.app_name)
               .config("spark.pyspark.python", python)
               .config("spark.sql.warehouse.dir", str(warehouse))
               # Spark's stage bar redraws itself on a terminal; elsewhere (a pipe, a CI log)
               # every redraw is one more piece of a line
               .config("spark.ui.showConsoleProgress", str(_terminal()).lower())
               # errors of the data source's planner: tfspark's own line, no traceback
               .config("spark.sql.execution.pyspark.udf.hideTraceback.enabled", "true")
               # Spark splits these as a shell would: quoted, a path may hold spaces.
               .config("spark.driver.extraJavaOptions", " ".join(map(_quoted, java_opts))))
    if _hive_available():
        # Without Hive the catalog is in memory and the backup table is gone with the session.
        url = f"jdbc:derby:;databaseName={warehouse / 'metastore_db'};create=true"
        builder = builder.enableHiveSupport().config(
            "spark.hadoop.javax.jdo.option.ConnectionURL", url)
    with stderr_filtered(verbose):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _interrupt_handler(spark))
    return spark


def _terminal() -> bool:
    """Whether standard error is a terminal."""
    try:
        return os.isatty(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):  # replaced by an object without a file
        return False


def _interrupt_handler(spark: Any) -> Any:
    """Ctrl-C: silence the JVM's log (which would print a stack trace for every job it
    aborts), then a plain KeyboardInterrupt; the session is stopped as the command unwinds.
    PySpark's own handler instead calls into the JVM on the connection of the interrupted
    call, and py4j logs reentrancy tracebacks. The log level is set from a thread of its own,
    which gets a connection of its own."""
    def handler(signum: int, frame: Any) -> None:
        quiet = threading.Thread(target=lambda: silence_jvm(spark), daemon=True)
        quiet.start()
        quiet.join(timeout=10)
        raise KeyboardInterrupt

    return handler


def silence_jvm(spark: Any) -> None:
    """Every JVM logger off, those with a level of their own too (setLogLevel only sets the
    root's, and conf's log4j2.properties gives org.apache.spark.util.Utils, which logs
    "Aborting task" with a stack trace, a level of its own)."""
    jvm = spark.sparkContext._jvm
    log4j = jvm.org.apache.logging.log4j
    log4j.core.config.Configurator.setAllLevels(log4j.LogManager.ROOT_LOGGER_NAME,
                                                log4j.Level.OFF)


def stop(spark: Any, quietly: bool = False) -> None:
    """Stop the session; quietly: after a failure or Ctrl-C, without the JVM's log of the jobs
    it aborts (and without a second error if the JVM is already gone)."""
    try:
        if quietly:
            silence_jvm(spark)
        spark.stop()
    except Exception:  # noqa: BLE001 - the command's own error is the one to report
        if not quietly:
            raise


def _quoted(arg: str) -> str:
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _hive_available() -> bool:
    try:
        from pyspark.find_spark_home import _find_spark_home

        return any((Path(_find_spark_home()) / "jars").glob("spark-hive_*.jar"))
    except Exception:  # no Spark home to look in: assume the plain in-memory catalog
        return False


def run_export(spark: Any, cfg: ExportConfig) -> Any:
    """Load the configured source and write it as write_tfrecords does -> WriteResult."""
    from tfspark.spark.export import export
    from tfspark.spark.hadoop_stores import hadoop_store

    filesystem = cfg.filesystem()
    if filesystem is None and cfg.output:  # s3a://, abfss://, gs://: Spark's Hadoop settings
        output, filesystem, kept = hadoop_store(spark, cfg.output,
                                                {"backup_path": cfg.backup_path})
        cfg = cfg.with_overrides(output=output, backup_path=kept["backup_path"])
    opts = cfg.write_options()
    return export(load_source(spark, cfg), opts, filesystem)


def check_local_source(cfg: ExportConfig) -> None:
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
        from tfspark.spark.sample import sample_dataframe

        return sample_dataframe(spark, rows=cfg.sample_rows, seed=cfg.seed)
    fmt = cfg.source_kind()
    if fmt != "table":
        check_source_scheme(spark, src)
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
        raise OptionError(f"cannot read source {redact(src)!r} as {fmt}: "
                          f"{redact_text(first)}") from None


def check_source_scheme(spark: Any, src: str) -> None:
    """A source URI that Spark has no Hadoop file system for fails here in one line, not in a
    JVM stack trace: Spark reads the source, not tfspark's pyarrow layer (so neither a
    [store] table nor a URI's ?options reach that read)."""
    if "://" not in src or src.startswith("file:"):
        return
    scheme = src.split("://", 1)[0].lower()
    try:
        jvm, conf = spark._jvm, spark._jsc.hadoopConfiguration()
    except Exception:  # Spark Connect: no JVM here; the server says it itself
        return
    try:
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, conf)
    except Exception:
        raise OptionError(
            f"cannot read source {redact(src)!r}: Spark reads the source through its Hadoop "
            f"file systems, and this Spark has none for {scheme}:// (tfspark's [store] settings "
            f"and a URI's ?options are not seen there); use a scheme this Spark is set up for "
            f"(on a cluster e.g. s3a://, gs://, abfss://), or copy the files to a local path"
        ) from None
