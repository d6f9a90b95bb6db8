"""Appends: rows added to a committed data set keep every earlier row, in the TFRecords and in
the parquet copy, whichever process, application or store the writes come from."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as pads
import pytest
from faultcheck import messages, spawn  # this directory is on sys.path (conftest.py)

import tfspark

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _ids(path: str, fs) -> list[int]:
    return sorted(int(i) for _, y in tfspark.read_batches(path, 500, filesystem=fs,
                                                          label_cols=["id"])
                  for i in y)


def _backup_ids(path: str, fs) -> list[int]:
    data = pads.dataset(f"{path}/_backup", filesystem=fs, format="parquet",
                        ignore_prefixes=["_", "."])
    return sorted(data.to_table(columns=["id"]).column("id").to_pylist())


def test_overwrite_then_two_appends_from_three_applications_keep_every_row(
        tmp_path: Path, s3, gcs, azurite) -> None:
    """Each write runs in a Spark application of its own (a driver process each): task attempt
    ids start again at 0 in every application, so a name made of them alone would publish
    the second append's parquet files over the first's."""
    s3_path, gcs_path, azure_path = (f"{s.bucket()}/ds" for s in (s3, gcs, azurite))
    targets = [
        {"store": "local", "path": str(tmp_path / "local" / "ds")},
        {"store": "s3", "path": s3.uri(s3_path)},  # a URI with pyarrow's options
        {"store": "gcs", "path": gcs_path, "fs": gcs.store_options()},
        {"store": "azurite", "path": azure_path,
         "fs": {"account_name": "devstoreaccount1", **azurite.store_options()}},
    ]
    readers = {"local": (None, targets[0]["path"]), "s3": (s3.filesystem(), s3_path),
               "gcs": (gcs.filesystem(), gcs_path), "azurite": (azurite.filesystem(), azure_path)}
    writes = [("overwrite", 0, 1000), ("append", 1000, 2000), ("append", 2000, 3000)]
    for k, (mode, lo, hi) in enumerate(writes):
        plan = tmp_path / f"plan-{k}.json"
        plan.write_text(json.dumps({"mode": mode, "rows": [lo, hi], "targets": targets}))
        with spawn(["writes", "--plan", str(plan)], tmp_path / f"driver-{k}") as proc:
            said = messages(proc.stdout)
        assert [m["path"] for m in said if m["kind"] == "WROTE"] == \
            [t["path"] for t in targets], said
        assert all(m["rows"] == m["backup_rows"] == hi - lo for m in said), said
        for t in targets:
            fs, path = readers[t["store"]]
            assert _ids(path, fs) == list(range(hi)), (t["store"], mode)
            assert _backup_ids(path, fs) == list(range(hi)), (t["store"], mode)
            report = tfspark.verify(path, filesystem=fs)
            assert report.ok, (t["store"], report.render())
