"""A Spark driver in a process of its own, for the driver-fault tests (test_driver_faults.py and
test_s3_faults.py). Not a test module: the tests run it with this venv's Python, then SIGKILL it
in the middle of a write, race two of them on one path, or let it inject a fault itself.

    python fault_driver.py kill-target --work DIR --ds-new P --ds-old P --wf-new P --wf-old P
        four slowed writes at once (data source and write_tfrecords; errorifexists to a new
        path, overwrite of a committed data set); prints WRITING; the test kills it
    python fault_driver.py kill-tfrecords --work DIR --path P --rows N
        write_tfrecords(mode="overwrite") of a fast source over the committed data set at P,
        its TFRecord stage slowed (Arrow batches of one row); prints WRITING; the test kills it
        once TFRecord part files appear
    python fault_driver.py kill-commit --work DIR --path P --rows N [--backup-table T --metastore D]
        write_tfrecords(mode="overwrite") over the committed data set at P, held at its commit
        (prints COMMITTING); the test kills it
    python fault_driver.py table --work DIR --path P --backup-table T --metastore D
            [--mode M --start A --end B]
        write_tfrecords of ids [A, B) with its backup in table T of a Hive catalog under D;
        prints TABLES: the tables of T's database and T's ids (and BEFORE: the same before
        a write to a table that exists)
    python fault_driver.py race --work DIR --role NAME --peers A,B --plan PLAN.json --sync DIR
        the rounds of PLAN.json, each started at a barrier (a file per peer in --sync), one
        JSON line per round on stdout: {"round", "role", "ok", "error", "error_type"}
    python fault_driver.py s3 --work DIR --uri URI --rounds K --rows N
        local[2,4]; per round, a slowed write to URI-k during which a Python writer of this
        driver is SIGKILLed; then a write whose every task attempt fails; JSON lines on stdout
    python fault_driver.py writes --work DIR --plan PLAN.json
        one write_tfrecords per target of PLAN.json ({"mode", "rows": [lo, hi], "targets":
        [{"store": "local|s3|gcs|azurite", "path", "fs": {filesystem arguments}}]}), in a
        Spark application of its own; one JSON line per target: {"path", "rows", "backup_rows"}

Every line it prints for the tests starts with "@@ " (Spark's own output goes to stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import pandas as pd  # module level: pandas_udf resolves the type hints in these globals
from faultcheck import descendants  # this script's directory is on sys.path

SLEEP_PER_BATCH = 0.2  # seconds the source's pandas UDF sleeps per Arrow batch


def say(kind: str, **fields: Any) -> None:
    print("@@ " + json.dumps({"kind": kind, **fields}), flush=True)


def session(work: Path, master: str, batch_rows: int, extra: dict[str, str] | None = None) -> Any:
    from pyspark.sql import SparkSession

    derby = work / "derby"
    derby.mkdir(parents=True, exist_ok=True)
    builder = (SparkSession.builder.master(master).appName("tfspark-fault-driver")
               .config("spark.pyspark.python", sys.executable)
               .config("spark.pyspark.driver.python", sys.executable)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(batch_rows))
               # The JVM buffers what it sends a Python worker (64 KiB by default): the data
               # source writer would get a task's small slowed batches all at once at its end.
               # 1 KiB: it gets each batch as it comes, so its part file is open all along.
               .config("spark.buffer.size", "1024")
               .config("spark.sql.warehouse.dir", str(work / "warehouse"))
               .config("spark.local.dir", str(work / "local"))
               .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={derby}"))
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    import tfspark

    tfspark.register(spark)
    return spark


def slowed(spark: Any, start: int, end: int, partitions: int,
           sleep: float = SLEEP_PER_BATCH) -> Any:
    """id, v = 3 * id, s = "s<id>": ids go through a pandas UDF that sleeps per Arrow batch,
    so each task writes for a while and a kill lands in the middle of a write."""
    from pyspark.sql import functions as F

    @F.pandas_udf("long")
    def slow(v: pd.Series) -> pd.Series:
        import time as _time

        _time.sleep(sleep)
        return v

    return spark.range(start, end, numPartitions=partitions).select(
        slow("id").alias("id"), (F.col("id") * 3).alias("v"),
        F.concat(F.lit("s"), F.col("id").cast("string")).alias("s"))


def write(df: Any, engine: str, out: str, mode: str) -> Any:
    """One write of `df` to `out` in `mode`, through the data source or write_tfrecords."""
    import tfspark

    if engine == "workflow":
        return tfspark.write_tfrecords(df, out, mode=mode)
    writer = df.write.format("tfrecord")
    if mode in ("append", "overwrite"):
        writer = writer.mode(mode)
    else:  # Spark refuses errorifexists/ignore for Python sources: the option carries it
        writer = writer.mode("append").option("mode", mode)
    return writer.save(out)


# ---- kill-target: a driver the test kills mid-write


def kill_target(args: argparse.Namespace) -> int:
    """Four writes at once, each from its own thread (a job of 1 task; local[4] runs all 4
    tasks together): through the data source and through write_tfrecords, each errorifexists
    to a new path and overwrite of a committed data set. The test kills this driver once all
    four have part files on disk: one driver start covers the four cases. (write_tfrecords is
    then writing its parquet backup, its pass over the slowed source.)"""
    spark = session(Path(args.work), "local[4]", args.batch_rows)
    jobs = []
    for engine, out, mode in (("datasource", args.ds_new, "errorifexists"),
                              ("datasource", args.ds_old, "overwrite"),
                              ("workflow", args.wf_new, "errorifexists"),
                              ("workflow", args.wf_old, "overwrite")):
        if not out:
            continue
        df = slowed(spark, 0, args.rows, args.partitions, args.sleep)

        def run(df: Any = df, engine: str = engine, out: str = out, mode: str = mode) -> None:
            import tfspark

            tfspark.register(spark)  # this thread's active session
            write(df, engine, out, mode)
            say("DONE", out=out, t=time.time())  # the test kills this driver before this

        jobs.append(threading.Thread(target=run, daemon=True))
    say("WRITING", pid=os.getpid(), t=time.time())
    for job in jobs:
        job.start()
    for job in jobs:
        job.join()
    spark.stop()
    return 0


def kill_tfrecords(args: argparse.Namespace) -> int:
    """A slow overwrite: its tasks get Arrow batches of one row, so the test can kill this
    driver while they write TFRecords and the staged parquet copy, before the commit."""
    return _overwrite(args, batch_rows=1, hold=False)


def kill_commit(args: argparse.Namespace) -> int:
    """An overwrite held at the start of its commit: every task has written its TFRecords and
    its file of the staged parquet copy, and the driver is about to write the manifest. The
    write's own progress line of the commit stage says COMMITTING and waits, so the test can
    kill this driver between the pass over the rows and the commit."""
    return _overwrite(args, batch_rows=args.batch_rows, hold=True)


def _overwrite(args: argparse.Namespace, *, batch_rows: int, hold: bool) -> int:
    """write_tfrecords(mode="overwrite") of args.rows rows to args.path (its backup in
    args.backup_table when given), saying WRITING first and DONE after (the tests kill this
    driver before DONE); hold: wait at the commit."""
    import logging

    import tfspark

    table = getattr(args, "backup_table", None)
    spark = session(Path(args.work), "local[2]", batch_rows,
                    hive(Path(args.metastore)) if table else None)
    from pyspark.sql import functions as F

    class Hold(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("tfspark: commit ..."):
                say("COMMITTING", pid=os.getpid(), t=time.time())
                time.sleep(600)  # killed here

    if hold:
        log = logging.getLogger("tfspark.progress")
        log.setLevel(logging.INFO)
        log.addHandler(Hold())
    df = spark.range(0, args.rows, numPartitions=2).select(
        "id", (F.col("id") * 3).alias("v"), F.concat(F.lit("s"), F.col("id").cast("string"))
        .alias("s"))
    say("WRITING", pid=os.getpid(), t=time.time())
    if table:
        tfspark.write_tfrecords(df, args.path, mode="overwrite", backup_table=table)
    else:
        write(df, "workflow", args.path, "overwrite")
    say("DONE", out=args.path, t=time.time())  # the test kills this driver before this
    spark.stop()
    return 0


def hive(metastore: Path) -> dict[str, str]:
    """A Hive catalog (Derby) and warehouse under `metastore`, shared by the drivers of one
    test one after another: a backup table outlives the driver that wrote it."""
    url = f"jdbc:derby:;databaseName={metastore / 'metastore_db'};create=true"
    return {"spark.sql.catalogImplementation": "hive",
            "spark.hadoop.javax.jdo.option.ConnectionURL": url,
            "spark.sql.warehouse.dir": str(metastore / "warehouse")}


def table(args: argparse.Namespace) -> int:
    """write_tfrecords of ids [args.start, args.end) to args.path in args.mode with its backup
    in args.backup_table (a Hive catalog under args.metastore); then one TABLES line: the
    tables of the backup's database and the backup's ids (sorted). Before a write to a table
    that exists, the same as a BEFORE line."""
    import tfspark

    spark = session(Path(args.work), "local[2]", args.batch_rows, hive(Path(args.metastore)))
    from pyspark.sql import functions as F

    db = args.backup_table.rpartition(".")[0]

    def catalog() -> dict[str, Any]:
        return {"tables": sorted(t.name for t in spark.catalog.listTables(db)),
                "ids": sorted(r[0] for r in spark.table(args.backup_table).select("id").collect())}

    if args.end > args.start:
        if spark.catalog.tableExists(args.backup_table):
            say("BEFORE", **catalog())
        df = spark.range(args.start, args.end, numPartitions=2).select(
            "id", (F.col("id") * 3).alias("v"),
            F.concat(F.lit("s"), F.col("id").cast("string")).alias("s"))
        tfspark.write_tfrecords(df, args.path, mode=args.mode, backup_table=args.backup_table)
    say("TABLES", **catalog())
    spark.stop()
    return 0


# ---- race: two drivers, the same path, the same moment


def barrier(sync: Path, name: str, role: str, peers: list[str], timeout: float = 300) -> None:
    (sync / f"{name}.{role}").touch()
    deadline = time.monotonic() + timeout
    while not all((sync / f"{name}.{p}").exists() for p in peers):
        if time.monotonic() > deadline:
            raise TimeoutError(f"barrier {name}: peers {peers} did not all arrive")
        time.sleep(0.01)


def race(args: argparse.Namespace) -> int:
    plan = json.loads(Path(args.plan).read_text())
    sync = Path(args.sync)
    sync.mkdir(parents=True, exist_ok=True)
    peers = args.peers.split(",")
    spark = session(Path(args.work), "local[2]", args.batch_rows)
    for k, rnd in enumerate(plan["rounds"]):
        start, end = rnd["rows"][args.role]
        df = slowed(spark, start, end, rnd.get("partitions", 1))
        barrier(sync, f"start-{k}", args.role, peers)
        began = time.time()
        mode = rnd["modes"][args.role]
        outcome: dict[str, Any] = {"round": k, "role": args.role, "mode": mode,
                                   "engine": rnd["engine"], "rows": [start, end]}
        try:
            write(df, rnd["engine"], rnd["path"], mode)
            outcome.update(ok=True, error=None, error_type=None)
        except Exception as e:  # noqa: BLE001 - reported to the test, which judges it
            outcome.update(ok=False, error=str(e), error_type=type(e).__name__)
        outcome.update(started=began, ended=time.time())
        say("ROUND", **outcome)
        barrier(sync, f"end-{k}", args.role, peers)
    spark.stop()
    return 0


# ---- s3: a Python writer killed mid-write, then a job that fails on every attempt


def data_source_writers() -> list[int]:
    """Python task workers of this driver running the data source's write(): forked by the
    `pyspark.daemon pyspark.worker` daemon (not the driver-side planner/commit daemons) and
    with tfspark's kernels loaded (numba's llvmlite library in /proc/PID/maps), which the
    UDF's workers never import. Workers are not reused (spark.python.worker.reuse=false below), so
    no idle worker of an earlier task qualifies."""
    found = []
    for pid in descendants(os.getpid()):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        if "pyspark.worker" in cmd and "data_source" not in cmd and "llvmlite" in maps:
            found.append(pid)
    return found


def _started(pid: int) -> int:
    """When the process started (clock ticks after boot; /proc/PID/stat field 22)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return 0


def _part_objects(uri: str) -> list[str]:
    from tfspark.store.fs import locate

    return [r for r in locate(uri).list_files() if "part-" in r and ".tfrecord" in r]


def _kill_round(spark: Any, args: argparse.Namespace, k: int, attempt: int) -> dict[str, Any]:
    """One slowed write to the round's URI with one of its writers killed mid-write."""
    sc = spark.sparkContext
    uri = args.uri.replace("{k}", str(k) if attempt == 0 else f"{k}-again{attempt}")
    group = f"s3-kill-{k}-{attempt}"
    df = slowed(spark, 0, args.rows, args.partitions)
    outcome: dict[str, Any] = {}

    def job(uri: str = uri, group: str = group, df: Any = df,
            outcome: dict[str, Any] = outcome) -> None:
        import tfspark

        sc.setJobGroup(group, group)
        tfspark.register(spark)  # this thread's active session
        try:
            df.write.format("tfrecord").mode("overwrite") \
                .option("maxRecordsPerFile", str(args.records_per_file)).save(uri)
        except BaseException as e:  # noqa: BLE001 - reported
            outcome["error"] = f"{type(e).__name__}: {e}"

    started = time.perf_counter()
    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    victim, before = None, []
    deadline = time.monotonic() + 180
    # Kill a writer once this write has part objects in the bucket (so the killed attempt
    # may have finished some of its files, which the commit must not list).
    while thread.is_alive() and time.monotonic() < deadline:
        writers = data_source_writers()
        if writers and _part_objects(uri):
            # An object appears when a file closes; the next one opens with the next Arrow
            # batch, so wait for about one batch: the kill then lands inside a file.
            time.sleep(SLEEP_PER_BATCH * 1.5)
            writers = data_source_writers()
            if not writers:
                continue
            before = _part_objects(uri)
            victim = max(writers, key=_started)  # the youngest: furthest from its end
            os.kill(victim, signal.SIGKILL)
            break
        time.sleep(0.05)
    killed_after = time.perf_counter() - started
    thread.join(timeout=300)
    tracker = sc.statusTracker()
    failed = 0
    for jid in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(jid)
        for stage in info.stageIds if info else []:
            s = tracker.getStageInfo(stage)
            failed += s.numFailedTasks if s else 0
    return dict(round=k, attempt=attempt, uri=uri, victim=victim,
                killed_after_s=round(killed_after, 2), objects_before_kill=len(before),
                job_s=round(time.perf_counter() - started, 2), failed_tasks=failed,
                error=outcome.get("error"))


def s3(args: argparse.Namespace) -> int:
    extra = {"spark.python.worker.reuse": "false"}
    spark = session(Path(args.work), "local[2,4]", args.batch_rows, extra)
    for k in range(args.rounds):
        # The kill must fail a task: on a loaded machine it can land on a writer already past
        # its last row (its task then succeeds), so the round is written again, to a new
        # prefix, up to twice; each attempt's data set is checked by the test.
        for attempt in range(3):
            got = _kill_round(spark, args, k, attempt)
            say("KILL", **got)
            if got["failed_tasks"] >= 1 or got["error"]:
                break
    # A job whose every task attempt fails after writing a few files (its first Arrow batch of
    # 500 rows goes out in files of 100 records): nothing may be left behind.
    from pyspark.sql import functions as F

    @F.udf("long")
    def boom(v: int) -> int:
        if v % 1000 >= 600:
            raise ValueError(f"injected failure at id {v}")
        return v

    uri = args.uri.replace("{k}", "failed")
    df = spark.range(0, 1000, numPartitions=1).select(boom("id").alias("id"))
    try:
        df.write.format("tfrecord").mode("overwrite").option("maxRecordsPerFile", "100") \
            .save(uri)
        say("FAILED_JOB", uri=uri, error=None)
    except Exception as e:  # noqa: BLE001 - expected
        say("FAILED_JOB", uri=uri, error=f"{type(e).__name__}: {str(e)[:2000]}")
    spark.stop()
    return 0


# ---- writes: one application's writes to several stores (appends across applications)


def target_filesystem(target: dict[str, Any]) -> Any:
    """The pyarrow filesystem a plan's target names (None: a local path or a URI)."""
    import pyarrow.fs as pafs

    kw = dict(target.get("fs") or {})
    store = target["store"]
    if store == "gcs":
        return pafs.GcsFileSystem(**kw)
    if store == "s3" and kw:
        return pafs.S3FileSystem(**kw)
    if store == "azurite":
        return pafs.AzureFileSystem(kw.pop("account_name"), **kw)
    return None


def writes(args: argparse.Namespace) -> int:
    import tfspark

    plan = json.loads(Path(args.plan).read_text())
    spark = session(Path(args.work), "local[2]", args.batch_rows)
    from pyspark.sql import functions as F

    lo, hi = plan["rows"]
    df = spark.range(lo, hi, numPartitions=plan.get("partitions", 2)).select(
        "id", (F.col("id") % 3).alias("y"), (F.col("id") * 0.25).alias("x"))
    for target in plan["targets"]:
        result = tfspark.write_tfrecords(df, target["path"], mode=plan["mode"],
                                         filesystem=target_filesystem(target),
                                         label_cols=["y"])
        say("WROTE", path=target["path"], rows=result.rows, backup_rows=result.backup_rows)
    spark.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    k = sub.add_parser("kill-target")
    for engine in ("ds", "wf"):  # the data source, write_tfrecords
        k.add_argument(f"--{engine}-new", help="a path with nothing committed: errorifexists")
        k.add_argument(f"--{engine}-old", help="a committed data set: overwritten")
    k.add_argument("--rows", type=int, default=20_000)
    k.add_argument("--sleep", type=float, default=SLEEP_PER_BATCH, help="seconds per batch")
    k.add_argument("--partitions", type=int, default=1)
    t = sub.add_parser("kill-tfrecords")
    t.add_argument("--path", required=True, help="a committed data set: overwritten")
    t.add_argument("--rows", type=int, default=200_000)
    c = sub.add_parser("kill-commit")
    c.add_argument("--path", required=True, help="a committed data set: overwritten")
    c.add_argument("--rows", type=int, default=50_000)
    c.add_argument("--backup-table", help="the backup in this table (a Hive catalog)")
    c.add_argument("--metastore", help="the Hive catalog's directory (with --backup-table)")
    b = sub.add_parser("table")
    b.add_argument("--path", required=True)
    b.add_argument("--backup-table", required=True)
    b.add_argument("--metastore", required=True)
    b.add_argument("--mode", default="overwrite")
    b.add_argument("--start", type=int, default=0)
    b.add_argument("--end", type=int, default=0, help="no write when not above --start")
    r = sub.add_parser("race")
    r.add_argument("--role", required=True)
    r.add_argument("--peers", required=True)
    r.add_argument("--plan", required=True)
    r.add_argument("--sync", required=True, help="directory of the barrier files, shared")
    s = sub.add_parser("s3")
    s.add_argument("--uri", required=True, help="with {k} where the round number goes")
    s.add_argument("--rounds", type=int, default=3)
    s.add_argument("--rows", type=int, default=20_000)
    s.add_argument("--partitions", type=int, default=2)
    s.add_argument("--records-per-file", type=int, default=1000)
    w = sub.add_parser("writes")
    w.add_argument("--plan", required=True)
    for q in (k, t, c, b, r, s, w):
        q.add_argument("--work", required=True, help="scratch directory of this driver")
        q.add_argument("--batch-rows", type=int, default=500)
    args = p.parse_args(argv)
    try:
        return {"kill-target": kill_target, "kill-tfrecords": kill_tfrecords,
                "kill-commit": kill_commit, "table": table, "race": race,
                "s3": s3, "writes": writes}[args.cmd](args)
    except Exception:
        traceback.print_exc()
        say("CRASH", error=traceback.format_exc()[-3000:])
        return 1


if __name__ == "__main__":
    sys.exit(main())
