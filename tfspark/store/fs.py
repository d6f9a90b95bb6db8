"""Where files live: local paths (Databricks /Volumes and /dbfs mounts too) and object stores
(s3://, gs://, abfs://, hdfs://) through pyarrow's filesystems; the one way tfspark touches
files.

A `Location` pairs a filesystem with a path inside it: a child of a location is on the same
filesystem, so options given once (a URI's query options such as `?endpoint_override=...`, or a
`filesystem=` object: pyarrow's, or fsspec's through pyarrow's PyFileSystem) hold for every
file below it, on the driver and, pickled, on Spark's executors. Its `uri` is for people: the
scheme and path, never the query (which may hold credentials).

A token sign-in guarded: pyarrow's Azure client, when it signs in with a token (Azure's default
credential chain, a service principal, a managed identity) and gets none, ends the whole process
as it opens a file: the Azure SDK's AuthenticationException escapes pyarrow there ("terminate
called after throwing an instance of 'Azure::Core::Credentials::AuthenticationException'",
pyarrow 26), where asking about a file raises it (a plain ArrowException, "Unknown error"). So
the first file a process opens through such a filesystem is asked about first (once per sign-in:
one request per process), and what is asked raises an OSError, as any failed request does:
missing credentials are then an error that says what to set (errors.store_hint), not a crash.

A filesystem from plain options (the `[store]` table of a CLI config file): what a
URI cannot say (GCS anonymous access, an S3-compatible endpoint with its keys, an Azure
account) given once for every path of a command.

The options are the keyword arguments of pyarrow's filesystem for the path's scheme
(S3FileSystem, GcsFileSystem, AzureFileSystem, HadoopFileSystem), so their names and meanings
are pyarrow's documented ones. Errors name the key and the file, never a value (values may be
keys and tokens).
"""

from __future__ import annotations

import datetime
import hashlib
import os
import posixpath
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs

from tfspark import paths
from tfspark.errors import OptionError
from tfspark.store.uris import (
    GCS_RETRY,
    azure_path,
    bucket_path,
    escaped,
    failed_request,
    redact,
    redact_text,
    store_defaults,
)

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

    def open_output(self, rel: str, bulk: bool = False) -> Any:
        """base/rel for writing (its directory made first), written as is. bulk: a large file
        not read back soon, written past the page cache where it is a local file (see
        tfspark.store.direct)."""
        target = self.join(rel)
        if bulk and self.is_local:
            from tfspark.store.direct import open_direct

            direct = self._in_dir(target, lambda: open_direct(target))
            if direct is not None:
                return direct
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


_SIGNED_IN: set[tuple[str, ...]] = set()  # the token sign-ins that got a token
_LOCK = threading.Lock()


def signed_in(fs: Any, path: str) -> None:
    """Raise the store's error as an OSError when fs, an AzureFileSystem signing in with a
    token, gets no token; ask about `path` to find out, once per sign-in."""
    if fs.type_name != "abfs":
        return
    try:
        args = fs.__reduce__()[1][0]
    except Exception:  # noqa: BLE001 - not pyarrow's own: nothing known to guard
        return
    if args.get("account_key") or args.get("sas_token"):  # signs requests: no token to get
        return
    key = tuple(str(args.get(k, "")) for k in (
        "account_name", "blob_storage_authority", "client_id", "tenant_id")) + (
        hashlib.sha256(str(args.get("client_secret", "")).encode()).hexdigest(),)
    with _LOCK:
        if key in _SIGNED_IN:
            return
    file_info(fs, path)  # raises where opening it would abort
    with _LOCK:
        _SIGNED_IN.add(key)


def file_info(fs: Any, what: Any) -> Any:
    """fs.get_file_info(what), a store's plain ArrowException (Azure's "Unknown error" for a
    token it could not get) raised as the OSError of a failed request, as the others are:
    what catches those then names the file and what to check."""
    try:
        return fs.get_file_info(what)
    except pa.ArrowException as e:
        if isinstance(e, (OSError, ValueError)):
            raise
        raise OSError(str(e)) from None


def check_store_table(value: Any, where: str) -> dict[str, Any]:
    """The [store] table of a config file: {option: str | int | float | bool}."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise OptionError(f"'store' in {where} must be a table ([store] with key = value "
                          f"lines: the options of pyarrow's filesystem for the path's scheme)")
    for key, v in value.items():
        if not isinstance(v, (str, int, float, bool)):
            raise OptionError(f"[store] key {key!r} in {where} must be a string, number or "
                              f"true/false, got a {type(v).__name__}")
    return dict(value)


def sas_query(token: str) -> str:
    """A SAS token as pyarrow's AzureFileSystem takes it: put right after the account's URL, so
    with its "?" (without one the token becomes a path segment and every request fails)."""
    return "?" + token.lstrip("?")


def store_filesystem(path: str, options: Mapping[str, Any] | None,
                     where: str) -> pafs.FileSystem | None:
    """pyarrow's filesystem for path's scheme made with `options`; None when there are none
    (the path then opens as it is: local, or a URI with the usual credential chain).

    Raises OptionError naming `where` for a path that is not on a store, or an option that
    pyarrow's class does not take.
    """
    if not options:
        return None
    scheme = paths.scheme(path)
    if scheme not in STORE_SCHEMES:
        raise OptionError(f"[store] in {where} is for paths on an object store (s3://, gs://, "
                          f"abfs://, hdfs://), and {redact(path)!r} is not one: remove the "
                          f"[store] table or give the path as a URI")
    name = STORE_SCHEMES[scheme][0]
    kwargs = dict(options)
    host = paths.without_query(path).split("://", 1)[1].split("/", 1)[0].rpartition("@")[2]
    if name == "AzureFileSystem" and "account_name" not in kwargs and host:
        kwargs["account_name"] = host.split(".", 1)[0]  # container@ACCOUNT.dfs.core...
    if name == "AzureFileSystem" and isinstance(kwargs.get("sas_token"), str) and \
            kwargs["sas_token"]:
        kwargs["sas_token"] = sas_query(kwargs["sas_token"])
    if name == "S3FileSystem":  # a small file in one request, not three (store.uris)
        kwargs.setdefault("allow_delayed_open", True)
    if name == "GcsFileSystem":  # seconds (TOML has no durations); not 15 minutes (store.uris)
        limit = kwargs.setdefault("retry_time_limit", GCS_RETRY)
        if isinstance(limit, (int, float)) and not isinstance(limit, bool) and limit > 0:
            kwargs["retry_time_limit"] = datetime.timedelta(seconds=limit)
    if name == "HadoopFileSystem" and "host" not in kwargs:
        kwargs["host"], _, port = host.partition(":")
        kwargs.setdefault("port", int(port) if port.isdigit() else 8020)
    try:
        return getattr(pafs, name)(**kwargs)
    except TypeError as e:  # an unknown key, or a value of the wrong type (named, not shown)
        raise OptionError(f"[store] in {where}: pyarrow.fs.{name} refused its options "
                          f"({e}); the keys are that class's arguments, see its "
                          f"documentation") from None
    except Exception as e:  # noqa: BLE001 - pyarrow's own errors: shown without values
        raise OptionError(f"[store] in {where}: pyarrow.fs.{name} could not be made: "
                          f"{type(e).__name__}; check the table's keys and values") from None
