"""Where files live: local paths (Databricks /Volumes and /dbfs mounts too) and object stores
(s3://, gs://, abfs://, hdfs://) through pyarrow's filesystems; the one way tfspark touches files.

A `Location` pairs a filesystem with a path inside it: a child of a location is on the same
filesystem, so options given once (a URI's query options such as `?endpoint_override=...`, or a
`filesystem=` object: pyarrow's, or fsspec's through pyarrow's PyFileSystem) hold for every
file below it, on the driver and, pickled, on Spark's executors. Its `uri` is for people: the
scheme and path, never the query (which may hold credentials).
"""

from __future__ import annotations

import os
import posixpath
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow.fs as pafs

from tfspark import paths
from tfspark.errors import OptionError
from tfspark.store.azure_tokens import file_info, signed_in
from tfspark.store.redaction import failed_request, redact, redact_text
from tfspark.store.uris import azure_path, bucket_path, escaped, store_defaults

T = TypeVar("T")
R = TypeVar("R")
REQUESTS_AT_ONCE = 16  # a write's deletes and moves at once on a store (as fetch.IO_THREADS)
_DIR_TRIES = 10  # tries at making a directory another write's clean-up may remove meanwhile
_OBJECT_STORES = ("s3", "gcs", "abfs")  # type_name of pyarrow's object-store filesystems
_PREFIX_STORES = ("s3", "gcs")  # of those, where a directory is only a prefix of keys
# pyarrow's GCS filesystem lists objects only, never a prefix as a directory (S3's and Azure's
# do): there the directories below a path are known only from its files' paths.
_LISTS_NO_DIRECTORIES = ("gcs",)


@dataclass(frozen=True)
class Location:
    """A directory or file: a pyarrow filesystem, the path inside it, and the URI as given.

    Relative paths `rel` of the methods are relative to `base`.
    """

    fs: pafs.FileSystem
    base: str  # path inside fs, no trailing slash
    uri: str  # for people: as the user gave it, without a URI's query

    @property
    def is_local(self) -> bool:
        """Whether this is the local filesystem (so renames are atomic)."""
        return isinstance(self.fs, pafs.LocalFileSystem)

    def parent(self) -> Location | None:
        """The directory holding base (a bucket is the top of an object store); None at the
        top."""
        up = posixpath.dirname(self.base)
        if not up or up == self.base:
            return None
        return Location(self.fs, up, self.uri_of(up))

    def child(self, rel: str) -> Location:
        """The Location of base/rel."""
        return Location(self.fs, self.join(rel), self.child_uri(rel))

    def child_uri(self, rel: str) -> str:
        """base/rel in the caller's form (uri_of)."""
        return self.uri_of(self.join(rel))

    def uri_of(self, path: str) -> str:
        """A path inside fs in the caller's form: a local path, or a URI of uri's scheme."""
        if self.is_local:
            return path
        if "://" not in self.uri:  # a filesystem= given with a bare path
            return path
        scheme, rest = self.uri.split("://", 1)
        if self.fs.type_name != "abfs":
            return f"{scheme}://{path}"  # the bucket is the host
        # Azure's URIs name the container as the user (c@account.dfs...), as the host
        # (account@c), or in the path (account.blob... or host:port, then /c/...)
        authority = rest.split("/", 1)[0]
        user, _, host = authority.rpartition("@")
        container, slash, tail = path.lstrip("/").partition("/")
        if container in (user.split(":")[0], host):
            return f"{scheme}://{authority}{slash}{tail}"
        return f"{scheme}://{authority}/{path.lstrip('/')}"

    def resolve(self, uri: str) -> Location:
        """The Location of a path or URI another write recorded (a backup's): on this
        location's filesystem when it names a place there, else opened on its own."""
        if self.is_local and not paths.scheme(uri):
            return locate(uri)
        scheme = paths.scheme(uri)
        same = STORE_SCHEMES.get(scheme, ("", ""))[1] == self.fs.type_name
        if same and not self.is_local:
            return locate(uri, self.fs)  # the same store: its options hold there too
        if not paths.scheme(uri) and not self.is_local:
            return Location(self.fs, uri.rstrip("/"), uri)
        return locate(uri)

    def join(self, *parts: str) -> str:
        """The filesystem path of `parts` under base."""
        return posixpath.join(self.base, *parts)

    def kind(self, rel: str = "") -> str | None:
        """"file", "dir" (a bucket or prefix holding objects on a store) or None (nothing)."""
        t = file_info(self.fs, self.join(rel) if rel else self.base).type
        return {pafs.FileType.File: "file", pafs.FileType.Directory: "dir"}.get(t)

    def exists(self, rel: str = "") -> bool:
        """Whether base (or base/rel) exists, as a file or a directory."""
        return self.kind(rel) is not None

    def present(self, rel: str) -> bool:
        """Whether base/rel is there, as exists() says, but on a store in one request: there
        only a file counts (asking what a missing key is also looks for a directory of that
        name, a second request). Elsewhere a directory counts too, so that what reads it next
        says what is wrong with it."""
        if self.fs.type_name not in _OBJECT_STORES:
            return self.exists(rel)
        try:
            self.open_input(rel).close()  # (its size asked; nothing read)
        except FileNotFoundError:
            return False
        return True

    def is_dir(self) -> bool:
        """Whether base is a directory."""
        return self.kind() == "dir"

    def size(self, rel: str = "") -> int:
        """The size in bytes of the file base (or base/rel)."""
        return int(file_info(self.fs, self.join(rel) if rel else self.base).size)

    def open_input(self, rel: str = "") -> Any:
        """base (or base/rel) for random access (a pyarrow NativeFile, read as is)."""
        signed_in(self.fs, path := self.join(rel) if rel else self.base)
        return self.fs.open_input_file(path)

    def open_stream(self, rel: str = "") -> Any:
        """base (or base/rel) as a sequential stream, read as is (no decompression)."""
        signed_in(self.fs, path := self.join(rel) if rel else self.base)
        return self.fs.open_input_stream(path, compression=None)

    def open_output(self, rel: str) -> Any:
        """base/rel for writing (its directory made first), written as is."""
        target = self.join(rel)
        return self._in_dir(target, lambda: self.fs.open_output_stream(target,
                                                                       compression=None))

    def make_dir(self, rel: str = "") -> None:
        """Create base (or base/rel) and its parents."""
        self._make_dirs(self.join(rel) if rel else self.base)

    def _make_dirs(self, path: str) -> None:
        """create_dir(path, recursive), again when it failed because another write's clean-up
        removed a directory it had found existing ("non-directory entry exists")."""
        for attempt in range(_DIR_TRIES):
            try:
                return self.fs.create_dir(path, recursive=True)
            except FileExistsError:
                if (attempt == _DIR_TRIES - 1
                        or file_info(self.fs, path).type == pafs.FileType.File):
                    raise

    def entries(self, recursive: bool = False) -> list[tuple[str, bool]]:
        """(relative path, is a directory) of what is under base (nothing if it is absent)."""
        infos = file_info(self.fs, pafs.FileSelector(self.base, recursive=recursive,
                                                     allow_not_found=True))
        return sorted((posixpath.relpath(i.path, self.base), i.type == pafs.FileType.Directory)
                      for i in infos)

    def move(self, rel: str, to: Location, to_rel: str) -> None:
        """Move base/rel to to/to_rel (the same store), making its directory."""
        target = to.join(to_rel)
        # On GCS pyarrow's move is a copy and a delete too, after asking what both paths are
        # (0.41 s against 0.26 s at 50 ms a request); Azure blob storage without hierarchical
        # namespace has no move.
        if self.fs.type_name != "gcs":
            try:
                return to._in_dir(target, lambda: self.fs.move(self.join(rel), target))
            except NotImplementedError:
                pass
        self.fs.copy_file(self.join(rel), target)
        self.fs.delete_file(self.join(rel))

    def _in_dir(self, target: str, make: Callable[[], T]) -> T:
        """make() once target's directory is made; again if a failed write's clean-up removed it."""
        if self.fs.type_name in _PREFIX_STORES:  # making a directory there writes a marker
            return make()  # object: a request more for every file
        for attempt in range(_DIR_TRIES):
            self._make_dirs(posixpath.dirname(target))
            try:
                return make()
            except FileNotFoundError:
                if attempt == _DIR_TRIES - 1:
                    raise
                time.sleep(0.001 * attempt)  # out of step with a clean-up pass after pass
        raise AssertionError("unreachable")

    def delete_dir(self, rel: str = "") -> None:
        """Delete the directory base (or base/rel) and everything under it; one already gone
        is fine (two writes starting at once both sweep a dead write's staging)."""
        try:
            self.fs.delete_dir(self.join(rel) if rel else self.base)
        except FileNotFoundError:
            pass

    def is_empty(self) -> bool:
        """True when base does not exist or is an empty directory (a file is not empty)."""
        info = file_info(self.fs, self.base)
        if info.type == pafs.FileType.NotFound:
            return True
        if info.type == pafs.FileType.File:
            return False
        if file_info(self.fs, pafs.FileSelector(self.base, recursive=False)):
            return False
        return self.fs.type_name not in _LISTS_NO_DIRECTORIES or not self.list_files()

    def subdirectories(self) -> list[str]:
        """The names of the directories directly under base (where the filesystem lists none,
        the first parts of the paths of every file below: a page of 1,000 names a request)."""
        if self.fs.type_name in _LISTS_NO_DIRECTORIES:
            return sorted({rel.split("/")[0] for rel in self.list_files() if "/" in rel})
        return [rel for rel, is_dir in self.entries() if is_dir]

    def list_files(self, recursive: bool = True) -> list[str]:
        """Relative paths of all files under base."""
        return [rel for rel, is_dir in self.entries(recursive) if not is_dir]

    def file_sizes(self) -> dict[str, int]:
        """{relative path: bytes} of every file under base, from one listing."""
        infos = file_info(self.fs, pafs.FileSelector(self.base, recursive=True,
                                                     allow_not_found=True))
        return {posixpath.relpath(i.path, self.base): int(i.size) for i in infos
                if i.type == pafs.FileType.File}

    def read_bytes(self, rel: str) -> bytes:
        """The whole content of base/rel, read as is (no decompression)."""
        with self.open_stream(rel) as f:
            return f.read()

    def write_bytes_atomic(self, rel: str, data: bytes) -> None:
        """Readers see the old or the new content, never a part: temp file + rename locally;
        object stores publish a whole object on close."""
        target = self.join(rel)
        if not self.is_local:
            with self._in_dir(target, lambda: self.fs.open_output_stream(
                    target, compression=None)) as f:
                f.write(data)
            return
        tmp = f"{target}.tmp-{uuid.uuid4().hex}"
        with self._in_dir(tmp, lambda: self.fs.open_output_stream(tmp, compression=None)) as f:
            f.write(data)
        self.fs.move(tmp, target)

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        """Create base/rel holding `data` only if no such file exists; True if this call did.
        Local filesystems only: O_CREAT | O_EXCL, atomic (two processes, or two hosts on one
        POSIX mount, never both win). pyarrow has no conditional put on a store: the commit
        lock there is store.lock's."""
        if not self.is_local:
            raise NotImplementedError(f"no exclusive create on {self.fs.type_name}")
        target = self.join(rel)
        try:
            fd = self._in_dir(target, lambda: os.open(
                target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return True

    def check_writable(self) -> None:
        """Create the directory and a probe file now, so a bad path fails before any work."""
        probe = f"_tfspark_probe-{uuid.uuid4().hex}"
        try:
            with self.open_output(probe) as f:
                f.write(b"")
            self.delete(probe)
        except (OSError, ValueError) as e:
            if self._no_bucket():  # (GCS's client says "missing project id" then)
                raise OptionError(f"cannot write to {self.uri!r}: its bucket "
                                  f"{self.base.split('/')[0]!r} does not exist, or these "
                                  f"credentials cannot see it: create it first, or check the "
                                  f"path") from None
            what = failed_request(e, "check the path, its permissions and the credentials")
            raise OptionError(f"cannot write to {self.uri!r}: {what}") from None

    def _no_bucket(self) -> bool:
        """True when this is a path on an object store whose bucket is not there."""
        if self.fs.type_name not in _OBJECT_STORES:
            return False
        try:
            return file_info(self.fs, self.base.split("/")[0]).type == pafs.FileType.NotFound
        except (OSError, ValueError):
            return False

    def delete(self, rel: str) -> None:
        """Delete the file base/rel; a file that is already gone is fine."""
        try:
            self.fs.delete_file(self.join(rel))
        except FileNotFoundError:
            pass

    def at_once(self, do: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """[do(item) for item in items], up to REQUESTS_AT_ONCE at a time when this location
        is on an object store (each request a few round trips: an overwrite's sweep of 1,000
        files at 50 ms a request took minutes one after another); in this thread on local
        disk. Every item is tried; then the first error, if any, is raised."""
        items = list(items)
        if self.is_local or len(items) < 2:
            results, first = [], None
            for item in items:
                try:
                    results.append(do(item))
                except Exception as e:  # noqa: BLE001 - raised once the others are tried
                    first = first or e
            if first is not None:
                raise first
            return results
        with ThreadPoolExecutor(min(REQUESTS_AT_ONCE, len(items)),
                                thread_name_prefix="tfspark-store") as pool:
            done = [pool.submit(do, item) for item in items]
        return [future.result() for future in done]  # (all ended: the pool's exit waited)

    def delete_files(self, rels: Iterable[str]) -> None:
        """Delete the files base/rel (at once on a store; those already gone are fine)."""
        self.at_once(self.delete, rels)

    def delete_all(self) -> None:
        """Delete base and everything under it, if it exists (another process may remove it
        at the same moment: a write's publish and a failed write's clean-up both do)."""
        if self.exists():
            self.delete_dir()

    def remove_if_empty(self) -> None:
        """Remove the directory base if it is empty, and never anything in it: another write
        may be putting a file there at this moment. Local disk only (rmdir checks and removes
        at once); on an object store a directory is a marker, and deleting it deletes every
        key under it, so it stays (an empty directory there is harmless)."""
        if not self.is_local:
            return
        try:
            os.rmdir(self.base)
        except OSError:  # not empty, gone, or not a directory
            pass


def as_filesystem(filesystem: Any) -> pafs.FileSystem:
    """A pyarrow FileSystem from what `filesystem=` accepts: a pyarrow FileSystem, or an fsspec
    filesystem (wrapped in pyarrow's PyFileSystem(FSSpecHandler(...)))."""
    if isinstance(filesystem, pafs.FileSystem):
        return filesystem
    if hasattr(filesystem, "protocol") and hasattr(filesystem, "open"):  # fsspec's interface
        return pafs.PyFileSystem(pafs.FSSpecHandler(filesystem))
    raise OptionError(f"filesystem= must be a pyarrow.fs.FileSystem (S3FileSystem, "
                      f"GcsFileSystem, AzureFileSystem, ...) or an fsspec filesystem, got "
                      f"{type(filesystem).__name__}")


# The schemes of stores: pyarrow's filesystem class for each, and its type_name.
STORE_SCHEMES = {
    "s3": ("S3FileSystem", "s3"), "gs": ("GcsFileSystem", "gcs"),
    "gcs": ("GcsFileSystem", "gcs"), "abfs": ("AzureFileSystem", "abfs"),
    "abfss": ("AzureFileSystem", "abfs"), "az": ("AzureFileSystem", "abfs"),
    "hdfs": ("HadoopFileSystem", "hdfs"), "viewfs": ("HadoopFileSystem", "hdfs")}
# Hadoop's schemes for a store, and pyarrow's for the same store.
_HADOOP_SCHEMES = {"s3a": "s3", "s3n": "s3", "wasb": "abfs", "wasbs": "abfs"}


def locate(path: str | os.PathLike | Location, filesystem: Any = None) -> Location:
    """The Location of a local path, a file:// URI or an object-store URI (s3://, gs://,
    abfs://, ... with pyarrow's query options), or of a path inside `filesystem` (a scheme
    before it is dropped: "s3://bucket/key" and "bucket/key" are the same object there).

    Raises OptionError for an empty path, a filesystem= tfspark cannot use, or a URI pyarrow
    cannot open (unknown scheme, missing credentials); messages never show a URI's query.
    """
    if isinstance(path, Location):
        return path
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path.strip():
        raise OptionError(f"a path must be a non-empty string (a directory, a file or a URI), "
                          f"got {path!r}")
    if filesystem is not None:
        fs = as_filesystem(filesystem)
        scheme = paths.scheme(path)
        inner = path.split("://", 1)[1] if scheme else path
        shown = f"{scheme}://{inner}" if scheme else inner
        if fs.type_name == "abfs" and scheme:  # the container: where pyarrow finds it
            inner = azure_path(path, inner)
        elif fs.type_name in _PREFIX_STORES and scheme:  # the URI's object, as without fs
            inner = bucket_path(path)
        elif paths.is_store_uri(path):  # its query: options that filesystem= replaces
            inner = paths.without_query(inner)
        if isinstance(fs, pafs.LocalFileSystem):
            inner = posixpath.abspath(inner)
        elif inner.startswith("/") and not isinstance(fs, pafs.PyFileSystem):
            raise OptionError(f"path {redact(path)!r} starts with '/' but filesystem= is a "
                              f"{type(fs).__name__}, where paths are bucket/key: give the "
                              f"path in that store (the same filesystem= holds for every path "
                              f"argument)")
        return Location(fs, inner.rstrip("/") or "/", redact(paths.without_query(shown)))
    scheme = paths.scheme(path)
    if scheme in _HADOOP_SCHEMES:
        raise OptionError(f"{redact(path)!r}: {scheme}:// is a Hadoop connector's scheme, and "
                          f"tfspark reads and writes through pyarrow in Python: use "
                          f"{_HADOOP_SCHEMES[scheme]}:// (credentials from the usual chain or "
                          f"the URI's options; Spark's Hadoop settings are not seen here, as "
                          f"they are by write_tfrecords, make_converter and tfspark export "
                          f"for s3a://) or filesystem=; with Unity Catalog credentials use a "
                          f"/Volumes path")
    try:
        if paths.is_store_uri(path):
            fs, base = pafs.FileSystem.from_uri(store_defaults(escaped(path)))
        else:
            local = path.split("://", 1)[1] if scheme == "file" else path
            fs, base = pafs.LocalFileSystem(), posixpath.abspath(local)
    except Exception as e:  # pyarrow raises ArrowInvalid/OSError for unknown schemes
        why = redact_text(str(e)).split("?", 1)[0]  # (it may repeat the URI, escaped)
        raise OptionError(f"cannot open path {redact(path)!r}: {why}. Use a local path, or an "
                          f"s3://, gs://, abfs:// or hdfs:// URI with credentials configured, "
                          f"or pass filesystem=") from None
    return Location(fs, base.rstrip("/") or "/", redact(paths.without_query(path)))

