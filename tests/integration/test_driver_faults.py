"""Driver death and concurrent writers, with real processes.

(a) A Spark driver in a process of its own (fault_driver.py: the Python driver and the JVM it
    starts, local[4]) writes a slowed source four times at once: through the data source and
    through write_tfrecords, each errorifexists to a new path and overwrite of a committed data
    set. Once all four have part files on disk the test SIGKILLs the driver's process group
    (the Python driver and its JVM; the PySpark daemons, in groups of their own, must then go
    by themselves). Then: each new path has no manifest and no _SUCCESS and every reader
    refuses it with a clear message (make_dataset, spark.read, `tfspark verify` in a
    subprocess); each overwritten data set still reads, intact, as its old rows; a re-run with
    overwrite in another driver (this process's) gives exactly the source rows, no stray file.
    A separate test kills only the Python driver and records what its JVM does.
(b) Two driver processes write to one path at the same moment (a barrier file per round), in
    modes errorifexists, append + append, and overwrite + overwrite. Invariant: at least one
    write commits; the manifest names exactly the files on disk of the committed writes; the
    rows are those of the committed writes (plus the data set appended to), each once; every
    write that did not commit failed with an error naming the path and saying what to do.

Figures go to TFSPARK_FAULT_REPORT (JSON) when it is set (faultcheck.report).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from faultcheck import (
    TFSPARK_PART,
    check_values,
    descendants,
    kinds,
    log_tail,
    lost_duplicated,
    messages,
    read_committed,
    report,
    spawn,
    wait_gone,
)

import tfspark
from tfspark.errors import TfsparkError
from tfspark.store.integrity import verify

needs_proc = pytest.mark.skipif(not os.path.isdir("/proc"), reason="the tests find processes "
                                "and their children through Linux's /proc")
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.faults, needs_proc]

ROWS = 10_000  # per killed write: 1 task, 40 Arrow batches of 250 rows at 1 s a batch
BATCH_ROWS = 250  # (the kill comes within seconds: the writes are long only to be sure of it)
BATCH_SLEEP = 1.0
OLD = (1_000_000, 1_002_000)  # ids of the committed data set the killed driver overwrites
# Rounds of each fault whose timing is random (a kill mid-write, a race): 1 in `make test`, to
# keep CI near 20 minutes; TFSPARK_FAULT_ROUNDS=5 make test-faults for a soak.
KILL_ROUNDS = int(os.environ.get("TFSPARK_FAULT_ROUNDS", "1"))
RACE_ROWS = 10_000  # per racing write: 1 task of 20 batches of 500 rows, about 4 s
RACE_ROUNDS = KILL_ROUNDS  # of the data source (write_tfrecords: one)
ROLES = ("A", "B")


def source(spark: Any, start: int, end: int, partitions: int = 2) -> Any:
    """The fault driver's rows (id, v = 3 * id, s = "s<id>"), without its sleep but with the
    same schema (id comes out of a pandas UDF, so it is nullable: appends need the same spec)."""
    from pyspark.sql import functions as F

    def _same(v: pd.Series) -> pd.Series:  # nested: pickled by value for the workers
        return v

    return spark.range(start, end, numPartitions=partitions).select(
        F.pandas_udf(_same, "long")("id").alias("id"), (F.col("id") * 3).alias("v"),
        F.concat(F.lit("s"), F.col("id").cast("string")).alias("s"))


def write(spark: Any, engine: str, path: Path, start: int, end: int, mode: str) -> None:
    df = source(spark, start, end)
    if engine == "workflow":
        tfspark.write_tfrecords(df, str(path), mode=mode)
    else:
        tfspark.register(spark)
        writer = df.write.format("tfrecord")
        if mode in ("append", "overwrite"):
            writer.mode(mode).save(str(path))
        else:  # Spark refuses errorifexists for Python sources: the option carries it
            writer.mode("append").option("mode", mode).save(str(path))


def all_files(root: Path) -> dict[str, int]:
    """{relative path: size} of every file under root."""
    found = {}
    # os.walk skips directories removed while it lists (a running write's temporary ones),
    # where Path.rglob raises
    for dirpath, _, names in os.walk(root):
        for name in names:
            p = Path(dirpath, name)
            try:
                found[str(p.relative_to(root))] = p.stat().st_size
            except FileNotFoundError:
                pass
    return found


def tfspark_parts(names: Any) -> list[str]:
    return sorted(n for n in names if re.search(TFSPARK_PART, n))


def started_parts(root: Path, engine: str, before: dict[str, int]) -> list[str]:
    """Part files of the killed driver's write under root: its TFRecord files (data source)
    or its parquet backup's task files (write_tfrecords writes the backup first)."""
    now = all_files(root)
    if engine == "workflow":
        return [n for n in now if n.startswith("_backup/") and "/part-" in n
                and n not in before]
    return [n for n in tfspark_parts(now) if n not in before]


def cli_verify(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfspark.cli", "verify", str(path)],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2])))


def tf_count(path: Path) -> int:
    ds = tfspark.make_dataset(str(path), batch_size=8192, shuffle_buffer=0, epochs=1,
                              label_cols=[])
    return sum(int(batch["id"].shape[0]) for batch in ds)


def check_clean(spark: Any, engine: str, path: Path, start: int, end: int) -> dict[str, Any]:
    """After the re-run: exactly rows start..end-1 by content, files on disk = manifest's."""
    cols = read_committed(str(path))
    check_values(cols)
    lost, duplicated = lost_duplicated(cols["id"], range(start, end))
    doc = json.loads((path / "_tfspark.json").read_text())
    listed = sorted(f["path"] for f in doc["files"])
    side = doc["stats"].get("side") or {}  # the statistics files the manifest names
    named = {f"{side['dir']}/{name}" for name in (["features.json"] if side.get("features")
                                                   else []) +
             [f"split-{s}.json" for s in side.get("splits", [])]} if side else set()
    everything = all_files(path)
    on_disk = tfspark_parts(everything)
    stray = sorted(set(on_disk) - set(listed))
    missing = sorted(set(listed) - set(on_disk))
    other = sorted(n for n in set(everything) - set(listed) - named - {"_tfspark.json",
                                                                       "_SUCCESS"}
                   if not n.startswith("_backup/"))  # a lock, a probe, a partial file, ...
    figures = {"rows": int(len(cols["id"])), "lost": lost, "duplicated": duplicated,
               "stray_files": len(stray) + len(other), "missing_files": len(missing)}
    assert (lost, duplicated, stray, missing, other) == (0, 0, [], [], []), (figures, other)
    assert (path / "_SUCCESS").exists()
    assert verify(str(path)).ok
    if engine == "workflow":
        backup = path / "_backup"
        assert not [n for n in all_files(backup) if "_temporary" in n]
        assert spark.read.parquet(str(backup)).count() == end - start
    return figures


# ---- (a) the driver killed mid-write

ENGINES = {"datasource": "ds", "workflow": "wf"}


@pytest.fixture(scope="module")
def old_sets(spark, tmp_path_factory) -> dict[str, Path]:
    """A committed data set of rows OLD per engine, written once; each round gets a copy."""
    base = tmp_path_factory.mktemp("old")
    sets = {e: base / e for e in ENGINES}
    for engine, path in sets.items():
        write(spark, engine, path, *OLD, mode="errorifexists")
    return sets


def _kill_round(spark: Any, old_sets: dict[str, Path], tmp_path: Path, round_: int,
                how: str) -> None:
    """One driver, four writes (data source / write_tfrecords x new path / overwrite of a
    committed data set), one kill; then every check, per engine, and the re-runs."""
    paths = {(e, k): tmp_path / f"{e}-{k}" for e in ENGINES for k in ("new", "old")}
    before, manifests = {}, {}
    for engine in ENGINES:
        old = paths[engine, "old"]
        shutil.copytree(old_sets[engine], old)
        manifests[engine] = (old / "_tfspark.json").read_bytes()
        before[engine] = all_files(old)
    work = tmp_path / "driver"
    args = ["kill-target", "--rows", str(ROWS), "--batch-rows", str(BATCH_ROWS), "--sleep",
            str(BATCH_SLEEP)]
    for (engine, kind), path in paths.items():
        args += [f"--{ENGINES[engine]}-{kind}", str(path)]
    with spawn(args, work) as proc:
        assert proc.stdout is not None
        messages(proc.stdout, until="WRITING")
        started = time.monotonic()

        def writing() -> dict[str, list[str]]:
            return {f"{e}-{k}": started_parts(p, e, before[e] if k == "old" else {})
                    for (e, k), p in paths.items()}

        while not all(writing().values()):
            if proc.poll() is not None or time.monotonic() - started > 300:
                raise AssertionError(f"not all four writes had part files (driver exit "
                                     f"{proc.poll()}: {writing()}):\n{log_tail(work)}")
            time.sleep(0.02)
        at_kill = writing()
        tree = [proc.pid, *descendants(proc.pid)]
        tree_kinds = kinds(tree)
        if how == "process-group":  # the Python driver and its JVM (spark-submit execs java
            os.killpg(proc.pid, signal.SIGKILL)  # in the driver's process group)
        else:
            os.kill(proc.pid, signal.SIGKILL)  # the Python driver alone
        killed_after = time.monotonic() - started
        survivors, gone_after = wait_gone(tree, 180)  # (python-only: until the JVM exits too)
        rest = messages(proc.stdout)
        proc.wait(timeout=60)
    assert not [m for m in rest if m["kind"] == "DONE"], \
        f"a write finished before the kill, nothing was tested: {rest}"
    assert not survivors, f"processes of the killed driver still run: {kinds(survivors)}"
    log = (work / "driver.log").read_text(errors="replace")
    common = {"test": "driver-killed", "kill": how, "round": round_, "driver_tree": tree_kinds,
              "killed_after_s": round(killed_after, 2), "tree_gone_after_s": round(gone_after, 2),
              **_aborts(log)}
    records = {e: dict(common, engine=e, part_files_at_kill=len(at_kill[f"{e}-new"]))
               for e in ENGINES}
    for engine in ENGINES:
        records[engine].update(_check_new(spark, paths[engine, "new"]))
        records[engine].update(_check_old(spark, engine, paths[engine, "old"],
                                          manifests[engine], before[engine]))
    # A re-run with overwrite, in another driver (this process's): exactly the source rows.
    for (engine, _), path in paths.items():
        write(spark, engine, path, 0, ROWS, mode="overwrite")
    for (engine, kind), path in paths.items():
        records[engine][f"rerun_{kind}"] = check_clean(spark, engine, path, 0, ROWS)
    for engine in ENGINES:
        assert tf_count(paths[engine, "new"]) == ROWS
        report(records[engine])


def _aborts(log: str) -> dict[str, int]:
    """What the killed driver's JVM logged of aborting the writes (it can only when it outlives
    its Python driver): data source aborts begun / done / failed, parquet task attempts."""
    lines = log.splitlines()

    def count(*parts: str) -> int:
        return sum(1 for ln in lines if all(p in ln for p in parts))

    return {"ds_aborts_begun": count("PythonBatchWrite", "is aborting."),
            "ds_aborts_done": count("PythonBatchWrite", " aborted."),
            "ds_aborts_failed": count("PythonBatchWrite", "failed to abort"),
            "parquet_task_attempts_aborted": count("FileFormatWriter", "aborted.")}


def _check_new(spark: Any, new: Path) -> dict[str, Any]:
    """The path the killed write created: nothing committed, every reader refuses it."""
    left = all_files(new)  # (the parquet backup's own _SUCCESS may be there: it is no commit)
    assert "_SUCCESS" not in left and not [n for n in left if "_tfspark.json" in n], left
    with pytest.raises(TfsparkError, match="did not commit"):
        tfspark.make_dataset(str(new), batch_size=128)
    with pytest.raises(Exception) as refused:
        spark.read.format("tfrecord").load(str(new)).count()
    spark_says = str(refused.value)  # an uncommitted write, or (its abort removed its files)
    assert str(new) in spark_says and any(  # nothing to read at all
        m in spark_says for m in ("did not commit", "does not exist", "no TFRecord files")), \
        spark_says
    verified = cli_verify(new)  # no data set to verify: one line, exit 2
    assert verified.returncode == 2 and verified.stdout == "", verified
    assert "_tfspark.json" in verified.stderr and "did not commit" in verified.stderr
    return {"leftover_files_new": len(left), "leftover_tfrecords_new": len(tfspark_parts(left)),
            "backup_committed_new": "_backup/_SUCCESS" in left,
            "verify_rc_new": verified.returncode, "spark_read_new": _our_message(spark_says)}


def _check_old(spark: Any, engine: str, old: Path, manifest: bytes, before: dict[str, int]
               ) -> dict[str, Any]:
    """The committed data set the killed write was overwriting: manifest and files untouched,
    the old rows read back intact; its leftovers are named by verify."""
    assert (old / "_tfspark.json").read_bytes() == manifest and (old / "_SUCCESS").exists()
    committed = {f["path"]: f["bytes"] for f in json.loads(manifest)["files"]}
    left = all_files(old)
    assert {n: left.get(n) for n in committed} == committed
    cols = read_committed(str(old))
    check_values(cols)
    assert lost_duplicated(cols["id"], range(*OLD)) == (0, 0)
    assert tf_count(old) == OLD[1] - OLD[0]
    back = spark.read.format("tfrecord").load(str(old)).select("id").collect()
    assert sorted(r.id for r in back) == list(range(*OLD))
    leftover = tfspark_parts(set(left) - set(before))
    report_ = verify(str(old))
    if leftover:  # readers ignore them; verify names them
        assert not report_.ok and all("extra data file" in p for p in report_.problems)
    else:
        assert report_.ok, report_.problems
    backup, backup_files = None, None
    if engine == "workflow":  # the new rows were staged: the old backup is whole
        backup = sorted({n.split("/")[1] for n in left if n.startswith("_backup/")})
        backup_files = len([n for n in left if n.startswith("_backup/part-")])
        check_old_backup(spark, old)
    return {"leftover_files_old": len(set(left) - set(before)),
            "leftover_tfrecords_old": len(leftover), "old_rows_read": int(len(cols["id"])),
            "old_rows_spark": len(back), "old_verify_ok": report_.ok,
            "old_backup_after_kill": backup, "old_backup_data_files": backup_files}


def check_old_backup(spark: Any, old: Path) -> None:
    """The backup of the committed data set, as it was: the old rows, each once, and verify
    finds it to be the backup of the manifest's last write."""
    ids = [r.id for r in spark.read.parquet(str(old / "_backup")).select("id").collect()]
    assert sorted(ids) == list(range(*OLD))
    assert not [p for p in verify(str(old)).problems if "backup" in p]


def _old_copy(old_sets: dict[str, Path], tmp_path: Path) -> tuple[Path, bytes, dict[str, int]]:
    """A copy of the committed write_tfrecords data set, its manifest's bytes and its files."""
    old = tmp_path / "wf-old"
    shutil.copytree(old_sets["workflow"], old)
    return old, (old / "_tfspark.json").read_bytes(), all_files(old)


def _kill_at_commit(args: list[str], work: Path, root: Path, before: dict[str, int],
                    staged_of: Any) -> tuple[list[Any], list[str]]:
    """fault_driver.py kill-commit with `args` (an overwrite of the data set at `root`, whose
    files were `before`), SIGKILLed where its commit begins: (what staged_of() found staged
    then, the TFRecord part files it had written)."""
    with spawn(["kill-commit", *args, "--rows", "50000"], work) as proc:
        assert proc.stdout is not None
        messages(proc.stdout, until="COMMITTING")
        staged = staged_of()
        written = tfspark_parts(set(all_files(root)) - set(before))
        os.killpg(proc.pid, signal.SIGKILL)
        rest = messages(proc.stdout)
        proc.wait(timeout=60)
    assert staged and written, "the write had not staged its copy and TFRecords: nothing tested"
    assert not [m for m in rest if m["kind"] == "DONE"], rest
    return staged, written


@pytest.mark.tf
def test_driver_killed_in_the_tfrecord_stage_of_an_overwrite(spark, tf, old_sets, tmp_path):
    """write_tfrecords(mode="overwrite") killed while its tasks write TFRecords and the staged
    parquet copy: the new backup was only staged, so the data set is entirely old (old
    manifest, old TFRecords, old backup, verify finds them agreeing). The next write, an
    append, sweeps what the killed one left; a re-run gives the new."""
    old, manifest, before = _old_copy(old_sets, tmp_path)
    work = tmp_path / "driver"
    with spawn(["kill-tfrecords", "--path", str(old), "--rows", "200000"], work) as proc:
        assert proc.stdout is not None
        messages(proc.stdout, until="WRITING")
        started = time.monotonic()
        while not tfspark_parts(set(all_files(old)) - set(before)):
            if proc.poll() is not None or time.monotonic() - started > 300:
                raise AssertionError(f"no TFRecord part files appeared (driver exit "
                                     f"{proc.poll()}):\n{log_tail(work)}")
            time.sleep(0.02)
        staged = [n for n in all_files(old) if "_tfspark_staging-" in n and "/part-" in n]
        os.killpg(proc.pid, signal.SIGKILL)
        rest = messages(proc.stdout)
        proc.wait(timeout=60)
    assert staged, "the kill came before the backup was staged: nothing was tested"
    assert not [m for m in rest if m["kind"] == "DONE"], rest
    assert (old / "_tfspark.json").read_bytes() == manifest
    cols = read_committed(str(old))
    assert lost_duplicated(cols["id"], range(*OLD)) == (0, 0)
    assert tf_count(old) == OLD[1] - OLD[0]
    check_old_backup(spark, old)
    killed = tfspark_parts(set(all_files(old)) - set(before))
    report({"test": "driver-killed-in-tfrecord-stage", "staged_backup_files": len(staged),
            "verify_problems": verify(str(old)).problems})
    assert killed and not verify(str(old)).ok  # (an extra data file: the killed write's)
    write(spark, "workflow", old, OLD[1], OLD[1] + 500, mode="append")
    assert not set(killed) & set(all_files(old)), killed
    assert not [n for n in all_files(old) if "_tfspark_staging-" in n]
    assert verify(str(old)).ok, verify(str(old)).render()
    assert lost_duplicated(read_committed(str(old))["id"], range(OLD[0], OLD[1] + 500)) == \
        (0, 0)
    write(spark, "workflow", old, 0, ROWS, mode="overwrite")
    check_clean(spark, "workflow", old, 0, ROWS)


def test_driver_killed_between_the_pass_and_the_commit(spark, old_sets, tmp_path):
    """write_tfrecords(mode="overwrite") killed when every task has written its TFRecords and
    its file of the staged parquet copy, as the driver begins the commit: the data set is
    entirely old (manifest, TFRecords, backup); the next write sweeps what the killed one left
    (its staging among it) and a re-run gives the new rows."""
    old, manifest, before = _old_copy(old_sets, tmp_path)
    work = tmp_path / "driver"
    staged, written = _kill_at_commit(
        ["--path", str(old)], work, old, before,
        lambda: [n for n in all_files(old) if "_tfspark_staging-" in n and "/part-" in n])
    assert (old / "_tfspark.json").read_bytes() == manifest
    assert lost_duplicated(read_committed(str(old))["id"], range(*OLD)) == (0, 0)
    check_old_backup(spark, old)
    write(spark, "workflow", old, OLD[1], OLD[1] + 500, mode="append")
    assert not set(written) & set(all_files(old)), written
    assert not [n for n in all_files(old) if "_tfspark_staging-" in n]
    assert verify(str(old)).ok, verify(str(old)).render()
    write(spark, "workflow", old, 0, ROWS, mode="overwrite")
    check_clean(spark, "workflow", old, 0, ROWS)


def test_driver_killed_before_the_commit_of_a_table_backup(tmp_path):
    """The same kill with the backup in a catalog table (Hive, as the CLI keeps it): the data
    set and the backup table stay entirely old; the killed write's staging table is dropped
    by the next write to that backup, whose rows are then the table's."""
    data, meta = tmp_path / "ds", tmp_path / "catalog"
    table = "fault_db.bk"
    common = ["--path", str(data), "--backup-table", table, "--metastore", str(meta)]

    def tables(*args: str, name: str) -> dict[str, dict[str, Any]]:
        """What a driver's "table" run printed, by kind (BEFORE its write, TABLES after)."""
        with spawn(["table", *common, *args], tmp_path / name) as proc:
            assert proc.stdout is not None
            got = messages(proc.stdout, until="TABLES")
            assert proc.wait(timeout=300) == 0, (tmp_path / name / "driver.log").read_text()[-3000:]
        return {m["kind"]: m for m in got}

    old = tables("--start", str(OLD[0]), "--end", str(OLD[1]), name="setup")["TABLES"]
    assert old["tables"] == ["bk"] and old["ids"] == list(range(*OLD))
    manifest = (data / "_tfspark.json").read_bytes()
    before = all_files(data)
    work = tmp_path / "driver"
    staged, written = _kill_at_commit(
        common, work, data, before,
        lambda: list((meta / "warehouse" / "fault_db.db").glob("bk__tfspark_staging_*/part-*")))
    assert (data / "_tfspark.json").read_bytes() == manifest
    assert lost_duplicated(read_committed(str(data))["id"], range(*OLD)) == (0, 0)
    # the next write to the backup (an append) first lists what the killed one left
    seen = tables("--mode", "append", "--start", str(OLD[1]), "--end", str(OLD[1] + 500),
                  name="append")
    left, after = seen["BEFORE"], seen["TABLES"]
    assert left["ids"] == list(range(*OLD))
    assert [t for t in left["tables"] if "__tfspark_staging_" in t], left["tables"]
    assert after["tables"] == ["bk"], after["tables"]
    assert after["ids"] == list(range(OLD[0], OLD[1] + 500))
    assert not set(written) & set(all_files(data)), written
    assert verify(str(data)).ok, verify(str(data)).render()


def test_failed_overwrite_keeps_old_backup_and_tfrecords_together(spark, old_sets, tmp_path):
    """An overwrite that fails in its TFRecord stage (a double beyond float32) leaves the old
    backup and the old TFRecords, which verify finds agreeing; nothing of the new is left."""
    from pyspark.sql import functions as F

    old = tmp_path / "wf-old"
    shutil.copytree(old_sets["workflow"], old)
    before = all_files(old)
    bad = source(spark, 0, 100).withColumn("v", F.lit(1e39))
    with pytest.raises(TfsparkError, match="column 'v'"):
        tfspark.write_tfrecords(bad, str(old), mode="overwrite")
    assert all_files(old) == before
    check_old_backup(spark, old)
    assert verify(str(old)).ok


@pytest.mark.tf
@pytest.mark.parametrize("round_", range(1, KILL_ROUNDS + 1))
def test_driver_killed_mid_write(spark, tf, old_sets, tmp_path, round_):
    _kill_round(spark, old_sets, tmp_path, round_, "process-group")


@pytest.mark.tf
def test_only_the_python_driver_killed(spark, tf, old_sets, tmp_path):
    """The JVM notices that its Python driver is gone (its stdin closes), stops the
    SparkContext and tries to abort the writes; with or without that abort, nothing commits."""
    _kill_round(spark, old_sets, tmp_path, 1, "python-only")


def test_overwrite_sweeps_only_the_writes_it_replaces(spark, tmp_path):
    """An overwrite removes the old data set and the leftovers there when it was planned (here
    the part file of a killed write), but not the files of a write begun after it was planned:
    that write commits or cleans up itself; deleting its files would break its manifest."""
    import threading

    from pyspark.sql import functions as F

    out = tmp_path / "ds"
    write(spark, "datasource", out, *OLD, mode="errorifexists")
    old_files = tfspark_parts(all_files(out))
    killed = out / f"part-00001-7-{'a' * 16}-0000.tfrecord"  # a killed write's leftover
    killed.write_bytes((out / old_files[0]).read_bytes())

    def slow(v: pd.Series) -> pd.Series:
        import time as _time

        _time.sleep(0.2)
        return v

    df = spark.range(0, 8_000, numPartitions=2).select(
        F.pandas_udf(slow, "long")("id").alias("id"), (F.col("id") * 3).alias("v"),
        F.concat(F.lit("s"), F.col("id").cast("string")).alias("s"))
    failed: list[BaseException] = []

    def run() -> None:
        try:
            tfspark.register(spark)
            df.write.format("tfrecord").mode("overwrite").save(str(out))
        except BaseException as e:  # noqa: BLE001 - re-raised below
            failed.append(e)

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
    try:
        job = threading.Thread(target=run, daemon=True)
        job.start()
        deadline = time.monotonic() + 300
        while not set(tfspark_parts(all_files(out))) - set(old_files) - {killed.name}:
            assert job.is_alive() and time.monotonic() < deadline, failed
            time.sleep(0.02)
        later = out / f"part-00000-9-{'b' * 16}-0000.tfrecord"  # a write planned after it
        later.write_bytes(killed.read_bytes())
        job.join(timeout=300)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert not failed, failed[0]
    assert not killed.exists() and later.exists()
    assert not set(old_files) & set(tfspark_parts(all_files(out)))
    cols = read_committed(str(out))
    assert lost_duplicated(cols["id"], range(8_000)) == (0, 0)
    report({"test": "overwrite-sweep", "leftover_removed": not killed.exists(),
            "later_write_kept": later.exists(), "rows": int(len(cols["id"]))})


# ---- (b) two drivers, one path, the same moment

# What a failed write's error must tell the user to do (one of these).
HINTS = ("run it again", "use mode", "overwrite", "another path")


# (engine, {role: mode}, rounds): the data source and write_tfrecords, every pair of modes
RACES = [(engine, {"A": a, "B": b}, rounds) for engine, rounds in (("datasource", RACE_ROUNDS),
                                                                   ("workflow", 1))
         for a, b in (("errorifexists", "errorifexists"), ("append", "append"),
                      ("overwrite", "overwrite"), ("append", "overwrite"))]


def test_two_drivers_race_on_one_path(spark, tmp_path):
    rounds = []
    for engine, modes, count in RACES:
        for r in range(count):
            k = len(rounds)
            path = tmp_path / f"{engine}-{modes['A']}-{modes['B']}-{r}"
            base = (k + 1) * 1_000_000
            initial = None
            if "errorifexists" not in modes.values():  # append to / overwrite a data set
                initial = (base + 900_000, base + 901_000)
                write(spark, engine, path, *initial, mode="overwrite")
            rounds.append({"modes": modes, "engine": engine, "path": str(path),
                           "initial": initial, "partitions": 1,
                           "rows": {"A": [base, base + RACE_ROWS],
                                    "B": [base + 500_000, base + 500_000 + RACE_ROWS]}})
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"rounds": rounds}))
    outcomes: list[dict[str, Any]] = []
    race = ["race", "--peers", "A,B", "--plan", str(plan), "--sync", str(tmp_path / "sync")]
    with spawn([*race, "--role", "A"], tmp_path / "A") as a, \
            spawn([*race, "--role", "B"], tmp_path / "B") as b:
        for proc, role in ((a, "A"), (b, "B")):
            assert proc.stdout is not None
            got = [m for m in messages(proc.stdout) if m["kind"] == "ROUND"]
            proc.wait(timeout=600)
            assert len(got) == len(rounds), f"driver {role}:\n{log_tail(tmp_path / role)}"
            outcomes += got
    records, failures = [], []
    for k, rnd in enumerate(rounds):
        record, problems = _judge_round(k, rnd, {o["role"]: o for o in outcomes
                                                  if o["round"] == k})
        report(record)
        records.append(record)
        failures += problems
    assert not failures, "\n".join(failures)


def _judge_round(k: int, rnd: dict[str, Any], outs: dict[str, Any]
                 ) -> tuple[dict[str, Any], list[str]]:
    """The figures of one race round, and what broke the invariant (empty: nothing): the data
    set holds what the writes told "success" made of it, applied in the order they ended."""
    problems = []
    modes, path = rnd["modes"], Path(rnd["path"])
    mode = "+".join(modes[r] for r in ROLES)
    winners = [r for r in ROLES if outs[r]["ok"]]
    losers = [r for r in ROLES if not outs[r]["ok"]]
    if not winners:
        problems.append(f"round {k} ({mode}): no write committed: {outs}")
    if modes["A"] == modes["B"] == "errorifexists" and len(winners) != 1:
        problems.append(f"round {k}: {len(winners)} errorifexists writes reported success")
    for r in losers:
        error = outs[r]["error"]
        if not (rnd["path"] in error and any(h in error for h in HINTS)):
            problems.append(f"round {k} ({mode}): unclear error for {r}: {error[:2000]}")
    cols = read_committed(str(path))
    check_values(cols)
    ids = cols["id"]
    want: set[int] = set(range(*rnd["initial"])) if rnd["initial"] else set()
    for r in sorted(winners, key=lambda r: outs[r]["ended"]):
        rows = set(range(*rnd["rows"][r]))
        want = want | rows if modes[r] == "append" else rows
    lost, duplicated = lost_duplicated(ids, want)
    manifest = json.loads((path / "_tfspark.json").read_text())
    listed = sorted(f["path"] for f in manifest["files"])
    on_disk = tfspark_parts(all_files(path))
    stray = sorted(set(on_disk) - set(listed))
    missing = sorted(set(listed) - set(on_disk))
    overlap = min(o["ended"] for o in outs.values()) - max(o["started"] for o in outs.values())
    record = {"test": "race", "engine": rnd["engine"], "mode": mode, "round": k,
              "winners": winners, "losers": losers, "overlap_s": round(overlap, 2),
              "write_s": {r: round(outs[r]["ended"] - outs[r]["started"], 2) for r in ROLES},
              "loser_errors": {r: _our_message(outs[r]["error"]) for r in losers},
              "rows": int(len(ids)), "expected_rows": len(want), "lost": lost,
              "duplicated": duplicated, "stray_files": len(stray),
              "missing_files": len(missing), "writes_in_manifest": len(manifest["writes"]),
              "lock_left": [n for n in all_files(path) if "lock" in n]}
    if rnd["engine"] == "workflow":
        import pyarrow.parquet as pq

        backup = pq.read_table(path / "_backup").column("id").to_pylist()
        record["backup_rows"] = len(backup)
        if sorted(backup) != sorted(int(i) for i in ids):
            problems.append(f"round {k} ({mode}): the backup disagrees with the TFRecords")
    if overlap <= 0:
        problems.append(f"round {k}: the two writes did not run at the same time: {record}")
    if (lost, duplicated, stray, missing) != (0, 0, [], []) or not (path / "_SUCCESS").exists() \
            or manifest["records"] != len(want) or record["lock_left"]:
        problems.append(f"round {k} ({mode}): {record}")
    if not verify(str(path)).ok:
        problems.append(f"round {k} ({mode}): verify fails: {verify(str(path)).render()}")
    return record, problems


def _our_message(error: str) -> str:
    """tfspark's own message out of a Spark error (which wraps it in a Python traceback)."""
    for line in error.splitlines():
        if "Error: " in line and ("tfspark" in line or "tfrecord" in line or "path" in line):
            return line.strip()[:300]
    return error.strip().splitlines()[0][:300] if error.strip() else error


def test_a_publish_stopped_after_the_commit_is_finished_by_the_next_write(spark, tmp_path,
                                                                          monkeypatch):
    """Interrupted between its manifest commit and moving its staged backup into place (a
    KeyboardInterrupt there, as Ctrl-C would), a write is committed but its backup is still
    staged: verify says so, and the next write_tfrecords to the path finishes the move first."""
    from tfspark.spark import export

    out = tmp_path / "ds"
    write(spark, "workflow", out, *OLD, mode="errorifexists")
    real = export.publish

    def stopped(*args: Any, **kw: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(export, "publish", stopped)
    with pytest.raises(KeyboardInterrupt):
        write(spark, "workflow", out, 0, 500, mode="overwrite")
    monkeypatch.setattr(export, "publish", real)
    manifest = json.loads((out / "_tfspark.json").read_text())
    assert manifest["records"] == 500 and manifest["backup"]["pending"]
    problems = verify(str(out)).problems
    assert any("stopped before its staged backup" in p for p in problems), problems
    write(spark, "workflow", out, 500, 700, mode="append")
    ids = [r.id for r in spark.read.parquet(str(out / "_backup")).select("id").collect()]
    assert sorted(ids) == list(range(700))
    assert verify(str(out)).ok
