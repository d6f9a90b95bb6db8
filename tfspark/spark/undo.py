"""What a failed write_tfrecords leaves: nothing half-written.

`undo_on_failure` puts the output path back as it was (a new one removed, files added to an old
one removed), has the staged backup discarded (backup.py), and raises a tfspark error that came
back from a Spark task as its own class again (`unwrapped`).
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
from tfspark.errors import TfsparkError
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
    """A failed write_tfrecords leaves nothing half-written: the output path is put back as it
    was (a new one removed, files added to an old one removed; an overwrite of existing data
    leaves it to the data source's abort). The backup is staged, so the write discards it
    itself. A tfspark error raised in a Spark task is raised again as its own class."""

    @functools.wraps(fn)
    def write(df: DataFrame, opts: WriteOptions) -> R:
        before = _Before.take(opts.path, str(opts.mode))
        try:
            return fn(df, opts)
        except BaseException as e:
            try:
                if before is not None:
                    before.put_back()
            except Exception as cleanup:  # noqa: BLE001 - report the write's own error
                log.warning("tfspark: could not remove what the failed write left at %s: %s",
                            opts.path, cleanup)
            err = unwrapped(e)
            if err is e:
                raise
            raise err from e

    return write
