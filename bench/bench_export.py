"""The export against parquet: write_tfrecords (TFRecords, their parquet copy and statistics)
beside Spark's own parquet writer and the floor of any Python writer, on local[2].

The same source rows (rows x 10 columns: 5 double, 3 long, 2 short strings, generated once and
stored as parquet) are written, alternating, by:

  parquet            df.write.parquet(...)
  floor: transfer    df.mapInArrow(a task that writes nothing): the rows through Python at all
  floor: pyarrow     df.mapInArrow(a task that writes its batches with pyarrow's parquet writer,
                     set as the parquet copy's files are)
                     (both floors in the Arrow batches write_tfrecords' tasks take)
  row layout         write_tfrecords(df, ...) with its defaults (one pass: TFRecords, parquet
                     copy, statistics)
  block layout       the same with rows_per_record=1024
  row, no statistics the row layout with stats=False (what the statistics cost)
  mosaic             with --mosaic: Mosaic Streaming's dataframe_to_mds (MDS shards, columns
                     float64/int64/str, its default: no compression), the peer converter

Each figure is the best of --repeat; ratios are to parquet's time in the same run. Then the
phase table: the CPU seconds (one core) each part of a task's work takes on the same rows
(encoding, pyarrow's parquet writer, the statistics' sketches), and the wall seconds of the
stages the driver times (the tasks, the commit).

    python bench/bench_export.py --rows 2000000 10000000 --repeat 3 --json bench/results/export.json
    python bench/bench_export.py --cluster --rows 2000000 --repeat 2   # the loopback cluster
    python bench/bench_export.py --mosaic --rows 2000000 --repeat 2    # and Mosaic's converter

--cluster runs the same on the standalone cluster of scripts/local_cluster.py (master + 2
workers, one executor of 1 core and 2 GiB each) instead of local[2].
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (  # noqa: E402
    local_cluster_module,
    local_spark,
    machine,
    save_json,
    spark_table,
)

WRITERS = ("parquet", "floor_transfer", "floor_pyarrow", "row", "block", "row_no_stats")


class _Stages(logging.Handler):
    """The progress stages' seconds ("tfspark: commit: 0.1 s"), as the write logs them."""

    LINE = re.compile(r"^tfspark: ([^:(]+): (?:[\d,]+ rows in )?([\d.]+) s")

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seen: dict[str, float] = {}

    def emit(self, record: logging.LogRecord) -> None:
        m = self.LINE.match(record.getMessage())
        if m:
            self.seen[m.group(1).strip()] = float(m.group(2))


def _writers(spark, df, tmp: str) -> dict:
    import pyarrow as pa

    import tfspark
    from tfspark.spark.sizing import one_pass_batches

    def parquet(out: str) -> dict:
        t = time.perf_counter()
        df.write.parquet(out)
        return {"s": time.perf_counter() - t}

    def transfer(out: str) -> dict:
        def task(batches):
            for _ in batches:
                pass
            yield pa.RecordBatch.from_pydict({"n": [0]})

        t = time.perf_counter()
        with one_pass_batches(spark):  # the batches write_tfrecords' tasks take
            df.mapInArrow(task, "n long").collect()
        return {"s": time.perf_counter() - t}

    def by_pyarrow(out: str) -> dict:
        os.makedirs(out)

        def task(batches):
            import uuid

            from tfspark.store.part_files import parquet_writer

            writer = None
            for b in batches:
                if writer is None:  # (the parquet copy's settings)
                    writer = parquet_writer(f"{out}/{uuid.uuid4().hex}.parquet", b.schema)
                writer.write_batch(b)
            if writer is not None:
                writer.close()
            yield pa.RecordBatch.from_pydict({"n": [0]})

        t = time.perf_counter()
        with one_pass_batches(spark):
            df.mapInArrow(task, "n long").collect()
        return {"s": time.perf_counter() - t}

    def export(out: str, **settings) -> dict:
        stages = _Stages()
        log = logging.getLogger("tfspark.progress")
        log.addHandler(stages)
        before = log.level
        log.setLevel(logging.INFO)
        try:
            t = time.perf_counter()
            r = tfspark.write_tfrecords(df, out, **settings)
            s = time.perf_counter() - t
        finally:
            log.removeHandler(stages)
            log.setLevel(before)
        return {"s": s, "passes": r.passes, "stages": stages.seen, "rows": r.rows}

    def mosaic(out: str) -> dict:
        from streaming.base.converters import dataframe_to_mds

        kinds = {"double": "float64", "bigint": "int64", "string": "str"}
        columns = {f.name: kinds[f.dataType.simpleString()] for f in df.schema}
        t = time.perf_counter()
        dataframe_to_mds(df, merge_index=True, mds_kwargs={"out": out, "columns": columns})
        return {"s": time.perf_counter() - t}

    return {"parquet": parquet, "floor_transfer": transfer, "floor_pyarrow": by_pyarrow,
            "mosaic": mosaic, "row": export, "block": lambda out: export(out, rows_per_record=1024),
            "row_no_stats": lambda out: export(out, stats=False)}


def _phases(source: str, rows: int) -> dict:
    """CPU seconds on one core of each part of the tasks' work over the same rows."""
    import pyarrow.dataset as ds

    from tfspark.arrow.encode import BatchEncoder
    from tfspark.arrow.encode_block import BlockEncoder
    from tfspark.spark.sizing import ONE_PASS_ROWS
    from tfspark.spec import infer_spec
    from tfspark.store.fs import locate
    from tfspark.store.part_files import ParquetCopy
    from tfspark.store.stats.sketch import TaskStats

    batches = list(ds.dataset(source).to_batches(batch_size=ONE_PASS_ROWS))  # as tasks take them
    spec = infer_spec(batches[0].schema)
    out: dict[str, float] = {}

    def timed(name: str, fn) -> None:
        nonlocal batches
        every, batches = batches, batches[:1]
        fn()  # compiled kernels loaded, caches warm
        batches = every
        t = time.process_time()
        fn()
        out[name] = round(time.process_time() - t, 3)

    def encode() -> None:
        enc = BatchEncoder(spec)
        for b in batches:
            enc.encode(b, framed=True)

    def encode_block() -> None:
        enc = BlockEncoder(spec, 1024)
        for b in batches:
            enc.encode(b, framed=True)

    def parquet() -> None:  # as a task writes its file of the parquet copy
        with tempfile.TemporaryDirectory() as where:
            copy = ParquetCopy(locate(where), "copy.parquet")
            for b in batches:
                copy.write(b)
            copy.close()

    def sketches() -> None:
        s = TaskStats(spec, 20)
        for b in batches:
            s.add(None, b)
        s.result()

    timed("encode (row layout)", encode)
    timed("encode (block layout)", encode_block)
    timed("parquet copy (pyarrow)", parquet)
    timed("statistics sketches", sketches)
    return {"rows": rows, "cpu_s": out}


def _cluster_spark(work: str):
    """A session on the loopback standalone cluster (started here), and the cluster."""
    from pathlib import Path

    from pyspark.sql import SparkSession

    # PySpark takes the executors' Python from this variable, not from spark.pyspark.python
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    launcher = local_cluster_module()
    cluster = launcher.LocalCluster(Path(work) / "cluster", workers=2, cores=1,
                                    memory="2g").start()
    builder = SparkSession.builder.appName("tfspark-bench-export")
    for key, value in launcher.cluster_conf(cluster, Path(work) / "driver",
                                            executor_memory="2g").items():
        builder = builder.config(key, value)
    return builder.getOrCreate(), cluster


def run(rows_list: list[int], repeat: int, on_cluster: bool = False,
        with_mosaic: bool = False) -> dict:
    cluster = None
    if on_cluster:
        spark, cluster = _cluster_spark(tempfile.mkdtemp(prefix="tfspark-bench-cluster-"))
    else:
        spark = local_spark("tfspark-bench-export")
    spark.sparkContext.setLogLevel("ERROR")
    results = []
    for rows in rows_list:
        tmp = tempfile.mkdtemp(prefix="tfspark-bench-export-")
        src_path = os.path.join(tmp, "source")
        spark_table(spark, rows).write.parquet(src_path)
        df = spark.read.parquet(src_path)
        writers = _writers(spark, df, tmp)
        writers["parquet"](os.path.join(tmp, "warm"))  # Python workers started, kernels loaded
        writers["row"](os.path.join(tmp, "warm2"))
        names = WRITERS + (("mosaic",) if with_mosaic else ())
        seen: dict[str, list[dict]] = {k: [] for k in names}
        for _ in range(repeat):
            for name in names:
                out = os.path.join(tmp, name)
                seen[name].append(writers[name](out))
                shutil.rmtree(out, ignore_errors=True)
        best = {k: min(v, key=lambda x: x["s"]) for k, v in seen.items()}
        par = best["parquet"]["s"]
        results.append({
            "rows": rows,
            "partitions": df.rdd.getNumPartitions(),
            "seconds": {k: round(v["s"], 2) for k, v in best.items()},
            "vs_parquet": {k: round(v["s"] / par, 2) for k, v in best.items()},
            # how many times faster than Mosaic Streaming's converter on the same DataFrame
            "vs_mosaic": {k: round(best["mosaic"]["s"] / best[k]["s"], 2)
                          for k in ("row", "block")} if with_mosaic else None,
            "passes": {k: best[k].get("passes") for k in ("row", "block")},
            "stages": {k: best[k].get("stages") for k in ("row", "block")},
            "phases": _phases(src_path, rows) if rows == rows_list[0] else None,
        })
        shutil.rmtree(tmp, ignore_errors=True)
    spark.stop()
    if cluster is not None:
        cluster.stop()
    return {"benchmark": "export", "machine": machine(),
            "master": "standalone cluster on loopback (2 workers x 1 core)" if on_cluster
            else "local[2]",
            "repeat": repeat, "runs": results}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[2_000_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--cluster", action="store_true",
                    help="on the loopback standalone cluster instead of local[2]")
    ap.add_argument("--mosaic", action="store_true",
                    help="also Mosaic Streaming's dataframe_to_mds (mosaicml-streaming "
                         "installed) on the same DataFrame")
    a = ap.parse_args()
    doc = run(a.rows, a.repeat, a.cluster, a.mosaic)
    for r in doc["runs"]:
        print(f"{r['rows']:,} rows ({r['partitions']} partitions):")
        for k in r["seconds"]:
            print(f"  {k:16s} {r['seconds'][k]:7.2f} s  {r['vs_parquet'][k]:5.2f}x parquet")
        print("  passes:", r["passes"], " stages:", r["stages"])
        if r["vs_mosaic"]:
            print("  times Mosaic's dataframe_to_mds:", r["vs_mosaic"])
        if r["phases"]:
            print("  phases (CPU s, one core):", r["phases"]["cpu_s"])
    save_json(a.json, doc)


if __name__ == "__main__":
    main()
