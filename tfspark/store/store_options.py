"""A store's filesystem from plain options (the `[store]` table of a CLI config file): what a
URI cannot say (GCS anonymous access, an S3-compatible endpoint with its keys, an Azure
account) given once for every path of a command.

The options are the keyword arguments of pyarrow's filesystem for the path's scheme
(S3FileSystem, GcsFileSystem, AzureFileSystem, HadoopFileSystem), so their names and meanings
are pyarrow's documented ones. Errors name the key and the file, never a value (values may be
keys and tokens).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

import pyarrow.fs as pafs

from tfspark import paths
from tfspark.errors import OptionError
from tfspark.store.fs import STORE_SCHEMES
from tfspark.store.redaction import redact
from tfspark.store.uris import GCS_RETRY


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
