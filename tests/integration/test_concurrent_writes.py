"""Two writers on one path at once, from two threads of one driver.

Each pair starts at a barrier and runs write_tfrecords (or the data source) with real Spark
jobs; the writes overlap by seconds. Whatever the order, the invariant is the same: every write
told "success" has all its rows in the data set, the loser gets WriteConflictError naming the
path, the TFRecords and the parquet backup hold the same rows, and `verify` is clean. The
same cases across processes (two drivers) are in test_driver_faults.py.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pandas as pd  # module level: pandas_udf resolves the type hints in these globals
import pyarrow.parquet as pq
import pytest
from faultcheck import report  # this directory is on sys.path

import tfspark
from tfspark.errors import OptionError, WriteConflictError

pytestmark = pytest.mark.spark

ROWS = 4_000
SLEEP = 2.0  # seconds each task of a racing write takes at least


def _frame(spark: Any, start: int, rows: int = ROWS, sleep: float = 0.0) -> Any:
    """id, v; with `sleep`, each task sleeps that long, so that two writes started together
    are both planned before either commits."""
    from pyspark.sql import functions as F

    df = spark.range(start, start + rows, numPartitions=2)
    if sleep:
        @F.pandas_udf("long")
        def slow(v: pd.Series) -> pd.Series:
            time.sleep(sleep)
            return v

        df = df.select(slow("id").alias("id"))
    return df.select("id", (F.col("id") % 7).alias("v"))


def _write(spark: Any, engine: str, df: Any, path: str, mode: str) -> Any:
    if engine == "workflow":
        return tfspark.write_tfrecords(df, path, mode=mode)
    tfspark.register(spark)  # this thread's active session
    writer = df.write.format("tfrecord")
    if mode in ("append", "overwrite"):
        return writer.mode(mode).save(path)
    return writer.mode("append").option("mode", mode).save(path)


def _race(spark: Any, engine: str, path: str, modes: dict[str, str],
          starts: dict[str, int]) -> dict[str, Any]:
    """Run the writes of `modes` ({name: mode}) at once; {name: None | the exception}."""
    gate = threading.Barrier(len(modes))
    out: dict[str, Any] = {}
    times: dict[str, tuple[float, float]] = {}

    def run(name: str) -> None:
        gate.wait()
        began = time.monotonic()
        try:
            _write(spark, engine, _frame(spark, starts[name], sleep=SLEEP), path,
                   modes[name])
            out[name] = None
        except Exception as e:  # noqa: BLE001 - judged by the test
            out[name] = e
        times[name] = (began, time.monotonic())

    threads = [threading.Thread(target=run, args=(n,)) for n in modes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    overlap = min(e for _, e in times.values()) - max(b for b, _ in times.values())
    assert overlap > 0, f"the writes did not overlap: {times}"
    return out


def _ids(path: str) -> list[int]:
    reader = tfspark.read_batches(path, 100_000, shuffle_buffer=0, num_threads=1)
    return sorted(int(i) for features in reader for i in features["id"])


def _backup_ids(path: str) -> list[int]:
    table = pq.read_table(f"{path}/_backup")
    return sorted(table.column("id").to_pylist())


CASES = [  # (name, base rows?, {writer: mode})
    ("errorifexists x2", False, {"A": "errorifexists", "B": "errorifexists"}),
    ("overwrite x2", True, {"A": "overwrite", "B": "overwrite"}),
    ("append x2", True, {"A": "append", "B": "append"}),
    ("append vs overwrite", True, {"A": "append", "B": "overwrite"}),
]


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["workflow", "datasource"])
@pytest.mark.parametrize("case,base,modes", CASES, ids=[c[0] for c in CASES])
def test_two_threads_one_path(spark, tmp_path, engine, case, base, modes):
    path = str(tmp_path / "ds")
    starts = {"A": 100_000, "B": 200_000}
    if base:
        _write(spark, engine, _frame(spark, 0), path, "overwrite")
    out = _race(spark, engine, path, modes, starts)
    winners = [n for n, e in out.items() if e is None]
    losers = {n: e for n, e in out.items() if e is not None}
    assert len(winners) == 1, f"{case}: exactly one write may win, got {out}"
    for name, e in losers.items():  # refused at the start, or at the commit
        refused = "already exists" in str(e) and modes[name] == "errorifexists"
        assert refused or isinstance(e, WriteConflictError) or \
            "WriteConflictError" in str(e), f"{case}: {name} failed with something else: {e!r}"
        assert path in str(e)
    win = winners[0]
    want = list(range(starts[win], starts[win] + ROWS))
    if modes[win] == "append":
        want = list(range(ROWS)) + want
    assert _ids(path) == want, f"{case}: the data set does not hold the winner's rows"
    if engine == "workflow":
        assert _backup_ids(path) == want, f"{case}: the backup disagrees with the TFRecords"
    checked = tfspark.verify(path)
    assert checked.ok, checked.render()
    report({"test": "thread-race", "engine": engine, "mode": "+".join(modes.values()),
            "winners": winners, "loser_errors": {n: str(e).splitlines()[0][:300]
                                                 for n, e in losers.items()},
            "rows": len(want), "backup_rows": len(_backup_ids(path))
            if engine == "workflow" else None})


@pytest.mark.slow
@pytest.mark.slow
def test_two_appends_at_once_on_a_store(spark, s3):
    """The same race on S3 (moto, 10 ms added to each request), by URI: the commit lock there
    is an object per attempt and a listing (store/lock.py), the check inside it the same."""
    bucket = s3.bucket()
    uri = s3.uri(f"{bucket}/ds", delay=0.01)
    starts = {"A": 100_000, "B": 200_000}
    _write(spark, "workflow", _frame(spark, 0), uri, "overwrite")
    out = _race(spark, "workflow", uri, {"A": "append", "B": "append"}, starts)
    winners = [n for n, e in out.items() if e is None]
    assert len(winners) == 1, f"exactly one append may win, got {out}"
    loser = next(e for e in out.values() if e is not None)
    assert isinstance(loser, WriteConflictError), repr(loser)
    want = list(range(ROWS)) + list(range(starts[winners[0]], starts[winners[0]] + ROWS))
    reader = tfspark.read_batches(uri, 100_000, shuffle_buffer=0, num_threads=1)
    assert sorted(int(i) for features in reader for i in features["id"]) == want
    backup = pq.read_table(f"{bucket}/ds/_backup", filesystem=s3.filesystem())
    assert sorted(backup.column("id").to_pylist()) == want
    checked = tfspark.verify(uri)
    assert checked.ok, checked.render()


def test_the_result_is_the_writes_own(spark, tmp_path):
    """write_tfrecords reports its own write's counts and backup even when another write
    committed to the path just before its own commit would have: it fails instead."""
    path = str(tmp_path / "ds")
    first = tfspark.write_tfrecords(_frame(spark, 0, 1000), path)
    assert first.rows == 1000 and first.backup_rows == 1000
    second = tfspark.write_tfrecords(_frame(spark, 5000, 300), path, mode="append")
    assert second.rows == 300 and second.files >= 1
    assert _ids(path) == list(range(1000)) + list(range(5000, 5300))


# ---- defect 3: a data set inside another one


def test_a_write_inside_another_data_set_is_refused(spark, tmp_path):
    ds = tmp_path / "ds"
    tfspark.write_tfrecords(_frame(spark, 0, 200), str(ds), split={"train": 0.5, "test": 0.5},
                            split_key="id", stats=False)
    before = sorted(p.relative_to(ds).as_posix() for p in ds.rglob("*"))
    for target, mode in ((ds / "train", "overwrite"), (ds / "train", "append"),
                         (ds / "train" / "deeper", "errorifexists"),
                         (ds / "other", "errorifexists")):
        with pytest.raises(OptionError, match=f"inside the tfspark data set at '{ds}'"):
            tfspark.write_tfrecords(_frame(spark, 0, 10), str(target), mode=mode)
        with pytest.raises(Exception, match=f"inside the tfspark data set at '{ds}'"):
            _write(spark, "datasource", _frame(spark, 0, 10), str(target), mode)
    # and a data set written around one: overwriting the parent would destroy it
    with pytest.raises(OptionError, match=f"holds the tfspark data set '{ds}'"):
        tfspark.write_tfrecords(_frame(spark, 0, 10), str(tmp_path), mode="overwrite")
    with pytest.raises(Exception, match=f"holds the tfspark data set '{ds}'"):
        _write(spark, "datasource", _frame(spark, 0, 10), str(tmp_path), "overwrite")
    assert sorted(p.relative_to(ds).as_posix() for p in ds.rglob("*")) == before
    checked = tfspark.verify(str(ds))
    assert checked.ok, checked.render()


def test_backup_path_clashing_with_the_output_is_named(spark, tmp_path):
    out = str(tmp_path / "ds")
    with pytest.raises(OptionError, match="backup_path .* is the output path"):
        tfspark.write_tfrecords(_frame(spark, 0, 10), out, backup_path=out)
    with pytest.raises(OptionError, match="backup_path .* holds the output path"):
        tfspark.write_tfrecords(_frame(spark, 0, 10), out, backup_path=str(tmp_path))
    assert not (tmp_path / "ds").exists()
