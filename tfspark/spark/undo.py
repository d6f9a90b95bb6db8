"""What a failed write_tfrecords leaves: nothing of its own, and everything of others.

`undo_on_failure` removes what the failed write added to the output path (its files, named by
its write id, and the directories it made, once empty); the staged backup is discarded by the
write itself (backup.py). Files of other writes to the same path, running or committed, are
never touched, and a write whose manifest committed is left as committed. A tfspark error that
came back from a Spark task is raised as its own class again (`unwrapped`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tfspark import errors
from tfspark.errors import TfsparkError
from tfspark.store import manifest as mf
from tfspark.store import many
from tfspark.store.fs import Location, locate
from tfspark.store.redaction import said

log = logging.getLogger("tfspark")

def unwrapped(e: BaseException) -> BaseException:
    """The tfspark error inside a Spark exception, as its own class; else `e` itself."""
    if isinstance(e, TfsparkError):
        return e
    found = errors.wrapped(str(e))
    if found is None or found[0] == "MissingExtraError":
        return e
    name, message = found
    return getattr(errors, name)(message)


@dataclass
class Before:
    """A path as it was before write_tfrecords: whether it existed, and its entries (every
    file below it; directories too, where the filesystem lists them)."""

    path: Location
    existed: bool
    entries: set[str]

    @classmethod
    def take(cls, path: str | Location) -> Before | None:
        """None when the path is unusable, or a file (the write itself will say so)."""
        try:
            loc = locate(path)
            if not loc.exists():
                return cls(loc, False, set())
            return cls(loc, True, {rel for rel, _ in loc.entries(recursive=True)})
        except (OSError, ValueError):
            return None

    def put_back(self, write_id: str) -> None:
        """Remove what write `write_id` added, unless its manifest committed."""
        loc = self.path
        if not loc.exists() or _committed(loc, write_id):
            return
        new = [(rel, is_dir) for rel, is_dir in loc.entries(recursive=True)
                 if rel not in self.entries]
        # this write's files carry its id (part files, markers, staging)
        many.delete_files(loc, [rel for rel, is_dir in new if not is_dir and write_id in rel])
        dirs = [loc.child(rel) for rel, is_dir in new if is_dir]
        if not self.existed:
            dirs.append(loc)
        # Deepest first; only when empty: another write to the path may be filling them
        for d in sorted(dirs, key=lambda d: d.base.count("/"), reverse=True):
            d.remove_if_empty()


def _committed(loc: Location, write_id: str) -> bool:
    """Whether the manifest at loc names write `write_id` (it committed)."""
    try:
        return any(w.write_id == write_id for w in mf.read_manifest(loc).writes)
    except TfsparkError:  # none, or damaged: no write committed there
        return False


@contextmanager
def undo_on_failure(path: str | Location, write_id: str,
                    before: Before | None = None) -> Iterator[None]:
    """Around write `write_id` to `path`: on failure, remove what it added there (module
    docstring) and raise a tfspark error that came back from a Spark task as its own class.
    before: the path as it is now, if taken already (Before.take)."""
    before = before if before is not None else Before.take(path)
    try:
        yield
    except BaseException as e:
        try:
            if before is not None:
                before.put_back(write_id)
        except Exception as cleanup:  # noqa: BLE001 - report the write's own error
            log.warning("tfspark: could not remove what the failed write left at %s: %s",
                        locate(path).uri, said(cleanup))
        err = unwrapped(e)
        if err is e:
            raise
        raise err from e
