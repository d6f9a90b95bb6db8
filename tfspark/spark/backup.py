"""write_tfrecords' parquet backup, and putting things back when a write fails.

The backup is written first and the TFRecords from its files, so both copies hold the same rows.
A failed write_tfrecords leaves nothing half-written: `undo_on_failure` puts the output path and
a backup_path back as they were and drops a backup table it created; a tfspark error raised in a
Spark task comes back as its own class (`unwrapped`).
"""

from __future__ import annotations

import functools
import logging
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow.fs as pafs
from pyspark.sql import DataFrame

from tfspark import errors
from tfspark import manifest as mf
from tfspark.errors import OptionError, TfsparkError
from tfspark.fs import locate
from tfspark.options import WriteOptions

log = logging.getLogger("tfspark")
R = TypeVar("R")

# A tfspark error raised in a Spark task or in the data source on the driver reaches the caller
# inside a Spark exception, as the line "tfspark.<module>.<Class>: <message>" of its text.
_WRAPPED_ERROR = re.compile(r"^tfspark\.[\w.]*?(\w+Error): (.+)$", re.MULTILINE)


def unwrapped(e: BaseException) -> BaseException:
    """The tfspark error inside a Spark exception, as its own class; else `e` itself."""
    if isinstance(e, TfsparkError):
        return e
    found = _WRAPPED_ERROR.findall(str(e))
    classes = {name: getattr(errors, name) for name in errors.__all__}
    if not found or found[-1][0] not in classes:
        return e
    name, message = found[-1]
    if name == "MissingExtraError":
        return e
    return classes[name](message.strip())


@dataclass
class _Before:
    """A path as it was before write_tfrecords: its files and directories, and its manifest."""

    path: str
    existed: bool
    entries: set[str]
    manifest: bytes | None

    @classmethod
    def take(cls, path: Any, mode: str) -> _Before | None:
        """None when a failure must leave the path alone (overwrite of data) or it is unusable."""
        try:
            loc = locate(path)
            if not loc.exists():
                return cls(path, False, set(), None)
            if mode == "overwrite" and not loc.is_empty():
                return None
            infos = loc.fs.get_file_info(pafs.FileSelector(loc.base, recursive=True))
            manifest = loc.read_bytes(mf.NAME) if loc.exists(mf.NAME) else None
            return cls(path, True, {posixpath.relpath(i.path, loc.base) for i in infos},
                       manifest)
        except (OSError, ValueError):  # a file, a bad URI: the write itself will say so
            return None

    def put_back(self) -> None:
        """Remove what the failed write added (not after it committed a manifest to old data)."""
        loc = locate(self.path)
        if not self.existed:
            loc.delete_all()
            return
        if (loc.read_bytes(mf.NAME) if loc.exists(mf.NAME) else None) != self.manifest:
            return
        infos = loc.fs.get_file_info(pafs.FileSelector(loc.base, recursive=True))
        new = [i for i in infos if posixpath.relpath(i.path, loc.base) not in self.entries]
        for i in sorted(new, key=lambda i: i.path.count("/"), reverse=True):
            if i.type == pafs.FileType.File:
                loc.fs.delete_file(i.path)
            elif not loc.fs.get_file_info(pafs.FileSelector(i.path)):
                loc.fs.delete_dir(i.path)


def undo_on_failure(fn: Callable[..., R]) -> Callable[..., R]:
    """A failed write_tfrecords leaves nothing half-written: the output path and a backup_path
    are put back as they were (new ones removed, files added to old ones removed; an overwrite
    of existing data is left as the failure left it), a new backup_table is dropped. A tfspark
    error raised in a Spark task is raised again as its own class."""

    @functools.wraps(fn)
    def write(df: DataFrame, opts: WriteOptions) -> R:
        mode = str(opts.mode)
        befores = [_Before.take(p, mode) for p in (opts.path, opts.backup_path) if p]
        table = opts.backup_table
        spark = df.sparkSession
        new_table = table is not None and not spark.catalog.tableExists(table)
        try:
            return fn(df, opts)
        except BaseException as e:
            try:
                for b in befores:
                    if b is not None:
                        b.put_back()
                if new_table and table and spark.catalog.tableExists(table):
                    spark.sql(f"DROP TABLE IF EXISTS {table}")
            except Exception as cleanup:  # noqa: BLE001 - report the write's own error
                log.warning("tfspark: could not remove what the failed write left at %s: %s",
                            opts.path, cleanup)
            err = unwrapped(e)
            if err is e:
                raise
            raise err from e

    return write


def write_backup(spark: Any, df: DataFrame, table: str | None, target: str,
                 mode: str) -> list[str]:
    """Write the backup; return the files this write added (the rows to export)."""
    # "error", not "errorifexists": Spark Connect's writer knows only the short name.
    bmode = {"ignore": "error", "errorifexists": "error"}.get(mode, mode)
    before = set(_input_files(spark, table, target))
    writer = df.write.mode(bmode).format("parquet")
    if table:
        writer.saveAsTable(table)
    else:
        writer.save(target)
    after = _input_files(spark, table, target)
    return [f for f in after if f not in before] if mode == "append" else after


def _input_files(spark: Any, table: str | None, target: str) -> list[str]:
    try:
        if table:
            if not spark.catalog.tableExists(table):
                return []
            spark.catalog.refreshTable(table)
            return list(spark.table(table).inputFiles())
        if not [r for r in locate(target).list_files()
                if not any(p.startswith(("_", ".")) for p in r.split("/"))]:
            return []  # empty, or only what a write that never committed left (_temporary/)
        return list(spark.read.parquet(target).inputFiles())
    except TfsparkError:
        raise
    except Exception as e:  # an unreadable existing backup: say which
        raise OptionError(f"cannot read the existing backup {table or target!r}: "
                          f"{str(e).splitlines()[0]}") from None


def read_back(spark: Any, schema: Any, files: list[str]) -> DataFrame:
    """The rows of these backup files, with the source's schema (empty when there are none)."""
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*files)


